/* Departures from baseline, episodes and recurrences (see incidents.h). */
#include "analysis/incidents.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/effects.h"

static const char *const kind_phrases[FS_AN_KIND_COUNT] = {"ECN surge", "queue high water",
                                                           "drop burst", "PFC storm", "departure"};
static const char *const kind_names[FS_AN_KIND_COUNT] = {"ecn", "queue", "drop", "pfc", "other"};

const char *
fs_an_kind_phrase(enum fs_an_kind k)
{
    return (unsigned)k < FS_AN_KIND_COUNT ? kind_phrases[k] : "departure";
}

const char *
fs_an_kind_name(enum fs_an_kind k)
{
    return (unsigned)k < FS_AN_KIND_COUNT ? kind_names[k] : "other";
}

/* Floors: a few packets (or pause frames) per second, 10 kB of queue, 1 ms of pause
   per second. Below these a change is not worth an engineer's attention. */
static const struct {
    const char *name;
    enum fs_an_kind kind;
    bool counter;
    double floor;
} an_table[] = {
    {"fabric_port_ecn_marked_packets_total", FS_AN_ECN, true, 10},
    {"fabric_queue_ecn_marked_packets_total", FS_AN_ECN, true, 10},
    {"fabric_flow_rule_ecn_marked_packets_total", FS_AN_ECN, true, 10},
    {"fabric_queue_depth_bytes", FS_AN_QUEUE, false, 10000},
    {"fabric_queue_depth_max_bytes", FS_AN_QUEUE, false, 10000},
    {"fabric_queue_depth_cells", FS_AN_QUEUE, false, 100},
    {"fabric_queue_wred_dropped_packets_total", FS_AN_DROP, true, 1},
    {"fabric_queue_no_buffer_dropped_packets_total", FS_AN_DROP, true, 1},
    {"fabric_port_discards_total", FS_AN_DROP, true, 1},
    {"fabric_flow_rule_dropped_packets_total", FS_AN_DROP, true, 1},
    {"fabric_pfc_pause_frames_total", FS_AN_PFC, true, 10},
    {"fabric_pfc_pause_seconds_total", FS_AN_PFC, true, 0.001},
    {"fabric_port_tx_wait_seconds_total", FS_AN_PFC, true, 0.001},
};

bool
fs_an_classify(const char *metric, enum fs_an_kind *kind, bool *counter, double *abs_floor)
{
    for (size_t i = 0; i < sizeof an_table / sizeof an_table[0]; i++) {
        if (strcmp(metric, an_table[i].name) == 0) {
            *kind = an_table[i].kind;
            *counter = an_table[i].counter;
            *abs_floor = an_table[i].floor;
            return true;
        }
    }
    return false;
}

bool
fs_an_is_watermark(const char *metric)
{
    return metric && strstr(metric, "_max_") != NULL;
}

const char *
fs_an_metric(size_t i)
{
    return i < sizeof an_table / sizeof an_table[0] ? an_table[i].name : NULL;
}

size_t
fs_an_counter_rates(const int64_t *ts_us, const uint64_t *u, size_t n, double scale,
                    int64_t *out_ts, double *out_v)
{
    size_t m = 0;
    for (size_t i = 1; i < n; i++) {
        int64_t dt = ts_us[i] - ts_us[i - 1];
        if (dt <= 0)
            continue;
        double inc = u[i] >= u[i - 1] ? (double)(u[i] - u[i - 1]) : 0.0;
        out_ts[m] = ts_us[i];
        out_v[m] = inc * scale * 1e6 / (double)dt;
        m++;
    }
    return m;
}

void
fs_an_step_add(struct fs_an_step *st, uint64_t inc)
{
    if (inc == 0)
        return;
    uint64_t a = st->g, b = inc;
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    st->g = a;
    st->n_inc++;
}

double
fs_an_step_floor(const struct fs_an_step *st, double abs_floor, int64_t first_us, int64_t last_us,
                 size_t n, double scale)
{
    if (st->n_inc < FS_AN_MIN_STEPS || st->g <= 1 || n < 2 || last_us <= first_us)
        return abs_floor;
    double mean_dt_s = (double)(last_us - first_us) / 1e6 / (double)(n - 1);
    double f = (double)st->g * scale / mean_dt_s;
    return f > abs_floor ? f : abs_floor;
}

void
fs_an_opts_default(struct fs_an_opts *o)
{
    o->z_threshold = 6;
    o->prefilter = 0.75;
    o->rel_floor = 0.05;
    o->baseline_window_us = 600 * 1000000LL;
    o->baseline_step_us = 600 * 1000000LL;
    o->merge_gap_us = 2 * 1000000LL;
    o->max_period_spread = 0.1;
    o->min_occurrences = 3;
}

/* ---- robust statistics ---- */

/* k-th smallest of a[0..n-1] (reorders a). */
static double
select_kth(double *a, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        double pivot = a[lo + (hi - lo) / 2];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] < pivot)
                i++;
            while (a[j] > pivot)
                j--;
            if (i <= j) {
                double t = a[i];
                a[i] = a[j];
                a[j] = t;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return a[k];
    }
    return a[k];
}

/* Median and scale of v[from..to) from at most FS_AN_BASELINE_SAMPLES strided samples. */
static void
baseline(const double *v, size_t from, size_t to, double rel_floor, double abs_floor,
         double *median, double *scale)
{
    double tmp[FS_AN_BASELINE_SAMPLES];
    size_t n = to - from, m = 0;
    size_t stride =
        n > FS_AN_BASELINE_SAMPLES ? (n + FS_AN_BASELINE_SAMPLES - 1) / FS_AN_BASELINE_SAMPLES : 1;
    for (size_t i = from; i < to && m < FS_AN_BASELINE_SAMPLES; i += stride)
        if (isfinite(v[i]))
            tmp[m++] = v[i];
    if (m == 0) {
        *median = 0;
        *scale = abs_floor > 0 ? abs_floor : 1e-12;
        return;
    }
    double med = select_kth(tmp, m, m / 2);
    for (size_t i = 0; i < m; i++)
        tmp[i] = fabs(tmp[i] - med);
    double mad = select_kth(tmp, m, m / 2);
    double s = 1.4826 * mad;
    double r = rel_floor * fabs(med);
    if (r > s)
        s = r;
    if (abs_floor > s)
        s = abs_floor;
    if (s <= 0)
        s = 1e-12;
    *median = med;
    *scale = s;
}

/* A baseline that follows the load: the level at time t is med + slope * (t - tc). */
struct level {
    double med, scale, slope;
    int64_t tc;
};

static double
level_at(const struct level *lv, int64_t t)
{
    return lv->med + lv->slope * (double)(t - lv->tc);
}

/*
 * The baseline of v[from..to) (ts its times), from at most FS_AN_BASELINE_SAMPLES strided
 * samples: the median, and the scale of the residuals as baseline() has it. When the load
 * rises (the medians of the window's thirds climb in a line, the ends more than
 * one scale apart, rising) the level follows the line through them: a daily rise is not
 * a departure, a surge on top of it is. A step inside the window (the middle third's median
 * at one end's) keeps the flat median; the scan takes a lasting step as a change of level
 * (fs_departures_add). Returns whether the load moves: the thirds' medians more than a
 * scale apart (a ramp or a step).
 */
static bool
baseline_level(const int64_t *ts, const double *v, size_t from, size_t to, double rel_floor,
               double abs_floor, struct level *lv)
{
    baseline(v, from, to, rel_floor, abs_floor, &lv->med, &lv->scale);
    lv->slope = 0;
    lv->tc = 0;
    size_t n = to - from;
    if (n < 24)
        return false;
    double x[FS_AN_BASELINE_SAMPLES], tmp[FS_AN_BASELINE_SAMPLES];
    int64_t t[FS_AN_BASELINE_SAMPLES];
    size_t m = 0, stride = n > FS_AN_BASELINE_SAMPLES
                               ? (n + FS_AN_BASELINE_SAMPLES - 1) / FS_AN_BASELINE_SAMPLES
                               : 1;
    for (size_t i = from; i < to && m < FS_AN_BASELINE_SAMPLES; i += stride)
        if (isfinite(v[i])) {
            x[m] = v[i];
            t[m++] = ts[i];
        }
    if (m < 24)
        return false;
    size_t k = m / 3;
    double third[3];
    for (int j = 0; j < 3; j++) {
        size_t lo = (size_t)j * k, hi = j == 2 ? m : (size_t)(j + 1) * k;
        memcpy(tmp, x + lo, (hi - lo) * sizeof *tmp);
        third[j] = select_kth(tmp, hi - lo, (hi - lo) / 2);
    }
    double rise = third[2] - third[0];
    bool moves = fabs(rise) > lv->scale || fabs(third[1] - third[0]) > lv->scale ||
                 fabs(third[2] - third[1]) > lv->scale;
    bool line = fabs(third[1] - (third[0] + third[2]) / 2) <= 0.25 * fabs(rise) &&
                (third[1] - third[0]) * rise > 0 && (third[2] - third[1]) * rise > 0;
    /* Only a rising load is followed: a falling one extrapolated would put the baseline
       under the load as soon as it stops falling (an incast that ended inside the window),
       and every sample after would depart; against a flat baseline a fall departs not at
       all (departures are upward). */
    if (rise <= lv->scale || !line)
        return moves;
    int64_t c0 = t[k / 2], c2 = t[2 * k + (m - 2 * k) / 2];
    if (c2 <= c0)
        return moves;
    lv->slope = rise / (double)(c2 - c0);
    lv->tc = t[k + k / 2];
    lv->med = third[1];
    for (size_t i = 0; i < m; i++)
        tmp[i] = fabs(x[i] - level_at(lv, t[i]));
    double sc = 1.4826 * select_kth(tmp, m, m / 2);
    if (rel_floor * fabs(lv->med) > sc)
        sc = rel_floor * fabs(lv->med);
    if (abs_floor > sc)
        sc = abs_floor;
    lv->scale = sc > 0 ? sc : 1e-12;
    return true;
}

/* First index with ts >= t. */
static size_t
lower_bound(const int64_t *ts, size_t n, int64_t t)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ts[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- departures ---- */

struct fs_departures *
fs_departures_new(const struct fs_an_opts *o, int64_t start_us, int64_t end_us)
{
    struct fs_departures *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    if (o)
        d->opts = *o;
    else
        fs_an_opts_default(&d->opts);
    d->start_us = start_us;
    d->end_us = end_us;
    d->observed_start_us = start_us;
    return d;
}

void
fs_departures_free(struct fs_departures *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n_series; i++) {
        struct fs_an_series_ref *r = &d->series[i];
        free((char *)r->target);
        free((char *)r->interface);
        free((char *)r->tc);
        free((char *)r->rule);
        free((char *)r->metric);
        free((char *)r->direction);
        free((char *)r->priority);
    }
    free(d->series);
    free(d->runs);
    free(d->scratch);
    free(d);
}

static char *
dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

static int
remember_series(struct fs_departures *d, const struct fs_an_series *s, uint32_t *idx)
{
    if (d->n_series == d->cap_series) {
        size_t cap = d->cap_series ? d->cap_series * 2 : 64;
        void *p = realloc(d->series, cap * sizeof *d->series);
        if (!p)
            return -1;
        d->series = p;
        d->cap_series = cap;
    }
    struct fs_an_series_ref *r = &d->series[d->n_series];
    r->target = dup_or_empty(s->target);
    r->interface = dup_or_empty(s->interface);
    r->tc = dup_or_empty(s->tc);
    r->rule = dup_or_empty(s->rule);
    r->direction = dup_or_empty(s->direction);
    r->priority = dup_or_empty(s->priority);
    r->metric = dup_or_empty(s->metric);
    r->kind = s->kind;
    r->time_uncertainty_us = s->time_uncertainty_us;
    if (s->time_uncertainty_us > d->max_time_uncertainty_us)
        d->max_time_uncertainty_us = s->time_uncertainty_us;
    *idx = (uint32_t)d->n_series++;
    if (!r->target || !r->interface || !r->tc || !r->rule || !r->metric || !r->direction ||
        !r->priority)
        return -1;
    return 0;
}

