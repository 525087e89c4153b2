/* The episode log (see episode_log.h). */
#include "analysis/episode_log.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <inttypes.h>
#include <zlib.h>

#include "util/buf.h"
#include "util/file.h"

#define US 1000000LL
/* How far past the now of a record call a run may end before it is clamped. */
#define FUTURE_SLACK_US (60 * US)
/* Series without runs are forgotten once this many (and a quarter of all) have none. */
#define DEAD_SERIES_MIN 64
/* The names of a series: target, interface, tc, rule, metric, direction, priority. */
#define N_NAMES 7
#define NAME_MAX_LEN 4096

struct lseries {
    char *names; /* one allocation: the N_NAMES strings back to back, each NUL-ended */
    const char *name[N_NAMES];
    enum fs_an_kind kind;
    int64_t unc_us;
    size_t n_runs;         /* live runs */
    uint64_t last;         /* sequence number + 1 of its latest run, 0: none */
    int64_t last_start_us; /* extent of the latest run recorded, even once evicted: */
    int64_t last_end_us;   /* a later scan must not log it again */
    size_t names_alloc;    /* what the names' allocation takes (alloc_size) */
    bool logged;           /* a run was recorded: last_start_us and last_end_us hold */
};

struct lrun {
    uint32_t series;
    int64_t start_us, end_us, onset_us, peak_us;
    double peak_z, peak_value, baseline;
};

/* Runs are a ring in recording order: runs[first] is the oldest live one, with sequence
 * number base_seq; eviction takes the oldest in O(1) and never moves the others. */
struct fs_episode_log {
    pthread_mutex_t lock;
    struct fs_episode_log_opts o;
    struct lseries *series;
    size_t n_series, cap_series, n_dead; /* n_dead: series with no live run */
    uint32_t *tab;                       /* open addressing: series index + 1, 0 empty */
    size_t tab_cap;
    struct lrun *runs;
    size_t first, count, cap;
    uint64_t base_seq;
    uint64_t names_bytes; /* sum of the series' names_alloc */
    uint64_t gen;         /* bumped by every change (a snapshot is due) */
    uint64_t evicted_retention, evicted_memory, clamped_future;
};

static void
opts_default(struct fs_episode_log_opts *o)
{
    o->retention_us = 7 * 24 * 3600 * US;
    o->memory_limit = UINT64_C(64) << 20;
    o->merge_gap_us = 2 * US;
}

/* What malloc takes for a request of n bytes: glibc rounds each chunk up to 16 bytes
 * with 8 of header, 32 at least. Counted so that the limit bounds the memory really
 * held, not the bytes asked for. */
static uint64_t
alloc_size(uint64_t n)
{
    if (n == 0)
        return 0;
    uint64_t c = (n + 8 + 15) & ~(uint64_t)15;
    return c < 32 ? 32 : c;
}

/* Memory held now: the object, the arrays at their capacity, the table, the names. */
static uint64_t
real_bytes(const struct fs_episode_log *l)
{
    return alloc_size(sizeof *l) + alloc_size(l->cap * sizeof *l->runs) +
           alloc_size(l->cap_series * sizeof *l->series) + alloc_size(l->tab_cap * sizeof *l->tab) +
           l->names_bytes;
}

static uint64_t
hash_str(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * UINT64_C(1099511628211);
    return (h ^ 0xff) * UINT64_C(1099511628211);
}

static void
ref_names(const struct fs_an_series_ref *r, const char *n[N_NAMES])
{
    n[0] = r->target;
    n[1] = r->interface;
    n[2] = r->tc;
    n[3] = r->rule;
    n[4] = r->metric;
    n[5] = r->direction;
    n[6] = r->priority;
}

static uint64_t
hash_names(const char *const n[N_NAMES])
{
    uint64_t h = UINT64_C(14695981039346656037);
    for (int i = 0; i < N_NAMES; i++)
        h = hash_str(h, n[i]);
    return h;
}

static uint64_t
hash_ref(const struct fs_an_series_ref *r)
{
    const char *n[N_NAMES];
    ref_names(r, n);
    return hash_names(n);
}

static bool
same_ref(const struct fs_an_series_ref *r, const struct lseries *s)
{
    const char *n[N_NAMES];
    ref_names(r, n);
    for (int i = 0; i < N_NAMES; i++)
        if (strcmp(n[i], s->name[i]))
            return false;
    return true;
}

