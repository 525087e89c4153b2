/*
 * Ring time-series: exactness (counters to 2^64-1, gauges bit for bit), gaps, ranges,
 * truncation, eviction by memory and by retention, delete and id reuse, refusals.
 * Every check compares with a plain model: the (ts, value) pairs that were appended.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "store/ring.h"

#define T0 1700000000000000LL

struct model {
    int64_t *ts;
    uint64_t *v;
    size_t n, cap;
};

static void
model_add(struct model *m, int64_t ts, uint64_t v)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 256;
        m->ts = realloc(m->ts, m->cap * sizeof(*m->ts));
        m->v = realloc(m->v, m->cap * sizeof(*m->v));
        assert_non_null(m->ts);
        assert_non_null(m->v);
    }
    m->ts[m->n] = ts;
    m->v[m->n] = v;
    m->n++;
}

static void
model_free(struct model *m)
{
    free(m->ts);
    free(m->v);
    memset(m, 0, sizeof(*m));
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t
rnd(void)
{
    /* splitmix64: seeded, reproducible */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static struct fs_ring *
new_ring(uint64_t limit, int64_t retention)
{
    char err[128];
    struct fs_ring_opts o = {.memory_limit = limit, .retention_us = retention};
    struct fs_ring *r = fs_ring_new(&o, err, sizeof(err));
    assert_non_null(r);
    return r;
}

/* Reads [start, end] of a series and checks it equals the model's samples in range,
 * bit for bit. skip_prefix allows the model's oldest samples to be gone (eviction). */
static size_t
check_range(struct fs_ring *r, uint32_t id, const struct model *m, int64_t start, int64_t end,
            bool allow_evicted)
{
    size_t want = 0, first = SIZE_MAX;
    for (size_t i = 0; i < m->n; i++) {
        if (m->ts[i] >= start && m->ts[i] <= end) {
            if (first == SIZE_MAX)
                first = i;
            want++;
        }
    }
    struct fs_ring_sample *out = calloc(want + 1, sizeof(*out));
    assert_non_null(out);
    bool trunc = true;
    long got = fs_ring_read(r, id, start, end, out, want + 1, &trunc);
    assert_true(got >= 0);
    assert_false(trunc);
    if (allow_evicted) {
        /* what is left is a suffix of the model (oldest go first) */
        assert_true((size_t)got <= want);
        first += want - (size_t)got;
    } else {
        assert_int_equal(got, want);
    }
    for (long i = 0; i < got; i++) {
        assert_int_equal(out[i].ts_us, m->ts[first + (size_t)i]);
        assert_true(out[i].v.u == m->v[first + (size_t)i]);
    }
    free(out);
    return (size_t)got;
}

static void
test_counter_exact(void **state)
{
    (void)state;
    struct fs_ring *r = new_ring(1ULL << 30, INT64_MAX / 2);
    int32_t g = fs_ring_group_new(r);
    int32_t id = fs_ring_series_new(r, g, FS_RING_COUNTER);
    assert_true(g >= 0 && id >= 0);
    struct model m = {0};
    static const uint64_t special[] = {0,
                                       1,
                                       0,
                                       0xffffffffULL,
                                       0x100000000ULL,
                                       0x100000001ULL,
                                       0xfffffffeULL,
                                       (1ULL << 63) - 1,
                                       1ULL << 63,
                                       (1ULL << 63) + 1,
                                       UINT64_MAX,
                                       0,
                                       UINT64_MAX,
                                       UINT64_MAX - 1,
                                       UINT64_MAX,
                                       1,
                                       UINT64_MAX,
                                       1ULL << 53,
                                       (1ULL << 53) + 1,
                                       12345};
    int64_t ts = T0;
    uint64_t v = 0;
    for (size_t i = 0; i < 6000; i++) {
        if (i < sizeof(special) / sizeof(special[0])) {
            v = special[i];
        } else {
            switch ((i / 500) % 6) {
            case 0:
                v += rnd() % 3;
                break; /* slow random walk */
            case 1:
                v += 50000000000ULL + rnd() % 1000000000;
                break; /* busy */
            case 2:
                v = rnd();
                break; /* big jumps */
            case 3:
                v -= rnd() % 1000;
                break; /* decreasing */
            case 4:
                v += 0x7fffffffffffffffULL + (rnd() & 1);
                break; /* wraps */
            default:
                break; /* flat */
            }
        }
        struct fs_ring_point p = {.series = (uint32_t)id, .v.u = v};
        assert_int_equal(fs_ring_append(r, g, ts, &p, 1), 0);
        model_add(&m, ts, v);
        ts += 1000000 + (int64_t)(rnd() % 5000) - 2500;
    }
    check_range(r, (uint32_t)id, &m, INT64_MIN, INT64_MAX, false);
    struct fs_ring_stats st;
    fs_ring_stats(r, &st);
    assert_int_equal(st.samples, 6000);
    assert_int_equal(st.series, 1);
    assert_int_equal(st.newest_ts_us, m.ts[m.n - 1]);
    assert_true(st.oldest_ts_us == m.ts[0]);
    model_free(&m);
    fs_ring_free(r);
}

static uint64_t
dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    return u;
}

