/*
 * The gNMI driver's configuration block: the checks YANG cannot express (paths that
 * parse, mappings onto real catalogue metrics and labels, TLS versus insecure,
 * credentials in pairs) and building struct fs_gnmi_cfg; see gnmi_config.h.
 */
#include "config/config.h"
#include "gnmi_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define US_PER_S INT64_C(1000000)
#define DEFAULT_SNAPSHOT_US (10 * US_PER_S)
/* The cadence of a stream some of whose values may stay silent while unchanged. */
#define SILENT_INTERVAL_US (600 * US_PER_S)
/* The range of clock_max_delivery_delay (fabricscope-gnmi.yang). */
#define CLOCK_DELAY_MIN_US 1000
#define CLOCK_DELAY_MAX_US (10 * US_PER_S)

void
fs_gnmi_cfg_defaults(struct fs_gnmi_cfg *c)
{
    c->port = 9339;
    c->encoding = FS_GNMI_ENC_AUTO;
    c->list_mode = FS_GNMI_LIST_STREAM;
    c->interval_us = 0;
    c->clock_max_delay_us = FS_GNMI_CLOCK_MAX_DELAY_US;
    c->max_message_bytes = FS_GNMI_MAX_MESSAGE_DEFAULT;
    c->lldp = true;
    c->lldp_interval_us = 30 * US_PER_S;
}

/* Below 64 KiB not even one port's sample fits. Above 64 MiB one stream's decode arena
 * (up to 32 x the message + 1 MiB, grpc_io.c) would exceed 2 GiB: 256 MiB allowed 8 GiB. */
static void
build_max_message(const struct lyd_node *n, struct fs_gnmi_cfg *c, struct fs_cfg_errs *errs)
{
    const struct lyd_node *k = fs_cfg_kid(n, "max_message");
    uint64_t b = 0;
    if (!k)
        return;
    if (fs_parse_size(fs_cfg_value(k), &b) != 0 || b < (64u << 10) || b > (64u << 20))
        fs_cfg_node_err(errs, k, false, "%s is not within 64KiB..64MiB", fs_cfg_value(k));
    else
        c->max_message_bytes = (int64_t)b;
}

static void
user_maps_free(struct fs_gnmi_user_map *maps, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct fs_gnmi_user_map *u = &maps[i];
        free(u->pattern);
        free(u->metric);
        for (size_t j = 0; j < u->n_labels; j++) {
            free(u->labels[j].label);
            free(u->labels[j].key);
            free(u->labels[j].value);
        }
        free(u->labels);
    }
    free(maps);
}

void
fs_gnmi_cfg_free(struct fs_gnmi_cfg *c)
{
    if (!c)
        return;
    free(c->tls_ca_file);
    free(c->tls_cert_file);
    free(c->tls_key_file);
    free(c->tls_server_name);
    free(c->username);
    fs_cfg_secret_ref_free(&c->password);
    for (size_t i = 0; i < c->n_subscriptions; i++)
        free(c->subscriptions[i].path);
    free(c->subscriptions);
    user_maps_free(c->user_maps, c->n_user_maps);
    free(c->acl_description_prefix);
    for (size_t i = 0; i < c->n_acl_rules; i++) {
        free(c->acl_rules[i].acl_name);
        free(c->acl_rules[i].rule);
    }
    free(c->acl_rules);
    free(c);
}

/* The period at which a subscription promises every value again; 0: none. */
static int64_t
promised_period(const struct fs_gnmi_subscription *s)
{
    if (s->heartbeat_us > 0)
        return s->heartbeat_us;
    if (s->mode == FS_GNMI_SUB_SAMPLE && !s->suppress_redundant)
        return s->interval_us;
    return 0;
}

