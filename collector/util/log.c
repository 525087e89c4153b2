/* logfmt logging to stderr; see log.h. */
#include "util/log.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static _Atomic int log_level = -1;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

static int
level_from_env(void)
{
    const char *e = getenv("FS_LOG_LEVEL");
    if (e) {
        for (int i = 0; i < 4; i++)
            if (strcasecmp(e, level_names[i]) == 0)
                return i;
    }
    return FS_LOG_INFO;
}

void
fs_log_set_level(enum fs_log_level lvl)
{
    atomic_store(&log_level, (int)lvl);
}

enum fs_log_level
fs_log_get_level(void)
{
    int l = atomic_load(&log_level);
    if (l < 0) {
        l = level_from_env();
        atomic_store(&log_level, l);
    }
    return (enum fs_log_level)l;
}

/* Appends msg as a logfmt quoted value: quotes, backslashes and control bytes escaped,
 * so a hostile string from a device cannot forge log fields or lines. */
static size_t
quote_into(char *out, size_t cap, const char *msg)
{
    size_t o = 0;
    if (cap < 3)
        return 0;
    out[o++] = '"';
    for (const unsigned char *p = (const unsigned char *)msg; *p && o + 6 < cap; p++) {
        if (*p == '"' || *p == '\\') {
            out[o++] = '\\';
            out[o++] = (char)*p;
        } else if (*p < 0x20 || *p == 0x7f) {
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", *p);
        } else {
            out[o++] = (char)*p;
        }
    }
    out[o++] = '"';
    return o;
}

void
fs_vlog(enum fs_log_level lvl, const char *subsys, const char *kv, const char *fmt, va_list ap)
{
    if ((int)lvl < (int)fs_log_get_level())
        return;
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);

    char line[4096];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(line, sizeof line, "ts=%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof line - n,
                          ".%03ldZ level=%s subsys=%s msg=", ts.tv_nsec / 1000000, level_names[lvl],
                          subsys ? subsys : "main");
    n += quote_into(line + n, sizeof line - n - 2, msg);
    if (kv && *kv && n < sizeof line - 2)
        n += (size_t)snprintf(line + n, sizeof line - n - 1, " %s", kv);
    if (n > sizeof line - 2)
        n = sizeof line - 2;
    line[n++] = '\n';
    /* One write(2) per line keeps lines from different threads whole. */
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w;
}

void
fs_log(enum fs_log_level lvl, const char *subsys, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fs_vlog(lvl, subsys, NULL, fmt, ap);
    va_end(ap);
}

void
fs_logkv(enum fs_log_level lvl, const char *subsys, const char *kv, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fs_vlog(lvl, subsys, kv, fmt, ap);
    va_end(ap);
}
