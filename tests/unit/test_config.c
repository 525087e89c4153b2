/*
 * Configuration walker tests: each class of problem, several problems in one file,
 * exact line:column and key paths, secrets never echoed, the built structure, the
 * strict parsers and the secret reader.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <libyang/libyang.h>
#include <sys/stat.h>
#include <time.h>

#include "config/config.h"
#include "daemon.h"
#include "driver.h"
#include "snmp_config.h"

/* This build's driver blocks, from the real registry (snmp; cli and gnmi known only). */
static struct fs_config_opts real_opts;

/*
 * The cli and gnmi blocks' YANG modules ship (drivers/onyx, drivers/gnmi) before their
 * drivers do. These test-only blocks load those very files, so that walking a target's
 * blocks across several driver modules (lists, choices, defaults, must statements in an
 * augment) is tested here. Their config_build checks nothing and keeps the block's
 * canonical JSON, which config_equal compares.
 */
struct test_block_cfg {
    int64_t interval_us;
    char *json;
};

static int
test_block_build(const struct lyd_node *b, void **dcfg, struct fs_cfg_errs *errs)
{
    struct test_block_cfg *c = calloc(1, sizeof(*c));
    (void)errs;
    *dcfg = c;
    if (!c || lyd_print_mem(&c->json, b, LYD_JSON, LYD_PRINT_SHRINK | LYD_PRINT_WD_ALL) != 0)
        return -1;
    c->interval_us = fs_cfg_duration_us(b, "interval", 5000000);
    return 0;
}

static void
test_block_free(void *dcfg)
{
    struct test_block_cfg *c = dcfg;
    if (c)
        free(c->json);
    free(c);
}

static bool
test_block_equal(const void *a, const void *b)
{
    const struct test_block_cfg *x = a, *y = b;
    return !strcmp(x->json, y->json);
}

static int64_t
test_block_interval(const void *dcfg)
{
    return ((const struct test_block_cfg *)dcfg)->interval_us;
}

static char *cli_yang, *gnmi_yang;
static struct fs_cfg_block_ops test_cli = {
    "cli", 20, NULL, test_block_build, test_block_free, test_block_equal, test_block_interval,
    true};
static struct fs_cfg_block_ops test_gnmi = {
    "gnmi", 10, NULL, test_block_build, test_block_free, test_block_equal, test_block_interval,
    false};
static const struct fs_cfg_block_ops *all_blocks[3];
static struct fs_config_opts all_opts;

