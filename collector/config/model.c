/*
 * The configuration model: semantic checks and building struct fs_config in one pass
 * over the walked data tree, so every problem keeps its line and column; see model.h.
 * Driver blocks are handed to their drivers' config_build(); nothing here knows a
 * driver's name or keys.
 */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libyang/libyang.h>

#include "config/block.h"
#include "config/config.h"
#include "config/model.h"
#include "config/parse.h"
#include "config/tree.h"
#include "topology/topology.h"

#define US_PER_S INT64_C(1000000)

static int
dup_str(char **dst, const char *src)
{
    if (!src)
        return 0;
    *dst = strdup(src);
    return *dst ? 0 : -1;
}

static size_t
count_named(const struct lyd_node *first, const char *name)
{
    size_t n = 0;
    for (const struct lyd_node *c = first; c; c = c->next)
        if (c->schema && !strcmp(c->schema->name, name))
            n++;
    return n;
}

/* ------------------------------------------------------------------------------------
 * Flow rules
 */

/* A port range leaf: checked, and stored in *lo and *hi when good. */
static void
port_range(const struct lyd_node *rule, const char *name, uint16_t *lo, uint16_t *hi,
           struct fs_cfg_errs *errs)
{
    const struct lyd_node *n = fs_cfg_kid(rule, name);
    unsigned a, b;

    if (!n)
        return;
    if (fs_cfg_parse_port_range(lyd_get_value(n), &a, &b) != 0 || a == 0 || b == 0) {
        fs_cfg_node_err(errs, n, false, "%s: ports must be in 1..65535", lyd_get_value(n));
    } else if (a > b) {
        fs_cfg_node_err(errs, n, false, "%s is backwards: %u is greater than %u", lyd_get_value(n),
                        a, b);
    } else {
        *lo = (uint16_t)a;
        *hi = (uint16_t)b;
    }
}

static int
build_flow_rule(const struct lyd_node *n, struct fs_flow_rule *r, struct fs_cfg_errs *errs)
{
    const char *proto = fs_cfg_cval(n, "protocol");
    const char *v;

    if (fs_cfg_strdup(&r->name, n, "name"))
        return -1;
    r->protocol = !proto ? FS_PROTO_ANY : !strcmp(proto, "tcp") ? FS_PROTO_TCP : FS_PROTO_UDP;
    if ((v = fs_cfg_cval(n, "dst_port")))
        r->dst_lo = r->dst_hi = (uint16_t)strtoul(v, NULL, 10);
    port_range(n, "dst_ports", &r->dst_lo, &r->dst_hi, errs);
    if ((v = fs_cfg_cval(n, "src_port")))
        r->src_lo = r->src_hi = (uint16_t)strtoul(v, NULL, 10);
    port_range(n, "src_ports", &r->src_lo, &r->src_hi, errs);
    r->ecn_ce = (v = fs_cfg_cval(n, "ecn")) && !strcmp(v, "ce");
    r->tc = (int)fs_cfg_long(n, "tc", -1);
    return 0;
}

/* ------------------------------------------------------------------------------------
 * Targets
 */

static int
kv_cmp(const void *a, const void *b)
{
    return strcmp(((const struct fs_kv *)a)->key, ((const struct fs_kv *)b)->key);
}

/* Compiles the interfaces regex name into *re; the string is set only once its regex
 * compiled (fs_config_free relies on it). */
static int
iface_regex(const struct lyd_node *ifs, const char *name, char **str, regex_t *re,
            struct fs_cfg_errs *errs)
{
    const struct lyd_node *n = fs_cfg_kid(ifs, name);
    int r;

    if (!n)
        return 0;
    r = regcomp(re, lyd_get_value(n), REG_EXTENDED | REG_NOSUB);
    if (r != 0) {
        char why[128];
        regerror(r, re, why, sizeof(why));
        fs_cfg_node_err(errs, n, false, "not a POSIX extended regular expression: %s", why);
        return 0;
    }
    if (dup_str(str, lyd_get_value(n))) {
        regfree(re);
        return -1;
    }
    return 0;
}

static int
build_labels(const struct lyd_node *n, struct fs_target_cfg *t)
{
    size_t i = 0;

    t->n_labels = count_named(lyd_child(n), "labels");
    if (!t->n_labels)
        return 0;
    t->labels = calloc(t->n_labels, sizeof(*t->labels));
    if (!t->labels) {
        t->n_labels = 0;
        return -1;
    }
    for (const struct lyd_node *c = NULL; (c = fs_cfg_next(n, c, "labels")) && i < t->n_labels;) {
        const char *v = fs_cfg_cval(c, "value");
        if (fs_cfg_strdup(&t->labels[i].key, c, "name") || dup_str(&t->labels[i].value, v ? v : ""))
            return -1;
        i++;
    }
    t->n_labels = i;
    qsort(t->labels, t->n_labels, sizeof(*t->labels), kv_cmp);
    return 0;
}

/* The driver blocks of target n, built by their drivers in the order of opts. */
static int
build_blocks(const struct lyd_node *n, const struct fs_config_opts *opts, struct fs_target_cfg *t,
             struct fs_cfg_errs *errs)
{
    size_t nb = opts ? opts->n_blocks : 0;

    if (!nb)
        return 0;
    t->blocks = calloc(nb, sizeof(*t->blocks));
    if (!t->blocks)
        return -1;
    for (size_t i = 0; i < nb; i++) {
        const struct fs_cfg_block_ops *ops = opts->blocks[i];
        const struct lyd_node *blk = fs_cfg_kid(n, ops->name);
        struct fs_target_block *b;
        if (!blk || fs_cfg_node_bad(blk) || fs_cfg_errs_full(errs))
            continue;
        b = &t->blocks[t->n_blocks++];
        b->ops = ops;
        if (ops->config_build(blk, &b->cfg, errs) != 0)
            return -1;
    }
    return 0;
}

struct ranked {
    const char *name;
    int rank;
};

