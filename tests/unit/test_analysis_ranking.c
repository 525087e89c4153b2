/* Ranking by evidence across stalls in a busy fabric (and cause before effect, ports
 * departing together): a busy culprit port departs at every
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
            w[nw++] = (struct fs_corr_window){at, at + 2 * S, 300, nw, NULL, 0};
        }
        size_t stalls = nw;
        /* Slow windows without a switch-side cause. */
        for (int k = 0; k < 3; k++) {
            int64_t at = T0 + (int64_t)(urand() * (double)(RANGE - 10 * S));
            w[nw++] = (struct fs_corr_window){at, at + 2 * S, 300, nw, NULL, 0};
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
    struct fs_corr_window w = {T0 + 10 * S, T0 + 12 * S, 0, 0, NULL, 0};
    struct fs_corr_report *r = NULL;
    assert_int_equal(fs_correlate(d, &w, 1, NULL, &r), 0);
    assert_int_equal(r->results[0].n_top, 2);
    assert_int_equal(r->results[0].top[0].series, b);
    fs_corr_report_free(r);
    fs_departures_free(d);
}

static uint32_t
series_of(struct fs_departures *d, const char *target, const char *iface, const char *metric,
          enum fs_an_kind kind, const char *direction)
{
    struct fs_an_series_ref ref = {target,
                                   iface,
                                   direction ? "" : "3",
                                   "",
                                   metric,
                                   kind,
                                   10000,
                                   direction ? direction : "",
                                   direction ? "3" : ""};
    uint32_t idx;
    assert_int_equal(fs_departures_add_ref(d, &ref, &idx), 0);
    return idx;
}

/* The index of series s among a window's suspects, or -1. */
static int
rank_of(const struct fs_corr_result *res, uint32_t s)
{
    for (size_t k = 0; k < res->n_top; k++)
        if (res->top[k].series == s)
            return (int)k;
    return -1;
}

#define ECN_M "fabric_queue_ecn_marked_packets_total"
#define QUEUE_M "fabric_queue_depth_max_bytes"
#define PFC_M "fabric_pfc_pause_frames_total"

/* PFC spread from one congested egress port (leaf1 Eth1/5: ECN marks, a busy port, z
 * 16-26, missed in 3 of 14 stalls): leaf1 pauses its uplinks (pause frames sent, z
 * 100-218, in every stall), the spine port facing one of them receives the pauses and its
 * own queue builds and marks (z in the hundreds), and a second leaf's uplink receives the
 * spine's pauses. By evidence alone every victim departs in more stalls than the origin
 * (the tie went to the capped z before); the origin must rank above every victim in each
 * window it departs in and head the summary, the victims marked explained. */
