/* The gNMI driver: configuration -> stream, responses -> mapping -> sink (see gnmi.h). */
#include "gnmi.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "grpc_io.h"
#include "util/clock.h"
#include "util/log.h"

#define FS_GNMI_XSTR(x) #x
#define FS_GNMI_STR(x) FS_GNMI_XSTR(x)
#define SECRET_MAX 4096
#define PEM_MAX (1 << 20)

struct fs_gnmi {
    struct fs_gnmi_io *io;
    struct fs_gnmi_map_shared *paths; /* resolved paths shared by the targets (map.h) */
};

struct fs_gnmi_target {
    struct fs_gnmi *drv;
    char *name;
    struct fs_sink *sink;
    struct fs_gnmi_stream *stream;
    struct fs_gnmi_map *map;
    struct fs_gnmi_sink_arg sa;
    const struct fs_gnmi_emit *tap;
    void *tap_arg;

    /* what every attempt subscribes to (copied from the config) */
    Gnmi__Path **paths;
    struct fs_gnmi_subscription *subs; /* path strings not kept: paths[] has them */
    size_t n_subs;
    enum fs_gnmi_encoding enc_cfg;
    enum fs_gnmi_list_mode list_mode;
    bool updates_only;

    /* LLDP (lldp.h): the mirror of the target's neighbour table, its stream thread only.
     * lldp_paths: what is subscribed for it (NULL when lldp is off). */
    Gnmi__Path *lldp_paths[2];
    int64_t lldp_interval_us;
    struct fs_gnmi_lldp lldp;
    struct fs_gnmi_emit sink_emit; /* fs_gnmi_sink_emit plus the LLDP events (no tap) */
    bool lldp_synced;              /* the mirror is the target's (a sync on this stream) */
    bool lldp_dirty;               /* changed since it was last stated */
    int64_t lldp_next_mono;        /* when it is stated again */
    uint64_t lldp_reports;
    size_t lldp_neighbors; /* in the last statement */

    int64_t detail_us; /* when the detail was last published (its stream thread only) */
    /* stream metrics (fabricscope_stream_*): reported at each state change and every
     * report_every_us (its stream thread only) */
    int64_t report_every_us, next_report_mono;

    /* state shown to other threads */
    pthread_mutex_t lock;
    struct fs_gnmi_target_stats st;
};

static const char *const enc_names[] = {"auto", "PROTO", "JSON", "JSON_IETF"};
static const char *const conn_names[] = {"connecting", "streaming", "down", "done"};

/* How often the counts shown in /api/v1/targets are refreshed while updates flow. */
#define DETAIL_EVERY_US 1000000

/* fabricscope_stream_state{state}: one series per state, 1 for the current one. */
enum stream_state { SS_CONNECTING = 0, SS_UP, SS_SYNCED, SS_BACKOFF, SS_COUNT };
static const char *const stream_state_names[SS_COUNT] = {"connecting", "up", "synced", "backoff"};

static enum stream_state
stream_state_of(int conn, bool synced)
{
    switch ((enum fs_gnmi_conn)conn) {
    case FS_GNMI_CONN_CONNECTING:
        return SS_CONNECTING;
    case FS_GNMI_CONN_STREAMING:
        return synced ? SS_SYNCED : SS_UP;
    case FS_GNMI_CONN_DONE: /* ONCE: complete until it is reopened */
        return synced ? SS_SYNCED : SS_BACKOFF;
    case FS_GNMI_CONN_DOWN:
    default:
        return SS_BACKOFF;
    }
}

/*
 * Reports the stream's state and counts through the sink as one batch of samples
 * (fabricscope_stream_state, fabricscope_stream_updates_total). Stamped now, so after a
 * failed fs_sink_done() these stay exported while the stream's data goes stale.
 */
static void
report_stream(struct fs_gnmi_target *t)
{
    pthread_mutex_lock(&t->lock);
    enum stream_state cur = stream_state_of(t->st.conn, t->st.synced);
    struct fs_gnmi_map_stats ms = t->st.map;
    pthread_mutex_unlock(&t->lock);
    fs_sink_begin(t->sink, fs_realtime_us());
    for (int i = 0; i < SS_COUNT; i++) {
        struct fs_label l = {"state", stream_state_names[i]};
        fs_sink_gauge(t->sink, FS_M_STREAM_STATE, &l, 1, i == (int)cur ? 1 : 0);
    }
    const struct {
        const char *kind;
        uint64_t n;
    } counts[] = {{"received", ms.updates},
                  {"mapped", ms.mapped},
                  {"exposed", ms.exposed},
                  {"unmapped", ms.unmapped},
                  {"rejected", ms.rejected}};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        struct fs_label l = {"kind", counts[i].kind};
        fs_sink_counter(t->sink, FS_M_STREAM_UPDATES, &l, 1, counts[i].n, 64);
    }
    fs_sink_end(t->sink);
    t->next_report_mono = fs_monotonic_us() + t->report_every_us;
}

