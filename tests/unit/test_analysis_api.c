/* The analysis endpoints called directly (no HTTP), on a real store fed through sinks:
 * two switches polled every second for ten minutes, tor1 Eth1/49 surging for 2 s every
 * 30 s, AllReduce ranges posted by a host whose clock runs 40 ms behind, stretching in
 * the surges and a few times elsewhere. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "http/analysis_api.h"
#include "importers/correlate_cli.h"
#include "store/store.h"

#define S 1000000LL
#define MINUTES 10
#define PORTS 8
#define HOST_OFFSET_NS (-40000000LL) /* host minus collector */

struct fixture {
    struct fs_store *st;
    struct fs_analysis *an;
    struct fs_target_cfg t[2];
    struct fs_sink *sink[2];
    int64_t now_us, t0_us, first_surge_us;
    struct fs_buf out;
};

static int64_t
realtime_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static uint64_t rng_state = 77;

static double
urand(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

static bool
in_surge(const struct fixture *f, int64_t t)
{
    if (t < f->first_surge_us)
        return false;
    return (t - f->first_surge_us) % (30 * S) < 2 * S;
}

/* Away from the surges (at 7.3 s + 30 k s, lasting 2 s); 282.3 s is 3 s after one ends. */
static const int64_t random_slow_at[] = {82 * S, 142 * S, 262 * S, 282300000, 377 * S, 512 * S};

static void
feed_switches(struct fixture *f)
{
    uint64_t ecn[2][PORTS + 1] = {{0}};
    char ifname[PORTS + 1][16];
    for (int p = 0; p < PORTS; p++)
        snprintf(ifname[p], sizeof ifname[p], "Eth1/%d", p + 1);
    snprintf(ifname[PORTS], sizeof ifname[PORTS], "Eth1/49");
    for (int64_t t = f->t0_us; t <= f->now_us - S; t += S) {
        for (int k = 0; k < 2; k++) {
            /* Polled 5..15 ms after the second (a poll's round trip). */
            int64_t ts = t + 5000 + (int64_t)(urand() * 10000);
            fs_sink_begin(f->sink[k], ts);
            for (int p = 0; p <= PORTS; p++) {
                bool hot = k == 0 && p == PORTS && (in_surge(f, ts) || in_surge(f, ts - S / 2));
                ecn[k][p] += (uint64_t)(50 + urand() * 20) + (hot ? 80000 : 0);
                struct fs_label l[2] = {{"interface", ifname[p]}, {"tc", "3"}};
                fs_sink_counter(f->sink[k], FS_M_QUEUE_ECN_MARKED, l, 2, ecn[k][p], 64);
                double depth =
                    2000 + urand() * 1000 + (k == 0 && p == PORTS && in_surge(f, ts) ? 12e6 : 0);
                fs_sink_gauge(f->sink[k], FS_M_QUEUE_DEPTH, l, 2, depth);
            }
            fs_sink_end(f->sink[k]);
        }
    }
}

/* AllReduce every 100 ms: 2 ms normally, 25 ms when a surge overlaps it, 15 ms at the
 * random times; posted in host-clock ns (collector time + offset). */
static char *
allreduce_body(const struct fixture *f, size_t *n_events)
{
    size_t cap = 64 << 20, len = 0;
    char *b = malloc(cap);
    len += (size_t)snprintf(b + len, cap - len,
                            "{\"host_offset_ns\":%lld,\"host_offset_uncertainty_ns\":300000,"
                            "\"events\":[",
                            (long long)HOST_OFFSET_NS);
    size_t n = 0;
    for (int64_t t = f->t0_us + 60 * S; t < f->now_us - 2 * S; t += 100000) {
        int64_t dur = 2000 + (int64_t)(urand() * 200);
        if (in_surge(f, t) || in_surge(f, t + 20000))
            dur = 25000;
        for (size_t i = 0; i < sizeof random_slow_at / sizeof random_slow_at[0]; i++)
            if (t - f->t0_us == random_slow_at[i])
                dur = 15000;
        int64_t start_ns = t * 1000 + HOST_OFFSET_NS, end_ns = (t + dur) * 1000 + HOST_OFFSET_NS;
        len +=
            (size_t)snprintf(b + len, cap - len,
                             "%s{\"host\":\"gpu1\",\"kind\":\"nccl.kernel\",\"name\":\"AllReduce\","
                             "\"start\":%lld,\"end\":%lld,\"attrs\":{\"stream\":7}}",
                             n ? "," : "", (long long)start_ns, (long long)end_ns);
        n++;
    }
    /* Retransmits inside the surges: another kind, reported with the slow events. */
    for (int k = 0; k < MINUTES * 2; k++) {
        int64_t t = f->first_surge_us + k * 30 * S + 500000;
        if (t > f->now_us - 2 * S)
            break;
        len += (size_t)snprintf(b + len, cap - len,
                                ",{\"host\":\"gpu1\",\"kind\":\"perf.tcp_retransmit_skb\",\"name\":"
                                "\"tcp:tcp_retransmit_skb\",\"start\":%lld,\"attrs\":{\"saddr\":"
                                "\"10.0.0.1\",\"sport\":37208,\"daddr\":\"10.0.0.2\",\"dport\":"
                                "5201}}",
                                (long long)(t * 1000 + HOST_OFFSET_NS));
        n++;
    }
    snprintf(b + len, cap - len, "]}");
    *n_events = n;
    return b;
}

static int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    char err[256];
    struct fs_ring_opts ro = {.memory_limit = 64 << 20, .retention_us = 3600 * S};
    f->st = fs_store_new(&ro, err, sizeof err);
    assert_non_null(f->st);
    struct fs_host_events_opts ho = {64 << 20, 3600LL * 1000000000LL};
    f->an = fs_analysis_new(&ho, err, sizeof err);
    assert_non_null(f->an);
    static char *names[2] = {"tor1", "tor2"};
    for (int k = 0; k < 2; k++) {
        f->t[k].name = names[k];
        f->t[k].address = "192.0.2.1";
        f->t[k].staleness_intervals = 3;
        f->sink[k] = fs_store_sink_add(f->st, &f->t[k], "snmp", S);
        assert_non_null(f->sink[k]);
    }
    f->now_us = realtime_us() / S * S;
    f->t0_us = f->now_us - MINUTES * 60 * S;
    f->first_surge_us = f->t0_us + 7 * S + 300000;
    feed_switches(f);
    fs_buf_init(&f->out, 64 << 20);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;
    for (int k = 0; k < 2; k++)
        fs_store_sink_remove(f->st, f->sink[k]);
    fs_analysis_free(f->an);
    fs_store_free(f->st);
    fs_buf_free(&f->out);
    free(f);
    return 0;
}

