/*
 * The gNMI driver's configuration block through the real registry: every key of
 * fabricscope-gnmi.yang reaches struct fs_gnmi_cfg, the cadence the store measures
 * staleness in follows what the subscriptions promise, and a reload sees a change of any
 * key as a change.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "config/config.h"
#include "daemon.h"
#include "driver.h"
#include "gnmi/gnmi.h"
#include "gnmi/gnmi_config.h"
#include "store/store.h"

#define S INT64_C(1000000)

static struct fs_config_opts opts;

static struct fs_config *
parse_ok(const char *text)
{
    struct fs_config *c = NULL;
    char *err = NULL;
    int rc = fs_config_parse(text, strlen(text), "t.yaml", &opts, &c, &err);
    if (rc != 0)
        fail_msg("parse failed: %s", err ? err : "?");
    free(err);
    return c;
}

static char *
parse_err(const char *text)
{
    struct fs_config *c = NULL;
    char *err = NULL;
    assert_int_not_equal(fs_config_parse(text, strlen(text), "t.yaml", &opts, &c, &err), 0);
    assert_null(c);
    assert_non_null(err);
    return err;
}

static const struct fs_gnmi_cfg *
gnmi_of(const struct fs_config *c, size_t target)
{
    const struct fs_target_cfg *t = &c->targets[target];
    for (size_t i = 0; i < t->n_blocks; i++)
        if (!strcmp(t->blocks[i].ops->name, "gnmi"))
            return t->blocks[i].cfg;
    fail_msg("target %zu has no gnmi block", target);
    return NULL;
}

static int64_t
interval_of(const struct fs_config *c, size_t target)
{
    const struct fs_target_cfg *t = &c->targets[target];
    for (size_t i = 0; i < t->n_blocks; i++)
        if (!strcmp(t->blocks[i].ops->name, "gnmi"))
            return t->blocks[i].ops->config_interval(t->blocks[i].cfg);
    return -1;
}

static const char *const full_block =
    "targets:\n"
    "  - name: sw\n"
    "    address: 10.0.0.1\n"
    "    gnmi:\n"
    "      port: 50051\n"
    "      tls: { ca_file: /ca.pem, cert_file: /c.pem, key_file: /k.pem, server_name: sw.lab }\n"
    "      username: monitor\n"
    "      password_file: /pw\n"
    "      encoding: json_ietf\n"
    "      updates_only: true\n"
    "      expose_unmapped: true\n"
    "      stall_timeout: 7s\n"
    "      backoff_min: 2s\n"
    "      backoff_max: 1m\n"
    "      clock_max_delivery_delay: 20ms\n"
    "      subscriptions:\n"
    "        - { path: /qos/interfaces/interface/output/queues, interval: 100ms }\n"
    "        - { path: /interfaces/interface/state/oper-status, mode: on_change, "
    "heartbeat: 30s }\n"
    "        - { path: /a/b, interval: 1s, suppress_redundant: true, heartbeat: 20s }\n"
    "      mappings:\n"
    "        - path: /components/component/state/temperature/instant\n"
    "          metric: fabric_queue_depth_bytes\n"
    "          type: gauge\n"
    "          scale: 0.5\n"
    "          labels: [ { name: interface, key: name }, { name: tc, value: '0' } ]\n"
    "      acl_rules:\n"
    "        - { rule: nccl, acl: RDMA, sequence_id: 10 }\n"
    "        - { rule: all, acl: OTHER }\n";

static void
test_every_key_built(void **state)
{
    (void)state;
    struct fs_config *c = parse_ok(full_block);
    const struct fs_gnmi_cfg *g = gnmi_of(c, 0);
    assert_int_equal(g->port, 50051);
    assert_false(g->insecure);
    assert_string_equal(g->tls_ca_file, "/ca.pem");
    assert_string_equal(g->tls_cert_file, "/c.pem");
    assert_string_equal(g->tls_key_file, "/k.pem");
    assert_string_equal(g->tls_server_name, "sw.lab");
    assert_string_equal(g->username, "monitor");
    assert_string_equal(g->password.file, "/pw");
    assert_null(g->password.env);
    assert_int_equal(g->encoding, FS_GNMI_ENC_JSON_IETF);
    assert_int_equal(g->list_mode, FS_GNMI_LIST_STREAM);
    assert_true(g->updates_only);
    assert_true(g->expose_unmapped);
    assert_int_equal(g->stall_us, 7 * S);
    assert_int_equal(g->backoff_min_us, 2 * S);
    assert_int_equal(g->backoff_max_us, 60 * S);
    assert_int_equal(g->clock_max_delay_us, 20000);
    assert_int_equal(g->n_subscriptions, 3);
    assert_string_equal(g->subscriptions[0].path, "/qos/interfaces/interface/output/queues");
    assert_int_equal(g->subscriptions[0].mode, FS_GNMI_SUB_SAMPLE);
    assert_int_equal(g->subscriptions[0].interval_us, 100000);
    assert_int_equal(g->subscriptions[1].mode, FS_GNMI_SUB_ON_CHANGE);
    assert_int_equal(g->subscriptions[1].heartbeat_us, 30 * S);
    assert_true(g->subscriptions[2].suppress_redundant);
    assert_int_equal(g->subscriptions[2].heartbeat_us, 20 * S);
    assert_int_equal(g->n_user_maps, 1);
    assert_string_equal(g->user_maps[0].metric, "fabric_queue_depth_bytes");
    assert_int_equal(g->user_maps[0].type, FS_GNMI_GAUGE);
    assert_true(g->user_maps[0].scale == 0.5);
    assert_int_equal(g->user_maps[0].n_labels, 2);
    assert_string_equal(g->user_maps[0].labels[0].label, "interface");
    assert_string_equal(g->user_maps[0].labels[0].key, "name");
    assert_string_equal(g->user_maps[0].labels[1].value, "0");
    assert_null(g->user_maps[0].labels[1].key);
    assert_int_equal(g->n_acl_rules, 2);
    assert_string_equal(g->acl_rules[0].rule, "nccl");
    assert_string_equal(g->acl_rules[0].acl_name, "RDMA");
    assert_int_equal(g->acl_rules[0].sequence_id, 10);
    assert_int_equal(g->acl_rules[1].sequence_id, -1);
    /* The longest promise: the on_change heartbeat (30 s). */
    assert_int_equal(interval_of(c, 0), 30 * S);
    /* The gNMI source outranks the others by default. */
    assert_string_equal(c->targets[0].source_precedence[0], "gnmi");
    fs_config_free(c);
}

