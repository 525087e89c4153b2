/* Clock offset estimation: synthetic clocks with known offsets, jitter, 1 s resolution,
 * drift and steps; every estimate must contain the truth within its stated uncertainty. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "clock/clock.h"

static uint64_t rng_state;

static uint64_t
rng(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [a, b]. */
static int64_t
uni(int64_t a, int64_t b)
{
    return a + (int64_t)(rng() % (uint64_t)(b - a + 1));
}

static int64_t
floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* One poll: request at lo, the device reads its clock d1 later, the answer arrives d2
 * after that. The device clock runs `offset` ahead (plus drift) and truncates to res. */
static struct fs_clock_meas
poll_device(int64_t lo, int64_t offset, double drift_ppm, int64_t t0, int64_t res, int64_t dmin,
            int64_t dmax)
{
    int64_t d1 = uni(dmin, dmax), d2 = uni(dmin, dmax);
    int64_t at = lo + d1;
    int64_t dev = at + offset + (int64_t)((double)(at - t0) * drift_ppm * 1e-6);
    struct fs_clock_meas m = {floor_div(dev, res) * res, lo, at + d2};
    return m;
}

static int64_t
true_offset(int64_t at, int64_t offset, double drift_ppm, int64_t t0)
{
    return offset + (int64_t)((double)(at - t0) * drift_ppm * 1e-6);
}

static void
assert_honest(const struct fs_clock_estimate *e, int64_t truth)
{
    assert_true(e->known);
    int64_t err = llabs(e->offset_us - truth);
    if (err > e->uncertainty_us)
        fail_msg("estimate %lld ± %lld does not contain the true offset %lld",
                 (long long)e->offset_us, (long long)e->uncertainty_us, (long long)truth);
}

/* gNMI-like fine clock: 250 ms ahead, one-way delays 0.2..5 ms; the minimum-delay bound
 * gets well under a millisecond and always holds. */
static void
test_fine_clock_min_delay(void **state)
{
    (void)state;
    rng_state = 1;
    struct fs_clock_filter f;
    fs_clock_filter_init(&f, 1, 60 * 1000000LL, 0);
    struct fs_clock_estimate e;
    fs_clock_filter_estimate(&f, &e);
    assert_false(e.known);
    int64_t t = 1796236354000000LL;
    for (int i = 0; i < 50; i++, t += 1000000) {
        struct fs_clock_meas m = poll_device(t, 250000, 0, t, 1, 200, 5000);
        assert_int_equal(fs_clock_filter_add(&f, &m), 0);
        fs_clock_filter_estimate(&f, &e);
        assert_honest(&e, 250000);
        if (i == 0) /* one measurement: half the round trip plus the resolution */
            assert_true(e.uncertainty_us <= (m.local_hi_us - m.local_lo_us) / 2 + 2);
    }
    assert_true(e.uncertainty_us < 1000);
    assert_true(e.used > 1);
}

/* SNMP hrSystemDate-like 1 s clock, polled every ~1.3 s with 0.5..3 ms delays: the polls
 * that straddle a device-second edge narrow the bound from ~1 s to tens of ms. */
static void
test_one_second_clock_edges(void **state)
{
    (void)state;
    rng_state = 7;
    struct fs_clock_filter f;
    fs_clock_filter_init(&f, 1000000, 300 * 1000000LL, 0);
    struct fs_clock_estimate e;
    int64_t t = 1796236354123456LL;
    struct fs_clock_meas first = poll_device(t, 250000, 0, t, 1000000, 500, 3000);
    fs_clock_filter_add(&f, &first);
    fs_clock_filter_estimate(&f, &e);
    assert_honest(&e, 250000);
    assert_true(e.uncertainty_us >= 500000); /* one poll of a 1 s clock knows little */
    for (int i = 0; i < 120; i++) {
        t += 1300000 + uni(0, 100000);
        struct fs_clock_meas m = poll_device(t, 250000, 0, t, 1000000, 500, 3000);
        fs_clock_filter_add(&f, &m);
        fs_clock_filter_estimate(&f, &e);
        assert_honest(&e, 250000);
    }
    print_message("1 s clock after 121 polls: ± %lld us\n", (long long)e.uncertainty_us);
    assert_true(e.uncertainty_us <= 20000);
}

