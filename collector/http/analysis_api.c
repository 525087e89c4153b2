/* The analysis endpoints (see analysis_api.h). */
#include "http/analysis_api.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analysis/correlate.h"
#include "analysis/episode_log.h"
#include "analysis/history_scan.h"
#include "analysis/incidents.h"
#include "analysis/trace.h"
#include "http/api.h"
#include "http/selector.h"
#include "metrics_catalogue.h"
#include "util/clock.h"
#include "util/log.h"

#define US 1000000LL
#define MAX_WINDOWS 1000
#define MAX_MATCH 16
#define MAX_OTHER_EVENTS 20
#define MAX_SAMPLES_PER_SERIES (8u << 20)
#define FS_ANALYSIS_SCAN_THREADS 4
/* Times beyond ±4e15 µs (about 1843..2096) are refused: host events are kept in ns and
   µs * 1000 must not overflow. */
#define MAX_TIME_US 4000000000000000LL

/* A series' baseline handed on by the last full scan (fs_an_trailing_baseline). */
struct an_base {
    uint32_t id, gen; /* the store's series */
    double med, scale;
};

/* What lets a request scan only the samples after the last full scan: each series'
   trailing baseline at its end. The runs before it are in the episode log. */
struct base_cache {
    int64_t at_us;     /* the full scan's end; 0: none */
    struct an_base *b; /* sorted by (id, gen); series without enough samples left out */
    size_t n;
    uint64_t log_evicted; /* the episode log's memory evictions then: one more, and the
                             log no longer holds every run the ring does */
};

struct metric_port {
    char *target, *interface, *tc, *rule, *metric;
    double period_s, spread_s;
    double next_s;
};

struct fs_analysis {
    struct fs_host_events *events;
    pthread_mutex_t rules_lock;
    struct fs_analysis_flow_rule *rules; /* names owned */
    size_t n_rules;
    pthread_mutex_t token_lock;
    char *token;
    pthread_mutex_t run_lock; /* one heavy analysis at a time; guards opts */
    struct fs_analysis_opts opts;
    struct fs_episode_log *log;
    int64_t data_since_us;          /* the oldest sample the ring has shown a refresh (0: none) */
    struct fs_prom_client *history; /* analysis.history, or NULL (under run_lock) */
    int64_t history_step_us;
    uint64_t history_max_points;
    char history_host[128];
    bool log_backfilled;     /* the history was read into the episode log once */
    uint64_t opts_gen;       /* bumped by fs_analysis_set_opts (under run_lock) */
    struct base_cache base;  /* under run_lock */
    int64_t full_scan_at_us; /* the last refresh that scanned the ring's whole span (run_lock) */
    int64_t refresh_scanned_from_us; /* the last refresh's scan (run_lock) */
    bool refresh_full;
    pthread_mutex_t metrics_lock;
    struct metric_port *ports;
    size_t n_ports;
};

/* ---- context ---- */

struct fs_analysis *
fs_analysis_new(const struct fs_host_events_opts *o, char *err, size_t errlen)
{
    struct fs_analysis *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    a->events = fs_host_events_new(o, err, errlen);
    if (!a->events) {
        free(a);
        return NULL;
    }
    fs_analysis_opts_default(&a->opts);
    a->log = fs_episode_log_new(&a->opts.log);
    if (!a->log) {
        fs_host_events_free(a->events);
        free(a);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&a->token_lock, NULL);
    pthread_mutex_init(&a->rules_lock, NULL);
    pthread_mutex_init(&a->run_lock, NULL);
    pthread_mutex_init(&a->metrics_lock, NULL);
    return a;
}

static void
free_ports(struct metric_port *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(p[i].target);
        free(p[i].interface);
        free(p[i].tc);
        free(p[i].rule);
        free(p[i].metric);
    }
    free(p);
}

void
fs_analysis_free(struct fs_analysis *a)
{
    if (!a)
        return;
    fs_host_events_free(a->events);
    fs_episode_log_free(a->log);
    fs_prom_client_free(a->history);
    if (a->token) {
        memset(a->token, 0, strlen(a->token));
        free(a->token);
    }
    free_ports(a->ports, a->n_ports);
    free(a->base.b);
    for (size_t i = 0; i < a->n_rules; i++)
        free((char *)a->rules[i].name);
    free(a->rules);
    pthread_mutex_destroy(&a->rules_lock);
    pthread_mutex_destroy(&a->token_lock);
    pthread_mutex_destroy(&a->run_lock);
    pthread_mutex_destroy(&a->metrics_lock);
    free(a);
}

int
fs_analysis_set_history(struct fs_analysis *a, const struct fs_history_cfg *cfg, char *err,
                        size_t errlen)
{
    struct fs_prom_client *c = NULL;
    if (cfg && !(c = fs_prom_client_new(cfg, err, errlen)))
        return -1;
    pthread_mutex_lock(&a->run_lock);
    struct fs_prom_client *old = a->history;
    a->history = c;
    a->history_host[0] = '\0';
    if (cfg) {
        a->history_step_us = cfg->step_us;
        a->history_max_points = cfg->max_points;
        const char *h = strstr(cfg->url, "://");
        h = h ? h + 3 : cfg->url;
        snprintf(a->history_host, sizeof a->history_host, "%.*s", (int)strcspn(h, "/?#"), h);
    }
    pthread_mutex_unlock(&a->run_lock);
    fs_prom_client_free(old);
    return 0;
}

void
fs_analysis_opts_default(struct fs_analysis_opts *o)
{
    fs_an_opts_default(&o->an);
    o->horizon_us = 24 * 3600 * US;
    o->log.retention_us = 7 * 24 * 3600 * US;
    o->log.memory_limit = UINT64_C(64) << 20;
    o->log.merge_gap_us = o->an.merge_gap_us;
}

void
fs_analysis_set_opts(struct fs_analysis *a, const struct fs_analysis_opts *o)
{
    pthread_mutex_lock(&a->run_lock);
    a->opts = *o;
    a->opts.log.merge_gap_us = o->an.merge_gap_us;
    fs_episode_log_set_opts(a->log, &a->opts.log);
    a->opts_gen++;
    /* Baselines of other thresholds and windows: the next refresh makes new ones. */
    free(a->base.b);
    a->base = (struct base_cache){0};
    pthread_mutex_unlock(&a->run_lock);
}

struct fs_episode_log *
fs_analysis_episode_log(struct fs_analysis *a)
{
    return a->log;
}

struct fs_host_events *
fs_analysis_host_events(struct fs_analysis *a)
{
    return a->events;
}

int
fs_analysis_set_token(struct fs_analysis *a, const char *token)
{
    char *copy = NULL;
    if (token && *token && !(copy = strdup(token)))
        return -1;
    pthread_mutex_lock(&a->token_lock);
    char *old = a->token;
    a->token = copy;
    pthread_mutex_unlock(&a->token_lock);
    if (old) {
        memset(old, 0, strlen(old));
        free(old);
    }
    return 0;
}

int
fs_analysis_set_flow_rules(struct fs_analysis *a, const struct fs_analysis_flow_rule *rules,
                           size_t n)
{
    struct fs_analysis_flow_rule *copy = calloc(n ? n : 1, sizeof *copy);
    if (!copy)
        return -1;
    for (size_t i = 0; i < n; i++) {
        copy[i] = rules[i];
        copy[i].name = strdup(rules[i].name ? rules[i].name : "");
        if (!copy[i].name) {
            for (size_t k = 0; k < i; k++)
                free((char *)copy[k].name);
            free(copy);
            return -1;
        }
    }
    pthread_mutex_lock(&a->rules_lock);
    struct fs_analysis_flow_rule *old = a->rules;
    size_t old_n = a->n_rules;
    a->rules = copy;
    a->n_rules = n;
    pthread_mutex_unlock(&a->rules_lock);
    for (size_t i = 0; i < old_n; i++)
        free((char *)old[i].name);
    free(old);
    return 0;
}

/* ---- helpers ---- */

static int error_doc(struct fs_buf *out, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
error_doc(struct fs_buf *out, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fs_buf_reset(out);
    fs_buf_puts(out, "{\"status\":\"error\",\"error\":");
    fs_buf_json_str(out, msg);
    fs_buf_puts(out, "}");
    return status;
}

static int
overflow_doc(struct fs_buf *out)
{
    out->overflow = false;
    return error_doc(out, 413, "the answer is larger than the response limit; narrow the range");
}

static const char *
arg(const struct fs_analysis_arg *args, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(args[i].key, key) == 0)
            return args[i].value ? args[i].value : "";
    return NULL;
}

static bool
arg_known(const char *key, const char *const *known)
{
    for (size_t i = 0; known[i]; i++)
        if (strcmp(key, known[i]) == 0)
            return true;
    return false;
}

/* Unknown parameters are errors (a typo must not silently change the answer). */
static int
check_args(const struct fs_analysis_arg *args, size_t n, const char *const *known, const char *rep,
           struct fs_buf *out)
{
    for (size_t i = 0; i < n; i++) {
        if (!arg_known(args[i].key, known))
            return error_doc(out, 400, "unknown parameter \"%.64s\"", args[i].key);
        if (rep && strcmp(args[i].key, rep) == 0)
            continue;
        for (size_t j = 0; j < i; j++)
            if (strcmp(args[i].key, args[j].key) == 0)
                return error_doc(out, 400, "parameter \"%.64s\" given twice", args[i].key);
    }
    return 0;
}

static int
parse_range(const struct fs_analysis_arg *args, size_t n, int64_t now_us, int64_t dflt_us,
            int64_t max_us, int64_t *start, int64_t *end, struct fs_buf *out)
{
    const char *s = arg(args, n, "start"), *e = arg(args, n, "end");
    *end = now_us;
    if (e && fs_api_parse_time(e, end) != 0)
        return error_doc(out, 400, "end: cannot parse \"%.64s\" as unix seconds or RFC 3339", e);
    *start = *end - dflt_us;
    if (s && fs_api_parse_time(s, start) != 0)
        return error_doc(out, 400, "start: cannot parse \"%.64s\" as unix seconds or RFC 3339", s);
    if (*start < -MAX_TIME_US || *end > MAX_TIME_US)
        return error_doc(out, 400, "start/end: outside 1843..2096");
    if (*start > *end)
        return error_doc(out, 400, "start is after end");
    if (*end - *start > max_us)
        return error_doc(out, 400, "the range is longer than %lld s", (long long)(max_us / US));
    return 0;
}

static void
put_time(struct fs_buf *b, int64_t us)
{
    int64_t s = us / US, f = us % US;
    if (f < 0) {
        s--;
        f += US;
    }
    fs_buf_printf(b, "%" PRId64 ".%06" PRId64, s, f);
}

static void
put_num(struct fs_buf *b, double v)
{
    if (!isfinite(v))
        fs_buf_puts(b, "null");
    else
        fs_buf_printf(b, "%.6g", v);
}