static void
test_interval_follows_promises(void **state)
{
    (void)state;
    struct fs_config *c = parse_ok(
        "targets:\n"
        "  - { name: a, address: x, gnmi: { insecure: true, subscriptions: [\n"
        "      { path: /q, interval: 100ms }, { path: /r, interval: 2s } ] } }\n"
        "  - { name: b, address: x, gnmi: { insecure: true, subscriptions: [\n"
        "      { path: /q, interval: 100ms }, { path: /s, mode: on_change } ] } }\n"
        "  - { name: c, address: x, gnmi: { insecure: true, interval: 5s, subscriptions: [\n"
        "      { path: /s, mode: on_change } ] } }\n"
        "  - { name: d, address: x, gnmi: { insecure: true, subscribe_mode: poll,\n"
        "      subscriptions: [ { path: /s } ] } }\n"
        "  - { name: e, address: x, gnmi: { insecure: true, subscribe_mode: once, interval: 3s,\n"
        "      subscriptions: [ { path: /s } ] } }\n");
    assert_int_equal(interval_of(c, 0), 2 * S);
    assert_int_equal(gnmi_of(c, 0)->clock_max_delay_us, 5000); /* the default */
    assert_int_equal(fs_gnmi_cfg_stall(gnmi_of(c, 0)), 1 * S); /* 3 x 100 ms, at least 1 s */
    /* A value that may stay silent while unchanged: a long cadence, no stall bound. */
    assert_int_equal(interval_of(c, 1), 600 * S);
    assert_int_equal(interval_of(c, 2), 5 * S);
    assert_int_equal(fs_gnmi_cfg_stall(gnmi_of(c, 2)), 0);
    assert_int_equal(gnmi_of(c, 3)->list_mode, FS_GNMI_LIST_POLL);
    assert_int_equal(interval_of(c, 3), 10 * S);
    assert_int_equal(fs_gnmi_cfg_stall(gnmi_of(c, 3)), 30 * S);
    assert_int_equal(gnmi_of(c, 4)->list_mode, FS_GNMI_LIST_ONCE);
    assert_int_equal(interval_of(c, 4), 3 * S);
    fs_config_free(c);
}

