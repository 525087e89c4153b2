/* Ranking switch series against slow host windows (see correlate.h). */
#include "analysis/correlate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void
fs_corr_opts_default(struct fs_corr_opts *o)
{
    o->lead_us = 500000;
    o->lag_us = 500000;
    o->top = FS_CORR_TOP;
}

void
fs_corr_report_free(struct fs_corr_report *r)
{
    if (!r)
        return;
    free(r->results);
    free(r->aggregates);
    free(r);
}

/* Index of the first run starting after t. */
static size_t
runs_after(const struct fs_departures *d, int64_t t)
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

static int
cmp_suspect(const void *a, const void *b)
{
    const struct fs_corr_suspect *x = a, *y = b;
    if (x->evidence != y->evidence)
        return x->evidence > y->evidence ? -1 : 1;
    int c = fs_an_rank_cmp(x->peak_z, x->specificity, y->peak_z, y->specificity);
    if (c != 0)
        return c;
    return x->series < y->series ? -1 : x->series > y->series;
}

static int
cmp_aggregate(const void *a, const void *b)
{
    const struct fs_corr_aggregate *x = a, *y = b;
    if (x->evidence != y->evidence)
        return x->evidence > y->evidence ? -1 : 1;
    if (x->first != y->first)
        return x->first > y->first ? -1 : 1;
    if (x->in_top != y->in_top)
        return x->in_top > y->in_top ? -1 : 1;
    if (x->max_z != y->max_z)
        return x->max_z > y->max_z ? -1 : 1;
    return x->series < y->series ? -1 : x->series > y->series;
}

struct scan {
    const struct fs_departures *d;
    const struct fs_corr_opts *o;
    struct fs_corr_suspect *cand;
    size_t cand_cap, nc;
    int32_t *slot; /* per series: its entry in cand, or -1 */
};

/* The series departing in window w (one entry per series, its strongest run) into
 * sc->cand[0..nc). 0 or -1 (no memory). */
static int
window_candidates(struct scan *sc, const struct fs_corr_window *w)
{
    const struct fs_departures *d = sc->d;
    /* Candidates from the widest series uncertainty; filtered exactly below. */
    int64_t lo = w->start_us - sc->o->lead_us - w->uncertainty_us;
    int64_t hi = w->end_us + sc->o->lag_us + w->uncertainty_us;
    int64_t mu = d->max_time_uncertainty_us;
    size_t end = runs_after(d, hi + mu);
    sc->nc = 0;
    for (size_t k = end; k-- > 0;) {
        const struct fs_departure *run = &d->runs[k];
        if (run->start_us < lo - mu - d->max_run_us)
            break;
        int64_t su = d->series[run->series].time_uncertainty_us;
        if (run->end_us < lo - su || run->start_us > hi + su)
            continue;
        int32_t sl = sc->slot[run->series];
        if (sl >= 0) {
            if (run->peak_z <= sc->cand[sl].peak_z)
                continue;
        } else {
            if (sc->nc == sc->cand_cap) {
                void *p = realloc(sc->cand, sc->cand_cap * 2 * sizeof *sc->cand);
                if (!p)
                    return -1;
                sc->cand = p;
                sc->cand_cap *= 2;
            }
            sl = (int32_t)sc->nc++;
            sc->slot[run->series] = sl;
        }
        sc->cand[sl] = (struct fs_corr_suspect){
            .series = run->series,
            .peak_z = run->peak_z,
            .peak_value = run->peak_value,
            .baseline = run->baseline,
            .peak_us = run->peak_us,
            .lag_us = run->start_us - w->start_us,
            .uncertainty_us = w->uncertainty_us + su,
            .specificity = fs_an_specificity(&d->series[run->series]),
        };
    }
    for (size_t c = 0; c < sc->nc; c++)
        sc->slot[sc->cand[c].series] = -1;
    return 0;
}

