/* Departures, episodes, recurrences and correlation on synthetic fabrics: one port
 * surges for 2 s every 30 s among many noisy series; slow host windows during the
 * surges must name it, windows elsewhere must not. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "analysis/correlate.h"
#include "analysis/incidents.h"

#define S 1000000LL
#define T0 (1796236354LL * S)
#define HIST (300 * S)  /* baseline history before the range */
#define RANGE (600 * S) /* analysed range */
#define NPTS ((HIST + RANGE) / S)
#define PHASE (7300000LL) /* first surge at T0 + HIST + 7.3 s */
#define PERIOD (30 * S)

static uint64_t rng_state;

static double
urand(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

static double
gauss(void)
{
    double u = urand(), v = urand();
    return sqrt(-2 * log(u + 1e-300)) * cos(2 * M_PI * v);
}

static bool
in_surge(int64_t t)
{
    int64_t rel = t - (T0 + HIST + PHASE);
    if (rel < -HIST)
        return false;
    int64_t m = ((rel % PERIOD) + PERIOD) % PERIOD;
    return m < 2 * S;
}

/* Decoy bursts: non-periodic, on tor2 Eth1/3. */
static const int64_t decoy_at[] = {41 * S, 95 * S, 230 * S, 244 * S, 402 * S, 555 * S};

static bool
in_decoy(int64_t t)
{
    for (size_t i = 0; i < sizeof decoy_at / sizeof decoy_at[0]; i++) {
        int64_t s = T0 + HIST + decoy_at[i];
        if (t >= s && t < s + 3 * S)
            return true;
    }
    return false;
}

struct fixture {
    int64_t ts[NPTS];
    double v[NPTS];
    struct fs_departures *d;
};

static void
feed(struct fs_departures *d, int64_t *ts, double *v, const char *target, const char *iface,
     const char *metric, enum fs_an_kind kind, bool rate, double floor)
{
    struct fs_an_series s = {.target = target,
                             .interface = iface,
                             .metric = metric,
                             .kind = kind,
                             .is_rate = rate,
                             .ts_us = ts,
                             .v = v,
                             .n = NPTS,
                             .abs_floor = floor,
                             .time_uncertainty_us = 2000};
    assert_int_equal(fs_departures_add(d, &s), 0);
}

static void
build(struct fixture *f)
{
    rng_state = 42;
    f->d = fs_departures_new(NULL, T0 + HIST, T0 + HIST + RANGE);
    assert_non_null(f->d);
    char target[32], iface[32];
    for (int i = 0; i < NPTS; i++) /* 1 s polls with up to 20 ms of jitter */
        f->ts[i] = T0 + i * S + (int64_t)(urand() * 20000);
    for (int k = 0; k < 2000; k++) {
        snprintf(target, sizeof target, "tor%d", 1 + k / 64);
        snprintf(iface, sizeof iface, "Eth1/%d", 1 + k % 64);
        if (strcmp(target, "tor1") == 0 && strcmp(iface, "Eth1/49") == 0)
            continue;
        int cls = k % 4;
        for (int i = 0; i < NPTS; i++) {
            double x = cls == 0   ? 1000 + 50 * gauss()
                       : cls == 1 ? 0
                       : cls == 2 ? fabs(2e5 + 2e4 * gauss())
                                  : (urand() < 0.01 ? 5 : 0); /* stray marks */
            if (strcmp(target, "tor2") == 0 && strcmp(iface, "Eth1/3") == 0 && in_decoy(f->ts[i]))
                x += 5e5;
            f->v[i] = x;
        }
        feed(f->d, f->ts, f->v, target, iface,
             cls == 2 ? "fabric_queue_depth_bytes" : "fabric_queue_ecn_marked_packets_total",
             cls == 2 ? FS_AN_QUEUE : FS_AN_ECN, cls != 2, cls == 2 ? 10000 : 10);
    }
    /* The culprit: ECN marks and queue depth on tor1 Eth1/49. A rate sample at ts[i]
       covers (ts[i-1], ts[i]]; it carries the surge when the surge overlaps it. */
    for (int i = 0; i < NPTS; i++) {
        bool hit = in_surge(f->ts[i]) || (i > 0 && in_surge(f->ts[i - 1] + S / 2));
        f->v[i] = 100 + 10 * gauss() + (hit ? 5e4 : 0);
    }
    feed(f->d, f->ts, f->v, "tor1", "Eth1/49", "fabric_queue_ecn_marked_packets_total", FS_AN_ECN,
         true, 10);
    for (int i = 0; i < NPTS; i++)
        f->v[i] = fabs(5e3 + 1e3 * gauss()) + (in_surge(f->ts[i]) ? 8e6 : 0);
    feed(f->d, f->ts, f->v, "tor1", "Eth1/49", "fabric_queue_depth_bytes", FS_AN_QUEUE, false,
         10000);
    assert_int_equal(fs_departures_finish(f->d), 0);
}

static int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    build(f);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;
    fs_departures_free(f->d);
    free(f);
    return 0;
}