static int
ranked_cmp(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return strcmp(x->name, y->name);
}

static bool
known_source(const struct fs_config_opts *opts, const char *name)
{
    for (size_t i = 0; opts && i < opts->n_blocks; i++)
        if (!strcmp(opts->blocks[i]->name, name))
            return true;
    for (size_t i = 0; opts && i < opts->n_absent; i++)
        if (!strcmp(opts->absent[i], name))
            return true;
    return false;
}

/* "snmp, cli, gnmi": every driver name fabricscope knows, for messages. */
static void
known_sources_text(const struct fs_config_opts *opts, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; opts && i < opts->n_blocks + opts->n_absent && o < len; i++) {
        const char *nm =
            i < opts->n_blocks ? opts->blocks[i]->name : opts->absent[i - opts->n_blocks];
        int r = snprintf(buf + o, len - o, "%s%s", o ? ", " : "", nm);
        if (r < 0)
            break;
        o += (size_t)r;
    }
    if (!buf[0])
        snprintf(buf, len, "none in this build");
}

static bool
listed(char *const *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i], name))
            return true;
    return false;
}

/* The listed sources first (each must be a driver name), then this build's other
 * drivers by default rank. */
static int
build_precedence(const struct lyd_node *n, const struct fs_config_opts *opts,
                 struct fs_target_cfg *t, struct fs_cfg_errs *errs)
{
    size_t nb = opts ? opts->n_blocks : 0;
    size_t cap = count_named(lyd_child(n), "source_precedence") + nb;
    struct ranked *rest = NULL;
    int rc = -1;

    if (!cap)
        return 0;
    t->source_precedence = calloc(cap, sizeof(*t->source_precedence));
    rest = calloc(nb + 1, sizeof(*rest));
    if (!t->source_precedence || !rest)
        goto out;
    for (const struct lyd_node *c = NULL; (c = fs_cfg_next(n, c, "source_precedence"));) {
        const char *v = lyd_get_value(c);
        if (!known_source(opts, v)) {
            char known[256], shown[FS_CFG_SHOW_MAX + 8];
            known_sources_text(opts, known, sizeof(known));
            fs_cfg_show(shown, sizeof(shown), v, strlen(v));
            fs_cfg_node_err(errs, c, false, "\"%s\" is not a driver name (known: %s)", shown,
                            known);
            continue;
        }
        if (listed(t->source_precedence, t->n_source_precedence, v))
            continue; /* reported by the walker */
        if (dup_str(&t->source_precedence[t->n_source_precedence], v))
            goto out;
        t->n_source_precedence++;
    }
    for (size_t i = 0; i < nb; i++)
        rest[i] = (struct ranked){opts->blocks[i]->name, opts->blocks[i]->default_rank};
    qsort(rest, nb, sizeof(*rest), ranked_cmp);
    for (size_t i = 0; i < nb; i++) {
        if (listed(t->source_precedence, t->n_source_precedence, rest[i].name))
            continue;
        if (dup_str(&t->source_precedence[t->n_source_precedence], rest[i].name))
            goto out;
        t->n_source_precedence++;
    }
    rc = 0;
out:
    free(rest);
    return rc;
}

static int
build_target(const struct lyd_node *n, const struct fs_config_opts *opts, struct fs_target_cfg *t,
             struct fs_cfg_errs *errs)
{
    const struct lyd_node *ifs = fs_cfg_kid(n, "interfaces");

    if (fs_cfg_strdup(&t->name, n, "name") || fs_cfg_strdup(&t->address, n, "address") ||
        build_labels(n, t))
        return -1;
    if (iface_regex(ifs, "include", &t->iface_include, &t->iface_include_re, errs) ||
        iface_regex(ifs, "exclude", &t->iface_exclude, &t->iface_exclude_re, errs))
        return -1;
    if (build_blocks(n, opts, t, errs) || build_precedence(n, opts, t, errs))
        return -1;
    t->expose_all_sources = fs_cfg_bool(n, "expose_all_sources");
    t->staleness_intervals = fs_cfg_long(n, "staleness_intervals", 3);
    return 0;
}

/* ------------------------------------------------------------------------------------
 * remote_write
 */

/* Headers the sender sets itself: a configured one would break the protocol or the auth. */
static const char *const rw_reserved_headers[] = {"Authorization",
                                                  "Content-Encoding",
                                                  "Content-Type",
                                                  "Content-Length",
                                                  "Host",
                                                  "User-Agent",
                                                  "X-Prometheus-Remote-Write-Version"};

static int
build_headers(const struct lyd_node *n, struct fs_kv **out, size_t *n_out,
              const char *const *reserved, size_t n_reserved, const char *who,
              struct fs_cfg_errs *errs)
{
    size_t i = 0, want = count_named(lyd_child(n), "headers");
    struct fs_kv *h;

    *out = NULL;
    *n_out = 0;
    if (!want)
        return 0;
    if (!(h = calloc(want, sizeof(*h))))
        return -1;
    *out = h;
    for (const struct lyd_node *c = NULL; (c = fs_cfg_next(n, c, "headers")) && i < want;) {
        const char *name = fs_cfg_cval(c, "name"), *v = fs_cfg_cval(c, "value");
        for (size_t k = 0; name && k < n_reserved; k++)
            if (!strcasecmp(name, reserved[k]))
                fs_cfg_node_err(errs, c, true, "%s is set by %s itself", name, who);
        *n_out = i + 1; /* so that a failure below frees what was built */
        if (fs_cfg_strdup(&h[i].key, c, "name") || dup_str(&h[i].value, v ? v : ""))
            return -1;
        i++;
    }
    *n_out = i;
    qsort(h, i, sizeof(*h), kv_cmp);
    return 0;
}

static int
build_rw_headers(const struct lyd_node *n, struct fs_remote_write_cfg *w, struct fs_cfg_errs *errs)
{
    return build_headers(n, &w->headers, &w->n_headers, rw_reserved_headers,
                         sizeof rw_reserved_headers / sizeof *rw_reserved_headers, "the sender",
                         errs);
}

