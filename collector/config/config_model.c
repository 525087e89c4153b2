/*
 * Configuration, second half: the semantic checks YANG cannot express (run on the
 * walked libyang tree so every problem keeps its line and column), building struct
 * fs_config from the validated tree, and the small strict parsers and secret reader
 * of config.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libyang/libyang.h>

#include "config/config.h"
#include "config/config_int.h"

#define US_PER_S INT64_C(1000000)

/* ------------------------------------------------------------------------------------
 * Strict parsers
 */

/* Reads the leading decimal digits of s into *v; returns the first other char or NULL
 * when there are no digits or the number does not fit in 63 bits. */
static const char *
parse_digits(const char *s, uint64_t *v)
{
    uint64_t x = 0;
    if (!s || *s < '0' || *s > '9')
        return NULL;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (x > ((uint64_t)INT64_MAX - (uint64_t)(*s - '0')) / 10)
            return NULL;
        x = x * 10 + (uint64_t)(*s - '0');
    }
    *v = x;
    return s;
}

int64_t
fs_parse_duration(const char *s)
{
    static const struct {
        const char *unit;
        int64_t us;
    } units[] = {{"ms", 1000},
                 {"s", US_PER_S},
                 {"m", 60 * US_PER_S},
                 {"h", 3600 * US_PER_S},
                 {"d", 86400 * US_PER_S}};
    uint64_t v;
    const char *rest = parse_digits(s, &v);

    if (!rest)
        return -1;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(rest, units[i].unit))
            continue;
        if (v > (uint64_t)(INT64_MAX / units[i].us))
            return -1;
        return (int64_t)v * units[i].us;
    }
    return -1;
}

int
fs_parse_size(const char *s, uint64_t *out)
{
    static const struct {
        const char *unit;
        uint64_t mult;
    } units[] = {{"", 1},
                 {"B", 1},
                 {"KiB", UINT64_C(1) << 10},
                 {"MiB", UINT64_C(1) << 20},
                 {"GiB", UINT64_C(1) << 30},
                 {"TiB", UINT64_C(1) << 40},
                 {"kB", 1000},
                 {"KB", 1000},
                 {"MB", 1000000},
                 {"GB", 1000000000},
                 {"TB", UINT64_C(1000000000000)}};
    uint64_t v;
    const char *rest = parse_digits(s, &v);

    if (!rest || !out)
        return -1;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(rest, units[i].unit))
            continue;
        if (v > UINT64_MAX / units[i].mult)
            return -1;
        *out = v * units[i].mult;
        return 0;
    }
    return -1;
}

/* "A-B" port range; 0 and *lo, *hi on success. */
static int
parse_port_range(const char *s, unsigned *lo, unsigned *hi)
{
    uint64_t a, b;
    const char *p = parse_digits(s, &a);
    if (!p || *p != '-')
        return -1;
    p = parse_digits(p + 1, &b);
    if (!p || *p || a > 65535 || b > 65535)
        return -1;
    *lo = (unsigned)a;
    *hi = (unsigned)b;
    return 0;
}

/* "host:port" or "[v6]:port"; host is copied without brackets. */
static int
parse_listen(const char *s, char *host, size_t hlen, unsigned *port)
{
    const char *colon = strrchr(s, ':');
    const char *h = s, *hend;
    uint64_t p;
    const char *rest;

    if (!colon)
        return -1;
    hend = colon;
    if (*s == '[') {
        if (colon == s || colon[-1] != ']')
            return -1;
        h = s + 1;
        hend = colon - 1;
    }
    rest = parse_digits(colon + 1, &p);
    if (!rest || *rest || p > 65535 || hend <= h || (size_t)(hend - h) >= hlen)
        return -1;
    memcpy(host, h, (size_t)(hend - h));
    host[hend - h] = '\0';
    *port = (unsigned)p;
    return 0;
}

/* ------------------------------------------------------------------------------------
 * Semantic checks
 */

