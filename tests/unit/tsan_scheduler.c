/* The scheduler against the test-only driver. Timing behaviour (cadence, spreading,
 * deadlines, overruns, backoff, recovery after an outage) runs on an injected clock that
 * the test moves by hand, so it is exact and needs no sleeps. Entry lifetime (removal
 * while the scheduler thread is inside the driver, or while a done call arrives) runs on
 * the real clock with the driver's gates, waiting on conditions with deadlines. Run
 * under ASan and TSan (label tsan-ok). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
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
#include "util/clock.h"

#define MS 1000LL
#define SEC 1000000LL
#define MAX_TGT 32
#define MAX_REC 512

struct tgt {
    struct fs_target_cfg cfg;
    char name[32];
    struct fs_sink *sink;
    void *ts;
    struct fs_sched_entry *e;
    bool gone;
    /* Injected-clock runs: the clock reading at which each cycle was seen to start. */
    uint64_t seen_started;
    int64_t starts[MAX_REC];
    size_t n_starts;
};

struct world {
    struct fs_store *st;
    struct fs_sched *sched;
    struct tgt t[MAX_TGT];
    size_t n;
    bool fake;
    _Atomic int64_t now; /* the injected clock */
};

static int64_t
fake_now(void *arg)
{
    struct world *w = arg;
    return atomic_load(&w->now);
}