static int
push_run(struct fs_departures *d, const struct fs_departure *run)
{
    if (d->n_runs == d->cap_runs) {
        size_t cap = d->cap_runs ? d->cap_runs * 2 : 256;
        void *p = realloc(d->runs, cap * sizeof *d->runs);
        if (!p)
            return -1;
        d->runs = p;
        d->cap_runs = cap;
    }
    d->runs[d->n_runs++] = *run;
    if (run->end_us - run->start_us > d->max_run_us)
        d->max_run_us = run->end_us - run->start_us;
    return 0;
}

int
fs_departures_add_ref(struct fs_departures *d, const struct fs_an_series_ref *s, uint32_t *idx)
{
    struct fs_an_series x = {.target = s->target,
                             .interface = s->interface,
                             .tc = s->tc,
                             .rule = s->rule,
                             .direction = s->direction,
                             .priority = s->priority,
                             .metric = s->metric,
                             .kind = s->kind,
                             .time_uncertainty_us = s->time_uncertainty_us};
    return remember_series(d, &x, idx);
}

int
fs_departures_push(struct fs_departures *d, const struct fs_departure *run)
{
    return push_run(d, run);
}

uint64_t
fs_an_series_key(const char *metric, const char *target, const char *interface, const char *tc,
                 const char *rule, const char *direction, const char *priority)
{
    const char *f[7] = {metric, target, interface, tc, rule, direction, priority};
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
    for (int i = 0; i < 7; i++) {
        for (const char *c = f[i] ? f[i] : ""; *c; c++)
            h = (h ^ (unsigned char)*c) * 0x100000001b3ULL;
        h = (h ^ 0x1f) * 0x100000001b3ULL; /* a separator: ("ab","c") != ("a","bc") */
    }
    return h;
}

static uint64_t
ref_hash(const struct fs_an_series_ref *r)
{
    return fs_an_series_key(r->metric, r->target, r->interface, r->tc, r->rule, r->direction,
                            r->priority);
}

