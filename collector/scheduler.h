/*
 * The scheduler: one thread that starts polling drivers' cycles on time.
 *
 * Each entry is one (target, polling driver) pair. Start times are spread across the
 * interval by a hash of the target and driver names, so a thousand targets do not fire
 * at once. Each cycle gets a deadline shorter than the interval; a cycle still running
 * at its deadline is cancelled (the driver ends it as a timeout); a cycle due while the
 * previous one is still in flight is skipped and counted as an overrun. The scheduler
 * never waits on a driver: one hung target cannot delay another.
 *
 * Failures. A failed cycle is tried again at the entry's next slot of the cadence, so a
 * device that comes back is polled within one interval, and a dead one costs no more
 * than a healthy one (one cycle per interval, which for a silent device is one request
 * and its retries). Only authentication failures back off, exponentially with jitter up
 * to a cap: each attempt is a failed login on the device (lockouts, security alarms),
 * and it lasts until someone changes the device or the configuration (a reload restarts
 * a failing entry). The first success returns an entry to its cadence.
 *
 * Lifetime. An entry is referenced by the scheduler thread (which calls the driver's
 * cycle_start and cycle_cancel with the scheduler's lock released) and by the sink's
 * done callback (which a driver thread calls when a cycle ends). Removal is therefore
 * three steps, around the driver's target_remove():
 *   fs_sched_remove(s, e);                    no new start or cancel; waits until the
 *                                             scheduler thread is in no call for e
 *   drv->target_remove(drv_state, tstate);    the driver ends the cycle in flight and
 *                                             returns once it can call done no more
 *   fs_sched_entry_free(s, e);                frees e
 * A done callback that arrives between the first and the last step finds e alive and
 * marked removed, and is ignored.
 *
 * Ownership: the scheduler owns its entries until fs_sched_entry_free(); the driver, its
 * state and the sink belong to the caller and must outlive the entry.
 */
#ifndef FS_SCHEDULER_H
#define FS_SCHEDULER_H

#include <stdint.h>

#include "driver.h"
#include "store/sink.h"

struct fs_sched;
struct fs_sched_entry;

/**
 * The clock the scheduler reads (monotonic µs). NULL in fs_sched_new() means
 * CLOCK_MONOTONIC; tests inject their own and call fs_sched_sync() after moving it.
 * Deadlines handed to drivers are in this clock.
 */
struct fs_sched_clock {
    int64_t (*now_us)(void *arg);
    void *arg;
};

/** Starts the scheduler thread; NULL with errbuf filled on failure. clock may be NULL. */
struct fs_sched *fs_sched_new(const struct fs_sched_clock *clock, char *errbuf, size_t errlen);

/**
 * Stops the thread and frees. Every entry must have been freed with fs_sched_entry_free()
 * first (a done callback still able to arrive would otherwise find no scheduler).
 * Accepts NULL.
 */
void fs_sched_free(struct fs_sched *s);

/**
 * Adds a polling entry: the first cycle starts within one interval (spread by name).
 * The sink's done callback is taken over by the scheduler until fs_sched_remove().
 * NULL on no memory.
 */
struct fs_sched_entry *fs_sched_add(struct fs_sched *s, const struct fs_driver *drv,
                                    void *drv_state, void *tstate, struct fs_sink *sink,
                                    const char *name, int64_t interval_us);

/**
 * Stops an entry: no cycle starts and no cancel is sent for it from now on, and the
 * sink's done callback is detached. Returns once the scheduler thread is inside no
 * driver or sink call for the entry (the driver's calls are non-blocking, so this is
 * short). A cycle in flight is left to the driver's target_remove() to end. The entry
 * stays allocated: free it with fs_sched_entry_free() after target_remove() has returned.
 * Must not be called from a done callback or a driver call. Accepts NULL.
 */
void fs_sched_remove(struct fs_sched *s, struct fs_sched_entry *e);

/** Frees an entry stopped by fs_sched_remove() (see the lifetime above). Accepts NULL. */
void fs_sched_entry_free(struct fs_sched *s, struct fs_sched_entry *e);

/** Consecutive failed cycles of an entry (0 once one succeeds, or before any ended). */
uint64_t fs_sched_failures(struct fs_sched *s, const struct fs_sched_entry *e);

/**
 * Returns once the scheduler thread has acted on everything due at the clock's current
 * reading (started, cancelled or skipped it) and is waiting. For tests with an injected
 * clock; a cycle it started may still be running in its driver.
 */
void fs_sched_sync(struct fs_sched *s);

/** The deadline a cycle gets (µs after its start). */
int64_t fs_sched_cycle_budget(int64_t interval_us);

/** Whether a failure of this kind backs off (nonzero) or is retried at the cadence (0). */
int fs_sched_failure_backs_off(enum fs_poll_result r);

/** The backoff delay after `failures` consecutive failures that back off (µs). */
int64_t fs_sched_backoff(int64_t interval_us, uint64_t failures, uint32_t jitter_seed);

#endif
