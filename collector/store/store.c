/*
 * The store: series interning, latest values, counter monotonicity, instances and their
 * health. See store.h and sink.h for the contracts; the counter arithmetic itself is
 * counter.c.
 *
 * Locks, in the order they may nest:
 *   st->retired_lock     the list of removed instances whose history is still held
 *   st->lock (rwlock)    the series lists per metric and the instance list; readers hold
 *                        it shared while iterating, interning and removal hold it exclusive
 *   st->ring_lock        serializes ring writers (the ring allows one writer at a time)
 *   sink->stats_lock     the instance's health fields
 *   st->intern_lock      the table of interned label sets and their reference counts
 *                        (a leaf: nothing else is taken while it is held)
 * A sink's hash table and batch are touched only by the one thread reporting for it
 * (after removal: by the retired-series sweep, under retired_lock).
 */
#include "store/store.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/counter.h"
#include "clock/clock.h"
#include "util/clock.h"
#include "util/log.h"

#define KEY_MAX 1024
#define MAX_LABELS 16
#define MAX_IFACE_RESETS 64
#define IFNAME_MAX 256 /* an interface name is kept up to 255 bytes (ifName's limit) */
#define DEFAULT_SERIES_LIMIT 50000
#define CLOCK_WINDOW_US (600 * 1000000LL) /* device clock measurements kept */
#define CLOCK_MAX_DRIFT_PPM 20.0          /* a cheap crystal's drift, with margin */
#define LOG_EVERY_US (60 * 1000000LL)     /* rate limit of repeated warnings, per instance */

const double fs_poll_bucket_bounds[FS_POLL_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1,
                                                       0.25,  0.5,  1.0,   2.5,  10.0};
const char *const fs_poll_error_kind_names[FS_POLL_ERROR_KINDS] = {"timeout", "auth",    "protocol",
                                                                   "parse",   "overrun", "partial"};
const char *const fs_reset_kind_names[FS_RESET_KIND_COUNT] = {"wrap", "reboot", "discontinuity",
                                                              "cleared"};

/* Index in poll_errors[] of a failed cycle's result (overrun is not a result). */
static int
poll_error_index(enum fs_poll_result r)
{
    switch (r) {
    case FS_POLL_TIMEOUT:
        return 0;
    case FS_POLL_AUTH:
        return 1;
    case FS_POLL_PROTOCOL:
        return 2;
    case FS_POLL_PARSE:
        return 3;
    case FS_POLL_PARTIAL:
        return 5;
    default:
        return -1;
    }
}

/*
 * A series' own labels (the metric's, cleaned), interned: every series with the same own
 * labels shares one, in any sink (a fleet of alike switches holds "Ethernet1/1, tc 3"
 * once, not once per target). The label set lives in the store's intern table, which
 * owns it; each series holding it counts one reference (refs, under st->intern_lock), and
 * the last series to go frees it, so label values that come and go (renamed ports, flow
 * rules) do not pile up. Immutable once made: readers that reach it through a series
 * (under st->lock, which keeps the series and so its reference) read it without
 * intern_lock. One allocation: the struct, labels[n], then key, the strings and text.
 */
struct labelset {
    struct labelset *next; /* the intern table's chain */
    uint32_t hash;         /* hash_bytes(key) */
    uint32_t refs;         /* series holding it (under intern_lock) */
    uint32_t key_len;      /* "\x1f<name>=<value>" per label, as series_get builds it */
    uint32_t text_len;     /* `,name="value"` per label, escaped for exposition */
    uint8_t n;
    const char *key, *text;
    struct fs_label labels[];
};

/* A series' slot in its sink's hash: its label set's hash and its metric. */
static inline uint32_t
series_hash(uint32_t ls_hash, unsigned metric)
{
    uint32_t h = ls_hash ^ ((metric + 1u) * 0x9e3779b1u);
    return h ^ (h >> 15);
}

/* Where a series' interface (the last label named `interface`) is: IFACE_OWN + i is its
 * own label i. */
enum { IFACE_NONE, IFACE_STATIC, IFACE_OWN };

/*
 * One series. Kept small (issue 34): its labels are the sink's (target, static labels,
 * source) and an interned label set, joined when read; generations and batch numbers are
 * 32-bit (a sink counts at most a few resets and one batch a cycle, and the ring's
 * timeline ends at 2^32 batches anyway). The counter state (struct fs_counter) is kept
 * in pieces: its time is last_mono_us, its width a byte among the flags (see
 * counter_update).
 */
struct series {
    struct fs_sink *sink;
    const struct labelset *ls; /* one reference, released when the series is freed */
    _Atomic uint64_t value;    /* exposed counter value, or the gauge's bits */
    _Atomic int64_t ts_us;
    double scale; /* exposed = value * scale (counters kept in a finer unit) */
    /* Writer-only state (the sink's reporting thread). */
    uint64_t ctr_value; /* struct fs_counter's value and last_raw */
    uint64_t ctr_last_raw;
    int64_t last_mono_us; /* monotonic time of the latest sample: sweeps go by it, and it
                             is the counter's last_ts_us */
    float max_per_s;      /* plausible increase per second; 0 unknown (a bound with 10%
                             margin: float's 7 digits are plenty) */
    uint32_t ring_id;
    uint32_t ring_gen;
    uint32_t reset_gen;       /* the sink's reset_gen when last updated */
    uint32_t iface_reset_gen; /* the sink's iface_reset_gen when last updated */
    uint32_t rates_gen;       /* the sink's rates_gen when max_per_s was looked up */
    uint32_t batch_seq;       /* batch that last carried it, to merge duplicates */
    uint32_t batch_idx;
    uint16_t metric; /* enum fs_metric */
    /* Set at creation, then only read: one byte. */
    bool counter : 1;
    bool octets : 1;       /* counter in bytes: its plausible rate is the line rate itself */
    uint8_t iface_src : 6; /* IFACE_*: where series_iface() finds the interface, if any */
    uint8_t ctr_last_bits; /* struct fs_counter's last_bits */
    bool doomed;           /* marked for deletion by a sweep */
    /* fs_sink_retire within the batch being built, after the series' sample in it if
     * any: it stays not exported (a later sample of the same batch clears it) */
    bool retired_in_batch;
    _Atomic bool gone;
};
/* 104 bytes: one 112-byte block of glibc's (issue 34; bench_store_mem) */
_Static_assert(sizeof(struct series) <= 104, "struct series grew past 104 bytes");
/* iface_src's 6 bits hold IFACE_OWN + any own label index */
_Static_assert(IFACE_OWN + MAX_LABELS < 64, "iface_src too narrow");

/* The series of pts[i] (its value is pts[i].v.u: the ring only reads the points). */
struct pending {
    struct series *s;
};

struct iface_rate {
    char *iface; /* NULL: free slot */
    double octets_per_s;
};

struct fs_sink {
    struct fs_store *st;
    struct fs_sink *next;
    const struct fs_target_cfg *tcfg; /* NULL once removed */
    char *target;                     /* the target's name, kept after removal */
    char *labels_sig;                 /* its static labels, to tell if a re-add matches */
    char *source;
    /* The labels every series of the sink starts with (target, static labels) and ends
     * with (source), as labels and as exposition text; one allocation, owned here, made
     * at the add (a revived sink has the same: same target, static labels and source). */
    struct fs_label *prefix; /* n_prefix labels, then the source label */
    size_t n_prefix;
    const char *prefix_text; /* `target="t",pod="p1"` */
    size_t prefix_text_len;
    const char *suffix_text; /* `,source="gnmi"` */
    size_t suffix_text_len;
    const char *prefix_iface; /* the value of a static label named `interface`, or NULL */
    int64_t interval_us;
    int32_t group;
    bool retired; /* removed: not polled, not exported, history kept (under st->lock) */
    /* the retired sweep's new hash while it deletes (under retired_lock); else NULL */
    struct series **sweep_tab;
    /* A streaming sink's series stop being fresh when its stream fails: samples stamped
     * at or before stale_through_us are stale (see fs_store_sink_set_streaming). */
    _Atomic bool streaming;
    _Atomic int64_t stale_through_us;
    /* The driver reads each series every this many cycles (fs_sink_set_spread): the
     * staleness bound is that many times longer. 0 or 1: every cycle. */
    _Atomic unsigned spread;

    /* Series of this sink by key (open addressing; owned here, touched by one thread). */
    struct series **tab;
    /* Handles (struct fs_series_handle) filled with another value are stale: a new value
     * (from handle_epochs, unique in the process) whenever a series of the sink is freed
     * or the sink is revived (its interface filters may differ). */
    _Atomic uint64_t epoch;
    size_t tab_cap, tab_len;

    /* The batch being built. */
    bool in_batch;
    int64_t batch_ts;
    int64_t batch_mono_us;
    uint32_t batch_seq;
    struct fs_ring_point *pts;
    struct pending *pend;
    size_t n_pts, cap_pts;
    bool batch_cleared, batch_discontinuity;

    /* The timeline: the stamps of the previous batch as given and as used. */
    bool have_ts;
    int64_t last_given_ts, last_stamped_ts;
    int64_t step_logged_mono, refused_logged_mono, limit_logged_mono;

    /* Declared resets: whole-sink ones bump reset_gen; interface ones are listed until
     * the cycle ends. Each is counted once, by the first counter it rebases. */
    uint32_t reset_gen;
    enum fs_reset_kind reset_kind;
    bool reset_counted;
    uint32_t iface_reset_gen;
    struct {
        char iface[IFNAME_MAX];
        uint32_t gen;
        enum fs_reset_kind kind;
        bool counted;
    } iface_resets[MAX_IFACE_RESETS];
    size_t n_iface_resets;

    /* Line rates by interface (open addressing, never shrinks; bounded by interfaces). */
    struct iface_rate *rates;
    size_t rates_cap, rates_len;
    uint32_t rates_gen;

    /* Newest sample time per metric, for source precedence: [m][1] of the series with an
     * interface label, [m][0] of the others (a per-port breakdown of a family does not
     * hide, and is not hidden by, a source's per-device totals of it). */
    _Atomic int64_t metric_ts[FS_METRIC_COUNT][2];
    _Atomic int64_t last_sample_ts; /* newest batch_ts committed (realtime µs), 0: none */
    _Atomic uint64_t n_series;

