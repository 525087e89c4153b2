/* The scheduler; see scheduler.h. */
#include "scheduler.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store.h"
#include "util/clock.h"
#include "util/log.h"

#define BACKOFF_CAP_US (300LL * 1000000)

struct fs_sched_entry {
    struct fs_sched *sched;
    struct fs_sched_entry *next;
    const struct fs_driver *drv;
    void *drv_state, *tstate;
    struct fs_sink *sink;
    char *name;
    int64_t interval_us;
    int64_t next_due; /* scheduler clock µs */
    int64_t deadline; /* of the cycle in flight */
    bool in_flight, cancelled;
    bool removed; /* fs_sched_remove() was called: the entry only waits to be freed */
    bool busy;    /* the scheduler thread is in a driver or sink call for it, unlocked */
    uint64_t cycle_id;
    uint64_t failures;         /* consecutive failed cycles, any kind */
    uint64_t backoff_failures; /* of those, the kinds that back off */
    uint64_t overruns;
    uint32_t seed;
};

struct fs_sched {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* wakes the scheduler thread */
    pthread_cond_t idle; /* wakes fs_sched_remove() and fs_sched_sync() waiters */
    bool stop;
    struct fs_sched_entry *entries;
    size_t n_alive; /* entries added and not yet freed */
    uint64_t sync_req, sync_done;
    struct fs_sched_clock clock;
};

static int64_t
mono_now(void *arg)
{
    (void)arg;
    return fs_monotonic_us();
}

static int64_t
now_us(const struct fs_sched *s)
{
    return s->clock.now_us(s->clock.arg);
}

int64_t
fs_sched_cycle_budget(int64_t interval_us)
{
    /* Leave a fifth of the interval (at most 2 s) between a cycle's end and the next. */
    int64_t slack = interval_us / 5;
    if (slack > 2000000)
        slack = 2000000;
    return interval_us - slack;
}

int
fs_sched_failure_backs_off(enum fs_poll_result r)
{
    /* Any other failure costs the device at most what a good poll costs, and retrying at
     * the cadence sees its recovery at once; a refused login costs it a security event. */
    return r == FS_POLL_AUTH;
}

int64_t
fs_sched_backoff(int64_t interval_us, uint64_t failures, uint32_t jitter_seed)
{
    /* Doubling from one interval, capped at 16 intervals or 5 minutes, whichever is less
     * (but never below the interval), plus up to 20% jitter so failed targets that share
     * a cause do not retry in lockstep. */
    int64_t cap = interval_us * 16 < BACKOFF_CAP_US ? interval_us * 16 : BACKOFF_CAP_US;
    if (cap < interval_us)
        cap = interval_us;
    int64_t d = interval_us;
    for (uint64_t i = 1; i < failures && d < cap; i++)
        d *= 2;
    if (d > cap)
        d = cap;
    uint32_t x = jitter_seed * 2654435761u + (uint32_t)failures * 40503u;
    x ^= x >> 15;
    return d + (int64_t)((double)d * 0.2 * (double)(x % 1000) / 1000.0);
}

static uint32_t
name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* The sink's done callback, on whatever thread ended the cycle. e is alive here: it is
 * freed only after the driver's target_remove(), which waits for this call to return. */