static void
test_gauge_exact(void **state)
{
    (void)state;
    struct fs_ring *r = new_ring(1ULL << 30, INT64_MAX / 2);
    int32_t g = fs_ring_group_new(r);
    int32_t id = fs_ring_series_new(r, g, FS_RING_GAUGE);
    struct model m = {0};
    const uint64_t special[] = {dbits(0.0),
                                dbits(-0.0),
                                dbits(NAN),
                                dbits(-NAN),
                                0x7ff0000000000001ULL, /* signalling NaN payload */
                                0x7ff8dead0000beefULL, /* quiet NaN payload */
                                dbits(INFINITY),
                                dbits(-INFINITY),
                                dbits(DBL_TRUE_MIN),
                                dbits(-DBL_TRUE_MIN),
                                dbits(DBL_MIN / 3),
                                dbits(DBL_MAX),
                                dbits(-DBL_MAX),
                                dbits(1.0),
                                dbits(1.0),
                                dbits(0.1),
                                dbits(0.0),
                                dbits(-0.0),
                                dbits(-0.0),
                                0xffffffffffffffffULL};
    int64_t ts = T0;
    double d = 0;
    for (size_t i = 0; i < 5000; i++) {
        uint64_t u;
        if (i < sizeof(special) / sizeof(special[0])) {
            u = special[i];
        } else {
            switch ((i / 400) % 5) {
            case 0:
                d = (rnd() % 10 == 0) ? (double)(rnd() % 100000) * 96.0 : 0.0;
                break;
            case 1:
                d += ((double)(rnd() % 1000) - 500.0) / 7.0;
                break;
            case 2:
                u = rnd();
                memcpy(&d, &u, sizeof(d));
                break; /* any bit pattern */
            case 3:
                d = (double)(rnd() % 4);
                break;
            default:
                break;
            }
            u = dbits(d);
        }
        struct fs_ring_point p = {.series = (uint32_t)id, .v.u = u};
        assert_int_equal(fs_ring_append(r, g, ts, &p, 1), 0);
        model_add(&m, ts, u);
        ts += 100000 + (int64_t)(rnd() % 300);
    }
    check_range(r, (uint32_t)id, &m, INT64_MIN, INT64_MAX, false);
    /* the read through the double member is the same bits */
    struct fs_ring_sample out[3];
    assert_int_equal(fs_ring_read(r, (uint32_t)id, m.ts[1], m.ts[3], out, 3, NULL), 3);
    assert_true(signbit(out[0].v.d) && out[0].v.d == 0.0);
    assert_true(isnan(out[1].v.d));
    model_free(&m);
    fs_ring_free(r);
}

/* Several series in two groups, each missing from random batches; whole-history and
 * random range reads must match the model exactly, with gaps left as gaps. */
static void
test_gaps_and_ranges(void **state)
{
    (void)state;
    enum { NS = 24, NB = 3000 };
    struct fs_ring *r = new_ring(1ULL << 30, INT64_MAX / 2);
    int32_t g[2] = {fs_ring_group_new(r), fs_ring_group_new(r)};
    int32_t id[NS];
    struct model m[NS];
    memset(m, 0, sizeof(m));
    for (int i = 0; i < NS; i++)
        id[i] = fs_ring_series_new(r, g[i % 2], i % 3 == 2 ? FS_RING_GAUGE : FS_RING_COUNTER);
    uint64_t val[NS] = {0};
    int64_t ts[2] = {T0, T0 + 333};
    for (int b = 0; b < NB; b++) {
        for (int gi = 0; gi < 2; gi++) {
            struct fs_ring_point pts[NS];
            size_t n = 0;
            for (int i = gi; i < NS; i += 2) {
                /* series i is present with probability depending on i; some have long
                 * holes (seq deltas of every code length) */
                unsigned miss = (unsigned)(rnd() % 100);
                if ((i % 4 == 1 && miss < 30) || (i % 8 == 4 && (b / 100) % 3 == 1) ||
                    (i == 7 && b > 100 && b < 1000))
                    continue;
                val[i] += (i % 5 == 0) ? 0 : rnd() % 1000;
                uint64_t v = val[i];
                if (i % 3 == 2) {
                    double d = (double)(val[i] % 97) / 4.0;
                    memcpy(&v, &d, sizeof(v));
                }
                pts[n].series = (uint32_t)id[i];
                pts[n].v.u = v;
                n++;
                model_add(&m[i], ts[gi], v);
            }
            assert_int_equal(fs_ring_append(r, g[gi], ts[gi], pts, n), 0);
            ts[gi] += 1000000 + (int64_t)(rnd() % 7000);
        }
    }
    uint64_t total = 0;
    for (int i = 0; i < NS; i++)
        total += check_range(r, (uint32_t)id[i], &m[i], INT64_MIN, INT64_MAX, false);
    struct fs_ring_stats st;
    fs_ring_stats(r, &st);
    assert_int_equal(st.samples, total);
    /* oldest: exact, and it moves when the series holding it goes */
    for (int round = 0; round < 3; round++) {
        int64_t oldest = INT64_MAX;
        int who = -1;
        for (int i = 0; i < NS; i++)
            if (m[i].n > 0 && m[i].ts[0] < oldest && id[i] >= 0)
                oldest = m[i].ts[0], who = i;
        fs_ring_stats(r, &st);
        assert_int_equal(st.oldest_ts_us, oldest);
        if (round < 2) {
            fs_ring_series_delete(r, (uint32_t)id[who]);
            id[who] = -1;
        }
    }
    for (int k = 0; k < 400; k++) {
        int i = (int)(rnd() % NS);
        if (id[i] < 0)
            continue;
        int64_t a = T0 + (int64_t)(rnd() % ((uint64_t)NB * 1000000ULL));
        int64_t b = a + (int64_t)(rnd() % 200000000ULL);
        if (k % 10 == 0 && m[i].n > 0) /* exact sample boundaries */
            a = m[i].ts[rnd() % m[i].n], b = a;
        check_range(r, (uint32_t)id[i], &m[i], a, b, false);
    }
    /* empty and inverted ranges */
    struct fs_ring_sample out[4];
    int live = 0;
    while (id[live] < 0)
        live++;
    assert_int_equal(fs_ring_read(r, (uint32_t)id[live], T0 - 10, T0 - 1, out, 4, NULL), 0);
    assert_int_equal(fs_ring_read(r, (uint32_t)id[live], T0 + 10, T0, out, 4, NULL), 0);
    assert_int_equal(fs_ring_read(r, 9999, 0, INT64_MAX, out, 4, NULL), -1);
    for (int i = 0; i < NS; i++)
        model_free(&m[i]);
    fs_ring_free(r);
}