static void
test_origin_above_its_pfc_spread(void **state)
{
    (void)state;
    rng_state = 0xfc00001u;
    struct fs_departures *d = fs_departures_new(NULL, T0, T0 + RANGE);
    uint32_t origin = series_of(d, "leaf1", "Eth1/5", ECN_M, FS_AN_ECN, NULL);
    uint32_t sent[2] = {series_of(d, "leaf1", "Eth1/21", PFC_M, FS_AN_PFC, "tx"),
                        series_of(d, "leaf1", "Eth1/22", PFC_M, FS_AN_PFC, "tx")};
    uint32_t sp_rx = series_of(d, "spine1", "Eth1/1", PFC_M, FS_AN_PFC, "rx");
    uint32_t sp_q = series_of(d, "spine1", "Eth1/1", QUEUE_M, FS_AN_QUEUE, NULL);
    uint32_t sp_ecn = series_of(d, "spine1", "Eth1/1", ECN_M, FS_AN_ECN, NULL);
    uint32_t l2_rx = series_of(d, "leaf2", "Eth1/21", PFC_M, FS_AN_PFC, "rx");
    uint32_t victims[] = {sent[0], sent[1], sp_rx, sp_q, sp_ecn, l2_rx};
    struct fs_corr_window w[14];
    bool departs[14];
    for (int k = 0; k < 14; k++) {
        int64_t at = T0 + 600 * S + k * 1500 * S;
        departs[k] = k % 5 != 2; /* missed in 3 */
        if (departs[k])
            run(d, origin, at - S, 3 * S, 16 + urand() * 10);
        run(d, sent[0], at - S / 2, 3 * S, 100 + urand() * 118);
        run(d, sent[1], at - S / 2, 3 * S, 100 + urand() * 118);
        run(d, sp_rx, at - S / 3, 3 * S, 150 + urand() * 60);
        run(d, sp_q, at - S / 3, 3 * S, 300 + urand() * 100);
        run(d, sp_ecn, at - S / 3, 3 * S, 200 + urand() * 100);
        run(d, l2_rx, at, 3 * S, 90 + urand() * 40);
        w[k] = (struct fs_corr_window){at, at + 2 * S, 300, (size_t)k, NULL, 0};
    }
    assert_int_equal(fs_departures_finish(d), 0);
    struct fs_corr_report *r = NULL;
    assert_int_equal(fs_correlate(d, w, 14, NULL, &r), 0);
    int above = 0, n_dep = 0;
    for (int k = 0; k < 14; k++) {
        const struct fs_corr_result *res = &r->results[k];
        int ro = rank_of(res, origin);
        if (!departs[k])
            continue;
        n_dep++;
        bool ok = ro == 0;
        for (size_t v = 0; v < sizeof victims / sizeof *victims; v++) {
            int rv = rank_of(res, victims[v]);
            ok = ok && (rv < 0 || rv > ro);
            if (rv >= 0)
                assert_true(res->top[rv].explained);
        }
        above += ok;
    }
    print_message("origin first and above its victims in %d of the %d windows it departs in; "
                  "the summary starts with %s\n",
                  above, n_dep, r->aggregates[0].series == origin ? "it" : "a victim");
    assert_int_equal(above, n_dep);
    assert_int_equal(r->aggregates[0].series, origin);
    for (size_t i = 1; i < r->n_aggregates; i++)
        assert_true(r->aggregates[i].explained > 0);
    fs_corr_report_free(r);
    fs_departures_free(d);
}

/* A port paused by something the fabric does not show (a host's NIC, an unwatched
 * switch): nothing explains the pause, and the port's own queue, which built because it
 * was paused, is still the first congestion to be seen: both stay causes. Once another
 * switch is seen sending pauses at the time (its congested port spreading them), the
 * received pause and the paused queue are explained, and that switch's port leads. */
static void
test_pause_from_the_unseen_stays_a_cause(void **state)
{
    (void)state;
    for (int seen = 0; seen < 2; seen++) {
        struct fs_departures *d = fs_departures_new(NULL, T0, T0 + RANGE);
        uint32_t rx = series_of(d, "leaf1", "Eth1/3", PFC_M, FS_AN_PFC, "rx");
        uint32_t q = series_of(d, "leaf1", "Eth1/3", QUEUE_M, FS_AN_QUEUE, NULL);
        uint32_t tx = series_of(d, "spine1", "Eth1/1", PFC_M, FS_AN_PFC, "tx");
        uint32_t origin = series_of(d, "spine1", "Eth1/9", ECN_M, FS_AN_ECN, NULL);
        struct fs_corr_window w[6];
        for (int k = 0; k < 6; k++) {
            int64_t at = T0 + 600 * S + k * 1800 * S;
            run(d, rx, at - S, 3 * S, 40);
            run(d, q, at - S, 3 * S, 900);
            if (seen) {
                run(d, tx, at - S, 3 * S, 300);
                run(d, origin, at - S, 3 * S, 20);
            }
            w[k] = (struct fs_corr_window){at, at + 2 * S, 300, (size_t)k, NULL, 0};
        }
        assert_int_equal(fs_departures_finish(d), 0);
        struct fs_corr_report *r = NULL;
        assert_int_equal(fs_correlate(d, w, 6, NULL, &r), 0);
        for (int k = 0; k < 6; k++) {
            const struct fs_corr_result *res = &r->results[k];
            assert_int_equal(res->top[rank_of(res, rx)].explained, seen);
            assert_int_equal(res->top[rank_of(res, q)].explained, seen);
            if (seen) {
                assert_true(res->top[rank_of(res, tx)].explained);
                assert_int_equal(rank_of(res, origin), 0);
            } else {
                assert_int_equal(rank_of(res, q), 0);
            }
        }
        print_message("pauses %s: leaf1 Eth1/3's queue %s\n",
                      seen ? "seen sent by spine1" : "from nothing seen",
                      seen ? "explained, spine1 Eth1/9 first" : "a cause, first");
        fs_corr_report_free(r);
        fs_departures_free(d);
    }
}