static void
on_done(void *arg, uint64_t cycle_id, enum fs_poll_result r)
{
    struct fs_sched_entry *e = arg;
    struct fs_sched *s = e->sched;
    pthread_mutex_lock(&s->lock);
    if (!e->removed && e->in_flight && (cycle_id == e->cycle_id || cycle_id == 0)) {
        e->in_flight = false;
        int64_t now = now_us(s);
        /* A partial cycle answered: the target is up and keeps its cadence. */
        if (r == FS_POLL_OK || r == FS_POLL_PARTIAL) {
            if (e->failures)
                fs_log(FS_LOG_INFO, "sched", "%s recovered after %llu failed cycles", e->name,
                       (unsigned long long)e->failures);
            e->failures = 0;
            e->backoff_failures = 0;
        } else {
            e->failures++;
            if (fs_sched_failure_backs_off(r)) {
                e->backoff_failures++;
                e->seed++;
                e->next_due = now + fs_sched_backoff(e->interval_us, e->backoff_failures, e->seed);
            }
            /* Otherwise next_due already holds the next slot of the cadence. */
        }
        if (e->next_due < now)
            e->next_due = now;
        pthread_cond_signal(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
}

/* Marks e busy and drops the lock for a call into its driver or sink. */
static void
call_begin(struct fs_sched *s, struct fs_sched_entry *e)
{
    e->busy = true;
    pthread_mutex_unlock(&s->lock);
}

/* Takes the lock back after a call; a remover waiting for e may go on. */
static void
call_end(struct fs_sched *s, struct fs_sched_entry *e)
{
    pthread_mutex_lock(&s->lock);
    e->busy = false;
    if (e->removed)
        pthread_cond_broadcast(&s->idle);
}

/* Starts a cycle of e; called and returns with the lock held. */
static void
start_cycle(struct fs_sched *s, struct fs_sched_entry *e, int64_t now)
{
    e->cycle_id++;
    e->in_flight = true;
    e->cancelled = false;
    e->deadline = now + fs_sched_cycle_budget(e->interval_us);
    /* Keep the cadence: the next slot is one interval after this one's due time. */
    e->next_due += e->interval_us;
    if (e->next_due <= now)
        e->next_due = now + e->interval_us;
    uint64_t id = e->cycle_id;
    int64_t deadline = e->deadline;
    call_begin(s, e);
    fs_sink_cycle_begin(e->sink, id);
    int rc = e->drv->cycle_start(e->drv_state, e->tstate, id, deadline);
    call_end(s, e);
    if (e->removed)
        return;
    if (rc == FS_DRV_BUSY) {
        e->in_flight = false;
        call_begin(s, e);
        fs_sink_count_overrun(e->sink);
        call_end(s, e);
    } else if (rc != FS_DRV_OK && e->in_flight && e->cycle_id == id) {
        call_begin(s, e);
        fs_sink_done(e->sink, id, FS_POLL_PROTOCOL, "cycle could not start");
        call_end(s, e);
    }
}

static void
skip_slot(struct fs_sched *s, struct fs_sched_entry *e, int64_t now)
{
    /* Still running at its next slot: skip the slot and count it. */
    e->next_due += e->interval_us;
    if (e->next_due <= now)
        e->next_due = now + e->interval_us;
    uint64_t n = ++e->overruns;
    call_begin(s, e);
    fs_sink_count_overrun(e->sink);
    /* Logged at 1, 2, 4, 8, ... overruns: a chronically slow target stays visible
     * without flooding the log. */
    if ((n & (n - 1)) == 0)
        fs_log(FS_LOG_WARN, "sched",
               "%s: cycle still running at its next slot; slot skipped (%llu so far). "
               "Raise the interval or the timeout budget",
               e->name, (unsigned long long)n);
    call_end(s, e);
}

static void
wait_until(struct fs_sched *s, int64_t wake, int64_t now)
{
    /* Waits on the real monotonic clock; an injected clock moves only with a sync, which
     * signals, so a second is enough to notice anything else. */
    int64_t d = wake - now;
    if (d > 1000000)
        d = 1000000;
    if (d < 0)
        d = 0;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += d / 1000000;
    ts.tv_nsec += (d % 1000000) * 1000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&s->cond, &s->lock, &ts);
}

static void *
sched_main(void *arg)
{
    struct fs_sched *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->stop) {
        uint64_t sync_seen = s->sync_req;
        int64_t now = now_us(s);
        int64_t wake = now + 1000000;
        struct fs_sched_entry *act = NULL;
        int what = 0; /* 1 start, 2 cancel, 3 overrun */
        for (struct fs_sched_entry *e = s->entries; e; e = e->next) {
            if (e->in_flight && !e->cancelled && e->deadline <= now) {
                act = e, what = 2;
                break;
            }
            if (e->next_due <= now) {
                act = e, what = e->in_flight ? 3 : 1;
                break;
            }
            if (e->in_flight && !e->cancelled && e->deadline < wake)
                wake = e->deadline;
            if (e->next_due < wake)
                wake = e->next_due;
        }
        if (what == 1) {
            start_cycle(s, act, now);
            continue;
        }
        if (what == 2) {
            act->cancelled = true;
            call_begin(s, act);
            act->drv->cycle_cancel(act->drv_state, act->tstate);
            call_end(s, act);
            continue;
        }
        if (what == 3) {
            skip_slot(s, act, now);
            continue;
        }
        if (s->sync_done != sync_seen) {
            s->sync_done = sync_seen;
            pthread_cond_broadcast(&s->idle);
        }
        if (s->sync_req != sync_seen)
            continue;
        wait_until(s, wake, now);
    }
    /* Let any fs_sched_sync() waiter go. */
    s->sync_done = s->sync_req;
    pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

struct fs_sched *
fs_sched_new(const struct fs_sched_clock *clock, char *errbuf, size_t errlen)
{
    struct fs_sched *s = calloc(1, sizeof *s);
    pthread_condattr_t ca;
    if (!s) {
        snprintf(errbuf, errlen, "out of memory");
        return NULL;
    }
    s->clock = clock && clock->now_us ? *clock : (struct fs_sched_clock){mono_now, NULL};
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&s->idle, NULL);
    int rc = pthread_create(&s->thread, NULL, sched_main, s);
    if (rc != 0) {
        snprintf(errbuf, errlen, "cannot start the scheduler thread: %s", strerror(rc));
        pthread_cond_destroy(&s->idle);
        pthread_cond_destroy(&s->cond);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return NULL;
    }
    return s;
}

