/*
 * A growable byte buffer with a hard maximum size. Appends past the maximum fail and
 * set the `overflow` flag once; later appends are ignored, so a writer can check once
 * at the end. Ownership: the buffer owns `data`; fs_buf_free() releases it, and
 * fs_buf_detach() hands it to the caller.
 */
#ifndef FS_BUF_H
#define FS_BUF_H

#include <stdbool.h>
#include <stddef.h>

struct fs_buf {
    char *data;
    size_t len, cap, max;
    bool overflow;
};

void fs_buf_init(struct fs_buf *b, size_t max);
void fs_buf_free(struct fs_buf *b);
/** Empties the buffer but keeps its memory (no allocation on reuse). */
void fs_buf_reset(struct fs_buf *b);
/** Makes room for n more bytes; returns false (and sets overflow) past max or on ENOMEM. */
bool fs_buf_reserve(struct fs_buf *b, size_t n);
bool fs_buf_append(struct fs_buf *b, const void *p, size_t n);
bool fs_buf_puts(struct fs_buf *b, const char *s);
bool fs_buf_printf(struct fs_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** Appends s as a JSON string (with quotes), escaping as RFC 8259 requires. */
bool fs_buf_json_str(struct fs_buf *b, const char *s);
/** Appends s escaped for a Prometheus label value (\\, \", \n), without quotes. */
bool fs_buf_prom_label_value(struct fs_buf *b, const char *s);
/** Returns the data (NUL-terminated) and leaves b empty; caller frees. */
char *fs_buf_detach(struct fs_buf *b, size_t *len);

#endif
