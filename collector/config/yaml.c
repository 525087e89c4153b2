/*
 * YAML reading (libyaml event API) into a node tree with line and column, and the walk
 * of that tree against the schema; see yaml.h.
 *
 * The walk is driven by the compiled schema (lysc nodes and types): unknown keys,
 * wrong shapes, types, enums, ranges, patterns, choices and mandatory nodes all come
 * from the model, so extending a YANG module (the core's or a driver's) extends the
 * validation.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libyang/libyang.h>
#include <libyang/plugins_types.h>
#include <yaml.h>

#include "util/url.h"
#include "config/config.h"
#include "config/schema.h"
#include "config/tree.h"
#include "config/yaml.h"

/* ------------------------------------------------------------------------------------
 * YAML -> ynode tree
 */

/* The key path of the position being built, for problems found while reading. */
static void
stack_path(struct fs_ynode *const *stack, size_t depth, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < depth && o < len; i++) {
        const struct fs_ynode *s = stack[i];
        bool inner = i + 1 < depth; /* stack[i + 1] is already s's last kid */
        const struct fs_ynode *k = NULL;
        char part[FS_CFG_SHOW_MAX + 8];
        if (s->kind == FS_Y_MAP) {
            if (s->n % 2 == 1)
                k = s->kids[s->n - 1];
            else if (inner && s->n >= 2)
                k = s->kids[s->n - 2];
            if (k && k->kind == FS_Y_SCALAR) {
                fs_cfg_show(part, sizeof(part), k->str, k->len);
                o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? "." : "", part);
            }
        } else {
            o += (size_t)snprintf(buf + o, len - o, "[#%zu]", inner ? s->n : s->n + 1);
        }
    }
}

static void
mark_pos(const yaml_mark_t *m, unsigned *line, unsigned *col)
{
    *line = (unsigned)m->line + 1;
    *col = (unsigned)m->column + 1;
}

/* Reader errors carry a byte offset only. */
static void
offset_pos(const char *text, size_t len, size_t off, unsigned *line, unsigned *col)
{
    const char *p = text, *end = text + (off < len ? off : len);
    *line = 1;
    *col = 1;
    for (; p < end; p++) {
        if (*p == '\n') {
            (*line)++;
            *col = 1;
        } else if (((unsigned char)*p & 0xc0) != 0x80) {
            (*col)++;
        }
    }
}

/* Refuses anchors and tags on a node: they make a config file harder to read, and
 * aliases (refused too) could expand it beyond any size limit. */
static void
check_node_props(const yaml_event_t *ev, const char *path, struct fs_cfg_errs *errs)
{
    const yaml_char_t *anchor = NULL, *tag = NULL;
    unsigned line, col;

    if (ev->type == YAML_SCALAR_EVENT) {
        anchor = ev->data.scalar.anchor;
        tag = ev->data.scalar.tag;
    } else if (ev->type == YAML_MAPPING_START_EVENT) {
        anchor = ev->data.mapping_start.anchor;
        tag = ev->data.mapping_start.tag;
    } else if (ev->type == YAML_SEQUENCE_START_EVENT) {
        anchor = ev->data.sequence_start.anchor;
        tag = ev->data.sequence_start.tag;
    }
    mark_pos(&ev->start_mark, &line, &col);
    if (anchor)
        fs_cfg_err_add(errs, line, col, path, "YAML anchors are not allowed");
    if (tag) {
        char t[FS_CFG_SHOW_MAX + 8];
        fs_cfg_show(t, sizeof(t), (const char *)tag, strlen((const char *)tag));
        fs_cfg_err_add(errs, line, col, path, "YAML tags are not allowed (%s)", t);
    }
}

/* Reads one YAML document into *root (NULL for an empty stream). Problems go to errs;
 * returns -1 when reading stopped early (syntax error, too deep, out of memory). */