static struct json_object *
parse(const struct fs_buf *b)
{
    struct json_object *o = json_tokener_parse(b->data);
    if (!o)
        fail_msg("not JSON: %.200s", b->data);
    return o;
}

static struct json_object *
get(struct json_object *o, const char *path)
{
    char key[64];
    while (*path) {
        const char *dot = strchr(path, '.');
        size_t l = dot ? (size_t)(dot - path) : strlen(path);
        memcpy(key, path, l);
        key[l] = '\0';
        struct json_object *v;
        if (json_object_is_type(o, json_type_array))
            v = json_object_array_get_idx(o, (size_t)atoi(key));
        else if (!json_object_object_get_ex(o, key, &v))
            v = NULL;
        if (!v)
            fail_msg("no %s in the answer", key);
        o = v;
        path += l + (dot ? 1 : 0);
    }
    return o;
}

static void
post_all(struct fixture *f)
{
    assert_int_equal(fs_analysis_set_token(f->an, "s3cret"), 0);
    size_t n;
    char *body = allreduce_body(f, &n);
    int rc = fs_analysis_post_host_events(f->an, "Bearer s3cret", body, strlen(body), f->now_us,
                                          &f->out);
    if (rc != 200)
        fail_msg("post: %d %s", rc, f->out.data);
    struct json_object *o = parse(&f->out);
    assert_int_equal(json_object_get_int(get(o, "data.stored")), (int)n);
    json_object_put(o);
    free(body);
}

static void
test_post_auth_and_validation(void **state)
{
    struct fixture *f = *state;
    const char *ok = "{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":0,\"events\":[{"
                     "\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":1}]}";
    /* No token configured: 403 saying so. */
    assert_int_equal(
        fs_analysis_post_host_events(f->an, "Bearer x", ok, strlen(ok), f->now_us, &f->out), 403);
    assert_non_null(strstr(f->out.data, "bearer_token_file"));
    assert_int_equal(fs_analysis_set_token(f->an, "s3cret"), 0);
    assert_int_equal(fs_analysis_post_host_events(f->an, NULL, ok, strlen(ok), f->now_us, &f->out),
                     401);
    assert_int_equal(
        fs_analysis_post_host_events(f->an, "Bearer s3cre", ok, strlen(ok), f->now_us, &f->out),
        401);
    assert_int_equal(
        fs_analysis_post_host_events(f->an, "Basic s3cret", ok, strlen(ok), f->now_us, &f->out),
        401);
    const char *half =
        "{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":0,\"events\":[{"
        "\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":1},{\"host\":\"h\"}]}";
    assert_int_equal(fs_analysis_post_host_events(f->an, "Bearer s3cret", half, strlen(half),
                                                  f->now_us, &f->out),
                     400);
    assert_non_null(strstr(f->out.data, "events[1]"));
    struct fs_host_events_stats hs;
    fs_host_events_stats(fs_analysis_host_events(f->an), &hs);
    assert_int_equal(hs.events, 0);
    assert_int_equal(
        fs_analysis_post_host_events(f->an, "Bearer s3cret", ok, strlen(ok), f->now_us, &f->out),
        200);
    fs_host_events_stats(fs_analysis_host_events(f->an), &hs);
    assert_int_equal(hs.events, 1);
}

/* Per-host tokens through the API: only its hosts (403 naming the item otherwise), the
 * shared token refused once only per-host ones are set, and every event in an answer
 * says which token posted it. */
