/*
 * fs-config-reference: writes docs/configuration.md, the reference of every
 * configuration key, from the YANG modules themselves (the core module and each
 * driver's), so the document cannot drift from what the collector accepts.
 *
 * usage: fs-config-reference OUT.md CORE.yang [DRIVER.yang ...]
 *
 * It walks the parsed modules (typedef names, defaults and descriptions as written):
 * the core module's keys, then for each driver module its block under a target (its
 * augment of /fsc:targets). Every key gets its YAML path, its type (typedef name, or
 * the built-in type with its range, length, pattern or enumeration), its default or an
 * example, and its description. Lists marked fsc:yaml-map are written as YAML mappings.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libyang/libyang.h>
#include <libyang/plugins_exts.h>

struct out {
    FILE *f;
    const struct lysp_module *core; /* for "fsc:" typedefs */
};

/* Text for a table cell: whitespace runs (YANG descriptions wrap) become one space,
 * and '|' is escaped. */
static void
cell(FILE *f, const char *s)
{
    bool space = false;
    for (; s && *s; s++) {
        if (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r') {
            space = true;
            continue;
        }
        if (space)
            fputc(' ', f);
        space = false;
        if (*s == '|')
            fputs("\\|", f);
        else
            fputc(*s, f);
    }
}

/* Code in a table cell: `...`, '|' escaped. */
static void
code(FILE *f, const char *s)
{
    fputc('`', f);
    for (; *s; s++)
        if (*s == '|')
            fputs("\\|", f);
        else
            fputc(*s, f);
    fputc('`', f);
}

static const struct lysp_tpdf *
find_typedef(const struct out *o, const struct lysp_module *pmod, const char *name)
{
    const struct lysp_module *m = pmod;
    const char *colon = strchr(name, ':');
    if (colon) {
        name = colon + 1;
        m = o->core;
    }
    LY_ARRAY_COUNT_TYPE i;
    for (i = 0; m && i < LY_ARRAY_COUNT(m->typedefs); i++)
        if (!strcmp(m->typedefs[i].name, name))
            return &m->typedefs[i];
    return NULL;
}

/* The restrictions of a type as words: "1..65535", "length 1..63", patterns, enums. */
static void
restrictions(FILE *f, const struct lysp_type *t)
{
    const char *sep = " ";
    if (t->range) {
        fprintf(f, "%s", sep);
        cell(f, t->range->arg.str);
        sep = ", ";
    }
    if (t->length) {
        fprintf(f, "%slength ", sep);
        cell(f, t->length->arg.str);
        sep = ", ";
    }
    LY_ARRAY_COUNT_TYPE i;
    LY_ARRAY_FOR(t->patterns, i)
    {
        const char *p = t->patterns[i].arg.str;
        bool invert = p[0] == LYSP_RESTR_PATTERN_NACK;
        fprintf(f, "%s%s ", sep, invert ? "not matching" : "matching");
        code(f, p + 1);
        sep = ", ";
    }
    if (t->enums) {
        fprintf(f, "%sone of ", sep);
        LY_ARRAY_FOR(t->enums, i)
        {
            if (i)
                fputs(", ", f);
            code(f, t->enums[i].name);
        }
    }
}

static void
type_text(const struct out *o, const struct lysp_module *pmod, const struct lysp_type *t)
{
    const struct lysp_tpdf *td = find_typedef(o, pmod, t->name);
    const char *colon = strchr(t->name, ':');
    if (td) {
        fprintf(o->f, "[%s](#type-%s)", colon ? colon + 1 : t->name, td->name);
        restrictions(o->f, t); /* a leaf may narrow its typedef */
        return;
    }
    fputs(!strcmp(t->name, "enumeration") ? "enumeration:" : t->name, o->f);
    restrictions(o->f, t);
}

