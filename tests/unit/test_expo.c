/*
 * Prometheus exposition: exact lines for counters (full uint64 range) and gauges
 * (shortest round-trip, NaN/Inf), HELP/TYPE, self metrics with static labels, and
 * `promtool check metrics` with no warning at all. OpenMetrics: counter families named
 * without _total, _created where known, # EOF, external labels on every sample, the
 * Accept negotiation, and a strict OpenMetrics parser (python3-prometheus-client's).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "http/expo.h"
#include "http/http.h"
#include "store/store.h"
#include "synth.h"

struct fixture {
    struct fs_store *st;
    struct fs_target_cfg t;
    struct fs_kv labels[2];
    struct fs_sink *sink;
    struct fs_buf out;
};

static int64_t
fixed_monotonic_us(void *arg)
{
    (void)arg;
    return 1000000;
}

static int64_t
system_realtime_us(void *arg)
{
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    char err[128];
    struct fs_ring_opts ro = {.memory_limit = 16 << 20, .retention_us = 3600LL * 1000000};
    f->st = fs_store_new(&ro, err, sizeof err);
    assert_non_null(f->st);
    /* Poll durations are read on the monotonic clock: a fixed one makes every cycle here
       take 0 s, however slowly a loaded machine runs the test (the buckets are checked). */
    static const struct fs_store_clock still = {.realtime_us = system_realtime_us,
                                                .monotonic_us = fixed_monotonic_us};
    fs_store_set_clock(f->st, &still);
    f->t.name = "tor1";
    f->t.address = "127.0.0.1";
    f->labels[0] = (struct fs_kv){"pod", "p\"1"};
    f->labels[1] = (struct fs_kv){"rack", "r12"};
    f->t.labels = f->labels;
    f->t.n_labels = 2;
    f->t.staleness_intervals = 3;
    f->sink = fs_store_sink_add(f->st, &f->t, "snmp", 10 * 1000000LL);
    assert_non_null(f->sink);
    fs_buf_init(&f->out, 64 << 20);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;
    fs_store_sink_remove(f->st, f->sink);
    fs_store_free(f->st);
    fs_buf_free(&f->out);
    free(f);
    return 0;
}

static void
has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)); p++) {
        if ((p == text || p[-1] == '\n') && p[n] == '\n')
            return;
    }
    fail_msg("line not found: %s\n--- output ---\n%s", line, text);
}

static void
lacks(const char *text, const char *s)
{
    if (strstr(text, s))
        fail_msg("unexpected \"%s\" in output:\n%s", s, text);
}

static void
feed(struct fixture *f)
{
    struct fs_label rx[2] = {{"interface", "Eth1/1"}, {"direction", "rx"}};
    struct fs_label tx[2] = {{"interface", "Eth1/1"}, {"direction", "tx"}};
    struct fs_label q[2] = {{"interface", "Eth1/1"}, {"tc", "3"}};
    struct fs_label q4[2] = {{"interface", "Eth1/1"}, {"tc", "4"}};
    struct fs_label q5[2] = {{"interface", "Eth1/1"}, {"tc", "5"}};
    struct fs_label q6[2] = {{"interface", "Eth1/1"}, {"tc", "6"}};
    struct fs_label dev[3] = {{"model", "SN5600"}, {"os", "Onyx"}, {"version", "a\\b\nc"}};
    fs_sink_cycle_begin(f->sink, 1);
    fs_sink_begin(f->sink, fs_synth_now_us());
    fs_sink_counter(f->sink, FS_M_PORT_BYTES, rx, 2, UINT64_MAX, 64);
    fs_sink_counter(f->sink, FS_M_PORT_BYTES, tx, 2, 9007199254740993ULL, 64); /* 2^53+1 */
    fs_sink_gauge(f->sink, FS_M_QUEUE_DEPTH, q, 2, 0.1);
    fs_sink_gauge(f->sink, FS_M_QUEUE_DEPTH, q4, 2, NAN);
    fs_sink_gauge(f->sink, FS_M_QUEUE_DEPTH, q5, 2, INFINITY);
    fs_sink_gauge(f->sink, FS_M_QUEUE_DEPTH, q6, 2, -INFINITY);
    fs_sink_gauge(f->sink, FS_M_DEVICE_INFO, dev, 3, 1);
    fs_sink_gauge(f->sink, FS_M_DEVICE_UPTIME, NULL, 0, 123456.789);
    struct fs_label pfc[3] = {{"interface", "Eth1/1"}, {"direction", "rx"}, {"priority", "3"}};
    fs_sink_counter_scaled(f->sink, FS_M_PFC_PAUSE_SECONDS, pfc, 3, 1234, 64, 1e-3);
    fs_sink_end(f->sink);
    fs_sink_clock(f->sink, 1000250, 1000000, 1000100);
    fs_sink_done(f->sink, 1, FS_POLL_OK, NULL);
}