static void
test_truncation(void **state)
{
    (void)state;
    struct fs_ring *r = new_ring(1ULL << 30, INT64_MAX / 2);
    int32_t g = fs_ring_group_new(r);
    int32_t id = fs_ring_series_new(r, g, FS_RING_COUNTER);
    for (int i = 0; i < 3000; i++) {
        struct fs_ring_point p = {.series = (uint32_t)id, .v.u = (uint64_t)i * 7};
        assert_int_equal(fs_ring_append(r, g, T0 + i * 1000000LL, &p, 1), 0);
    }
    struct fs_ring_sample out[100];
    bool trunc = false;
    assert_int_equal(fs_ring_read(r, (uint32_t)id, INT64_MIN, INT64_MAX, out, 100, &trunc), 100);
    assert_true(trunc);
    for (int i = 0; i < 100; i++) { /* oldest first */
        assert_int_equal(out[i].ts_us, T0 + i * 1000000LL);
        assert_int_equal(out[i].v.u, (uint64_t)i * 7);
    }
    trunc = true;
    assert_int_equal(
        fs_ring_read(r, (uint32_t)id, T0 + 2900 * 1000000LL, INT64_MAX, out, 100, &trunc), 100);
    assert_false(trunc);
    assert_int_equal(
        fs_ring_read(r, (uint32_t)id, T0 + 2899 * 1000000LL, INT64_MAX, out, 100, &trunc), 100);
    assert_true(trunc);
    assert_int_equal(fs_ring_read(r, (uint32_t)id, T0, INT64_MAX, out, 0, &trunc), 0);
    assert_true(trunc);
    fs_ring_free(r);
}

/* Fills rings with busy counters; returns the models. */
static void
fill_busy(struct fs_ring *r, int32_t g, const int32_t *id, struct model *m, int ns, int nb,
          int64_t step)
{
    uint64_t *v = calloc((size_t)ns, sizeof(*v));
    struct fs_ring_point *pts = calloc((size_t)ns, sizeof(*pts));
    for (int b = 0; b < nb; b++) {
        int64_t ts = T0 + b * step;
        for (int i = 0; i < ns; i++) {
            v[i] += 1000000 + rnd() % 100000000;
            pts[i].series = (uint32_t)id[i];
            pts[i].v.u = v[i];
            model_add(&m[i], ts, v[i]);
        }
        assert_int_equal(fs_ring_append(r, g, ts, pts, (size_t)ns), 0);
    }
    free(v);
    free(pts);
}

