/*
 * The store: series interning, latest values, counter monotonicity, instances and their
 * health. See store.h and sink.h for the contracts.
 *
 * Locks, in the order they may nest:
 *   st->lock (rwlock)    the series lists per metric and the instance list; readers hold
 *                        it shared while iterating, interning and removal hold it exclusive
 *   st->ring_lock        serializes ring writers (the ring allows one writer at a time)
 *   sink->stats_lock     the instance's health fields
 * A sink's hash table and batch are touched only by the one thread reporting for it.
 */
#include "store/store.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/log.h"
#include "util/clock.h"

#define KEY_MAX 1024
#define MAX_LABELS 16
#define MAX_IFACE_RESETS 64

const double fs_poll_bucket_bounds[FS_POLL_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1,
                                                       0.25,  0.5,  1.0,   2.5,  10.0};
const char *const fs_poll_error_kind_names[5] = {"timeout", "auth", "protocol", "parse", "overrun"};
const char *const fs_reset_kind_names[FS_RESET_KIND_COUNT] = {"wrap", "reboot", "discontinuity",
                                                              "cleared"};

struct series {
    uint32_t ring_id;
    enum fs_metric metric;
    bool counter;
    double scale; /* exposed = value * scale (counters kept in a finer unit) */
    struct fs_sink *sink;
    uint64_t hash;
    char *key; /* metric id + own labels, the sink-local identity */
    size_t key_len;
    struct fs_label *labels;
    size_t n_labels;
    char *labels_text;
    size_t labels_text_len;
    _Atomic uint64_t value; /* exposed counter value, or the gauge's bits */
    _Atomic int64_t ts_us;
    /* Writer-only state (the sink's reporting thread). */
    uint64_t last_raw;
    uint64_t offset;
    bool has_raw;
    uint64_t reset_gen;       /* the sink's reset_gen when last updated */
    uint64_t iface_reset_gen; /* the sink's iface_reset_gen when last updated */
    uint64_t batch_seq;       /* batch that last carried it, to merge duplicates */
    size_t batch_idx;
    char iface[64];
};

struct pending {
    struct series *s;
    uint64_t value;
};

struct fs_sink {
    struct fs_store *st;
    struct fs_sink *next;
    const struct fs_target_cfg *tcfg;
    char *source;
    int64_t interval_us;
    int32_t group;

    /* Series of this sink by key (open addressing; owned here, touched by one thread). */
    struct series **tab;
    size_t tab_cap, tab_len;

    /* The batch being built. */
    bool in_batch;
    int64_t batch_ts;
    uint64_t batch_seq;
    struct fs_ring_point *pts;
    struct pending *pend;
    size_t n_pts, cap_pts;
    bool batch_cleared;

    /* Reset evidence: whole-device resets bump reset_gen; interface ones are listed. */
    uint64_t reset_gen;
    uint64_t iface_reset_gen;
    struct {
        char iface[64];
        uint64_t gen;
    } iface_resets[MAX_IFACE_RESETS];
    size_t n_iface_resets;

    /* Newest sample time per metric, for source precedence. */
    _Atomic int64_t metric_ts[FS_METRIC_COUNT];

    /* Health, under stats_lock. */
    pthread_mutex_t stats_lock;
    enum fs_instance_state state;
    int64_t last_poll_us, last_duration_us;
    char last_error[256];
    uint64_t consecutive_failures;
    uint64_t poll_errors[5];
    uint64_t counter_resets[FS_RESET_KIND_COUNT];
    uint64_t poll_hist[FS_POLL_BUCKETS + 1];
    double poll_sum;
    uint64_t poll_count;
    int64_t cycle_start_mono_us;
    uint64_t cycle_id;
    bool clock_known;
    double clock_offset, clock_uncertainty;
    int64_t clock_measured_mono_us;
    char *detail;
    uint64_t n_series;
    int64_t last_sweep_us;
    fs_sink_done_cb done_cb;
    void *done_arg;
};

struct fs_store {
    pthread_rwlock_t lock;
    pthread_mutex_t ring_lock;
    struct fs_ring *ring;
    _Atomic uint64_t memory_limit;
    _Atomic int64_t retention_us;
    struct series **by_metric[FS_METRIC_COUNT];
    size_t n_by_metric[FS_METRIC_COUNT], cap_by_metric[FS_METRIC_COUNT];
    struct fs_sink *sinks; /* in insertion order */
    _Atomic uint64_t n_series;
};

static uint64_t
hash_bytes(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ULL;
    }
    return h ^ (h >> 29);
}