static bool
is_culprit(const struct fs_departures *d, uint32_t s)
{
    return strcmp(d->series[s].target, "tor1") == 0 &&
           strcmp(d->series[s].interface, "Eth1/49") == 0;
}

static void
test_recurring_surge_period_and_next(void **state)
{
    struct fixture *f = *state;
    struct fs_incident_report *r = NULL;
    int64_t now = T0 + HIST + RANGE;
    assert_int_equal(fs_incidents_find(f->d, now, &r), 0);
    assert_true(r->n_episodes >= 20);
    assert_true(r->n_groups >= 1);
    const struct fs_recurrence *g = &r->groups[0];
    bool culprit = false;
    for (size_t i = 0; i < g->n_series; i++)
        culprit |= is_culprit(f->d, g->series[i]);
    assert_true(culprit);
    for (size_t i = 0; i < g->n_series; i++) /* and only the culprit's port */
        assert_true(is_culprit(f->d, g->series[i]));
    print_message("period %.3f s ± %.3f s over %zu occurrences, %zu episodes, %zu groups\n",
                  g->period_us / 1e6, g->spread_us / 1e6, g->occurrences, r->n_episodes,
                  r->n_groups);
    assert_true(fabs(g->period_us - (double)PERIOD) <= 1e6);
    assert_true(g->occurrences >= 18);
    /* The next surge after `now`. */
    int64_t first = T0 + HIST + PHASE, next = first;
    while (next <= now)
        next += PERIOD;
    print_message("next predicted %+.3f s from the truth\n", (double)(g->next_us - next) / 1e6);
    assert_true(llabs(g->next_us - next) <= S);
    assert_true(g->kinds & (1u << FS_AN_ECN));
    assert_true(g->kinds & (1u << FS_AN_QUEUE));
    /* The decoy is not a recurring group. */
    for (size_t k = 0; k < r->n_groups; k++)
        for (size_t i = 0; i < r->groups[k].n_series; i++) {
            const struct fs_an_series_ref *s = &f->d->series[r->groups[k].series[i]];
            assert_false(strcmp(s->target, "tor2") == 0 && strcmp(s->interface, "Eth1/3") == 0);
        }
    fs_incident_report_free(r);
}

