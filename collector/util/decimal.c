#include "util/decimal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* 10^0..10^22 are exact doubles. */
static const double pow10_exact[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

bool
fs_decimal_exact(const char *s, size_t len, double *out)
{
    size_t i = 0;
    bool neg = false;
    if (i < len && (s[i] == '-' || s[i] == '+'))
        neg = s[i++] == '-';
    uint64_t m = 0;
    int digits = 0, frac = 0;
    bool any = false;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        any = true;
        if (m == 0 && s[i] == '0')
            continue; /* leading zeros are not significant */
        if (++digits > 19)
            return false;
        m = m * 10 + (uint64_t)(s[i] - '0');
    }
    if (i < len && s[i] == '.') {
        i++;
        for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
            any = true;
            frac++;
            if (m == 0 && s[i] == '0')
                continue;
            if (++digits > 19)
                return false;
            m = m * 10 + (uint64_t)(s[i] - '0');
        }
    }
    if (!any)
        return false;
    int e10 = 0;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        bool eneg = false;
        if (i < len && (s[i] == '-' || s[i] == '+'))
            eneg = s[i++] == '-';
        if (i == len)
            return false;
        for (; i < len && s[i] >= '0' && s[i] <= '9'; i++)
            if ((e10 = e10 * 10 + (s[i] - '0')) > 1000)
                return false;
        if (eneg)
            e10 = -e10;
    }
    if (i != len || frac > 1000)
        return false;
    e10 -= frac;
    if (m > (UINT64_C(1) << 53))
        return false;
    double v = (double)m; /* exact */
    if (m != 0) {
        if (e10 < -22 || e10 > 22)
            return false;
        /* One correctly rounded operation on exact operands: the correctly rounded value. */
        v = e10 < 0 ? v / pow10_exact[-e10] : v * pow10_exact[e10];
    }
    *out = neg ? -v : v;
    return true;
}

bool
fs_decimal_parse(const char *s, size_t len, double *out)
{
    if (fs_decimal_exact(s, len, out))
        return true;
    char buf[64];
    if (len == 0 || len >= sizeof buf)
        return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *e;
    double v = strtod(buf, &e);
    if (*e)
        return false;
    *out = v;
    return true;
}