int
fs_cfg_read_yaml(const char *text, size_t len, struct fs_cfg_errs *errs, struct fs_ynode **root)
{
    yaml_parser_t parser;
    yaml_event_t ev;
    struct fs_ynode *stack[FS_CFG_MAX_DEPTH + 1];
    size_t depth = 0;
    int docs = 0, rc = -1;
    bool done = false;
    char path[FS_CFG_PATH_MAX];

    *root = NULL;
    /* A UTF-8 byte-order mark (some Windows editors write one) is not part of the text;
     * columns on line 1 count from after it. */
    if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) {
        text += 3;
        len -= 3;
    }
    if (!yaml_parser_initialize(&parser)) {
        errs->oom = true;
        return -1;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    /* Never guess UTF-16 from a BOM: the file must be UTF-8. */
    yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING);

    while (!done) {
        struct fs_ynode *node = NULL;
        unsigned line, col;

        if (!yaml_parser_parse(&parser, &ev)) {
            stack_path(stack, depth, path, sizeof(path));
            if (parser.error == YAML_READER_ERROR) {
                offset_pos(text, len, parser.problem_offset, &line, &col);
                fs_cfg_err_add(errs, line, col, path, "not valid UTF-8 text: %s",
                               parser.problem ? parser.problem : "unreadable");
            } else if (parser.error == YAML_MEMORY_ERROR) {
                errs->oom = true;
            } else {
                mark_pos(&parser.problem_mark, &line, &col);
                if (parser.context)
                    fs_cfg_err_add(errs, line, col, path, "YAML syntax error %s: %s",
                                   parser.context, parser.problem ? parser.problem : "");
                else
                    fs_cfg_err_add(errs, line, col, path, "YAML syntax error: %s",
                                   parser.problem ? parser.problem : "unknown");
            }
            goto cleanup;
        }
        mark_pos(&ev.start_mark, &line, &col);
        stack_path(stack, depth, path, sizeof(path));

        switch (ev.type) {
        case YAML_STREAM_START_EVENT:
        case YAML_DOCUMENT_END_EVENT:
            break;
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1) {
                fs_cfg_err_add(errs, line, col, "",
                               "only one YAML document is allowed in a configuration file");
                yaml_event_delete(&ev);
                goto cleanup;
            }
            if (ev.data.document_start.tag_directives.start !=
                ev.data.document_start.tag_directives.end)
                fs_cfg_err_add(errs, line, col, "", "YAML %%TAG directives are not allowed");
            break;
        case YAML_ALIAS_EVENT:
            fs_cfg_err_add(errs, line, col, path, "YAML aliases are not allowed");
            /* A null stands in for it so that reading can go on. */
            node = calloc(1, sizeof(*node));
            if (!node || !(node->str = strdup(""))) {
                free(node);
                errs->oom = true;
                yaml_event_delete(&ev);
                goto cleanup;
            }
            node->kind = FS_Y_SCALAR;
            node->plain = true;
            break;
        case YAML_SCALAR_EVENT:
            check_node_props(&ev, path, errs);
            node = calloc(1, sizeof(*node));
            if (node)
                node->str = malloc(ev.data.scalar.length + 1);
            if (!node || !node->str) {
                free(node);
                errs->oom = true;
                yaml_event_delete(&ev);
                goto cleanup;
            }
            node->kind = FS_Y_SCALAR;
            memcpy(node->str, ev.data.scalar.value, ev.data.scalar.length);
            node->str[ev.data.scalar.length] = '\0';
            node->len = ev.data.scalar.length;
            node->plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
            if (memchr(node->str, '\0', node->len)) {
                /* "\0" in a quoted scalar: no configuration value may hold one. */
                fs_cfg_err_add(errs, line, col, path, "text contains a NUL character");
                node->len = strlen(node->str);
            }
            break;
        case YAML_MAPPING_START_EVENT:
        case YAML_SEQUENCE_START_EVENT:
            check_node_props(&ev, path, errs);
            if (depth >= FS_CFG_MAX_DEPTH) {
                fs_cfg_err_add(errs, line, col, path, "nested more than %d levels deep",
                               FS_CFG_MAX_DEPTH);
                yaml_event_delete(&ev);
                goto cleanup;
            }
            node = calloc(1, sizeof(*node));
            if (!node) {
                errs->oom = true;
                yaml_event_delete(&ev);
                goto cleanup;
            }
            node->kind = ev.type == YAML_MAPPING_START_EVENT ? FS_Y_MAP : FS_Y_SEQ;
            break;
        case YAML_MAPPING_END_EVENT:
        case YAML_SEQUENCE_END_EVENT:
            if (depth)
                depth--;
            break;
        default:
            break;
        }
        if (node) {
            node->line = line;
            node->col = col;
            if (depth == 0) {
                if (*root) { /* cannot happen with one document; be safe */
                    fs_ynode_free(node);
                    node = NULL;
                } else {
                    *root = node;
                }
            } else if (fs_ynode_append(stack[depth - 1], node) < 0) {
                fs_ynode_free(node);
                errs->oom = true;
                yaml_event_delete(&ev);
                goto cleanup;
            }
            if (node && node->kind != FS_Y_SCALAR && (depth > 0 || *root == node))
                stack[depth++] = node;
        }
        yaml_event_delete(&ev);
        if (fs_cfg_errs_full(errs))
            goto cleanup;
    }
    rc = 0;
cleanup:
    yaml_parser_delete(&parser);
    return rc;
}

/* ------------------------------------------------------------------------------------
 * The walk
 */

struct walk {
    const struct fs_cfg_schema *sc;
    const struct fs_config_opts *opts;
    struct fs_cfg_errs *errs;
    struct lyd_node *tree; /* top-level siblings */
    char path[FS_CFG_PATH_MAX];
    size_t plen;
};

/* Appends ".key" (or "[name]" for a list entry) to the path; returns the old length. */
static size_t
path_push(struct walk *w, bool bracket, const char *s, size_t len)
{
    size_t old = w->plen;
    char part[FS_CFG_SHOW_MAX + 8];
    int n;

    fs_cfg_show(part, sizeof(part), s, len);
    if (bracket)
        n = snprintf(w->path + w->plen, sizeof(w->path) - w->plen, "[%s]", part);
    else
        n = snprintf(w->path + w->plen, sizeof(w->path) - w->plen, "%s%s", w->plen ? "." : "",
                     part);
    if (n > 0)
        w->plen = w->plen + (size_t)n < sizeof(w->path) ? w->plen + (size_t)n : sizeof(w->path) - 1;
    return old;
}

static void
path_pop(struct walk *w, size_t old)
{
    w->plen = old;
    w->path[old] = '\0';
}

static void werr(struct walk *w, const struct fs_ynode *at, struct fs_ynode *map, const char *fmt,
                 ...) __attribute__((format(printf, 4, 5)));