static void
test_correlate_names_culprit_only_during_surges(void **state)
{
    struct fixture *f = *state;
    struct fs_corr_window w[40];
    size_t n = 0;
    /* One slow window inside each surge, and random ones away from surges and decoys. */
    for (int k = 0; k < 19; k++) {
        int64_t s = T0 + HIST + PHASE + k * PERIOD + 300000;
        w[n++] = (struct fs_corr_window){s, s + 1200000, 5000, (size_t)k, NULL, 0};
    }
    size_t n_surge = n;
    rng_state = 9;
    while (n < 35) {
        int64_t s = T0 + HIST + 10 * S + (int64_t)(urand() * (double)(RANGE - 20 * S));
        bool near = false;
        for (int64_t t = s - 6 * S; t <= s + 8 * S; t += S / 4)
            near |= in_surge(t) || in_decoy(t);
        if (near)
            continue;
        w[n] = (struct fs_corr_window){s, s + 1200000, 5000, n, NULL, 0};
        n++;
    }
    struct fs_corr_report *r = NULL;
    assert_int_equal(fs_correlate(f->d, w, n, NULL, &r), 0);
    assert_int_equal(r->n_results, n);
    size_t named = 0;
    for (size_t i = 0; i < n_surge; i++) {
        if (r->results[i].n_top > 0 && is_culprit(f->d, r->results[i].top[0].series))
            named++;
        if (r->results[i].n_top > 0) {
            int64_t lag = r->results[i].top[0].lag_us;
            assert_true(lag > -3 * S && lag < 3 * S);
        }
    }
    print_message("culprit first in %zu of %zu surge windows\n", named, n_surge);
    assert_true(named * 10 >= n_surge * 9);
    for (size_t i = n_surge; i < n; i++)
        for (size_t k = 0; k < r->results[i].n_top; k++)
            assert_false(is_culprit(f->d, r->results[i].top[k].series));
    assert_true(r->n_aggregates >= 1);
    assert_true(is_culprit(f->d, r->aggregates[0].series));
    assert_true(r->aggregates[0].first >= named);
    fs_corr_report_free(r);
}

/* Past FS_AN_Z_SURE every suspect is certain: the most specific series comes first
 * (queue, then port, then flow rule), whatever the exact z; a smaller but uncertain
 * departure of a queue ranks after them all. */
static void
test_correlate_ranks_certain_suspects_by_specificity(void **state)
{
    (void)state;
    enum { N = 400 };
    static int64_t ts[N];
    static double v[N];
    struct fs_departures *d = fs_departures_new(NULL, T0 + 200 * S, T0 + N * S);
    assert_non_null(d);
    for (int i = 0; i < N; i++)
        ts[i] = T0 + i * S;
    struct {
        const char *iface, *tc, *rule;
        double peak; /* over a baseline of 0 with a floor of 10: z = peak / 10 */
    } sr[] = {
        {"", "", "nccl", 2.3e5},     /* flow rule: the largest z */
        {"Eth1/49", "", "", 2.1e5},  /* port */
        {"Eth1/49", "3", "", 2.0e5}, /* queue: the smallest z of the certain ones */
        {"Eth1/2", "3", "", 250},    /* queue, z = 25: departed, not certain */
    };
    for (size_t k = 0; k < sizeof sr / sizeof sr[0]; k++) {
        for (int i = 0; i < N; i++)
            v[i] = (i >= 300 && i < 302) ? sr[k].peak : 0;
        struct fs_an_series a = {.target = "tor1",
                                 .interface = sr[k].iface,
                                 .tc = sr[k].tc,
                                 .rule = sr[k].rule,
                                 .metric = "fabric_queue_ecn_marked_packets_total",
                                 .kind = FS_AN_ECN,
                                 .is_rate = true,
                                 .ts_us = ts,
                                 .v = v,
                                 .n = N,
                                 .abs_floor = 10,
                                 .time_uncertainty_us = 2000};
        assert_int_equal(fs_departures_add(d, &a), 0);
    }
    assert_int_equal(fs_departures_finish(d), 0);
    struct fs_corr_window w = {T0 + 300 * S, T0 + 301 * S, 5000, 0, NULL, 0};
    struct fs_corr_report *r = NULL;
    assert_int_equal(fs_correlate(d, &w, 1, NULL, &r), 0);
    assert_int_equal(r->results[0].n_top, 4);
    const char *want_iface[] = {"Eth1/49", "Eth1/49", "", "Eth1/2"};
    const char *want_tc[] = {"3", "", "", "3"};
    for (size_t k = 0; k < 4; k++) {
        const struct fs_an_series_ref *ref = &d->series[r->results[0].top[k].series];
        assert_string_equal(ref->interface, want_iface[k]);
        assert_string_equal(ref->tc, want_tc[k]);
    }
    assert_true(r->results[0].top[2].peak_z > r->results[0].top[0].peak_z);
    assert_true(r->results[0].top[3].peak_z < FS_AN_Z_SURE);
    fs_corr_report_free(r);
    /* /incidents names an episode's series in the same order. */
    struct fs_incident_report *ir = NULL;
    assert_int_equal(fs_incidents_find(d, T0 + N * S, &ir), 0);
    bool seen = false;
    for (size_t e = 0; e < ir->n_episodes; e++) {
        const struct fs_episode *ep = &ir->episodes[e];
        for (size_t m = 1; m < ep->n_members; m++)
            assert_true(fs_an_rank_cmp(ep->members[m - 1].peak_z, ep->members[m - 1].specificity,
                                       ep->members[m].peak_z, ep->members[m].specificity) <= 0);
        if (ep->n_members > 0 && d->series[ep->members[0].series].rule[0] == '\0' &&
            strcmp(d->series[ep->members[0].series].tc, "3") == 0 &&
            strcmp(d->series[ep->members[0].series].interface, "Eth1/49") == 0)
            seen = true;
    }
    assert_true(seen); /* the queue, not the flow rule with the larger z, leads its episode */
    fs_incident_report_free(ir);
    fs_departures_free(d);
}