static char *
slurp_src(const char *rel)
{
    char path[1024];
    const char *src = getenv("FS_SOURCE_DIR");
    FILE *f;
    char *buf;
    long n;
    if (!src)
        fail_msg("FS_SOURCE_DIR is not set");
    snprintf(path, sizeof(path), "%s/%s", src, rel);
    f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = calloc(1, (size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return buf;
}

static int
setup_blocks(void **state)
{
    (void)state;
    const struct fs_driver *snmp = fs_driver_find("snmp");
    fs_daemon_config_opts(&real_opts);
    if (!snmp)
        fail_msg("test_config needs the SNMP driver (FS_DRIVER_SNMP=ON)");
    cli_yang = slurp_src("drivers/onyx/fabricscope-cli.yang");
    gnmi_yang = slurp_src("drivers/gnmi/fabricscope-gnmi.yang");
    test_cli.yang_module = cli_yang;
    test_gnmi.yang_module = gnmi_yang;
    all_blocks[0] = &snmp->block;
    all_blocks[1] = &test_cli;
    all_blocks[2] = &test_gnmi;
    all_opts = (struct fs_config_opts){all_blocks, 3, NULL, 0};
    return 0;
}

static int
teardown_blocks(void **state)
{
    (void)state;
    free(cli_yang);
    free(gnmi_yang);
    return 0;
}

static const struct fs_snmp_cfg *
snmp_of(const struct fs_target_cfg *t)
{
    return fs_target_block_cfg(t, &fs_driver_find("snmp")->block);
}

/* Parses text as "t.yaml"; returns the error text (caller frees) or NULL. */
static char *
parse_err(const char *text, const struct fs_config_opts *opts, int *rc)
{
    struct fs_config *cfg = NULL;
    char *errors = NULL;
    int r = fs_config_parse(text, strlen(text), "t.yaml", opts ? opts : &all_opts, &cfg, &errors);
    if (rc)
        *rc = r;
    if (r == 0) {
        assert_non_null(cfg);
        assert_null(errors);
    } else {
        assert_null(cfg);
        assert_non_null(errors);
    }
    fs_config_free(cfg);
    return errors;
}

static struct fs_config *
parse_ok(const char *text)
{
    struct fs_config *cfg = NULL;
    char *errors = NULL;
    int r = fs_config_parse(text, strlen(text), "t.yaml", &all_opts, &cfg, &errors);
    if (r != 0)
        fail_msg("unexpected problems:\n%s", errors);
    assert_non_null(cfg);
    return cfg;
}

/* Asserts that the error text is exactly expect. */
static void
expect_errors(const char *text, const char *expect)
{
    int rc;
    char *e = parse_err(text, NULL, &rc);
    if (!e || strcmp(e, expect) != 0)
        fail_msg("got:\n%s\nexpected:\n%s", e ? e : "(no problems)", expect);
    free(e);
}

static void
test_valid_demo_like(void **state)
{
    (void)state;
    struct fs_config *c =
        parse_ok("listen: 127.0.0.1:9464\n"
                 "storage: { memory_limit: 64MiB, retention: 30m }\n"
                 "flow_rules:\n"
                 "  - { name: nccl-roce, protocol: udp, dst_port: 4791 }\n"
                 "  - { name: nccl-ce, protocol: udp, dst_port: 4791, ecn: ce, tc: 3 }\n"
                 "  - { name: nccl-sockets, protocol: tcp, dst_ports: 50000-50999 }\n"
                 "targets:\n"
                 "  - name: sim-tor1\n"
                 "    address: 127.0.0.1\n"
                 "    labels: { rack: r1, pod: demo }\n"
                 "    snmp: { port: 16100, community_file: run/demo/community, interval: 1s }\n");
    assert_string_equal(c->path, "t.yaml");
    assert_string_equal(c->listen_host, "127.0.0.1");
    assert_int_equal(c->listen_port, 9464);
    assert_int_equal(c->memory_limit, 64u << 20);
    assert_int_equal(c->retention_us, 30LL * 60 * 1000000);
    assert_int_equal(c->n_flow_rules, 3);
    assert_string_equal(c->flow_rules[0].name, "nccl-roce");
    assert_int_equal(c->flow_rules[0].protocol, FS_PROTO_UDP);
    assert_int_equal(c->flow_rules[0].dst_lo, 4791);
    assert_int_equal(c->flow_rules[0].dst_hi, 4791);
    assert_int_equal(c->flow_rules[0].tc, -1);
    assert_false(c->flow_rules[0].ecn_ce);
    assert_true(c->flow_rules[1].ecn_ce);
    assert_int_equal(c->flow_rules[1].tc, 3);
    assert_int_equal(c->flow_rules[2].protocol, FS_PROTO_TCP);
    assert_int_equal(c->flow_rules[2].dst_lo, 50000);
    assert_int_equal(c->flow_rules[2].dst_hi, 50999);
    assert_int_equal(c->n_targets, 1);
    const struct fs_target_cfg *t = &c->targets[0];
    assert_string_equal(t->name, "sim-tor1");
    assert_string_equal(t->address, "127.0.0.1");
    assert_int_equal(t->n_labels, 2); /* sorted by key */
    assert_string_equal(t->labels[0].key, "pod");
    assert_string_equal(t->labels[0].value, "demo");
    assert_string_equal(t->labels[1].key, "rack");
    assert_int_equal(t->n_blocks, 1);
    assert_non_null(snmp_of(t));
    assert_null(fs_target_block_cfg(t, &test_cli));
    assert_null(fs_target_block_cfg(t, &test_gnmi));
    assert_int_equal(snmp_of(t)->port, 16100);
    assert_int_equal(snmp_of(t)->version, FS_SNMP_V2C);
    assert_string_equal(snmp_of(t)->community.file, "run/demo/community");
    assert_null(snmp_of(t)->community.env);
    assert_int_equal(snmp_of(t)->interval_us, 1000000);
    /* defaults from the YANG model */
    assert_int_equal(snmp_of(t)->timeout_us, 2000000);
    assert_int_equal(snmp_of(t)->retries, 1);
    assert_int_equal(snmp_of(t)->max_repetitions, 50);
    assert_int_equal(snmp_of(t)->qos_index_base, -1);
    assert_false(snmp_of(t)->allow_weak_crypto);
    assert_string_equal(t->source_precedence[0], "gnmi");
    assert_string_equal(t->source_precedence[1], "cli");
    assert_string_equal(t->source_precedence[2], "snmp");
    assert_int_equal(t->n_source_precedence, 3);
    assert_int_equal(c->max_series_per_target, 50000);
    assert_false(t->expose_all_sources);
    assert_int_equal(t->staleness_intervals, 3);
    assert_null(t->iface_include);
    fs_config_free(c);
}

static void
test_defaults_minimal(void **state)
{
    (void)state;
    struct fs_config *c = parse_ok("listen: \"[::1]:0\"\n");
    assert_string_equal(c->listen_host, "::1");
    assert_int_equal(c->listen_port, 0);
    assert_int_equal(c->memory_limit, 256u << 20);
    assert_int_equal(c->retention_us, 3600LL * 1000000);
    assert_int_equal(c->n_targets, 0);
    assert_int_equal(c->n_flow_rules, 0);
    assert_null(c->http_tls_cert_file);
    assert_null(c->http_bearer_token.file);
    fs_config_free(c);
    /* An empty mapping is every default. */
    c = parse_ok("{}\n");
    assert_int_equal(c->listen_port, 9464);
    assert_int_equal(c->max_series_per_target, 50000);
    fs_config_free(c);
}

static void
test_drivers_and_precedence(void **state)
{
    (void)state;
    struct fs_config *c = parse_ok(
        "http: { tls: { cert_file: /c.pem, key_file: /k.pem }, bearer_token_env: FS_TOKEN }\n"
        "targets:\n"
        "  - name: tor1\n"
        "    address: 10.0.0.1\n"
        "    interfaces: { include: \"^Eth\", exclude: \"^Eth1/6[34]$\" }\n"
        "    source_precedence: [snmp]\n"
        "    expose_all_sources: true\n"
        "    staleness_intervals: 5\n"
        "    snmp:\n"
        "      version: 3\n"
        "      user: monitor\n"
        "      auth: { protocol: sha512, password_env: AUTH }\n"
        "      priv: { protocol: aes128, password_file: /p }\n"
        "      qos_index_base: 0\n"
        "    cli: { username: admin, key_file: /id, known_hosts: /kh, apply_flow_rules: true }\n"
        "    gnmi:\n"
        "      tls: { ca_file: ca.pem }\n"
        "      subscriptions:\n"
        "        - { path: /a, interval: 100ms }\n"
        "        - { path: /b, mode: on_change }\n"
        "        - { path: /c, mode: target_defined }\n");
    const struct fs_target_cfg *t = &c->targets[0];
    assert_string_equal(c->http_tls_cert_file, "/c.pem");
    assert_string_equal(c->http_tls_key_file, "/k.pem");
    assert_string_equal(c->http_bearer_token.env, "FS_TOKEN");
    assert_string_equal(t->source_precedence[0], "snmp");
    assert_string_equal(t->source_precedence[1], "gnmi");
    assert_string_equal(t->source_precedence[2], "cli");
    assert_true(t->expose_all_sources);
    assert_int_equal(t->staleness_intervals, 5);
    assert_int_equal(regexec(&t->iface_include_re, "Eth1/1", 0, NULL, 0), 0);
    assert_int_not_equal(regexec(&t->iface_include_re, "swp1", 0, NULL, 0), 0);
    assert_int_equal(regexec(&t->iface_exclude_re, "Eth1/63", 0, NULL, 0), 0);
    assert_int_not_equal(regexec(&t->iface_exclude_re, "Eth1/62", 0, NULL, 0), 0);
    assert_int_equal(snmp_of(t)->version, FS_SNMP_V3);
    assert_string_equal(snmp_of(t)->user, "monitor");
    assert_int_equal(snmp_of(t)->auth_protocol, FS_AUTH_SHA512);
    assert_string_equal(snmp_of(t)->auth_password.env, "AUTH");
    assert_int_equal(snmp_of(t)->priv_protocol, FS_PRIV_AES128);
    assert_string_equal(snmp_of(t)->priv_password.file, "/p");
    assert_int_equal(snmp_of(t)->qos_index_base, 0);
    /* The cli and gnmi blocks came from their own modules, defaults included. */
    const struct test_block_cfg *cli = fs_target_block_cfg(t, &test_cli);
    const struct test_block_cfg *gnmi = fs_target_block_cfg(t, &test_gnmi);
    assert_non_null(cli);
    assert_non_null(gnmi);
    assert_int_equal(cli->interval_us, 5000000);
    assert_non_null(strstr(cli->json, "\"driver\":\"onyx\""));
    assert_non_null(strstr(cli->json, "\"port\":22"));
    assert_non_null(strstr(cli->json, "\"known_hosts\":\"/kh\""));
    assert_non_null(strstr(gnmi->json, "\"port\":9339"));
    assert_non_null(strstr(gnmi->json, "\"mode\":\"on_change\""));
    fs_config_free(c);
}

static void
test_unknown_keys_and_inline_secrets(void **state)
{
    (void)state;
    const char *text = "listen: 127.0.0.1:9464\n"
                       "targets:\n"
                       "  - name: tor1\n"
                       "    address: 10.0.0.1\n"
                       "    snmp: { community: s3cr3t-value, community_file: /c, intervl: 1s }\n"
                       "    cli: { username: u, password: hunter2, key_file: /k }\n"
                       "lisen: x\n";
    int rc;
    char *e = parse_err(text, NULL, &rc);
    assert_int_equal(rc, 4);
    assert_string_equal(e, "t.yaml:5:13: targets[tor1].snmp.community: unknown key; secrets are "
                           "not written inline: use community_file or community_env\n"
                           "t.yaml:5:58: targets[tor1].snmp.intervl: unknown key (did you mean "
                           "interval?)\n"
                           "t.yaml:6:25: targets[tor1].cli.password: unknown key; secrets are not "
                           "written inline: use password_file or password_env\n"
                           "t.yaml:7:1: lisen: unknown key (did you mean listen?)\n");
    assert_null(strstr(e, "s3cr3t"));
    assert_null(strstr(e, "hunter2"));
    free(e);
}

static void
test_types_enums_ranges_all_reported(void **state)
{
    (void)state;
    /* The example of the issue, at its line and column. */
    expect_errors("listen: 127.0.0.1:9464\n"
                  "targets:\n"
                  "  - name: tor1\n"
                  "    address: 10.0.0.1\n"
                  "    snmp:\n"
                  "      community_file: /c\n"
                  "      port: 70000\n"
                  "      version: 1\n"
                  "      retries: many\n"
                  "      allow_weak_crypto: yes\n"
                  "      interval: 10sec\n"
                  "      max_repetitions: \"5\"\n"
                  "    staleness_intervals: 0\n",
                  "t.yaml:7:13: targets[tor1].snmp.port: 70000 is not in 1..65535\n"
                  "t.yaml:8:16: targets[tor1].snmp.version: \"1\" is not one of 2c, 3\n"
                  "t.yaml:9:16: targets[tor1].snmp.retries: many is not a whole number\n"
                  "t.yaml:10:26: targets[tor1].snmp.allow_weak_crypto: \"yes\" is not true or "
                  "false\n"
                  "t.yaml:11:17: targets[tor1].snmp.interval: \"10sec\" is not a duration (a whole "
                  "number and one unit: ms, s, m, h or d, e.g. 10s)\n"
                  "t.yaml:12:24: targets[tor1].snmp.max_repetitions: \"5\" is text, not a number "
                  "(write it without quotes)\n"
                  "t.yaml:13:26: targets[tor1].staleness_intervals: 0 is not in 1..1000\n");
}

static void
test_analysis_block(void **state)
{
    (void)state;
    struct fs_config *c = parse_ok("analysis:\n"
                                   "  z_threshold: 8.5\n"
                                   "  baseline_window: 20m\n"
                                   "  merge_gap: 500ms\n"
                                   "  horizon: 48h\n"
                                   "  min_occurrences: 4\n"
                                   "  max_period_spread: 0.05\n"
                                   "  episode_retention: 14d\n"
                                   "  episode_memory_limit: 16MiB\n");
    assert_true(c->analysis.z_threshold == 8.5);
    assert_int_equal(c->analysis.baseline_window_us, 1200LL * 1000000);
    assert_int_equal(c->analysis.merge_gap_us, 500000);
    assert_int_equal(c->analysis.horizon_us, 48LL * 3600 * 1000000);
    assert_int_equal(c->analysis.min_occurrences, 4);
    assert_true(c->analysis.max_period_spread == 0.05);
    assert_int_equal(c->analysis.episode_retention_us, 14LL * 24 * 3600 * 1000000);
    assert_int_equal(c->analysis.episode_memory_limit, 16u << 20);
    fs_config_free(c);
    c = parse_ok("listen: 127.0.0.1:9464\n");
    assert_true(c->analysis.z_threshold == 6);
    assert_int_equal(c->analysis.horizon_us, 24LL * 3600 * 1000000);
    assert_int_equal(c->analysis.min_occurrences, 3);
    assert_int_equal(c->analysis.episode_retention_us, 7LL * 24 * 3600 * 1000000);
    fs_config_free(c);
    expect_errors("analysis:\n"
                  "  z_threshold: 1\n"
                  "  min_occurrences: 2\n"
                  "  baseline_window: 5s\n"
                  "  horizon: 30d\n"
                  "  episode_memory_limit: 1KiB\n",
                  "t.yaml:2:16: analysis.z_threshold: 1 is not in 2..1000\n"
                  "t.yaml:3:20: analysis.min_occurrences: 2 is not in 3..1000\n"
                  "t.yaml:4:20: analysis.baseline_window: 5s is not within 10s..6h\n"
                  "t.yaml:5:12: analysis.horizon: 30d is longer than episode_retention: "
                  "recurrences cannot be looked for beyond the episodes kept\n"
                  "t.yaml:6:25: analysis.episode_memory_limit: 1KiB is below the minimum of "
                  "1MiB\n");
}

static void
test_analysis_history(void **state)
{
    (void)state;
    struct fs_config *c = parse_ok("analysis:\n"
                                   "  history:\n"
                                   "    url: https://mimir.example/prometheus\n"
                                   "    bearer_token_file: /run/secrets/mimir\n"
                                   "    tls: { ca_file: /etc/ssl/ca.pem }\n"
                                   "    headers: { X-Scope-OrgID: fabric }\n"
                                   "    step: 30s\n"
                                   "    max_points: 500000\n"
                                   "    prefetch: false\n");
    const struct fs_history_cfg *h = c->analysis.history;
    assert_false(h->prefetch);
    assert_non_null(h);
    assert_string_equal(h->url, "https://mimir.example/prometheus");
    assert_string_equal(h->bearer_token.file, "/run/secrets/mimir");
    assert_string_equal(h->tls_ca_file, "/etc/ssl/ca.pem");
    assert_int_equal(h->n_headers, 1);
    assert_string_equal(h->headers[0].key, "X-Scope-OrgID");
    assert_int_equal(h->step_us, 30LL * 1000000);
    assert_int_equal(h->max_points, 500000);
    assert_int_equal(h->remote_timeout_us, 30LL * 1000000);
    struct fs_history_cfg *copy = fs_history_cfg_copy(h);
    assert_non_null(copy);
    assert_string_equal(copy->headers[0].value, "fabric");
    assert_string_equal(copy->bearer_token.file, "/run/secrets/mimir");
    fs_history_cfg_free(copy);
    fs_config_free(c);
    c = parse_ok("analysis: { history: { url: 'http://prom:9090' } }\n");
    assert_int_equal(c->analysis.history->step_us, 60LL * 1000000);
    assert_int_equal(c->analysis.history->max_points, 2000000);
    assert_true(c->analysis.history->prefetch);
    fs_config_free(c);
    c = parse_ok("listen: 127.0.0.1:9464\n");
    assert_null(c->analysis.history);
    fs_config_free(c);
    expect_errors("analysis:\n"
                  "  history:\n"
                  "    url: prom:9090\n"
                  "    step: 500ms\n"
                  "    headers: { Authorization: x }\n"
                  "    basic_auth: { username: u, password_file: /p }\n"
                  "    bearer_token_file: /t\n",
                  "t.yaml:3:10: analysis.history.url: \"prom:9090\" is not an http:// or https:// "
                  "URL\n"
                  "t.yaml:4:11: analysis.history.step: 500ms is not within 1s..1h\n"
                  "t.yaml:5:16: analysis.history.headers.Authorization: Authorization is set by "
                  "the history client itself\n"
                  "t.yaml:6:5: analysis.history.basic_auth: basic_auth and bearer_token_file "
                  "exclude each other\n");
    /* 0s would be no timeout at all (a hung query API holding the history lock for ever):
       refused (as every zero duration), and so is anything under 1s; 1s is taken. */
    expect_errors("analysis:\n"
                  "  history:\n"
                  "    url: http://prom:9090\n"
                  "    remote_timeout: 0s\n",
                  "t.yaml:4:21: analysis.history.remote_timeout: \"0s\": a duration must be "
                  "greater than 0\n");
    expect_errors("analysis: { history: { url: 'http://prom:9090', remote_timeout: 999ms } }\n",
                  "t.yaml:1:65: analysis.history.remote_timeout: 999ms is below the minimum of "
                  "1s\n");
    /* A refused URL is shown without its user:password@ (here the scheme is wrong). */
    expect_errors("analysis: { history: { url: 'ftp://fsuser:s3cret@prom:9090/x' } }\n",
                  "t.yaml:1:29: analysis.history.url: \"ftp://***@prom:9090/x\" is not an http:// "
                  "or https:// URL\n");
    c = parse_ok("analysis: { history: { url: 'http://prom:9090', remote_timeout: 1s } }\n");
    assert_int_equal(c->analysis.history->remote_timeout_us, 1000000);
    fs_config_free(c);
}

static void
test_shapes(void **state)
{
    (void)state;
    expect_errors("listen: [a]\n"
                  "storage: 5\n"
                  "flow_rules: { name: x }\n"
                  "targets:\n"
                  "  - just-a-string\n"
                  "  - name: t2\n"
                  "    address:\n"
                  "    snmp: { community_file: /c }\n"
                  "    source_precedence: snmp\n",
                  "t.yaml:1:9: listen: expected a value, got a list\n"
                  "t.yaml:2:10: storage: expected a mapping, got a value\n"
                  "t.yaml:3:13: flow_rules: expected a list, got a mapping\n"
                  "t.yaml:5:5: targets[#1]: expected a mapping, got a value\n"
                  "t.yaml:7:13: targets[t2].address: missing value\n"
                  "t.yaml:9:24: targets[t2].source_precedence: expected a list (e.g. [a, b]), got "
                  "a value\n");
}

static void
test_missing_mandatory_and_choices(void **state)
{
    (void)state;
    expect_errors("flow_rules:\n"
                  "  - { name: a, protocol: udp }\n"
                  "  - { name: b, dst_port: 1, dst_ports: 1-2 }\n"
                  "  - { protocol: udp, dst_port: 1 }\n"
                  "targets:\n"
                  "  - name: t\n"
                  "    snmp: { community_file: /c, community_env: C }\n",
                  "t.yaml:2:5: flow_rules[a]: needs dst_port or dst_ports\n"
                  "t.yaml:3:29: flow_rules[b].dst_ports: cannot be combined with dst_port\n"
                  "t.yaml:4:5: flow_rules[#3]: missing required key \"name\"\n"
                  "t.yaml:6:5: targets[t]: missing required key \"address\"\n"
                  "t.yaml:7:33: targets[t].snmp.community_env: cannot be combined with "
                  "community_file\n");
}

static void
test_duplicates(void **state)
{
    (void)state;
    expect_errors("targets:\n"
                  "  - name: tor1\n"
                  "    address: a\n"
                  "    snmp: { community_file: /c, port: 1, port: 2 }\n"
                  "  - name: tor2\n"
                  "    address: b\n"
                  "  - name: tor1\n"
                  "    address: c\n"
                  "listen: 127.0.0.1:1\n"
                  "listen: 127.0.0.1:2\n",
                  "t.yaml:4:42: targets[tor1].snmp.port: duplicate key (first at 4:33)\n"
                  "t.yaml:7:11: targets[tor1]: duplicate name \"tor1\" (first at 2:11)\n"
                  "t.yaml:10:1: listen: duplicate key (first at 9:1)\n");
}

static void
test_yaml_features_refused(void **state)
{
    (void)state;
    expect_errors("a: &x 1\nb: *x\nc: !foo 2\n",
                  "t.yaml:1:4: a: YAML anchors are not allowed\n"
                  "t.yaml:2:4: b: YAML aliases are not allowed\n"
                  "t.yaml:3:4: c: YAML tags are not allowed (!foo)\n");
    expect_errors("listen: 127.0.0.1:1\n---\nlisten: 127.0.0.1:2\n",
                  "t.yaml:2:1: (document): only one YAML document is allowed in a configuration "
                  "file\n");
    expect_errors("listen: [1\n", "t.yaml:2:1: listen[#2]: YAML syntax error while parsing a "
                                  "flow sequence: did not find expected ',' or ']'\n");
    expect_errors("", "t.yaml:1:1: (document): the configuration is empty\n");
    expect_errors("- a\n", "t.yaml:1:1: (document): expected a mapping of settings at the top "
                           "level, got a list\n");
    expect_errors("? [a]\n: b\n", "t.yaml:1:3: (document): keys must be plain text, not a list\n");
}

static void
test_garbage_and_size(void **state)
{
    (void)state;
    int rc;
    char *e;
    struct fs_config *cfg = NULL;

    expect_errors("listen: \"a\\0b\"\n", "t.yaml:1:9: listen: text contains a NUL character\n");
    expect_errors("listen: \xff\xfe\n",
                  "t.yaml:1:9: (document): not valid UTF-8 text: invalid leading UTF-8 octet\n");
    /* UTF-16 is not guessed from a BOM: the file must be UTF-8. */
    e = parse_err("\xff\xfel\0i\0", NULL, &rc);
    assert_true(rc > 0);
    free(e);
    e = parse_err("listen: \x01\n", NULL, &rc);
    assert_true(rc > 0);
    free(e);

    size_t big = FS_CONFIG_MAX_BYTES + 1;
    char *text = malloc(big);
    assert_non_null(text);
    memset(text, '#', big);
    rc = fs_config_parse(text, big, "big.yaml", &all_opts, &cfg, &e);
    assert_int_equal(rc, 1);
    assert_null(cfg);
    assert_string_equal(
        e, "big.yaml:1:1: (document): the file is larger than 1048576 bytes (1 MiB)\n");
    free(e);
    free(text);
}

static void
test_deep_nesting(void **state)
{
    (void)state;
    char text[600];
    size_t o = 0;
    int rc;
    o += (size_t)snprintf(text, sizeof(text), "listen: ");
    for (int i = 0; i < 200; i++)
        text[o++] = '[';
    text[o] = '\0';
    char *e = parse_err(text, NULL, &rc);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(e, "nested more than 64 levels deep"));
    free(e);
}

static void
test_driver_not_built(void **state)
{
    (void)state;
    static const char *const none_built[] = {"snmp", "cli", "gnmi"};
    struct fs_config_opts bare = {NULL, 0, none_built, 3};
    const char *text =
        "targets:\n"
        "  - name: x\n"
        "    address: a\n"
        "    snmp: { community_file: /c }\n"
        "    cli: { username: u, key_file: /k }\n"
        "    gnmi: { insecure: true, subscriptions: [ { path: /a, mode: on_change } ] }\n";
    int rc;
    /* This build's real registry: a line for each driver block whose driver it lacks. */
    char want[300] = "";
    int nwant = 0;
    if (!fs_driver_find("cli")) {
        strcat(want, "t.yaml:5:5: targets[x].cli: this build has no cli driver\n");
        nwant++;
    }
    if (!fs_driver_find("gnmi")) {
        strcat(want, "t.yaml:6:5: targets[x].gnmi: this build has no gnmi driver\n");
        nwant++;
    }
    char *e = parse_err(text, &real_opts, &rc);
    assert_int_equal(rc, nwant);
    if (nwant)
        assert_string_equal(e, want);
    else
        assert_null(e);
    free(e);
    e = parse_err(text, &bare, &rc);
    assert_int_equal(rc, 3);
    assert_string_equal(e, "t.yaml:4:5: targets[x].snmp: this build has no snmp driver\n"
                           "t.yaml:5:5: targets[x].cli: this build has no cli driver\n"
                           "t.yaml:6:5: targets[x].gnmi: this build has no gnmi driver\n");
    free(e);
    /* A name no driver has is an unknown key, as anywhere else. */
    e = parse_err("targets: [ { name: x, address: a, telnet: {} } ]\n", &real_opts, &rc);
    assert_string_equal(e, "t.yaml:1:35: targets[x].telnet: unknown key\n");
    free(e);
}

static void
test_source_precedence_names(void **state)
{
    (void)state;
    int rc;
    /* Unlisted drivers follow by default rank (gnmi 10, cli 20, snmp 30). */
    struct fs_config *c = parse_ok("targets:\n"
                                   "  - { name: t, address: x, source_precedence: [cli],\n"
                                   "      snmp: { community_file: /c } }\n");
    const struct fs_target_cfg *t = &c->targets[0];
    assert_int_equal(t->n_source_precedence, 3);
    assert_string_equal(t->source_precedence[0], "cli");
    assert_string_equal(t->source_precedence[1], "gnmi");
    assert_string_equal(t->source_precedence[2], "snmp");
    fs_config_free(c);
    /* A known driver this build lacks may be listed: the order is kept. */
    struct fs_config *r = NULL;
    char *e = NULL;
    const char *ok = "targets:\n"
                     "  - { name: t, address: x, source_precedence: [gnmi, snmp],\n"
                     "      snmp: { community_file: /c } }\n";
    assert_int_equal(fs_config_parse(ok, strlen(ok), "t.yaml", &real_opts, &r, &e), 0);
    /* ... and the built ones not listed follow by rank (cli 20, then sflow 25, unless
     * FS_DRIVER_ONYX or FS_DRIVER_SFLOW is OFF) */
    assert_int_equal(r->targets[0].n_source_precedence,
                     2 + (fs_driver_find("cli") != NULL) + (fs_driver_find("sflow") != NULL));
    assert_string_equal(r->targets[0].source_precedence[0], "gnmi");
    assert_string_equal(r->targets[0].source_precedence[1], "snmp");
    if (fs_driver_find("cli"))
        assert_string_equal(r->targets[0].source_precedence[2], "cli");
    if (fs_driver_find("cli") && fs_driver_find("sflow"))
        assert_string_equal(r->targets[0].source_precedence[3], "sflow");
    fs_config_free(r);
    e = parse_err("targets:\n"
                  "  - { name: t, address: x, source_precedence: [snmp, telnet] }\n",
                  &real_opts, &rc);
    /* Built drivers first (registry order), then the known ones this build lacks. */
    if (fs_driver_find("gnmi") && fs_driver_find("snmp") && fs_driver_find("cli") &&
        fs_driver_find("sflow"))
        assert_string_equal(e, "t.yaml:2:54: targets[t].source_precedence: \"telnet\" is not "
                               "a driver name (known: gnmi, snmp, cli, sflow)\n");
    else
        assert_non_null(strstr(e, "\"telnet\" is not a driver name (known: "));
    free(e);
}

static void
test_semantics(void **state)
{
    (void)state;
    expect_errors(
        "flow_rules:\n"
        "  - { name: r, dst_ports: 9-3, src_ports: 0-5 }\n"
        "targets:\n"
        "  - name: a\n"
        "    address: x\n"
        "    interfaces: { include: \"(\" }\n"
        "    snmp: { version: 2c }\n"
        "  - name: b\n"
        "    address: x\n"
        "    snmp: { version: 3, priv: { protocol: des, password_env: P } }\n"
        "  - name: c\n"
        "    address: x\n"
        "    snmp: { version: 3, user: u, auth: { protocol: sha, password_env: A } }\n"
        "  - name: d\n"
        "    address: x\n"
        "    snmp: { version: 3, user: u, allow_weak_crypto: true,\n"
        "            auth: { protocol: md5, password_env: A }, priv: { protocol: des, "
        "password_env: P } }\n",
        "t.yaml:2:27: flow_rules[r].dst_ports: 9-3 is backwards: 9 is greater than 3\n"
        "t.yaml:2:43: flow_rules[r].src_ports: 0-5: ports must be in 1..65535\n"
        "t.yaml:6:28: targets[a].interfaces.include: not a POSIX extended regular expression: "
        "Unmatched ( or \\(\n"
        "t.yaml:7:5: targets[a].snmp: SNMP v2c needs community_file or community_env\n"
        "t.yaml:10:5: targets[b].snmp: SNMP v3 needs user\n"
        "t.yaml:10:25: targets[b].snmp.priv: priv needs auth: SNMPv3 has no privacy without "
        "authentication\n"
        "t.yaml:10:43: targets[b].snmp.priv.protocol: des is weak; use aes128, or set "
        "allow_weak_crypto: true\n"
        "t.yaml:13:5: targets[c].snmp: SNMP v3 without priv is authNoPriv (counters in clear): "
        "add priv, or set security_level: authNoPriv\n"
        "t.yaml:13:52: targets[c].snmp.auth.protocol: sha is weak; use sha256 or better, or set "
        "allow_weak_crypto: true\n");
}

static void
test_libyang_stage(void **state)
{
    (void)state;
    /* must statements of the model, checked by libyang once everything else passed */
    expect_errors(
        "targets:\n"
        "  - name: t\n"
        "    address: x\n"
        "    cli: { username: u }\n",
        "t.yaml:4:5: targets[t].cli: cli needs password_file, password_env or key_file\n");
    expect_errors(
        "targets:\n"
        "  - name: t\n"
        "    address: x\n"
        "    gnmi:\n"
        "      insecure: true\n"
        "      subscriptions:\n"
        "        - path: /a\n",
        "t.yaml:7:11: targets[t].gnmi.subscriptions[/a]: mode sample needs an interval\n");
}

static void
test_secret_values_never_echoed(void **state)
{
    (void)state;
    int rc;
    char *e = parse_err(
        "http: { bearer_token_env: \"tok=abc123\" }\n"
        "targets:\n"
        "  - name: t\n"
        "    address: x\n"
        "    snmp: { community_env: \"pa ss\", version: 3, user: u,\n"
        "            auth: { protocol: sha256, password: zzsecret, password_file: \"\" } }\n",
        NULL, &rc);
    assert_int_equal(rc, 4);
    assert_null(strstr(e, "abc123"));
    assert_null(strstr(e, "pa ss"));
    assert_null(strstr(e, "zzsecret"));
    assert_non_null(strstr(e, "http.bearer_token_env: the value is not an environment variable "
                              "name"));
    free(e);
}

static void
test_many_problems_capped(void **state)
{
    (void)state;
    size_t cap = 200 * 16 + 64, o = 0;
    char *text = malloc(cap);
    int rc;
    assert_non_null(text);
    for (int i = 0; i < 200; i++)
        o += (size_t)snprintf(text + o, cap - o, "bogus%d: 1\n", i);
    char *e = parse_err(text, NULL, &rc);
    assert_int_equal(rc, 101);
    assert_non_null(strstr(e, "t.yaml:100:1: bogus99: unknown key\n"));
    assert_null(strstr(e, "bogus100"));
    assert_non_null(strstr(e, "t.yaml: stopped after 100 problems; fix these first\n"));
    free(e);
    free(text);
}

/* A reload keeps each driver's instance unless what that driver reads changed: another
 * driver's block or (for a driver that does not read them) the flow rules do not count. */
static void
test_target_instance_equal(void **state)
{
    (void)state;
    /* This file's cli block stands for the ONYX driver's: it reads the flow rules. */
    const struct fs_cfg_block_ops *snmp = all_blocks[0], *cli = &test_cli;
    assert_string_equal(snmp->name, "snmp");
    assert_false(snmp->uses_flow_rules);
    const char *base = "flow_rules:\n"
                       "  - { name: roce, protocol: udp, dst_port: 4791 }\n"
                       "targets:\n"
                       "  - name: t\n"
                       "    address: x\n"
                       "    snmp: { community_file: /c, interval: 1s }\n"
                       "    cli: { username: u, key_file: /k }\n";
    struct fs_config *a = parse_ok(base);
    static const struct {
        const char *from, *to;
        bool snmp_kept, cli_kept;
    } changes[] = {
        {"interval: 1s", "interval: 2s", false, true},     /* the SNMP block */
        {"key_file: /k", "key_file: /j", true, false},     /* the CLI block */
        {"dst_port: 4791", "dst_port: 4792", true, false}, /* flow rules: the CLI reads them */
        {"address: x", "address: y", false, false},        /* the target's own */
        {"    cli: { username: u, key_file: /k }\n", "", true, false}, /* the CLI block goes */
    };
    for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++) {
        char text[1024];
        const char *at = strstr(base, changes[i].from);
        assert_non_null(at);
        snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - base), base, changes[i].to,
                 at + strlen(changes[i].from));
        struct fs_config *b = parse_ok(text);
        if (fs_target_instance_equal(&a->targets[0], &b->targets[0], snmp) !=
                changes[i].snmp_kept ||
            fs_target_instance_equal(&a->targets[0], &b->targets[0], cli) != changes[i].cli_kept)
            fail_msg("change %zu: snmp kept %d, cli kept %d", i,
                     fs_target_instance_equal(&a->targets[0], &b->targets[0], snmp),
                     fs_target_instance_equal(&a->targets[0], &b->targets[0], cli));
        assert_false(fs_target_cfg_equal(&a->targets[0], &b->targets[0]));
        fs_config_free(b);
    }
    assert_true(fs_target_instance_equal(&a->targets[0], &a->targets[0], cli));
    fs_config_free(a);
}