static void
test_evict_memory(void **state)
{
    (void)state;
    enum { NS = 50, NB = 4000 };
    const uint64_t limit = 256 * 1024;
    struct fs_ring *r = new_ring(limit, INT64_MAX / 2);
    int32_t g = fs_ring_group_new(r);
    int32_t id[NS];
    struct model m[NS];
    memset(m, 0, sizeof(m));
    for (int i = 0; i < NS; i++)
        id[i] = fs_ring_series_new(r, g, FS_RING_COUNTER);
    fill_busy(r, g, id, m, NS, NB, 1000000);
    struct fs_ring_stats st;
    fs_ring_stats(r, &st);
    assert_true(st.bytes <= limit);
    assert_true(st.evicted_memory > 0);
    assert_int_equal(st.evicted_retention, 0);
    assert_int_equal(st.samples + st.evicted_memory, (uint64_t)NS * NB);
    uint64_t total = 0;
    int64_t oldest = INT64_MAX;
    for (int i = 0; i < NS; i++) {
        size_t got = check_range(r, (uint32_t)id[i], &m[i], INT64_MIN, INT64_MAX, true);
        assert_true(got > 0); /* the head is never evicted: newest samples are there */
        total += got;
        /* recent ranges (read walking back from the newest closed chunk), down to the
           oldest sample left, after evictions unlinked the oldest chunks */
        static const size_t back[] = {0, 1, 2, 100, 300, 1000, 5000};
        for (size_t k = 0; k < sizeof back / sizeof *back; k++)
            if (back[k] < got)
                check_range(r, (uint32_t)id[i], &m[i], m[i].ts[m[i].n - 1 - back[k]], INT64_MAX,
                            false);
        check_range(r, (uint32_t)id[i], &m[i], m[i].ts[m[i].n - got], INT64_MAX, false);
        int64_t first = m[i].ts[m[i].n - got];
        if (first < oldest)
            oldest = first;
        /* oldest first: everything evicted is older than what is left of any series */
    }
    assert_int_equal(total, st.samples);
    assert_int_equal(st.oldest_ts_us, oldest);
    assert_int_equal(st.newest_ts_us, T0 + (NB - 1) * 1000000LL);
    /* a tiny limit: every closed chunk goes, the live heads alone pass the limit, so
     * batches and new series are refused and counted; what is held still reads */
    struct fs_ring_opts o = {.memory_limit = 1, .retention_us = INT64_MAX / 2};
    fs_ring_set_opts(r, &o);
    struct fs_ring_point p = {.series = (uint32_t)id[0], .v.u = m[0].v[m[0].n - 1] + 1};
    assert_int_equal(fs_ring_append(r, g, T0 + NB * 1000000LL, &p, 1), -1);
    assert_int_equal(fs_ring_series_new(r, g, FS_RING_GAUGE), -1);
    fs_ring_stats(r, &st);
    assert_true(st.bytes > 1);
    assert_int_equal(st.refused_memory, 2);
    for (int i = 0; i < NS; i++)
        assert_true(check_range(r, (uint32_t)id[i], &m[i], INT64_MIN, INT64_MAX, true) > 0);
    /* room again: appends go in */
    o.memory_limit = limit;
    fs_ring_set_opts(r, &o);
    assert_int_equal(fs_ring_append(r, g, T0 + NB * 1000000LL, &p, 1), 0);
    model_add(&m[0], T0 + NB * 1000000LL, p.v.u);
    assert_true(check_range(r, (uint32_t)id[0], &m[0], INT64_MIN, INT64_MAX, true) > 0);
    for (int i = 0; i < NS; i++)
        model_free(&m[i]);
    fs_ring_free(r);
}

static void
test_evict_retention(void **state)
{
    (void)state;
    enum { NS = 10, NB = 5000 };
    const int64_t ret = 600 * 1000000LL;
    struct fs_ring *r = new_ring(1ULL << 30, ret);
    int32_t g = fs_ring_group_new(r);
    int32_t id[NS];
    struct model m[NS];
    memset(m, 0, sizeof(m));
    for (int i = 0; i < NS; i++)
        id[i] = fs_ring_series_new(r, g, FS_RING_COUNTER);
    fill_busy(r, g, id, m, NS, NB, 1000000);
    struct fs_ring_stats st;
    fs_ring_stats(r, &st);
    int64_t newest = T0 + (NB - 1) * 1000000LL;
    assert_int_equal(st.newest_ts_us, newest);
    assert_true(st.evicted_retention > 0);
    assert_int_equal(st.evicted_memory, 0);
    assert_int_equal(st.samples + st.evicted_retention, (uint64_t)NS * NB);
    /* whole chunks go once their newest sample is older than the retention: what is
     * left covers at least the retention and at most one chunk more */
    assert_true(st.oldest_ts_us <= newest - ret);
    int64_t oldest = INT64_MAX;
    for (int i = 0; i < NS; i++) {
        size_t got = check_range(r, (uint32_t)id[i], &m[i], INT64_MIN, INT64_MAX, true);
        int64_t first = m[i].ts[m[i].n - got];
        assert_true(first <= newest - ret);
        assert_true(first > newest - ret - 1100 * 1000000LL);
        if (first < oldest)
            oldest = first;
    }
    assert_int_equal(st.oldest_ts_us, oldest);
    for (int i = 0; i < NS; i++)
        model_free(&m[i]);
    fs_ring_free(r);
}