struct fs_store *
fs_store_new(const struct fs_ring_opts *ro, char *errbuf, size_t errlen)
{
    struct fs_store *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(errbuf, errlen, "out of memory");
        return NULL;
    }
    st->ring = fs_ring_new(ro, errbuf, errlen);
    if (!st->ring) {
        free(st);
        return NULL;
    }
    atomic_store(&st->memory_limit, ro->memory_limit);
    atomic_store(&st->retention_us, ro->retention_us);
    /* Writers first: readers (HTTP queries, renders) come often and scan long, and with
     * glibc's default they could keep a sink waiting forever. Nobody takes the read lock
     * twice, which this kind requires. */
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&st->lock, &ra);
    pthread_rwlockattr_destroy(&ra);
    pthread_mutex_init(&st->ring_lock, NULL);
    return st;
}

void
fs_store_free(struct fs_store *st)
{
    if (!st)
        return;
    while (st->sinks)
        fs_store_sink_remove(st, st->sinks);
    for (int m = 0; m < FS_METRIC_COUNT; m++)
        free(st->by_metric[m]);
    fs_ring_free(st->ring);
    pthread_rwlock_destroy(&st->lock);
    pthread_mutex_destroy(&st->ring_lock);
    free(st);
}

void
fs_store_set_ring_opts(struct fs_store *st, const struct fs_ring_opts *ro)
{
    pthread_mutex_lock(&st->ring_lock);
    fs_ring_set_opts(st->ring, ro);
    atomic_store(&st->memory_limit, ro->memory_limit);
    atomic_store(&st->retention_us, ro->retention_us);
    pthread_mutex_unlock(&st->ring_lock);
}

uint64_t
fs_store_series_count(struct fs_store *st)
{
    return atomic_load(&st->n_series);
}

struct fs_sink *
fs_store_sink_add(struct fs_store *st, const struct fs_target_cfg *tcfg, const char *source,
                  int64_t interval_us)
{
    struct fs_sink *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->st = st;
    s->tcfg = tcfg;
    s->source = strdup(source);
    s->interval_us = interval_us > 0 ? interval_us : 10000000;
    s->state = FS_INST_IDLE;
    pthread_mutex_init(&s->stats_lock, NULL);
    pthread_mutex_lock(&st->ring_lock);
    s->group = fs_ring_group_new(st->ring);
    pthread_mutex_unlock(&st->ring_lock);
    if (!s->source || s->group < 0) {
        free(s->source);
        pthread_mutex_destroy(&s->stats_lock);
        free(s);
        return NULL;
    }
    pthread_rwlock_wrlock(&st->lock);
    struct fs_sink **pp = &st->sinks;
    while (*pp)
        pp = &(*pp)->next;
    *pp = s;
    pthread_rwlock_unlock(&st->lock);
    return s;
}

void
fs_store_sink_rebind(struct fs_store *st, struct fs_sink *s, const struct fs_target_cfg *tcfg)
{
    pthread_rwlock_wrlock(&st->lock);
    s->tcfg = tcfg;
    pthread_rwlock_unlock(&st->lock);
}

void
fs_store_sink_remove(struct fs_store *st, struct fs_sink *s)
{
    if (!s)
        return;
    pthread_rwlock_wrlock(&st->lock);
    for (struct fs_sink **pp = &st->sinks; *pp; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    }
    /* Drop this sink's series from the per-metric lists, keeping their order. */
    for (int m = 0; m < FS_METRIC_COUNT; m++) {
        size_t w = 0;
        for (size_t r = 0; r < st->n_by_metric[m]; r++)
            if (st->by_metric[m][r]->sink != s)
                st->by_metric[m][w++] = st->by_metric[m][r];
        st->n_by_metric[m] = w;
    }
    pthread_mutex_lock(&st->ring_lock);
    for (size_t i = 0; i < s->tab_cap; i++) {
        struct series *se = s->tab[i];
        if (!se)
            continue;
        fs_ring_series_delete(st->ring, se->ring_id);
        atomic_fetch_sub(&st->n_series, 1);
        free(se);
    }
    fs_ring_group_delete(st->ring, s->group);
    pthread_mutex_unlock(&st->ring_lock);
    pthread_rwlock_unlock(&st->lock);

    free(s->tab);
    free(s->pts);
    free(s->pend);
    free(s->source);
    free(s->detail);
    pthread_mutex_destroy(&s->stats_lock);
    free(s);
}

const char *
fs_sink_target(const struct fs_sink *s)
{
    return s->tcfg->name;
}

void
fs_sink_set_done_cb(struct fs_sink *s, fs_sink_done_cb cb, void *arg)
{
    pthread_mutex_lock(&s->stats_lock);
    s->done_cb = cb;
    s->done_arg = arg;
    pthread_mutex_unlock(&s->stats_lock);
}