/* A device drifting 10 ppm under a 20 ppm allowance: still honest. */
static void
test_drift_within_allowance(void **state)
{
    (void)state;
    rng_state = 11;
    struct fs_clock_filter f;
    fs_clock_filter_init(&f, 1, 120 * 1000000LL, 20);
    struct fs_clock_estimate e;
    int64_t t0 = 1796236354000000LL, t = t0;
    for (int i = 0; i < 600; i++, t += 1000000) {
        struct fs_clock_meas m = poll_device(t, -40000, 10, t0, 1, 100, 3000);
        fs_clock_filter_add(&f, &m);
        fs_clock_filter_estimate(&f, &e);
        assert_honest(&e, true_offset(m.local_hi_us, -40000, 10, t0));
    }
    assert_true(e.uncertainty_us < 3000);
}

/* The device clock steps by 1 s: old measurements contradict new ones and are dropped. */
static void
test_step_drops_old(void **state)
{
    (void)state;
    rng_state = 3;
    struct fs_clock_filter f;
    fs_clock_filter_init(&f, 1, 600 * 1000000LL, 0);
    struct fs_clock_estimate e;
    int64_t t = 1796236354000000LL;
    for (int i = 0; i < 30; i++, t += 1000000) {
        struct fs_clock_meas m = poll_device(t, 5000, 0, t, 1, 100, 2000);
        fs_clock_filter_add(&f, &m);
    }
    for (int i = 0; i < 5; i++, t += 1000000) {
        struct fs_clock_meas m = poll_device(t, 1005000, 0, t, 1, 100, 2000);
        fs_clock_filter_add(&f, &m);
        fs_clock_filter_estimate(&f, &e);
        assert_honest(&e, 1005000);
        assert_true(e.used <= (size_t)i + 1);
    }
}

/* A 1 s clock steps by less than its resolution (+400 ms): each old reading alone is a
 * second wide, so the first new readings often overlap some old ones. A contradiction
 * must start the filter over from the reading that revealed it; keeping the newer old
 * readings that happen to overlap mixes two clocks and can bound the offset away from
 * the truth. Over 200 seeds. */
static void
test_subsecond_step_of_a_1s_clock(void **state)
{
    (void)state;
    int dishonest = 0, checked = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        rng_state = seed;
        struct fs_clock_filter f;
        fs_clock_filter_init(&f, 1000000, 600 * 1000000LL, 20);
        struct fs_clock_estimate e;
        int64_t t = 1796236354000000LL + uni(0, 999999);
        for (int i = 0; i < 150; i++) {
            t += 1000000 + uni(0, 300000);
            struct fs_clock_meas m = poll_device(t, 250000, 0, t, 1000000, 500, 3000);
            fs_clock_filter_add(&f, &m);
        }
        fs_clock_filter_estimate(&f, &e);
        assert_honest(&e, 250000);
        assert_true(e.uncertainty_us <= 100000); /* narrow: old readings exclude +650 ms */
        /* A reading that still fits the old bound cannot reveal the step (a 1 s clock
         * says nothing finer); from the first that moves the estimate beyond its old
         * uncertainty on, every estimate must hold the new truth. */
        const struct fs_clock_estimate before = e;
        bool revealed = false;
        for (int i = 0; i < 40; i++) {
            t += 1000000 + uni(0, 300000);
            struct fs_clock_meas m = poll_device(t, 650000, 0, t, 1000000, 500, 3000);
            fs_clock_filter_add(&f, &m);
            fs_clock_filter_estimate(&f, &e);
            revealed = revealed || llabs(e.offset_us - before.offset_us) > before.uncertainty_us;
            if (revealed && llabs(e.offset_us - 650000) > e.uncertainty_us)
                dishonest++;
            checked += revealed;
        }
        assert_true(revealed);
    }
    print_message("+400 ms step of a 1 s clock: %d estimates after it was revealed, %d dishonest\n",
                  checked, dishonest);
    if (dishonest)
        fail_msg("%d of %d estimates after a revealed +400 ms step exclude the truth", dishonest,
                 checked);
}

