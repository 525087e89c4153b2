/*
 * Second-edge probing of a coarse device clock (ONYX `show clock`, whole seconds): when
 * to send the next extra `show clock` so that its answer halves the offset's bound.
 *
 * Why. A reading D of a clock of resolution r, taken while our clock went from t1 (send)
 * to t2 (reply), bounds the offset (device minus collector) to [D - t2, D + r - t1]; the
 * core's filter (collector/analysis/clock.h) intersects such bounds. Polls come at a fixed
 * phase relative to the device's second edge, so their bounds stay about a second wide.
 * A probe sent at t1 = E - x, for a device edge E (a multiple of r) and a cut point x
 * inside the current bound [lo, hi], is answered either with a reading before E (then
 * offset < E - t1 = x) or at/after E (then offset >= E - t2 = x - rtt): the bound becomes
 * [lo, x] or [x - rtt, hi]. With x = midpoint + rtt/2 both halves are equal, (w + rtt)/2
 * for a bound of width w: about 8 probes take a second down to a few milliseconds, and
 * the limit is a bound about one round trip wide. The probe only chooses the time; the
 * filter does the arithmetic, so a badly timed probe costs a probe, never honesty.
 *
 * Pure functions; no I/O, no allocation. All times are CLOCK_REALTIME microseconds.
 */
#ifndef FS_ONYX_CLOCKPROBE_H
#define FS_ONYX_CLOCKPROBE_H

#include <stdbool.h>
#include <stdint.h>

/** Uncertainty below which probing stops: max(5 ms, 2 x the round trip). */
int64_t onyx_probe_target_us(int64_t rtt_us);

struct onyx_probe_plan_in {
    int64_t offset_us;      /**< current estimate: device minus collector */
    int64_t uncertainty_us; /**< its half width (> 0) */
    int64_t rtt_us;         /**< a recent `show clock` round trip (>= 0) */
    int64_t resolution_us;  /**< the device clock's resolution (> 0; 1000000 for ONYX) */
    int64_t not_before_us;  /**< earliest allowed send time (e.g. now) */
    int64_t not_after_us;   /**< latest allowed send time (>= not_before_us) */
};

/**
 * The send time of the next probe: the earliest time in [not_before, not_after] at which
 * a probe cuts the bound [offset - uncertainty, offset + uncertainty] best. When the
 * ideal time (the device's next edge in the middle of the round trip under the current
 * midpoint: send at E - offset - rtt/2) fits the window it is chosen; otherwise the cut
 * point nearest the ideal one whose send time fits (a less even split, still a narrower
 * bound). Returns true with *send_at_us set, false when no send time in the window can
 * narrow the bound (the window is too short, or the bound is already no wider than a
 * round trip).
 */
bool onyx_probe_plan(const struct onyx_probe_plan_in *in, int64_t *send_at_us);

/** How far outside the bound a check probe keeps (µs): the bound is read just before,
 * so only a second's drift allowance and rounding separate it from the filter's. */
#define ONYX_PROBE_CHECK_MARGIN_US 2000

/**
 * The send time of a check probe, for an estimate already narrow: one whose reading the
 * bound predicts with certainty, so that a different reading contradicts it and the
 * core's filter starts over (a device clock step, which nothing else would reveal while
 * the readings stay consistent). expect_later: sent the margin after the device's next
 * edge under the bound's lower end lo (it must show the later second; the earlier one
 * puts the offset below lo - margin); otherwise the margin plus 3 round trips before the
 * edge under the upper end hi (it must show the earlier second; the later one, answered
 * within 3 round trips, puts the offset above hi + margin). The first such time in
 * [not_before, not_after]; false when there is none. A pair, one of each, reveals any
 * offset outside [lo - margin, hi + margin + 3 rtt] (modulo whole seconds: a step of
 * whole seconds shows in the reading itself). A step that leaves the offset within that
 * zone stays unseen until the drift allowance widens the old readings past it (20 ppm:
 * minutes) or they leave the filter's window (10 minutes).
 */
bool onyx_probe_check_plan(const struct onyx_probe_plan_in *in, bool expect_later,
                           int64_t *send_at_us);

/**
 * The worst-case bound width (µs) after a probe sent at send_at_us against the bound
 * [lo, hi] with round trip rtt_us on a clock of resolution res_us (whichever reading the
 * reply shows); hi - lo when the probe cannot narrow it. For tests and for the planner.
 */
int64_t onyx_probe_worst_width(int64_t lo_us, int64_t hi_us, int64_t rtt_us, int64_t res_us,
                               int64_t send_at_us);

#endif