static void
test_target_equal(void **state)
{
    (void)state;
    const char *base =
        "targets:\n"
        "  - name: t\n"
        "    address: x\n"
        "    labels: { a: \"1\", b: \"2\" }\n"
        "    interfaces: { include: \"^Eth\" }\n"
        "    snmp: { community_file: /c, interval: 1s }\n"
        "    gnmi: { insecure: true, subscriptions: [ { path: /a, interval: 1s } ] }\n";
    struct fs_config *a = parse_ok(base), *b = parse_ok(base);
    assert_true(fs_target_cfg_equal(&a->targets[0], &b->targets[0]));
    fs_config_free(b);

    static const char *const changes[][2] = {
        {"address: x", "address: y"},
        {"b: \"2\"", "b: \"3\""},
        {"^Eth", "^swp"},
        {"interval: 1s }\n    gnmi", "interval: 2s }\n    gnmi"},
        {"/c,", "/d,"},
        {"path: /a", "path: /b"},
        {"insecure: true", "insecure: true, port: 1"},
    };
    for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++) {
        char text[1024];
        const char *at = strstr(base, changes[i][0]);
        assert_non_null(at);
        snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - base), base, changes[i][1],
                 at + strlen(changes[i][0]));
        b = parse_ok(text);
        if (fs_target_cfg_equal(&a->targets[0], &b->targets[0]))
            fail_msg("change %zu not seen", i);
        fs_config_free(b);
    }
    assert_true(fs_target_cfg_equal(NULL, NULL));
    assert_false(fs_target_cfg_equal(&a->targets[0], NULL));
    fs_config_free(a);
}

