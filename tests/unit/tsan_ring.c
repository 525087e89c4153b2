/*
 * Ring concurrency: one writer appends batches (with eviction running: a small memory
 * limit) while two readers read random series and ranges continuously. Every value is a
 * function of (series, batch timestamp), so a reader can check that each sample it sees
 * is one the writer wrote: no torn, invented or misplaced sample. Run under TSan too.
 * A second test deletes and recreates series (their ids are reused at once) while
 * readers read by (id, generation): a reader never gets another generation's samples.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "store/ring.h"

#define NS 200
#define NB 3000
#define T0 1700000000000000LL

static uint64_t
mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* batch b's timestamp: 1 s cadence with up to 4 ms of jitter */
static int64_t
ts_of(int b)
{
    return T0 + b * 1000000LL + (int64_t)(mix((uint64_t)b) % 4000);
}

/* counters: increasing, busy or flat depending on the series; gauges: from the bits */
static uint64_t
value_of(uint32_t s, int64_t ts)
{
    uint64_t k = (uint64_t)(ts - T0);
    if (s % 2 == 0)
        return (s % 4 == 0) ? k * (s + 1) + (mix(k ^ s) & 0xffff) : s;
    double d = (mix(k + s) % 8 == 0) ? (double)(mix(k) % 100000) : 0.0;
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    return u;
}

struct shared {
    struct fs_ring *r;
    atomic_int done;
    atomic_ullong checked;
    atomic_ullong reads;
    atomic_int errors;
};

static void *
reader(void *arg)
{
    struct shared *sh = arg;
    struct fs_ring_sample *out = malloc(NB * sizeof(*out));
    uint64_t seed = (uint64_t)(uintptr_t)&out;
    while (!atomic_load(&sh->done)) {
        seed = mix(seed + 1);
        uint32_t s = (uint32_t)(seed % NS);
        int64_t a = T0 + (int64_t)(mix(seed) % (NB * 1000000ULL));
        int64_t b = (seed & 1) ? INT64_MAX : a + (int64_t)(mix(seed + 7) % 600000000ULL);
        if (seed % 5 == 0)
            a = INT64_MIN;
        bool trunc;
        long n = fs_ring_read(sh->r, s, a, b, out, NB, &trunc);
        if (n < 0) {
            atomic_fetch_add(&sh->errors, 1);
            continue;
        }
        int64_t prev = INT64_MIN;
        for (long i = 0; i < n; i++) {
            if (out[i].ts_us < a || out[i].ts_us > b || out[i].ts_us <= prev ||
                out[i].v.u != value_of(s, out[i].ts_us))
                atomic_fetch_add(&sh->errors, 1);
            prev = out[i].ts_us;
        }
        atomic_fetch_add(&sh->checked, (unsigned long long)n);
        atomic_fetch_add(&sh->reads, 1);
        struct fs_ring_stats st;
        fs_ring_stats(sh->r, &st);
        if (st.samples > 0 && st.oldest_ts_us > st.newest_ts_us)
            atomic_fetch_add(&sh->errors, 1);
    }
    free(out);
    return NULL;
}

static void
test_concurrent_readers(void **state)
{
    (void)state;
    char err[128];
    /* room for every live head (200 x at most ~1.1 KiB, whatever the allocator rounds
     * to), but not for the history: closed chunks are evicted as the readers read */
    struct fs_ring_opts o = {.memory_limit = 448 * 1024, .retention_us = 1800 * 1000000LL};
    struct shared sh = {.r = fs_ring_new(&o, err, sizeof(err))};
    assert_non_null(sh.r);
    int32_t g = fs_ring_group_new(sh.r);
    for (uint32_t s = 0; s < NS; s++)
        assert_int_equal(fs_ring_series_new(sh.r, g, s % 2 ? FS_RING_GAUGE : FS_RING_COUNTER),
                         (int32_t)s);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, reader, &sh), 0);
    struct fs_ring_point *pts = malloc(NS * sizeof(*pts));
    for (int b = 0; b < NB; b++) {
        int64_t ts = ts_of(b);
        size_t n = 0;
        for (uint32_t s = 0; s < NS; s++) {
            if (s % 7 == 3 && mix((uint64_t)b * NS + s) % 3 == 0)
                continue; /* gaps */
            pts[n].series = s;
            pts[n].v.u = value_of(s, ts);
            n++;
        }
        assert_int_equal(fs_ring_append(sh.r, g, ts, pts, n), 0);
        /* pace the writer so that reads really overlap the appends, however fast
         * either side runs: at least one read per 4 batches, on average */
        for (int spin = 0; atomic_load(&sh.reads) < (unsigned long long)b / 4 && spin < 100000;
             spin++)
            sched_yield();
    }
    atomic_store(&sh.done, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    free(pts);
    struct fs_ring_stats st;
    fs_ring_stats(sh.r, &st);
    assert_true(st.evicted_memory > 0); /* eviction ran concurrently with the readers */
    assert_int_equal(atomic_load(&sh.errors), 0);
    print_message("readers: %llu reads, %llu samples checked; evicted %llu\n",
                  (unsigned long long)atomic_load(&sh.reads),
                  (unsigned long long)atomic_load(&sh.checked),
                  (unsigned long long)st.evicted_memory);
    assert_true(atomic_load(&sh.checked) > 0);
    fs_ring_free(sh.r);
}

