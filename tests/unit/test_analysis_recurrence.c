/* Recurrence on real schedules: onset trains with jitter, missed occurrences, unrelated
 * extra episodes on the same series, two periodic processes, slow drift, periods from
 * 5 s to 6 h, the seed's 30-minute stall after its third occurrence (seen by the hosts as
 * slow AllReduces: without them three are not enough); and Poisson burst trains, which
 * must not be called periodic. Runs are given to the analysis as the
 * episode log replays them (fs_departures_add_ref / fs_departures_push), each series'
 * onsets known exactly, so what is tested is the period finding alone. Each property is
 * checked over many seeds and the rate is printed. */
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
#include "analysis/incidents.h"

#define S 1000000LL
#define T0 (1796236354LL * S)

static uint64_t rng_state;

static double
urand(void)
{
    return fs_rng_uniform(&rng_state);
}

/* Adds a series of metric (of kind) on iface, with runs starting at the given onsets. */
static void
add_kind_train(struct fs_departures *d, const char *iface, const char *metric, enum fs_an_kind kind,
               const int64_t *on, size_t n, int64_t len)
{
    struct fs_an_series_ref ref = {"tor1", iface, "3", "", metric, kind, 10000, "", ""};
    uint32_t idx;
    assert_int_equal(fs_departures_add_ref(d, &ref, &idx), 0);
    for (size_t i = 0; i < n; i++) {
        struct fs_departure r = {.series = idx,
                                 .start_us = on[i],
                                 .end_us = on[i] + len,
                                 .peak_us = on[i] + len / 2,
                                 .onset_us = on[i],
                                 .peak_z = 50,
                                 .peak_value = 1e5,
                                 .baseline = 10};
        assert_int_equal(fs_departures_push(d, &r), 0);
    }
}

/* An ECN series with runs starting at the given onsets (2 s long, or a tenth of the
 * smallest gap for short periods). */
static void
add_train(struct fs_departures *d, const char *iface, const int64_t *on, size_t n, int64_t len)
{
    add_kind_train(d, iface, "fabric_queue_ecn_marked_packets_total", FS_AN_ECN, on, n, len);
}

/* The recurrence search with slow host windows at the given onsets (an AllReduce that
 * starts just before the surge and lasts it): what an Nsight Systems or host agent
 * import says at each stall. */
static struct fs_incident_report *
find_with_hosts(const struct fs_departures *d, int64_t now, const int64_t *at, size_t n)
{
    int64_t ws[64], we[64];
    for (size_t i = 0; i < n && i < 64; i++) {
        ws[i] = at[i] - S / 5;
        we[i] = at[i] + 2 * S;
    }
    struct fs_incident_hosts h = {ws, we, n < 64 ? n : 64, 2 * S};
    struct fs_incident_report *r = NULL;
    assert_int_equal(fs_incidents_find_hosts(d, now, &h, &r), 0);
    return r;
}

static int
cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

struct train_opts {
    double period_s;
    size_t slots;  /* scheduled occurrences */
    double jitter; /* uniform ± this fraction of the period */
    double miss;   /* probability an occurrence is missed */
    double extras; /* unrelated episodes, as a fraction of slots, at random times */
    double drift;  /* the period grows by this fraction over the train */
    bool hosts;    /* the hosts saw each occurrence (not the extras) as a slow window */
};

/* Onsets of one periodic train (sorted); returns how many, fills the truth of the next
 * scheduled occurrence after the last slot. */
static size_t
make_train_real(const struct train_opts *o, int64_t *on, int64_t *next_truth, int64_t *span_end,
                int64_t *real, size_t *n_real)
{
    size_t n = 0;
    double t = 60.0, P = o->period_s;
    for (size_t k = 0; k < o->slots; k++) {
        double p_k = P * (1 + o->drift * (double)k / (double)o->slots);
        if (urand() >= o->miss) {
            on[n] = T0 + (int64_t)((t + (urand() * 2 - 1) * o->jitter * P) * 1e6);
            if (real && *n_real < 64)
                real[(*n_real)++] = on[n];
            n++;
        }
        t += p_k;
    }
    *next_truth = T0 + (int64_t)(t * 1e6);
    double end = t - P * 0.5;
    size_t ne = (size_t)(o->extras * (double)o->slots);
    for (size_t i = 0; i < ne; i++)
        on[n++] = T0 + (int64_t)((60.0 + urand() * (end - 60.0)) * 1e6);
    qsort(on, n, sizeof *on, cmp_i64);
    /* Episodes closer than the merge gap become one: keep the first. */
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (w == 0 || on[i] - on[w - 1] > 3 * S)
            on[w++] = on[i];
    *span_end = T0 + (int64_t)(end * 1e6);
    return w;
}

