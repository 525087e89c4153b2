/* The analysis service (see service.h). */
#include "analysis/service.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/ring_scan.h"
#include "analysis/trace.h"
#include "topology/topology.h"
#include "metrics_catalogue.h"
#include "util/clock.h"
#include "util/log.h"

#define US 1000000LL

/* One port of a recurring group of the last refresh (the incident metrics). */
struct metric_port {
    char *target, *interface, *tc, *rule, *metric;
    double period_s, spread_s;
    double next_s;
};

struct fs_analysis {
    struct fs_host_events *events;
    struct fs_topo *topo; /* not owned (fs_analysis_set_topology) */
    pthread_mutex_t rules_lock;
    struct fs_analysis_flow_rule *rules; /* names owned */
    size_t n_rules;
    const char **rule_names; /* [n_rules]: an event's matches (fs_analysis_foreach_other_event) */
    pthread_mutex_t token_lock;
    char *token;
    struct fs_analysis_token *tokens; /* owned, with their strings */
    size_t n_tokens;
    pthread_mutex_t run_lock; /* one heavy analysis at a time; guards opts */
    struct fs_analysis_opts opts;
    /* opts' horizon and retention, also readable without run_lock (a request's range
       is checked on arrival, while an analysis may hold run_lock for seconds). */
    _Atomic int64_t horizon_us, retention_us;
    _Atomic int64_t request_wait_us; /* opts.request_wait_us, read before taking run_lock */
    struct fs_episode_log *log;
    /* the oldest sample the ring has shown a refresh (0: none); written under run_lock */
    _Atomic int64_t data_since_us;
    _Atomic int64_t refreshed_us; /* when the last refresh ended (0: none yet) */
    /* hist_lock guards the history: its client, settings, the options its reads use and
       its cache. A request reads the history holding hist_lock alone, then analyses
       holding run_lock alone, so a slow TSDB holds back other history reads but never
       the refresh; the refresh's one backfill takes hist_lock inside run_lock (the only
       order both are held in). */
    pthread_mutex_t hist_lock;
    _Atomic bool has_history;
    atomic_bool hist_cancel;             /* fs_analysis_cancel_history: every client's reads stop */
    struct fs_prom_client *history;      /* analysis.history, or NULL (hist_lock) */
    struct fs_history_cfg *history_cfg;  /* owned; its settings, or NULL (hist_lock) */
    struct fs_history_read history_read; /* analysis.history's step, points, intervals */
    char history_host[128];
    struct fs_an_opts hist_an; /* opts.an and opts_gen as of the last fs_analysis_set_opts */
    uint64_t hist_gen;
    bool log_backfilled; /* the history was read into the episode log once (run_lock) */
    /* The departures the last request read from the history, over [from, to], so the
       next one reads only what came after (the past of a TSDB does not change): kept
       while the options, the history and this instance's own data start stay (hist_lock). */
    struct hist_cache {
        struct fs_departures *d; /* owned; finished */
        int64_t from, to, local_before, earliest;
        uint64_t gen;
        struct fs_history_scan_info last; /* the last read's, for an answer it gives whole */
    } hist;
    /* The cache's edges, copied for /metrics (which must not wait for hist_lock). */
    _Atomic int64_t hist_cached_from_us, hist_cached_to_us;
    uint64_t opts_gen; /* bumped by fs_analysis_set_opts (under run_lock) */
    /* What lets a request scan only the samples after the last full scan: each series'
       trailing baseline at its end (the runs before it are in the episode log), and the
       episode log's memory evictions then: one more, and the log no longer holds every
       run the ring does. Under run_lock. */
    struct fs_ring_scan_baselines base;
    uint64_t base_log_evicted;
    int64_t full_scan_at_us; /* the last refresh that scanned the ring's whole span (run_lock) */
    int64_t refresh_scanned_from_us; /* the last refresh's scan (run_lock) */
    bool refresh_full;
    pthread_mutex_t metrics_lock;
    struct metric_port *ports;
    size_t n_ports;
    /* The answer cache (service.h); cache_gen is bumped by every change of the options,
       the history or the flow rules. */
    _Atomic uint64_t cache_gen;
    pthread_mutex_t cache_lock;
    struct cache_entry {
        char *key, *body; /* owned */
        size_t len;
        int64_t at_us, keep_us;
        struct fs_analysis_cache_stamp stamp;
    } cache[FS_ANALYSIS_CACHE_ENTRIES];
    size_t n_cache, cache_bytes;
    /* The episode log's file (state_dir): only the refresher and the shutdown write it,
       one after the other; the counters are read by /metrics. */
    pthread_mutex_t persist_lock;
    char *log_path; /* owned; NULL: not kept */
    uint64_t saved_gen;
    int64_t save_tried_us;
    _Atomic int64_t saved_us;
    _Atomic uint64_t save_errors;
    _Atomic bool log_kept; /* log_path is set */
};

/* ---- context ---- */

static void
free_tokens(struct fs_analysis_token *t, size_t n)
{
    for (size_t i = 0; t && i < n; i++) {
        if (t[i].token) {
            memset((char *)t[i].token, 0, strlen(t[i].token));
            free((char *)t[i].token);
        }
        free((char *)t[i].name);
        free((char *)t[i].hosts);
    }
    free(t);
}

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
    atomic_store(&a->horizon_us, a->opts.horizon_us);
    atomic_store(&a->retention_us, a->opts.log.retention_us);
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
    pthread_mutex_init(&a->hist_lock, NULL);
    pthread_mutex_init(&a->metrics_lock, NULL);
    pthread_mutex_init(&a->cache_lock, NULL);
    pthread_mutex_init(&a->persist_lock, NULL);
    a->hist_an = a->opts.an;
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
fs_analysis_set_topology(struct fs_analysis *a, struct fs_topo *topo)
{
    a->topo = topo;
}

/* The links of the topology's snapshot *snap (taken now) as the analysis names ports,
 * in *links (the caller frees it; its strings are snap's). 0, or -1 (no memory). */
static int
links_of(struct fs_topo *topo, int64_t now_us, struct fs_topo_snap *snap, struct fs_an_link **links,
         size_t *n)
{
    char err[128];
    *links = NULL;
    *n = 0;
    memset(snap, 0, sizeof *snap);
    if (!topo)
        return 0;
    if (fs_topo_snapshot(topo, now_us, snap, err, sizeof err) != 0)
        return -1;
    if (snap->n_links == 0)
        return 0;
    *links = malloc(snap->n_links * sizeof **links);
    if (!*links)
        return -1;
    for (size_t i = 0; i < snap->n_links; i++) {
        const struct fs_topo_link *l = &snap->links[i];
        (*links)[i] = (struct fs_an_link){l->a.node, l->a.port,      l->b.node,
                                          l->b.port, l->a.is_target, l->b.is_target};
    }
    *n = snap->n_links;
    return 0;
}

void
fs_analysis_free(struct fs_analysis *a)
{
    if (!a)
        return;
    fs_host_events_free(a->events);
    fs_episode_log_free(a->log);
    fs_prom_client_free(a->history);
    fs_history_cfg_free(a->history_cfg);
    if (a->token) {
        memset(a->token, 0, strlen(a->token));
        free(a->token);
    }
    free_tokens(a->tokens, a->n_tokens);
    free_ports(a->ports, a->n_ports);
    fs_ring_scan_baselines_clear(&a->base);
    fs_departures_free(a->hist.d);
    for (size_t i = 0; i < a->n_rules; i++)
        free((char *)a->rules[i].name);
    free(a->rules);
    free(a->rule_names);
    pthread_mutex_destroy(&a->rules_lock);
    pthread_mutex_destroy(&a->token_lock);
    pthread_mutex_destroy(&a->run_lock);
    pthread_mutex_destroy(&a->hist_lock);
    pthread_mutex_destroy(&a->metrics_lock);
    for (size_t i = 0; i < a->n_cache; i++) {
        free(a->cache[i].key);
        free(a->cache[i].body);
    }
    pthread_mutex_destroy(&a->cache_lock);
    pthread_mutex_destroy(&a->persist_lock);
    free(a->log_path);
    free(a);
}

/* ---- the episode log on disk ---- */

/* How often a changed log is written: a crash loses at most this much of the log (the
   ring's last hour is rescanned at start anyway). */
#define LOG_SAVE_EVERY_US (60 * US)