/* Every series' line carries the labels text the store's readers get (issue 34: the
 * exposition takes it in pieces), also for a series with more labels than are shown. */
struct text_check {
    const char *out;
    int n;
};

static int
text_check_cb(void *arg, const struct fs_series_info *s)
{
    struct text_check *c = arg;
    char want[2048];
    snprintf(want, sizeof want, "%s{%s} ", s->name, s->labels_text);
    if (!strstr(c->out, want))
        fail_msg("no line starts with %s\n--- output ---\n%s", want, c->out);
    c->n++;
    return 0;
}

static void
test_labels_text_pieces(void **state)
{
    struct fixture *f = *state;
    static struct fs_kv many[15];
    static char keys[15][8];
    for (int i = 0; i < 15; i++) {
        snprintf(keys[i], sizeof keys[i], "k%02d", i);
        many[i] = (struct fs_kv){keys[i], "v\"x"};
    }
    struct fs_target_cfg t = {.name = "wide", .address = "::1", .labels = many, .n_labels = 15};
    t.staleness_intervals = 3;
    struct fs_sink *k = fs_store_sink_add(f->st, &t, "gnmi", 10 * 1000000LL);
    struct fs_label own[16];
    char names[16][8];
    for (int i = 0; i < 16; i++) {
        snprintf(names[i], sizeof names[i], "o%02d", i);
        own[i] = (struct fs_label){names[i], "w"};
    }
    fs_sink_begin(k, fs_synth_now_us());
    fs_sink_gauge(k, FS_M_DEVICE_INFO, own, 16, 1); /* 22 labels shown: 6 of the 16 own */
    fs_sink_end(k);
    feed(f);
    fs_expo_render(f->st, &f->out);
    struct text_check c = {f->out.data, 0};
    fs_store_foreach_series(f->st, true, text_check_cb, &c);
    assert_true(c.n >= 10);
    assert_non_null(strstr(f->out.data, "k14=\"v\\\"x\",o00=\"w\",o01=\"w\",o02=\"w\",o03=\"w\","
                                        "o04=\"w\",o05=\"w\",source=\"gnmi\"}"));
    lacks(f->out.data, "o06=");
    fs_store_sink_remove(f->st, k);
}