static size_t
make_train(const struct train_opts *o, int64_t *on, int64_t *next_truth, int64_t *span_end)
{
    return make_train_real(o, on, next_truth, span_end, NULL, NULL);
}

struct outcome {
    bool found;
    double period_s, spread_s, confidence;
    int64_t next_us;
    size_t groups;
};

static void
run_train(const struct train_opts *o, struct outcome *out, int64_t *next_truth)
{
    int64_t *on = malloc((o->slots * 3 + 16) * sizeof *on), real[64];
    int64_t end;
    size_t n_real = 0;
    size_t n = make_train_real(o, on, next_truth, &end, real, &n_real);
    struct fs_departures *d = fs_departures_new(NULL, T0, end);
    assert_non_null(d);
    int64_t len = o->period_s < 20 ? (int64_t)(o->period_s * 1e5) : 2 * S;
    add_train(d, "Eth1/49", on, n, len);
    assert_int_equal(fs_departures_finish(d), 0);
    struct fs_incident_report *r = NULL;
    if (o->hosts)
        r = find_with_hosts(d, end, real, n_real);
    else
        assert_int_equal(fs_incidents_find(d, end, &r), 0);
    memset(out, 0, sizeof *out);
    out->groups = r->n_groups;
    if (r->n_groups > 0) {
        out->found = true;
        out->period_s = r->groups[0].period_us / 1e6;
        out->spread_s = r->groups[0].spread_us / 1e6;
        out->confidence = r->groups[0].confidence;
        out->next_us = r->groups[0].next_us;
    }
    fs_incident_report_free(r);
    fs_departures_free(d);
    free(on);
}

/* Runs `seeds` trains; counts how often the period is found within 1% of the truth and
 * the next occurrence within 2% of the period (next_ok), and asserts the rates. */
static void
expect_rates(const char *what, const struct train_opts *o, int seeds, double want_found,
             double want_next)
{
    int found = 0, next_ok = 0;
    double worst = 0;
    for (int s = 0; s < seeds; s++) {
        rng_state = 0x5eed0000u + (uint64_t)s;
        struct outcome oc;
        int64_t truth;
        run_train(o, &oc, &truth);
        /* With drift the period is the average; the truth for it is the mean spacing. */
        double mean_p =
            o->period_s * (1 + o->drift * 0.5 * (double)(o->slots - 1) / (double)o->slots);
        if (!(oc.found && fabs(oc.period_s - mean_p) <= 0.01 * mean_p))
            print_message("  seed %d missed: %s, period %.2f s, confidence %.4f\n", s,
                          oc.found ? "found" : "not found", oc.period_s, oc.confidence);
        if (oc.found && fabs(oc.period_s - mean_p) <= 0.01 * mean_p) {
            found++;
            double e = fabs((double)(oc.next_us - truth)) / 1e6;
            /* the truth's own jitter is part of any prediction's error */
            double p_last = o->period_s * (1 + o->drift);
            if (e <= 0.02 * p_last + o->jitter * p_last)
                next_ok++;
            if (e / p_last > worst)
                worst = e / p_last;
        }
    }
    print_message("%-44s found %3d/%d, next within 2%% (+ jitter) %3d/%d, worst next %.2f%%\n",
                  what, found, seeds, next_ok, seeds, worst * 100);
    assert_true(found >= want_found * seeds);
    assert_true(next_ok >= want_next * seeds);
}

static void
test_regular_trains_5s_to_6h(void **state)
{
    (void)state;
    static const double periods[] = {5, 30, 600, 1800, 3 * 3600, 6 * 3600};
    for (size_t i = 0; i < sizeof periods / sizeof periods[0]; i++) {
        struct train_opts o = {.period_s = periods[i], .slots = 8, .jitter = 0.002};
        char what[64];
        snprintf(what, sizeof what, "period %.0f s, 8 occurrences", periods[i]);
        expect_rates(what, &o, 20, 1.0, 1.0);
    }
}