static void
test_counter_rates_and_slow_marking(void **state)
{
    (void)state;
    int64_t ts[4] = {0, 1000000, 1000000, 3000000};
    uint64_t u[4] = {10, 110, 110, 50}; /* a duplicate timestamp, then a decrease */
    int64_t ots[4];
    double ov[4];
    assert_int_equal(fs_an_counter_rates(ts, u, 4, 1.0, ots, ov), 2);
    assert_true(ots[0] == 1000000 && ov[0] == 100.0);
    assert_true(ots[1] == 3000000 && ov[1] == 0.0);

    int64_t dur[10] = {10, 11, 10, 12, 10, 50, 10, 11, 300, 10};
    size_t grp[10] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 0};
    bool slow[10];
    assert_int_equal(fs_corr_mark_slow(dur, grp, 10, 80, 0, slow), 0);
    for (int i = 0; i < 10; i++) /* only 50 is above p80 (12) of group 0; group 1 is too small */
        assert_int_equal(slow[i], i == 5);
    assert_int_equal(fs_corr_mark_slow(dur, grp, 10, 0, 1.15, slow), 0);
    for (int i = 0; i < 10; i++) /* above 1.15 x median (10) */
        assert_int_equal(slow[i], i == 3 || i == 5);
    enum fs_an_kind k;
    bool counter;
    double floor;
    assert_true(fs_an_classify("fabric_pfc_pause_frames_total", &k, &counter, &floor));
    assert_int_equal(k, FS_AN_PFC);
    assert_true(counter);
    assert_false(fs_an_classify("fabric_port_bytes_total", &k, &counter, &floor));
}

/* A counter in steps (a sampled estimate: 10,000 packets a sample) gets one step per
   interval as its floor, so one stray sample on a quiet series does not depart while a
   surge of many samples does; an exact counter keeps the metric's floor. */
