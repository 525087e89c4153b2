/* The ring as the analysis reads it (see ring_scan.h). */
#include "analysis/ring_scan.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define US 1000000LL
#define MAX_SAMPLES_PER_SERIES (8u << 20)

/* The candidates' strings: copied into large blocks rather than one allocation each
   (six per series, 100,000 series a request). */
struct str_block {
    struct str_block *next;
    size_t used, cap;
    char data[];
};

struct cands {
    struct fs_ring_scan_series *c;
    size_t n, cap;
    struct str_block *blocks;   /* owned; the newest first */
    enum fs_metric last_metric; /* fs_an_classify of the previous series' metric */
    bool have_last, last_classified, last_counter;
    enum fs_an_kind last_kind;
    double last_floor;
    bool failed;
    fs_ring_scan_match match; /* when set: the series it chooses, else the classified ones */
    void *match_arg;
};

static const char *
label(const struct fs_series_info *s, const char *name)
{
    for (size_t i = 0; i < s->n_labels; i++)
        if (strcmp(s->labels[i].name, name) == 0)
            return s->labels[i].value;
    return "";
}

/* A copy of v in cs's blocks, or same when it equals v (neighbours share targets,
   sources and metrics). NULL on no memory. */
static const char *
cands_dup(struct cands *cs, const char *same, const char *v)
{
    if (same && strcmp(same, v) == 0)
        return same;
    size_t n = strlen(v) + 1;
    struct str_block *b = cs->blocks;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        if (!(b = malloc(sizeof *b + cap)))
            return NULL;
        b->cap = cap;
        b->used = 0;
        b->next = cs->blocks;
        cs->blocks = b;
    }
    char *p = b->data + b->used;
    memcpy(p, v, n);
    b->used += n;
    return p;
}

static int
collect_cb(void *arg_, const struct fs_series_info *s)
{
    struct cands *cs = arg_;
    enum fs_an_kind kind = FS_AN_OTHER;
    bool counter = s->counter;
    double floor = 0;
    bool classified;
    /* Series come metric by metric: classify each metric once. */
    if (cs->have_last && cs->last_metric == s->metric) {
        classified = cs->last_classified;
        kind = cs->last_kind;
        counter = classified ? cs->last_counter : s->counter;
        floor = cs->last_floor;
    } else {
        classified = fs_an_classify(s->name, &kind, &counter, &floor);
        cs->have_last = true;
        cs->last_metric = s->metric;
        cs->last_classified = classified;
        cs->last_kind = kind;
        cs->last_counter = counter;
        cs->last_floor = floor;
    }
    if (cs->match) {
        if (!cs->match(cs->match_arg, s))
            return 0;
        counter = s->counter;
    } else if (!classified) {
        return 0;
    }
    if (cs->n == cs->cap) {
        size_t cap = cs->cap ? cs->cap * 2 : 256;
        void *p = realloc(cs->c, cap * sizeof *cs->c);
        if (!p) {
            cs->failed = true;
            return 1;
        }
        cs->c = p;
        cs->cap = cap;
    }
    struct fs_ring_scan_series *c = &cs->c[cs->n++];
    c->id = s->id;
    c->gen = s->gen;
    const struct fs_ring_scan_series *prev = cs->n > 1 ? &cs->c[cs->n - 2] : NULL;
    c->target = cands_dup(cs, prev ? prev->target : NULL, label(s, "target"));
    c->interface = cands_dup(cs, prev ? prev->interface : NULL, label(s, "interface"));
    c->tc = cands_dup(cs, prev ? prev->tc : NULL, label(s, "tc"));
    c->rule = cands_dup(cs, prev ? prev->rule : NULL, label(s, "rule"));
    c->metric = cands_dup(cs, prev ? prev->metric : NULL, s->name);
    c->source = cands_dup(cs, prev ? prev->source : NULL, label(s, "source"));
    c->direction = cands_dup(cs, prev ? prev->direction : NULL, label(s, "direction"));
    c->priority = cands_dup(cs, prev ? prev->priority : NULL, label(s, "priority"));
    c->kind = kind;
    c->counter = counter;
    c->scale = s->scale > 0 ? s->scale : 1.0;
    c->floor = floor;
    if (!c->target || !c->interface || !c->tc || !c->rule || !c->metric || !c->source ||
        !c->direction || !c->priority) {
        cs->failed = true;
        return 1;
    }
    return 0;
}

static void
free_cands(struct cands *cs)
{
    for (struct str_block *b = cs->blocks, *n; b; b = n) {
        n = b->next;
        free(b);
    }
    free(cs->c);
}

/* How far a series' timestamps may be from the switch's events, per (target, source):
   half a poll, or the device clock's uncertainty where one was measured. Per source,
   because a target's sources differ by orders of magnitude (a gNMI stream's clock to a
   few ms, a whole-second CLI clock to hundreds). */