static void
test_seed_incident_third_occurrence(void **state)
{
    (void)state;
    /* Every ~30 min, ~2 s: found once three have happened if the hosts saw them slow,
       never from two. */
    struct train_opts o3 = {.period_s = 1800, .slots = 3, .jitter = 0.002, .hosts = true};
    expect_rates("30 min, 3 occurrences, slow on the hosts", &o3, 50, 1.0, 1.0);
    /* Without the hosts, three equally spaced surges are what three random bursts of a
       port do now and then in a fabric of thousands (incidents.h): not yet a recurrence;
       the fifth is. */
    struct train_opts q3 = {.period_s = 1800, .slots = 3, .jitter = 0.002};
    int found3 = 0;
    for (int s = 0; s < 50; s++) {
        rng_state = 0x33330000u + (uint64_t)s;
        struct outcome oc;
        int64_t truth;
        run_train(&q3, &oc, &truth);
        found3 += oc.found;
    }
    print_message("30 min, 3 occurrences, no host events: reported in %d/50\n", found3);
    assert_int_equal(found3, 0);
    struct train_opts q5 = {.period_s = 1800, .slots = 5, .jitter = 0.002};
    expect_rates("30 min, 5 occurrences, no host events", &q5, 50, 1.0, 1.0);
    struct train_opts o2 = {.period_s = 1800, .slots = 2, .jitter = 0.002, .hosts = true};
    for (int s = 0; s < 20; s++) {
        rng_state = 0x22220000u + (uint64_t)s;
        struct outcome oc;
        int64_t truth;
        run_train(&o2, &oc, &truth);
        assert_false(oc.found);
    }
}

static void
test_jitter_misses_extras_drift(void **state)
{
    (void)state;
    /* Stalls the hosts saw slow (the timing alone is thin evidence for a train jittered by
       ±5%: each hit within ±5% is a one in ten chance). */
    struct train_opts j = {.period_s = 1800, .slots = 16, .jitter = 0.05, .hosts = true};
    expect_rates("30 min, jitter ±5%", &j, 100, 0.97, 0.95);
    struct train_opts m = {
        .period_s = 1800, .slots = 16, .jitter = 0.01, .miss = 0.3, .hosts = true};
    expect_rates("30 min, 30% missed", &m, 100, 0.95, 0.95);
    struct train_opts x = {
        .period_s = 600, .slots = 24, .jitter = 0.01, .extras = 0.5, .hosts = true};
    expect_rates("10 min, extras half as many as slots", &x, 100, 0.95, 0.95);
    struct train_opts dr = {
        .period_s = 1800, .slots = 16, .jitter = 0.005, .drift = 0.05, .hosts = true};
    expect_rates("30 min, period drifting +5%", &dr, 100, 0.95, 0.95);
    /* All three at their worst at once: the evidence is thin (about 10 of 19 slots hit,
       each within ±5%), and some such trains are rightly not called periodic. */
    struct train_opts all = {
        .period_s = 1800, .slots = 20, .jitter = 0.05, .miss = 0.3, .extras = 0.3, .hosts = true};
    expect_rates("30 min, jitter ±5%, 30% missed, 30% extras", &all, 100, 0.80, 0.75);
}

static void
test_two_periodic_processes(void **state)
{
    (void)state;
    int ok = 0;
    for (int s = 0; s < 30; s++) {
        rng_state = 0x77770000u + (uint64_t)s;
        int64_t a[64], b[64], ta, tb, ea, eb;
        struct train_opts oa = {.period_s = 600, .slots = 30, .jitter = 0.01};
        struct train_opts ob = {.period_s = 1800, .slots = 10, .jitter = 0.01};
        size_t na = make_train(&oa, a, &ta, &ea), nb = make_train(&ob, b, &tb, &eb);
        struct fs_departures *d = fs_departures_new(NULL, T0, ea > eb ? ea : eb);
        add_train(d, "Eth1/1", a, na, 2 * S);
        add_train(d, "Eth1/49", b, nb, 2 * S);
        assert_int_equal(fs_departures_finish(d), 0);
        struct fs_incident_report *r = NULL;
        assert_int_equal(fs_incidents_find(d, d->end_us, &r), 0);
        bool got_a = false, got_b = false;
        for (size_t g = 0; g < r->n_groups; g++) {
            const char *ifc = d->series[r->groups[g].series[0]].interface;
            double p = r->groups[g].period_us / 1e6;
            got_a |= !strcmp(ifc, "Eth1/1") && fabs(p - 600) <= 6;
            got_b |= !strcmp(ifc, "Eth1/49") && fabs(p - 1800) <= 18;
        }
        ok += got_a && got_b && r->n_groups == 2;
        fs_incident_report_free(r);
        fs_departures_free(d);
    }
    print_message("two processes (10 and 30 min) on two ports: both found, apart, in %d/30\n", ok);
    assert_true(ok >= 29);
}