/* Shows the stream's state and counts in /api/v1/targets (the sink copies them). */
static void
publish_detail(struct fs_gnmi_target *t)
{
    char buf[4096];
    if (fs_gnmi_target_describe(t->drv, t, buf, sizeof buf) > 0)
        fs_sink_set_detail(t->sink, buf);
}

/* ---- secrets and files ---- */

/*
 * Reads a file the target's block names (key: its configuration key under the target)
 * with the core's reader: the daemon's main thread calls target_add, so a FIFO or device
 * given as a PEM must be refused at once, never waited on.
 */
static char *
read_file(const char *target, const char *key, const char *path, char *errbuf, size_t errlen)
{
    char k[320];
    char *buf = NULL;
    size_t len;
    snprintf(k, sizeof k, "targets[%s].gnmi.%s", target, key);
    if (fs_file_read(path, k, PEM_MAX, &buf, &len, errbuf, errlen) != 0)
        return NULL;
    return buf;
}

/* Reads a secret with the core's reader (a file is never waited on); errors name the
 * source, never the content. */
static char *
read_secret(const struct fs_secret_ref *ref, char *errbuf, size_t errlen)
{
    if (!ref->file && !ref->env)
        return strdup("");            /* the config refuses a username without a password */
    char *v = malloc(SECRET_MAX + 2); /* the secret, its newline (stripped), the NUL */
    if (!v) {
        snprintf(errbuf, errlen, "out of memory");
        return NULL;
    }
    if (fs_secret_read(ref, v, SECRET_MAX + 2, errbuf, errlen) != 0) {
        free(v); /* wiped by fs_secret_read */
        return NULL;
    }
    return v;
}

static void
wipe_free(char *s)
{
    if (!s)
        return;
    volatile char *p = s;
    while (*p)
        *p++ = '\0';
    free(s);
}

/* ---- subscribe request ---- */

static Gnmi__Encoding
choose_encoding(const struct fs_gnmi_target *t, const Gnmi__CapabilityResponse *caps)
{
    switch (t->enc_cfg) {
    case FS_GNMI_ENC_PROTO:
        return GNMI__ENCODING__PROTO;
    case FS_GNMI_ENC_JSON:
        return GNMI__ENCODING__JSON;
    case FS_GNMI_ENC_JSON_IETF:
        return GNMI__ENCODING__JSON_IETF;
    case FS_GNMI_ENC_AUTO:
        break;
    }
    if (!caps)
        return GNMI__ENCODING__PROTO;
    static const Gnmi__Encoding pref[] = {GNMI__ENCODING__PROTO, GNMI__ENCODING__JSON_IETF,
                                          GNMI__ENCODING__JSON};
    for (size_t p = 0; p < 3; p++)
        for (size_t i = 0; i < caps->n_supported_encodings; i++)
            if (caps->supported_encodings[i] == pref[p])
                return pref[p];
    return GNMI__ENCODING__PROTO;
}