/* The same spread over three hops, with the fabric's links known: leaf1 Eth1/5 congests,
 * leaf1 pauses its uplinks Eth1/21 (to spine1 Eth1/1) and Eth1/22 (to spine2, not
 * watched), spine1 Eth1/1 receives the pauses and its queue builds, spine1 pauses
 * Eth1/2 toward leaf2 Eth1/21, which receives them and queues. Each window's propagation
 * tree names every victim with the departure that explains it, hop by hop from the
 * origin, by onset. leaf3 Eth1/7, cabled to a GPU host (not watched), receives pauses in
 * every other window: with the links nothing seen explains them (the host's NIC sent
 * them), so they are a cause and off the tree; without the links, spine1 sending pauses
 * at the time explained them. */
static void
test_links_trace_the_spread_to_its_origin(void **state)
{
    (void)state;
    struct fs_departures *d = fs_departures_new(NULL, T0, T0 + RANGE);
    uint32_t origin = series_of(d, "leaf1", "Eth1/5", ECN_M, FS_AN_ECN, NULL);
    uint32_t up1 = series_of(d, "leaf1", "Eth1/21", PFC_M, FS_AN_PFC, "tx");
    uint32_t up2 = series_of(d, "leaf1", "Eth1/22", PFC_M, FS_AN_PFC, "tx");
    uint32_t sp_rx = series_of(d, "spine1", "Eth1/1", PFC_M, FS_AN_PFC, "rx");
    uint32_t sp_q = series_of(d, "spine1", "Eth1/1", QUEUE_M, FS_AN_QUEUE, NULL);
    uint32_t sp_tx = series_of(d, "spine1", "Eth1/2", PFC_M, FS_AN_PFC, "tx");
    uint32_t l2_rx = series_of(d, "leaf2", "Eth1/21", PFC_M, FS_AN_PFC, "rx");
    uint32_t l2_q = series_of(d, "leaf2", "Eth1/21", QUEUE_M, FS_AN_QUEUE, NULL);
    uint32_t host_rx = series_of(d, "leaf3", "Eth1/7", PFC_M, FS_AN_PFC, "rx");
    struct fs_corr_window w[8];
    for (int k = 0; k < 8; k++) {
        int64_t at = T0 + 600 * S + k * 1500 * S;
        run(d, origin, at - S, 3 * S, 20);
        run(d, up1, at - S / 2, 3 * S, 150);
        run(d, up2, at - S / 2, 3 * S, 150);
        run(d, sp_rx, at - S / 3, 3 * S, 180);
        run(d, sp_q, at - S / 4, 3 * S, 400);
        run(d, sp_tx, at, 3 * S, 160);
        run(d, l2_rx, at + S / 4, 3 * S, 120);
        run(d, l2_q, at + S / 3, 3 * S, 300);
        if (k % 2)
            run(d, host_rx, at - S / 5, 3 * S, 60);
        w[k] = (struct fs_corr_window){at, at + 2 * S, 300, (size_t)k, NULL, 0};
    }
    assert_int_equal(fs_departures_finish(d), 0);
    const struct fs_an_link links[] = {
        {"leaf1", "Eth1/21", "spine1", "Eth1/1", true, true},
        {"leaf1", "Eth1/22", "spine2", "Eth1/1", true, true},
        {"spine1", "Eth1/2", "leaf2", "Eth1/21", true, true},
        {"leaf3", "Eth1/7", "gpu07", "mlx5_0", true, false},
    };
    /* Each victim, what explains it, its hops from the origin. */
    const uint32_t want[][3] = {{up1, origin, 1}, {up2, origin, 1}, {sp_rx, up1, 2},
                                {sp_q, sp_rx, 3}, {sp_tx, sp_q, 4}, {l2_rx, sp_tx, 5},
                                {l2_q, l2_rx, 6}};
    const size_t n_want = sizeof want / sizeof want[0];
    for (int known = 0; known < 2; known++) {
        struct fs_corr_opts o;
        fs_corr_opts_default(&o);
        o.links = known ? links : NULL;
        o.n_links = known ? sizeof links / sizeof links[0] : 0;
        struct fs_corr_report *r = NULL;
        assert_int_equal(fs_correlate(d, w, 8, &o, &r), 0);
        size_t edges_right = 0;
        for (int k = 0; k < 8; k++) {
            const struct fs_corr_result *res = &r->results[k];
            assert_int_equal(rank_of(res, origin), 0);
            for (size_t e = 0; e + 1 < res->n_tree; e++)
                assert_true(res->tree[e].onset_us <= res->tree[e + 1].onset_us);
            for (size_t e = 0; e < res->n_tree; e++)
                assert_int_not_equal(res->tree[e].series, host_rx);
            for (size_t v = 0; v < n_want; v++)
                for (size_t e = 0; e < res->n_tree; e++)
                    if (res->tree[e].series == want[v][0])
                        edges_right +=
                            res->tree[e].paused_by == want[v][1] && res->tree[e].hop == want[v][2];
            if (known) {
                assert_int_equal(res->n_tree, n_want);
                assert_int_equal(res->tree_total, n_want);
            }
            int rh = rank_of(res, host_rx);
            if (rh >= 0)
                assert_int_equal(res->top[rh].explained, !known);
        }
        print_message("links %s: %zu of the %zu victim edges right over 8 windows\n",
                      known ? "known" : "unknown", edges_right, 8 * n_want);
        if (known)
            assert_int_equal(edges_right, 8 * n_want);
        else /* without them a received pause names nothing: the tree stops at the leaf */
            assert_true(edges_right < 8 * n_want);
        fs_corr_report_free(r);
    }
    fs_departures_free(d);
}