/* Names label the self metrics of each receiver: they must tell the receivers apart. */
static void
rw_name_unique(const struct lyd_node *n, const struct fs_remote_write_cfg *before, size_t n_before,
               struct fs_cfg_errs *errs)
{
    const char *nm = fs_cfg_cval(n, "name");
    for (size_t k = 0; nm && k < n_before; k++)
        if (fs_cfg_str_equal(before[k].name, nm))
            fs_cfg_node_err(errs, fs_cfg_kid(n, "name"), false,
                            "\"%s\" names another remote_write entry too", nm);
}

static int
build_remote_write(const struct lyd_node *n, struct fs_remote_write_cfg *w,
                   struct fs_cfg_errs *errs)
{
    const struct lyd_node *ba = fs_cfg_kid(n, "basic_auth"), *tls = fs_cfg_kid(n, "tls");
    const struct lyd_node *q = fs_cfg_kid(n, "queue"), *md = fs_cfg_kid(n, "metadata");
    const struct lyd_node *md_send = fs_cfg_kid(md, "send"),
                          *md_iv = fs_cfg_kid(md, "send_interval");

    if (fs_cfg_strdup(&w->url, n, "url") || fs_cfg_strdup(&w->name, n, "name") ||
        fs_cfg_secret_ref(&w->bearer_token, n, "bearer_token") ||
        fs_cfg_strdup(&w->basic_auth_username, ba, "username") ||
        fs_cfg_secret_ref(&w->basic_auth_password, ba, "password") ||
        fs_cfg_strdup(&w->tls_ca_file, tls, "ca_file") ||
        fs_cfg_strdup(&w->tls_cert_file, tls, "cert_file") ||
        fs_cfg_strdup(&w->tls_key_file, tls, "key_file") || build_rw_headers(n, w, errs))
        return -1;
    w->tls_insecure_skip_verify = fs_cfg_bool(tls, "insecure_skip_verify");
    w->remote_timeout_us = fs_cfg_duration_us(n, "remote_timeout", 30 * US_PER_S);
    w->capacity = (uint64_t)fs_cfg_long(q, "capacity", 100000);
    w->max_samples_per_send = (uint64_t)fs_cfg_long(q, "max_samples_per_send", 2000);
    w->batch_send_deadline_us = fs_cfg_duration_us(q, "batch_send_deadline", 5 * US_PER_S);
    w->min_backoff_us = fs_cfg_duration_us(q, "min_backoff", 30000);
    w->max_backoff_us = fs_cfg_duration_us(q, "max_backoff", 5 * US_PER_S);
    w->metadata_send = !md_send || !strcmp(lyd_get_value(md_send), "true");
    w->metadata_send_interval_us = 60 * US_PER_S;
    w->metadata_max_per_send = (uint64_t)fs_cfg_long(md, "max_samples_per_send", 500);
    if (md_iv) {
        int64_t us = fs_parse_duration(lyd_get_value(md_iv));
        if (us < US_PER_S) /* more often would only repeat the same entries */
            fs_cfg_node_err(errs, md_iv, false, "%s is below the minimum of 1s",
                            lyd_get_value(md_iv));
        else
            w->metadata_send_interval_us = us;
    }
    if (ba && w->bearer_token.file)
        fs_cfg_node_err(errs, ba, true, "basic_auth and bearer_token_file exclude each other");
    if (!!w->tls_cert_file != !!w->tls_key_file)
        fs_cfg_node_err(errs, tls, true, "cert_file and key_file go together");
    if (w->min_backoff_us > w->max_backoff_us)
        fs_cfg_node_err(errs, q, true, "min_backoff is above max_backoff");
    if (w->max_samples_per_send > w->capacity)
        fs_cfg_node_err(errs, q, true, "max_samples_per_send (%llu) is above capacity (%llu)",
                        (unsigned long long)w->max_samples_per_send,
                        (unsigned long long)w->capacity);
    return 0;
}

/* ------------------------------------------------------------------------------------
 * The whole configuration
 */

static int
build_listen(const struct lyd_node *tree, struct fs_config *cfg, struct fs_cfg_errs *errs)
{
    const struct lyd_node *n = fs_cfg_child(tree, "listen");
    char host[256] = "127.0.0.1";
    unsigned port = 9464;

    if (n && fs_cfg_parse_listen(lyd_get_value(n), host, sizeof(host), &port) != 0) {
        fs_cfg_node_err(errs, n, false, "\"%s\" is not HOST:PORT with a port in 0..65535",
                        lyd_get_value(n));
        return 0;
    }
    if (dup_str(&cfg->listen_host, host))
        return -1;
    cfg->listen_port = (uint16_t)port;
    return 0;
}

static void
build_storage(const struct lyd_node *tree, struct fs_config *cfg, struct fs_cfg_errs *errs)
{
    const struct lyd_node *n = fs_cfg_child(tree, "storage");
    const struct lyd_node *m = fs_cfg_kid(n, "memory_limit"), *r = fs_cfg_kid(n, "retention");

    cfg->memory_limit = UINT64_C(256) << 20;
    cfg->retention_us = 3600 * US_PER_S;
    cfg->max_series_per_target = 50000;
    if (m && fs_parse_size(lyd_get_value(m), &cfg->memory_limit) == 0 &&
        cfg->memory_limit < (UINT64_C(1) << 20))
        fs_cfg_node_err(errs, m, false, "%s is below the minimum of 1MiB", lyd_get_value(m));
    if (r) {
        int64_t us = fs_parse_duration(lyd_get_value(r));
        if (us < US_PER_S)
            fs_cfg_node_err(errs, r, false, "%s is below the minimum of 1s", lyd_get_value(r));
        else
            cfg->retention_us = us;
    }
    cfg->max_series_per_target = (uint64_t)fs_cfg_long(n, "max_series_per_target", 50000);
}