void
fs_sink_cycle_begin(struct fs_sink *s, uint64_t cycle_id)
{
    pthread_mutex_lock(&s->stats_lock);
    s->cycle_id = cycle_id;
    s->cycle_start_mono_us = fs_monotonic_us();
    pthread_mutex_unlock(&s->stats_lock);
}

void
fs_sink_set_detail(struct fs_sink *s, const char *json_members)
{
    char *d = json_members ? strdup(json_members) : NULL;
    pthread_mutex_lock(&s->stats_lock);
    free(s->detail);
    s->detail = d;
    pthread_mutex_unlock(&s->stats_lock);
}

void
fs_sink_count_overrun(struct fs_sink *s)
{
    pthread_mutex_lock(&s->stats_lock);
    s->poll_errors[4]++;
    pthread_mutex_unlock(&s->stats_lock);
}

/* ---- interning ---- */

static bool
iface_allowed(const struct fs_target_cfg *t, const char *iface)
{
    if (t->iface_include && regexec(&t->iface_include_re, iface, 0, NULL, 0) != 0)
        return false;
    if (t->iface_exclude && regexec(&t->iface_exclude_re, iface, 0, NULL, 0) == 0)
        return false;
    return true;
}

static size_t
escape_label_value(char *out, size_t cap, const char *v)
{
    size_t o = 0;
    for (; *v && o + 2 < cap; v++) {
        if (*v == '\\' || *v == '"') {
            out[o++] = '\\';
            out[o++] = *v;
        } else if (*v == '\n') {
            out[o++] = '\\';
            out[o++] = 'n';
        } else {
            out[o++] = *v;
        }
    }
    return o;
}

/*
 * One allocation holds the series, its label array and every string, so removal is one
 * free() and the reader-visible pointers never move.
 */
static struct series *
series_alloc(struct fs_sink *s, enum fs_metric m, const struct fs_label *own, size_t n_own,
             const char *key, size_t key_len, uint64_t hash)
{
    const struct fs_target_cfg *t = s->tcfg;
    struct fs_label all[MAX_LABELS + 8];
    size_t n = 0;
    all[n++] = (struct fs_label){"target", t->name};
    for (size_t i = 0; i < t->n_labels && n < MAX_LABELS; i++)
        all[n++] = (struct fs_label){t->labels[i].key, t->labels[i].value};
    for (size_t i = 0; i < n_own && n < MAX_LABELS + 6; i++)
        all[n++] = own[i];
    all[n++] = (struct fs_label){"source", s->source};

    size_t strings = key_len + 1, text = 0;
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(all[i].name), vl = strlen(all[i].value);
        strings += nl + 1 + vl + 1;
        text += nl + 4 + 2 * vl;
    }
    size_t size = sizeof(struct series) + n * sizeof(struct fs_label) + strings + text + 1;
    struct series *se = calloc(1, size);
    if (!se)
        return NULL;
    char *p = (char *)(se + 1) + n * sizeof(struct fs_label);
    se->labels = (struct fs_label *)(se + 1);
    se->n_labels = n;
    se->key = p;
    memcpy(p, key, key_len);
    p[key_len] = 0;
    se->key_len = key_len;
    p += key_len + 1;
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(all[i].name), vl = strlen(all[i].value);
        memcpy(p, all[i].name, nl + 1);
        se->labels[i].name = p;
        p += nl + 1;
        memcpy(p, all[i].value, vl + 1);
        se->labels[i].value = p;
        p += vl + 1;
    }
    se->labels_text = p;
    size_t o = 0, cap = text + 1;
    for (size_t i = 0; i < n; i++) {
        if (i)
            p[o++] = ',';
        size_t nl = strlen(se->labels[i].name);
        memcpy(p + o, se->labels[i].name, nl);
        o += nl;
        p[o++] = '=';
        p[o++] = '"';
        o += escape_label_value(p + o, cap - o, se->labels[i].value);
        p[o++] = '"';
    }
    p[o] = 0;
    se->labels_text_len = o;
    se->metric = m;
    se->counter = fs_metric_defs[m].type == FS_MT_COUNTER;
    se->scale = 1.0;
    se->sink = s;
    se->hash = hash;
    return se;
}

static bool
tab_grow(struct fs_sink *s)
{
    size_t ncap = s->tab_cap ? s->tab_cap * 2 : 256;
    struct series **nt = calloc(ncap, sizeof *nt);
    if (!nt)
        return false;
    for (size_t i = 0; i < s->tab_cap; i++) {
        struct series *se = s->tab[i];
        if (!se)
            continue;
        size_t j = se->hash & (ncap - 1);
        while (nt[j])
            j = (j + 1) & (ncap - 1);
        nt[j] = se;
    }
    free(s->tab);
    s->tab = nt;
    s->tab_cap = ncap;
    return true;
}