static void
test_delete_reuse(void **state)
{
    (void)state;
    struct fs_ring *r = new_ring(1ULL << 30, INT64_MAX / 2);
    struct fs_ring_stats st0, st;
    int32_t g = fs_ring_group_new(r);
    int32_t a = fs_ring_series_new(r, g, FS_RING_COUNTER);
    int32_t b = fs_ring_series_new(r, g, FS_RING_GAUGE);
    fs_ring_stats(r, &st0);
    for (int i = 0; i < 5000; i++) {
        struct fs_ring_point p[2] = {{.series = (uint32_t)a, .v.u = rnd()},
                                     {.series = (uint32_t)b, .v.u = rnd()}};
        assert_int_equal(fs_ring_append(r, g, T0 + i * 1000LL, p, 2), 0);
    }
    fs_ring_stats(r, &st);
    assert_int_equal(st.samples, 10000);
    assert_int_equal(st.series, 2);
    fs_ring_group_delete(r, g); /* refused: series remain */
    fs_ring_series_delete(r, (uint32_t)a);
    fs_ring_stats(r, &st);
    assert_int_equal(st.samples, 5000);
    assert_int_equal(st.series, 1);
    struct fs_ring_sample out[4];
    assert_int_equal(fs_ring_read(r, (uint32_t)a, INT64_MIN, INT64_MAX, out, 4, NULL), -1);
    int32_t c = fs_ring_series_new(r, g, FS_RING_COUNTER);
    assert_int_equal(c, a); /* id reused, history empty */
    assert_int_equal(fs_ring_read(r, (uint32_t)c, INT64_MIN, INT64_MAX, out, 4, NULL), 0);
    struct fs_ring_point p = {.series = (uint32_t)c, .v.u = 42};
    assert_int_equal(fs_ring_append(r, g, T0 + 5000 * 1000LL, &p, 1), 0);
    assert_int_equal(fs_ring_read(r, (uint32_t)c, INT64_MIN, INT64_MAX, out, 4, NULL), 1);
    assert_int_equal(out[0].v.u, 42);
    assert_int_equal(out[0].ts_us, T0 + 5000 * 1000LL);
    fs_ring_series_delete(r, (uint32_t)b);
    fs_ring_series_delete(r, (uint32_t)c);
    fs_ring_series_delete(r, (uint32_t)c); /* twice: no-op */
    fs_ring_group_delete(r, g);
    fs_ring_stats(r, &st);
    assert_int_equal(st.samples, 0);
    assert_int_equal(st.series, 0);
    assert_int_equal(st.oldest_ts_us, 0);
    /* all timeline and chunk memory is back: only the (grown) tables remain */
    assert_true(st.bytes <= st0.bytes + 4096);
    assert_int_equal(fs_ring_group_new(r), g);
    fs_ring_free(r);
}

static void
test_refusals(void **state)
{
    (void)state;
    struct fs_ring *r = new_ring(1ULL << 30, INT64_MAX / 2);
    char err[64];
    struct fs_ring_opts bad = {.memory_limit = 0, .retention_us = 1};
    assert_null(fs_ring_new(&bad, err, sizeof(err)));
    assert_true(strlen(err) > 0);
    int32_t g = fs_ring_group_new(r), g2 = fs_ring_group_new(r);
    int32_t a = fs_ring_series_new(r, g, FS_RING_COUNTER);
    int32_t other = fs_ring_series_new(r, g2, FS_RING_COUNTER);
    assert_int_equal(fs_ring_series_new(r, 77, FS_RING_COUNTER), -1);
    struct fs_ring_point p = {.series = (uint32_t)a, .v.u = 1};
    assert_int_equal(fs_ring_append(r, g, T0, &p, 1), 0);
    p.v.u = 2;
    assert_int_equal(fs_ring_append(r, g, T0 - 1, &p, 1), -1); /* out of order */
    assert_int_equal(fs_ring_append(r, g, T0, &p, 1), 0);      /* same time is fine */
    assert_int_equal(fs_ring_append(r, 99, T0 + 1, &p, 1), -1);
    /* another group's series and a duplicate are refused; the valid point goes in */
    struct fs_ring_point pp[3] = {{.series = (uint32_t)other, .v.u = 5},
                                  {.series = (uint32_t)a, .v.u = 3},
                                  {.series = (uint32_t)a, .v.u = 4}};
    assert_int_equal(fs_ring_append(r, g, T0 + 10, pp, 3), -1);
    struct fs_ring_sample out[8];
    assert_int_equal(fs_ring_read(r, (uint32_t)a, INT64_MIN, INT64_MAX, out, 8, NULL), 3);
    assert_int_equal(out[0].v.u, 1);
    assert_int_equal(out[1].v.u, 2);
    assert_int_equal(out[1].ts_us, T0);
    assert_int_equal(out[2].v.u, 3);
    assert_int_equal(out[2].ts_us, T0 + 10);
    assert_int_equal(fs_ring_read(r, (uint32_t)other, INT64_MIN, INT64_MAX, out, 8, NULL), 0);
    fs_ring_free(r);
    fs_ring_free(NULL);
}

/* a series absent for more than 65,601 batches uses the 32-bit seq code */
static void
test_long_gap(void **state)
{
    (void)state;
    struct fs_ring *r = new_ring(1ULL << 30, INT64_MAX / 2);
    int32_t g = fs_ring_group_new(r);
    int32_t a = fs_ring_series_new(r, g, FS_RING_COUNTER);
    int32_t b = fs_ring_series_new(r, g, FS_RING_GAUGE);
    struct model ma = {0}, mb = {0};
    for (int i = 0; i < 140000; i++) {
        struct fs_ring_point p[2];
        size_t n = 0;
        int64_t ts = T0 + i * 100000LL;
        if (i < 3 || i == 70000 || i > 139990) {
            p[n++] = (struct fs_ring_point){.series = (uint32_t)a, .v.u = (uint64_t)i * 1000};
            model_add(&ma, ts, (uint64_t)i * 1000);
            p[n++] = (struct fs_ring_point){.series = (uint32_t)b, .v.u = dbits(i * 0.5)};
            model_add(&mb, ts, dbits(i * 0.5));
        }
        assert_int_equal(fs_ring_append(r, g, ts, p, n), 0);
    }
    check_range(r, (uint32_t)a, &ma, INT64_MIN, INT64_MAX, false);
    check_range(r, (uint32_t)b, &mb, INT64_MIN, INT64_MAX, false);
    check_range(r, (uint32_t)a, &ma, T0 + 69999 * 100000LL, T0 + 70001 * 100000LL, false);
    model_free(&ma);
    model_free(&mb);
    fs_ring_free(r);
}