static struct world *
world_new(bool fake_clock)
{
    struct world *w = calloc(1, sizeof *w);
    char err[128];
    struct fs_ring_opts ro = {.memory_limit = 32 << 20, .retention_us = 3600LL * 1000000};
    w->st = fs_store_new(&ro, err, sizeof err);
    assert_non_null(w->st);
    w->fake = fake_clock;
    atomic_store(&w->now, 1000 * SEC);
    struct fs_sched_clock c = {fake_now, w};
    w->sched = fs_sched_new(fake_clock ? &c : NULL, err, sizeof err);
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

/* The removal sequence of scheduler.h. */
static void
tgt_remove(struct world *w, struct tgt *t)
{
    fs_sched_remove(w->sched, t->e);
    fs_test_driver.target_remove(NULL, t->ts);
    fs_sched_entry_free(w->sched, t->e);
    fs_store_sink_remove(w->st, t->sink);
    t->gone = true;
}

static void
world_free(struct world *w)
{
    for (size_t i = 0; i < w->n; i++)
        if (!w->t[i].gone)
            tgt_remove(w, &w->t[i]);
    fs_sched_free(w->sched);
    fs_store_free(w->st);
    free(w);
}

/* Polls cond(arg) until true or `secs` of real time passed; returns its last value. */
static bool
wait_for(bool (*cond)(void *), void *arg, double secs)
{
    int64_t until = fs_monotonic_us() + (int64_t)(secs * 1e6);
    for (;;) {
        if (cond(arg))
            return true;
        if (fs_monotonic_us() > until)
            return false;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static bool
driver_idle(void *arg)
{
    return fs_test_driver_idle(arg);
}

/* Injected clock: lets everything due at the current reading happen, including cycles
 * the test driver ends at once and what their ends make due. */
static void
settle(struct world *w)
{
    for (int round = 0; round < 100; round++) {
        uint64_t before = 0, after = 0;
        for (size_t i = 0; i < w->n; i++)
            if (!w->t[i].gone)
                before += fs_test_driver_started(w->t[i].ts) + fs_test_driver_ended(w->t[i].ts);
        fs_sched_sync(w->sched);
        for (size_t i = 0; i < w->n; i++)
            if (!w->t[i].gone)
                assert_true(wait_for(driver_idle, w->t[i].ts, 10));
        fs_sched_sync(w->sched);
        for (size_t i = 0; i < w->n; i++)
            if (!w->t[i].gone)
                after += fs_test_driver_started(w->t[i].ts) + fs_test_driver_ended(w->t[i].ts);
        if (after == before)
            return;
    }
    fail_msg("the scheduler did not settle");
}

/* Moves the injected clock forward by `dur` in steps of `step`, recording start times. */
static void
advance(struct world *w, int64_t dur, int64_t step)
{
    int64_t until = atomic_load(&w->now) + dur;
    while (atomic_load(&w->now) < until) {
        atomic_fetch_add(&w->now, step);
        settle(w);
        for (size_t i = 0; i < w->n; i++) {
            struct tgt *t = &w->t[i];
            if (t->gone)
                continue;
            uint64_t n = fs_test_driver_started(t->ts);
            for (; t->seen_started < n; t->seen_started++)
                if (t->n_starts < MAX_REC)
                    t->starts[t->n_starts++] = atomic_load(&w->now);
        }
    }
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

/* ---- policy ---- */

static void
test_backoff_function(void **state)
{
    (void)state;
    int64_t iv = 10 * SEC;
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
    assert_true(fs_sched_backoff(60 * SEC, 30, 1) <= (int64_t)(300 * SEC * 1.2) + 1);
    /* Only refused logins back off; every other failure keeps the cadence. */
    assert_true(fs_sched_failure_backs_off(FS_POLL_AUTH));
    assert_false(fs_sched_failure_backs_off(FS_POLL_PARSE));
    assert_false(fs_sched_failure_backs_off(FS_POLL_TIMEOUT));
    assert_false(fs_sched_failure_backs_off(FS_POLL_PROTOCOL));
    /* The cycle's budget is shorter than the interval. */
    assert_true(fs_sched_cycle_budget(1000 * MS) < 1000 * MS);
    assert_true(fs_sched_cycle_budget(100 * MS) >= 70 * MS);
}

/* ---- timing, on the injected clock ---- */

static void
test_cadence(void **state)
{
    (void)state;
    struct world *w = world_new(true);
    struct fs_test_behavior b = {.ports = 2, .step = 10};
    struct tgt *t = world_add(w, 100 * MS, &b);
    advance(w, 1100 * MS, 5 * MS);
    /* The first start within one interval, then exactly one per interval. */
    assert_true(t->n_starts >= 10 && t->n_starts <= 11);
    for (size_t i = 1; i < t->n_starts; i++)
        assert_int_equal(t->starts[i] - t->starts[i - 1], 100 * MS);
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
    struct world *w = world_new(true);
    struct fs_test_behavior b = {.ports = 1, .step = 1};
    for (int i = 0; i < 20; i++)
        world_add(w, 1000 * MS, &b);
    advance(w, 1000 * MS, 10 * MS);
    int64_t lo = INT64_MAX, hi = 0;
    for (size_t i = 0; i < w->n; i++) {
        assert_int_equal(w->t[i].n_starts, 1);
        lo = w->t[i].starts[0] < lo ? w->t[i].starts[0] : lo;
        hi = w->t[i].starts[0] > hi ? w->t[i].starts[0] : hi;
    }
    /* Twenty targets' first cycles are spread over the interval, not fired at once. */
    assert_true(hi - lo > 300 * MS);
    world_free(w);
}

static void
test_hung_target_does_not_delay_others(void **state)
{
    (void)state;
    struct world *w = world_new(true);
    struct fs_test_behavior hang = {.ports = 1, .hang = true};
    struct fs_test_behavior ok = {.ports = 1, .step = 1};
    struct tgt *h = world_add(w, 100 * MS, &hang);
    struct tgt *g = world_add(w, 100 * MS, &ok);
    advance(w, 1100 * MS, 5 * MS);
    assert_true(g->n_starts >= 10);
    for (size_t i = 1; i < g->n_starts; i++)
        assert_int_equal(g->starts[i] - g->starts[i - 1], 100 * MS);
    /* The hung one is cancelled at each deadline and tried again at each slot. */
    assert_true(fs_test_driver_cancelled(h->ts) >= 9);
    assert_true(h->n_starts >= 10);
    struct fs_instance_info hi = info_of(w, h);
    assert_int_equal(hi.state, FS_INST_DOWN);
    assert_true(hi.poll_errors[0] >= 9); /* timeout */
    assert_int_equal(info_of(w, g).state, FS_INST_UP);
    world_free(w);
}

static void
test_overrun_counted(void **state)
{
    (void)state;
    struct world *w = world_new(true);
    /* Runs past two more slots although cancelled at its deadline. */
    struct fs_test_behavior slow = {.ports = 1, .step = 1, .hang = true, .ignore_cancel = true};
    struct tgt *t = world_add(w, 100 * MS, &slow);
    advance(w, 100 * MS, 5 * MS);
    assert_int_equal(t->n_starts, 1);
    advance(w, 250 * MS, 5 * MS);
    assert_int_equal(t->n_starts, 1);
    assert_int_equal(fs_test_driver_cancelled(t->ts), 1);
    assert_true(info_of(w, t).poll_errors[4] >= 2);
    struct fs_test_behavior ok = {.ports = 1, .step = 1};
    fs_test_driver_set(t->ts, &ok);
    fs_test_driver_finish(t->ts, FS_POLL_OK);
    advance(w, 200 * MS, 5 * MS);
    assert_true(t->n_starts >= 2);
    world_free(w);
}

static void
test_backoff_and_recovery(void **state)
{
    (void)state;
    struct world *w = world_new(true);
    struct fs_test_behavior bad = {.ports = 1, .result = FS_POLL_AUTH};
    struct tgt *t = world_add(w, 50 * MS, &bad);
    advance(w, 1100 * MS, 5 * MS);
    /* Without backoff this would be 22 cycles; doubling from 50 ms gives 5 or 6. */
    assert_true(t->n_starts >= 4 && t->n_starts <= 6);
    for (size_t i = 2; i < t->n_starts; i++)
        assert_true(t->starts[i] - t->starts[i - 1] > t->starts[i - 1] - t->starts[i - 2]);
    assert_true(info_of(w, t).poll_errors[1] >= 4);
    struct fs_test_behavior good = {.ports = 1, .step = 1};
    fs_test_driver_set(t->ts, &good);
    /* The cap is 16 intervals plus jitter. */
    advance(w, 1000 * MS, 5 * MS);
    assert_int_equal(info_of(w, t).state, FS_INST_UP);
    assert_int_equal(info_of(w, t).consecutive_failures, 0);
    /* Back at its cadence. */
    size_t n = t->n_starts;
    assert_int_equal(t->starts[n - 1] - t->starts[n - 2], 50 * MS);
    world_free(w);
}

/* A device that stops answering for 20 s (its cycles hang until cancelled at the
 * deadline, or its connection is refused or its answers garbled at once) is polled again within one
 * interval of coming back, then at its cadence; for outages starting at eight phases of the
 * cadence. */
static void
outage(enum fs_poll_result how)
{
    const int64_t iv = 10 * SEC, step = 100 * MS;
    int64_t worst = 0;
    for (int phase = 0; phase < 8; phase++) {
        struct world *w = world_new(true);
        struct fs_test_behavior up = {.ports = 1, .step = 1};
        struct fs_test_behavior down = {.ports = 1, .result = how, .hang = how == FS_POLL_TIMEOUT};
        struct tgt *t = world_add(w, iv, &up);
        advance(w, 3 * iv + phase * iv / 8, step);
        assert_int_equal(info_of(w, t).state, FS_INST_UP);
        fs_test_driver_set(t->ts, &down);
        advance(w, 20 * SEC, step);
        assert_int_equal(info_of(w, t).state, FS_INST_DOWN);
        fs_test_driver_set(t->ts, &up);
        int64_t back = atomic_load(&w->now);
        size_t before = t->n_starts;
        advance(w, 3 * iv, step);
        assert_true(t->n_starts > before);
        int64_t gap = t->starts[before] - back;
        worst = gap > worst ? gap : worst;
        assert_true(gap <= iv);
        assert_int_equal(info_of(w, t).state, FS_INST_UP);
        for (size_t i = before + 1; i < t->n_starts; i++)
            assert_int_equal(t->starts[i] - t->starts[i - 1], iv);
        world_free(w);
    }
    print_message("outage (%s): first cycle at most %.1f s after the device came back\n",
                  how == FS_POLL_TIMEOUT ? "no answer"
                  : how == FS_POLL_PARSE ? "garbled"
                                         : "refused",
                  (double)worst / 1e6);
}

static void
test_outage_no_answer_recovers_within_interval(void **state)
{
    (void)state;
    outage(FS_POLL_TIMEOUT);
}

static void
test_outage_refused_recovers_within_interval(void **state)
{
    (void)state;
    outage(FS_POLL_PROTOCOL);
}

static void
test_outage_garbled_recovers_within_interval(void **state)
{
    (void)state;
    outage(FS_POLL_PARSE);
}

/* ---- entry lifetime, on the real clock ---- */

struct remover {
    struct world *w;
    struct tgt *t;
    pthread_t thread;
    atomic_bool returned;
    atomic_bool early; /* returned while the scheduler thread was inside the driver */
};

static void *
remover_main(void *arg)
{
    struct remover *r = arg;
    fs_sched_remove(r->w->sched, r->t->e);
    atomic_store(&r->early, fs_test_driver_in_gate(r->t->ts) > 0);
    atomic_store(&r->returned, true);
    return NULL;
}

static bool
in_gate(void *arg)
{
    return fs_test_driver_in_gate(arg) > 0;
}

static bool
remover_returned(void *arg)
{
    struct remover *r = arg;
    return atomic_load(&r->returned);
}

/* Removal while the scheduler thread is inside a driver call for the target: removal
 * must wait for the call to return before the caller's target_remove() can free it. */
static void
remove_while_in_driver(struct fs_test_behavior *b)
{
    struct world *w = world_new(false);
    struct tgt *t = world_add(w, 100 * MS, b);
    assert_true(wait_for(in_gate, t->ts, 10));
    struct remover r = {.w = w, .t = t};
    assert_int_equal(pthread_create(&r.thread, NULL, remover_main, &r), 0);
    /* Give a wrong removal every chance to return early; a right one cannot. */
    assert_false(wait_for(remover_returned, &r, 0.3));
    fs_test_driver_open_gate(t->ts);
    assert_true(wait_for(remover_returned, &r, 10));
    pthread_join(r.thread, NULL);
    assert_false(atomic_load(&r.early));
    fs_test_driver.target_remove(NULL, t->ts);
    fs_sched_entry_free(w->sched, t->e);
    fs_store_sink_remove(w->st, t->sink);
    t->gone = true;
    world_free(w);
}

static void
test_remove_during_cycle_start(void **state)
{
    (void)state;
    struct fs_test_behavior b = {.ports = 1, .step = 1, .gate_start = true};
    remove_while_in_driver(&b);
}

static void
test_remove_during_cancel(void **state)
{
    (void)state;
    struct fs_test_behavior b = {.ports = 1, .hang = true, .gate_cancel = true};
    remove_while_in_driver(&b);
}

static bool
started(void *arg)
{
    return fs_test_driver_started(arg) > 0;
}

static bool
ended(void *arg)
{
    return fs_test_driver_ended(arg) > 0;
}

/* Removal with a cycle in flight: target_remove() ends it, and its done call reaches a
 * removed entry that is still alive. */
static void
test_remove_during_inflight_cycle(void **state)
{
    (void)state;
    struct world *w = world_new(false);
    struct fs_test_behavior hang = {.ports = 1, .hang = true};
    struct tgt *t = world_add(w, 100 * MS, &hang);
    assert_true(wait_for(started, t->ts, 10));
    fs_sched_remove(w->sched, t->e);
    fs_test_driver.target_remove(NULL, t->ts); /* the driver's thread ends the cycle */
    fs_sched_entry_free(w->sched, t->e);
    fs_store_sink_remove(w->st, t->sink);
    t->gone = true;
    world_free(w);
}

struct count_at_least {
    void *ts;
    uint64_t n;
};

static bool
started_at_least(void *arg)
{
    struct count_at_least *c = arg;
    return fs_test_driver_started(c->ts) >= c->n;
}

/* A done call arriving from the driver's thread after fs_sched_remove() and before
 * fs_sched_entry_free(): ignored, and the entry is no longer scheduled. */
static void
test_done_after_remove(void **state)
{
    (void)state;
    struct world *w = world_new(false);
    struct fs_test_behavior hang = {.ports = 1, .hang = true, .ignore_cancel = true};
    struct tgt *t = world_add(w, 50 * MS, &hang);
    assert_true(wait_for(started, t->ts, 10));
    fs_sched_remove(w->sched, t->e);
    fs_test_driver_finish(t->ts, FS_POLL_OK);
    assert_true(wait_for(ended, t->ts, 10));
    /* Nothing starts any more, however many slots pass. */
    struct count_at_least more = {t->ts, fs_test_driver_started(t->ts) + 1};
    assert_false(wait_for(started_at_least, &more, 0.3));
    assert_int_equal(info_of(w, t).state, FS_INST_UP);
    fs_test_driver.target_remove(NULL, t->ts);
    fs_sched_entry_free(w->sched, t->e);
    fs_store_sink_remove(w->st, t->sink);
    t->gone = true;
    world_free(w);
}

/* The race itself, many times: the driver ends a cycle on its thread while the target
 * is removed on this one. Under ASan or TSan a done call touching a freed entry fails. */
static void
test_remove_races_done(void **state)
{
    (void)state;
    struct world *w = world_new(false);
    struct fs_test_behavior hang = {.ports = 1, .hang = true};
    for (int i = 0; i < 200; i++) {
        /* One slot, reused: the previous target is gone. */
        memset(&w->t[0], 0, sizeof w->t[0]);
        w->n = 0;
        struct tgt *t = world_add(w, 1 * MS, &hang);
        assert_true(wait_for(started, t->ts, 10));
        fs_test_driver_finish(t->ts, i % 2 ? FS_POLL_OK : FS_POLL_AUTH);
        tgt_remove(w, t);
    }
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
        cmocka_unit_test(test_outage_no_answer_recovers_within_interval),
        cmocka_unit_test(test_outage_refused_recovers_within_interval),
        cmocka_unit_test(test_outage_garbled_recovers_within_interval),
        cmocka_unit_test(test_remove_during_cycle_start),
        cmocka_unit_test(test_remove_during_cancel),
        cmocka_unit_test(test_remove_during_inflight_cycle),
        cmocka_unit_test(test_done_after_remove),
        cmocka_unit_test(test_remove_races_done),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
