/* make eval: the diagnosis scored on randomized fabrics, in virtual time.
 *
 * Each scenario is a fabric of two switches with PORTS ports each, polled every second
 * for hours as the drivers would feed the store (ECN marks per port, tc 3), with a store
 * that keeps one hour and the analysis at its defaults, refreshed every REFRESH_S. One
 * port (the culprit) surges at each stall of a periodic NCCL stall (period 2-30 min); the
 * slow host windows are the stalls, plus a few slow windows without a switch-side cause.
 * Each runs about eight periods (at most 5 h) of virtual time.
 * Families change one thing each:
 *   quiet            culprit and most ports quiet
 *   busy_culprit     the culprit near line rate with large noise, most ports busy
 *   random_bursts    40% of ports with random bursts (about one per 15 min each)
 *   second_periodic  another port surges periodically on its own schedule (a backup)
 *   jitter_misses    stalls jittered ±5%, 30% of them missed
 *   skewed_clocks    host windows misplaced by up to ±300 ms (a badly measured offset)
 * At the end, /api/v1/correlate over all the windows and /api/v1/incidents (defaults)
 * are asked, through the same functions the HTTP endpoint calls. Scored: culprit first in
 * the summary, culprit in its top 3, unrelated windows whose top suspect is the culprit,
 * period error, next-stall error (in periods), the time from the end of the third
 * stall to the first refresh whose metrics report the culprit recurring, and false
 * recurrences: recurring groups on a port that has no periodic process (neither the
 * culprit nor the second periodic job), i.e. noise or random bursts called periodic.
 *
 *   eval_diagnosis [--seeds N] [--seed-base B] [--min-occurrences K] [--family NAME]
 *                  (default 50 per family, base 7000, analysis.min_occurrences 3: K shows
 *                  what asking for more occurrences buys against false recurrences;
 *                  --family runs one family; EVAL_VERBOSE=1 prints each run)
 * Prints a table per family and `EVAL <name> <value> <unit>` lines.
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "rng.h"
#include "http/analysis_api.h"
#include "store/store.h"

#define S 1000000LL
#define PORTS 24
#define REFRESH_S 60
#define MAX_STALLS 64

enum family { F_QUIET, F_BUSY, F_BURSTS, F_SECOND, F_JITTER, F_SKEW, F_COUNT };
static const char *const family_names[F_COUNT] = {
    "quiet", "busy_culprit", "random_bursts", "second_periodic", "jitter_misses", "skewed_clocks"};

static uint64_t rng_state;
/* analysis.min_occurrences for the run (--min-occurrences); 0: the default */
static size_t min_occurrences;
/* --family NAME: run that family only (tuning one); NULL: all */
static const char *only_family;

static double
urand(void)
{
    return fs_rng_uniform(&rng_state);
}

static double
gauss(void)
{
    return fs_rng_gauss(&rng_state);
}

struct port {
    double level, noise;
    bool bursty;
    int64_t burst_until;
    uint64_t ecn;
};

struct scenario {
    enum family fam;
    double period_s;
    int64_t t0, end;
    int culprit_sw, culprit_port;
    int second_sw, second_port;
    double second_period_s;
    int64_t stall[MAX_STALLS]; /* onsets of the stalls that happen */
    size_t n_stall;
    int64_t next_truth; /* the next scheduled stall after end */
    struct port port[2][PORTS];
};

struct result {
    bool first, top3, recurring;
    int blamed, unrelated;
    int false_recurring;         /* recurring groups on ports without a periodic process */
    double period_err, next_err; /* fractions of the period */
    double answer_s;             /* after the third stall ended; < 0: never */
};

static bool
in_stall(const struct scenario *sc, int64_t t)
{
    for (size_t i = 0; i < sc->n_stall; i++)
        if (t >= sc->stall[i] && t < sc->stall[i] + 2 * S)
            return true;
    return false;
}

