/*
 * The scheduler: one thread that starts polling drivers' cycles on time.
 *
 * Each entry is one (target, polling driver) pair. Start times are spread across the
 * interval by a hash of the target and driver names, so a thousand targets do not fire
 * at once. Each cycle gets a deadline shorter than the interval; a cycle still running
 * at its deadline is cancelled (the driver ends it as a timeout); a cycle due while the
 * previous one is still in flight is skipped and counted as an overrun. Failing entries
 * back off exponentially with jitter, up to a cap, and return to their cadence on the
 * first success. The scheduler never waits on a driver: one hung target cannot delay
 * another.
 *
 * Ownership: the scheduler owns its entries; the driver, its state and the sink belong
 * to the caller and must outlive the entry (fs_sched_remove before tearing them down).
 */
#ifndef FS_SCHEDULER_H
#define FS_SCHEDULER_H

#include <stdint.h>

#include "driver.h"
#include "store/sink.h"

struct fs_sched;
struct fs_sched_entry;

/** Starts the scheduler thread; NULL on failure. */
struct fs_sched *fs_sched_new(char *errbuf, size_t errlen);

/** Stops the thread and frees; every entry must have been removed. Accepts NULL. */
void fs_sched_free(struct fs_sched *s);

/**
 * Adds a polling entry: the first cycle starts within one interval (spread by name).
 * The sink's done callback is taken over by the scheduler.
 */
struct fs_sched_entry *fs_sched_add(struct fs_sched *s, const struct fs_driver *drv,
                                    void *drv_state, void *tstate, struct fs_sink *sink,
                                    const char *name, int64_t interval_us);

/**
 * Removes an entry so no new cycle starts; a cycle in flight is left to the driver's
 * target_remove() to cancel. Frees the entry. Accepts NULL.
 */
void fs_sched_remove(struct fs_sched *s, struct fs_sched_entry *e);

/** The deadline a cycle gets, and the backoff delay after `failures` failures (µs). */
int64_t fs_sched_cycle_budget(int64_t interval_us);
int64_t fs_sched_backoff(int64_t interval_us, uint64_t failures, uint32_t jitter_seed);

#endif