static void
test_post_per_host_tokens(void **state)
{
    struct fixture *f = *state;
    struct fs_analysis_token t[] = {{"gpu-rack", "r-tok", "gpu*", 8 << 20}};
    assert_int_equal(fs_analysis_set_tokens(f->an, NULL, t, 1), 0);
    const char *other = "{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":0,\"events\":[{"
                        "\"host\":\"storage-3\",\"kind\":\"k\",\"name\":\"n\",\"start\":1}]}";
    assert_int_equal(fs_analysis_post_host_events(f->an, "Bearer r-tok", other, strlen(other),
                                                  f->now_us, &f->out),
                     403);
    print_message("%s\n", f->out.data);
    assert_non_null(strstr(f->out.data, "events[0].host"));
    assert_int_equal(fs_analysis_post_host_events(f->an, "Bearer s3cret", other, strlen(other),
                                                  f->now_us, &f->out),
                     401);
    size_t n;
    char *body = allreduce_body(f, &n);
    int rc =
        fs_analysis_post_host_events(f->an, "Bearer r-tok", body, strlen(body), f->now_us, &f->out);
    free(body);
    if (rc != 200)
        fail_msg("post: %d %s", rc, f->out.data);
    char start[32], end[32];
    snprintf(start, sizeof start, "%lld", (long long)(f->t0_us / S));
    snprintf(end, sizeof end, "%lld", (long long)(f->now_us / S));
    struct fs_analysis_arg args[] = {
        {"start", start}, {"end", end}, {"kind", "nccl"}, {"slow", "3x"}};
    rc = fs_analysis_correlate(f->an, f->st, args, 4, f->now_us, &f->out);
    if (rc != 200)
        fail_msg("correlate: %d %s", rc, f->out.data);
    struct json_object *o = parse(&f->out);
    assert_string_equal(json_object_get_string(get(o, "data.events.0.posted_by")), "gpu-rack");
    json_object_put(o);
}

static void
test_time(void **state)
{
    struct fixture *f = *state;
    int64_t recv = realtime_us() * 1000;
    assert_int_equal(fs_analysis_time(recv, &f->out), 200);
    struct json_object *o = parse(&f->out);
    int64_t r = json_object_get_int64(get(o, "receive_ns"));
    int64_t s = json_object_get_int64(get(o, "send_ns"));
    assert_true(r == recv);
    assert_true(s >= r && s - r < 1000000000LL);
    json_object_put(o);
}

static bool
is_culprit(struct json_object *s)
{
    return strcmp(json_object_get_string(get(s, "target")), "tor1") == 0 &&
           strcmp(json_object_get_string(get(s, "interface")), "Eth1/49") == 0;
}

