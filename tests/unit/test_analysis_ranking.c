/* Ranking by evidence across stalls in a busy fabric: a busy culprit port departs at every
 * stall with a modest z (its own variability is large); 300 quiet ports have random
 * bursts with huge z (a few packets over a floor of nearly nothing), some of which meet a
 * stall by chance; a storage backup departs every 10 minutes with a large z, unrelated to
 * the stalls; and a few slow windows have no switch-side cause at all. The culprit must
 * rank first in nearly every stall window and head the summary; the backup and the
 * quiet ports must never head it. The departure runs are given directly, so what is
 * tested is the ranking alone. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rng.h"
#include "analysis/correlate.h"
#include "analysis/incidents.h"

#define S 1000000LL
#define T0 (1796236354LL * S)
#define RANGE (6 * 3600 * S)
#define QUIET 300

static uint64_t rng_state;

static double
urand(void)
{
    return fs_rng_uniform(&rng_state);
}

static uint32_t
series(struct fs_departures *d, const char *target, const char *iface)
{
    struct fs_an_series_ref ref = {
        target, iface, "3", "", "fabric_queue_ecn_marked_packets_total", FS_AN_ECN, 10000, "", ""};
    uint32_t idx;
    assert_int_equal(fs_departures_add_ref(d, &ref, &idx), 0);
    return idx;
}

static void
run(struct fs_departures *d, uint32_t s, int64_t start, int64_t len, double z)
{
    struct fs_departure r = {.series = s,
                             .start_us = start,
                             .end_us = start + len,
                             .peak_us = start + len / 2,
                             .onset_us = start,
                             .peak_z = z,
                             .peak_value = z * 100,
                             .baseline = 100};
    assert_int_equal(fs_departures_push(d, &r), 0);
}

static void
test_busy_culprit_outranks_lucky_quiet_ports_and_backup(void **state)
{
    (void)state;
    int first_total = 0, windows_total = 0, headed = 0, seeds = 10;
    for (int seed = 0; seed < seeds; seed++) {
        rng_state = 0xab0000u + (uint64_t)seed;
        struct fs_departures *d = fs_departures_new(NULL, T0, T0 + RANGE);
        uint32_t culprit = series(d, "leaf3", "Eth1/17");
        uint32_t backup = series(d, "leaf1", "Eth1/2");
        uint32_t quiet[QUIET];
        for (int q = 0; q < QUIET; q++) {
            char ifc[16], tgt[16];
            snprintf(tgt, sizeof tgt, "tor%d", 1 + q / 32);
            snprintf(ifc, sizeof ifc, "Eth1/%d", 1 + q % 32);
            quiet[q] = series(d, tgt, ifc);
        }
        /* Stalls every ~30 min (jittered), 2 s: the culprit surges in each, modestly. */
        struct fs_corr_window w[32];
        size_t nw = 0;
        for (int64_t t = T0 + 600 * S; t < T0 + RANGE - 60 * S; t += 1800 * S) {
            int64_t at = t + (int64_t)((urand() - 0.5) * 60 * S);
            run(d, culprit, at - S, 3 * S, 8 + urand() * 25);
            w[nw++] = (struct fs_corr_window){at, at + 2 * S, 300, nw};
        }
        size_t stalls = nw;
        /* Slow windows without a switch-side cause. */
        for (int k = 0; k < 3; k++) {
            int64_t at = T0 + (int64_t)(urand() * (double)(RANGE - 10 * S));
            w[nw++] = (struct fs_corr_window){at, at + 2 * S, 300, nw};
        }
        /* The backup: every 10 min, strong; it meets a stall now and then. */
        for (int64_t t = T0 + 137 * S; t < T0 + RANGE; t += 600 * S)
            run(d, backup, t, 40 * S, 400);
        /* Quiet ports: random bursts, about one per port per 20 minutes. */
        for (int q = 0; q < QUIET; q++) {
            double t = 0;
            for (;;) {
                t += -log(1 - urand()) * 1200;
                if (t * 1e6 >= (double)RANGE)
                    break;
                run(d, quiet[q], T0 + (int64_t)(t * 1e6), 2 * S, 2000 + urand() * 20000);
            }
        }
        assert_int_equal(fs_departures_finish(d), 0);
        struct fs_corr_report *r = NULL;
        assert_int_equal(fs_correlate(d, w, nw, NULL, &r), 0);
        int first = 0;
        for (size_t i = 0; i < stalls; i++)
            first += r->results[i].n_top > 0 && r->results[i].top[0].series == culprit;
        first_total += first;
        windows_total += (int)stalls;
        assert_true(r->n_aggregates > 0);
        headed += r->aggregates[0].series == culprit;
        for (size_t i = 0; i < stalls; i++)
            if (r->results[i].n_top > 0 && r->results[i].top[0].series == backup)
                fail_msg("seed %d: the backup ranked first in stall window %zu", seed, i);
        fs_corr_report_free(r);
        fs_departures_free(d);
    }
    print_message("culprit first in %d of %d stall windows; heads the summary in %d of %d "
                  "fabrics\n",
                  first_total, windows_total, headed, seeds);
    assert_true(first_total * 100 >= 98 * windows_total);
    assert_int_equal(headed, seeds);
}

static void
test_single_window_falls_back_to_z(void **state)
{
    (void)state;
    struct fs_departures *d = fs_departures_new(NULL, T0, T0 + 100 * S);
    uint32_t a = series(d, "tor1", "Eth1/1"), b = series(d, "tor1", "Eth1/2");
    run(d, a, T0 + 10 * S, 2 * S, 12);
    run(d, b, T0 + 10 * S, 2 * S, 60);
    assert_int_equal(fs_departures_finish(d), 0);
    struct fs_corr_window w = {T0 + 10 * S, T0 + 12 * S, 0, 0};
    struct fs_corr_report *r = NULL;
    assert_int_equal(fs_correlate(d, &w, 1, NULL, &r), 0);
    assert_int_equal(r->results[0].n_top, 2);
    assert_int_equal(r->results[0].top[0].series, b);
    fs_corr_report_free(r);
    fs_departures_free(d);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_busy_culprit_outranks_lucky_quiet_ports_and_backup),
        cmocka_unit_test(test_single_window_falls_back_to_z),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