static void
test_lines(void **state)
{
    struct fixture *f = *state;
    feed(f);
    assert_int_equal(fs_expo_render(f->st, &f->out), 0);
    const char *o = f->out.data;
    const char *lb = "target=\"tor1\",pod=\"p\\\"1\",rack=\"r12\"";
    char line[512];

    has_line(o, "# HELP fabric_port_bytes_total Octets received (rx) or sent (tx) on the port.");
    has_line(o, "# TYPE fabric_port_bytes_total counter");
    snprintf(line, sizeof line,
             "fabric_port_bytes_total{%s,interface=\"Eth1/1\",direction=\"rx\",source=\"snmp\"} "
             "18446744073709551615",
             lb);
    has_line(o, line);
    snprintf(line, sizeof line,
             "fabric_port_bytes_total{%s,interface=\"Eth1/1\",direction=\"tx\",source=\"snmp\"} "
             "9007199254740993",
             lb);
    has_line(o, line);
    has_line(o, "# TYPE fabric_queue_depth_bytes gauge");
    snprintf(line, sizeof line,
             "fabric_queue_depth_bytes{%s,interface=\"Eth1/1\",tc=\"3\",source=\"snmp\"} 0.1", lb);
    has_line(o, line);
    snprintf(line, sizeof line,
             "fabric_queue_depth_bytes{%s,interface=\"Eth1/1\",tc=\"4\",source=\"snmp\"} NaN", lb);
    has_line(o, line);
    snprintf(line, sizeof line,
             "fabric_queue_depth_bytes{%s,interface=\"Eth1/1\",tc=\"5\",source=\"snmp\"} +Inf", lb);
    has_line(o, line);
    snprintf(line, sizeof line,
             "fabric_queue_depth_bytes{%s,interface=\"Eth1/1\",tc=\"6\",source=\"snmp\"} -Inf", lb);
    has_line(o, line);
    snprintf(line, sizeof line,
             "fabric_device_info{%s,model=\"SN5600\",os=\"Onyx\",version=\"a\\\\b\\nc\","
             "source=\"snmp\"} 1",
             lb);
    has_line(o, line);
    snprintf(line, sizeof line, "fabric_device_uptime_seconds{%s,source=\"snmp\"} 123456.789", lb);
    has_line(o, line);

    snprintf(line, sizeof line,
             "fabric_pfc_pause_seconds_total{%s,interface=\"Eth1/1\",direction=\"rx\","
             "priority=\"3\",source=\"snmp\"} 1.234",
             lb);
    has_line(o, line);

    /* Self metrics carry target, static labels and source. */
    has_line(o, "# TYPE fabricscope_target_up gauge");
    snprintf(line, sizeof line, "fabricscope_target_up{%s,source=\"snmp\"} 1", lb);
    has_line(o, line);
    has_line(o, "# TYPE fabricscope_poll_duration_seconds histogram");
    snprintf(line, sizeof line,
             "fabricscope_poll_duration_seconds_bucket{%s,source=\"snmp\",le=\"+Inf\"} 1", lb);
    has_line(o, line);
    snprintf(line, sizeof line,
             "fabricscope_poll_duration_seconds_bucket{%s,source=\"snmp\",le=\"0.005\"} 1", lb);
    has_line(o, line);
    snprintf(line, sizeof line, "fabricscope_poll_duration_seconds_count{%s,source=\"snmp\"} 1",
             lb);
    has_line(o, line);
    static const char *const kinds[] = {"timeout", "auth", "protocol", "parse", "overrun"};
    for (size_t i = 0; i < 5; i++) {
        snprintf(line, sizeof line,
                 "fabricscope_poll_errors_total{%s,source=\"snmp\",kind=\"%s\"} 0", lb, kinds[i]);
        has_line(o, line);
    }
    snprintf(line, sizeof line,
             "fabricscope_counters_reset_total{%s,source=\"snmp\",kind=\"cleared\"} 0", lb);
    has_line(o, line);
    /* The device read 1000250 (µs resolution) while our clock was in [1000000, 1000100]:
     * the offset is within [150, 251] µs, reported as its midpoint ± half width. */
    snprintf(line, sizeof line,
             "fabricscope_target_clock_offset_seconds{%s,source=\"snmp\"} 0.000201", lb);
    has_line(o, line);
    snprintf(line, sizeof line,
             "fabricscope_target_clock_uncertainty_seconds{%s,source=\"snmp\"} 5.1e-05", lb);
    has_line(o, line);
    snprintf(line, sizeof line, "fabricscope_target_clock_offset_exceeded{%s,source=\"snmp\"} 0",
             lb);
    has_line(o, line);
    has_line(o, "# TYPE fabricscope_ring_samples gauge");
    has_line(o, "fabricscope_ring_limit_bytes 16777216");
    has_line(o, "fabricscope_ring_evicted_samples_total{reason=\"memory\"} 0");
    has_line(o, "fabricscope_ring_evicted_samples_total{reason=\"retention\"} 0");
    has_line(o, "fabricscope_series 9");
    has_line(o, "fabricscope_build_info{version=\"" FS_VERSION "\"} 1");
    /* No samples yet, so no family (and no HELP) for these. */
    lacks(o, "fabricscope_http_requests_total");
    lacks(o, "fabric_port_packets_total");
    /* Each family's HELP appears once. */
    const char *p = strstr(o, "# HELP fabric_queue_depth_bytes ");
    assert_non_null(p);
    assert_null(strstr(p + 1, "# HELP fabric_queue_depth_bytes "));
}