    /* Health, under stats_lock. */
    pthread_mutex_t stats_lock;
    enum fs_instance_state state;
    int64_t last_poll_us, last_duration_us;
    char last_error[256];
    int64_t last_error_us, last_error_mono; /* when last_error was set (0: never) */
    uint64_t reconnects;
    int64_t drops_mono[FS_FLAP_KEEP]; /* monotonic times of the latest drops, a ring */
    size_t n_drops;                   /* drops ever noted; the newest is [(n - 1) % KEEP] */
    uint64_t consecutive_failures;
    uint64_t poll_errors[FS_POLL_ERROR_KINDS];
    uint64_t counter_resets[FS_RESET_KIND_COUNT];
    uint64_t agent_restarts, clock_steps, series_limit_dropped;
    uint64_t poll_hist[FS_POLL_BUCKETS + 1];
    double poll_sum;
    uint64_t poll_count;
    int64_t cycle_start_mono_us;
    uint64_t cycle_id;
    struct fs_clock_filter clock_filter; /* the device clock's measurements (clock/clock.h) */
    bool clock_known;
    double clock_offset, clock_uncertainty;
    char clock_basis[FS_SINK_CLOCK_BASIS_MAX]; /* "" until stated or inferred */
    char *detail;
    int64_t last_sweep_mono;
    fs_sink_done_cb done_cb;
    void *done_arg;
};

struct fs_store {
    pthread_rwlock_t lock;
    pthread_mutex_t ring_lock;
    pthread_mutex_t retired_lock;
    struct fs_ring *ring;
    _Atomic uint64_t memory_limit;
    _Atomic int64_t retention_us;
    _Atomic uint64_t series_limit; /* per target; 0 none */
    _Atomic int64_t clock_max_offset_us;
    struct series **by_metric[FS_METRIC_COUNT];
    size_t n_by_metric[FS_METRIC_COUNT], cap_by_metric[FS_METRIC_COUNT];
    struct fs_sink *sinks;   /* in insertion order */
    struct fs_sink *retired; /* removed instances whose history is still held */
    int64_t retired_sweep_mono;
    _Atomic uint64_t n_series;
    struct fs_store_clock clock;
    fs_device_event_cb event_cb; /* set before drivers run (fs_store_set_device_event_listener) */
    void *event_arg;
    struct fs_lldp_listener lldp; /* set before drivers run (fs_store_set_lldp_listener) */
    /* Interned label sets (struct labelset), chained by hash; under intern_lock. */
    pthread_mutex_t intern_lock;
    struct labelset **ls_tab;
    size_t ls_cap, ls_len;
};

/* Handle epochs, process-wide so that no sink (even a new one at a freed one's address,
 * or one of another store) ever takes a value a handle was filled with before. */
static _Atomic uint64_t handle_epochs = 1;

static void
sink_new_epoch(struct fs_sink *s)
{
    atomic_store_explicit(&s->epoch, atomic_fetch_add(&handle_epochs, 1) + 1, memory_order_relaxed);
}

static int64_t
sys_realtime(void *arg)
{
    (void)arg;
    return fs_realtime_us();
}

static int64_t
sys_monotonic(void *arg)
{
    (void)arg;
    return fs_monotonic_us();
}

static int64_t
now_real(const struct fs_store *st)
{
    return st->clock.realtime_us(st->clock.arg);
}

static int64_t
now_mono(const struct fs_store *st)
{
    return st->clock.monotonic_us(st->clock.arg);
}

void
fs_store_set_clock(struct fs_store *st, const struct fs_store_clock *c)
{
    if (c && c->realtime_us && c->monotonic_us)
        st->clock = *c;
    else
        st->clock = (struct fs_store_clock){sys_realtime, sys_monotonic, NULL};
}

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
    atomic_store(&st->series_limit, DEFAULT_SERIES_LIMIT);
    atomic_store(&st->clock_max_offset_us, FS_STORE_DEFAULT_CLOCK_MAX_OFFSET_US);
    fs_store_set_clock(st, NULL);
    /* Writers first: readers (HTTP queries, renders) come often and scan long, and with
     * glibc's default they could keep a sink waiting forever. Nobody takes the read lock
     * twice, which this kind requires. */
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&st->lock, &ra);
    pthread_rwlockattr_destroy(&ra);
    pthread_mutex_init(&st->ring_lock, NULL);
    pthread_mutex_init(&st->retired_lock, NULL);
    pthread_mutex_init(&st->intern_lock, NULL);
    return st;
}

static void sink_free(struct fs_sink *s);
static void retired_sweep(struct fs_store *st, bool force, struct fs_sink *only);

void
fs_store_free(struct fs_store *st)
{
    if (!st)
        return;
    /* Everything goes at once, live and removed instances alike; the ring with it. */
    for (int m = 0; m < FS_METRIC_COUNT; m++)
        free(st->by_metric[m]);
    for (int pass = 0; pass < 2; pass++) {
        for (struct fs_sink *s = pass ? st->retired : st->sinks, *n; s; s = n) {
            n = s->next;
            for (size_t i = 0; i < s->tab_cap; i++)
                free(s->tab[i]); /* their label sets go below, all at once */
            sink_free(s);
        }
    }
    /* every series is gone: the label sets go with the table, whatever their counts */
    for (size_t i = 0; i < st->ls_cap; i++)
        for (struct labelset *l = st->ls_tab[i], *n; l; l = n) {
            n = l->next;
            free(l);
        }
    free(st->ls_tab);
    fs_ring_free(st->ring);
    pthread_rwlock_destroy(&st->lock);
    pthread_mutex_destroy(&st->ring_lock);
    pthread_mutex_destroy(&st->retired_lock);
    pthread_mutex_destroy(&st->intern_lock);
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

void
fs_store_set_series_limit(struct fs_store *st, uint64_t per_target)
{
    atomic_store(&st->series_limit, per_target);
}

void
fs_store_set_clock_max_offset(struct fs_store *st, int64_t max_offset_us)
{
    atomic_store(&st->clock_max_offset_us,
                 max_offset_us > 0 ? max_offset_us : FS_STORE_DEFAULT_CLOCK_MAX_OFFSET_US);
}

void
fs_store_set_device_event_listener(struct fs_store *st, fs_device_event_cb cb, void *arg)
{
    pthread_rwlock_wrlock(&st->lock);
    st->event_cb = cb;
    st->event_arg = arg;
    pthread_rwlock_unlock(&st->lock);
}

uint64_t
fs_store_series_count(struct fs_store *st)
{
    return atomic_load(&st->n_series);
}

/* The static labels of a target as one string (they are part of every series' labels). */
static char *
labels_signature(const struct fs_target_cfg *t)
{
    size_t len = 1;
    for (size_t i = 0; i < t->n_labels; i++)
        len += strlen(t->labels[i].key) + strlen(t->labels[i].value) + 2;
    char *sig = malloc(len), *p = sig;
    if (!sig)
        return NULL;
    for (size_t i = 0; i < t->n_labels; i++)
        p += sprintf(p, "%s\x1f%s\x1e", t->labels[i].key, t->labels[i].value);
    *p = '\0';
    return sig;
}

static size_t escape_label_value(char *out, size_t cap, const char *v);
static size_t series_labels(const struct series *se, struct fs_label *all);

/*
 * The sink's share of its series' labels (see struct fs_sink): target and the static
 * labels (at most MAX_LABELS labels in all, as before label sets), then source. Leaves
 * s->prefix NULL on no memory. The strings are copied: tcfg may go before the series.
 */
static void
sink_prefix(struct fs_sink *s, const struct fs_target_cfg *t)
{
    struct fs_label all[MAX_LABELS + 1];
    size_t n = 0;
    all[n++] = (struct fs_label){"target", s->target};
    for (size_t i = 0; i < t->n_labels && n < MAX_LABELS; i++)
        all[n++] = (struct fs_label){t->labels[i].key, t->labels[i].value};
    all[n] = (struct fs_label){"source", s->source};
    size_t strings = 0, text = 0;
    for (size_t i = 0; i <= n; i++) {
        size_t nl = strlen(all[i].name), vl = strlen(all[i].value);
        strings += nl + 1 + vl + 1;
        text += nl + 4 + 2 * vl + 1;
    }
    struct fs_label *pl = malloc((n + 1) * sizeof *pl + strings + text + 2);
    if (!pl)
        return;
    char *p = (char *)(pl + n + 1);
    for (size_t i = 0; i <= n; i++) {
        size_t nl = strlen(all[i].name), vl = strlen(all[i].value);
        pl[i].name = memcpy(p, all[i].name, nl + 1);
        p += nl + 1;
        pl[i].value = memcpy(p, all[i].value, vl + 1);
        p += vl + 1;
    }
    /* prefix text, then the suffix after its NUL */
    char *tx = p;
    size_t o = 0, cap = text + 2;
    for (size_t i = 0; i <= n; i++) {
        if (i == n) {
            tx[o++] = 0;
            s->prefix_text_len = o - 1;
            s->suffix_text = tx + o;
        }
        if (i)
            tx[o++] = ',';
        size_t nl = strlen(pl[i].name);
        memcpy(tx + o, pl[i].name, nl);
        o += nl;
        tx[o++] = '=';
        tx[o++] = '"';
        o += escape_label_value(tx + o, cap - o, pl[i].value);
        tx[o++] = '"';
    }
    tx[o] = 0;
    s->prefix_text = tx;
    s->suffix_text_len = (size_t)(tx + o - s->suffix_text);
    s->prefix_iface = NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(pl[i].name, "interface") == 0)
            s->prefix_iface = pl[i].value;
    s->prefix = pl;
    s->n_prefix = n;
}

/*
 * A removed instance of the same target and source whose series would carry the same
 * labels comes back to life instead of a new one: a reload that changes a target (its
 * interval, say) keeps one series per label set, with its history and counter state.
 */