/* Reports a problem at a node under the current path, marking map as bad. */
static void
werr(struct walk *w, const struct fs_ynode *at, struct fs_ynode *map, const char *fmt, ...)
{
    char reason[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    if (map)
        map->bad = true;
    fs_cfg_err_add(w->errs, at->line, at->col, w->path, "%s", reason);
}

/* Name of the typedef a leaf uses directly ("duration"), from the parsed module. */
static const char *
leaf_type_name(const struct lysc_node *s)
{
    const struct lysp_node *p = s->priv;
    const char *name = NULL, *colon;

    if (!p)
        return "";
    if (p->nodetype == LYS_LEAF)
        name = ((const struct lysp_node_leaf *)p)->type.name;
    else if (p->nodetype == LYS_LEAFLIST)
        name = ((const struct lysp_node_leaflist *)p)->type.name;
    if (!name)
        return "";
    colon = strchr(name, ':');
    return colon ? colon + 1 : name;
}

static const struct lysc_type *
leaf_type(const struct lysc_node *s)
{
    if (s->nodetype == LYS_LEAF)
        return ((const struct lysc_node_leaf *)s)->type;
    return ((const struct lysc_node_leaflist *)s)->type;
}

/* The value as a message shows it: numbers bare, text quoted, hidden keys not at all, a
   URL's user:password@ as ***@ (found in the whole value, before it is cut short). */
static void
render(char *dst, size_t dlen, const struct fs_ynode *v, bool hidden, bool bare)
{
    char s[FS_CFG_SHOW_MAX + 8], red[FS_CFG_SHOW_MAX * 2];
    const char *str = v->str;
    size_t len = v->len;
    if (hidden) {
        snprintf(dst, dlen, "the value");
        return;
    }
    struct fs_url_parts u;
    if (fs_url_authority(str, len, true, &u) && u.host > u.auth) {
        size_t at = u.host - 1; /* the '@', kept */
        size_t k = u.auth < FS_CFG_SHOW_MAX ? u.auth : FS_CFG_SHOW_MAX;
        memcpy(red, str, k);
        memcpy(red + k, "***", 3);
        size_t rest = len - at < sizeof red - k - 3 ? len - at : sizeof red - k - 3;
        memcpy(red + k + 3, str + at, rest);
        str = red;
        len = k + 3 + rest;
    }
    fs_cfg_show(s, sizeof(s), str, len);
    snprintf(dst, dlen, bare ? "%s" : "\"%s\"", s);
}

static void
range_text(char *buf, size_t len, const struct lysc_range *r, bool is_signed)
{
    size_t o = 0;
    LY_ARRAY_COUNT_TYPE i;
    buf[0] = '\0';
    LY_ARRAY_FOR(r->parts, i)
    {
        int n;
        if (is_signed) {
            if (r->parts[i].min_64 == r->parts[i].max_64)
                n = snprintf(buf + o, len - o, "%s%" PRId64, i ? ", " : "", r->parts[i].min_64);
            else
                n = snprintf(buf + o, len - o, "%s%" PRId64 "..%" PRId64, i ? ", " : "",
                             r->parts[i].min_64, r->parts[i].max_64);
        } else {
            if (r->parts[i].min_u64 == r->parts[i].max_u64)
                n = snprintf(buf + o, len - o, "%s%" PRIu64, i ? ", " : "", r->parts[i].min_u64);
            else
                n = snprintf(buf + o, len - o, "%s%" PRIu64 "..%" PRIu64, i ? ", " : "",
                             r->parts[i].min_u64, r->parts[i].max_u64);
        }
        if (n < 0 || (size_t)n >= len - o)
            break;
        o += (size_t)n;
    }
}

static void
builtin_bounds(LY_DATA_TYPE t, int64_t *smin, int64_t *smax, uint64_t *umax)
{
    *smin = 0;
    *smax = 0;
    *umax = 0;
    switch (t) {
    case LY_TYPE_INT8:
        *smin = INT8_MIN;
        *smax = INT8_MAX;
        break;
    case LY_TYPE_INT16:
        *smin = INT16_MIN;
        *smax = INT16_MAX;
        break;
    case LY_TYPE_INT32:
        *smin = INT32_MIN;
        *smax = INT32_MAX;
        break;
    case LY_TYPE_INT64:
        *smin = INT64_MIN;
        *smax = INT64_MAX;
        break;
    case LY_TYPE_UINT8:
        *umax = UINT8_MAX;
        break;
    case LY_TYPE_UINT16:
        *umax = UINT16_MAX;
        break;
    case LY_TYPE_UINT32:
        *umax = UINT32_MAX;
        break;
    default:
        *umax = UINT64_MAX;
        break;
    }
}

static size_t
utf8_chars(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        if (((unsigned char)s[i] & 0xc0) != 0x80)
            n++;
    return n;
}

/*
 * Checks a scalar against a leaf's type. On failure writes the whole reason ("70000 is
 * not in 1..65535") into why and returns false. tname is the typedef the leaf uses
 * directly ("" for none), for the durations and sizes parsed in C.
 */
static bool
value_ok(const struct lysc_node *s, const struct lysc_type *t, const char *tname,
         const struct fs_ynode *v, bool hidden, char *why, size_t wlen)
{
    char val[FS_CFG_SHOW_MAX + 16];
    bool ok = false;

    switch (t->basetype) {
    case LY_TYPE_STRING: {
        const struct lysc_type_str *st = (const struct lysc_type_str *)t;
        struct ly_err_item *err = NULL;
        render(val, sizeof(val), v, hidden, false);
        if (st->length) {
            uint64_t chars = utf8_chars(v->str, v->len);
            bool in = false;
            char rt[128];
            LY_ARRAY_COUNT_TYPE i;
            LY_ARRAY_FOR(st->length->parts, i)
            {
                if (chars >= st->length->parts[i].min_u64 && chars <= st->length->parts[i].max_u64)
                    in = true;
            }
            if (!in) {
                range_text(rt, sizeof(rt), st->length, false);
                if (chars == 0)
                    snprintf(why, wlen, "must not be empty");
                else
                    snprintf(why, wlen, "%s is %" PRIu64 " characters long; allowed: %s", val,
                             chars, rt);
                break;
            }
        }
        if (st->patterns) {
            LY_ERR r = lyplg_type_validate_patterns(st->patterns, v->str, v->len, &err);
            if (r != LY_SUCCESS) {
                /* Every pattern in our module has an error-message; libyang returns it. */
                bool own = false;
                LY_ARRAY_COUNT_TYPE i;
                LY_ARRAY_FOR(st->patterns, i)
                {
                    if (err && err->msg && st->patterns[i]->emsg &&
                        !strcmp(err->msg, st->patterns[i]->emsg))
                        own = true;
                }
                if (own)
                    snprintf(why, wlen, "%s %s", val, err->msg);
                else
                    snprintf(why, wlen, "%s has a form that is not allowed here", val);
                ly_err_free(err);
                break;
            }
        }
        if (!strcmp(tname, "duration")) {
            int64_t us = fs_parse_duration(v->str);
            if (us < 0) {
                snprintf(why, wlen, "%s is too long a duration", val);
                break;
            }
            if (us == 0) {
                snprintf(why, wlen, "%s: a duration must be greater than 0", val);
                break;
            }
        } else if (!strcmp(tname, "size")) {
            uint64_t b;
            if (fs_parse_size(v->str, &b) != 0) {
                snprintf(why, wlen, "%s is too large a size", val);
                break;
            }
        }
        ok = true;
        break;
    }
    case LY_TYPE_INT8:
    case LY_TYPE_INT16:
    case LY_TYPE_INT32:
    case LY_TYPE_INT64:
    case LY_TYPE_UINT8:
    case LY_TYPE_UINT16:
    case LY_TYPE_UINT32:
    case LY_TYPE_UINT64: {
        const struct lysc_type_num *nt = (const struct lysc_type_num *)t;
        bool is_signed = t->basetype <= LY_TYPE_INT64 && t->basetype >= LY_TYPE_INT8;
        const char *p = v->str;
        int64_t sv = 0, smin, smax;
        uint64_t uv = 0, umax;
        char rt[128];
        bool in = false;

        render(val, sizeof(val), v, hidden, true);
        if (!v->plain) {
            render(val, sizeof(val), v, hidden, false);
            snprintf(why, wlen, "%s is text, not a number (write it without quotes)", val);
            break;
        }
        if (*p == '-')
            p++;
        if (!*p || strspn(p, "0123456789") != strlen(p) || strlen(p) > 20) {
            snprintf(why, wlen, "%s is not a whole number", val);
            break;
        }
        builtin_bounds(t->basetype, &smin, &smax, &umax);
        errno = 0;
        if (is_signed)
            sv = strtoll(v->str, NULL, 10);
        else if (v->str[0] == '-')
            errno = ERANGE; /* negative for an unsigned type: out of range below */
        else
            uv = strtoull(v->str, NULL, 10);
        if (nt->range) {
            range_text(rt, sizeof(rt), nt->range, is_signed);
        } else if (is_signed) {
            snprintf(rt, sizeof(rt), "%" PRId64 "..%" PRId64, smin, smax);
        } else {
            snprintf(rt, sizeof(rt), "0..%" PRIu64, umax);
        }
        if (errno == ERANGE || (is_signed && (sv < smin || sv > smax)) ||
            (!is_signed && uv > umax)) {
            snprintf(why, wlen, "%s is not in %s", val, rt);
            break;
        }
        if (nt->range) {
            LY_ARRAY_COUNT_TYPE i;
            LY_ARRAY_FOR(nt->range->parts, i)
            {
                const struct lysc_range_part *rp = &nt->range->parts[i];
                if (is_signed ? (sv >= rp->min_64 && sv <= rp->max_64)
                              : (uv >= rp->min_u64 && uv <= rp->max_u64))
                    in = true;
            }
            if (!in) {
                snprintf(why, wlen, "%s is not in %s", val, rt);
                break;
            }
        }
        ok = true;
        break;
    }
    case LY_TYPE_BOOL:
        render(val, sizeof(val), v, hidden, false);
        if (!v->plain || (strcmp(v->str, "true") && strcmp(v->str, "false"))) {
            snprintf(why, wlen, "%s is not true or false", val);
            break;
        }
        ok = true;
        break;
    case LY_TYPE_ENUM: {
        const struct lysc_type_enum *et = (const struct lysc_type_enum *)t;
        char names[256];
        size_t o = 0;
        LY_ARRAY_COUNT_TYPE i;
        LY_ARRAY_FOR(et->enums, i)
        {
            if (!strcmp(et->enums[i].name, v->str))
                ok = true;
            if (o < sizeof(names))
                o += (size_t)snprintf(names + o, sizeof(names) - o, "%s%s", i ? ", " : "",
                                      et->enums[i].name);
        }
        if (!ok) {
            render(val, sizeof(val), v, hidden, false);
            snprintf(why, wlen, "%s is not one of %s", val, names);
        }
        break;
    }
    case LY_TYPE_UNION: {
        const struct lysc_type_union *ut = (const struct lysc_type_union *)t;
        LY_ARRAY_COUNT_TYPE i;
        LY_ARRAY_FOR(ut->types, i)
        {
            char sub[256];
            if (value_ok(s, ut->types[i], "", v, hidden, sub, sizeof(sub)))
                ok = true;
        }
        if (!ok) {
            render(val, sizeof(val), v, hidden, false);
            snprintf(why, wlen, "%s is not a valid value", val);
        }
        break;
    }
    case LY_TYPE_EMPTY:
        ok = fs_ynode_is_null(v);
        if (!ok)
            snprintf(why, wlen, "takes no value");
        break;
    default: {
        /* Types this model does not use yet: let libyang judge. */
        const struct ly_ctx *ctx = s->module->ctx;
        if (lyd_value_validate(ctx, s, v->str, v->len, NULL, NULL, NULL) == LY_SUCCESS) {
            ok = true;
        } else if (hidden) {
            snprintf(why, wlen, "the value is not valid");
        } else {
            const char *m = ly_errmsg(ctx) ? ly_errmsg(ctx) : "invalid value";
            if (!strncmp(m, "is ", 3)) { /* our own error-message: say what "is" */
                render(val, sizeof(val), v, hidden, v->plain);
                snprintf(why, wlen, "%s %s", val, m);
            } else {
                snprintf(why, wlen, "%s", m);
            }
        }
        ly_err_clean((struct ly_ctx *)ctx, NULL);
        break;
    }
    }
    return ok;
}

/* Links a new node: a child of parent (done by libyang) or a top-level sibling. */
static void
link_node(struct walk *w, struct lyd_node *parent, struct lyd_node *node,
          const struct fs_ynode *from)
{
    node->priv = (void *)from;
    if (!parent) {
        if (lyd_insert_sibling(w->tree, node, &w->tree) != LY_SUCCESS) {
            lyd_free_tree(node);
            w->errs->oom = true;
        }
    }
}

static void
lyerr(struct walk *w, const struct fs_ynode *at, struct fs_ynode *map, bool hidden)
{
    const char *m = ly_errmsg(w->sc->ctx);
    if (hidden || !m)
        werr(w, at, map, "rejected by libyang");
    else
        werr(w, at, map, "rejected by libyang: %s", m);
    ly_err_clean(w->sc->ctx, NULL);
}

static void walk_mapping(struct walk *w, const struct lysc_node *sparent, struct lyd_node *dparent,
                         bool dry, struct fs_ynode *map);

/* A leaf: the value must be a scalar of the leaf's type. */
static void
walk_leaf(struct walk *w, const struct lysc_node *s, struct lyd_node *dparent, bool dry,
          struct fs_ynode *v, struct fs_ynode *map)
{
    char why[512];
    bool hidden = fs_cfg_key_hidden(s->name);
    struct lyd_node *node = NULL;

    if (v->kind != FS_Y_SCALAR) {
        werr(w, v, map, "expected a value, got %s", fs_ynode_kind_name(v));
        return;
    }
    if (fs_ynode_is_null(v) && leaf_type(s)->basetype != LY_TYPE_EMPTY) {
        werr(w, v, map, "missing value");
        return;
    }
    if (!value_ok(s, leaf_type(s), leaf_type_name(s), v, hidden, why, sizeof(why))) {
        werr(w, v, map, "%s", why);
        return;
    }
    if (dry)
        return;
    if (lyd_new_term(dparent, s->module, s->name, v->str, 0, &node) != LY_SUCCESS) {
        lyerr(w, v, map, hidden);
        return;
    }
    link_node(w, dparent, node, v);
}

static const char *
first_key_name(const struct lysc_node *list, const struct lysc_node **key)
{
    const struct lysc_node *c = lysc_node_child(list);
    *key = (c && lysc_is_key(c)) ? c : NULL;
    return *key ? (*key)->name : NULL;
}

struct seen_key {
    const char *str;
    size_t len;
    const struct fs_ynode *at;
};

static int
seen_cmp(const void *a, const void *b)
{
    const struct seen_key *x = a, *y = b;
    int c;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    c = memcmp(x->str, y->str, x->len);
    if (c)
        return c;
    if (x->at->line != y->at->line)
        return x->at->line < y->at->line ? -1 : 1;
    return x->at->col < y->at->col ? -1 : x->at->col > y->at->col;
}

/* Reports every entry whose key repeats an earlier one ("first at L:C"). Sorting keeps it
 * O(n log n) however long the list. */
static void
report_dups(struct walk *w, struct seen_key *keys, size_t n, const char *what, bool bracket,
            struct fs_ynode *map)
{
    qsort(keys, n, sizeof(*keys), seen_cmp);
    for (size_t i = 1, first = 0; i < n; i++) {
        if (keys[i].len == keys[first].len && !memcmp(keys[i].str, keys[first].str, keys[i].len)) {
            size_t old = path_push(w, bracket, keys[i].str, keys[i].len);
            char k[FS_CFG_SHOW_MAX + 8];
            fs_cfg_show(k, sizeof(k), keys[i].str, keys[i].len);
            werr(w, keys[i].at, map, "duplicate %s \"%s\" (first at %u:%u)", what, k,
                 keys[first].at->line, keys[first].at->col);
            path_pop(w, old);
        } else {
            first = i;
        }
    }
}

static void check_count(struct walk *w, const struct lysc_node *s, size_t n, struct fs_ynode *v,
                        struct fs_ynode *map);

/* A list written as a YAML mapping key -> value leaf (fsc:yaml-map), e.g. labels. */
static void
walk_yaml_map_list(struct walk *w, const struct lysc_node *s, const char *value_leaf,
                   struct lyd_node *dparent, bool dry, struct fs_ynode *v, struct fs_ynode *map)
{
    const struct lysc_node *key = NULL, *vleaf;
    struct seen_key *keys = NULL;
    size_t nkeys = 0;
    char why[512];

    first_key_name(s, &key);
    vleaf = fs_cfg_schema_child(w->sc, s, value_leaf, strlen(value_leaf));
    if (vleaf && vleaf->nodetype != LYS_LEAF)
        vleaf = NULL;
    if (!key || !vleaf) {
        werr(w, v, map, "the schema's yaml-map list has no key or no leaf \"%s\"", value_leaf);
        return;
    }
    if (v->kind != FS_Y_MAP) {
        werr(w, v, map, "expected a mapping, got %s",
             fs_ynode_is_null(v) ? "nothing" : fs_ynode_kind_name(v));
        return;
    }
    keys = calloc(v->n / 2 + 1, sizeof(*keys));
    if (!keys) {
        w->errs->oom = true;
        return;
    }
    for (size_t i = 0; i + 1 < v->n && !fs_cfg_errs_full(w->errs); i += 2) {
        struct fs_ynode *k = v->kids[i], *val = v->kids[i + 1];
        struct lyd_node *inst = NULL, *leaf = NULL;
        size_t old;

        if (k->kind != FS_Y_SCALAR) {
            werr(w, k, v, "keys must be plain text, not %s", fs_ynode_kind_name(k));
            continue;
        }
        old = path_push(w, false, k->str, k->len);
        if (!value_ok(key, leaf_type(key), leaf_type_name(key), k, false, why, sizeof(why))) {
            werr(w, k, v, "%s", why);
        } else if (val->kind != FS_Y_SCALAR) {
            werr(w, val, v, "expected a value, got %s", fs_ynode_kind_name(val));
        } else if (fs_ynode_is_null(val)) {
            werr(w, val, v, "missing value");
        } else if (!value_ok(vleaf, leaf_type(vleaf), leaf_type_name(vleaf), val,
                             fs_cfg_key_hidden(vleaf->name), why, sizeof(why))) {
            werr(w, val, v, "%s", why);
        } else {
            keys[nkeys++] = (struct seen_key){k->str, k->len, k};
            if (!dry) {
                if (lyd_new_list(dparent, s->module, s->name, 0, &inst, k->str) != LY_SUCCESS) {
                    lyerr(w, k, v, false);
                } else {
                    link_node(w, dparent, inst, k);
                    if (lyd_new_term(inst, vleaf->module, vleaf->name, val->str, 0, &leaf) !=
                        LY_SUCCESS)
                        lyerr(w, val, v, fs_cfg_key_hidden(vleaf->name));
                    else
                        leaf->priv = val;
                }
            }
        }
        path_pop(w, old);
    }
    report_dups(w, keys, nkeys, "key", false, v);
    check_count(w, s, v->n / 2, v, map);
    free(keys);
}

static const struct fs_ynode *
map_get(const struct fs_ynode *m, const char *key)
{
    for (size_t i = 0; i + 1 < m->n; i += 2)
        if (m->kids[i]->kind == FS_Y_SCALAR && !strcmp(m->kids[i]->str, key))
            return m->kids[i + 1];
    return NULL;
}

/* max-elements, 0 when unbounded (compiled as UINT32_MAX). */
static uint32_t
max_elements(const struct lysc_node *s)
{
    uint32_t max = 0;
    if (s->nodetype == LYS_LIST)
        max = ((const struct lysc_node_list *)s)->max;
    else if (s->nodetype == LYS_LEAFLIST)
        max = ((const struct lysc_node_leaflist *)s)->max;
    return max == UINT32_MAX ? 0 : max;
}

static void
check_count(struct walk *w, const struct lysc_node *s, size_t n, struct fs_ynode *v,
            struct fs_ynode *map)
{
    uint32_t min = 0, max = max_elements(s);
    if (s->nodetype == LYS_LIST)
        min = ((const struct lysc_node_list *)s)->min;
    else if (s->nodetype == LYS_LEAFLIST)
        min = ((const struct lysc_node_leaflist *)s)->min;
    if (n < min)
        werr(w, v, map, "needs at least %" PRIu32 " entries, has %zu", min, n);
    if (max && n > max)
        werr(w, v, map, "allows at most %" PRIu32 " entries, has %zu", max, n);
}

/* A list: a YAML sequence of mappings, each named by its key in paths. */
static void
walk_list(struct walk *w, const struct lysc_node *s, struct lyd_node *dparent, bool dry,
          struct fs_ynode *v, struct fs_ynode *map)
{
    const struct lysc_node *key = NULL;
    const struct lysc_ext_instance *ym = fs_cfg_find_ext(s, "yaml-map");
    /* fsc:yaml-position: entries are keyed by their place in the sequence. */
    bool by_pos = fs_cfg_find_ext(s, "yaml-position") != NULL;
    struct seen_key *keys = NULL;
    size_t nkeys = 0;
    char why[512];

    if (ym && ym->argument) {
        walk_yaml_map_list(w, s, ym->argument, dparent, dry, v, map);
        return;
    }
    if (v->kind != FS_Y_SEQ) {
        werr(w, v, map, "expected a list, got %s",
             fs_ynode_is_null(v) ? "nothing" : fs_ynode_kind_name(v));
        return;
    }
    if (!first_key_name(s, &key) || (key->next && lysc_is_key(key->next))) {
        werr(w, v, map, "the schema's list must have exactly one key");
        return;
    }
    keys = calloc(v->n + 1, sizeof(*keys));
    if (!keys) {
        w->errs->oom = true;
        return;
    }
    for (size_t i = 0; i < v->n && !fs_cfg_errs_full(w->errs); i++) {
        struct fs_ynode *item = v->kids[i];
        const struct fs_ynode *kv;
        struct lyd_node *inst = NULL;
        /* Past max-elements entries are still checked but not built: libyang inserts
         * top-level siblings in linear time, and the list is refused anyway. */
        bool item_dry = dry || (max_elements(s) && i >= max_elements(s));
        size_t old = w->plen;
        char idx[32];

        snprintf(idx, sizeof(idx), "#%zu", i + 1);
        if (item->kind != FS_Y_MAP) {
            old = path_push(w, true, idx, strlen(idx));
            werr(w, item, map, "expected a mapping, got %s",
                 fs_ynode_is_null(item) ? "nothing" : fs_ynode_kind_name(item));
            path_pop(w, old);
            continue;
        }
        kv = map_get(item, key->name);
        if (by_pos) {
            old = path_push(w, true, idx, strlen(idx));
            if (kv) {
                size_t o2 = path_push(w, false, key->name, strlen(key->name));
                werr(w, kv, item, "is the entry's position, not written");
                path_pop(w, o2);
                item_dry = true;
            }
            char pos[24];
            snprintf(pos, sizeof pos, "%zu", i + 1);
            if (!item_dry) {
                if (lyd_new_list(dparent, s->module, s->name, 0, &inst, pos) != LY_SUCCESS) {
                    lyerr(w, item, item, false);
                    item_dry = true;
                } else {
                    link_node(w, dparent, inst, item);
                }
            }
        } else if (!kv) {
            old = path_push(w, true, idx, strlen(idx));
            werr(w, item, item, "missing required key \"%s\"", key->name);
            item_dry = true;
        } else if (kv->kind != FS_Y_SCALAR || fs_ynode_is_null(kv) ||
                   !value_ok(key, leaf_type(key), leaf_type_name(key), kv, false, why,
                             sizeof(why))) {
            old = path_push(w, true, idx, strlen(idx));
            size_t o2 = path_push(w, false, key->name, strlen(key->name));
            if (kv->kind != FS_Y_SCALAR)
                werr(w, kv, item, "expected a value, got %s", fs_ynode_kind_name(kv));
            else if (fs_ynode_is_null(kv))
                werr(w, kv, item, "missing value");
            else
                werr(w, kv, item, "%s", why);
            path_pop(w, o2);
            item_dry = true;
        } else {
            old = path_push(w, true, kv->str, kv->len);
            keys[nkeys++] = (struct seen_key){kv->str, kv->len, kv};
            if (!item_dry) {
                if (lyd_new_list(dparent, s->module, s->name, 0, &inst, kv->str) != LY_SUCCESS) {
                    lyerr(w, kv, item, false);
                    item_dry = true;
                } else {
                    link_node(w, dparent, inst, item);
                }
            }
        }
        walk_mapping(w, s, item_dry ? NULL : inst, item_dry, item);
        path_pop(w, old);
    }
    report_dups(w, keys, nkeys, key->name, true, map);
    check_count(w, s, v->n, v, map);
    free(keys);
}

/* A leaf-list: a YAML sequence of scalars, no value twice. */
static void
walk_leaflist(struct walk *w, const struct lysc_node *s, struct lyd_node *dparent, bool dry,
              struct fs_ynode *v, struct fs_ynode *map)
{
    struct seen_key *vals = NULL;
    size_t nvals = 0;
    bool hidden = fs_cfg_key_hidden(s->name);
    char why[512];

    if (v->kind != FS_Y_SEQ) {
        werr(w, v, map, "expected a list (e.g. [a, b]), got %s",
             fs_ynode_is_null(v) ? "nothing" : fs_ynode_kind_name(v));
        return;
    }
    vals = calloc(v->n + 1, sizeof(*vals));
    if (!vals) {
        w->errs->oom = true;
        return;
    }
    for (size_t i = 0; i < v->n && !fs_cfg_errs_full(w->errs); i++) {
        struct fs_ynode *item = v->kids[i];
        struct lyd_node *node = NULL;
        if (item->kind != FS_Y_SCALAR) {
            werr(w, item, map, "expected a value, got %s", fs_ynode_kind_name(item));
            continue;
        }
        if (fs_ynode_is_null(item)) {
            werr(w, item, map, "missing value");
            continue;
        }
        if (!value_ok(s, leaf_type(s), leaf_type_name(s), item, hidden, why, sizeof(why))) {
            werr(w, item, map, "%s", why);
            continue;
        }
        vals[nvals++] = (struct seen_key){item->str, item->len, item};
        if (dry)
            continue;
        if (lyd_new_term(dparent, s->module, s->name, item->str, 0, &node) != LY_SUCCESS) {
            lyerr(w, item, map, hidden);
            continue;
        }
        link_node(w, dparent, node, item);
    }
    /* Report duplicates against the leaf-list itself (value shown unless hidden). */
    qsort(vals, nvals, sizeof(*vals), seen_cmp);
    for (size_t i = 1, first = 0; i < nvals; i++) {
        if (vals[i].len == vals[first].len && !memcmp(vals[i].str, vals[first].str, vals[i].len)) {
            char r[FS_CFG_SHOW_MAX + 16];
            render(r, sizeof(r), vals[i].at, hidden, false);
            werr(w, vals[i].at, map, "%s is listed twice (first at %u:%u)", r, vals[first].at->line,
                 vals[first].at->col);
        } else {
            first = i;
        }
    }
    check_count(w, s, v->n, v, map);
    free(vals);
}

/* Whether key k under sparent names a driver fabricscope knows but this build lacks. */
static bool
absent_driver(const struct walk *w, const struct lysc_node *sparent, const struct fs_ynode *k)
{
    if (!w->opts || sparent != w->sc->targets)
        return false;
    for (size_t i = 0; i < w->opts->n_absent; i++)
        if (w->opts->absent[i] && strlen(w->opts->absent[i]) == k->len &&
            !memcmp(w->opts->absent[i], k->str, k->len))
            return true;
    return false;
}

static void
walk_container(struct walk *w, const struct lysc_node *s, struct lyd_node *dparent, bool dry,
               struct fs_ynode *v, struct fs_ynode *map)
{
    struct lyd_node *node = NULL;

    if (v->kind != FS_Y_MAP) {
        werr(w, v, map, "expected a mapping, got %s",
             fs_ynode_is_null(v) ? "nothing" : fs_ynode_kind_name(v));
        return;
    }
    if (!dry) {
        if (lyd_new_inner(dparent, s->module, s->name, 0, &node) != LY_SUCCESS) {
            lyerr(w, v, map, false);
            dry = true;
        } else {
            link_node(w, dparent, node, v);
        }
    }
    walk_mapping(w, s, node, dry, v);
}

static size_t
edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), prev[64], cur[64];
    if (la >= 63 || lb >= 63)
        return 99;
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, sizeof(size_t) * (lb + 1));
    }
    return prev[lb];
}