static void
test_correlate(void **state)
{
    struct fixture *f = *state;
    post_all(f);
    char start[32], end[32];
    snprintf(start, sizeof start, "%lld", (long long)(f->t0_us / S));
    snprintf(end, sizeof end, "%lld", (long long)(f->now_us / S));
    struct fs_analysis_flow_rule rules[] = {{"iperf", 1, 0, 0, 5201, 5201},
                                            {"udp-any", 2, 0, 0, 0, 0},
                                            {"high-src", 0, 30000, 40000, 0, 0}};
    assert_int_equal(fs_analysis_set_flow_rules(f->an, rules, 3), 0);
    /* tor1's clock measured, on a stated basis; tor2's never measured. */
    fs_sink_clock_basis(f->sink[0], "test basis: delay assumed at most 7 ms (test.key)");
    int64_t rt = realtime_us();
    fs_sink_clock(f->sink[0], rt + 20000, rt - 1000, rt + 1000);
    struct fs_analysis_arg args[] = {
        {"start", start}, {"end", end}, {"kind", "nccl"}, {"slow", "3x"}, {"limit", "1000"}};
    int rc = fs_analysis_correlate(f->an, f->st, args, 5, f->now_us, &f->out);
    if (rc != 200)
        fail_msg("correlate: %d %s", rc, f->out.data);
    struct json_object *o = parse(&f->out);
    struct json_object *summary = get(o, "data.summary");
    assert_true(json_object_array_length(summary) >= 1);
    struct json_object *top = get(summary, "0");
    assert_true(is_culprit(top));
    print_message("%s\n", json_object_get_string(get(top, "text")));
    /* The clocks behind the answer's times: the culprit's target, with what its clock's
     * bounds rest on; a target without a measured clock says so. */
    struct json_object *clocks = get(o, "data.clocks");
    bool tor1_clock = false;
    for (size_t i = 0; i < json_object_array_length(clocks); i++) {
        struct json_object *c = json_object_array_get_idx(clocks, i);
        const char *tg = json_object_get_string(get(c, "target"));
        const char *basis = json_object_get_string(get(c, "basis"));
        if (strcmp(tg, "tor1") == 0) {
            tor1_clock = true;
            assert_string_equal(basis, "test basis: delay assumed at most 7 ms (test.key)");
            assert_true(fabs(json_object_get_double(get(c, "offset_ms")) - 20.0) <= 1.5);
        } else {
            assert_string_equal(tg, "tor2");
            assert_non_null(strstr(basis, "no device clock measured"));
        }
    }
    assert_true(tor1_clock);
    struct json_object *events = get(o, "data.events");
    size_t n = json_object_array_length(events), surge = 0, named = 0, random_blamed = 0,
           random_n = 0, with_retransmit = 0;
    for (size_t i = 0; i < n; i++) {
        struct json_object *e = json_object_array_get_idx(events, i);
        /* On the collector's axis: host time minus the (negative) offset. */
        int64_t s_ns = json_object_get_int64(get(e, "start_ns"));
        int64_t h_ns = json_object_get_int64(get(e, "host_start_ns"));
        int64_t s_us = (int64_t)llround(json_object_get_double(get(e, "start")) * 1e6);
        assert_true(s_ns == h_ns - HOST_OFFSET_NS);
        assert_true(llabs(s_us - s_ns / 1000) <= 1);
        assert_true(json_object_get_int64(get(e, "host_offset_ns")) == HOST_OFFSET_NS);
        struct json_object *sus = get(e, "suspects");
        bool first_is_culprit =
            json_object_array_length(sus) > 0 && is_culprit(json_object_array_get_idx(sus, 0));
        bool any_culprit = false;
        for (size_t k = 0; k < json_object_array_length(sus); k++)
            any_culprit |= is_culprit(json_object_array_get_idx(sus, k));
        if (in_surge(f, s_us) || in_surge(f, s_us + 20000)) {
            surge++;
            named += first_is_culprit;
            if (json_object_get_int(get(e, "other_host_events_total")) > 0) {
                with_retransmit++;
                /* 10.0.0.1:37208 -> 10.0.0.2:5201 over TCP: "iperf" and "high-src". */
                struct json_object *fr = get(e, "other_host_events.0.flow_rules");
                assert_int_equal(json_object_array_length(fr), 2);
                assert_string_equal(json_object_get_string(get(fr, "0")), "iperf");
                assert_string_equal(json_object_get_string(get(fr, "1")), "high-src");
            }
        } else {
            random_n++;
            random_blamed += any_culprit;
        }
    }
    print_message("surge events %zu, culprit first in %zu; random %zu, blamed %zu\n", surge, named,
                  random_n, random_blamed);
    assert_true(surge >= 100);
    assert_true(named * 10 >= surge * 9);
    assert_int_equal(random_n, 6);
    assert_int_equal(random_blamed, 0);
    assert_true(with_retransmit > 0);
    json_object_put(o);

    /* The terminal table of `fabricscope correlate` from the same answer. */
    char *table = NULL;
    size_t table_len = 0;
    FILE *mem = open_memstream(&table, &table_len);
    assert_int_equal(fs_correlate_print(f->out.data, mem), 0);
    fclose(mem);
    assert_non_null(strstr(table, "tor1 Eth1/49 tc3 ECN surge during"));
    assert_non_null(strstr(table, "AllReduce"));
    free(table);
    assert_int_equal(fs_correlate_print("{\"status\":\"error\"}", stderr), -1);

    /* Explicit windows, and bad parameters. */
    char w[80];
    int64_t ws = f->first_surge_us + 3 * 30 * S;
    snprintf(w, sizeof w, "%lld.%06lld,%lld.%06lld", (long long)(ws / S), (long long)(ws % S),
             (long long)((ws + S) / S), (long long)((ws + S) % S));
    struct fs_analysis_arg wargs[] = {{"window", w}};
    assert_int_equal(fs_analysis_correlate(f->an, f->st, wargs, 1, f->now_us, &f->out), 200);
    o = parse(&f->out);
    assert_true(is_culprit(get(o, "data.events.0.suspects.0")));
    json_object_put(o);
    struct fs_analysis_arg bad1[] = {{"strat", "1"}};
    assert_int_equal(fs_analysis_correlate(f->an, f->st, bad1, 1, f->now_us, &f->out), 400);
    struct fs_analysis_arg bad2[] = {{"slow", "p100"}};
    assert_int_equal(fs_analysis_correlate(f->an, f->st, bad2, 1, f->now_us, &f->out), 400);
    struct fs_analysis_arg bad3[] = {{"start", "10"}, {"end", "5"}};
    assert_int_equal(fs_analysis_correlate(f->an, f->st, bad3, 2, f->now_us, &f->out), 400);
    struct fs_analysis_arg bad4[] = {{"start", "99999999999"}, {"end", "99999999999"}};
    assert_int_equal(fs_analysis_correlate(f->an, f->st, bad4, 2, f->now_us, &f->out), 400);
    struct fs_analysis_arg bad5[] = {{"window", "-99999999999,1"}};
    assert_int_equal(fs_analysis_correlate(f->an, f->st, bad5, 1, f->now_us, &f->out), 400);
    struct fs_analysis_arg bad6[] = {{"dump_time", "yes"}};
    assert_int_equal(fs_analysis_correlate(f->an, f->st, bad6, 1, f->now_us, &f->out), 400);
}

/* A range a little past an endpoint's limit ("now minus 7 days" computed by the caller,
 * a moment before the request arrives) is taken as the limit's length; one a minute
 * past is refused. fs_analysis_check_get gives the same verdicts without running. */