/* ---- store feeding ---- */

struct cand {
    uint32_t id, gen; /* the (id, generation) pair fs_store_read() takes */
    char *target, *interface, *tc, *rule, *metric, *source, *direction, *priority;
    enum fs_an_kind kind;
    bool counter;
    double scale, floor;
};

/* The candidates' strings: copied into large blocks rather than one allocation each
   (six per series, 100,000 series a request). */
struct str_block {
    struct str_block *next;
    size_t used, cap;
    char data[];
};

struct cands {
    struct cand *c;
    size_t n, cap;
    struct str_block *blocks;   /* owned; the newest first */
    enum fs_metric last_metric; /* fs_an_classify of the previous series' metric */
    bool have_last, last_classified, last_counter;
    enum fs_an_kind last_kind;
    double last_floor;
    bool failed;
    struct fs_selector **sel; /* when set: any matching series, else the classified ones */
    size_t n_sel;
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
static char *
cands_dup(struct cands *cs, char *same, const char *v)
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
    if (cs->n_sel) {
        bool any = false;
        for (size_t i = 0; i < cs->n_sel && !any; i++)
            any = fs_selector_match(cs->sel[i], s->name, s->labels, s->n_labels);
        if (!any)
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
    struct cand *c = &cs->c[cs->n++];
    c->id = s->id;
    c->gen = s->gen;
    const struct cand *prev = cs->n > 1 ? &cs->c[cs->n - 2] : NULL;
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
read_series(struct fs_store *st, const struct cand *c, int64_t from, int64_t to, int64_t keep_from,
            struct reader *r, const int64_t **ts_out, const double **v_out, double *floor_out)
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
    struct an_base *base_out;      /* [cs index]: each series' trailing baseline at end */
    const struct base_cache *tail; /* scan only after tail->at_us with its baselines */
};

static int
cmp_base(const void *a_, const void *b_)
{
    const struct an_base *a = a_, *b = b_;
    if (a->id != b->id)
        return a->id < b->id ? -1 : 1;
    return a->gen < b->gen ? -1 : a->gen > b->gen;
}

static const struct an_base *
find_base(const struct base_cache *bc, uint32_t id, uint32_t gen)
{
    struct an_base key = {.id = id, .gen = gen};
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
    const struct cand *last = NULL;
    int64_t unc = 0;
    p->rc = 0;
    for (size_t i = p->from; i < p->to && p->rc == 0; i++) {
        const struct cand *c = &p->cs->c[i];
        const int64_t *ts;
        const double *v;
        double floor = c->floor;
        const struct an_base *fixed = p->tail ? find_base(p->tail, c->id, c->gen) : NULL;
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
            struct an_base *b = &p->base_out[i];
            *b = (struct an_base){c->id, c->gen, 0, 0};
            if (!fs_an_trailing_baseline(&s, p->end, &p->d->opts, &b->med, &b->scale))
                b->scale = 0;
        }
    }
    free_reader(&r);
    return NULL;
}

/*
 * Scans every analysed series of [start, end] (with baseline history before start), on
 * up to FS_ANALYSIS_SCAN_THREADS threads: series are independent and the store allows
 * concurrent readers. The parts are joined in order, so the result does not depend on
 * the number of threads.
 */
static struct fs_departures *
scan_store(struct fs_store *st, const struct fs_an_opts *opts, int64_t start, int64_t end,
           const struct base_cache *tail, struct base_cache *base_out, char *err, size_t errlen)
{
    struct cands cs = {0};
    struct uncs u = {0};
    struct fs_departures *d = NULL;
    struct an_base *bases = NULL;
    struct scan_part parts[FS_ANALYSIS_SCAN_THREADS];
    pthread_t tids[FS_ANALYSIS_SCAN_THREADS];
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
    if (threads > FS_ANALYSIS_SCAN_THREADS)
        threads = FS_ANALYSIS_SCAN_THREADS;
    if (threads > cs.n / 16 + 1) /* a handful of series: not worth a thread */
        threads = cs.n / 16 + 1;
    bool started[FS_ANALYSIS_SCAN_THREADS] = {false};
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
        *base_out = (struct base_cache){.at_us = end, .b = bases, .n = k};
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

static void
put_series_ref(struct fs_buf *b, const struct fs_an_series_ref *s)
{
    fs_buf_puts(b, "\"target\":");
    fs_buf_json_str(b, s->target);
    fs_buf_puts(b, ",\"interface\":");
    fs_buf_json_str(b, s->interface);
    fs_buf_puts(b, ",\"tc\":");
    fs_buf_json_str(b, s->tc);
    fs_buf_puts(b, ",\"rule\":");
    fs_buf_json_str(b, s->rule);
    fs_buf_puts(b, ",\"metric\":");
    fs_buf_json_str(b, s->metric);
    /* Only where the series has them (pause frames: sent or received, per priority). */
    if (s->direction[0]) {
        fs_buf_puts(b, ",\"direction\":");
        fs_buf_json_str(b, s->direction);
    }
    if (s->priority[0]) {
        fs_buf_puts(b, ",\"priority\":");
        fs_buf_json_str(b, s->priority);
    }
    fs_buf_printf(b, ",\"kind\":\"%s\"", fs_an_kind_name(s->kind));
}

/* "tor1 Eth1/49 tc3", "tor1 Eth1/49 rx priority 3" */
static void
port_text(char *out, size_t len, const struct fs_an_series_ref *s)
{
    snprintf(out, len, "%s%s%s%s%s%s%s%s%s%s%s", s->target, s->interface[0] ? " " : "",
             s->interface, s->tc[0] ? " tc" : "", s->tc, s->rule[0] ? " rule " : "", s->rule,
             s->direction[0] ? " " : "", s->direction, s->priority[0] ? " priority " : "",
             s->priority);
}

/* What explains an effect-kind departure (correlate.h). */
static const char *
effect_phrase(const struct fs_an_series_ref *s)
{
    if (s->kind != FS_AN_PFC)
        return "its port was paused by its link partner";
    if (strcmp(s->direction, "tx") == 0)
        return "pauses sent while a port of its switch congested";
    return "pauses received while another switch congested";
}

/* ,"group":{"members":[{"interface":...,"metric":...,"share":...},...]} */
static void
put_group(struct fs_buf *b, const struct fs_departures *d, const struct fs_corr_group *g)
{
    fs_buf_puts(b, ",\"group\":{\"members\":[");
    for (size_t k = 0; k < g->n; k++) {
        const struct fs_an_series_ref *m = &d->series[g->series[k]];
        fs_buf_puts(b, k ? ",{\"interface\":" : "{\"interface\":");
        fs_buf_json_str(b, m->interface);
        fs_buf_printf(b, ",\"share\":%.4f}", g->share[k]);
    }
    fs_buf_puts(b, "]}");
}

/* "; ports departing together: Eth1/21 27%, Eth1/22 25%, ..." into text; the length. */
static int
put_group_text(char *text, size_t len, const struct fs_departures *d, const struct fs_corr_group *g)
{
    int o = snprintf(text, len, "; ports departing together:");
    for (size_t k = 0; k < g->n && o > 0 && (size_t)o < len; k++)
        o += snprintf(text + o, len - (size_t)o, "%s %s %.0f%%", k ? "," : "",
                      d->series[g->series[k]].interface, 100 * g->share[k]);
    return o > 0 && (size_t)o < len ? o : (int)len - 1;
}

static void
put_kinds(struct fs_buf *b, unsigned kinds)
{
    fs_buf_puts(b, "[");
    bool first = true;
    for (int k = 0; k < FS_AN_KIND_COUNT; k++)
        if (kinds & (1u << k)) {
            fs_buf_printf(b, "%s\"%s\"", first ? "" : ",", fs_an_kind_name((enum fs_an_kind)k));
            first = false;
        }
    fs_buf_puts(b, "]");
}

/* ---- POST /api/v1/host-events and GET /api/v1/time ---- */

/* Constant-time comparison: the token must not leak through timing. */
static bool
token_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = (unsigned char)(la != lb);
    for (size_t i = 0; i < la; i++)
        diff |= (unsigned char)(a[i] ^ b[i < lb ? i : 0]);
    return diff == 0;
}

int
fs_analysis_authorize_post(struct fs_analysis *a, const char *authorization, struct fs_buf *out)
{
    pthread_mutex_lock(&a->token_lock);
    bool configured = a->token != NULL;
    bool ok = false;
    if (configured && authorization && strncmp(authorization, "Bearer ", 7) == 0) {
        const char *t = authorization + 7;
        while (*t == ' ')
            t++;
        ok = token_equal(t, a->token);
    }
    pthread_mutex_unlock(&a->token_lock);
    if (!configured)
        return error_doc(out, 403,
                         "posting host events is disabled: no bearer token is configured "
                         "(host_events: { bearer_token_file: ... })");
    if (!ok)
        return error_doc(out, 401, "missing or wrong bearer token");
    return 0;
}

int
fs_analysis_post_host_events(struct fs_analysis *a, const char *authorization, const char *body,
                             size_t len, int64_t now_us, struct fs_buf *out)
{
    int auth = fs_analysis_authorize_post(a, authorization, out);
    if (auth)
        return auth;
    char err[256];
    struct fs_host_events_receipt r;
    int rc = fs_host_events_post(a->events, body, len, now_us * 1000, &r, err, sizeof err);
    if (rc != 0)
        return error_doc(out, rc, "%s", err);
    fs_buf_reset(out);
    fs_buf_printf(out,
                  "{\"status\":\"success\",\"data\":{\"stored\":%zu,\"duplicates\":%zu,"
                  "\"post_id\":%" PRIu64 ",\"oldest_post_id\":%" PRIu64
                  ",\"evicted_memory_total\":%" PRIu64 "}}",
                  r.stored, r.duplicates, r.post_id, r.oldest_post_id, r.evicted_memory_total);
    return 200;
}

int
fs_analysis_device_event(void *arg, const struct fs_device_event *e)
{
    struct fs_analysis *a = arg;
    struct fs_buf b;
    fs_buf_init(&b, 64 << 10);
    fs_buf_printf(&b,
                  "{\"host_offset_ns\":%" PRId64 ",\"host_offset_uncertainty_ns\":%" PRId64
                  ",\"events\":[{\"host\":",
                  e->clock_offset_us * 1000, e->clock_uncertainty_us * 1000);
    fs_buf_json_str(&b, e->target);
    fs_buf_puts(&b, ",\"kind\":");
    fs_buf_json_str(&b, e->kind);
    fs_buf_puts(&b, ",\"name\":");
    fs_buf_json_str(&b, e->name);
    fs_buf_printf(&b, ",\"start\":%" PRId64, e->device_start_us * 1000);
    if (e->device_end_us != e->device_start_us)
        fs_buf_printf(&b, ",\"end\":%" PRId64, e->device_end_us * 1000);
    fs_buf_puts(&b, ",\"attrs\":{\"source\":");
    fs_buf_json_str(&b, e->source ? e->source : "");
    for (size_t i = 0; i < e->n_attrs && i + 1 < FS_HOST_EVENTS_MAX_ATTRS; i++) {
        fs_buf_puts(&b, ",");
        fs_buf_json_str(&b, e->attrs[i].name);
        fs_buf_puts(&b, ":");
        fs_buf_json_str(&b, e->attrs[i].value);
    }
    fs_buf_puts(&b, "}}]}");
    int rc = -1;
    if (!b.overflow) {
        char err[256];
        struct fs_host_events_receipt r;
        rc = fs_host_events_post(a->events, b.data, b.len, fs_realtime_us() * 1000, &r, err,
                                 sizeof err) == 0
                 ? 0
                 : -1;
    }
    fs_buf_free(&b);
    return rc;
}