static struct series *
series_get(struct fs_sink *s, enum fs_metric m, const struct fs_label *own, size_t n_own,
           const char *iface, double scale)
{
    char key[KEY_MAX];
    size_t k = (size_t)snprintf(key, sizeof key, "%d", (int)m);
    for (size_t i = 0; i < n_own && k < sizeof key; i++)
        k += (size_t)snprintf(key + k, sizeof key - k, "\x1f%s=%s", own[i].name, own[i].value);
    if (k >= sizeof key)
        return NULL; /* absurdly long labels from a device: drop the sample */
    uint64_t h = hash_bytes(key, k);
    if (s->tab_cap) {
        for (size_t j = h & (s->tab_cap - 1);; j = (j + 1) & (s->tab_cap - 1)) {
            struct series *se = s->tab[j];
            if (!se)
                break;
            if (se->hash == h && se->key_len == k && memcmp(se->key, key, k) == 0)
                return se;
        }
    }
    if ((s->tab_len + 1) * 10 >= s->tab_cap * 7 && !tab_grow(s))
        return NULL;
    struct series *se = series_alloc(s, m, own, n_own, key, k, h);
    if (!se)
        return NULL;
    if (iface)
        snprintf(se->iface, sizeof se->iface, "%s", iface);
    se->scale = scale;

    struct fs_store *st = s->st;
    pthread_mutex_lock(&st->ring_lock);
    int32_t rid =
        fs_ring_series_new(st->ring, s->group, se->counter ? FS_RING_COUNTER : FS_RING_GAUGE);
    pthread_mutex_unlock(&st->ring_lock);
    if (rid < 0) {
        free(se);
        return NULL;
    }
    se->ring_id = (uint32_t)rid;
    se->reset_gen = s->reset_gen;
    se->iface_reset_gen = s->iface_reset_gen;

    pthread_rwlock_wrlock(&st->lock);
    if (st->n_by_metric[m] == st->cap_by_metric[m]) {
        size_t nc = st->cap_by_metric[m] ? st->cap_by_metric[m] * 2 : 64;
        struct series **nl = realloc(st->by_metric[m], nc * sizeof *nl);
        if (!nl) {
            pthread_rwlock_unlock(&st->lock);
            pthread_mutex_lock(&st->ring_lock);
            fs_ring_series_delete(st->ring, se->ring_id);
            pthread_mutex_unlock(&st->ring_lock);
            free(se);
            return NULL;
        }
        st->by_metric[m] = nl;
        st->cap_by_metric[m] = nc;
    }
    st->by_metric[m][st->n_by_metric[m]++] = se;
    pthread_rwlock_unlock(&st->lock);

    size_t j = h & (s->tab_cap - 1);
    while (s->tab[j])
        j = (j + 1) & (s->tab_cap - 1);
    s->tab[j] = se;
    s->tab_len++;
    atomic_fetch_add(&st->n_series, 1);
    pthread_mutex_lock(&s->stats_lock);
    s->n_series++;
    pthread_mutex_unlock(&s->stats_lock);
    return se;
}

/* ---- batches ---- */

void
fs_sink_begin(struct fs_sink *s, int64_t ts_us)
{
    s->in_batch = true;
    s->batch_ts = ts_us;
    s->batch_seq++;
    s->n_pts = 0;
    s->batch_cleared = false;
}

static bool
batch_room(struct fs_sink *s)
{
    if (s->n_pts < s->cap_pts)
        return true;
    size_t nc = s->cap_pts ? s->cap_pts * 2 : 256;
    struct fs_ring_point *np = realloc(s->pts, nc * sizeof *np);
    if (!np)
        return false;
    s->pts = np;
    struct pending *npd = realloc(s->pend, nc * sizeof *npd);
    if (!npd)
        return false;
    s->pend = npd;
    s->cap_pts = nc;
    return true;
}

/*
 * Resolves the metric's own labels: normalizes `interface` and applies the target's
 * filters. Returns the series, or NULL when the sample is to be dropped.
 */
static struct series *
sample_series(struct fs_sink *s, enum fs_metric m, const struct fs_label *labels, size_t n,
              double scale)
{
    if ((unsigned)m >= FS_METRIC_COUNT || n > MAX_LABELS || !s->in_batch)
        return NULL;
    struct fs_label own[MAX_LABELS];
    char ifbuf[64];
    const char *iface = NULL;
    for (size_t i = 0; i < n; i++) {
        own[i] = labels[i];
        if (!own[i].name || !own[i].value)
            return NULL;
        if (strcmp(own[i].name, "interface") == 0) {
            iface = fs_ifname_normalize(own[i].value, ifbuf, sizeof ifbuf);
            own[i].value = iface;
        }
    }
    if (iface && !iface_allowed(s->tcfg, iface))
        return NULL;
    return series_get(s, m, own, n, iface, scale);
}