static int
cmp_interval(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Per series: how many of its runs overlap any window (widened as the windows are) and
 * how many it has in all. 0 or -1. */
static int
runs_in_windows(const struct fs_departures *d, const struct fs_corr_window *w, size_t n,
                const struct fs_corr_opts *o, uint32_t *inside, uint32_t *total)
{
    int64_t *iv = malloc((n ? n : 1) * 2 * sizeof *iv);
    if (!iv)
        return -1;
    for (size_t i = 0; i < n; i++) {
        iv[2 * i] = w[i].start_us - o->lead_us - w[i].uncertainty_us;
        iv[2 * i + 1] = w[i].end_us + o->lag_us + w[i].uncertainty_us;
    }
    qsort(iv, n, 2 * sizeof *iv, cmp_interval);
    size_t m = 0; /* merged, disjoint, by start */
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && iv[2 * i] <= iv[2 * (m - 1) + 1]) {
            if (iv[2 * i + 1] > iv[2 * (m - 1) + 1])
                iv[2 * (m - 1) + 1] = iv[2 * i + 1];
        } else {
            iv[2 * m] = iv[2 * i];
            iv[2 * m + 1] = iv[2 * i + 1];
            m++;
        }
    }
    for (size_t k = 0; k < d->n_runs; k++) {
        const struct fs_departure *run = &d->runs[k];
        int64_t su = d->series[run->series].time_uncertainty_us;
        total[run->series]++;
        /* The last merged window starting at or before the run's end (+ su). */
        size_t lo = 0, hi = m;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (iv[2 * mid] <= run->end_us + su)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo > 0 && iv[2 * (lo - 1) + 1] >= run->start_us - su)
            inside[run->series]++;
    }
    free(iv);
    return 0;
}

int
fs_correlate(const struct fs_departures *d, const struct fs_corr_window *w, size_t n,
             const struct fs_corr_opts *o, struct fs_corr_report **out)
{
    struct fs_corr_opts dflt;
    if (!o) {
        fs_corr_opts_default(&dflt);
        o = &dflt;
    }
    size_t top = o->top < 1 ? 1 : o->top > FS_CORR_TOP ? FS_CORR_TOP : o->top;
    size_t ns = d->n_series ? d->n_series : 1;
    struct fs_corr_report *r = calloc(1, sizeof *r);
    struct scan sc = {.d = d, .o = o, .cand_cap = 64};
    uint32_t *hits = NULL, *inside = NULL, *total = NULL;
    double *evidence = NULL;
    if (!r)
        return -1;
    r->results = calloc(n ? n : 1, sizeof *r->results);
    r->aggregates = calloc(ns, sizeof *r->aggregates);
    sc.slot = malloc(ns * sizeof *sc.slot);
    sc.cand = malloc(sc.cand_cap * sizeof *sc.cand);
    hits = calloc(ns, sizeof *hits);
    inside = calloc(ns, sizeof *inside);
    total = calloc(ns, sizeof *total);
    evidence = calloc(ns, sizeof *evidence);
    if (!r->results || !r->aggregates || !sc.slot || !sc.cand || !hits || !inside || !total ||
        !evidence)
        goto fail;
    for (size_t s = 0; s < d->n_series; s++) {
        sc.slot[s] = -1;
        r->aggregates[s].series = (uint32_t)s;
    }
    /* Pass 1: in how many windows each series departs, and how many of its runs fall
       outside every window. */
    for (size_t i = 0; i < n; i++) {
        if (window_candidates(&sc, &w[i]) != 0)
            goto fail;
        for (size_t c = 0; c < sc.nc; c++)
            hits[sc.cand[c].series]++;
    }
    if (runs_in_windows(d, w, n, o, inside, total) != 0)
        goto fail;
    for (size_t s = 0; s < d->n_series; s++) {
        double consistency = n ? (double)hits[s] / (double)n : 0;
        /* Laplace-smoothed share of its runs that fall in windows: one lucky burst of a
           quiet port is not "always in windows". Ranking needs at least two windows. */
        double precision = ((double)inside[s] + 1) / ((double)total[s] + 2);
        evidence[s] = n >= 2 ? consistency * sqrt(precision) : 1.0;
        r->aggregates[s].departs = hits[s];
        r->aggregates[s].runs_total = total[s];
        r->aggregates[s].runs_outside = total[s] - inside[s];
        r->aggregates[s].evidence = evidence[s];
    }
    /* Pass 2: each window's suspects, by the evidence across windows first. */
    for (size_t i = 0; i < n; i++) {
        struct fs_corr_result *res = &r->results[i];
        res->window = w[i];
        if (window_candidates(&sc, &w[i]) != 0)
            goto fail;
        for (size_t c = 0; c < sc.nc; c++)
            sc.cand[c].evidence = evidence[sc.cand[c].series];
        qsort(sc.cand, sc.nc, sizeof *sc.cand, cmp_suspect);
        res->n_top = sc.nc < top ? sc.nc : top;
        memcpy(res->top, sc.cand, res->n_top * sizeof *sc.cand);
        for (size_t c = 0; c < res->n_top; c++) {
            struct fs_corr_aggregate *a = &r->aggregates[sc.cand[c].series];
            a->in_top++;
            if (c == 0)
                a->first++;
            if (sc.cand[c].peak_z > a->max_z)
                a->max_z = sc.cand[c].peak_z;
        }
    }
    r->n_results = n;
    qsort(r->aggregates, d->n_series, sizeof *r->aggregates, cmp_aggregate);
    size_t na = 0;
    while (na < d->n_series && r->aggregates[na].departs > 0)
        na++;
    r->n_aggregates = na;
    free(sc.cand);
    free(sc.slot);
    free(hits);
    free(inside);
    free(total);
    free(evidence);
    *out = r;
    return 0;
fail:
    free(sc.cand);
    free(sc.slot);
    free(hits);
    free(inside);
    free(total);
    free(evidence);
    fs_corr_report_free(r);
    return -1;
}