/* shard and external_labels: an external label may not repeat a target's static label
 * (the series would carry the name twice). */
static int
build_cluster(const struct lyd_node *tree, struct fs_config *cfg, struct fs_cfg_errs *errs)
{
    const struct lyd_node *sh = fs_cfg_child(tree, "shard");
    size_t i = 0;

    if (sh) {
        cfg->shard_index = (uint32_t)fs_cfg_long(sh, "index", 0);
        cfg->shard_count = (uint32_t)fs_cfg_long(sh, "count", 1);
        if (cfg->shard_index >= cfg->shard_count)
            fs_cfg_node_err(errs, fs_cfg_kid(sh, "index"), false,
                            "%u is not below shard.count (%u)", cfg->shard_index, cfg->shard_count);
    }
    cfg->n_external_labels = count_named(tree, "external_labels");
    if (!cfg->n_external_labels)
        return 0;
    cfg->external_labels = calloc(cfg->n_external_labels, sizeof(*cfg->external_labels));
    if (!cfg->external_labels) {
        cfg->n_external_labels = 0;
        return -1;
    }
    for (const struct lyd_node *n = tree; n && i < cfg->n_external_labels; n = n->next) {
        if (!n->schema || strcmp(n->schema->name, "external_labels"))
            continue;
        const char *v = fs_cfg_cval(n, "value");
        if (fs_cfg_strdup(&cfg->external_labels[i].key, n, "name") ||
            dup_str(&cfg->external_labels[i].value, v ? v : ""))
            return -1;
        i++;
        for (const struct lyd_node *t = tree; t; t = t->next) {
            if (!t->schema || strcmp(t->schema->name, "targets"))
                continue;
            for (const struct lyd_node *l = NULL; (l = fs_cfg_next(t, l, "labels"));) {
                const char *ln = fs_cfg_cval(l, "name");
                if (ln && !strcmp(ln, cfg->external_labels[i - 1].key))
                    fs_cfg_node_err(errs, n, true,
                                    "is also a static label of target %s: a series would "
                                    "carry it twice",
                                    fs_cfg_cval(t, "name"));
            }
        }
    }
    cfg->n_external_labels = i;
    qsort(cfg->external_labels, cfg->n_external_labels, sizeof(*cfg->external_labels), kv_cmp);
    return 0;
}

/* host_events and clock: bounds of the host-event store, the clock warning bound. */
static int
build_host_events(const struct lyd_node *tree, struct fs_config *cfg, struct fs_cfg_errs *errs)
{
    const struct lyd_node *n = fs_cfg_child(tree, "host_events");
    const struct lyd_node *m = fs_cfg_kid(n, "memory_limit"), *r = fs_cfg_kid(n, "retention");

    cfg->host_events_memory_limit = UINT64_C(64) << 20;
    cfg->host_events_retention_us = 6 * 3600 * US_PER_S;
    if (m && fs_parse_size(lyd_get_value(m), &cfg->host_events_memory_limit) == 0 &&
        cfg->host_events_memory_limit < (UINT64_C(1) << 20))
        fs_cfg_node_err(errs, m, false, "%s is below the minimum of 1MiB", lyd_get_value(m));
    if (r) {
        int64_t us = fs_parse_duration(lyd_get_value(r));
        if (us < US_PER_S)
            fs_cfg_node_err(errs, r, false, "%s is below the minimum of 1s", lyd_get_value(r));
        else
            cfg->host_events_retention_us = us;
    }
    cfg->clock_max_offset_us = 1000;
    const struct lyd_node *mo = fs_cfg_kid(fs_cfg_child(tree, "clock"), "max_offset");
    if (mo) {
        int64_t us = fs_parse_duration(lyd_get_value(mo));
        if (us <= 0)
            fs_cfg_node_err(errs, mo, false, "%s is not a positive duration", lyd_get_value(mo));
        else
            cfg->clock_max_offset_us = us;
    }
    if (!n)
        return 0;
    if (fs_cfg_secret_ref(&cfg->host_events_token, n, "bearer_token"))
        return -1;
    size_t cnt = count_named(lyd_child(n), "tokens");
    if (cnt && !(cfg->host_tokens = calloc(cnt, sizeof *cfg->host_tokens)))
        return -1;
    for (const struct lyd_node *t = NULL;
         (t = fs_cfg_next(n, t, "tokens")) && cfg->n_host_tokens < cnt;) {
        struct fs_host_token_cfg *h = &cfg->host_tokens[cfg->n_host_tokens++];
        if (fs_cfg_strdup(&h->name, t, "name") || fs_cfg_strdup(&h->hosts, t, "hosts") ||
            fs_cfg_secret_ref(&h->token, t, "token"))
            return -1;
        h->memory_limit = UINT64_C(8) << 20;
        const struct lyd_node *ml = fs_cfg_kid(t, "memory_limit");
        if (ml && fs_parse_size(lyd_get_value(ml), &h->memory_limit) == 0 &&
            (h->memory_limit < (UINT64_C(64) << 10) ||
             h->memory_limit > cfg->host_events_memory_limit))
            fs_cfg_node_err(errs, ml, false, "%s is outside 64KiB..host_events.memory_limit",
                            lyd_get_value(ml));
    }
    return 0;
}

/* A duration leaf of analysis: within [lo, hi] or an error naming it. */
static void
analysis_duration(const struct lyd_node *n, const char *name, int64_t lo, int64_t hi,
                  const char *lo_s, const char *hi_s, int64_t *out, struct fs_cfg_errs *errs)
{
    const struct lyd_node *k = fs_cfg_kid(n, name);
    if (!k)
        return;
    int64_t us = fs_parse_duration(lyd_get_value(k));
    if (us < lo || us > hi)
        fs_cfg_node_err(errs, k, false, "%s is not within %s..%s", lyd_get_value(k), lo_s, hi_s);
    else
        *out = us;
}