static void
batch_put(struct fs_sink *s, struct series *se, uint64_t bits)
{
    if (se->batch_seq == s->batch_seq) { /* the same series twice in one batch: last wins */
        s->pts[se->batch_idx].v.u = bits;
        s->pend[se->batch_idx].value = bits;
        return;
    }
    if (!batch_room(s))
        return;
    se->batch_seq = s->batch_seq;
    se->batch_idx = s->n_pts;
    s->pts[s->n_pts].series = se->ring_id;
    s->pts[s->n_pts].v.u = bits;
    s->pend[s->n_pts].s = se;
    s->pend[s->n_pts].value = bits;
    s->n_pts++;
}

static bool
iface_reset_pending(struct fs_sink *s, struct series *se)
{
    if (!se->iface[0])
        return false;
    for (size_t i = 0; i < s->n_iface_resets; i++)
        if (s->iface_resets[i].gen > se->iface_reset_gen &&
            strcmp(s->iface_resets[i].iface, se->iface) == 0)
            return true;
    return false;
}

void
fs_sink_counter_scaled(struct fs_sink *s, enum fs_metric m, const struct fs_label *labels,
                       size_t n_labels, uint64_t raw, unsigned bits, double scale)
{
    if (!(scale > 0))
        return;
    /* The ring keeps the device's exact count; the unit (scale) is applied when read out.
     * It is fixed when the series is created. */
    struct series *se = sample_series(s, m, labels, n_labels, scale);
    if (!se || !se->counter)
        return;

    if (se->has_raw) {
        bool declared = se->reset_gen < s->reset_gen || iface_reset_pending(s, se);
        if (declared) {
            /* Counted from zero since the reset: the exposed value grows by raw. */
            se->offset += se->last_raw;
        } else if (raw < se->last_raw) {
            if (bits == 32 && se->last_raw <= UINT32_MAX) {
                se->offset += (uint64_t)1 << 32;
                pthread_mutex_lock(&s->stats_lock);
                s->counter_resets[FS_RESET_WRAP]++;
                pthread_mutex_unlock(&s->stats_lock);
            } else {
                se->offset += se->last_raw;
                s->batch_cleared = true;
            }
        }
    }
    se->has_raw = true;
    se->last_raw = raw;
    se->reset_gen = s->reset_gen;
    se->iface_reset_gen = s->iface_reset_gen;
    batch_put(s, se, se->offset + raw);
}

void
fs_sink_counter(struct fs_sink *s, enum fs_metric m, const struct fs_label *labels, size_t n_labels,
                uint64_t raw, unsigned bits)
{
    fs_sink_counter_scaled(s, m, labels, n_labels, raw, bits, 1.0);
}

void
fs_sink_gauge(struct fs_sink *s, enum fs_metric m, const struct fs_label *labels, size_t n_labels,
              double value)
{
    struct series *se = sample_series(s, m, labels, n_labels, 1.0);
    if (!se || se->counter)
        return;
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    batch_put(s, se, bits);
}

void
fs_sink_end(struct fs_sink *s)
{
    if (!s->in_batch)
        return;
    s->in_batch = false;
    struct fs_store *st = s->st;
    if (s->n_pts) {
        pthread_mutex_lock(&st->ring_lock);
        int rc = fs_ring_append(st->ring, s->group, s->batch_ts, s->pts, s->n_pts);
        pthread_mutex_unlock(&st->ring_lock);
        if (rc != 0)
            fs_log(FS_LOG_WARN, s->source,
                   "target %s: batch refused by the ring (clock went backwards?)", s->tcfg->name);
    }
    /* Publish the latest values only after the ring has them. */
    for (size_t i = 0; i < s->n_pts; i++) {
        struct series *se = s->pend[i].s;
        atomic_store_explicit(&se->value, s->pend[i].value, memory_order_relaxed);
        atomic_store_explicit(&se->ts_us, s->batch_ts, memory_order_release);
        atomic_store_explicit(&s->metric_ts[se->metric], s->batch_ts, memory_order_relaxed);
    }
    if (s->batch_cleared) {
        pthread_mutex_lock(&s->stats_lock);
        s->counter_resets[FS_RESET_CLEARED]++;
        pthread_mutex_unlock(&s->stats_lock);
    }
    s->n_pts = 0;
}

