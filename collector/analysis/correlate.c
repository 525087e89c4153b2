/* Ranking switch series against slow host windows (see correlate.h). */
#include "analysis/correlate.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/effects.h"

void
fs_corr_opts_default(struct fs_corr_opts *o)
{
    o->lead_us = 500000;
    o->lag_us = 500000;
    o->top = FS_CORR_TOP;
    o->trains = NULL;
    o->links = NULL;
    o->n_links = 0;
}

void
fs_corr_report_free(struct fs_corr_report *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_results; i++)
        free(r->results[i].tree);
    free(r->results);
    free(r->aggregates);
    for (size_t g = 0; g < r->n_groups; g++) {
        free(r->groups[g].series);
        free(r->groups[g].share);
    }
    free(r->groups);
    free(r);
}

static int
cmp_suspect(const void *a, const void *b)
{
    const struct fs_corr_suspect *x = a, *y = b;
    if ((x->on_path == 0) != (y->on_path == 0))
        return x->on_path == 0 ? 1 : -1;
    if (x->demoted != y->demoted)
        return x->demoted ? 1 : -1;
    if (x->evidence != y->evidence)
        return x->evidence > y->evidence ? -1 : 1;
    if (x->explained != y->explained)
        return x->explained ? 1 : -1;
    int c = fs_an_rank_cmp(x->peak_z, x->specificity, y->peak_z, y->specificity);
    if (c != 0)
        return c;
    return x->series < y->series ? -1 : x->series > y->series;
}