/* An example value for a key without a default, from its type. */
static const char *
example_of(const struct out *o, const struct lysp_module *pmod, const struct lysp_type *t,
           char *buf, size_t len)
{
    static const char *const by_typedef[][2] = {
        {"duration", "10s"},
        {"size", "64MiB"},
        {"port", "161"},
        {"port-range", "50000-50999"},
        {"file-path", "/etc/fabricscope/secret"},
        {"env-name", "FS_SECRET"},
        {"host", "10.0.0.1"},
        {"name", "tor1"},
        {"regex", "^Eth1/"},
        {"label-name", "rack"},
        {"scale", "1"},
    };
    const char *name = strchr(t->name, ':') ? strchr(t->name, ':') + 1 : t->name;
    for (size_t i = 0; i < sizeof by_typedef / sizeof by_typedef[0]; i++)
        if (!strcmp(name, by_typedef[i][0]))
            return by_typedef[i][1];
    if (t->enums)
        return t->enums[0].name;
    if (!strcmp(name, "boolean"))
        return "true";
    if (t->range) {
        snprintf(buf, len, "%.*s", (int)strcspn(t->range->arg.str, ". |"), t->range->arg.str);
        return buf;
    }
    const struct lysp_tpdf *td = find_typedef(o, pmod, t->name);
    if (td)
        return example_of(o, pmod, &td->type, buf, len);
    return NULL;
}

static bool
is_yaml_map(const struct lysp_node *n, const char **value_leaf)
{
    LY_ARRAY_COUNT_TYPE i;
    LY_ARRAY_FOR(n->exts, i)
    {
        const char *nm = n->exts[i].name, *c = strchr(nm, ':');
        if (!strcmp(c ? c + 1 : nm, "yaml-map")) {
            *value_leaf = n->exts[i].argument;
            return true;
        }
    }
    return false;
}

static bool
is_yaml_position(const struct lysp_node *n)
{
    LY_ARRAY_COUNT_TYPE i;
    LY_ARRAY_FOR(n->exts, i)
    {
        const char *nm = n->exts[i].name, *c = strchr(nm, ':');
        if (!strcmp(c ? c + 1 : nm, "yaml-position"))
            return true;
    }
    return false;
}

static void
row_start(FILE *f, const char *path)
{
    fputs("| ", f);
    code(f, path);
    fputs(" | ", f);
}

static void
row_end(FILE *f, const char *dsc)
{
    fputs(" | ", f);
    cell(f, dsc ? dsc : "");
    fputs(" |\n", f);
}

static void walk(const struct out *o, const struct lysp_module *pmod, const struct lysp_node *n,
                 const char *prefix);

static void
leaf_row(const struct out *o, const struct lysp_module *pmod, const struct lysp_node *n,
         const char *path)
{
    FILE *f = o->f;
    bool leaflist = n->nodetype == LYS_LEAFLIST;
    const struct lysp_type *t = leaflist ? &((const struct lysp_node_leaflist *)n)->type
                                         : &((const struct lysp_node_leaf *)n)->type;
    const char *dflt = leaflist ? NULL : ((const struct lysp_node_leaf *)n)->dflt.str;
    const char *units = leaflist ? NULL : ((const struct lysp_node_leaf *)n)->units;
    char buf[64];

    row_start(f, path);
    if (leaflist)
        fputs("list of ", f);
    type_text(o, pmod, t);
    if (units)
        fprintf(f, " (%s)", units);
    fputs(" | ", f);
    if (!dflt && !leaflist) {
        const struct lysp_tpdf *td = find_typedef(o, pmod, t->name);
        if (td && td->dflt.str)
            dflt = td->dflt.str;
    }
    bool is_key = n->parent && n->parent->nodetype == LYS_LIST &&
                  !strcmp(((const struct lysp_node_list *)n->parent)->key, n->name);
    if ((n->flags & LYS_MAND_TRUE) || is_key) {
        fputs(is_key ? "**required** (the entry's key)" : "**required**", f);
        const char *ex = example_of(o, pmod, t, buf, sizeof buf);
        if (ex) {
            fputs(", e.g. ", f);
            code(f, ex);
        }
    } else if (dflt) {
        code(f, dflt);
    } else {
        const char *ex = example_of(o, pmod, t, buf, sizeof buf);
        fputs("none", f);
        if (ex) {
            fputs(leaflist ? ", e.g. [" : ", e.g. ", f);
            code(f, ex);
            if (leaflist)
                fputs("]", f);
        }
    }
    row_end(f, n->dsc);
}

static void
walk_children(const struct out *o, const struct lysp_module *pmod, const struct lysp_node *first,
              const char *prefix)
{
    for (const struct lysp_node *c = first; c; c = c->next)
        walk(o, pmod, c, prefix);
}