int
fs_analysis_log_restore(struct fs_analysis *a, const char *path, int64_t now_us, char *err,
                        size_t errlen)
{
    char *copy = strdup(path);
    if (!copy) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    pthread_mutex_lock(&a->persist_lock);
    free(a->log_path);
    a->log_path = copy;
    atomic_store(&a->log_kept, true);
    int rc = fs_episode_log_load(a->log, path, now_us, err, errlen);
    struct fs_episode_log_stats ls;
    fs_episode_log_stats(a->log, &ls);
    if (rc == 0) {
        a->saved_gen = ls.generation; /* what is on disk */
    } else if (rc < 0) {
        /* Kept aside for a look; the next write starts a new one. */
        size_t n = strlen(path) + 5;
        char *bad = malloc(n);
        if (bad) {
            snprintf(bad, n, "%s.bad", path);
            if (rename(path, bad) == 0 && strlen(err) + 24 < errlen)
                strcat(err, " (moved to .bad)");
            free(bad);
        }
    }
    pthread_mutex_unlock(&a->persist_lock);
    return rc;
}

void
fs_analysis_log_persist(struct fs_analysis *a, int64_t now_us, bool final)
{
    pthread_mutex_lock(&a->persist_lock);
    struct fs_episode_log_stats ls;
    fs_episode_log_stats(a->log, &ls);
    /* The first write is made even of an empty log: the file shows the state directory
       works. */
    if (!a->log_path || (ls.generation == a->saved_gen && atomic_load(&a->saved_us)) ||
        (!final && a->save_tried_us && now_us - a->save_tried_us < LOG_SAVE_EVERY_US)) {
        pthread_mutex_unlock(&a->persist_lock);
        return;
    }
    a->save_tried_us = now_us;
    char err[256] = "";
    uint64_t gen = 0;
    if (fs_episode_log_save(a->log, a->log_path, now_us, err, sizeof err, &gen) == 0) {
        a->saved_gen = gen;
        atomic_store(&a->saved_us, now_us);
    } else {
        atomic_fetch_add(&a->save_errors, 1);
        fs_log(FS_LOG_WARN, "analysis", "episode log not written: %s", err);
    }
    pthread_mutex_unlock(&a->persist_lock);
}

int
fs_analysis_set_history(struct fs_analysis *a, const struct fs_history_cfg *cfg, char *err,
                        size_t errlen)
{
    /* A reload with the same settings keeps the client and what it read (the prefetch
       would read the whole horizon again). */
    pthread_mutex_lock(&a->hist_lock);
    bool same = fs_history_cfg_equal(cfg, a->history_cfg);
    pthread_mutex_unlock(&a->hist_lock);
    if (same)
        return 0;
    struct fs_prom_client *c = NULL;
    struct fs_history_cfg *copy = NULL;
    if (cfg &&
        (!(copy = fs_history_cfg_copy(cfg)) || !(c = fs_prom_client_new(cfg, err, errlen)))) {
        if (!copy)
            snprintf(err, errlen, "out of memory");
        fs_history_cfg_free(copy);
        return -1;
    }
    if (c)
        fs_prom_client_set_cancel(c, &a->hist_cancel);
    pthread_mutex_lock(&a->hist_lock);
    struct fs_prom_client *old = a->history;
    struct fs_history_cfg *old_cfg = a->history_cfg;
    a->history = c;
    a->history_cfg = copy;
    atomic_store(&a->has_history, c != NULL);
    a->history_host[0] = '\0';
    fs_departures_free(a->hist.d); /* another history, or other settings of it */
    a->hist.d = NULL;
    atomic_store(&a->hist_cached_from_us, 0);
    atomic_store(&a->hist_cached_to_us, 0);
    if (cfg) {
        a->history_read = (struct fs_history_read){cfg->step_us, cfg->max_points,
                                                   cfg->scrape_interval_us, cfg->poll_interval_us};
        fs_prom_url_host(cfg->url, a->history_host, sizeof a->history_host);
    }
    pthread_mutex_unlock(&a->hist_lock);
    atomic_fetch_add(&a->cache_gen, 1);
    fs_prom_client_free(old);
    fs_history_cfg_free(old_cfg);
    return 0;
}

void
fs_analysis_opts_default(struct fs_analysis_opts *o)
{
    fs_an_opts_default(&o->an);
    o->horizon_us = 24 * 3600 * US;
    o->request_wait_us = 30 * US;
    o->log.retention_us = 7 * 24 * 3600 * US;
    o->log.memory_limit = UINT64_C(64) << 20;
    o->log.merge_gap_us = o->an.merge_gap_us;
}

/* The same settings (field by field: padding is not compared). */
static bool
opts_equal(const struct fs_analysis_opts *x, const struct fs_analysis_opts *y)
{
    const struct fs_an_opts *p = &x->an, *q = &y->an;
    return p->z_threshold == q->z_threshold && p->prefilter == q->prefilter &&
           p->rel_floor == q->rel_floor && p->baseline_window_us == q->baseline_window_us &&
           p->baseline_step_us == q->baseline_step_us && p->merge_gap_us == q->merge_gap_us &&
           p->max_period_spread == q->max_period_spread &&
           p->min_occurrences == q->min_occurrences && x->horizon_us == y->horizon_us &&
           x->request_wait_us == y->request_wait_us && x->log.retention_us == y->log.retention_us &&
           x->log.memory_limit == y->log.memory_limit;
}

void
fs_analysis_set_opts(struct fs_analysis *a, const struct fs_analysis_opts *o)
{
    pthread_mutex_lock(&a->run_lock);
    /* A reload that changed none of them keeps the baselines and what the history read;
       answers kept are dropped all the same (a reload may change what they depend on
       beside these: the topology, the targets). */
    if (a->opts_gen && opts_equal(&a->opts, o)) {
        pthread_mutex_unlock(&a->run_lock);
        atomic_fetch_add(&a->cache_gen, 1);
        return;
    }
    a->opts = *o;
    a->opts.log.merge_gap_us = o->an.merge_gap_us;
    atomic_store(&a->horizon_us, o->horizon_us);
    atomic_store(&a->retention_us, o->log.retention_us);
    atomic_store(&a->request_wait_us, o->request_wait_us);
    fs_episode_log_set_opts(a->log, &a->opts.log);
    a->opts_gen++;
    /* Baselines of other thresholds and windows: the next refresh makes new ones. */
    fs_ring_scan_baselines_clear(&a->base);
    a->base_log_evicted = 0;
    pthread_mutex_lock(&a->hist_lock);
    a->hist_an = a->opts.an;
    a->hist_gen = a->opts_gen; /* the cache's departures were found with the old options */
    atomic_store(&a->hist_cached_from_us, 0);
    atomic_store(&a->hist_cached_to_us, 0);
    pthread_mutex_unlock(&a->hist_lock);
    pthread_mutex_unlock(&a->run_lock);
    atomic_fetch_add(&a->cache_gen, 1);
}

void
fs_analysis_get_opts(struct fs_analysis *a, struct fs_analysis_opts *o)
{
    pthread_mutex_lock(&a->run_lock);
    *o = a->opts;
    pthread_mutex_unlock(&a->run_lock);
}

void
fs_analysis_get_range_limits(struct fs_analysis *a, int64_t *horizon_us, int64_t *retention_us)
{
    *horizon_us = atomic_load(&a->horizon_us);
    *retention_us = atomic_load(&a->retention_us);
}

/* run_lock for a request: waits at most opts.request_wait_us for the analysis holding it
   (a refresh, or a request reading a slow history), then gives up with
   FS_ANALYSIS_BUSY and the reason in err. */
struct request_deadline {
    struct timespec at; /* CLOCK_REALTIME, pthread_mutex_timedlock's clock */
    int64_t wait_us;
};

static struct request_deadline
request_deadline(struct fs_analysis *a)
{
    struct request_deadline d = {.wait_us = atomic_load(&a->request_wait_us)};
    if (d.wait_us <= 0)
        d.wait_us = 30 * US;
    clock_gettime(CLOCK_REALTIME, &d.at);
    int64_t ns = (int64_t)d.at.tv_nsec + (d.wait_us % US) * 1000;
    d.at.tv_sec += (time_t)(d.wait_us / US + ns / 1000000000);
    d.at.tv_nsec = (long)(ns % 1000000000);
    return d;
}

