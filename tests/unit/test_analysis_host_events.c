/* The host-event store: the POST body shape, item-by-item validation with nothing
 * half-stored, placement on the collector's axis, bounds and queries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>

#include "analysis/host_events.h"

#define NOW 1796236354000000000LL
#define SEC 1000000000LL

static struct fs_host_events *
new_store(uint64_t limit, int64_t retention)
{
    char err[128];
    struct fs_host_events_opts o = {limit, retention};
    struct fs_host_events *hs = fs_host_events_new(&o, err, sizeof err);
    assert_non_null(hs);
    return hs;
}

struct collected {
    int n;
    struct fs_host_event ev[8];
    char attr_text[8][128];
};

static int
collect_cb(void *arg, const struct fs_host_event *e)
{
    struct collected *c = arg;
    if (c->n < 8) {
        c->ev[c->n] = *e;
        c->attr_text[c->n][0] = '\0';
        for (uint32_t i = 0; i < e->n_attrs; i++) {
            size_t l = strlen(c->attr_text[c->n]);
            snprintf(c->attr_text[c->n] + l, sizeof c->attr_text[0] - l, "%s=%s%s;",
                     e->attrs[i].key, e->attrs[i].value, e->attrs[i].is_string ? "" : "#");
        }
    }
    c->n++;
    return 0;
}

static int
ingest(struct fs_host_events *hs, const char *body, char *err, size_t errlen)
{
    return fs_host_events_ingest(hs, body, strlen(body), NOW, NULL, err, errlen);
}

static void
test_valid_post_on_collector_axis(void **state)
{
    (void)state;
    struct fs_host_events *hs = new_store(1 << 20, 3600 * SEC);
    char err[256];
    char body[1024];
    /* Host clock 40 ms behind: offset -40e6; events move 40 ms later on our axis. */
    snprintf(body, sizeof body,
             "{\"host_offset_ns\":-40000000,\"host_offset_uncertainty_ns\":120000,\"events\":["
             "{\"host\":\"gpu1\",\"kind\":\"nccl.kernel\",\"name\":\"AllReduce\",\"start\":%lld,"
             "\"end\":%lld,\"attrs\":{\"stream\":7,\"comm\":\"0xab\",\"busy\":true}},"
             "{\"host\":\"gpu1\",\"kind\":\"perf.tcp_retransmit_skb\",\"name\":\"retransmit\","
             "\"start\":%lld}]}",
             (long long)(NOW - 10 * SEC), (long long)(NOW - 9 * SEC), (long long)(NOW - 5 * SEC));
    size_t stored = 0;
    assert_int_equal(fs_host_events_ingest(hs, body, strlen(body), NOW, &stored, err, sizeof err),
                     0);
    assert_int_equal(stored, 2);
    struct collected c = {0};
    fs_host_events_foreach(hs, 0, INT64_MAX, NULL, collect_cb, &c);
    assert_int_equal(c.n, 2);
    assert_string_equal(c.ev[0].host, "gpu1");
    assert_string_equal(c.ev[0].kind, "nccl.kernel");
    assert_true(c.ev[0].start_ns == NOW - 10 * SEC + 40000000);
    assert_true(c.ev[0].end_ns == NOW - 9 * SEC + 40000000);
    assert_true(c.ev[0].host_offset_ns == -40000000);
    assert_true(c.ev[0].host_offset_uncertainty_ns == 120000);
    assert_string_equal(c.attr_text[0], "stream=7#;comm=0xab;busy=true#;");
    assert_true(c.ev[1].end_ns == c.ev[1].start_ns); /* an instant */

    /* Kind prefix and window. */
    c.n = 0;
    fs_host_events_foreach(hs, 0, INT64_MAX, "nccl", collect_cb, &c);
    assert_int_equal(c.n, 1);
    c.n = 0;
    fs_host_events_foreach(hs, 0, INT64_MAX, "ncc", collect_cb, &c);
    assert_int_equal(c.n, 0);
    c.n = 0;
    fs_host_events_foreach(hs, NOW - 6 * SEC, NOW, NULL, collect_cb, &c);
    assert_int_equal(c.n, 1);
    assert_string_equal(c.ev[0].name, "retransmit");

    struct fs_host_events_stats st;
    fs_host_events_stats(hs, &st);
    assert_int_equal(st.events, 2);
    assert_int_equal(st.ingested_total, 2);
    assert_int_equal(st.rejected_total, 0);
    fs_host_events_free(hs);
}