static void
test_no_clock_no_offset(void **state)
{
    struct fixture *f = *state;
    fs_sink_begin(f->sink, fs_synth_now_us());
    struct fs_label rx[2] = {{"interface", "Eth1/1"}, {"direction", "rx"}};
    fs_sink_counter(f->sink, FS_M_PORT_BYTES, rx, 2, 5, 64);
    fs_sink_end(f->sink);
    fs_sink_done(f->sink, 0, FS_POLL_TIMEOUT, "no answer");
    assert_int_equal(fs_expo_render(f->st, &f->out), 0);
    lacks(f->out.data, "fabricscope_target_clock_offset_seconds");
    lacks(f->out.data, "fabricscope_target_clock_uncertainty_seconds");
    lacks(f->out.data, "fabricscope_target_clock_offset_exceeded");
    has_line(f->out.data, "fabricscope_target_up{target=\"tor1\",pod=\"p\\\"1\",rack=\"r12\","
                          "source=\"snmp\"} 0");
    has_line(f->out.data, "fabricscope_poll_errors_total{target=\"tor1\",pod=\"p\\\"1\","
                          "rack=\"r12\",source=\"snmp\",kind=\"timeout\"} 1");
}

static void
test_http_counts(void **state)
{
    struct fixture *f = *state;
    struct fs_expo_http_count hc[] = {{"metrics", 200, 3}, {"raw", 400, 0}, {"raw", 200, 1}};
    assert_int_equal(fs_expo_render_ex(f->st, &f->out, hc, 3), 0);
    has_line(f->out.data, "# TYPE fabricscope_http_requests_total counter");
    has_line(f->out.data, "fabricscope_http_requests_total{handler=\"metrics\",code=\"200\"} 3");
    has_line(f->out.data, "fabricscope_http_requests_total{handler=\"raw\",code=\"200\"} 1");
    lacks(f->out.data, "code=\"400\"");
}

static void
check_double(double d)
{
    char s[32];
    size_t n = fs_expo_format_double(s, d);
    assert_int_equal(n, strlen(s));
    assert_true(n < 32);
    double back = strtod(s, NULL);
    if (back != d && !(isnan(d) && isnan(back)))
        fail_msg("%.17g formatted as %s", d, s);
}

static void
test_format_double(void **state)
{
    (void)state;
    char s[32];
    static const struct {
        double d;
        const char *want;
    } cases[] = {
        {0, "0"},
        {1, "1"},
        {-1, "-1"},
        {0.1, "0.1"},
        {1.5, "1.5"},
        {1e15, "1e+15"},
        {123456789012345, "123456789012345"},
        {1.0 / 3, "0.3333333333333333"},
        {2.5e-7, "2.5e-07"},
        {NAN, "NaN"},
        {INFINITY, "+Inf"},
        {-INFINITY, "-Inf"},
        {1.7976931348623157e308, "1.7976931348623157e+308"},
    };
    check_double(5e-324);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fs_expo_format_double(s, cases[i].d);
        assert_string_equal(s, cases[i].want);
        check_double(cases[i].d);
    }
    /* Round trip on many pseudo-random doubles. */
    uint64_t x = 88172645463325252ULL;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double d;
        memcpy(&d, &x, sizeof d);
        check_double(d);
        check_double((double)(x >> 11) / 1024.0);
    }
    static const struct {
        uint64_t u;
        double scale;
        const char *want;
    } sc[] = {
        {1234, 1e-3, "1.234"},
        {1500, 1e-3, "1.5"},
        {2000, 1e-3, "2"},
        {5, 1e-6, "0.000005"},
        {0, 1e-3, "0"},
        {7, 1.0, "7"},
        {3, 0.5, "1.5"},
        {1, 1e-9, "0.000000001"},
        {UINT64_MAX, 1e-3, "18446744073709551.615"},
    };
    for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++) {
        s[fs_expo_format_scaled(s, sc[i].u, sc[i].scale)] = '\0';
        assert_string_equal(s, sc[i].want);
    }
    fs_expo_format_u64(s, 0);
    s[1] = '\0';
    assert_string_equal(s, "0");
    s[fs_expo_format_u64(s, UINT64_MAX)] = '\0';
    assert_string_equal(s, "18446744073709551615");
    s[fs_expo_format_u64(s, 10)] = '\0';
    assert_string_equal(s, "10");
}

