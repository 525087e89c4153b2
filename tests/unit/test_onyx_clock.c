/*
 * Second-edge detection of a 1 s device clock across polls (drivers/onyx/clock_est.c):
 * a device 0.3721 s ahead, polled every 5 s with jitter (so at many phases of its second)
 * and a 2 ms round trip, is narrowed from a 1 s interval to under 50 ms that still
 * contains the truth; a clock step
 * restarts the estimate instead of producing an empty interval.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "clock_est.h"

static void
poll_at(struct onyx_clock_est *e, int64_t local_us, int64_t true_off_us, int64_t *lo, int64_t *hi)
{
    int64_t rtt = 2000;
    int64_t read_local = local_us + rtt / 2; /* the device reads its clock mid-way */
    int64_t dev = read_local + true_off_us;
    int64_t shown = dev - (dev % 1000000); /* printed in whole seconds */
    onyx_clock_est_add(e, shown, 1000000, local_us, local_us + rtt, lo, hi);
}

static void
test_narrows_to_round_trip(void **state)
{
    (void)state;
    struct onyx_clock_est e = {0};
    int64_t lo, hi, off = 372100;
    int64_t t = 1796287738LL * 1000000;
    poll_at(&e, t, off, &lo, &hi);
    assert_true(hi - lo > 990000);
    assert_true(lo <= off && off <= hi);
    /* 5 s polls with 0-1 s of jitter (a fixed pseudo-random sequence) */
    uint32_t x = 12345;
    int64_t at = t;
    for (int i = 1; i <= 200; i++) {
        x = x * 1103515245u + 12345u;
        at += 5000000 + (int64_t)((x >> 8) % 1000000);
        poll_at(&e, at, off, &lo, &hi);
        assert_true(lo <= off && off <= hi);
    }
    assert_true(hi - lo < 50000);
}

static void
test_clock_step_restarts(void **state)
{
    (void)state;
    struct onyx_clock_est e = {0};
    int64_t lo, hi;
    int64_t t = 1796287738LL * 1000000;
    for (int i = 0; i < 20; i++)
        poll_at(&e, t + i * 5137000LL, 372100, &lo, &hi);
    poll_at(&e, t + 21 * 5137000LL, 372100 + 3000000, &lo, &hi); /* stepped by 3 s */
    assert_true(lo <= 3372100 && 3372100 <= hi);
    assert_true(hi - lo > 990000);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_narrows_to_round_trip),
        cmocka_unit_test(test_clock_step_restarts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
