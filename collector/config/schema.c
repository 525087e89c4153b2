/* The libyang context of a configuration: core module + driver modules; see schema.h. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libyang/libyang.h>

#include "config/schema.h"
#include "util/log.h"

/* The core module text, generated from schemas/fabricscope-config.yang at build time. */
extern const char fs_yang_module_text[];

/* One context per distinct set of driver modules (compared by text, in order). */
struct cached_schema {
    struct cached_schema *next;
    size_t n;
    char **texts; /* copies of the driver modules' texts */
    struct fs_cfg_schema sc;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cached_schema *g_cache;
static pthread_once_t g_log_once = PTHREAD_ONCE_INIT;

static void
yang_log(LY_LOG_LEVEL level, const char *msg, const char *path)
{
    enum fs_log_level lvl = level == LY_LLERR   ? FS_LOG_ERROR
                            : level == LY_LLWRN ? FS_LOG_WARN
                                                : FS_LOG_DEBUG;
    if (path)
        fs_log(lvl, "yang", "%s (%s)", msg, path);
    else
        fs_log(lvl, "yang", "%s", msg);
}

static void
log_init(void)
{
    /* libyang's own messages go to the project log; parses collect theirs instead. */
    ly_set_log_clb(yang_log, 1);
}

const struct lysc_node *
fs_cfg_schema_child(const struct fs_cfg_schema *sc, const struct lysc_node *sparent,
                    const char *name, size_t len)
{
    const struct lysc_node *c = NULL;

    while ((c = lys_getnext(c, sparent, sparent ? NULL : sc->core->compiled, 0)))
        if (strlen(c->name) == len && !memcmp(c->name, name, len))
            return c;
    return NULL;
}

static size_t
n_blocks(const struct fs_config_opts *opts)
{
    return opts ? opts->n_blocks : 0;
}

static bool
same_modules(const struct cached_schema *c, const struct fs_config_opts *opts)
{
    if (c->n != n_blocks(opts))
        return false;
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->texts[i], opts->blocks[i]->yang_module))
            return false;
    return true;
}

/* Checks that driver module mod adds exactly its container name under targets. */
static int
check_block_module(const struct fs_cfg_schema *sc, const struct lys_module *mod, const char *name,
                   char *errbuf, size_t errlen)
{
    const struct lysc_node *c = NULL;
    size_t added = 0;
    bool found = false;

    while ((c = lys_getnext(c, sc->targets, NULL, LYS_GETNEXT_WITHCHOICE))) {
        if (c->module != mod)
            continue;
        added++;
        if (c->nodetype == LYS_CONTAINER && !strcmp(c->name, name))
            found = true;
    }
    if (!found || added != 1) {
        snprintf(errbuf, errlen,
                 "driver %s: its YANG module must add exactly one container \"%s\" under targets",
                 name, name);
        return -1;
    }
    if (mod->compiled && mod->compiled->data) {
        snprintf(errbuf, errlen, "driver %s: its YANG module must not add top-level keys", name);
        return -1;
    }
    return 0;
}

