/* The host-event store: the POST body shape, item-by-item validation with nothing
 * half-stored, placement on the collector's axis, bounds and queries. */
#include <inttypes.h>
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

/* A post repeated (an import run twice, even with another measured offset) stores its
 * events once; events dropped from the store may come back; the receipt tells a poster
 * whether its earlier posts are still held. */
static void
test_idempotent_posts(void **state)
{
    (void)state;
    struct fs_host_events *hs = new_store(64 << 10, 3600 * SEC);
    struct fs_host_events_receipt r;
    char err[256];
    char *p = make_post(50, NOW);
    assert_int_equal(fs_host_events_post(hs, p, strlen(p), NOW, &r, err, sizeof err), 0);
    assert_int_equal(r.stored, 50);
    assert_int_equal(r.duplicates, 0);
    assert_int_equal(r.post_id, 1);
    assert_int_equal(r.oldest_post_id, 1);
    assert_int_equal(fs_host_events_post(hs, p, strlen(p), NOW, &r, err, sizeof err), 0);
    assert_int_equal(r.stored, 0);
    assert_int_equal(r.duplicates, 50);
    assert_int_equal(r.post_id, 0);
    free(p);
    /* The same events posted with another offset (host times unchanged): duplicates. A
       post half new, half held, with one event repeated inside it. */
    char body[1024];
    snprintf(body, sizeof body,
             "{\"host_offset_ns\":5000,\"host_offset_uncertainty_ns\":10,\"events\":["
             "{\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":%lld},"
             "{\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":%lld},"
             "{\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":%lld},"
             "{\"host\":\"h\",\"kind\":\"k\",\"name\":\"other\",\"start\":%lld}]}",
             (long long)NOW, (long long)(NOW + 1), (long long)(NOW + 1000),
             (long long)(NOW + 1000));
    assert_int_equal(fs_host_events_post(hs, body, strlen(body), NOW, &r, err, sizeof err), 0);
    assert_int_equal(r.duplicates, 2);
    assert_int_equal(r.stored, 2);
    assert_int_equal(r.post_id, 2);
    assert_int_equal(fs_host_events_post(hs, body, strlen(body), NOW, &r, err, sizeof err), 0);
    assert_int_equal(r.stored, 0);
    assert_int_equal(r.duplicates, 4);
    struct fs_host_events_stats st;
    fs_host_events_stats(hs, &st);
    assert_int_equal(st.events, 52);
    assert_int_equal(st.duplicates_total, 56);
    /* Fill the store past its limit with new events: the first posts are evicted (the
       receipt says so), and their events, once gone, are stored again when reposted. */
    uint64_t last = 0;
    for (int i = 1; i <= 40; i++) {
        char *q = make_post(50, NOW + i * 1000000);
        assert_int_equal(fs_host_events_post(hs, q, strlen(q), NOW, &r, err, sizeof err), 0);
        last = r.post_id;
        free(q);
    }
    assert_true(r.oldest_post_id > 2);
    assert_int_equal(r.last_post_id, last);
    assert_true(r.evicted_memory_total >= 52);
    p = make_post(50, NOW);
    assert_int_equal(fs_host_events_post(hs, p, strlen(p), NOW, &r, err, sizeof err), 0);
    assert_int_equal(r.stored, 50);
    free(p);
    fs_host_events_stats(hs, &st);
    assert_true(st.bytes <= 64 << 10);
    fs_host_events_free(hs);
}

/* Writers, readers and expiry at once (run under TSan by `make test`): readers never see
 * a half-stored post, the totals add up. */
struct race {
    struct fs_host_events *hs;
    atomic_bool stop;
    atomic_long bad;
    atomic_int writers;
};

