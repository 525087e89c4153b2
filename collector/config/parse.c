/* Strict parsers of durations, sizes, port ranges and listen addresses; see parse.h. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "config/parse.h"

#define US_PER_S INT64_C(1000000)

/* Reads the leading decimal digits of s into *v; returns the first other char or NULL
 * when there are no digits or the number does not fit in 63 bits. */
static const char *
parse_digits(const char *s, uint64_t *v)
{
    uint64_t x = 0;
    if (!s || *s < '0' || *s > '9')
        return NULL;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (x > ((uint64_t)INT64_MAX - (uint64_t)(*s - '0')) / 10)
            return NULL;
        x = x * 10 + (uint64_t)(*s - '0');
    }
    *v = x;
    return s;
}

int64_t
fs_parse_duration(const char *s)
{
    static const struct {
        const char *unit;
        int64_t us;
    } units[] = {{"ms", 1000},
                 {"s", US_PER_S},
                 {"m", 60 * US_PER_S},
                 {"h", 3600 * US_PER_S},
                 {"d", 86400 * US_PER_S}};
    uint64_t v;
    const char *rest = parse_digits(s, &v);

    if (!rest)
        return -1;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(rest, units[i].unit))
            continue;
        if (v > (uint64_t)(INT64_MAX / units[i].us))
            return -1;
        return (int64_t)v * units[i].us;
    }
    return -1;
}

int
fs_parse_size(const char *s, uint64_t *out)
{
    static const struct {
        const char *unit;
        uint64_t mult;
    } units[] = {{"", 1},
                 {"B", 1},
                 {"KiB", UINT64_C(1) << 10},
                 {"MiB", UINT64_C(1) << 20},
                 {"GiB", UINT64_C(1) << 30},
                 {"TiB", UINT64_C(1) << 40},
                 {"kB", 1000},
                 {"KB", 1000},
                 {"MB", 1000000},
                 {"GB", 1000000000},
                 {"TB", UINT64_C(1000000000000)}};
    uint64_t v;
    const char *rest = parse_digits(s, &v);

    if (!rest || !out)
        return -1;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(rest, units[i].unit))
            continue;
        if (v > UINT64_MAX / units[i].mult)
            return -1;
        *out = v * units[i].mult;
        return 0;
    }
    return -1;
}

/* "A-B" port range; 0 and *lo, *hi on success. */
int
fs_cfg_parse_port_range(const char *s, unsigned *lo, unsigned *hi)
{
    uint64_t a, b;
    const char *p = parse_digits(s, &a);
    if (!p || *p != '-')
        return -1;
    p = parse_digits(p + 1, &b);
    if (!p || *p || a > 65535 || b > 65535)
        return -1;
    *lo = (unsigned)a;
    *hi = (unsigned)b;
    return 0;
}

/* "host:port" or "[v6]:port"; host is copied without brackets. */
int
fs_cfg_parse_listen(const char *s, char *host, size_t hlen, unsigned *port)
{
    const char *colon = strrchr(s, ':');
    const char *h = s, *hend;
    uint64_t p;
    const char *rest;

    if (!colon)
        return -1;
    hend = colon;
    if (*s == '[') {
        if (colon == s || colon[-1] != ']')
            return -1;
        h = s + 1;
        hend = colon - 1;
    }
    rest = parse_digits(colon + 1, &p);
    if (!rest || *rest || p > 65535 || hend <= h || (size_t)(hend - h) >= hlen)
        return -1;
    memcpy(host, h, (size_t)(hend - h));
    host[hend - h] = '\0';
    *port = (unsigned)p;
    return 0;
}