static struct cached_schema *
schema_new(const struct fs_config_opts *opts, char *errbuf, size_t errlen)
{
    struct cached_schema *c = calloc(1, sizeof(*c));
    struct lys_module *mod = NULL;
    size_t n = n_blocks(opts);

    if (!c || (n && !(c->texts = calloc(n, sizeof(*c->texts))))) {
        snprintf(errbuf, errlen, "out of memory");
        goto fail;
    }
    for (c->n = 0; c->n < n; c->n++)
        if (!(c->texts[c->n] = strdup(opts->blocks[c->n]->yang_module))) {
            snprintf(errbuf, errlen, "out of memory");
            goto fail;
        }
    /* PRIV_PARSED: lysc_node.priv points at the parsed node, whose type name tells the
     * walker which leaves are durations and sizes. */
    if (ly_ctx_new(NULL, LY_CTX_NO_YANGLIBRARY | LY_CTX_SET_PRIV_PARSED, &c->sc.ctx) !=
        LY_SUCCESS) {
        snprintf(errbuf, errlen, "cannot create the libyang context");
        goto fail;
    }
    if (lys_parse_mem(c->sc.ctx, fs_yang_module_text, LYS_IN_YANG, &mod) != LY_SUCCESS) {
        snprintf(errbuf, errlen, "the built-in YANG module does not compile: %s",
                 ly_errmsg(c->sc.ctx) ? ly_errmsg(c->sc.ctx) : "?");
        goto fail;
    }
    c->sc.core = mod;
    for (size_t i = 0; i < n; i++) {
        const struct fs_cfg_block_ops *ops = opts->blocks[i];
        if (lys_parse_mem(c->sc.ctx, ops->yang_module, LYS_IN_YANG, &mod) != LY_SUCCESS) {
            snprintf(errbuf, errlen, "driver %s: its YANG module does not compile: %s", ops->name,
                     ly_errmsg(c->sc.ctx) ? ly_errmsg(c->sc.ctx) : "?");
            goto fail;
        }
        /* Compiling a module may recompile the others: look targets up afterwards. */
        c->sc.targets = lys_find_child(NULL, c->sc.core, "targets", 0, LYS_LIST, 0);
        if (!c->sc.targets || check_block_module(&c->sc, mod, ops->name, errbuf, errlen))
            goto fail;
    }
    c->sc.targets = lys_find_child(NULL, c->sc.core, "targets", 0, LYS_LIST, 0);
    if (!c->sc.targets) {
        snprintf(errbuf, errlen, "the built-in YANG module has no targets list");
        goto fail;
    }
    ly_err_clean(c->sc.ctx, NULL);
    return c;
fail:
    if (c) {
        if (c->sc.ctx)
            ly_ctx_destroy(c->sc.ctx);
        for (size_t i = 0; i < c->n; i++)
            free(c->texts[i]);
        free(c->texts);
        free(c);
    }
    return NULL;
}

const struct fs_cfg_schema *
fs_cfg_schema_get(const struct fs_config_opts *opts, char *errbuf, size_t errlen)
{
    struct cached_schema *c;
    uint32_t quiet = LY_LOSTORE_LAST;

    pthread_once(&g_log_once, log_init);
    pthread_mutex_lock(&g_lock);
    for (c = g_cache; c; c = c->next)
        if (same_modules(c, opts))
            break;
    if (!c) {
        /* Compile problems are reported through errbuf, not the log. */
        ly_temp_log_options(&quiet);
        c = schema_new(opts, errbuf, errlen);
        ly_temp_log_options(NULL);
        if (c) {
            c->next = g_cache;
            g_cache = c;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return c ? &c->sc : NULL;
}

/* Standalone documents (fs_cfg_doc_load): one context per module text, made once. */
struct cached_doc {
    struct cached_doc *next;
    const char *text; /* static text of the caller, compared by address */
    struct fs_cfg_schema sc;
};

static struct cached_doc *g_docs;

const struct fs_cfg_schema *
fs_cfg_schema_doc(const char *module_text, char *errbuf, size_t errlen)
{
    struct cached_doc *c;
    uint32_t quiet = LY_LOSTORE_LAST;
    struct lys_module *mod = NULL;

    pthread_once(&g_log_once, log_init);
    pthread_mutex_lock(&g_lock);
    for (c = g_docs; c; c = c->next)
        if (c->text == module_text)
            break;
    if (c)
        goto out;
    ly_temp_log_options(&quiet);
    c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(errbuf, errlen, "out of memory");
    } else if (ly_ctx_new(NULL, LY_CTX_NO_YANGLIBRARY | LY_CTX_SET_PRIV_PARSED, &c->sc.ctx) !=
               LY_SUCCESS) {
        snprintf(errbuf, errlen, "cannot create the libyang context");
    } else if (lys_parse_mem(c->sc.ctx, fs_yang_module_text, LYS_IN_YANG, NULL) != LY_SUCCESS ||
               lys_parse_mem(c->sc.ctx, module_text, LYS_IN_YANG, &mod) != LY_SUCCESS) {
        snprintf(errbuf, errlen, "the built-in YANG module does not compile: %s",
                 ly_errmsg(c->sc.ctx) ? ly_errmsg(c->sc.ctx) : "?");
    } else {
        /* The document's own module is the top level the walker reads; the core only
         * lends its types and extensions, and no driver block can be written here. */
        c->sc.core = mod;
        c->sc.targets = NULL;
        c->text = module_text;
        ly_err_clean(c->sc.ctx, NULL);
        c->next = g_docs;
        g_docs = c;
    }
    if (c && !c->text) {
        if (c->sc.ctx)
            ly_ctx_destroy(c->sc.ctx);
        free(c);
        c = NULL;
    }
    ly_temp_log_options(NULL);
out:
    pthread_mutex_unlock(&g_lock);
    return c ? &c->sc : NULL;
}