/* lock (run_lock or hist_lock) for a request, within the request's one deadline. */
static int
lock_for_request(pthread_mutex_t *lock, const struct request_deadline *dl, char *err, size_t errlen)
{
    if (pthread_mutex_timedlock(lock, &dl->at) == 0)
        return 0;
    snprintf(err, errlen,
             "busy: waited analysis.request_timeout (%.3g s) for another analysis or history "
             "read; try again later",
             (double)dl->wait_us / 1e6);
    return FS_ANALYSIS_BUSY;
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
    return fs_analysis_set_tokens(a, token, NULL, 0);
}

int
fs_analysis_set_tokens(struct fs_analysis *a, const char *shared,
                       const struct fs_analysis_token *tokens, size_t n)
{
    char *copy = NULL;
    struct fs_analysis_token *t = NULL;
    if (shared && *shared && !(copy = strdup(shared)))
        return -1;
    if (n && !(t = calloc(n, sizeof *t))) {
        free(copy);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        t[i].quota = tokens[i].quota;
        if (!(t[i].name = strdup(tokens[i].name)) || !(t[i].token = strdup(tokens[i].token)) ||
            !(t[i].hosts = strdup(tokens[i].hosts))) {
            free_tokens(t, n);
            free(copy);
            return -1;
        }
    }
    pthread_mutex_lock(&a->token_lock);
    char *old = a->token;
    struct fs_analysis_token *old_t = a->tokens;
    size_t old_n = a->n_tokens;
    a->token = copy;
    a->tokens = t;
    a->n_tokens = n;
    pthread_mutex_unlock(&a->token_lock);
    if (old) {
        memset(old, 0, strlen(old));
        free(old);
    }
    free_tokens(old_t, old_n);
    return 0;
}

int
fs_analysis_set_flow_rules(struct fs_analysis *a, const struct fs_analysis_flow_rule *rules,
                           size_t n)
{
    struct fs_analysis_flow_rule *copy = calloc(n ? n : 1, sizeof *copy);
    const char **names = calloc(n ? n : 1, sizeof *names);
    if (!copy || !names) {
        free(copy);
        free(names);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        copy[i] = rules[i];
        copy[i].name = strdup(rules[i].name ? rules[i].name : "");
        if (!copy[i].name) {
            for (size_t k = 0; k < i; k++)
                free((char *)copy[k].name);
            free(copy);
            free(names);
            return -1;
        }
    }
    pthread_mutex_lock(&a->rules_lock);
    struct fs_analysis_flow_rule *old = a->rules;
    const char **old_names = a->rule_names;
    size_t old_n = a->n_rules;
    a->rules = copy;
    a->rule_names = names;
    a->n_rules = n;
    pthread_mutex_unlock(&a->rules_lock);
    atomic_fetch_add(&a->cache_gen, 1);
    for (size_t i = 0; i < old_n; i++)
        free((char *)old[i].name);
    free(old);
    free(old_names);
    return 0;
}

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

enum fs_analysis_auth
fs_analysis_check_token(struct fs_analysis *a, const char *authorization)
{
    return fs_analysis_check_poster(a, authorization, NULL);
}

enum fs_analysis_auth
fs_analysis_check_poster(struct fs_analysis *a, const char *authorization,
                         struct fs_analysis_poster *who)
{
    pthread_mutex_lock(&a->token_lock);
    bool configured = a->token != NULL || a->n_tokens > 0;
    bool ok = false;
    if (configured && authorization && strncmp(authorization, "Bearer ", 7) == 0) {
        const char *t = authorization + 7;
        while (*t == ' ')
            t++;
        /* Every token is compared, whichever matches, so that the time taken tells
           nothing of which one did. */
        long match = -2;
        if (a->token && token_equal(t, a->token))
            match = -1;
        for (size_t i = 0; i < a->n_tokens; i++)
            if (token_equal(t, a->tokens[i].token) && match == -2)
                match = (long)i;
        ok = match != -2;
        if (ok && who) {
            *who = (struct fs_analysis_poster){0};
            if (match >= 0) {
                const struct fs_analysis_token *k = &a->tokens[match];
                snprintf(who->name, sizeof who->name, "%s", k->name);
                snprintf(who->hosts, sizeof who->hosts, "%s", k->hosts);
                who->quota = k->quota;
            }
        }
    }
    pthread_mutex_unlock(&a->token_lock);
    if (!configured)
        return FS_ANALYSIS_AUTH_NO_TOKEN;
    return ok ? FS_ANALYSIS_AUTH_OK : FS_ANALYSIS_AUTH_WRONG;
}

static bool
in_range(long v, uint16_t lo, uint16_t hi)
{
    return (lo == 0 && hi == 0) || (v >= lo && v <= hi);
}

struct other_ctx {
    struct fs_analysis *a; /* rules_lock held */
    const char *kind;
    fs_analysis_other_event_cb cb;
    void *arg;
};

/* The flow rules an event with sport/dport attrs falls under (protocol from its kind),
   into the context's names. */
static void
match_flow_rules(struct fs_analysis *a, const struct fs_host_event *e,
                 struct fs_analysis_flow_match *m)
{
    long sport = -1, dport = -1;
    *m = (struct fs_analysis_flow_match){.names = a->rule_names};
    for (uint32_t i = 0; i < e->n_attrs; i++) {
        if (strcmp(e->attrs[i].key, "sport") == 0)
            sport = strtol(e->attrs[i].value, NULL, 10);
        else if (strcmp(e->attrs[i].key, "dport") == 0)
            dport = strtol(e->attrs[i].value, NULL, 10);
    }
    if (sport < 0 && dport < 0)
        return;
    m->has_ports = true;
    int proto = strstr(e->kind, "tcp") ? 1 : strstr(e->kind, "udp") ? 2 : 0;
    for (size_t r = 0; r < a->n_rules; r++) {
        const struct fs_analysis_flow_rule *fr = &a->rules[r];
        if (fr->protocol != 0 && fr->protocol != proto)
            continue;
        if (!in_range(sport, fr->src_lo, fr->src_hi) || !in_range(dport, fr->dst_lo, fr->dst_hi))
            continue;
        a->rule_names[m->n++] = fr->name;
    }
}

static int
other_cb(void *arg_, const struct fs_host_event *e)
{
    struct other_ctx *o = arg_;
    if (fs_host_event_kind_matches(e->kind, o->kind))
        return 0;
    struct fs_analysis_flow_match m;
    match_flow_rules(o->a, e, &m);
    return o->cb(o->arg, e, &m);
}

void
fs_analysis_foreach_other_event(struct fs_analysis *a, int64_t start_us, int64_t end_us,
                                const char *kind, fs_analysis_other_event_cb cb, void *arg)
{
    struct other_ctx o = {a, kind, cb, arg};
    pthread_mutex_lock(&a->rules_lock);
    fs_host_events_foreach(a->events, start_us * 1000, end_us * 1000, NULL, other_cb, &o);
    pthread_mutex_unlock(&a->rules_lock);
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

/* ---- host events of a range ---- */

/* The host events of a kind that have a duration, copied (the store's lock is not held
   while they are analysed), with their (kind, name) groups. */
struct ev_list {
    struct fs_analysis_event *e;
    size_t n, cap;
    bool failed;
    const char *name; /* filter */
    bool dump_time;   /* keep events placed at their dump time (placement=dump_time) */
    size_t left_out;  /* events left out for that */
    /* (kind, name) groups for the percentile */
    char **gkeys;
    size_t n_groups;
    bool times_only; /* the times, offsets and groups only (no strings per event: the
                        slow windows of the refresh, over every event of the horizon) */
    char **own_keys; /* times_only: the groups' (kind, name), owned */
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
    struct fs_analysis_event *c = &l->e[l->n];
    memset(c, 0, sizeof *c);
    if (!l->times_only) {
        c->host = strdup(e->host);
        c->kind = strdup(e->kind);
        c->name = strdup(e->name);
        c->poster = strdup(e->poster ? e->poster : "");
    }
    c->start_ns = e->start_ns;
    c->end_ns = e->end_ns;
    c->host_offset_ns = e->host_offset_ns;
    c->host_offset_uncertainty_ns = e->host_offset_uncertainty_ns;
    l->n++;
    if (!l->times_only && (!c->host || !c->kind || !c->name || !c->poster)) {
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
        if (l->times_only) {
            void *q = realloc(l->own_keys, (l->n_groups + 1) * 2 * sizeof *l->own_keys);
            if (!q) {
                l->failed = true;
                return 1;
            }
            l->own_keys = q;
            l->own_keys[2 * g] = strdup(e->kind);
            l->own_keys[2 * g + 1] = strdup(e->name);
            l->gkeys[2 * g] = l->own_keys[2 * g];
            l->gkeys[2 * g + 1] = l->own_keys[2 * g + 1];
            l->n_groups++;
            if (!l->gkeys[2 * g] || !l->gkeys[2 * g + 1]) {
                l->failed = true;
                return 1;
            }
        } else {
            l->gkeys[2 * g] = c->kind;
            l->gkeys[2 * g + 1] = c->name;
            l->n_groups++;
        }
    }
    c->group = g;
    return 0;
}

static void
free_events(struct fs_analysis_event *e, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(e[i].host);
        free(e[i].kind);
        free(e[i].name);
        free(e[i].poster);
    }
    free(e);
}