static void
test_parse_duration(void **state)
{
    (void)state;
    assert_int_equal(fs_parse_duration("100ms"), 100000);
    assert_int_equal(fs_parse_duration("10s"), 10000000);
    assert_int_equal(fs_parse_duration("5m"), 300000000);
    assert_int_equal(fs_parse_duration("1h"), 3600000000LL);
    assert_int_equal(fs_parse_duration("1d"), 86400000000LL);
    assert_int_equal(fs_parse_duration("0s"), 0);
    static const char *const bad[] = {"",
                                      "s",
                                      "10",
                                      "10 s",
                                      " 10s",
                                      "10s ",
                                      "-1s",
                                      "+1s",
                                      "1.5s",
                                      "10sec",
                                      "1S",
                                      "1us",
                                      "99999999999999999999s",
                                      "9223372036854775807h",
                                      "1e3s",
                                      "0x10s"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (fs_parse_duration(bad[i]) != -1)
            fail_msg("\"%s\" accepted", bad[i]);
    assert_int_equal(fs_parse_duration(NULL), -1);
}

static void
test_parse_size(void **state)
{
    (void)state;
    uint64_t v;
    assert_int_equal(fs_parse_size("256MiB", &v), 0);
    assert_int_equal(v, 256ull << 20);
    assert_int_equal(fs_parse_size("1GiB", &v), 0);
    assert_int_equal(v, 1ull << 30);
    assert_int_equal(fs_parse_size("4096", &v), 0);
    assert_int_equal(v, 4096);
    assert_int_equal(fs_parse_size("64KiB", &v), 0);
    assert_int_equal(v, 65536);
    assert_int_equal(fs_parse_size("10MB", &v), 0);
    assert_int_equal(v, 10000000);
    assert_int_equal(fs_parse_size("7B", &v), 0);
    assert_int_equal(v, 7);
    static const char *const bad[] = {"",
                                      "MiB",
                                      "1 MiB",
                                      "1mib",
                                      "1.5GiB",
                                      "-1",
                                      "1MiBs",
                                      "99999999999TiB",
                                      "18446744073709551616"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (fs_parse_size(bad[i], &v) == 0)
            fail_msg("\"%s\" accepted", bad[i]);
}

static void
test_secret_read(void **state)
{
    (void)state;
    char path[] = "/tmp/fs-test-secret-XXXXXX";
    int fd = mkstemp(path);
    char buf[16], err[256];
    struct fs_secret_ref ref = {0};
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "topsecret\n", 10), 10);
    close(fd);

    ref.file = path;
    assert_int_equal(fs_secret_read(&ref, buf, sizeof(buf), err, sizeof(err)), 0);
    assert_string_equal(buf, "topsecret");
    /* too long for the buffer: refused, and the message names only the file */
    assert_int_equal(fs_secret_read(&ref, buf, 6, err, sizeof(err)), -1);
    assert_non_null(strstr(err, path));
    assert_null(strstr(err, "topsecret"));
    unlink(path);
    assert_int_equal(fs_secret_read(&ref, buf, sizeof(buf), err, sizeof(err)), -1);
    assert_non_null(strstr(err, "secret: cannot open /tmp/fs-test-secret-"));

    ref.file = NULL;
    ref.env = "FS_TEST_SECRET_ENV";
    unsetenv("FS_TEST_SECRET_ENV");
    assert_int_equal(fs_secret_read(&ref, buf, sizeof(buf), err, sizeof(err)), -1);
    assert_string_equal(err, "secret: environment variable FS_TEST_SECRET_ENV is not set");
    setenv("FS_TEST_SECRET_ENV", "envsecret", 1);
    assert_int_equal(fs_secret_read(&ref, buf, sizeof(buf), err, sizeof(err)), 0);
    assert_string_equal(buf, "envsecret");
    setenv("FS_TEST_SECRET_ENV", "", 1);
    assert_int_equal(fs_secret_read(&ref, buf, sizeof(buf), err, sizeof(err)), -1);
    unsetenv("FS_TEST_SECRET_ENV");
    ref.env = NULL;
    assert_int_equal(fs_secret_read(&ref, buf, sizeof(buf), err, sizeof(err)), -1);
}