static void
plan(struct scenario *sc, enum family fam)
{
    memset(sc, 0, sizeof *sc);
    sc->fam = fam;
    sc->period_s = 120 + urand() * 1680;
    double dur = sc->period_s * 8.3 + 600;
    if (dur > 5 * 3600)
        dur = 5 * 3600;
    sc->end = (int64_t)time(NULL) * S;
    sc->t0 = sc->end - (int64_t)(dur * 1e6);
    sc->culprit_sw = urand() < 0.5 ? 0 : 1;
    sc->culprit_port = (int)(urand() * PORTS);
    double busy_share = fam == F_BUSY ? 0.6 : 0.25;
    for (int k = 0; k < 2; k++)
        for (int p = 0; p < PORTS; p++) {
            struct port *pt = &sc->port[k][p];
            bool busy = urand() < busy_share;
            pt->level = busy ? 1e4 + urand() * 2e5 : urand() * 5;
            pt->noise = busy ? pt->level * (0.03 + 0.25 * urand()) : 1 + urand() * 2;
            pt->bursty = fam == F_BURSTS && urand() < 0.4;
        }
    struct port *c = &sc->port[sc->culprit_sw][sc->culprit_port];
    if (fam == F_BUSY) {
        c->level = 1.5e5;
        c->noise = 3e4;
    } else if (fam == F_QUIET) {
        c->level = 2;
        c->noise = 1;
    }
    c->bursty = false;
    sc->second_sw = -1;
    if (fam == F_SECOND) {
        do {
            sc->second_sw = urand() < 0.5 ? 0 : 1;
            sc->second_port = (int)(urand() * PORTS);
        } while (sc->second_sw == sc->culprit_sw && sc->second_port == sc->culprit_port);
        sc->second_period_s = 600;
        sc->port[sc->second_sw][sc->second_port].bursty = false;
    }
    double jitter = fam == F_JITTER ? 0.05 : 0.005, miss = fam == F_JITTER ? 0.3 : 0;
    double t = 120 + urand() * 60;
    while (t <= dur) {
        int64_t at = sc->t0 + (int64_t)((t + (urand() * 2 - 1) * jitter * sc->period_s) * 1e6);
        if (urand() >= miss && sc->n_stall < MAX_STALLS && at < sc->end - 2 * S)
            sc->stall[sc->n_stall++] = at;
        t += sc->period_s;
    }
    sc->next_truth = sc->t0 + (int64_t)(t * 1e6); /* the first scheduled after the end */
}

static void
poll_at(struct scenario *sc, struct fs_sink *sink[2], int64_t t, char ifname[PORTS][16])
{
    for (int k = 0; k < 2; k++) {
        int64_t ts = t + 5000 + (int64_t)(urand() * 10000);
        fs_sink_begin(sink[k], ts);
        for (int p = 0; p < PORTS; p++) {
            struct port *pt = &sc->port[k][p];
            double rate = pt->level + pt->noise * gauss();
            if (rate < 0)
                rate = 0;
            if (k == sc->culprit_sw && p == sc->culprit_port &&
                (in_stall(sc, ts) || in_stall(sc, ts - S / 2)))
                rate += 1e5 + pt->level * 0.8;
            if (k == sc->second_sw && p == sc->second_port) {
                int64_t ph = (ts - sc->t0) % (int64_t)(sc->second_period_s * 1e6);
                if (ph < 40 * S)
                    rate += 3e5;
            }
            if (pt->bursty) {
                if (ts > pt->burst_until && urand() < 1.0 / 900)
                    pt->burst_until = ts + 2 * S + (int64_t)(urand() * 3e6);
                if (ts <= pt->burst_until)
                    rate += 5e4 + urand() * 2e5;
            }
            pt->ecn += (uint64_t)rate;
            struct fs_label l[2] = {{"interface", ifname[p]}, {"tc", "3"}};
            fs_sink_counter(sink[k], FS_M_QUEUE_ECN_MARKED, l, 2, pt->ecn, 64);
        }
        fs_sink_end(sink[k]);
    }
}

static struct json_object *
jget(struct json_object *o, const char *key)
{
    struct json_object *v = NULL;
    if (!o || !json_object_object_get_ex(o, key, &v))
        return NULL;
    return v;
}

static bool
is_culprit(const struct scenario *sc, struct json_object *s, char names[2][8],
           char ifname[PORTS][16])
{
    const char *t = json_object_get_string(jget(s, "target"));
    const char *i = json_object_get_string(jget(s, "interface"));
    return t && i && !strcmp(t, names[sc->culprit_sw]) && !strcmp(i, ifname[sc->culprit_port]);
}

static void
fmt_time(char *b, size_t n, int64_t us)
{
    snprintf(b, n, "%lld.%06lld", (long long)(us / S), (long long)(us % S));
}

