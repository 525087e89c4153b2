/*
 * Clock offset from a device clock that prints whole seconds (`show clock`): second-edge
 * detection across polls. One reading s taken while our clock was in [lo, hi] says the
 * offset (device minus local) lies in [s - hi, s + res - lo]: about a second wide. Polls
 * fall at different phases of the device's second, so intersecting the intervals of
 * successive polls narrows the offset to about the command's round trip once a poll has
 * landed just after a device second edge and another just before one. The kept interval
 * is widened by a drift allowance as time passes; an empty intersection (the device's
 * clock was stepped) restarts from the newest reading. Pure; the caller owns the struct.
 */
#ifndef FS_ONYX_CLOCK_EST_H
#define FS_ONYX_CLOCK_EST_H

#include <stdbool.h>
#include <stdint.h>

#define ONYX_CLOCK_DRIFT_PPM 20 /* allowance for the two clocks' relative drift (NTP-disciplined)  \
                                 */

struct onyx_clock_est {
    bool have;
    int64_t off_lo_us, off_hi_us; /* offset interval (device - local) */
    int64_t at_us;                /* local time of the last update */
};

/**
 * Adds a reading (device_us, truncated to res_us) taken between local lo_us and hi_us
 * (realtime). Returns the narrowed offset interval in *off_lo_us / *off_hi_us.
 */
void onyx_clock_est_add(struct onyx_clock_est *e, int64_t device_us, int64_t res_us, int64_t lo_us,
                        int64_t hi_us, int64_t *off_lo_us, int64_t *off_hi_us);

#endif