/* One port: surges (ECN, drops and PFC) at the given onsets, and ECN-only bursts at
 * others. Returns the first group's period in s (0: none). */
static double
surges_and_bursts(const int64_t *surge, size_t ns, const int64_t *burst, size_t nb, int64_t end)
{
    struct fs_departures *d = fs_departures_new(NULL, T0, end);
    assert_non_null(d);
    int64_t ecn[64];
    size_t ne = 0;
    for (size_t i = 0; i < ns; i++)
        ecn[ne++] = surge[i];
    for (size_t i = 0; i < nb; i++)
        ecn[ne++] = burst[i];
    qsort(ecn, ne, sizeof *ecn, cmp_i64);
    add_train(d, "Eth1/49", ecn, ne, 2 * S);
    add_kind_train(d, "Eth1/49", "fabric_port_discards_total", FS_AN_DROP, surge, ns, 2 * S);
    add_kind_train(d, "Eth1/49", "fabric_pfc_pause_frames_total", FS_AN_PFC, surge, ns, 2 * S);
    assert_int_equal(fs_departures_finish(d), 0);
    struct fs_incident_report *r = NULL;
    assert_int_equal(fs_incidents_find(d, end, &r), 0);
    double p = r->n_groups > 0 ? r->groups[0].period_us / 1e6 : 0;
    fs_incident_report_free(r);
    fs_departures_free(d);
    return p;
}

/* Six surges 30 s apart and two unrelated ECN bursts near midpoints fold better at 15 s
 * (8 hits in 11 slots) than at 30 s (6 in 6); the surges' kinds tell them apart. A 15 s
 * train with missed occurrences, its episodes alike, must keep its 15 s. */
static void
test_extras_at_midpoints_fewer_kinds(void **state)
{
    (void)state;
    int ok = 0, ok_half = 0;
    for (int s = 0; s < 50; s++) {
        rng_state = 0x3a1f0000u + (uint64_t)s;
        int64_t surge[8], burst[2];
        for (int k = 0; k < 6; k++)
            surge[k] = T0 + (int64_t)((60 + 30.0 * k + (urand() * 2 - 1) * 0.15) * 1e6);
        int m1 = 1 + (int)(urand() * 2), m2 = 3 + (int)(urand() * 2); /* slots 1-2, 3-4 */
        burst[0] = T0 + (int64_t)((60 + 30.0 * m1 + 15 + (urand() * 2 - 1) * 0.3) * 1e6);
        burst[1] = T0 + (int64_t)((60 + 30.0 * m2 + 15 + (urand() * 2 - 1) * 0.3) * 1e6);
        double p = surges_and_bursts(surge, 6, burst, 2, T0 + 250 * S);
        ok += fabs(p - 30) <= 0.3;
        if (fabs(p - 30) > 0.3)
            print_message("  seed %d: period %.2f s, not 30 s\n", s, p);
        /* Control: every 15 s, 3 of 11 missed, each occurrence a full surge. */
        int64_t half[11];
        size_t nh = 0;
        for (int k = 0; k < 11; k++)
            if (k != m1 && k != m2 + 4 && k != 9)
                half[nh++] = T0 + (int64_t)((60 + 15.0 * k + (urand() * 2 - 1) * 0.08) * 1e6);
        double ph = surges_and_bursts(half, nh, NULL, 0, T0 + 250 * S);
        ok_half += fabs(ph - 15) <= 0.15;
    }
    print_message("surges every 30 s with ECN bursts at 2 midpoints: 30 s in %d/50; "
                  "a 15 s train with 3 of 11 missed: 15 s in %d/50\n",
                  ok, ok_half);
    assert_true(ok >= 48);
    assert_true(ok_half >= 48);
}

