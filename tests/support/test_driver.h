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
};

extern const struct fs_driver fs_test_driver;

/** Changes a target's behaviour from the next cycle on. */
void fs_test_driver_set(void *tstate, const struct fs_test_behavior *b);

/** Cycles started / ended (any result) / cancelled for the target so far. */
uint64_t fs_test_driver_started(void *tstate);
uint64_t fs_test_driver_ended(void *tstate);
uint64_t fs_test_driver_cancelled(void *tstate);

/** Monotonic µs at which the target's cycles started (the first `max`); returns count. */
size_t fs_test_driver_start_times(void *tstate, int64_t *out, size_t max);

#endif
