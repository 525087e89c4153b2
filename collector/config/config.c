/*
 * Configuration entry points: reading a file (or secret) without blocking, the stages
 * of a parse (YAML -> walk -> model -> libyang validation) and the report of every
 * problem. The layers below are described in config.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libyang/libyang.h>

#include "config/config.h"
#include "config/model.h"
#include "config/schema.h"
#include "config/tree.h"
#include "config/yaml.h"

/* libyang 2.1 gives the location as text: 'Schema location "...", data location "...",
 * line number N.' Extracts the data path into a malloc'd string, or NULL. */
static char *
data_path_of(const char *loc)
{
    const char *b, *e;
    char *p;

    if (!loc)
        return NULL;
    b = strstr(loc, "ata location \"");
    if (!b)
        return loc[0] == '/' ? strdup(loc) : NULL;
    b += strlen("ata location \"");
    e = strstr(b, "\", line number");
    if (!e)
        e = strrchr(b, '"');
    if (!e || e < b)
        return NULL;
    p = strndup(b, (size_t)(e - b));
    return p;
}

/* libyang's validation stops at its first problem; place it in the file. */
static void
report_libyang(struct ly_ctx *ctx, struct lyd_node *tree, struct fs_cfg_errs *errs)
{
    const struct ly_err_item *e = ly_err_last(ctx);
    char *p = e ? data_path_of(e->path) : NULL;
    char msg[400];
    struct lyd_node *found = NULL;

    snprintf(msg, sizeof(msg), "%s", e && e->msg ? e->msg : "invalid configuration");
    ly_err_clean(ctx, NULL);
    while (p && *p && !found) {
        char *slash;
        if (lyd_find_path(tree, p, 0, &found) == LY_SUCCESS && found)
            break;
        found = NULL;
        slash = strrchr(p, '/');
        if (!slash)
            break;
        *slash = '\0';
    }
    ly_err_clean(ctx, NULL);
    if (found)
        fs_cfg_node_err(errs, found, true, "%s", msg);
    else
        fs_cfg_err_add(errs, 1, 1, "", "%s", msg);
    free(p);
}

int
fs_config_parse(const char *text, size_t len, const char *filename,
                const struct fs_config_opts *opts, struct fs_config **out, char **errors)
{
    struct fs_cfg_errs errs = {0};
    struct fs_ynode *root = NULL;
    struct lyd_node *tree = NULL;
    struct fs_config *cfg = NULL;
    const struct fs_cfg_schema *sc;
    char why[256] = "";
    uint32_t quiet = LY_LOSTORE_LAST;
    int rc = 0;

    *out = NULL;
    *errors = NULL;
    if (!filename)
        filename = "(config)";
    sc = fs_cfg_schema_get(opts, why, sizeof(why));
    /* Problems are collected here, not printed by libyang. */
    ly_temp_log_options(&quiet);

    if (len > FS_CONFIG_MAX_BYTES) {
        fs_cfg_err_add(&errs, 1, 1, "", "the file is larger than %d bytes (1 MiB)",
                       FS_CONFIG_MAX_BYTES);
        goto report;
    }
    if (!text && len) {
        fs_cfg_err_add(&errs, 1, 1, "", "no text given");
        goto report;
    }
    if (!sc) {
        fs_cfg_err_add(&errs, 1, 1, "", "%s", why);
        goto report;
    }
    if (fs_cfg_read_yaml(text ? text : "", len, &errs, &root) < 0 || fs_cfg_errs_any(&errs))
        goto report;
    fs_cfg_walk(sc, opts, root, &errs, &tree);
    if (errs.oom)
        goto report;
    /* Defaults make the model see what the collector will use. */
    if (lyd_new_implicit_all(&tree, sc->ctx, LYD_IMPLICIT_NO_STATE, NULL) != LY_SUCCESS) {
        ly_err_clean(sc->ctx, NULL);
        errs.oom = true;
        goto report;
    }
    cfg = calloc(1, sizeof(*cfg));
    if (!cfg || !(cfg->path = strdup(filename)) ||
        fs_cfg_model_build(tree, opts, cfg, &errs) != 0) {
        errs.oom = true;
        goto report;
    }
    if (fs_cfg_errs_any(&errs))
        goto report;
    if (lyd_validate_all(&tree, sc->ctx, LYD_VALIDATE_PRESENT, NULL) != LY_SUCCESS) {
        report_libyang(sc->ctx, tree, &errs);
        goto report;
    }
    *out = cfg;
    cfg = NULL;

report:
    if (fs_cfg_errs_any(&errs)) {
        rc = (int)(errs.n + errs.dropped) + (errs.n == 0);
        *errors = fs_cfg_errs_format(&errs, filename);
    }
    fs_config_free(cfg);
    lyd_free_all(tree);
    fs_ynode_free(root);
    fs_cfg_errs_free(&errs);
    ly_temp_log_options(NULL);
    return rc;
}