/* Many groups read in random order: the reader's cache of decoded timeline chunks
 * (keyed by chunk, direct-mapped) sees collisions, hits and a growing head chunk. */
static void
test_many_timelines(void **state)
{
    (void)state;
    enum { NG = 24, NB = 2000 };
    struct fs_ring *r = new_ring(1ULL << 30, INT64_MAX / 2);
    int32_t g[NG], id[NG];
    struct model m[NG];
    memset(m, 0, sizeof(m));
    for (int i = 0; i < NG; i++) {
        g[i] = fs_ring_group_new(r);
        id[i] = fs_ring_series_new(r, g[i], FS_RING_COUNTER);
    }
    for (int b = 0; b < NB; b++) {
        for (int i = 0; i < NG; i++) {
            int64_t ts = T0 + b * 1000000LL + i * 1000 + (int64_t)(rnd() % 900);
            struct fs_ring_point p = {.series = (uint32_t)id[i], .v.u = (uint64_t)ts * 3};
            assert_int_equal(fs_ring_append(r, g[i], ts, &p, 1), 0);
            model_add(&m[i], ts, p.v.u);
        }
        if (b % 97 == 0 || b == NB - 1)
            for (int k = 0; k < 8; k++) {
                int i = (int)(rnd() % NG);
                check_range(r, (uint32_t)id[i], &m[i], INT64_MIN, INT64_MAX, false);
            }
    }
    for (int k = 0; k < 200; k++) {
        int i = (int)(rnd() % NG);
        int64_t a = T0 + (int64_t)(rnd() % ((uint64_t)NB * 1000000ULL));
        check_range(r, (uint32_t)id[i], &m[i], a, a + (int64_t)(rnd() % 900000000ULL), false);
    }
    for (int i = 0; i < NG; i++)
        model_free(&m[i]);
    fs_ring_free(r);
}

/* timestamps across the whole int64 range (jumps that overflow a signed delta) */
static void
test_extreme_timestamps(void **state)
{
    (void)state;
    struct fs_ring *r = new_ring(1ULL << 30, 1000);
    int32_t g = fs_ring_group_new(r);
    int32_t a = fs_ring_series_new(r, g, FS_RING_COUNTER);
    struct model m = {0};
    const int64_t ts[] = {INT64_MIN,     INT64_MIN + 1, -1,        0,        1,
                          INT64_MAX / 2, INT64_MAX - 5, INT64_MAX, INT64_MAX};
    for (size_t i = 0; i < sizeof(ts) / sizeof(ts[0]); i++) {
        struct fs_ring_point p = {.series = (uint32_t)a, .v.u = i};
        assert_int_equal(fs_ring_append(r, g, ts[i], &p, 1), 0);
        model_add(&m, ts[i], i);
    }
    check_range(r, (uint32_t)a, &m, INT64_MIN, INT64_MAX, false);
    check_range(r, (uint32_t)a, &m, -1, 1, false);
    struct fs_ring_stats st;
    fs_ring_stats(r, &st);
    assert_int_equal(st.oldest_ts_us, INT64_MIN);
    assert_int_equal(st.newest_ts_us, INT64_MAX);
    model_free(&m);
    fs_ring_free(r);
}

/* Out of memory in the middle of a sample (the allocation that grows a head fails after
 * some of the sample's bits were put): the sample is refused whole and the chunk holds
 * no half-written bits, so every sample before and after it decodes exactly. */
static void
test_oom_mid_sample(void **state)
{
    (void)state;
    struct fs_ring *r = new_ring(1ULL << 30, INT64_MAX / 2);
    int32_t gc = fs_ring_group_new(r), gg = fs_ring_group_new(r);
    int32_t c = fs_ring_series_new(r, gc, FS_RING_COUNTER);
    int32_t g = fs_ring_series_new(r, gg, FS_RING_GAUGE);
    struct model mc = {0}, mg = {0};
    uint64_t v = 0;
    int failed = 0;
    for (int i = 0; i < 3000; i++) {
        int64_t ts = T0 + i * 1000000LL;
        /* wild deltas: long codes that straddle words and need the head to grow */
        v += rnd() >> (rnd() % 64);
        uint64_t gv = rnd();
        if (i % 3 == 2)
            fs_ring_test_fail_allocs(r, (long)(rnd() % 2));
        struct fs_ring_point pc = {.series = (uint32_t)c, .v.u = v};
        struct fs_ring_point pg = {.series = (uint32_t)g, .v.u = gv};
        if (fs_ring_append(r, gc, ts, &pc, 1) == 0)
            model_add(&mc, ts, v);
        else
            failed++;
        if (fs_ring_append(r, gg, ts, &pg, 1) == 0)
            model_add(&mg, ts, gv);
        else
            failed++;
        fs_ring_test_fail_allocs(r, -1);
    }
    assert_true(failed > 100); /* the failure path was taken, often */
    assert_true(mc.n > 1000 && mg.n > 1000);
    check_range(r, (uint32_t)c, &mc, INT64_MIN, INT64_MAX, false);
    check_range(r, (uint32_t)g, &mg, INT64_MIN, INT64_MAX, false);
    struct fs_ring_stats st;
    fs_ring_stats(r, &st);
    assert_int_equal(st.samples, mc.n + mg.n);
    model_free(&mc);
    model_free(&mg);
    fs_ring_free(r);
}

