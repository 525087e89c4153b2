/* The host agent's parts that need no collector: the offset track (nearest measurement,
 * widened uncertainty, jumps), the spool (order, bound with the oldest dropped and
 * counted, what a restart finds), the NCCL Inspector tail (resume from its state file,
 * torn, bad, overlong lines, a replaced file), the choice of the incident to capture from an
 * /api/v1/incidents answer, and the configuration (defaults; refusals naming the key). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "hostagent/agent_config.h"
#include "hostagent/capture.h"
#include "hostagent/offset_track.h"
#include "hostagent/spool.h"
#include "hostagent/tail.h"

static void
offset_track_nearest(void **state)
{
    (void)state;
    static struct fs_offset_track t;
    struct fs_agent_meas m;
    bool jumped;
    memset(&t, 0, sizeof t);
    assert_false(fs_offset_track_at(&t, 0, &m));
    for (int i = 0; i < 10; i++) {
        struct fs_agent_meas in = {(int64_t)i * 4000000000, 1000000 + i, 50000};
        fs_offset_track_add(&t, &in, &jumped);
        assert_false(jumped);
    }
    /* 9.9 s is nearest the measurement at 8 s; 2 s away: +40 µs at 20 ppm. */
    assert_true(fs_offset_track_at(&t, 9900000000, &m));
    assert_int_equal(m.at_ns, 8000000000);
    assert_int_equal(m.offset_ns, 1000002);
    assert_int_equal(m.unc_ns, 50000 + 38000);
    /* Before the first and after the last. */
    assert_true(fs_offset_track_at(&t, -5, &m));
    assert_int_equal(m.at_ns, 0);
    assert_true(fs_offset_track_at(&t, 100000000000, &m));
    assert_int_equal(m.at_ns, 36000000000);
    /* A step of 1 ms against 2 × 50 µs of uncertainty is a jump. */
    struct fs_agent_meas step = {40000000000, 2000000, 50000};
    fs_offset_track_add(&t, &step, &jumped);
    assert_true(jumped);
    /* The ring keeps the newest FS_AGENT_CLOCK_KEEP. */
    for (int i = 0; i < FS_AGENT_CLOCK_KEEP + 5; i++) {
        struct fs_agent_meas in = {50000000000 + (int64_t)i * 1000, 7, 1};
        fs_offset_track_add(&t, &in, &jumped);
    }
    assert_true(fs_offset_track_at(&t, 0, &m));
    assert_int_equal(m.at_ns, 50000000000 + 5 * 1000);
}

static void
spool_bound(void **state)
{
    (void)state;
    char dir[] = "/tmp/fs-spool-XXXXXX", err[256], name[300];
    assert_non_null(mkdtemp(dir));
    struct fs_spool s;
    assert_int_equal(fs_spool_open(&s, dir, 1000, err, sizeof err), 0);
    char body[401];
    for (int i = 0; i < 4; i++) {
        memset(body, 'a' + i, 400);
        body[400] = '\0';
        assert_int_equal(fs_spool_put(&s, body, 400, 10 + (size_t)i, err, sizeof err), 0);
    }
    /* 4 × 400 bytes in 1000: the two oldest went, counted. */
    assert_int_equal(s.files, 2);
    assert_int_equal(s.bytes, 800);
    assert_int_equal(s.dropped_events, 10 + 11);
    assert_int_equal(s.dropped_files, 2);
    /* Larger than the whole bound: dropped itself. */
    char big[1500];
    memset(big, 'z', sizeof big);
    assert_int_equal(fs_spool_put(&s, big, sizeof big, 99, err, sizeof err), 0);
    assert_int_equal(s.dropped_events, 10 + 11 + 99);
    fs_spool_close(&s);

    /* A restart finds what is left, and the oldest comes first. */
    assert_int_equal(fs_spool_open(&s, dir, 1000, err, sizeof err), 0);
    assert_int_equal(s.files, 2);
    assert_int_equal(s.events, 12 + 13);
    char *got;
    size_t len, n;
    assert_int_equal(fs_spool_oldest(&s, &got, &len, &n, name, sizeof name, err, sizeof err), 1);
    assert_int_equal(len, 400);
    assert_int_equal(n, 12);
    assert_int_equal(got[0], 'c');
    free(got);
    assert_int_equal(fs_spool_remove(&s, name, err, sizeof err), 0);
    assert_int_equal(fs_spool_oldest(&s, &got, &len, &n, name, sizeof name, err, sizeof err), 1);
    assert_int_equal(got[0], 'd');
    free(got);
    /* A new body goes after the ones left, however many were dropped. */
    assert_int_equal(fs_spool_put(&s, "e", 1, 1, err, sizeof err), 0);
    assert_int_equal(fs_spool_remove(&s, name, err, sizeof err), 0);
    assert_int_equal(fs_spool_oldest(&s, &got, &len, &n, name, sizeof name, err, sizeof err), 1);
    assert_int_equal(got[0], 'e');
    free(got);
    assert_int_equal(fs_spool_remove(&s, name, err, sizeof err), 0);
    assert_int_equal(fs_spool_oldest(&s, &got, &len, &n, name, sizeof name, err, sizeof err), 0);
    assert_int_equal(s.files, 0);
    assert_int_equal(s.bytes, 0);
    fs_spool_close(&s);
    assert_int_equal(rmdir(dir), 0);
}