/* Whether x's run in window w starts where its series' recurring train expects one. */
static bool
on_train(const struct fs_corr_train *trains, const struct fs_corr_window *w,
         const struct fs_corr_suspect *x)
{
    if (!trains || !(trains[x->series].period_us > 0))
        return false;
    const struct fs_corr_train *t = &trains[x->series];
    double at = (double)(w->start_us + x->lag_us);
    double k = round(((double)t->next_us - at) / t->period_us);
    double off = fabs((double)t->next_us - k * t->period_us - at);
    return off <= (double)(t->tol_us + x->uncertainty_us); /* the window's and the series' */
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
    const struct fs_an_place *info;
    uint32_t *sw_cause;    /* per switch: stamp of the last window with a cause departure */
    uint32_t *sw_sends;    /* per switch: stamp of the last window it sent pauses in */
    uint32_t *port_paused; /* per port: stamp of the last window it received explained pauses */
    uint32_t *port_sends;  /* per port: stamp of the last window it sent pauses in */
    uint32_t *port_tx;     /* per port: its pauses-sent candidate in that window */
    uint32_t *port_rx;     /* per port: its explained pauses-received candidate */
    uint32_t *sw_best;     /* per switch: its first cause candidate (unexplained, earliest) */
    uint32_t *sw_best_st;  /* per switch: stamp of the window sw_best is of */
    uint32_t stamp;
    uint8_t *port_path;               /* per port: on the path of path_of */
    const struct fs_an_port *path_of; /* the path port_path was made for */
    size_t n_path_of;
    bool path_on; /* the current window has a path (port_path is its) */
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
    size_t end = fs_departures_runs_after(d, hi + mu);
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
            .group = -1,
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

/* Whether the candidate's port is on the window's path (path_mark made for it). */
static bool
cand_on_path(const struct scan *sc, const struct fs_corr_suspect *x)
{
    uint32_t p = sc->info[x->series].port;
    return sc->path_on && p != UINT32_MAX && sc->port_path[p];
}

/* Whether cause candidate a is a better parent for its switch's pauses than b: one
 * nothing explains (the congestion itself) before a paused port's, then one on the slow
 * ranks' path (of two congested ports of a switch, the one their traffic crosses explains
 * the pauses they waited behind), then the earlier. */
static bool
better_cause(const struct scan *sc, const struct fs_corr_suspect *a,
             const struct fs_corr_suspect *b)
{
    if (a->explained != b->explained)
        return !a->explained;
    bool pa = cand_on_path(sc, a), pb = cand_on_path(sc, b);
    if (pa != pb)
        return pa;
    return a->lag_us < b->lag_us;
}

/* Which of the window's candidates are effects of another one, and which one explains
 * each (correlate.h, effects.h). */
static void
mark_explained(struct scan *sc)
{
    const struct fs_an_place *in = sc->info;
    uint32_t st = ++sc->stamp, senders = 0, last_sender = UINT32_MAX;
    for (size_t c = 0; c < sc->nc; c++) {
        const struct fs_an_place *x = &in[sc->cand[c].series];
        sc->cand[c].paused_by = UINT32_MAX;
        sc->cand[c].explained = false;
        if (x->role == FS_AN_ROLE_CAUSE)
            sc->sw_cause[x->sw] = st;
        if (x->role == FS_AN_ROLE_PAUSE_SENT) {
            if (sc->sw_sends[x->sw] != st) {
                sc->sw_sends[x->sw] = st;
                senders++;
                last_sender = x->sw;
            }
            if (x->port != UINT32_MAX) {
                sc->port_sends[x->port] = st;
                sc->port_tx[x->port] = (uint32_t)c;
            }
        }
    }
    /* A received pause is explained by its link partner sending pauses (without the
       links: by another switch sending pauses); a port's own congestion by an explained
       pause it received. */
    for (size_t c = 0; c < sc->nc; c++) {
        const struct fs_an_place *x = &in[sc->cand[c].series];
        if (x->role != FS_AN_ROLE_PAUSE_RECEIVED)
            continue;
        bool e;
        if (x->linked) {
            e = x->partner != UINT32_MAX && sc->port_sends[x->partner] == st;
            if (e)
                sc->cand[c].paused_by = sc->cand[sc->port_tx[x->partner]].series;
        } else {
            e = senders > 1 || (senders == 1 && last_sender != x->sw);
        }
        sc->cand[c].explained = e;
        if (e && x->port != UINT32_MAX) {
            sc->port_paused[x->port] = st;
            sc->port_rx[x->port] = (uint32_t)c;
        }
    }
    for (size_t c = 0; c < sc->nc; c++) {
        const struct fs_an_place *x = &in[sc->cand[c].series];
        if (x->role != FS_AN_ROLE_CAUSE)
            continue;
        bool e = x->port != UINT32_MAX && sc->port_paused[x->port] == st;
        sc->cand[c].explained = e;
        if (e)
            sc->cand[c].paused_by = sc->cand[sc->port_rx[x->port]].series;
    }
    /* The cause of its switch that pauses sent are charged to. */
    for (size_t c = 0; c < sc->nc; c++) {
        const struct fs_an_place *x = &in[sc->cand[c].series];
        if (x->role != FS_AN_ROLE_CAUSE)
            continue;
        if (sc->sw_best_st[x->sw] != st ||
            better_cause(sc, &sc->cand[c], &sc->cand[sc->sw_best[x->sw]])) {
            sc->sw_best_st[x->sw] = st;
            sc->sw_best[x->sw] = (uint32_t)c;
        }
    }
    for (size_t c = 0; c < sc->nc; c++) {
        const struct fs_an_place *x = &in[sc->cand[c].series];
        if (x->role != FS_AN_ROLE_PAUSE_SENT)
            continue;
        bool e = sc->sw_cause[x->sw] == st;
        sc->cand[c].explained = e;
        if (e)
            sc->cand[c].paused_by = sc->cand[sc->sw_best[x->sw]].series;
    }
}

/* Whether the series' port (its target and interface) is in path[0..n). */
static bool
port_in_path(const struct fs_an_series_ref *s, const struct fs_an_port *path, size_t n)
{
    struct fs_an_port k = {s->target, s->interface};
    return s->interface[0] && bsearch(&k, path, n, sizeof *path, fs_an_port_cmp) != NULL;
}

/* Makes sc->port_path the window's path (kept while windows share one). */
static void
path_mark(struct scan *sc, const struct fs_corr_window *w, uint32_t n_ports)
{
    const struct fs_an_place *in = sc->info;
    sc->path_on = w->n_path > 0;
    if (!sc->path_on || (w->path == sc->path_of && w->n_path == sc->n_path_of))
        return;
    memset(sc->port_path, 0, n_ports ? n_ports : 1);
    for (size_t s = 0; s < sc->d->n_series; s++)
        if (in[s].port != UINT32_MAX && !sc->port_path[in[s].port] &&
            port_in_path(&sc->d->series[s], w->path, w->n_path))
            sc->port_path[in[s].port] = 1;
    sc->path_of = w->path;
    sc->n_path_of = w->n_path;
}

/* Which of the window's candidates are on its slow ranks' path (correlate.h; path_mark
 * made for the window); on_path -1 for all when the window has none. group_of NULL: before
 * the groups are known. */
static void
mark_on_path(struct scan *sc, const int32_t *group_of, uint32_t n_groups, uint8_t *group_on)
{
    if (!sc->path_on) {
        for (size_t c = 0; c < sc->nc; c++)
            sc->cand[c].on_path = -1;
        return;
    }
    for (size_t c = 0; c < sc->nc; c++) {
        sc->cand[c].on_path = cand_on_path(sc, &sc->cand[c]);
        sc->slot[sc->cand[c].series] = (int32_t)c;
    }
    /* Up each chain of what explains what from a departure whose own port is on the path
       (not from one marked on it by this walk). */
    for (size_t c = 0; c < sc->nc; c++) {
        if (!cand_on_path(sc, &sc->cand[c]))
            continue;
        const struct fs_corr_suspect *y = &sc->cand[c];
        for (int hop = 0; y->paused_by != UINT32_MAX && hop < 32; hop++) {
            int32_t q = sc->slot[y->paused_by];
            if (q < 0)
                break;
            sc->cand[q].on_path = 1;
            y = &sc->cand[q];
        }
    }
    if (!group_of) /* before the groups are known */
        goto done;
    memset(group_on, 0, n_groups ? n_groups : 1);
    for (size_t c = 0; c < sc->nc; c++) {
        int32_t g = group_of[sc->cand[c].series];
        if (g >= 0 && sc->cand[c].on_path == 1)
            group_on[g] = 1;
    }
    for (size_t c = 0; c < sc->nc; c++) {
        int32_t g = group_of[sc->cand[c].series];
        if (g >= 0 && group_on[g])
            sc->cand[c].on_path = 1;
    }
done:
    for (size_t c = 0; c < sc->nc; c++)
        sc->slot[sc->cand[c].series] = -1;
}

static int
cmp_edge(const void *a, const void *b)
{
    const struct fs_corr_edge *x = a, *y = b;
    if (x->onset_us != y->onset_us)
        return x->onset_us < y->onset_us ? -1 : 1;
    if (x->hop != y->hop)
        return x->hop < y->hop ? -1 : 1;
    return x->series < y->series ? -1 : x->series > y->series;
}

/* The propagation tree of the window's first suspect (correlate.h) into res->tree, from
 * the ranked candidates sc->cand[0..nc). 0 or -1 (no memory). */
/* Whether candidate y is the origin's: on its port, or on a port of its group's members
 * (a bundle: the pauses its switch sends may be charged to any member's congestion, of
 * any metric). */
static bool
of_origin(const struct scan *sc, const struct fs_corr_suspect *y, uint32_t oport,
          const struct fs_corr_group *og)
{
    uint32_t p = sc->info[y->series].port;
    if (p == oport)
        return true;
    for (size_t k = 0; og && k < og->n; k++)
        if (sc->info[og->series[k]].port == p)
            return true;
    return false;
}

static int
window_tree(struct scan *sc, struct fs_corr_result *res, const struct fs_corr_group *og)
{
    res->tree = NULL;
    res->n_tree = res->tree_total = 0;
    if (res->n_top == 0 || res->top[0].explained)
        return 0;
    const struct fs_an_place *in = sc->info;
    const struct fs_corr_suspect *origin = &res->top[0];
    uint32_t oport = in[origin->series].port;
    for (size_t c = 0; c < sc->nc; c++)
        sc->slot[sc->cand[c].series] = (int32_t)c;
    int rc = -1;
    size_t cap = 0;
    for (size_t c = 0; c < sc->nc; c++) {
        const struct fs_corr_suspect *x = &sc->cand[c];
        if (of_origin(sc, x, oport, og) || x->paused_by == UINT32_MAX)
            continue;
        /* Up the chain of what explains what, to the origin's port (or its group's). */
        uint32_t hop = 0;
        bool reaches = false;
        for (const struct fs_corr_suspect *y = x; y->paused_by != UINT32_MAX && hop < 32;) {
            int32_t p = sc->slot[y->paused_by];
            if (p < 0)
                break;
            y = &sc->cand[p];
            hop++;
            if (of_origin(sc, y, oport, og)) {
                reaches = true;
                break;
            }
        }
        if (!reaches)
            continue;
        if (res->n_tree == cap) {
            size_t nc2 = cap ? cap * 2 : 16;
            void *q = realloc(res->tree, nc2 * sizeof *res->tree);
            if (!q)
                goto out;
            res->tree = q;
            cap = nc2;
        }
        res->tree[res->n_tree++] =
            (struct fs_corr_edge){x->series, x->paused_by, res->window.start_us + x->lag_us, hop};
    }
    if (res->n_tree > 1)
        qsort(res->tree, res->n_tree, sizeof *res->tree, cmp_edge);
    res->tree_total = res->n_tree;
    if (res->n_tree > FS_CORR_TREE_MAX)
        res->n_tree = FS_CORR_TREE_MAX;
    rc = 0;
out:
    for (size_t c = 0; c < sc->nc; c++)
        sc->slot[sc->cand[c].series] = -1;
    return rc;
}

static int
cmp_interval(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Per series: how many of its runs overlap any window (widened as the windows are), how
 * many it has in all, and how many of those outside every window its port was paused
 * during (correlate.h: they do not count against it). 0 or -1. */
static int
runs_in_windows(const struct fs_departures *d, const struct fs_corr_window *w, size_t n,
                const struct fs_corr_opts *o, const bool *paused_run, uint32_t *inside,
                uint32_t *total, uint32_t *paused)
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
        else if (paused_run[k])
            paused[run->series]++;
    }
    free(iv);
    return 0;
}