struct target_unc {
    char *target, *source;
    int64_t unc_us;
};

struct uncs {
    struct target_unc *t;
    size_t n;
    bool failed;
};

static int
unc_cb(void *arg_, const struct fs_instance_info *in)
{
    struct uncs *u = arg_;
    int64_t v = in->last_duration_us / 2;
    if (in->clock_known && in->clock_uncertainty_seconds * 1e6 > (double)v)
        v = (int64_t)(in->clock_uncertainty_seconds * 1e6);
    const char *source = in->source ? in->source : "";
    void *p = realloc(u->t, (u->n + 1) * sizeof *u->t);
    if (!p) {
        u->failed = true;
        return 1;
    }
    u->t = p;
    struct target_unc *t = &u->t[u->n++];
    t->target = strdup(in->target);
    t->source = strdup(source);
    t->unc_us = v;
    if (!t->target || !t->source) {
        u->failed = true;
        return 1;
    }
    return 0;
}

/* The (target, source) entry; a series without a known source gets the target's worst. */
static int64_t
unc_of(const struct uncs *u, const char *target, const char *source)
{
    int64_t worst = 0;
    for (size_t i = 0; i < u->n; i++) {
        if (strcmp(u->t[i].target, target) != 0)
            continue;
        if (strcmp(u->t[i].source, source) == 0)
            return u->t[i].unc_us;
        if (u->t[i].unc_us > worst)
            worst = u->t[i].unc_us;
    }
    return worst;
}

static void
free_uncs(struct uncs *u)
{
    for (size_t i = 0; i < u->n; i++) {
        free(u->t[i].target);
        free(u->t[i].source);
    }
    free(u->t);
}

/* Reusable read buffers. */
struct reader {
    struct fs_ring_sample *smp;
    size_t cap;
    int64_t *ts, *rts;
    uint64_t *u;
    double *v;
    size_t vcap;
};

static void
free_reader(struct reader *r)
{
    free(r->smp);
    free(r->ts);
    free(r->rts);
    free(r->u);
    free(r->v);
}

/* The read tried first when samples before keep_from are left out (read_series): two
   samples before it are there at a poll interval up to 5 s. */
#define SHORT_READBACK_US (10 * US)

/* Reads one candidate into (ts, v) (rates for counters); returns samples or -1 (memory).
   With floor_out, a counter's floor there is raised to its step (fs_an_step_floor).
   Samples more than two before keep_from are read (from `from`: the ones a counter's
   rates need may be that far back) but left out: a scan from keep_from looks at one
   sample before it at most, and a rate at its own pair. */
static long
read_series(struct fs_store *st, const struct fs_ring_scan_series *c, int64_t from, int64_t to,
            int64_t keep_from, struct reader *r, const int64_t **ts_out, const double **v_out,
            double *floor_out)
{
    bool trunc = false;
    long n;
    /* A short read first: it usually holds the two samples before keep_from. */
    int64_t read_from = from;
    if (keep_from != INT64_MIN && keep_from - SHORT_READBACK_US > from)
        read_from = keep_from - SHORT_READBACK_US;
    for (;;) {
        if (r->cap == 0) {
            r->cap = 8192;
            r->smp = malloc(r->cap * sizeof *r->smp);
            if (!r->smp)
                return -1;
        }
        n = fs_store_read(st, c->id, c->gen, read_from, to, r->smp, r->cap, &trunc);
        if (n < 0)
            return 0; /* the series went away meanwhile */
        if (read_from > from && (n < 2 || r->smp[1].ts_us >= keep_from)) {
            read_from = from; /* fewer than two before keep_from: the whole readback */
            continue;
        }
        if (!trunc || r->cap >= MAX_SAMPLES_PER_SERIES)
            break;
        free(r->smp);
        r->cap *= 4;
        r->smp = malloc(r->cap * sizeof *r->smp);
        if (!r->smp) {
            r->cap = 0;
            return -1;
        }
    }
    if ((size_t)n > r->vcap) {
        free(r->ts);
        free(r->rts);
        free(r->u);
        free(r->v);
        r->vcap = (size_t)n;
        r->ts = malloc(r->vcap * sizeof *r->ts);
        r->rts = malloc(r->vcap * sizeof *r->rts);
        r->u = malloc(r->vcap * sizeof *r->u);
        r->v = malloc(r->vcap * sizeof *r->v);
        if (!r->ts || !r->rts || !r->u || !r->v) {
            r->vcap = 0;
            return -1;
        }
    }
    long skip = 0;
    while (skip < n && r->smp[skip].ts_us < keep_from)
        skip++;
    skip = skip > 2 ? skip - 2 : 0;
    n -= skip;
    for (long i = 0; i < n; i++) {
        r->ts[i] = r->smp[skip + i].ts_us;
        if (c->counter)
            r->u[i] = r->smp[skip + i].v.u;
        else
            r->v[i] = r->smp[skip + i].v.d;
    }
    if (floor_out)
        *floor_out = c->floor;
    if (c->counter) {
        if (floor_out && n > 1) {
            struct fs_an_step step = {0};
            for (long i = 1; i < n; i++)
                if (r->u[i] > r->u[i - 1])
                    fs_an_step_add(&step, r->u[i] - r->u[i - 1]);
            *floor_out =
                fs_an_step_floor(&step, c->floor, r->ts[0], r->ts[n - 1], (size_t)n, c->scale);
        }
        n = (long)fs_an_counter_rates(r->ts, r->u, (size_t)n, c->scale, r->rts, r->v);
        *ts_out = r->rts;
    } else {
        *ts_out = r->ts;
    }
    *v_out = r->v;
    return n;
}