/* The origin of a recurring stall (leaf1 Eth1/5, ECN at each of 10 stalls every 30 min)
 * is paused twice by an unrelated burst's spread (spine1 sends pauses, leaf1 Eth1/5
 * receives them): once during a stall, once in a slow window between stalls, where a
 * quiet port (leaf3 Eth1/9) also bursts. Paused, the origin's marks are explained, and an
 * explained suspect comes after the window's unexplained ones whatever its evidence: the
 * window between stalls is not blamed on it. In the stall window the origin leads again
 * once its recurring train is known (it is on it); without the train it cannot be told
 * from the paused victim it is there. */
static void
test_paused_origin_leads_only_on_its_train(void **state)
{
    (void)state;
    struct fs_departures *d = fs_departures_new(NULL, T0, T0 + RANGE);
    uint32_t origin = series_of(d, "leaf1", "Eth1/5", ECN_M, FS_AN_ECN, NULL);
    uint32_t rx = series_of(d, "leaf1", "Eth1/5", PFC_M, FS_AN_PFC, "rx");
    uint32_t tx = series_of(d, "spine1", "Eth1/1", PFC_M, FS_AN_PFC, "tx");
    uint32_t quiet = series_of(d, "leaf3", "Eth1/9", ECN_M, FS_AN_ECN, NULL);
    struct fs_corr_window w[11];
    const int paused_stall = 6;
    int64_t last = 0;
    for (int k = 0; k < 10; k++) {
        int64_t at = T0 + 600 * S + k * 1800 * S;
        run(d, origin, at - S, 3 * S, 30);
        if (k == paused_stall) {
            run(d, rx, at - S, 3 * S, 200);
            run(d, tx, at - S, 3 * S, 300);
            run(d, quiet, at - S, 3 * S, 50);
        }
        w[k] = (struct fs_corr_window){at, at + 2 * S, 300, (size_t)k, NULL, 0};
        last = at - S;
    }
    int64_t between = T0 + 600 * S + 3 * 1800 * S + 700 * S; /* 700 s past a stall */
    run(d, origin, between - S, 3 * S, 25);
    run(d, rx, between - S, 3 * S, 200);
    run(d, tx, between - S, 3 * S, 300);
    run(d, quiet, between - S, 3 * S, 50);
    w[10] = (struct fs_corr_window){between, between + 2 * S, 300, 10, NULL, 0};
    assert_int_equal(fs_departures_finish(d), 0);
    struct fs_corr_train *trains = calloc(d->n_series, sizeof *trains);
    trains[origin] = (struct fs_corr_train){last + 1800 * S, 1800.0 * S, 40 * S};
    for (int known = 0; known < 2; known++) {
        struct fs_corr_opts o;
        fs_corr_opts_default(&o);
        o.trains = known ? trains : NULL;
        struct fs_corr_report *r = NULL;
        assert_int_equal(fs_correlate(d, w, 11, &o, &r), 0);
        const struct fs_corr_result *st = &r->results[paused_stall], *bw = &r->results[10];
        assert_true(st->top[rank_of(st, origin)].explained);
        assert_true(bw->top[rank_of(bw, origin)].explained);
        assert_true(rank_of(bw, origin) > 0);
        assert_true(known ? rank_of(st, origin) == 0 : rank_of(st, origin) > 0);
        for (int k = 0; k < 10; k++)
            if (k != paused_stall)
                assert_int_equal(rank_of(&r->results[k], origin), 0);
        assert_int_equal(r->aggregates[0].series, origin);
        print_message("train %s: the origin ranks %d in the paused stall, %d in the window "
                      "between stalls\n",
                      known ? "known" : "unknown", rank_of(st, origin) + 1,
                      rank_of(bw, origin) + 1);
        fs_corr_report_free(r);
    }
    free(trains);
    fs_departures_free(d);
}