static struct fs_sink *
revive(struct fs_store *st, const struct fs_target_cfg *tcfg, const char *source,
       int64_t interval_us)
{
    char *sig = labels_signature(tcfg);
    struct fs_sink *s = NULL;
    if (!sig)
        return NULL;
    pthread_mutex_lock(&st->retired_lock);
    for (struct fs_sink **pp = &st->retired; *pp; pp = &(*pp)->next) {
        struct fs_sink *o = *pp;
        if (strcmp(o->target, tcfg->name) == 0 && strcmp(o->source, source) == 0 &&
            strcmp(o->labels_sig, sig) == 0) {
            *pp = o->next;
            s = o;
            break;
        }
    }
    if (s) {
        pthread_rwlock_wrlock(&st->lock);
        s->tcfg = tcfg;
        s->interval_us = interval_us > 0 ? interval_us : 10000000;
        s->retired = false;
        sink_new_epoch(s); /* the filters (tcfg) may have changed: resolve labels again */
        atomic_store(&s->spread, 0u); /* the new driver instance starts reading every cycle */
        s->next = NULL;
        struct fs_sink **pp = &st->sinks;
        while (*pp)
            pp = &(*pp)->next;
        *pp = s;
        pthread_mutex_lock(&st->ring_lock);
        fs_ring_group_reopen(st->ring, s->group);
        pthread_mutex_unlock(&st->ring_lock);
        pthread_rwlock_unlock(&st->lock);
        s->in_batch = false;
        s->n_iface_resets = 0;
        pthread_mutex_lock(&s->stats_lock);
        s->state = FS_INST_IDLE;
        s->consecutive_failures = 0;
        s->last_error[0] = 0;
        s->last_error_us = s->last_error_mono = 0;
        s->n_drops = 0; /* the new driver instance starts with a clean record */
        s->cycle_start_mono_us = 0;
        s->done_cb = NULL;
        s->done_arg = NULL;
        free(s->detail);
        s->detail = NULL;
        pthread_mutex_unlock(&s->stats_lock);
    }
    pthread_mutex_unlock(&st->retired_lock);
    free(sig);
    return s;
}

struct fs_sink *
fs_store_sink_add(struct fs_store *st, const struct fs_target_cfg *tcfg, const char *source,
                  int64_t interval_us)
{
    struct fs_sink *s = revive(st, tcfg, source, interval_us);
    if (s)
        return s;
    s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->st = st;
    s->tcfg = tcfg;
    sink_new_epoch(s);
    s->target = strdup(tcfg->name);
    s->labels_sig = labels_signature(tcfg);
    s->source = strdup(source);
    if (s->target && s->source)
        sink_prefix(s, tcfg);
    s->interval_us = interval_us > 0 ? interval_us : 10000000;
    s->state = FS_INST_IDLE;
    fs_clock_filter_init(&s->clock_filter, 0, CLOCK_WINDOW_US, CLOCK_MAX_DRIFT_PPM);
    pthread_mutex_init(&s->stats_lock, NULL);
    pthread_mutex_lock(&st->ring_lock);
    s->group = fs_ring_group_new(st->ring);
    pthread_mutex_unlock(&st->ring_lock);
    if (!s->source || !s->target || !s->labels_sig || !s->prefix || s->group < 0) {
        if (s->group >= 0) {
            pthread_mutex_lock(&st->ring_lock);
            fs_ring_group_delete(st->ring, s->group);
            pthread_mutex_unlock(&st->ring_lock);
        }
        sink_free(s);
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

/* Frees a sink's own memory (not its series). */
static void
sink_free(struct fs_sink *s)
{
    free(s->tab);
    free(s->pts);
    free(s->pend);
    for (size_t i = 0; i < s->rates_cap; i++)
        free(s->rates[i].iface);
    free(s->rates);
    free(s->target);
    free(s->labels_sig);
    free(s->source);
    free(s->prefix);
    free(s->detail);
    pthread_mutex_destroy(&s->stats_lock);
    free(s);
}

/*
 * Removal keeps the history: the instance leaves the list (no health, no export), its
 * ring group is sealed (its chunks become evictable like any other) and its series stay
 * readable through /api/v1/raw until retention or the memory limit has taken their last
 * sample; the retired-series sweep then frees them, and the sink with its last one.
 */
void
fs_store_sink_remove(struct fs_store *st, struct fs_sink *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&st->retired_lock);
    pthread_rwlock_wrlock(&st->lock);
    for (struct fs_sink **pp = &st->sinks; *pp; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    }
    s->retired = true;
    s->tcfg = NULL; /* the caller may free it now */
    s->next = st->retired;
    st->retired = s;
    uint32_t *ids = s->tab_len ? malloc(s->tab_len * sizeof *ids) : NULL;
    size_t n_ids = 0;
    for (size_t i = 0; ids && i < s->tab_cap; i++)
        if (s->tab[i])
            ids[n_ids++] = s->tab[i]->ring_id;
    pthread_mutex_lock(&st->ring_lock);
    /* without memory for the list, heads stay live until retention deletes the series */
    fs_ring_group_seal(st->ring, s->group, ids, n_ids);
    pthread_mutex_unlock(&st->ring_lock);
    pthread_rwlock_unlock(&st->lock);
    free(ids);
    free(s->pts);
    free(s->pend);
    s->pts = NULL;
    s->pend = NULL;
    s->cap_pts = s->n_pts = 0;
    pthread_mutex_unlock(&st->retired_lock);
    retired_sweep(st, true, s);
}

void
fs_store_sink_set_streaming(struct fs_sink *s, bool streaming)
{
    atomic_store(&s->streaming, streaming);
}

void
fs_sink_set_spread(struct fs_sink *s, unsigned polls)
{
    atomic_store(&s->spread, polls);
}

const char *
fs_sink_target(const struct fs_sink *s)
{
    return s->target;
}

int
fs_sink_ifindex_name(struct fs_sink *s, uint32_t ifindex, char *buf, size_t len)
{
    struct fs_store *st = s->st;
    char want[16];
    int found = 0;
    int64_t best_ts = INT64_MIN;
    if (len == 0)
        return 0;
    snprintf(want, sizeof want, "%" PRIu32, ifindex);
    pthread_rwlock_rdlock(&st->lock);
    for (size_t i = 0; i < st->n_by_metric[FS_M_PORT_INFO]; i++) {
        const struct series *se = st->by_metric[FS_M_PORT_INFO][i];
        const char *iface = NULL, *idx = NULL;
        struct fs_label all[MAX_LABELS + 8];
        if (se->sink == s || se->sink->retired || strcmp(se->sink->target, s->target) != 0 ||
            atomic_load(&se->gone))
            continue;
        size_t n = series_labels(se, all);
        for (size_t l = 0; l < n; l++) {
            if (!strcmp(all[l].name, "interface"))
                iface = all[l].value;
            else if (!strcmp(all[l].name, "ifindex"))
                idx = all[l].value;
        }
        /* The newest wins: a port renamed by its source leaves its old series behind. */
        int64_t ts = atomic_load(&se->ts_us);
        if (iface && idx && !strcmp(idx, want) && ts > best_ts) {
            best_ts = ts;
            snprintf(buf, len, "%s", iface);
            found = 1;
        }
    }
    pthread_rwlock_unlock(&st->lock);
    return found;
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
    int64_t mono = now_mono(s->st);
    pthread_mutex_lock(&s->stats_lock);
    s->cycle_id = cycle_id;
    s->cycle_start_mono_us = mono;
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

void
fs_sink_agent_restart(struct fs_sink *s)
{
    pthread_mutex_lock(&s->stats_lock);
    s->agent_restarts++;
    pthread_mutex_unlock(&s->stats_lock);
}

/* Whether a rate-limited log line is due (at most one per LOG_EVERY_US per kind). */
static bool
log_due(struct fs_sink *s, int64_t *last_mono)
{
    int64_t now = now_mono(s->st);
    if (*last_mono != 0 && now - *last_mono < LOG_EVERY_US)
        return false;
    *last_mono = now;
    return true;
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

/* The interned label set of these own labels (key as series_get built it), with one more
 * reference; NULL on no memory. */
static const struct labelset *
labelset_get(struct fs_store *st, const struct fs_label *own, size_t n, const char *key,
             size_t key_len)
{
    uint32_t h = (uint32_t)hash_bytes(key, key_len);
    struct labelset *l = NULL;
    pthread_mutex_lock(&st->intern_lock);
    for (l = st->ls_cap ? st->ls_tab[h & (st->ls_cap - 1)] : NULL; l; l = l->next)
        if (l->hash == h && l->key_len == key_len && memcmp(l->key, key, key_len) == 0)
            break;
    if (l) {
        l->refs++;
        goto out;
    }
    if (st->ls_len >= st->ls_cap) { /* chains of one on average at most */
        size_t ncap = st->ls_cap ? st->ls_cap * 2 : 1024;
        struct labelset **nt = calloc(ncap, sizeof *nt);
        if (!nt)
            goto out;
        for (size_t i = 0; i < st->ls_cap; i++)
            for (struct labelset *o = st->ls_tab[i], *nx; o; o = nx) {
                nx = o->next;
                o->next = nt[o->hash & (ncap - 1)];
                nt[o->hash & (ncap - 1)] = o;
            }
        free(st->ls_tab);
        st->ls_tab = nt;
        st->ls_cap = ncap;
    }
    size_t strings = key_len + 1, text = 0;
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(own[i].name), vl = strlen(own[i].value);
        strings += nl + 1 + vl + 1;
        text += nl + 4 + 2 * vl;
    }
    l = malloc(sizeof *l + n * sizeof(struct fs_label) + strings + text + 1);
    if (!l)
        goto out;
    char *p = (char *)(l->labels + n);
    l->hash = h;
    l->refs = 1;
    l->n = (uint8_t)n;
    l->key = memcpy(p, key, key_len);
    p[key_len] = 0;
    l->key_len = (uint32_t)key_len;
    p += key_len + 1;
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(own[i].name), vl = strlen(own[i].value);
        l->labels[i].name = memcpy(p, own[i].name, nl + 1);
        p += nl + 1;
        l->labels[i].value = memcpy(p, own[i].value, vl + 1);
        p += vl + 1;
    }
    l->text = p;
    size_t o = 0, cap = text + 1;
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(l->labels[i].name);
        p[o++] = ',';
        memcpy(p + o, l->labels[i].name, nl);
        o += nl;
        p[o++] = '=';
        p[o++] = '"';
        o += escape_label_value(p + o, cap - o, l->labels[i].value);
        p[o++] = '"';
    }
    p[o] = 0;
    l->text_len = (uint32_t)o;
    l->next = st->ls_tab[h & (st->ls_cap - 1)];
    st->ls_tab[h & (st->ls_cap - 1)] = l;
    st->ls_len++;
out:
    pthread_mutex_unlock(&st->intern_lock);
    return l;
}