size_t
fs_departures_runs_after(const struct fs_departures *d, int64_t t)
{
    size_t lo = 0, hi = d->n_runs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->runs[mid].start_us <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool
same_ref(const struct fs_an_series_ref *x, const struct fs_an_series_ref *r)
{
    return !strcmp(x->metric, r->metric) && !strcmp(x->target, r->target) &&
           !strcmp(x->interface, r->interface) && !strcmp(x->tc, r->tc) &&
           !strcmp(x->rule, r->rule) && !strcmp(x->direction, r->direction) &&
           !strcmp(x->priority, r->priority);
}

int
fs_departures_absorb(struct fs_departures *dst, const struct fs_departures *src, int64_t from_us,
                     int64_t to_us)
{
    return fs_departures_absorb_span(dst, src, from_us, to_us, INT64_MAX);
}

int
fs_departures_absorb_span(struct fs_departures *dst, const struct fs_departures *src,
                          int64_t from_us, int64_t to_us, int64_t start_before_us)
{
    size_t cap = 64;
    while (cap < (dst->n_series + src->n_series) * 2)
        cap *= 2;
    uint32_t *tab = calloc(cap, sizeof *tab); /* index into dst->series + 1 */
    uint32_t *to = malloc((src->n_series ? src->n_series : 1) * sizeof *to);
    int rc = -1;
    if (!tab || !to)
        goto out;
    for (size_t i = 0; i < dst->n_series; i++) {
        size_t k = (size_t)ref_hash(&dst->series[i]) & (cap - 1);
        while (tab[k])
            k = (k + 1) & (cap - 1);
        tab[k] = (uint32_t)i + 1;
    }
    for (size_t i = 0; i < src->n_series; i++)
        to[i] = UINT32_MAX; /* added when one of its runs is */
    for (size_t i = 0; i < src->n_runs; i++) {
        struct fs_departure run = src->runs[i];
        if (run.end_us < from_us || run.end_us >= to_us || run.start_us > start_before_us)
            continue;
        uint32_t s = run.series;
        if (to[s] == UINT32_MAX) {
            const struct fs_an_series_ref *r = &src->series[s];
            size_t k = (size_t)ref_hash(r) & (cap - 1);
            for (; tab[k]; k = (k + 1) & (cap - 1))
                if (same_ref(&dst->series[tab[k] - 1], r)) {
                    to[s] = tab[k] - 1;
                    break;
                }
            if (to[s] == UINT32_MAX) {
                if (fs_departures_add_ref(dst, r, &to[s]) != 0)
                    goto out;
                tab[k] = to[s] + 1;
            }
        }
        run.series = to[s];
        if (push_run(dst, &run) != 0)
            goto out;
    }
    dst->series_scanned += src->series_scanned;
    rc = 0;
out:
    free(tab);
    free(to);
    return rc;
}

/* Minimum and maximum of v[from..to) (to > from). Four independent accumulators: a single
   one makes the loop as slow as the compare's latency, and this loop reads every sample
   of every series. NaNs are ignored. */
static void
min_max(const double *v, size_t from, size_t to, double *mn, double *mx)
{
    double a0 = -INFINITY, a1 = -INFINITY, a2 = -INFINITY, a3 = -INFINITY;
    double b0 = INFINITY, b1 = INFINITY, b2 = INFINITY, b3 = INFINITY;
    size_t i = from;
    for (; i + 4 <= to; i += 4) {
        a0 = v[i] > a0 ? v[i] : a0;
        a1 = v[i + 1] > a1 ? v[i + 1] : a1;
        a2 = v[i + 2] > a2 ? v[i + 2] : a2;
        a3 = v[i + 3] > a3 ? v[i + 3] : a3;
        b0 = v[i] < b0 ? v[i] : b0;
        b1 = v[i + 1] < b1 ? v[i + 1] : b1;
        b2 = v[i + 2] < b2 ? v[i + 2] : b2;
        b3 = v[i + 3] < b3 ? v[i + 3] : b3;
    }
    for (; i < to; i++) {
        a0 = v[i] > a0 ? v[i] : a0;
        b0 = v[i] < b0 ? v[i] : b0;
    }
    a0 = a1 > a0 ? a1 : a0;
    a2 = a3 > a2 ? a3 : a2;
    b0 = b1 < b0 ? b1 : b0;
    b2 = b3 < b2 ? b3 : b2;
    *mx = a2 > a0 ? a2 : a0;
    *mn = b2 < b0 ? b2 : b0;
}

/* The departure runs of one series being scanned. */
struct run_state {
    bool have_idx, open;
    uint32_t idx;
    struct fs_departure run;
};

/* A departure sustained over two samples in a row counts from this share of the
 * threshold: with z 6 for one sample, two at 4.5 or more are as unlikely under noise
 * (two independent Gaussian draws past 4.5 sigma are rarer than one past 6.5), and a
 * surge of a busy port whose own noise is a fifth of its level reaches only 5-7. */
#define SUSTAINED_SHARE 0.75

/* A departure that lasts this long (most of its samples, and at least LEVEL_SHIFT_SAMPLES
 * of them) is a change of level, not an episode: a job that starts, a rebalanced flow
 * set. Stalls last seconds; congestion a scan should report lasts well under this. */
#define LEVEL_SHIFT_US (120 * 1000000LL)
#define LEVEL_SHIFT_SAMPLES 10
#define LEVEL_SHIFT_SHARE 0.75

/* The sustained departures of the samples scanned so far (per sample: +1 above, -1 below
   the baseline by SUSTAINED_SHARE of the threshold), over the last LEVEL_SHIFT_US. */
struct shift_state {
    int8_t *sign; /* per sample of the series (the departures' scratch) */
    size_t lo;    /* the oldest sample in the window */
    size_t up, down;
    bool off; /* no more shifts in this series (one was taken where it began) */
};

/* Samples [i, end) of s against one baseline: opens, grows and closes runs. A sample
 * departs at z_threshold, or at SUSTAINED_SHARE of it when a neighbour in [lo, hi)
 * does as well. Returns 1 with *shift_at when the samples since shift_at (a departure
 * of LEVEL_SHIFT_US, either way) are a change of level: the caller rebases there. */
static int
detect_runs(struct fs_departures *d, const struct fs_an_series *s, size_t i, size_t end, size_t lo,
            size_t hi, const struct level *lv, struct run_state *rs, struct shift_state *sh,
            size_t *shift_at)
{
    const int64_t *ts = s->ts_us;
    const double *v = s->v;
    double inv = 1.0 / lv->scale, zt = d->opts.z_threshold, z2 = zt * SUSTAINED_SHARE;
    /* A rate covers the interval before its sample, and so does a watermark (the
       deepest the queue was since the previous poll): a run of either starts at the
       sample before. */
    bool interval = s->is_rate || fs_an_is_watermark(s->metric);
    for (; i < end; i++) {
        double base = level_at(lv, ts[i]);
        double z = (v[i] - base) * inv;
        if (z > 1e9)
            z = 1e9;
        bool departs = z >= zt;
        if (!departs && z >= z2)
            departs = (i > lo && (v[i - 1] - level_at(lv, ts[i - 1])) * inv >= z2) ||
                      (i + 1 < hi && (v[i + 1] - level_at(lv, ts[i + 1])) * inv >= z2);
        if (!sh->off) {
            sh->sign[i] = z >= z2 ? 1 : z <= -z2 ? -1 : 0;
            sh->up += sh->sign[i] > 0;
            sh->down += sh->sign[i] < 0;
            while (sh->lo < i && ts[i] - ts[sh->lo] > LEVEL_SHIFT_US) {
                sh->up -= sh->sign[sh->lo] > 0;
                sh->down -= sh->sign[sh->lo] < 0;
                sh->lo++;
            }
            size_t cnt = i - sh->lo + 1;
            int dir = (double)sh->up >= LEVEL_SHIFT_SHARE * (double)cnt     ? 1
                      : (double)sh->down >= LEVEL_SHIFT_SHARE * (double)cnt ? -1
                                                                            : 0;
            if (dir && cnt >= LEVEL_SHIFT_SAMPLES &&
                ts[i] - ts[sh->lo] >= LEVEL_SHIFT_US * 9 / 10) {
                size_t j = sh->lo;
                while (sh->sign[j] != dir)
                    j++;
                *shift_at = j;
                return 1;
            }
        }
        if (departs) {
            int64_t t0 = ts[i];
            if (interval)
                t0 = i > 0 ? ts[i - 1] : ts[i] - (ts[1] - ts[0]);
            if (!rs->open) {
                rs->open = true;
                rs->run.start_us = t0;
                rs->run.onset_us = i > 0 ? ts[i - 1] + (ts[i] - ts[i - 1]) / 2 : ts[i];
                rs->run.peak_z = -1;
            }
            rs->run.end_us = ts[i];
            if (z > rs->run.peak_z) {
                rs->run.peak_z = z;
                rs->run.peak_value = v[i];
                rs->run.baseline = base;
                rs->run.peak_us = interval ? t0 + (ts[i] - t0) / 2 : ts[i];
            }
        } else if (rs->open) {
            rs->open = false;
            if (!rs->have_idx) {
                if (remember_series(d, s, &rs->idx) != 0)
                    return -1;
                rs->have_idx = true;
            }
            rs->run.series = rs->idx;
            if (push_run(d, &rs->run) != 0)
                return -1;
        }
    }
    return 0;
}

/* Pushes the run still open at the end of the series' range. */
static int
finish_runs(struct fs_departures *d, const struct fs_an_series *s, struct run_state *rs)
{
    if (!rs->open)
        return 0;
    if (!rs->have_idx && remember_series(d, s, &rs->idx) != 0)
        return -1;
    rs->run.series = rs->idx;
    return push_run(d, &rs->run);
}

int
fs_departures_add(struct fs_departures *d, const struct fs_an_series *s)
{
    const struct fs_an_opts *o = &d->opts;
    const int64_t *ts = s->ts_us;
    const double *v = s->v;
    size_t n = s->n;
    if (n < 3)
        return 0;
    d->series_scanned++;
    size_t first = lower_bound(ts, n, d->start_us);
    size_t last = lower_bound(ts, n, d->end_us + 1); /* exclusive */
    if (first >= last)
        return 0;

    /* Whole-range prefilter: a series whose whole swing stays under the threshold times
       its floor cannot depart (the scale is never below the floor); otherwise compare
       its maximum with one whole-range baseline. */
    double med, scale;
    double vmax, vmin;
    min_max(v, first, last, &vmin, &vmax);
    if (first > 0) {
        double hmin, hmax;
        min_max(v, 0, first, &hmin, &hmax);
        if (hmin < vmin)
            vmin = hmin;
    }
    if (s->abs_floor > 0 && vmax - vmin < o->z_threshold * SUSTAINED_SHARE * s->abs_floor) {
        d->series_prefiltered++;
        return 0;
    }
    /* One baseline over everything says nothing of a series whose load moves (a ramp, a
       step): its spread is the move's, and would hide a surge on top of it. Those are
       scanned block by block. */
    struct level whole;
    if (!baseline_level(ts, v, 0, n, o->rel_floor, s->abs_floor, &whole)) {
        med = whole.med;
        scale = whole.scale;
        if ((vmax - med) / scale < o->prefilter * o->z_threshold) {
            d->series_prefiltered++;
            return 0;
        }
    }

    struct run_state rs = {0};
    int64_t step = o->baseline_step_us > 0 ? o->baseline_step_us : 300 * 1000000LL;
    if (n > d->scratch_cap) {
        int8_t *p = realloc(d->scratch, n);
        if (!p)
            return -1;
        d->scratch = p;
        d->scratch_cap = n;
    }
    struct shift_state sh = {.sign = d->scratch, .lo = first};
    int64_t shift_t = INT64_MIN; /* the last change of level: baselines start there */
    size_t shift_i = SIZE_MAX;
    struct level lv;
    size_t i = first;
    while (i < last) {
        int64_t bs = d->start_us + ((ts[i] - d->start_us) / step) * step;
        size_t bend = lower_bound(ts, n, bs + step);
        if (bend > last)
            bend = last;
        int64_t from = bs - o->baseline_window_us > shift_t ? bs - o->baseline_window_us : shift_t;
        size_t w0 = lower_bound(ts, n, from);
        size_t w1 = lower_bound(ts, n, bs);
        if (w1 < w0 + 8) { /* nothing before (or since the change of level): the window after */
            w0 = shift_t > INT64_MIN ? lower_bound(ts, n, shift_t) : w1;
            w1 = lower_bound(ts, n, ts[w0 < n ? w0 : n - 1] + o->baseline_window_us);
        }
        if (w1 < w0 + 3) {
            i = bend;
            continue;
        }
        baseline_level(ts, v, w0, w1, o->rel_floor, s->abs_floor, &lv);
        size_t at;
        int r = detect_runs(d, s, i, bend, first, last, &lv, &rs, &sh, &at);
        if (r < 0)
            return -1;
        if (r == 0) {
            i = bend;
            continue;
        }
        /* A change of level at ts[at]: what departed since is the new level, not runs;
           rebase on the window after it and scan again from there. Once per place: a
           second change where one was just taken ends the search for them. */
        if (shift_i != SIZE_MAX && at <= shift_i) {
            sh.off = true;
            continue;
        }
        rs.open = false;
        while (rs.have_idx && d->n_runs > 0 && d->runs[d->n_runs - 1].series == rs.idx &&
               d->runs[d->n_runs - 1].end_us >= ts[at])
            d->n_runs--;
        shift_i = at;
        shift_t = ts[at];
        sh.lo = at;
        sh.up = sh.down = 0;
        i = at;
    }
    return finish_runs(d, s, &rs);
}

bool
fs_an_trailing_baseline(const struct fs_an_series *s, int64_t at_us, const struct fs_an_opts *o,
                        double *median, double *scale)
{
    size_t w0 = lower_bound(s->ts_us, s->n, at_us - o->baseline_window_us);
    size_t w1 = lower_bound(s->ts_us, s->n, at_us);
    if (w1 - w0 < 8)
        return false;
    baseline(s->v, w0, w1, o->rel_floor, s->abs_floor, median, scale);
    return true;
}

int
fs_departures_add_fixed(struct fs_departures *d, const struct fs_an_series *s, double median,
                        double scale)
{
    if (s->n < 2 || !(scale > 0))
        return 0;
    d->series_scanned++;
    size_t first = lower_bound(s->ts_us, s->n, d->start_us);
    size_t last = lower_bound(s->ts_us, s->n, d->end_us + 1);
    if (first >= last)
        return 0;
    double vmin, vmax;
    min_max(s->v, first, last, &vmin, &vmax);
    if ((vmax - median) / scale < d->opts.z_threshold * SUSTAINED_SHARE) {
        d->series_prefiltered++;
        return 0;
    }
    struct run_state rs = {0};
    struct level lv = {median, scale, 0, 0};
    struct shift_state sh = {.off = true};
    size_t at;
    if (detect_runs(d, s, first, last, first, last, &lv, &rs, &sh, &at) != 0)
        return -1;
    return finish_runs(d, s, &rs);
}

int
fs_an_order_by_key(const int64_t *key, size_t n, uint32_t *out)
{
    if (n == 0)
        return 0;
    int64_t mn = key[0], mx = key[0];
    for (size_t i = 1; i < n; i++) {
        if (key[i] < mn)
            mn = key[i];
        if (key[i] > mx)
            mx = key[i];
    }
    uint64_t range = (uint64_t)mx - (uint64_t)mn;
    uint32_t *tmp = malloc(n * sizeof *tmp);
    if (!tmp)
        return -1;
    for (size_t i = 0; i < n; i++)
        out[i] = (uint32_t)i;
    for (unsigned shift = 0; shift < 64 && (shift == 0 || (range >> shift) != 0); shift += 11) {
        size_t count[2049] = {0};
        for (size_t i = 0; i < n; i++)
            count[((((uint64_t)key[out[i]] - (uint64_t)mn) >> shift) & 2047) + 1]++;
        for (size_t b = 1; b <= 2048; b++)
            count[b] += count[b - 1];
        for (size_t i = 0; i < n; i++)
            tmp[count[(((uint64_t)key[out[i]] - (uint64_t)mn) >> shift) & 2047]++] = out[i];
        memcpy(out, tmp, n * sizeof *out);
    }
    free(tmp);
    return 0;
}

int
fs_departures_merge(struct fs_departures *dst, struct fs_departures *src)
{
    size_t ns = dst->n_series + src->n_series, nr = dst->n_runs + src->n_runs;
    if (ns > dst->cap_series) {
        void *p = realloc(dst->series, ns * sizeof *dst->series);
        if (!p)
            return -1;
        dst->series = p;
        dst->cap_series = ns;
    }
    if (nr > dst->cap_runs) {
        void *p = realloc(dst->runs, nr * sizeof *dst->runs);
        if (!p)
            return -1;
        dst->runs = p;
        dst->cap_runs = nr;
    }
    uint32_t base = (uint32_t)dst->n_series;
    if (src->n_series) /* src->series may be NULL when empty */
        memcpy(dst->series + dst->n_series, src->series, src->n_series * sizeof *src->series);
    for (size_t i = 0; i < src->n_runs; i++) {
        dst->runs[dst->n_runs + i] = src->runs[i];
        dst->runs[dst->n_runs + i].series += base;
    }
    dst->n_series = ns;
    dst->n_runs = nr;
    if (src->max_run_us > dst->max_run_us)
        dst->max_run_us = src->max_run_us;
    if (src->max_time_uncertainty_us > dst->max_time_uncertainty_us)
        dst->max_time_uncertainty_us = src->max_time_uncertainty_us;
    dst->series_scanned += src->series_scanned;
    dst->series_prefiltered += src->series_prefiltered;
    /* The strings moved with the refs: src no longer owns them. */
    src->n_series = 0;
    src->n_runs = 0;
    src->series_scanned = 0;
    src->series_prefiltered = 0;
    return 0;
}

int
fs_departures_finish(struct fs_departures *d)
{
    /* Runs replayed from the episode log come in start order already: no copy then. */
    size_t in_order = 1;
    while (in_order < d->n_runs && d->runs[in_order].start_us >= d->runs[in_order - 1].start_us)
        in_order++;
    if (in_order >= d->n_runs) {
        d->finished = true;
        return 0;
    }
    int64_t *key = calloc(d->n_runs ? d->n_runs : 1, sizeof *key);
    uint32_t *order = malloc((d->n_runs ? d->n_runs : 1) * sizeof *order);
    struct fs_departure *sorted = malloc((d->n_runs ? d->n_runs : 1) * sizeof *sorted);
    int rc = -1;
    if (!key || !order || !sorted)
        goto out;
    for (size_t i = 0; i < d->n_runs; i++)
        key[i] = d->runs[i].start_us;
    if (fs_an_order_by_key(key, d->n_runs, order) != 0)
        goto out;
    /* Stored in start order: window look-ups then read memory in sequence. */
    for (size_t i = 0; i < d->n_runs; i++)
        sorted[i] = d->runs[order[i]];
    free(d->runs);
    d->runs = sorted;
    d->cap_runs = d->n_runs ? d->n_runs : 1;
    sorted = NULL;
    d->finished = true;
    rc = 0;
out:
    free(key);
    free(order);
    free(sorted);
    return rc;
}

/* ---- episodes and recurrences ----
 *
 * Runs are first merged per series into series episodes ("port episodes" below: the
 * unit that recurs); those whose onsets fall within merge_gap of the first one of a
 * cluster form one episode. Clustering by onset rather than by overlap keeps a fabric
 * full of unrelated bursts from chaining into one endless episode. Recurrence is looked
 * for per series over its own episodes; series that recur in the same episodes become
 * one group (with their ports). */

void
fs_incident_report_free(struct fs_incident_report *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_episodes; i++)
        free(r->episodes[i].members);
    for (size_t i = 0; i < r->n_groups; i++) {
        free(r->groups[i].series);
        free(r->groups[i].episodes);
    }
    free(r->episodes);
    free(r->groups);
    free(r);
}

struct port_run {
    uint32_t port;
    uint32_t run;
};

struct port_episode {
    uint32_t port;
    int64_t onset_us, start_us, end_us;
    size_t run_lo, run_hi; /* range in the port-sorted runs */
    size_t episode;        /* cluster it joined */
};

struct ctx {
    const struct fs_departures *d;
    uint32_t *port_of;  /* per series */
    uint32_t *port_rep; /* a series of each port */
    size_t n_ports;
    struct port_run *pr;     /* runs sorted by (port, start) */
    struct port_episode *pe; /* by port, then onset */
    size_t n_pe;
    uint32_t *pe_by_onset; /* indexes into pe */
};

int
fs_an_rank_cmp(double za, int spec_a, double zb, int spec_b)
{
    double ca = za < FS_AN_Z_SURE ? za : FS_AN_Z_SURE;
    double cb = zb < FS_AN_Z_SURE ? zb : FS_AN_Z_SURE;
    if (ca != cb)
        return ca > cb ? -1 : 1;
    if (spec_a != spec_b)
        return spec_a > spec_b ? -1 : 1;
    if (za != zb)
        return za > zb ? -1 : 1;
    return 0;
}

int
fs_an_specificity(const struct fs_an_series_ref *s)
{
    if (s->interface[0])
        return s->tc[0] ? 3 : 2;
    return s->rule[0] ? 1 : 0;
}