static bool
is_data_node(const struct lysc_node *s)
{
    return s && (s->nodetype & (LYS_CONTAINER | LYS_LEAF | LYS_LEAFLIST | LYS_LIST)) &&
           (s->flags & LYS_CONFIG_W);
}

/* An unknown key: say what was meant, and never show the value (it may be a secret). */
static void
unknown_key(struct walk *w, const struct lysc_node *sparent, struct fs_ynode *k,
            struct fs_ynode *map)
{
    const struct lysc_node *c = NULL, *best = NULL;
    size_t bestd = 3;
    char fname[80], ename[80];
    bool has_file = false, has_env = false;

    snprintf(fname, sizeof(fname), "%s_file", k->str);
    snprintf(ename, sizeof(ename), "%s_env", k->str);
    while ((c = lys_getnext(c, sparent, sparent ? NULL : w->sc->core->compiled, 0))) {
        size_t d;
        if (!is_data_node(c))
            continue;
        if (!strcmp(c->name, fname))
            has_file = true;
        if (!strcmp(c->name, ename))
            has_env = true;
        d = edit_distance(k->str, c->name);
        if (d < bestd) {
            bestd = d;
            best = c;
        }
    }
    if (has_file || has_env)
        werr(w, k, map, "unknown key; secrets are not written inline: use %s%s%s",
             has_file ? fname : "", has_file && has_env ? " or " : "", has_env ? ename : "");
    else if (best && !fs_cfg_key_hidden(k->str))
        werr(w, k, map, "unknown key (did you mean %s?)", best->name);
    else
        werr(w, k, map, "unknown key");
}