/* Drops a series' reference; the last one frees the label set. */
static void
labelset_put(struct fs_store *st, const struct labelset *cl)
{
    pthread_mutex_lock(&st->intern_lock);
    struct labelset **pp = &st->ls_tab[cl->hash & (st->ls_cap - 1)];
    while (*pp != cl)
        pp = &(*pp)->next;
    struct labelset *l = *pp;
    if (--l->refs == 0) {
        *pp = l->next;
        st->ls_len--;
        free(l);
    }
    pthread_mutex_unlock(&st->intern_lock);
}

/* Frees a series (its ring series is the caller's), with its label set reference. Handles
 * of its sink go stale (they may point at it). */
static void
series_free(struct fs_store *st, struct series *se)
{
    sink_new_epoch(se->sink);
    labelset_put(st, se->ls);
    free(se);
}

/* Own labels shown: all labels stay within MAX_LABELS + 7 with the sink's (as before). */
static size_t
series_n_own(const struct series *se)
{
    size_t room = MAX_LABELS + 6 - se->sink->n_prefix;
    return se->ls->n < room ? se->ls->n : room;
}

/* The series' labels in order (target, static, own, source) into all[MAX_LABELS + 8]. */
static size_t
series_labels(const struct series *se, struct fs_label *all)
{
    const struct fs_sink *s = se->sink;
    size_t n = s->n_prefix, own = series_n_own(se);
    memcpy(all, s->prefix, n * sizeof *all);
    memcpy(all + n, se->ls->labels, own * sizeof *all);
    n += own;
    all[n++] = s->prefix[s->n_prefix];
    return n;
}

/* The interface label's value of the series (the first label so named), or NULL. */
static const char *
series_iface(const struct series *se)
{
    if (se->iface_src >= IFACE_OWN)
        return se->ls->labels[se->iface_src - IFACE_OWN].value;
    return se->iface_src == IFACE_STATIC ? se->sink->prefix_iface : NULL;
}

/*
 * The series' labels as exposition text, `target="t",...,source="x"`, joined from the
 * sink's prefix and suffix and the label set's text (none of it is kept per series).
 * Writes it NUL-terminated into buf and returns its length, or returns the size needed
 * (> cap - 1) and writes nothing when buf is too small.
 */
static size_t
series_text(const struct series *se, char *buf, size_t cap)
{
    const struct fs_sink *s = se->sink;
    const struct labelset *l = se->ls;
    size_t own = series_n_own(se), need = s->prefix_text_len + s->suffix_text_len + 1;
    if (own == l->n)
        need += l->text_len;
    else
        for (size_t i = 0; i < own; i++)
            need += strlen(l->labels[i].name) + 4 + 2 * strlen(l->labels[i].value) + 1;
    if (need > cap)
        return need;
    char *p = buf;
    memcpy(p, s->prefix_text, s->prefix_text_len);
    p += s->prefix_text_len;
    if (own == l->n) {
        memcpy(p, l->text, l->text_len);
        p += l->text_len;
    } else {
        for (size_t i = 0; i < own; i++) { /* more labels than shown: rare, slow */
            size_t nl = strlen(l->labels[i].name);
            *p++ = ',';
            memcpy(p, l->labels[i].name, nl);
            p += nl;
            *p++ = '=';
            *p++ = '"';
            p += escape_label_value(p, (size_t)(buf + cap - p), l->labels[i].value);
            *p++ = '"';
        }
    }
    memcpy(p, s->suffix_text, s->suffix_text_len);
    p += s->suffix_text_len;
    *p = 0;
    return (size_t)(p - buf);
}

static struct series *
series_alloc(struct fs_sink *s, enum fs_metric m, const struct fs_label *own, size_t n_own,
             const char *own_key, size_t own_key_len, bool iface)
{
    struct series *se = calloc(1, sizeof *se);
    if (!se)
        return NULL;
    se->ls = labelset_get(s->st, own, n_own, own_key, own_key_len);
    if (!se->ls) {
        free(se);
        return NULL;
    }
    se->metric = (uint16_t)m;
    se->counter = fs_metric_defs[m].type == FS_MT_COUNTER;
    se->octets = strcmp(fs_metric_defs[m].unit, "bytes") == 0;
    se->scale = 1.0;
    se->sink = s;
    /* the last label named so, own labels coming after the static ones */
    se->iface_src = iface && s->prefix_iface ? IFACE_STATIC : IFACE_NONE;
    for (size_t i = 0, n = series_n_own(se); iface && i < n; i++)
        if (strcmp(se->ls->labels[i].name, "interface") == 0)
            se->iface_src = (uint8_t)(IFACE_OWN + i);
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
        size_t j = series_hash(se->ls->hash, se->metric) & (ncap - 1);
        while (nt[j])
            j = (j + 1) & (ncap - 1);
        nt[j] = se;
    }
    free(s->tab);
    s->tab = nt;
    s->tab_cap = ncap;
    return true;
}

/* Series of the target (all its live sources) against the per-target limit. */
static bool
target_full(struct fs_sink *s)
{
    struct fs_store *st = s->st;
    uint64_t limit = atomic_load(&st->series_limit), n = 0;
    if (limit == 0)
        return false;
    pthread_rwlock_rdlock(&st->lock);
    for (const struct fs_sink *o = st->sinks; o; o = o->next)
        if (o == s || strcmp(o->target, s->target) == 0)
            n += atomic_load(&o->n_series);
    pthread_rwlock_unlock(&st->lock);
    return n >= limit;
}

static struct series *
series_get(struct fs_sink *s, enum fs_metric m, const struct fs_label *own, size_t n_own,
           const char *iface, double scale, bool create)
{
    /* "<metric>" then "\x1f<name>=<value>" per label. Built by hand: this runs for every
       sample of every driver, and snprintf was a tenth of a gNMI update's cost. */
    char key[KEY_MAX];
    size_t k = 0;
    int mi = (int)m;
    char digits[12];
    size_t nd = 0;
    do {
        digits[nd++] = (char)('0' + mi % 10);
        mi /= 10;
    } while (mi > 0 && nd < sizeof digits);
    while (nd > 0)
        key[k++] = digits[--nd];
    size_t mk = k; /* the own labels' part (the label set's key) follows */
    for (size_t i = 0; i < n_own; i++) {
        size_t ln = strlen(own[i].name), lv = strlen(own[i].value);
        if (k + ln + lv + 2 >= sizeof key)
            return NULL; /* absurdly long labels from a device: drop the sample */
        key[k++] = '\x1f';
        memcpy(key + k, own[i].name, ln);
        k += ln;
        key[k++] = '=';
        memcpy(key + k, own[i].value, lv);
        k += lv;
    }
    key[k] = '\0';
    uint32_t hown = (uint32_t)hash_bytes(key + mk, k - mk), h = series_hash(hown, m);
    if (s->tab_cap) {
        for (size_t j = h & (s->tab_cap - 1);; j = (j + 1) & (s->tab_cap - 1)) {
            struct series *se = s->tab[j];
            if (!se)
                break;
            if (se->metric == m && se->ls->hash == hown && se->ls->key_len == k - mk &&
                memcmp(se->ls->key, key + mk, k - mk) == 0)
                return se;
        }
    }
    if (!create)
        return NULL;
    if (target_full(s)) {
        pthread_mutex_lock(&s->stats_lock);
        s->series_limit_dropped++;
        pthread_mutex_unlock(&s->stats_lock);
        if (log_due(s, &s->limit_logged_mono))
            fs_log(FS_LOG_WARN, s->source,
                   "target %s: series limit (%" PRIu64 " per target) reached; samples of new "
                   "series are dropped",
                   s->target, atomic_load(&s->st->series_limit));
        return NULL;
    }
    if ((s->tab_len + 1) * 10 >= s->tab_cap * 7 && !tab_grow(s))
        return NULL;
    struct series *se = series_alloc(s, m, own, n_own, key + mk, k - mk, iface != NULL);
    if (!se)
        return NULL;
    se->scale = scale;

    struct fs_store *st = s->st;
    pthread_mutex_lock(&st->ring_lock);
    int32_t rid =
        fs_ring_series_new(st->ring, s->group, se->counter ? FS_RING_COUNTER : FS_RING_GAUGE);
    uint32_t rgen = rid >= 0 ? fs_ring_series_gen(st->ring, (uint32_t)rid) : 0;
    pthread_mutex_unlock(&st->ring_lock);
    if (rid < 0) {
        series_free(st, se);
        return NULL;
    }
    se->ring_id = (uint32_t)rid;
    se->ring_gen = rgen;
    se->last_mono_us = s->batch_mono_us;
    se->rates_gen = UINT32_MAX; /* look the line rate up at the first sample */
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
            series_free(st, se);
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
    atomic_fetch_add(&s->n_series, 1);
    return se;
}

size_t
fs_store_label_sets(struct fs_store *st)
{
    pthread_mutex_lock(&st->intern_lock);
    size_t n = st->ls_len;
    pthread_mutex_unlock(&st->intern_lock);
    return n;
}

/* ---- batches ---- */