void
fs_an_port_text(char *out, size_t len, const struct fs_an_series_ref *s)
{
    snprintf(out, len, "%s%s%s%s%s%s%s%s%s%s%s", s->target, s->interface[0] ? " " : "",
             s->interface, s->tc[0] ? " tc" : "", s->tc, s->rule[0] ? " rule " : "", s->rule,
             s->direction[0] ? " " : "", s->direction, s->priority[0] ? " priority " : "",
             s->priority);
}

static int
cmp_member_z(const void *a, const void *b)
{
    const struct fs_episode_member *x = a, *y = b;
    int c = fs_an_rank_cmp(x->peak_z, x->specificity, y->peak_z, y->specificity);
    if (c != 0)
        return c;
    return x->series < y->series ? -1 : x->series > y->series;
}

/* Units of recurrence (one per series, see above) and their episodes. */
static int
build_ports(struct ctx *c)
{
    const struct fs_departures *d = c->d;
    size_t ns = d->n_series;
    c->port_of = malloc((ns ? ns : 1) * sizeof *c->port_of);
    c->port_rep = malloc((ns ? ns : 1) * sizeof *c->port_rep);
    c->pr = malloc((d->n_runs ? d->n_runs : 1) * sizeof *c->pr);
    c->pe = malloc((d->n_runs ? d->n_runs : 1) * sizeof *c->pe);
    if (!c->port_of || !c->port_rep || !c->pr || !c->pe)
        return -1;
    for (size_t i = 0; i < ns; i++) {
        c->port_of[i] = (uint32_t)i;
        c->port_rep[i] = (uint32_t)i;
    }
    c->n_ports = ns;
    /* Runs grouped by series, by start within one (a stable sort of the start order). */
    int64_t *key = calloc(d->n_runs ? d->n_runs : 1, sizeof *key);
    uint32_t *order = malloc((d->n_runs ? d->n_runs : 1) * sizeof *order);
    if (!key || !order) {
        free(key);
        free(order);
        return -1;
    }
    for (size_t i = 0; i < d->n_runs; i++)
        key[i] = d->runs[i].series;
    int rc = fs_an_order_by_key(key, d->n_runs, order);
    free(key);
    if (rc != 0) {
        free(order);
        return -1;
    }
    /* A paused port's runs are its link partner's congestion (effects.h): not episodes of
       its own, or a victim would recur with every burst that pauses it. */
    bool *paused = calloc(d->n_runs ? d->n_runs : 1, sizeof *paused);
    if (!paused || fs_an_mark_paused_runs(d, NULL, 0, paused) != 0) {
        free(paused);
        free(order);
        return -1;
    }
    size_t n_pr = 0;
    for (size_t i = 0; i < d->n_runs; i++)
        if (!paused[order[i]])
            c->pr[n_pr++] = (struct port_run){c->port_of[d->runs[order[i]].series], order[i]};
    free(paused);
    free(order);
    for (size_t i = 0; i < n_pr;) {
        const struct fs_departure *r0 = &d->runs[c->pr[i].run];
        struct port_episode *pe = &c->pe[c->n_pe++];
        pe->port = c->pr[i].port;
        pe->onset_us = r0->onset_us;
        pe->start_us = r0->start_us;
        pe->end_us = r0->end_us;
        pe->run_lo = i;
        size_t j = i + 1;
        while (j < n_pr && c->pr[j].port == pe->port &&
               d->runs[c->pr[j].run].start_us <= pe->end_us + d->opts.merge_gap_us) {
            const struct fs_departure *r = &d->runs[c->pr[j].run];
            if (r->end_us > pe->end_us)
                pe->end_us = r->end_us;
            if (r->onset_us < pe->onset_us)
                pe->onset_us = r->onset_us;
            j++;
        }
        pe->run_hi = j;
        i = j;
    }
    return 0;
}

static int
build_episodes(struct ctx *c, struct fs_incident_report *r)
{
    const struct fs_departures *d = c->d;
    c->pe_by_onset = malloc((c->n_pe ? c->n_pe : 1) * sizeof *c->pe_by_onset);
    int64_t *key = calloc(c->n_pe ? c->n_pe : 1, sizeof *key);
    size_t cap = 256; /* episodes are far fewer than port episodes: grow as needed */
    r->episodes = calloc(cap, sizeof *r->episodes);
    if (!c->pe_by_onset || !key || !r->episodes) {
        free(key);
        return -1;
    }
    for (size_t i = 0; i < c->n_pe; i++)
        key[i] = c->pe[i].onset_us;
    int rc = fs_an_order_by_key(key, c->n_pe, c->pe_by_onset);
    free(key);
    if (rc != 0)
        return -1;
    for (size_t i = 0; i < c->n_pe;) {
        const struct port_episode *first = &c->pe[c->pe_by_onset[i]];
        size_t j = i, n_runs = 0;
        while (j < c->n_pe &&
               c->pe[c->pe_by_onset[j]].onset_us <= first->onset_us + d->opts.merge_gap_us) {
            const struct port_episode *pe = &c->pe[c->pe_by_onset[j]];
            n_runs += pe->run_hi - pe->run_lo;
            j++;
        }
        if (r->n_episodes == cap) {
            void *p = realloc(r->episodes, cap * 2 * sizeof *r->episodes);
            if (!p)
                return -1;
            r->episodes = p;
            memset(r->episodes + cap, 0, cap * sizeof *r->episodes);
            cap *= 2;
        }
        struct fs_episode *e = &r->episodes[r->n_episodes];
        e->members = calloc(n_runs, sizeof *e->members);
        if (!e->members)
            return -1;
        e->start_us = INT64_MAX;
        e->end_us = INT64_MIN;
        for (size_t k = i; k < j; k++) {
            struct port_episode *pe = &c->pe[c->pe_by_onset[k]];
            pe->episode = r->n_episodes;
            if (pe->start_us < e->start_us)
                e->start_us = pe->start_us;
            if (pe->end_us > e->end_us)
                e->end_us = pe->end_us;
            size_t port_first = e->n_members; /* a port's series are only its own */
            for (size_t q = pe->run_lo; q < pe->run_hi; q++) {
                const struct fs_departure *run = &d->runs[c->pr[q].run];
                size_t m = port_first;
                while (m < e->n_members && e->members[m].series != run->series)
                    m++;
                if (m == e->n_members) {
                    e->n_members++;
                    e->members[m].series = run->series;
                    e->members[m].peak_z = run->peak_z;
                    e->members[m].specificity = fs_an_specificity(&d->series[run->series]);
                    e->members[m].start_us = run->start_us;
                    e->members[m].onset_us = run->onset_us;
                } else {
                    if (run->peak_z > e->members[m].peak_z)
                        e->members[m].peak_z = run->peak_z;
                    if (run->onset_us < e->members[m].onset_us)
                        e->members[m].onset_us = run->onset_us;
                    if (run->start_us < e->members[m].start_us)
                        e->members[m].start_us = run->start_us;
                }
                if (run->peak_z > e->peak_z)
                    e->peak_z = run->peak_z;
                e->kinds |= 1u << d->series[run->series].kind;
            }
        }
        if (e->n_members > 1)
            qsort(e->members, e->n_members, sizeof *e->members, cmp_member_z);
        r->n_episodes++;
        i = j;
    }
    return 0;
}

struct occurrence {
    int64_t t;
    int64_t lo, hi; /* the port episode's extent (for host evidence) */
    int64_t res;    /* the sample interval its onset lies in (how well t is known) */
    size_t episode;
    unsigned kinds; /* how many kinds of departure its episode had (1..5) */
    double mark;    /* its strength: kinds, then peak z (see strong_start) */
};

/* Slow host windows, merged and by start, for the host evidence of a train (fit_period). */
struct host_ctx {
    int64_t *iv; /* start, end pairs, each widened by the margin */
    size_t n;
    int64_t covered; /* their total length */
    double span;     /* the observed span they fall in */
};

/* Whether [lo, hi] overlaps a slow window. */
static bool
host_overlaps(const struct host_ctx *h, int64_t lo, int64_t hi)
{
    size_t a = 0, b = h->n;
    while (a < b) { /* the first window starting after hi */
        size_t mid = a + (b - a) / 2;
        if (h->iv[2 * mid] <= hi)
            a = mid + 1;
        else
            b = mid;
    }
    return a > 0 && h->iv[2 * (a - 1) + 1] >= lo; /* merged: the one before is the only one */
}

struct fit {
    double period, spread, confidence;
    double next;   /* predicted occurrence after the last hit */
    size_t n;      /* hits */
    size_t host;   /* hits that met a slow host window */
    size_t *which; /* indexes into the occurrences; owned */
};

/* Threads fitting ports at once (fs_incidents_find). */
#define FIT_THREADS 4
/* Most candidate periods tried per series, neighbours paired per occurrence. */
#define FIT_CANDIDATES 16
#define FIT_NEIGHBOURS 8
/* Up to ~30% of occurrences may be missed; a random train fills less (see fit_period). */
#define FIT_MIN_FILL 0.5
/* Chance may explain a fit this often at most, all candidates together. */
#define FIT_ALPHA 1e-3
/* The best candidates swept over +-FIT_SWEEP_STEPS fine steps. */
#define FIT_SWEEP_TOP 4
#define FIT_SWEEP_STEPS 15
/* Phase bins of a fold. */
#define FOLD_BINS 64

/* log of the binomial tail P[X >= k] for X ~ Bin(n, p) (0 < p < 1). */
static double
log_binom_tail(size_t k, size_t n, double p)
{
    if (k == 0)
        return 0;
    double lp = log(p), lq = log1p(-p), sum = 0, mx = -INFINITY;
    double terms[64];
    size_t nt = 0;
    /* The tail is dominated by its first terms: sum at most 64 of them. */
    for (size_t i = k; i <= n && nt < 64; i++) {
        /* lgamma_r: lgamma sets the global signgam, and fits run on several threads. */
        int sg;
        double t = lgamma_r((double)n + 1, &sg) - lgamma_r((double)i + 1, &sg) -
                   lgamma_r((double)(n - i) + 1, &sg) + (double)i * lp + (double)(n - i) * lq;
        terms[nt++] = t;
        if (t > mx)
            mx = t;
    }
    for (size_t i = 0; i < nt; i++)
        sum += exp(terms[i] - mx);
    return mx + log(sum);
}

struct track {
    size_t hits, slots;
    double a, period; /* the grid t = a + k * period the hits fit (k from 0) */
    double rms, max_resid;
};

/* Ascending, in place: a quicksort that compares inline (qsort's callback per compare
   was a tenth of the incident search on a busy fabric, where every bursty port's train
   has hundreds of candidate spacings to sort). */
static void
sort_doubles(double *v, size_t n)
{
    while (n > 16) {
        double a = v[0], b = v[n / 2], c = v[n - 1];
        double piv = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        size_t i = 0, j = n - 1;
        for (;;) {
            while (v[i] < piv)
                i++;
            while (v[j] > piv)
                j--;
            if (i >= j)
                break;
            double t = v[i];
            v[i] = v[j];
            v[j] = t;
            i++;
            j--;
        }
        /* [0, j] <= piv <= [j + 1, n): recurse into the smaller part, loop on the other. */
        size_t left = j + 1;
        if (left >= n)
            break; /* no split (cannot happen with a median-of-three pivot): insertion */
        if (left < n - left) {
            sort_doubles(v, left);
            v += left;
            n -= left;
        } else {
            sort_doubles(v + left, n - left);
            n = left;
        }
    }
    for (size_t i = 1; i < n; i++) {
        double x = v[i];
        size_t k = i;
        while (k > 0 && v[k - 1] > x) {
            v[k] = v[k - 1];
            k--;
        }
        v[k] = x;
    }
}

