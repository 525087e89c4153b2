/*
 * Second-edge detection for 1 s device clocks (see clock_est.h).
 */
#include "clock_est.h"

void
onyx_clock_est_add(struct onyx_clock_est *e, int64_t device_us, int64_t res_us, int64_t lo_us,
                   int64_t hi_us, int64_t *off_lo_us, int64_t *off_hi_us)
{
    int64_t a = device_us - hi_us, b = device_us + (res_us > 0 ? res_us : 0) - lo_us;
    if (e->have) {
        int64_t dt = hi_us - e->at_us;
        int64_t drift = dt > 0 ? dt / (1000000 / ONYX_CLOCK_DRIFT_PPM) : 0;
        int64_t lo = e->off_lo_us - drift, hi = e->off_hi_us + drift;
        int64_t nlo = lo > a ? lo : a, nhi = hi < b ? hi : b;
        if (nlo <= nhi) {
            a = nlo;
            b = nhi;
        }
    }
    e->have = true;
    e->off_lo_us = a;
    e->off_hi_us = b;
    e->at_us = hi_us;
    *off_lo_us = a;
    *off_hi_us = b;
}
