/* The YAML node tree, the problem list and data-node positions; see tree.h. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libyang/libyang.h>

#include "config/block.h"
#include "config/config.h"
#include "config/tree.h"

/* ------------------------------------------------------------------------------------
 * Problems
 */

bool
fs_cfg_errs_full(const struct fs_cfg_errs *e)
{
    return e->dropped > 0 || e->oom;
}

void
fs_cfg_err_add(struct fs_cfg_errs *e, unsigned line, unsigned col, const char *path,
               const char *fmt, ...)
{
    char reason[512];
    va_list ap;
    char *text = NULL;
    int n;

    if (e->oom)
        return;
    if (e->n >= FS_CFG_MAX_ERRORS) {
        e->dropped++; /* from now on fs_cfg_errs_full() tells callers to stop */
        return;
    }
    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    n = snprintf(NULL, 0, "%s: %s", path && *path ? path : "(document)", reason);
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 16;
        struct fs_cfg_err *v = realloc(e->v, cap * sizeof(*v));
        if (!v) {
            e->oom = true;
            return;
        }
        e->v = v;
        e->cap = cap;
    }
    text = malloc((size_t)n + 1);
    if (!text) {
        e->oom = true;
        return;
    }
    snprintf(text, (size_t)n + 1, "%s: %s", path && *path ? path : "(document)", reason);
    e->v[e->n] = (struct fs_cfg_err){.line = line, .col = col, .seq = e->n, .text = text};
    e->n++;
}

void
fs_cfg_errs_free(struct fs_cfg_errs *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i].text);
    free(e->v);
    memset(e, 0, sizeof(*e));
}