/* analysis.history: the query API; its checks follow remote_write's. */
static int
build_history(const struct lyd_node *n, struct fs_history_cfg **out, struct fs_cfg_errs *errs)
{
    static const char *const reserved[] = {"Authorization", "Content-Type", "Content-Length",
                                           "Host", "User-Agent"};
    const struct lyd_node *ba = fs_cfg_kid(n, "basic_auth"), *tls = fs_cfg_kid(n, "tls");
    struct fs_history_cfg *h = calloc(1, sizeof *h);
    if (!(*out = h))
        return -1;
    if (fs_cfg_strdup(&h->url, n, "url") ||
        fs_cfg_secret_ref(&h->bearer_token, n, "bearer_token") ||
        fs_cfg_strdup(&h->basic_auth_username, ba, "username") ||
        fs_cfg_secret_ref(&h->basic_auth_password, ba, "password") ||
        fs_cfg_strdup(&h->tls_ca_file, tls, "ca_file") ||
        fs_cfg_strdup(&h->tls_cert_file, tls, "cert_file") ||
        fs_cfg_strdup(&h->tls_key_file, tls, "key_file") ||
        build_headers(n, &h->headers, &h->n_headers, reserved, sizeof reserved / sizeof *reserved,
                      "the history client", errs))
        return -1;
    h->tls_insecure_skip_verify = fs_cfg_bool(tls, "insecure_skip_verify");
    h->compression = fs_cfg_bool(n, "compression");
    h->prefetch = !fs_cfg_kid(n, "prefetch") || fs_cfg_bool(n, "prefetch");
    /* No 0s: curl reads it as no timeout, and a hung query API would then hold the
       history lock for ever. */
    h->remote_timeout_us = 30 * US_PER_S;
    const struct lyd_node *rt = fs_cfg_kid(n, "remote_timeout");
    if (rt) {
        int64_t us = fs_parse_duration(lyd_get_value(rt));
        if (us < US_PER_S)
            fs_cfg_node_err(errs, rt, false, "%s is below the minimum of 1s", lyd_get_value(rt));
        else
            h->remote_timeout_us = us;
    }
    h->step_us = 60 * US_PER_S;
    analysis_duration(n, "step", US_PER_S, 3600 * US_PER_S, "1s", "1h", &h->step_us, errs);
    h->max_points = (uint64_t)fs_cfg_long(n, "max_points", 2000000);
    h->scrape_interval_us = 15 * US_PER_S;
    analysis_duration(n, "scrape_interval", US_PER_S, 3600 * US_PER_S, "1s", "1h",
                      &h->scrape_interval_us, errs);
    h->poll_interval_us = 10 * US_PER_S;
    analysis_duration(n, "poll_interval", US_PER_S / 10, 3600 * US_PER_S, "100ms", "1h",
                      &h->poll_interval_us, errs);
    if (ba && h->bearer_token.file)
        fs_cfg_node_err(errs, ba, true, "basic_auth and bearer_token_file exclude each other");
    if (!!h->tls_cert_file != !!h->tls_key_file)
        fs_cfg_node_err(errs, tls, true, "cert_file and key_file go together");
    return 0;
}

/* topology: the links written, then those of links_file (read now, so that a bad file
 * refuses the configuration or the reload that names it). */
static int
build_topology(const struct lyd_node *tree, struct fs_config *cfg, struct fs_cfg_errs *errs)
{
    int rc = -1;
    const struct lyd_node *n = fs_cfg_child(tree, "topology");
    struct fs_static_link *file_links = NULL;
    size_t n_file = 0, n_written = 0;
    char *text = NULL;
    if (!n) {
        rc = 0;
        goto out;
    }
    for (const struct lyd_node *l = NULL; (l = fs_cfg_next(n, l, "links"));)
        n_written++;
    const struct lyd_node *f = fs_cfg_kid(n, "links_file");
    if (f) {
        char err[512];
        size_t len = 0;
        if (fs_cfg_strdup(&cfg->topo_links_file, n, "links_file"))
            goto out;
        if (fs_file_read(cfg->topo_links_file, "topology.links_file", FS_LINKS_FILE_MAX_BYTES,
                         &text, &len, err, sizeof err) != 0)
            fs_cfg_node_err(errs, f, false, "%s", err);
        else if (fs_links_json_parse(text, len, &file_links, &n_file, err, sizeof err) != 0)
            fs_cfg_node_err(errs, f, false, "%s: %s", cfg->topo_links_file, err);
    }
    if (n_written + n_file > FS_TOPO_MAX_STATIC) {
        fs_cfg_node_err(errs, n, true, "%zu links in all, at most %d", n_written + n_file,
                        FS_TOPO_MAX_STATIC);
        rc = 0;
        goto out;
    }
    if (n_written + n_file &&
        !(cfg->topo_links = calloc(n_written + n_file, sizeof *cfg->topo_links)))
        goto out;
    for (const struct lyd_node *l = NULL; (l = fs_cfg_next(n, l, "links"));) {
        if (fs_cfg_node_bad(l))
            continue;
        struct fs_static_link *d = &cfg->topo_links[cfg->n_topo_links++];
        const struct lyd_node *a = fs_cfg_kid(l, "a"), *b = fs_cfg_kid(l, "b");
        if (fs_cfg_strdup(&d->a_node, a, "node") || fs_cfg_strdup(&d->a_port, a, "port") ||
            fs_cfg_strdup(&d->b_node, b, "node") || fs_cfg_strdup(&d->b_port, b, "port"))
            goto out;
        /* mandatory leaves missing were reported by the walker; nothing to build then */
        if (d->a_node && d->a_port && d->b_node && d->b_port && !strcmp(d->a_node, d->b_node) &&
            !strcmp(d->a_port, d->b_port))
            fs_cfg_node_err(errs, l, true, "both ends are %s %s", d->a_node, d->a_port);
    }
    /* The file's links move over: the configuration owns them from here. */
    for (size_t i = 0; i < n_file; i++) {
        cfg->topo_links[cfg->n_topo_links++] = file_links[i];
        memset(&file_links[i], 0, sizeof file_links[i]);
    }
    rc = 0;
out:
    fs_static_links_free(file_links, n_file);
    free(text);
    return rc;
}

