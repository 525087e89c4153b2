/* The episode log (see episode_log.h). */
#include "analysis/episode_log.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define US 1000000LL
/* Compaction moves the live runs to the front once this many dead ones lead them. */
#define COMPACT_MIN 4096
/* How far past the now of a record call a run may end before it is clamped. */
#define FUTURE_SLACK_US (60 * US)

struct lseries {
    char *target, *interface, *tc, *rule, *metric, *direction, *priority;
    enum fs_an_kind kind;
    int64_t unc_us;
    size_t n_runs;         /* live runs */
    uint64_t last;         /* sequence number + 1 of its latest run, 0: none */
    int64_t last_start_us; /* extent of the latest run recorded, even once evicted: */
    int64_t last_end_us;   /* a later scan must not log it again */
    size_t bytes;
};

struct lrun {
    uint32_t series;
    int64_t start_us, end_us, onset_us, peak_us;
    double peak_z, peak_value, baseline;
};

struct fs_episode_log {
    pthread_mutex_t lock;
    struct fs_episode_log_opts o;
    struct lseries *series;
    size_t n_series, cap_series;
    uint32_t *tab; /* open addressing: series index + 1, 0 empty */
    size_t tab_cap;
    struct lrun *runs; /* live: runs[head..n) */
    size_t head, n, cap;
    uint64_t base_seq; /* sequence number of runs[0] */
    uint64_t bytes, evicted_retention, evicted_memory, clamped_future;
};

static void
opts_default(struct fs_episode_log_opts *o)
{
    o->retention_us = 7 * 24 * 3600 * US;
    o->memory_limit = UINT64_C(64) << 20;
    o->merge_gap_us = 2 * US;
}

static uint64_t
hash_str(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * UINT64_C(1099511628211);
    return (h ^ 0xff) * UINT64_C(1099511628211);
}

static uint64_t
hash_ref(const struct fs_an_series_ref *r)
{
    uint64_t h = UINT64_C(14695981039346656037);
    h = hash_str(h, r->target);
    h = hash_str(h, r->interface);
    h = hash_str(h, r->tc);
    h = hash_str(h, r->rule);
    h = hash_str(h, r->direction);
    h = hash_str(h, r->priority);
    return hash_str(h, r->metric);
}

static bool
same_ref(const struct fs_an_series_ref *r, const struct lseries *s)
{
    return !strcmp(r->target, s->target) && !strcmp(r->interface, s->interface) &&
           !strcmp(r->tc, s->tc) && !strcmp(r->rule, s->rule) && !strcmp(r->metric, s->metric) &&
           !strcmp(r->direction, s->direction) && !strcmp(r->priority, s->priority);
}

static bool
same_series(const struct lseries *s, const struct fs_an_series_ref *r)
{
    return same_ref(r, s);
}

static struct fs_an_series_ref
ref_of(const struct lseries *s)
{
    return (struct fs_an_series_ref){.target = s->target,
                                     .interface = s->interface,
                                     .tc = s->tc,
                                     .rule = s->rule,
                                     .metric = s->metric,
                                     .direction = s->direction,
                                     .priority = s->priority,
                                     .kind = s->kind,
                                     .time_uncertainty_us = s->unc_us};
}

/* Places every series in t (cap a power of two, zeroed). */
static void
tab_fill(const struct fs_episode_log *l, uint32_t *t, size_t cap)
{
    for (size_t i = 0; i < l->n_series; i++) {
        struct fs_an_series_ref r = ref_of(&l->series[i]);
        size_t k = (size_t)hash_ref(&r) & (cap - 1);
        while (t[k])
            k = (k + 1) & (cap - 1);
        t[k] = (uint32_t)i + 1;
    }
}

static size_t
tab_cap_for(size_t n)
{
    size_t cap = 64;
    while (cap < n * 2)
        cap *= 2;
    return cap;
}

/* Rebuilds the table for the current series (at most half full). */
static int
tab_rebuild(struct fs_episode_log *l)
{
    size_t cap = tab_cap_for(l->n_series);
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t)
        return -1;
    tab_fill(l, t, cap);
    free(l->tab);
    l->tab = t;
    l->tab_cap = cap;
    return 0;
}