/* fs_file_read: a whole regular file; a FIFO refused at once (never waited on), naming
 * the key and the file; too large refused. */
static void
test_file_read(void **state)
{
    (void)state;
    char dir[] = "/tmp/fs-test-file-XXXXXX", path[64], fifo[64], err[256];
    char *buf = NULL;
    size_t len = 1;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/ca.pem", dir);
    snprintf(fifo, sizeof fifo, "%s/ca.fifo", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("-----BEGIN CERTIFICATE-----\n", f);
    fclose(f);
    assert_int_equal(mkfifo(fifo, 0600), 0);

    assert_int_equal(fs_file_read(path, "k.ca_file", 64, &buf, &len, err, sizeof err), 0);
    assert_string_equal(buf, "-----BEGIN CERTIFICATE-----\n");
    assert_int_equal(len, 28);
    free(buf);
    assert_int_equal(fs_file_read(path, "k.ca_file", 27, &buf, &len, err, sizeof err), -1);
    assert_null(buf);
    char want[256];
    snprintf(want, sizeof want, "k.ca_file: %s is larger than 27 bytes", path);
    assert_string_equal(err, want);
    /* No writer: a blocking open would wait forever. */
    assert_int_equal(fs_file_read(fifo, "k.ca_file", 64, &buf, &len, err, sizeof err), -1);
    snprintf(want, sizeof want, "k.ca_file: %s is not a regular file", fifo);
    assert_string_equal(err, want);
    assert_int_equal(fs_file_read(dir, NULL, 64, &buf, &len, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: is not a regular file", dir);
    assert_string_equal(err, want);
    unlink(path);
    assert_int_equal(fs_file_read(path, "k.ca_file", 64, &buf, &len, err, sizeof err), -1);
    snprintf(want, sizeof want, "k.ca_file: cannot open %s: No such file or directory", path);
    assert_string_equal(err, want);
    unlink(fifo);
    rmdir(dir);
}

static void
test_load(void **state)
{
    (void)state;
    struct fs_config *cfg = NULL;
    char *e = NULL;
    char path[] = "/tmp/fs-test-config-XXXXXX";
    int fd;

    assert_int_not_equal(fs_config_load("/nonexistent/fs.yaml", &all_opts, &cfg, &e), 0);
    assert_null(cfg);
    assert_string_equal(e, "/nonexistent/fs.yaml: cannot open: No such file or directory\n");
    free(e);

    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "listen: 127.0.0.1:1\n", 20), 20);
    close(fd);
    assert_int_equal(fs_config_load(path, &all_opts, &cfg, &e), 0);
    assert_string_equal(cfg->path, path);
    assert_int_equal(cfg->listen_port, 1);
    fs_config_free(cfg);

    /* over 1 MiB: refused without parsing */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < FS_CONFIG_MAX_BYTES / 16 + 1; i++)
        fputs("# padding......\n", f);
    fclose(f);
    assert_int_equal(fs_config_load(path, &all_opts, &cfg, &e), 1);
    assert_null(cfg);
    assert_non_null(strstr(e, "larger than 1048576 bytes"));
    free(e);
    unlink(path);
    fs_config_free(NULL);
}