int64_t
fs_gnmi_cfg_interval(const struct fs_gnmi_cfg *c)
{
    if (c->interval_us > 0)
        return c->interval_us;
    if (c->list_mode != FS_GNMI_LIST_STREAM)
        return DEFAULT_SNAPSHOT_US;
    int64_t longest = 0;
    for (size_t i = 0; i < c->n_subscriptions; i++) {
        int64_t p = promised_period(&c->subscriptions[i]);
        if (p <= 0)
            return SILENT_INTERVAL_US;
        if (p > longest)
            longest = p;
    }
    return longest > 0 ? longest : DEFAULT_SNAPSHOT_US;
}

int64_t
fs_gnmi_cfg_stall(const struct fs_gnmi_cfg *c)
{
    if (c->stall_us > 0)
        return c->stall_us;
    int64_t best = 0;
    if (c->list_mode != FS_GNMI_LIST_STREAM) {
        best = c->interval_us > 0 ? c->interval_us : DEFAULT_SNAPSHOT_US;
    } else {
        for (size_t i = 0; i < c->n_subscriptions; i++) {
            int64_t p = promised_period(&c->subscriptions[i]);
            if (p > 0 && (best == 0 || p < best))
                best = p;
        }
    }
    if (best == 0)
        return 0; /* ON_CHANGE without heartbeats: silence is normal */
    return 3 * best > US_PER_S ? 3 * best : US_PER_S;
}

/* ---- building ---- */

static int
enum_index(const char *v, const char *const *names, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        if (!strcmp(v, names[i]))
            return (int)i;
    return 0;
}

static int
build_subscription(const struct lyd_node *e, const struct fs_gnmi_cfg *c,
                   struct fs_gnmi_subscription *s, struct fs_cfg_errs *errs)
{
    static const char *const modes[] = {"sample", "on_change", "target_defined"};
    char why[256];
    Gnmi__Path *parsed = NULL;

    if (fs_cfg_strdup(&s->path, e, "path"))
        return -1;
    s->mode = (enum fs_gnmi_sub_mode)enum_index(fs_cfg_cval(e, "mode"), modes, 3);
    s->interval_us = fs_cfg_duration_us(e, "interval", 0);
    s->heartbeat_us = fs_cfg_duration_us(e, "heartbeat", 0);
    s->suppress_redundant = fs_cfg_bool(e, "suppress_redundant");
    if (s->path && fs_gnmi_path_parse(s->path, &parsed, why, sizeof why) != 0)
        fs_cfg_node_err(errs, fs_cfg_kid(e, "path"), false, "%s", why);
    if (parsed)
        protobuf_c_message_free_unpacked(&parsed->base, NULL);
    if (c->list_mode != FS_GNMI_LIST_STREAM)
        return 0; /* ONCE and POLL ignore the per-path mode */
    const struct lyd_node *n;
    if ((n = fs_cfg_given(e, "suppress_redundant")) && s->suppress_redundant &&
        s->mode != FS_GNMI_SUB_SAMPLE)
        fs_cfg_node_err(errs, n, true, "suppress_redundant applies to mode sample only");
    if ((n = fs_cfg_given(e, "heartbeat")) && s->mode == FS_GNMI_SUB_SAMPLE &&
        !s->suppress_redundant)
        fs_cfg_node_err(errs, n, true,
                        "a heartbeat applies to on_change, target_defined, or sample with "
                        "suppress_redundant: true (plain sample sends every interval)");
    if ((n = fs_cfg_given(e, "interval")) && s->mode == FS_GNMI_SUB_ON_CHANGE)
        fs_cfg_node_err(errs, n, true,
                        "mode on_change has no interval; a heartbeat resends unchanged values");
    return 0;
}

/* Checks one mapping against the catalogue by building a map that has only it. */
static void
check_mapping(const struct lyd_node *e, const struct fs_gnmi_user_map *u, struct fs_cfg_errs *errs)
{
    char why[256];
    struct fs_gnmi_map_opts mo = {.user_maps = u, .n_user_maps = 1, .cache_max = 1};
    struct fs_gnmi_map *m = fs_gnmi_map_new(&mo, why, sizeof why);
    if (m) {
        fs_gnmi_map_free(m);
        return;
    }
    const char *reason = why;
    if (!strncmp(reason, "mapping 0: ", 11))
        reason += 11;
    fs_cfg_node_err(errs, e, true, "%s", reason);
}

