/* The counter arithmetic (collector/store/counter.c): every rule of counter.h, alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "store/counter.h"

#define S 1000000LL /* one second in µs */
#define TWO32 4294967296ULL

static uint64_t
feed(struct fs_counter *c, uint64_t raw, unsigned bits, int64_t ts, bool reset, double max,
     enum fs_counter_event want)
{
    enum fs_counter_event ev = (enum fs_counter_event) - 1;
    uint64_t v = fs_counter_update(c, raw, bits, ts, reset, max, &ev);
    assert_int_equal(ev, want);
    assert_int_equal(v, c->value);
    return v;
}

static void
test_first_and_growth(void **state)
{
    (void)state;
    struct fs_counter c = {0};
    assert_int_equal(feed(&c, 1000, 64, 0, false, 0, FS_COUNTER_NONE), 1000);
    assert_int_equal(feed(&c, 1500, 64, S, false, 0, FS_COUNTER_NONE), 1500);
    assert_int_equal(feed(&c, 1500, 64, 2 * S, false, 0, FS_COUNTER_NONE), 1500);
    /* a declared reset that finds the counter higher is no reset of it */
    assert_int_equal(feed(&c, 1600, 64, 3 * S, true, 0, FS_COUNTER_NONE), 1600);
}

static void
test_declared_reset_rebases(void **state)
{
    (void)state;
    struct fs_counter c = {0};
    feed(&c, 1000, 64, 0, false, 0, FS_COUNTER_NONE);
    assert_int_equal(feed(&c, 30, 64, S, true, 0, FS_COUNTER_REBASED), 1030);
    assert_int_equal(feed(&c, 40, 64, 2 * S, false, 0, FS_COUNTER_NONE), 1040);
    /* 32 bits: a declared reset wins over a wrap */
    struct fs_counter d = {0};
    feed(&d, 4000000000ULL, 32, 0, false, 0, FS_COUNTER_NONE);
    assert_int_equal(feed(&d, 5, 32, S, true, 0, FS_COUNTER_REBASED), 4000000005ULL);
}

static void
test_wrap_without_bound(void **state)
{
    (void)state;
    struct fs_counter c = {0};
    feed(&c, TWO32 - 10, 32, 0, false, 0, FS_COUNTER_NONE);
    assert_int_equal(feed(&c, 5, 32, 1, false, 0, FS_COUNTER_WRAPPED), TWO32 + 5);
    /* a 64-bit counter that goes down is a clear */
    struct fs_counter d = {0};
    feed(&d, 1ULL << 40, 64, 0, false, 0, FS_COUNTER_NONE);
    assert_int_equal(feed(&d, 7, 64, S, false, 0, FS_COUNTER_CLEARED), (1ULL << 40) + 7);
    /* a "32-bit" sum already past 2^32 cannot wrap at 2^32 */
    struct fs_counter e = {0};
    feed(&e, TWO32 + 100, 32, 0, false, 0, FS_COUNTER_NONE);
    assert_int_equal(feed(&e, 50, 32, S, false, 0, FS_COUNTER_CLEARED), TWO32 + 150);
}

static void
test_wrap_plausibility(void **state)
{
    (void)state;
    double octets = fs_counter_max_per_s(1.25e9, true); /* 10 Gb/s */
    double packets = fs_counter_max_per_s(1.25e9, false);
    assert_true(octets == 1.25e9);
    assert_true(packets == 1.25e9 / 64);
    assert_true(fs_counter_max_per_s(0, true) == 0);
    assert_true(fs_counter_max_per_s(-5, false) == 0);
    /* exactly at 1.1 x rate x elapsed is a wrap; one more is a clear */
    struct fs_counter c = {0};
    uint64_t bound = 1375000000ULL; /* 1.1 * 1.25e9 * 1 s */
    feed(&c, TWO32 - (bound - 10), 32, 0, false, 0, FS_COUNTER_NONE);
    uint64_t v = feed(&c, 10, 32, S, false, octets, FS_COUNTER_WRAPPED);
    assert_int_equal(v, TWO32 - (bound - 10) + bound);
    struct fs_counter d = {0};
    feed(&d, TWO32 - (bound - 10), 32, 0, false, 0, FS_COUNTER_NONE);
    v = feed(&d, 11, 32, S, false, octets, FS_COUNTER_CLEARED);
    assert_int_equal(v, TWO32 - (bound - 10) + 11);
    /* no time elapsed (or time went back): no wrap is plausible under a known rate */
    struct fs_counter e = {0};
    feed(&e, TWO32 - 1, 32, 5 * S, false, 0, FS_COUNTER_NONE);
    feed(&e, 0, 32, 5 * S, false, octets, FS_COUNTER_CLEARED);
    feed(&e, TWO32 - 1, 32, 6 * S, false, 0, FS_COUNTER_NONE);
    feed(&e, 0, 32, 4 * S, false, octets, FS_COUNTER_CLEARED);
    /* packets: the bound is 64 times smaller */
    struct fs_counter p = {0};
    feed(&p, TWO32 - 1000, 32, 0, false, 0, FS_COUNTER_NONE);
    feed(&p, 1000, 32, S, false, packets, FS_COUNTER_WRAPPED);
    feed(&p, 2000000000ULL, 32, 2 * S, false, packets, FS_COUNTER_NONE);
    feed(&p, 10, 32, 3 * S, false, packets, FS_COUNTER_CLEARED);
}

static void
test_width_change(void **state)
{
    (void)state;
    struct fs_counter c = {0};
    feed(&c, 5000, 32, 0, false, 0, FS_COUNTER_NONE);
    /* HC column appears: much higher, other width: no jump */
    assert_int_equal(feed(&c, 9000000000000ULL, 64, S, false, 0, FS_COUNTER_WIDTH_CHANGE), 5000);
    assert_int_equal(feed(&c, 9000000000100ULL, 64, 2 * S, false, 0, FS_COUNTER_NONE), 5100);
    /* and goes again: lower, other width: still no unwrap, no jump */
    assert_int_equal(feed(&c, 7, 32, 3 * S, false, 0, FS_COUNTER_WIDTH_CHANGE), 5100);
    /* even with a declared reset, a width change is only a rebase */
    assert_int_equal(feed(&c, 1, 64, 4 * S, true, 0, FS_COUNTER_WIDTH_CHANGE), 5100);
    assert_int_equal(feed(&c, 3, 64, 5 * S, false, 0, FS_COUNTER_NONE), 5102);
}

static void
test_saturates(void **state)
{
    (void)state;
    struct fs_counter c = {0};
    feed(&c, UINT64_MAX - 5, 64, 0, false, 0, FS_COUNTER_NONE);
    assert_int_equal(feed(&c, UINT64_MAX - 10, 64, S, false, 0, FS_COUNTER_CLEARED), UINT64_MAX);
    assert_int_equal(feed(&c, UINT64_MAX, 64, 2 * S, false, 0, FS_COUNTER_NONE), UINT64_MAX);
    /* a width other than 32 is taken as 64 */
    struct fs_counter d = {0};
    feed(&d, 10, 16, 0, false, 0, FS_COUNTER_NONE);
    assert_int_equal(d.last_bits, 64);
    assert_int_equal(feed(&d, 5, 64, S, false, 0, FS_COUNTER_CLEARED), 15);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_and_growth),   cmocka_unit_test(test_declared_reset_rebases),
        cmocka_unit_test(test_wrap_without_bound), cmocka_unit_test(test_wrap_plausibility),
        cmocka_unit_test(test_width_change),       cmocka_unit_test(test_saturates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