static void
free_ev_list(struct ev_list *l)
{
    free_events(l->e, l->n);
    for (size_t g = 0; l->own_keys && g < 2 * l->n_groups; g++)
        free(l->own_keys[g]);
    free(l->own_keys);
    free(l->gkeys);
}

static int
cmp_i64_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x > y ? -1 : x < y;
}

/* ---- departures: the ring, the episode log, the history ---- */

struct targets {
    char **t;
    int64_t *poll_us; /* the longest interval each is polled at */
    size_t n;
    bool failed;
};

static int
target_cb(void *arg_, const struct fs_instance_info *in)
{
    struct targets *ts = arg_;
    for (size_t i = 0; i < ts->n; i++)
        if (strcmp(ts->t[i], in->target) == 0) {
            if (in->interval_us > ts->poll_us[i])
                ts->poll_us[i] = in->interval_us;
            return 0;
        }
    void *q = realloc(ts->poll_us, (ts->n + 1) * sizeof *ts->poll_us);
    if (q)
        ts->poll_us = q;
    void *p = q ? realloc(ts->t, (ts->n + 1) * sizeof *ts->t) : NULL;
    if (!p || !(((char **)p)[ts->n] = strdup(in->target))) {
        if (p)
            ts->t = p;
        ts->failed = true;
        return 1;
    }
    ts->t = p;
    ts->poll_us[ts->n++] = in->interval_us;
    return 0;
}

static bool
is_local_target(void *arg_, const char *target, int64_t *poll_us)
{
    const struct targets *ts = arg_;
    for (size_t i = 0; i < ts->n; i++)
        if (strcmp(ts->t[i], target) == 0) {
            if (ts->poll_us[i] > 0)
                *poll_us = ts->poll_us[i];
            return true;
        }
    return false;
}

/* How far back from the cache's end a request reads the history again: samples a TSDB
   takes in late (remote_write retrying, a scrape's own delay), and runs the cache cut
   at its end. */
#define HIST_REREAD_US (5 * 60 * US)

/* Who reads the history: a request (answers a range, extends the cache), the restart's
   backfill of this instance's own episodes (never cached), the prefetch (fills and keeps
   the cache over the horizon). */
enum hist_reader { HIST_REQUEST, HIST_BACKFILL, HIST_PREFETCH };

/* With analysis.history.prefetch, fs_analysis_prefetch_history keeps the cache over the
   horizon and is its only writer from scratch: a request's read of a range the cache does
   not cover is not kept, one that extends it is. (hist_lock) */
static bool
prefetch_on(const struct fs_analysis *a)
{
    return a->history_cfg && a->history_cfg->prefetch;
}

/* What the history's samples of this instance's own targets are read before: its data's
   start (all of them while it has none). */
static int64_t
hist_local_before(struct fs_analysis *a)
{
    int64_t since_us = atomic_load(&a->data_since_us);
    return since_us ? since_us : INT64_MAX;
}

/* Whether the cache was read with the options and the local data start in force. */
static bool
hist_valid(const struct fs_analysis *a, int64_t local_before)
{
    const struct hist_cache *hc = &a->hist;
    return hc->d && hc->gen == a->hist_gen && hc->local_before == local_before;
}

/* Whether it is valid and holds start (to within a few seconds: /correlate widens its
   range by the correlation's lead). */
static bool
hist_holds(const struct fs_analysis *a, int64_t start, int64_t local_before)
{
    const struct hist_cache *hc = &a->hist;
    return hist_valid(a, local_before) && start >= hc->from - 5 * US && start < hc->to;
}

/* The history's departures over [start, end] into h (unfinished; the caller finishes),
   with its scan's info. 0, or -1 with hu->info.error (what was read stays). */
static int
scan_history(struct fs_analysis *a, struct fs_departures *h, const struct targets *ts,
             int64_t start, int64_t end, int64_t local_before, bool only_local,
             struct fs_history_scan_info *info)
{
    int rc = fs_history_scan(a->history, &a->history_read, h, start, end, is_local_target,
                             (void *)ts, local_before, only_local, info);
    if (rc != 0)
        fs_log(FS_LOG_WARN, "analysis", "%s", info->error);
    return rc;
}

/*
 * Adds what analysis.history holds that this instance does not: its targets' samples
 * before its own data began, and every other target's (other shards). A request reads
 * only what the history got since the previous request's read (from HIST_REREAD_US before
 * its end), its earlier departures coming from the cache: a request over the last 8 h
 * of a pod then reads minutes, not hours. Answers say how much came from the cache
 * ("cached_until").
 */
static void
add_history(struct fs_analysis *a, struct fs_store *st, struct fs_departures *d, int64_t start,
            int64_t end, enum hist_reader who, struct fs_analysis_history_use *hu)
{
    bool only_local = who == HIST_BACKFILL;
    struct targets ts = {0};
    struct fs_departures *fresh = NULL, *merged = NULL;
    hu->used = true;
    snprintf(hu->server, sizeof hu->server, "%s", a->history_host);
    fs_store_foreach_instance(st, target_cb, &ts);
    int64_t local_before = hist_local_before(a);
    struct hist_cache *hc = &a->hist;
    if (ts.failed) {
        snprintf(hu->info.error, sizeof hu->info.error, "out of memory");
        goto out;
    }
    if (only_local) { /* the backfill: once, never cached (a failure is logged and stated) */
        (void)scan_history(a, d, &ts, start, end, local_before, true, &hu->info);
        goto out;
    }
    bool valid = hist_valid(a, local_before), holds = hist_holds(a, start, local_before);
    /* A range the cache holds, ending before what a read would take again: nothing to
       read. Its runs that end in the range or later and start before its end, as a read
       of the range would find them (one in progress at the end then with its real end).
       Said in the answer as a read of nothing up to its end, with the last read's step
       and poll counts (their warning holds for what is kept). */
    if (holds && who == HIST_REQUEST && end <= hc->to - HIST_REREAD_US) {
        hu->info = (struct fs_history_scan_info){.step_us = hc->last.step_us,
                                                 .polls_stored = hc->last.polls_stored,
                                                 .polls_unstored = hc->last.polls_unstored,
                                                 .earliest_us = hc->earliest,
                                                 .cached_until_us = end};
        if (d && fs_departures_absorb_span(d, hc->d, start, INT64_MAX, end) != 0)
            snprintf(hu->info.error, sizeof hu->info.error, "out of memory");
        goto out;
    }
    /* Warm when the cache holds the start and the end is not before the cache's. */
    bool warm = holds && end + HIST_REREAD_US >= hc->to;
    /* What the cache becomes (see prefetch_on): the prefetch keeps the horizon only. */
    bool keep = warm || who == HIST_PREFETCH || !prefetch_on(a) || !valid;
    int64_t keep_from = who == HIST_PREFETCH ? start : INT64_MIN;
    int64_t from = warm ? hc->to - HIST_REREAD_US : start;
    if (from < start)
        from = start;
    fresh = fs_departures_new(&a->hist_an, from, end);
    if (!fresh) {
        snprintf(hu->info.error, sizeof hu->info.error, "out of memory");
        goto out;
    }
    bool failed = scan_history(a, fresh, &ts, from, end, local_before, false, &hu->info) != 0;
    /* The cache from now on: its runs before the re-read, and the re-read's. A failed
       read is not kept (the next request reads again). */
    int64_t merged_from = !warm ? from : hc->from > keep_from ? hc->from : keep_from;
    if (!failed && keep && (merged = fs_departures_new(&a->hist_an, merged_from, end))) {
        if ((warm && fs_departures_absorb(merged, hc->d, keep_from, from) != 0) ||
            fs_departures_absorb(merged, fresh, from, INT64_MAX) != 0 ||
            fs_departures_finish(merged) != 0) {
            fs_departures_free(merged);
            merged = NULL;
        }
    }
    if (warm) { /* the counts are the re-read's; the cache holds the rest */
        hu->info.cached_until_us = from;
        if (hc->earliest && (!hu->info.earliest_us || hc->earliest < hu->info.earliest_us))
            hu->info.earliest_us = hc->earliest;
    }
    /* What the request gets: the cache's runs in its range, or what was just read. */
    if (d && fs_departures_absorb(d, merged ? merged : fresh, start, INT64_MAX) != 0) {
        snprintf(hu->info.error, sizeof hu->info.error, "out of memory");
        fs_departures_free(merged);
        merged = NULL;
    }
    if (merged) {
        fs_departures_free(hc->d);
        *hc = (struct hist_cache){merged,       merged->start_us,     end,
                                  local_before, hu->info.earliest_us, a->hist_gen,
                                  hu->info};
        atomic_store(&a->hist_cached_from_us, hc->from);
        atomic_store(&a->hist_cached_to_us, hc->to);
        merged = NULL;
    }
out:
    fs_departures_free(fresh);
    fs_departures_free(merged);
    for (size_t i = 0; i < ts.n; i++)
        free(ts.t[i]);
    free(ts.t);
    free(ts.poll_us);
}

