/* Clock offset estimation by interval intersection (see clock.h). */
#include "clock/clock.h"

#include <stdbool.h>
#include <stdio.h>

void
fs_clock_filter_init(struct fs_clock_filter *f, int64_t resolution_us, int64_t window_us,
                     double max_drift_ppm)
{
    f->resolution_us = resolution_us < 0 ? 0 : resolution_us;
    f->window_us = window_us > 0 ? window_us : 1;
    f->max_drift_ppm = max_drift_ppm < 0 ? 0 : max_drift_ppm;
    f->n = 0;
    f->head = 0;
}

static const struct fs_clock_meas *
nth_newest(const struct fs_clock_filter *f, size_t i)
{
    return &f->m[(f->head + FS_CLOCK_WINDOW - 1 - i) % FS_CLOCK_WINDOW];
}

static bool intersect(const struct fs_clock_filter *f, double *lo, double *hi, size_t *used);

int
fs_clock_filter_add(struct fs_clock_filter *f, const struct fs_clock_meas *m)
{
    if (m->local_hi_us < m->local_lo_us)
        return -1;
    if (f->n > 0 && m->local_lo_us < nth_newest(f, 0)->local_lo_us)
        return -1;
    f->m[f->head] = *m;
    f->head = (f->head + 1) % FS_CLOCK_WINDOW;
    if (f->n < FS_CLOCK_WINDOW)
        f->n++;
    /* The window held no contradiction before (widening only grows with age), so one now
     * involves the new measurement: the clock stepped since some older one. Where among
     * the older ones is unknown, and those newer than the first contradicting one may
     * still mix the two clocks (a 1 s clock's readings are a second wide: many fit
     * both), so the filter starts over from the new measurement alone. */
    double lo, hi;
    size_t used;
    if (intersect(f, &lo, &hi, &used))
        f->n = 1;
    return 0;
}

/* The resolution to assume: the configured one, else the coarsest of 1 s, 100 ms, 10 ms
 * and 1 ms that divides every reading in the window (see fs_clock_filter_init). */
static int64_t
resolution(const struct fs_clock_filter *f, int64_t newest)
{
    if (f->resolution_us != 0)
        return f->resolution_us;
    static const int64_t guesses[] = {1000000, 100000, 10000, 1000};
    for (size_t g = 0; g < sizeof guesses / sizeof guesses[0]; g++) {
        bool all = true;
        for (size_t i = 0; i < f->n && all; i++) {
            const struct fs_clock_meas *m = nth_newest(f, i);
            if (i > 0 && newest - m->local_lo_us > f->window_us)
                break;
            all = m->device_us % guesses[g] == 0;
        }
        if (all)
            return guesses[g];
    }
    return 1;
}

/* Intersects the measurements of the window, newest first, into [*lo, *hi] (µs, drift
 * widening included); *used counts them. Returns true when it stopped at a measurement
 * that contradicts the newer ones (the clock stepped, or drifted past the allowance). */
static bool
intersect(const struct fs_clock_filter *f, double *lo, double *hi, size_t *used)
{
    const int64_t newest = nth_newest(f, 0)->local_hi_us;
    const int64_t res = resolution(f, newest);
    *lo = -1e300;
    *hi = 1e300;
    *used = 0;
    for (size_t i = 0; i < f->n; i++) {
        const struct fs_clock_meas *m = nth_newest(f, i);
        int64_t age = newest - m->local_lo_us;
        if (i > 0 && age > f->window_us)
            break;
        double widen = (double)age * f->max_drift_ppm * 1e-6;
        double mlo = (double)(m->device_us - m->local_hi_us) - widen;
        double mhi = (double)(m->device_us + res - m->local_lo_us) + widen;
        double nlo = mlo > *lo ? mlo : *lo;
        double nhi = mhi < *hi ? mhi : *hi;
        if (nlo > nhi)
            return true;
        *lo = nlo;
        *hi = nhi;
        (*used)++;
    }
    return false;
}

void
fs_clock_filter_estimate(const struct fs_clock_filter *f, struct fs_clock_estimate *e)
{
    e->known = false;
    e->offset_us = 0;
    e->uncertainty_us = 0;
    e->used = 0;
    if (f->n == 0)
        return;
    /* Bounds in µs as doubles: the drift widening is fractional. fs_clock_filter_add keeps
     * the window free of contradictions, so this uses all of it. */
    double lo, hi;
    intersect(f, &lo, &hi, &e->used);
    double mid = (lo + hi) / 2;
    double half = (hi - lo) / 2;
    e->known = true;
    e->offset_us = (int64_t)(mid >= 0 ? mid + 0.5 : mid - 0.5);
    /* Round the half width up, plus the rounding of the midpoint. */
    int64_t u = (int64_t)half + 1;
    e->uncertainty_us = u < 1 ? 1 : u;
}

int
fs_ntp_best(const struct fs_ntp_round *r, size_t n, int64_t resolution_ns,
            struct fs_ntp_result *out, char *errbuf, size_t errlen)
{
    int best = -1;
    int64_t best_delay = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].t4 < r[i].t1 || r[i].t3 < r[i].t2)
            continue;
        int64_t delay = (r[i].t4 - r[i].t1) - (r[i].t3 - r[i].t2);
        if (delay < 0)
            continue;
        if (best < 0 || delay < best_delay) {
            best = (int)i;
            best_delay = delay;
        }
    }
    if (best < 0) {
        snprintf(errbuf, errlen, "no consistent time exchange among %zu rounds", n);
        return -1;
    }
    const struct fs_ntp_round *b = &r[best];
    /* Server minus client lies in [t3 - t4, t2 - t1]; the host offset is its negation. */
    int64_t a = b->t2 - b->t1, c = b->t3 - b->t4;
    int64_t server_minus_client = a / 2 + c / 2 + (a % 2 + c % 2) / 2;
    out->offset_ns = -server_minus_client;
    out->delay_ns = best_delay;
    out->uncertainty_ns = (best_delay + 1) / 2 + (resolution_ns > 0 ? resolution_ns : 0);
    return 0;
}
