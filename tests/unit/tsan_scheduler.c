/* The scheduler against the test-only driver: cadence, spreading, deadlines, overruns,
 * backoff, and one hung target never delaying another. Timing bounds are loose on
 * purpose (a shared 2-core machine); they check behaviour, not speed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "scheduler.h"
#include "store/store.h"
#include "test_driver.h"

#define MS 1000LL

struct tgt {
    struct fs_target_cfg cfg;
    char name[32];
    struct fs_sink *sink;
    void *ts;
    struct fs_sched_entry *e;
};

struct world {
    struct fs_store *st;
    struct fs_sched *sched;
    struct tgt t[32];
    size_t n;
};

static struct world *
world_new(void)
{
    struct world *w = calloc(1, sizeof *w);
    char err[128];
    struct fs_ring_opts ro = {.memory_limit = 32 << 20, .retention_us = 3600LL * 1000000};
    w->st = fs_store_new(&ro, err, sizeof err);
    assert_non_null(w->st);
    w->sched = fs_sched_new(err, sizeof err);
    assert_non_null(w->sched);
    return w;
}

static struct tgt *
world_add(struct world *w, int64_t interval_us, const struct fs_test_behavior *b)
{
    struct tgt *t = &w->t[w->n];
    char err[128];
    snprintf(t->name, sizeof t->name, "tor%zu", w->n);
    w->n++;
    t->cfg.name = t->name;
    t->cfg.address = "127.0.0.1";
    t->sink = fs_store_sink_add(w->st, &t->cfg, "testsrc", interval_us);
    assert_int_equal(
        fs_test_driver.target_add(NULL, &t->cfg, NULL, t->sink, &t->ts, err, sizeof err),
        FS_DRV_OK);
    fs_test_driver_set(t->ts, b);
    t->e = fs_sched_add(w->sched, &fs_test_driver, NULL, t->ts, t->sink, t->name, interval_us);
    assert_non_null(t->e);
    return t;
}

static void
world_free(struct world *w)
{
    for (size_t i = 0; i < w->n; i++) {
        fs_sched_remove(w->sched, w->t[i].e);
        fs_test_driver.target_remove(NULL, w->t[i].ts);
        fs_store_sink_remove(w->st, w->t[i].sink);
    }
    fs_sched_free(w->sched);
    fs_store_free(w->st);
    free(w);
}

static void
sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

struct info {
    const char *target;
    struct fs_instance_info in;
};

static int
info_cb(void *arg, const struct fs_instance_info *in)
{
    struct info *i = arg;
    if (strcmp(in->target, i->target) == 0) {
        i->in = *in;
        i->in.last_error = NULL;
        i->in.driver_detail = NULL;
        return 1;
    }
    return 0;
}

static struct fs_instance_info
info_of(struct world *w, struct tgt *t)
{
    struct info i = {.target = t->name};
    fs_store_foreach_instance(w->st, info_cb, &i);
    return i.in;
}

static void
test_backoff_function(void **state)
{
    (void)state;
    int64_t iv = 10 * 1000 * MS;
    int64_t cap = 16 * iv;
    for (uint64_t f = 1; f < 20; f++) {
        int64_t d = fs_sched_backoff(iv, f, 7);
        int64_t want = iv << (f - 1 < 5 ? f - 1 : 5);
        if (want > cap)
            want = cap;
        /* doubling from one interval up to the cap, plus at most 20% jitter */
        assert_true(d >= want);
        assert_true(d <= want + want / 5);
    }
    /* The cap is 5 minutes for long intervals. */
    assert_true(fs_sched_backoff(60 * 1000 * MS, 30, 1) <= (int64_t)(300 * 1000 * MS * 1.2) + 1);
    /* The cycle's budget is shorter than the interval. */
    assert_true(fs_sched_cycle_budget(1000 * MS) < 1000 * MS);
    assert_true(fs_sched_cycle_budget(100 * MS) >= 70 * MS);
}