struct dur_ref {
    int64_t d;
    size_t group;
};

static int
cmp_dur(const void *a, const void *b)
{
    const struct dur_ref *x = a, *y = b;
    if (x->group != y->group)
        return x->group < y->group ? -1 : 1;
    return x->d < y->d ? -1 : x->d > y->d;
}

int
fs_corr_mark_slow(const int64_t *duration, const size_t *group, size_t n, double pct, double factor,
                  bool *slow)
{
    struct dur_ref *s = malloc((n ? n : 1) * sizeof *s);
    if (!s)
        return -1;
    for (size_t i = 0; i < n; i++) {
        s[i].d = duration[i];
        s[i].group = group[i];
        slow[i] = false;
    }
    qsort(s, n, sizeof *s, cmp_dur);
    /* Per group threshold, found by binary search of the sorted copy. */
    for (size_t i = 0; i < n; i++) {
        size_t lo = 0, hi = n;
        while (lo < hi) { /* first entry of this group */
            size_t mid = lo + (hi - lo) / 2;
            if (s[mid].group < group[i])
                lo = mid + 1;
            else
                hi = mid;
        }
        size_t g0 = lo;
        hi = n;
        while (lo < hi) { /* one past the last */
            size_t mid = lo + (hi - lo) / 2;
            if (s[mid].group <= group[i])
                lo = mid + 1;
            else
                hi = mid;
        }
        size_t gn = lo - g0;
        if (gn < 2)
            continue;
        double thr;
        if (factor > 0) {
            thr = factor * (double)s[g0 + gn / 2].d;
        } else {
            /* Nearest-rank percentile. */
            size_t rank = (size_t)ceil(pct / 100.0 * (double)gn);
            if (rank < 1)
                rank = 1;
            if (rank > gn)
                rank = gn;
            thr = (double)s[g0 + rank - 1].d;
        }
        slow[i] = (double)duration[i] > thr;
    }
    free(s);
    return 0;
}