/* The choice/case ancestors of s below sparent: a key picks the case of each. */
static const struct lysc_node *
conflicting_case(const struct lysc_node *a, const struct lysc_node *b,
                 const struct lysc_node *sparent)
{
    for (const struct lysc_node *ca = a->parent; ca && ca != sparent; ca = ca->parent) {
        if (ca->nodetype != LYS_CASE)
            continue;
        for (const struct lysc_node *cb = b->parent; cb && cb != sparent; cb = cb->parent) {
            if (cb->nodetype == LYS_CASE && cb != ca && cb->parent == ca->parent)
                return ca->parent; /* same choice, different cases */
        }
    }
    return NULL;
}

static bool
under(const struct lysc_node *s, const struct lysc_node *anc)
{
    for (; s; s = s->parent)
        if (s == anc)
            return true;
    return false;
}

struct seen_node {
    const struct lysc_node *s;
    const struct fs_ynode *k;
};

static void
check_mandatory(struct walk *w, const struct lysc_node *sparent, struct fs_ynode *map,
                const struct seen_node *seen, size_t nseen)
{
    const struct lysc_node *c = NULL;
    const struct fs_ynode *at = map;

    while ((c = lys_getnext(c, sparent, sparent ? NULL : w->sc->core->compiled,
                            LYS_GETNEXT_WITHCHOICE))) {
        bool present = false;
        if (!(c->flags & LYS_MAND_TRUE) || lysc_is_key(c))
            continue;
        for (size_t i = 0; i < nseen; i++)
            if (under(seen[i].s, c))
                present = true;
        if (present)
            continue;
        if (c->nodetype == LYS_CHOICE) {
            char names[256];
            size_t o = 0;
            const struct lysc_node *d = NULL;
            names[0] = '\0';
            while ((d = lys_getnext(d, c, NULL, 0)) && o < sizeof(names))
                o += (size_t)snprintf(names + o, sizeof(names) - o, "%s%s", o ? " or " : "",
                                      d->name);
            werr(w, at, map, "needs %s", names);
        } else if (c->nodetype & (LYS_LEAF | LYS_CONTAINER | LYS_ANYDATA)) {
            werr(w, at, map, "missing required key \"%s\"", c->name);
        }
    }
}