static void
test_poisson_trains_not_periodic(void **state)
{
    (void)state;
    /* Random bursts at rates from one per 2 min to one per hour, over 6 h. */
    int called = 0, n = 0;
    for (int s = 0; s < 400; s++) {
        rng_state = 0x90150000u + (uint64_t)s;
        double mean_gap = 120 + urand() * 3480, t = 0, horizon = 6 * 3600;
        int64_t on[512];
        size_t m = 0;
        while (m < 512) {
            t += -log(1 - urand()) * mean_gap;
            if (t >= horizon)
                break;
            if (m == 0 || (int64_t)(t * 1e6) + T0 - on[m - 1] > 3 * S)
                on[m++] = T0 + (int64_t)(t * 1e6);
        }
        struct fs_departures *d = fs_departures_new(NULL, T0, T0 + (int64_t)(horizon * 1e6));
        add_train(d, "Eth1/7", on, m, 2 * S);
        assert_int_equal(fs_departures_finish(d), 0);
        struct fs_incident_report *r = NULL;
        assert_int_equal(fs_incidents_find(d, d->end_us, &r), 0);
        n++;
        called += r->n_groups > 0;
        fs_incident_report_free(r);
        fs_departures_free(d);
    }
    print_message("Poisson burst trains called periodic: %d/%d\n", called, n);
    assert_true(called * 100 <= 2 * n);
}

/* A fabric of twenty bursting ports (five random bursts each over 3 h), none periodic;
 * one of them (Eth1/1) burst four times early on, then three times 900 s apart near the
 * end. A quiet port (Eth1/49) surged three times 1200 s apart and never otherwise, each
 * time with a slow AllReduce on the hosts: the seed's stall at its third occurrence,
 * still periodic. No bursting port may be called
 * periodic (before the strong-train rule, Eth1/13's three random bursts were). */
static void
test_random_port_aligned_at_the_end(void **state)
{
    (void)state;
    int64_t end = T0 + 11700 * S;
    struct fs_departures *d = fs_departures_new(NULL, T0, end);
    assert_non_null(d);
    int64_t a[] = {T0 + 700 * S,  T0 + 1900 * S,          T0 + 4400 * S,          T0 + 5350 * S,
                   T0 + 9500 * S, T0 + 10400 * S + S / 5, T0 + 11300 * S - S / 10};
    add_train(d, "Eth1/1", a, sizeof a / sizeof a[0], 2 * S);
    rng_state = 0x5eed1600u;
    for (int p = 2; p <= 20; p++) {
        int64_t on[5];
        for (int k = 0; k < 5; k++)
            on[k] = T0 + (int64_t)((300 + urand() * 11000) * 1e6);
        qsort(on, 5, sizeof *on, cmp_i64);
        char ifc[16];
        snprintf(ifc, sizeof ifc, "Eth1/%d", p);
        add_train(d, ifc, on, 5, 2 * S);
    }
    int64_t c[] = {T0 + 9000 * S, T0 + 10200 * S + S / 5, T0 + 11400 * S - S / 5};
    add_train(d, "Eth1/49", c, 3, 2 * S);
    assert_int_equal(fs_departures_finish(d), 0);
    struct fs_incident_report *r = find_with_hosts(d, end, c, 3);
    size_t random_called = 0;
    bool culprit = false;
    for (size_t g = 0; g < r->n_groups; g++) {
        const char *ifc = d->series[r->groups[g].series[0]].interface;
        print_message("  group on %s: every %.1f s, %zu occurrences, confidence %.5f\n", ifc,
                      r->groups[g].period_us / 1e6, r->groups[g].occurrences,
                      r->groups[g].confidence);
        random_called += strcmp(ifc, "Eth1/49") != 0;
        culprit |= !strcmp(ifc, "Eth1/49") && fabs(r->groups[g].period_us / 1e6 - 1200) <= 12;
    }
    fs_incident_report_free(r);
    fs_departures_free(d);
    assert_int_equal(random_called, 0);
    assert_true(culprit);
}

/* The port with this interface among a report's groups (its first series), or NULL. */
static const struct fs_recurrence *
group_on(const struct fs_departures *d, const struct fs_incident_report *r, const char *ifc)
{
    for (size_t g = 0; g < r->n_groups; g++)
        if (!strcmp(d->series[r->groups[g].series[0]].interface, ifc))
            return &r->groups[g];
    return NULL;
}