static void
walk(const struct out *o, const struct lysp_module *pmod, const struct lysp_node *n,
     const char *prefix)
{
    FILE *f = o->f;
    char path[512];
    const char *vleaf = NULL;

    snprintf(path, sizeof path, "%s%s%s", prefix, prefix[0] ? "." : "", n->name);
    switch (n->nodetype) {
    case LYS_LEAF:
    case LYS_LEAFLIST:
        leaf_row(o, pmod, n, path);
        break;
    case LYS_CONTAINER: {
        const struct lysp_node_container *c = (const struct lysp_node_container *)n;
        row_start(f, path);
        fputs(c->presence ? "mapping (optional block)" : "mapping", f);
        fputs(" | ", f);
        fputs(c->presence ? "absent" : "its keys' defaults", f);
        row_end(f, n->dsc ? n->dsc : c->presence);
        walk_children(o, pmod, lysp_node_child(n), path);
        break;
    }
    case LYS_LIST: {
        const struct lysp_node_list *l = (const struct lysp_node_list *)n;
        if (is_yaml_map(n, &vleaf)) {
            const struct lysp_node *k = NULL, *v = NULL;
            for (const struct lysp_node *c = l->child; c; c = c->next) {
                if (!strcmp(c->name, l->key))
                    k = c;
                else if (vleaf && !strcmp(c->name, vleaf))
                    v = c;
            }
            row_start(f, path);
            fputs("mapping of ", f);
            if (k)
                type_text(o, pmod, &((const struct lysp_node_leaf *)k)->type);
            fputs(" to ", f);
            if (v)
                type_text(o, pmod, &((const struct lysp_node_leaf *)v)->type);
            if (l->flags & LYS_SET_MAX)
                fprintf(f, ", at most %u entries", l->max);
            /* The label-like example only fits maps keyed by names; a numeric key
             * (the sflow block's ifIndex map) gives its own in the description. */
            if (k && strstr(((const struct lysp_node_leaf *)k)->type.name, "int")) {
                fputs(" | none", f);
            } else {
                fputs(" | none, e.g. ", f);
                code(f, "{ rack: r12 }");
            }
            row_end(f, n->dsc);
            break;
        }
        bool by_pos = is_yaml_position(n);
        row_start(f, path);
        if (by_pos)
            fputs("list of mappings", f);
        else
            fprintf(f, "list of mappings, each with a unique `%s`", l->key);
        if (l->flags & LYS_SET_MAX)
            fprintf(f, ", at most %u", l->max);
        fputs(" | none", f);
        row_end(f, n->dsc);
        snprintf(path, sizeof path, "%s%s%s[]", prefix, prefix[0] ? "." : "", n->name);
        /* A position key is never written: no row of its own. */
        for (const struct lysp_node *c = l->child; c; c = c->next)
            if (!by_pos || strcmp(c->name, l->key) != 0)
                walk(o, pmod, c, path);
        /* Driver blocks of a target come from the drivers' modules: own sections. */
        break;
    }
    case LYS_CHOICE: {
        /* The choice itself is no YAML key: its row names the keys it chooses between. */
        char alts[400] = "";
        size_t al = 0;
        for (const struct lysp_node *c = lysp_node_child(n); c; c = c->next) {
            const struct lysp_node *x = c->nodetype == LYS_CASE ? lysp_node_child(c) : c;
            for (; x; x = c->nodetype == LYS_CASE ? x->next : NULL) {
                int w = snprintf(alts + al, sizeof alts - al, "%s%s", al ? " | " : "", x->name);
                if (w > 0 && (size_t)w < sizeof alts - al)
                    al += (size_t)w;
            }
        }
        snprintf(path, sizeof path, "%s%s{%s}", prefix, prefix[0] ? "." : "", alts);
        row_start(f, path);
        fputs(n->flags & LYS_MAND_TRUE ? "exactly one of these keys" : "at most one of these keys",
              f);
        fputs(" | — ", f);
        row_end(f, n->dsc);
        for (const struct lysp_node *c = lysp_node_child(n); c; c = c->next) {
            if (c->nodetype == LYS_CASE)
                walk_children(o, pmod, lysp_node_child(c), prefix);
            else
                walk(o, pmod, c, prefix);
        }
        break;
    }
    case LYS_USES: {
        /* A grouping's keys are the using node's own (the path does not name it). */
        const char *gname = ((const struct lysp_node_uses *)n)->name;
        for (const struct lysp_node_grp *g = pmod->groupings; g;
             g = (const struct lysp_node_grp *)g->next)
            if (!strcmp(g->name, gname))
                walk_children(o, pmod, lysp_node_child(&g->node), prefix);
        break;
    }
    default:
        break;
    }
}