/* Least squares of t = a + k * period over the hits (k: slot numbers). */
static double
lsq_period(const struct occurrence *oc, const size_t *which, const long *ks, size_t n, double *a)
{
    double t0 = (double)oc[which[0]].t;
    double sk = 0, st = 0, skk = 0, skt = 0;
    for (size_t i = 0; i < n; i++) {
        double k = (double)ks[i], t = (double)oc[which[i]].t - t0;
        sk += k;
        st += t;
        skk += k * k;
        skt += k * t;
    }
    double nn = (double)n, den = nn * skk - sk * sk, period = 0;
    if (den != 0)
        period = (nn * skt - sk * st) / den;
    *a = (st - period * sk) / nn + t0;
    return period;
}

/* The occurrences on the grid t = a + k * P (k >= 0): per slot the nearest within tol.
 * Fills which/ks; returns the count. */
static size_t
grid_hits(const struct occurrence *oc, size_t m, double a, double P, double tol, size_t *which,
          long *ks)
{
    size_t n = 0;
    const double inv = 1.0 / P;
    for (size_t i = 0; i < m; i++) {
        double dt = (double)oc[i].t - a, x = dt * inv;
        if (x < -0.5)
            continue;             /* before slot 0 */
        long k = (long)(x + 0.5); /* x + 0.5 >= 0: truncation is floor, without the call */
        double r = fabs(dt - (double)k * P);
        if (r > tol)
            continue;
        if (n > 0 && ks[n - 1] == k) { /* two in one slot: keep the nearer */
            double r0 = fabs((double)oc[which[n - 1]].t - a - (double)k * P);
            if (r < r0)
                which[n - 1] = i;
            continue;
        }
        which[n] = i;
        ks[n] = k;
        n++;
    }
    return n;
}

/* Epoch folding of the train at period P: the phase (modulo P) where most occurrences
 * fall within ±tol gives the grid; then the grid is refitted by least squares to its
 * hits, twice, so a candidate period a little off (or a slowly drifting train) still
 * collects its occurrences. Extras fall at other phases and are left out. */
static void
fold_period(const struct occurrence *oc, size_t m, double P, double tol_frac, double at_least,
            double *ph, size_t *which, long *ks, struct track *tr)
{
    memset(tr, 0, sizeof *tr);
    double t0 = (double)oc[0].t;
    /* Phases in FOLD_BINS bins; the densest circular run of bins spanning 2 tol_frac is
       the grid's phase, its centre the mean phase of the occurrences in it. O(m). */
    unsigned hist[FOLD_BINS] = {0};
    for (size_t i = 0; i < m; i++) {
        double q = ((double)oc[i].t - t0) / P, x = q - floor(q);
        ph[i] = x < 0 ? 0 : x >= 1 ? 0 : x;
        size_t b = (size_t)(ph[i] * FOLD_BINS);
        hist[b < FOLD_BINS ? b : FOLD_BINS - 1]++;
    }
    size_t wb = (size_t)ceil(2 * tol_frac * FOLD_BINS);
    if (wb < 1)
        wb = 1;
    if (wb > FOLD_BINS)
        wb = FOLD_BINS;
    unsigned run = 0, best_run = 0;
    size_t best_b = 0;
    for (size_t b = 0; b < wb; b++)
        run += hist[b];
    for (size_t b = 0; b < FOLD_BINS; b++) { /* window [b, b + wb) */
        if (run > best_run) {
            best_run = run;
            best_b = b;
        }
        run += hist[(b + wb) % FOLD_BINS];
        run -= hist[b];
    }
    /* A fold scores at most its hits, and the refits gain a few at most: one that cannot
       reach the best so far (at_least) stops here. */
    if ((double)best_run + 2 < at_least)
        return;
    double lo = (double)best_b / FOLD_BINS, sum = 0;
    size_t cnt = 0;
    for (size_t i = 0; i < m; i++) {
        double x = ph[i] < lo ? ph[i] + 1 : ph[i];
        if (x < lo + (double)wb / FOLD_BINS) {
            sum += x;
            cnt++;
        }
    }
    double best_c = cnt ? sum / (double)cnt : lo;
    double a = t0 + best_c * P, period = P;
    /* Three refits at most; the grid's hits are those of the last grid fitted. */
    size_t n;
    for (int pass = 0;; pass++) {
        /* Slot 0 at or before the first occurrence: a refit may have moved it past one
           it now reaches. */
        while (a - period > (double)oc[0].t - tol_frac * period)
            a -= period;
        n = grid_hits(oc, m, a, period, tol_frac * period, which, ks);
        if (n < 2)
            return;
        if (pass == 3)
            break;
        double na, np = lsq_period(oc, which, ks, n, &na);
        if (np <= 0 || fabs(np - P) > 0.1 * P)
            break;
        a = na;
        period = np;
    }
    double ss = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs((double)oc[which[i]].t - a - (double)ks[i] * period);
        ss += r * r;
        if (r > mx)
            mx = r;
    }
    tr->hits = n;
    tr->slots = (size_t)(ks[n - 1] - ks[0] + 1);
    tr->a = a;
    tr->period = period;
    tr->rms = sqrt(ss / (double)n);
    tr->max_resid = mx;
}

/* log of the chance that a Poisson train at rate lambda (per us) fits the fold tr as
 * well, times the nc candidates tried (see fit_period). 0 (certain) when it cannot say. */
static double
chance_log_p(const struct track *tr, double lambda, double tol_frac, double res_half, double nc,
             size_t trailing)
{
    if (tr->hits < 3 || tr->period <= 0)
        return 0;
    double w = 2.5 * tr->rms;
    if (w < tr->max_resid)
        w = tr->max_resid;
    if (w < 0.0025 * tr->period)
        w = 0.0025 * tr->period;
    /* Onsets are known to half a sample interval: three bursts of a series polled every
       second line up to the millisecond whenever their spacings are the same number of
       seconds. */
    if (w < res_half)
        w = res_half;
    if (w > tol_frac * tr->period)
        w = tol_frac * tr->period;
    double p0 = 1 - exp(-2 * lambda * w);
    if (p0 > 0.999)
        return 0;
    /* The phase and the period were both taken from the occurrences (a candidate period
       is a spacing between two of them): chance has to explain all hits but two, and had
       as many tries as spacings were looked at (nc, times the series the fabric offered).
       The slots the grid had after its last hit, up to the end of what was observed, are
       slots too: a train that stopped long ago is judged over every slot it left empty,
       or a busy port's random bursts, three of which line up somewhere in hours of data,
       would read as a recurrence (a quarter of busy fabrics had one). */
    return log_binom_tail(tr->hits - 2, tr->slots - 2 + trailing, p0 > 1e-12 ? p0 : 1e-12) +
           log(nc);
}

/* Half the median sample interval the hits' onsets lie in. */
static double
half_res(const struct occurrence *oc, const size_t *which, size_t n)
{
    double r[256];
    size_t m = 0;
    for (size_t i = 0; i < n && m < 256; i++)
        r[m++] = (double)oc[which[i]].res;
    return m ? select_kth(r, m, m / 2) / 2 : 0;
}

/* Folds at P; keeps the result in *bt (and its hits) when it scores best so far.
 * Returns its score: hits x sqrt(fill). A half period hits as often but fills half its
 * slots, a double period fills them all but hits half as often; the square root keeps a
 * train with missed occurrences from losing to its own double period. */
static double
try_period(const struct occurrence *oc, size_t m, double P, double tol_frac, double *ph,
           size_t *which, long *ks, size_t *best_which, long *best_ks, struct track *bt,
           double *best_score)
{
    struct track tr;
    fold_period(oc, m, P, tol_frac, *best_score, ph, which, ks, &tr);
    if (tr.hits < 2)
        return 0;
    double score = (double)tr.hits * sqrt((double)tr.hits / (double)tr.slots);
    if (score > *best_score || (score == *best_score && tr.rms < bt->rms)) {
        *best_score = score;
        *bt = tr;
        memcpy(best_which, which, tr.hits * sizeof *which);
        memcpy(best_ks, ks, tr.hits * sizeof *ks);
    }
    return score;
}

/* Does the train bend off its least-squares grid (a, P)? Fits a parabola to the
 * residuals over the slot numbers and compares: F = (RSS_line - RSS_parabola) /
 * (RSS_parabola / (n - 3)). */
static bool
drifts(const struct occurrence *oc, const size_t *which, const long *ks, size_t n, double a,
       double P)
{
    double kbar = 0;
    for (size_t i = 0; i < n; i++)
        kbar += (double)ks[i] / (double)n;
    /* Normal equations of r = c0 + c1 x + c2 x^2, x = k - kbar. */
    double S[5] = {0}, T[3] = {0}, rss_line = 0;
    for (size_t i = 0; i < n; i++) {
        double x = (double)ks[i] - kbar, r = (double)oc[which[i]].t - a - (double)ks[i] * P;
        double xp = 1;
        for (int j = 0; j < 5; j++) {
            S[j] += xp;
            if (j < 3)
                T[j] += xp * r;
            xp *= x;
        }
        rss_line += r * r;
    }
    double M[3][4] = {{S[0], S[1], S[2], T[0]}, {S[1], S[2], S[3], T[1]}, {S[2], S[3], S[4], T[2]}};
    for (int c = 0; c < 3; c++) { /* Gaussian elimination with partial pivoting */
        int piv = c;
        for (int r = c + 1; r < 3; r++)
            if (fabs(M[r][c]) > fabs(M[piv][c]))
                piv = r;
        if (fabs(M[piv][c]) < 1e-12)
            return false;
        for (int j = 0; j < 4; j++) {
            double t = M[c][j];
            M[c][j] = M[piv][j];
            M[piv][j] = t;
        }
        for (int r = 0; r < 3; r++)
            if (r != c) {
                double f = M[r][c] / M[c][c];
                for (int j = c; j < 4; j++)
                    M[r][j] -= f * M[c][j];
            }
    }
    double c0 = M[0][3] / M[0][0], c1 = M[1][3] / M[1][1], c2 = M[2][3] / M[2][2];
    double rss_q = 0;
    for (size_t i = 0; i < n; i++) {
        double x = (double)ks[i] - kbar, r = (double)oc[which[i]].t - a - (double)ks[i] * P;
        double e = r - (c0 + c1 * x + c2 * x * x);
        rss_q += e * e;
    }
    if (rss_q <= 0)
        return rss_line > 0;
    return (rss_line - rss_q) / (rss_q / (double)(n - 3)) > 12;
}

/*
 * Finds the period of one series' occurrence train (onsets, ascending) by epoch folding
 * over candidate periods. Candidates are the spacings between each occurrence and its
 * next FIT_NEIGHBOURS (so missed occurrences and extra episodes still leave the true
 * spacing among them), clustered within 2%; the FIT_CANDIDATES most frequent are folded
 * (fold_period: densest phase, then a least-squares grid refitted to its hits), and the
 * FIT_SWEEP_TOP best are swept finely around their value. The fold with the best
 * hits x sqrt(fill) wins if:
 *   - it has at least min_occurrences hits and fills at least half of its slots, those
 *     since its last hit included (up to ~30% of occurrences may be missed; a train that
 *     stopped is no recurrence);
 *   - chance cannot explain it: for a Poisson train at the series' own episode rate lambda
 *     over the observed span, a slot is hit by chance with p0 = 1 - exp(-2 lambda w),
 *     w the half-width the hits actually needed (2.5 x their RMS residual and at least
 *     the largest, at least 0.25% of the period, at most the tolerance); the binomial
 *     tail P[all hits but one, or more, of the slots but one] times the number of
 *     candidates must stay under FIT_ALPHA (a fabric has thousands of series with random
 *     bursts). confidence = 1 - that.
 * The period is the least-squares slope over the hits, the spread their RMS residual;
 * the next occurrence is predicted from the grid of the last 5 hits (slow drift).
 */
/* The grid's slots after its last hit whose whole tolerance lies before end_us, less one
   (the last occurrence may be missed as any other may). */