static void
test_snmpv3_secure_by_default(void **state)
{
    (void)state;
    const char *head = "targets:\n  - name: t\n    address: x\n    snmp: { version: 3, user: u";
    static const struct {
        const char *rest, *expect;
    } cases[] = {
        /* noAuthNoPriv and authNoPriv only when asked for by name */
        {" }\n", "t.yaml:4:5: targets[t].snmp: SNMP v3 without auth and priv is noAuthNoPriv "
                 "(no authentication, counters in clear): add auth and priv, or set "
                 "security_level: noAuthNoPriv\n"},
        {", auth: { protocol: sha256, password_env: A } }\n",
         "t.yaml:4:5: targets[t].snmp: SNMP v3 without priv is authNoPriv (counters in clear): "
         "add priv, or set security_level: authNoPriv\n"},
        {", security_level: authPriv }\n",
         "t.yaml:4:34: targets[t].snmp.security_level: SNMP v3 without auth and priv is "
         "noAuthNoPriv (no authentication, counters in clear): add auth and priv, or set "
         "security_level: noAuthNoPriv\n"},
        {", security_level: noAuthNoPriv, auth: { protocol: sha256, password_env: A } }\n",
         "t.yaml:4:34: targets[t].snmp.security_level: security_level: noAuthNoPriv contradicts "
         "the auth block\n"},
        {", security_level: authNoPriv, auth: { protocol: sha256, password_env: A },\n"
         "            priv: { protocol: aes128, password_env: P } }\n",
         "t.yaml:4:34: targets[t].snmp.security_level: security_level: authNoPriv contradicts "
         "the priv block\n"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[512];
        snprintf(text, sizeof(text), "%s%s", head, cases[i].rest);
        expect_errors(text, cases[i].expect);
    }
    /* Asked for explicitly: accepted, and the level is kept. */
    char text[512];
    snprintf(text, sizeof(text), "%s%s", head, ", security_level: noAuthNoPriv }\n");
    struct fs_config *c = parse_ok(text);
    assert_int_equal(snmp_of(&c->targets[0])->security_level, FS_SNMP_NO_AUTH_NO_PRIV);
    fs_config_free(c);
    snprintf(text, sizeof(text), "%s%s", head,
             ", security_level: authNoPriv, auth: { protocol: sha256, password_env: A } }\n");
    c = parse_ok(text);
    assert_int_equal(snmp_of(&c->targets[0])->security_level, FS_SNMP_AUTH_NO_PRIV);
    assert_int_equal(snmp_of(&c->targets[0])->auth_protocol, FS_AUTH_SHA256);
    fs_config_free(c);
    expect_errors("targets: [ { name: t, address: x,\n"
                  "  snmp: { community_file: /c, security_level: authPriv } } ]\n",
                  "t.yaml:2:31: targets[t].snmp.security_level: security_level is an SNMPv3 "
                  "setting; add version: 3\n");
}

static void
test_series_limit(void **state)
{
    (void)state;
    struct fs_config *c = parse_ok("storage: { max_series_per_target: 1000 }\n");
    assert_int_equal(c->max_series_per_target, 1000);
    fs_config_free(c);
    expect_errors("storage: { max_series_per_target: 0 }\n",
                  "t.yaml:1:35: storage.max_series_per_target: 0 is not in 1..10000000\n");
}

static int64_t
mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A FIFO (or directory) as a secret or config file is refused at once, never waited on. */
static void
test_non_regular_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/fs-test-fifo-XXXXXX", fifo[64], buf[64], err[256];
    struct fs_config *cfg = NULL;
    char *e = NULL;
    int64_t t0;

    assert_non_null(mkdtemp(dir));
    snprintf(fifo, sizeof(fifo), "%s/pipe", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);

    /* The key that names the secret comes with the message. */
    char text[256];
    snprintf(text, sizeof(text),
             "targets: [ { name: tor1, address: x, snmp: { community_file: %s } } ]\n", fifo);
    struct fs_config *c = parse_ok(text);
    t0 = mono_ms();
    assert_int_equal(
        fs_secret_read(&snmp_of(&c->targets[0])->community, buf, sizeof(buf), err, sizeof(err)),
        -1);
    assert_true(mono_ms() - t0 < 1000);
    char want[256];
    snprintf(want, sizeof(want), "targets[tor1].snmp.community_file: %s is not a regular file",
             fifo);
    assert_string_equal(err, want);
    fs_config_free(c);

    struct fs_secret_ref dref = {.file = dir, .key = "http.bearer_token_file"};
    assert_int_equal(fs_secret_read(&dref, buf, sizeof(buf), err, sizeof(err)), -1);
    snprintf(want, sizeof(want), "http.bearer_token_file: %s is not a regular file", dir);
    assert_string_equal(err, want);

    t0 = mono_ms();
    assert_int_equal(fs_config_load(fifo, &all_opts, &cfg, &e), 1);
    assert_true(mono_ms() - t0 < 1000);
    assert_null(cfg);
    snprintf(want, sizeof(want), "%s: is not a regular file\n", fifo);
    assert_string_equal(e, want);
    free(e);
    unlink(fifo);
    rmdir(dir);
}