void
fs_sink_begin(struct fs_sink *s, int64_t ts_us)
{
    /* One timeline per sink, kept monotonic: a batch stamped before the previous one
     * (the realtime clock stepped back) would be refused by the ring, and so would every
     * batch after it until the clock caught up. Stamp it just after instead. */
    if (s->have_ts && ts_us < s->last_given_ts) {
        pthread_mutex_lock(&s->stats_lock);
        s->clock_steps++;
        pthread_mutex_unlock(&s->stats_lock);
        if (log_due(s, &s->step_logged_mono))
            fs_log(FS_LOG_WARN, s->source,
                   "target %s: the clock went back by %" PRId64 " us; samples are stamped "
                   "just after the previous ones until it catches up",
                   s->target, s->last_given_ts - ts_us);
    }
    s->last_given_ts = ts_us;
    if (s->have_ts && ts_us < s->last_stamped_ts)
        ts_us = s->last_stamped_ts == INT64_MAX ? INT64_MAX : s->last_stamped_ts + 1;
    s->have_ts = true;
    s->last_stamped_ts = ts_us;
    s->in_batch = true;
    s->batch_ts = ts_us;
    s->batch_mono_us = now_mono(s->st);
    s->batch_seq++;
    s->n_pts = 0;
    s->batch_cleared = false;
    s->batch_discontinuity = false;
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
 * After a batch that filled more than half of the batch arrays (one that made them grow
 * by doubling), shrinks them to that batch and a sixteenth more (issue 34: a 5,440-point
 * poll left 8,192 slots of 24 bytes, 12 bytes a series unused). A batch as large again
 * fits without growing; smaller batches (a stream's updates) leave them as they are, so
 * that they never shrink and regrow batch after batch. A failed shrink keeps them.
 */
static void
batch_trim(struct fs_sink *s)
{
    size_t want = s->n_pts + s->n_pts / 16 + 64;
    if (s->n_pts * 2 <= s->cap_pts || want >= s->cap_pts)
        return;
    struct fs_ring_point *np = realloc(s->pts, want * sizeof *np);
    if (!np)
        return;
    s->pts = np;
    struct pending *npd = realloc(s->pend, want * sizeof *npd);
    if (!npd) {
        s->cap_pts = want; /* pts shrank, pend kept its larger block */
        return;
    }
    s->pend = npd;
    s->cap_pts = want;
}

/* Printable ASCII (and newline, which exposition escapes): a value to keep as it is. */
static bool
plain_text(const char *v)
{
    for (; *v; v++)
        if ((*v < 0x20 || *v >= 0x7f) && *v != '\n')
            return false;
    return true;
}

/*
 * Resolves the metric's own labels: cleans every value (fs_label_sanitize), normalizes
 * `interface` and applies the target's filters. Returns the series, or NULL when the
 * sample is to be dropped.
 */
static struct series *
sample_series(struct fs_sink *s, enum fs_metric m, const struct fs_label *labels, size_t n,
              double scale, bool create)
{
    if ((unsigned)m >= FS_METRIC_COUNT || n > MAX_LABELS || (create && !s->in_batch) || s->retired)
        return NULL;
    struct fs_label own[MAX_LABELS];
    char vals[KEY_MAX];
    size_t used = 0;
    const char *iface = NULL;
    for (size_t i = 0; i < n; i++) {
        own[i] = labels[i];
        if (!own[i].name || !own[i].value)
            return NULL;
        size_t room = sizeof vals - used;
        if (room < 2)
            return NULL; /* absurdly long labels: drop the sample */
        if (strcmp(own[i].name, "interface") == 0) {
            /* (normalizing cleans the name too) */
            own[i].value = fs_ifname_normalize(own[i].value, vals + used,
                                               room < IFNAME_MAX ? room : IFNAME_MAX);
            iface = own[i].value;
        } else if (plain_text(own[i].value)) {
            continue; /* nothing to clean: used as it is */
        } else {
            own[i].value = fs_label_sanitize(own[i].value, vals + used, room);
        }
        used += strlen(own[i].value) + 1;
    }
    if (iface && !iface_allowed(s->tcfg, iface))
        return NULL;
    return series_get(s, m, own, n, iface, scale, create);
}

static void
batch_put(struct fs_sink *s, struct series *se, uint64_t bits)
{
    if (se->batch_seq == s->batch_seq && se->batch_idx < s->n_pts &&
        s->pend[se->batch_idx].s == se) { /* the same series twice in one batch: last wins */
        s->pts[se->batch_idx].v.u = bits;
        se->retired_in_batch = false;
        return;
    }
    if (!batch_room(s))
        return;
    se->batch_seq = s->batch_seq;
    se->batch_idx = s->n_pts;
    se->retired_in_batch = false; /* a sample after a retire in the batch revives it */
    s->pts[s->n_pts].series = se->ring_id;
    s->pts[s->n_pts].v.u = bits;
    s->pend[s->n_pts].s = se;
    s->n_pts++;
}

/* The newest interface reset declared for se's interface since its last sample, or -1. */
static int
iface_reset_pending(const struct fs_sink *s, const struct series *se)
{
    const char *iface = series_iface(se);
    if (!iface)
        return -1;
    for (size_t i = s->n_iface_resets; i-- > 0;)
        if (s->iface_resets[i].gen > se->iface_reset_gen &&
            strcmp(s->iface_resets[i].iface, iface) == 0)
            return (int)i;
    return -1;
}

static struct iface_rate *
rate_slot(struct iface_rate *tab, size_t cap, const char *iface)
{
    size_t j = hash_bytes(iface, strlen(iface)) & (cap - 1);
    while (tab[j].iface && strcmp(tab[j].iface, iface) != 0)
        j = (j + 1) & (cap - 1);
    return &tab[j];
}

void
fs_sink_set_max_rate(struct fs_sink *s, const char *interface, double octets_per_s)
{
    char name[IFNAME_MAX];
    if (!interface)
        return;
    if (!(octets_per_s > 0) || !isfinite(octets_per_s))
        octets_per_s = 0;
    fs_ifname_normalize(interface, name, sizeof name);
    if (!name[0])
        return;
    if ((s->rates_len + 1) * 2 > s->rates_cap) {
        size_t ncap = s->rates_cap ? s->rates_cap * 2 : 64;
        struct iface_rate *nt = calloc(ncap, sizeof *nt);
        if (!nt)
            return; /* the bound stays unknown: wraps are unwrapped as before */
        for (size_t i = 0; i < s->rates_cap; i++)
            if (s->rates[i].iface)
                *rate_slot(nt, ncap, s->rates[i].iface) = s->rates[i];
        free(s->rates);
        s->rates = nt;
        s->rates_cap = ncap;
    }
    struct iface_rate *r = rate_slot(s->rates, s->rates_cap, name);
    if (!r->iface) {
        if (!(r->iface = strdup(name)))
            return;
        s->rates_len++;
    } else if (r->octets_per_s == octets_per_s) {
        return;
    }
    r->octets_per_s = octets_per_s;
    s->rates_gen++; /* series look their bound up again at their next sample */
}

static double
series_max_per_s(struct fs_sink *s, struct series *se)
{
    if (se->rates_gen != s->rates_gen) {
        double rate = 0;
        const char *iface = series_iface(se);
        if (iface && s->rates_cap) {
            const struct iface_rate *r = rate_slot(s->rates, s->rates_cap, iface);
            rate = r->iface ? r->octets_per_s : 0;
        }
        double b = fs_counter_max_per_s(rate, se->octets);
        se->max_per_s = b > FLT_MAX ? FLT_MAX : (float)b; /* a device's absurd speed */
        se->rates_gen = s->rates_gen;
    }
    return se->max_per_s;
}

static void
count_reset(struct fs_sink *s, enum fs_reset_kind kind)
{
    pthread_mutex_lock(&s->stats_lock);
    s->counter_resets[kind]++;
    pthread_mutex_unlock(&s->stats_lock);
}

/* A counter's raw sample into its series (se a counter of s, in a batch). */
static void
counter_put(struct fs_sink *s, struct series *se, uint64_t raw, unsigned bits)
{
    bool sink_reset = se->reset_gen < s->reset_gen;
    int iface_reset = iface_reset_pending(s, se);
    enum fs_counter_event ev;
    /* struct fs_counter from its pieces in the series (and back) */
    struct fs_counter ctr = {se->ctr_value, se->ctr_last_raw, se->last_mono_us, se->ctr_last_bits};
    uint64_t v = fs_counter_update(&ctr, raw, bits, s->batch_mono_us,
                                   sink_reset || iface_reset >= 0, series_max_per_s(s, se), &ev);
    se->ctr_value = ctr.value;
    se->ctr_last_raw = ctr.last_raw;
    se->last_mono_us = ctr.last_ts_us; /* this batch's: what fs_sink_end sets it to anyway */
    se->ctr_last_bits = ctr.last_bits;
    switch (ev) {
    case FS_COUNTER_WRAPPED:
        count_reset(s, FS_RESET_WRAP);
        break;
    case FS_COUNTER_CLEARED:
        s->batch_cleared = true;
        break;
    case FS_COUNTER_WIDTH_CHANGE:
        s->batch_discontinuity = true;
        break;
    case FS_COUNTER_REBASED:
        /* Counted once per declaration, by the first counter it rebased; the
         * interface's own declaration is the more specific one. */
        if (iface_reset >= 0 && !s->iface_resets[iface_reset].counted) {
            s->iface_resets[iface_reset].counted = true;
            count_reset(s, s->iface_resets[iface_reset].kind);
        } else if (iface_reset < 0 && !s->reset_counted) {
            s->reset_counted = true;
            count_reset(s, s->reset_kind);
        }
        break;
    default:
        break;
    }
    se->reset_gen = s->reset_gen;
    se->iface_reset_gen = s->iface_reset_gen;
    batch_put(s, se, v);
}

/* A gauge's sample into its series (none, or a counter's: dropped). */
static void
gauge_put(struct fs_sink *s, struct series *se, double value)
{
    if (!se || se->counter)
        return;
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    batch_put(s, se, bits);
}

void
fs_sink_counter_scaled(struct fs_sink *s, enum fs_metric m, const struct fs_label *labels,
                       size_t n_labels, uint64_t raw, unsigned bits, double scale)
{
    if (!(scale > 0))
        return;
    /* The ring keeps the device's exact count; the unit (scale) is applied when read out.
     * It is fixed when the series is created. */
    struct series *se = sample_series(s, m, labels, n_labels, scale, true);
    if (se && se->counter)
        counter_put(s, se, raw, bits);
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
    gauge_put(s, sample_series(s, m, labels, n_labels, 1.0, true), value);
}

/*
 * The series *h holds if it is still the one the key path would give for (m, labels):
 * filled by this sink since its last epoch (so it was not freed, and the filters are the
 * same), and of metric m with exactly these labels as the store keeps them. Comparing the
 * given values with the kept (cleaned, normalized) ones is exact because cleaning and
 * normalizing are idempotent: a value equal to a kept one resolves to that same one.
 * NULL otherwise (the caller takes the key path).
 */
static struct series *
handle_series(struct fs_sink *s, const struct fs_series_handle *h, enum fs_metric m,
              const struct fs_label *labels, size_t n)
{
    if (!h->series || h->epoch != atomic_load_explicit(&s->epoch, memory_order_relaxed) ||
        !s->in_batch || s->retired)
        return NULL;
    struct series *se = h->series;
    if (se->metric != (unsigned)m || se->ls->n != n)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        const struct fs_label *a = &labels[i], *b = &se->ls->labels[i];
        if (!a->name || !a->value || strcmp(a->name, b->name) != 0 ||
            strcmp(a->value, b->value) != 0)
            return NULL;
    }
    return se;
}

/* The series of (m, labels) through *h, refilling *h from the key path when stale. */
static struct series *
handle_resolve(struct fs_sink *s, struct fs_series_handle *h, enum fs_metric m,
               const struct fs_label *labels, size_t n, double scale)
{
    struct series *se = handle_series(s, h, m, labels, n);
    if (se)
        return se;
    se = sample_series(s, m, labels, n, scale, true);
    h->series = se;
    h->epoch = se ? atomic_load_explicit(&s->epoch, memory_order_relaxed) : 0;
    return se;
}

void
fs_sink_counter_h(struct fs_sink *s, struct fs_series_handle *h, enum fs_metric m,
                  const struct fs_label *labels, size_t n_labels, uint64_t raw, unsigned bits,
                  double scale)
{
    if (!(scale > 0))
        return;
    struct series *se = handle_resolve(s, h, m, labels, n_labels, scale);
    if (se && se->counter)
        counter_put(s, se, raw, bits);
}

void
fs_sink_gauge_h(struct fs_sink *s, struct fs_series_handle *h, enum fs_metric m,
                const struct fs_label *labels, size_t n_labels, double value)
{
    gauge_put(s, handle_resolve(s, h, m, labels, n_labels, 1.0), value);
}

void
fs_sink_retire(struct fs_sink *s, enum fs_metric m, const struct fs_label *labels, size_t n_labels)
{
    struct series *se = sample_series(s, m, labels, n_labels, 1.0, false);
    if (!se)
        return;
    /* The ring keeps the history; only the latest value stops being exported. */
    se->retired_in_batch = s->in_batch;
    atomic_store_explicit(&se->gone, true, memory_order_relaxed);
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
        if (rc != 0 && log_due(s, &s->refused_logged_mono))
            fs_log(FS_LOG_WARN, s->source,
                   "target %s: samples refused by the ring (memory_limit reached with only "
                   "live data left, or out of memory); see fabricscope_ring_refused_samples_total",
                   s->target);
    }
    /* Publish the latest values only after the ring has them. */
    for (size_t i = 0; i < s->n_pts; i++) {
        struct series *se = s->pend[i].s;
        se->last_mono_us = s->batch_mono_us;
        atomic_store_explicit(&se->value, s->pts[i].v.u, memory_order_relaxed);
        atomic_store_explicit(&se->ts_us, s->batch_ts, memory_order_release);
        atomic_store_explicit(&s->metric_ts[se->metric][se->iface_src != IFACE_NONE], s->batch_ts,
                              memory_order_relaxed);
        if (!se->retired_in_batch)
            atomic_store_explicit(&se->gone, false, memory_order_relaxed);
    }
    if (s->n_pts && s->batch_ts > atomic_load_explicit(&s->last_sample_ts, memory_order_relaxed))
        atomic_store_explicit(&s->last_sample_ts, s->batch_ts, memory_order_relaxed);
    if (s->batch_cleared)
        count_reset(s, FS_RESET_CLEARED);
    if (s->batch_discontinuity)
        count_reset(s, FS_RESET_DISCONTINUITY);
    batch_trim(s);
    s->n_pts = 0;
}

