/* Second-edge probe planning (see clockprobe.h). */
#include "clockprobe.h"

/* Edges considered per plan: the window spans a few device seconds at most. */
#define MAX_EDGES 16

static int64_t
floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

int64_t
onyx_probe_target_us(int64_t rtt_us)
{
    int64_t t = 2 * (rtt_us > 0 ? rtt_us : 0);
    return t > 5000 ? t : 5000;
}

int64_t
onyx_probe_worst_width(int64_t lo_us, int64_t hi_us, int64_t rtt_us, int64_t res_us,
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
onyx_probe_plan(const struct onyx_probe_plan_in *in, int64_t *send_at_us)
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
        int64_t w = onyx_probe_worst_width(lo, hi, rtt, res, t);
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
onyx_probe_check_plan(const struct onyx_probe_plan_in *in, bool expect_later, int64_t *send_at_us)
{
    const int64_t res = in->resolution_us, rtt = in->rtt_us > 0 ? in->rtt_us : 0;
    const int64_t lo = in->offset_us - in->uncertainty_us, hi = in->offset_us + in->uncertainty_us;
    if (res <= 0 || hi < lo || in->not_after_us < in->not_before_us)
        return false;
    /* Send at E + shift for the first edge E that keeps the send time >= not_before. */
    /* The later-second check holds whatever the round trip; the earlier-second one needs
     * the answer before the edge, so it leaves room for round trips up to 3 x rtt. */
    const int64_t shift =
        expect_later ? ONYX_PROBE_CHECK_MARGIN_US - lo : -hi - 3 * rtt - ONYX_PROBE_CHECK_MARGIN_US;
    int64_t e = -floor_div(-(in->not_before_us - shift), res) * res; /* ceil to an edge */
    int64_t t = e + shift;
    if (t > in->not_after_us)
        return false;
    *send_at_us = t;
    return true;
}