struct bad_case {
    const char *body;
    int status;
    const char *err_part;
};

static void
test_bad_posts_store_nothing(void **state)
{
    (void)state;
    static const struct bad_case cases[] = {
        {"{\"host_offset_ns\":0,", 400, "malformed JSON"},
        {"[1,2]", 400, "not a JSON object"},
        {"{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":0,\"events\":[]} x", 400,
         "after the document"},
        {"{\"host_offset_uncertainty_ns\":0,\"events\":[]}", 400, "host_offset_ns"},
        {"{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":-1,\"events\":[]}", 400,
         "host_offset_uncertainty_ns"},
        {"{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":0,\"events\":[]}", 400,
         "events: 0 items"},
        {"{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":0,\"evnts\":[]}", 400,
         "unknown member \"evnts\""},
        /* Half valid: item 0 is fine, item 1 ends before it starts. */
        {"{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":0,\"events\":["
         "{\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":100},"
         "{\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":100,\"end\":99}]}",
         400, "events[1].end: before start"},
        {"{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":0,\"events\":["
         "{\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":100},"
         "{\"host\":\"h\",\"kind\":\"k\",\"start\":100}]}",
         400, "events[1]: missing name"},
        {"{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":0,\"events\":["
         "{\"host\":\"\",\"kind\":\"k\",\"name\":\"n\",\"start\":100}]}",
         400, "events[0].host"},
        {"{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":0,\"events\":["
         "{\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":\"100\"}]}",
         400, "events[0].start"},
        {"{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":0,\"events\":["
         "{\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":99999999999999999999}]}",
         400, "events[0].start"},
        {"{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":0,\"events\":["
         "{\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":1,\"attrs\":{\"a\":[1]}}]}",
         400, "events[0].attrs.a"},
        {"{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":0,\"events\":["
         "{\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":1,\"colour\":1}]}",
         400, "events[0]: unknown member \"colour\""},
        {"{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":0,\"events\":["
         "{\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":1,\"attrs\":{"
         "\"a\":1,\"b\":1,\"c\":1,\"d\":1,\"e\":1,\"f\":1,\"g\":1,\"h\":1,\"i\":1,\"j\":1,"
         "\"k\":1,\"l\":1,\"m\":1,\"n\":1,\"o\":1,\"p\":1,\"q\":1}}]}",
         400, "more than 16"},
    };
    struct fs_host_events *hs = new_store(1 << 20, 3600 * SEC);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[256] = "";
        int rc = ingest(hs, cases[i].body, err, sizeof err);
        if (rc != cases[i].status || !strstr(err, cases[i].err_part))
            fail_msg("case %zu: status %d, error \"%s\"; wanted %d and \"%s\"", i, rc, err,
                     cases[i].status, cases[i].err_part);
    }
    struct fs_host_events_stats st;
    fs_host_events_stats(hs, &st);
    assert_int_equal(st.events, 0);
    assert_int_equal(st.bytes, 0);
    assert_int_equal(st.rejected_total, sizeof cases / sizeof cases[0]);
    fs_host_events_free(hs);
}

static char *
make_post(size_t n, int64_t start)
{
    size_t cap = 128 + n * 128;
    char *b = malloc(cap);
    size_t l = (size_t)snprintf(b, cap,
                                "{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":0,"
                                "\"events\":[");
    for (size_t i = 0; i < n; i++)
        l += (size_t)snprintf(b + l, cap - l,
                              "%s{\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":%lld}",
                              i ? "," : "", (long long)(start + (int64_t)i));
    snprintf(b + l, cap - l, "]}");
    return b;
}