void
fs_sink_counter_reset(struct fs_sink *s, enum fs_reset_kind kind, const char *interface)
{
    if ((unsigned)kind >= FS_RESET_KIND_COUNT)
        return;
    if (interface) {
        /* Only that interface's counters restart; the others keep their base. */
        char buf[IFNAME_MAX];
        fs_ifname_normalize(interface, buf, sizeof buf);
        if (s->n_iface_resets < MAX_IFACE_RESETS) {
            s->iface_reset_gen++;
            size_t i = s->n_iface_resets++;
            memcpy(s->iface_resets[i].iface, buf, sizeof buf);
            s->iface_resets[i].gen = s->iface_reset_gen;
            s->iface_resets[i].kind = kind;
            s->iface_resets[i].counted = false;
        } else {
            /* more interfaces reset in one cycle than listed: cover them all */
            s->reset_gen++;
            s->reset_kind = kind;
            s->reset_counted = false;
        }
    } else {
        s->reset_gen++;
        s->reset_kind = kind;
        s->reset_counted = false;
    }
}

/*
 * Takes the doomed series of owner (NULL: of every sink the retired sweep is deleting
 * from, those with a sweep_tab) out of the per-metric lists, in one pass however many
 * sinks: a pass per sink would make sweeping a thousand removed targets a thousand passes
 * over every series in the store. Only the owner's marks are read: another sink's
 * thread may be marking its own. Caller holds st->lock for writing.
 */
static void
unlist_doomed(struct fs_store *st, const struct fs_sink *owner)
{
    for (int m = 0; m < FS_METRIC_COUNT; m++) {
        size_t w = 0;
        for (size_t r = 0; r < st->n_by_metric[m]; r++) {
            struct series *se = st->by_metric[m][r];
            bool mine = owner ? se->sink == owner : se->sink->sweep_tab != NULL;
            if (!mine || !se->doomed)
                st->by_metric[m][w++] = se;
        }
        st->n_by_metric[m] = w;
    }
}

/*
 * Deletes s's doomed series (already out of the per-metric lists) from the ring and the
 * sink's hash, which is rebuilt into nt (zeroed, tab_cap entries; s owns it after) since
 * open addressing has no cheap delete. Caller holds st->lock for writing.
 */
static void
drop_doomed(struct fs_sink *s, struct series **nt)
{
    struct fs_store *st = s->st;
    pthread_mutex_lock(&st->ring_lock);
    for (size_t i = 0; i < s->tab_cap; i++) {
        struct series *se = s->tab[i];
        if (!se)
            continue;
        if (se->doomed) {
            fs_ring_series_delete(st->ring, se->ring_id);
            atomic_fetch_sub(&st->n_series, 1);
            atomic_fetch_sub(&s->n_series, 1);
            s->tab_len--;
            series_free(st, se);
            continue;
        }
        size_t j = series_hash(se->ls->hash, se->metric) & (s->tab_cap - 1);
        while (nt[j])
            j = (j + 1) & (s->tab_cap - 1);
        nt[j] = se;
    }
    pthread_mutex_unlock(&st->ring_lock);
    free(s->tab);
    s->tab = nt;
}

/* Clears the doomed marks of s (its deletion is put off: no memory for the new hash). */
static void
spare_doomed(struct fs_sink *s)
{
    for (size_t i = 0; i < s->tab_cap; i++)
        if (s->tab[i])
            s->tab[i]->doomed = false;
}

/*
 * Deletes the series of s marked doomed: from the per-metric lists, the ring and the
 * sink's hash. Runs on the thread that owns the sink's series (its reporting thread).
 * Returns how many went.
 */
static size_t
delete_doomed(struct fs_sink *s, size_t doomed)
{
    struct fs_store *st = s->st;
    if (doomed == 0)
        return 0;
    struct series **nt = calloc(s->tab_cap, sizeof *nt);
    if (!nt) {
        spare_doomed(s);
        return 0; /* next time */
    }
    pthread_rwlock_wrlock(&st->lock);
    unlist_doomed(st, s);
    drop_doomed(s, nt);
    pthread_rwlock_unlock(&st->lock);
    return doomed;
}

/* How often sweeps run: a few times per retention period, within [1 s, 10 min]. */
static int64_t
sweep_every(int64_t retention_us)
{
    int64_t every = retention_us / 4;
    return every < 1000000 ? 1000000 : every > 600000000 ? 600000000 : every;
}

/*
 * Deletes the sink's series that have had no sample for longer than the retention (an
 * interface that went away, a label value that no longer occurs): their history has
 * aged out anyway, and a live head would pin the group's timeline in the ring forever.
 * Age is measured on the monotonic clock: a step of the realtime clock must not sweep
 * live series (and with them the counter state that keeps their exposed value).
 * Runs on the sink's reporting thread, a few times per retention period.
 */
static void
sweep_dead_series(struct fs_sink *s)
{
    struct fs_store *st = s->st;
    int64_t ret = atomic_load(&st->retention_us);
    int64_t now = now_mono(st);
    if (s->last_sweep_mono == 0)
        s->last_sweep_mono = now;
    if (now - s->last_sweep_mono < sweep_every(ret))
        return;
    s->last_sweep_mono = now;
    size_t dead = 0;
    for (size_t i = 0; i < s->tab_cap; i++) {
        struct series *se = s->tab[i];
        if (se && (se->doomed = now - se->last_mono_us > ret))
            dead++;
    }
    dead = delete_doomed(s, dead);
    if (dead)
        fs_log(FS_LOG_INFO, s->source,
               "target %s: %zu series without samples for a retention period removed", s->target,
               dead);
}

/*
 * Frees what removed instances left once it is gone from the ring: a series when its
 * last sample has been evicted (or it has had none for a retention period), an instance
 * with its last series. force: run now, not only once per sweep period. only: sweep that
 * removed instance alone (the one fs_store_sink_remove just retired: removing N targets
 * must not sweep the N-1 before it each time), else all of them. The per-metric lists
 * are compacted once for all the sinks swept.
 */
static void
retired_sweep(struct fs_store *st, bool force, struct fs_sink *only)
{
    int64_t ret = atomic_load(&st->retention_us);
    int64_t now = now_mono(st);
    if (pthread_mutex_trylock(&st->retired_lock) != 0) {
        if (!force)
            return; /* another thread is at it */
        pthread_mutex_lock(&st->retired_lock);
    }
    if (!force && st->retired_sweep_mono != 0 && now - st->retired_sweep_mono < sweep_every(ret))
        goto out;
    if (!only)
        st->retired_sweep_mono = now;
    size_t dead_total = 0;
    for (struct fs_sink *s = st->retired; s; s = s->next) {
        if (only && s != only)
            continue;
        size_t dead = 0;
        for (size_t i = 0; i < s->tab_cap; i++) {
            struct series *se = s->tab[i];
            if (se && (se->doomed = now - se->last_mono_us > ret ||
                                    fs_ring_series_samples(st->ring, se->ring_id) <= 0))
                dead++;
        }
        if (dead && !(s->sweep_tab = calloc(s->tab_cap, sizeof *s->sweep_tab))) {
            spare_doomed(s); /* next time */
            dead = 0;
        }
        dead_total += dead;
    }
    if (dead_total) {
        pthread_rwlock_wrlock(&st->lock);
        unlist_doomed(st, NULL);
        for (struct fs_sink *s = st->retired; s; s = s->next)
            if (s->sweep_tab) {
                drop_doomed(s, s->sweep_tab);
                s->sweep_tab = NULL;
            }
        pthread_rwlock_unlock(&st->lock);
    }
    for (struct fs_sink **pp = &st->retired; *pp;) {
        struct fs_sink *s = *pp;
        if ((only && s != only) || atomic_load(&s->n_series) > 0) {
            pp = &s->next;
            continue;
        }
        *pp = s->next;
        pthread_mutex_lock(&st->ring_lock);
        fs_ring_group_delete(st->ring, s->group);
        pthread_mutex_unlock(&st->ring_lock);
        sink_free(s);
    }
out:
    pthread_mutex_unlock(&st->retired_lock);
}