static void
test_equal_sees_every_change(void **state)
{
    (void)state;
    static const char *const edits[][2] = {
        {"port: 50051", "port: 50052"},
        {"server_name: sw.lab", "server_name: sw2.lab"},
        {"password_file: /pw", "password_env: PW"},
        {"json_ietf", "proto"},
        {"stall_timeout: 7s", "stall_timeout: 8s"},
        {"heartbeat: 30s", "heartbeat: 31s"},
        {"scale: 0.5", "scale: 0.25"},
        {"value: '0'", "value: '1'"},
        {"sequence_id: 10", "sequence_id: 11"},
        {"clock_max_delivery_delay: 20ms", "clock_max_delivery_delay: 21ms"},
    };
    struct fs_config *a = parse_ok(full_block), *b = parse_ok(full_block);
    const struct fs_cfg_block_ops *ops = a->targets[0].blocks[0].ops;
    assert_true(ops->config_equal(gnmi_of(a, 0), gnmi_of(b, 0)));
    fs_config_free(b);
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        const char *at = strstr(full_block, edits[i][0]);
        assert_non_null(at);
        size_t pre = (size_t)(at - full_block), ol = strlen(edits[i][0]);
        char *text = malloc(strlen(full_block) + strlen(edits[i][1]) + 1);
        assert_non_null(text);
        memcpy(text, full_block, pre);
        strcpy(text + pre, edits[i][1]);
        strcat(text, at + ol);
        b = parse_ok(text);
        if (ops->config_equal(gnmi_of(a, 0), gnmi_of(b, 0)))
            fail_msg("config_equal missed: %s -> %s", edits[i][0], edits[i][1]);
        fs_config_free(b);
        free(text);
    }
    fs_config_free(a);
}

static void
test_refused(void **state)
{
    (void)state;
    char *e =
        parse_err("targets:\n"
                  "  - name: a\n"
                  "    address: x\n"
                  "    gnmi:\n"
                  "      tls: {}\n"
                  "      subscriptions: [ { path: '/c[x=', mode: on_change } ]\n"
                  "      mappings:\n"
                  "        - { path: /x/z, metric: fabric_queue_depth_bytes, type: counter }\n"
                  "        - { path: /x/y, metric: fabric_nope, type: gauge }\n");
    assert_string_equal(e, "t.yaml:6:24: targets[a].gnmi.subscriptions[/c[x=].path: unterminated "
                           "key in path /c[x=\n"
                           "t.yaml:8:11: targets[a].gnmi.mappings[/x/z]: fabric_queue_depth_bytes "
                           "is a gauge\n"
                           "t.yaml:9:11: targets[a].gnmi.mappings[/x/y]: unknown metric "
                           "fabric_nope\n");
    free(e);
}

/* The clock's error bar rests on clock_max_delivery_delay: outside 1ms..10s it is
 * refused, naming the key (0 by the walker, as every duration); the bounds are accepted. */
static void
test_clock_delay_range(void **state)
{
    (void)state;
    char *e = parse_err(
        "targets:\n"
        "  - { name: a, address: x, gnmi: { insecure: true, "
        "clock_max_delivery_delay: 0ms, subscriptions: [ { path: /q, mode: on_change } ] } }\n"
        "  - { name: b, address: x, gnmi: { insecure: true, "
        "clock_max_delivery_delay: 11s, subscriptions: [ { path: /q, mode: on_change } ] } }\n");
    assert_string_equal(e, "t.yaml:2:78: targets[a].gnmi.clock_max_delivery_delay: \"0ms\": a "
                           "duration must be greater than 0\n"
                           "t.yaml:3:78: targets[b].gnmi.clock_max_delivery_delay: 11s is not "
                           "within 1ms..10s\n");
    free(e);
    struct fs_config *c = parse_ok(
        "targets:\n"
        "  - { name: a, address: x, gnmi: { insecure: true, "
        "clock_max_delivery_delay: 1ms, subscriptions: [ { path: /q, mode: on_change } ] } }\n"
        "  - { name: b, address: x, gnmi: { insecure: true, "
        "clock_max_delivery_delay: 10s, subscriptions: [ { path: /q, mode: on_change } ] } }\n");
    assert_int_equal(gnmi_of(c, 0)->clock_max_delay_us, 1000);
    assert_int_equal(gnmi_of(c, 1)->clock_max_delay_us, 10 * S);
    fs_config_free(c);
}