/* The whole output, with many series, is clean for promtool: no error, no warning. */
static void
test_promtool(void **state)
{
    struct fixture *f = *state;
    feed(f);
    struct fs_synth *sy = fs_synth_new(f->st, "leaf", 3, 4, 1000000);
    assert_non_null(sy);
    fs_synth_poll(sy, fs_synth_now_us(), 1);
    struct fs_expo_http_count hc[] = {{"metrics", 200, 3}};
    assert_int_equal(fs_expo_render_ex(f->st, &f->out, hc, 1), 0);
    fs_synth_free(sy);

    char path[] = "/tmp/fs_expo_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, f->out.data, f->out.len), (ssize_t)f->out.len);
    close(fd);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "promtool check metrics < %s 2>&1", path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, p);
    text[n] = '\0';
    int rc = pclose(p);
    unlink(path);
    if (rc != 0 || n != 0)
        fail_msg("promtool check metrics (exit %d):\n%s", rc, text);
}

/* Writes text to a temporary file and runs cmd on it (%s: the path); returns the exit
 * status, the output in out. */
static int
run_on(const char *text, size_t len, const char *cmdfmt, char *out, size_t outlen)
{
    char path[] = "/tmp/fs_expo_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, cmdfmt, path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, outlen - 1, p);
    out[n] = '\0';
    int rc = pclose(p);
    unlink(path);
    return rc;
}

static void
render_om(struct fixture *f, bool om)
{
    struct fs_expo_http_count hc[] = {{"metrics", 200, 3}};
    struct fs_expo_opts o = {.hc = hc,
                             .n_hc = 1,
                             .external_labels = "replica=\"a\",dc=\"x\\\"y\"",
                             .openmetrics = om,
                             .store_created_us = 1700000000500000LL,
                             .http_created_us = 1700000001000000LL};
    assert_int_equal(fs_expo_render_opts(f->st, &f->out, &o), 0);
}