/* A port quiet for hours whose load steps up in the last minutes of the range: a job
 * starts and its pause counter, zero until then, bursts every 6-20 s while its baseline
 * settles. Some ten of those bursts line up on a grid of about 13 s far better than the
 * port's rate over the whole range allows (every seed was called periodic before
 * local_rate; so were 5 of 25 load_step eval fabrics); around them the port bursts every
 * 13 s and the grid is chance. A real train that starts as late, on a port as quiet,
 * stays recurring. Over many seeds. */
static void
test_late_load_step_not_periodic(void **state)
{
    (void)state;
    int called = 0, found = 0, n = 0;
    for (int s = 0; s < 200; s++) {
        rng_state = 0x57e90000u + (uint64_t)s;
        int64_t end = T0 + 6 * 3600 * S, on[128];
        size_t m = 0;
        double t = 6 * 3600 - 100 - urand() * 200;
        while (m < 128) {
            t += 6 + urand() * 14;
            if (t >= 6 * 3600 - 5)
                break;
            on[m++] = T0 + (int64_t)(t * 1e6);
        }
        struct fs_departures *d = fs_departures_new(NULL, T0, end);
        assert_non_null(d);
        add_kind_train(d, "Eth1/18", "fabric_pfc_pause_frames_total", FS_AN_PFC, on, m, S);
        /* The real one: quiet until 4 h, then every 600 s (+-1 s) to the end. */
        int64_t c[8];
        size_t k = 0;
        c[k++] = T0 + (int64_t)((900 + urand() * 2000) * 1e6);
        for (double u = 4 * 3600 + urand() * 300; u < 6 * 3600 - 30 && k < 8; u += 600)
            c[k++] = T0 + (int64_t)((u + (urand() - 0.5) * 2) * 1e6);
        add_train(d, "Eth1/49", c, k, 2 * S);
        assert_int_equal(fs_departures_finish(d), 0);
        struct fs_incident_report *r = NULL;
        assert_int_equal(fs_incidents_find(d, end, &r), 0);
        n++;
        const struct fs_recurrence *fg = group_on(d, r, "Eth1/18");
        if (fg)
            print_message("  seed %d: every %.1f s, %zu of %zu bursts, confidence %.6f\n", s,
                          fg->period_us / 1e6, fg->occurrences, m, fg->confidence);
        called += fg != NULL;
        const struct fs_recurrence *g = group_on(d, r, "Eth1/49");
        found += g && fabs(g->period_us / 1e6 - 600) <= 6;
        fs_incident_report_free(r);
        fs_departures_free(d);
    }
    print_message("late load step called periodic: %d/%d; the late real train found: %d/%d\n",
                  called, n, found, n);
    assert_true(called * 100 <= 2 * n);
    assert_true(found * 100 >= 95 * n);
}

/* A fabric of 300 bursting ports (enough for the fits to go to several threads when the
 * machine has the CPUs) with two periodic ones among them: each is fitted as when it is
 * alone (period, next occurrence and hits come from its own train), and two runs give
 * the same report. Run under TSan too. */
