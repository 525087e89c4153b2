/* Departures from a Prometheus-compatible history: one range query per analysed metric. */
#include "analysis/history_scan.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define US INT64_C(1000000)
#define API_MAX_POINTS_PER_SERIES 11000 /* Prometheus refuses more per series */
#define BASE_SAMPLES 24                 /* samples a baseline window holds at least */

/* Set of 64-bit hashes of the series already read (FNV-1a of the identifying labels). */
struct seen {
    uint64_t *tab;
    size_t cap, n;
};

static uint64_t
fnv(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return (h ^ 0x1f) * 0x100000001b3ULL; /* a separator, so ("ab","c") != ("a","bc") */
}

/* 1 when added, 0 when already there, -1 when out of memory. */
static int
seen_add(struct seen *s, uint64_t h)
{
    if (h == 0)
        h = 1; /* 0 marks an empty slot */
    if ((s->n + 1) * 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        uint64_t *t = calloc(cap, sizeof *t);
        if (!t)
            return -1;
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->tab[i])
                continue;
            size_t k = (size_t)s->tab[i] & (cap - 1);
            while (t[k])
                k = (k + 1) & (cap - 1);
            t[k] = s->tab[i];
        }
        free(s->tab);
        s->tab = t;
        s->cap = cap;
    }
    size_t k = (size_t)h & (s->cap - 1);
    while (s->tab[k]) {
        if (s->tab[k] == h)
            return 0;
        k = (k + 1) & (s->cap - 1);
    }
    s->tab[k] = h;
    s->n++;
    return 1;
}

/* The poll times a scraping TSDB stored beside the values
   (fabricscope_target_last_sample_timestamp_seconds), one entry per stored copy of an
   instance: the scrape times and the time of the poll each scrape showed. */
struct poll_times {
    uint64_t key; /* copy_key() of the gauge's labels */
    int64_t *at;  /* scrape times, ascending */
    int64_t *poll;
    size_t n;
    uint64_t stored, unstored; /* polls this copy holds; polls between them it never got */
};

struct poll_table {
    struct poll_times *e;
    size_t n, cap;
    struct seen targets; /* targets whose poll times were read (fnv of the name) */
};

struct ctx {
    const char *metric;
    enum fs_an_kind kind;
    bool counter;
    double floor;
    struct fs_departures *d;
    struct seen *seen;
    fs_history_is_local is_local;
    void *arg;
    bool only_local;
    int64_t local_before_us, step_us;
    int64_t poll_us;  /* the scraped fabricscope's poll interval (placement) */
    bool rates_given; /* the first reading: counters come as rates already */
    struct fs_history_scan_info *info;
    const struct seen *want;  /* the refinement: only these series (fs_an_series_key hashes) */
    struct poll_table *polls; /* the refinement: poll times of the targets read */
    int64_t *rts, *pts;
    double *rv, *pv;
    size_t rcap;
};

static bool
seen_has(const struct seen *s, uint64_t h)
{
    if (h == 0)
        h = 1;
    if (!s->cap)
        return false;
    for (size_t k = (size_t)h & (s->cap - 1); s->tab[k]; k = (k + 1) & (s->cap - 1))
        if (s->tab[k] == h)
            return true;
    return false;
}

static const char *
lab(const struct fs_prom_series *s, const char *name)
{
    for (size_t i = 0; i < s->n_labels; i++)
        if (strcmp(s->labels[i].name, name) == 0)
            return s->labels[i].value;
    return NULL;
}

/* A label of ours; Prometheus renames it exported_<name> when the scrape set one too. */
static const char *
our(const struct fs_prom_series *s, const char *name)
{
    const char *v = lab(s, name);
    if (!v) {
        char ex[64];
        snprintf(ex, sizeof ex, "exported_%s", name);
        v = lab(s, ex);
    }
    return v ? v : "";
}

/* The labels that tell a target's series apart; the rest (target, source, job, instance,
   external and static labels) say whose series it is and where a copy was stored. */
static bool
is_series_id(const char *name)
{
    static const char *const ids[] = {"interface", "tc", "rule", "direction", "priority", "reason"};
    if (strncmp(name, "exported_", 9) == 0)
        name += 9;
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++)
        if (strcmp(name, ids[i]) == 0)
            return true;
    return false;
}