static void
test_counter_step_floor(void **state)
{
    (void)state;
    struct fs_an_step st = {0};
    fs_an_step_add(&st, 0); /* no increase: ignored */
    fs_an_step_add(&st, 20000);
    fs_an_step_add(&st, 10000);
    fs_an_step_add(&st, 30000);
    assert_true(st.g == 10000 && st.n_inc == 3);
    /* too few increases for a step */
    assert_true(fs_an_step_floor(&st, 10, 0, 10 * S, 11, 1.0) == 10);
    fs_an_step_add(&st, 10000);
    assert_true(fs_an_step_floor(&st, 10, 0, 10 * S, 11, 1.0) == 10000); /* 1 s apart */
    assert_true(fs_an_step_floor(&st, 10, 0, 5 * S, 11, 2.0) == 40000);  /* 0.5 s, scale 2 */
    struct fs_an_step ex = {0};
    uint64_t inc[6] = {1000, 1003, 998, 2001, 1000, 997};
    for (int i = 0; i < 6; i++)
        fs_an_step_add(&ex, inc[i]);
    assert_true(ex.g == 1 && fs_an_step_floor(&ex, 10, 0, 10 * S, 11, 1.0) == 10);

    /* A quiet series at zero with one stray sample and a 3-interval surge of 10 samples
       each (1 in 10,000, 1 s apart): only the surge departs with the step's floor. */
    enum { N = 120 };
    int64_t ts[N], rts[N];
    uint64_t u[N];
    double v[N];
    uint64_t acc = 0;
    struct fs_an_step sp = {0};
    for (int i = 0; i < N; i++) {
        ts[i] = T0 + i * S;
        uint64_t k = (i % 7 == 3) ? 1 : (i >= 80 && i < 83) ? 10 : 0;
        if (i)
            fs_an_step_add(&sp, k * 10000);
        acc += k * 10000;
        u[i] = acc;
    }
    size_t m = fs_an_counter_rates(ts, u, N, 1.0, rts, v);
    double floor = fs_an_step_floor(&sp, 10, ts[0], ts[N - 1], N, 1.0);
    assert_true(floor == 10000);
    struct fs_an_opts o;
    fs_an_opts_default(&o);
    for (int pass = 0; pass < 2; pass++) {
        struct fs_departures *d = fs_departures_new(&o, T0, T0 + N * S);
        assert_non_null(d);
        struct fs_an_series s = {.target = "sw1",
                                 .interface = "Eth1/5",
                                 .rule = "roce",
                                 .metric = "fabric_flow_rule_ecn_marked_packets_total",
                                 .kind = FS_AN_ECN,
                                 .is_rate = true,
                                 .ts_us = rts,
                                 .v = v,
                                 .n = m,
                                 .abs_floor = pass ? floor : 10};
        assert_int_equal(fs_departures_add(d, &s), 0);
        assert_int_equal(fs_departures_finish(d), 0);
        if (pass) { /* one run: the surge */
            assert_int_equal(d->n_runs, 1);
            assert_true(d->runs[0].start_us >= T0 + 79 * S && d->runs[0].end_us <= T0 + 83 * S);
        } else { /* the metric's floor alone: every stray sample departs */
            assert_true(d->n_runs > 10);
        }
        fs_departures_free(d);
    }
}

/* A departure held over two samples counts from 3/4 of the threshold (4.5 at the default
 * 6): a busy port whose noise is a fifth of its level surges only 5-7 of its own scales
 * above it. One sample at that level, or a pair whose second is lower, does not depart. */
static void
test_sustained_departure(void **state)
{
    (void)state;
    static int64_t ts[NPTS];
    static double v[NPTS];
    const double base[3] = {900, 1000, 1100}; /* median 1000, MAD 100: scale 148.26 */
    const double scale = 1.4826 * 100;
    for (int i = 0; i < NPTS; i++) {
        ts[i] = T0 + i * S;
        v[i] = base[i % 3];
    }
    const int pair = 400, lone = 500, falling = 600; /* samples, in the analysed range */
    v[pair] = v[pair + 1] = 1000 + 5 * scale;
    v[lone] = 1000 + 5 * scale;
    v[falling] = 1000 + 5 * scale;
    v[falling + 1] = 1000 + 4 * scale;
    struct fs_departures *d = fs_departures_new(NULL, T0 + HIST, T0 + HIST + RANGE);
    assert_non_null(d);
    feed(d, ts, v, "tor1", "Eth1/1", "fabric_queue_depth_bytes", FS_AN_QUEUE, false, 0);
    assert_int_equal(fs_departures_finish(d), 0);
    assert_int_equal(d->n_runs, 1);
    assert_int_equal(d->runs[0].start_us, ts[pair]);
    assert_int_equal(d->runs[0].end_us, ts[pair + 1]);
    assert_true(fabs(d->runs[0].peak_z - 5) < 0.01);
    fs_departures_free(d);
}