static void
series_free_strings(struct lseries *s)
{
    free(s->target);
    free(s->interface);
    free(s->tc);
    free(s->rule);
    free(s->metric);
    free(s->direction);
    free(s->priority);
}

/* The log's index of r's series, added when new; -1 on no memory. */
static long
series_find_add(struct fs_episode_log *l, const struct fs_an_series_ref *r)
{
    if (l->tab_cap) {
        size_t k = (size_t)hash_ref(r) & (l->tab_cap - 1);
        while (l->tab[k]) {
            if (same_series(&l->series[l->tab[k] - 1], r))
                return (long)l->tab[k] - 1;
            k = (k + 1) & (l->tab_cap - 1);
        }
    }
    if (l->n_series == l->cap_series) {
        size_t cap = l->cap_series ? l->cap_series * 2 : 64;
        void *p = realloc(l->series, cap * sizeof *l->series);
        if (!p)
            return -1;
        l->series = p;
        l->cap_series = cap;
    }
    struct lseries *s = &l->series[l->n_series];
    memset(s, 0, sizeof *s);
    s->target = strdup(r->target);
    s->interface = strdup(r->interface);
    s->tc = strdup(r->tc);
    s->rule = strdup(r->rule);
    s->metric = strdup(r->metric);
    s->direction = strdup(r->direction);
    s->priority = strdup(r->priority);
    if (!s->target || !s->interface || !s->tc || !s->rule || !s->metric || !s->direction ||
        !s->priority) {
        series_free_strings(s);
        return -1;
    }
    s->kind = r->kind;
    s->bytes = sizeof *s + 2 * sizeof(uint32_t) + strlen(r->target) + strlen(r->interface) +
               strlen(r->tc) + strlen(r->rule) + strlen(r->metric) + strlen(r->direction) +
               strlen(r->priority) + 7;
    l->n_series++;
    if (l->n_series * 2 > l->tab_cap) {
        if (tab_rebuild(l) != 0) {
            series_free_strings(s);
            l->n_series--;
            return -1;
        }
    } else {
        size_t k = (size_t)hash_ref(r) & (l->tab_cap - 1);
        while (l->tab[k])
            k = (k + 1) & (l->tab_cap - 1);
        l->tab[k] = (uint32_t)l->n_series;
    }
    l->bytes += s->bytes;
    return (long)l->n_series - 1;
}

struct fs_episode_log *
fs_episode_log_new(const struct fs_episode_log_opts *o)
{
    struct fs_episode_log *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    if (o)
        l->o = *o;
    else
        opts_default(&l->o);
    pthread_mutex_init(&l->lock, NULL);
    return l;
}

void
fs_episode_log_free(struct fs_episode_log *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n_series; i++)
        series_free_strings(&l->series[i]);
    free(l->series);
    free(l->tab);
    free(l->runs);
    pthread_mutex_destroy(&l->lock);
    free(l);
}

void
fs_episode_log_set_opts(struct fs_episode_log *l, const struct fs_episode_log_opts *o)
{
    pthread_mutex_lock(&l->lock);
    l->o = *o;
    pthread_mutex_unlock(&l->lock);
}

static struct lrun *
live_run(struct fs_episode_log *l, uint64_t seq1)
{
    if (seq1 == 0 || seq1 - 1 < l->base_seq + l->head || seq1 - 1 >= l->base_seq + l->n)
        return NULL;
    return &l->runs[seq1 - 1 - l->base_seq];
}

static int
append_run(struct fs_episode_log *l, uint32_t si, const struct fs_departure *r)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 1024;
        void *p = realloc(l->runs, cap * sizeof *l->runs);
        if (!p)
            return -1;
        l->runs = p;
        l->cap = cap;
    }
    l->runs[l->n] = (struct lrun){.series = si,
                                  .start_us = r->start_us,
                                  .end_us = r->end_us,
                                  .onset_us = r->onset_us,
                                  .peak_us = r->peak_us,
                                  .peak_z = r->peak_z,
                                  .peak_value = r->peak_value,
                                  .baseline = r->baseline};
    struct lseries *s = &l->series[si];
    s->last = l->base_seq + l->n + 1;
    s->last_start_us = r->start_us;
    s->last_end_us = r->end_us;
    s->n_runs++;
    l->n++;
    l->bytes += sizeof(struct lrun);
    return 0;
}