static void
types_table(const struct out *o, const struct lysp_module *m)
{
    FILE *f = o->f;
    LY_ARRAY_COUNT_TYPE i;
    LY_ARRAY_FOR(m->typedefs, i)
    {
        const struct lysp_tpdf *td = &m->typedefs[i];
        fprintf(f, "| <a id=\"type-%s\"></a>`%s` | %s", td->name, td->name, td->type.name);
        restrictions(f, &td->type);
        fputs(" | ", f);
        cell(f, td->dsc ? td->dsc : "");
        fputs(" |\n", f);
    }
}

static const char *
base_name(const char *path)
{
    const char *s = strstr(path, "schemas/");
    if (!s)
        s = strstr(path, "drivers/");
    return s ? s : path;
}

int
main(int argc, char **argv)
{
    struct ly_ctx *ctx = NULL;
    const struct lys_module *mods[16];
    size_t n_mods = 0;
    FILE *f = NULL;
    int rc = 1;

    if (argc < 3 || argc - 2 > 16) {
        fprintf(stderr, "usage: fs-config-reference OUT.md CORE.yang [DRIVER.yang ...]\n");
        return 2;
    }
    if (ly_ctx_new(NULL, 0, &ctx) != LY_SUCCESS) {
        fprintf(stderr, "fs-config-reference: no libyang context\n");
        return 1;
    }
    for (int i = 2; i < argc; i++) {
        struct lys_module *m = NULL;
        if (lys_parse_path(ctx, argv[i], LYS_IN_YANG, &m) != LY_SUCCESS || !m || !m->parsed) {
            fprintf(stderr, "fs-config-reference: %s: not a YANG module libyang takes\n", argv[i]);
            goto out;
        }
        mods[n_mods++] = m;
    }
    f = fopen(argv[1], "w");
    if (!f) {
        perror(argv[1]);
        goto out;
    }
    struct out o = {f, mods[0]->parsed};

    fprintf(f,
            "# Configuration reference\n\n"
            "<!-- Generated from the YANG modules by tools/config_reference.c "
            "(cmake --build build --target config-reference); do not edit. -->\n\n"
            "fabricscope reads one YAML file (`fabricscope -c FILE`; check it with "
            "`fabricscope --check-config FILE`). Its keys are the node names of the YANG "
            "module `%s` (%s); each driver adds its block under a target from its own module. "
            "A key path `targets[].snmp.port` means the key `port` of the `snmp` block of an "
            "entry of the `targets` list. A value of the wrong type, out of range or not "
            "matching its pattern is refused with the file, line, column and key path.\n\n",
            mods[0]->name, base_name(argv[2]));
    fprintf(f, "## Types\n\n| type | definition | meaning |\n|---|---|---|\n");
    types_table(&o, mods[0]->parsed);
    for (size_t i = 1; i < n_mods; i++)
        types_table(&o, mods[i]->parsed);
    fprintf(f, "\n## Keys of `%s`\n\n", mods[0]->name);
    fprintf(f, "| key | type | default | description |\n|---|---|---|---|\n");
    for (const struct lysp_node *n = mods[0]->parsed->data; n; n = n->next)
        walk(&o, mods[0]->parsed, n, "");
    for (size_t i = 1; i < n_mods; i++) {
        const struct lysp_module *pm = mods[i]->parsed;
        for (const struct lysp_node_augment *a = pm->augments; a; a = a->next) {
            const char *t = strrchr(a->nodeid, ':');
            if (!t || strcmp(t + 1, "targets"))
                continue;
            for (const struct lysp_node *c = a->child; c; c = c->next) {
                fprintf(f, "\n## Target block `%s` (`%s`, %s)\n\n", c->name, mods[i]->name,
                        base_name(argv[i + 2]));
                if (mods[i]->parsed->mod->dsc) {
                    cell(f, mods[i]->parsed->mod->dsc);
                    fputs("\n\n", f);
                }
                fprintf(f, "| key | type | default | description |\n|---|---|---|---|\n");
                walk(&o, pm, c, "targets[]");
            }
        }
    }
    rc = ferror(f) ? 1 : 0;
out:
    if (f && fclose(f) != 0)
        rc = 1;
    ly_ctx_destroy(ctx);
    return rc;
}