static const char *incidents =
    "{\"status\":\"success\",\"data\":{\"recurring\":["
    "{\"series\":[{\"target\":\"tor2\",\"interface\":\"Eth1/1\",\"tc\":\"\",\"rule\":\"\"}],"
    "\"period_s\":60,\"next_expected\":1000.000000,\"text\":\"tor2\"},"
    "{\"series\":[{\"target\":\"tor1\",\"interface\":\"Eth1/49\",\"tc\":\"3\",\"rule\":\"\"}],"
    "\"period_s\":60,\"next_expected\":1100.250000,\"text\":\"tor1 a\"},"
    "{\"series\":[{\"target\":\"tor1\",\"interface\":\"\",\"tc\":\"\",\"rule\":\"nccl\"}],"
    "\"period_s\":60,\"next_expected\":1050.000001,\"text\":\"tor1 rule\"}],"
    "\"episodes\":[]}}";

static void
capture_pick(void **state)
{
    (void)state;
    struct fs_agent_cfg cfg = {0};
    char what[128], err[256];
    int64_t next = 0;
    /* No filter: the earliest. */
    assert_int_equal(fs_capture_pick(incidents, &cfg, 0, &next, what, sizeof what, err, sizeof err),
                     1);
    assert_int_equal(next, 1000000000000);
    /* Not before a time: the next after it. */
    assert_int_equal(
        fs_capture_pick(incidents, &cfg, 1001000000000, &next, what, sizeof what, err, sizeof err),
        1);
    assert_int_equal(next, 1050000001000);
    assert_string_equal(what, "tor1 rule");
    /* Targets: tor1's groups only. */
    char *targets[] = {"tor1"};
    cfg.targets = targets;
    cfg.n_targets = 1;
    assert_int_equal(fs_capture_pick(incidents, &cfg, 0, &next, what, sizeof what, err, sizeof err),
                     1);
    assert_int_equal(next, 1050000001000);
    /* Rules only: the rule's group. */
    char *rules[] = {"nccl"};
    cfg.targets = NULL;
    cfg.n_targets = 0;
    cfg.rules = rules;
    cfg.n_rules = 1;
    assert_int_equal(
        fs_capture_pick(incidents, &cfg, 1060000000000, &next, what, sizeof what, err, sizeof err),
        0);
    /* Not an answer. */
    assert_int_equal(fs_capture_pick("{\"status\":\"error\"}", &cfg, 0, &next, what, sizeof what,
                                     err, sizeof err),
                     -1);
}

/* next_expected that is no time, or one far ahead, arms nothing (and does not overflow
 * on its way to ns): NaN, infinities, huge, negative, a string, decades or 2 days ahead. */
static void
capture_pick_refuses_bad_times(void **state)
{
    (void)state;
    struct fs_agent_cfg cfg = {0};
    char what[128], err[256];
    int64_t next = 0, now = 1800000000LL * 1000000000; /* 2027 */
    static const char *const bad[] = {
        "NaN",          "Infinity", "-Infinity",      "1e300",
        "-1e300",       "-5",       "\"1800000100\"", "9.3e9", /* ns beyond INT64_MAX */
        "2746000000",                                          /* 30 years ahead */
        "1800172800.5",                                        /* 2 days ahead */
        "null",         "true",     "[1800000100]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char json[512];
        snprintf(json, sizeof json,
                 "{\"data\":{\"recurring\":[{\"text\":\"x\",\"series\":[],"
                 "\"next_expected\":%s}]}}",
                 bad[i]);
        int r = fs_capture_pick(json, &cfg, now, &next, what, sizeof what, err, sizeof err);
        if (r == -1) /* json-c does not read it: refused whole */
            continue;
        print_message("next_expected %s: %d, %s\n", bad[i], r, err);
        assert_int_equal(r, 0);
        /* A refused time of a followed group is said, else it would be silent. */
        if (strcmp(bad[i], "null") && strcmp(bad[i], "true") && strcmp(bad[i], "[1800000100]"))
            assert_true(err[0] != '\0');
    }
    /* Next to a good one: the good one is taken, the bad one said. */
    const char *mixed = "{\"data\":{\"recurring\":["
                        "{\"text\":\"far\",\"series\":[],\"next_expected\":2746000000},"
                        "{\"text\":\"near\",\"series\":[],\"next_expected\":1800000100.25}]}}";
    assert_int_equal(fs_capture_pick(mixed, &cfg, now, &next, what, sizeof what, err, sizeof err),
                     1);
    assert_int_equal(next, 1800000100250000000);
    assert_string_equal(what, "near");
    assert_non_null(strstr(err, "ahead refused"));
}