static int
build_mapping(const struct lyd_node *e, struct fs_gnmi_user_map *u, struct fs_cfg_errs *errs)
{
    const char *v;
    if (fs_cfg_strdup(&u->pattern, e, "path") || fs_cfg_strdup(&u->metric, e, "metric"))
        return -1;
    v = fs_cfg_cval(e, "type");
    u->type = v && !strcmp(v, "gauge") ? FS_GNMI_GAUGE : FS_GNMI_COUNTER;
    v = fs_cfg_cval(e, "scale");
    u->scale = v ? strtod(v, NULL) : 1.0;
    if (!(u->scale > 0))
        fs_cfg_node_err(errs, fs_cfg_kid(e, "scale"), false, "a scale must be greater than 0");
    size_t n = 0;
    for (const struct lyd_node *l = NULL; (l = fs_cfg_next(e, l, "labels"));)
        n++;
    if (n) {
        u->labels = calloc(n, sizeof *u->labels);
        if (!u->labels)
            return -1;
    }
    for (const struct lyd_node *l = NULL; (l = fs_cfg_next(e, l, "labels"));) {
        struct fs_gnmi_label_src *ls = &u->labels[u->n_labels++];
        if (fs_cfg_strdup(&ls->label, l, "name") || fs_cfg_strdup(&ls->key, l, "key") ||
            fs_cfg_strdup(&ls->value, l, "value"))
            return -1;
        if (!ls->key && !ls->value && !(ls->value = strdup("")))
            return -1;
    }
    if (u->metric && u->pattern)
        check_mapping(e, u, errs);
    return 0;
}

static int
build_acl_rule(const struct lyd_node *e, struct fs_gnmi_acl_rule *a)
{
    if (fs_cfg_strdup(&a->rule, e, "rule") || fs_cfg_strdup(&a->acl_name, e, "acl"))
        return -1;
    a->sequence_id = fs_cfg_kid(e, "sequence_id") ? fs_cfg_long(e, "sequence_id", -1) : -1;
    return 0;
}

static size_t
count_entries(const struct lyd_node *n, const char *name)
{
    size_t k = 0;
    for (const struct lyd_node *e = NULL; (e = fs_cfg_next(n, e, name));)
        k++;
    return k;
}

static void
check_transport(const struct lyd_node *n, const struct fs_gnmi_cfg *c, struct fs_cfg_errs *errs)
{
    bool tls = fs_cfg_given(n, "tls") != NULL;
    if (c->insecure && tls)
        fs_cfg_node_err(errs, fs_cfg_kid(n, "insecure"), true,
                        "insecure: true contradicts the tls block");
    if (!c->insecure && !tls)
        fs_cfg_node_err(errs, n, true,
                        "gnmi needs tls (e.g. tls: { ca_file: ca.pem }) or insecure: true");
    bool password = c->password.file || c->password.env;
    if (c->username && !password)
        fs_cfg_node_err(errs, fs_cfg_kid(n, "username"), true,
                        "a username needs password_file or password_env");
    if (!c->username && password)
        fs_cfg_node_err(errs, fs_cfg_kid(n, c->password.file ? "password_file" : "password_env"),
                        true, "a password needs username");
    if (c->backoff_min_us > c->backoff_max_us)
        fs_cfg_node_err(errs, fs_cfg_kid(n, "backoff_min"), true,
                        "backoff_min is longer than backoff_max");
}

/* The clock's error bar rests on this value: an absurd one would make it meaningless
 * (0: a bound that excludes the truth) or useless (beyond seconds). */