int
fs_analysis_time(int64_t receive_ns, struct fs_buf *out)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t send_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    fs_buf_reset(out);
    fs_buf_printf(out, "{\"receive_ns\":%" PRId64 ",\"send_ns\":%" PRId64 "}", receive_ns, send_ns);
    return 200;
}

/* ---- GET /api/v1/correlate ---- */

struct ev_copy {
    char *host, *kind, *name;
    int64_t start_ns, end_ns, off_ns, unc_ns;
    size_t group;
};

struct ev_list {
    struct ev_copy *e;
    size_t n, cap;
    bool failed;
    const char *name; /* filter */
    bool dump_time;   /* keep events placed at their dump time (placement=dump_time) */
    size_t left_out;  /* events left out for that */
    /* (kind, name) groups for the percentile */
    char **gkeys;
    size_t n_groups;
};

/* An NCCL Inspector record without a trace is placed so that it ends at the time its
   log was dumped: its duration is right, its place in time only roughly. */
static bool
placed_at_dump_time(const struct fs_host_event *e)
{
    for (uint32_t i = 0; i < e->n_attrs; i++)
        if (!strcmp(e->attrs[i].key, "placement") && !strcmp(e->attrs[i].value, "dump_time"))
            return true;
    return false;
}

static int
copy_ev_cb(void *arg_, const struct fs_host_event *e)
{
    struct ev_list *l = arg_;
    if (e->end_ns <= e->start_ns) /* instants have no duration to be slow */
        return 0;
    if (l->name && strcmp(e->name, l->name) != 0)
        return 0;
    if (!l->dump_time && placed_at_dump_time(e)) {
        l->left_out++;
        return 0;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 1024;
        void *p = realloc(l->e, cap * sizeof *l->e);
        if (!p) {
            l->failed = true;
            return 1;
        }
        l->e = p;
        l->cap = cap;
    }
    struct ev_copy *c = &l->e[l->n];
    c->host = strdup(e->host);
    c->kind = strdup(e->kind);
    c->name = strdup(e->name);
    c->start_ns = e->start_ns;
    c->end_ns = e->end_ns;
    c->off_ns = e->host_offset_ns;
    c->unc_ns = e->host_offset_uncertainty_ns;
    l->n++;
    if (!c->host || !c->kind || !c->name) {
        l->failed = true;
        return 1;
    }
    /* Group id by (kind, name): linear over the distinct pairs, which are few. */
    size_t g;
    for (g = 0; g < l->n_groups; g++)
        if (strcmp(l->gkeys[2 * g], e->kind) == 0 && strcmp(l->gkeys[2 * g + 1], e->name) == 0)
            break;
    if (g == l->n_groups) {
        void *p = realloc(l->gkeys, (l->n_groups + 1) * 2 * sizeof *l->gkeys);
        if (!p) {
            l->failed = true;
            return 1;
        }
        l->gkeys = p;
        l->gkeys[2 * g] = c->kind;
        l->gkeys[2 * g + 1] = c->name;
        l->n_groups++;
    }
    c->group = g;
    return 0;
}

static void
free_ev_list(struct ev_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->e[i].host);
        free(l->e[i].kind);
        free(l->e[i].name);
    }
    free(l->e);
    free(l->gkeys);
}

struct other_ctx {
    struct fs_buf *out;
    const char *kind;
    size_t n;
    const struct fs_analysis_flow_rule *rules; /* under rules_lock */
    size_t n_rules;
};

static bool
in_range(long v, uint16_t lo, uint16_t hi)
{
    return (lo == 0 && hi == 0) || (v >= lo && v <= hi);
}

/* The flow rules an event with sport/dport attrs falls under (protocol from its kind). */
static void
put_flow_rules(struct fs_buf *b, const struct other_ctx *o, const struct fs_host_event *e)
{
    long sport = -1, dport = -1;
    for (uint32_t i = 0; i < e->n_attrs; i++) {
        if (strcmp(e->attrs[i].key, "sport") == 0)
            sport = strtol(e->attrs[i].value, NULL, 10);
        else if (strcmp(e->attrs[i].key, "dport") == 0)
            dport = strtol(e->attrs[i].value, NULL, 10);
    }
    if (sport < 0 && dport < 0)
        return;
    int proto = strstr(e->kind, "tcp") ? 1 : strstr(e->kind, "udp") ? 2 : 0;
    fs_buf_puts(b, ",\"flow_rules\":[");
    bool first = true;
    for (size_t r = 0; r < o->n_rules; r++) {
        const struct fs_analysis_flow_rule *fr = &o->rules[r];
        if (fr->protocol != 0 && fr->protocol != proto)
            continue;
        if (!in_range(sport, fr->src_lo, fr->src_hi) || !in_range(dport, fr->dst_lo, fr->dst_hi))
            continue;
        if (!first)
            fs_buf_puts(b, ",");
        fs_buf_json_str(b, fr->name);
        first = false;
    }
    fs_buf_puts(b, "]");
}

static int
other_cb(void *arg_, const struct fs_host_event *e)
{
    struct other_ctx *o = arg_;
    if (fs_host_event_kind_matches(e->kind, o->kind))
        return 0;
    if (o->n++ >= MAX_OTHER_EVENTS)
        return 0;
    struct fs_buf *b = o->out;
    fs_buf_puts(b, o->n > 1 ? ",{\"host\":" : "{\"host\":");
    fs_buf_json_str(b, e->host);
    fs_buf_puts(b, ",\"kind\":");
    fs_buf_json_str(b, e->kind);
    fs_buf_puts(b, ",\"name\":");
    fs_buf_json_str(b, e->name);
    fs_buf_puts(b, ",\"start\":");
    put_time(b, e->start_ns / 1000);
    fs_buf_puts(b, ",\"end\":");
    put_time(b, e->end_ns / 1000);
    fs_buf_puts(b, ",\"attrs\":{");
    for (uint32_t i = 0; i < e->n_attrs; i++) {
        if (i)
            fs_buf_puts(b, ",");
        fs_buf_json_str(b, e->attrs[i].key);
        fs_buf_puts(b, ":");
        if (e->attrs[i].is_string)
            fs_buf_json_str(b, e->attrs[i].value);
        else
            fs_buf_puts(b, e->attrs[i].value);
    }
    fs_buf_puts(b, "}");
    put_flow_rules(b, o, e);
    fs_buf_puts(b, "}");
    return 0;
}

static int
cmp_i64_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x > y ? -1 : x < y;
}

static int
parse_slow(const char *s, double *pct, double *factor)
{
    char *end;
    *pct = 0;
    *factor = 0;
    if (s[0] == 'p') {
        *pct = strtod(s + 1, &end);
        return (*end == '\0' && *pct > 0 && *pct < 100) ? 0 : -1;
    }
    *factor = strtod(s, &end);
    return (end != s && end[0] == 'x' && end[1] == '\0' && *factor > 0) ? 0 : -1;
}

/* What the history added to an answer (used: it was asked). */
struct hist_use {
    bool used;
    struct fs_history_scan_info info;
};
/* The clocks behind an answer's times: every source of each target the answer names,
 * with its measured offset and what its bounds rest on (an assumed delivery delay is
 * stated, not hidden in the error bar). */
struct clocks_ctx {
    struct fs_buf *out;
    const char **targets;
    size_t n_targets;
    size_t n;
};

static int
clocks_cb(void *arg_, const struct fs_instance_info *in)
{
    struct clocks_ctx *c = arg_;
    size_t i = 0;
    while (i < c->n_targets && strcmp(c->targets[i], in->target) != 0)
        i++;
    if (i == c->n_targets)
        return 0;
    fs_buf_puts(c->out, c->n++ ? ",{\"target\":" : "{\"target\":");
    fs_buf_json_str(c->out, in->target);
    fs_buf_puts(c->out, ",\"source\":");
    fs_buf_json_str(c->out, in->source ? in->source : "");
    if (in->clock_known) {
        fs_buf_printf(c->out, ",\"offset_ms\":%.3f,\"uncertainty_ms\":%.3f,\"basis\":",
                      in->clock_offset_seconds * 1e3, in->clock_uncertainty_seconds * 1e3);
        fs_buf_json_str(c->out, in->clock_basis && *in->clock_basis
                                    ? in->clock_basis
                                    : "bounds reported by the driver");
    } else {
        fs_buf_printf(c->out, ",\"offset_ms\":null,\"uncertainty_ms\":%.3f,\"basis\":",
                      (double)in->last_duration_us / 2e3);
        fs_buf_json_str(c->out, "no device clock measured: samples placed within half a poll");
    }
    fs_buf_puts(c->out, "}");
    return 0;
}

static void
put_clocks(struct fs_buf *out, struct fs_store *st, const char **targets, size_t n)
{
    struct clocks_ctx c = {out, targets, n, 0};
    fs_buf_puts(out, ",\"clocks\":[");
    if (st)
        fs_store_foreach_instance(st, clocks_cb, &c);
    fs_buf_puts(out, "]");
}

/* Adds t to the set (by pointer text); false when the set is full. */
static void
target_set_add(const char **set, size_t *n, size_t cap, const char *t)
{
    if (!t || !*t)
        return;
    for (size_t i = 0; i < *n; i++)
        if (strcmp(set[i], t) == 0)
            return;
    if (*n < cap)
        set[(*n)++] = t;
}

static struct fs_departures *departures_with_log(struct fs_analysis *a, struct fs_store *st,
                                                 int64_t start, int64_t end, bool record,
                                                 struct hist_use *hu, int64_t now_us,
                                                 struct fs_departures *prescanned, char *err,
                                                 size_t errlen);
static void put_history(struct fs_buf *out, const struct fs_analysis *a, const struct hist_use *hu);

/* kind= (default nccl) and slow= (default p99) of /correlate and /incidents: 0, or the
   400 written to out. */