static void
test_many_ports_fitted_alike(void **state)
{
    (void)state;
    enum { PORTS = 300 };
    const int64_t end = T0 + 10800 * S;
    const int periodic[2] = {100, 250};
    const double period_s[2] = {900, 1300};
    static int64_t on[PORTS + 1][16];
    size_t n[PORTS + 1] = {0};
    rng_state = 0x5eed3000u;
    for (int p = 1; p <= PORTS; p++) {
        int w = p == periodic[0] ? 0 : p == periodic[1] ? 1 : -1;
        if (w >= 0) {
            for (double t = 200; t < 10700; t += period_s[w])
                on[p][n[p]++] = T0 + (int64_t)((t + (urand() - 0.5) * 10) * 1e6);
        } else {
            for (; n[p] < 5; n[p]++)
                on[p][n[p]] = T0 + (int64_t)((300 + urand() * 10400) * 1e6);
            qsort(on[p], n[p], sizeof on[p][0], cmp_i64);
        }
    }
    struct fs_departures *big = fs_departures_new(NULL, T0, end);
    assert_non_null(big);
    for (int p = 1; p <= PORTS; p++) {
        char ifc[16];
        snprintf(ifc, sizeof ifc, "Eth1/%d", p);
        add_train(big, ifc, on[p], n[p], 2 * S);
    }
    assert_int_equal(fs_departures_finish(big), 0);
    struct fs_incident_report *r[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++)
        assert_int_equal(fs_incidents_find(big, end, &r[k]), 0);
    for (int w = 0; w < 2; w++) {
        char ifc[16];
        snprintf(ifc, sizeof ifc, "Eth1/%d", periodic[w]);
        struct fs_departures *alone = fs_departures_new(NULL, T0, end);
        assert_non_null(alone);
        add_train(alone, ifc, on[periodic[w]], n[periodic[w]], 2 * S);
        assert_int_equal(fs_departures_finish(alone), 0);
        struct fs_incident_report *ra = NULL;
        assert_int_equal(fs_incidents_find(alone, end, &ra), 0);
        assert_int_equal(ra->n_groups, 1);
        const struct fs_recurrence *ga = &ra->groups[0], *gb = group_on(big, r[0], ifc);
        assert_non_null(gb);
        print_message("  %s: every %.1f s, %zu occurrences (%zu groups in the fabric)\n", ifc,
                      gb->period_us / 1e6, gb->occurrences, r[0]->n_groups);
        assert_true(gb->period_us == ga->period_us);
        assert_int_equal(gb->next_us, ga->next_us);
        assert_int_equal(gb->occurrences, ga->occurrences);
        fs_incident_report_free(ra);
        fs_departures_free(alone);
    }
    assert_int_equal(r[0]->n_groups, r[1]->n_groups);
    for (size_t g = 0; g < r[0]->n_groups; g++) {
        assert_int_equal(r[0]->groups[g].series[0], r[1]->groups[g].series[0]);
        assert_true(r[0]->groups[g].period_us == r[1]->groups[g].period_us);
        assert_int_equal(r[0]->groups[g].next_us, r[1]->groups[g].next_us);
        assert_true(r[0]->groups[g].confidence == r[1]->groups[g].confidence);
    }
    fs_incident_report_free(r[0]);
    fs_incident_report_free(r[1]);
    fs_departures_free(big);
}

/* A jittered train whose first occurrence is four slots before the second (three missed):
 * a refitted grid must still reach back to it. The onsets are a `jitter_misses` fabric's
 * (period 1064 s, ±5%, 30% missed) in which the refit moved slot 0 past the first
 * occurrence, the grid kept 5 of the 6 and the chance test then counted the slots before
 * it as empty: the train was not reported. The hosts saw each occurrence slow. */
static void
test_jittered_first_occurrence_kept(void **state)
{
    (void)state;
    const double P = 1064, at[] = {0.185, 4.157, 5.184, 6.192, 7.128, 8.118};
    int64_t on[6], end = T0 + (int64_t)(8.9 * P * 1e6);
    for (size_t i = 0; i < 6; i++)
        on[i] = T0 + (int64_t)(at[i] * P * 1e6);
    struct fs_departures *d = fs_departures_new(NULL, T0, end);
    assert_non_null(d);
    add_train(d, "Eth1/49", on, 6, 2 * S);
    assert_int_equal(fs_departures_finish(d), 0);
    struct fs_incident_report *r = find_with_hosts(d, end, on, 6);
    assert_int_equal(r->n_groups, 1);
    print_message("  every %.1f s, %zu occurrences, confidence %.5f\n",
                  r->groups[0].period_us / 1e6, r->groups[0].occurrences, r->groups[0].confidence);
    assert_int_equal(r->groups[0].occurrences, 6);
    assert_true(fabs(r->groups[0].period_us / 1e6 - P) <= 0.01 * P);
    fs_incident_report_free(r);
    fs_departures_free(d);
}

/* Adds `ports` bursting ports (Eth1/1..), five random bursts each in [T0+300 s, T0+span). */
static void
add_bursting_ports(struct fs_departures *d, int ports, double span_s)
{
    for (int p = 1; p <= ports; p++) {
        int64_t on[5];
        for (int k = 0; k < 5; k++)
            on[k] = T0 + (int64_t)((300 + urand() * (span_s - 300)) * 1e6);
        qsort(on, 5, sizeof *on, cmp_i64);
        char ifc[16];
        snprintf(ifc, sizeof ifc, "Eth1/%d", p);
        add_train(d, ifc, on, 5, 2 * S);
    }
}