static void
test_range_limits(void **state)
{
    struct fixture *f = *state;
    char s1[32], s2[32], s3[32], s4[32];
    /* Whole seconds, as `date +%s` minus the limit gives, plus the request's trip. */
    snprintf(s1, sizeof s1, "%lld", (long long)((f->now_us - 86400 * S) / S - 1));
    snprintf(s2, sizeof s2, "%lld", (long long)((f->now_us - 86400 * S) / S - 61));
    snprintf(s3, sizeof s3, "%lld", (long long)((f->now_us - 7 * 86400 * S) / S - 1));
    snprintf(s4, sizeof s4, "%lld", (long long)((f->now_us - 7 * 86400 * S) / S - 61));
    struct fs_analysis_arg day[] = {{"start", s1}}, day_late[] = {{"start", s2}};
    struct fs_analysis_arg week[] = {{"start", s3}}, week_late[] = {{"start", s4}};

    assert_int_equal(
        fs_analysis_check_get(f->an, FS_ANALYSIS_GET_CORRELATE, day, 1, f->now_us, &f->out), 0);
    assert_int_equal(f->out.len, 0);
    assert_int_equal(fs_analysis_correlate(f->an, f->st, day, 1, f->now_us, &f->out), 200);
    fs_buf_reset(&f->out);
    assert_int_equal(
        fs_analysis_check_get(f->an, FS_ANALYSIS_GET_CORRELATE, day_late, 1, f->now_us, &f->out),
        400);
    assert_non_null(strstr(f->out.data, "longer than 86400 s"));
    fs_buf_reset(&f->out);
    assert_int_equal(fs_analysis_correlate(f->an, f->st, day_late, 1, f->now_us, &f->out), 400);
    fs_buf_reset(&f->out);

    assert_int_equal(
        fs_analysis_check_get(f->an, FS_ANALYSIS_GET_INCIDENTS, week, 1, f->now_us, &f->out), 0);
    assert_int_equal(fs_analysis_incidents(f->an, f->st, week, 1, f->now_us, &f->out), 200);
    fs_buf_reset(&f->out);
    assert_int_equal(
        fs_analysis_check_get(f->an, FS_ANALYSIS_GET_INCIDENTS, week_late, 1, f->now_us, &f->out),
        400);
    fs_buf_reset(&f->out);
    assert_int_equal(fs_analysis_incidents(f->an, f->st, week_late, 1, f->now_us, &f->out), 400);
    fs_buf_reset(&f->out);

    /* Every other check too, on arrival: unknown parameters, bad values. */
    struct fs_analysis_arg bad1[] = {{"strat", "1"}}, bad2[] = {{"slow", "p100"}},
                           bad3[] = {{"match[]", "{"}};
    assert_int_equal(
        fs_analysis_check_get(f->an, FS_ANALYSIS_GET_CORRELATE, bad1, 1, f->now_us, &f->out), 400);
    fs_buf_reset(&f->out);
    assert_int_equal(
        fs_analysis_check_get(f->an, FS_ANALYSIS_GET_INCIDENTS, bad2, 1, f->now_us, &f->out), 400);
    fs_buf_reset(&f->out);
    assert_int_equal(
        fs_analysis_check_get(f->an, FS_ANALYSIS_GET_TRACE, bad3, 1, f->now_us, &f->out), 400);
    fs_buf_reset(&f->out);
    assert_int_equal(
        fs_analysis_check_get(f->an, FS_ANALYSIS_GET_TRACE, NULL, 0, f->now_us, &f->out), 0);
}

/* NCCL Inspector records placed at their log's dump time are not candidates for "slow"
 * unless asked for: their place in time is only roughly known. */
static void
test_correlate_dump_time(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(fs_analysis_set_token(f->an, "s3cret"), 0);
    char body[1024];
    long long t = (long long)(f->now_us - 120 * S) * 1000;
    snprintf(body, sizeof body,
             "{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":0,\"events\":["
             "{\"host\":\"h\",\"kind\":\"nccl.inspector\",\"name\":\"AllReduce\",\"start\":%lld,"
             "\"end\":%lld,\"attrs\":{\"placement\":\"dump_time\"}},"
             "{\"host\":\"h\",\"kind\":\"nccl.inspector\",\"name\":\"AllReduce\",\"start\":%lld,"
             "\"end\":%lld,\"attrs\":{\"placement\":\"trace\"}}]}",
             t, t + 2000000000LL, t + 10000000000LL, t + 10001000000LL);
    assert_int_equal(fs_analysis_post_host_events(f->an, "Bearer s3cret", body, strlen(body),
                                                  f->now_us, &f->out),
                     200);
    char start[32];
    snprintf(start, sizeof start, "%lld", (long long)(f->now_us / S - 300));
    struct fs_analysis_arg args[] = {{"start", start}, {"kind", "nccl.inspector"}, {"slow", "p50"}};
    assert_int_equal(fs_analysis_correlate(f->an, f->st, args, 3, f->now_us, &f->out), 200);
    struct json_object *o = parse(&f->out);
    assert_int_equal(json_object_get_int(get(o, "data.events_considered")), 1);
    assert_int_equal(json_object_get_int(get(o, "data.events_at_dump_time_left_out")), 1);
    json_object_put(o);
    struct fs_analysis_arg inc[] = {
        {"start", start}, {"kind", "nccl.inspector"}, {"slow", "p50"}, {"dump_time", "include"}};
    assert_int_equal(fs_analysis_correlate(f->an, f->st, inc, 4, f->now_us, &f->out), 200);
    o = parse(&f->out);
    assert_int_equal(json_object_get_int(get(o, "data.events_considered")), 2);
    assert_int_equal(json_object_get_int(get(o, "data.events_at_dump_time_left_out")), 0);
    json_object_put(o);
}