static int
parse_slow_args(const struct fs_analysis_arg *args, size_t n, const char **kind, const char **slow,
                double *pct, double *factor, struct fs_buf *out)
{
    *kind = arg(args, n, "kind");
    if (!*kind || !**kind)
        *kind = "nccl";
    *slow = arg(args, n, "slow");
    if (!*slow)
        *slow = "p99";
    if (parse_slow(*slow, pct, factor) != 0)
        return error_doc(out, 400, "slow: want pNN (0 < NN < 100) or Nx (N > 0), not \"%.32s\"",
                         *slow);
    return 0;
}

int
fs_analysis_correlate(struct fs_analysis *a, struct fs_store *st,
                      const struct fs_analysis_arg *args, size_t n, int64_t now_us,
                      struct fs_buf *out)
{
    static const char *const known[] = {"start",  "end", "kind",  "name",      "slow",
                                        "window", "top", "limit", "dump_time", NULL};
    int rc = check_args(args, n, known, "window", out);
    if (rc)
        return rc;
    int64_t start, end;
    if ((rc = parse_range(args, n, now_us, 15 * 60 * US, 24 * 3600 * US, &start, &end, out)))
        return rc;
    const char *kind, *slow;
    double pct, factor;
    if ((rc = parse_slow_args(args, n, &kind, &slow, &pct, &factor, out)))
        return rc;
    struct fs_corr_opts co;
    fs_corr_opts_default(&co);
    const char *top = arg(args, n, "top");
    if (top) {
        char *e;
        long t = strtol(top, &e, 10);
        if (*e || t < 1 || t > FS_CORR_TOP)
            return error_doc(out, 400, "top: want 1..%d", FS_CORR_TOP);
        co.top = (size_t)t;
    }
    size_t limit = 200;
    const char *lim = arg(args, n, "limit");
    if (lim) {
        char *e;
        long l = strtol(lim, &e, 10);
        if (*e || l < 0 || l > 100000)
            return error_doc(out, 400, "limit: want 0..100000");
        limit = (size_t)l;
    }
    /* Explicit windows, or the slow host events of the range. */
    struct fs_corr_window *w = malloc(MAX_WINDOWS * sizeof *w);
    struct ev_list evs = {0};
    evs.name = arg(args, n, "name");
    const char *dt = arg(args, n, "dump_time");
    if (dt && strcmp(dt, "include") != 0 && strcmp(dt, "exclude") != 0) {
        free(w);
        return error_doc(out, 400, "dump_time: want include or exclude");
    }
    evs.dump_time = dt && !strcmp(dt, "include");
    size_t nw = 0, considered = 0;
    bool explicit = false;
    if (!w)
        return error_doc(out, 500, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (strcmp(args[i].key, "window") != 0)
            continue;
        explicit = true;
        const char *v = args[i].value ? args[i].value : "";
        const char *comma = strchr(v, ',');
        char s1[64], s2[64];
        int64_t ws, we;
        if (!comma || (size_t)(comma - v) >= sizeof s1 || strlen(comma + 1) >= sizeof s2) {
            free(w);
            return error_doc(out, 400, "window: want START,END");
        }
        memcpy(s1, v, (size_t)(comma - v));
        s1[comma - v] = '\0';
        snprintf(s2, sizeof s2, "%s", comma + 1);
        if (fs_api_parse_time(s1, &ws) != 0 || fs_api_parse_time(s2, &we) != 0 || ws > we ||
            ws < -MAX_TIME_US || we > MAX_TIME_US) {
            free(w);
            return error_doc(out, 400, "window \"%.64s\": want START,END with START <= END", v);
        }
        if (nw == MAX_WINDOWS) {
            free(w);
            return error_doc(out, 400, "more than %d windows", MAX_WINDOWS);
        }
        w[nw] = (struct fs_corr_window){ws, we, 0, nw};
        nw++;
        if (ws < start)
            start = ws;
        if (we > end)
            end = we;
    }
    if (!explicit) {
        fs_host_events_foreach(a->events, start * 1000, end * 1000, kind, copy_ev_cb, &evs);
        if (evs.failed) {
            free_ev_list(&evs);
            free(w);
            return error_doc(out, 500, "out of memory");
        }
        considered = evs.n;
        int64_t *dur = malloc((evs.n ? evs.n : 1) * sizeof *dur);
        size_t *grp = malloc((evs.n ? evs.n : 1) * sizeof *grp);
        bool *is_slow = malloc((evs.n ? evs.n : 1) * sizeof *is_slow);
        if (!dur || !grp || !is_slow) {
            free(dur);
            free(grp);
            free(is_slow);
            free_ev_list(&evs);
            free(w);
            return error_doc(out, 500, "out of memory");
        }
        for (size_t i = 0; i < evs.n; i++) {
            dur[i] = evs.e[i].end_ns - evs.e[i].start_ns;
            grp[i] = evs.e[i].group;
        }
        if (fs_corr_mark_slow(dur, grp, evs.n, pct, factor, is_slow) != 0) {
            free(dur);
            free(grp);
            free(is_slow);
            free_ev_list(&evs);
            free(w);
            return error_doc(out, 500, "out of memory");
        }
        /* At most MAX_WINDOWS: the slowest, then back in time order. */
        size_t n_slow = 0;
        for (size_t i = 0; i < evs.n; i++)
            n_slow += is_slow[i];
        int64_t min_dur = INT64_MIN;
        if (n_slow > MAX_WINDOWS) {
            int64_t *sd = malloc(n_slow * sizeof *sd);
            if (sd) {
                size_t k = 0;
                for (size_t i = 0; i < evs.n; i++)
                    if (is_slow[i])
                        sd[k++] = dur[i];
                qsort(sd, n_slow, sizeof *sd, cmp_i64_desc);
                min_dur = sd[MAX_WINDOWS - 1];
                free(sd);
            }
        }
        for (size_t i = 0; i < evs.n && nw < MAX_WINDOWS; i++)
            if (is_slow[i] && dur[i] >= min_dur)
                w[nw++] = (struct fs_corr_window){evs.e[i].start_ns / 1000, evs.e[i].end_ns / 1000,
                                                  evs.e[i].unc_ns / 1000, i};
        free(dur);
        free(grp);
        free(is_slow);
    }
    pthread_mutex_lock(&a->run_lock);
    char err[128];
    /* The ring for what it holds, the episode log for older windows. */
    struct hist_use hu = {0};
    struct fs_departures *d = departures_with_log(a, st, start - co.lead_us, end + co.lag_us, false,
                                                  &hu, now_us, NULL, err, sizeof err);
    struct fs_corr_report *r = NULL;
    if (!d || fs_correlate(d, w, nw, &co, &r) != 0) {
        pthread_mutex_unlock(&a->run_lock);
        fs_departures_free(d);
        free_ev_list(&evs);
        free(w);
        return error_doc(out, 500, "out of memory");
    }
    pthread_mutex_unlock(&a->run_lock);

    /* The name the summary speaks of: the slow events' common name, if they share one. */
    const char *subject = explicit ? "windows" : NULL;
    for (size_t i = 0; !explicit && i < nw; i++) {
        const char *nm = evs.e[w[i].ref].name;
        if (!subject)
            subject = nm;
        else if (strcmp(subject, nm) != 0) {
            subject = "events";
            break;
        }
    }
    if (!subject)
        subject = "events";

    fs_buf_reset(out);
    fs_buf_puts(out, "{\"status\":\"success\",\"data\":{\"start\":");
    put_time(out, start);
    fs_buf_puts(out, ",\"end\":");
    put_time(out, end);
    fs_buf_puts(out, ",\"kind\":");
    fs_buf_json_str(out, kind);
    fs_buf_puts(out, ",\"slow\":");
    fs_buf_json_str(out, explicit ? "windows" : slow);
    fs_buf_printf(out,
                  ",\"events_considered\":%zu,\"events_at_dump_time_left_out\":%zu,"
                  "\"windows\":%zu,\"series_scanned\":%zu,\"series_departing\":%zu,",
                  considered, evs.left_out, nw, d->series_scanned, d->n_series);
    put_history(out, a, &hu);
    fs_buf_puts(out, "\"summary\":[");
    for (size_t i = 0, listed = 0; i < r->n_aggregates && listed < 20; i++) {
        const struct fs_corr_aggregate *ag = &r->aggregates[i];
        if (ag->grouped)
            continue; /* listed with the member that leads its group */
        const struct fs_an_series_ref *s = &d->series[ag->series];
        char port[600], text[1400];
        port_text(port, sizeof port, s);
        int o = snprintf(
            text, sizeof text, "%s %s during %zu of %zu slow %s (%zu of its %zu elsewhere)", port,
            fs_an_kind_phrase(s->kind), ag->departs, nw, subject, ag->runs_outside, ag->runs_total);
        if (ag->group >= 0 && o > 0 && (size_t)o < sizeof text)
            o += put_group_text(text + o, sizeof text - (size_t)o, d, &r->groups[ag->group]);
        if (ag->explained && o > 0 && (size_t)o < sizeof text)
            snprintf(text + o, sizeof text - (size_t)o, "; an effect in %zu of them: %s",
                     ag->explained, effect_phrase(s));
        fs_buf_puts(out, listed++ ? ",{" : "{");
        put_series_ref(out, s);
        fs_buf_printf(out,
                      ",\"evidence\":%.4f,\"departs\":%zu,\"explained\":%zu,\"first\":%zu,"
                      "\"in_top\":%zu,\"of\":%zu,\"runs_total\":%zu,\"runs_outside\":%zu,"
                      "\"max_z\":",
                      ag->evidence, ag->departs, ag->explained, ag->first, ag->in_top, nw,
                      ag->runs_total, ag->runs_outside);
        put_num(out, ag->max_z);
        if (ag->group >= 0)
            put_group(out, d, &r->groups[ag->group]);
        fs_buf_puts(out, ",\"text\":");
        fs_buf_json_str(out, text);
        fs_buf_puts(out, "}");
    }
    fs_buf_puts(out, "],\"events\":[");
    for (size_t i = 0; i < r->n_results && i < limit; i++) {
        const struct fs_corr_result *res = &r->results[i];
        fs_buf_puts(out, i ? ",{" : "{");
        if (!explicit) {
            const struct ev_copy *e = &evs.e[res->window.ref];
            fs_buf_puts(out, "\"host\":");
            fs_buf_json_str(out, e->host);
            fs_buf_puts(out, ",\"kind\":");
            fs_buf_json_str(out, e->kind);
            fs_buf_puts(out, ",\"name\":");
            fs_buf_json_str(out, e->name);
            /* start_ns/end_ns: the collector's axis; host_start_ns: as the host posted it. */
            fs_buf_printf(out,
                          ",\"start_ns\":%" PRId64 ",\"end_ns\":%" PRId64
                          ",\"host_start_ns\":%" PRId64 ",\"duration_ms\":%.3f,"
                          "\"host_offset_ns\":%" PRId64 ",\"host_offset_uncertainty_ns\":%" PRId64
                          ",",
                          e->start_ns, e->end_ns, e->start_ns + e->off_ns,
                          (double)(e->end_ns - e->start_ns) / 1e6, e->off_ns, e->unc_ns);
        }
        fs_buf_puts(out, "\"start\":");
        put_time(out, res->window.start_us);
        fs_buf_puts(out, ",\"end\":");
        put_time(out, res->window.end_us);
        fs_buf_puts(out, ",\"suspects\":[");
        for (size_t k = 0; k < res->n_top; k++) {
            const struct fs_corr_suspect *sp = &res->top[k];
            fs_buf_puts(out, k ? ",{" : "{");
            put_series_ref(out, &d->series[sp->series]);
            fs_buf_puts(out, ",\"peak\":");
            put_num(out, sp->peak_value);
            fs_buf_puts(out, ",\"baseline\":");
            put_num(out, sp->baseline);
            fs_buf_puts(out, ",\"z\":");
            put_num(out, sp->peak_z);
            fs_buf_puts(out, ",\"peak_time\":");
            put_time(out, sp->peak_us);
            fs_buf_printf(out,
                          ",\"evidence\":%.4f,\"explained\":%s,\"lag_ms\":%.3f,"
                          "\"clock_uncertainty_ms\":%.3f",
                          sp->evidence, sp->explained ? "true" : "false", (double)sp->lag_us / 1e3,
                          (double)sp->uncertainty_us / 1e3);
            if (sp->group >= 0)
                put_group(out, d, &r->groups[sp->group]);
            fs_buf_puts(out, "}");
        }
        fs_buf_puts(out, "],\"other_host_events\":[");
        pthread_mutex_lock(&a->rules_lock);
        struct other_ctx oc = {out, kind, 0, a->rules, a->n_rules};
        fs_host_events_foreach(a->events, (res->window.start_us - co.lead_us) * 1000,
                               (res->window.end_us + co.lag_us) * 1000, NULL, other_cb, &oc);
        pthread_mutex_unlock(&a->rules_lock);
        fs_buf_printf(out, "],\"other_host_events_total\":%zu}", oc.n);
        if (out->overflow)
            break;
    }
    fs_buf_printf(out, "],\"events_listed\":%zu", r->n_results < limit ? r->n_results : limit);
    {
        /* Targets named by the summary and the listed suspects (bounded like them). */
        const char *tg[64];
        size_t ntg = 0;
        for (size_t i = 0; i < r->n_aggregates && i < 20; i++)
            target_set_add(tg, &ntg, 64, d->series[r->aggregates[i].series].target);
        for (size_t i = 0; i < r->n_results && i < limit; i++)
            for (size_t k = 0; k < r->results[i].n_top; k++)
                target_set_add(tg, &ntg, 64, d->series[r->results[i].top[k].series].target);
        put_clocks(out, st, tg, ntg);
    }
    fs_buf_puts(out, "}}");
    fs_corr_report_free(r);
    fs_departures_free(d);
    free_ev_list(&evs);
    free(w);
    if (out->overflow)
        return overflow_doc(out);
    return 200;
}