static int
build_request(void *arg, const Gnmi__CapabilityResponse *caps, ProtobufCBinaryData *out)
{
    struct fs_gnmi_target *t = arg;
    Gnmi__Encoding enc = choose_encoding(t, caps);
    Gnmi__SubscriptionList sl = GNMI__SUBSCRIPTION_LIST__INIT;
    size_t n_lldp = t->lldp_paths[0] ? 2 : 0, n_all = t->n_subs + n_lldp;
    Gnmi__Subscription *subs = calloc(n_all, sizeof *subs);
    Gnmi__Subscription **sp = calloc(n_all, sizeof *sp);
    if (!subs || !sp) {
        free(subs);
        free(sp);
        return -1;
    }
    for (size_t i = 0; i < t->n_subs; i++) {
        const struct fs_gnmi_subscription *c = &t->subs[i];
        gnmi__subscription__init(&subs[i]);
        subs[i].path = t->paths[i];
        subs[i].mode = c->mode == FS_GNMI_SUB_ON_CHANGE ? GNMI__SUBSCRIPTION_MODE__ON_CHANGE
                       : c->mode == FS_GNMI_SUB_TARGET_DEFINED
                           ? GNMI__SUBSCRIPTION_MODE__TARGET_DEFINED
                           : GNMI__SUBSCRIPTION_MODE__SAMPLE;
        subs[i].sample_interval = c->interval_us > 0 ? (uint64_t)c->interval_us * 1000 : 0;
        subs[i].heartbeat_interval = c->heartbeat_us > 0 ? (uint64_t)c->heartbeat_us * 1000 : 0;
        subs[i].suppress_redundant = c->suppress_redundant;
        sp[i] = &subs[i];
    }
    /*
     * LLDP as ON_CHANGE rather than SAMPLE at lldp_interval: a neighbour table changes
     * rarely, and gNMI marks no end of a SAMPLE interval, so with SAMPLE a neighbour that
     * went could only be told by its absence over an interval (a guess, late). ON_CHANGE
     * sends the whole table, then the sync_response (a complete table, in every list
     * mode), then each change as it happens, a neighbour that went as a delete (at once).
     * The driver keeps the table and states it again every lldp_interval (on_tick).
     */
    for (size_t i = 0; i < n_lldp; i++) {
        Gnmi__Subscription *ls = &subs[t->n_subs + i];
        gnmi__subscription__init(ls);
        ls->path = t->lldp_paths[i];
        ls->mode = GNMI__SUBSCRIPTION_MODE__ON_CHANGE;
        sp[t->n_subs + i] = ls;
    }
    sl.n_subscription = n_all;
    sl.subscription = sp;
    sl.mode = t->list_mode == FS_GNMI_LIST_ONCE   ? GNMI__SUBSCRIPTION_LIST__MODE__ONCE
              : t->list_mode == FS_GNMI_LIST_POLL ? GNMI__SUBSCRIPTION_LIST__MODE__POLL
                                                  : GNMI__SUBSCRIPTION_LIST__MODE__STREAM;
    sl.encoding = enc;
    sl.updates_only = t->updates_only;
    Gnmi__SubscribeRequest req = GNMI__SUBSCRIBE_REQUEST__INIT;
    req.request_case = GNMI__SUBSCRIBE_REQUEST__REQUEST_SUBSCRIBE;
    req.subscribe = &sl;
    out->len = gnmi__subscribe_request__get_packed_size(&req);
    out->data = malloc(out->len ? out->len : 1);
    if (out->data)
        gnmi__subscribe_request__pack(&req, out->data);
    free(subs);
    free(sp);
    pthread_mutex_lock(&t->lock);
    t->st.encoding = enc == GNMI__ENCODING__JSON_IETF ? "JSON_IETF"
                     : enc == GNMI__ENCODING__JSON    ? "JSON"
                                                      : "PROTO";
    pthread_mutex_unlock(&t->lock);
    return out->data ? 0 : -1;
}

/* ---- responses ---- */

/* Says once per target and reason that values were rejected (the counts go on in
 * /api/v1/targets): a hostile or broken target is named in the log without flooding it.
 * The target's stream thread only (now and after: its copies). */
static void
log_first_rejects(const struct fs_gnmi_target *t, const struct fs_gnmi_map_stats *before,
                  const struct fs_gnmi_map_stats *now)
{
    for (int i = 0; i < FS_GNMI_REJ_COUNT; i++)
        if (!before->rejected_by[i] && now->rejected_by[i])
            fs_log(FS_LOG_WARN, "gnmi", "%s: values rejected (%s); counted in /api/v1/targets",
                   t->name, fs_gnmi_reject_names[i]);
    if (!before->bad_timestamps && now->bad_timestamps)
        fs_log(FS_LOG_WARN, "gnmi",
               "%s: a notification timestamp more than a day from its arrival (or negative): "
               "not used for the clock estimate; counted as bad_timestamps",
               t->name);
    if (!before->cache_overflow && now->cache_overflow)
        fs_log(FS_LOG_WARN, "gnmi",
               "%s: more distinct paths than the resolution cache keeps (%zu, %zu bytes): the "
               "rest are resolved each time; counted as cache_overflow",
               t->name, now->cache_entries, now->cache_bytes);
}

/* ---- LLDP (lldp.h) ---- */

/* States the mirror to the topology: every neighbour, then the table's end when the
 * mirror is the target's whole table (synced, nothing refused at the bound). */
static void
lldp_report(struct fs_gnmi_target *t, int64_t now_mono_us)
{
    size_t n = fs_gnmi_lldp_report(&t->lldp, t->sink);
    if (!t->lldp.overflown)
        fs_sink_lldp_end(t->sink, t->lldp_interval_us);
    t->lldp_dirty = false;
    t->lldp_next_mono = now_mono_us + t->lldp_interval_us;
    pthread_mutex_lock(&t->lock);
    t->lldp_reports++;
    t->lldp_neighbors = n;
    pthread_mutex_unlock(&t->lock);
}

static void
lldp_event(struct fs_gnmi_target *t, const struct fs_gnmi_lldp_event *ev)
{
    if (t->lldp_paths[0] && fs_gnmi_lldp_apply(&t->lldp, ev) == 1)
        t->lldp_dirty = true;
}