/* One scanning thread's share of the candidates. */
struct scan_part {
    struct fs_store *st;
    const struct cands *cs;
    const struct uncs *u;
    size_t from, to;
    int64_t start, end;
    struct fs_departures *d;
    int rc;
    struct fs_ring_scan_baseline *base_out; /* [cs index]: each series' trailing baseline at end */
    const struct fs_ring_scan_baselines *tail; /* scan only after tail->at_us with its baselines */
};

static int
cmp_base(const void *a_, const void *b_)
{
    const struct fs_ring_scan_baseline *a = a_, *b = b_;
    if (a->id != b->id)
        return a->id < b->id ? -1 : 1;
    return a->gen < b->gen ? -1 : a->gen > b->gen;
}

static const struct fs_ring_scan_baseline *
find_base(const struct fs_ring_scan_baselines *bc, uint32_t id, uint32_t gen)
{
    struct fs_ring_scan_baseline key = {.id = id, .gen = gen};
    return bsearch(&key, bc->b, bc->n, sizeof *bc->b, cmp_base);
}

/* How far before a tail scan's start its reads begin: a counter's first rate needs the
   sample before. */
#define TAIL_READBACK_US (60 * US)

static void *
scan_part_run(void *arg_)
{
    struct scan_part *p = arg_;
    struct reader r = {0};
    const struct fs_ring_scan_series *last = NULL;
    int64_t unc = 0;
    p->rc = 0;
    for (size_t i = p->from; i < p->to && p->rc == 0; i++) {
        const struct fs_ring_scan_series *c = &p->cs->c[i];
        const int64_t *ts;
        const double *v;
        double floor = c->floor;
        const struct fs_ring_scan_baseline *fixed =
            p->tail ? find_base(p->tail, c->id, c->gen) : NULL;
        int64_t from =
            fixed ? p->start - TAIL_READBACK_US : p->start - p->d->opts.baseline_window_us;
        /* Against a fixed baseline only [start, end] is looked at, and the floor is not
           raised to the counter's step (that needs the history before start). */
        long n = read_series(p->st, c, from, p->end, fixed ? p->start : INT64_MIN, &r, &ts, &v,
                             fixed ? NULL : &floor);
        /* Series come target by target within a metric: look the target up once a run
           (a lookup per series compared every target's name: 100 targets times 100,000
           series). */
        if (!last || strcmp(last->target, c->target) != 0 || strcmp(last->source, c->source) != 0) {
            last = c;
            unc = unc_of(p->u, c->target, c->source);
        }
        if (n < 0) {
            p->rc = -1;
            break;
        }
        struct fs_an_series s = {
            .target = c->target,
            .interface = c->interface,
            .tc = c->tc,
            .rule = c->rule,
            .direction = c->direction,
            .priority = c->priority,
            .metric = c->metric,
            .kind = c->kind,
            .is_rate = c->counter,
            .ts_us = ts,
            .v = v,
            .n = (size_t)n,
            .abs_floor = floor,
            .time_uncertainty_us = unc,
        };
        if (fixed) {
            p->rc = fs_departures_add_fixed(p->d, &s, fixed->med, fixed->scale);
            continue;
        }
        p->rc = fs_departures_add(p->d, &s);
        if (p->base_out) {
            struct fs_ring_scan_baseline *b = &p->base_out[i];
            *b = (struct fs_ring_scan_baseline){c->id, c->gen, 0, 0};
            if (!fs_an_trailing_baseline(&s, p->end, &p->d->opts, &b->med, &b->scale))
                b->scale = 0;
        }
    }
    free_reader(&r);
    return NULL;
}

/*
 * Scans every analysed series of [start, end] (with baseline history before start), on
 * up to FS_RING_SCAN_THREADS threads: series are independent and the store allows
 * concurrent readers. The parts are joined in order, so the result does not depend on
 * the number of threads.
 */