/* analysis: the departure, episode and recurrence settings, and the episode log. */
static int
build_analysis(const struct lyd_node *tree, struct fs_config *cfg, struct fs_cfg_errs *errs)
{
    struct fs_analysis_cfg *a = &cfg->analysis;
    *a = (struct fs_analysis_cfg){.z_threshold = 6,
                                  .baseline_window_us = 600 * US_PER_S,
                                  .merge_gap_us = 2 * US_PER_S,
                                  .horizon_us = 24 * 3600 * US_PER_S,
                                  .min_occurrences = 3,
                                  .max_period_spread = 0.1,
                                  .episode_retention_us = 7 * 24 * 3600 * US_PER_S,
                                  .episode_memory_limit = UINT64_C(64) << 20,
                                  .request_timeout_us = 30 * US_PER_S};
    const struct lyd_node *n = fs_cfg_child(tree, "analysis"), *k;
    if (!n)
        return 0;
    if ((k = fs_cfg_kid(n, "history")) && build_history(k, &a->history, errs))
        return -1;
    /* decimal64 and uint32 ranges are libyang's to check; these parse what passed. */
    if ((k = fs_cfg_kid(n, "z_threshold")))
        a->z_threshold = strtod(lyd_get_value(k), NULL);
    if ((k = fs_cfg_kid(n, "max_period_spread")))
        a->max_period_spread = strtod(lyd_get_value(k), NULL);
    if ((k = fs_cfg_kid(n, "min_occurrences")))
        a->min_occurrences = (uint32_t)strtoul(lyd_get_value(k), NULL, 10);
    analysis_duration(n, "baseline_window", 10 * US_PER_S, 6 * 3600 * US_PER_S, "10s", "6h",
                      &a->baseline_window_us, errs);
    analysis_duration(n, "merge_gap", 100000, 600 * US_PER_S, "100ms", "10m", &a->merge_gap_us,
                      errs);
    analysis_duration(n, "horizon", 60 * US_PER_S, 90 * 24 * 3600 * US_PER_S, "1m", "90d",
                      &a->horizon_us, errs);
    analysis_duration(n, "episode_retention", 3600 * US_PER_S, 90 * 24 * 3600 * US_PER_S, "1h",
                      "90d", &a->episode_retention_us, errs);
    analysis_duration(n, "request_timeout", US_PER_S, 600 * US_PER_S, "1s", "10m",
                      &a->request_timeout_us, errs);
    if ((k = fs_cfg_kid(n, "episode_memory_limit")) &&
        fs_parse_size(lyd_get_value(k), &a->episode_memory_limit) == 0 &&
        a->episode_memory_limit < (UINT64_C(1) << 20))
        fs_cfg_node_err(errs, k, false, "%s is below the minimum of 1MiB", lyd_get_value(k));
    if (a->horizon_us > a->episode_retention_us) {
        k = fs_cfg_kid(n, "horizon");
        fs_cfg_node_err(errs, k ? k : n, false,
                        "%s is longer than episode_retention: recurrences cannot be looked for "
                        "beyond the episodes kept",
                        k ? lyd_get_value(k) : "the default 24h");
    }
    return 0;
}

int
fs_cfg_model_build(const struct lyd_node *tree, const struct fs_config_opts *opts,
                   struct fs_config *cfg, struct fs_cfg_errs *errs)
{
    const struct lyd_node *n;
    size_t ir = 0, it = 0, iw = 0;