/* Which stored copy of which instance a series belongs to: its labels but the name and
   the series ids (the server sends labels sorted, so the order is the same). */
static uint64_t
copy_key(const struct fs_prom_series *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < s->n_labels; i++) {
        if (strcmp(s->labels[i].name, "__name__") == 0 || is_series_id(s->labels[i].name))
            continue;
        h = fnv(fnv(h, s->labels[i].name), s->labels[i].value);
    }
    return h;
}

static int
cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The polls a copy stored, and those it never got: a scrape slower than the poll skips
   some (every third at 15 s over 10 s), and a stall inside a skipped poll shows only
   diluted in the next stored increase, its watermark not at all. The poll interval is
   the tenth percentile of the steps between stored polls (a skipped poll doubles a step;
   a stray short one does not set it); a step of more than 5 of them is an outage, not a
   scrape's resolution, and is not counted. */
static void
count_polls(struct poll_times *e)
{
    int64_t *d = malloc((e->n ? e->n : 1) * sizeof *d), last = INT64_MIN;
    size_t nd = 0;
    e->stored = e->unstored = 0;
    for (size_t i = 0; i < e->n; i++) {
        if (e->poll[i] <= last)
            continue;
        if (last != INT64_MIN && d)
            d[nd++] = e->poll[i] - last;
        last = e->poll[i];
        e->stored++;
    }
    if (nd >= 4) { /* the sum over the steps does not care about their order */
        qsort(d, nd, sizeof *d, cmp_i64);
        int64_t p = d[nd / 10];
        for (size_t i = 0; p > 0 && i < nd; i++) {
            int64_t k = (d[i] + p / 2) / p; /* polls this step spans */
            if (k > 1 && k <= 5)
                e->unstored += (uint64_t)(k - 1);
        }
    }
    free(d);
}

static int
poll_times_cb(void *arg, const struct fs_prom_series *s)
{
    struct poll_table *t = arg;
    if (s->n == 0)
        return 0;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        struct poll_times *e = realloc(t->e, cap * sizeof *e);
        if (!e)
            return 1;
        t->e = e;
        t->cap = cap;
    }
    struct poll_times *e = &t->e[t->n];
    *e = (struct poll_times){.key = copy_key(s)};
    e->at = malloc(s->n * sizeof *e->at);
    e->poll = malloc(s->n * sizeof *e->poll);
    if (!e->at || !e->poll) {
        free(e->at);
        free(e->poll);
        return 1;
    }
    for (size_t i = 0; i < s->n; i++) {
        if (!isfinite(s->v[i]) || s->v[i] <= 0 || s->v[i] > 9e12)
            continue; /* not a time: this copy's sample is not used */
        e->at[e->n] = s->ts_us[i];
        e->poll[e->n++] = (int64_t)llround(s->v[i] * 1e6);
    }
    count_polls(e);
    t->n++;
    return 0;
}

static void
poll_table_free(struct poll_table *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->e[i].at);
        free(t->e[i].poll);
    }
    free(t->e);
    free(t->targets.tab);
}

static const struct poll_times *
poll_times_of(const struct poll_table *t, uint64_t key)
{
    for (size_t i = 0; t && i < t->n; i++)
        if (t->e[i].key == key)
            return &t->e[i];
    return NULL;
}

/* The poll a scrape at `at` showed, or 0 when the copy stored no poll time with it. */
static int64_t
poll_at(const struct poll_times *e, int64_t at)
{
    size_t lo = 0, hi = e->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (e->at[mid] < at)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* The same scrape stamps both; a TSDB keeps milliseconds. */
    if (lo < e->n && e->at[lo] - at < 1000)
        return e->poll[lo];
    if (lo > 0 && at - e->at[lo - 1] < 1000)
        return e->poll[lo - 1];
    return 0;
}

enum { STOP_NOMEM = 1 };