/* ---- GET /api/v1/incidents and metrics ---- */

static void
put_recurrence_text(char *text, size_t len, const struct fs_departures *d,
                    const struct fs_recurrence *g)
{
    char port[600];
    port_text(port, sizeof port, &d->series[g->series[0]]);
    size_t o = (size_t)snprintf(text, len, "every %.3g s ± %.2g s on %s (", g->period_us / 1e6,
                                g->spread_us / 1e6, port);
    bool first = true;
    for (int k = 0; k < FS_AN_KIND_COUNT && o < len; k++)
        if (g->kinds & (1u << k)) {
            o += (size_t)snprintf(text + o, len - o, "%s%s", first ? "" : ", ",
                                  fs_an_kind_phrase((enum fs_an_kind)k));
            first = false;
        }
    if (o < len)
        snprintf(text + o, len - o, ")");
}

/* Departures over [start, end] (under run_lock): the part the ring holds scanned from it,
 * the part before replayed from the episode log. With record, what the scan found is
 * logged first (the periodic refresh, and queries reaching the present). */
struct targets {
    char **t;
    size_t n;
    bool failed;
};

static int
target_cb(void *arg_, const struct fs_instance_info *in)
{
    struct targets *ts = arg_;
    for (size_t i = 0; i < ts->n; i++)
        if (strcmp(ts->t[i], in->target) == 0)
            return 0;
    void *p = realloc(ts->t, (ts->n + 1) * sizeof *ts->t);
    if (!p || !(((char **)p)[ts->n] = strdup(in->target))) {
        if (p)
            ts->t = p;
        ts->failed = true;
        return 1;
    }
    ts->t = p;
    ts->n++;
    return 0;
}

static bool
is_local_target(void *arg_, const char *target)
{
    const struct targets *ts = arg_;
    for (size_t i = 0; i < ts->n; i++)
        if (strcmp(ts->t[i], target) == 0)
            return true;
    return false;
}

/* "history":{...} of an answer, when analysis.history is configured. */
static void
put_history(struct fs_buf *out, const struct fs_analysis *a, const struct hist_use *hu)
{
    if (!hu->used)
        return;
    fs_buf_puts(out, "\"history\":{\"server\":");
    fs_buf_json_str(out, a->history_host);
    fs_buf_printf(out,
                  ",\"step_s\":%.3f,\"series\":%" PRIu64 ",\"refined\":%" PRIu64
                  ",\"duplicates\":%" PRIu64 ",\"points\":%" PRIu64 ",\"error\":",
                  hu->info.step_us / 1e6, hu->info.series, hu->info.refined, hu->info.duplicates,
                  hu->info.points);
    if (hu->info.error[0])
        fs_buf_json_str(out, hu->info.error);
    else
        fs_buf_puts(out, "null");
    fs_buf_puts(out, "},");
}

/* Adds what analysis.history holds that this instance does not: its targets' samples
   before its own data began, and every other target's (other shards). */
static void
add_history(struct fs_analysis *a, struct fs_store *st, struct fs_departures *d, int64_t start,
            int64_t end, bool only_local, struct hist_use *hu)
{
    struct targets ts = {0};
    hu->used = true;
    fs_store_foreach_instance(st, target_cb, &ts);
    if (ts.failed) {
        snprintf(hu->info.error, sizeof hu->info.error, "out of memory");
    } else {
        int64_t local_before = a->data_since_us ? a->data_since_us : end + 1;
        if (fs_history_scan(a->history, a->history_step_us, a->history_max_points, d, start, end,
                            is_local_target, &ts, local_before, only_local, &hu->info) != 0)
            fs_log(FS_LOG_WARN, "analysis", "%s", hu->info.error);
    }
    for (size_t i = 0; i < ts.n; i++)
        free(ts.t[i]);
    free(ts.t);
}

/* Once, before the first scan is logged (the log only appends after its latest run of a
   series): this instance's own episodes from before its data began (a restart), read
   from the history over the horizon, so the incident metrics and their alert do not
   wait for three new occurrences. */
static void
backfill_log(struct fs_analysis *a, struct fs_store *st, int64_t now_us)
{
    struct hist_use hu = {0};
    int64_t from = now_us - a->opts.horizon_us;
    a->log_backfilled = true;
    if (from >= a->data_since_us)
        return;
    struct fs_departures *b = fs_departures_new(&a->opts.an, from, a->data_since_us);
    if (!b) {
        fs_log(FS_LOG_WARN, "analysis", "history backfill: out of memory");
        return;
    }
    add_history(a, st, b, from, a->data_since_us, true, &hu);
    if (fs_departures_finish(b) != 0 || fs_episode_log_record(a->log, b, now_us) != 0)
        fs_log(FS_LOG_WARN, "analysis", "history backfill: out of memory, some episodes not kept");
    else if (hu.info.error[0])
        fs_log(FS_LOG_WARN, "analysis",
               "history backfill failed (%s): the episode log starts with this instance's data",
               hu.info.error);
    else
        fs_log(FS_LOG_INFO, "analysis",
               "history backfill: %zu departure runs of %" PRIu64 " series of this instance's "
               "targets before its data began",
               b->n_runs, hu.info.series);
    fs_departures_free(b);
}

/* How old the last full scan's baselines may be for a request to scan only after it:
   two refresh periods (a refresh missed under load is not a reason to scan it all). */
#define BASE_MAX_AGE_US (65 * US)
/* An incremental refresh scans from this long before the last one's end (samples placed
   late: a poll's own duration, a stream catching up), and a full scan runs this often. */
#define REFRESH_OVERLAP_US (60 * US)
#define REFRESH_FULL_EVERY_US (30 * 60 * US)

/*
 * The departures of [start, end] from the episode log and a scan of the ring after the
 * last full scan only (under run_lock), or NULL when that is not possible: no recent
 * full scan, or the log may have lost runs the ring still holds (memory evictions
 * since, a retention shorter than the range). Every run the full scans found is in
 * the log (each refresh records its scan), so the log gives the same runs a scan of
 * the whole range would, and a request costs a read of the last seconds of each series
 * instead of the last hour. The tail's runs are recorded in the log first.
 */
static struct fs_departures *
departures_from_log(struct fs_analysis *a, struct fs_store *st, int64_t start, int64_t end,
                    int64_t now_us, bool *oom, char *err, size_t errlen)
{
    const struct base_cache *bc = &a->base;
    struct fs_episode_log_stats ls;
    *oom = false;
    if (!bc->at_us || now_us - bc->at_us > BASE_MAX_AGE_US || bc->at_us > now_us ||
        end - start > a->opts.log.retention_us)
        return NULL;
    fs_episode_log_stats(a->log, &ls);
    if (ls.evicted_memory != bc->log_evicted)
        return NULL;
    size_t scanned = bc->n;
    int64_t tail_lo = bc->at_us - a->opts.an.merge_gap_us;
    if (tail_lo < start)
        tail_lo = start;
    if (end > tail_lo) {
        struct fs_departures *t = scan_store(st, &a->opts.an, tail_lo, end, bc, NULL, err, errlen);
        if (!t || fs_episode_log_record(a->log, t, now_us) != 0) {
            fs_departures_free(t);
            *oom = true;
            return NULL;
        }
        scanned = t->series_scanned;
        fs_departures_free(t);
    }
    struct fs_departures *d = fs_departures_new(&a->opts.an, start, end);
    if (!d || fs_episode_log_replay(a->log, d, start, end + 1) != 0 ||
        fs_departures_finish(d) != 0) {
        fs_departures_free(d);
        *oom = true;
        return NULL;
    }
    d->series_scanned = scanned;
    d->ring_scan_start_us = end > tail_lo ? tail_lo : end;
    return d;
}

/* Departures over [start, end]: see departures_from_log, else a scan of what the ring
   holds (or the given one, prescanned over it) and the log for what is older. */
