/* Bounded growable buffer and the two escapings the HTTP side needs (see buf.h). */
#include "util/buf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
fs_buf_init(struct fs_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
    b->overflow = false;
}

void
fs_buf_free(struct fs_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->overflow = false;
}

void
fs_buf_reset(struct fs_buf *b)
{
    b->len = 0;
    b->overflow = false;
    if (b->data)
        b->data[0] = '\0';
}

bool
fs_buf_reserve(struct fs_buf *b, size_t n)
{
    if (b->overflow)
        return false;
    /* +1 keeps room for the terminating NUL that fs_buf_detach promises. */
    if (n > SIZE_MAX - b->len - 1 || b->len + n + 1 > b->max) {
        b->overflow = true;
        return false;
    }
    size_t need = b->len + n + 1;
    if (need <= b->cap)
        return true;
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap < need)
        ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
    if (ncap > b->max)
        ncap = b->max;
    char *p = realloc(b->data, ncap);
    if (!p) {
        b->overflow = true;
        return false;
    }
    b->data = p;
    b->cap = ncap;
    return true;
}

bool
fs_buf_append(struct fs_buf *b, const void *p, size_t n)
{
    if (!fs_buf_reserve(b, n))
        return false;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

bool
fs_buf_puts(struct fs_buf *b, const char *s)
{
    return fs_buf_append(b, s, strlen(s));
}

bool
fs_buf_printf(struct fs_buf *b, const char *fmt, ...)
{
    va_list ap;
    char small[256];
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->overflow = true;
        return false;
    }
    if ((size_t)n < sizeof small)
        return fs_buf_append(b, small, (size_t)n);
    if (!fs_buf_reserve(b, (size_t)n))
        return false;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return true;
}

bool
fs_buf_json_str(struct fs_buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    if (!fs_buf_append(b, "\"", 1))
        return false;
    const unsigned char *p = (const unsigned char *)s;
    const unsigned char *run = p;
    for (; *p; p++) {
        unsigned char c = *p;
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        fs_buf_append(b, run, (size_t)(p - run));
        run = p + 1;
        char esc[6] = {'\\', 0, 0, 0, 0, 0};
        size_t n = 2;
        switch (c) {
        case '"':
            esc[1] = '"';
            break;
        case '\\':
            esc[1] = '\\';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            n = 6;
        }
        fs_buf_append(b, esc, n);
    }
    fs_buf_append(b, run, (size_t)(p - run));
    return fs_buf_append(b, "\"", 1);
}

bool
fs_buf_prom_label_value(struct fs_buf *b, const char *s)
{
    const char *run = s, *p = s;
    for (; *p; p++) {
        const char *esc;
        if (*p == '\\')
            esc = "\\\\";
        else if (*p == '"')
            esc = "\\\"";
        else if (*p == '\n')
            esc = "\\n";
        else
            continue;
        fs_buf_append(b, run, (size_t)(p - run));
        fs_buf_append(b, esc, 2);
        run = p + 1;
    }
    return fs_buf_append(b, run, (size_t)(p - run));
}

char *
fs_buf_detach(struct fs_buf *b, size_t *len)
{
    char *d = b->data;
    if (!d) {
        d = malloc(1);
        if (d)
            d[0] = '\0';
    }
    if (len)
        *len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    b->overflow = false;
    return d;
}