static int
series_cb(void *arg_, const struct fs_prom_series *s)
{
    struct ctx *c = arg_;
    const char *target = our(s, "target");
    if (!*target || s->n == 0)
        return 0; /* not one of a switch's series */
    /* The labels that tell our series apart; the rest (job, instance, external labels)
       say where a copy was stored. */
    static const char *const ids[] = {"interface", "tc",     "rule",  "direction",
                                      "priority",  "reason", "source"};
    uint64_t h = fnv(0xcbf29ce484222325ULL, c->metric);
    h = fnv(h, target);
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++)
        h = fnv(h, our(s, ids[i]));
    if (c->want && !seen_has(c->want, fs_an_series_key(c->metric, target, our(s, "interface"),
                                                       our(s, "tc"), our(s, "rule"),
                                                       our(s, "direction"), our(s, "priority"))))
        return 0; /* matched by the refinement's wider selector only */
    int added = seen_add(c->seen, h);
    if (added < 0)
        return STOP_NOMEM;
    if (added == 0) {
        c->info->duplicates++;
        return 0;
    }
    c->info->series++;
    c->info->points += s->n;
    if (!c->info->earliest_us || s->ts_us[0] < c->info->earliest_us)
        c->info->earliest_us = s->ts_us[0];
    size_t n = s->n;
    int64_t poll_us = c->poll_us;
    bool local = c->is_local && c->is_local(c->arg, target, &poll_us);
    if (c->only_local && !local)
        return 0;
    if (local) {
        while (n && s->ts_us[n - 1] >= c->local_before_us)
            n--; /* the instance's own data covers the rest */
        if (n < 3)
            return 0;
    }
    if (n > c->rcap) {
        free(c->rts);
        free(c->rv);
        free(c->pts);
        free(c->pv);
        c->rcap = n;
        c->rts = malloc(n * sizeof *c->rts);
        c->rv = malloc(n * sizeof *c->rv);
        c->pts = malloc(n * sizeof *c->pts);
        c->pv = malloc(n * sizeof *c->pv);
        if (!c->rts || !c->rv || !c->pts || !c->pv) {
            c->rcap = 0;
            return STOP_NOMEM;
        }
    }
    const int64_t *ts = s->ts_us;
    const double *sv = s->v;
    bool scraped = lab(s, "job") || lab(s, "instance");
    /* A scraped copy stored with the poll time of each scrape: each value is placed at its
       poll, a scrape that showed the same poll again is a repeat (left out), and a counter's
       rate is taken between polls, as if remote-written (history_scan.h). */
    const struct poll_times *pt = scraped ? poll_times_of(c->polls, copy_key(s)) : NULL;
    if (pt) {
        size_t k = 0, found = 0;
        int64_t last = INT64_MIN;
        for (size_t i = 0; i < n; i++) {
            int64_t p = poll_at(pt, ts[i]);
            if (!p)
                continue;
            found++;
            if (p <= last)
                continue;
            c->pts[k] = last = p;
            c->pv[k++] = sv[i];
        }
        if (found * 10 >= n * 9) { /* else: too few poll times, placed as before */
            ts = c->pts;
            sv = c->pv;
            n = k;
            scraped = false;
            c->info->restamped++;
            if (n == 0)
                return 0;
        }
    }
    size_t m = 0;
    double abs_floor = c->floor;
    if (c->counter && c->rates_given) {
        for (size_t i = 0; i < n; i++) {
            if (isnan(sv[i]))
                continue;
            c->rts[m] = ts[i];
            c->rv[m++] = sv[i];
        }
    } else if (c->counter) {
        /* Rates between successive points; a decrease (a reset the exporter did not
           absorb) gives no rate, as for the ring's counters. The increases give the
           counter's step (fs_an_step_floor): a fractional one has none. */
        struct fs_an_step step = {0};
        for (size_t i = 1; i < n; i++) {
            int64_t dt = ts[i] - ts[i - 1];
            if (dt <= 0 || isnan(sv[i]) || isnan(sv[i - 1]))
                continue;
            double inc = sv[i] >= sv[i - 1] ? sv[i] - sv[i - 1] : 0.0;
            if (inc > 0)
                fs_an_step_add(&step,
                               inc == floor(inc) && inc < 9007199254740992.0 ? (uint64_t)inc : 1);
            c->rts[m] = ts[i];
            c->rv[m++] = inc * 1e6 / (double)dt;
        }
        abs_floor = fs_an_step_floor(&step, c->floor, ts[0], ts[n - 1], n, 1.0);
    } else {
        for (size_t i = 0; i < n; i++) {
            if (isnan(sv[i]))
                continue;
            c->rts[m] = ts[i];
            c->rv[m++] = sv[i];
        }
    }
    /* Where the information lies (history_scan.h): a value read at a step covers the step
       before it; a scraped sample, up to a poll interval (a watermark two) before its
       stamp. Raw samples of remote_write are where their poll was, within half their
       interval. */
    int64_t shift = c->step_us / 2, unc = c->step_us / 2;
    if (!unc && n > 1)
        unc = (ts[n - 1] - ts[0]) / (int64_t)(n - 1) / 2;
    if (scraped) {
        /* The poll a scrape shows was up to a poll interval before it; a rate (or a
           watermark: the run covers the interval before the sample) is placed half a
           poll earlier, give or take half a poll. */
        shift += poll_us / 2;
        unc += poll_us / 2;
    }
    for (size_t i = 0; i < m && shift; i++)
        c->rts[i] -= shift;
    const char *iface = our(s, "interface"), *tc = our(s, "tc"), *rule = our(s, "rule");
    const char *dir = our(s, "direction"), *prio = our(s, "priority");
    struct fs_an_series a = {
        .target = target,
        .interface = *iface ? iface : NULL,
        .tc = *tc ? tc : NULL,
        .rule = *rule ? rule : NULL,
        .direction = *dir ? dir : NULL,
        .priority = *prio ? prio : NULL,
        .metric = c->metric,
        .kind = c->kind,
        .is_rate = c->counter,
        .ts_us = c->rts,
        .v = c->rv,
        .n = m,
        .abs_floor = abs_floor,
        .time_uncertainty_us = unc,
    };
    return fs_departures_add(c->d, &a) == 0 ? 0 : STOP_NOMEM;
}