void
fs_sink_counter_reset(struct fs_sink *s, enum fs_reset_kind kind, const char *interface)
{
    if ((unsigned)kind >= FS_RESET_KIND_COUNT)
        return;
    if (interface) {
        /* Only that interface's counters restart; the others keep their base. */
        char buf[64];
        fs_ifname_normalize(interface, buf, sizeof buf);
        if (s->n_iface_resets < MAX_IFACE_RESETS) {
            s->iface_reset_gen++;
            snprintf(s->iface_resets[s->n_iface_resets].iface, sizeof buf, "%s", buf);
            s->iface_resets[s->n_iface_resets].gen = s->iface_reset_gen;
            s->n_iface_resets++;
        }
    } else {
        s->reset_gen++;
    }
    pthread_mutex_lock(&s->stats_lock);
    s->counter_resets[kind]++;
    pthread_mutex_unlock(&s->stats_lock);
}

/*
 * Deletes the sink's series that have had no sample for longer than the retention (an
 * interface that went away, a label value that no longer occurs): their history has
 * aged out anyway, and a live head would pin the group's timeline in the ring forever.
 * Runs on the sink's reporting thread, a few times per retention period.
 */
static void
sweep_dead_series(struct fs_sink *s, int64_t now)
{
    struct fs_store *st = s->st;
    int64_t ret = atomic_load(&st->retention_us);
    int64_t every = ret / 4;
    every = every < 1000000 ? 1000000 : every > 600000000 ? 600000000 : every;
    if (s->last_sweep_us == 0)
        s->last_sweep_us = now;
    if (now - s->last_sweep_us < every)
        return;
    s->last_sweep_us = now;
    size_t dead = 0;
    for (size_t i = 0; i < s->tab_cap; i++)
        if (s->tab[i] && atomic_load(&s->tab[i]->ts_us) < now - ret)
            dead++;
    if (dead == 0)
        return;
    pthread_rwlock_wrlock(&st->lock);
    for (int m = 0; m < FS_METRIC_COUNT; m++) {
        size_t w = 0;
        for (size_t r = 0; r < st->n_by_metric[m]; r++) {
            struct series *se = st->by_metric[m][r];
            if (se->sink != s || atomic_load(&se->ts_us) >= now - ret)
                st->by_metric[m][w++] = se;
        }
        st->n_by_metric[m] = w;
    }
    /* Rebuild the hash without the dead (open addressing has no cheap delete). */
    struct series **old = s->tab;
    size_t cap = s->tab_cap;
    struct series **nt = calloc(cap, sizeof *nt);
    if (!nt) {
        pthread_rwlock_unlock(&st->lock);
        return; /* the lists no longer hold them; the hash keeps them until next time */
    }
    pthread_mutex_lock(&st->ring_lock);
    for (size_t i = 0; i < cap; i++) {
        struct series *se = old[i];
        if (!se)
            continue;
        if (atomic_load(&se->ts_us) < now - ret) {
            fs_ring_series_delete(st->ring, se->ring_id);
            atomic_fetch_sub(&st->n_series, 1);
            s->tab_len--;
            free(se);
            continue;
        }
        size_t j = se->hash & (cap - 1);
        while (nt[j])
            j = (j + 1) & (cap - 1);
        nt[j] = se;
    }
    pthread_mutex_unlock(&st->ring_lock);
    pthread_rwlock_unlock(&st->lock);
    s->tab = nt;
    free(old);
    pthread_mutex_lock(&s->stats_lock);
    s->n_series -= dead;
    pthread_mutex_unlock(&s->stats_lock);
    fs_log(FS_LOG_INFO, s->source,
           "target %s: %zu series without samples for a retention period removed", s->tcfg->name,
           dead);
}

void
fs_sink_done(struct fs_sink *s, uint64_t cycle_id, enum fs_poll_result r, const char *msg)
{
    if (s->in_batch)
        fs_sink_end(s);
    int64_t mono = fs_monotonic_us();
    pthread_mutex_lock(&s->stats_lock);
    s->last_poll_us = fs_realtime_us();
    if (s->cycle_start_mono_us && (cycle_id == 0 || cycle_id == s->cycle_id)) {
        int64_t d = mono - s->cycle_start_mono_us;
        double sec = (double)d / 1e6;
        s->last_duration_us = d;
        s->poll_sum += sec;
        s->poll_count++;
        size_t b = 0;
        while (b < FS_POLL_BUCKETS && sec > fs_poll_bucket_bounds[b])
            b++;
        s->poll_hist[b]++;
        s->cycle_start_mono_us = 0;
    }
    if (r == FS_POLL_OK) {
        s->state = FS_INST_UP;
        s->consecutive_failures = 0;
        s->last_error[0] = 0;
    } else {
        s->state = FS_INST_DOWN;
        s->consecutive_failures++;
        if ((unsigned)r - 1 < 4)
            s->poll_errors[r - 1]++;
        snprintf(s->last_error, sizeof s->last_error, "%s",
                 msg ? msg : fs_poll_error_kind_names[r - 1]);
    }
    fs_sink_done_cb cb = s->done_cb;
    void *arg = s->done_arg;
    pthread_mutex_unlock(&s->stats_lock);
    s->n_iface_resets = 0;
    sweep_dead_series(s, fs_realtime_us());
    if (cb)
        cb(arg, cycle_id, r);
}