static int
run_one(enum family fam, uint64_t seed, struct result *res)
{
    rng_state = fs_rng_seed(seed, (uint64_t)fam);
    struct scenario *sc = calloc(1, sizeof *sc);
    plan(sc, fam);
    memset(res, 0, sizeof *res);
    res->answer_s = -1;
    char err[256];
    struct fs_ring_opts ro = {.memory_limit = 256 << 20, .retention_us = 3600 * S};
    struct fs_store *st = fs_store_new(&ro, err, sizeof err);
    struct fs_host_events_opts ho = {64 << 20, 3600LL * 1000000000LL};
    struct fs_analysis *an = fs_analysis_new(&ho, err, sizeof err);
    if (!st || !an) {
        fprintf(stderr, "eval: %s\n", err);
        return -1;
    }
    if (min_occurrences > 0) {
        struct fs_analysis_opts ao;
        fs_analysis_opts_default(&ao);
        ao.an.min_occurrences = min_occurrences;
        fs_analysis_set_opts(an, &ao);
    }
    static char names[2][8] = {"leaf1", "leaf2"};
    char ifname[PORTS][16];
    for (int p = 0; p < PORTS; p++)
        snprintf(ifname[p], sizeof ifname[p], "Eth1/%d", p + 1);
    struct fs_target_cfg tc[2];
    struct fs_sink *sink[2];
    memset(tc, 0, sizeof tc);
    for (int k = 0; k < 2; k++) {
        tc[k].name = names[k];
        tc[k].address = "192.0.2.1";
        tc[k].staleness_intervals = 3;
        sink[k] = fs_store_sink_add(st, &tc[k], "snmp", S);
    }
    struct fs_buf out;
    fs_buf_init(&out, 64 << 20);
    char needle[128];
    snprintf(needle, sizeof needle,
             "fabricscope_incident_next_expected_timestamp_seconds{target=\"%s\",interface=\"%s\"",
             names[sc->culprit_sw], ifname[sc->culprit_port]);
    int64_t third_end = sc->n_stall >= 3 ? sc->stall[2] + 2 * S : INT64_MAX;
    for (int64_t t = sc->t0; t <= sc->end; t += S) {
        poll_at(sc, sink, t, ifname);
        if ((t - sc->t0) % (REFRESH_S * S) != 0)
            continue;
        /* As the daemon: refreshed from the start, so the episode log holds the first
           stalls even when the third comes more than the ring's hour after them. */
        fs_analysis_refresh(an, st, t);
        if (t < third_end || res->answer_s >= 0)
            continue;
        fs_buf_reset(&out);
        fs_analysis_metrics(an, &out);
        if (strstr(out.data, needle))
            res->answer_s = (double)(t - third_end) / 1e6;
    }
    /* Correlate over every window: the stalls and a few without a switch-side cause. */
    struct fs_analysis_arg args[MAX_STALLS + 8];
    char bufs[MAX_STALLS + 8][64], sbuf[32], ebuf[32];
    size_t na = 0, n_unrel = 0;
    fmt_time(sbuf, sizeof sbuf, sc->t0);
    fmt_time(ebuf, sizeof ebuf, sc->end);
    args[na++] = (struct fs_analysis_arg){"start", sbuf};
    args[na++] = (struct fs_analysis_arg){"end", ebuf};
    args[na++] = (struct fs_analysis_arg){"limit", "1000"};
    bool unrelated[MAX_STALLS + 8] = {false};
    size_t nw = 0;
    for (size_t i = 0; i < sc->n_stall; i++, nw++) {
        double skew = fam == F_SKEW ? (urand() * 2 - 1) * 0.3 : 0;
        int64_t ws = sc->stall[i] + (int64_t)((0.2 + skew) * 1e6), we = ws + (int64_t)1.8e6;
        char a[32], b[32];
        fmt_time(a, sizeof a, ws);
        fmt_time(b, sizeof b, we);
        snprintf(bufs[nw], sizeof bufs[nw], "%s,%s", a, b);
        args[na++] = (struct fs_analysis_arg){"window", bufs[nw]};
    }
    while (n_unrel < 3) {
        int64_t ws = sc->t0 + 60 * S + (int64_t)(urand() * (double)(sc->end - sc->t0 - 120 * S));
        bool near = false;
        for (size_t i = 0; i < sc->n_stall; i++)
            near |= llabs(ws - sc->stall[i]) < 30 * S;
        if (near)
            continue;
        char a[32], b[32];
        fmt_time(a, sizeof a, ws);
        fmt_time(b, sizeof b, ws + 2 * S);
        snprintf(bufs[nw], sizeof bufs[nw], "%s,%s", a, b);
        unrelated[nw] = true;
        args[na++] = (struct fs_analysis_arg){"window", bufs[nw]};
        nw++;
        n_unrel++;
    }
    fs_buf_reset(&out);
    int rc = fs_analysis_correlate(an, st, args, na, sc->end, &out);
    struct json_object *o = rc == 200 ? json_tokener_parse(out.data) : NULL;
    if (!o) {
        fprintf(stderr, "eval: correlate %d: %.300s\n", rc, out.data);
    } else {
        struct json_object *data = jget(o, "data"), *summary = jget(data, "summary");
        struct json_object *events = jget(data, "events");
        size_t ns = summary ? json_object_array_length(summary) : 0;
        for (size_t i = 0; i < ns && i < 3; i++)
            if (is_culprit(sc, json_object_array_get_idx(summary, i), names, ifname)) {
                res->top3 = true;
                res->first |= i == 0;
            }
        size_t ne = events ? json_object_array_length(events) : 0;
        for (size_t i = 0; i < ne && i < nw; i++) {
            if (!unrelated[i]) {
                struct json_object *sus = jget(json_object_array_get_idx(events, i), "suspects");
                if (getenv("EVAL_VERBOSE") &&
                    !(sus && json_object_array_length(sus) > 0 &&
                      is_culprit(sc, json_object_array_get_idx(sus, 0), names, ifname)))
                    fprintf(stderr, "  stall %zu (%.0f s): culprit not the top suspect: %.300s\n",
                            i, (double)(sc->stall[i] - sc->t0) / 1e6,
                            json_object_to_json_string(sus));
                continue;
            }
            res->unrelated++;
            struct json_object *sus = jget(json_object_array_get_idx(events, i), "suspects");
            if (sus && json_object_array_length(sus) > 0 &&
                is_culprit(sc, json_object_array_get_idx(sus, 0), names, ifname))
                res->blamed++;
        }
        json_object_put(o);
    }
    /* Incidents with the defaults. */
    fs_buf_reset(&out);
    rc = fs_analysis_incidents(an, st, NULL, 0, sc->end, &out);
    o = rc == 200 ? json_tokener_parse(out.data) : NULL;
    res->period_err = res->next_err = NAN;
    if (o) {
        struct json_object *rec = jget(jget(o, "data"), "recurring");
        for (size_t i = 0; rec && i < json_object_array_length(rec); i++) {
            struct json_object *g = json_object_array_get_idx(rec, i);
            struct json_object *series = jget(g, "series");
            struct json_object *s0 = series ? json_object_array_get_idx(series, 0) : NULL;
            if (!s0 || !is_culprit(sc, s0, names, ifname)) {
                const char *t = s0 ? json_object_get_string(jget(s0, "target")) : NULL;
                const char *ifc = s0 ? json_object_get_string(jget(s0, "interface")) : NULL;
                bool second = sc->second_sw >= 0 && t && ifc && !strcmp(t, names[sc->second_sw]) &&
                              !strcmp(ifc, ifname[sc->second_port]);
                res->false_recurring += !second;
                if (!second && getenv("EVAL_VERBOSE"))
                    fprintf(stderr, "  false recurrence: %s (confidence %.4f, %d occurrences)\n",
                            json_object_get_string(jget(g, "text")),
                            json_object_get_double(jget(g, "confidence")),
                            json_object_get_int(jget(g, "occurrences")));
                continue;
            }
            if (res->recurring)
                continue; /* the culprit's first group is scored */
            double p = json_object_get_double(jget(g, "period_s"));
            double nx = json_object_get_double(jget(g, "next_expected"));
            res->recurring = true;
            res->period_err = fabs(p - sc->period_s) / sc->period_s;
            res->next_err = fabs(nx - (double)sc->next_truth / 1e6) / sc->period_s;
        }
        if (!res->recurring && getenv("EVAL_VERBOSE")) {
            const struct port *cp = &sc->port[sc->culprit_sw][sc->culprit_port];
            fprintf(stderr,
                    "  culprit (level %.0f, noise %.0f) not recurring: period %.0f s, stalls at",
                    cp->level, cp->noise, sc->period_s);
            for (size_t i = 0; i < sc->n_stall; i++)
                fprintf(stderr, " %.3f", (double)(sc->stall[i] - sc->t0) / 1e6 / sc->period_s);
            fprintf(stderr, " (periods)\n");
        }
        json_object_put(o);
    }
    for (int k = 0; k < 2; k++)
        fs_store_sink_remove(st, sink[k]);
    fs_analysis_free(an);
    fs_store_free(st);
    fs_buf_free(&out);
    free(sc);
    return 0;
}