static struct fs_departures *
departures_with_log(struct fs_analysis *a, struct fs_store *st, int64_t start, int64_t end,
                    bool record, struct hist_use *hu, int64_t now_us,
                    struct fs_departures *prescanned, char *err, size_t errlen)
{
    struct fs_ring_stats rs;
    uint64_t limit;
    fs_store_ring_stats(st, &rs, &limit);
    int64_t ring_lo = rs.samples ? rs.oldest_ts_us : end;
    if (rs.samples && (a->data_since_us == 0 || rs.oldest_ts_us < a->data_since_us))
        a->data_since_us = rs.oldest_ts_us;
    int64_t scan_lo = start > ring_lo ? start : ring_lo;
    /* A prescan of the last minutes only (an incremental refresh): the log has the rest. */
    if (prescanned && prescanned->start_us > scan_lo)
        scan_lo = prescanned->start_us < end ? prescanned->start_us : end;
    struct fs_departures *d = prescanned;
    bool from_log = false, oom = false;
    if (!d) {
        d = departures_from_log(a, st, start, end, now_us, &oom, err, errlen);
        if (oom)
            return NULL;
        from_log = d != NULL;
    }
    if (!d && scan_lo < end) {
        d = scan_store(st, &a->opts.an, scan_lo, end, NULL, NULL, err, errlen);
    } else if (!d && (d = fs_departures_new(&a->opts.an, start, end)) &&
               fs_departures_finish(d) != 0) {
        fs_departures_free(d);
        d = NULL;
    }
    if (!d)
        return NULL;
    if (!from_log)
        d->ring_scan_start_us = scan_lo < end ? scan_lo : end;
    if (record && a->history && !a->log_backfilled && a->data_since_us)
        backfill_log(a, st, now_us);
    if (record && !from_log && fs_episode_log_record(a->log, d, now_us) != 0)
        fs_log(FS_LOG_WARN, "analysis", "episode log: out of memory, some episodes not kept");
    d->start_us = start;
    if (!from_log && start < scan_lo) {
        if (fs_episode_log_replay(a->log, d, start, scan_lo) != 0 || fs_departures_finish(d) != 0) {
            fs_departures_free(d);
            snprintf(err, errlen, "out of memory");
            return NULL;
        }
    }
    /* The series' episode rates (random or periodic?) count from when data began. */
    int64_t since = a->data_since_us ? a->data_since_us : start;
    if (hu && a->history) {
        add_history(a, st, d, start, end, false, hu);
        if (fs_departures_finish(d) != 0) {
            fs_departures_free(d);
            snprintf(err, errlen, "out of memory");
            return NULL;
        }
        if (hu->info.earliest_us && hu->info.earliest_us < since)
            since = hu->info.earliest_us;
    }
    d->observed_start_us = since > start ? since : start;
    return d;
}

static int
remember_metrics(struct fs_analysis *a, const struct fs_departures *d,
                 const struct fs_incident_report *r)
{
    size_t total = 0;
    for (size_t i = 0; i < r->n_groups; i++)
        total += r->groups[i].n_series;
    /* The bar an incident clears to be exported (and arm FabricIncidentDue): its chance
       test (incidents.h), and, where the hosts report slow events, a slow event in at
       least half of its occurrences: a periodic job the stalled hosts never notice is
       not the stall to capture. */
    struct metric_port *p = calloc(total ? total : 1, sizeof *p);
    if (!p)
        return -1;
    size_t k = 0;
    int rc = 0;
    for (size_t i = 0; i < r->n_groups; i++) {
        const struct fs_recurrence *g = &r->groups[i];
        if (r->hosts_reporting && 2 * g->host_hits < g->occurrences)
            continue;
        for (size_t j = 0; j < g->n_series; j++, k++) {
            const struct fs_an_series_ref *s = &d->series[g->series[j]];
            p[k].target = strdup(s->target);
            p[k].interface = strdup(s->interface);
            p[k].tc = strdup(s->tc);
            p[k].rule = strdup(s->rule);
            p[k].metric = strdup(s->metric);
            p[k].period_s = g->period_us / 1e6;
            p[k].spread_s = g->spread_us / 1e6;
            p[k].next_s = (double)g->next_us / 1e6;
            if (!p[k].target || !p[k].interface || !p[k].tc || !p[k].rule || !p[k].metric)
                rc = -1;
        }
    }
    if (rc != 0) {
        free_ports(p, k);
        return -1;
    }
    pthread_mutex_lock(&a->metrics_lock);
    struct metric_port *old = a->ports;
    size_t old_n = a->n_ports;
    a->ports = p;
    a->n_ports = k;
    pthread_mutex_unlock(&a->metrics_lock);
    free_ports(old, old_n);
    return 0;
}

/* The slow host events of a range: each one's window on the collector's axis, widened
   by its offset's uncertainty. */
struct slow_windows {
    size_t considered, n, left_out;
    int64_t *start, *end; /* owned */
};

static void
free_slow_windows(struct slow_windows *sw)
{
    free(sw->start);
    free(sw->end);
    memset(sw, 0, sizeof *sw);
}

/* The host events of kind in [start, end] (collector axis), those past the slow
   threshold of their (kind, name) as in /correlate (dump-time placements left out). 0, or
   -1 on no memory. */
static int
find_slow_windows(struct fs_analysis *a, int64_t start, int64_t end, const char *kind, double pct,
                  double factor, struct slow_windows *sw)
{
    memset(sw, 0, sizeof *sw);
    struct ev_list evs = {0};
    int rc = -1;
    int64_t *dur = NULL;
    size_t *grp = NULL;
    bool *is_slow = NULL;
    fs_host_events_foreach(a->events, start * 1000, end * 1000, kind, copy_ev_cb, &evs);
    if (evs.failed)
        goto out;
    sw->considered = evs.n;
    sw->left_out = evs.left_out;
    size_t m = evs.n ? evs.n : 1;
    dur = malloc(m * sizeof *dur);
    grp = malloc(m * sizeof *grp);
    is_slow = malloc(m * sizeof *is_slow);
    sw->start = malloc(m * sizeof *sw->start);
    sw->end = malloc(m * sizeof *sw->end);
    if (!dur || !grp || !is_slow || !sw->start || !sw->end)
        goto out;
    for (size_t i = 0; i < evs.n; i++) {
        dur[i] = evs.e[i].end_ns - evs.e[i].start_ns;
        grp[i] = evs.e[i].group;
    }
    if (fs_corr_mark_slow(dur, grp, evs.n, pct, factor, is_slow) != 0)
        goto out;
    for (size_t i = 0; i < evs.n; i++) {
        if (!is_slow[i])
            continue;
        int64_t unc = evs.e[i].unc_ns > 0 ? evs.e[i].unc_ns / 1000 : 0;
        sw->start[sw->n] = evs.e[i].start_ns / 1000 - unc;
        sw->end[sw->n] = evs.e[i].end_ns / 1000 + unc;
        sw->n++;
    }
    rc = 0;
out:
    if (rc != 0)
        free_slow_windows(sw);
    free(dur);
    free(grp);
    free(is_slow);
    free_ev_list(&evs);
    return rc;
}

/* What /incidents says of the host side: per group (in the report's order once
   matched), its occurrences with a slow window and the slow events during them. */
struct host_match {
    size_t *occ_with_slow, *slow_during; /* owned; NULL when there are no groups */
};

/* Matches the slow windows to r's groups (which are reordered: largest share of
   occurrences with a slow event first). 0, or -1 on no memory. */
static int
match_host_events(struct fs_incident_report *r, const struct slow_windows *sw, int64_t margin_us,
                  struct host_match *hm)
{
    size_t ng = r->n_groups ? r->n_groups : 1;
    hm->occ_with_slow = calloc(ng, sizeof *hm->occ_with_slow);
    hm->slow_during = calloc(ng, sizeof *hm->slow_during);
    if (!hm->occ_with_slow || !hm->slow_during ||
        fs_incidents_host_evidence(r, sw->start, sw->end, sw->n, margin_us, hm->occ_with_slow,
                                   hm->slow_during) != 0) {
        free(hm->occ_with_slow);
        free(hm->slow_during);
        hm->occ_with_slow = hm->slow_during = NULL;
        return -1;
    }
    return 0;
}

int
fs_analysis_incidents(struct fs_analysis *a, struct fs_store *st,
                      const struct fs_analysis_arg *args, size_t n, int64_t now_us,
                      struct fs_buf *out)
{
    static const char *const known[] = {"start", "end", "limit", "kind", "slow", NULL};
    int rc = check_args(args, n, known, NULL, out);
    if (rc)
        return rc;
    const char *kind, *slow;
    double pct, factor;
    if ((rc = parse_slow_args(args, n, &kind, &slow, &pct, &factor, out)))
        return rc;
    pthread_mutex_lock(&a->run_lock);
    int64_t horizon = a->opts.horizon_us, max_range = a->opts.log.retention_us;
    pthread_mutex_unlock(&a->run_lock);
    int64_t start, end;
    if ((rc = parse_range(args, n, now_us, horizon, max_range, &start, &end, out)))
        return rc;
    size_t limit = 200;
    const char *lim = arg(args, n, "limit");
    if (lim) {
        char *e;
        long l = strtol(lim, &e, 10);
        if (*e || l < 0 || l > 100000)
            return error_doc(out, 400, "limit: want 0..100000");
        limit = (size_t)l;
    }
    struct slow_windows sw;
    if (find_slow_windows(a, start, end, kind, pct, factor, &sw) != 0)
        return error_doc(out, 500, "out of memory");
    pthread_mutex_lock(&a->run_lock);
    char err[128];
    bool present = end >= now_us - 60 * US;
    struct hist_use hu = {0};
    struct fs_departures *d =
        departures_with_log(a, st, start, end, present, &hu, now_us, NULL, err, sizeof err);
    struct fs_incident_report *r = NULL;
    /* The next occurrence is predicted after the range's end, or now if that is later. */
    int64_t after = end > now_us ? end : now_us;
    int64_t margin_us = a->opts.an.merge_gap_us;
    struct fs_incident_hosts ih = {sw.start, sw.end, sw.n, margin_us};
    if (!d || fs_incidents_find_hosts(d, after, &ih, &r) != 0) {
        pthread_mutex_unlock(&a->run_lock);
        fs_departures_free(d);
        free_slow_windows(&sw);
        return error_doc(out, 500, "out of memory");
    }
    pthread_mutex_unlock(&a->run_lock);
    /* The metrics are this instance's own (each shard exports its targets' incidents). */
    if (present && !hu.used)
        (void)remember_metrics(a, d, r);
    struct host_match hm;
    if (match_host_events(r, &sw, margin_us, &hm) != 0) {
        fs_incident_report_free(r);
        fs_departures_free(d);
        free_slow_windows(&sw);
        return error_doc(out, 500, "out of memory");
    }