static void
test_bom_and_utf8(void **state)
{
    (void)state;
    /* A UTF-8 byte-order mark is skipped; columns count from after it. */
    struct fs_config *c = parse_ok("\xEF\xBB\xBFlisten: 127.0.0.1:7\n");
    assert_int_equal(c->listen_port, 7);
    fs_config_free(c);
    expect_errors("\xEF\xBB\xBFlistn: 127.0.0.1:7\n",
                  "t.yaml:1:1: listn: unknown key (did you mean listen?)\n");
    /* Valid UTF-8 in values is kept as written. */
    c = parse_ok("targets: [ { name: t, address: x, labels: { site: \"Zürich–Ost\" } } ]\n");
    assert_string_equal(c->targets[0].labels[0].value, "Zürich–Ost");
    fs_config_free(c);
    /* A long value is cut in a message at a character boundary, never inside one. */
    char text[256], *e;
    int rc;
    snprintf(text, sizeof(text), "targets: [ { name: t, address: x, labels: { %s: v } } ]\n",
             "ééééééééééééééééééééééééééééééé"); /* 31 × 2 bytes */
    e = parse_err(text, NULL, &rc);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(e, "labels.éééééééééééééééééééééééé...: \"éééééééééééééééééééééééé...\" "
                              "is not a Prometheus label name\n"));
    free(e);
}