/* The four uplinks of a leaf (an ECMP bundle) congest together at every stall, the
 * first carrying twice the others' excess; a fifth port of that leaf departs in half of
 * the stalls only. The four are one suspect group (listed once, led by the largest
 * share, shares summing to 1); the fifth stays apart. */
static void
test_ports_departing_together_are_one_group(void **state)
{
    (void)state;
    struct fs_departures *d = fs_departures_new(NULL, T0, T0 + RANGE);
    uint32_t up[4], other = series_of(d, "leaf1", "Eth1/3", ECN_M, FS_AN_ECN, NULL);
    for (int u = 0; u < 4; u++) {
        char ifc[16];
        snprintf(ifc, sizeof ifc, "Eth1/%d", 61 + u);
        up[u] = series_of(d, "leaf1", ifc, ECN_M, FS_AN_ECN, NULL);
    }
    struct fs_corr_window w[10];
    for (int k = 0; k < 10; k++) {
        int64_t at = T0 + 600 * S + k * 1800 * S;
        for (int u = 0; u < 4; u++)
            run(d, up[u], at - S, 3 * S, u == 0 ? 40 : 20);
        if (k % 2)
            run(d, other, at - S, 3 * S, 30);
        w[k] = (struct fs_corr_window){at, at + 2 * S, 300, (size_t)k, NULL, 0};
    }
    assert_int_equal(fs_departures_finish(d), 0);
    struct fs_corr_report *r = NULL;
    assert_int_equal(fs_correlate(d, w, 10, NULL, &r), 0);
    assert_int_equal(r->n_groups, 1);
    const struct fs_corr_group *g = &r->groups[0];
    assert_int_equal(g->n, 4);
    assert_int_equal(g->series[0], up[0]);
    double sum = 0;
    for (size_t k = 0; k < g->n; k++)
        sum += g->share[k];
    assert_true(fabs(sum - 1) < 1e-9);
    assert_true(fabs(g->share[0] - 0.4) < 0.01);
    /* Listed once: one aggregate leads it, the others are grouped. */
    size_t leading = 0, grouped = 0;
    for (size_t i = 0; i < r->n_aggregates; i++) {
        if (r->aggregates[i].series == other)
            assert_int_equal(r->aggregates[i].group, -1);
        if (r->aggregates[i].group == 0) {
            leading += !r->aggregates[i].grouped;
            grouped += r->aggregates[i].grouped;
        }
    }
    assert_int_equal(leading, 1);
    assert_int_equal(grouped, 3);
    for (int k = 0; k < 10; k++) { /* a window lists the group once */
        const struct fs_corr_result *res = &r->results[k];
        size_t members = 0;
        for (size_t i = 0; i < res->n_top; i++)
            members += res->top[i].group == 0;
        assert_int_equal(members, 1);
        assert_int_equal(res->top[0].group, 0);
    }
    print_message("4 uplinks in one group, shares %.2f %.2f %.2f %.2f\n", g->share[0], g->share[1],
                  g->share[2], g->share[3]);
    fs_corr_report_free(r);
    fs_departures_free(d);
}

