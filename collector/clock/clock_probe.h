/*
 * Second-edge probing of a coarse device clock: when to send the next extra reading of a
 * whole-second device clock (ONYX `show clock`, SNMP hrSystemDate) so that its answer
 * halves the offset's bound, and when to stop, check or pause (struct fs_clock_prober).
 *
 * Why. A reading D of a clock of resolution r, taken while our clock went from t1 (send)
 * to t2 (reply), bounds the offset (device minus collector) to [D - t2, D + r - t1]; the
 * core's filter (collector/clock/clock.h) intersects such bounds. Polls come at a fixed
 * phase relative to the device's second edge, so their bounds stay about a second wide.
 * A probe sent at t1 = E - x, for a device edge E (a multiple of r) and a cut point x
 * inside the current bound [lo, hi], is answered either with a reading before E (then
 * offset < E - t1 = x) or at/after E (then offset >= E - t2 = x - rtt): the bound becomes
 * [lo, x] or [x - rtt, hi]. With x = midpoint + rtt/2 both halves are equal, (w + rtt)/2
 * for a bound of width w: about 8 probes take a second down to a few milliseconds, and
 * the limit is a bound about one round trip wide. The probe only chooses the time; the
 * filter does the arithmetic, so a badly timed probe costs a probe, never honesty.
 *
 * Drivers reach this header through store/sink.h (which includes it, next to
 * fs_sink_clock_estimate and fs_sink_clock_prober_reading, which feeds a prober the
 * readings it hands the sink). Pure functions and a plain state struct; no I/O, no allocation, no
 * threads (a prober belongs to one driver thread). All times are microseconds: CLOCK_REALTIME
 * unless named *_mono_us (CLOCK_MONOTONIC).
 */
#ifndef FS_ANALYSIS_CLOCK_PROBE_H
#define FS_ANALYSIS_CLOCK_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Uncertainty below which probing stops: max(5 ms, 2 x the round trip). */
int64_t fs_clock_probe_target_us(int64_t rtt_us);