static void
test_openmetrics_lines(void **state)
{
    struct fixture *f = *state;
    feed(f);
    render_om(f, true);
    const char *o = f->out.data;
    const char *lb = "target=\"tor1\",pod=\"p\\\"1\",rack=\"r12\"";
    const char *ext = "replica=\"a\",dc=\"x\\\"y\"";
    char line[512];

    /* Counter families are named without _total; their samples keep it. */
    has_line(o, "# HELP fabric_port_bytes Octets received (rx) or sent (tx) on the port.");
    has_line(o, "# TYPE fabric_port_bytes counter");
    lacks(o, "# TYPE fabric_port_bytes_total");
    snprintf(line, sizeof line,
             "fabric_port_bytes_total{%s,interface=\"Eth1/1\",direction=\"rx\",source=\"snmp\",%s} "
             "18446744073709551615",
             lb, ext);
    has_line(o, line);
    /* A switch counter's start is unknown: no _created for it. */
    lacks(o, "fabric_port_bytes_created");
    lacks(o, "fabric_pfc_pause_seconds_created");
    has_line(o, "# TYPE fabric_queue_depth_bytes gauge");
    /* fabricscope's own counters: their start is known. */
    has_line(o, "# TYPE fabricscope_ring_evicted_samples counter");
    snprintf(line, sizeof line,
             "fabricscope_ring_evicted_samples_created{reason=\"memory\",%s} 1700000000.500000",
             ext);
    has_line(o, line);
    snprintf(line, sizeof line, "fabricscope_ring_refused_samples_created{%s} 1700000000.500000",
             ext);
    has_line(o, line);
    snprintf(line, sizeof line,
             "fabricscope_http_requests_created{handler=\"metrics\",code=\"200\",%s} "
             "1700000001.000000",
             ext);
    has_line(o, line);
    snprintf(line, sizeof line, "fabricscope_build_info{version=\"%s\",%s} 1", FS_VERSION, ext);
    has_line(o, line);
    snprintf(line, sizeof line, "fabricscope_ring_samples{%s} ", ext);
    assert_non_null(strstr(o, line));
    /* Exactly one # EOF, at the very end. */
    size_t len = f->out.len;
    assert_true(len > 6 && !strcmp(o + len - 6, "# EOF\n"));
    assert_ptr_equal(strstr(o, "# EOF"), o + len - 6);
    /* Every sample carries the external labels. */
    for (const char *p = o; *p;) {
        const char *nl = strchr(p, '\n');
        size_t ll = nl ? (size_t)(nl - p) : strlen(p);
        if (*p != '#') {
            char l[2048];
            snprintf(l, sizeof l, "%.*s", (int)ll, p);
            if (!strstr(l, ext))
                fail_msg("sample without the external labels: %s", l);
        }
        p += ll + (nl ? 1 : 0);
    }

    /* The text format of the same: _total family names, no _created, no # EOF. */
    fs_buf_reset(&f->out);
    render_om(f, false);
    o = f->out.data;
    has_line(o, "# TYPE fabric_port_bytes_total counter");
    lacks(o, "_created");
    lacks(o, "# EOF");
    snprintf(line, sizeof line, "fabricscope_ring_refused_samples_total{%s} 0", ext);
    has_line(o, line);
}

/* The OpenMetrics output of many series passes a strict OpenMetrics parser, and the
 * text output with external labels stays promtool-clean. */
static void
test_openmetrics_parsers(void **state)
{
    struct fixture *f = *state;
    feed(f);
    struct fs_synth *sy = fs_synth_new(f->st, "leaf", 3, 4, 1000000);
    assert_non_null(sy);
    fs_synth_poll(sy, fs_synth_now_us(), 1);
    render_om(f, true);
    char text[8192];
    int rc = run_on(f->out.data, f->out.len,
                    "/usr/bin/python3 -c 'import sys\n"
                    "from prometheus_client.openmetrics.parser import "
                    "text_string_to_metric_families as p\n"
                    "fams = list(p(open(sys.argv[1]).read()))\n"
                    "c = [f for f in fams if f.type == \"counter\"]\n"
                    "assert c and all(not f.name.endswith(\"_total\") for f in c), c\n"
                    "print(len(fams), \"families\", file=sys.stderr)' %s 2>&1",
                    text, sizeof text);
    if (rc != 0)
        fail_msg("strict OpenMetrics parser (exit %d):\n%s", rc, text);
    print_message("%s", text);

    fs_buf_reset(&f->out);
    render_om(f, false);
    fs_synth_free(sy);
    rc = run_on(f->out.data, f->out.len, "promtool check metrics < %s 2>&1", text, sizeof text);
    if (rc != 0 || text[0])
        fail_msg("promtool check metrics (exit %d):\n%s", rc, text);
}

/* Families rendered elsewhere as text 0.0.4 (the analysis metrics) carried over: the
 * OpenMetrics way with the external labels, and unchanged but for the labels in text. */