static void *
writer(void *arg)
{
    struct race *r = arg;
    char err[256];
    int id = atomic_fetch_add(&r->writers, 1); /* distinct events: none is a duplicate */
    for (int i = 0; i < 200; i++) {
        char *p = make_post(50, NOW + i * 1000 + id * 500);
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
    atomic_init(&r.writers, 0);
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

/* The body is parsed in one streaming pass; these pin what that pass could get wrong. */

#define HDR "\"host_offset_ns\":-1000,\"host_offset_uncertainty_ns\":5"
#define EV(start) "{\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":" #start "}"

/* The store of the last ingest_fresh, kept so that what it collected stays valid. */
static struct fs_host_events *fresh_hs;

static int
fresh_done(void **state)
{
    (void)state;
    fs_host_events_free(fresh_hs);
    fresh_hs = NULL;
    return 0;
}

/* Ingests body into a fresh store; returns the status, events collected in c (valid
   until the next call). */
static int
ingest_fresh(const char *body, struct collected *c, char *err, size_t errlen)
{
    fresh_done(NULL);
    struct fs_host_events *hs = fresh_hs = new_store(1 << 20, 3600 * SEC);
    int rc = fs_host_events_ingest(hs, body, strlen(body), NOW, NULL, err, errlen);
    memset(c, 0, sizeof *c);
    fs_host_events_foreach(hs, INT64_MIN, INT64_MAX, NULL, collect_cb, c);
    struct fs_host_events_stats st;
    fs_host_events_stats(hs, &st);
    if (rc != 0 && (st.events != 0 || st.bytes != 0 || c->n != 0))
        fail_msg("refused post stored something: %s", body);
    return rc;
}

static void
expect_refused(const char *body, int status, const char *err_part)
{
    struct collected c;
    char err[256] = "";
    int rc = ingest_fresh(body, &c, err, sizeof err);
    if (rc != status || !strstr(err, err_part))
        fail_msg("status %d, error \"%s\"; wanted %d and \"%s\" for %.200s", rc, err, status,
                 err_part, body);
}

static void
test_members_in_any_order(void **state)
{
    (void)state;
    char err[256];
    struct collected c;
    /* Events before the offset: the offset (+1000 ns to the collector's axis) still
       applies to every event, and to each member order inside an event. */
    const char *body =
        "{\"events\":[{\"start\":5000,\"attrs\":{\"q\":1},\"end\":6000,\"name\":\"n\","
        "\"kind\":\"k\",\"host\":\"h\"}," EV(
            7000) "],"
                  "\"host_offset_uncertainty_ns\":5,\"host_offset_ns\":-1000}";
    assert_int_equal(ingest_fresh(body, &c, err, sizeof err), 0);
    assert_int_equal(c.n, 2);
    assert_true(c.ev[0].start_ns == 6000 && c.ev[0].end_ns == 7000);
    assert_true(c.ev[1].start_ns == 8000 && c.ev[1].end_ns == 8000);
    assert_true(c.ev[0].host_offset_ns == -1000 && c.ev[1].host_offset_uncertainty_ns == 5);
    assert_string_equal(c.ev[0].host, "h");
    assert_string_equal(c.attr_text[0], "q=1#;");
    assert_string_equal(c.attr_text[1], "");
    /* The root's members are checked before the items, wherever they are. */
    expect_refused("{\"events\":[{\"start\":0}],\"host_offset_ns\":1.5,"
                   "\"host_offset_uncertainty_ns\":0}",
                   400, "host_offset_ns: missing or not an integer");
    expect_refused("{\"events\":[{\"start\":0}]," HDR ",\"colour\":1}", 400,
                   "body: unknown member \"colour\"");
    /* A syntax error anywhere wins over an item error before it. */
    expect_refused("{" HDR ",\"events\":[{\"start\":0}]]}", 400, "malformed JSON");
    /* Empty events array, wherever it is. */
    expect_refused("{\"events\":[]," HDR "}", 400, "events: 0 items (1..");
    /* Items after a bad one are still counted: too many is 413 even then. */
    size_t n = FS_HOST_EVENTS_MAX_PER_POST + 1;
    char *big = malloc(128 + n * 3);
    assert_non_null(big);
    size_t l = (size_t)sprintf(big, "{" HDR ",\"events\":[");
    for (size_t i = 0; i < n; i++) {
        memcpy(big + l, i ? ",{}" : "{}", i ? 3 : 2);
        l += i ? 3 : 2;
    }
    strcpy(big + l, "]}");
    expect_refused(big, 413, "events: 200001 items");
    free(big);
}

static void
test_repeated_members(void **state)
{
    (void)state;
    char err[256];
    struct collected c;
    /* A repeated member takes its last value (and keeps its first place). */
    assert_int_equal(ingest_fresh("{" HDR ",\"events\":[{\"host\":5,\"kind\":\"k\",\"name\":\"n\","
                                  "\"start\":9,\"host\":\"a\",\"start\":10}]}",
                                  &c, err, sizeof err),
                     0);
    assert_string_equal(c.ev[0].host, "a");
    assert_true(c.ev[0].start_ns == 1010);
    expect_refused("{" HDR ",\"events\":[{\"host\":\"a\",\"kind\":\"k\",\"name\":\"n\","
                   "\"start\":10,\"host\":\"\"}]}",
                   400, "events[0].host: not a string");
    /* Errors in member order: host's place is first, though its bad value came last. */
    expect_refused("{" HDR ",\"events\":[{\"host\":\"a\",\"colour\":1,\"host\":7}]}", 400,
                   "events[0].host: not a string");
    expect_refused("{" HDR ",\"events\":[{\"start\":\"x\",\"host\":5}]}", 400,
                   "events[0].start: not a positive integer");
    expect_refused("{" HDR ",\"events\":[{\"colour\":1,\"host\":5}]}", 400,
                   "events[0]: unknown member \"colour\"");
    /* The last events array is the one stored; the earlier (bad) one is forgotten. */
    assert_int_equal(ingest_fresh("{" HDR ",\"events\":[{}],\"events\":[" EV(1) "," EV(2) "]}", &c,
                                  err, sizeof err),
                     0);
    assert_int_equal(c.n, 2);
    expect_refused("{" HDR ",\"events\":[" EV(1) "],\"events\":7}", 400,
                   "events: missing or not an array");
    /* Attrs: 17 members of which one repeats are 16; the repeat keeps its first place. */
    assert_int_equal(
        ingest_fresh(
            "{" HDR ",\"events\":[{\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":1,"
            "\"attrs\":{\"a\":1,\"b\":1,\"c\":1,\"d\":1,\"e\":1,\"f\":1,\"g\":1,\"h\":1,"
            "\"i\":1,\"j\":1,\"k\":1,\"l\":1,\"m\":1,\"n\":1,\"o\":1,\"a\":\"x\",\"p\":2}}]}",
            &c, err, sizeof err),
        0);
    assert_int_equal(c.ev[0].n_attrs, 16);
    assert_string_equal(c.ev[0].attrs[0].key, "a");
    assert_string_equal(c.ev[0].attrs[15].key, "p");
    assert_true(strncmp(c.attr_text[0], "a=x;b=1#;", 9) == 0);
    /* A repeated attrs replaces the first. */
    assert_int_equal(
        ingest_fresh("{" HDR ",\"events\":[{\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\","
                     "\"start\":1,\"attrs\":{\"a\":1},\"attrs\":{\"b\":2}}," EV(2) "]}",
                     &c, err, sizeof err),
        0);
    assert_string_equal(c.attr_text[0], "b=2#;");
    assert_int_equal(c.ev[1].n_attrs, 0);
}

static void
test_integers_where_required(void **state)
{
    (void)state;
    char err[256];
    struct collected c;
    /* Out of range (past int64, or past the year-2096 bound) and non-integers. */
    static const char *const bad_start[] = {"99999999999999999999",
                                            "-99999999999999999999",
                                            "9223372036854775807",
                                            "4000000000000000000",
                                            "1.0",
                                            "1e9",
                                            "-5",
                                            "0",
                                            "\"7\"",
                                            "true",
                                            "null",
                                            "[1]",
                                            "{\"a\":1}"};
    for (size_t i = 0; i < sizeof bad_start / sizeof bad_start[0]; i++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{" HDR ",\"events\":[" EV(1) ",{\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\","
                                               "\"start\":%s}]}",
                 bad_start[i]);
        expect_refused(body, 400, "events[1].start: not a positive integer (ns since epoch)");
        snprintf(body, sizeof body,
                 "{" HDR ",\"events\":[{\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":1,"
                 "\"end\":%s}]}",
                 bad_start[i]);
        expect_refused(body, 400, "events[0].end: not a positive integer (ns since epoch)");
    }
    expect_refused("{\"host_offset_ns\":99999999999999999999,\"host_offset_uncertainty_ns\":0,"
                   "\"events\":[" EV(1) "]}",
                   400, "host_offset_ns: missing or not an integer within");
    expect_refused("{\"host_offset_ns\":100000000000000000,\"host_offset_uncertainty_ns\":0,"
                   "\"events\":[" EV(1) "]}",
                   400, "host_offset_ns: missing or not an integer within");
    expect_refused(
        "{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":1e3,\"events\":[" EV(1) "]}", 400,
        "host_offset_uncertainty_ns: missing or not an integer >= 0");
    /* The largest start allowed, and the offset bound just inside. */
    assert_int_equal(
        ingest_fresh("{\"host_offset_ns\":-99999999999999999,"
                     "\"host_offset_uncertainty_ns\":0,\"events\":[" EV(3999999999999999999) "]}",
                     &c, err, sizeof err),
        0);
    assert_true(c.ev[0].start_ns == 3999999999999999999LL + 99999999999999999LL);
    /* Attr numbers are kept as their JSON text, integer or not; -0 is written 0. */
    assert_int_equal(
        ingest_fresh(
            "{" HDR ",\"events\":[{\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":1,"
            "\"attrs\":{\"d\":1.50,\"e\":1e5,\"z\":-0,\"i\":-42,\"big\":123456789012345678901,"
            "\"f\":false}}]}",
            &c, err, sizeof err),
        0);
    assert_string_equal(c.attr_text[0],
                        "d=1.50#;e=1e5#;z=0#;i=-42#;big=123456789012345678901#;f=false#;");
}

static void
test_attrs_flat_and_bounded(void **state)
{
    (void)state;
#define ATTRS(a)                                                                                   \
    "{" HDR ",\"events\":[{\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":1,\"attrs\":" a  \
    "}]}"
    expect_refused(ATTRS("{\"ok\":1,\"a\":{\"b\":1}}"), 400,
                   "events[0].attrs.a: not a string, number or boolean");
    expect_refused(ATTRS("{\"a\":[]}"), 400, "events[0].attrs.a: not a string, number or boolean");
    expect_refused(ATTRS("{\"a\":null}"), 400,
                   "events[0].attrs.a: not a string, number or boolean");
    expect_refused(ATTRS("[1]"), 400, "events[0].attrs: not an object");
    expect_refused(ATTRS("{\"\":1}"), 400, "events[0].attrs: a key is not 1..64 bytes");
    expect_refused(ATTRS("{\"k\":\"a\\u0000b\"}"), 400, "events[0].attrs.k: value longer than");
    /* Member order: a bad key before a bad value is the one reported. */
    expect_refused(ATTRS("{\"x\":{},\"" /* 65 bytes */
                         "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk\":1}"),
                   400, "events[0].attrs.x: not a string");
    expect_refused(ATTRS("{\"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk\":1,"
                         "\"x\":{}}"),
                   400, "events[0].attrs: a key is not 1..64 bytes");
    char body[2048];
    char val[300];
    memset(val, 'v', 257);
    val[257] = '\0';
    snprintf(body, sizeof body, ATTRS("{\"k\":\"%s\"}"), val);
    expect_refused(body, 400, "events[0].attrs.k: value longer than 256 bytes");
    val[256] = '\0';
    struct collected c;
    char err[256];
    snprintf(body, sizeof body, ATTRS("{\"k\":\"%s\"}"), val);
    assert_int_equal(ingest_fresh(body, &c, err, sizeof err), 0);
#undef ATTRS
    /* Strings: escapes decoded, \u0000 refused, invalid UTF-8 and raw control characters
       are malformed JSON. */
    assert_int_equal(ingest_fresh("{" HDR
                                  ",\"events\":[{\"host\":\"h\\u00e9\\\"\\n\",\"kind\":\"k\","
                                  "\"name\":\"n\",\"start\":1}]}",
                                  &c, err, sizeof err),
                     0);
    assert_string_equal(c.ev[0].host, "h\xc3\xa9\"\n");
    expect_refused("{" HDR ",\"events\":[{\"host\":\"a\\u0000\",\"kind\":\"k\",\"name\":\"n\","
                   "\"start\":1}]}",
                   400, "events[0].host: not a string of 1..256 bytes");
    expect_refused("{" HDR
                   ",\"events\":[{\"host\":\"\xff\",\"kind\":\"k\",\"name\":\"n\",\"start\":1}]}",
                   400, "malformed JSON");
    expect_refused("{" HDR
                   ",\"events\":[{\"host\":\"a\tb\",\"kind\":\"k\",\"name\":\"n\",\"start\":1}]}",
                   400, "malformed JSON");
}

static void
test_deeply_nested_garbage(void **state)
{
    (void)state;
    /* Too deep for the old parser's 32 levels is still refused, not recursed into. */
    size_t depth = 100000;
    char *b = malloc(2 * depth + 256);
    assert_non_null(b);
    size_t l = (size_t)sprintf(
        b,
        "{" HDR
        ",\"events\":[{\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":1,\"attrs\":{\"a\":");
    for (size_t i = 0; i < depth; i++)
        b[l++] = '[';
    for (size_t i = 0; i < depth; i++)
        b[l++] = ']';
    strcpy(b + l, "}}]}");
    expect_refused(b, 400, "malformed JSON: nesting too deep");
    /* Unclosed, at the root. */
    memset(b, '[', depth);
    b[depth] = '\0';
    expect_refused(b, 400, "malformed JSON");
    memset(b, '{', 1);
    expect_refused(b, 400, "malformed JSON");
    free(b);
    /* 27 arrays in an attr (31 levels in all) are a value error, not a depth error. */
    char body[512];
    l = (size_t)sprintf(
        body,
        "{" HDR
        ",\"events\":[{\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":1,\"attrs\":{\"a\":");
    for (int i = 0; i < 27; i++)
        body[l++] = '[';
    for (int i = 0; i < 27; i++)
        body[l++] = ']';
    strcpy(body + l, "}}]}");
    expect_refused(body, 400, "events[0].attrs.a: not a string, number or boolean");
}

static void
test_truncated_and_trailing(void **state)
{
    (void)state;
    const char *whole = "{\"events\":[{\"host\":\"h\",\"kind\":\"k\",\"name\":\"n\",\"start\":12,"
                        "\"end\":13,\"attrs\":{\"a\":1.5,\"b\":\"x\",\"c\":true}}," EV(
                            99) "],"
                                "\"host_offset_ns\":-10,\"host_offset_uncertainty_ns\":10}";
    size_t len = strlen(whole);
    struct fs_host_events *hs = new_store(1 << 20, 3600 * SEC);
    char err[256];
    /* Every proper prefix is malformed and stores nothing. */
    for (size_t cut = 0; cut < len; cut++) {
        err[0] = '\0';
        int rc = fs_host_events_ingest(hs, whole, cut, NOW, NULL, err, sizeof err);
        if (rc != 400 || strncmp(err, "malformed JSON", 14) != 0)
            fail_msg("prefix of %zu bytes: %d \"%s\"", cut, rc, err);
    }
    struct fs_host_events_stats st;
    fs_host_events_stats(hs, &st);
    assert_int_equal(st.events, 0);
    assert_int_equal(st.rejected_total, len);
    size_t stored = 0;
    assert_int_equal(fs_host_events_ingest(hs, whole, len, NOW, &stored, err, sizeof err), 0);
    assert_int_equal(stored, 2);
    fs_host_events_free(hs);
    /* After the root: whitespace only; an unfinished token there counts too. */
    static const char *const tails[] = {" x", " \"", "\"", " {", "0", " null", "\f", "\x00"};
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        char body[512];
        size_t bl = (size_t)snprintf(body, sizeof body, "%s%s", whole, tails[i]);
        if (tails[i][0] == '\0')
            bl++; /* a NUL byte after the document */
        hs = new_store(1 << 20, 3600 * SEC);
        int rc = fs_host_events_ingest(hs, body, bl, NOW, NULL, err, sizeof err);
        if (rc != 400 || !strstr(err, "malformed JSON: data after the document"))
            fail_msg("tail %zu: %d \"%s\"", i, rc, err);
        fs_host_events_free(hs);
    }
    struct collected c;
    char body[512];
    snprintf(body, sizeof body, "%s \r\n\t", whole);
    assert_int_equal(ingest_fresh(body, &c, err, sizeof err), 0);
    assert_int_equal(c.n, 2);
}

static void
test_repeated_strings_shared(void **state)
{
    (void)state;
    struct fs_host_events *hs = new_store(1 << 20, 3600 * SEC);
    char err[256];
    assert_int_equal(ingest(hs,
                            "{" HDR ",\"events\":[" EV(1) "," EV(
                                2) ","
                                   "{\"host\":\"h2\",\"kind\":\"k\",\"name\":\"n\",\"start\":3}]}",
                            err, sizeof err),
                     0);
    struct collected c = {0};
    fs_host_events_foreach(hs, INT64_MIN, INT64_MAX, NULL, collect_cb, &c);
    assert_int_equal(c.n, 3);
    /* One copy of a string repeated from the previous event. */
    assert_ptr_equal(c.ev[0].host, c.ev[1].host);
    assert_ptr_equal(c.ev[1].kind, c.ev[2].kind);
    assert_ptr_not_equal(c.ev[1].host, c.ev[2].host);
    assert_string_equal(c.ev[2].host, "h2");
    fs_host_events_free(hs);
}

/* A post of n events of one host, at start.. (host-clock ns). */
static char *
host_post(const char *host, size_t n, int64_t start)
{
    size_t cap = 128 + n * 160;
    char *b = malloc(cap);
    size_t l = (size_t)snprintf(b, cap,
                                "{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":0,"
                                "\"events\":[");
    for (size_t i = 0; i < n; i++)
        l += (size_t)snprintf(b + l, cap - l,
                              "%s{\"host\":\"%s\",\"kind\":\"k\",\"name\":\"n\",\"start\":%lld}",
                              i ? "," : "", host, (long long)(start + (int64_t)i));
    snprintf(b + l, cap - l, "]}");
    return b;
}

struct poster_seen {
    char names[8][72];
    uint64_t bytes[8], events[8], evicted[8];
    int n;
};

static void
poster_cb(void *arg, const char *name, uint64_t bytes, uint64_t events, uint64_t evicted)
{
    struct poster_seen *p = arg;
    if (p->n < 8) {
        snprintf(p->names[p->n], sizeof p->names[p->n], "%s", name);
        p->bytes[p->n] = bytes;
        p->events[p->n] = events;
        p->evicted[p->n++] = evicted;
    }
}

static int
first_poster_cb(void *arg, const struct fs_host_event *e)
{
    snprintf(arg, 72, "%s", e->poster);
    return 1;
}

/* Per-host tokens: a token posts only for its hosts (a post naming another is refused
 * whole, 403), its events stay within its quota (its own oldest go, never another
 * poster's, though those are older), and each event keeps its poster's name. */
static void
test_posters_hosts_and_quota(void **state)
{
    (void)state;
    struct fs_host_events *hs = new_store(4 << 20, 3600 * SEC);
    struct fs_host_events_receipt r;
    char err[256];
    /* The shared token's events first: the oldest in the store. */
    char *p = host_post("gpu-r13-01", 100, NOW);
    assert_int_equal(fs_host_events_post(hs, p, strlen(p), NOW, &r, err, sizeof err), 0);
    free(p);
    struct fs_host_events_poster rack12 = {"rack12", "gpu-r12-*", 64 << 10};
    /* Another rack's host, even among its own: refused whole, naming the item. */
    p = host_post("gpu-r12-04", 3, NOW + 1000);
    char *q = strstr(p, "]}");
    char body[4096];
    snprintf(body, sizeof body,
             "%.*s,{\"host\":\"gpu-r13-01\",\"kind\":\"k\",\"name\":\"n\","
             "\"start\":%lld}]}",
             (int)(q - p), p, (long long)NOW);
    assert_int_equal(
        fs_host_events_post_as(hs, &rack12, body, strlen(body), NOW, &r, err, sizeof err), 403);
    print_message("%s\n", err);
    assert_non_null(strstr(err, "events[3].host"));
    assert_non_null(strstr(err, "rack12"));
    const char *nbr = "{\"neighbors\":{\"host\":\"gpu-r13-02\",\"interval_s\":30,\"list\":[]}}";
    assert_int_equal(
        fs_host_events_post_as(hs, &rack12, nbr, strlen(nbr), NOW, &r, err, sizeof err), 403);
    assert_non_null(strstr(err, "neighbors.host"));
    struct fs_host_events_stats st;
    fs_host_events_stats(hs, &st);
    assert_int_equal(st.events, 100);
    /* Its own hosts, past its quota many times over: only its own oldest posts go. */
    for (int i = 0; i < 40; i++) {
        free(p);
        p = host_post("gpu-r12-04", 50, NOW + 1000000 + i * 1000);
        assert_int_equal(
            fs_host_events_post_as(hs, &rack12, p, strlen(p), NOW, &r, err, sizeof err), 0);
        assert_int_equal(r.stored, 50);
    }
    free(p);
    fs_host_events_stats(hs, &st);
    struct poster_seen ps = {0};
    fs_host_events_foreach_poster(hs, poster_cb, &ps);
    assert_int_equal(ps.n, 2);
    assert_string_equal(ps.names[0], "");
    assert_string_equal(ps.names[1], "rack12");
    print_message("shared: %" PRIu64 " events; rack12: %" PRIu64 " events in %" PRIu64
                  " bytes (quota 65536), %" PRIu64 " evicted for its quota\n",
                  ps.events[0], ps.events[1], ps.bytes[1], ps.evicted[1]);
    assert_int_equal(ps.events[0], 100); /* the older shared events all stay */
    assert_true(ps.bytes[1] <= 64 << 10);
    assert_true(ps.evicted[1] > 0);
    assert_int_equal(ps.events[1] + ps.evicted[1], 2000);
    assert_int_equal(st.evicted_quota, ps.evicted[1]);
    assert_int_equal(st.evicted_memory, 0);
    /* Each event says who posted it. */
    char who[72] = "?";
    fs_host_events_foreach(hs, NOW + 1000000 + 39 * 1000, INT64_MAX, NULL, first_poster_cb, who);
    assert_string_equal(who, "rack12");
    fs_host_events_foreach(hs, NOW, NOW, NULL, first_poster_cb, who);
    assert_string_equal(who, "");
    /* A post larger than its quota: 413, naming the token. */
    p = host_post("gpu-r12-04", 2000, NOW);
    assert_int_equal(fs_host_events_post_as(hs, &rack12, p, strlen(p), NOW, &r, err, sizeof err),
                     413);
    assert_non_null(strstr(err, "quota"));
    free(p);
    fs_host_events_free(hs);
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
        cmocka_unit_test(test_idempotent_posts),
        cmocka_unit_test_teardown(test_members_in_any_order, fresh_done),
        cmocka_unit_test_teardown(test_repeated_members, fresh_done),
        cmocka_unit_test_teardown(test_integers_where_required, fresh_done),
        cmocka_unit_test_teardown(test_attrs_flat_and_bounded, fresh_done),
        cmocka_unit_test_teardown(test_deeply_nested_garbage, fresh_done),
        cmocka_unit_test_teardown(test_truncated_and_trailing, fresh_done),
        cmocka_unit_test(test_repeated_strings_shared),
        cmocka_unit_test(test_posters_hosts_and_quota),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