static void
build_clock_delay(const struct lyd_node *n, struct fs_gnmi_cfg *c, struct fs_cfg_errs *errs)
{
    const struct lyd_node *k = fs_cfg_kid(n, "clock_max_delivery_delay");
    int64_t us = fs_cfg_duration_us(n, "clock_max_delivery_delay", FS_GNMI_CLOCK_MAX_DELAY_US);
    if (us < CLOCK_DELAY_MIN_US || us > CLOCK_DELAY_MAX_US)
        fs_cfg_node_err(errs, k, false, "%s is not within 1ms..10s", fs_cfg_value(k));
    else
        c->clock_max_delay_us = us;
}

int
fs_gnmi_config_build(const struct lyd_node *n, void **dcfg, struct fs_cfg_errs *errs)
{
    static const char *const encodings[] = {"auto", "proto", "json", "json_ietf"};
    static const char *const list_modes[] = {"stream", "once", "poll"};
    struct fs_gnmi_cfg *c = calloc(1, sizeof *c);
    const struct lyd_node *tls = fs_cfg_kid(n, "tls");

    *dcfg = c;
    if (!c)
        return -1;
    fs_gnmi_cfg_defaults(c);
    c->port = (uint16_t)fs_cfg_long(n, "port", 9339);
    c->insecure = fs_cfg_bool(n, "insecure");
    c->encoding = (enum fs_gnmi_encoding)enum_index(fs_cfg_cval(n, "encoding"), encodings, 4);
    c->list_mode =
        (enum fs_gnmi_list_mode)enum_index(fs_cfg_cval(n, "subscribe_mode"), list_modes, 3);
    c->updates_only = fs_cfg_bool(n, "updates_only");
    c->expose_unmapped = fs_cfg_bool(n, "expose_unmapped");
    c->acl_by_description = fs_cfg_bool(n, "acl_by_description");
    /* the same keys and defaults as the snmp block's (fabricscope-snmp.yang) */
    c->lldp = fs_cfg_kid(n, "lldp") ? fs_cfg_bool(n, "lldp") : true;
    c->lldp_interval_us = fs_cfg_duration_us(n, "lldp_interval", 30 * US_PER_S);
    if (fs_cfg_strdup(&c->acl_description_prefix, n, "acl_description_prefix"))
        return -1;
    c->interval_us = fs_cfg_duration_us(n, "interval", 0);
    c->stall_us = fs_cfg_duration_us(n, "stall_timeout", 0);
    c->backoff_min_us = fs_cfg_duration_us(n, "backoff_min", US_PER_S);
    c->backoff_max_us = fs_cfg_duration_us(n, "backoff_max", 30 * US_PER_S);
    if (tls && (fs_cfg_strdup(&c->tls_ca_file, tls, "ca_file") ||
                fs_cfg_strdup(&c->tls_cert_file, tls, "cert_file") ||
                fs_cfg_strdup(&c->tls_key_file, tls, "key_file") ||
                fs_cfg_strdup(&c->tls_server_name, tls, "server_name")))
        return -1;
    if (fs_cfg_strdup(&c->username, n, "username") ||
        fs_cfg_secret_ref(&c->password, n, "password"))
        return -1;
    check_transport(n, c, errs);
    build_clock_delay(n, c, errs);
    build_max_message(n, c, errs);

    size_t ns = count_entries(n, "subscriptions"), nm = count_entries(n, "mappings"),
           na = count_entries(n, "acl_rules");
    if ((ns && !(c->subscriptions = calloc(ns, sizeof *c->subscriptions))) ||
        (nm && !(c->user_maps = calloc(nm, sizeof *c->user_maps))) ||
        (na && !(c->acl_rules = calloc(na, sizeof *c->acl_rules))))
        return -1;
    for (const struct lyd_node *e = NULL; (e = fs_cfg_next(n, e, "subscriptions"));)
        if (build_subscription(e, c, &c->subscriptions[c->n_subscriptions++], errs))
            return -1;
    for (const struct lyd_node *e = NULL; (e = fs_cfg_next(n, e, "mappings"));)
        if (build_mapping(e, &c->user_maps[c->n_user_maps++], errs))
            return -1;
    for (const struct lyd_node *e = NULL; (e = fs_cfg_next(n, e, "acl_rules"));)
        if (build_acl_rule(e, &c->acl_rules[c->n_acl_rules++]))
            return -1;
    return 0;
}