void
fs_sink_clock(struct fs_sink *s, int64_t device_us, int64_t local_lo_us, int64_t local_hi_us)
{
    if (local_hi_us < local_lo_us)
        return;
    double unc = (double)(local_hi_us - local_lo_us) / 2e6;
    double off = (double)(device_us - (local_lo_us + (local_hi_us - local_lo_us) / 2)) / 1e6;
    int64_t mono = fs_monotonic_us();
    pthread_mutex_lock(&s->stats_lock);
    /* Keep the tightest recent measurement; an old one ages out after 10 intervals. */
    bool old = mono - s->clock_measured_mono_us > 10 * s->interval_us;
    if (!s->clock_known || old || unc <= s->clock_uncertainty) {
        s->clock_known = true;
        s->clock_offset = off;
        s->clock_uncertainty = unc;
        s->clock_measured_mono_us = mono;
    }
    pthread_mutex_unlock(&s->stats_lock);
}

/* ---- readers ---- */

static int
precedence_rank(const struct fs_target_cfg *t, const char *source)
{
    static const char *const dflt[3] = {"gnmi", "cli", "snmp"};
    for (int i = 0; i < 3; i++) {
        const char *p = t->source_precedence[i] ? t->source_precedence[i] : dflt[i];
        if (strcmp(p, source) == 0)
            return i;
    }
    return 3;
}

static bool
fresh(const struct fs_sink *s, int64_t ts, int64_t now)
{
    int64_t k = s->tcfg->staleness_intervals > 0 ? s->tcfg->staleness_intervals : 3;
    return ts != 0 && now - ts <= k * s->interval_us;
}

/* Whether a sibling source of the same target with higher precedence has fresh data of m. */
static bool
shadowed(const struct fs_store *st, const struct fs_sink *s, enum fs_metric m, int64_t now)
{
    if (s->tcfg->expose_all_sources)
        return false;
    int mine = precedence_rank(s->tcfg, s->source);
    for (const struct fs_sink *o = st->sinks; o; o = o->next) {
        if (o == s || strcmp(o->tcfg->name, s->tcfg->name) != 0)
            continue;
        if (precedence_rank(s->tcfg, o->source) < mine &&
            fresh(o, atomic_load_explicit(&o->metric_ts[m], memory_order_relaxed), now))
            return true;
    }
    return false;
}

void
fs_store_foreach_series(struct fs_store *st, bool only_exported, fs_series_cb cb, void *arg)
{
    int64_t now = fs_realtime_us();
    pthread_rwlock_rdlock(&st->lock);
    for (int m = 0; m < FS_METRIC_COUNT; m++) {
        /* A sink's series of one metric are mostly adjacent: decide precedence once per
         * run of them rather than per series (it scans the target's other sources). */
        const struct fs_sink *memo_sink = NULL;
        bool memo_shadowed = false;
        for (size_t i = 0; i < st->n_by_metric[m]; i++) {
            const struct series *se = st->by_metric[m][i];
            struct fs_series_info in;
            in.ts_us = atomic_load_explicit(&se->ts_us, memory_order_acquire);
            uint64_t v = atomic_load_explicit(&se->value, memory_order_relaxed);
            if (se->sink != memo_sink) {
                memo_sink = se->sink;
                memo_shadowed = shadowed(st, se->sink, m, now);
            }
            in.exported = fresh(se->sink, in.ts_us, now) && !memo_shadowed;
            if (only_exported && !in.exported)
                continue;
            in.id = se->ring_id;
            in.metric = (enum fs_metric)m;
            in.name = fs_metric_defs[m].name;
            in.counter = se->counter;
            in.scale = se->scale;
            in.labels = se->labels;
            in.n_labels = se->n_labels;
            in.labels_text = se->labels_text;
            in.labels_text_len = se->labels_text_len;
            in.u = v;
            memcpy(&in.d, &v, sizeof in.d);
            if (cb(arg, &in))
                goto out;
        }
    }
out:
    pthread_rwlock_unlock(&st->lock);
}