/* Series count of the analysed metrics at end_us, to size the step. */
static int
count_cb(void *arg, const struct fs_prom_series *s)
{
    double *n = arg;
    if (s->n == 1 && isfinite(s->v[0]))
        *n += s->v[0];
    return 0;
}

/* Appends v to q as a PromQL string's content; with regex, RE2 metacharacters are
   escaped first (the value is matched literally). */
static size_t
put_quoted(char *q, size_t o, size_t cap, const char *v, bool regex)
{
    for (; *v && o + 4 < cap; v++) {
        if (regex && strchr("\\.+*?()|[]{}^$", *v))
            o += (size_t)snprintf(q + o, cap - o, "\\\\"); /* \\ in PromQL is one \ */
        if (*v == '"' || *v == '\\')
            q[o++] = '\\';
        if (*v == '\n') {
            q[o++] = '\\';
            q[o++] = 'n';
        } else {
            q[o++] = *v;
        }
    }
    q[o < cap ? o : cap - 1] = '\0';
    return o;
}

/* The first reading of metric's series (history_scan.h): a gauge's maximum over each
   step, a counter's largest rate between two stored samples within it (irate at the
   scrape interval's resolution, its window reaching back a whole step so that it always
   holds two samples). */
static void
metric_query(char *q, size_t cap, const char *metric, bool counter, const char *matchers,
             int64_t step, int64_t res)
{
    long long st = (long long)(step / US), rs = (long long)(res / US);
    if (rs < 1)
        rs = 1;
    if (rs > st)
        rs = st;
    if (counter)
        snprintf(q, cap, "max_over_time(irate(%s{%s}[%llds])[%llds:%llds])", metric, matchers,
                 st + rs, st, rs);
    else
        snprintf(q, cap, "max_over_time(%s{%s}[%llds])", metric, matchers, st);
}

static int64_t
step_for(int64_t step_us, uint64_t max_points, int64_t span, double n_series)
{
    int64_t step = step_us > 0 ? step_us : 60 * US;
    int64_t by_budget =
        max_points
            ? (int64_t)ceil((double)span * (n_series > 1 ? n_series : 1) / (double)max_points)
            : 0;
    int64_t by_api = span / (API_MAX_POINTS_PER_SERIES - 10) + 1;
    if (by_budget > step)
        step = by_budget;
    if (by_api > step)
        step = by_api;
    return (step + US - 1) / US * US; /* whole seconds: range selectors want them */
}

/* The analysis' own options at a step: a baseline needs samples, so at a coarse step its
   window widens to hold BASE_SAMPLES of them (at the ring's resolution the configured
   window holds hundreds). */