static void
test_incidents_and_metrics(void **state)
{
    struct fixture *f = *state;
    struct fs_analysis_arg args[] = {{"limit", "5"}};
    int rc = fs_analysis_incidents(f->an, f->st, args, 1, f->now_us, &f->out);
    if (rc != 200)
        fail_msg("incidents: %d %s", rc, f->out.data);
    struct json_object *o = parse(&f->out);
    struct json_object *g = get(o, "data.recurring.0");
    print_message("%s\n", json_object_get_string(get(g, "text")));
    assert_true(is_culprit(get(g, "series.0")));
    double period = json_object_get_double(get(g, "period_s"));
    assert_true(fabs(period - 30) <= 1);
    int64_t next = (int64_t)llround(json_object_get_double(get(g, "next_expected")) * 1e6);
    int64_t truth = f->first_surge_us;
    while (truth <= f->now_us)
        truth += 30 * S;
    print_message("next expected %+.3f s from the truth\n", (double)(next - truth) / 1e6);
    assert_true(llabs(next - truth) <= S);
    assert_true(json_object_array_length(get(o, "data.episodes")) <= 5);
    json_object_put(o);

    fs_buf_reset(&f->out);
    assert_int_equal(fs_analysis_metrics(f->an, &f->out), 0);
    assert_non_null(strstr(f->out.data, "fabricscope_incident_period_seconds{"));
    /* The periodic refresh computes the same for the last hour. */
    assert_int_equal(fs_analysis_refresh(f->an, f->st, f->now_us), 0);
    fs_buf_reset(&f->out);
    assert_int_equal(fs_analysis_metrics(f->an, &f->out), 0);
    assert_non_null(strstr(f->out.data, "fabricscope_incident_next_expected_timestamp_seconds{"
                                        "target=\"tor1\",interface=\"Eth1/49\""));
    assert_non_null(strstr(f->out.data, "fabricscope_host_events "));
}

/* With host events imported, each recurring group says in how many of its occurrences a
 * slow event of the asked kind fell (the culprit's surges are the slow AllReduces) and
 * the answer states what it looked at; a bad slow= is a 400. */
static void
test_incidents_host_evidence(void **state)
{
    struct fixture *f = *state;
    post_all(f);
    struct fs_analysis_arg args[] = {{"slow", "3x"}};
    int rc = fs_analysis_incidents(f->an, f->st, args, 1, f->now_us, &f->out);
    if (rc != 200)
        fail_msg("incidents: %d %s", rc, f->out.data);
    struct json_object *o = parse(&f->out);
    assert_string_equal(json_object_get_string(get(o, "data.host_events.kind")), "nccl");
    int n_slow = json_object_get_int(get(o, "data.host_events.slow_events"));
    assert_true(n_slow > 0);
    struct json_object *g = get(o, "data.recurring.0");
    assert_true(is_culprit(get(g, "series.0")));
    int occ = json_object_get_int(get(g, "occurrences"));
    int with = json_object_get_int(get(g, "host_slow.occurrences"));
    int during = json_object_get_int(get(g, "host_slow.events"));
    print_message("%s (%d slow events, %d during the group's occurrences)\n",
                  json_object_get_string(get(g, "text")), n_slow, during);
    /* The AllReduces are posted from the 60th second on: the surges before have none. */
    assert_true(with >= occ - 2 && with <= occ);
    /* Every slow AllReduce but the six random ones falls in a surge. */
    assert_int_equal(during, n_slow - 6);
    assert_non_null(strstr(json_object_get_string(get(g, "text")), "a slow nccl event in"));
    json_object_put(o);

    fs_buf_reset(&f->out);
    struct fs_analysis_arg bad[] = {{"slow", "p100"}};
    assert_int_equal(fs_analysis_incidents(f->an, f->st, bad, 1, f->now_us, &f->out), 400);
    assert_non_null(strstr(f->out.data, "slow: want"));
}

/* A request between two refreshes scans only the samples after the last one and takes the
 * rest from the episode log; it must answer as a scan of the whole range does. */
static void
test_incidents_between_refreshes(void **state)
{
    struct fixture *f = *state;
    char err[128];
    struct fs_host_events_opts ho = {1 << 20, 3600LL * 1000000000LL};
    struct fs_analysis *cold = fs_analysis_new(&ho, err, sizeof err);
    assert_non_null(cold);
    /* The refresh 25 s ago: a surge began 22.7 s ago, after it. */
    int64_t refreshed = f->now_us - 25 * S;
    assert_int_equal(fs_analysis_refresh(f->an, f->st, refreshed), 0);
    struct json_object *o[2];
    for (int k = 0; k < 2; k++) {
        fs_buf_reset(&f->out);
        int rc = fs_analysis_incidents(k ? cold : f->an, f->st, NULL, 0, f->now_us, &f->out);
        if (rc != 200)
            fail_msg("incidents: %d %s", rc, f->out.data);
        o[k] = parse(&f->out);
    }
    double from_hot = json_object_get_double(get(o[0], "data.ring_scanned_from"));
    double from_cold = json_object_get_double(get(o[1], "data.ring_scanned_from"));
    print_message("ring scanned from %.3f s before now (after a refresh), %.3f s (cold)\n",
                  (double)f->now_us / 1e6 - from_hot, (double)f->now_us / 1e6 - from_cold);
    /* The refresh's end less the merge gap (2 s); the cold one read what the ring holds. */
    assert_true(fabs(from_hot - (double)(refreshed - 2 * S) / 1e6) < 1e-3);
    assert_true(from_cold <= (double)(f->t0_us + S) / 1e6);
    struct json_object *g[2];
    for (int k = 0; k < 2; k++) {
        g[k] = get(o[k], "data.recurring.0");
        assert_true(is_culprit(get(g[k], "series.0")));
    }
    assert_int_equal(json_object_get_int(get(g[0], "occurrences")),
                     json_object_get_int(get(g[1], "occurrences")));
    assert_true(fabs(json_object_get_double(get(g[0], "period_s")) -
                     json_object_get_double(get(g[1], "period_s"))) < 0.05);
    assert_true(fabs(json_object_get_double(get(g[0], "next_expected")) -
                     json_object_get_double(get(g[1], "next_expected"))) < 0.5);
    assert_int_equal(json_object_get_int(get(o[0], "data.episodes_total")),
                     json_object_get_int(get(o[1], "data.episodes_total")));
    /* The surge after the refresh is there, seen by the scan of the tail alone. */
    double last = json_object_get_double(get(g[0], "last"));
    print_message("last occurrence %.3f s before now\n", (double)f->now_us / 1e6 - last);
    assert_true(last > (double)refreshed / 1e6);
    json_object_put(o[0]);
    json_object_put(o[1]);
    fs_analysis_free(cold);
}