struct fs_departures *
fs_ring_scan(struct fs_store *st, const struct fs_an_opts *opts, int64_t start, int64_t end,
             const struct fs_ring_scan_baselines *tail, struct fs_ring_scan_baselines *base_out,
             char *err, size_t errlen)
{
    struct cands cs = {0};
    struct uncs u = {0};
    struct fs_departures *d = NULL;
    struct fs_ring_scan_baseline *bases = NULL;
    struct scan_part parts[FS_RING_SCAN_THREADS];
    pthread_t tids[FS_RING_SCAN_THREADS];
    size_t n_parts = 0;
    bool ok = true;
    fs_store_foreach_series(st, false, collect_cb, &cs);
    fs_store_foreach_instance(st, unc_cb, &u);
    if (cs.failed || u.failed)
        goto fail;
    if (base_out && !(bases = malloc((cs.n ? cs.n : 1) * sizeof *bases)))
        goto fail;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t threads = cpus > 0 ? (size_t)cpus : 1;
    if (threads > FS_RING_SCAN_THREADS)
        threads = FS_RING_SCAN_THREADS;
    if (threads > cs.n / 16 + 1) /* a handful of series: not worth a thread */
        threads = cs.n / 16 + 1;
    bool started[FS_RING_SCAN_THREADS] = {false};
    for (size_t t = 0; t < threads; t++) {
        parts[t] = (struct scan_part){st,
                                      &cs,
                                      &u,
                                      cs.n * t / threads,
                                      cs.n * (t + 1) / threads,
                                      start,
                                      end,
                                      fs_departures_new(opts, start, end),
                                      -1,
                                      bases,
                                      tail};
        n_parts++;
        if (!parts[t].d) {
            ok = false;
            break;
        }
    }
    if (ok) {
        for (size_t t = 1; t < n_parts; t++)
            started[t] = pthread_create(&tids[t], NULL, scan_part_run, &parts[t]) == 0;
        scan_part_run(&parts[0]);
        for (size_t t = 1; t < n_parts; t++) {
            if (started[t])
                pthread_join(tids[t], NULL);
            else
                scan_part_run(&parts[t]); /* no thread to be had: do it here */
        }
    }
    for (size_t t = 0; t < n_parts; t++)
        ok = ok && parts[t].d && parts[t].rc == 0;
    if (!ok)
        goto fail;
    d = parts[0].d;
    parts[0].d = NULL;
    for (size_t t = 1; t < n_parts; t++)
        if (fs_departures_merge(d, parts[t].d) != 0)
            goto fail;
    if (fs_departures_finish(d) != 0)
        goto fail;
    if (base_out) {
        size_t k = 0;
        for (size_t i = 0; i < cs.n; i++)
            if (bases[i].scale > 0)
                bases[k++] = bases[i];
        qsort(bases, k, sizeof *bases, cmp_base);
        *base_out = (struct fs_ring_scan_baselines){.at_us = end, .b = bases, .n = k};
        bases = NULL;
    }
    for (size_t t = 0; t < n_parts; t++)
        fs_departures_free(parts[t].d);
    free_cands(&cs);
    free_uncs(&u);
    return d;
fail:
    free(bases);
    snprintf(err, errlen, "out of memory");
    for (size_t t = 0; t < n_parts; t++)
        fs_departures_free(parts[t].d);
    fs_departures_free(d);
    free_cands(&cs);
    free_uncs(&u);
    return NULL;
}

void
fs_ring_scan_baselines_clear(struct fs_ring_scan_baselines *bl)
{
    free(bl->b);
    *bl = (struct fs_ring_scan_baselines){0};
}

int
fs_ring_scan_read(struct fs_store *st, int64_t start_us, int64_t end_us, fs_ring_scan_match match,
                  void *match_arg, fs_ring_scan_series_cb cb, void *arg, char *err, size_t errlen)
{
    struct cands cs = {0};
    cs.match = match;
    cs.match_arg = match_arg;
    struct reader r = {0};
    int rc = 0;
    fs_store_foreach_series(st, false, collect_cb, &cs);
    if (cs.failed)
        rc = -1;
    for (size_t i = 0; rc == 0 && i < cs.n; i++) {
        const int64_t *ts;
        const double *v;
        long m = read_series(st, &cs.c[i], start_us, end_us, INT64_MIN, &r, &ts, &v, NULL);
        if (m < 0)
            rc = -1;
        else if (m > 0 && cb(arg, &cs.c[i], ts, v, (size_t)m) != 0)
            break;
    }
    if (rc != 0)
        snprintf(err, errlen, "out of memory");
    free_cands(&cs);
    free_reader(&r);
    return rc;
}