bool
fs_store_foreach_series_chunk(struct fs_store *st, bool only_exported, uint64_t *cursor, size_t max,
                              fs_series_cb cb, void *arg)
{
    int64_t now = fs_realtime_us();
    size_t m = (size_t)(*cursor >> 32), i = (size_t)(*cursor & 0xffffffffu), seen = 0;
    bool done = false;
    pthread_rwlock_rdlock(&st->lock);
    for (; m < FS_METRIC_COUNT; m++, i = 0) {
        const struct fs_sink *memo_sink = NULL;
        bool memo_shadowed = false;
        for (; i < st->n_by_metric[m]; i++) {
            if (seen++ == max)
                goto out;
            const struct series *se = st->by_metric[m][i];
            struct fs_series_info in;
            in.ts_us = atomic_load_explicit(&se->ts_us, memory_order_acquire);
            uint64_t v = atomic_load_explicit(&se->value, memory_order_relaxed);
            if (se->sink != memo_sink) {
                memo_sink = se->sink;
                memo_shadowed = shadowed(st, se->sink, (enum fs_metric)m, now);
            }
            in.exported = fresh(se->sink, in.ts_us, now) && !memo_shadowed;
            if (only_exported && !in.exported)
                continue;
            in.id = se->ring_id;
            in.metric = (enum fs_metric)m;
            in.name = fs_metric_defs[m].name;
            in.counter = se->counter;
            in.scale = se->scale;
            in.labels = se->labels;
            in.n_labels = se->n_labels;
            in.labels_text = se->labels_text;
            in.labels_text_len = se->labels_text_len;
            in.u = v;
            memcpy(&in.d, &v, sizeof in.d);
            if (cb(arg, &in)) {
                i++;
                goto out;
            }
        }
    }
    done = true;
out:
    pthread_rwlock_unlock(&st->lock);
    *cursor = ((uint64_t)m << 32) | (uint64_t)i;
    return done;
}

long
fs_store_read(struct fs_store *st, uint32_t series, int64_t start_us, int64_t end_us,
              struct fs_ring_sample *out, size_t max, bool *truncated)
{
    pthread_rwlock_rdlock(&st->lock);
    long n = fs_ring_read(st->ring, series, start_us, end_us, out, max, truncated);
    pthread_rwlock_unlock(&st->lock);
    return n;
}

void
fs_store_foreach_instance(struct fs_store *st, fs_instance_cb cb, void *arg)
{
    static const char *const state_names[] = {"idle", "up", "down"};
    pthread_rwlock_rdlock(&st->lock);
    for (struct fs_sink *s = st->sinks; s; s = s->next) {
        struct fs_instance_info in;
        char err[sizeof s->last_error];
        char detail[1024];
        memset(&in, 0, sizeof in);
        pthread_mutex_lock(&s->stats_lock);
        in.state = s->state;
        in.last_poll_us = s->last_poll_us;
        in.last_duration_us = s->last_duration_us;
        memcpy(err, s->last_error, sizeof err);
        in.series = s->n_series;
        in.consecutive_failures = s->consecutive_failures;
        memcpy(in.poll_errors, s->poll_errors, sizeof in.poll_errors);
        memcpy(in.counter_resets, s->counter_resets, sizeof in.counter_resets);
        uint64_t cum = 0;
        for (size_t b = 0; b <= FS_POLL_BUCKETS; b++) {
            cum += s->poll_hist[b];
            in.poll_hist[b] = cum;
        }
        in.poll_sum_seconds = s->poll_sum;
        in.poll_count = s->poll_count;
        in.clock_known = s->clock_known;
        in.clock_offset_seconds = s->clock_offset;
        in.clock_uncertainty_seconds = s->clock_uncertainty;
        snprintf(detail, sizeof detail, "%s", s->detail ? s->detail : "");
        pthread_mutex_unlock(&s->stats_lock);
        in.target = s->tcfg->name;
        in.source = s->source;
        in.address = s->tcfg->address;
        in.state_name = state_names[in.state];
        in.interval_us = s->interval_us;
        in.last_error = err;
        in.static_labels = s->tcfg->labels;
        in.n_static_labels = s->tcfg->n_labels;
        in.driver_detail = detail;
        if (cb(arg, &in))
            break;
    }
    pthread_rwlock_unlock(&st->lock);
}

void
fs_store_ring_stats(struct fs_store *st, struct fs_ring_stats *rs, uint64_t *memory_limit)
{
    fs_ring_stats(st->ring, rs);
    rs->series = atomic_load(&st->n_series);
    if (memory_limit)
        *memory_limit = atomic_load(&st->memory_limit);
}