/* The sink emitter's LLDP member: arg is the target's sink argument (t->sa). */
static void
sa_lldp(void *arg, const struct fs_gnmi_lldp_event *ev)
{
    lldp_event((struct fs_gnmi_target *)((char *)arg - offsetof(struct fs_gnmi_target, sa)), ev);
}

/* The sink emitter plus the tap. */
static void
tee_begin(void *arg, int64_t recv_us, int64_t device_ns)
{
    struct fs_gnmi_target *t = arg;
    fs_gnmi_sink_emit.begin(&t->sa, recv_us, device_ns);
    if (t->tap->begin)
        t->tap->begin(t->tap_arg, recv_us, device_ns);
}

static void
tee_counter(void *arg, enum fs_metric m, const struct fs_label *l, size_t n, uint64_t raw,
            double scale)
{
    struct fs_gnmi_target *t = arg;
    fs_gnmi_sink_emit.counter(&t->sa, m, l, n, raw, scale);
    if (t->tap->counter)
        t->tap->counter(t->tap_arg, m, l, n, raw, scale);
}

static void
tee_gauge(void *arg, enum fs_metric m, const struct fs_label *l, size_t n, double v)
{
    struct fs_gnmi_target *t = arg;
    fs_gnmi_sink_emit.gauge(&t->sa, m, l, n, v);
    if (t->tap->gauge)
        t->tap->gauge(t->tap_arg, m, l, n, v);
}

static void
tee_deleted(void *arg, enum fs_metric m, const struct fs_label *l, size_t n)
{
    struct fs_gnmi_target *t = arg;
    fs_gnmi_sink_emit.deleted(&t->sa, m, l, n);
    if (t->tap->deleted)
        t->tap->deleted(t->tap_arg, m, l, n);
}

static void
tee_end(void *arg)
{
    struct fs_gnmi_target *t = arg;
    fs_gnmi_sink_emit.end(&t->sa);
    if (t->tap->end)
        t->tap->end(t->tap_arg);
}

static void
tee_lldp(void *arg, const struct fs_gnmi_lldp_event *ev)
{
    struct fs_gnmi_target *t = arg;
    lldp_event(t, ev);
    if (t->tap->lldp)
        t->tap->lldp(t->tap_arg, ev);
}

static void
tee_counter_h(void *arg, struct fs_series_handle *h, enum fs_metric m, const struct fs_label *l,
              size_t n, uint64_t raw, double scale)
{
    struct fs_gnmi_target *t = arg;
    fs_gnmi_sink_emit.counter_h(&t->sa, h, m, l, n, raw, scale);
    if (t->tap->counter)
        t->tap->counter(t->tap_arg, m, l, n, raw, scale);
}

static void
tee_gauge_h(void *arg, struct fs_series_handle *h, enum fs_metric m, const struct fs_label *l,
            size_t n, double v)
{
    struct fs_gnmi_target *t = arg;
    fs_gnmi_sink_emit.gauge_h(&t->sa, h, m, l, n, v);
    if (t->tap->gauge)
        t->tap->gauge(t->tap_arg, m, l, n, v);
}

static const struct fs_gnmi_emit tee_emit = {tee_begin, tee_counter, tee_gauge,     tee_deleted,
                                             tee_end,   tee_lldp,    tee_counter_h, tee_gauge_h};

static void
on_response(void *arg, const Gnmi__SubscribeResponse *r, int64_t recv_us)
{
    struct fs_gnmi_target *t = arg;
    switch (r->response_case) {
    case GNMI__SUBSCRIBE_RESPONSE__RESPONSE_UPDATE:
        if (!r->update)
            break;
        if (t->tap)
            fs_gnmi_map_notification(t->map, r->update, recv_us, &tee_emit, t);
        else
            fs_gnmi_map_notification(t->map, r->update, recv_us, &t->sink_emit, &t->sa);
        /* A change once the table is known (a neighbour came, changed or went): stated
         * at once, so a removed link leaves now rather than at its hold. */
        if (t->lldp_synced && t->lldp_dirty)
            lldp_report(t, fs_monotonic_us());
        pthread_mutex_lock(&t->lock);
        struct fs_gnmi_map_stats before = t->st.map;
        t->st.map = *fs_gnmi_map_get_stats(t->map);
        bool synced = t->st.synced;
        pthread_mutex_unlock(&t->lock);
        log_first_rejects(t, &before, &t->st.map);
        /* Each update of a synced stream ends a "cycle" (driver.h), so the target's last
         * poll is the last update received, not the sync: a healthy stream does not
         * look stale. Before the sync the data is incomplete and the target not up. */
        if (synced)
            fs_sink_done(t->sink, 0, FS_POLL_OK, NULL);
        if (recv_us - t->detail_us >= DETAIL_EVERY_US) {
            t->detail_us = recv_us;
            publish_detail(t);
        }
        break;
    case GNMI__SUBSCRIBE_RESPONSE__RESPONSE_SYNC_RESPONSE:
        if (!r->sync_response)
            break;
        pthread_mutex_lock(&t->lock);
        bool first = !t->st.synced;
        t->st.synced = true;
        t->st.syncs++;
        pthread_mutex_unlock(&t->lock);
        if (first)
            fs_log(FS_LOG_INFO, "gnmi", "%s: synced", t->name);
        if (t->lldp_paths[0]) {
            /* The snapshot is complete: what it did not renew is gone from the target
             * (with updates_only there is no snapshot: nothing can be told gone). */
            if (!t->updates_only)
                fs_gnmi_lldp_sweep(&t->lldp);
            t->lldp_synced = true;
            lldp_report(t, fs_monotonic_us());
            /* POLL: each poll's answer is a whole snapshot again */
            if (t->list_mode == FS_GNMI_LIST_POLL)
                fs_gnmi_lldp_mark_stale(&t->lldp);
        }
        publish_detail(t);
        fs_sink_done(t->sink, 0, FS_POLL_OK, "synced");
        report_stream(t);
        break;
    case GNMI__SUBSCRIBE_RESPONSE__RESPONSE_ERROR:
        fs_log(FS_LOG_WARN, "gnmi", "%s: target sent an error response (code %u)", t->name,
               r->error ? r->error->code : 0);
        break;
    default:
        break;
    }
}

