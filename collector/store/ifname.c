/* Interface names and label text: the one place that knows vendors' port spellings and
 * what bytes a label value may hold. */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "store/sink.h"

/* True for "1/1", "1/16/3": digits separated by single slashes, at least one slash. */
static int
is_slot_port(const char *s)
{
    int slashes = 0, digits = 0;
    for (; *s; s++) {
        if (isdigit((unsigned char)*s)) {
            digits++;
        } else if (*s == '/' && digits > 0) {
            slashes++;
            digits = 0;
        } else {
            return 0;
        }
    }
    return slashes > 0 && digits > 0;
}

/*
 * Length of the valid UTF-8 sequence at p (1..4), or 0 if the bytes there are not one
 * (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF). *cp gets the
 * code point.
 */
static size_t
utf8_seq(const unsigned char *p, unsigned *cp)
{
    unsigned c = p[0];
    size_t n;
    unsigned min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0xe0) == 0xc0) {
        n = 2, min = 0x80, c &= 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
        n = 3, min = 0x800, c &= 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
        n = 4, min = 0x10000, c &= 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) /* also stops at the terminating NUL */
            return 0;
        c = (c << 6) | (p[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return n;
}

const char *
fs_label_sanitize(const char *in, char *buf, size_t len)
{
    const unsigned char *p = (const unsigned char *)in;
    size_t o = 0;
    if (len == 0)
        return buf;
    while (*p) {
        if (*p >= 0x20 && *p < 0x7f) { /* printable ASCII, by far the most common */
            if (o + 1 >= len)
                break;
            buf[o++] = (char)*p++;
            continue;
        }
        unsigned cp;
        size_t n = utf8_seq(p, &cp);
        /* C0 and C1 controls and DEL: '?' (newline stays: exposition escapes it) */
        bool control = n > 0 && cp != '\n' && (cp < 0x20 || (cp >= 0x7f && cp < 0xa0));
        if (n == 0 || control) {
            if (o + 1 >= len)
                break;
            buf[o++] = '?';
            p += n ? n : 1;
            continue;
        }
        if (o + n >= len) /* cut at a character boundary, never inside one */
            break;
        memcpy(buf + o, p, n);
        o += n;
        p += n;
    }
    buf[o] = '\0';
    return buf;
}

const char *
fs_ifname_normalize(const char *name, char *buf, size_t len)
{
    const char *p = name;
    /* ONYX spells the same port "1/1", "ethernet 1/1", "Ethernet1/1" or "Eth1/1". */
    if (strncasecmp(p, "ethernet", 8) == 0)
        p += 8;
    else if (strncasecmp(p, "eth", 3) == 0)
        p += 3;
    while (*p == ' ')
        p++;
    if (is_slot_port(p)) {
        snprintf(buf, len, "Eth%s", p);
        return buf;
    }
    /* Any other name is kept as it is, but cut (if too long) between characters. */
    return fs_label_sanitize(name, buf, len);
}