/* Host evidence reorders the recurring groups: one with a slow host window in each of its
 * three occurrences goes before one with five occurrences and none; a window within the
 * margin of an occurrence counts, one beyond it does not, and one window over two
 * occurrences counts once per occurrence but once as an event. */
static void
test_host_evidence_orders_groups(void **state)
{
    (void)state;
    struct fs_episode ep[8];
    memset(ep, 0, sizeof ep);
    for (int i = 0; i < 8; i++) {
        ep[i].start_us = T0 + i * 100 * S;
        ep[i].end_us = ep[i].start_us + 2 * S;
    }
    size_t ea[5] = {0, 1, 2, 3, 4}, eb[3] = {5, 6, 7};
    struct fs_recurrence g[2];
    memset(g, 0, sizeof g);
    g[0].occurrences = 5;
    g[0].episodes = ea;
    g[0].period_us = 100 * S;
    g[1].occurrences = 3;
    g[1].episodes = eb;
    g[1].period_us = 100 * S;
    struct fs_incident_report r = {.episodes = ep, .n_episodes = 8, .groups = g, .n_groups = 2};
    /* Episode 5 overlapped; episode 6 one second past its end (margin 2 s); one window over
     * episodes 6 and 7; one 10 s before episode 1 (beyond the margin). */
    int64_t ws[] = {ep[5].start_us + S, ep[6].end_us + S, ep[6].start_us, ep[1].start_us - 10 * S};
    int64_t we[] = {ep[5].start_us + 2 * S, ep[6].end_us + 2 * S, ep[7].end_us,
                    ep[1].start_us - 9 * S};
    size_t occ[2], during[2];
    assert_int_equal(fs_incidents_host_evidence(&r, ws, we, 4, 2 * S, occ, during), 0);
    assert_int_equal(r.groups[0].occurrences, 3);
    assert_int_equal(occ[0], 3);
    assert_int_equal(during[0], 3);
    assert_int_equal(r.groups[1].occurrences, 5);
    assert_int_equal(occ[1], 0);
    assert_int_equal(during[1], 0);
    /* Without windows nothing moves. */
    assert_int_equal(fs_incidents_host_evidence(&r, ws, we, 0, 2 * S, occ, during), 0);
    assert_int_equal(r.groups[0].occurrences, 3);
    assert_int_equal(occ[0], 0);
}

/* Groups are ordered by the share of their occurrences that met a slow host window, not
 * by the count: a backup every 15 minutes that fell in phase with the stalls 15 times
 * in 29 goes below the culprit that met 11 in 15. */
static void
test_host_evidence_orders_by_share(void **state)
{
    (void)state;
    enum { NA = 29, NB = 15 };
    struct fs_episode ep[NA + NB];
    memset(ep, 0, sizeof ep);
    size_t ea[NA], eb[NB];
    int64_t ws[NA + NB], we[NA + NB];
    size_t nw = 0;
    for (int i = 0; i < NA + NB; i++) {
        ep[i].start_us = T0 + i * 100 * S;
        ep[i].end_us = ep[i].start_us + 2 * S;
        bool slow = i < NA ? i < 15 : i - NA < 11;
        if (slow) {
            ws[nw] = ep[i].start_us;
            we[nw++] = ep[i].end_us;
        }
        if (i < NA)
            ea[i] = (size_t)i;
        else
            eb[i - NA] = (size_t)i;
    }
    struct fs_recurrence g[2];
    memset(g, 0, sizeof g);
    g[0] = (struct fs_recurrence){.occurrences = NA, .episodes = ea, .period_us = 900 * S};
    g[1] = (struct fs_recurrence){.occurrences = NB, .episodes = eb, .period_us = 1800 * S};
    struct fs_incident_report r = {
        .episodes = ep, .n_episodes = NA + NB, .groups = g, .n_groups = 2};
    size_t occ[2], during[2];
    assert_int_equal(fs_incidents_host_evidence(&r, ws, we, nw, 2 * S, occ, during), 0);
    assert_int_equal(r.groups[0].occurrences, NB);
    assert_int_equal(occ[0], 11);
    assert_int_equal(r.groups[1].occurrences, NA);
    assert_int_equal(occ[1], 15);
}