static void
evict_head(struct fs_episode_log *l)
{
    struct lrun *r = &l->runs[l->head++];
    l->series[r->series].n_runs--;
    l->bytes -= sizeof(struct lrun);
}

/* Moves the live runs to the front and forgets series without runs (their names and
 * their dedup floor: a later scan cannot reach back that far). Skipped, losing nothing
 * but memory until the next time, when its buffers cannot be had. */
static void
compact(struct fs_episode_log *l)
{
    if (l->head < COMPACT_MIN || l->head * 2 < l->n)
        return;
    size_t cap = tab_cap_for(l->n_series);
    uint32_t *remap = malloc((l->n_series ? l->n_series : 1) * sizeof *remap);
    uint32_t *tab = calloc(cap, sizeof *tab);
    if (!remap || !tab) {
        free(remap);
        free(tab);
        return;
    }
    memmove(l->runs, l->runs + l->head, (l->n - l->head) * sizeof *l->runs);
    l->base_seq += l->head;
    l->n -= l->head;
    l->head = 0;
    size_t k = 0;
    for (size_t i = 0; i < l->n_series; i++) {
        if (l->series[i].n_runs == 0) {
            l->bytes -= l->series[i].bytes;
            series_free_strings(&l->series[i]);
            remap[i] = UINT32_MAX;
            continue;
        }
        remap[i] = (uint32_t)k;
        l->series[k++] = l->series[i];
    }
    l->n_series = k;
    for (size_t i = 0; i < l->n; i++)
        l->runs[i].series = remap[l->runs[i].series];
    free(remap);
    tab_fill(l, tab, cap);
    free(l->tab);
    l->tab = tab;
    l->tab_cap = cap;
}

int
fs_episode_log_record(struct fs_episode_log *l, const struct fs_departures *d, int64_t now_us)
{
    int rc = 0;
    pthread_mutex_lock(&l->lock);
    int64_t gap = l->o.merge_gap_us;
    int64_t lim = now_us + FUTURE_SLACK_US;
    for (size_t i = 0; i < d->n_runs && rc == 0; i++) {
        struct fs_departure cr = d->runs[i];
        const struct fs_departure *r = &cr;
        const struct fs_an_series_ref *ref = &d->series[r->series];
        if (cr.end_us > lim) {
            /* Dated past now (a device clock ahead): such a run would never age out,
               would hold back the retention of every run logged after it, and would
               make the series' later runs look logged already. Kept, at now. */
            cr.start_us = cr.start_us < lim ? cr.start_us : lim;
            cr.onset_us = cr.onset_us < lim ? cr.onset_us : lim;
            cr.peak_us = cr.peak_us < lim ? cr.peak_us : lim;
            cr.end_us = lim;
            l->clamped_future++;
        }
        long si = series_find_add(l, ref);
        if (si < 0) {
            rc = -1;
            break;
        }
        struct lseries *s = &l->series[si];
        s->unc_us = ref->time_uncertainty_us;
        if (s->last) {
            if (r->end_us < s->last_start_us - gap)
                continue; /* before the latest run: logged by an earlier scan */
            if (r->start_us <= s->last_end_us + gap) {
                /* The same run seen again, usually grown: extend it. */
                struct lrun *lr = live_run(l, s->last);
                if (r->end_us > s->last_end_us)
                    s->last_end_us = r->end_us;
                if (!lr)
                    continue;
                if (r->start_us < lr->start_us)
                    lr->start_us = r->start_us;
                if (r->onset_us < lr->onset_us)
                    lr->onset_us = r->onset_us;
                if (r->end_us > lr->end_us)
                    lr->end_us = r->end_us;
                if (r->peak_z > lr->peak_z) {
                    lr->peak_z = r->peak_z;
                    lr->peak_value = r->peak_value;
                    lr->peak_us = r->peak_us;
                    lr->baseline = r->baseline;
                }
                continue;
            }
        }
        if (append_run(l, (uint32_t)si, r) != 0)
            rc = -1;
    }
    /* Bounds: retention, then memory, oldest first. */
    int64_t cutoff = now_us - l->o.retention_us;
    while (l->head < l->n && l->runs[l->head].end_us < cutoff) {
        evict_head(l);
        l->evicted_retention++;
    }
    while (l->head < l->n && l->bytes > l->o.memory_limit) {
        evict_head(l);
        l->evicted_memory++;
    }
    compact(l);
    pthread_mutex_unlock(&l->lock);
    return rc;
}