static void
test_size_limits(void **state)
{
    (void)state;
    struct fs_host_events *hs = new_store(64 << 10, 3600 * SEC);
    char err[256];
    /* Too large a body for the protocol limit. */
    size_t big = FS_HOST_EVENTS_MAX_BODY + 1;
    char *huge = malloc(big);
    memset(huge, ' ', big);
    assert_int_equal(fs_host_events_ingest(hs, huge, big, NOW, NULL, err, sizeof err), 413);
    free(huge);
    /* Larger than the store's whole memory limit. */
    char *p = make_post(2000, NOW);
    assert_int_equal(ingest(hs, p, err, sizeof err), 413);
    assert_non_null(strstr(err, "memory limit"));
    free(p);
    /* Small posts fill the store; the oldest go first, never half a post. */
    for (int i = 0; i < 40; i++) {
        p = make_post(100, NOW - SEC + i * 1000);
        assert_int_equal(ingest(hs, p, err, sizeof err), 0);
        free(p);
    }
    struct fs_host_events_stats st;
    fs_host_events_stats(hs, &st);
    assert_true(st.bytes <= 64 << 10);
    assert_true(st.evicted_memory > 0);
    assert_int_equal(st.evicted_memory % 100, 0);
    assert_int_equal(st.events + st.evicted_memory, 4000);
    fs_host_events_free(hs);
}

static void
test_retention(void **state)
{
    (void)state;
    struct fs_host_events *hs = new_store(1 << 20, 60 * SEC);
    char err[256];
    char *p = make_post(10, NOW - 120 * SEC);
    assert_int_equal(ingest(hs, p, err, sizeof err), 0);
    free(p);
    p = make_post(10, NOW - 10 * SEC);
    assert_int_equal(ingest(hs, p, err, sizeof err), 0);
    free(p);
    /* The old post went at the next ingest. */
    struct fs_host_events_stats st;
    fs_host_events_stats(hs, &st);
    assert_int_equal(st.events, 10);
    assert_int_equal(st.evicted_retention, 10);
    fs_host_events_expire(hs, NOW + 30 * SEC);
    fs_host_events_stats(hs, &st);
    assert_int_equal(st.events, 10);
    fs_host_events_expire(hs, NOW + 120 * SEC);
    fs_host_events_stats(hs, &st);
    assert_int_equal(st.events, 0);
    assert_int_equal(st.posts, 0);
    fs_host_events_free(hs);
}

/* Writers, readers and expiry at once (run under TSan by `make test`): readers never see
 * a half-stored post, the totals add up. */
struct race {
    struct fs_host_events *hs;
    atomic_bool stop;
    atomic_long bad;
};

static void *
writer(void *arg)
{
    struct race *r = arg;
    char err[256];
    for (int i = 0; i < 200; i++) {
        char *p = make_post(50, NOW + i * 1000);
        if (fs_host_events_ingest(r->hs, p, strlen(p), NOW, NULL, err, sizeof err) != 0)
            atomic_fetch_add(&r->bad, 1);
        free(p);
    }
    return NULL;
}

static int
count_cb(void *arg, const struct fs_host_event *e)
{
    size_t *n = arg;
    if (strcmp(e->host, "h") == 0)
        (*n)++;
    return 0;
}

static void *
reader(void *arg)
{
    struct race *r = arg;
    while (!atomic_load(&r->stop)) {
        size_t n = 0;
        fs_host_events_foreach(r->hs, 0, INT64_MAX, "k", count_cb, &n);
        if (n % 50 != 0) /* posts are stored whole */
            atomic_fetch_add(&r->bad, 1);
        fs_host_events_expire(r->hs, NOW);
    }
    return NULL;
}

static void
test_concurrent_ingest_and_queries(void **state)
{
    (void)state;
    struct race r = {.hs = new_store(256 << 10, 3600 * SEC)};
    atomic_init(&r.stop, false);
    atomic_init(&r.bad, 0);
    pthread_t w[2], rd;
    pthread_create(&rd, NULL, reader, &r);
    for (int i = 0; i < 2; i++)
        pthread_create(&w[i], NULL, writer, &r);
    for (int i = 0; i < 2; i++)
        pthread_join(w[i], NULL);
    atomic_store(&r.stop, true);
    pthread_join(rd, NULL);
    assert_int_equal(atomic_load(&r.bad), 0);
    struct fs_host_events_stats st;
    fs_host_events_stats(r.hs, &st);
    assert_int_equal(st.ingested_total, 2 * 200 * 50);
    assert_int_equal(st.events + st.evicted_memory + st.evicted_retention, st.ingested_total);
    assert_true(st.bytes <= 256 << 10);
    fs_host_events_free(r.hs);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_post_on_collector_axis),
        cmocka_unit_test(test_bad_posts_store_nothing),
        cmocka_unit_test(test_size_limits),
        cmocka_unit_test(test_retention),
        cmocka_unit_test(test_concurrent_ingest_and_queries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