static bool
is_true(const struct lyd_node *parent, const char *name)
{
    const char *v = fs_cfg_cval(parent, name);
    return v && !strcmp(v, "true");
}

static const struct lyd_node *
kid(const struct lyd_node *parent, const char *name)
{
    return fs_cfg_child(lyd_child(parent), name);
}

/* Explicitly written (not a default libyang added). */
static const struct lyd_node *
given(const struct lyd_node *parent, const char *name)
{
    const struct lyd_node *n = kid(parent, name);
    return n && !(n->flags & LYD_DEFAULT) ? n : NULL;
}

static void
check_range(const struct lyd_node *rule, const char *name, struct fs_cfg_errs *errs)
{
    const struct lyd_node *n = kid(rule, name);
    unsigned lo, hi;

    if (!n)
        return;
    if (parse_port_range(lyd_get_value(n), &lo, &hi) != 0 || lo == 0 || hi == 0)
        fs_cfg_node_err(errs, n, false, "%s: ports must be in 1..65535", lyd_get_value(n));
    else if (lo > hi)
        fs_cfg_node_err(errs, n, false, "%s is backwards: %u is greater than %u", lyd_get_value(n),
                        lo, hi);
}

static void
check_regex(const struct lyd_node *ifs, const char *name, struct fs_cfg_errs *errs)
{
    const struct lyd_node *n = kid(ifs, name);
    regex_t re;
    int r;

    if (!n)
        return;
    r = regcomp(&re, lyd_get_value(n), REG_EXTENDED | REG_NOSUB);
    if (r != 0) {
        char why[128];
        regerror(r, &re, why, sizeof(why));
        fs_cfg_node_err(errs, n, false, "not a POSIX extended regular expression: %s", why);
        return;
    }
    regfree(&re);
}

static void
check_snmp(const struct lyd_node *snmp, struct fs_cfg_errs *errs)
{
    const char *version = fs_cfg_cval(snmp, "version");
    const struct lyd_node *comm = kid(snmp, "community_file");
    const struct lyd_node *user = kid(snmp, "user");
    const struct lyd_node *auth = kid(snmp, "auth");
    const struct lyd_node *priv = kid(snmp, "priv");
    bool weak_ok = is_true(snmp, "allow_weak_crypto");

    if (!comm)
        comm = kid(snmp, "community_env");
    if (version && !strcmp(version, "2c")) {
        if (!comm)
            fs_cfg_node_err(errs, snmp, true, "SNMP v2c needs community_file or community_env");
        if (user)
            fs_cfg_node_err(errs, user, true, "user is an SNMPv3 setting; add version: 3");
        if (auth)
            fs_cfg_node_err(errs, auth, true, "auth is an SNMPv3 setting; add version: 3");
        if (priv)
            fs_cfg_node_err(errs, priv, true, "priv is an SNMPv3 setting; add version: 3");
        return;
    }
    if (!user)
        fs_cfg_node_err(errs, snmp, true, "SNMP v3 needs user");
    if (comm)
        fs_cfg_node_err(errs, comm, true,
                        "a community is an SNMP v2c setting; v3 uses user, auth and priv");
    if (priv && !auth)
        fs_cfg_node_err(errs, priv, true,
                        "priv needs auth: SNMPv3 has no privacy without authentication");
    if (auth && !fs_cfg_node_bad(auth) && !weak_ok) {
        const struct lyd_node *p = kid(auth, "protocol");
        const char *v = p ? lyd_get_value(p) : "";
        if (!strcmp(v, "md5") || !strcmp(v, "sha"))
            fs_cfg_node_err(errs, p, false,
                            "%s is weak; use sha256 or better, or set allow_weak_crypto: true", v);
    }
    if (priv && !fs_cfg_node_bad(priv) && !weak_ok) {
        const struct lyd_node *p = kid(priv, "protocol");
        const char *v = p ? lyd_get_value(p) : "";
        if (!strcmp(v, "des"))
            fs_cfg_node_err(errs, p, false,
                            "des is weak; use aes128, or set allow_weak_crypto: true");
    }
}