/* A driver that would offer target_plan_mode without target_plan. */
static void
plan_mode_only(void *state, void *tstate)
{
    (void)state;
    (void)tstate;
}

/* The daemon refuses a driver written for another driver API, with the reason. */
static void
test_driver_api_version(void **state)
{
    (void)state;
    char why[256];
    const struct fs_driver *snmp = fs_driver_find("snmp");
    struct fs_driver other = *snmp;
    assert_int_equal(fs_driver_check(snmp, why, sizeof(why)), 0);
    other.api_version = FS_DRIVER_API_VERSION + 1;
    assert_int_equal(fs_driver_check(&other, why, sizeof(why)), -1);
    char want[128];
    snprintf(want, sizeof(want), "a driver was written for driver API %u, this fabricscope has %u",
             FS_DRIVER_API_VERSION + 1, FS_DRIVER_API_VERSION);
    assert_string_equal(why, want);
    other = *snmp;
    other.cycle_start = NULL;
    assert_int_equal(fs_driver_check(&other, why, sizeof(why)), -1);
    assert_string_equal(why, "driver snmp: a polling driver needs cycle_start and cycle_cancel");
    other = *snmp;
    other.block.name = "SNMP";
    assert_int_equal(fs_driver_check(&other, why, sizeof(why)), -1);
    assert_string_equal(why, "driver \"SNMP\": a name is [a-z][a-z0-9_]*");
    /* The optional plan operations come as a pair. */
    other = *snmp;
    other.target_plan_mode = plan_mode_only;
    assert_int_equal(fs_driver_check(&other, why, sizeof(why)), -1);
    assert_string_equal(why, "driver snmp: target_plan_mode and target_plan go together");
    /* Every driver of this build passes. */
    for (size_t i = 0; i < fs_builtin_driver_count; i++)
        assert_int_equal(fs_driver_check(fs_builtin_drivers[i], why, sizeof(why)), 0);
    /* The registry's view: every known name, the built ones resolvable. */
    assert_ptr_equal(fs_driver_of_block(&snmp->block), snmp);
    assert_null(fs_driver_of_block(&test_cli));
    /* Of the built drivers the ONYX CLI one, the sFlow one and the gNMI one (ACL entries
     * named for a rule) read the flow rules (a reload that changes them restarts their
     * instances only). */
    for (size_t i = 0; i < fs_builtin_driver_count; i++)
        assert_int_equal(fs_builtin_drivers[i]->block.uses_flow_rules,
                         strcmp(fs_builtin_drivers[i]->block.name, "cli") == 0 ||
                             strcmp(fs_builtin_drivers[i]->block.name, "sflow") == 0 ||
                             strcmp(fs_builtin_drivers[i]->block.name, "gnmi") == 0);
    assert_int_equal(real_opts.n_blocks, fs_builtin_driver_count);
    assert_int_equal(real_opts.n_blocks + real_opts.n_absent, fs_known_driver_count);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_demo_like),
        cmocka_unit_test(test_defaults_minimal),
        cmocka_unit_test(test_drivers_and_precedence),
        cmocka_unit_test(test_unknown_keys_and_inline_secrets),
        cmocka_unit_test(test_types_enums_ranges_all_reported),
        cmocka_unit_test(test_analysis_block),
        cmocka_unit_test(test_analysis_history),
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_missing_mandatory_and_choices),
        cmocka_unit_test(test_duplicates),
        cmocka_unit_test(test_yaml_features_refused),
        cmocka_unit_test(test_garbage_and_size),
        cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_driver_not_built),
        cmocka_unit_test(test_semantics),
        cmocka_unit_test(test_libyang_stage),
        cmocka_unit_test(test_secret_values_never_echoed),
        cmocka_unit_test(test_many_problems_capped),
        cmocka_unit_test(test_target_equal),
        cmocka_unit_test(test_target_instance_equal),
        cmocka_unit_test(test_parse_duration),
        cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_secret_read),
        cmocka_unit_test(test_file_read),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_source_precedence_names),
        cmocka_unit_test(test_snmpv3_secure_by_default),
        cmocka_unit_test(test_series_limit),
        cmocka_unit_test(test_non_regular_files),
        cmocka_unit_test(test_bom_and_utf8),
        cmocka_unit_test(test_driver_api_version),
    };
    return cmocka_run_group_tests(tests, setup_blocks, teardown_blocks);
}