static size_t
trailing_slots(const struct track *tr, double last_k, double tol_frac, double end_us)
{
    if (tr->period <= 0)
        return 0;
    double x = (end_us - tol_frac * tr->period - (tr->a + last_k * tr->period)) / tr->period;
    return x >= 2 ? (size_t)floor(x) - 1 : 0;
}

/*
 * The train the grid is judged against: the series' episodes at least as strong (kinds
 * departed, then peak z) as the grid's weakest hit. Returns how many there are, and in
 * *leading the grid's slots between the first of them and the first hit (whole slots
 * after it), which count as empty slots in the chance test.
 *
 * Why: a port that bursts at random all day has, somewhere in hours of data, three
 * bursts that line up, at the end as often as anywhere; judged from its first hit, the
 * grid looks like a job that just started. But that port was producing episodes like
 * the grid's for hours before it, and the grid's slots there are empty: from the first
 * such episode on, three hits in twenty slots is chance. Episodes weaker than every hit
 * do not count (a busy culprit's small bursts around its surges), nor do slots before
 * the series' first strong episode (a job that started mid-range, on a port that was
 * quiet, is judged from its start). The rate stays that of all the series' episodes
 * (fit_period). This uses
 * nothing of the simulator's burst shapes: only the order of the series' own episodes.
 */
static size_t
strong_train(const struct occurrence *oc, size_t m, const size_t *which, const long *ks, size_t n,
             const struct track *tr, double tol_frac, size_t *leading)
{
    *leading = 0;
    double weakest = INFINITY;
    for (size_t h = 0; h < n; h++)
        if (oc[which[h]].mark < weakest)
            weakest = oc[which[h]].mark;
    size_t r = 0, first = m;
    for (size_t i = 0; i < m; i++)
        if (oc[i].mark >= weakest) {
            r++;
            if (first == m)
                first = i;
        }
    if (first == m || tr->period <= 0)
        return r;
    double kf = ceil(((double)oc[first].t - tr->a) / tr->period + tol_frac);
    if (kf < 0)
        kf = 0;
    if (kf < (double)ks[0])
        *leading = (size_t)((double)ks[0] - kf);
    return r;
}

/* Most hits a robust refit leaves out as strays, as a share of them. */
#define FIT_MAX_STRAYS 0.25

/* Leaves out the hits that lie far off the grid the others agree on (a stray burst of the
 * same port near a slot: one interval, between two stalls), then refits the grid by least
 * squares to the rest. Each round takes the hit that the grid of all the others predicts
 * worst: its distance from that grid over the others' own RMS residual (a least-squares
 * line through a stray tilts toward it and spreads the error over every hit, so the hit
 * is judged by a grid fitted without it). It goes when that is over 6 and over 2% of the
 * period: a stall train jittered by 0.5% loses a stray 5% off, one jittered by +-5%
 * keeps its hits (each is within a few of its others' RMS). At least 5 hits (two degrees
 * of freedom left), min_occurrences kept, a quarter left out at most. */
static void
drop_strays(const struct occurrence *oc, size_t *which, long *ks, struct track *tr, size_t min_keep)
{
    size_t n = tr->hits, max_out = (size_t)(FIT_MAX_STRAYS * (double)n), out = 0;
    size_t w2[128];
    long k2[128];
    if (n > 128)
        return;
    while (n >= 5 && n > min_keep && out < max_out) {
        size_t worst = n;
        double worst_ratio = 0, worst_err = 0;
        for (size_t i = 0; i < n; i++) {
            size_t m = 0;
            for (size_t j = 0; j < n; j++)
                if (j != i) {
                    w2[m] = which[j];
                    k2[m++] = ks[j];
                }
            double a, period = lsq_period(oc, w2, k2, m, &a);
            if (period <= 0)
                continue;
            double ss = 0;
            for (size_t j = 0; j < m; j++) {
                double e = (double)oc[w2[j]].t - a - (double)k2[j] * period;
                ss += e * e;
            }
            double rms = sqrt(ss / (double)(m - 2)), floor = 0.001 * period;
            double err = fabs((double)oc[which[i]].t - a - (double)ks[i] * period);
            double ratio = err / (rms > floor ? rms : floor);
            if (ratio > worst_ratio) {
                worst_ratio = ratio;
                worst_err = err;
                worst = i;
            }
        }
        if (worst == n || worst_ratio <= 6 || worst_err <= 0.02 * tr->period)
            break;
        memmove(which + worst, which + worst + 1, (n - worst - 1) * sizeof *which);
        memmove(ks + worst, ks + worst + 1, (n - worst - 1) * sizeof *ks);
        n--;
        out++;
    }
    if (out == 0)
        return;
    double a, period = lsq_period(oc, which, ks, n, &a);
    if (period <= 0)
        return;
    double ss = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)oc[which[i]].t - a - (double)ks[i] * period);
        ss += e * e;
        if (e > mx)
            mx = e;
    }
    tr->hits = n;
    tr->slots = (size_t)(ks[n - 1] - ks[0] + 1);
    tr->a = a;
    tr->period = period;
    tr->rms = sqrt(ss / (double)n);
    tr->max_resid = mx;
}

/* log of the chance that h of the n hits met a slow host window by accident: each
   occurrence of the train's length lands on one with the share of the observed span the
   windows (widened by the occurrence's length) cover. 0 without windows. */
static double
host_log_p(const struct host_ctx *hc, const struct occurrence *oc, const size_t *which, size_t n,
           size_t *h)
{
    *h = 0;
    if (!hc || hc->n == 0 || n == 0 || hc->span <= 0)
        return 0;
    double len = 0;
    for (size_t i = 0; i < n; i++) {
        const struct occurrence *q = &oc[which[i]];
        *h += host_overlaps(hc, q->lo, q->hi);
        len += (double)(q->hi - q->lo);
    }
    double p = ((double)hc->covered + (double)hc->n * len / (double)n) / hc->span;
    if (p > 1)
        p = 1;
    if (p < 1e-12)
        p = 1e-12;
    return *h && p < 1 ? log_binom_tail(*h, n, p) : 0;
}

/*
 * The series' episode rate around a train: its episodes from half a period before the
 * first hit to half a period after the last (or the end of what was observed), per us.
 *
 * Why: a port whose load stepped up late in the range (a job starting: pause frames from
 * zero, then a burst every few seconds as its baseline settles) is quiet over most of
 * the range, so its rate over the whole range is low, and ten of its new bursts line up
 * on some 12 s grid far better than that rate allows; around them it bursts every 8 s
 * and the grid is chance. A real train seen alone counts about one episode a period
 * there, no more than over a range of its own.
 */
static double
local_rate(const struct occurrence *oc, size_t m, const struct track *tr, const size_t *which,
           double end_us)
{
    if (tr->hits < 2 || tr->period <= 0)
        return 0;
    double lo = (double)oc[which[0]].t - 0.5 * tr->period;
    double hi = (double)oc[which[tr->hits - 1]].t + 0.5 * tr->period;
    if (hi > end_us && end_us > (double)oc[which[tr->hits - 1]].t)
        hi = end_us;
    if (hi <= lo)
        return 0;
    size_t n = 0;
    for (size_t i = 0; i < m; i++)
        if ((double)oc[i].t >= lo && (double)oc[i].t <= hi)
            n++;
    return (double)n / (hi - lo);
}

static int
fit_period(const struct occurrence *oc, size_t m, double span_us, double end_us,
           const struct fs_an_opts *o, size_t looks, const struct host_ctx *hc, struct fit *fit)
{
    memset(fit, 0, sizeof *fit);
    if (m < 2 || m < o->min_occurrences)
        return 0;
    int rc = -1;
    size_t nd = 0, cap = m * FIT_NEIGHBOURS;
    double *diffs = malloc(cap * sizeof *diffs);
    size_t *which = malloc(m * sizeof *which), *best_which = malloc(m * sizeof *best_which);
    long *ks = malloc(m * sizeof *ks), *best_ks = malloc(m * sizeof *best_ks);
    double cand[FIT_CANDIDATES], *ph = malloc(m * sizeof *ph);
    size_t cand_w[FIT_CANDIDATES], nc = 0;
    if (!diffs || !which || !best_which || !ks || !best_ks || !ph)
        goto out;
    rc = 0;
    double t_span = (double)(oc[m - 1].t - oc[0].t);
    if (t_span <= 0)
        goto out;
    /* A period needs at least min_occurrences slots in the train and a slot per 4
       occurrences at most (finer periods would fill under 25%). */
    double p_max = t_span / (double)(o->min_occurrences > 2 ? o->min_occurrences - 1 : 1);
    double p_min = t_span / (4.0 * (double)m);
    for (size_t i = 0; i < m; i++)
        for (size_t j = i + 1; j < m && j <= i + FIT_NEIGHBOURS; j++) {
            double dd = (double)(oc[j].t - oc[i].t);
            if (dd >= p_min && dd <= p_max * 1.0001)
                diffs[nd++] = dd;
        }
    if (nd == 0)
        goto out;
    sort_doubles(diffs, nd);
    /* Clusters within 2% of their first member; the median of each, the largest first. */
    for (size_t i = 0; i < nd;) {
        size_t j = i;
        while (j < nd && diffs[j] <= diffs[i] * 1.02)
            j++;
        double med = diffs[i + (j - i) / 2];
        size_t w = j - i;
        if (nc < FIT_CANDIDATES) {
            cand[nc] = med;
            cand_w[nc++] = w;
        } else {
            size_t lo = 0;
            for (size_t k = 1; k < nc; k++)
                if (cand_w[k] < cand_w[lo])
                    lo = k;
            if (w > cand_w[lo]) {
                cand[lo] = med;
                cand_w[lo] = w;
            }
        }
        i = j;
    }
    double tol_frac = o->max_period_spread * 1.5;
    struct track bt = {0};
    double best_score = 0;
    /* Each candidate, then the best few swept finely around their value: a spacing
       measured between jittered occurrences is off by up to the jitter, and over many
       slots that misplaces the later ones. */
    double top_p[FIT_SWEEP_TOP] = {0}, top_s[FIT_SWEEP_TOP] = {0};
    for (size_t c = 0; c < nc; c++) {
        double sc = try_period(oc, m, cand[c], tol_frac, ph, which, ks, best_which, best_ks, &bt,
                               &best_score);
        for (size_t k = 0; k < FIT_SWEEP_TOP; k++)
            if (sc > top_s[k]) {
                memmove(top_s + k + 1, top_s + k, (FIT_SWEEP_TOP - 1 - k) * sizeof *top_s);
                memmove(top_p + k + 1, top_p + k, (FIT_SWEEP_TOP - 1 - k) * sizeof *top_p);
                top_s[k] = sc;
                top_p[k] = cand[c];
                break;
            }
    }
    /* The sweep refines a train the coarse candidates nearly caught; most series of a
       busy fabric are random bursts nowhere near periodic, and skip it. */
    double lambda = (double)m / (span_us > t_span ? span_us : t_span);
    bool sweep = bt.hits >= 2 && bt.hits + 2 >= o->min_occurrences &&
                 (double)bt.hits >= 0.3 * (double)bt.slots &&
                 chance_log_p(&bt, lambda, tol_frac, 0, 1, 0) <= log(FIT_ALPHA) + 8;
    for (size_t k = 0; sweep && k < FIT_SWEEP_TOP && top_p[k] > 0; k++) {
        double slots = t_span / top_p[k] + 1;
        double step = 0.5 * tol_frac / slots;
        if (step > 0.002)
            step = 0.002;
        for (int i = -FIT_SWEEP_STEPS; i <= FIT_SWEEP_STEPS; i++)
            if (i != 0)
                try_period(oc, m, top_p[k] * (1 + step * i), tol_frac, ph, which, ks, best_which,
                           best_ks, &bt, &best_score);
    }
    if (bt.hits < o->min_occurrences || bt.hits < 2)
        goto out;
    drop_strays(oc, best_which, best_ks, &bt, o->min_occurrences);
    /* A train that stopped is no recurrence: once the slots it left empty since its
       last hit, with those between its hits, outnumber its hits, it is not reported
       (it would predict a next occurrence its own recent past denies). Asked over a
       window that ends with it, it is. */
    size_t trailing = trailing_slots(&bt, (double)best_ks[bt.hits - 1], tol_frac, end_us);
    if ((double)bt.hits < FIT_MIN_FILL * (double)(bt.slots + trailing))
        goto out;
    /* Judged against the series' episodes as strong as its hits (strong_train), and
       against the fabric: a fabric of N series with enough episodes offers chance N trains
       (looks), each at every candidate period (nc). Three unrelated surges line up on one
       of 10,000 series; a quiet port's three stall surges at the third occurrence clear
       that bar only with what the hosts say (below) or a fourth occurrence. */
    size_t leading;
    (void)strong_train(oc, m, best_which, best_ks, bt.hits, &bt, tol_frac, &leading);
    /* The rate stays that of all the series' episodes: the strength threshold was taken
       from the hits, so a thinner rate would favour a grid of the few strongest bursts
       (the acceptance fabric's busy ports had such). Where the series was busier around
       the train than over the whole range, the rate around it counts (local_rate). */
    double lr = local_rate(oc, m, &bt, best_which, end_us);
    if (lr > lambda)
        lambda = lr;
    double log_p = chance_log_p(&bt, lambda, tol_frac, half_res(oc, best_which, bt.hits),
                                (double)nd * (double)(looks > 0 ? looks : 1), leading + trailing);
    /* Host evidence: hits that met a slow host window, against the chance that random
       occurrences meet that many. Independent of the timing, so the two multiply. */
    size_t host_hits;
    log_p += host_log_p(hc, oc, best_which, bt.hits, &host_hits);
    if (log_p > log(FIT_ALPHA))
        goto out;
    double period = bt.period;
    /* The next one from the grid of all hits, unless the train drifts: then from the grid
       of the last 5 (their average keeps one late occurrence from moving it much). With
       jittered occurrences the last 5 alone extrapolate worse than the whole train, so
       drift has to be shown: a curve (the period changing) fits the hits significantly
       better than the straight grid (F test, one degree of freedom, F > 12). */
    double next = bt.a + (double)(best_ks[bt.hits - 1] + 1) * period;
    if (bt.hits >= 6 && drifts(oc, best_which, best_ks, bt.hits, bt.a, period)) {
        size_t r0 = bt.hits - 5;
        double a_recent;
        double recent = lsq_period(oc, best_which + r0, best_ks + r0, 5, &a_recent);
        if (recent > 0 && fabs(recent - period) <= 0.2 * period)
            next = a_recent + (double)(best_ks[bt.hits - 1] + 1) * recent;
    }
    fit->next = next;
    fit->period = period;
    fit->spread = bt.rms;
    fit->confidence = 1 - exp(log_p);
    fit->n = bt.hits;
    fit->host = host_hits;
    fit->which = best_which;
    best_which = NULL;
out:
    free(diffs);
    free(ph);
    free(which);
    free(best_which);
    free(ks);
    free(best_ks);
    return rc;
}

