/*
 * Logging: one logfmt line per event on stderr:
 *   ts=2026-12-02T10:11:20.123Z level=info subsys=snmp msg="target up" target=tor1
 * fs_log() takes the subsystem token and a printf format for the msg text; extra
 * key=value pairs go through fs_logkv(). Third-party libraries' logs are routed here
 * with their own subsystem token (yang, http, snmp, ...). Never pass a secret.
 */
#ifndef FS_LOG_H
#define FS_LOG_H

#include <stdarg.h>

enum fs_log_level { FS_LOG_DEBUG = 0, FS_LOG_INFO, FS_LOG_WARN, FS_LOG_ERROR };

/** Sets the lowest level printed (default info; FS_LOG_LEVEL=debug in the environment). */
void fs_log_set_level(enum fs_log_level lvl);
enum fs_log_level fs_log_get_level(void);

/** Logs msg (printf format). Thread-safe; a line is written with one write(2). */
void fs_log(enum fs_log_level lvl, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/**
 * Logs msg with extra fields: kv is a preformatted `key=value key2="v 2"` string (use
 * fs_log_quote for values). NULL for none.
 */
void fs_logkv(enum fs_log_level lvl, const char *subsys, const char *kv, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

void fs_vlog(enum fs_log_level lvl, const char *subsys, const char *kv, const char *fmt,
             va_list ap);

#endif