/* One series at 1 s for 3 h (noise 3% of its level) with two 2 s surges of +40%: its load
 * steps up threefold for good at 1 h (a job starting), or ramps from 1x to 3x over the
 * 3 h, or falls from 3x to 1x over 80 minutes and stays there. Only the surges are
 * departures: the step is a change of level, the ramp the baseline's own line, and the
 * end of a fall no departure at all (a fall extrapolated would have put the baseline
 * under the flat load that follows). */
static void
test_baseline_follows_load(void **state)
{
    (void)state;
    enum { N = 3 * 3600 };
    static int64_t ts[N];
    static double v[N];
    const int surge[2] = {5400, 9000};
    static const char *const what[3] = {"a step x3 at 1 h", "a ramp x1 to x3",
                                        "a fall x3 to x1, then flat"};
    for (int shape = 0; shape < 3; shape++) {
        rng_state = 0x10ad0000u + (uint64_t)shape;
        for (int i = 0; i < N; i++) {
            ts[i] = T0 + i * S;
            double level = shape == 0   ? (i < 3600 ? 1e4 : 3e4)
                           : shape == 1 ? 1e4 * (1 + 2.0 * i / N)
                                        : (i < 4800 ? 3e4 - 2e4 * i / 4800.0 : 1e4);
            v[i] = level * (1 + 0.03 * gauss());
            for (int k = 0; k < 2; k++)
                if (i >= surge[k] && i < surge[k] + 2)
                    v[i] += 0.4 * level;
        }
        struct fs_departures *d = fs_departures_new(NULL, T0 + 600 * S, T0 + (N - 1) * S);
        assert_non_null(d);
        struct fs_an_series se = {.target = "tor1",
                                  .interface = "Eth1/1",
                                  .metric = "fabric_queue_depth_bytes",
                                  .kind = FS_AN_QUEUE,
                                  .ts_us = ts,
                                  .v = v,
                                  .n = N,
                                  .abs_floor = 100,
                                  .time_uncertainty_us = 2000};
        assert_int_equal(fs_departures_add(d, &se), 0);
        assert_int_equal(fs_departures_finish(d), 0);
        print_message("%s: %zu departures", what[shape], d->n_runs);
        for (size_t k = 0; k < d->n_runs; k++)
            print_message(
                " [%+.0f s, %.0f s long, z %.1f]", (double)(d->runs[k].start_us - T0) / 1e6,
                (double)(d->runs[k].end_us - d->runs[k].start_us) / 1e6, d->runs[k].peak_z);
        print_message("\n");
        assert_int_equal(d->n_runs, 2);
        for (int k = 0; k < 2; k++)
            assert_true(llabs(d->runs[k].start_us - ts[surge[k]]) <= S);
        fs_departures_free(d);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_recurring_surge_period_and_next, setup, teardown),
        cmocka_unit_test_setup_teardown(test_correlate_names_culprit_only_during_surges, setup,
                                        teardown),
        cmocka_unit_test(test_correlate_ranks_certain_suspects_by_specificity),
        cmocka_unit_test(test_counter_rates_and_slow_marking),
        cmocka_unit_test(test_counter_step_floor),
        cmocka_unit_test(test_sustained_departure),
        cmocka_unit_test(test_host_evidence_orders_groups),
        cmocka_unit_test(test_host_evidence_orders_by_share),
        cmocka_unit_test(test_baseline_follows_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
