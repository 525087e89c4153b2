/*
 * A test-only polling driver ("testsrc"): each cycle reports `ports` port byte counters
 * that advance by `step` per cycle and a queue-depth gauge, after `delay_us`, then ends
 * with `result`. With `hang` set the cycle never ends on its own (only cycle_cancel ends
 * it, as a timeout). The product ships no fake driver: this lives under tests/ only.
 */
#ifndef FS_TEST_DRIVER_H
#define FS_TEST_DRIVER_H

#include <stdbool.h>
#include <stdint.h>

#include "driver.h"

struct fs_test_behavior {
    int ports;
    uint64_t step;
    int64_t delay_us;
    bool hang;
    bool ignore_cancel; /**< a cancel is noted but the cycle runs its full delay */
    enum fs_poll_result result;
    /** cycle_start / cycle_cancel block the caller (the scheduler thread) until
     *  fs_test_driver_open_gate(): lets a test act while the scheduler is inside them. */
    bool gate_start, gate_cancel;
};

extern const struct fs_driver fs_test_driver;

/** Changes a target's behaviour from the next cycle on. */
void fs_test_driver_set(void *tstate, const struct fs_test_behavior *b);

/** Cycles started / ended (any result) / cancelled for the target so far. */
uint64_t fs_test_driver_started(void *tstate);
uint64_t fs_test_driver_ended(void *tstate);
uint64_t fs_test_driver_cancelled(void *tstate);

/** Ends the cycle in flight (a hanging one, say) with r, from the driver's thread. */
void fs_test_driver_finish(void *tstate, enum fs_poll_result r);

/** Number of callers blocked in a gated cycle_start or cycle_cancel right now. */
unsigned fs_test_driver_in_gate(void *tstate);

/** Opens the gate: blocked and later gated calls go on. */
void fs_test_driver_open_gate(void *tstate);

/**
 * True when no cycle of the target will end without outside help: none is running, or
 * the running one hangs with no cancel or finish asked.
 */
bool fs_test_driver_idle(void *tstate);

/** Monotonic µs at which the target's cycles started (the first `max`); returns count. */
size_t fs_test_driver_start_times(void *tstate, int64_t *out, size_t max);

#endif