/* ---- replay ---- */

struct dmap {
    uint32_t *tab; /* index into d->series + 1 */
    size_t cap;
};

static uint32_t
dmap_find(const struct dmap *m, const struct fs_departures *d, const struct lseries *s,
          size_t *slot)
{
    struct fs_an_series_ref r = ref_of(s);
    size_t k = (size_t)hash_ref(&r) & (m->cap - 1);
    while (m->tab[k]) {
        const struct fs_an_series_ref *x = &d->series[m->tab[k] - 1];
        if (same_ref(x, s))
            return m->tab[k] - 1;
        k = (k + 1) & (m->cap - 1);
    }
    *slot = k;
    return UINT32_MAX;
}

int
fs_episode_log_replay(struct fs_episode_log *l, struct fs_departures *d, int64_t start_us,
                      int64_t before_us)
{
    int rc = -1;
    pthread_mutex_lock(&l->lock);
    struct dmap m = {0};
    size_t want = d->n_series + l->n_series;
    m.cap = 64;
    while (m.cap < want * 2)
        m.cap *= 2;
    m.tab = calloc(m.cap, sizeof *m.tab);
    uint32_t *to = malloc((l->n_series ? l->n_series : 1) * sizeof *to);
    if (!m.tab || !to)
        goto out;
    for (size_t i = 0; i < d->n_series; i++) {
        size_t k = (size_t)hash_ref(&d->series[i]) & (m.cap - 1);
        while (m.tab[k])
            k = (k + 1) & (m.cap - 1);
        m.tab[k] = (uint32_t)i + 1;
    }
    for (size_t i = 0; i < l->n_series; i++)
        to[i] = UINT32_MAX;
    for (size_t i = l->head; i < l->n; i++) {
        const struct lrun *r = &l->runs[i];
        if (r->start_us >= before_us || r->end_us < start_us)
            continue;
        if (to[r->series] == UINT32_MAX) {
            const struct lseries *s = &l->series[r->series];
            size_t slot = 0;
            uint32_t di = dmap_find(&m, d, s, &slot);
            if (di == UINT32_MAX) {
                struct fs_an_series_ref ref = ref_of(s);
                if (fs_departures_add_ref(d, &ref, &di) != 0)
                    goto out;
                m.tab[slot] = di + 1;
            }
            to[r->series] = di;
        }
        struct fs_departure run = {.series = to[r->series],
                                   .start_us = r->start_us,
                                   .end_us = r->end_us,
                                   .peak_us = r->peak_us,
                                   .onset_us = r->onset_us,
                                   .peak_z = r->peak_z,
                                   .peak_value = r->peak_value,
                                   .baseline = r->baseline};
        if (fs_departures_push(d, &run) != 0)
            goto out;
    }
    rc = 0;
out:
    pthread_mutex_unlock(&l->lock);
    free(m.tab);
    free(to);
    return rc;
}

void
fs_episode_log_stats(struct fs_episode_log *l, struct fs_episode_log_stats *s)
{
    pthread_mutex_lock(&l->lock);
    s->runs = l->n - l->head;
    s->series = l->n_series;
    s->bytes = l->bytes;
    s->memory_limit = l->o.memory_limit;
    s->evicted_retention = l->evicted_retention;
    s->evicted_memory = l->evicted_memory;
    s->clamped_future = l->clamped_future;
    s->oldest_start_us = l->head < l->n ? l->runs[l->head].start_us : INT64_MAX;
    pthread_mutex_unlock(&l->lock);
}