/* Every use of an id has its own generation: a reader holding an old pair is refused. */
static void
test_generation(void **state)
{
    (void)state;
    struct fs_ring *r = new_ring(1ULL << 30, INT64_MAX / 2);
    int32_t g = fs_ring_group_new(r);
    int32_t a = fs_ring_series_new(r, g, FS_RING_COUNTER);
    uint32_t ga = fs_ring_series_gen(r, (uint32_t)a);
    assert_true(ga > 0);
    struct fs_ring_point p = {.series = (uint32_t)a, .v.u = 7};
    assert_int_equal(fs_ring_append(r, g, T0, &p, 1), 0);
    struct fs_ring_sample out[4];
    assert_int_equal(fs_ring_read_gen(r, (uint32_t)a, ga, INT64_MIN, INT64_MAX, out, 4, NULL), 1);
    fs_ring_series_delete(r, (uint32_t)a);
    assert_int_equal(fs_ring_series_gen(r, (uint32_t)a), 0);
    int32_t b = fs_ring_series_new(r, g, FS_RING_COUNTER);
    assert_int_equal(b, a);
    uint32_t gb = fs_ring_series_gen(r, (uint32_t)b);
    assert_int_not_equal(gb, ga);
    p.v.u = 9;
    assert_int_equal(fs_ring_append(r, g, T0 + 1, &p, 1), 0);
    assert_int_equal(fs_ring_read_gen(r, (uint32_t)a, ga, INT64_MIN, INT64_MAX, out, 4, NULL), -1);
    assert_int_equal(fs_ring_read_gen(r, (uint32_t)b, gb, INT64_MIN, INT64_MAX, out, 4, NULL), 1);
    assert_int_equal(out[0].v.u, 9);
    fs_ring_free(r);
}

/* A sealed group (its producer removed) takes nothing more, reads as before, and its
 * chunks are evicted like any other under memory pressure. */
static void
test_seal(void **state)
{
    (void)state;
    struct fs_ring *r = new_ring(1ULL << 30, INT64_MAX / 2);
    int32_t g = fs_ring_group_new(r), live = fs_ring_group_new(r);
    int32_t a = fs_ring_series_new(r, g, FS_RING_COUNTER);
    int32_t l = fs_ring_series_new(r, live, FS_RING_COUNTER);
    struct model m = {0};
    for (int i = 0; i < 100; i++) {
        struct fs_ring_point p = {.series = (uint32_t)a, .v.u = (uint64_t)i * 10};
        assert_int_equal(fs_ring_append(r, g, T0 + i, &p, 1), 0);
        model_add(&m, T0 + i, p.v.u);
    }
    uint32_t ids[2] = {(uint32_t)l, (uint32_t)a}; /* l is another group's: ignored */
    fs_ring_group_seal(r, g, ids, 2);
    struct fs_ring_point p = {.series = (uint32_t)a, .v.u = 5000};
    assert_int_equal(fs_ring_append(r, g, T0 + 100, &p, 1), -1);
    assert_int_equal(fs_ring_series_new(r, g, FS_RING_COUNTER), -1);
    check_range(r, (uint32_t)a, &m, INT64_MIN, INT64_MAX, false);
    assert_int_equal(fs_ring_series_samples(r, (uint32_t)a), 100);
    /* memory pressure from the live group evicts the sealed history (it is closed) */
    struct fs_ring_stats st;
    fs_ring_stats(r, &st);
    struct fs_ring_opts o = {.memory_limit = st.bytes, .retention_us = INT64_MAX / 2};
    fs_ring_set_opts(r, &o);
    for (int i = 0; i < 5000 && fs_ring_series_samples(r, (uint32_t)a) > 0; i++) {
        struct fs_ring_point q = {.series = (uint32_t)l, .v.u = rnd()};
        fs_ring_append(r, live, T0 + 200 + i, &q, 1);
    }
    assert_int_equal(fs_ring_series_samples(r, (uint32_t)a), 0);
    fs_ring_series_delete(r, (uint32_t)a);
    fs_ring_group_delete(r, g);
    model_free(&m);
    fs_ring_free(r);
}

/* Issue 34: the series slots cost what the series in use need, not up to twice that (a
 * doubling array held 8,192 slots, 136 bytes a series, for 4,097 series). */
static void
test_series_slots_fit(void **state)
{
    (void)state;
    struct fs_ring *r = new_ring(1ULL << 30, INT64_MAX / 2);
    struct fs_ring_stats st;
    fs_ring_stats(r, &st);
    uint64_t empty = st.bytes;
    int32_t g = fs_ring_group_new(r);
    for (int i = 0; i < 4097; i++)
        assert_true(fs_ring_series_new(r, g, FS_RING_COUNTER) >= 0);
    fs_ring_stats(r, &st);
    /* a 64-byte slot and its 4-byte generation, plus a page's slack and the group */
    assert_true(st.bytes - empty <= 4097 * 80ULL);
    fs_ring_free(r);
}

/* Issue 34: a live head holds only what it needs while it grows (a 48-byte block, not a
 * closed chunk's 96), and closing it into a chunk of the exact size keeps every sample. */