static int
err_cmp(const void *a, const void *b)
{
    const struct fs_cfg_err *x = a, *y = b;
    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    if (x->col != y->col)
        return x->col < y->col ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

char *
fs_cfg_errs_format(struct fs_cfg_errs *e, const char *filename)
{
    size_t total = 1, off = 0;
    char *out;

    qsort(e->v, e->n, sizeof(*e->v), err_cmp);
    for (size_t i = 0; i < e->n; i++)
        total += strlen(filename) + strlen(e->v[i].text) + 32;
    total += strlen(filename) + 96; /* the "more problems" / oom line */
    out = malloc(total);
    if (!out)
        return NULL;
    out[0] = '\0';
    for (size_t i = 0; i < e->n; i++)
        off += (size_t)snprintf(out + off, total - off, "%s:%u:%u: %s\n", filename, e->v[i].line,
                                e->v[i].col, e->v[i].text);
    if (e->dropped)
        snprintf(out + off, total - off, "%s: stopped after %d problems; fix these first\n",
                 filename, FS_CFG_MAX_ERRORS);
    else if (e->oom)
        snprintf(out + off, total - off, "%s: out of memory while checking\n", filename);
    return out;
}

bool
fs_cfg_errs_any(const struct fs_cfg_errs *e)
{
    return e->n > 0 || e->oom || e->dropped > 0;
}

/* Copies user text for a message; see tree.h. */
void
fs_cfg_show(char *dst, size_t dlen, const char *s, size_t len)
{
    size_t o = 0, lim = len > FS_CFG_SHOW_MAX ? FS_CFG_SHOW_MAX : len;

    if (lim < len) /* never cut a UTF-8 character in two */
        while (lim > 0 && ((unsigned char)s[lim] & 0xc0) == 0x80)
            lim--;
    for (size_t i = 0; i < lim && o + 4 < dlen; i++) {
        unsigned char c = (unsigned char)s[i];
        dst[o++] = (c < 0x20 || c == 0x7f || c == '"' || c == '\\') ? '?' : (char)c;
    }
    if (lim < len && o + 4 < dlen) {
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    dst[o] = '\0';
}

/* ------------------------------------------------------------------------------------
 * YAML nodes
 */

void
fs_ynode_free(struct fs_ynode *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->n; i++)
        fs_ynode_free(n->kids[i]);
    free(n->kids);
    free(n->str);
    free(n);
}

int
fs_ynode_append(struct fs_ynode *parent, struct fs_ynode *kid)
{
    if (parent->n == parent->cap) {
        size_t cap = parent->cap ? parent->cap * 2 : 8;
        struct fs_ynode **k = realloc(parent->kids, cap * sizeof(*k));
        if (!k)
            return -1;
        parent->kids = k;
        parent->cap = cap;
    }
    if (parent->kind == FS_Y_MAP && parent->n % 2 == 1)
        kid->key = parent->kids[parent->n - 1];
    parent->kids[parent->n++] = kid;
    return 0;
}

const char *
fs_ynode_kind_name(const struct fs_ynode *v)
{
    if (v->kind == FS_Y_MAP)
        return "a mapping";
    if (v->kind == FS_Y_SEQ)
        return "a list";
    return "a value";
}

bool
fs_ynode_is_null(const struct fs_ynode *v)
{
    return v->kind == FS_Y_SCALAR && v->plain &&
           (v->len == 0 || !strcmp(v->str, "~") || !strcmp(v->str, "null") ||
            !strcmp(v->str, "Null") || !strcmp(v->str, "NULL"));
}

bool
fs_cfg_key_hidden(const char *key)
{
    static const char *const words[] = {"password",   "community", "token", "secret",
                                        "passphrase", "_file",     "_env"};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (strstr(key, words[i]))
            return true;
    return false;
}

const struct lysc_ext_instance *
fs_cfg_find_ext(const struct lysc_node *s, const char *name)
{
    LY_ARRAY_COUNT_TYPE i;
    LY_ARRAY_FOR(s->exts, i)
    {
        if (s->exts[i].def && !strcmp(s->exts[i].def->name, name) &&
            !strcmp(s->exts[i].def->module->name, FS_CFG_CORE_MODULE))
            return &s->exts[i];
    }
    return NULL;
}

/* ------------------------------------------------------------------------------------
 * Positions and paths of data nodes
 */

void
fs_cfg_node_pos(const struct lyd_node *n, bool at_key, unsigned *line, unsigned *col)
{
    *line = 1;
    *col = 1;
    for (; n; n = lyd_parent(n)) {
        const struct fs_ynode *y = n->priv;
        if (!y)
            continue;
        if (at_key && y->key)
            y = y->key;
        *line = y->line;
        *col = y->col;
        return;
    }
}

void
fs_cfg_node_path(const struct lyd_node *n, char *buf, size_t len)
{
    const struct lyd_node *chain[FS_CFG_MAX_DEPTH];
    size_t depth = 0, o = 0;

    buf[0] = '\0';
    for (; n && depth < FS_CFG_MAX_DEPTH; n = lyd_parent(n))
        chain[depth++] = n;
    while (depth-- > 0 && o < len) {
        const struct lyd_node *c = chain[depth];
        const struct lyd_node *k = c->schema->nodetype == LYS_LIST ? lyd_child(c) : NULL;
        const char *kv = k ? lyd_get_value(k) : NULL;
        char part[FS_CFG_SHOW_MAX + 8];
        int r;
        if (kv)
            fs_cfg_show(part, sizeof(part), kv, strlen(kv));
        if (kv && fs_cfg_find_ext(c->schema, "yaml-position"))
            r = snprintf(buf + o, len - o, "%s%s[#%s]", o ? "." : "", c->schema->name, part);
        else if (kv && fs_cfg_find_ext(c->schema, "yaml-map"))
            r = snprintf(buf + o, len - o, "%s%s.%s", o ? "." : "", c->schema->name, part);
        else if (kv)
            r = snprintf(buf + o, len - o, "%s%s[%s]", o ? "." : "", c->schema->name, part);
        else
            r = snprintf(buf + o, len - o, "%s%s", o ? "." : "", c->schema->name);
        if (r < 0)
            break;
        o += (size_t)r;
    }
}

void
fs_cfg_node_err(struct fs_cfg_errs *e, const struct lyd_node *n, bool at_key, const char *fmt, ...)
{
    char reason[512], path[FS_CFG_PATH_MAX];
    unsigned line, col;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    fs_cfg_node_pos(n, at_key, &line, &col);
    fs_cfg_node_path(n, path, sizeof(path));
    fs_cfg_err_add(e, line, col, path, "%s", reason);
}

bool
fs_cfg_node_bad(const struct lyd_node *n)
{
    const struct fs_ynode *y = n ? n->priv : NULL;
    return y && y->bad;
}

const struct lyd_node *
fs_cfg_child(const struct lyd_node *first, const char *name)
{
    for (const struct lyd_node *c = first; c; c = c->next)
        if (c->schema && !strcmp(c->schema->name, name))
            return c;
    return NULL;
}

const struct lyd_node *
fs_cfg_top(const struct lyd_node *first, const char *name)
{
    return fs_cfg_child(first, name);
}

const char *
fs_cfg_cval(const struct lyd_node *parent, const char *name)
{
    const struct lyd_node *c = parent ? fs_cfg_child(lyd_child(parent), name) : NULL;
    return c ? lyd_get_value(c) : NULL;
}

/* ------------------------------------------------------------------------------------
 * Reading a block (block.h)
 */

const struct lyd_node *
fs_cfg_kid(const struct lyd_node *parent, const char *name)
{
    return parent ? fs_cfg_child(lyd_child(parent), name) : NULL;
}

const struct lyd_node *
fs_cfg_given(const struct lyd_node *parent, const char *name)
{
    const struct lyd_node *n = fs_cfg_kid(parent, name);
    return n && !(n->flags & LYD_DEFAULT) ? n : NULL;
}

const struct lyd_node *
fs_cfg_next(const struct lyd_node *parent, const struct lyd_node *prev, const char *name)
{
    const struct lyd_node *c = prev ? prev->next : (parent ? lyd_child(parent) : NULL);
    return fs_cfg_child(c, name);
}

const char *
fs_cfg_value(const struct lyd_node *leaf)
{
    return leaf ? lyd_get_value(leaf) : NULL;
}

bool
fs_cfg_bool(const struct lyd_node *parent, const char *name)
{
    const char *v = fs_cfg_cval(parent, name);
    return v && !strcmp(v, "true");
}

long
fs_cfg_long(const struct lyd_node *parent, const char *name, long dflt)
{
    const char *v = fs_cfg_cval(parent, name);
    return v ? strtol(v, NULL, 10) : dflt;
}

int64_t
fs_cfg_duration_us(const struct lyd_node *parent, const char *name, int64_t dflt)
{
    const char *v = fs_cfg_cval(parent, name);
    int64_t us = v ? fs_parse_duration(v) : -1;
    return us > 0 ? us : dflt;
}

int
fs_cfg_strdup(char **dst, const struct lyd_node *parent, const char *name)
{
    const char *v = parent ? fs_cfg_cval(parent, name) : NULL;
    *dst = NULL;
    if (!v)
        return 0;
    *dst = strdup(v);
    return *dst ? 0 : -1;
}

int
fs_cfg_secret_ref(struct fs_secret_ref *ref, const struct lyd_node *parent, const char *stem)
{
    char fname[64], ename[64], path[FS_CFG_PATH_MAX];
    const struct lyd_node *which;

    memset(ref, 0, sizeof(*ref));
    snprintf(fname, sizeof(fname), "%s_file", stem);
    snprintf(ename, sizeof(ename), "%s_env", stem);
    if (fs_cfg_strdup(&ref->file, parent, fname) || fs_cfg_strdup(&ref->env, parent, ename))
        return -1;
    which = fs_cfg_kid(parent, ref->file ? fname : ename);
    if (which) {
        fs_cfg_node_path(which, path, sizeof(path));
        if (!(ref->key = strdup(path)))
            return -1;
    }
    return 0;
}

void
fs_cfg_secret_ref_free(struct fs_secret_ref *ref)
{
    free(ref->file);
    free(ref->env);
    free(ref->key);
    memset(ref, 0, sizeof(*ref));
}

bool
fs_cfg_str_equal(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

bool
fs_cfg_secret_ref_equal(const struct fs_secret_ref *a, const struct fs_secret_ref *b)
{
    return fs_cfg_str_equal(a->file, b->file) && fs_cfg_str_equal(a->env, b->env);
}
