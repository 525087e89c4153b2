/* Second-edge probe planning and the prober's policy (see clock_probe.h). */
#include "clock/clock_probe.h"

/* Edges considered per plan: the window spans a few device seconds at most. */
#define MAX_EDGES 16

static int64_t
floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

int64_t
fs_clock_probe_target_us(int64_t rtt_us)
{
    int64_t t = 2 * (rtt_us > 0 ? rtt_us : 0);
    return t > 5000 ? t : 5000;
}

int64_t
fs_clock_probe_worst_width(int64_t lo_us, int64_t hi_us, int64_t rtt_us, int64_t res_us,
                           int64_t send_at_us)
{
    if (hi_us <= lo_us || res_us <= 0 || rtt_us < 0)
        return hi_us - lo_us;
    const int64_t t1 = send_at_us, t2 = send_at_us + rtt_us;
    /* The readings the device can show: device time somewhere in [t1 + lo, t2 + hi]. */
    int64_t d_first = floor_div(t1 + lo_us, res_us) * res_us;
    int64_t d_last = floor_div(t2 + hi_us, res_us) * res_us;
    if ((d_last - d_first) / res_us > 4 * MAX_EDGES)
        return hi_us - lo_us;
    int64_t worst = 0;
    for (int64_t d = d_first; d <= d_last; d += res_us) {
        /* What the filter keeps for reading d: [d - t2, d + res - t1] within [lo, hi]. */
        int64_t a = d - t2 > lo_us ? d - t2 : lo_us;
        int64_t b = d + res_us - t1 < hi_us ? d + res_us - t1 : hi_us;
        if (b - a > worst)
            worst = b - a;
    }
    return worst;
}

bool
fs_clock_probe_plan(const struct fs_clock_probe_plan_in *in, int64_t *send_at_us)
{
    const int64_t res = in->resolution_us, rtt = in->rtt_us > 0 ? in->rtt_us : 0;
    const int64_t lo = in->offset_us - in->uncertainty_us, hi = in->offset_us + in->uncertainty_us;
    const int64_t nb = in->not_before_us, na = in->not_after_us;
    if (res <= 0 || hi <= lo || na < nb)
        return false;
    /* The ideal cut: both outcomes leave (w + rtt) / 2. */
    const int64_t x_ideal = floor_div(lo + hi + rtt, 2);
    /* A cut x at edge E means sending at E - x; useful cuts lie in (lo + rtt, hi). */
    int64_t e = (floor_div(nb + lo + rtt, res) + 1) * res;
    int64_t e_last = floor_div(na + hi, res) * res;
    bool found = false;
    int64_t best_t = 0, best_w = 0;
    for (int n = 0; e <= e_last && n < MAX_EDGES; e += res, n++) {
        int64_t t_min = e - hi > nb ? e - hi : nb;
        int64_t t_max = e - lo - rtt < na ? e - lo - rtt : na;
        if (t_min > t_max)
            continue;
        int64_t t = e - x_ideal;
        t = t < t_min ? t_min : (t > t_max ? t_max : t);
        int64_t w = fs_clock_probe_worst_width(lo, hi, rtt, res, t);
        if (!found || w < best_w) {
            found = true;
            best_w = w;
            best_t = t;
        }
    }
    /* Worth a probe only if the worst outcome is clearly narrower (>= 1/8). */
    if (!found || best_w * 8 > (hi - lo) * 7)
        return false;
    *send_at_us = best_t;
    return true;
}

bool
fs_clock_probe_check_plan(const struct fs_clock_probe_plan_in *in, bool expect_later,
                          int64_t *send_at_us)
{
    const int64_t res = in->resolution_us, rtt = in->rtt_us > 0 ? in->rtt_us : 0;
    const int64_t lo = in->offset_us - in->uncertainty_us, hi = in->offset_us + in->uncertainty_us;
    const int64_t nb = in->not_before_us, na = in->not_after_us, m = FS_CLOCK_PROBE_CHECK_MARGIN_US;
    if (res <= 0 || hi < lo || na < nb)
        return false;
    /* For an edge E the certain sends span [E + first, E + last]: the later-second check
     * must read E (sent the margin after E under lo, answered before E + res under hi
     * within 3 round trips), the earlier-second one E - res (sent after E - res under lo,
     * answered within 3 round trips the margin before E under hi). The ideal end of the
     * span is the one nearest the edge: a check sent d away from it sees only the steps
     * beyond d more (a poll's own reading near the edge is no check: its bound is what
     * the check must exceed), so the send time nearest its ideal is kept. */
    const int64_t first = expect_later ? m - lo : -res - lo + m;
    const int64_t last = expect_later ? res - hi - 3 * rtt - m : -hi - 3 * rtt - m;
    if (last < first)
        return false;
    const int64_t ideal = expect_later ? first : last;
    bool found = false;
    int64_t best_t = 0, best_d = 0;
    int64_t e = -floor_div(-(nb - last), res) * res; /* the first edge whose span ends >= nb */
    for (int n = 0; e + first <= na && n < MAX_EDGES; e += res, n++) {
        int64_t t = e + ideal;
        t = t < nb ? nb : (t > na ? na : t);
        if (t < e + first || t > e + last)
            continue;
        int64_t d = t - (e + ideal);
        d = d < 0 ? -d : d;
        if (!found || d < best_d) {
            found = true;
            best_d = d;
            best_t = t;
        }
    }
    if (found)
        *send_at_us = best_t;
    return found;
}