#define NR 16    /* series slots churned */
#define NRB 4000 /* batches */

/* a value that names the generation: reading another use of the id shows */
static uint64_t
value_gen(uint32_t id, uint32_t gen, int64_t ts)
{
    return mix(((uint64_t)id << 32) | gen) + (uint64_t)(ts - T0);
}

struct churn {
    struct fs_ring *r;
    _Atomic uint32_t gen[NR];
    atomic_int done;
    atomic_ullong reads, stale, checked;
    atomic_ullong data_reads; /* reads that returned samples: what the writer waits on */
    atomic_int errors;
};

static void *
churn_reader(void *arg)
{
    struct churn *c = arg;
    struct fs_ring_sample *out = malloc(NRB * sizeof(*out));
    uint64_t seed = (uint64_t)(uintptr_t)&out;
    while (!atomic_load(&c->done)) {
        seed = mix(seed + 1);
        uint32_t id = (uint32_t)(seed % NR);
        uint32_t gen = atomic_load(&c->gen[id]); /* may be stale by the read */
        long n = fs_ring_read_gen(c->r, id, gen, INT64_MIN, INT64_MAX, out, NRB, NULL);
        if (n < 0) {
            atomic_fetch_add(&c->stale, 1);
            continue;
        }
        for (long i = 0; i < n; i++)
            if (out[i].v.u != value_gen(id, gen, out[i].ts_us))
                atomic_fetch_add(&c->errors, 1);
        atomic_fetch_add(&c->checked, (unsigned long long)n);
        atomic_fetch_add(&c->reads, 1);
        if (n > 0)
            atomic_fetch_add(&c->data_reads, 1);
    }
    free(out);
    return NULL;
}

static void
test_id_reuse_under_readers(void **state)
{
    (void)state;
    char err[128];
    struct fs_ring_opts o = {.memory_limit = 1 << 20, .retention_us = 1800 * 1000000LL};
    struct churn c = {.r = fs_ring_new(&o, err, sizeof(err))};
    assert_non_null(c.r);
    int32_t g = fs_ring_group_new(c.r);
    for (uint32_t s = 0; s < NR; s++) {
        assert_int_equal(fs_ring_series_new(c.r, g, FS_RING_COUNTER), (int32_t)s);
        atomic_store(&c.gen[s], fs_ring_series_gen(c.r, s));
    }
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, churn_reader, &c), 0);
    struct fs_ring_point pts[NR];
    for (int b = 0; b < NRB; b++) {
        int64_t ts = ts_of(b);
        if (b % 8 == 7) { /* a sweep: one series goes, a new one takes its id */
            uint32_t id = (uint32_t)(mix((uint64_t)b) % NR);
            fs_ring_series_delete(c.r, id);
            assert_int_equal(fs_ring_series_new(c.r, g, FS_RING_COUNTER), (int32_t)id);
            atomic_store(&c.gen[id], fs_ring_series_gen(c.r, id));
        }
        for (uint32_t s = 0; s < NR; s++)
            pts[s] = (struct fs_ring_point){.series = s,
                                            .v.u = value_gen(s, atomic_load(&c.gen[s]), ts)};
        assert_int_equal(fs_ring_append(c.r, g, ts, pts, NR), 0);
        /* Reads that found samples: on a loaded machine the readers can do all their
           reads before the first append and none after, which proves nothing. */
        for (int spin = 0; atomic_load(&c.data_reads) < (unsigned long long)b / 4 && spin < 100000;
             spin++)
            sched_yield();
    }
    atomic_store(&c.done, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&c.errors), 0);
    print_message("churn readers: %llu reads, %llu stale ids refused, %llu samples checked\n",
                  (unsigned long long)atomic_load(&c.reads),
                  (unsigned long long)atomic_load(&c.stale),
                  (unsigned long long)atomic_load(&c.checked));
    assert_true(atomic_load(&c.checked) > 0);
    fs_ring_free(c.r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_concurrent_readers),
                                       cmocka_unit_test(test_id_reuse_under_readers)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
