/* The scheduler; see sched.h. */
#include "scheduler.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/log.h"
#include "util/clock.h"
#include "store/store.h"

#define BACKOFF_CAP_US (300LL * 1000000)

struct fs_sched_entry {
    struct fs_sched *sched;
    struct fs_sched_entry *next;
    const struct fs_driver *drv;
    void *drv_state, *tstate;
    struct fs_sink *sink;
    char *name;
    int64_t interval_us;
    int64_t next_due; /* monotonic µs */
    int64_t deadline; /* of the cycle in flight */
    bool in_flight, cancelled;
    uint64_t cycle_id;
    uint64_t failures;
    uint64_t overruns;
    uint32_t seed;
};

struct fs_sched {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stop;
    struct fs_sched_entry *entries;
};

int64_t
fs_sched_cycle_budget(int64_t interval_us)
{
    /* Leave a fifth of the interval (at most 2 s) between a cycle's end and the next. */
    int64_t slack = interval_us / 5;
    if (slack > 2000000)
        slack = 2000000;
    return interval_us - slack;
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

static void
on_done(void *arg, uint64_t cycle_id, enum fs_poll_result r)
{
    struct fs_sched_entry *e = arg;
    struct fs_sched *s = e->sched;
    pthread_mutex_lock(&s->lock);
    if (e->in_flight && (cycle_id == e->cycle_id || cycle_id == 0)) {
        e->in_flight = false;
        int64_t now = fs_monotonic_us();
        if (r == FS_POLL_OK) {
            if (e->failures)
                fs_log(FS_LOG_INFO, "sched", "%s recovered after %llu failed cycles", e->name,
                       (unsigned long long)e->failures);
            e->failures = 0;
            /* next_due already holds the next slot of the cadence */
            if (e->next_due < now)
                e->next_due = now;
        } else {
            e->failures++;
            e->seed++;
            e->next_due = now + fs_sched_backoff(e->interval_us, e->failures, e->seed);
        }
        pthread_cond_signal(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
}

/* Runs one due action for e with the lock released; returns with it held again. */
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
    pthread_mutex_unlock(&s->lock);
    fs_sink_cycle_begin(e->sink, id);
    int rc = e->drv->cycle_start(e->drv_state, e->tstate, id, deadline);
    pthread_mutex_lock(&s->lock);
    if (rc == FS_DRV_BUSY) {
        e->in_flight = false;
        fs_sink_count_overrun(e->sink);
    } else if (rc != FS_DRV_OK && e->in_flight && e->cycle_id == id) {
        pthread_mutex_unlock(&s->lock);
        fs_sink_done(e->sink, id, FS_POLL_PROTOCOL, "cycle could not start");
        pthread_mutex_lock(&s->lock);
    }
}

static void *
sched_main(void *arg)
{
    struct fs_sched *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->stop) {
        int64_t now = fs_monotonic_us();
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
            pthread_mutex_unlock(&s->lock);
            act->drv->cycle_cancel(act->drv_state, act->tstate);
            pthread_mutex_lock(&s->lock);
            continue;
        }
        if (what == 3) {
            /* Still running at its next slot: skip the slot and count it. */
            act->next_due += act->interval_us;
            if (act->next_due <= now)
                act->next_due = now + act->interval_us;
            uint64_t n = ++act->overruns;
            pthread_mutex_unlock(&s->lock);
            fs_sink_count_overrun(act->sink);
            /* Logged at 1, 2, 4, 8, ... overruns: a chronically slow target stays visible
             * without flooding the log. */
            if ((n & (n - 1)) == 0)
                fs_log(FS_LOG_WARN, "sched",
                       "%s: cycle still running at its next slot; slot skipped (%llu so far). "
                       "Raise the interval or the timeout budget",
                       act->name, (unsigned long long)n);
            pthread_mutex_lock(&s->lock);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t d = wake - now;
        ts.tv_sec += d / 1000000;
        ts.tv_nsec += (d % 1000000) * 1000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&s->cond, &s->lock, &ts);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

struct fs_sched *
fs_sched_new(char *errbuf, size_t errlen)
{
    struct fs_sched *s = calloc(1, sizeof *s);
    pthread_condattr_t ca;
    if (!s) {
        snprintf(errbuf, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cond, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&s->thread, NULL, sched_main, s);
    if (rc != 0) {
        snprintf(errbuf, errlen, "cannot start the scheduler thread: %s", strerror(rc));
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
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
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
    e->next_due = fs_monotonic_us() + (int64_t)(e->seed % (uint64_t)e->interval_us);
    fs_sink_set_done_cb(sink, on_done, e);
    pthread_mutex_lock(&s->lock);
    e->next = s->entries;
    s->entries = e;
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
    for (struct fs_sched_entry **pp = &s->entries; *pp; pp = &(*pp)->next) {
        if (*pp == e) {
            *pp = e->next;
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
    /* The driver may still end a cycle; from now on its done call reaches nobody. */
    fs_sink_set_done_cb(e->sink, NULL, NULL);
    free(e->name);
    free(e);
}