    if (build_listen(tree, cfg, errs))
        return -1;
    if ((n = fs_cfg_child(tree, "state_dir")) && dup_str(&cfg->state_dir, lyd_get_value(n)))
        return -1;
    if ((n = fs_cfg_child(tree, "http"))) {
        const struct lyd_node *tls = fs_cfg_kid(n, "tls");
        if (fs_cfg_strdup(&cfg->http_tls_cert_file, tls, "cert_file") ||
            fs_cfg_strdup(&cfg->http_tls_key_file, tls, "key_file") ||
            fs_cfg_secret_ref(&cfg->http_bearer_token, n, "bearer_token"))
            return -1;
    }
    build_storage(tree, cfg, errs);
    if (build_cluster(tree, cfg, errs))
        return -1;
    if (build_host_events(tree, cfg, errs))
        return -1;
    if (build_analysis(tree, cfg, errs))
        return -1;
    if (build_topology(tree, cfg, errs))
        return -1;
    cfg->n_flow_rules = count_named(tree, "flow_rules");
    cfg->n_targets = count_named(tree, "targets");
    if (cfg->n_flow_rules &&
        !(cfg->flow_rules = calloc(cfg->n_flow_rules, sizeof(*cfg->flow_rules)))) {
        cfg->n_flow_rules = 0;
        return -1;
    }
    if (cfg->n_targets && !(cfg->targets = calloc(cfg->n_targets, sizeof(*cfg->targets)))) {
        cfg->n_targets = 0;
        return -1;
    }
    cfg->n_remote_write = count_named(tree, "remote_write");
    if (cfg->n_remote_write &&
        !(cfg->remote_write = calloc(cfg->n_remote_write, sizeof(*cfg->remote_write)))) {
        cfg->n_remote_write = 0;
        return -1;
    }
    for (n = tree; n && !fs_cfg_errs_full(errs); n = n->next) {
        if (!n->schema)
            continue;
        if (!strcmp(n->schema->name, "flow_rules") && ir < cfg->n_flow_rules) {
            if (build_flow_rule(n, &cfg->flow_rules[ir++], errs))
                return -1;
        } else if (!strcmp(n->schema->name, "targets") && it < cfg->n_targets) {
            if (build_target(n, opts, &cfg->targets[it++], errs))
                return -1;
        } else if (!strcmp(n->schema->name, "remote_write") && iw < cfg->n_remote_write) {
            rw_name_unique(n, cfg->remote_write, iw, errs);
            if (build_remote_write(n, &cfg->remote_write[iw++], errs))
                return -1;
        }
    }
    for (size_t i = 0; i < cfg->n_targets; i++) {
        cfg->targets[i].flow_rules = cfg->flow_rules;
        cfg->targets[i].n_flow_rules = ir;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------
 * Freeing and comparing
 */

const void *
fs_target_block_cfg(const struct fs_target_cfg *t, const struct fs_cfg_block_ops *ops)
{
    for (size_t i = 0; t && i < t->n_blocks; i++)
        if (t->blocks[i].ops == ops)
            return t->blocks[i].cfg;
    return NULL;
}

static void
target_free(struct fs_target_cfg *t)
{
    free(t->name);
    free(t->address);
    for (size_t i = 0; i < t->n_labels; i++) {
        free(t->labels[i].key);
        free(t->labels[i].value);
    }
    free(t->labels);
    if (t->iface_include)
        regfree(&t->iface_include_re);
    if (t->iface_exclude)
        regfree(&t->iface_exclude_re);
    free(t->iface_include);
    free(t->iface_exclude);
    for (size_t i = 0; i < t->n_blocks; i++)
        t->blocks[i].ops->config_free(t->blocks[i].cfg);
    free(t->blocks);
    for (size_t i = 0; i < t->n_source_precedence; i++)
        free(t->source_precedence[i]);
    free(t->source_precedence);
}

static void
remote_write_free(struct fs_remote_write_cfg *w)
{
    free(w->url);
    free(w->name);
    fs_cfg_secret_ref_free(&w->bearer_token);
    free(w->basic_auth_username);
    fs_cfg_secret_ref_free(&w->basic_auth_password);
    free(w->tls_ca_file);
    free(w->tls_cert_file);
    free(w->tls_key_file);
    for (size_t i = 0; i < w->n_headers; i++) {
        free(w->headers[i].key);
        free(w->headers[i].value);
    }
    free(w->headers);
}

void
fs_history_cfg_free(struct fs_history_cfg *h)
{
    if (!h)
        return;
    free(h->url);
    fs_cfg_secret_ref_free(&h->bearer_token);
    free(h->basic_auth_username);
    fs_cfg_secret_ref_free(&h->basic_auth_password);
    free(h->tls_ca_file);
    free(h->tls_cert_file);
    free(h->tls_key_file);
    for (size_t i = 0; i < h->n_headers; i++) {
        free(h->headers[i].key);
        free(h->headers[i].value);
    }
    free(h->headers);
    free(h);
}

static int
secret_ref_copy(struct fs_secret_ref *d, const struct fs_secret_ref *s)
{
    *d = (struct fs_secret_ref){0};
    return dup_str(&d->file, s->file) || dup_str(&d->env, s->env) || dup_str(&d->key, s->key) ? -1
                                                                                              : 0;
}

struct fs_history_cfg *
fs_history_cfg_copy(const struct fs_history_cfg *s)
{
    struct fs_history_cfg *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    *d = *s;
    d->url = d->basic_auth_username = d->tls_ca_file = d->tls_cert_file = d->tls_key_file = NULL;
    d->bearer_token = d->basic_auth_password = (struct fs_secret_ref){0};
    d->headers = NULL;
    d->n_headers = 0;
    if (dup_str(&d->url, s->url) || dup_str(&d->basic_auth_username, s->basic_auth_username) ||
        dup_str(&d->tls_ca_file, s->tls_ca_file) || dup_str(&d->tls_cert_file, s->tls_cert_file) ||
        dup_str(&d->tls_key_file, s->tls_key_file) ||
        secret_ref_copy(&d->bearer_token, &s->bearer_token) ||
        secret_ref_copy(&d->basic_auth_password, &s->basic_auth_password))
        goto fail;
    if (s->n_headers) {
        if (!(d->headers = calloc(s->n_headers, sizeof *d->headers)))
            goto fail;
        for (size_t i = 0; i < s->n_headers; i++) {
            d->n_headers = i + 1;
            if (dup_str(&d->headers[i].key, s->headers[i].key) ||
                dup_str(&d->headers[i].value, s->headers[i].value))
                goto fail;
        }
    }
    return d;
fail:
    fs_history_cfg_free(d);
    return NULL;
}

/* The fields of YANG's http-client grouping (and the URL and timeout beside them), the
   same in the remote_write and history structs: equal in a and b. */
#define HTTP_CLIENT_EQUAL(a, b)                                                                    \
    (fs_cfg_str_equal((a)->url, (b)->url) && (a)->remote_timeout_us == (b)->remote_timeout_us &&   \
     fs_cfg_secret_ref_equal(&(a)->bearer_token, &(b)->bearer_token) &&                            \
     fs_cfg_str_equal((a)->basic_auth_username, (b)->basic_auth_username) &&                       \
     fs_cfg_secret_ref_equal(&(a)->basic_auth_password, &(b)->basic_auth_password) &&              \
     fs_cfg_str_equal((a)->tls_ca_file, (b)->tls_ca_file) &&                                       \
     fs_cfg_str_equal((a)->tls_cert_file, (b)->tls_cert_file) &&                                   \
     fs_cfg_str_equal((a)->tls_key_file, (b)->tls_key_file) &&                                     \
     (a)->tls_insecure_skip_verify == (b)->tls_insecure_skip_verify &&                             \
     kv_equal((a)->headers, (b)->headers, (a)->n_headers, (b)->n_headers))

static bool
kv_equal(const struct fs_kv *a, const struct fs_kv *b, size_t na, size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (!fs_cfg_str_equal(a[i].key, b[i].key) || !fs_cfg_str_equal(a[i].value, b[i].value))
            return false;
    return true;
}

bool
fs_history_cfg_equal(const struct fs_history_cfg *a, const struct fs_history_cfg *b)
{
    if (!a || !b)
        return a == b;
    return HTTP_CLIENT_EQUAL(a, b) && a->step_us == b->step_us && a->max_points == b->max_points &&
           a->scrape_interval_us == b->scrape_interval_us &&
           a->poll_interval_us == b->poll_interval_us && a->compression == b->compression &&
           a->prefetch == b->prefetch;
}

bool
fs_remote_write_cfg_equal(const struct fs_remote_write_cfg *a, const struct fs_remote_write_cfg *b)
{
    if (!a || !b)
        return a == b;
    if (!HTTP_CLIENT_EQUAL(a, b) || !fs_cfg_str_equal(a->name, b->name) ||
        a->capacity != b->capacity ||
        a->max_samples_per_send != b->max_samples_per_send ||
        a->batch_send_deadline_us != b->batch_send_deadline_us ||
        a->min_backoff_us != b->min_backoff_us || a->max_backoff_us != b->max_backoff_us ||
        a->metadata_send != b->metadata_send ||
        a->metadata_send_interval_us != b->metadata_send_interval_us ||
        a->metadata_max_per_send != b->metadata_max_per_send)
        return false;
    return true;
}

void
fs_config_free(struct fs_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->path);
    free(cfg->listen_host);
    free(cfg->http_tls_cert_file);
    free(cfg->http_tls_key_file);
    fs_cfg_secret_ref_free(&cfg->http_bearer_token);
    fs_cfg_secret_ref_free(&cfg->host_events_token);
    for (size_t i = 0; i < cfg->n_host_tokens; i++) {
        free(cfg->host_tokens[i].name);
        free(cfg->host_tokens[i].hosts);
        fs_cfg_secret_ref_free(&cfg->host_tokens[i].token);
    }
    free(cfg->host_tokens);
    fs_static_links_free(cfg->topo_links, cfg->n_topo_links);
    free(cfg->topo_links_file);
    free(cfg->state_dir);
    for (size_t i = 0; i < cfg->n_flow_rules; i++)
        free(cfg->flow_rules[i].name);
    free(cfg->flow_rules);
    for (size_t i = 0; i < cfg->n_external_labels; i++) {
        free(cfg->external_labels[i].key);
        free(cfg->external_labels[i].value);
    }
    free(cfg->external_labels);
    for (size_t i = 0; i < cfg->n_targets; i++)
        target_free(&cfg->targets[i]);
    free(cfg->targets);
    for (size_t i = 0; i < cfg->n_remote_write; i++)
        remote_write_free(&cfg->remote_write[i]);
    free(cfg->remote_write);
    fs_history_cfg_free(cfg->analysis.history);
    free(cfg);
}

static bool
flow_rule_equal(const struct fs_flow_rule *a, const struct fs_flow_rule *b)
{
    return fs_cfg_str_equal(a->name, b->name) && a->protocol == b->protocol &&
           a->dst_lo == b->dst_lo && a->dst_hi == b->dst_hi && a->src_lo == b->src_lo &&
           a->src_hi == b->src_hi && a->ecn_ce == b->ecn_ce && a->tc == b->tc;
}

/* Everything of a target that is not a driver block or the flow rules. */
static bool
target_common_equal(const struct fs_target_cfg *a, const struct fs_target_cfg *b)
{
    if (!fs_cfg_str_equal(a->name, b->name) || !fs_cfg_str_equal(a->address, b->address) ||
        a->n_labels != b->n_labels || !fs_cfg_str_equal(a->iface_include, b->iface_include) ||
        !fs_cfg_str_equal(a->iface_exclude, b->iface_exclude) ||
        a->n_source_precedence != b->n_source_precedence ||
        a->expose_all_sources != b->expose_all_sources ||
        a->staleness_intervals != b->staleness_intervals)
        return false;
    for (size_t i = 0; i < a->n_labels; i++)
        if (!fs_cfg_str_equal(a->labels[i].key, b->labels[i].key) ||
            !fs_cfg_str_equal(a->labels[i].value, b->labels[i].value))
            return false;
    for (size_t i = 0; i < a->n_source_precedence; i++)
        if (!fs_cfg_str_equal(a->source_precedence[i], b->source_precedence[i]))
            return false;
    return true;
}

static bool
flow_rules_equal(const struct fs_target_cfg *a, const struct fs_target_cfg *b)
{
    if (a->n_flow_rules != b->n_flow_rules)
        return false;
    for (size_t i = 0; i < a->n_flow_rules; i++)
        if (!flow_rule_equal(&a->flow_rules[i], &b->flow_rules[i]))
            return false;
    return true;
}

static const struct fs_target_block *
block_of(const struct fs_target_cfg *t, const struct fs_cfg_block_ops *ops)
{
    for (size_t i = 0; i < t->n_blocks; i++)
        if (t->blocks[i].ops == ops)
            return &t->blocks[i];
    return NULL;
}

bool
fs_target_cfg_equal(const struct fs_target_cfg *a, const struct fs_target_cfg *b)
{
    if (!a || !b)
        return a == b;
    if (!target_common_equal(a, b) || !flow_rules_equal(a, b) || a->n_blocks != b->n_blocks)
        return false;
    for (size_t i = 0; i < a->n_blocks; i++)
        if (a->blocks[i].ops != b->blocks[i].ops ||
            !a->blocks[i].ops->config_equal(a->blocks[i].cfg, b->blocks[i].cfg))
            return false;
    return true;
}

bool
fs_target_instance_equal(const struct fs_target_cfg *a, const struct fs_target_cfg *b,
                         const struct fs_cfg_block_ops *ops)
{
    if (!a || !b)
        return a == b;
    const struct fs_target_block *ba = block_of(a, ops), *bb = block_of(b, ops);
    if (!ba || !bb || !target_common_equal(a, b) || !ops->config_equal(ba->cfg, bb->cfg))
        return false;
    return !ops->uses_flow_rules || flow_rules_equal(a, b);
}