/*
 * Opens path for reading without ever blocking: O_NONBLOCK makes opening a FIFO with no
 * writer return at once (and a terminal never becomes ours), then anything but a
 * regular file is refused. Messages start with key ("targets[t].snmp.community_file:
 * /x is not a regular file"), or with the path when key is NULL.
 */
static int
open_regular(const char *path, const char *key, char *errbuf, size_t errlen)
{
    struct stat st;
    const char *why = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

    if (fd < 0 || fstat(fd, &st) != 0)
        why = strerror(errno);
    else if (!S_ISREG(st.st_mode))
        why = "is not a regular file";
    if (!why)
        return fd;
    if (fd >= 0 && key)
        snprintf(errbuf, errlen, "%s: %s %s", key, path, why);
    else if (fd >= 0)
        snprintf(errbuf, errlen, "%s: %s", path, why);
    else if (key)
        snprintf(errbuf, errlen, "%s: cannot open %s: %s", key, path, why);
    else
        snprintf(errbuf, errlen, "%s: cannot open: %s", path, why);
    if (fd >= 0)
        close(fd);
    return -1;
}

/* Reads up to len bytes; the count, or -1 with errno set. */
static ssize_t
read_full(int fd, char *buf, size_t len)
{
    size_t n = 0;
    while (n < len) {
        ssize_t r = read(fd, buf + n, len - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        n += (size_t)r;
    }
    return (ssize_t)n;
}

int
fs_config_load(const char *path, const struct fs_config_opts *opts, struct fs_config **out,
               char **errors)
{
    char *buf = NULL;
    ssize_t len;
    int fd = -1, rc = 1;
    char msg[600];

    *out = NULL;
    *errors = NULL;
    fd = open_regular(path, NULL, msg, sizeof(msg) - 1);
    if (fd < 0)
        goto fail;
    buf = malloc(FS_CONFIG_MAX_BYTES + 1);
    if (!buf) {
        snprintf(msg, sizeof(msg) - 1, "%s: out of memory", path);
        goto fail;
    }
    /* Read at most one byte past the limit: enough to refuse, whatever the file is. */
    len = read_full(fd, buf, FS_CONFIG_MAX_BYTES + 1);
    if (len < 0) {
        snprintf(msg, sizeof(msg) - 1, "%s: cannot read: %s", path, strerror(errno));
        goto fail;
    }
    rc = fs_config_parse(buf, (size_t)len, path, opts, out, errors);
    goto cleanup;
fail:
    strcat(msg, "\n");
    *errors = strdup(msg);
cleanup:
    if (fd >= 0)
        close(fd);
    free(buf);
    return rc;
}

/* The stages of fs_config_parse for a standalone document (see config.h). */
static int
doc_parse(const char *text, size_t len, const char *filename, const char *module_text,
          fs_cfg_doc_build_fn build, void *ctx, char **errors)
{
    struct fs_cfg_errs errs = {0};
    struct fs_ynode *root = NULL;
    struct lyd_node *tree = NULL;
    char why[256] = "";
    uint32_t quiet = LY_LOSTORE_LAST;
    int rc = 0;
    const struct fs_cfg_schema *sc = fs_cfg_schema_doc(module_text, why, sizeof(why));

    ly_temp_log_options(&quiet);
    if (len > FS_CONFIG_MAX_BYTES) {
        fs_cfg_err_add(&errs, 1, 1, "", "the file is larger than %d bytes (1 MiB)",
                       FS_CONFIG_MAX_BYTES);
        goto report;
    }
    if (!sc) {
        fs_cfg_err_add(&errs, 1, 1, "", "%s", why);
        goto report;
    }
    if (fs_cfg_read_yaml(text, len, &errs, &root) < 0 || fs_cfg_errs_any(&errs))
        goto report;
    fs_cfg_walk(sc, NULL, root, &errs, &tree);
    if (errs.oom || fs_cfg_errs_any(&errs))
        goto report;
    if (lyd_new_implicit_all(&tree, sc->ctx, LYD_IMPLICIT_NO_STATE, NULL) != LY_SUCCESS) {
        ly_err_clean(sc->ctx, NULL);
        errs.oom = true;
        goto report;
    }
    if (build(tree, ctx, &errs) != 0) {
        errs.oom = true;
        goto report;
    }
    if (fs_cfg_errs_any(&errs))
        goto report;
    if (lyd_validate_all(&tree, sc->ctx, LYD_VALIDATE_PRESENT, NULL) != LY_SUCCESS)
        report_libyang(sc->ctx, tree, &errs);
report:
    if (fs_cfg_errs_any(&errs)) {
        rc = (int)(errs.n + errs.dropped) + (errs.n == 0);
        *errors = fs_cfg_errs_format(&errs, filename);
    }
    lyd_free_all(tree);
    fs_ynode_free(root);
    fs_cfg_errs_free(&errs);
    ly_temp_log_options(NULL);
    return rc;
}

int
fs_cfg_doc_load(const char *path, const char *module_text, fs_cfg_doc_build_fn build, void *ctx,
                char **errors)
{
    char *buf = NULL;
    ssize_t len = 0;
    int fd, rc = 1;
    char msg[600];

    *errors = NULL;
    fd = open_regular(path, NULL, msg, sizeof(msg) - 1);
    if (fd >= 0 && !(buf = malloc(FS_CONFIG_MAX_BYTES + 1)))
        snprintf(msg, sizeof(msg) - 1, "%s: out of memory", path);
    else if (fd >= 0 && (len = read_full(fd, buf, FS_CONFIG_MAX_BYTES + 1)) < 0)
        snprintf(msg, sizeof(msg) - 1, "%s: cannot read: %s", path, strerror(errno));
    else if (fd >= 0)
        rc = doc_parse(buf, (size_t)len, path, module_text, build, ctx, errors);
    if (rc != 0 && !*errors) {
        strcat(msg, "\n");
        *errors = strdup(msg);
    }
    if (fd >= 0)
        close(fd);
    free(buf);
    return rc;
}

int
fs_file_read(const char *path, const char *key, size_t max, char **out, size_t *out_len,
             char *errbuf, size_t errlen)
{
    const char *who = key ? key : path;
    char *buf = NULL;
    int rc = -1, fd;
    ssize_t n = -1;

    *out = NULL;
    *out_len = 0;
    fd = open_regular(path, key, errbuf, errlen);
    if (fd < 0)
        goto cleanup;
    if (!(buf = malloc(max + 1))) {
        snprintf(errbuf, errlen, "%s: %s: out of memory", who, path);
        goto cleanup;
    }
    /* One byte past the limit is enough to refuse, whatever the file is. */
    n = read_full(fd, buf, max + 1);
    if (n < 0) {
        snprintf(errbuf, errlen, "%s: cannot read %s: %s", who, path, strerror(errno));
        goto cleanup;
    }
    if ((size_t)n > max) {
        snprintf(errbuf, errlen, "%s: %s is larger than %zu bytes", who, path, max);
        goto cleanup;
    }
    buf[n] = '\0';
    *out = buf;
    *out_len = (size_t)n;
    buf = NULL;
    rc = 0;
cleanup:
    if (fd >= 0)
        close(fd);
    if (buf)
        explicit_bzero(buf, max + 1); /* it may have held part of a key */
    free(buf);
    return rc;
}

/* ------------------------------------------------------------------------------------
 * Secrets
 */

static void
strip_newline(char *buf, size_t *n)
{
    if (*n && buf[*n - 1] == '\n')
        (*n)--;
    if (*n && buf[*n - 1] == '\r')
        (*n)--;
    buf[*n] = '\0';
}

int
fs_secret_read(const struct fs_secret_ref *ref, char *buf, size_t len, char *errbuf, size_t errlen)
{
    const char *key = ref && ref->key ? ref->key : "secret";
    int rc = -1, fd = -1;
    size_t n = 0;

    if (!buf || len < 2) {
        snprintf(errbuf, errlen, "%s: no room for the secret", key);
        goto cleanup;
    }
    buf[0] = '\0';
    if (ref && ref->file) {
        ssize_t r;
        fd = open_regular(ref->file, key, errbuf, errlen);
        if (fd < 0)
            goto cleanup;
        /* The buffer takes the secret, its newline (stripped) and the NUL. */
        r = read_full(fd, buf, len);
        if (r < 0) {
            snprintf(errbuf, errlen, "%s: cannot read %s: %s", key, ref->file, strerror(errno));
            goto cleanup;
        }
        n = (size_t)r;
        if (n == len) {
            char more;
            if (buf[n - 1] == '\n' && read(fd, &more, 1) == 0) {
                n--;
            } else {
                snprintf(errbuf, errlen, "%s: %s is longer than %zu bytes", key, ref->file,
                         len - 1);
                goto cleanup;
            }
        }
        strip_newline(buf, &n);
        if (memchr(buf, '\0', n)) {
            snprintf(errbuf, errlen, "%s: %s contains a NUL byte", key, ref->file);
            goto cleanup;
        }
        if (n == 0) {
            snprintf(errbuf, errlen, "%s: %s is empty", key, ref->file);
            goto cleanup;
        }
    } else if (ref && ref->env) {
        const char *v = getenv(ref->env);
        if (!v) {
            snprintf(errbuf, errlen, "%s: environment variable %s is not set", key, ref->env);
            goto cleanup;
        }
        n = strlen(v);
        if (n >= len) {
            snprintf(errbuf, errlen, "%s: environment variable %s is longer than %zu bytes", key,
                     ref->env, len - 1);
            goto cleanup;
        }
        memcpy(buf, v, n);
        strip_newline(buf, &n);
        if (n == 0) {
            snprintf(errbuf, errlen, "%s: environment variable %s is empty", key, ref->env);
            goto cleanup;
        }
    } else {
        snprintf(errbuf, errlen, "%s: no secret configured", key);
        goto cleanup;
    }
    rc = 0;
cleanup:
    if (fd >= 0)
        close(fd);
    if (rc != 0 && buf && len)
        explicit_bzero(buf, len);
    return rc;
}