static void
on_state(void *arg, enum fs_gnmi_conn st, enum fs_poll_result r, const char *msg)
{
    struct fs_gnmi_target *t = arg;
    pthread_mutex_lock(&t->lock);
    t->st.conn = (int)st;
    if (st == FS_GNMI_CONN_CONNECTING)
        t->st.attempts++;
    if (st == FS_GNMI_CONN_CONNECTING || st == FS_GNMI_CONN_DOWN) {
        /* Not stated while not known: the topology ages the links out if the stream
         * stays down; the next stream's snapshot renews (or sweeps) every entry. */
        t->lldp_synced = false;
        fs_gnmi_lldp_mark_stale(&t->lldp);
    }
    if (st == FS_GNMI_CONN_DOWN) {
        t->st.downs++;
        t->st.synced = false;
        snprintf(t->st.last_error, sizeof t->st.last_error, "%s", msg ? msg : "");
    }
    pthread_mutex_unlock(&t->lock);
    publish_detail(t);
    if (st == FS_GNMI_CONN_DOWN) {
        fs_log(FS_LOG_WARN, "gnmi", "%s: stream down: %s", t->name, msg ? msg : "");
        fs_sink_done(t->sink, 0, r, msg);
    } else if (st == FS_GNMI_CONN_STREAMING) {
        fs_log(FS_LOG_DEBUG, "gnmi", "%s: stream open", t->name);
    }
    report_stream(t); /* after fs_sink_done: the new state is stamped after the failure */
}

static void
on_tick(void *arg, int64_t now_mono_us)
{
    struct fs_gnmi_target *t = arg;
    if (now_mono_us >= t->next_report_mono)
        report_stream(t);
    if (t->lldp_synced && now_mono_us >= t->lldp_next_mono)
        lldp_report(t, now_mono_us);
}

static const struct fs_gnmi_stream_cb stream_cb = {build_request, on_response, on_state, on_tick};

/* ---- driver operations ---- */

/* The stream thread count: FS_GNMI_THREADS if set (the driver has no configuration
 * of its own outside the targets' blocks), else 0 (automatic). -1 with errbuf if bad. */
static int
threads_wanted(char *errbuf, size_t errlen)
{
    const char *v = getenv("FS_GNMI_THREADS");
    if (!v || !*v)
        return 0;
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || n < 1 || n > FS_GNMI_THREADS_MAX) {
        snprintf(errbuf, errlen, "FS_GNMI_THREADS=%.32s: not a number of threads from 1 to %d", v,
                 FS_GNMI_THREADS_MAX);
        return -1;
    }
    return (int)n;
}

int
fs_gnmi_init(void **state, char *errbuf, size_t errlen)
{
    int threads = threads_wanted(errbuf, errlen);
    if (threads < 0)
        return -1;
    struct fs_gnmi *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    if (!(d->paths = fs_gnmi_map_shared_new())) {
        snprintf(errbuf, errlen, "out of memory");
        free(d);
        return -1;
    }
    if (fs_gnmi_io_new(&d->io, (unsigned)threads, errbuf, errlen) != 0) {
        fs_gnmi_map_shared_release(d->paths);
        free(d);
        return -1;
    }
    fs_log(FS_LOG_INFO, "gnmi", "%u stream thread(s) (%s)", fs_gnmi_io_threads(d->io),
           threads ? "FS_GNMI_THREADS"
                   : "one an online CPU, at most " FS_GNMI_STR(FS_GNMI_THREADS_AUTO_MAX));
    *state = d;
    return 0;
}