static int
cmp_group(const void *a, const void *b)
{
    const struct fs_recurrence *x = a, *y = b;
    if (x->occurrences != y->occurrences)
        return x->occurrences > y->occurrences ? -1 : 1;
    return x->first_us < y->first_us ? -1 : x->first_us > y->first_us;
}

static size_t
common_episodes(const size_t *a, size_t na, const size_t *b, size_t nb)
{
    size_t i = 0, j = 0, c = 0;
    while (i < na && j < nb) {
        if (a[i] == b[j]) {
            c++;
            i++;
            j++;
        } else if (a[i] < b[j])
            i++;
        else
            j++;
    }
    return c;
}

static int
cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/*
 * The half-period check. Epoch folding scores hits x sqrt(fill): a train of 6 surges with
 * 2 unrelated episodes near its midpoints folds better at half the period (8 hits of 11
 * slots against 6 of 6), and timing alone cannot tell that from a train at the half period
 * with 3 missed. The episodes can: when every hit on one parity of the grid departed in
 * more kinds than every hit on the other (surges with drops and PFC, incast bursts with
 * ECN only), and the weak parity has 2 hits or more, the strong episodes are fitted
 * alone; if they recur at twice the period, that is the train. A train whose episodes are
 * alike on both parities (the same process, some occurrences missed) never splits.
 * Replaces *fit (freeing its hits) and returns 1 when the double period wins; 0 keeps it;
 * -1 out of memory.
 */
static int
prefer_strong_parity(const struct occurrence *oc, size_t m, double span_us, double end_us,
                     const struct fs_an_opts *o, size_t looks, const struct host_ctx *hc,
                     struct fit *fit)
{
    if (fit->n < 4 || fit->period <= 0)
        return 0;
    size_t nx[2] = {0, 0};
    unsigned mn[2] = {UINT_MAX, UINT_MAX}, mx[2] = {0, 0};
    double a = (double)oc[fit->which[0]].t;
    for (size_t h = 0; h < fit->n; h++) {
        const struct occurrence *q = &oc[fit->which[h]];
        int p = (int)(llround(((double)q->t - a) / fit->period) & 1);
        nx[p]++;
        if (q->kinds < mn[p])
            mn[p] = q->kinds;
        if (q->kinds > mx[p])
            mx[p] = q->kinds;
    }
    int strong = mn[0] > mx[1] ? 0 : mn[1] > mx[0] ? 1 : -1;
    if (strong < 0 || nx[!strong] < 2 || nx[strong] < o->min_occurrences)
        return 0;
    struct occurrence *sub = malloc(m * sizeof *sub);
    size_t *map = malloc(m * sizeof *map), ns = 0;
    int rc = -1;
    struct fit f2 = {0};
    if (!sub || !map)
        goto out;
    for (size_t i = 0; i < m; i++)
        if (oc[i].kinds >= mn[strong]) {
            map[ns] = i;
            sub[ns++] = oc[i];
        }
    if (fit_period(sub, ns, span_us, end_us, o, looks, hc, &f2) != 0)
        goto out;
    rc = 0;
    if (f2.n < o->min_occurrences || fabs(f2.period - 2 * fit->period) > 0.05 * 2 * fit->period)
        goto out;
    for (size_t h = 0; h < f2.n; h++)
        f2.which[h] = map[f2.which[h]];
    free(fit->which);
    *fit = f2;
    f2.which = NULL;
    rc = 1;
out:
    free(f2.which);
    free(sub);
    free(map);
    return rc;
}

/* The occurrences of one port's episodes pe[i, i + m). */
static void
port_occurrences(const struct ctx *c, const struct fs_incident_report *r, size_t i, size_t m,
                 struct occurrence *oc)
{
    const struct fs_departures *d = c->d;
    for (size_t k = 0; k < m; k++) {
        oc[k].t = c->pe[i + k].onset_us;
        oc[k].lo = c->pe[i + k].start_us;
        oc[k].hi = c->pe[i + k].end_us;
        oc[k].res = 2 * llabs(c->pe[i + k].onset_us - c->pe[i + k].start_us);
        oc[k].episode = c->pe[i + k].episode;
        /* A unit is one series: the kinds are those of the episode it joined. */
        oc[k].kinds = (unsigned)__builtin_popcount(r->episodes[oc[k].episode].kinds);
        double z = 0;
        for (size_t q = c->pe[i + k].run_lo; q < c->pe[i + k].run_hi; q++)
            if (d->runs[c->pr[q].run].peak_z > z)
                z = d->runs[c->pr[q].run].peak_z;
        oc[k].mark = (double)oc[k].kinds * 1e10 + (z < 1e9 ? z : 1e9);
    }
}

/* One port to fit: its episodes pe[i, i + m) and the result. */
struct port_fit {
    size_t i, m;
    struct fit fit;
    int rc;
};

/* The ports' fits, shared by the fitting threads: each takes the next port. */
struct fit_work {
    const struct ctx *c;
    const struct fs_incident_report *r;
    struct port_fit *pf;
    size_t n_pf, m_max, looks;
    const struct host_ctx *hc;
    _Atomic size_t next;
};

static void *
fit_ports(void *arg)
{
    struct fit_work *w = arg;
    const struct fs_departures *d = w->c->d;
    struct occurrence *oc = malloc(w->m_max * sizeof *oc);
    double span = (double)(d->end_us - d->observed_start_us);
    for (size_t k; (k = atomic_fetch_add(&w->next, 1)) < w->n_pf;) {
        struct port_fit *p = &w->pf[k];
        if (!oc) {
            p->rc = -1;
            continue;
        }
        port_occurrences(w->c, w->r, p->i, p->m, oc);
        p->rc = fit_period(oc, p->m, span, (double)d->end_us, &d->opts, w->looks, w->hc, &p->fit);
        if (p->rc == 0 && p->fit.n > 0 &&
            prefer_strong_parity(oc, p->m, span, (double)d->end_us, &d->opts, w->looks, w->hc,
                                 &p->fit) < 0)
            p->rc = -1;
    }
    free(oc);
    return NULL;
}

/* Fits every port with enough episodes, on up to FIT_THREADS threads (the fits are
 * independent; each result goes to its port's slot, so the outcome does not depend on
 * the threads). Returns -1 when out of memory (the fits made are still in pf). */
static int
fit_all_ports(struct fit_work *w)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t threads = cpus > 0 ? (size_t)cpus : 1;
    if (threads > FIT_THREADS)
        threads = FIT_THREADS;
    if (threads > w->n_pf / 64 + 1) /* a few ports: not worth a thread */
        threads = w->n_pf / 64 + 1;
    pthread_t tid[FIT_THREADS];
    bool started[FIT_THREADS] = {false};
    for (size_t t = 1; t < threads; t++)
        started[t] = pthread_create(&tid[t], NULL, fit_ports, w) == 0;
    fit_ports(w); /* takes whatever no thread could */
    for (size_t t = 1; t < threads; t++)
        if (started[t])
            pthread_join(tid[t], NULL);
    for (size_t k = 0; k < w->n_pf; k++)
        if (w->pf[k].rc != 0)
            return -1;
    return 0;
}

/*
 * A group led by pauses a switch sent (effects.h) is that switch's congestion recurring:
 * its congested port departs in the same episodes, but its own train also holds the
 * bursts of other congestion (pauses it received, its own load), and its runs at a
 * stall that another switch's pauses happened to meet were set aside as a paused port's,
 * so it may not pass the chance test alone when the pauses' clean train does (the third
 * occurrence). The cause-kind series of that switch with a run in at least 80% of the
 * group's occurrences join the group, first: the group names the port to look at, not
 * the ports it paused. 0 or -1 (no memory).
 */