/* The incident metric lines of the culprit port, for comparing two refreshes. */
static void
culprit_metric_lines(const char *text, char *out, size_t len)
{
    size_t n = 0;
    out[0] = '\0';
    for (const char *l = text; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t ll = e ? (size_t)(e - l) : strlen(l);
        if (!strncmp(l, "fabricscope_incident_", 21) && memmem(l, ll, "Eth1/49", 7) &&
            n + ll + 2 < len) {
            memcpy(out + n, l, ll);
            n += ll;
            out[n++] = '\n';
            out[n] = '\0';
        }
        l = e ? e + 1 : NULL;
    }
}

/* A refresh soon after another scans only the minutes since (the episode log has the
 * rest) and must compute the same incident metrics as a full scan at the same time. */
static void
test_incremental_refresh(void **state)
{
    struct fixture *f = *state;
    char err[128], hot[4096], cold_m[4096];
    struct fs_host_events_opts ho = {1 << 20, 3600LL * 1000000000LL};
    struct fs_analysis *cold = fs_analysis_new(&ho, err, sizeof err);
    assert_non_null(cold);
    int64_t at = f->now_us - 5 * S, from;
    bool full;
    assert_int_equal(fs_analysis_refresh(f->an, f->st, at - 30 * S), 0);
    fs_analysis_last_refresh(f->an, &from, &full);
    assert_true(full);
    assert_int_equal(fs_analysis_refresh(f->an, f->st, at), 0);
    fs_analysis_last_refresh(f->an, &from, &full);
    print_message("incremental refresh scanned from %.1f s before it\n", (double)(at - from) / 1e6);
    assert_false(full);
    assert_int_equal(from, at - 30 * S - 60 * S); /* the previous refresh less a minute */
    assert_int_equal(fs_analysis_refresh(cold, f->st, at), 0);
    fs_analysis_last_refresh(cold, &from, &full);
    assert_true(full);
    fs_buf_reset(&f->out);
    assert_int_equal(fs_analysis_metrics(f->an, &f->out), 0);
    culprit_metric_lines(f->out.data, hot, sizeof hot);
    fs_buf_reset(&f->out);
    assert_int_equal(fs_analysis_metrics(cold, &f->out), 0);
    culprit_metric_lines(f->out.data, cold_m, sizeof cold_m);
    print_message("%s", hot);
    assert_non_null(strstr(hot, "fabricscope_incident_period_seconds{"));
    assert_string_equal(hot, cold_m);
    fs_analysis_free(cold);
}

/* The answer cache: the same request gets the same body (with the first request's "end"
 * and predictions) for 2 s when its range reaches into the last minute, for 30 s when it
 * lies in the past, until a host event arrives or the options change; other arguments
 * have their own answer; an error is never kept. */
static double
answer_num(struct fixture *f, const char *path)
{
    struct json_object *o = parse(&f->out);
    double v = json_object_get_double(get(o, path));
    json_object_put(o);
    return v;
}

#define NEAR(a, b) (fabs((a) - (b)) < 1e-3)