/* ---------------- the prober ---------------- */

void
fs_clock_prober_reading(struct fs_clock_prober *p, int64_t res_us, int64_t rtt_us)
{
    p->res_us = res_us;
    p->rtt_us[p->rtt_head] = rtt_us > 0 ? rtt_us : 0;
    p->rtt_head = (p->rtt_head + 1) % FS_CLOCK_PROBER_RTT_KEEP;
    if (p->n_rtt < FS_CLOCK_PROBER_RTT_KEEP)
        p->n_rtt++;
}

int64_t
fs_clock_prober_rtt(const struct fs_clock_prober *p)
{
    int64_t m = 0;
    for (size_t i = 0; i < p->n_rtt; i++)
        if (i == 0 || p->rtt_us[i] < m)
            m = p->rtt_us[i];
    return m;
}

void
fs_clock_prober_off(struct fs_clock_prober *p, const char *why)
{
    p->at_us = 0;
    p->state = why;
}

void
fs_clock_prober_plan(struct fs_clock_prober *p, const struct fs_clock_prober_now *n)
{
    const unsigned both = FS_CLOCK_PROBER_CHECK_LATER | FS_CLOCK_PROBER_CHECK_EARLIER;
    p->at_us = 0;
    if (p->n_rtt == 0 || p->res_us == 0) {
        p->state = FS_CLOCK_PROBER_STATE_NONE;
        return;
    }
    if (p->res_us < FS_CLOCK_PROBER_COARSE_US) {
        p->state = "off (the device clock is fine-grained)";
        return;
    }
    if (!n->known) {
        p->state = "off (no estimate yet)";
        return;
    }
    const int64_t rtt = fs_clock_prober_rtt(p), now_mono = n->now_mono_us, now = n->now_us;
    const bool narrow = n->uncertainty_us <= fs_clock_probe_target_us(rtt);
    if (narrow && p->checks_todo == 0 &&
        now_mono - p->last_check_mono_us >= FS_CLOCK_PROBER_CHECK_US)
        p->checks_todo = both;
    if (narrow && p->checks_todo == 0) {
        p->state = "converged";
        return;
    }
    if (now_mono < p->hold_until_mono_us) {
        p->state = "paused (recent probes did not narrow the estimate)";
        return;
    }
    p->state = narrow ? "converged" : "converging";
    int64_t nb = now + 2000; /* time to get back to the event loop */
    const int64_t spacing_left = p->last_answer_mono_us + FS_CLOCK_PROBER_SPACING_US - now_mono;
    const bool spaced = p->last_answer_mono_us > 0 && spacing_left > 2000;
    if (spaced)
        nb = now + spacing_left;
    int64_t na = nb + 3 * p->res_us;
    /* The probe must be answered before the next cycle is due: never delay a poll. */
    const int64_t iv = n->interval_us;
    if (iv > 0 && n->cycle_start_us > 0) {
        int64_t next = n->cycle_start_us + iv;
        if (next <= now)
            next += ((now - next) / iv + 1) * iv;
        int64_t latest = next - FS_CLOCK_PROBER_GUARD_US - 3 * rtt;
        if (latest < na)
            na = latest;
    }
    if (na < nb)
        return; /* no room before the next cycle: planned again after it */
    struct fs_clock_probe_plan_in in = {
        .offset_us = n->offset_us,
        .uncertainty_us = n->uncertainty_us,
        .rtt_us = rtt,
        .resolution_us = p->res_us,
        .not_before_us = nb,
        .not_after_us = na,
    };
    int64_t at;
    p->check = 0;
    if (!narrow) {
        if (fs_clock_probe_plan(&in, &at))
            p->at_us = at;
        /* Nothing useful in the whole gap between cycles: the polls sit at the phase
         * where the cut should be (their own reading cuts there). Planned again after
         * each cycle, so a change of phase or estimate resumes probing. */
        else if (!spaced)
            p->state = "blocked (the useful probe times fall on the polls)";
        return;
    }
    for (unsigned c = FS_CLOCK_PROBER_CHECK_LATER; c <= FS_CLOCK_PROBER_CHECK_EARLIER && !p->at_us;
         c <<= 1)
        if ((p->checks_todo & c) &&
            fs_clock_probe_check_plan(&in, c == FS_CLOCK_PROBER_CHECK_LATER, &at)) {
            p->at_us = at;
            p->check = c;
        }
    /* No certain time for a check between these cycles (the gap is shorter than the
     * check's span): this round ends, and the next one tries again. */
    if (!p->at_us && !spaced) {
        p->checks_todo = 0;
        p->last_check_mono_us = now_mono;
    }
}