struct fs_clock_probe_plan_in {
    int64_t offset_us;      /**< current estimate: device minus collector */
    int64_t uncertainty_us; /**< its half width (> 0) */
    int64_t rtt_us;         /**< a recent clock reading's round trip (>= 0) */
    int64_t resolution_us;  /**< the device clock's resolution (> 0; 1000000: whole seconds) */
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
bool fs_clock_probe_plan(const struct fs_clock_probe_plan_in *in, int64_t *send_at_us);

/** How far outside the bound a check probe keeps (µs): the bound is read just before,
 * so only a second's drift allowance and rounding separate it from the filter's. */
#define FS_CLOCK_PROBE_CHECK_MARGIN_US 2000

/**
 * The send time of a check probe, for an estimate already narrow: one whose reading the
 * bound predicts with certainty, so that a different reading contradicts it and the
 * core's filter starts over (a device clock step, which nothing else would reveal while
 * the readings stay consistent). expect_later: sent the margin after the device's next
 * edge under the bound's lower end lo (it must show the later second; the earlier one
 * puts the offset below lo - margin); otherwise the margin plus 3 round trips before the
 * edge under the upper end hi (it must show the earlier second; the later one, answered
 * within 3 round trips, puts the offset above hi + margin). Those are the ideal times;
 * when none fits [not_before, not_after] (the polls take that phase: a poll's own
 * reading just before the edge is what sets hi, so it can never contradict it), the
 * certain send time nearest an ideal one is chosen, later for the later-second check and
 * earlier for the other, over the next MAX_EDGES edges; false when there is none. A
 * pair sent at the ideal times reveals any offset outside [lo - margin, hi + margin +
 * 3 rtt] (modulo whole seconds: a step of whole seconds shows in the reading itself); a
 * check sent d from its ideal time widens its side of that zone by d. A step that leaves
 * the offset within the zone stays unseen until the drift allowance widens the old
 * readings past it (20 ppm: minutes) or they leave the filter's window (10 minutes).
 */
bool fs_clock_probe_check_plan(const struct fs_clock_probe_plan_in *in, bool expect_later,
                               int64_t *send_at_us);

/**
 * The worst-case bound width (µs) after a probe sent at send_at_us against the bound
 * [lo, hi] with round trip rtt_us on a clock of resolution res_us (whichever reading the
 * reply shows); hi - lo when the probe cannot narrow it. For tests and for the planner.
 */
int64_t fs_clock_probe_worst_width(int64_t lo_us, int64_t hi_us, int64_t rtt_us, int64_t res_us,
                                   int64_t send_at_us);

/* ---------------- the prober: when to probe, check, stop or pause ---------------- */

/*
 * A driver's probing policy for one target, shared by every driver with a whole-second
 * clock; the driver does the I/O (sending the reading request, feeding the answer to the
 * sink's filter) and tells the prober what happened. Rules:
 *   - probe only while the estimate is wider than fs_clock_probe_target_us(rtt), one
 *     probe at a time, at least FS_CLOCK_PROBER_SPACING_US from one answer to the next
 *     send, and only when the probe's 3 round trips end FS_CLOCK_PROBER_GUARD_US before
 *     the next cycle is due (never delaying a poll);
 *   - once narrow, every FS_CLOCK_PROBER_CHECK_US (and at once when a reading moves the
 *     estimate beyond its uncertainty: a device clock step) a pair of check probes;
 *   - FS_CLOCK_PROBER_NO_GAIN_MAX probes in a row that did not narrow (or were dropped)
 *     pause probing for FS_CLOCK_PROBER_HOLD_US; so does a failed probe;
 *   - a narrowing probe whose time always falls on the polls is left out ("blocked"; the
 *     poll's own reading is taken at that phase); a check is moved off the polls
 *     (fs_clock_probe_check_plan) and left out only when no certain time is free.
 * Zero-initialise a prober before use. Plain struct, no allocation; one owner thread.
 */
#define FS_CLOCK_PROBER_SPACING_US 900000LL /* from one probe's answer to the next probe */
#define FS_CLOCK_PROBER_GUARD_US 2000LL /* a probe's 3 round trips end this long before a cycle */
#define FS_CLOCK_PROBER_CHECK_US 30000000LL /* a converged estimate is checked this often */
#define FS_CLOCK_PROBER_HOLD_US 60000000LL  /* pause after probes that gained nothing */
#define FS_CLOCK_PROBER_NO_GAIN_MAX 4
#define FS_CLOCK_PROBER_RTT_KEEP 8         /* round trips remembered; the smallest is used */
#define FS_CLOCK_PROBER_COARSE_US 100000LL /* probing only for clocks at least this coarse */
#define FS_CLOCK_PROBER_CHECK_LATER 1u     /* the check that must read the later second */
#define FS_CLOCK_PROBER_CHECK_EARLIER 2u   /* the check that must read the earlier second */

struct fs_clock_prober {
    int64_t rtt_us[FS_CLOCK_PROBER_RTT_KEEP]; /* recent clock readings' round trips */
    size_t n_rtt, rtt_head;
    int64_t res_us;              /* the last reading's resolution; 0: none yet */
    int64_t at_us;               /* send time of the planned probe (realtime); 0: none */
    int64_t off_before_us;       /* the estimate when the probe in flight was sent */
    int64_t unc_before_us;       /* and its uncertainty */
    int64_t last_answer_mono_us; /* when the last probe ended; 0: never */
    int64_t hold_until_mono_us;  /* paused until then */
    int64_t last_check_mono_us;  /* the last narrowing probe or completed pair of checks */
    unsigned checks_todo;        /* CHECK_LATER | CHECK_EARLIER not yet done this round */
    unsigned check;              /* the planned (or in flight) probe is this check; 0: narrowing */
    int no_gain;                 /* probes in a row that did not narrow */
    uint64_t sent;               /* probes sent, for the target's detail */
    const char *state; /* why probing is on or off, for the detail; NULL: no reading yet */
};

/** What a plan needs to know (realtime unless *_mono_us). */
struct fs_clock_prober_now {
    bool known;             /**< the sink has an estimate (fs_sink_clock_estimate) */
    int64_t offset_us;      /**< its offset, when known */
    int64_t uncertainty_us; /**< its half width, when known */
    int64_t now_us, now_mono_us;
    int64_t cycle_start_us; /**< when the last cycle started; 0: unknown (no cycle bound) */
    int64_t interval_us;    /**< the cycle period; 0: none (no cycle bound) */
};

/** The state shown when no reading came yet. */
#define FS_CLOCK_PROBER_STATE_NONE "off (no clock reading yet)"

/** A clock reading (poll or probe) took rtt_us and showed resolution res_us. */
void fs_clock_prober_reading(struct fs_clock_prober *p, int64_t res_us, int64_t rtt_us);

/** The smallest remembered round trip (0 when none). */
int64_t fs_clock_prober_rtt(const struct fs_clock_prober *p);

/**
 * Plans the next probe: sets p->at_us (0: none) and p->state. Call it whenever the target
 * becomes idle (a cycle or a probe ended), never while a cycle or probe is in flight.
 */
void fs_clock_prober_plan(struct fs_clock_prober *p, const struct fs_clock_prober_now *n);

/** Probing is off for a reason of the driver's (why: a static string); no probe planned. */
void fs_clock_prober_off(struct fs_clock_prober *p, const char *why);

/**
 * Whether the planned probe is due at now_us: 1 send it now, 0 not yet (or none is
 * planned), -1 it is late by more than max(rtt/4, 1 ms) (the thread was busy): plan again
 * rather than send a lopsided cut.
 */
int fs_clock_prober_due(const struct fs_clock_prober *p, int64_t now_us);

/** The planned probe is sent now; offset/uncertainty: the estimate just before. */
void fs_clock_prober_sent(struct fs_clock_prober *p, int64_t offset_us, int64_t uncertainty_us);

/** What a probe's answer did. */
enum fs_clock_probe_outcome {
    FS_CLOCK_PROBE_NARROWED, /**< the estimate narrowed */
    FS_CLOCK_PROBE_NO_GAIN,  /**< it did not (yet few in a row) */
    FS_CLOCK_PROBE_PAUSED,   /**< the NO_GAIN_MAX-th in a row: probing paused (driver logs) */
    FS_CLOCK_PROBE_CHECKED,  /**< a check that agreed with the bound */
    FS_CLOCK_PROBE_STEPPED, /**< a check that moved the estimate: the clock stepped (driver logs) */
};

/**
 * The probe in flight was answered and its reading given to the sink; offset_us and
 * uncertainty_us: the estimate now (the values of fs_clock_prober_sent when the sink has
 * none). *moved_us: how far the estimate's offset moved.
 */
enum fs_clock_probe_outcome fs_clock_prober_answered(struct fs_clock_prober *p, int64_t offset_us,
                                                     int64_t uncertainty_us, int64_t now_mono_us,
                                                     int64_t *moved_us);

/** The probe in flight got no usable answer (e.g. a timeout): counts as a probe without
 * gain; returns true when that paused probing (the driver logs it). */
bool fs_clock_prober_dropped(struct fs_clock_prober *p, int64_t now_mono_us);

/** The probe in flight was answered with an error: probing pauses for HOLD_US. */
void fs_clock_prober_failed(struct fs_clock_prober *p, int64_t now_mono_us);

/**
 * A poll's reading moved the estimate from (offset_before, uncertainty_before) to
 * offset_after: beyond the old uncertainty means the device clock stepped, and a round of
 * checks is scheduled. Returns true when so (the driver logs it).
 */
bool fs_clock_prober_moved(struct fs_clock_prober *p, int64_t offset_before_us,
                           int64_t uncertainty_before_us, int64_t offset_after_us);

#endif