static void
test_adapt_text(void **state)
{
    struct fixture *f = *state;
    const char *in =
        "# HELP fabricscope_host_events_evicted_total Events dropped; \"reason\" says why.\n"
        "# TYPE fabricscope_host_events_evicted_total counter\n"
        "fabricscope_host_events_evicted_total{reason=\"memory\"} 3\n"
        "fabricscope_host_events_evicted_total{reason=\"a b} c\"} 4\n"
        "# HELP fabricscope_host_events Events held.\n"
        "# TYPE fabricscope_host_events gauge\n"
        "fabricscope_host_events 12\n"
        "fabricscope_host_events{} 13\n";
    struct fs_expo_opts o = {.external_labels = "replica=\"a\"", .openmetrics = true};
    assert_int_equal(fs_expo_adapt_text(in, strlen(in), &o, &f->out), 0);
    assert_int_equal(fs_expo_end(&f->out, &o), 0);
    const char *t = f->out.data;
    has_line(t, "# HELP fabricscope_host_events_evicted Events dropped; \\\"reason\\\" says why.");
    has_line(t, "# TYPE fabricscope_host_events_evicted counter");
    has_line(t, "fabricscope_host_events_evicted_total{reason=\"memory\",replica=\"a\"} 3");
    has_line(t, "fabricscope_host_events_evicted_total{reason=\"a b} c\",replica=\"a\"} 4");
    has_line(t, "# TYPE fabricscope_host_events gauge");
    has_line(t, "fabricscope_host_events{replica=\"a\"} 12");
    has_line(t, "fabricscope_host_events{replica=\"a\"} 13");
    has_line(t, "# EOF");
    char text[4096];
    int rc = run_on(f->out.data, f->out.len,
                    "/usr/bin/python3 -c 'import sys\n"
                    "from prometheus_client.openmetrics.parser import "
                    "text_string_to_metric_families as p\n"
                    "list(p(open(sys.argv[1]).read()))' %s 2>&1",
                    text, sizeof text);
    if (rc != 0)
        fail_msg("strict OpenMetrics parser (exit %d):\n%s\n---\n%s", rc, text, t);

    fs_buf_reset(&f->out);
    o.openmetrics = false;
    assert_int_equal(fs_expo_adapt_text(in, strlen(in), &o, &f->out), 0);
    assert_int_equal(fs_expo_end(&f->out, &o), 0);
    t = f->out.data;
    has_line(t, "# TYPE fabricscope_host_events_evicted_total counter");
    has_line(t,
             "# HELP fabricscope_host_events_evicted_total Events dropped; \"reason\" says why.");
    has_line(t, "fabricscope_host_events{replica=\"a\"} 12");
    lacks(t, "# EOF");
}

/* Which format a scraper's Accept header gets. */
static void
test_accept(void **state)
{
    (void)state;
    /* Prometheus 2.x's scrape header. */
    assert_true(fs_http_prefers_openmetrics(
        "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
        "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"));
    assert_true(fs_http_prefers_openmetrics("application/openmetrics-text"));
    assert_true(fs_http_prefers_openmetrics("Application/OpenMetrics-Text; version=1.0.0"));
    assert_false(fs_http_prefers_openmetrics(NULL));
    assert_false(fs_http_prefers_openmetrics(""));
    assert_false(fs_http_prefers_openmetrics("*/*"));
    assert_false(fs_http_prefers_openmetrics("text/plain"));
    assert_false(fs_http_prefers_openmetrics("text/plain;version=0.0.4"));
    /* Prometheus with the text format preferred. */
    assert_false(fs_http_prefers_openmetrics(
        "text/plain;version=0.0.4;q=1,application/openmetrics-text;version=1.0.0;q=0.5"));
    assert_false(fs_http_prefers_openmetrics("application/openmetrics-text;q=0,text/plain"));
    assert_true(fs_http_prefers_openmetrics("text/plain;q=0.2, application/openmetrics-text"));
    assert_true(fs_http_prefers_openmetrics("*/*;q=0.1,application/openmetrics-text;q=0.3"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_labels_text_pieces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_clock_no_offset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_counts, setup, teardown),
        cmocka_unit_test(test_format_double),
        cmocka_unit_test_setup_teardown(test_promtool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_openmetrics_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_openmetrics_parsers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_adapt_text, setup, teardown),
        cmocka_unit_test(test_accept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