static struct fs_an_opts
opts_at(const struct fs_an_opts *o, int64_t step)
{
    struct fs_an_opts ho = *o;
    if (ho.baseline_window_us < BASE_SAMPLES * step)
        ho.baseline_window_us = BASE_SAMPLES * step;
    if (ho.baseline_step_us < ho.baseline_window_us)
        ho.baseline_step_us = ho.baseline_window_us;
    return ho;
}

/* One query of a pass, on a connection of its own. Series go to a ctx (a departures
   object) or a poll table of the job's own, joined to the others' in the jobs' order
   afterwards, so the answer is the one the queries would give one after another. */
struct query_job {
    struct ctx cx;                    /* the pass's, with the job's own fields below */
    struct fs_departures *d;          /* owned; empty once merged */
    struct seen seen;                 /* owned */
    struct poll_table polls;          /* owned: a poll-time job's answer */
    bool poll_times;                  /* the job reads poll times into polls */
    struct fs_history_scan_info info; /* the job's counts and error */
    struct fs_prom_client *c;         /* the connection, owned by the caller's client */
    char *q;                          /* owned */
    bool range;                       /* query_range over [from, to] at step, else at `to` */
    int64_t from, to, step;
    uint64_t max_points;
    int rc;
    bool ran;
};

struct job_runner {
    struct query_job *jobs;
    size_t n, first, stride; /* a thread runs jobs first, first + stride, ... */
};

static void *
run_jobs(void *arg)
{
    struct job_runner *r = arg;
    for (size_t i = r->first; i < r->n; i += r->stride) {
        struct query_job *j = &r->jobs[i];
        struct fs_history_scan_info *info = &j->info;
        j->ran = true;
        if (j->range)
            j->rc = fs_prom_query_range(j->c, j->q, j->from, j->to, j->step, j->max_points,
                                        series_cb, &j->cx, info->error, sizeof info->error);
        else if (j->poll_times)
            j->rc = fs_prom_query_instant(j->c, j->q, j->to, j->max_points, poll_times_cb,
                                          &j->polls, info->error, sizeof info->error);
        else
            j->rc = fs_prom_query_instant(j->c, j->q, j->to, j->max_points, series_cb, &j->cx,
                                          info->error, sizeof info->error);
        if (j->rc != 0 && strstr(info->error, "stopped (1)"))
            snprintf(info->error, sizeof info->error, "out of memory");
        /* The job's buffers are done with; the departures stay for the join. */
        free(j->cx.rts);
        free(j->cx.rv);
        free(j->cx.pts);
        free(j->cx.pv);
        j->cx.rts = j->cx.pts = NULL;
        j->cx.rv = j->cx.pv = NULL;
        j->cx.rcap = 0;
        if (j->rc != 0)
            break; /* the jobs after it would be dropped anyway */
    }
    return NULL;
}

struct jobs {
    struct query_job *j;
    size_t n, cap;
};

/* A new job of the pass cx describes, reading into a departures object like cx's (or,
   with poll_times, into a poll table); takes q. NULL with info->error when out of memory. */
static struct query_job *
job_add(struct jobs *js, const struct ctx *cx, char *q, bool poll_times)
{
    if (!q)
        goto nomem;
    if (js->n == js->cap) {
        size_t cap = js->cap ? js->cap * 2 : 16;
        struct query_job *j = realloc(js->j, cap * sizeof *j);
        if (!j)
            goto nomem;
        js->j = j;
        js->cap = cap;
    }
    struct query_job *j = &js->j[js->n];
    *j = (struct query_job){.cx = *cx, .q = q, .poll_times = poll_times};
    j->cx.rts = j->cx.pts = NULL;
    j->cx.rv = j->cx.pv = NULL;
    j->cx.rcap = 0;
    if (!poll_times && !(j->d = fs_departures_new(&cx->d->opts, cx->d->start_us, cx->d->end_us))) {
        q = NULL; /* the job owns it now */
        js->n++;
        goto nomem;
    }
    js->n++;
    return j;
nomem:
    free(q);
    snprintf(cx->info->error, sizeof cx->info->error, "out of memory");
    return NULL;
}

static void
jobs_free(struct jobs *js)
{
    for (size_t i = 0; i < js->n; i++) {
        struct query_job *j = &js->j[i];
        fs_departures_free(j->d);
        free(j->seen.tab);
        poll_table_free(&j->polls);
        free(j->cx.rts);
        free(j->cx.rv);
        free(j->cx.pts);
        free(j->cx.pv);
        free(j->q);
    }
    free(js->j);
    *js = (struct jobs){0};
}