    fs_buf_reset(out);
    fs_buf_puts(out, "{\"status\":\"success\",\"data\":{\"start\":");
    put_time(out, start);
    fs_buf_puts(out, ",\"end\":");
    put_time(out, end);
    struct fs_episode_log_stats ls;
    fs_episode_log_stats(a->log, &ls);
    fs_buf_printf(out, ",\"series_scanned\":%zu,\"series_departing\":%zu,\"ring_scanned_from\":",
                  d->series_scanned, d->n_series);
    put_time(out, d->ring_scan_start_us);
    fs_buf_puts(out, ",");
    put_history(out, a, &hu);
    fs_buf_printf(out, "\"episode_log\":{\"episodes\":%zu,\"oldest\":", ls.runs);
    if (ls.runs)
        put_time(out, ls.oldest_start_us);
    else
        fs_buf_puts(out, "null");
    fs_buf_puts(out, "},\"host_events\":{\"kind\":");
    fs_buf_json_str(out, kind);
    fs_buf_puts(out, ",\"slow\":");
    fs_buf_json_str(out, slow);
    fs_buf_printf(out, ",\"considered\":%zu,\"slow_events\":%zu,\"left_out_dump_time\":%zu}",
                  sw.considered, sw.n, sw.left_out);
    fs_buf_puts(out, ",\"recurring\":[");
    for (size_t i = 0; i < r->n_groups; i++) {
        const struct fs_recurrence *g = &r->groups[i];
        char text[1200];
        put_recurrence_text(text, sizeof text, d, g);
        if (sw.n) {
            size_t tl = strlen(text);
            snprintf(text + tl, sizeof text - tl, "; a slow %s event in %zu of its %zu occurrences",
                     kind, hm.occ_with_slow[i], g->occurrences);
        }
        fs_buf_puts(out, i ? ",{\"series\":[" : "{\"series\":[");
        for (size_t j = 0; j < g->n_series && j < 64; j++) {
            fs_buf_puts(out, j ? ",{" : "{");
            put_series_ref(out, &d->series[g->series[j]]);
            fs_buf_puts(out, "}");
        }
        fs_buf_puts(out, "],\"kinds\":");
        put_kinds(out, g->kinds);
        fs_buf_printf(out,
                      ",\"occurrences\":%zu,\"period_s\":%.6f,\"spread_s\":%.6f,"
                      "\"confidence\":%.6f,\"first\":",
                      g->occurrences, g->period_us / 1e6, g->spread_us / 1e6, g->confidence);
        put_time(out, g->first_us);
        fs_buf_puts(out, ",\"last\":");
        put_time(out, g->last_us);
        fs_buf_puts(out, ",\"next_expected\":");
        put_time(out, g->next_us);
        fs_buf_printf(out,
                      ",\"next_expected_in_s\":%.3f,\"host_slow\":{\"occurrences\":%zu,"
                      "\"events\":%zu},\"text\":",
                      (double)(g->next_us - now_us) / 1e6, sw.n ? hm.occ_with_slow[i] : 0,
                      sw.n ? hm.slow_during[i] : 0);
        fs_buf_json_str(out, text);
        fs_buf_puts(out, "}");
    }
    fs_buf_printf(out, "],\"episodes_total\":%zu,\"episodes\":[", r->n_episodes);
    /* The most recent episodes. */
    size_t first = r->n_episodes > limit ? r->n_episodes - limit : 0;
    for (size_t i = first; i < r->n_episodes; i++) {
        const struct fs_episode *e = &r->episodes[i];
        fs_buf_puts(out, i > first ? ",{\"start\":" : "{\"start\":");
        put_time(out, e->start_us);
        fs_buf_puts(out, ",\"end\":");
        put_time(out, e->end_us);
        fs_buf_puts(out, ",\"peak_z\":");
        put_num(out, e->peak_z);
        fs_buf_puts(out, ",\"kinds\":");
        put_kinds(out, e->kinds);
        fs_buf_printf(out, ",\"series_total\":%zu,\"series\":[", e->n_members);
        for (size_t j = 0; j < e->n_members && j < 10; j++) {
            fs_buf_puts(out, j ? ",{" : "{");
            put_series_ref(out, &d->series[e->members[j].series]);
            fs_buf_puts(out, ",\"z\":");
            put_num(out, e->members[j].peak_z);
            fs_buf_puts(out, "}");
        }
        fs_buf_puts(out, "]}");
        if (out->overflow)
            break;
    }
    fs_buf_puts(out, "]}}");
    free(hm.occ_with_slow);
    free(hm.slow_during);
    free_slow_windows(&sw);
    fs_incident_report_free(r);
    fs_departures_free(d);
    if (out->overflow)
        return overflow_doc(out);
    return 200;
}

int
fs_analysis_refresh(struct fs_analysis *a, struct fs_store *st, int64_t now_us)
{
    /* The scan runs without the lock, so that requests (which only scan after the
       previous one) are not held up by it. It covers the ring's whole span, or, when the
       last refresh's baselines and the episode log can be trusted (as for a request:
       recent, the log whole, the same options), only the minutes since that refresh: the
       log holds every run before, and the baselines come from the samples read before
       the scan's start, as in a full scan. A full scan still runs every
       REFRESH_FULL_EVERY_US, for samples that reached the ring later than
       REFRESH_OVERLAP_US after their time. */
    /* The slow host events of the horizon (as /incidents' defaults: kind nccl, p99), so
       the exported incidents weigh what the hosts say (incidents.h). */
    struct slow_windows sw;
    pthread_mutex_lock(&a->run_lock);
    int64_t horizon = a->opts.horizon_us;
    pthread_mutex_unlock(&a->run_lock);
    if (find_slow_windows(a, now_us - horizon, now_us, "nccl", 99, 0, &sw) != 0)
        return -1;
    pthread_mutex_lock(&a->run_lock);
    struct fs_an_opts an = a->opts.an;
    int64_t start = now_us - a->opts.horizon_us;
    uint64_t gen = a->opts_gen;
    struct fs_episode_log_stats ls;
    fs_episode_log_stats(a->log, &ls);
    bool incremental =
        a->base.at_us && a->base.at_us < now_us && now_us - a->base.at_us <= BASE_MAX_AGE_US &&
        now_us - a->full_scan_at_us < REFRESH_FULL_EVERY_US &&
        ls.evicted_memory == a->base.log_evicted && a->opts.horizon_us <= a->opts.log.retention_us;
    int64_t incr_lo = a->base.at_us - REFRESH_OVERLAP_US;
    pthread_mutex_unlock(&a->run_lock);
    char err[128];
    struct fs_ring_stats rs;
    uint64_t limit;
    fs_store_ring_stats(st, &rs, &limit);
    int64_t scan_lo = rs.samples && rs.oldest_ts_us > start ? rs.oldest_ts_us : start;
    if (incremental && incr_lo > scan_lo)
        scan_lo = incr_lo;
    else
        incremental = false;
    struct base_cache bc = {0};
    struct fs_departures *full =
        scan_lo < now_us ? scan_store(st, &an, scan_lo, now_us, NULL, &bc, err, sizeof err) : NULL;

    pthread_mutex_lock(&a->run_lock);
    if (gen != a->opts_gen) { /* new thresholds meanwhile: the scan used the old ones */
        fs_departures_free(full);
        full = NULL;
        free(bc.b);
        bc = (struct base_cache){0};
    }
    struct fs_departures *d = departures_with_log(a, st, now_us - a->opts.horizon_us, now_us, true,
                                                  NULL, now_us, full, err, sizeof err);
    struct fs_incident_report *r = NULL;
    int rc = -1;
    struct fs_incident_hosts ih = {sw.start, sw.end, sw.n, a->opts.an.merge_gap_us};
    if (d && fs_incidents_find_hosts(d, now_us, &ih, &r) == 0)
        rc = remember_metrics(a, d, r);
    if (d && bc.at_us) {
        if (!incremental)
            a->full_scan_at_us = now_us;
        a->refresh_scanned_from_us = scan_lo;
        a->refresh_full = !incremental;
        fs_episode_log_stats(a->log, &ls);
        bc.log_evicted = ls.evicted_memory;
        free(a->base.b);
        a->base = bc;
        bc.b = NULL;
    }
    free(bc.b);
    pthread_mutex_unlock(&a->run_lock);
    free_slow_windows(&sw);
    fs_incident_report_free(r);
    fs_departures_free(d);
    return rc;
}

void
fs_analysis_last_refresh(struct fs_analysis *a, int64_t *scanned_from_us, bool *full)
{
    pthread_mutex_lock(&a->run_lock);
    *scanned_from_us = a->refresh_scanned_from_us;
    *full = a->refresh_full;
    pthread_mutex_unlock(&a->run_lock);
}

static void
put_port_labels(struct fs_buf *b, const struct metric_port *p)
{
    fs_buf_puts(b, "{target=\"");
    fs_buf_prom_label_value(b, p->target);
    fs_buf_puts(b, "\",interface=\"");
    fs_buf_prom_label_value(b, p->interface);
    fs_buf_puts(b, "\",tc=\"");
    fs_buf_prom_label_value(b, p->tc);
    fs_buf_puts(b, "\",rule=\"");
    fs_buf_prom_label_value(b, p->rule);
    fs_buf_puts(b, "\",metric=\"");
    fs_buf_prom_label_value(b, p->metric);
    fs_buf_puts(b, "\"}");
}

/* # HELP and # TYPE from the catalogue (schemas/metrics.json; its help texts need no
 * escaping: no backslash, no newline). */
static void
family_header(struct fs_buf *out, enum fs_metric m)
{
    const struct fs_metric_def *d = &fs_metric_defs[m];
    fs_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", d->name, d->help, d->name, d->type_name);
}

static void
scalar_u64(struct fs_buf *out, enum fs_metric m, uint64_t v)
{
    family_header(out, m);
    fs_buf_printf(out, "%s %" PRIu64 "\n", fs_metric_defs[m].name, v);
}