static struct fs_an_series_ref
ref_of(const struct lseries *s)
{
    return (struct fs_an_series_ref){.target = s->name[0],
                                     .interface = s->name[1],
                                     .tc = s->name[2],
                                     .rule = s->name[3],
                                     .metric = s->name[4],
                                     .direction = s->name[5],
                                     .priority = s->name[6],
                                     .kind = s->kind,
                                     .time_uncertainty_us = s->unc_us};
}

static size_t
tab_cap_for(size_t n)
{
    size_t cap = 64;
    while (cap < n * 2)
        cap *= 2;
    return cap;
}

/* Places series i in t (cap a power of two, with a free slot). */
static void
tab_put(uint32_t *t, size_t cap, const struct lseries *s, size_t i)
{
    size_t k = (size_t)hash_names(s->name) & (cap - 1);
    while (t[k])
        k = (k + 1) & (cap - 1);
    t[k] = (uint32_t)i + 1;
}

/* Places every series in t (zeroed). */
static void
tab_fill(const struct fs_episode_log *l, uint32_t *t, size_t cap)
{
    for (size_t i = 0; i < l->n_series; i++)
        tab_put(t, cap, &l->series[i], i);
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

/* The index of the series named n, or -1. */
static long
series_find(const struct fs_episode_log *l, const char *const n[N_NAMES])
{
    if (!l->tab_cap)
        return -1;
    size_t k = (size_t)hash_names(n) & (l->tab_cap - 1);
    for (; l->tab[k]; k = (k + 1) & (l->tab_cap - 1)) {
        const struct lseries *s = &l->series[l->tab[k] - 1];
        int i = 0;
        while (i < N_NAMES && !strcmp(n[i], s->name[i]))
            i++;
        if (i == N_NAMES)
            return (long)l->tab[k] - 1;
    }
    return -1;
}

/* Adds a series named n (not in the log); its index, or -1 on no memory. */
static long
series_add(struct fs_episode_log *l, const char *const n[N_NAMES], enum fs_an_kind kind,
           int64_t unc_us)
{
    if (l->n_series == l->cap_series) {
        size_t cap = l->cap_series ? l->cap_series * 2 : 64;
        void *p = realloc(l->series, cap * sizeof *l->series);
        if (!p)
            return -1;
        l->series = p;
        l->cap_series = cap;
    }
    size_t len[N_NAMES], total = 0;
    for (int i = 0; i < N_NAMES; i++)
        total += (len[i] = strlen(n[i])) + 1;
    char *names = malloc(total);
    if (!names)
        return -1;
    struct lseries *s = &l->series[l->n_series];
    memset(s, 0, sizeof *s);
    s->names = names;
    for (int i = 0; i < N_NAMES; i++) {
        memcpy(names, n[i], len[i] + 1);
        s->name[i] = names;
        names += len[i] + 1;
    }
    s->kind = kind;
    s->unc_us = unc_us;
    s->names_alloc = alloc_size(total);
    l->n_series++;
    if (l->n_series * 2 > l->tab_cap) {
        if (tab_rebuild(l) != 0) {
            free(s->names);
            l->n_series--;
            return -1;
        }
    } else {
        tab_put(l->tab, l->tab_cap, s, l->n_series - 1);
    }
    l->names_bytes += s->names_alloc;
    l->n_dead++; /* no run yet */
    return (long)l->n_series - 1;
}

/* The log's index of r's series, added when new; -1 on no memory. */
static long
series_find_add(struct fs_episode_log *l, const struct fs_an_series_ref *r)
{
    const char *n[N_NAMES];
    ref_names(r, n);
    long si = series_find(l, n);
    return si >= 0 ? si : series_add(l, n, r->kind, r->time_uncertainty_us);
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

/* Frees everything the log holds but the object and its lock. */
static void
clear_contents(struct fs_episode_log *l)
{
    for (size_t i = 0; i < l->n_series; i++)
        free(l->series[i].names);
    free(l->series);
    free(l->tab);
    free(l->runs);
    l->series = NULL;
    l->tab = NULL;
    l->runs = NULL;
    l->n_series = l->cap_series = l->n_dead = l->tab_cap = 0;
    l->first = l->count = l->cap = 0;
    l->names_bytes = 0;
}

void
fs_episode_log_free(struct fs_episode_log *l)
{
    if (!l)
        return;
    clear_contents(l);
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

/* The live run at offset off from the oldest. */
static struct lrun *
run_at(const struct fs_episode_log *l, size_t off)
{
    size_t i = l->first + off;
    return &l->runs[i >= l->cap ? i - l->cap : i];
}

static struct lrun *
live_run(struct fs_episode_log *l, uint64_t seq1)
{
    if (seq1 == 0 || seq1 - 1 < l->base_seq || seq1 - 1 >= l->base_seq + l->count)
        return NULL;
    return run_at(l, (size_t)(seq1 - 1 - l->base_seq));
}

/* Moves the live runs to a new array of cap runs (>= count; 0 frees it). -1: no memory,
 * nothing changed. */
static int
runs_resize(struct fs_episode_log *l, size_t cap)
{
    struct lrun *p = NULL;
    if (cap) {
        p = malloc(cap * sizeof *p);
        if (!p)
            return -1;
        for (size_t i = 0; i < l->count; i++)
            p[i] = *run_at(l, i);
    }
    free(l->runs);
    l->runs = p;
    l->cap = cap;
    l->first = 0;
    return 0;
}

static void
evict_oldest(struct fs_episode_log *l)
{
    struct lrun *r = &l->runs[l->first];
    if (--l->series[r->series].n_runs == 0)
        l->n_dead++;
    l->first = l->first + 1 == l->cap ? 0 : l->first + 1;
    l->count--;
    l->base_seq++;
}

/* How many runs the limit leaves room for beside everything else the log holds. */
static size_t
runs_budget(const struct fs_episode_log *l)
{
    uint64_t other = real_bytes(l) - alloc_size(l->cap * sizeof *l->runs);
    if (l->o.memory_limit <= other + 16)
        return 0;
    return (size_t)((l->o.memory_limit - other - 16) / sizeof(struct lrun));
}

/* Forgets the series without live runs (their names and their dedup floor: a later scan
 * cannot reach back that far), when they are many or when forced. Skipped, losing
 * nothing but memory until the next time, when its buffers cannot be had. */
static void
compact_series(struct fs_episode_log *l, bool force)
{
    if (!l->n_dead || (!force && (l->n_dead < DEAD_SERIES_MIN || l->n_dead * 4 < l->n_series)))
        return;
    uint32_t *remap = malloc(l->n_series * sizeof *remap);
    if (!remap)
        return;
    size_t k = 0;
    for (size_t i = 0; i < l->n_series; i++) {
        if (l->series[i].n_runs == 0) {
            l->names_bytes -= l->series[i].names_alloc;
            free(l->series[i].names);
            remap[i] = UINT32_MAX;
            continue;
        }
        remap[i] = (uint32_t)k;
        l->series[k++] = l->series[i];
    }
    l->n_series = k;
    l->n_dead = 0;
    for (size_t i = 0; i < l->count; i++) {
        struct lrun *r = run_at(l, i);
        r->series = remap[r->series];
    }
    free(remap);
    size_t cap = k < 64 ? 64 : k;
    if (cap < l->cap_series) {
        void *p = realloc(l->series, cap * sizeof *l->series);
        if (p) {
            l->series = p;
            l->cap_series = cap;
        }
    }
    /* The table is rebuilt for the series left; on no memory the old one (larger) is
       refilled in place so that it indexes the new positions. */
    if (tab_rebuild(l) != 0) {
        memset(l->tab, 0, l->tab_cap * sizeof *l->tab);
        tab_fill(l, l->tab, l->tab_cap);
    }
}

/* Room for one more run: the ring grows (doubling, within the memory limit), else the
 * oldest run goes (counted). 0, or -1 on no memory. */
static int
make_room(struct fs_episode_log *l)
{
    if (l->count < l->cap)
        return 0;
    size_t want = l->cap ? l->cap * 2 : 1024, budget = runs_budget(l);
    if (want > budget)
        want = budget;
    if (want > l->cap)
        return runs_resize(l, want);
    if (l->count) {
        evict_oldest(l);
        l->evicted_memory++;
    }
    return 0;
}

/* Logs r as a new run of series si; with no room at all (a limit below what the series
 * themselves take) it is counted as evicted at once. */
static int
append_run(struct fs_episode_log *l, uint32_t si, const struct fs_departure *r)
{
    if (make_room(l) != 0)
        return -1;
    struct lseries *s = &l->series[si];
    s->last_start_us = r->start_us;
    s->last_end_us = r->end_us;
    s->logged = true;
    if (l->count == l->cap) {
        l->evicted_memory++;
        s->last = 0;
        return 0;
    }
    size_t i = l->first + l->count;
    l->runs[i >= l->cap ? i - l->cap : i] = (struct lrun){.series = si,
                                                          .start_us = r->start_us,
                                                          .end_us = r->end_us,
                                                          .onset_us = r->onset_us,
                                                          .peak_us = r->peak_us,
                                                          .peak_z = r->peak_z,
                                                          .peak_value = r->peak_value,
                                                          .baseline = r->baseline};
    s->last = l->base_seq + l->count + 1;
    if (s->n_runs++ == 0)
        l->n_dead--;
    l->count++;
    return 0;
}

/* How many of the newest runs fit in the memory limit with what they need: their series
 * (names, entry, table slots at most four per series) and the arrays' minimum sizes,
 * each array shrunk to what is kept. */
static size_t
runs_to_keep(const struct fs_episode_log *l)
{
    uint8_t *seen = calloc(l->n_series ? l->n_series : 1, 1);
    if (!seen)
        return l->count / 2;
    uint64_t total = alloc_size(sizeof *l) + alloc_size(64 * sizeof(struct lseries)) +
                     alloc_size(128 * sizeof(uint32_t)) + 64;
    size_t keep = 0;
    for (; keep < l->count; keep++) {
        const struct lrun *r = run_at(l, l->count - 1 - keep);
        uint64_t add = sizeof(struct lrun);
        if (!seen[r->series]) {
            seen[r->series] = 1;
            add += l->series[r->series].names_alloc + sizeof(struct lseries) + 4 * sizeof(uint32_t);
        }
        if (total + add > l->o.memory_limit)
            break;
        total += add;
    }
    free(seen);
    return keep;
}

static void
evict_for_memory(struct fs_episode_log *l, size_t n)
{
    for (; n && l->count; n--) {
        evict_oldest(l);
        l->evicted_memory++;
    }
    compact_series(l, true); /* the names of the series left without a run go too */
    if (l->cap > l->count)
        runs_resize(l, l->count); /* on no memory the larger ring stays */
}

/* Retention at now, then the memory limit on what the log really holds: the oldest runs
 * go until the rest, with the names of the series left and the arrays shrunk to fit,
 * is within it. */
static void
apply_bounds(struct fs_episode_log *l, int64_t now_us)
{
    int64_t cutoff = now_us - l->o.retention_us;
    while (l->count && l->runs[l->first].end_us < cutoff) {
        evict_oldest(l);
        l->evicted_retention++;
    }
    compact_series(l, false);
    if (real_bytes(l) <= l->o.memory_limit)
        return;
    evict_for_memory(l, l->count - runs_to_keep(l));
    /* The estimate errs on the large side; should it not, a sixteenth more each time. */
    while (real_bytes(l) > l->o.memory_limit && l->count)
        evict_for_memory(l, l->count / 16 + 1);
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
        if (s->logged) {
            if (r->end_us < s->last_start_us - gap)
                continue; /* before the latest run: logged by an earlier scan */
            if (r->start_us <= s->last_end_us + gap) {
                /* The same run seen again, usually grown: extend it. */
                struct lrun *lr = live_run(l, s->last);
                if (r->end_us > s->last_end_us)
                    s->last_end_us = r->end_us;
                if (!lr)
                    continue;
                l->gen++;
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
        l->gen++;
        if (append_run(l, (uint32_t)si, r) != 0)
            rc = -1;
    }
    uint64_t evicted = l->evicted_retention + l->evicted_memory;
    apply_bounds(l, now_us);
    if (l->evicted_retention + l->evicted_memory != evicted)
        l->gen++;
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
    size_t k = (size_t)hash_names(s->name) & (m->cap - 1);
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
    for (size_t i = 0; i < l->count; i++) {
        const struct lrun *r = run_at(l, i);
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
    s->runs = l->count;
    s->series = l->n_series - l->n_dead;
    s->bytes = real_bytes(l);
    s->memory_limit = l->o.memory_limit;
    s->evicted_retention = l->evicted_retention;
    s->evicted_memory = l->evicted_memory;
    s->clamped_future = l->clamped_future;
    s->oldest_start_us = l->count ? l->runs[l->first].start_us : INT64_MAX;
    s->generation = l->gen;
    pthread_mutex_unlock(&l->lock);
}

/* ---- snapshot ---- */

/* Layout (little-endian): magic, u32 version, u32 0, i64 written at, u64 series, u64 runs;
 * each series: u8 kind, i64 time uncertainty, i64 latest run's start and end, then its
 * N_NAMES names as u16 length + bytes; each run: u32 series, i64 start, end, onset, peak,
 * f64 peak z, peak value, baseline; then u32 CRC-32 of everything before it. */
static const char snap_magic[8] = {'F', 'S', 'E', 'P', 'L', 'O', 'G', '\n'};
#define SNAP_VERSION 1
#define SNAP_HEADER (8 + 4 + 4 + 8 + 8 + 8)
#define SNAP_SERIES_MIN (1 + 8 + 8 + 8 + 2 * N_NAMES)
#define SNAP_RUN (4 + 4 * 8 + 3 * 8)

static void
put_u(struct fs_buf *b, uint64_t v, int bytes)
{
    unsigned char x[8];
    for (int i = 0; i < bytes; i++)
        x[i] = (unsigned char)(v >> (8 * i));
    fs_buf_append(b, x, (size_t)bytes);
}

static void
put_f64(struct fs_buf *b, double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    put_u(b, v, 8);
}

int
fs_episode_log_snapshot(struct fs_episode_log *l, int64_t now_us, struct fs_buf *out,
                        uint64_t *generation)
{
    pthread_mutex_lock(&l->lock);
    /* Series are written in their order, without the ones that have no live run. */
    uint32_t *to = malloc((l->n_series ? l->n_series : 1) * sizeof *to);
    if (!to) {
        pthread_mutex_unlock(&l->lock);
        return -1;
    }
    size_t start = out->len, n = 0;
    for (size_t i = 0; i < l->n_series; i++)
        to[i] = l->series[i].n_runs ? (uint32_t)n++ : UINT32_MAX;
    fs_buf_append(out, snap_magic, sizeof snap_magic);
    put_u(out, SNAP_VERSION, 4);
    put_u(out, 0, 4);
    put_u(out, (uint64_t)now_us, 8);
    put_u(out, n, 8);
    put_u(out, l->count, 8);
    for (size_t i = 0; i < l->n_series; i++) {
        const struct lseries *s = &l->series[i];
        if (to[i] == UINT32_MAX)
            continue;
        put_u(out, (uint64_t)s->kind, 1);
        put_u(out, (uint64_t)s->unc_us, 8);
        put_u(out, (uint64_t)s->last_start_us, 8);
        put_u(out, (uint64_t)s->last_end_us, 8);
        for (int k = 0; k < N_NAMES; k++) {
            size_t len = strlen(s->name[k]);
            put_u(out, len, 2);
            fs_buf_append(out, s->name[k], len);
        }
    }
    for (size_t i = 0; i < l->count; i++) {
        const struct lrun *r = run_at(l, i);
        put_u(out, to[r->series], 4);
        put_u(out, (uint64_t)r->start_us, 8);
        put_u(out, (uint64_t)r->end_us, 8);
        put_u(out, (uint64_t)r->onset_us, 8);
        put_u(out, (uint64_t)r->peak_us, 8);
        put_f64(out, r->peak_z);
        put_f64(out, r->peak_value);
        put_f64(out, r->baseline);
    }
    if (generation)
        *generation = l->gen;
    pthread_mutex_unlock(&l->lock);
    free(to);
    if (!out->overflow) {
        uLong crc = crc32(0L, (const Bytef *)out->data + start, (uInt)(out->len - start));
        put_u(out, crc, 4);
    }
    return out->overflow ? -1 : 0;
}

struct rd {
    const unsigned char *p, *end;
};

static bool
get_u(struct rd *r, int bytes, uint64_t *v)
{
    if (r->end - r->p < bytes)
        return false;
    *v = 0;
    for (int i = 0; i < bytes; i++)
        *v |= (uint64_t)r->p[i] << (8 * i);
    r->p += bytes;
    return true;
}

static bool
get_i64(struct rd *r, int64_t *v)
{
    uint64_t u;
    if (!get_u(r, 8, &u))
        return false;
    memcpy(v, &u, sizeof *v);
    return true;
}

static bool
get_f64(struct rd *r, double *d)
{
    uint64_t u;
    if (!get_u(r, 8, &u))
        return false;
    memcpy(d, &u, sizeof *d);
    return isfinite(*d);
}

int
fs_episode_log_restore(struct fs_episode_log *l, const void *data, size_t len, int64_t now_us,
                       char *err, size_t errlen)
{
    int rc = -1;
    struct fs_episode_log *t = fs_episode_log_new(NULL); /* built aside, swapped in whole */
    char name[N_NAMES][NAME_MAX_LEN + 1];
    struct rd r = {data, (const unsigned char *)data + len};
    uint64_t version = 0, flags = 0, n_series = 0, n_runs = 0, crc = 0;
    int64_t written = 0;
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (len < SNAP_HEADER + 4 || memcmp(data, snap_magic, sizeof snap_magic)) {
        snprintf(err, errlen, "not an episode log snapshot");
        goto out;
    }
    r.end -= 4;
    struct rd tail = {r.end, r.end + 4};
    get_u(&tail, 4, &crc);
    if (crc32(0L, (const Bytef *)data, (uInt)(len - 4)) != crc) {
        snprintf(err, errlen, "checksum mismatch (truncated or damaged)");
        goto out;
    }
    r.p += sizeof snap_magic;
    get_u(&r, 4, &version);
    get_u(&r, 4, &flags);
    get_i64(&r, &written);
    get_u(&r, 8, &n_series);
    get_u(&r, 8, &n_runs);
    if (version != SNAP_VERSION) {
        snprintf(err, errlen, "snapshot version %" PRIu64 ", this build reads %d", version,
                 SNAP_VERSION);
        goto out;
    }
    size_t left = (size_t)(r.end - r.p);
    if (n_series > left / SNAP_SERIES_MIN || n_runs > left / SNAP_RUN ||
        n_series > UINT32_MAX - 1) {
        snprintf(err, errlen, "counts of %" PRIu64 " series and %" PRIu64 " runs do not fit",
                 n_series, n_runs);
        goto out;
    }
    t->o = l->o;
    t->o.memory_limit = UINT64_MAX; /* the bounds are applied once it is whole */
    for (uint64_t i = 0; i < n_series; i++) {
        uint64_t kind;
        int64_t unc, ls, le;
        if (!get_u(&r, 1, &kind) || !get_i64(&r, &unc) || !get_i64(&r, &ls) || !get_i64(&r, &le))
            goto short_;
        if (kind >= FS_AN_KIND_COUNT || unc < 0 || ls > le) {
            snprintf(err, errlen, "series %" PRIu64 ": bad kind or times", i);
            goto out;
        }
        const char *n[N_NAMES];
        for (int k = 0; k < N_NAMES; k++) {
            uint64_t nl;
            if (!get_u(&r, 2, &nl) || (uint64_t)(r.end - r.p) < nl)
                goto short_;
            if (nl > NAME_MAX_LEN || memchr(r.p, '\0', nl)) {
                snprintf(err, errlen, "series %" PRIu64 ": bad name", i);
                goto out;
            }
            memcpy(name[k], r.p, nl);
            name[k][nl] = '\0';
            n[k] = name[k];
            r.p += nl;
        }
        if (series_find(t, n) >= 0) {
            snprintf(err, errlen, "series %" PRIu64 " appears twice", i);
            goto out;
        }
        long si = series_add(t, n, (enum fs_an_kind)kind, unc);
        if (si < 0) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
        t->series[si].logged = true;
        t->series[si].last_start_us = ls;
        t->series[si].last_end_us = le;
    }
    for (uint64_t i = 0; i < n_runs; i++) {
        uint64_t si;
        struct fs_departure d = {0};
        if (!get_u(&r, 4, &si) || !get_i64(&r, &d.start_us) || !get_i64(&r, &d.end_us) ||
            !get_i64(&r, &d.onset_us) || !get_i64(&r, &d.peak_us)) {
            goto short_;
        }
        if (!get_f64(&r, &d.peak_z) || !get_f64(&r, &d.peak_value) || !get_f64(&r, &d.baseline)) {
            snprintf(err, errlen, "run %" PRIu64 ": a value is not a finite number", i);
            goto out;
        }
        if (si >= n_series || d.start_us > d.end_us) {
            snprintf(err, errlen, "run %" PRIu64 ": bad series or times", i);
            goto out;
        }
        struct lseries *s = &t->series[si];
        int64_t ls = s->last_start_us, le = s->last_end_us;
        if (append_run(t, (uint32_t)si, &d) != 0) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
        /* The series' dedup floor is what was saved (its latest run may be evicted). */
        if (le > s->last_end_us || (le == s->last_end_us && ls > s->last_start_us)) {
            s->last_start_us = ls;
            s->last_end_us = le;
        }
    }
    if (r.p != r.end) {
        snprintf(err, errlen, "%zu bytes after the last run", (size_t)(r.end - r.p));
        goto out;
    }
    /* Whole: swapped in, then bounded and clamped as of now. */
    pthread_mutex_lock(&l->lock);
    clear_contents(l);
    l->series = t->series;
    l->n_series = t->n_series;
    l->cap_series = t->cap_series;
    l->n_dead = t->n_dead;
    l->tab = t->tab;
    l->tab_cap = t->tab_cap;
    l->runs = t->runs;
    l->first = t->first;
    l->count = t->count;
    l->cap = t->cap;
    l->base_seq = t->base_seq;
    l->names_bytes = t->names_bytes;
    t->series = NULL;
    t->tab = NULL;
    t->runs = NULL;
    t->n_series = t->count = 0;
    int64_t lim = now_us + FUTURE_SLACK_US;
    for (size_t i = 0; i < l->count; i++) {
        struct lrun *x = run_at(l, i);
        if (x->end_us <= lim)
            continue;
        x->start_us = x->start_us < lim ? x->start_us : lim;
        x->onset_us = x->onset_us < lim ? x->onset_us : lim;
        x->peak_us = x->peak_us < lim ? x->peak_us : lim;
        x->end_us = lim;
        l->clamped_future++;
    }
    for (size_t i = 0; i < l->n_series; i++) {
        struct lseries *s = &l->series[i];
        s->last_end_us = s->last_end_us < lim ? s->last_end_us : lim;
        s->last_start_us = s->last_start_us < s->last_end_us ? s->last_start_us : s->last_end_us;
    }
    apply_bounds(l, now_us);
    l->gen++;
    pthread_mutex_unlock(&l->lock);
    rc = 0;
    goto out;
short_:
    snprintf(err, errlen, "cut short");
out:
    fs_episode_log_free(t);
    return rc;
}

int
fs_episode_log_save(struct fs_episode_log *l, const char *path, int64_t now_us, char *err,
                    size_t errlen, uint64_t *generation)
{
    struct fs_buf b;
    fs_buf_init(&b, SIZE_MAX / 2);
    int rc = fs_episode_log_snapshot(l, now_us, &b, generation);
    if (rc != 0)
        snprintf(err, errlen, "out of memory");
    else
        rc = fs_file_replace(path, b.data, b.len, 0600, err, errlen);
    fs_buf_free(&b);
    return rc;
}

int
fs_episode_log_load(struct fs_episode_log *l, const char *path, int64_t now_us, char *err,
                    size_t errlen)
{
    char *data = NULL;
    size_t len = 0;
    pthread_mutex_lock(&l->lock);
    uint64_t lim = l->o.memory_limit;
    pthread_mutex_unlock(&l->lock);
    /* A run takes 60 bytes on disk against 64 in memory, a series' names about as much:
       twice the memory limit is more than a log within it ever writes. */
    size_t max = lim > SIZE_MAX / 4 ? SIZE_MAX / 2 : (size_t)lim * 2 + (1 << 20);
    int rc = fs_file_read_regular(path, max, &data, &len, err, errlen);
    if (rc == 0)
        rc = fs_episode_log_restore(l, data, len, now_us, err, errlen);
    free(data);
    return rc;
}