/* Union-find over series indexes. */
static uint32_t
uf_find(uint32_t *parent, uint32_t x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

struct member_share {
    uint32_t series;
    double share;
};

static int
cmp_share(const void *a, const void *b)
{
    const struct member_share *x = a, *y = b;
    if (x->share != y->share)
        return x->share > y->share ? -1 : 1;
    return x->series < y->series ? -1 : x->series > y->series;
}

/* Ports departing together (correlate.h): fills r->groups and each series' group in
 * group_of (-1: none). bits holds each series' windows (words per series). 0 or -1. */
static int
find_groups(const struct fs_departures *d, const struct fs_an_place *info, const uint64_t *bits,
            size_t words, const uint32_t *hits, const uint32_t *expl, const double *excess,
            int32_t *group_of, struct fs_corr_report *r)
{
    size_t ns = d->n_series;
    uint32_t *cand = malloc((ns ? ns : 1) * sizeof *cand),
             *parent = malloc((ns ? ns : 1) * sizeof *parent);
    int rc = -1;
    size_t nc = 0;
    if (!cand || !parent)
        goto out;
    for (size_t s = 0; s < ns; s++) {
        parent[s] = (uint32_t)s;
        group_of[s] = -1;
        if (info[s].role == FS_AN_ROLE_CAUSE && info[s].port != UINT32_MAX && hits[s] >= 2 &&
            2 * expl[s] < hits[s])
            cand[nc++] = (uint32_t)s;
    }
    /* Candidates of one switch, metric and tc: by switch id then metric, so a pass over
       neighbours finds them (few per switch depart in many windows). */
    for (size_t i = 0; i < nc; i++)
        for (size_t j = i + 1; j < nc; j++) {
            uint32_t a = cand[i], b = cand[j];
            const struct fs_an_series_ref *x = &d->series[a], *y = &d->series[b];
            if (info[a].sw != info[b].sw || info[a].port == info[b].port ||
                strcmp(x->metric, y->metric) != 0 || strcmp(x->tc, y->tc) != 0)
                continue;
            /* With the links, a bundle is the uplinks of one switch (ports cabled to
               switches), known, not guessed: half of each other's windows is enough, and
               ports toward hosts are never one. */
            bool known = info[a].linked && info[b].linked;
            if (known && !(info[a].uplink && info[b].uplink))
                continue;
            size_t both = 0, num = known ? 1 : 4, den = known ? 2 : 5;
            for (size_t k = 0; k < words; k++)
                both += (size_t)__builtin_popcountll(bits[a * words + k] & bits[b * words + k]);
            if (den * both >= num * hits[a] && den * both >= num * hits[b])
                parent[uf_find(parent, a)] = uf_find(parent, b);
        }
    for (size_t i = 0; i < nc; i++) {
        uint32_t root = uf_find(parent, cand[i]);
        if (root == cand[i])
            continue;
        /* A member other than the root: the group is the root's. */
        if (group_of[root] < 0) {
            void *p = realloc(r->groups, (r->n_groups + 1) * sizeof *r->groups);
            if (!p)
                goto out;
            r->groups = p;
            memset(&r->groups[r->n_groups], 0, sizeof *r->groups);
            group_of[root] = (int32_t)r->n_groups++;
        }
        group_of[cand[i]] = group_of[root];
    }
    for (size_t g = 0; g < r->n_groups; g++) {
        size_t m = 0;
        for (size_t i = 0; i < nc; i++)
            m += group_of[cand[i]] == (int32_t)g;
        struct member_share *ms = malloc(m * sizeof *ms);
        struct fs_corr_group *gr = &r->groups[g];
        gr->series = malloc(m * sizeof *gr->series);
        gr->share = malloc(m * sizeof *gr->share);
        if (!ms || !gr->series || !gr->share) {
            free(ms);
            goto out;
        }
        double sum = 0;
        for (size_t i = 0, k = 0; i < nc; i++)
            if (group_of[cand[i]] == (int32_t)g) {
                ms[k].series = cand[i];
                ms[k++].share = excess[cand[i]] > 0 ? excess[cand[i]] : 0;
                sum += excess[cand[i]] > 0 ? excess[cand[i]] : 0;
            }
        for (size_t k = 0; k < m; k++)
            ms[k].share = sum > 0 ? ms[k].share / sum : 1.0 / (double)m;
        qsort(ms, m, sizeof *ms, cmp_share);
        for (size_t k = 0; k < m; k++) {
            gr->series[k] = ms[k].series;
            gr->share[k] = ms[k].share;
        }
        gr->n = m;
        free(ms);
    }
    rc = 0;
out:
    free(cand);
    free(parent);
    return rc;
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
    size_t ns = d->n_series ? d->n_series : 1, words = (n + 63) / 64;
    struct fs_corr_report *r = calloc(1, sizeof *r);
    struct scan sc = {.d = d, .o = o, .cand_cap = 64};
    uint32_t *hits = NULL, *inside = NULL, *total = NULL, *expl = NULL, *paused = NULL;
    uint32_t *uncounted = NULL; /* per series: windows where it departs explained or off path */
    double *evidence = NULL, *excess = NULL;
    struct fs_an_place *info = NULL;
    uint64_t *bits = NULL;
    int32_t *group_of = NULL;
    bool *paused_run = NULL;
    uint32_t *group_open = NULL; /* per group: window + 1 in which a member is not demoted */
    uint8_t *group_on = NULL;    /* per group: a member on the window's path */
    uint32_t n_ports = 0;
    int rc = -1;
    if (!r)
        return -1;
    r->results = calloc(n ? n : 1, sizeof *r->results);
    r->aggregates = calloc(ns, sizeof *r->aggregates);
    sc.slot = malloc(ns * sizeof *sc.slot);
    sc.cand = malloc(sc.cand_cap * sizeof *sc.cand);
    hits = calloc(ns, sizeof *hits);
    inside = calloc(ns, sizeof *inside);
    total = calloc(ns, sizeof *total);
    expl = calloc(ns, sizeof *expl);
    paused = calloc(ns, sizeof *paused);
    uncounted = calloc(ns, sizeof *uncounted);
    evidence = calloc(ns, sizeof *evidence);
    excess = calloc(ns, sizeof *excess);
    info = malloc(ns * sizeof *info);
    sc.sw_cause = calloc(ns, sizeof *sc.sw_cause);
    sc.port_paused = calloc(ns, sizeof *sc.port_paused);
    sc.sw_sends = calloc(ns, sizeof *sc.sw_sends);
    sc.port_sends = calloc(ns, sizeof *sc.port_sends);
    sc.port_tx = calloc(ns, sizeof *sc.port_tx);
    sc.port_rx = calloc(ns, sizeof *sc.port_rx);
    sc.sw_best = calloc(ns, sizeof *sc.sw_best);
    sc.sw_best_st = calloc(ns, sizeof *sc.sw_best_st);
    group_of = malloc(ns * sizeof *group_of);
    bits = calloc(ns * (words ? words : 1), sizeof *bits);
    if (!r->results || !r->aggregates || !sc.slot || !sc.cand || !hits || !inside || !total ||
        !expl || !paused || !uncounted || !evidence || !excess || !info || !sc.sw_cause ||
        !sc.port_paused || !sc.sw_sends || !sc.port_sends || !sc.port_tx || !sc.port_rx ||
        !sc.sw_best || !sc.sw_best_st || !group_of || !bits ||
        fs_an_places(d, o->links, o->n_links, info, &n_ports) != 0)
        goto out;
    sc.info = info;
    if (!(sc.port_path = malloc(n_ports ? n_ports : 1)))
        goto out;
    r->n_results = n; /* each result's tree NULL until made, freed with the report */
    for (size_t s = 0; s < d->n_series; s++) {
        sc.slot[s] = -1;
        r->aggregates[s].series = (uint32_t)s;
        r->aggregates[s].group = -1;
    }
    paused_run = calloc(d->n_runs ? d->n_runs : 1, sizeof *paused_run);
    if (!paused_run || fs_an_mark_paused_runs(d, o->links, o->n_links, paused_run) != 0)
        goto out;
    /* Pass 1: in how many windows each series departs (and is explained), its excess over
       baseline there, and how many of its runs fall outside every window. */
    for (size_t i = 0; i < n; i++) {
        if (window_candidates(&sc, &w[i]) != 0)
            goto out;
        path_mark(&sc, &w[i], n_ports);
        mark_explained(&sc);
        mark_on_path(&sc, NULL, 0, NULL);
        for (size_t c = 0; c < sc.nc; c++) {
            const struct fs_corr_suspect *x = &sc.cand[c];
            hits[x->series]++;
            expl[x->series] += x->explained;
            uncounted[x->series] += x->explained || x->on_path == 0;
            excess[x->series] += x->peak_value - x->baseline;
            bits[x->series * words + i / 64] |= 1ULL << (i % 64);
        }
    }
    if (runs_in_windows(d, w, n, o, paused_run, inside, total, paused) != 0)
        goto out;
    for (size_t s = 0; s < d->n_series; s++) {
        /* Departures another one of the window explains are its, not this series', and
           one off every path of the window's slow ranks explains nothing they waited for. */
        double consistency = n ? (double)(hits[s] - uncounted[s]) / (double)n : 0;
        /* Laplace-smoothed share of its runs that fall in windows: one lucky burst of a
           quiet port is not "always in windows". Ranking needs at least two windows. */
        double precision = ((double)inside[s] + 1) / ((double)(total[s] - paused[s]) + 2);
        evidence[s] = n >= 2 ? consistency * sqrt(precision) : hits[s] > uncounted[s] ? 1.0 : 0.0;
        r->aggregates[s].departs = hits[s];
        r->aggregates[s].explained = expl[s];
        r->aggregates[s].runs_total = total[s];
        r->aggregates[s].runs_outside = total[s] - inside[s];
        r->aggregates[s].evidence = evidence[s];
    }
    if (find_groups(d, info, bits, words, hits, expl, excess, group_of, r) != 0 ||
        !(group_open = calloc(r->n_groups ? r->n_groups : 1, sizeof *group_open)) ||
        !(group_on = malloc(r->n_groups ? r->n_groups : 1)))
        goto out;
    for (size_t g = 0; g < r->n_groups; g++) /* a group ranks by its strongest member */
        for (size_t k = 1; k < r->groups[g].n; k++) {
            uint32_t lead = r->groups[g].series[0], m = r->groups[g].series[k];
            if (evidence[m] > evidence[lead])
                evidence[lead] = evidence[m];
        }
    for (size_t s = 0; s < d->n_series; s++) {
        r->aggregates[s].group = group_of[s];
        r->aggregates[s].grouped = group_of[s] >= 0 && r->groups[group_of[s]].series[0] != s;
        if (group_of[s] >= 0)
            evidence[s] = evidence[r->groups[group_of[s]].series[0]];
        r->aggregates[s].evidence = evidence[s];
    }
    /* Pass 2: each window's suspects, by the evidence across windows first; a group once,
       as its first member in the window. */
    for (size_t i = 0; i < n; i++) {
        struct fs_corr_result *res = &r->results[i];
        res->window = w[i];
        res->window.path = NULL; /* the caller's, gone after the call; n_path stays */
        if (window_candidates(&sc, &w[i]) != 0)
            goto out;
        path_mark(&sc, &w[i], n_ports);
        mark_explained(&sc);
        for (size_t c = 0; c < sc.nc; c++) {
            sc.cand[c].evidence = evidence[sc.cand[c].series];
            sc.cand[c].group = group_of[sc.cand[c].series];
            sc.cand[c].demoted = sc.cand[c].explained && !on_train(o->trains, &w[i], &sc.cand[c]);
            if (sc.cand[c].group >= 0 && !sc.cand[c].demoted)
                group_open[sc.cand[c].group] = (uint32_t)i + 1;
        }
        for (size_t c = 0; c < sc.nc; c++)
            if (sc.cand[c].group >= 0 && group_open[sc.cand[c].group] == (uint32_t)i + 1)
                sc.cand[c].demoted = false;
        mark_on_path(&sc, group_of, (uint32_t)r->n_groups, group_on);
        qsort(sc.cand, sc.nc, sizeof *sc.cand, cmp_suspect);
        res->n_top = 0;
        for (size_t c = 0; c < sc.nc && res->n_top < top; c++) {
            bool dup = false;
            for (size_t k = 0; k < res->n_top && sc.cand[c].group >= 0; k++)
                dup |= res->top[k].group == sc.cand[c].group;
            if (!dup)
                res->top[res->n_top++] = sc.cand[c];
        }
        if (window_tree(&sc, res,
                        res->n_top && res->top[0].group >= 0 ? &r->groups[res->top[0].group]
                                                             : NULL) != 0)
            goto out;
        for (size_t c = 0; c < res->n_top; c++) {
            struct fs_corr_aggregate *a = &r->aggregates[res->top[c].series];
            a->in_top++;
            if (c == 0)
                a->first++;
            if (res->top[c].peak_z > a->max_z)
                a->max_z = res->top[c].peak_z;
        }
    }
    qsort(r->aggregates, d->n_series, sizeof *r->aggregates, cmp_aggregate);
    size_t na = 0;
    while (na < d->n_series && r->aggregates[na].departs > 0)
        na++;
    r->n_aggregates = na;
    *out = r;
    r = NULL;
    rc = 0;
out:
    free(sc.cand);
    free(sc.slot);
    free(sc.sw_cause);
    free(sc.sw_sends);
    free(sc.port_paused);
    free(sc.port_sends);
    free(sc.port_tx);
    free(sc.port_rx);
    free(sc.sw_best);
    free(sc.sw_best_st);
    free(hits);
    free(inside);
    free(total);
    free(expl);
    free(paused);
    free(uncounted);
    free(evidence);
    free(excess);
    free(info);
    free(bits);
    free(group_of);
    free(paused_run);
    free(group_open);
    free(group_on);
    free(sc.port_path);
    fs_corr_report_free(r);
    return rc;
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
        double thr, median = (double)s[g0 + gn / 2].d;
        if (factor > 0) {
            thr = factor * median;
        } else {
            /* Nearest-rank percentile, and at least FS_CORR_SLOW_MIN_FACTOR times the
               median: the top percent of a job whose collectives all run alike is not
               slow, and would dilute the stalls with windows nothing explains. */
            size_t rank = (size_t)ceil(pct / 100.0 * (double)gn);
            if (rank < 1)
                rank = 1;
            if (rank > gn)
                rank = gn;
            thr = (double)s[g0 + rank - 1].d;
            if (thr < FS_CORR_SLOW_MIN_FACTOR * median)
                thr = FS_CORR_SLOW_MIN_FACTOR * median;
        }
        slow[i] = (double)duration[i] > thr;
    }
    free(s);
    return 0;
}