int
fs_analysis_metrics(struct fs_analysis *a, struct fs_buf *out)
{
    struct fs_host_events_stats s;
    fs_host_events_stats(a->events, &s);
    scalar_u64(out, FS_M_HOST_EVENTS, s.events);
    scalar_u64(out, FS_M_HOST_EVENTS_BYTES, s.bytes);
    scalar_u64(out, FS_M_HOST_EVENTS_LIMIT_BYTES, s.memory_limit);
    scalar_u64(out, FS_M_HOST_EVENTS_INGESTED, s.ingested_total);
    scalar_u64(out, FS_M_HOST_EVENTS_REJECTED_POSTS, s.rejected_total);
    scalar_u64(out, FS_M_HOST_EVENTS_DUPLICATES, s.duplicates_total);
    family_header(out, FS_M_HOST_EVENTS_EVICTED);
    const char *ev = fs_metric_defs[FS_M_HOST_EVENTS_EVICTED].name;
    fs_buf_printf(out, "%s{reason=\"memory\"} %" PRIu64 "\n%s{reason=\"retention\"} %" PRIu64 "\n",
                  ev, s.evicted_memory, ev, s.evicted_retention);
    struct fs_episode_log_stats ls;
    fs_episode_log_stats(a->log, &ls);
    scalar_u64(out, FS_M_EPISODE_LOG_EPISODES, ls.runs);
    scalar_u64(out, FS_M_EPISODE_LOG_BYTES, ls.bytes);
    family_header(out, FS_M_EPISODE_LOG_EVICTED);
    const char *lev = fs_metric_defs[FS_M_EPISODE_LOG_EVICTED].name;
    fs_buf_printf(out, "%s{reason=\"memory\"} %" PRIu64 "\n%s{reason=\"retention\"} %" PRIu64 "\n",
                  lev, ls.evicted_memory, lev, ls.evicted_retention);
    pthread_mutex_lock(&a->metrics_lock);
    static const enum fs_metric fams[3] = {FS_M_INCIDENT_PERIOD, FS_M_INCIDENT_PERIOD_SPREAD,
                                           FS_M_INCIDENT_NEXT_EXPECTED};
    /* A family without samples gets no HELP/TYPE either (as in http/expo.c). */
    for (int m = 0; m < 3 && a->n_ports > 0; m++) {
        family_header(out, fams[m]);
        for (size_t i = 0; i < a->n_ports; i++) {
            fs_buf_puts(out, fs_metric_defs[fams[m]].name);
            put_port_labels(out, &a->ports[i]);
            double v = m == 0   ? a->ports[i].period_s
                       : m == 1 ? a->ports[i].spread_s
                                : a->ports[i].next_s;
            fs_buf_printf(out, " %.6f\n", v);
        }
    }
    pthread_mutex_unlock(&a->metrics_lock);
    return out->overflow ? -1 : 0;
}

/* ---- GET /api/v1/export/trace ---- */

struct trace_ev_ctx {
    struct fs_trace *t;
    int64_t max_unc_ns;
    bool failed;
    struct fs_buf args;
};

static int
trace_ev_cb(void *arg_, const struct fs_host_event *e)
{
    struct trace_ev_ctx *c = arg_;
    char process[FS_HOST_EVENTS_MAX_STR + 8];
    snprintf(process, sizeof process, "host %s", e->host);
    if (e->host_offset_uncertainty_ns > c->max_unc_ns)
        c->max_unc_ns = e->host_offset_uncertainty_ns;
    int rc;
    if (e->end_ns > e->start_ns) {
        rc = fs_trace_slice(c->t, process, e->kind, e->name, e->start_ns, e->end_ns, e->attrs,
                            e->n_attrs);
    } else {
        fs_buf_reset(&c->args);
        fs_buf_puts(&c->args, "{");
        for (uint32_t i = 0; i < e->n_attrs; i++) {
            if (i)
                fs_buf_puts(&c->args, ",");
            fs_buf_json_str(&c->args, e->attrs[i].key);
            fs_buf_puts(&c->args, ":");
            if (e->attrs[i].is_string)
                fs_buf_json_str(&c->args, e->attrs[i].value);
            else
                fs_buf_puts(&c->args, e->attrs[i].value);
        }
        fs_buf_puts(&c->args, "}");
        rc = fs_trace_instant(c->t, process, e->name, e->start_ns,
                              c->args.overflow ? NULL : c->args.data);
    }
    if (rc != 0) {
        c->failed = true;
        return 1;
    }
    return 0;
}

struct sel_set {
    struct fs_selector *sel[MAX_MATCH];
    size_t n;
};

static void
free_sels(struct sel_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        fs_selector_free(s->sel[i]);
}

/* Host events copied out of the store (its read lock is not held while the trace is
   written), sorted by start: slices of one track must come in start order. */
struct ev_copies {
    struct fs_host_event *e;
    size_t n, cap;
    bool failed;
};

static char *
dup_str(const char *s, bool *failed)
{
    char *d = strdup(s);
    if (!d)
        *failed = true;
    return d;
}

static int
ev_copy_cb(void *arg_, const struct fs_host_event *e)
{
    struct ev_copies *l = arg_;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 1024;
        void *p = realloc(l->e, cap * sizeof *l->e);
        if (!p) {
            l->failed = true;
            return 1;
        }
        l->e = p;
        l->cap = cap;
    }
    struct fs_host_event *c = &l->e[l->n++];
    *c = *e;
    c->host = dup_str(e->host, &l->failed);
    c->kind = dup_str(e->kind, &l->failed);
    c->name = dup_str(e->name, &l->failed);
    c->attrs = NULL;
    struct fs_host_attr *attrs = calloc(e->n_attrs ? e->n_attrs : 1, sizeof *attrs);
    if (!attrs) {
        c->n_attrs = 0;
        l->failed = true;
        return 1;
    }
    for (uint32_t i = 0; i < e->n_attrs; i++) {
        attrs[i].key = dup_str(e->attrs[i].key, &l->failed);
        attrs[i].value = dup_str(e->attrs[i].value, &l->failed);
        attrs[i].is_string = e->attrs[i].is_string;
    }
    c->attrs = attrs;
    return l->failed ? 1 : 0;
}

static void
free_ev_copies(struct ev_copies *l)
{
    for (size_t i = 0; i < l->n; i++) {
        struct fs_host_event *e = &l->e[i];
        free((char *)e->host);
        free((char *)e->kind);
        free((char *)e->name);
        for (uint32_t k = 0; e->attrs && k < e->n_attrs; k++) {
            free((char *)e->attrs[k].key);
            free((char *)e->attrs[k].value);
        }
        free((struct fs_host_attr *)e->attrs);
    }
    free(l->e);
}

static int
cmp_ev_start(const void *a, const void *b)
{
    const struct fs_host_event *x = a, *y = b;
    return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

int
fs_analysis_export_trace(struct fs_analysis *a, struct fs_store *st,
                         const struct fs_analysis_arg *args, size_t n, int64_t now_us,
                         struct fs_buf *out)
{
    static const char *const known[] = {"start", "end", "match[]", NULL};
    int rc = check_args(args, n, known, "match[]", out);
    if (rc)
        return rc;
    int64_t start, end;
    if ((rc = parse_range(args, n, now_us, 5 * 60 * US, 6 * 3600 * US, &start, &end, out)))
        return rc;
    struct sel_set sels = {0};
    for (size_t i = 0; i < n; i++) {
        if (strcmp(args[i].key, "match[]") != 0)
            continue;
        char err[256];
        const char *v = args[i].value ? args[i].value : "";
        if (sels.n == MAX_MATCH) {
            free_sels(&sels);
            return error_doc(out, 400, "more than %d match[]", MAX_MATCH);
        }
        if (fs_selector_parse(v, strlen(v), &sels.sel[sels.n], err, sizeof err) != 0) {
            free_sels(&sels);
            return error_doc(out, 400, "match[]: %s", err);
        }
        sels.n++;
    }
    pthread_mutex_lock(&a->run_lock);
    fs_buf_reset(out);
    struct fs_trace *t = fs_trace_new(out, start * 1000);
    struct cands cs = {0};
    cs.sel = sels.sel;
    cs.n_sel = sels.n;
    struct reader r = {0};
    struct fs_departures *d = NULL;
    struct fs_incident_report *rep = NULL;
    struct trace_ev_ctx tc = {.t = t};
    struct ev_copies evl = {0};
    fs_buf_init(&tc.args, 64 << 10);
    bool oom = !t;
    if (!oom) {
        fs_store_foreach_series(st, false, collect_cb, &cs);
        oom = cs.failed;
    }
    /* Counter tracks, one per series: "<interface> tc<tc> <metric>[/s]". */
    for (size_t i = 0; !oom && i < cs.n; i++) {
        const struct cand *c = &cs.c[i];
        const int64_t *ts;
        const double *v;
        long m = read_series(st, c, start, end, INT64_MIN, &r, &ts, &v, NULL);
        if (m < 0) {
            oom = true;
            break;
        }
        if (m == 0)
            continue;
        char process[300], track[700];
        snprintf(process, sizeof process, "switch %s", c->target);
        const char *short_metric =
            strncmp(c->metric, "fabric_", 7) == 0 ? c->metric + 7 : c->metric;
        snprintf(track, sizeof track, "%s%s%s%s%s%s%s%s", c->interface, c->tc[0] ? " tc" : "",
                 c->tc, c->rule[0] ? " rule " : "", c->rule,
                 c->interface[0] || c->rule[0] ? " " : "", short_metric, c->counter ? "/s" : "");
        if (fs_trace_counter(t, process, track, ts, v, (size_t)m) != 0)
            break;
    }
    /* Incidents of the range as instants on their switches. */
    if (!oom && !out->overflow) {
        char err[128];
        d = scan_store(st, &a->opts.an, start, end, NULL, NULL, err, sizeof err);
        if (!d || fs_incidents_find(d, end, &rep) != 0)
            oom = true;
        for (size_t i = 0; !oom && rep && i < rep->n_episodes; i++) {
            const struct fs_episode *e = &rep->episodes[i];
            for (size_t j = 0; j < e->n_members && j < 10; j++) {
                const struct fs_an_series_ref *s = &d->series[e->members[j].series];
                char process[300], name[700], argsj[1024];
                snprintf(process, sizeof process, "switch %s", s->target);
                port_text(name, sizeof name, s);
                size_t l = strlen(name);
                snprintf(name + l, sizeof name - l, " %s", fs_an_kind_phrase(s->kind));
                snprintf(argsj, sizeof argsj, "{\"z\":%.3g,\"episode_end_us\":%" PRId64 "}",
                         e->members[j].peak_z, e->end_us);
                if (fs_trace_instant(t, process, name, e->members[j].start_us * 1000, argsj) != 0)
                    break;
            }
        }
    }
    /* Host events as slices (instants for zero-length ones), in start order. */
    if (!oom && !out->overflow) {
        fs_host_events_foreach(a->events, start * 1000, end * 1000, NULL, ev_copy_cb, &evl);
        if (evl.failed)
            oom = true;
        else {
            if (evl.n) /* no host events (a switch-only fabric): no array to sort */
                qsort(evl.e, evl.n, sizeof *evl.e, cmp_ev_start);
            for (size_t i = 0; i < evl.n && !tc.failed; i++)
                trace_ev_cb(&tc, &evl.e[i]);
        }
    }
    pthread_mutex_unlock(&a->run_lock);
    free_ev_copies(&evl);
    char extra[128];
    snprintf(extra, sizeof extra, "\"host_clock_uncertainty_ns_max\":%" PRId64, tc.max_unc_ns);
    int frc = t ? fs_trace_finish(t, extra) : -1;
    fs_buf_free(&tc.args);
    fs_incident_report_free(rep);
    fs_departures_free(d);
    free_cands(&cs);
    free_reader(&r);
    free_sels(&sels);
    if (oom)
        return error_doc(out, 500, "out of memory");
    if (frc != 0)
        return overflow_doc(out);
    return 200;
}