static void
test_answers_cached(void **state)
{
    struct fixture *f = *state;
    int64_t t = f->now_us;
    double ts = (double)t / 1e6;
    /* live: kept 2 s */
    assert_int_equal(fs_analysis_incidents(f->an, f->st, NULL, 0, t, &f->out), 200);
    assert_true(NEAR(answer_num(f, "data.end"), ts));
    assert_int_equal(fs_analysis_incidents(f->an, f->st, NULL, 0, t + S, &f->out), 200);
    assert_true(NEAR(answer_num(f, "data.end"), ts));
    assert_int_equal(fs_analysis_incidents(f->an, f->st, NULL, 0, t + 2 * S, &f->out), 200);
    assert_true(NEAR(answer_num(f, "data.end"), ts + 2));
    /* a host event accepted: computed again */
    assert_int_equal(fs_analysis_set_token(f->an, "s3cret"), 0);
    const char *ev = "{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":0,\"events\":[{"
                     "\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":1}]}";
    assert_int_equal(
        fs_analysis_post_host_events(f->an, "Bearer s3cret", ev, strlen(ev), t, &f->out), 200);
    assert_int_equal(fs_analysis_incidents(f->an, f->st, NULL, 0, t + 3 * S, &f->out), 200);
    assert_true(NEAR(answer_num(f, "data.end"), ts + 3));
    /* new options: computed again */
    struct fs_analysis_opts o;
    fs_analysis_get_opts(f->an, &o);
    fs_analysis_set_opts(f->an, &o);
    assert_int_equal(fs_analysis_incidents(f->an, f->st, NULL, 0, t + 3 * S + S / 2, &f->out), 200);
    assert_true(NEAR(answer_num(f, "data.end"), ts + 3.5));
    /* a range in the past: kept 30 s, byte for byte (its prediction made at the first
       request: after t + 4 s, so before t + 34 s) */
    char start[32], end[32];
    snprintf(start, sizeof start, "%.3f", ts - 540);
    snprintf(end, sizeof end, "%.3f", ts - 120);
    struct fs_analysis_arg past[] = {{"start", start}, {"end", end}};
    assert_int_equal(fs_analysis_incidents(f->an, f->st, past, 2, t + 4 * S, &f->out), 200);
    char *first = strdup(f->out.data);
    double next1 = answer_num(f, "data.recurring.0.next_expected");
    assert_true(next1 > ts + 4 && next1 <= ts + 34);
    assert_int_equal(fs_analysis_incidents(f->an, f->st, past, 2, t + 33 * S, &f->out), 200);
    assert_string_equal(f->out.data, first);
    free(first);
    assert_int_equal(fs_analysis_incidents(f->an, f->st, past, 2, t + 34 * S, &f->out), 200);
    assert_true(answer_num(f, "data.recurring.0.next_expected") > ts + 34);
    /* other arguments: an answer of their own */
    struct fs_analysis_arg lim[] = {{"start", start}, {"end", end}, {"limit", "5"}};
    assert_int_equal(fs_analysis_incidents(f->an, f->st, lim, 3, t + 35 * S, &f->out), 200);
    assert_true(answer_num(f, "data.recurring.0.next_expected") > ts + 35);
    /* an error is never kept */
    struct fs_analysis_arg bad[] = {{"limit", "x"}};
    assert_int_equal(fs_analysis_incidents(f->an, f->st, bad, 1, t + 41 * S, &f->out), 400);
    assert_int_equal(fs_analysis_incidents(f->an, f->st, bad, 1, t + 42 * S, &f->out), 400);
}

static void
test_export_trace(void **state)
{
    struct fixture *f = *state;
    post_all(f);
    char start[32], end[32];
    int64_t s = f->first_surge_us + 5 * 30 * S - 3 * S;
    snprintf(start, sizeof start, "%lld", (long long)(s / S));
    snprintf(end, sizeof end, "%lld", (long long)(s / S + 8));
    struct fs_analysis_arg args[] = {{"start", start}, {"end", end}};
    int rc = fs_analysis_export_trace(f->an, f->st, args, 2, f->now_us, &f->out);
    if (rc != 200)
        fail_msg("export: %d %.300s", rc, f->out.data);
    struct json_object *o = parse(&f->out);
    assert_true(json_object_get_int64(get(o, "otherData.epoch_origin_ns")) == s / S * S * 1000);
    struct json_object *evs = get(o, "traceEvents");
    size_t counters = 0, slices = 0, instants = 0;
    double ecn_in_slow = 0;
    for (size_t i = 0; i < json_object_array_length(evs); i++) {
        struct json_object *e = json_object_array_get_idx(evs, i);
        const char *ph = json_object_get_string(get(e, "ph"));
        if (!strcmp(ph, "C"))
            counters++;
        else if (!strcmp(ph, "X"))
            slices++;
        else if (!strcmp(ph, "i"))
            instants++;
        if (!strcmp(ph, "C") && !strcmp(json_object_get_string(get(e, "name")),
                                        "Eth1/49 tc3 queue_ecn_marked_packets_total/s")) {
            double v = json_object_get_double(get(e, "args.value"));
            if (v > ecn_in_slow)
                ecn_in_slow = v;
        }
    }
    print_message("%zu counter samples, %zu slices, %zu instants; ECN peak %.0f/s\n", counters,
                  slices, instants, ecn_in_slow);
    assert_true(counters > 100);
    assert_true(slices >= 70);
    assert_true(instants >= 2); /* the surge's incident and a retransmit */
    assert_true(ecn_in_slow > 10000);
    json_object_put(o);

    struct fs_analysis_arg sel[] = {
        {"start", start}, {"end", end}, {"match[]", "fabric_queue_depth_bytes{target=\"tor2\"}"}};
    assert_int_equal(fs_analysis_export_trace(f->an, f->st, sel, 3, f->now_us, &f->out), 200);
    assert_null(strstr(f->out.data, "queue_ecn_marked_packets_total/s"));
    assert_non_null(strstr(f->out.data, "queue_depth_bytes"));
    struct fs_analysis_arg badsel[] = {{"match[]", "{"}};
    assert_int_equal(fs_analysis_export_trace(f->an, f->st, badsel, 1, f->now_us, &f->out), 400);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_post_auth_and_validation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_post_per_host_tokens, setup, teardown),
        cmocka_unit_test_setup_teardown(test_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_correlate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_correlate_dump_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_range_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_incidents_and_metrics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_incidents_between_refreshes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_incidents_host_evidence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_incremental_refresh, setup, teardown),
        cmocka_unit_test_setup_teardown(test_export_trace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answers_cached, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