/* Runs the jobs, up to FS_PROM_CONNS at once, each connection on a thread of its own
   (the server answers them in parallel; the first connection on the caller's thread).
   -1 with info->error when no connection could be made; each job's own result is in it. */
static int
jobs_run(struct jobs *js, struct fs_prom_client *c, struct fs_history_scan_info *info)
{
    struct job_runner runners[FS_PROM_CONNS];
    pthread_t tids[FS_PROM_CONNS];
    bool started[FS_PROM_CONNS] = {false};
    struct fs_prom_client *pcs[FS_PROM_CONNS];
    size_t conns = js->n < FS_PROM_CONNS ? js->n : FS_PROM_CONNS;
    for (size_t t = 0; t < conns; t++)
        if (!(pcs[t] = fs_prom_client_conn(c, t, info->error, sizeof info->error))) {
            conns = t; /* fewer connections: the ones made share the jobs */
            break;
        }
    if (js->n && !conns)
        return -1;
    info->error[0] = '\0';
    for (size_t i = 0; i < js->n; i++) {
        struct query_job *j = &js->j[i];
        j->c = pcs[i % conns]; /* thread i % conns runs job i (run_jobs) */
        j->cx.d = j->d;
        j->cx.seen = &j->seen;
        j->cx.info = &j->info;
    }
    for (size_t t = 0; t < conns; t++)
        runners[t] = (struct job_runner){js->j, js->n, t, conns};
    for (size_t t = 1; t < conns; t++)
        started[t] = pthread_create(&tids[t], NULL, run_jobs, &runners[t]) == 0;
    if (conns)
        run_jobs(&runners[0]);
    for (size_t t = 1; t < conns; t++) {
        if (started[t])
            pthread_join(tids[t], NULL);
        else
            run_jobs(&runners[t]); /* no thread to be had: here, after the others */
    }
    return 0;
}

/* Joins the jobs' departures into cx->d and their counts into cx->info, in the jobs'
   order, up to the first that failed (with what it read), as one query after another
   would have left them. 0, or -1 with cx->info->error. */
static int
jobs_join(struct jobs *js, struct ctx *cx)
{
    struct fs_history_scan_info *info = cx->info;
    for (size_t i = 0; i < js->n; i++) {
        struct query_job *j = &js->j[i];
        if (j->d && fs_departures_merge(cx->d, j->d) != 0) {
            snprintf(info->error, sizeof info->error, "out of memory");
            return -1;
        }
        info->series += j->info.series;
        info->duplicates += j->info.duplicates;
        info->points += j->info.points;
        info->restamped += j->info.restamped;
        if (j->info.earliest_us && (!info->earliest_us || j->info.earliest_us < info->earliest_us))
            info->earliest_us = j->info.earliest_us;
        if (!j->ran || j->rc != 0) {
            snprintf(info->error, sizeof info->error, "%s",
                     j->ran ? j->info.error : "not read: an earlier query failed");
            return -1;
        }
    }
    return 0;
}

/* Pass 1: every analysed series at a step the points budget allows, a query per metric,
   run at once (each is a whole pass of the server over its metric's blocks). */
static int
scan_all(struct fs_prom_client *c, uint64_t max_points, int64_t step, int64_t res, int64_t start_us,
         int64_t end_us, struct ctx *cx)
{
    struct jobs js = {0};
    int64_t from = start_us - cx->d->opts.baseline_window_us;
    int rc = -1;
    for (size_t i = 0; fs_an_metric(i); i++) {
        struct ctx m = *cx;
        m.metric = fs_an_metric(i);
        if (!fs_an_classify(m.metric, &m.kind, &m.counter, &m.floor))
            continue;
        struct query_job *j = job_add(&js, &m, malloc(512), false);
        if (!j)
            goto out;
        metric_query(j->q, 512, m.metric, m.counter, "", step, res);
        j->range = true;
        j->from = from;
        j->to = end_us;
        j->step = step;
        j->max_points = max_points;
    }
    if (jobs_run(&js, c, cx->info) != 0)
        goto out;
    rc = jobs_join(&js, cx);
out:
    jobs_free(&js);
    return rc;
}