static void
check_gnmi(const struct lyd_node *gnmi, struct fs_cfg_errs *errs)
{
    const struct lyd_node *tls = kid(gnmi, "tls");
    const struct lyd_node *insecure = given(gnmi, "insecure");
    bool plain = is_true(gnmi, "insecure");
    const struct lyd_node *pw = kid(gnmi, "password_file");

    if (!pw)
        pw = kid(gnmi, "password_env");
    if (!tls && !plain)
        fs_cfg_node_err(errs, gnmi, true,
                        "gnmi needs tls (e.g. tls: { ca_file: ca.pem }) or insecure: true");
    if (tls && plain)
        fs_cfg_node_err(errs, insecure, true, "insecure: true contradicts the tls block");
    if (pw && !kid(gnmi, "username"))
        fs_cfg_node_err(errs, pw, true, "a password needs username");
}

static void
check_target(const struct lyd_node *t, struct fs_cfg_errs *errs)
{
    const struct lyd_node *ifs = kid(t, "interfaces");
    const struct lyd_node *blk;

    if (ifs) {
        check_regex(ifs, "include", errs);
        check_regex(ifs, "exclude", errs);
    }
    if ((blk = kid(t, "snmp")) && !fs_cfg_node_bad(blk))
        check_snmp(blk, errs);
    if ((blk = kid(t, "gnmi")) && !fs_cfg_node_bad(blk))
        check_gnmi(blk, errs);
}

void
fs_cfg_check_semantics(const struct lyd_node *tree, struct fs_cfg_errs *errs)
{
    const struct lyd_node *n;

    if ((n = fs_cfg_child(tree, "listen"))) {
        char host[256];
        unsigned port;
        if (parse_listen(lyd_get_value(n), host, sizeof(host), &port) != 0)
            fs_cfg_node_err(errs, n, false, "\"%s\" is not HOST:PORT with a port in 0..65535",
                            lyd_get_value(n));
    }
    if ((n = fs_cfg_child(tree, "storage"))) {
        const struct lyd_node *m = kid(n, "memory_limit"), *r = kid(n, "retention");
        uint64_t bytes;
        if (m && fs_parse_size(lyd_get_value(m), &bytes) == 0 && bytes < (UINT64_C(1) << 20))
            fs_cfg_node_err(errs, m, false, "%s is below the minimum of 1MiB", lyd_get_value(m));
        if (r && fs_parse_duration(lyd_get_value(r)) < US_PER_S)
            fs_cfg_node_err(errs, r, false, "%s is below the minimum of 1s", lyd_get_value(r));
    }
    for (n = tree; n; n = n->next) {
        if (!n->schema || fs_cfg_errs_full(errs))
            continue;
        if (!strcmp(n->schema->name, "flow_rules")) {
            check_range(n, "dst_ports", errs);
            check_range(n, "src_ports", errs);
        } else if (!strcmp(n->schema->name, "targets")) {
            check_target(n, errs);
        }
    }
}

/* ------------------------------------------------------------------------------------
 * Building struct fs_config
 */

static int
dup_str(char **dst, const char *src)
{
    if (!src)
        return 0;
    *dst = strdup(src);
    return *dst ? 0 : -1;
}

static int
dup_child(char **dst, const struct lyd_node *parent, const char *name)
{
    return dup_str(dst, parent ? fs_cfg_cval(parent, name) : NULL);
}

static int
secret_ref(struct fs_secret_ref *ref, const struct lyd_node *parent, const char *stem)
{
    char fname[64], ename[64];
    snprintf(fname, sizeof(fname), "%s_file", stem);
    snprintf(ename, sizeof(ename), "%s_env", stem);
    if (dup_child(&ref->file, parent, fname) || dup_child(&ref->env, parent, ename))
        return -1;
    return 0;
}