static void
test_cadence(void **state)
{
    (void)state;
    struct world *w = world_new();
    struct fs_test_behavior b = {.ports = 2, .step = 10, .delay_us = 2 * MS};
    struct tgt *t = world_add(w, 100 * MS, &b);
    sleep_ms(1150);
    uint64_t n = fs_test_driver_started(t->ts);
    assert_true(n >= 8 && n <= 13);
    struct fs_instance_info in = info_of(w, t);
    assert_int_equal(in.state, FS_INST_UP);
    assert_int_equal(in.poll_errors[4], 0);
    assert_true(in.series == 4);
    world_free(w);
}

static void
test_spread(void **state)
{
    (void)state;
    struct world *w = world_new();
    struct fs_test_behavior b = {.ports = 1, .step = 1};
    for (int i = 0; i < 20; i++)
        world_add(w, 1000 * MS, &b);
    sleep_ms(1100);
    int64_t lo = INT64_MAX, hi = 0;
    for (size_t i = 0; i < w->n; i++) {
        int64_t s;
        assert_int_equal(fs_test_driver_start_times(w->t[i].ts, &s, 1), 1);
        lo = s < lo ? s : lo;
        hi = s > hi ? s : hi;
    }
    /* Twenty targets' first cycles are spread over the interval, not fired at once. */
    assert_true(hi - lo > 300 * MS);
    world_free(w);
}

static void
test_hung_target_does_not_delay_others(void **state)
{
    (void)state;
    struct world *w = world_new();
    struct fs_test_behavior hang = {.ports = 1, .hang = true};
    struct fs_test_behavior ok = {.ports = 1, .step = 1, .delay_us = 1 * MS};
    struct tgt *h = world_add(w, 100 * MS, &hang);
    struct tgt *g = world_add(w, 100 * MS, &ok);
    sleep_ms(1150);
    assert_true(fs_test_driver_started(g->ts) >= 8);
    assert_true(fs_test_driver_cancelled(h->ts) >= 1);
    struct fs_instance_info hi = info_of(w, h);
    assert_int_equal(hi.state, FS_INST_DOWN);
    assert_true(hi.poll_errors[0] >= 1); /* timeout */
    /* Backing off: fewer cycles than the healthy one. */
    assert_true(fs_test_driver_started(h->ts) < fs_test_driver_started(g->ts));
    assert_int_equal(info_of(w, g).state, FS_INST_UP);
    world_free(w);
}

static void
test_overrun_counted(void **state)
{
    (void)state;
    struct world *w = world_new();
    struct fs_test_behavior slow = {
        .ports = 1, .step = 1, .delay_us = 250 * MS, .ignore_cancel = true};
    struct tgt *t = world_add(w, 100 * MS, &slow);
    sleep_ms(1200);
    struct fs_instance_info in = info_of(w, t);
    assert_true(in.poll_errors[4] >= 2);
    world_free(w);
}

static void
test_backoff_and_recovery(void **state)
{
    (void)state;
    struct world *w = world_new();
    struct fs_test_behavior bad = {.ports = 1, .result = FS_POLL_AUTH};
    struct tgt *t = world_add(w, 50 * MS, &bad);
    sleep_ms(1100);
    /* Without backoff this would be ~22 cycles; doubling from 50 ms gives about 5. */
    uint64_t n = fs_test_driver_started(t->ts);
    assert_true(n >= 3 && n <= 9);
    assert_true(info_of(w, t).poll_errors[1] >= 3);
    struct fs_test_behavior good = {.ports = 1, .step = 1};
    fs_test_driver_set(t->ts, &good);
    sleep_ms(1500);
    assert_int_equal(info_of(w, t).state, FS_INST_UP);
    assert_int_equal(info_of(w, t).consecutive_failures, 0);
    world_free(w);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backoff_function),
        cmocka_unit_test(test_cadence),
        cmocka_unit_test(test_spread),
        cmocka_unit_test(test_hung_target_does_not_delay_others),
        cmocka_unit_test(test_overrun_counted),
        cmocka_unit_test(test_backoff_and_recovery),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