static void
test_head_small_and_closed_exact(void **state)
{
    (void)state;
    enum { N = 1000, SAMPLES = 3000 };
    struct fs_ring *r = new_ring(1ULL << 30, INT64_MAX / 2);
    int32_t g = fs_ring_group_new(r);
    uint32_t ids[N];
    for (int i = 0; i < N; i++) {
        int32_t id = fs_ring_series_new(r, g, i % 2 ? FS_RING_GAUGE : FS_RING_COUNTER);
        assert_true(id >= 0);
        ids[i] = (uint32_t)id;
    }
    struct fs_ring_stats st;
    fs_ring_stats(r, &st);
    uint64_t slots = st.bytes;
    static struct fs_ring_point pts[N];
    for (int t = 0; t < 2; t++) {
        for (int i = 0; i < N; i++)
            pts[i] = (struct fs_ring_point){.series = ids[i], .v.u = (uint64_t)t * 1000};
        assert_int_equal(fs_ring_append(r, g, 1000000 + t * 1000000LL, pts, N), 0);
    }
    fs_ring_stats(r, &st);
    /* one 48-byte head a series, plus the timeline's share (was 96 and more) */
    assert_true(st.bytes - slots <= N * 56ULL);
    fs_ring_free(r);

    /* One busy counter past several chunk closes (by words and by samples), read back. */
    r = new_ring(1ULL << 30, INT64_MAX / 2);
    g = fs_ring_group_new(r);
    int32_t c = fs_ring_series_new(r, g, FS_RING_COUNTER);
    int32_t q = fs_ring_series_new(r, g, FS_RING_GAUGE);
    assert_true(c >= 0 && q >= 0);
    static uint64_t want_c[SAMPLES], want_q[SAMPLES];
    uint64_t v = 0, x = 88172645463325252ULL;
    for (int t = 0; t < SAMPLES; t++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        v += x % 1000003;
        want_c[t] = v;
        want_q[t] = t % 7 ? want_q[t ? t - 1 : 0] : x; /* mostly unchanged: many samples a chunk */
        struct fs_ring_point p2[2] = {{.series = (uint32_t)c, .v.u = want_c[t]},
                                      {.series = (uint32_t)q, .v.u = want_q[t]}};
        assert_int_equal(fs_ring_append(r, g, 1000000 + t * 1000000LL, p2, 2), 0);
    }
    static struct fs_ring_sample out[SAMPLES + 1];
    bool trunc = false;
    assert_int_equal(fs_ring_read(r, (uint32_t)c, 0, INT64_MAX, out, SAMPLES + 1, &trunc), SAMPLES);
    for (int t = 0; t < SAMPLES; t++) {
        assert_int_equal(out[t].ts_us, 1000000 + t * 1000000LL);
        assert_true(out[t].v.u == want_c[t]);
    }
    assert_int_equal(fs_ring_read(r, (uint32_t)q, 0, INT64_MAX, out, SAMPLES + 1, &trunc), SAMPLES);
    for (int t = 0; t < SAMPLES; t++)
        assert_true(out[t].v.u == want_q[t]);
    fs_ring_free(r);
}

/* memory_limit binds on everything, live heads included: a flood of new series is
 * refused (and counted) once the heads alone fill the limit. */
static void
test_memory_limit_binds_heads(void **state)
{
    (void)state;
    const uint64_t limit = 256 * 1024;
    struct fs_ring *r = new_ring(limit, INT64_MAX / 2);
    int32_t g = fs_ring_group_new(r);
    enum { MAXS = 20000 };
    int32_t *id = calloc(MAXS, sizeof(*id));
    struct fs_ring_point *pts = calloc(MAXS, sizeof(*pts));
    int ns = 0;
    struct fs_ring_stats st;
    for (int b = 0; b < 200; b++) {
        /* 100 new series a batch (ports renamed), and every one sampled */
        for (int k = 0; k < 100 && ns < MAXS; k++) {
            int32_t x = fs_ring_series_new(r, g, FS_RING_COUNTER);
            if (x >= 0)
                id[ns++] = x;
        }
        for (int i = 0; i < ns; i++)
            pts[i] = (struct fs_ring_point){.series = (uint32_t)id[i], .v.u = rnd()};
        fs_ring_append(r, g, T0 + b * 1000000LL, pts, (size_t)ns);
        fs_ring_stats(r, &st);
        /* over by at most what one batch of the heads can add */
        assert_true(st.bytes <= limit + (uint64_t)ns * 32 + 4096);
    }
    assert_true(st.refused_memory > 0);
    assert_true(ns < MAXS);
    free(id);
    free(pts);
    fs_ring_free(r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_exact),
        cmocka_unit_test(test_series_slots_fit),
        cmocka_unit_test(test_gauge_exact),
        cmocka_unit_test(test_gaps_and_ranges),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_evict_memory),
        cmocka_unit_test(test_evict_retention),
        cmocka_unit_test(test_delete_reuse),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_long_gap),
        cmocka_unit_test(test_many_timelines),
        cmocka_unit_test(test_extreme_timestamps),
        cmocka_unit_test(test_oom_mid_sample),
        cmocka_unit_test(test_generation),
        cmocka_unit_test(test_seal),
        cmocka_unit_test(test_memory_limit_binds_heads),
        cmocka_unit_test(test_head_small_and_closed_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