static void
append(const char *path, const char *text)
{
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

#define REC(sn)                                                                                    \
    "{\"header\":{\"id\":\"0x1\",\"rank\":0,\"n_ranks\":2},\"metadata\":{\"dump_timestamp_us\":"   \
    "1796236355900000,\"hostname\":\"g\"},\"event_trace_ts\":{\"coll_start_ts\":1796236355000000}" \
    ","                                                                                            \
    "\"coll_perf\":{\"coll\":\"AllReduce\",\"coll_sn\":" #sn ",\"coll_exec_time_us\":2500}}"

/* Reads everything new; the number of events, committed. */
static size_t
drain(struct fs_tail *t, size_t max)
{
    char err[256];
    size_t n = 0;
    for (;;) {
        struct fs_imp_batch b = {0};
        struct fs_tail_pos pos;
        int r = fs_tail_next(t, "h", max, &b, &pos, err, sizeof err);
        assert_true(r >= 0);
        n += b.n;
        fs_imp_batch_free(&b);
        if (r == 0)
            return n;
        assert_int_equal(fs_tail_commit(t, &pos, err, sizeof err), 0);
    }
}

static void
tail_resume(void **state)
{
    (void)state;
    char dir[] = "/tmp/fs-tail-XXXXXX", err[256], path[300], cmd[400];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/a.log", dir);
    struct fs_tail t;
    assert_int_equal(fs_tail_open(&t, dir, dir, err, sizeof err), 0);
    append(path, REC(1) "\n" REC(2) "\nnot json\n" REC(3));
    assert_int_equal(drain(&t, 1 << 20), 2); /* the third line is not whole yet */
    assert_int_equal(t.lines_bad, 1);
    fs_tail_close(&t);
    /* A restart goes on from the state file: the completed line, once. */
    append(path, "\n");
    assert_int_equal(fs_tail_open(&t, dir, dir, err, sizeof err), 0);
    assert_int_equal(drain(&t, 1 << 20), 1);
    assert_int_equal(drain(&t, 1 << 20), 0);
    /* A line longer than a batch is skipped, not a stop. */
    char big[5000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    append(path, big);
    append(path, "\n" REC(4) "\n");
    assert_int_equal(drain(&t, 4096), 1);
    assert_true(t.lines_bad >= 2);
    /* A file replaced under its name is read from its start. */
    char tmp[320];
    snprintf(tmp, sizeof tmp, "%s/new", dir);
    append(tmp, REC(5) "\n");
    assert_int_equal(rename(tmp, path), 0);
    assert_int_equal(drain(&t, 1 << 20), 1);
    fs_tail_close(&t);
    /* A file that is gone leaves the state at the next start. */
    assert_int_equal(unlink(path), 0);
    assert_int_equal(fs_tail_open(&t, dir, dir, err, sizeof err), 0);
    assert_int_equal(t.n, 0);
    fs_tail_close(&t);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* Writes text to a temporary file; its path in path. */
static void
write_file(char *path, const char *text)
{
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static void
config_defaults_and_refusals(void **state)
{
    (void)state;
    struct fs_agent_cfg c;
    char *errors = NULL;
    char p1[] = "/tmp/fs-agent-cfg-XXXXXX";
    write_file(p1, "collector: { url: http://c:9464 }\nstate_dir: /var/lib/x\ncapture: {}\n");
    assert_int_equal(fs_agent_cfg_load(p1, &c, &errors), 0);
    assert_null(errors);
    assert_string_equal(c.url, "http://c:9464");
    assert_int_equal(c.clock_interval_us, 4000000);
    assert_int_equal(c.request_timeout_us, 10000000);
    assert_int_equal(c.clock_rounds, 8);
    assert_true(c.capture);
    assert_int_equal(c.lead_us, 5000000);
    assert_int_equal(c.length_us, 10000000);
    assert_int_equal(c.n_events, 2);
    assert_string_equal(c.events[0], "tcp:tcp_retransmit_skb");
    assert_string_equal(c.events[1], "skb:kfree_skb");
    assert_null(c.nccl_dir);
    assert_null(c.metrics_listen);
    assert_int_equal(c.spool_max_bytes, 256u << 20);
    fs_agent_cfg_free(&c);
    unlink(p1);

    char p2[] = "/tmp/fs-agent-cfg-XXXXXX";
    write_file(p2, "collector: { url: http://c:9464, tls: {} }\nstate_dir: rel\n"
                   "capture: { lead: 5, events: [kfree_skb] }\nmetrics: { listen: x }\n");
    assert_int_not_equal(fs_agent_cfg_load(p2, &c, &errors), 0);
    assert_non_null(errors);
    assert_non_null(strstr(errors, ":1:34: collector.tls: unknown key"));
    assert_non_null(strstr(errors, "capture.lead: \"5\" is not a duration"));
    assert_non_null(strstr(errors, "capture.events: \"kfree_skb\" is not a tracepoint"));
    assert_non_null(strstr(errors, "metrics.listen: \"x\" is not host:port"));
    free(errors);
    errors = NULL;
    fs_agent_cfg_free(&c);
    unlink(p2);

    char p3[] = "/tmp/fs-agent-cfg-XXXXXX";
    write_file(p3, "collector: { url: http://c:1, timeout: 1500ms }\nstate_dir: rel\n");
    assert_int_not_equal(fs_agent_cfg_load(p3, &c, &errors), 0);
    assert_non_null(strstr(errors, "state_dir: must be an absolute path"));
    assert_non_null(strstr(errors, "collector.timeout: must be whole seconds within 1s..60s"));
    free(errors);
    errors = NULL;
    fs_agent_cfg_free(&c);
    unlink(p3);
    char p4[] = "/tmp/fs-agent-cfg-XXXXXX";
    write_file(p4, "collector: { token_file: /t }\nstate_dir: /x\n");
    assert_int_not_equal(fs_agent_cfg_load(p4, &c, &errors), 0);
    assert_non_null(strstr(errors, "collector: missing required key \"url\""));
    free(errors);
    errors = NULL;
    fs_agent_cfg_free(&c);
    unlink(p4);

    /* command: argv kept in order, defaults, and each refusal naming its key. */
    char p5[] = "/tmp/fs-agent-cfg-XXXXXX";
    write_file(p5, "collector: { url: http://c:1 }\nstate_dir: /x\n"
                   "command: { argv: [/usr/bin/trace, '--a b', x], interval: 30s }\n");
    assert_int_equal(fs_agent_cfg_load(p5, &c, &errors), 0);
    assert_int_equal(c.n_cmd_argv, 3);
    assert_string_equal(c.cmd_argv[0], "/usr/bin/trace");
    assert_string_equal(c.cmd_argv[1], "--a b");
    assert_string_equal(c.cmd_argv[2], "x");
    assert_null(c.cmd_argv[3]);
    assert_int_equal(c.cmd_interval_us, 30000000);
    assert_false(c.cmd_at_capture);
    assert_int_equal(c.cmd_timeout_us, 60000000);
    assert_int_equal(c.cmd_max_output, 16u << 20);
    fs_agent_cfg_free(&c);
    unlink(p5);

    char p6[] = "/tmp/fs-agent-cfg-XXXXXX";
    write_file(p6, "collector: { url: http://c:1 }\nstate_dir: /x\n"
                   "command: { argv: [t], timeout: 50ms, max_output_bytes: 1KiB }\n");
    assert_int_not_equal(fs_agent_cfg_load(p6, &c, &errors), 0);
    assert_non_null(strstr(errors, "command: needs interval or at_capture: true"));
    assert_non_null(strstr(errors, "command.timeout: must be at least 100ms"));
    assert_non_null(strstr(errors, "command.max_output_bytes: must be at least 4KiB"));
    free(errors);
    errors = NULL;
    fs_agent_cfg_free(&c);
    unlink(p6);

    char p7[] = "/tmp/fs-agent-cfg-XXXXXX";
    write_file(p7, "collector: { url: http://c:1 }\nstate_dir: /x\n"
                   "command: { argv: [t], at_capture: true, interval: 1s }\n");
    assert_int_not_equal(fs_agent_cfg_load(p7, &c, &errors), 0);
    assert_non_null(strstr(errors, "command.interval: and command.at_capture: true exclude"));
    assert_non_null(strstr(errors, "command.at_capture: needs a capture block"));
    free(errors);
    errors = NULL;
    fs_agent_cfg_free(&c);
    unlink(p7);

    char p8[] = "/tmp/fs-agent-cfg-XXXXXX";
    write_file(p8, "collector: { url: http://c:1 }\nstate_dir: /x\ncommand: { interval: 1s }\n");
    assert_int_not_equal(fs_agent_cfg_load(p8, &c, &errors), 0);
    assert_non_null(strstr(errors, ":3:1: command: needs argv"));
    free(errors);
    fs_agent_cfg_free(&c);
    unlink(p8);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(offset_track_nearest), cmocka_unit_test(spool_bound),
        cmocka_unit_test(capture_pick),         cmocka_unit_test(capture_pick_refuses_bad_times),
        cmocka_unit_test(tail_resume),          cmocka_unit_test(config_defaults_and_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