/* The prefetch's reach before the horizon: a request for "the last analysis.horizon"
   ending a few minutes ago (a round minute, the scrape's delay) still starts inside. */
#define PREFETCH_MARGIN_US (10 * 60 * US)
/* One prefetch read: what a request may wait for (hist_lock is released between them),
   and short enough that the first reading keeps the configured step on a big fleet (its
   points budget coarsens the step of a long read). */
#define PREFETCH_CHUNK_US (2 * 3600 * US)
/* Once the horizon is read, what came since is read when the kept end is this old: a
   request reaching the present reads from 5 minutes before that end anyway, and a read
   costs the TSDB about the same for 30 s or 2 minutes more (its cost is per series:
   10,368 series took 1.1 s of Prometheus's CPU a read). */
#define PREFETCH_EVERY_US (2 * 60 * US)

void
fs_analysis_cancel_history(struct fs_analysis *a)
{
    atomic_store(&a->hist_cancel, true);
}

int
fs_analysis_prefetch_history(struct fs_analysis *a, struct fs_store *st, int64_t now_us, bool *more)
{
    *more = false;
    if (!atomic_load(&a->has_history))
        return 0;
    int64_t start = now_us - atomic_load(&a->horizon_us) - PREFETCH_MARGIN_US;
    struct fs_analysis_history_use hu = {0};
    pthread_mutex_lock(&a->hist_lock);
    if (!a->history || !prefetch_on(a)) {
        pthread_mutex_unlock(&a->hist_lock);
        return 0;
    }
    const struct hist_cache *hc = &a->hist;
    bool covered = hist_holds(a, start, hist_local_before(a));
    if (covered && now_us - hc->to < PREFETCH_EVERY_US) {
        pthread_mutex_unlock(&a->hist_lock);
        return 0;
    }
    int64_t end = (covered ? hc->to : start) + PREFETCH_CHUNK_US;
    if (end < now_us)
        *more = true;
    else
        end = now_us;
    add_history(a, st, NULL, start, end, HIST_PREFETCH, &hu);
    pthread_mutex_unlock(&a->hist_lock);
    if (hu.info.error[0]) {
        *more = false; /* the next refresh tries again */
        return -1;
    }
    return 0;
}

/* Once, before the first scan is logged (the log only appends after its latest run of a
   series): this instance's own episodes from before its data began (a restart), read
   from the history over the horizon, so the incident metrics and their alert do not
   wait for three new occurrences. */
