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
    int c = fs_an_rank_cmp(x->peak_z, x->specificity, y->peak_z, y->specificity);
    if (c != 0)
        return c;
    return x->series < y->series ? -1 : x->series > y->series;
}

static int
cmp_aggregate(const void *a, const void *b)
{
    const struct fs_corr_aggregate *x = a, *y = b;
    if (x->first != y->first)
        return x->first > y->first ? -1 : 1;
    if (x->in_top != y->in_top)
        return x->in_top > y->in_top ? -1 : 1;
    if (x->max_z != y->max_z)
        return x->max_z > y->max_z ? -1 : 1;
    return x->series < y->series ? -1 : x->series > y->series;
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
    struct fs_corr_report *r = calloc(1, sizeof *r);
    /* Per series: the best suspect entry in the current window (dedup of its runs). */
    struct fs_corr_suspect *cand = NULL;
    int32_t *slot = NULL;
    if (!r)
        return -1;
    r->results = calloc(n ? n : 1, sizeof *r->results);
    r->aggregates = calloc(d->n_series ? d->n_series : 1, sizeof *r->aggregates);
    slot = malloc((d->n_series ? d->n_series : 1) * sizeof *slot);
    size_t cand_cap = 64;
    cand = malloc(cand_cap * sizeof *cand);
    if (!r->results || !r->aggregates || !slot || !cand)
        goto fail;
    for (size_t s = 0; s < d->n_series; s++) {
        slot[s] = -1;
        r->aggregates[s].series = (uint32_t)s;
    }
    for (size_t i = 0; i < n; i++) {
        struct fs_corr_result *res = &r->results[i];
        res->window = w[i];
        /* Candidates from the widest series uncertainty; filtered exactly below. */
        int64_t lo = w[i].start_us - o->lead_us - w[i].uncertainty_us;
        int64_t hi = w[i].end_us + o->lag_us + w[i].uncertainty_us;
        int64_t mu = d->max_time_uncertainty_us;
        size_t end = runs_after(d, hi + mu);
        size_t nc = 0;
        for (size_t k = end; k-- > 0;) {
            const struct fs_departure *run = &d->runs[k];
            if (run->start_us < lo - mu - d->max_run_us)
                break;
            int64_t su = d->series[run->series].time_uncertainty_us;
            if (run->end_us < lo - su || run->start_us > hi + su)
                continue;
            int32_t sl = slot[run->series];
            if (sl >= 0) {
                if (run->peak_z <= cand[sl].peak_z)
                    continue;
            } else {
                if (nc == cand_cap) {
                    void *p = realloc(cand, cand_cap * 2 * sizeof *cand);
                    if (!p)
                        goto fail;
                    cand = p;
                    cand_cap *= 2;
                }
                sl = (int32_t)nc++;
                slot[run->series] = sl;
            }
            cand[sl] = (struct fs_corr_suspect){
                .series = run->series,
                .peak_z = run->peak_z,
                .peak_value = run->peak_value,
                .baseline = run->baseline,
                .peak_us = run->peak_us,
                .lag_us = run->start_us - w[i].start_us,
                .uncertainty_us = w[i].uncertainty_us + su,
                .specificity = fs_an_specificity(&d->series[run->series]),
            };
        }
        for (size_t c = 0; c < nc; c++)
            slot[cand[c].series] = -1;
        qsort(cand, nc, sizeof *cand, cmp_suspect);
        res->n_top = nc < top ? nc : top;
        memcpy(res->top, cand, res->n_top * sizeof *cand);
        for (size_t c = 0; c < res->n_top; c++) {
            struct fs_corr_aggregate *a = &r->aggregates[cand[c].series];
            a->in_top++;
            if (c == 0)
                a->first++;
            if (cand[c].peak_z > a->max_z)
                a->max_z = cand[c].peak_z;
        }
    }
    r->n_results = n;
    qsort(r->aggregates, d->n_series, sizeof *r->aggregates, cmp_aggregate);
    size_t na = 0;
    while (na < d->n_series && r->aggregates[na].in_top > 0)
        na++;
    r->n_aggregates = na;
    free(cand);
    free(slot);
    *out = r;
    return 0;
fail:
    free(cand);
    free(slot);
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