/* With the links, an ECMP bundle is known, not guessed from timing: two uplinks of leaf1
 * (to spine1 and spine2) each depart in 6 of 10 stalls, together in 4 (two thirds of
 * each other's windows: too few to be told a bundle by timing alone), and two of its
 * host ports congest together in every stall (a job's two ranks). Without the links the
 * host ports are one group and the uplinks two suspects; with them the uplinks are the
 * group and the host ports two suspects. */
static void
test_bundle_known_from_links(void **state)
{
    (void)state;
    struct fs_departures *d = fs_departures_new(NULL, T0, T0 + RANGE);
    uint32_t up1 = series_of(d, "leaf1", "Eth1/61", ECN_M, FS_AN_ECN, NULL);
    uint32_t up2 = series_of(d, "leaf1", "Eth1/62", ECN_M, FS_AN_ECN, NULL);
    uint32_t h1 = series_of(d, "leaf1", "Eth1/1", ECN_M, FS_AN_ECN, NULL);
    uint32_t h2 = series_of(d, "leaf1", "Eth1/2", ECN_M, FS_AN_ECN, NULL);
    struct fs_corr_window w[10];
    for (int k = 0; k < 10; k++) {
        int64_t at = T0 + 600 * S + k * 1800 * S;
        if (k < 6)
            run(d, up1, at - S, 3 * S, 30);
        if (k >= 2 && k < 8)
            run(d, up2, at - S, 3 * S, 30);
        run(d, h1, at - S, 3 * S, 20);
        run(d, h2, at - S, 3 * S, 20);
        w[k] = (struct fs_corr_window){at, at + 2 * S, 300, (size_t)k, NULL, 0};
    }
    assert_int_equal(fs_departures_finish(d), 0);
    const struct fs_an_link links[] = {
        {"leaf1", "Eth1/61", "spine1", "Eth1/1", true, true},
        {"leaf1", "Eth1/62", "spine2", "Eth1/1", true, true},
        {"leaf1", "Eth1/1", "gpu01", "eth0", true, false},
        {"leaf1", "Eth1/2", "gpu02", "eth0", true, false},
    };
    for (int known = 0; known < 2; known++) {
        struct fs_corr_opts o;
        fs_corr_opts_default(&o);
        o.links = known ? links : NULL;
        o.n_links = known ? 4 : 0;
        struct fs_corr_report *r = NULL;
        assert_int_equal(fs_correlate(d, w, 10, &o, &r), 0);
        assert_int_equal(r->n_groups, 1);
        const struct fs_corr_group *g = &r->groups[0];
        assert_int_equal(g->n, 2);
        bool uplinks = (g->series[0] == up1 || g->series[0] == up2) &&
                       (g->series[1] == up1 || g->series[1] == up2);
        bool hosts = (g->series[0] == h1 || g->series[0] == h2) &&
                     (g->series[1] == h1 || g->series[1] == h2);
        assert_true(known ? uplinks : hosts);
        print_message("links %s: the group is leaf1's %s\n", known ? "known" : "unknown",
                      uplinks ? "uplinks" : "host ports");
        fs_corr_report_free(r);
    }
    fs_departures_free(d);
}