int
fs_clock_prober_due(const struct fs_clock_prober *p, int64_t now_us)
{
    if (p->at_us == 0 || now_us < p->at_us)
        return 0;
    const int64_t rtt = fs_clock_prober_rtt(p);
    const int64_t late_max = rtt / 4 > 1000 ? rtt / 4 : 1000;
    return now_us - p->at_us > late_max ? -1 : 1;
}

void
fs_clock_prober_sent(struct fs_clock_prober *p, int64_t offset_us, int64_t uncertainty_us)
{
    p->at_us = 0;
    p->off_before_us = offset_us;
    p->unc_before_us = uncertainty_us;
    p->sent++;
}

static void
schedule_checks(struct fs_clock_prober *p)
{
    p->checks_todo = FS_CLOCK_PROBER_CHECK_LATER | FS_CLOCK_PROBER_CHECK_EARLIER;
}

/* One more probe without gain; true when that many in a row pause probing (e.g. round
 * trips too irregular for the cut to land, or probes lost: do not insist). */
static bool
no_gain(struct fs_clock_prober *p, int64_t now_mono_us)
{
    if (++p->no_gain < FS_CLOCK_PROBER_NO_GAIN_MAX)
        return false;
    p->no_gain = 0;
    p->hold_until_mono_us = now_mono_us + FS_CLOCK_PROBER_HOLD_US;
    return true;
}

enum fs_clock_probe_outcome
fs_clock_prober_answered(struct fs_clock_prober *p, int64_t offset_us, int64_t uncertainty_us,
                         int64_t now_mono_us, int64_t *moved_us)
{
    enum fs_clock_probe_outcome r;
    const int64_t moved = offset_us - p->off_before_us;
    *moved_us = moved;
    if (p->check && (moved > p->unc_before_us || -moved > p->unc_before_us)) {
        /* The reading contradicted the bound: the clock stepped; check again. */
        schedule_checks(p);
        r = FS_CLOCK_PROBE_STEPPED;
    } else if (p->check) {
        /* A check is not meant to narrow; a contradiction shows as a moved estimate. */
        p->checks_todo &= ~p->check;
        if (p->checks_todo == 0)
            p->last_check_mono_us = now_mono_us;
        r = FS_CLOCK_PROBE_CHECKED;
    } else if (uncertainty_us < p->unc_before_us) {
        p->no_gain = 0;
        if (p->checks_todo == 0)
            p->last_check_mono_us = now_mono_us;
        r = FS_CLOCK_PROBE_NARROWED;
    } else {
        r = no_gain(p, now_mono_us) ? FS_CLOCK_PROBE_PAUSED : FS_CLOCK_PROBE_NO_GAIN;
    }
    p->last_answer_mono_us = now_mono_us;
    return r;
}

bool
fs_clock_prober_dropped(struct fs_clock_prober *p, int64_t now_mono_us)
{
    bool paused = no_gain(p, now_mono_us);
    p->last_answer_mono_us = now_mono_us;
    return paused;
}

void
fs_clock_prober_failed(struct fs_clock_prober *p, int64_t now_mono_us)
{
    p->hold_until_mono_us = now_mono_us + FS_CLOCK_PROBER_HOLD_US;
    p->checks_todo = 0;
    p->last_check_mono_us = now_mono_us;
    p->last_answer_mono_us = now_mono_us;
}

bool
fs_clock_prober_moved(struct fs_clock_prober *p, int64_t offset_before_us,
                      int64_t uncertainty_before_us, int64_t offset_after_us)
{
    const int64_t moved = offset_after_us - offset_before_us;
    if (moved <= uncertainty_before_us && -moved <= uncertainty_before_us)
        return false;
    schedule_checks(p);
    return true;
}