/* A mapping against the children of sparent (NULL: the module's top level). */
static void
walk_mapping(struct walk *w, const struct lysc_node *sparent, struct lyd_node *dparent, bool dry,
             struct fs_ynode *map)
{
    struct seen_node *seen = calloc(map->n / 2 + 1, sizeof(*seen));
    size_t nseen = 0;

    if (!seen) {
        w->errs->oom = true;
        return;
    }
    for (size_t i = 0; i + 1 < map->n && !fs_cfg_errs_full(w->errs); i += 2) {
        struct fs_ynode *k = map->kids[i], *v = map->kids[i + 1];
        const struct lysc_node *s;
        const struct seen_node *prev = NULL;
        const struct lysc_node *choice = NULL;
        size_t old;

        if (k->kind != FS_Y_SCALAR) {
            werr(w, k, map, "keys must be plain text, not %s", fs_ynode_kind_name(k));
            continue;
        }
        s = fs_cfg_schema_child(w->sc, sparent, k->str, k->len);
        old = path_push(w, false, k->str, k->len);
        if (!is_data_node(s) && absent_driver(w, sparent, k)) {
            werr(w, k, map, "this build has no %s driver", k->str);
            path_pop(w, old);
            continue;
        }
        if (!is_data_node(s)) {
            unknown_key(w, sparent, k, map);
            path_pop(w, old);
            continue;
        }
        for (size_t j = 0; j < nseen && !prev && !choice; j++) {
            if (seen[j].s == s)
                prev = &seen[j];
            else
                choice = conflicting_case(s, seen[j].s, sparent) ? seen[j].s : NULL;
        }
        if (prev) {
            werr(w, k, map, "duplicate key (first at %u:%u)", prev->k->line, prev->k->col);
        } else if (choice) {
            werr(w, k, map, "cannot be combined with %s", choice->name);
        } else {
            seen[nseen++] = (struct seen_node){s, k};
            if (sparent && sparent->nodetype == LYS_LIST && lysc_is_key(s)) {
                /* created with the list entry */
            } else if (s->nodetype == LYS_LEAF) {
                walk_leaf(w, s, dparent, dry, v, map);
            } else if (s->nodetype == LYS_CONTAINER) {
                walk_container(w, s, dparent, dry, v, map);
            } else if (s->nodetype == LYS_LIST) {
                walk_list(w, s, dparent, dry, v, map);
            } else if (s->nodetype == LYS_LEAFLIST) {
                walk_leaflist(w, s, dparent, dry, v, map);
            }
        }
        path_pop(w, old);
    }
    if (!fs_cfg_errs_full(w->errs))
        check_mandatory(w, sparent, map, seen, nseen);
    free(seen);
}

void
fs_cfg_walk(const struct fs_cfg_schema *sc, const struct fs_config_opts *opts,
            struct fs_ynode *root, struct fs_cfg_errs *errs, struct lyd_node **tree)
{
    struct walk w;

    *tree = NULL;
    if (!root || fs_ynode_is_null(root)) {
        fs_cfg_err_add(errs, 1, 1, "", "the configuration is empty");
        return;
    }
    if (root->kind != FS_Y_MAP) {
        fs_cfg_err_add(errs, root->line, root->col, "",
                       "expected a mapping of settings at the top level, got %s",
                       fs_ynode_kind_name(root));
        return;
    }
    memset(&w, 0, sizeof(w));
    w.sc = sc;
    w.opts = opts;
    w.errs = errs;
    walk_mapping(&w, NULL, NULL, false, root);
    *tree = w.tree;
}