/* Slow ranks on known hosts (gpu01, gpu02 behind leaf1; gpu03.pod1 behind leaf2, its
 * event naming it by FQDN): the path is their switch ports, their leaves' uplinks and the
 * spine ports at the uplinks' other ends; leaf3 (another tenant's hosts) is off it.
 * A: the job's origin, leaf2 Eth1/1 (ECN toward gpu03, z 20), and another tenant's incast
 * on leaf3 Eth1/4 (z 60) at every stall: equal evidence, so without the path the higher z
 * leads every window; with it the origin leads, the other is listed, marked off the path.
 * B: an off-path PFC origin (leaf3 Eth1/5, toward db02) whose pauses spread through
 * spine1 onto leaf1's uplink (on the path) is on the path by its tree and leads, above an
 * unspread off-path incast (leaf3 Eth1/9, z 80) and its own victims. */
static void
test_slow_ranks_paths_first(void **state)
{
    (void)state;
    const struct fs_an_link links[] = {
        {"leaf1", "Eth1/1", "gpu01", "eth0", true, false},
        {"leaf1", "Eth1/2", "gpu02", "eth0", true, false},
        {"leaf2", "Eth1/1", "gpu03", "eth0", true, false},
        {"leaf3", "Eth1/4", "db01", "eth0", true, false},
        {"leaf3", "Eth1/5", "db02", "eth0", true, false},
        {"leaf3", "Eth1/9", "db03", "eth0", true, false},
        {"leaf1", "Eth1/21", "spine1", "Eth1/1", true, true},
        {"leaf2", "Eth1/21", "spine1", "Eth1/2", true, true},
        {"leaf3", "Eth1/21", "spine1", "Eth1/3", true, true},
    };
    const size_t n_links = sizeof links / sizeof links[0];
    const char *hosts[] = {"gpu02", "gpu03.pod1", "gpu01", "nosuchhost"};
    struct fs_an_port *path = NULL;
    size_t n_path = 0;
    assert_int_equal(fs_an_path_ports(links, n_links, hosts, 4, &path, &n_path), 0);
    const struct fs_an_port want[] = {
        {"leaf1", "Eth1/1"},  {"leaf1", "Eth1/2"},  {"leaf1", "Eth1/21"}, {"leaf2", "Eth1/1"},
        {"leaf2", "Eth1/21"}, {"spine1", "Eth1/1"}, {"spine1", "Eth1/2"}};
    assert_int_equal(n_path, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < n_path; i++) {
        assert_string_equal(path[i].node, want[i].node);
        assert_string_equal(path[i].port, want[i].port);
    }

    /* A */
    struct fs_departures *d = fs_departures_new(NULL, T0, T0 + RANGE);
    uint32_t origin = series_of(d, "leaf2", "Eth1/1", ECN_M, FS_AN_ECN, NULL);
    uint32_t other = series_of(d, "leaf3", "Eth1/4", ECN_M, FS_AN_ECN, NULL);
    struct fs_corr_window w[8];
    for (int k = 0; k < 8; k++) {
        int64_t at = T0 + 600 * S + k * 1500 * S;
        run(d, origin, at - S / 2, 3 * S, 20);
        run(d, other, at - S / 2, 3 * S, 60);
        w[k] = (struct fs_corr_window){at, at + 2 * S, 300, (size_t)k, NULL, 0};
    }
    assert_int_equal(fs_departures_finish(d), 0);
    for (int known = 0; known < 2; known++) {
        struct fs_corr_opts o;
        fs_corr_opts_default(&o);
        o.links = links;
        o.n_links = n_links;
        for (int k = 0; k < 8; k++) {
            w[k].path = known ? path : NULL;
            w[k].n_path = known ? n_path : 0;
        }
        struct fs_corr_report *r = NULL;
        assert_int_equal(fs_correlate(d, w, 8, &o, &r), 0);
        int led = 0;
        for (int k = 0; k < 8; k++) {
            const struct fs_corr_result *res = &r->results[k];
            int ro = rank_of(res, origin), rt = rank_of(res, other);
            assert_true(ro >= 0 && rt >= 0);
            led += ro == 0;
            assert_int_equal(res->top[ro].on_path, known ? 1 : -1);
            assert_int_equal(res->top[rt].on_path, known ? 0 : -1);
            assert_int_equal(res->window.n_path, known ? n_path : 0);
        }
        print_message("A, path %s: the job's origin led %d of 8 windows, the summary %s\n",
                      known ? "known" : "unknown", led,
                      r->aggregates[0].series == origin ? "too" : "not");
        assert_int_equal(led, known ? 8 : 0);
        /* off the path, the other tenant's departures are no evidence */
        if (known)
            assert_int_equal(r->aggregates[0].series, origin);
        fs_corr_report_free(r);
    }
    fs_departures_free(d);

    /* B */
    d = fs_departures_new(NULL, T0, T0 + RANGE);
    uint32_t pfc_origin = series_of(d, "leaf3", "Eth1/5", ECN_M, FS_AN_ECN, NULL);
    uint32_t l3_tx = series_of(d, "leaf3", "Eth1/21", PFC_M, FS_AN_PFC, "tx");
    uint32_t sp_rx = series_of(d, "spine1", "Eth1/3", PFC_M, FS_AN_PFC, "rx");
    uint32_t sp_q = series_of(d, "spine1", "Eth1/3", QUEUE_M, FS_AN_QUEUE, NULL);
    uint32_t sp_tx = series_of(d, "spine1", "Eth1/1", PFC_M, FS_AN_PFC, "tx");
    uint32_t l1_rx = series_of(d, "leaf1", "Eth1/21", PFC_M, FS_AN_PFC, "rx");
    uint32_t incast = series_of(d, "leaf3", "Eth1/9", ECN_M, FS_AN_ECN, NULL);
    for (int k = 0; k < 8; k++) {
        int64_t at = T0 + 600 * S + k * 1500 * S;
        run(d, pfc_origin, at - S, 3 * S, 20);
        run(d, l3_tx, at - S / 2, 3 * S, 150);
        run(d, sp_rx, at - S / 3, 3 * S, 180);
        run(d, sp_q, at - S / 4, 3 * S, 400);
        run(d, sp_tx, at, 3 * S, 160);
        run(d, l1_rx, at + S / 4, 3 * S, 120);
        run(d, incast, at - S / 2, 3 * S, 80);
        w[k] = (struct fs_corr_window){at, at + 2 * S, 300, (size_t)k, NULL, 0};
    }
    assert_int_equal(fs_departures_finish(d), 0);
    for (int known = 0; known < 2; known++) {
        struct fs_corr_opts o;
        fs_corr_opts_default(&o);
        o.links = links;
        o.n_links = n_links;
        for (int k = 0; k < 8; k++) {
            w[k].path = known ? path : NULL;
            w[k].n_path = known ? n_path : 0;
        }
        struct fs_corr_report *r = NULL;
        assert_int_equal(fs_correlate(d, w, 8, &o, &r), 0);
        int led = 0;
        for (int k = 0; k < 8; k++) {
            const struct fs_corr_result *res = &r->results[k];
            int ro = rank_of(res, pfc_origin), ri = rank_of(res, incast);
            /* with the path, the five on it (origin and tree) fill the list */
            assert_true(ro >= 0 && (known || ri >= 0));
            led += ro == 0;
            if (known) {
                assert_int_equal(res->top[ro].on_path, 1);
                if (ri >= 0)
                    assert_int_equal(res->top[ri].on_path, 0);
                /* the victims on its way to the path are the origin's tree */
                assert_true(res->tree_total >= 4);
            }
            int rv = rank_of(res, l1_rx);
            if (known && rv >= 0)
                assert_int_equal(res->top[rv].on_path, 1);
        }
        print_message("B, path %s: the off-path PFC origin led %d of 8 windows\n",
                      known ? "known" : "unknown", led);
        assert_int_equal(led, known ? 8 : 0);
        fs_corr_report_free(r);
    }
    fs_departures_free(d);
    free(path);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_busy_culprit_outranks_lucky_quiet_ports_and_backup),
        cmocka_unit_test(test_single_window_falls_back_to_z),
        cmocka_unit_test(test_origin_above_its_pfc_spread),
        cmocka_unit_test(test_pause_from_the_unseen_stays_a_cause),
        cmocka_unit_test(test_links_trace_the_spread_to_its_origin),
        cmocka_unit_test(test_paused_origin_leads_only_on_its_train),
        cmocka_unit_test(test_ports_departing_together_are_one_group),
        cmocka_unit_test(test_bundle_known_from_links),
        cmocka_unit_test(test_slow_ranks_paths_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
