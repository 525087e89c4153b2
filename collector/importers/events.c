/* Importer event batches and their POST body (see events.h). */
#include "importers/events.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *
dup_cut(const char *s)
{
    size_t l = strnlen(s, FS_HOST_EVENTS_MAX_STR);
    char *d = malloc(l + 1);
    if (d) {
        memcpy(d, s, l);
        d[l] = '\0';
    }
    return d;
}

struct fs_imp_event *
fs_imp_add(struct fs_imp_batch *b, const char *host, const char *kind, const char *name,
           int64_t start_ns, int64_t end_ns)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1024;
        void *p = realloc(b->ev, cap * sizeof *b->ev);
        if (!p)
            return NULL;
        b->ev = p;
        b->cap = cap;
    }
    struct fs_imp_event *e = &b->ev[b->n];
    memset(e, 0, sizeof *e);
    e->host = dup_cut(host);
    e->kind = dup_cut(kind);
    e->name = dup_cut(name);
    e->start_ns = start_ns;
    e->end_ns = end_ns < start_ns ? start_ns : end_ns;
    b->n++;
    if (!e->host || !e->kind || !e->name)
        return NULL;
    return e;
}

static int
add_attr(struct fs_imp_event *e, const char *key, const char *value, bool is_string)
{
    if (e->n_attrs >= FS_HOST_EVENTS_MAX_ATTRS)
        return 0;
    struct fs_imp_attr *a = &e->attrs[e->n_attrs];
    a->key = strndup(key, FS_HOST_EVENTS_MAX_KEY);
    a->value = dup_cut(value);
    a->is_string = is_string;
    e->n_attrs++;
    return a->key && a->value ? 0 : -1;
}

int
fs_imp_attr_str(struct fs_imp_event *e, const char *key, const char *value)
{
    return add_attr(e, key, value, true);
}

int
fs_imp_attr_int(struct fs_imp_event *e, const char *key, int64_t value)
{
    char t[32];
    snprintf(t, sizeof t, "%" PRId64, value);
    return add_attr(e, key, t, false);
}

int
fs_imp_attr_double(struct fs_imp_event *e, const char *key, double value)
{
    char t[64];
    if (!isfinite(value))
        return 0;
    snprintf(t, sizeof t, "%.6f", value);
    return add_attr(e, key, t, false);
}

void
fs_imp_batch_free(struct fs_imp_batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        struct fs_imp_event *e = &b->ev[i];
        free(e->host);
        free(e->kind);
        free(e->name);
        for (size_t k = 0; k < e->n_attrs; k++) {
            free(e->attrs[k].key);
            free(e->attrs[k].value);
        }
    }
    free(b->ev);
    b->ev = NULL;
    b->n = b->cap = 0;
}

int
fs_imp_body(const struct fs_imp_batch *b, size_t from, size_t to, int64_t offset_ns,
            int64_t uncertainty_ns, struct fs_buf *out)
{
    fs_buf_printf(out,
                  "{\"host_offset_ns\":%" PRId64 ",\"host_offset_uncertainty_ns\":%" PRId64
                  ",\"events\":[",
                  offset_ns, uncertainty_ns);
    for (size_t i = from; i < to; i++) {
        const struct fs_imp_event *e = &b->ev[i];
        fs_buf_puts(out, i > from ? ",{\"host\":" : "{\"host\":");
        fs_buf_json_str(out, e->host);
        fs_buf_puts(out, ",\"kind\":");
        fs_buf_json_str(out, e->kind);
        fs_buf_puts(out, ",\"name\":");
        fs_buf_json_str(out, e->name);
        fs_buf_printf(out, ",\"start\":%" PRId64 ",\"end\":%" PRId64, e->start_ns, e->end_ns);
        if (e->n_attrs) {
            fs_buf_puts(out, ",\"attrs\":{");
            for (size_t k = 0; k < e->n_attrs; k++) {
                if (k)
                    fs_buf_puts(out, ",");
                fs_buf_json_str(out, e->attrs[k].key);
                fs_buf_puts(out, ":");
                if (e->attrs[k].is_string)
                    fs_buf_json_str(out, e->attrs[k].value);
                else
                    fs_buf_puts(out, e->attrs[k].value);
            }
            fs_buf_puts(out, "}");
        }
        fs_buf_puts(out, "}");
    }
    fs_buf_puts(out, "]}");
    return out->overflow ? -1 : 0;
}
