/*
 * URLs as messages, logs, labels and answers may show them: without the userinfo
 * (`user:password@`) of their authority, which a configuration may carry and nothing
 * the collector prints should.
 */
#ifndef FS_UTIL_URL_H
#define FS_UTIL_URL_H

#include <stddef.h>

/** Copies url into out (len bytes, always terminated, cut at len - 1) with the
 *  authority's userinfo (up to its last '@') replaced by "***@". */
void fs_url_redact(const char *url, char *out, size_t len);

#endif