/* Resolution guessed from the readings: whole seconds are taken as a 1 s clock (honest),
 * fine readings as a fine clock (tight). */
static void
test_guessed_resolution(void **state)
{
    (void)state;
    rng_state = 13;
    struct fs_clock_filter coarse, fine;
    fs_clock_filter_init(&coarse, 0, 300 * 1000000LL, 0);
    fs_clock_filter_init(&fine, 0, 300 * 1000000LL, 0);
    struct fs_clock_estimate e;
    int64_t t = 1796236354123456LL;
    for (int i = 0; i < 60; i++) {
        t += 1300000 + uni(0, 100000);
        struct fs_clock_meas m = poll_device(t, 250000, 0, t, 1000000, 500, 3000);
        fs_clock_filter_add(&coarse, &m);
        fs_clock_filter_estimate(&coarse, &e);
        assert_honest(&e, 250000);
        m = poll_device(t, 250000, 0, t, 1, 500, 3000);
        fs_clock_filter_add(&fine, &m);
    }
    fs_clock_filter_estimate(&fine, &e);
    assert_honest(&e, 250000);
    assert_true(e.uncertainty_us < 2000);
}

static void
test_add_refuses_bad(void **state)
{
    (void)state;
    struct fs_clock_filter f;
    fs_clock_filter_init(&f, 1, 1000000, 0);
    struct fs_clock_meas bad = {10, 20, 19};
    assert_int_equal(fs_clock_filter_add(&f, &bad), -1);
    struct fs_clock_meas a = {100, 50, 60}, older = {100, 40, 45};
    assert_int_equal(fs_clock_filter_add(&f, &a), 0);
    assert_int_equal(fs_clock_filter_add(&f, &older), -1);
    assert_int_equal((int)f.n, 1);
}

/* NTP exchange: host 40 ms behind, asymmetric random delays; the min-delay round holds. */
static void
test_ntp_best_round(void **state)
{
    (void)state;
    rng_state = 5;
    const int64_t host_minus_server = -40000000; /* ns */
    for (int trial = 0; trial < 200; trial++) {
        struct fs_ntp_round r[5];
        int64_t server = 1796236354000000000LL + trial * 1000000000LL;
        int64_t min_delay = INT64_MAX;
        for (int i = 0; i < 5; i++) {
            int64_t up = uni(50000, 3000000), proc = uni(1000, 100000), down = uni(50000, 3000000);
            r[i].t1 = server + host_minus_server;
            r[i].t2 = server + up;
            r[i].t3 = r[i].t2 + proc;
            r[i].t4 = r[i].t3 + down + host_minus_server;
            if (up + down < min_delay)
                min_delay = up + down;
            server += 10000000;
        }
        struct fs_ntp_result res;
        char err[128];
        assert_int_equal(fs_ntp_best(r, 5, 1000, &res, err, sizeof err), 0);
        assert_int_equal(res.delay_ns, min_delay);
        assert_true(llabs(res.offset_ns - host_minus_server) <= res.uncertainty_ns);
        assert_true(res.uncertainty_ns <= min_delay / 2 + 1001);
    }
    struct fs_ntp_round broken = {100, 50, 40, 90};
    struct fs_ntp_result res;
    char err[128];
    assert_int_equal(fs_ntp_best(&broken, 1, 0, &res, err, sizeof err), -1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fine_clock_min_delay),
        cmocka_unit_test(test_one_second_clock_edges),
        cmocka_unit_test(test_drift_within_allowance),
        cmocka_unit_test(test_step_drops_old),
        cmocka_unit_test(test_subsecond_step_of_a_1s_clock),
        cmocka_unit_test(test_add_refuses_bad),
        cmocka_unit_test(test_guessed_resolution),
        cmocka_unit_test(test_ntp_best_round),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