/* How long an instance must go without an error before its last error is cleared. */
static int64_t
stable_us(const struct fs_sink *s)
{
    int64_t n = FS_STABLE_INTERVALS * s->interval_us;
    return n > FS_STABLE_MIN_US ? n : FS_STABLE_MIN_US;
}

/* Drops of s within FS_FLAP_WINDOW_US before mono (under stats_lock). */
static uint64_t
recent_drops(const struct fs_sink *s, int64_t mono)
{
    uint64_t n = 0;
    size_t kept = s->n_drops < FS_FLAP_KEEP ? s->n_drops : FS_FLAP_KEEP;
    for (size_t i = 0; i < kept; i++)
        if (mono - s->drops_mono[i] < FS_FLAP_WINDOW_US)
            n++;
    return n;
}

void
fs_sink_done(struct fs_sink *s, uint64_t cycle_id, enum fs_poll_result r, const char *msg)
{
    if (s->in_batch)
        fs_sink_end(s);
    int64_t mono = now_mono(s->st), real = now_real(s->st);
    pthread_mutex_lock(&s->stats_lock);
    s->last_poll_us = real;
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
    int k = poll_error_index(r);
    if (r == FS_POLL_OK || r == FS_POLL_PARTIAL) {
        /* partial: what arrived is committed and fresh, so the instance is up */
        if (s->state == FS_INST_DOWN)
            s->reconnects++;
        s->state = FS_INST_UP;
        s->consecutive_failures = 0;
        /* The error stays shown until the instance has been stable for a while: a
         * stream that drops every few seconds must not read as clean between drops. */
        if (s->last_error[0] && mono - s->last_error_mono >= stable_us(s))
            s->last_error[0] = 0;
    } else {
        if (s->state == FS_INST_UP)
            s->drops_mono[s->n_drops++ % FS_FLAP_KEEP] = mono;
        s->state = FS_INST_DOWN;
        s->consecutive_failures++;
        /* A stream that ended delivers nothing more: what it sent is stale now, not after
         * the staleness bound (which would also keep hiding lower-precedence sources). */
        if (atomic_load(&s->streaming) && s->have_ts)
            atomic_store(&s->stale_through_us, s->last_stamped_ts);
    }
    if (k >= 0) {
        s->poll_errors[k]++;
        snprintf(s->last_error, sizeof s->last_error, "%s",
                 msg ? msg : fs_poll_error_kind_names[k]);
    } else if (r != FS_POLL_OK) {
        snprintf(s->last_error, sizeof s->last_error, "%s", msg ? msg : "failed");
    }
    if (r != FS_POLL_OK) {
        s->last_error_us = real;
        s->last_error_mono = mono;
    }
    fs_sink_done_cb cb = s->done_cb;
    void *arg = s->done_arg;
    pthread_mutex_unlock(&s->stats_lock);
    s->n_iface_resets = 0;
    sweep_dead_series(s);
    retired_sweep(s->st, false, NULL);
    if (cb)
        cb(arg, cycle_id, r);
}

void
fs_sink_clock(struct fs_sink *s, int64_t device_us, int64_t local_lo_us, int64_t local_hi_us)
{
    struct fs_clock_meas m = {device_us, local_lo_us, local_hi_us};
    struct fs_clock_estimate e;
    pthread_mutex_lock(&s->stats_lock);
    /* The filter intersects the bounds of the window's measurements (minimum delay for
     * fine clocks, second edges for 1 s ones), widened for drift; see clock/clock.h. */
    if (fs_clock_filter_add(&s->clock_filter, &m) == 0) {
        fs_clock_filter_estimate(&s->clock_filter, &e);
        if (e.known) {
            if (!s->clock_basis[0])
                snprintf(s->clock_basis, sizeof s->clock_basis, "bounds reported by the driver");
            s->clock_known = true;
            s->clock_offset = (double)e.offset_us / 1e6;
            s->clock_uncertainty = (double)e.uncertainty_us / 1e6;
        }
    }
    pthread_mutex_unlock(&s->stats_lock);
}

void
fs_sink_clock_basis(struct fs_sink *s, const char *text)
{
    pthread_mutex_lock(&s->stats_lock);
    snprintf(s->clock_basis, sizeof s->clock_basis, "%s", text ? text : "");
    pthread_mutex_unlock(&s->stats_lock);
}

int
fs_sink_device_event(struct fs_sink *s, int64_t device_start_us, int64_t device_end_us,
                     const char *kind, const char *name, const struct fs_label *attrs,
                     size_t n_attrs)
{
    int64_t off, unc;
    if (!fs_sink_clock_estimate(s, &off, &unc))
        return 1;
    pthread_rwlock_rdlock(&s->st->lock);
    fs_device_event_cb cb = s->st->event_cb;
    void *arg = s->st->event_arg;
    pthread_rwlock_unlock(&s->st->lock);
    if (!cb)
        return 1;
    struct fs_device_event e = {.target = s->target,
                                .source = s->source,
                                .kind = kind,
                                .name = name,
                                .device_start_us = device_start_us,
                                .device_end_us = device_end_us,
                                .clock_offset_us = off,
                                .clock_uncertainty_us = unc,
                                .attrs = attrs,
                                .n_attrs = n_attrs};
    return cb(arg, &e) == 0 ? 0 : -1;
}

void
fs_store_set_lldp_listener(struct fs_store *st, const struct fs_lldp_listener *l)
{
    pthread_rwlock_wrlock(&st->lock);
    if (l)
        st->lldp = *l;
    else
        memset(&st->lldp, 0, sizeof st->lldp);
    pthread_rwlock_unlock(&st->lock);
}

/* The LLDP listener, copied under the lock (it is set and cleared only while no driver
 * reports, but the copy costs nothing and keeps the read honest). */
static struct fs_lldp_listener
lldp_listener(struct fs_sink *s)
{
    pthread_rwlock_rdlock(&s->st->lock);
    struct fs_lldp_listener l = s->st->lldp;
    pthread_rwlock_unlock(&s->st->lock);
    return l;
}

/* Longest LLDP string kept: the topology cuts at 255 bytes too. */
#define LLDP_STR 256

void
fs_sink_lldp_local(struct fs_sink *s, const char *chassis_id, const char *sys_name)
{
    struct fs_lldp_listener l = lldp_listener(s);
    char ch[LLDP_STR], sn[LLDP_STR];
    if (!l.local)
        return;
    fs_label_sanitize(chassis_id ? chassis_id : "", ch, sizeof ch);
    fs_label_sanitize(sys_name ? sys_name : "", sn, sizeof sn);
    l.local(l.arg, s->target, s->source, ch, sn, now_real(s->st));
}

int
fs_sink_lldp_neighbor(struct fs_sink *s, const struct fs_lldp_neighbor *n)
{
    int rc = 0;
    struct fs_lldp_listener l = lldp_listener(s);
    char lp[LLDP_STR], ch[LLDP_STR], sn[LLDP_STR], port[LLDP_STR], pid[LLDP_STR], pd[LLDP_STR];
    if (!l.neighbor)
        goto out;
    /* Both port names as the `interface` label would have them: the remote may be a
     * target whose own labels are normalized the same way. */
    fs_ifname_normalize(n->local_port ? n->local_port : "", lp, sizeof lp);
    fs_ifname_normalize(n->port ? n->port : "", port, sizeof port);
    fs_label_sanitize(n->chassis_id ? n->chassis_id : "", ch, sizeof ch);
    fs_label_sanitize(n->sys_name ? n->sys_name : "", sn, sizeof sn);
    fs_label_sanitize(n->port_id ? n->port_id : "", pid, sizeof pid);
    fs_label_sanitize(n->port_descr ? n->port_descr : "", pd, sizeof pd);
    struct fs_lldp_neighbor c = {lp, ch, sn, port, pid, pd};
    rc = l.neighbor(l.arg, s->target, s->source, &c, now_real(s->st)) == 0 ? 0 : -1;
out:
    return rc;
}

void
fs_sink_lldp_end(struct fs_sink *s, int64_t interval_us)
{
    struct fs_lldp_listener l = lldp_listener(s);
    if (l.table_end)
        l.table_end(l.arg, s->target, s->source, interval_us, now_real(s->st));
}

int
fs_sink_clock_estimate(struct fs_sink *s, int64_t *offset_us, int64_t *uncertainty_us)
{
    struct fs_clock_estimate e;
    pthread_mutex_lock(&s->stats_lock);
    fs_clock_filter_estimate(&s->clock_filter, &e);
    pthread_mutex_unlock(&s->stats_lock);
    if (!e.known)
        return 0;
    *offset_us = e.offset_us;
    *uncertainty_us = e.uncertainty_us;
    return 1;
}