struct tally {
    int n, first, top3, recurring, period_ok, next_ok, blamed, unrelated, answered;
    int false_groups, false_runs; /* false recurrences; scenarios with one or more */
    double period_err_sum, next_err_sum, answer_sum, answer_max;
};

static void
add(struct tally *t, const struct result *r)
{
    t->n++;
    t->first += r->first;
    t->top3 += r->top3;
    t->recurring += r->recurring;
    t->blamed += r->blamed;
    t->unrelated += r->unrelated;
    t->false_groups += r->false_recurring;
    t->false_runs += r->false_recurring > 0;
    if (r->recurring) {
        t->period_ok += r->period_err <= 0.01;
        t->next_ok += r->next_err <= 0.02;
        t->period_err_sum += r->period_err;
        t->next_err_sum += r->next_err;
    }
    if (r->answer_s >= 0) {
        t->answered++;
        t->answer_sum += r->answer_s;
        if (r->answer_s > t->answer_max)
            t->answer_max = r->answer_s;
    }
}

static double
pct(int a, int b)
{
    return b ? 100.0 * a / b : 0;
}

int
main(int argc, char **argv)
{
    int seeds = 50;
    uint64_t base = 7000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--seeds"))
            seeds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed-base"))
            base = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--min-occurrences"))
            min_occurrences = (size_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--family"))
            only_family = argv[i + 1];
    }
    struct tally all = {0}, fam[F_COUNT];
    memset(fam, 0, sizeof fam);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int f = 0; f < F_COUNT; f++)
        for (int s = 0; s < seeds && (!only_family || !strcmp(only_family, family_names[f])); s++) {
            struct result r;
            if (run_one((enum family)f, base + (uint64_t)s, &r) != 0)
                return 1;
            add(&fam[f], &r);
            if (getenv("EVAL_VERBOSE"))
                fprintf(stderr,
                        "%s seed %d: first %d top3 %d recurring %d period_err %.4f next_err %.4f "
                        "answer %.0f s blamed %d/%d false_recurring %d\n",
                        family_names[f], s, r.first, r.top3, r.recurring, r.period_err, r.next_err,
                        r.answer_s, r.blamed, r.unrelated, r.false_recurring);
            add(&all, &r);
        }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%-16s %5s %7s %7s %9s %9s %9s %9s %10s %10s\n", "family", "runs", "first%", "top3%",
           "blamed%", "recur%", "period1%", "next2%", "answer_s", "answer_max");
    for (int f = 0; f <= F_COUNT; f++) {
        const struct tally *t = f < F_COUNT ? &fam[f] : &all;
        printf("%-16s %5d %7.1f %7.1f %9.1f %9.1f %9.1f %9.1f %10.1f %10.1f\n",
               f < F_COUNT ? family_names[f] : "all", t->n, pct(t->first, t->n), pct(t->top3, t->n),
               pct(t->blamed, t->unrelated), pct(t->recurring, t->n), pct(t->period_ok, t->n),
               pct(t->next_ok, t->n), t->answered ? t->answer_sum / t->answered : -1,
               t->answer_max);
    }
    for (int f = 0; f <= F_COUNT; f++) {
        const struct tally *t = f < F_COUNT ? &fam[f] : &all;
        const char *nm = f < F_COUNT ? family_names[f] : "all";
        printf("EVAL %s_culprit_first %.1f %%\n", nm, pct(t->first, t->n));
        printf("EVAL %s_culprit_top3 %.1f %%\n", nm, pct(t->top3, t->n));
        printf("EVAL %s_unrelated_blamed_on_culprit %.1f %%\n", nm, pct(t->blamed, t->unrelated));
        printf("EVAL %s_recurring_found %.1f %%\n", nm, pct(t->recurring, t->n));
        printf("EVAL %s_period_within_1pct %.1f %%\n", nm, pct(t->period_ok, t->n));
        printf("EVAL %s_next_within_2pct_of_period %.1f %%\n", nm, pct(t->next_ok, t->n));
        printf("EVAL %s_mean_period_error %.3f %%\n", nm,
               t->recurring ? 100 * t->period_err_sum / t->recurring : -1);
        printf("EVAL %s_time_to_answer_mean %.1f s\n", nm,
               t->answered ? t->answer_sum / t->answered : -1);
        printf("EVAL %s_false_recurring_runs %.1f %%\n", nm, pct(t->false_runs, t->n));
        printf("EVAL %s_false_recurring_groups %d count\n", nm, t->false_groups);
    }
    printf("EVAL scenarios %d count\n", all.n);
    printf("EVAL eval_wall_time %.1f s\n",
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    return 0;
}