/* Pass 2: the series that departed in pass 1, read again as the raw samples stored (a
   range-vector selector at the range's end), a query per (metric, target) listing their
   interfaces, after the poll times of their targets (a query per target). Each set of
   queries runs at once: a raw query needs its target's poll times, nothing else. */
#define REFINE_MAX_IFACES 64
static int
scan_departing(struct fs_prom_client *c, uint64_t max_points, int64_t start_us, int64_t end_us,
               const struct fs_departures *coarse, struct ctx *cx)
{
    size_t n = coarse->n_series, qcap = 64 + REFINE_MAX_IFACES * 520;
    char *m = malloc(qcap);
    bool *done = calloc(n ? n : 1, sizeof *done);
    int64_t from = start_us - cx->d->opts.baseline_window_us;
    long long range_s = (long long)((end_us - from + US - 1) / US);
    struct jobs polls = {0}, raws = {0};
    int rc = -1;
    if (!m || !done) {
        snprintf(cx->info->error, sizeof cx->info->error, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (done[i])
            continue;
        const struct fs_an_series_ref *r = &coarse->series[i];
        size_t o = (size_t)snprintf(m, qcap, "target=\"");
        o = put_quoted(m, o, qcap, r->target, false);
        o += (size_t)snprintf(m + o, qcap - o, "\",interface=~\"");
        size_t k = 0;
        for (size_t j = i; j < n && k < REFINE_MAX_IFACES; j++) {
            const struct fs_an_series_ref *x = &coarse->series[j];
            if (done[j] || strcmp(x->metric, r->metric) || strcmp(x->target, r->target))
                continue;
            done[j] = true;
            if (k++)
                m[o++] = '|';
            o = put_quoted(m, o, qcap, x->interface, true);
        }
        snprintf(m + o, qcap - o, "\"");
        struct ctx mc = *cx;
        mc.metric = r->metric;
        if (!fs_an_classify(mc.metric, &mc.kind, &mc.counter, &mc.floor))
            continue;
        int added = seen_add(&cx->polls->targets, fnv(0xcbf29ce484222325ULL, r->target));
        if (added < 0) {
            snprintf(cx->info->error, sizeof cx->info->error, "out of memory");
            goto out;
        }
        struct query_job *j;
        if (added) {
            /* The target's poll times, where a scrape stored them beside the values. */
            char *q = malloc(qcap);
            if (q) {
                o = (size_t)snprintf(q, qcap, "%s{target=\"", FS_HISTORY_POLL_TIME_METRIC);
                o = put_quoted(q, o, qcap, r->target, false);
                snprintf(q + o, qcap - o, "\"}[%llds]", range_s);
            }
            if (!(j = job_add(&polls, cx, q, true)))
                goto out;
            j->to = end_us;
            j->max_points = max_points;
        }
        size_t ql = strlen(mc.metric) + strlen(m) + 32;
        char *q = malloc(ql);
        if (q)
            snprintf(q, ql, "%s{%s}[%llds]", mc.metric, m, range_s);
        if (!(j = job_add(&raws, &mc, q, false)))
            goto out;
        j->to = end_us;
        j->max_points = max_points;
    }
    if (jobs_run(&polls, c, cx->info) != 0)
        goto out;
    for (size_t i = 0; i < polls.n; i++) {
        struct query_job *j = &polls.j[i];
        if (j->rc != 0) {
            snprintf(cx->info->error, sizeof cx->info->error, "%s",
                     j->ran ? j->info.error : "not read: an earlier query failed");
            goto out;
        }
        /* Into the pass's table (a series finds its copy's times by key, whichever
           query brought them). */
        struct poll_table *t = cx->polls;
        if (t->n + j->polls.n > t->cap) {
            size_t cap = t->n + j->polls.n + 16;
            struct poll_times *e = realloc(t->e, cap * sizeof *e);
            if (!e) {
                snprintf(cx->info->error, sizeof cx->info->error, "out of memory");
                goto out;
            }
            t->e = e;
            t->cap = cap;
        }
        for (size_t k = 0; k < j->polls.n; k++) {
            cx->info->polls_stored += j->polls.e[k].stored;
            cx->info->polls_unstored += j->polls.e[k].unstored;
        }
        if (j->polls.n)
            memcpy(t->e + t->n, j->polls.e, j->polls.n * sizeof *t->e);
        t->n += j->polls.n;
        j->polls.n = 0;
    }
    if (jobs_run(&raws, c, cx->info) != 0)
        goto out;
    rc = jobs_join(&raws, cx);
out:
    jobs_free(&polls);
    jobs_free(&raws);
    free(m);
    free(done);
    return rc;
}

int
fs_history_scan(struct fs_prom_client *c, const struct fs_history_read *rd, struct fs_departures *d,
                int64_t start_us, int64_t end_us, fs_history_is_local is_local, void *arg,
                int64_t local_before_us, bool only_local, struct fs_history_scan_info *info)
{
    struct seen seen = {0}, want = {0};
    struct poll_table polls = {0};
    struct fs_departures *h = NULL, *fine = NULL;
    struct ctx cx = {0};
    char q[1500], names[1400];
    int rc = -1;

    *info = (struct fs_history_scan_info){0};
    int64_t span = end_us - (start_us - d->opts.baseline_window_us);
    if (span <= 0) {
        info->step_us = rd->step_us;
        return 0;
    }
    /* How many series: the step follows from it and the points allowed. */
    size_t o = 0;
    names[0] = '\0';
    for (size_t i = 0; fs_an_metric(i); i++)
        o += (size_t)snprintf(names + o, sizeof names - o, "%s%s", i ? "|" : "", fs_an_metric(i));
    snprintf(q, sizeof q, "count({__name__=~\"%s\"})", names);
    double n_series = 0;
    if (fs_prom_query_instant(c, q, end_us, 100, count_cb, &n_series, info->error,
                              sizeof info->error) != 0)
        goto out;
    int64_t step = step_for(rd->step_us, rd->max_points, span, n_series);
    info->step_us = step;
    struct fs_an_opts ho = opts_at(&d->opts, step);
    if (!(h = fs_departures_new(&ho, start_us, end_us))) {
        snprintf(info->error, sizeof info->error, "out of memory");
        goto out;
    }
    cx = (struct ctx){.d = h,
                      .seen = &seen,
                      .is_local = is_local,
                      .arg = arg,
                      .only_local = only_local,
                      .local_before_us = local_before_us,
                      .step_us = step,
                      .poll_us = rd->poll_interval_us,
                      .rates_given = true,
                      .info = info};
    if (scan_all(c, rd->max_points, step, rd->scrape_interval_us, start_us, end_us, &cx) != 0)
        goto out;
    /* The series that departed, read again as stored: their onsets to a sample, not to a
       step (a recurrence is placed by them), and a counter's rate between its real
       samples, never between a step and a stale repeat of the last sample. */
    if (h->n_series) {
        for (size_t i = 0; i < h->n_series; i++) {
            const struct fs_an_series_ref *r = &h->series[i];
            if (seen_add(&want, fs_an_series_key(r->metric, r->target, r->interface, r->tc, r->rule,
                                                 r->direction, r->priority)) < 0) {
                snprintf(info->error, sizeof info->error, "out of memory");
                goto out;
            }
        }
        ho = opts_at(&d->opts, 0);
        if (!(fine = fs_departures_new(&ho, start_us, end_us))) {
            snprintf(info->error, sizeof info->error, "out of memory");
            goto out;
        }
        free(seen.tab);
        seen = (struct seen){0};
        uint64_t series = info->series, dups = info->duplicates;
        cx.d = fine;
        cx.step_us = 0;
        cx.rates_given = false;
        cx.want = &want;
        cx.polls = &polls;
        if (scan_departing(c, rd->max_points, start_us, end_us, h, &cx) != 0)
            goto out;
        fs_departures_free(h);
        h = fine;
        fine = NULL;
        info->series = series; /* the refinement re-read some of them */
        info->duplicates = dups;
        info->refined = h->series_scanned;
    }
    rc = 0;
out:
    if (h && fs_departures_absorb(d, h, INT64_MIN, INT64_MAX) != 0) {
        snprintf(info->error, sizeof info->error, "out of memory");
        rc = -1;
    }
    fs_departures_free(h);
    fs_departures_free(fine);
    free(seen.tab);
    free(want.tab);
    free(cx.rts);
    free(cx.rv);
    free(cx.pts);
    free(cx.pv);
    poll_table_free(&polls);
    return rc;
}