static int64_t
dur_child(const struct lyd_node *parent, const char *name, int64_t dflt)
{
    const char *v = fs_cfg_cval(parent, name);
    int64_t us = v ? fs_parse_duration(v) : -1;
    return us > 0 ? us : dflt;
}

static long
num_child(const struct lyd_node *parent, const char *name, long dflt)
{
    const char *v = fs_cfg_cval(parent, name);
    return v ? strtol(v, NULL, 10) : dflt;
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

static int
build_flow_rule(const struct lyd_node *n, struct fs_flow_rule *r)
{
    const char *proto = fs_cfg_cval(n, "protocol");
    const char *v;
    unsigned lo, hi;

    if (dup_child(&r->name, n, "name"))
        return -1;
    r->protocol = !proto ? FS_PROTO_ANY : !strcmp(proto, "tcp") ? FS_PROTO_TCP : FS_PROTO_UDP;
    if ((v = fs_cfg_cval(n, "dst_port")))
        r->dst_lo = r->dst_hi = (uint16_t)strtoul(v, NULL, 10);
    else if ((v = fs_cfg_cval(n, "dst_ports")) && parse_port_range(v, &lo, &hi) == 0) {
        r->dst_lo = (uint16_t)lo;
        r->dst_hi = (uint16_t)hi;
    }
    if ((v = fs_cfg_cval(n, "src_port")))
        r->src_lo = r->src_hi = (uint16_t)strtoul(v, NULL, 10);
    else if ((v = fs_cfg_cval(n, "src_ports")) && parse_port_range(v, &lo, &hi) == 0) {
        r->src_lo = (uint16_t)lo;
        r->src_hi = (uint16_t)hi;
    }
    r->ecn_ce = (v = fs_cfg_cval(n, "ecn")) && !strcmp(v, "ce");
    r->tc = (int)num_child(n, "tc", -1);
    return 0;
}

static enum fs_snmp_auth
auth_proto(const char *v)
{
    static const char *const names[] = {"", "md5", "sha", "sha224", "sha256", "sha384", "sha512"};
    for (size_t i = 1; v && i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcmp(v, names[i]))
            return (enum fs_snmp_auth)i;
    return FS_AUTH_NONE;
}

static int
build_snmp(const struct lyd_node *n, struct fs_snmp_cfg **out)
{
    struct fs_snmp_cfg *s = calloc(1, sizeof(*s));
    const struct lyd_node *auth = kid(n, "auth"), *priv = kid(n, "priv");
    const char *v;

    *out = s;
    if (!s)
        return -1;
    s->port = (uint16_t)num_child(n, "port", 161);
    s->version = (v = fs_cfg_cval(n, "version")) && !strcmp(v, "3") ? FS_SNMP_V3 : FS_SNMP_V2C;
    if (secret_ref(&s->community, n, "community") || dup_child(&s->user, n, "user"))
        return -1;
    if (auth) {
        s->auth_protocol = auth_proto(fs_cfg_cval(auth, "protocol"));
        if (secret_ref(&s->auth_password, auth, "password"))
            return -1;
    }
    if (priv) {
        v = fs_cfg_cval(priv, "protocol");
        s->priv_protocol = v && !strcmp(v, "des") ? FS_PRIV_DES : FS_PRIV_AES128;
        if (secret_ref(&s->priv_password, priv, "password"))
            return -1;
    }
    s->allow_weak_crypto = is_true(n, "allow_weak_crypto");
    s->interval_us = dur_child(n, "interval", 10 * US_PER_S);
    s->timeout_us = dur_child(n, "timeout", 2 * US_PER_S);
    s->retries = (int)num_child(n, "retries", 1);
    s->max_repetitions = (int)num_child(n, "max_repetitions", 50);
    v = fs_cfg_cval(n, "qos_index_base");
    s->qos_index_base = !v || !strcmp(v, "auto") ? -1 : (int)strtol(v, NULL, 10);
    return 0;
}

static int
build_cli(const struct lyd_node *n, struct fs_cli_cfg **out)
{
    struct fs_cli_cfg *c = calloc(1, sizeof(*c));

    *out = c;
    if (!c)
        return -1;
    if (dup_child(&c->driver, n, "driver") || dup_child(&c->username, n, "username") ||
        secret_ref(&c->password, n, "password") || dup_child(&c->key_file, n, "key_file") ||
        dup_child(&c->known_hosts, n, "known_hosts"))
        return -1;
    c->port = (uint16_t)num_child(n, "port", 22);
    c->interval_us = dur_child(n, "interval", 5 * US_PER_S);
    c->timeout_us = dur_child(n, "timeout", 10 * US_PER_S);
    c->apply_flow_rules = is_true(n, "apply_flow_rules");
    return 0;
}

static int
build_gnmi(const struct lyd_node *n, struct fs_gnmi_cfg **out)
{
    struct fs_gnmi_cfg *g = calloc(1, sizeof(*g));
    const struct lyd_node *tls = kid(n, "tls");
    size_t i = 0;

    *out = g;
    if (!g)
        return -1;
    g->port = (uint16_t)num_child(n, "port", 9339);
    g->insecure = is_true(n, "insecure");
    if (dup_child(&g->tls_ca_file, tls, "ca_file") ||
        dup_child(&g->tls_cert_file, tls, "cert_file") ||
        dup_child(&g->tls_key_file, tls, "key_file") ||
        dup_child(&g->tls_server_name, tls, "server_name") ||
        dup_child(&g->username, n, "username") || secret_ref(&g->password, n, "password"))
        return -1;
    g->n_subscriptions = count_named(lyd_child(n), "subscriptions");
    if (g->n_subscriptions) {
        g->subscriptions = calloc(g->n_subscriptions, sizeof(*g->subscriptions));
        if (!g->subscriptions) {
            g->n_subscriptions = 0;
            return -1;
        }
    }
    for (const struct lyd_node *c = lyd_child(n); c; c = c->next) {
        struct fs_gnmi_subscription *s;
        const char *mode;
        if (!c->schema || strcmp(c->schema->name, "subscriptions") || i >= g->n_subscriptions)
            continue;
        s = &g->subscriptions[i++];
        if (dup_child(&s->path, c, "path"))
            return -1;
        mode = fs_cfg_cval(c, "mode");
        s->mode = !mode || !strcmp(mode, "sample") ? FS_GNMI_SAMPLE
                  : !strcmp(mode, "on_change")     ? FS_GNMI_ON_CHANGE
                                                   : FS_GNMI_TARGET_DEFINED;
        s->interval_us = dur_child(c, "interval", 0);
    }
    return 0;
}

static int
kv_cmp(const void *a, const void *b)
{
    return strcmp(((const struct fs_kv *)a)->key, ((const struct fs_kv *)b)->key);
}

static int
build_target(const struct lyd_node *n, struct fs_target_cfg *t)
{
    static const char *const dflt_prec[3] = {"gnmi", "cli", "snmp"};
    const struct lyd_node *ifs = kid(n, "interfaces"), *blk;
    size_t np = 0;

    if (dup_child(&t->name, n, "name") || dup_child(&t->address, n, "address"))
        return -1;
    t->n_labels = count_named(lyd_child(n), "labels");
    if (t->n_labels) {
        size_t i = 0;
        t->labels = calloc(t->n_labels, sizeof(*t->labels));
        if (!t->labels) {
            t->n_labels = 0;
            return -1;
        }
        for (const struct lyd_node *c = lyd_child(n); c; c = c->next) {
            if (!c->schema || strcmp(c->schema->name, "labels") || i >= t->n_labels)
                continue;
            if (dup_child(&t->labels[i].key, c, "name") ||
                dup_str(&t->labels[i].value,
                        fs_cfg_cval(c, "value") ? fs_cfg_cval(c, "value") : ""))
                return -1;
            i++;
        }
        qsort(t->labels, t->n_labels, sizeof(*t->labels), kv_cmp);
    }
    /* The string is set only once its regex compiled: fs_config_free relies on it. */
    if (ifs && fs_cfg_cval(ifs, "include")) {
        if (regcomp(&t->iface_include_re, fs_cfg_cval(ifs, "include"), REG_EXTENDED | REG_NOSUB))
            return -1;
        if (dup_child(&t->iface_include, ifs, "include")) {
            regfree(&t->iface_include_re);
            return -1;
        }
    }
    if (ifs && fs_cfg_cval(ifs, "exclude")) {
        if (regcomp(&t->iface_exclude_re, fs_cfg_cval(ifs, "exclude"), REG_EXTENDED | REG_NOSUB))
            return -1;
        if (dup_child(&t->iface_exclude, ifs, "exclude")) {
            regfree(&t->iface_exclude_re);
            return -1;
        }
    }
    if ((blk = kid(n, "snmp")) && build_snmp(blk, &t->snmp))
        return -1;
    if ((blk = kid(n, "cli")) && build_cli(blk, &t->cli))
        return -1;
    if ((blk = kid(n, "gnmi")) && build_gnmi(blk, &t->gnmi))
        return -1;
    /* Listed sources first, then the rest in the default order. */
    for (const struct lyd_node *c = lyd_child(n); c && np < 3; c = c->next)
        if (c->schema && !strcmp(c->schema->name, "source_precedence"))
            if (dup_str(&t->source_precedence[np++], lyd_get_value(c)))
                return -1;
    for (size_t d = 0; d < 3 && np < 3; d++) {
        bool have = false;
        for (size_t j = 0; j < np; j++)
            have = have || !strcmp(t->source_precedence[j], dflt_prec[d]);
        if (!have && dup_str(&t->source_precedence[np++], dflt_prec[d]))
            return -1;
    }
    t->expose_all_sources = is_true(n, "expose_all_sources");
    t->staleness_intervals = num_child(n, "staleness_intervals", 3);
    return 0;
}

int
fs_cfg_build(const struct lyd_node *tree, struct fs_config *cfg)
{
    const struct lyd_node *n;
    const char *listen = NULL;
    char host[256] = "127.0.0.1";
    unsigned port = 9464;
    size_t ir = 0, it = 0;

    if ((n = fs_cfg_child(tree, "listen")))
        listen = lyd_get_value(n);
    if (listen && parse_listen(listen, host, sizeof(host), &port) != 0)
        return -1; /* cannot happen: checked before */
    if (dup_str(&cfg->listen_host, host))
        return -1;
    cfg->listen_port = (uint16_t)port;
    if ((n = fs_cfg_child(tree, "http"))) {
        const struct lyd_node *tls = kid(n, "tls");
        if (dup_child(&cfg->http_tls_cert_file, tls, "cert_file") ||
            dup_child(&cfg->http_tls_key_file, tls, "key_file") ||
            secret_ref(&cfg->http_bearer_token, n, "bearer_token"))
            return -1;
    }
    cfg->memory_limit = UINT64_C(256) << 20;
    cfg->retention_us = 3600 * US_PER_S;
    if ((n = fs_cfg_child(tree, "storage"))) {
        const char *v = fs_cfg_cval(n, "memory_limit");
        if (v)
            fs_parse_size(v, &cfg->memory_limit);
        cfg->retention_us = dur_child(n, "retention", cfg->retention_us);
    }
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
    for (n = tree; n; n = n->next) {
        if (!n->schema)
            continue;
        if (!strcmp(n->schema->name, "flow_rules") && ir < cfg->n_flow_rules) {
            if (build_flow_rule(n, &cfg->flow_rules[ir++]))
                return -1;
        } else if (!strcmp(n->schema->name, "targets") && it < cfg->n_targets) {
            if (build_target(n, &cfg->targets[it++]))
                return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------------------
 * Freeing and comparing
 */

static void
secret_free(struct fs_secret_ref *r)
{
    free(r->file);
    free(r->env);
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
    if (t->snmp) {
        secret_free(&t->snmp->community);
        free(t->snmp->user);
        secret_free(&t->snmp->auth_password);
        secret_free(&t->snmp->priv_password);
        free(t->snmp);
    }
    if (t->cli) {
        free(t->cli->driver);
        free(t->cli->username);
        secret_free(&t->cli->password);
        free(t->cli->key_file);
        free(t->cli->known_hosts);
        free(t->cli);
    }
    if (t->gnmi) {
        free(t->gnmi->tls_ca_file);
        free(t->gnmi->tls_cert_file);
        free(t->gnmi->tls_key_file);
        free(t->gnmi->tls_server_name);
        free(t->gnmi->username);
        secret_free(&t->gnmi->password);
        for (size_t i = 0; i < t->gnmi->n_subscriptions; i++)
            free(t->gnmi->subscriptions[i].path);
        free(t->gnmi->subscriptions);
        free(t->gnmi);
    }
    for (size_t i = 0; i < 3; i++)
        free(t->source_precedence[i]);
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
    secret_free(&cfg->http_bearer_token);
    for (size_t i = 0; i < cfg->n_flow_rules; i++)
        free(cfg->flow_rules[i].name);
    free(cfg->flow_rules);
    for (size_t i = 0; i < cfg->n_targets; i++)
        target_free(&cfg->targets[i]);
    free(cfg->targets);
    free(cfg);
}

static bool
str_eq(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

static bool
secret_eq(const struct fs_secret_ref *a, const struct fs_secret_ref *b)
{
    return str_eq(a->file, b->file) && str_eq(a->env, b->env);
}

static bool
snmp_eq(const struct fs_snmp_cfg *a, const struct fs_snmp_cfg *b)
{
    if (!a || !b)
        return a == b;
    return a->port == b->port && a->version == b->version &&
           secret_eq(&a->community, &b->community) && str_eq(a->user, b->user) &&
           a->auth_protocol == b->auth_protocol &&
           secret_eq(&a->auth_password, &b->auth_password) &&
           a->priv_protocol == b->priv_protocol &&
           secret_eq(&a->priv_password, &b->priv_password) &&
           a->allow_weak_crypto == b->allow_weak_crypto && a->interval_us == b->interval_us &&
           a->timeout_us == b->timeout_us && a->retries == b->retries &&
           a->max_repetitions == b->max_repetitions && a->qos_index_base == b->qos_index_base;
}

static bool
cli_eq(const struct fs_cli_cfg *a, const struct fs_cli_cfg *b)
{
    if (!a || !b)
        return a == b;
    return str_eq(a->driver, b->driver) && a->port == b->port && str_eq(a->username, b->username) &&
           secret_eq(&a->password, &b->password) && str_eq(a->key_file, b->key_file) &&
           str_eq(a->known_hosts, b->known_hosts) && a->interval_us == b->interval_us &&
           a->timeout_us == b->timeout_us && a->apply_flow_rules == b->apply_flow_rules;
}

static bool
gnmi_eq(const struct fs_gnmi_cfg *a, const struct fs_gnmi_cfg *b)
{
    if (!a || !b)
        return a == b;
    if (a->port != b->port || a->insecure != b->insecure ||
        !str_eq(a->tls_ca_file, b->tls_ca_file) || !str_eq(a->tls_cert_file, b->tls_cert_file) ||
        !str_eq(a->tls_key_file, b->tls_key_file) ||
        !str_eq(a->tls_server_name, b->tls_server_name) || !str_eq(a->username, b->username) ||
        !secret_eq(&a->password, &b->password) || a->n_subscriptions != b->n_subscriptions)
        return false;
    for (size_t i = 0; i < a->n_subscriptions; i++) {
        const struct fs_gnmi_subscription *x = &a->subscriptions[i], *y = &b->subscriptions[i];
        if (!str_eq(x->path, y->path) || x->mode != y->mode || x->interval_us != y->interval_us)
            return false;
    }
    return true;
}

bool
fs_target_cfg_equal(const struct fs_target_cfg *a, const struct fs_target_cfg *b)
{
    if (!a || !b)
        return a == b;
    if (!str_eq(a->name, b->name) || !str_eq(a->address, b->address) ||
        a->n_labels != b->n_labels || !str_eq(a->iface_include, b->iface_include) ||
        !str_eq(a->iface_exclude, b->iface_exclude) || !snmp_eq(a->snmp, b->snmp) ||
        !cli_eq(a->cli, b->cli) || !gnmi_eq(a->gnmi, b->gnmi) ||
        a->expose_all_sources != b->expose_all_sources ||
        a->staleness_intervals != b->staleness_intervals)
        return false;
    for (size_t i = 0; i < a->n_labels; i++)
        if (!str_eq(a->labels[i].key, b->labels[i].key) ||
            !str_eq(a->labels[i].value, b->labels[i].value))
            return false;
    for (size_t i = 0; i < 3; i++)
        if (!str_eq(a->source_precedence[i], b->source_precedence[i]))
            return false;
    return true;
}

/* ------------------------------------------------------------------------------------
 * Secrets
 */

static void
wipe(char *buf, size_t len)
{
    volatile char *p = buf;
    while (len--)
        *p++ = 0;
}

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
    int rc = -1, fd = -1;
    size_t n = 0;

    if (!buf || len < 2) {
        snprintf(errbuf, errlen, "no room for the secret");
        goto cleanup;
    }
    buf[0] = '\0';
    if (ref && ref->file) {
        fd = open(ref->file, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            snprintf(errbuf, errlen, "cannot open secret file %s: %s", ref->file, strerror(errno));
            goto cleanup;
        }
        /* The buffer takes the secret, its newline (stripped) and the NUL. */
        while (n < len) {
            ssize_t r = read(fd, buf + n, len - n);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0) {
                snprintf(errbuf, errlen, "cannot read secret file %s: %s", ref->file,
                         strerror(errno));
                goto cleanup;
            }
            if (r == 0)
                break;
            n += (size_t)r;
        }
        if (n == len) {
            char more;
            if (buf[n - 1] == '\n' && read(fd, &more, 1) == 0) {
                n--;
            } else {
                snprintf(errbuf, errlen, "secret file %s is longer than %zu bytes", ref->file,
                         len - 1);
                goto cleanup;
            }
        }
        strip_newline(buf, &n);
        if (memchr(buf, '\0', n)) {
            snprintf(errbuf, errlen, "secret file %s contains a NUL byte", ref->file);
            goto cleanup;
        }
        if (n == 0) {
            snprintf(errbuf, errlen, "secret file %s is empty", ref->file);
            goto cleanup;
        }
    } else if (ref && ref->env) {
        const char *v = getenv(ref->env);
        if (!v) {
            snprintf(errbuf, errlen, "environment variable %s is not set", ref->env);
            goto cleanup;
        }
        n = strlen(v);
        if (n >= len) {
            snprintf(errbuf, errlen, "environment variable %s is longer than %zu bytes", ref->env,
                     len - 1);
            goto cleanup;
        }
        memcpy(buf, v, n);
        strip_newline(buf, &n);
        if (n == 0) {
            snprintf(errbuf, errlen, "environment variable %s is empty", ref->env);
            goto cleanup;
        }
    } else {
        snprintf(errbuf, errlen, "no secret configured");
        goto cleanup;
    }
    rc = 0;
cleanup:
    if (fd >= 0)
        close(fd);
    if (rc != 0 && buf && len)
        wipe(buf, len);
    return rc;
}