void
fs_sched_free(struct fs_sched *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    size_t alive = s->n_alive;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    if (alive) {
        /* A done callback could still find these entries and this scheduler: leak both
         * rather than free what a driver thread may touch. */
        fs_log(FS_LOG_ERROR, "sched", "%zu entries not freed at shutdown; scheduler leaked", alive);
        return;
    }
    pthread_cond_destroy(&s->idle);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

struct fs_sched_entry *
fs_sched_add(struct fs_sched *s, const struct fs_driver *drv, void *drv_state, void *tstate,
             struct fs_sink *sink, const char *name, int64_t interval_us)
{
    struct fs_sched_entry *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->name = strdup(name);
    if (!e->name) {
        free(e);
        return NULL;
    }
    e->sched = s;
    e->drv = drv;
    e->drv_state = drv_state;
    e->tstate = tstate;
    e->sink = sink;
    e->interval_us = interval_us > 0 ? interval_us : 10000000;
    e->seed = name_hash(name);
    fs_sink_set_done_cb(sink, on_done, e);
    pthread_mutex_lock(&s->lock);
    e->next_due = now_us(s) + (int64_t)(e->seed % (uint64_t)e->interval_us);
    e->next = s->entries;
    s->entries = e;
    s->n_alive++;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return e;
}

void
fs_sched_remove(struct fs_sched *s, struct fs_sched_entry *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&s->lock);
    if (!e->removed) {
        for (struct fs_sched_entry **pp = &s->entries; *pp; pp = &(*pp)->next) {
            if (*pp == e) {
                *pp = e->next;
                break;
            }
        }
        e->next = NULL;
        e->removed = true;
    }
    /* The scheduler thread may be starting or cancelling a cycle of e right now, with
     * the lock released; the caller's target_remove() must not run under that call. */
    while (e->busy)
        pthread_cond_wait(&s->idle, &s->lock);
    pthread_mutex_unlock(&s->lock);
    /* A done call that already read the callback still reaches on_done, which sees
     * `removed` and returns; later ones reach nobody. */
    fs_sink_set_done_cb(e->sink, NULL, NULL);
}

void
fs_sched_entry_free(struct fs_sched *s, struct fs_sched_entry *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&s->lock);
    assert(e->removed && !e->busy);
    s->n_alive--;
    pthread_mutex_unlock(&s->lock);
    free(e->name);
    free(e);
}

void
fs_sched_sync(struct fs_sched *s)
{
    pthread_mutex_lock(&s->lock);
    uint64_t gen = ++s->sync_req;
    pthread_cond_signal(&s->cond);
    while (s->sync_done < gen && !s->stop)
        pthread_cond_wait(&s->idle, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

uint64_t
fs_sched_failures(struct fs_sched *s, const struct fs_sched_entry *e)
{
    pthread_mutex_lock(&s->lock);
    uint64_t n = e->failures;
    pthread_mutex_unlock(&s->lock);
    return n;
}