/* A port whose only three episodes fall on slots 0, 2 and 3 of a 658 s grid (within
 * 2 s: a random_bursts eval fabric's port whose three bursts were called periodic), in
 * a fabric of fifteen bursting ports: judged against every train the fabric offered, it
 * is chance, and so are the same three episodes on slots 0, 1 and 2 while the hosts say
 * nothing of them. With a slow AllReduce at each (the seed's stall at its third
 * occurrence), the latter is reported. */
static void
test_gapped_three_hits_judged_with_the_fabric(void **state)
{
    (void)state;
    const double at[3][3] = {{1200, 2519, 3174}, {1200, 1860, 2516}, {1200, 1860, 2516}};
    for (int v = 0; v < 3; v++) {
        const int64_t end = T0 + 3604 * S;
        struct fs_departures *d = fs_departures_new(NULL, T0, end);
        assert_non_null(d);
        rng_state = 0x5eed4000u;
        add_bursting_ports(d, 15, 3600);
        int64_t on[3];
        for (int k = 0; k < 3; k++)
            on[k] = T0 + (int64_t)(at[v][k] * 1e6);
        add_train(d, "Eth1/49", on, 3, 2 * S);
        assert_int_equal(fs_departures_finish(d), 0);
        struct fs_incident_report *r = NULL;
        if (v == 2)
            r = find_with_hosts(d, end, on, 3);
        else
            assert_int_equal(fs_incidents_find(d, end, &r), 0);
        const struct fs_recurrence *g = group_on(d, r, "Eth1/49");
        print_message("  slots %s%s: %s", v == 0 ? "0, 2, 3" : "0, 1, 2",
                      v == 2 ? ", slow on the hosts" : "", g ? "recurring" : "not recurring\n");
        if (g)
            print_message(" every %.1f s, confidence %.5f\n", g->period_us / 1e6, g->confidence);
        if (v < 2)
            assert_null(g);
        else
            assert_non_null(g);
        fs_incident_report_free(r);
        fs_departures_free(d);
    }
}

/* A quiet port that surged four times every 300 s and then stopped: asked over a window
 * that ends with its last surge it recurs; asked 2,400 s later (eight slots left empty,
 * more than it hit) it is no longer reported, where it would predict a next surge its
 * own recent past denies. */
static void
test_stopped_train_not_recurring(void **state)
{
    (void)state;
    int64_t on[4];
    for (int k = 0; k < 4; k++)
        on[k] = T0 + (600 + 300 * k) * S + (k % 2 ? S / 2 : 0);
    const int64_t ends[2] = {T0 + 1700 * S, T0 + 1700 * S + 2400 * S};
    for (int v = 0; v < 2; v++) {
        struct fs_departures *d = fs_departures_new(NULL, T0, ends[v]);
        assert_non_null(d);
        add_train(d, "Eth1/49", on, 4, 2 * S);
        assert_int_equal(fs_departures_finish(d), 0);
        struct fs_incident_report *r = NULL;
        assert_int_equal(fs_incidents_find(d, ends[v], &r), 0);
        print_message("  window ending %lld s after the last surge: %zu groups\n",
                      (long long)((ends[v] - on[3]) / S), r->n_groups);
        assert_int_equal(r->n_groups, v == 0 ? 1 : 0);
        fs_incident_report_free(r);
        fs_departures_free(d);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_regular_trains_5s_to_6h),
        cmocka_unit_test(test_seed_incident_third_occurrence),
        cmocka_unit_test(test_jitter_misses_extras_drift),
        cmocka_unit_test(test_two_periodic_processes),
        cmocka_unit_test(test_extras_at_midpoints_fewer_kinds),
        cmocka_unit_test(test_poisson_trains_not_periodic),
        cmocka_unit_test(test_random_port_aligned_at_the_end),
        cmocka_unit_test(test_jittered_first_occurrence_kept),
        cmocka_unit_test(test_many_ports_fitted_alike),
        cmocka_unit_test(test_gapped_three_hits_judged_with_the_fabric),
        cmocka_unit_test(test_stopped_train_not_recurring),
        cmocka_unit_test(test_late_load_step_not_periodic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