/* The configured delay reaches the target's clock measurement (fs_gnmi_sink_arg, whose
 * use test_gnmi_map checks) and /api/v1/targets states it. No server listens: the
 * stream retries in the background, which does not matter here. */
static void
test_clock_delay_reaches_target(void **state)
{
    (void)state;
    struct fs_config *c = parse_ok("targets:\n"
                                   "  - { name: a, address: 127.0.0.1, gnmi: { insecure: true, "
                                   "port: 1, clock_max_delivery_delay: 20ms,\n"
                                   "      subscriptions: [ { path: /q, mode: on_change } ] } }\n");
    char err[256], buf[2048];
    struct fs_ring_opts ro = {.memory_limit = 16 << 20, .retention_us = 3600LL * 1000000};
    struct fs_store *st = fs_store_new(&ro, err, sizeof err);
    assert_non_null(st);
    struct fs_sink *sink = fs_store_sink_add(st, &c->targets[0], "gnmi", 1000000);
    assert_non_null(sink);
    void *drv = NULL, *t = NULL;
    assert_int_equal(fs_gnmi_init(&drv, err, sizeof err), 0);
    if (fs_gnmi_target_add(drv, "a", "127.0.0.1", gnmi_of(c, 0), sink, NULL, NULL, &t, err,
                           sizeof err) != 0)
        fail_msg("target_add: %s", err);
    assert_true(fs_gnmi_target_describe(drv, t, buf, sizeof buf) > 0);
    if (!strstr(buf, "\"clock_assumed_max_delivery_delay_seconds\":0.020000,"))
        fail_msg("the assumption is not stated: %s", buf);
    fs_gnmi_target_remove(drv, t);
    fs_gnmi_shutdown(drv);
    fs_store_sink_remove(st, sink);
    fs_store_free(st);
    fs_config_free(c);
}

/* A FIFO given as the CA file (issue 18): the target is refused at once with a reason
 * naming the key and the file (target_add runs on the daemon's main thread: a blocking
 * open would wait for a writer forever), and the next target is added as usual. */