void
fs_gnmi_config_free(void *dcfg)
{
    fs_gnmi_cfg_free(dcfg);
}

static bool
subs_equal(const struct fs_gnmi_subscription *a, const struct fs_gnmi_subscription *b)
{
    return fs_cfg_str_equal(a->path, b->path) && a->mode == b->mode &&
           a->interval_us == b->interval_us && a->heartbeat_us == b->heartbeat_us &&
           a->suppress_redundant == b->suppress_redundant;
}

static bool
user_maps_equal(const struct fs_gnmi_user_map *a, const struct fs_gnmi_user_map *b)
{
    if (!fs_cfg_str_equal(a->pattern, b->pattern) || !fs_cfg_str_equal(a->metric, b->metric) ||
        a->type != b->type || a->scale != b->scale || a->n_labels != b->n_labels)
        return false;
    for (size_t i = 0; i < a->n_labels; i++)
        if (!fs_cfg_str_equal(a->labels[i].label, b->labels[i].label) ||
            !fs_cfg_str_equal(a->labels[i].key, b->labels[i].key) ||
            !fs_cfg_str_equal(a->labels[i].value, b->labels[i].value))
            return false;
    return true;
}

bool
fs_gnmi_config_equal(const void *pa, const void *pb)
{
    const struct fs_gnmi_cfg *a = pa, *b = pb;
    if (!a || !b)
        return a == b;
    if (a->port != b->port || a->insecure != b->insecure ||
        !fs_cfg_str_equal(a->tls_ca_file, b->tls_ca_file) ||
        !fs_cfg_str_equal(a->tls_cert_file, b->tls_cert_file) ||
        !fs_cfg_str_equal(a->tls_key_file, b->tls_key_file) ||
        !fs_cfg_str_equal(a->tls_server_name, b->tls_server_name) ||
        !fs_cfg_str_equal(a->username, b->username) ||
        !fs_cfg_secret_ref_equal(&a->password, &b->password) || a->encoding != b->encoding ||
        a->list_mode != b->list_mode || a->updates_only != b->updates_only ||
        a->interval_us != b->interval_us || a->stall_us != b->stall_us ||
        a->backoff_min_us != b->backoff_min_us || a->backoff_max_us != b->backoff_max_us ||
        a->clock_max_delay_us != b->clock_max_delay_us ||
        a->max_message_bytes != b->max_message_bytes || a->n_subscriptions != b->n_subscriptions ||
        a->n_user_maps != b->n_user_maps || a->n_acl_rules != b->n_acl_rules ||
        a->expose_unmapped != b->expose_unmapped ||
        a->acl_by_description != b->acl_by_description || a->lldp != b->lldp ||
        a->lldp_interval_us != b->lldp_interval_us ||
        !fs_cfg_str_equal(a->acl_description_prefix, b->acl_description_prefix))
        return false;
    for (size_t i = 0; i < a->n_subscriptions; i++)
        if (!subs_equal(&a->subscriptions[i], &b->subscriptions[i]))
            return false;
    for (size_t i = 0; i < a->n_user_maps; i++)
        if (!user_maps_equal(&a->user_maps[i], &b->user_maps[i]))
            return false;
    for (size_t i = 0; i < a->n_acl_rules; i++)
        if (!fs_cfg_str_equal(a->acl_rules[i].acl_name, b->acl_rules[i].acl_name) ||
            !fs_cfg_str_equal(a->acl_rules[i].rule, b->acl_rules[i].rule) ||
            a->acl_rules[i].sequence_id != b->acl_rules[i].sequence_id)
            return false;
    return true;
}

int64_t
fs_gnmi_config_interval(const void *dcfg)
{
    return dcfg ? fs_gnmi_cfg_interval(dcfg) : DEFAULT_SNAPSHOT_US;
}