void
fs_gnmi_shutdown(void *state)
{
    struct fs_gnmi *d = state;
    if (!d)
        return;
    fs_gnmi_io_free(d->io);
    fs_gnmi_map_shared_release(d->paths); /* maps still alive keep it */
    free(d);
}

static void
target_free(struct fs_gnmi_target *t)
{
    if (!t)
        return;
    for (size_t i = 0; t->paths && i < t->n_subs; i++)
        if (t->paths[i])
            protobuf_c_message_free_unpacked(&t->paths[i]->base, NULL);
    free(t->paths);
    free(t->subs);
    for (size_t i = 0; i < 2; i++)
        if (t->lldp_paths[i])
            protobuf_c_message_free_unpacked(&t->lldp_paths[i]->base, NULL);
    fs_gnmi_lldp_free(&t->lldp);
    fs_gnmi_map_free(t->map);
    free(t->name);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

int
fs_gnmi_target_add(void *state, const char *name, const char *address,
                   const struct fs_gnmi_cfg *cfg, struct fs_sink *sink,
                   const struct fs_gnmi_emit *tap, void *tap_arg, void **tstate, char *errbuf,
                   size_t errlen)
{
    struct fs_gnmi *d = state;
    int rc = -1;
    char *password = NULL, *ca = NULL, *cert = NULL, *key = NULL;
    *tstate = NULL;
    struct fs_gnmi_target *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    pthread_mutex_init(&t->lock, NULL);
    t->drv = d;
    t->sink = sink;
    t->tap = tap;
    t->tap_arg = tap_arg;
    t->name = strdup(name);
    t->enc_cfg = cfg->encoding;
    t->list_mode = cfg->list_mode;
    t->updates_only = cfg->updates_only;
    t->st.encoding = enc_names[cfg->encoding];
    if (cfg->n_subscriptions == 0) {
        snprintf(errbuf, errlen, "no subscriptions");
        goto done;
    }
    t->paths = calloc(cfg->n_subscriptions, sizeof *t->paths);
    t->subs = calloc(cfg->n_subscriptions, sizeof *t->subs);
    if (!t->name || !t->paths || !t->subs) {
        snprintf(errbuf, errlen, "out of memory");
        goto done;
    }
    t->n_subs = cfg->n_subscriptions;
    for (size_t i = 0; i < cfg->n_subscriptions; i++) {
        t->subs[i] = cfg->subscriptions[i];
        t->subs[i].path = NULL;
        if (fs_gnmi_path_parse(cfg->subscriptions[i].path, &t->paths[i], errbuf, errlen) != 0)
            goto done;
    }
    if (cfg->lldp) {
        if (fs_gnmi_path_parse("/lldp/state", &t->lldp_paths[0], errbuf, errlen) != 0 ||
            fs_gnmi_path_parse("/lldp/interfaces/interface[name=*]/neighbors/neighbor[id=*]/state",
                               &t->lldp_paths[1], errbuf, errlen) != 0)
            goto done;
        t->lldp_interval_us = cfg->lldp_interval_us > 0 ? cfg->lldp_interval_us : 30000000;
    }
    t->sink_emit = fs_gnmi_sink_emit;
    t->sink_emit.lldp = sa_lldp;
    /* the flow rules' names, for ACL entries named by description (the map copies them) */
    const char **rule_names = NULL;
    size_t n_names = cfg->acl_by_description ? cfg->n_flow_rules : 0;
    if (n_names && !(rule_names = calloc(n_names, sizeof *rule_names))) {
        snprintf(errbuf, errlen, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n_names; i++)
        rule_names[i] = cfg->flow_rules[i].name;
    struct fs_gnmi_map_opts mo = {.user_maps = cfg->user_maps,
                                  .n_user_maps = cfg->n_user_maps,
                                  .acl_rules = cfg->acl_rules,
                                  .n_acl_rules = cfg->n_acl_rules,
                                  .rule_names = rule_names,
                                  .n_rule_names = n_names,
                                  .acl_description_prefix = cfg->acl_description_prefix,
                                  .expose_unmapped = cfg->expose_unmapped,
                                  .shared = d->paths};
    t->map = fs_gnmi_map_new(&mo, errbuf, errlen);
    free(rule_names);
    if (!t->map)
        goto done;
    t->sa.sink = sink;
    t->sa.clk_max_delay_us = cfg->clock_max_delay_us;
    {
        /* The upper bound of the clock rests on an assumption, stated in the answers. */
        int64_t dly =
            cfg->clock_max_delay_us > 0 ? cfg->clock_max_delay_us : FS_GNMI_CLOCK_MAX_DELAY_US;
        char basis[160];
        snprintf(basis, sizeof basis,
                 "notification timestamps; delivery delay assumed at most %lld.%03lld ms "
                 "(gnmi.clock_max_delivery_delay)",
                 (long long)(dly / 1000), (long long)(dly % 1000));
        fs_sink_clock_basis(sink, basis);
    }

    if (cfg->username && !(password = read_secret(&cfg->password, errbuf, errlen)))
        goto done;
    if (!cfg->insecure) {
        if (cfg->tls_ca_file &&
            !(ca = read_file(name, "tls.ca_file", cfg->tls_ca_file, errbuf, errlen)))
            goto done;
        if (cfg->tls_cert_file &&
            !(cert = read_file(name, "tls.cert_file", cfg->tls_cert_file, errbuf, errlen)))
            goto done;
        if (cfg->tls_key_file &&
            !(key = read_file(name, "tls.key_file", cfg->tls_key_file, errbuf, errlen)))
            goto done;
        if ((cert != NULL) != (key != NULL)) {
            snprintf(errbuf, errlen, "a client certificate needs both tls cert and key files");
            goto done;
        }
    }
    char target[300];
    bool v6 = strchr(address, ':') && address[0] != '[';
    snprintf(target, sizeof target, v6 ? "[%s]:%u" : "%s:%u", address,
             cfg->port ? cfg->port : 9339);
    int64_t interval = fs_gnmi_cfg_interval(cfg);
    /* Often enough that the stream metrics never go stale (the staleness bound is at
     * least one interval), at most once a second. */
    t->report_every_us = interval > 0 && interval < 1000000 ? interval : 1000000;
    struct fs_gnmi_stream_opts so = {
        .target = target,
        .insecure = cfg->insecure,
        .ca_pem = ca,
        .cert_pem = cert,
        .key_pem = key,
        .server_name = cfg->tls_server_name,
        .username = cfg->username,
        .password = password,
        .stall_us = fs_gnmi_cfg_stall(cfg),
        .stall_adapt = cfg->stall_us == 0,
        .backoff_min_us = cfg->backoff_min_us,
        .backoff_max_us = cfg->backoff_max_us,
        .poll_us = cfg->list_mode == FS_GNMI_LIST_POLL ? interval : 0,
        .reopen_us = cfg->list_mode == FS_GNMI_LIST_ONCE ? interval : 0,
        .max_message_bytes = cfg->max_message_bytes,
    };
    if (fs_gnmi_stream_start(d->io, &so, &stream_cb, t, &t->stream, errbuf, errlen) != 0)
        goto done;
    *tstate = t;
    rc = 0;
done:
    wipe_free(password);
    wipe_free(key);
    free(ca);
    free(cert);
    if (rc != 0)
        target_free(t);
    return rc;
}

void
fs_gnmi_target_remove(void *state, void *tstate)
{
    struct fs_gnmi *d = state;
    struct fs_gnmi_target *t = tstate;
    if (!t)
        return;
    fs_gnmi_stream_stop(d->io, t->stream);
    target_free(t);
}

void
fs_gnmi_target_get_stats(void *tstate, struct fs_gnmi_target_stats *out)
{
    struct fs_gnmi_target *t = tstate;
    pthread_mutex_lock(&t->lock);
    *out = t->st;
    pthread_mutex_unlock(&t->lock);
}

unsigned
fs_gnmi_threads(void *state)
{
    return fs_gnmi_io_threads(((struct fs_gnmi *)state)->io);
}

size_t
fs_gnmi_target_describe(void *state, void *tstate, char *buf, size_t len)
{
    (void)state;
    const struct fs_gnmi_target *t = tstate;
    struct fs_gnmi_target_stats s;
    fs_gnmi_target_get_stats(tstate, &s);
    /* The clock's error bar rests on this assumption: stated beside it (set at add). */
    int64_t delay =
        t->sa.clk_max_delay_us > 0 ? t->sa.clk_max_delay_us : FS_GNMI_CLOCK_MAX_DELAY_US;
    char err[2 * sizeof s.last_error];
    size_t o = 0;
    for (const char *p = s.last_error; *p && o + 2 < sizeof err; p++) {
        if (*p == '"' || *p == '\\')
            err[o++] = '\\';
        err[o++] = *p;
    }
    err[o] = '\0';
    int64_t gap = 0, stall = 0;
    unsigned thread = 0;
    if (t->stream) {
        fs_gnmi_stream_cadence(t->stream, &gap, &stall);
        thread = fs_gnmi_stream_thread(t->stream);
    }
    char reasons[512];
    size_t ro = 0;
    for (int i = 0; i < FS_GNMI_REJ_COUNT && ro < sizeof reasons; i++)
        ro += (size_t)snprintf(reasons + ro, sizeof reasons - ro, "%s\"%s\":%llu", i ? "," : "",
                               fs_gnmi_reject_names[i], (unsigned long long)s.map.rejected_by[i]);
    int n = snprintf(
        buf, len,
        "\"gnmi_state\":\"%s\",\"synced\":%s,\"encoding\":\"%s\",\"attempts\":%llu,"
        "\"downs\":%llu,\"syncs\":%llu,\"notifications\":%llu,\"updates\":%llu,"
        "\"mapped\":%llu,\"exposed\":%llu,\"unmapped\":%llu,\"rejected\":%llu,"
        "\"rejected_by\":{%s},\"bad_timestamps\":%llu,\"cache_entries\":%zu,"
        "\"cache_bytes\":%zu,\"cache_overflow\":%llu,"
        "\"deletes\":%llu,"
        "\"last_device_ts_ns\":%lld,"
        "\"delivered_gap_seconds\":%lld.%06lld,\"stall_after_seconds\":%lld.%06lld,"
        "\"clock_assumed_max_delivery_delay_seconds\":%lld.%06lld,"
        "\"stream_thread\":%u,\"last_error\":\"%s\"",
        conn_names[s.conn & 3], s.synced ? "true" : "false", s.encoding,
        (unsigned long long)s.attempts, (unsigned long long)s.downs, (unsigned long long)s.syncs,
        (unsigned long long)s.map.notifications, (unsigned long long)s.map.updates,
        (unsigned long long)s.map.mapped, (unsigned long long)s.map.exposed,
        (unsigned long long)s.map.unmapped, (unsigned long long)s.map.rejected, reasons,
        (unsigned long long)s.map.bad_timestamps, s.map.cache_entries, s.map.cache_bytes,
        (unsigned long long)s.map.cache_overflow, (unsigned long long)s.map.deletes,
        (long long)s.map.last_device_ns, (long long)(gap / 1000000), (long long)(gap % 1000000),
        (long long)(stall / 1000000), (long long)(stall % 1000000), (long long)(delay / 1000000),
        (long long)(delay % 1000000), thread, err);
    if (n < 0)
        return 0;
    size_t used = (size_t)n < len ? (size_t)n : (len ? len - 1 : 0);
    pthread_mutex_lock((pthread_mutex_t *)&t->lock);
    uint64_t reports = t->lldp_reports;
    size_t neighbors = t->lldp_neighbors;
    pthread_mutex_unlock((pthread_mutex_t *)&t->lock);
    int m = snprintf(buf + used, len - used,
                     ",\"lldp\":%s,\"lldp_values\":%llu,\"lldp_reports\":%llu,"
                     "\"lldp_neighbors\":%zu",
                     t->lldp_paths[0] ? "true" : "false", (unsigned long long)s.map.lldp,
                     (unsigned long long)reports, neighbors);
    if (m < 0 || (size_t)m >= len - used)
        return used; /* no room: the counts above stand alone */
    return used + (size_t)m;
}

/* ---- struct fs_driver (drivers/driver.h) ---- */

static int
gnmi_target_add(void *state, const struct fs_target_cfg *tcfg, const void *dcfg,
                struct fs_sink *sink, void **tstate, char *errbuf, size_t errlen)
{
    /* the target's flow rules go with its gnmi block (ACL entries named by description) */
    struct fs_gnmi_cfg c = *(const struct fs_gnmi_cfg *)dcfg;
    c.flow_rules = tcfg->flow_rules;
    c.n_flow_rules = tcfg->n_flow_rules;
    return fs_gnmi_target_add(state, tcfg->name, tcfg->address, &c, sink, NULL, NULL, tstate,
                              errbuf, errlen) == 0
               ? FS_DRV_OK
               : FS_DRV_ERR;
}

static int
gnmi_init(void **state, char *errbuf, size_t errlen)
{
    return fs_gnmi_init(state, errbuf, errlen) == 0 ? FS_DRV_OK : FS_DRV_ERR;
}

const struct fs_driver fs_driver_gnmi = {
    .api_version = FS_DRIVER_API_VERSION,
    .block =
        {
            .name = "gnmi",
            .default_rank = 10,
            .uses_flow_rules = true, /* ACL entries named for a rule by description */
            .yang_module = fs_gnmi_yang_module,
            .config_build = fs_gnmi_config_build,
            .config_free = fs_gnmi_config_free,
            .config_equal = fs_gnmi_config_equal,
            .config_interval = fs_gnmi_config_interval,
        },
    .kind = FS_DRIVER_STREAM,
    .init = gnmi_init,
    .shutdown = fs_gnmi_shutdown,
    .target_add = gnmi_target_add,
    .target_remove = fs_gnmi_target_remove,
    .cycle_start = NULL,
    .cycle_cancel = NULL,
};