void
fs_sink_clock_prober_reading(struct fs_sink *s, struct fs_clock_prober *p, int64_t device_us,
                             int64_t res_us, int64_t local_lo_us, int64_t local_hi_us, bool probe)
{
    int64_t off0 = 0, unc0 = 0, off1, unc1, moved = 0;
    const char *by = NULL;
    bool known = fs_sink_clock_estimate(s, &off0, &unc0);
    pthread_mutex_lock(&s->stats_lock);
    if (!s->clock_basis[0])
        snprintf(s->clock_basis, sizeof s->clock_basis,
                 "the device clock read within each request's round trip");
    pthread_mutex_unlock(&s->stats_lock);
    fs_sink_clock(s, device_us, local_lo_us, local_hi_us);
    fs_clock_prober_reading(p, res_us, local_hi_us - local_lo_us);
    if (!probe) {
        if (known && fs_sink_clock_estimate(s, &off1, &unc1) &&
            fs_clock_prober_moved(p, off0, unc0, off1)) {
            moved = off1 - off0;
            by = "a poll";
        }
    } else {
        off1 = p->off_before_us;
        unc1 = p->unc_before_us;
        fs_sink_clock_estimate(s, &off1, &unc1);
        enum fs_clock_probe_outcome o =
            fs_clock_prober_answered(p, off1, unc1, fs_monotonic_us(), &moved);
        if (o == FS_CLOCK_PROBE_STEPPED)
            by = "a check probe";
        else if (o == FS_CLOCK_PROBE_PAUSED)
            fs_log(FS_LOG_INFO, s->source,
                   "target %s: %d clock probes did not narrow the offset; pausing probes",
                   s->target, FS_CLOCK_PROBER_NO_GAIN_MAX);
    }
    if (by)
        fs_log(FS_LOG_INFO, s->source,
               "target %s: %s moved the clock offset by %.3f ms (the device clock stepped); "
               "checking it",
               s->target, by, (double)moved / 1e3);
}

/* ---- readers ---- */

/* The source's place in the target's precedence (the configuration lists every driver
 * of the build, defaults by rank included); unlisted sources rank last. */
static size_t
precedence_rank(const struct fs_target_cfg *t, const char *source)
{
    for (size_t i = 0; i < t->n_source_precedence; i++)
        if (strcmp(t->source_precedence[i], source) == 0)
            return i;
    return t->n_source_precedence;
}

static bool
fresh(const struct fs_sink *s, int64_t ts, int64_t now)
{
    int64_t k = s->tcfg->staleness_intervals > 0 ? s->tcfg->staleness_intervals : 3;
    unsigned spread = atomic_load_explicit(&s->spread, memory_order_relaxed);
    if (spread > 1)
        k *= spread;
    return ts != 0 && now - ts <= k * s->interval_us &&
           ts > atomic_load_explicit(&s->stale_through_us, memory_order_relaxed);
}

/* Whether a sibling source of the same target with higher precedence has fresh data of m
 * in the same shape (per port or not: port). */
static bool
shadowed(const struct fs_store *st, const struct fs_sink *s, enum fs_metric m, bool port,
         int64_t now)
{
    if (s->tcfg->expose_all_sources)
        return false;
    size_t mine = precedence_rank(s->tcfg, s->source);
    for (const struct fs_sink *o = st->sinks; o; o = o->next) {
        if (o == s || strcmp(o->tcfg->name, s->tcfg->name) != 0)
            continue;
        if (precedence_rank(s->tcfg, o->source) < mine &&
            fresh(o, atomic_load_explicit(&o->metric_ts[m][port], memory_order_relaxed), now))
            return true;
    }
    return false;
}

/* The iteration behind the fs_store_foreach_series* calls; parts_only: fill text_part
 * alone (fs_store_foreach_series_text). */
static bool
foreach_series(struct fs_store *st, bool only_exported, bool parts_only, uint64_t *cursor,
               size_t max, fs_series_cb cb, void *arg)
{
    int64_t now = now_real(st);
    size_t m = (size_t)(*cursor >> 32), i = (size_t)(*cursor & 0xffffffffu), seen = 0;
    bool done = false;
    /* A series' labels and text are joined here for the callback (see series_text). */
    struct fs_label all[MAX_LABELS + 8];
    char tstack[4096], *tbuf = tstack;
    size_t tcap = sizeof tstack;
    pthread_rwlock_rdlock(&st->lock);
    for (; m < FS_METRIC_COUNT; m++, i = 0) {
        /* A sink's series of one metric are mostly adjacent: decide precedence once per
         * run of them rather than per series (it scans the target's other sources). */
        const struct fs_sink *memo_sink = NULL;
        bool memo_port = false, memo_shadowed = false;
        for (; i < st->n_by_metric[m]; i++) {
            if (seen++ == max)
                goto out;
            const struct series *se = st->by_metric[m][i];
            struct fs_series_info in;
            in.ts_us = atomic_load_explicit(&se->ts_us, memory_order_acquire);
            uint64_t v = atomic_load_explicit(&se->value, memory_order_relaxed);
            if (se->sink != memo_sink || (se->iface_src != IFACE_NONE) != memo_port) {
                memo_sink = se->sink;
                memo_port = se->iface_src != IFACE_NONE;
                memo_shadowed =
                    !se->sink->retired && shadowed(st, se->sink, (enum fs_metric)m, memo_port, now);
            }
            /* a removed instance's series are history only: readable, never exported */
            in.exported = !se->sink->retired && fresh(se->sink, in.ts_us, now) && !memo_shadowed &&
                          !atomic_load_explicit(&se->gone, memory_order_relaxed);
            if (only_exported && !in.exported)
                continue;
            in.id = se->ring_id;
            in.gen = se->ring_gen;
            in.metric = (enum fs_metric)m;
            in.name = fs_metric_defs[m].name;
            in.counter = se->counter;
            in.scale = se->scale;
            const struct fs_sink *sk = se->sink;
            if (parts_only && series_n_own(se) == se->ls->n) {
                in.labels = NULL;
                in.n_labels = 0;
                in.labels_text = NULL;
                in.labels_text_len = 0;
                in.text_part[0] = sk->prefix_text;
                in.text_part_len[0] = sk->prefix_text_len;
                in.text_part[1] = se->ls->text;
                in.text_part_len[1] = se->ls->text_len;
                in.text_part[2] = sk->suffix_text;
                in.text_part_len[2] = sk->suffix_text_len;
            } else {
                size_t tl = series_text(se, tbuf, tcap);
                if (tl >= tcap) {
                    char *nb = malloc(tl + 1);
                    if (!nb)
                        continue; /* no memory: better left out than shown without its labels */
                    if (tbuf != tstack)
                        free(tbuf);
                    tbuf = nb;
                    tcap = tl + 1;
                    tl = series_text(se, tbuf, tcap);
                }
                in.labels = all;
                in.n_labels = series_labels(se, all);
                in.labels_text = tbuf;
                in.labels_text_len = tl;
                in.text_part[0] =
                    tbuf; /* (the slow case of parts_only too: more labels than shown) */
                in.text_part_len[0] = tl;
                in.text_part[1] = in.text_part[2] = "";
                in.text_part_len[1] = in.text_part_len[2] = 0;
            }
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
    if (tbuf != tstack)
        free(tbuf);
    *cursor = ((uint64_t)m << 32) | (uint64_t)i;
    return done;
}

bool
fs_store_foreach_series_chunk(struct fs_store *st, bool only_exported, uint64_t *cursor, size_t max,
                              fs_series_cb cb, void *arg)
{
    return foreach_series(st, only_exported, false, cursor, max, cb, arg);
}

void
fs_store_foreach_series(struct fs_store *st, bool only_exported, fs_series_cb cb, void *arg)
{
    uint64_t cursor = 0;
    foreach_series(st, only_exported, false, &cursor, SIZE_MAX, cb, arg);
}

void
fs_store_foreach_series_text(struct fs_store *st, bool only_exported, fs_series_cb cb, void *arg)
{
    uint64_t cursor = 0;
    foreach_series(st, only_exported, true, &cursor, SIZE_MAX, cb, arg);
}

long
fs_store_read(struct fs_store *st, uint32_t series, uint32_t gen, int64_t start_us, int64_t end_us,
              struct fs_ring_sample *out, size_t max, bool *truncated)
{
    pthread_rwlock_rdlock(&st->lock);
    long n = fs_ring_read_gen(st->ring, series, gen, start_us, end_us, out, max, truncated);
    pthread_rwlock_unlock(&st->lock);
    return n;
}

void
fs_store_foreach_instance(struct fs_store *st, fs_instance_cb cb, void *arg)
{
    static const char *const state_names[] = {"idle", "up", "down"};
    int64_t mono = now_mono(st);
    pthread_rwlock_rdlock(&st->lock);
    for (struct fs_sink *s = st->sinks; s; s = s->next) {
        struct fs_instance_info in;
        char err[sizeof s->last_error];
        char basis[FS_SINK_CLOCK_BASIS_MAX];
        memset(&in, 0, sizeof in);
        pthread_mutex_lock(&s->stats_lock);
        in.state = s->state;
        in.last_poll_us = s->last_poll_us;
        in.last_duration_us = s->last_duration_us;
        in.last_sample_us = atomic_load_explicit(&s->last_sample_ts, memory_order_relaxed);
        memcpy(err, s->last_error, sizeof err);
        in.last_error_us = s->last_error_us;
        /* an up instance stable for the period shows no error, even with no cycle since */
        if (s->state == FS_INST_UP && mono - s->last_error_mono >= stable_us(s))
            err[0] = 0;
        if (!err[0])
            in.last_error_us = 0;
        in.reconnects = s->reconnects;
        in.recent_drops = recent_drops(s, mono);
        in.flapping = s->state == FS_INST_UP && in.recent_drops >= FS_FLAP_DROPS;
        in.series = atomic_load(&s->n_series);
        in.agent_restarts = s->agent_restarts;
        in.clock_steps = s->clock_steps;
        in.series_limit_dropped = s->series_limit_dropped;
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
        in.clock_offset_exceeded =
            s->clock_known && fabs(s->clock_offset) - s->clock_uncertainty >
                                  (double)atomic_load(&st->clock_max_offset_us) / 1e6;
        snprintf(basis, sizeof basis, "%s", s->clock_basis);
        /* The driver's detail whole (a fixed buffer cut it, and cut JSON is lost whole);
         * without memory the detail is left out. */
        char *detail = s->detail ? strdup(s->detail) : NULL;
        pthread_mutex_unlock(&s->stats_lock);
        in.target = s->tcfg->name;
        in.source = s->source;
        in.address = s->tcfg->address;
        in.state_name = in.flapping ? "flapping" : state_names[in.state];
        in.interval_us = s->interval_us;
        in.last_error = err;
        in.static_labels = s->tcfg->labels;
        in.n_static_labels = s->tcfg->n_labels;
        in.driver_detail = detail ? detail : "";
        in.clock_basis = basis;
        int stop = cb(arg, &in);
        free(detail);
        if (stop)
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