static void
backfill_log(struct fs_analysis *a, struct fs_store *st, int64_t now_us)
{
    struct fs_analysis_history_use hu = {0};
    int64_t from = now_us - a->opts.horizon_us, since_us = atomic_load(&a->data_since_us);
    a->log_backfilled = true;
    if (from >= since_us)
        return;
    struct fs_departures *b = fs_departures_new(&a->opts.an, from, since_us);
    if (!b) {
        fs_log(FS_LOG_WARN, "analysis", "history backfill: out of memory");
        return;
    }
    pthread_mutex_lock(&a->hist_lock); /* inside run_lock: the one order both are held in */
    if (a->history)
        add_history(a, st, b, from, since_us, HIST_BACKFILL, &hu);
    pthread_mutex_unlock(&a->hist_lock);
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
    const struct fs_ring_scan_baselines *bc = &a->base;
    struct fs_episode_log_stats ls;
    *oom = false;
    if (!bc->at_us || now_us - bc->at_us > BASE_MAX_AGE_US || bc->at_us > now_us ||
        end - start > a->opts.log.retention_us)
        return NULL;
    fs_episode_log_stats(a->log, &ls);
    if (ls.evicted_memory != a->base_log_evicted)
        return NULL;
    size_t scanned = bc->n;
    int64_t tail_lo = bc->at_us - a->opts.an.merge_gap_us;
    if (tail_lo < start)
        tail_lo = start;
    if (end > tail_lo) {
        struct fs_departures *t =
            fs_ring_scan(st, &a->opts.an, tail_lo, end, bc, NULL, err, errlen);
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

/* Departures over [start, end] (under run_lock): see departures_from_log, else a scan of
   what the ring holds (or the given one, prescanned over it) and the log for what is
   older; with hu, analysis.history for what neither holds. With record, what the scan
   found is logged first (the periodic refresh, and queries reaching the present). */
static struct fs_departures *
departures_with_log(struct fs_analysis *a, struct fs_store *st, int64_t start, int64_t end,
                    bool record, struct fs_analysis_history_use *hu,
                    const struct fs_departures *hist, int64_t now_us,
                    struct fs_departures *prescanned, char *err, size_t errlen)
{
    struct fs_ring_stats rs;
    uint64_t limit;
    fs_store_ring_stats(st, &rs, &limit);
    int64_t ring_lo = rs.samples ? rs.oldest_ts_us : end;
    int64_t data_since = atomic_load(&a->data_since_us);
    if (rs.samples && (data_since == 0 || rs.oldest_ts_us < data_since))
        atomic_store(&a->data_since_us, data_since = rs.oldest_ts_us);
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
        d = fs_ring_scan(st, &a->opts.an, scan_lo, end, NULL, NULL, err, errlen);
    } else if (!d && (d = fs_departures_new(&a->opts.an, start, end)) &&
               fs_departures_finish(d) != 0) {
        fs_departures_free(d);
        d = NULL;
    }
    if (!d)
        return NULL;
    if (!from_log)
        d->ring_scan_start_us = scan_lo < end ? scan_lo : end;
    if (record && atomic_load(&a->has_history) && !a->log_backfilled && data_since)
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
    int64_t since = data_since ? data_since : start;
    if (hu && hist) {
        if (fs_departures_absorb(d, hist, start, INT64_MAX) != 0 || fs_departures_finish(d) != 0) {
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

/* The incident metrics from now on: the ports of r's recurring groups. */
static int
remember_metrics(struct fs_analysis *a, const struct fs_departures *d,
                 const struct fs_incident_report *r)
{
    size_t total = 0;
    for (size_t i = 0; i < r->n_groups; i++)
        total += r->groups[i].n_series;
    struct metric_port *p = calloc(total ? total : 1, sizeof *p);
    if (!p)
        return -1;
    size_t k = 0;
    int rc = 0;
    /* The bar an incident clears to be exported (and arm FabricIncidentDue): its chance
       test (incidents.h), and, where the hosts report slow events, a slow event in at
       least half of its occurrences: a periodic job the stalled hosts never notice is
       not the stall to capture. */
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

/* Per series of d: the recurring train it belongs to among the exported incidents (what
   fs_correlate needs to keep a coincidentally paused stall origin first). Returns a
   malloc'ed array (the caller's), or NULL: none exported, or no memory (then none used). */
static struct fs_corr_train *
trains_of(struct fs_analysis *a, const struct fs_departures *d)
{
    struct fs_corr_train *t = NULL;
    pthread_mutex_lock(&a->metrics_lock);
    if (a->n_ports == 0 || d->n_series == 0 || !(t = calloc(d->n_series, sizeof *t)))
        goto out;
    for (size_t i = 0; i < d->n_series; i++) {
        const struct fs_an_series_ref *s = &d->series[i];
        for (size_t k = 0; k < a->n_ports; k++) {
            const struct metric_port *p = &a->ports[k];
            if (strcmp(p->metric, s->metric) || strcmp(p->target, s->target) ||
                strcmp(p->interface, s->interface) || strcmp(p->tc, s->tc) ||
                strcmp(p->rule, s->rule) || !(p->period_s > 0))
                continue;
            /* its occurrences' own spread, and 2% of the period: a next stall is placed
               within 2% (README) */
            t[i].period_us = p->period_s * 1e6;
            t[i].next_us = (int64_t)llround(p->next_s * 1e6);
            t[i].tol_us = (int64_t)llround((4 * p->spread_s + 0.02 * p->period_s) * 1e6);
            break;
        }
    }
out:
    pthread_mutex_unlock(&a->metrics_lock);
    return t;
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
   threshold of their (kind, name) as in a correlation (dump-time placements left out). 0,
   or -1 on no memory. */
static int
find_slow_windows(struct fs_analysis *a, int64_t start, int64_t end, const char *kind, double pct,
                  double factor, struct slow_windows *sw)
{
    memset(sw, 0, sizeof *sw);
    struct ev_list evs = {.times_only = true};
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
        int64_t unc = evs.e[i].host_offset_uncertainty_ns > 0
                          ? evs.e[i].host_offset_uncertainty_ns / 1000
                          : 0;
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

/* The slow windows matched to r's groups (which are reordered: largest share of
   occurrences with a slow event first). 0, or -1 on no memory. */
static int
match_host_events(struct fs_incident_report *r, const struct slow_windows *sw, int64_t margin_us,
                  struct fs_analysis_host_match *hm)
{
    memset(hm, 0, sizeof *hm);
    hm->considered = sw->considered;
    hm->n_slow = sw->n;
    hm->left_out = sw->left_out;
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

/* ---- correlate ---- */

static int
cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Clears the windows' paths, freeing each array once (windows may share one). */
static void
free_paths(struct fs_corr_window *w, size_t n)
{
    const struct fs_an_port *prev = NULL;
    for (size_t i = 0; i < n; i++) {
        if (w[i].path && w[i].path != prev)
            free((void *)w[i].path);
        prev = w[i].path ? w[i].path : prev;
        w[i].path = NULL;
    }
}

/* Each slow window's slow ranks (the distinct hosts of the slow windows overlapping it,
 * widened as the correlation widens them) into (*ranks)[i], and, with links, the ports on
 * their paths into w[i].path (fs_an_path_ports; consecutive windows of the same ranks
 * share one array: free_paths). 0 or -1 (memory; nothing left allocated). */
static int
windows_paths(struct fs_corr_window *w, size_t nw, const struct fs_analysis_event *ev,
              const struct fs_corr_opts *co, const struct fs_an_link *links, size_t n_links,
              size_t **ranks)
{
    const char **hosts = malloc((nw ? nw : 1) * sizeof *hosts);
    const char **prev = malloc((nw ? nw : 1) * sizeof *prev);
    size_t n_prev = 0;
    int rc = -1;
    *ranks = calloc(nw ? nw : 1, sizeof **ranks);
    if (!hosts || !prev || !*ranks)
        goto out;
    for (size_t i = 0; i < nw; i++) {
        size_t nh = 0;
        int64_t lo = w[i].start_us - co->lead_us - w[i].uncertainty_us,
                hi = w[i].end_us + co->lag_us + w[i].uncertainty_us;
        for (size_t j = 0; j < nw; j++)
            if (w[j].start_us - w[j].uncertainty_us <= hi &&
                w[j].end_us + w[j].uncertainty_us >= lo)
                hosts[nh++] = ev[w[j].ref].host;
        qsort(hosts, nh, sizeof *hosts, cmp_cstr);
        size_t m = 0;
        for (size_t k = 0; k < nh; k++)
            if (!m || strcmp(hosts[k], hosts[m - 1]) != 0)
                hosts[m++] = hosts[k];
        (*ranks)[i] = m;
        if (n_links == 0)
            continue;
        bool same = i > 0 && m == n_prev;
        for (size_t k = 0; same && k < m; k++)
            same = !strcmp(hosts[k], prev[k]);
        if (same) {
            w[i].path = w[i - 1].path;
            w[i].n_path = w[i - 1].n_path;
            continue;
        }
        struct fs_an_port *path;
        if (fs_an_path_ports(links, n_links, hosts, m, &path, &w[i].n_path) != 0)
            goto out;
        w[i].path = path;
        memcpy(prev, hosts, m * sizeof *hosts);
        n_prev = m;
    }
    rc = 0;
out:
    if (rc != 0) {
        free_paths(w, nw);
        free(*ranks);
        *ranks = NULL;
    }
    free(hosts);
    free(prev);
    return rc;
}

/* What analysis.history holds over [start, end] for a request, into *out (finished, the
   caller frees it; NULL when no history is configured) with hu filled (an unreadable
   history is stated in hu, *out then empty). Read holding hist_lock only (see struct
   fs_analysis). 0, FS_ANALYSIS_BUSY past the request's deadline, or -1 (out of memory). */
static int
request_history(struct fs_analysis *a, struct fs_store *st, int64_t start, int64_t end,
                const struct request_deadline *dl, struct fs_analysis_history_use *hu,
                struct fs_departures **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!atomic_load(&a->has_history))
        return 0;
    if (lock_for_request(&a->hist_lock, dl, err, errlen) != 0)
        return FS_ANALYSIS_BUSY;
    int rc = 0;
    if (a->history) {
        struct fs_departures *h = fs_departures_new(&a->hist_an, start, end);
        if (h) {
            add_history(a, st, h, start, end, HIST_REQUEST, hu);
            if (fs_departures_finish(h) != 0) {
                fs_departures_free(h);
                h = NULL;
            }
        }
        if (!(*out = h)) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
        }
    }
    pthread_mutex_unlock(&a->hist_lock);
    return rc;
}

int
fs_analysis_run_correlate(struct fs_analysis *a, struct fs_store *st,
                          const struct fs_analysis_correlate_req *req, int64_t now_us,
                          struct fs_analysis_correlation **out, char *err, size_t errlen)
{
    struct fs_analysis_correlation *c = calloc(1, sizeof *c);
    struct fs_corr_window *w = malloc(FS_ANALYSIS_MAX_WINDOWS * sizeof *w);
    struct ev_list evs = {0};
    int64_t *dur = NULL;
    size_t *grp = NULL;
    bool *is_slow = NULL;
    size_t nw = 0;
    int rc = -1;
    *out = NULL;
    if (!c || !w)
        goto done;
    evs.name = req->name;
    evs.dump_time = req->dump_time;
    if (req->n_windows) {
        nw = req->n_windows < FS_ANALYSIS_MAX_WINDOWS ? req->n_windows : FS_ANALYSIS_MAX_WINDOWS;
        memcpy(w, req->windows, nw * sizeof *w);
        for (size_t i = 0; i < nw; i++) { /* explicit windows have no slow ranks */
            w[i].path = NULL;
            w[i].n_path = 0;
        }
    } else {
        /* The slow host events of the range. */
        fs_host_events_foreach(a->events, req->start_us * 1000, req->end_us * 1000, req->kind,
                               copy_ev_cb, &evs);
        if (evs.failed)
            goto done;
        dur = malloc((evs.n ? evs.n : 1) * sizeof *dur);
        grp = malloc((evs.n ? evs.n : 1) * sizeof *grp);
        is_slow = malloc((evs.n ? evs.n : 1) * sizeof *is_slow);
        if (!dur || !grp || !is_slow)
            goto done;
        for (size_t i = 0; i < evs.n; i++) {
            dur[i] = evs.e[i].end_ns - evs.e[i].start_ns;
            grp[i] = evs.e[i].group;
        }
        if (fs_corr_mark_slow(dur, grp, evs.n, req->pct, req->factor, is_slow) != 0)
            goto done;
        /* At most FS_ANALYSIS_MAX_WINDOWS: the slowest, then back in time order. */
        size_t n_slow = 0;
        for (size_t i = 0; i < evs.n; i++)
            n_slow += is_slow[i];
        int64_t min_dur = INT64_MIN;
        if (n_slow > FS_ANALYSIS_MAX_WINDOWS) {
            int64_t *sd = malloc(n_slow * sizeof *sd);
            if (sd) {
                size_t k = 0;
                for (size_t i = 0; i < evs.n; i++)
                    if (is_slow[i])
                        sd[k++] = dur[i];
                qsort(sd, n_slow, sizeof *sd, cmp_i64_desc);
                min_dur = sd[FS_ANALYSIS_MAX_WINDOWS - 1];
                free(sd);
            }
        }
        for (size_t i = 0; i < evs.n && nw < FS_ANALYSIS_MAX_WINDOWS; i++)
            if (is_slow[i] && dur[i] >= min_dur)
                w[nw++] = (struct fs_corr_window){.start_us = evs.e[i].start_ns / 1000,
                                                  .end_us = evs.e[i].end_ns / 1000,
                                                  .uncertainty_us =
                                                      evs.e[i].host_offset_uncertainty_ns / 1000,
                                                  .ref = i};
    }
    struct fs_corr_opts co = req->co;
    struct fs_topo_snap snap;
    struct fs_an_link *links = NULL;
    int crc = -1;
    if (links_of(a->topo, now_us, &snap, &links, &co.n_links) != 0 ||
        (!req->n_windows &&
         windows_paths(w, nw, evs.e, &co, links, co.n_links, &c->slow_ranks) != 0)) {
        free(links);
        fs_topo_snap_free(&snap);
        goto done;
    }
    co.links = links;
    struct request_deadline dl = request_deadline(a);
    struct fs_departures *hist = NULL;
    int64_t from = req->start_us - req->co.lead_us, to = req->end_us + req->co.lag_us;
    int hrc = request_history(a, st, from, to, &dl, &c->history, &hist, err, errlen);
    if (hrc != 0 || lock_for_request(&a->run_lock, &dl, err, errlen) != 0) {
        fs_departures_free(hist);
        free_paths(w, nw);
        free(links);
        fs_topo_snap_free(&snap);
        rc = hrc == -1 ? -1 : FS_ANALYSIS_BUSY;
        goto done;
    }
    /* The ring for what it holds, the episode log for older windows, the history. */
    c->departures =
        departures_with_log(a, st, from, to, false, &c->history, hist, now_us, NULL, err, errlen);
    fs_departures_free(hist);
    struct fs_corr_train *trains = c->departures ? trains_of(a, c->departures) : NULL;
    co.trains = trains;
    crc = c->departures ? fs_correlate(c->departures, w, nw, &co, &c->report) : -1;
    free(trains);
    pthread_mutex_unlock(&a->run_lock);
    free_paths(w, nw);
    free(links);
    fs_topo_snap_free(&snap);
    if (crc != 0)
        goto done;
    c->windows = w;
    c->n_windows = nw;
    w = NULL;
    c->events = evs.e;
    c->n_events = evs.n;
    evs.e = NULL;
    evs.n = 0;
    c->left_out_dump_time = evs.left_out;
    *out = c;
    c = NULL;
    rc = 0;
done:
    if (rc != 0 && rc != FS_ANALYSIS_BUSY)
        snprintf(err, errlen, "out of memory");
    free(dur);
    free(grp);
    free(is_slow);
    free_ev_list(&evs);
    free(w);
    fs_analysis_correlation_free(c);
    return rc;
}

void
fs_analysis_correlation_free(struct fs_analysis_correlation *c)
{
    if (!c)
        return;
    fs_corr_report_free(c->report);
    fs_departures_free(c->departures);
    free_events(c->events, c->n_events);
    free(c->windows);
    free(c->slow_ranks);
    free(c);
}

/* ---- incidents ---- */

int
fs_analysis_run_incidents(struct fs_analysis *a, struct fs_store *st,
                          const struct fs_analysis_incidents_req *req, int64_t now_us,
                          struct fs_analysis_incident_findings **out, char *err, size_t errlen)
{
    struct fs_analysis_incident_findings *f = calloc(1, sizeof *f);
    struct slow_windows sw = {0};
    int rc = -1;
    *out = NULL;
    /* The hosts' slow windows first: the recurrence search weighs them (incidents.h). */
    if (!f || find_slow_windows(a, req->start_us, req->end_us, req->kind, req->pct, req->factor,
                                &sw) != 0)
        goto done;
    struct request_deadline dl = request_deadline(a);
    struct fs_departures *hist = NULL;
    int hrc =
        request_history(a, st, req->start_us, req->end_us, &dl, &f->history, &hist, err, errlen);
    if (hrc != 0 || lock_for_request(&a->run_lock, &dl, err, errlen) != 0) {
        fs_departures_free(hist);
        rc = hrc == -1 ? -1 : FS_ANALYSIS_BUSY;
        goto done;
    }
    bool present = req->end_us >= now_us - 60 * US;
    f->departures = departures_with_log(a, st, req->start_us, req->end_us, present, &f->history,
                                        hist, now_us, NULL, err, errlen);
    fs_departures_free(hist);
    /* The next occurrence is predicted after the range's end, or now if that is later. */
    int64_t after = req->end_us > now_us ? req->end_us : now_us;
    int64_t margin_us = a->opts.an.merge_gap_us;
    struct fs_incident_hosts ih = {sw.start, sw.end, sw.n, margin_us};
    int frc = f->departures ? fs_incidents_find_hosts(f->departures, after, &ih, &f->report) : -1;
    pthread_mutex_unlock(&a->run_lock);
    if (frc != 0)
        goto done;
    /* The metrics are this instance's own (each shard exports its targets' incidents). */
    if (present && !f->history.used)
        (void)remember_metrics(a, f->departures, f->report);
    if (match_host_events(f->report, &sw, margin_us, &f->host) != 0)
        goto done;
    fs_episode_log_stats(a->log, &f->log);
    *out = f;
    f = NULL;
    rc = 0;
done:
    if (rc != 0 && rc != FS_ANALYSIS_BUSY)
        snprintf(err, errlen, "out of memory");
    free_slow_windows(&sw);
    fs_analysis_incident_findings_free(f);
    return rc;
}

void
fs_analysis_incident_findings_free(struct fs_analysis_incident_findings *f)
{
    if (!f)
        return;
    free(f->host.occ_with_slow);
    free(f->host.slow_during);
    fs_incident_report_free(f->report);
    fs_departures_free(f->departures);
    free(f);
}

/* ---- refresh and metrics ---- */

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
        ls.evicted_memory == a->base_log_evicted && a->opts.horizon_us <= a->opts.log.retention_us;
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
    struct fs_ring_scan_baselines bc = {0};
    struct fs_departures *full =
        scan_lo < now_us ? fs_ring_scan(st, &an, scan_lo, now_us, NULL, &bc, err, sizeof err)
                         : NULL;

    pthread_mutex_lock(&a->run_lock);
    if (gen != a->opts_gen) { /* new thresholds meanwhile: the scan used the old ones */
        fs_departures_free(full);
        full = NULL;
        fs_ring_scan_baselines_clear(&bc);
    }
    struct fs_departures *d = departures_with_log(a, st, now_us - a->opts.horizon_us, now_us, true,
                                                  NULL, NULL, now_us, full, err, sizeof err);
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
        a->base_log_evicted = ls.evicted_memory;
        fs_ring_scan_baselines_clear(&a->base);
        a->base = bc;
        bc = (struct fs_ring_scan_baselines){0};
    }
    fs_ring_scan_baselines_clear(&bc);
    pthread_mutex_unlock(&a->run_lock);
    free_slow_windows(&sw);
    fs_incident_report_free(r);
    fs_departures_free(d);
    if (rc == 0)
        atomic_store(&a->refreshed_us, fs_realtime_us());
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

/* One line of fabricscope_host_events_poster_bytes (which 0) or _events (1), with its
   family's header before the first. */
struct poster_out {
    struct fs_buf *out;
    int which;
    bool header;
};

static void
poster_bytes_line(void *arg, const char *name, uint64_t bytes, uint64_t events,
                  uint64_t evicted_quota)
{
    struct poster_out *po = arg;
    (void)evicted_quota;
    enum fs_metric m = po->which ? FS_M_HOST_EVENTS_POSTER_EVENTS : FS_M_HOST_EVENTS_POSTER_BYTES;
    if (!po->header) {
        family_header(po->out, m);
        po->header = true;
    }
    fs_buf_printf(po->out, "%s{poster=\"", fs_metric_defs[m].name);
    fs_buf_prom_label_value(po->out, name);
    fs_buf_printf(po->out, "\"} %" PRIu64 "\n", po->which ? events : bytes);
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
    fs_buf_printf(out,
                  "%s{reason=\"memory\"} %" PRIu64 "\n%s{reason=\"quota\"} %" PRIu64
                  "\n%s{reason=\"retention\"} %" PRIu64 "\n",
                  ev, s.evicted_memory, ev, s.evicted_quota, ev, s.evicted_retention);
    struct poster_out po = {out, 0, false};
    fs_host_events_foreach_poster(a->events, poster_bytes_line, &po);
    po = (struct poster_out){out, 1, false};
    fs_host_events_foreach_poster(a->events, poster_bytes_line, &po);
    struct fs_episode_log_stats ls;
    fs_episode_log_stats(a->log, &ls);
    int64_t refreshed = atomic_load(&a->refreshed_us);
    if (refreshed) {
        family_header(out, FS_M_ANALYSIS_REFRESH_TIMESTAMP);
        fs_buf_printf(out, "%s %.6f\n", fs_metric_defs[FS_M_ANALYSIS_REFRESH_TIMESTAMP].name,
                      (double)refreshed / 1e6);
    }
    int64_t cached_from = atomic_load(&a->hist_cached_from_us),
            cached_to = atomic_load(&a->hist_cached_to_us);
    if (cached_to) {
        family_header(out, FS_M_ANALYSIS_HISTORY_CACHED);
        const char *hc = fs_metric_defs[FS_M_ANALYSIS_HISTORY_CACHED].name;
        fs_buf_printf(out, "%s{edge=\"start\"} %.6f\n%s{edge=\"end\"} %.6f\n", hc,
                      (double)cached_from / 1e6, hc, (double)cached_to / 1e6);
    }
    scalar_u64(out, FS_M_EPISODE_LOG_EPISODES, ls.runs);
    scalar_u64(out, FS_M_EPISODE_LOG_BYTES, ls.bytes);
    family_header(out, FS_M_EPISODE_LOG_EVICTED);
    const char *lev = fs_metric_defs[FS_M_EPISODE_LOG_EVICTED].name;
    fs_buf_printf(out, "%s{reason=\"memory\"} %" PRIu64 "\n%s{reason=\"retention\"} %" PRIu64 "\n",
                  lev, ls.evicted_memory, lev, ls.evicted_retention);
    int64_t saved = atomic_load(&a->saved_us);
    if (saved) {
        family_header(out, FS_M_EPISODE_LOG_SAVE_TIMESTAMP);
        fs_buf_printf(out, "%s %.6f\n", fs_metric_defs[FS_M_EPISODE_LOG_SAVE_TIMESTAMP].name,
                      (double)saved / 1e6);
    }
    if (atomic_load(&a->log_kept))
        scalar_u64(out, FS_M_EPISODE_LOG_SAVE_ERRORS, atomic_load(&a->save_errors));
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

/* ---- trace export ---- */

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

/* A counter track per series: "<interface> tc<tc> <metric>[/s]" on its switch. */
static int
counter_track_cb(void *arg, const struct fs_ring_scan_series *c, const int64_t *ts, const double *v,
                 size_t n)
{
    struct fs_trace *t = arg;
    char process[300], track[700];
    snprintf(process, sizeof process, "switch %s", c->target);
    const char *short_metric = strncmp(c->metric, "fabric_", 7) == 0 ? c->metric + 7 : c->metric;
    snprintf(track, sizeof track, "%s%s%s%s%s%s%s%s", c->interface, c->tc[0] ? " tc" : "", c->tc,
             c->rule[0] ? " rule " : "", c->rule, c->interface[0] || c->rule[0] ? " " : "",
             short_metric, c->counter ? "/s" : "");
    return fs_trace_counter(t, process, track, ts, v, n);
}

int
fs_analysis_run_trace(struct fs_analysis *a, struct fs_store *st,
                      const struct fs_analysis_trace_req *req, struct fs_buf *out, char *err,
                      size_t errlen)
{
    int64_t start = req->start_us, end = req->end_us;
    struct request_deadline dl = request_deadline(a);
    if (lock_for_request(&a->run_lock, &dl, err, errlen) != 0)
        return FS_ANALYSIS_BUSY;
    fs_buf_reset(out);
    struct fs_trace *t = fs_trace_new(out, start * 1000);
    struct fs_departures *d = NULL;
    struct fs_incident_report *rep = NULL;
    struct trace_ev_ctx tc = {.t = t};
    struct ev_copies evl = {0};
    fs_buf_init(&tc.args, 64 << 10);
    bool oom = !t;
    if (!oom)
        oom = fs_ring_scan_read(st, start, end, req->match, req->match_arg, counter_track_cb, t,
                                err, errlen) != 0;
    /* Incidents of the range as instants on their switches. */
    if (!oom && !out->overflow) {
        d = fs_ring_scan(st, &a->opts.an, start, end, NULL, NULL, err, errlen);
        if (!d || fs_incidents_find(d, end, &rep) != 0)
            oom = true;
        for (size_t i = 0; !oom && rep && i < rep->n_episodes; i++) {
            const struct fs_episode *e = &rep->episodes[i];
            for (size_t j = 0; j < e->n_members && j < 10; j++) {
                const struct fs_an_series_ref *s = &d->series[e->members[j].series];
                char process[300], name[700], argsj[1024];
                snprintf(process, sizeof process, "switch %s", s->target);
                fs_an_port_text(name, sizeof name, s);
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
    int rc = 0;
    if (oom) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    } else if (frc != 0) {
        rc = FS_ANALYSIS_TOO_LARGE;
    }
    return rc;
}

/* ---- the answer cache ---- */

void
fs_analysis_cache_stamp(struct fs_analysis *a, struct fs_analysis_cache_stamp *s)
{
    struct fs_host_events_stats hs;
    fs_host_events_stats(a->events, &hs);
    *s = (struct fs_analysis_cache_stamp){atomic_load(&a->cache_gen), hs.ingested_total,
                                          hs.evicted_memory + hs.evicted_retention};
}

static void
cache_drop(struct fs_analysis *a, size_t i)
{
    a->cache_bytes -= a->cache[i].len;
    free(a->cache[i].key);
    free(a->cache[i].body);
    a->cache[i] = a->cache[--a->n_cache];
}

bool
fs_analysis_cache_get(struct fs_analysis *a, const char *key, int64_t now_us, struct fs_buf *out)
{
    struct fs_analysis_cache_stamp s;
    fs_analysis_cache_stamp(a, &s);
    bool hit = false;
    pthread_mutex_lock(&a->cache_lock);
    for (size_t i = 0; i < a->n_cache; i++) {
        struct cache_entry *e = &a->cache[i];
        if (strcmp(e->key, key) != 0)
            continue;
        if (now_us < e->at_us || now_us - e->at_us >= e->keep_us ||
            memcmp(&e->stamp, &s, sizeof s) != 0) {
            cache_drop(a, i);
            break;
        }
        fs_buf_reset(out);
        hit = fs_buf_append(out, e->body, e->len) && !out->overflow;
        break;
    }
    pthread_mutex_unlock(&a->cache_lock);
    return hit;
}

void
fs_analysis_cache_put(struct fs_analysis *a, const char *key, int64_t now_us, int64_t keep_us,
                      const struct fs_analysis_cache_stamp *s, const char *body, size_t len)
{
    struct fs_analysis_cache_stamp now;
    fs_analysis_cache_stamp(a, &now);
    if (memcmp(&now, s, sizeof now) != 0 || len > FS_ANALYSIS_CACHE_BYTES / 4)
        return; /* computed while things changed, or too large to keep */
    char *k = strdup(key), *b = malloc(len ? len : 1);
    if (!k || !b) {
        free(k);
        free(b);
        return;
    }
    memcpy(b, body, len);
    pthread_mutex_lock(&a->cache_lock);
    for (size_t i = 0; i < a->n_cache; i++)
        if (strcmp(a->cache[i].key, key) == 0) {
            cache_drop(a, i);
            break;
        }
    while (a->n_cache && (a->n_cache == FS_ANALYSIS_CACHE_ENTRIES ||
                          a->cache_bytes + len > FS_ANALYSIS_CACHE_BYTES)) {
        size_t old = 0;
        for (size_t i = 1; i < a->n_cache; i++)
            if (a->cache[i].at_us < a->cache[old].at_us)
                old = i;
        cache_drop(a, old);
    }
    a->cache[a->n_cache++] = (struct cache_entry){k, b, len, now_us, keep_us, *s};
    a->cache_bytes += len;
    pthread_mutex_unlock(&a->cache_lock);
}