static int
lead_with_cause(const struct ctx *c, struct fs_incident_report *r)
{
    const struct fs_departures *d = c->d;
    size_t ns = d->n_series ? d->n_series : 1;
    uint32_t *count = calloc(ns, sizeof *count), *add = malloc(ns * sizeof *add);
    size_t *seen = calloc(ns, sizeof *seen);
    int rc = -1;
    if (!count || !add || !seen)
        goto out;
    for (size_t g = 0; g < r->n_groups; g++) {
        struct fs_recurrence *gr = &r->groups[g];
        const struct fs_an_series_ref *lead = &d->series[gr->series[0]];
        if (fs_an_role_of(lead) != FS_AN_ROLE_PAUSE_SENT)
            continue;
        memset(count, 0, ns * sizeof *count);
        memset(seen, 0, ns * sizeof *seen);
        for (size_t k = 0; k < gr->occurrences; k++) {
            const struct fs_episode *e = &r->episodes[gr->episodes[k]];
            int64_t lo = e->start_us - d->opts.merge_gap_us, hi = e->end_us + d->opts.merge_gap_us;
            for (size_t i = fs_departures_runs_after(d, hi);
                 i-- > 0 && d->runs[i].start_us >= lo - d->max_run_us;) {
                uint32_t s = d->runs[i].series;
                if (d->runs[i].end_us < lo || seen[s] == k + 1)
                    continue;
                seen[s] = k + 1;
                count[s]++;
            }
        }
        size_t na = 0;
        for (size_t s = 0; s < d->n_series; s++)
            if (5 * count[s] >= 4 * gr->occurrences &&
                fs_an_role_of(&d->series[s]) == FS_AN_ROLE_CAUSE &&
                strcmp(d->series[s].target, lead->target) == 0)
                add[na++] = (uint32_t)s;
        if (na == 0)
            continue;
        uint32_t *p = malloc((gr->n_series + na) * sizeof *p);
        if (!p)
            goto out;
        memcpy(p, add, na * sizeof *p);
        memcpy(p + na, gr->series, gr->n_series * sizeof *p);
        for (size_t k = 0; k < na; k++)
            gr->kinds |= 1u << d->series[add[k]].kind;
        free(gr->series);
        gr->series = p;
        gr->n_series += na;
    }
    rc = 0;
out:
    free(count);
    free(add);
    free(seen);
    return rc;
}

static int
find_groups(struct ctx *c, struct fs_incident_report *r, int64_t now_us, const struct host_ctx *hc)
{
    const struct fs_departures *d = c->d;
    struct occurrence *oc = NULL;
    struct fit_work w = {.c = c, .r = r, .hc = hc};
    size_t cap = 0;
    /* c->pe is sorted by port, then start: each port's episodes are contiguous. The
       ports with enough episodes are fitted (and counted: looks, see fit_period). */
    w.pf = calloc(c->n_ports ? c->n_ports : 1, sizeof *w.pf); /* pe[].port < n_ports */
    if (!w.pf)
        goto fail;
    for (size_t i = 0, j; i < c->n_pe; i = j) {
        for (j = i + 1; j < c->n_pe && c->pe[j].port == c->pe[i].port;)
            j++;
        if (j - i < d->opts.min_occurrences)
            continue;
        w.pf[w.n_pf++] = (struct port_fit){.i = i, .m = j - i};
        if (j - i > w.m_max)
            w.m_max = j - i;
    }
    w.looks = w.n_pf;
    oc = malloc((w.m_max ? w.m_max : 1) * sizeof *oc);
    if (!oc || fit_all_ports(&w) != 0)
        goto fail;
    for (size_t k = 0; k < w.n_pf; k++) {
        struct port_fit *p = &w.pf[k];
        if (p->fit.n == 0)
            continue;
        size_t m = p->m;
        uint32_t port = c->pe[p->i].port;
        port_occurrences(c, r, p->i, m, oc);
        struct fit fit = p->fit;
        p->fit.which = NULL;
        if (r->n_groups == cap) {
            cap = cap ? cap * 2 : 16;
            void *np = realloc(r->groups, cap * sizeof *r->groups);
            if (!np) {
                free(fit.which);
                goto fail;
            }
            r->groups = np;
        }
        struct fs_recurrence *g = &r->groups[r->n_groups++];
        memset(g, 0, sizeof *g);
        g->episodes = malloc(fit.n * sizeof *g->episodes);
        g->series = malloc((d->n_series ? d->n_series : 1) * sizeof *g->series);
        if (!g->episodes || !g->series) {
            free(fit.which);
            goto fail;
        }
        for (size_t h = 0; h < fit.n; h++) {
            g->episodes[h] = oc[fit.which[h]].episode;
            g->kinds |= r->episodes[g->episodes[h]].kinds;
        }
        qsort(g->episodes, fit.n, sizeof *g->episodes, cmp_size);
        g->occurrences = fit.n;
        g->host_hits = fit.host;
        /* The port's series, strongest first: as they rank in its first episode. */
        for (size_t s = 0; s < d->n_series; s++)
            if (c->port_of[s] == port)
                g->series[g->n_series++] = (uint32_t)s;
        g->period_us = fit.period;
        g->spread_us = fit.spread;
        g->confidence = fit.confidence;
        g->first_us = oc[fit.which[0]].t;
        g->last_us = oc[fit.which[fit.n - 1]].t;
        double next = fit.next;
        while (next <= (double)now_us)
            next += fit.period;
        g->next_us = (int64_t)llround(next);
        free(fit.which);
    }
    /* Ports that recur in the same episodes are one group. */
    for (size_t a = 0; a < r->n_groups; a++) {
        for (size_t b = a + 1; b < r->n_groups;) {
            struct fs_recurrence *ga = &r->groups[a], *gb = &r->groups[b];
            size_t cm =
                common_episodes(ga->episodes, ga->occurrences, gb->episodes, gb->occurrences);
            size_t smaller = ga->occurrences < gb->occurrences ? ga->occurrences : gb->occurrences;
            if (cm * 5 >= smaller * 4) {
                /* The group is the cause's: a port that departs in a cause kind leads
                   the pauses it spread (effects.h), whose trains hold the pauses of
                   other congestion too (a victim's fits at a fraction of the period). */
                bool ca = fs_an_role_of(&d->series[ga->series[0]]) == FS_AN_ROLE_CAUSE;
                bool cb = fs_an_role_of(&d->series[gb->series[0]]) == FS_AN_ROLE_CAUSE;
                if (cb != ca ? cb : gb->occurrences > ga->occurrences) {
                    struct fs_recurrence t = *ga;
                    *ga = *gb;
                    *gb = t;
                }
                for (size_t k = 0; k < gb->n_series; k++)
                    ga->series[ga->n_series++] = gb->series[k];
                ga->kinds |= gb->kinds;
                if (gb->host_hits > ga->host_hits && ga->occurrences == gb->occurrences)
                    ga->host_hits = gb->host_hits;
                free(gb->series);
                free(gb->episodes);
                r->groups[b] = r->groups[--r->n_groups];
            } else {
                b++;
            }
        }
    }
    if (lead_with_cause(c, r) != 0)
        goto fail;
    if (r->n_groups > 1)
        qsort(r->groups, r->n_groups, sizeof *r->groups, cmp_group);
    free(oc);
    free(w.pf);
    return 0;
fail:
    for (size_t k = 0; w.pf && k < w.n_pf; k++)
        free(w.pf[k].fit.which);
    free(w.pf);
    free(oc);
    return -1;
}

static int
cmp_pair(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* The slow windows widened by the margin, merged, by start. 0 or -1 (no memory). */
static int
host_ctx_build(const struct fs_departures *d, const struct fs_incident_hosts *h,
               struct host_ctx *hc)
{
    memset(hc, 0, sizeof *hc);
    if (!h || h->n == 0)
        return 0;
    hc->iv = malloc(h->n * 2 * sizeof *hc->iv);
    if (!hc->iv)
        return -1;
    for (size_t i = 0; i < h->n; i++) {
        hc->iv[2 * i] = h->start_us[i] - h->margin_us;
        hc->iv[2 * i + 1] = h->end_us[i] + h->margin_us;
    }
    qsort(hc->iv, h->n, 2 * sizeof *hc->iv, cmp_pair);
    for (size_t i = 0; i < h->n; i++) {
        if (hc->n > 0 && hc->iv[2 * i] <= hc->iv[2 * (hc->n - 1) + 1]) {
            if (hc->iv[2 * i + 1] > hc->iv[2 * (hc->n - 1) + 1])
                hc->iv[2 * (hc->n - 1) + 1] = hc->iv[2 * i + 1];
            continue;
        }
        hc->iv[2 * hc->n] = hc->iv[2 * i];
        hc->iv[2 * hc->n + 1] = hc->iv[2 * i + 1];
        hc->n++;
    }
    for (size_t i = 0; i < hc->n; i++)
        hc->covered += hc->iv[2 * i + 1] - hc->iv[2 * i];
    hc->span = (double)(d->end_us - d->observed_start_us);
    return 0;
}

int
fs_incidents_find(const struct fs_departures *d, int64_t now_us, struct fs_incident_report **out)
{
    return fs_incidents_find_hosts(d, now_us, NULL, out);
}

int
fs_incidents_find_hosts(const struct fs_departures *d, int64_t now_us,
                        const struct fs_incident_hosts *hosts, struct fs_incident_report **out)
{
    struct ctx c = {.d = d};
    struct host_ctx hc;
    int rc = -1;
    struct fs_incident_report *r = calloc(1, sizeof *r);
    if (!r)
        return -1;
    if (host_ctx_build(d, hosts, &hc) != 0 || build_ports(&c) != 0 || build_episodes(&c, r) != 0 ||
        find_groups(&c, r, now_us, &hc) != 0)
        goto out;
    r->hosts_reporting = hosts && hosts->n > 0;
    *out = r;
    r = NULL;
    rc = 0;
out:
    fs_incident_report_free(r);
    free(hc.iv);
    free(c.port_of);
    free(c.port_rep);
    free(c.pr);
    free(c.pe);
    free(c.pe_by_onset);
    return rc;
}

int
fs_incidents_host_evidence(struct fs_incident_report *r, const int64_t *start_us,
                           const int64_t *end_us, size_t n, int64_t margin_us,
                           size_t *occ_with_slow, size_t *slow_during)
{
    for (size_t g = 0; g < r->n_groups; g++)
        occ_with_slow[g] = slow_during[g] = 0;
    if (n == 0 || r->n_groups == 0)
        return 0;
    /* Windows by start; a window overlapping [lo, hi] starts at most at hi and at least
       the longest window's length before lo. */
    int rc = -1;
    uint32_t *order = malloc(n * sizeof *order);
    int64_t *key = malloc(n * sizeof *key);
    bool *seen = malloc(n * sizeof *seen);
    if (!order || !key || !seen || fs_an_order_by_key(start_us, n, order) != 0)
        goto out;
    int64_t longest = 0;
    for (size_t i = 0; i < n; i++) {
        key[i] = start_us[order[i]];
        if (end_us[i] - start_us[i] > longest)
            longest = end_us[i] - start_us[i];
    }
    for (size_t g = 0; g < r->n_groups; g++) {
        const struct fs_recurrence *gr = &r->groups[g];
        memset(seen, 0, n * sizeof *seen);
        for (size_t k = 0; k < gr->occurrences; k++) {
            const struct fs_episode *e = &r->episodes[gr->episodes[k]];
            int64_t lo = e->start_us - margin_us, hi = e->end_us + margin_us;
            size_t i = lower_bound(key, n, lo - longest);
            bool any = false;
            for (; i < n && key[i] <= hi; i++) {
                uint32_t w = order[i];
                if (end_us[w] < lo)
                    continue;
                any = true;
                if (!seen[w]) {
                    seen[w] = true;
                    slow_during[g]++;
                }
            }
            occ_with_slow[g] += any;
        }
    }
    /* By the share of occurrences that met a slow window (a backup that meets a stall
       in phase now and then has more such occurrences than the culprit, not a larger
       share). Insertion sort: groups are few, and ties keep the order by occurrences. */
    for (size_t g = 1; g < r->n_groups; g++) {
        struct fs_recurrence t = r->groups[g];
        size_t o = occ_with_slow[g], sd = slow_during[g], j = g;
        while (j > 0 && o * r->groups[j - 1].occurrences > occ_with_slow[j - 1] * t.occurrences) {
            r->groups[j] = r->groups[j - 1];
            occ_with_slow[j] = occ_with_slow[j - 1];
            slow_during[j] = slow_during[j - 1];
            j--;
        }
        r->groups[j] = t;
        occ_with_slow[j] = o;
        slow_during[j] = sd;
    }
    rc = 0;
out:
    free(order);
    free(key);
    free(seen);
    return rc;
}
