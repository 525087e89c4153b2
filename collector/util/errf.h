/*
 * The one way to fill a caller-supplied error message (house rule: functions return an
 * error code and fill errbuf). Truncates to len; a NULL or empty buffer is left alone.
 */
#ifndef FS_ERRF_H
#define FS_ERRF_H

#include <stddef.h>

void fs_errf(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