static void
test_pem_fifo_refused(void **state)
{
    (void)state;
    char dir[] = "/tmp/fs-test-gnmi-XXXXXX", fifo[64], text[512], err[512], want[512];
    assert_non_null(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/ca.pem", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    snprintf(text, sizeof text,
             "targets:\n"
             "  - { name: a, address: 127.0.0.1, gnmi: { port: 1, tls: { ca_file: %s },\n"
             "      subscriptions: [ { path: /q, mode: on_change } ] } }\n"
             "  - { name: b, address: 127.0.0.1, gnmi: { port: 1, insecure: true,\n"
             "      subscriptions: [ { path: /q, mode: on_change } ] } }\n",
             fifo);
    struct fs_config *c = parse_ok(text);
    struct fs_ring_opts ro = {.memory_limit = 16 << 20, .retention_us = 3600LL * 1000000};
    struct fs_store *st = fs_store_new(&ro, err, sizeof err);
    assert_non_null(st);
    struct fs_sink *sa = fs_store_sink_add(st, &c->targets[0], "gnmi", 1000000);
    struct fs_sink *sb = fs_store_sink_add(st, &c->targets[1], "gnmi", 1000000);
    assert_non_null(sa);
    assert_non_null(sb);
    void *drv = NULL, *ta = NULL, *tb = NULL;
    assert_int_equal(fs_gnmi_init(&drv, err, sizeof err), 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(fs_gnmi_target_add(drv, "a", "127.0.0.1", gnmi_of(c, 0), sa, NULL, NULL, &ta,
                                        err, sizeof err),
                     -1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_null(ta);
    snprintf(want, sizeof want, "targets[a].gnmi.tls.ca_file: %s is not a regular file", fifo);
    assert_string_equal(err, want);
    assert_true((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 1000);
    if (fs_gnmi_target_add(drv, "b", "127.0.0.1", gnmi_of(c, 1), sb, NULL, NULL, &tb, err,
                           sizeof err) != 0)
        fail_msg("the other target was refused: %s", err);
    fs_gnmi_target_remove(drv, tb);
    fs_gnmi_shutdown(drv);
    fs_store_sink_remove(st, sa);
    fs_store_sink_remove(st, sb);
    fs_store_free(st);
    fs_config_free(c);
    unlink(fifo);
    rmdir(dir);
}

/* The same for the other files a gNMI block reads (issue 18): a FIFO as the client key or
 * as the password file is refused at once, naming the key and the file. */
static void
test_secret_fifo_refused(void **state)
{
    (void)state;
    char dir[] = "/tmp/fs-test-gnmi-XXXXXX", fifo[64], cert[64], text[768], err[512], want[512];
    assert_non_null(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/pipe", dir);
    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    FILE *f = fopen(cert, "w");
    assert_non_null(f);
    fputs("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n", f);
    fclose(f);
    snprintf(text, sizeof text,
             "targets:\n"
             "  - { name: k, address: 127.0.0.1, gnmi: { port: 1,\n"
             "      tls: { ca_file: %s, cert_file: %s, key_file: %s },\n"
             "      subscriptions: [ { path: /q, mode: on_change } ] } }\n"
             "  - { name: p, address: 127.0.0.1, gnmi: { port: 1, insecure: true,\n"
             "      username: u, password_file: %s,\n"
             "      subscriptions: [ { path: /q, mode: on_change } ] } }\n",
             cert, cert, fifo, fifo);
    struct fs_config *c = parse_ok(text);
    struct fs_ring_opts ro = {.memory_limit = 16 << 20, .retention_us = 3600LL * 1000000};
    struct fs_store *st = fs_store_new(&ro, err, sizeof err);
    assert_non_null(st);
    void *drv = NULL;
    assert_int_equal(fs_gnmi_init(&drv, err, sizeof err), 0);
    for (int i = 0; i < 2; i++) {
        const char *name = i == 0 ? "k" : "p";
        struct fs_sink *sk = fs_store_sink_add(st, &c->targets[i], "gnmi", 1000000);
        assert_non_null(sk);
        void *t = NULL;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        assert_int_equal(fs_gnmi_target_add(drv, name, "127.0.0.1", gnmi_of(c, (size_t)i), sk, NULL,
                                            NULL, &t, err, sizeof err),
                         -1);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        assert_null(t);
        assert_true((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 1000);
        if (i == 0) {
            snprintf(want, sizeof want, "targets[k].gnmi.tls.key_file: %s is not a regular file",
                     fifo);
            assert_string_equal(err, want);
        } else if (!strstr(err, "password_file") || !strstr(err, fifo) ||
                   !strstr(err, "not a regular file")) {
            fail_msg("the refusal does not name the key and the file: %s", err);
        }
        fs_store_sink_remove(st, sk);
    }
    fs_gnmi_shutdown(drv);
    fs_store_free(st);
    fs_config_free(c);
    unlink(fifo);
    unlink(cert);
    rmdir(dir);
}

int
main(void)
{
    fs_daemon_config_opts(&opts);
    if (!fs_driver_find("gnmi")) {
        fprintf(stderr, "this build has no gNMI driver; the test is built only with it\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_key_built),
        cmocka_unit_test(test_interval_follows_promises),
        cmocka_unit_test(test_equal_sees_every_change),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_clock_delay_range),
        cmocka_unit_test(test_clock_delay_reaches_target),
        cmocka_unit_test(test_pem_fifo_refused),
        cmocka_unit_test(test_secret_fifo_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
