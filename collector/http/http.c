/*
 * The HTTP endpoint on libmicrohttpd (see http.h). Every response body is complete in
 * memory before it is handed to libmicrohttpd, so a slow client only ever holds a
 * buffer (bounded: see http.h), never a store lock.
 *
 * A request's life: the access handler runs first when the head has arrived. Cheap
 * answers (errors, /healthz) are prepared at once and queued on the handler's next call
 * (queuing on the first call would make libmicrohttpd close a kept-alive connection);
 * the others are suspended, run by a query worker, and resumed with their answer ready.
 * Jobs go to one of two lanes, each with its own queue and workers: /metrics and
 * /api/v1/targets (bounded, quick) to a worker of their own, everything else (analysis,
 * /api/v1/raw, topology: seconds each under load) to the query workers, so that a
 * scrape never waits behind an analysis.
 * struct req carries the answer across; libmicrohttpd's completion callback frees it.
 */
#include "http/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "http/analysis_api.h"
#include "analysis/host_events.h"
#include "analysis/service.h"
#include "http/api.h"
#include "http/topology_api.h"
#include "http/expo.h"
#include "http/scrape_watch.h"
#include "http/web/web_assets.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/log.h"

#define MAX_URL_BYTES 8192         /* path plus decoded query; longer is 414 */
#define MAX_BODY_BYTES (64 * 1024) /* bodies of other requests; larger is 413 */
#define MAX_ARGS 64                /* more query parameters is 400 */
/* libmicrohttpd keeps each query parameter in its per-connection pool (about 56 bytes
 * of bookkeeping plus the text): 256 KiB lets a request with a few thousand parameters
 * through to the handler, which refuses it with a JSON 400, instead of exhausting the
 * pool (where libmicrohttpd cannot even send its own 431). */
#define POOL_BYTES ((size_t)256 * 1024)
#define MAX_METRICS_BYTES ((size_t)1 << 30)
#define MAX_RAW_BYTES ((size_t)256 << 20)
#define MIN_RAW_RESERVE ((size_t)64 << 10)
#define MAX_JSON_BYTES ((size_t)64 << 20)
#define MAX_TLS_FILE_BYTES (1024 * 1024)
#define MAX_QUEUED_JOBS 64 /* per lane */
#define SWEEP_INTERVAL_MS 200
#define DRAIN_US (2 * 1000000LL) /* a stop waits this long for answers being sent */
#define LOG_WINDOW_US (10 * 1000000LL)
#define LOG_BURST 5 /* lines per window before the rest are only counted */
#define RETRY_AFTER_S "2"
#define JSON_CTYPE "application/json"

enum handler {
    H_METRICS,
    H_RAW,
    H_TARGETS,
    H_HEALTHZ,
    H_INDEX,
    H_HOST_EVENTS,
    H_TIME,
    H_CORRELATE,
    H_INCIDENTS,
    H_TRACE,
    H_TOPOLOGY,
    H_OTHER,
    H_COUNT
};
static const char *const handler_names[H_COUNT] = {
    "metrics", "raw",       "targets",   "healthz",      "index",    "host_events",
    "time",    "correlate", "incidents", "export_trace", "topology", "other"};
static const unsigned status_codes[] = {200, 304, 400, 401, 403, 404, 405, 413, 414, 500, 503};
#define N_CODES (sizeof status_codes / sizeof status_codes[0])

/*
 * A /metrics render, shared by every scrape of a burst: immutable once published
 * (gz is added once, under gz_lock). refs counts h->current and every response using
 * it (under h->snap_lock); the last release retires it.
 */
struct snapshot {
    struct fs_http *h;
    struct fs_buf plain, gz;
    pthread_mutex_t gz_lock;
    z_stream zs;
    bool zinit, gz_done;
    bool om;         /* OpenMetrics rather than text 0.0.4 */
    int64_t made_us; /* monotonic */
    unsigned refs;
};

/* Where a connection is in its request cycle; the sweeper enforces the deadlines. */
enum phase { PH_HEAD, PH_WORK, PH_SEND };

/* One open connection (libmicrohttpd's socket context); lives from the STARTED to the
 * CLOSED notification, in h->conns under h->conn_lock. */
struct conn {
    struct conn *prev, *next;
    int fd;
    enum phase phase;
    int64_t since_us; /* monotonic start of the phase */
    bool closing;     /* shut down by us; libmicrohttpd closes it */
};

enum req_state { RQ_TO_SUBMIT, RQ_JOB, RQ_READY, RQ_SENT };

/* A job queue and the workers that serve only it (see the top of the file). */
enum { LANE_CHEAP, LANE_QUERY, N_LANES };
struct lane {
    struct fs_http *h;
    pthread_cond_t cond; /* with h->queue_lock */
    struct req *head, *tail;
    unsigned pending; /* reserved or queued jobs */
    pthread_t *workers;
    unsigned n_workers; /* started */
};

/* One request: its route and, once ready, its answer. Owned by libmicrohttpd's
 * req_cls; freed by req_done(). While RQ_JOB, only the worker touches it. */
struct req {
    struct fs_http *h;
    struct lane *lane; /* where its job goes */
    struct MHD_Connection *c;
    struct req *next; /* job queue */
    enum handler hd;
    enum req_state state;
    bool early; /* answer before reading the body (it is too large) */
    unsigned status;
    const char *ctype, *allow;
    bool retry_after;
    struct fs_buf body;    /* owned until queued */
    size_t reserved;       /* answer budget (raw_inflight) held by body */
    struct snapshot *snap; /* /metrics: a reference, or NULL */
    bool gz;
    bool om; /* /metrics: the client prefers OpenMetrics */
    struct fs_raw_query q;
    bool have_q;
    const struct fs_web_asset *asset; /* H_INDEX: the embedded file to send */
    /* The analysis endpoints: the POST body, the Authorization header and the query
     * parameters, copied (libmicrohttpd's copies are not the worker's to read). */
    struct fs_buf upload;
    char *auth;
    struct fs_analysis_arg *aargs;
    size_t n_aargs;
    int64_t receive_ns;          /* /api/v1/time: when the head arrived */
    int64_t arrival_us;          /* analysis GETs: the now their range was checked against */
    struct fs_topology_query tq; /* /api/v1/topology: its checked parameters */
};

/* A body handed to libmicrohttpd, with the answer budget it holds (given back when
 * libmicrohttpd frees it: sent, or the connection closed). */
struct held_body {
    struct fs_http *h;
    char *data;
    size_t reserved;
};

struct fs_http {
    struct MHD_Daemon *d;
    struct fs_store *st;
    struct fs_cluster *cluster;                /* not owned */
    int64_t store_created_us, http_created_us; /* realtime */
    struct fs_analysis *an;
    struct fs_topo *topo; /* borrowed; NULL: no /api/v1/topology */
    char *token;
    size_t token_len;
    char *cert, *key;
    uint16_t port;
    _Atomic uint64_t counts[H_COUNT][N_CODES];
    int64_t head_timeout_us, response_timeout_us, raw_time_us, share_us;
    unsigned soft_conn_limit;

    /* Connections and the sweeper. */
    pthread_mutex_t conn_lock;
    pthread_cond_t sweep_cond; /* CLOCK_MONOTONIC */
    struct conn *conns;
    unsigned n_conns;
    unsigned n_reqs;           /* requests begun and not yet ended by req_done */
    pthread_cond_t drain_cond; /* CLOCK_MONOTONIC: n_reqs reached 0 */
    pthread_t sweeper;
    bool sweeper_started, sweeper_stop;

    /* Query workers, by lane; queue_lock guards every lane's queue and stopping. */
    pthread_mutex_t queue_lock;
    struct lane lanes[N_LANES];
    bool stopping;

    struct fs_scrape_watch *scrapers; /* /metrics clients' intervals, or NULL (no memory) */

    /* /metrics expositions. */
    pthread_mutex_t snap_lock;
    pthread_cond_t snap_cond;
    struct snapshot *current, *spare;
    unsigned n_snaps;    /* alive, spare excluded */
    uint64_t render_gen; /* renders published */
    bool rendering;

    /* Bodies of /api/v1/raw and of the analysis GETs being rendered or waiting to be
     * sent: one budget for both, so that neither kind can take the memory of the other. */
    _Atomic size_t raw_inflight;
    size_t raw_budget, raw_max;

    /* Rate-limited warnings: counted here, summarized by the sweeper. */
    pthread_mutex_t log_lock;
    int64_t log_window_us;
    unsigned log_lines;
    uint64_t log_suppressed;
    _Atomic uint64_t dropped_head, dropped_send, evicted;
};

/* ---- rate-limited warnings ---- */

static bool
log_allowed(struct fs_http *h)
{
    bool ok;
    int64_t now = fs_monotonic_us();
    pthread_mutex_lock(&h->log_lock);
    if (now - h->log_window_us >= LOG_WINDOW_US && h->log_suppressed == 0) {
        h->log_window_us = now;
        h->log_lines = 0;
    }
    ok = h->log_lines < LOG_BURST;
    if (ok)
        h->log_lines++;
    else
        h->log_suppressed++;
    pthread_mutex_unlock(&h->log_lock);
    return ok;
}

/* The sweeper's once-per-window summary of what was dropped or not logged. */
static void
log_summary(struct fs_http *h, int64_t now)
{
    pthread_mutex_lock(&h->log_lock);
    if (now - h->log_window_us < LOG_WINDOW_US) {
        pthread_mutex_unlock(&h->log_lock);
        return;
    }
    uint64_t suppressed = h->log_suppressed;
    h->log_suppressed = 0;
    h->log_lines = 0;
    h->log_window_us = now;
    pthread_mutex_unlock(&h->log_lock);
    uint64_t head = atomic_exchange(&h->dropped_head, 0);
    uint64_t send = atomic_exchange(&h->dropped_send, 0);
    uint64_t ev = atomic_exchange(&h->evicted, 0);
    if (head || send || ev || suppressed)
        fs_log(FS_LOG_WARN, "http",
               "last %llds: closed %llu connections whose request head took over %llds, %llu "
               "whose response took over %llds, %llu waiting ones to make room; %llu more "
               "warnings not logged",
               (long long)(LOG_WINDOW_US / 1000000), (unsigned long long)head,
               (long long)(h->head_timeout_us / 1000000), (unsigned long long)send,
               (long long)(h->response_timeout_us / 1000000), (unsigned long long)ev,
               (unsigned long long)suppressed);
}

static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
    struct fs_http *h = cls;
    if (!log_allowed(h))
        return;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    fs_log(FS_LOG_WARN, "http", "%s", msg);
}

static void
count(struct fs_http *h, enum handler hd, unsigned status)
{
    for (size_t i = 0; i < N_CODES; i++) {
        if (status_codes[i] == status) {
            atomic_fetch_add_explicit(&h->counts[hd][i], 1, memory_order_relaxed);
            return;
        }
    }
}

/* ---- connections: deadlines and room for newcomers ---- */

static struct conn *
conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void
conn_phase(struct fs_http *h, struct MHD_Connection *c, enum phase ph)
{
    struct conn *k = conn_of(c);
    if (!k)
        return;
    pthread_mutex_lock(&h->conn_lock);
    k->phase = ph;
    k->since_us = fs_monotonic_us();
    pthread_mutex_unlock(&h->conn_lock);
}

/* Shuts the socket down; libmicrohttpd sees the end and closes the connection (the fd
 * stays valid until our CLOSED notification, which takes conn_lock). */
static void
conn_drop(struct conn *k)
{
    k->closing = true;
    shutdown(k->fd, SHUT_RDWR);
}

static void
notify_conn(void *cls, struct MHD_Connection *c, void **socket_context,
            enum MHD_ConnectionNotificationCode toe)
{
    struct fs_http *h = cls;
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        struct conn *k = *socket_context;
        if (!k)
            return;
        pthread_mutex_lock(&h->conn_lock);
        if (k->prev)
            k->prev->next = k->next;
        else
            h->conns = k->next;
        if (k->next)
            k->next->prev = k->prev;
        h->n_conns--;
        pthread_mutex_unlock(&h->conn_lock);
        free(k);
        *socket_context = NULL;
        return;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct conn *k = calloc(1, sizeof *k);
    if (!ci || !k) {
        free(k);
        return; /* untracked: only the idle timeout applies to it */
    }
    k->fd = ci->connect_fd;
    k->phase = PH_HEAD;
    k->since_us = fs_monotonic_us();
    pthread_mutex_lock(&h->conn_lock);
    k->next = h->conns;
    if (h->conns)
        h->conns->prev = k;
    h->conns = k;
    h->n_conns++;
    /* Near the limit: the oldest connection still waiting for its request head makes
     * room, so trickling clients cannot hold every slot. */
    if (h->n_conns > h->soft_conn_limit) {
        struct conn *oldest = NULL;
        for (struct conn *o = k->next; o; o = o->next)
            if (o->phase == PH_HEAD && !o->closing && (!oldest || o->since_us < oldest->since_us))
                oldest = o;
        if (oldest) {
            conn_drop(oldest);
            atomic_fetch_add(&h->evicted, 1);
        }
    }
    pthread_mutex_unlock(&h->conn_lock);
    *socket_context = k;
}

static void *
sweeper_main(void *arg)
{
    struct fs_http *h = arg;
    pthread_mutex_lock(&h->conn_lock);
    while (!h->sweeper_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += SWEEP_INTERVAL_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&h->sweep_cond, &h->conn_lock, &ts);
        int64_t now = fs_monotonic_us();
        for (struct conn *k = h->conns; k; k = k->next) {
            if (k->closing)
                continue;
            if (k->phase == PH_HEAD && now - k->since_us > h->head_timeout_us) {
                conn_drop(k);
                atomic_fetch_add(&h->dropped_head, 1);
            } else if (k->phase == PH_SEND && now - k->since_us > h->response_timeout_us) {
                conn_drop(k);
                atomic_fetch_add(&h->dropped_send, 1);
            }
        }
        pthread_mutex_unlock(&h->conn_lock);
        log_summary(h, now);
        pthread_mutex_lock(&h->conn_lock);
    }
    pthread_mutex_unlock(&h->conn_lock);
    return NULL;
}

/* ---- /metrics expositions ---- */

static void
snap_free(struct snapshot *s)
{
    if (!s)
        return;
    fs_buf_free(&s->plain);
    fs_buf_free(&s->gz);
    if (s->zinit)
        deflateEnd(&s->zs);
    pthread_mutex_destroy(&s->gz_lock);
    free(s);
}

/* Under snap_lock: the last reference is gone. Its memory is kept as the spare, so a
 * steady scrape renders into buffers that have already grown. */
static void
snap_retire(struct fs_http *h, struct snapshot *s)
{
    h->n_snaps--;
    if (!h->spare) {
        h->spare = s;
        return;
    }
    snap_free(s);
}

static void
snap_release(void *cls)
{
    struct snapshot *s = cls;
    struct fs_http *h = s->h;
    pthread_mutex_lock(&h->snap_lock);
    if (--s->refs == 0)
        snap_retire(h, s);
    pthread_mutex_unlock(&h->snap_lock);
}

static int
snap_gzip(struct snapshot *s)
{
    int rc = -1;
    pthread_mutex_lock(&s->gz_lock);
    if (s->gz_done) {
        rc = 0;
        goto out;
    }
    if (!s->zinit) {
        memset(&s->zs, 0, sizeof s->zs);
        /* Level 1: text metrics compress well already; speed matters more here. */
        if (deflateInit2(&s->zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
            goto out;
        s->zinit = true;
    } else if (deflateReset(&s->zs) != Z_OK) {
        goto out;
    }
    uLong bound = deflateBound(&s->zs, (uLong)s->plain.len);
    fs_buf_reset(&s->gz);
    if (!fs_buf_reserve(&s->gz, bound))
        goto out;
    s->zs.next_in = (Bytef *)s->plain.data;
    s->zs.avail_in = (uInt)s->plain.len;
    s->zs.next_out = (Bytef *)s->gz.data;
    s->zs.avail_out = (uInt)bound;
    if (deflate(&s->zs, Z_FINISH) != Z_STREAM_END)
        goto out;
    s->gz.len = bound - s->zs.avail_out;
    s->gz_done = true;
    rc = 0;
out:
    pthread_mutex_unlock(&s->gz_lock);
    return rc;
}

/* Renders a new exposition into s (outside every lock but the store's own). */
static int
snap_render(struct fs_http *h, struct snapshot *s, bool om)
{
    struct fs_expo_http_count hc[H_COUNT * N_CODES];
    struct fs_buf ext;
    size_t n = 0;
    int rc;
    for (size_t i = 0; i < H_COUNT; i++)
        for (size_t j = 0; j < N_CODES; j++)
            hc[n++] = (struct fs_expo_http_count){
                handler_names[i], status_codes[j],
                atomic_load_explicit(&h->counts[i][j], memory_order_relaxed)};
    fs_buf_reset(&s->plain);
    fs_buf_reset(&s->gz);
    s->gz_done = false;
    s->om = om;
    fs_buf_init(&ext, 1u << 20);
    fs_buf_puts(&ext, "");
    fs_cluster_labels_text(h->cluster, &ext);
    struct fs_expo_opts o = {.hc = hc,
                             .n_hc = n,
                             .external_labels = ext.overflow ? NULL : ext.data,
                             .openmetrics = om,
                             .store_created_us = h->store_created_us,
                             .http_created_us = h->http_created_us,
                             .have_inflight = true,
                             .inflight_bytes = atomic_load(&h->raw_inflight),
                             .inflight_limit = h->raw_budget,
                             .no_eof = true};
    rc = fs_expo_render_opts(h->st, &s->plain, &o);
    /* The analysis metrics come as text 0.0.4: carried over into the asked format, with
     * the external labels, before the end. */
    if (rc == 0 && h->an) {
        struct fs_buf an;
        fs_buf_init(&an, MAX_METRICS_BYTES);
        rc = fs_analysis_metrics(h->an, &an);
        if (rc == 0 && an.len)
            rc = fs_expo_adapt_text(an.data, an.len, &o, &s->plain);
        fs_buf_free(&an);
    }
    if (rc == 0)
        rc = fs_expo_end(&s->plain, &o);
    fs_buf_free(&ext);
    return rc;
}

/*
 * A reference to an exposition: the current one if it is young enough or a render is
 * not allowed (FS_HTTP_MAX_EXPOSITIONS alive), else a fresh render. One render at a
 * time; requests arriving meanwhile wait for it and share it. Only a render in the
 * asked format is shared (om); past the limit a scrape gets a fresh one of its format.
 */
static struct snapshot *
snap_acquire(struct fs_http *h, bool gz, bool om, const char **why)
{
    struct snapshot *s = NULL;
    pthread_mutex_lock(&h->snap_lock);
    uint64_t gen = h->render_gen;
    while (h->rendering)
        pthread_cond_wait(&h->snap_cond, &h->snap_lock);
    int64_t now = fs_monotonic_us();
    struct snapshot *cur = h->current;
    bool rendered_meanwhile = h->render_gen != gen;
    if (cur && cur->om == om &&
        (rendered_meanwhile || now - cur->made_us < h->share_us ||
         h->n_snaps >= FS_HTTP_MAX_EXPOSITIONS)) {
        cur->refs++;
        s = cur;
        pthread_mutex_unlock(&h->snap_lock);
        goto have;
    }
    h->rendering = true;
    s = h->spare;
    h->spare = NULL;
    h->n_snaps++;
    pthread_mutex_unlock(&h->snap_lock);

    if (!s && (s = calloc(1, sizeof *s)) != NULL) {
        s->h = h;
        pthread_mutex_init(&s->gz_lock, NULL);
        fs_buf_init(&s->plain, MAX_METRICS_BYTES);
        fs_buf_init(&s->gz, MAX_METRICS_BYTES);
    }
    bool ok = s && snap_render(h, s, om) == 0;
    *why = s ? "the exposition does not fit in memory" : "out of memory";

    pthread_mutex_lock(&h->snap_lock);
    h->rendering = false;
    pthread_cond_broadcast(&h->snap_cond);
    if (!ok) {
        h->n_snaps--;
        if (s && !h->spare)
            h->spare = s;
        else
            snap_free(s);
        pthread_mutex_unlock(&h->snap_lock);
        return NULL;
    }
    s->made_us = fs_monotonic_us();
    s->refs = 2; /* h->current and the caller */
    h->render_gen++;
    cur = h->current;
    h->current = s;
    if (cur && --cur->refs == 0)
        snap_retire(h, cur);
    pthread_mutex_unlock(&h->snap_lock);
have:
    if (gz && snap_gzip(s) != 0) {
        snap_release(s);
        *why = "compression failed";
        return NULL;
    }
    return s;
}

/* ---- answer memory budget (/api/v1/raw and the analysis GETs) ---- */

/* Takes up to max bytes of the budget for a render (given back down to what the
 * answer holds once rendered); 0 when too little is left. */
static size_t
raw_reserve(struct fs_http *h, size_t max)
{
    size_t cur = atomic_load(&h->raw_inflight);
    for (;;) {
        if (cur >= h->raw_budget || h->raw_budget - cur < MIN_RAW_RESERVE)
            return 0;
        size_t take = h->raw_budget - cur;
        if (take > max)
            take = max;
        if (atomic_compare_exchange_weak(&h->raw_inflight, &cur, cur + take))
            return take;
    }
}

static void
raw_unreserve(struct fs_http *h, size_t n)
{
    if (n)
        atomic_fetch_sub(&h->raw_inflight, n);
}

static void
held_body_free(void *cls)
{
    struct held_body *b = cls;
    raw_unreserve(b->h, b->reserved);
    free(b->data);
    free(b);
}

/* ---- answers ---- */

static void
common_headers(struct MHD_Response *r, const char *ctype)
{
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
}

/* The web view's files: revalidated on every load (a new binary may bring a new page,
 * and its ETag changes with the bytes), scripts and styles only from this origin. */
static void
web_headers(struct MHD_Response *r, const struct fs_web_asset *a)
{
    MHD_del_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, a->etag);
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'none'; script-src 'self'; style-src 'self'; "
                            "connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
                            "form-action 'none'; frame-ancestors 'none'");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
}

static void
set_answer(struct req *r, unsigned status, const char *ctype)
{
    r->status = status;
    r->ctype = ctype;
    r->state = RQ_READY;
}

/* Makes r's answer the JSON error {"status":"error","error":msg}. */
static void
set_error(struct req *r, unsigned status, const char *msg)
{
    fs_buf_free(&r->body);
    raw_unreserve(r->h, r->reserved);
    r->reserved = 0;
    fs_buf_init(&r->body, 64 * 1024);
    fs_api_error_json(&r->body, msg);
    r->retry_after = status == MHD_HTTP_SERVICE_UNAVAILABLE;
    set_answer(r, status, JSON_CTYPE);
}

/* Hands r's answer to libmicrohttpd (which takes the body's ownership). */
static enum MHD_Result
queue_answer(struct req *r)
{
    struct fs_http *h = r->h;
    struct MHD_Response *resp = NULL;
    if (r->snap) {
        struct fs_buf *b = r->gz ? &r->snap->gz : &r->snap->plain;
        resp = MHD_create_response_from_buffer_with_free_callback_cls(b->len, b->data, snap_release,
                                                                      r->snap);
        if (!resp)
            return MHD_NO; /* r->snap is released by req_done */
        r->snap = NULL;
    } else if (r->asset && (r->status == MHD_HTTP_OK || r->status == MHD_HTTP_NOT_MODIFIED)) {
        size_t len = r->status == MHD_HTTP_OK ? r->asset->len : 0;
        resp = MHD_create_response_from_buffer(len, (void *)r->asset->data, MHD_RESPMEM_PERSISTENT);
        if (!resp)
            return MHD_NO;
    } else {
        size_t len;
        struct held_body *hb = malloc(sizeof *hb);
        char *data = hb ? fs_buf_detach(&r->body, &len) : NULL;
        if (!data) {
            free(hb);
            return MHD_NO;
        }
        *hb = (struct held_body){h, data, r->reserved};
        r->reserved = 0;
        resp =
            MHD_create_response_from_buffer_with_free_callback_cls(len, data, held_body_free, hb);
        if (!resp) {
            held_body_free(hb);
            return MHD_NO;
        }
    }
    common_headers(resp, r->ctype);
    if (r->asset && (r->status == MHD_HTTP_OK || r->status == MHD_HTTP_NOT_MODIFIED))
        web_headers(resp, r->asset);
    if (r->hd == H_METRICS && r->status == MHD_HTTP_OK) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, MHD_HTTP_HEADER_ACCEPT_ENCODING);
        if (r->gz)
            MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
    }
    if (r->allow)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
    if (r->retry_after || r->status == MHD_HTTP_SERVICE_UNAVAILABLE) /* every 503 */
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, RETRY_AFTER_S);
    if (r->status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                "Bearer realm=\"fabricscope\"");
    enum MHD_Result ret = MHD_queue_response(r->c, r->status, resp);
    MHD_destroy_response(resp);
    count(h, r->hd, r->status);
    if (r->status >= 500 && log_allowed(h))
        fs_log(FS_LOG_WARN, "http", "%s answered %u", handler_names[r->hd], r->status);
    conn_phase(h, r->c, PH_SEND);
    r->state = RQ_SENT;
    return ret;
}

/* Whether Accept-Encoding allows gzip (a "gzip" or "*" token whose q is not 0). */
static bool
accepts_gzip(const char *ae)
{
    if (!ae)
        return false;
    const char *p = ae;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        const char *tok = p;
        while (*p && *p != ',' && *p != ';' && *p != ' ' && *p != '\t')
            p++;
        size_t tl = (size_t)(p - tok);
        bool gz = (tl == 4 && strncasecmp(tok, "gzip", 4) == 0) || (tl == 1 && *tok == '*');
        bool q0 = false;
        while (*p && *p != ',') {
            if (*p == ';') {
                const char *q = p + 1;
                while (*q == ' ')
                    q++;
                if ((q[0] == 'q' || q[0] == 'Q') && q[1] == '=') {
                    char *end;
                    q0 = strtod(q + 2, &end) <= 0.0;
                }
            }
            p++;
        }
        if (gz && !q0)
            return true;
    }
    return false;
}

/* The q of one Accept element's parameters (p after the media range): 1 unless q=. */
static double
accept_q(const char *p, const char *end)
{
    double q = 1.0;
    while (p < end) {
        if (*p == ';') {
            const char *k = p + 1;
            while (k < end && *k == ' ')
                k++;
            if (k + 1 < end && (k[0] == 'q' || k[0] == 'Q') && k[1] == '=')
                q = strtod(k + 2, NULL);
        }
        p++;
    }
    return q;
}

bool
fs_http_prefers_openmetrics(const char *accept)
{
    double q_om = 0, q_text = 0, q_any = 0;
    bool text_named = false;
    const char *p = accept;
    if (!p)
        return false;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        const char *el = p, *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        const char *mt_end = el;
        while (mt_end < end && *mt_end != ';' && *mt_end != ' ' && *mt_end != '\t')
            mt_end++;
        size_t ml = (size_t)(mt_end - el);
        double q = accept_q(mt_end, end);
        if (ml == 28 && strncasecmp(el, "application/openmetrics-text", 28) == 0) {
            if (q > q_om)
                q_om = q;
        } else if (ml == 10 && strncasecmp(el, "text/plain", 10) == 0) {
            text_named = true;
            if (q > q_text)
                q_text = q;
        } else if ((ml == 3 && strncmp(el, "*/*", 3) == 0) ||
                   (ml == 6 && strncasecmp(el, "text/*", 6) == 0)) {
            if (q > q_any)
                q_any = q;
        }
        p = end;
    }
    if (!text_named)
        q_text = q_any;
    return q_om > 0 && q_om >= q_text;
}

static bool
token_ok(const struct fs_http *h, struct MHD_Connection *c)
{
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!a || strncasecmp(a, "Bearer ", 7) != 0)
        return false;
    a += 7;
    while (*a == ' ')
        a++;
    size_t al = strlen(a);
    /* Constant time in the token's length: every byte of the token is compared. */
    unsigned char diff = al != h->token_len;
    for (size_t i = 0; i < h->token_len; i++)
        diff |= (unsigned char)((i < al ? a[i] : 0) ^ h->token[i]);
    return diff == 0;
}

/* ---- query workers ---- */

static void
run_raw(struct fs_http *h, struct req *r)
{
    char err[512];
    size_t take = raw_reserve(h, h->raw_max);
    if (!take) {
        set_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
                  "too many answers are waiting to be sent; retry later");
        return;
    }
    r->reserved = take;
    fs_buf_init(&r->body, take);
    r->q.deadline_mono_us = fs_monotonic_us() + h->raw_time_us;
    int rc = fs_api_raw(h->st, &r->q, &r->body, err, sizeof err);
    if (rc == FS_API_RAW_TOO_LARGE && take < h->raw_max) {
        set_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
                  "answers waiting to be sent use the memory this one needs; retry later");
        return;
    }
    if (rc != 0) {
        set_error(r, rc == FS_API_RAW_TOO_LARGE ? MHD_HTTP_BAD_REQUEST : (unsigned)rc, err);
        return;
    }
    /* Keep what the body holds, give back the rest. */
    raw_unreserve(h, take - r->body.cap);
    r->reserved = r->body.cap;
    set_answer(r, MHD_HTTP_OK, JSON_CTYPE);
}

static void run_analysis(struct fs_http *h, struct req *r);

static void
run_job(struct fs_http *h, struct req *r)
{
    const char *why = NULL;
    switch (r->hd) {
    case H_METRICS:
        r->snap = snap_acquire(h, r->gz, r->om, &why);
        if (!r->snap) {
            set_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, why);
            return;
        }
        set_answer(r, MHD_HTTP_OK, r->om ? FS_EXPO_OPENMETRICS_CTYPE : FS_EXPO_TEXT_CTYPE);
        return;
    case H_RAW:
        run_raw(h, r);
        return;
    case H_TARGETS:
        fs_buf_init(&r->body, MAX_JSON_BYTES);
        if (fs_api_targets(h->st, h->cluster, &r->body) != 0)
            set_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        else
            set_answer(r, MHD_HTTP_OK, JSON_CTYPE);
        return;
    case H_HOST_EVENTS:
    case H_CORRELATE:
    case H_INCIDENTS:
    case H_TRACE:
        run_analysis(h, r);
        return;
    case H_TOPOLOGY: {
        fs_buf_init(&r->body, MAX_JSON_BYTES);
        int st = fs_api_topology(h->topo, &r->tq, fs_realtime_us(), &r->body);
        set_answer(r, (unsigned)st, JSON_CTYPE);
        return;
    }
    default:
        set_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "no worker for this handler");
        return;
    }
}

/* The analysis endpoints: each renders its whole answer (JSON) into r->body. */
static void
run_analysis(struct fs_http *h, struct req *r)
{
    /* A GET runs against the now its range was checked with on arrival. */
    int64_t now_us = r->hd == H_HOST_EVENTS ? fs_realtime_us() : r->arrival_us;
    int status;
    /* A GET's answer is rendered only into budget taken first (like /api/v1/raw's); a
     * post's answer is a few bytes and is counted once rendered, never refused, so
     * that busy readers cannot stop host events from being stored. */
    size_t max = h->raw_max < MAX_JSON_BYTES ? h->raw_max : MAX_JSON_BYTES, take = 0;
    if (r->hd != H_HOST_EVENTS) {
        take = raw_reserve(h, max);
        if (!take) {
            set_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
                      "too many answers are waiting to be sent; retry later");
            return;
        }
        r->reserved = take;
    }
    fs_buf_init(&r->body, take ? take : MAX_JSON_BYTES);
    switch (r->hd) {
    case H_HOST_EVENTS:
        status = fs_analysis_post_host_events(h->an, r->auth, r->upload.data, r->upload.len, now_us,
                                              &r->body);
        /* The body is stored (copied) or refused: its memory goes now, not at the end
         * of the response. */
        fs_buf_free(&r->upload);
        break;
    case H_CORRELATE:
        status = fs_analysis_correlate(h->an, h->st, r->aargs, r->n_aargs, now_us, &r->body);
        break;
    case H_INCIDENTS:
        status = fs_analysis_incidents(h->an, h->st, r->aargs, r->n_aargs, now_us, &r->body);
        break;
    default:
        status = fs_analysis_export_trace(h->an, h->st, r->aargs, r->n_aargs, now_us, &r->body);
        break;
    }
    if (r->body.overflow || status < 100 || status > 599) {
        set_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR,
                  r->body.overflow ? "the answer does not fit in memory; narrow the range"
                                   : "analysis failed");
        return;
    }
    if (status == MHD_HTTP_CONTENT_TOO_LARGE && take && take < max) {
        /* Over what was left of the budget, not over the answer limit. */
        set_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
                  "answers waiting to be sent use the memory this one needs; retry later");
        return;
    }
    /* Keep what the body holds, give back the rest. */
    if (take)
        raw_unreserve(h, take - r->body.cap);
    else
        atomic_fetch_add(&h->raw_inflight, r->body.cap);
    r->reserved = r->body.cap;
    set_answer(r, (unsigned)status, JSON_CTYPE);
}

static void *
worker_main(void *arg)
{
    struct lane *l = arg;
    struct fs_http *h = l->h;
    for (;;) {
        pthread_mutex_lock(&h->queue_lock);
        while (!l->head && !(h->stopping && l->pending == 0))
            pthread_cond_wait(&l->cond, &h->queue_lock);
        struct req *r = l->head;
        if (!r) {
            pthread_mutex_unlock(&h->queue_lock);
            return NULL;
        }
        l->head = r->next;
        if (!l->head)
            l->tail = NULL;
        l->pending--;
        bool stopping = h->stopping;
        pthread_cond_broadcast(&l->cond);
        pthread_mutex_unlock(&h->queue_lock);
        if (stopping)
            set_error(r, MHD_HTTP_SERVICE_UNAVAILABLE, "shutting down");
        else
            run_job(h, r);
        MHD_resume_connection(r->c);
    }
}

/* Suspends the connection and queues r for a worker of its lane: NULL, or why not (the
 * endpoint is stopping, or that lane's queue is full; r is untouched then). */
static const char *
submit_job(struct fs_http *h, struct req *r)
{
    struct lane *l = r->lane;
    pthread_mutex_lock(&h->queue_lock);
    const char *why = h->stopping                     ? "shutting down"
                      : l->pending >= MAX_QUEUED_JOBS ? "too many queries waiting; retry later"
                                                      : NULL;
    if (!why)
        l->pending++;
    pthread_mutex_unlock(&h->queue_lock);
    if (why)
        return why;
    r->state = RQ_JOB;
    MHD_suspend_connection(r->c);
    pthread_mutex_lock(&h->queue_lock);
    r->next = NULL;
    if (l->tail)
        l->tail->next = r;
    else
        l->head = r;
    l->tail = r;
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&h->queue_lock);
    return NULL;
}

struct poll_census {
    int64_t scrape_us, min_us;
    unsigned polled, faster; /* targets polled; of them, more often than the scrape */
};

static int
census_cb(void *arg, const struct fs_instance_info *in)
{
    struct poll_census *pc = arg;
    if (in->interval_us <= 0)
        return 0;
    pc->polled++;
    if (fs_scrape_watch_unstored_share(in->interval_us, pc->scrape_us) > 0.1) {
        pc->faster++;
        if (!pc->min_us || in->interval_us < pc->min_us)
            pc->min_us = in->interval_us;
    }
    return 0;
}

/* Notes a /metrics request; a scraper newly steady at an interval longer than some
   targets' poll interval is warned about (scrape_watch.h: what its TSDB never stores). */
static void
watch_scraper(struct fs_http *h, struct MHD_Connection *c)
{
    if (!h->scrapers)
        return;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    const char *ua = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_USER_AGENT);
    /* The scraper's key: FNV-1a of its address (without the port) and User-Agent. */
    const unsigned char *ab = NULL;
    size_t an = 0;
    if (sa && sa->sa_family == AF_INET) {
        ab = (const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr;
        an = sizeof(struct in_addr);
    } else if (sa && sa->sa_family == AF_INET6) {
        ab = (const unsigned char *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
        an = sizeof(struct in6_addr);
    }
    uint64_t key = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < an; i++)
        key = (key ^ ab[i]) * 0x100000001b3ULL;
    for (const char *p = ua ? ua : ""; *p; p++)
        key = (key ^ (unsigned char)*p) * 0x100000001b3ULL;
    int64_t iv = fs_scrape_watch_note(h->scrapers, key, fs_monotonic_us());
    if (!iv)
        return;
    char addr[NI_MAXHOST] = "?";
    if (an)
        getnameinfo(sa,
                    sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                              : sizeof(struct sockaddr_in),
                    addr, sizeof addr, NULL, 0, NI_NUMERICHOST);
    struct poll_census pc = {.scrape_us = iv};
    fs_store_foreach_instance(h->st, census_cb, &pc);
    if (!pc.faster) {
        fs_log(FS_LOG_INFO, "http", "/metrics is scraped every %.1f s by %s (%.60s)",
               (double)iv / 1e6, addr, ua ? ua : "no User-Agent");
        return;
    }
    fs_log(FS_LOG_WARN, "http",
           "/metrics is scraped every %.1f s by %s (%.60s), while %u of %u targets are polled "
           "more often (every %.1f s at the shortest): each scrape stores only the latest "
           "poll, so that TSDB never stores about %.0f%% of those polls (their queue "
           "watermarks lost, their counter increases merged into the next); poll at the "
           "scrape interval, scrape more often, or send remote_write",
           (double)iv / 1e6, addr, ua ? ua : "no User-Agent", pc.faster, pc.polled,
           (double)pc.min_us / 1e6, 100.0 * fs_scrape_watch_unstored_share(pc.min_us, iv));
}

/* ---- routing ---- */

struct args_ctx {
    struct fs_query_arg a[MAX_ARGS];
    size_t n, bytes;
    bool too_many, nul;
};

static enum MHD_Result
args_cb(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size, const char *value,
        size_t value_size)
{
    (void)kind;
    struct args_ctx *c = cls;
    c->bytes += key_size + 2 + value_size;
    /* libmicrohttpd decodes %00 into the text; the C string would silently end there. */
    if (strlen(key) != key_size || (value && strlen(value) != value_size))
        c->nul = true;
    if (c->n >= MAX_ARGS) {
        c->too_many = true;
        return MHD_YES;
    }
    c->a[c->n].key = key;
    c->a[c->n].value = value;
    c->n++;
    return MHD_YES;
}

enum route { ROUTE_ANSWER, ROUTE_EARLY, ROUTE_JOB };

static int64_t
realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Copies the query parameters for a worker (NULL values stay NULL). 0 or -1. */
static int
copy_args(struct req *r, const struct args_ctx *a)
{
    if (a->n == 0)
        return 0;
    r->aargs = calloc(a->n, sizeof *r->aargs);
    if (!r->aargs)
        return -1;
    for (size_t i = 0; i < a->n; i++) {
        r->n_aargs = i + 1;
        r->aargs[i].key = strdup(a->a[i].key);
        if (!r->aargs[i].key)
            return -1;
        if (a->a[i].value && !(r->aargs[i].value = strdup(a->a[i].value)))
            return -1;
    }
    return 0;
}

static void
free_args(struct req *r)
{
    for (size_t i = 0; i < r->n_aargs; i++) {
        free((char *)r->aargs[i].key);
        free((char *)r->aargs[i].value);
    }
    free(r->aargs);
    r->aargs = NULL;
    r->n_aargs = 0;
}

/* The analysis endpoint a path names, or H_OTHER. */
static enum handler
analysis_handler(const char *url)
{
    if (strcmp(url, "/api/v1/host-events") == 0)
        return H_HOST_EVENTS;
    if (strcmp(url, "/api/v1/time") == 0)
        return H_TIME;
    if (strcmp(url, "/api/v1/correlate") == 0)
        return H_CORRELATE;
    if (strcmp(url, "/api/v1/incidents") == 0)
        return H_INCIDENTS;
    if (strcmp(url, "/api/v1/export/trace") == 0)
        return H_TRACE;
    return H_OTHER;
}

/* Decides r's fate from the request head: an answer (errors, /healthz), one sent at
 * once before any body (ROUTE_EARLY), or a job for a worker once the request is read. */
static enum route
route(struct fs_http *h, struct req *r, const char *url, const char *method)
{
    struct MHD_Connection *c = r->c;
    enum handler hd = H_OTHER;
    if (strcmp(url, "/metrics") == 0)
        hd = H_METRICS;
    else if (strcmp(url, "/api/v1/raw") == 0)
        hd = H_RAW;
    else if (strcmp(url, "/api/v1/targets") == 0)
        hd = H_TARGETS;
    else if (strcmp(url, "/healthz") == 0)
        hd = H_HEALTHZ;
    else if (h->topo && strcmp(url, "/api/v1/topology") == 0)
        hd = H_TOPOLOGY;
    else if ((r->asset = fs_web_asset_find(url)) != NULL)
        hd = H_INDEX;
    else if (h->an)
        hd = analysis_handler(url);
    r->hd = hd;
    if (hd == H_TIME)
        r->receive_ns = realtime_ns(); /* as early as the server can see the request */
    bool post = hd == H_HOST_EVENTS;

    struct args_ctx args;
    memset(&args, 0, sizeof args);
    MHD_get_connection_values_n(c, MHD_GET_ARGUMENT_KIND, args_cb, &args);
    const char *cl =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    /* A chunked host-event post is bounded while it is read (handle()). */
    if ((cl && strtoull(cl, NULL, 10) > (post ? FS_HOST_EVENTS_MAX_BODY : MAX_BODY_BYTES)) ||
        (te && !post)) {
        char msg[96];
        snprintf(msg, sizeof msg, "request body too large (at most %u bytes)",
                 post ? FS_HOST_EVENTS_MAX_BODY : MAX_BODY_BYTES);
        set_error(r, MHD_HTTP_CONTENT_TOO_LARGE, msg);
        return ROUTE_EARLY;
    }
    if (strlen(url) + args.bytes > MAX_URL_BYTES) {
        set_error(r, MHD_HTTP_URI_TOO_LONG, "request URL too long");
        return ROUTE_ANSWER;
    }
    if (hd == H_OTHER) {
        set_error(r, MHD_HTTP_NOT_FOUND, "not found");
        return ROUTE_ANSWER;
    }
    if (post && strcmp(method, MHD_HTTP_METHOD_POST) != 0) {
        set_error(r, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed");
        r->allow = "POST";
        return ROUTE_EARLY; /* before any body */
    }
    if (!post && strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
        strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        set_error(r, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed");
        r->allow = "GET, HEAD";
        return ROUTE_ANSWER;
    }
    /* The host-event post has a token of its own; /api/v1/time tells only the clock.
     * The web view's files hold no data (its script sends the token with every data
     * request), and a browser cannot attach a bearer token to a page load. */
    if (h->token && hd != H_HEALTHZ && hd != H_TIME && hd != H_INDEX && !post && !token_ok(h, c)) {
        set_error(r, MHD_HTTP_UNAUTHORIZED, "missing or wrong bearer token");
        return ROUTE_ANSWER;
    }
    if (args.too_many) {
        char msg[96];
        snprintf(msg, sizeof msg, "too many query parameters (at most %d)", MAX_ARGS);
        set_error(r, MHD_HTTP_BAD_REQUEST, msg);
        return ROUTE_ANSWER;
    }
    if (args.nul) {
        set_error(r, MHD_HTTP_BAD_REQUEST, "NUL byte (%00) in a parameter");
        return ROUTE_ANSWER;
    }
    bool takes_args =
        hd == H_RAW || hd == H_CORRELATE || hd == H_INCIDENTS || hd == H_TRACE || hd == H_TOPOLOGY;
    if (!takes_args && args.n > 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "unknown parameter \"%.64s\"", args.a[0].key);
        set_error(r, MHD_HTTP_BAD_REQUEST, msg);
        return ROUTE_ANSWER;
    }
    if (hd == H_HEALTHZ) {
        fs_buf_init(&r->body, 64);
        fs_buf_puts(&r->body, "{\"status\":\"ok\"}\n");
        set_answer(r, MHD_HTTP_OK, JSON_CTYPE);
        return ROUTE_ANSWER;
    }
    if (hd == H_INDEX) {
        const char *inm =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);
        set_answer(r,
                   fs_web_etag_matches(inm, r->asset->etag) ? MHD_HTTP_NOT_MODIFIED : MHD_HTTP_OK,
                   r->asset->ctype);
        return ROUTE_ANSWER;
    }
    if (hd == H_RAW) {
        char err[512];
        /* Parsing compiles the regexes, each bounded before compiling (selector.h). */
        if (fs_raw_query_parse(args.a, args.n, fs_realtime_us(), &r->q, err, sizeof err) != 0) {
            set_error(r, MHD_HTTP_BAD_REQUEST, err);
            return ROUTE_ANSWER;
        }
        r->have_q = true;
    }
    if (hd == H_TOPOLOGY) {
        char err[256];
        if (fs_topology_query_parse(args.a, args.n, &r->tq, err, sizeof err) != 0) {
            set_error(r, MHD_HTTP_BAD_REQUEST, err);
            return ROUTE_ANSWER;
        }
    }
    if (post) {
        /* Refused before reading the body: an unauthenticated client cannot make the
         * server hold 32 MiB. */
        fs_buf_init(&r->body, 64 * 1024);
        const char *auth =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        int st = fs_analysis_authorize_post(h->an, auth, &r->body);
        if (st != 0) {
            set_answer(r, (unsigned)st, JSON_CTYPE);
            return ROUTE_EARLY;
        }
        if (!(r->auth = strdup(auth))) {
            set_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
            return ROUTE_EARLY;
        }
        fs_buf_free(&r->body);
        fs_buf_init(&r->upload, FS_HOST_EVENTS_MAX_BODY);
    }
    if (hd == H_TIME) {
        set_answer(r, MHD_HTTP_OK, JSON_CTYPE); /* rendered when queued (send_ns) */
        return ROUTE_ANSWER;
    }
    if (takes_args && hd != H_RAW && hd != H_TOPOLOGY && copy_args(r, &args) != 0) {
        set_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        return ROUTE_ANSWER;
    }
    if (hd == H_CORRELATE || hd == H_INCIDENTS || hd == H_TRACE) {
        /* Refused now, not after waiting for a worker. */
        enum fs_analysis_get g = hd == H_CORRELATE   ? FS_ANALYSIS_GET_CORRELATE
                                 : hd == H_INCIDENTS ? FS_ANALYSIS_GET_INCIDENTS
                                                     : FS_ANALYSIS_GET_TRACE;
        r->arrival_us = fs_realtime_us();
        fs_buf_free(&r->body);
        fs_buf_init(&r->body, 64 * 1024);
        int st = fs_analysis_check_get(h->an, g, r->aargs, r->n_aargs, r->arrival_us, &r->body);
        if (st != 0 && (r->body.overflow || st < 100 || st > 599))
            set_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "analysis failed");
        else if (st != 0)
            set_answer(r, (unsigned)st, JSON_CTYPE);
        if (st != 0)
            return ROUTE_ANSWER;
        fs_buf_free(&r->body);
    }
    if (hd == H_METRICS) {
        watch_scraper(h, c);
        r->gz = accepts_gzip(
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING));
        r->om = fs_http_prefers_openmetrics(
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT));
    }
    r->lane = &h->lanes[hd == H_METRICS || hd == H_TARGETS ? LANE_CHEAP : LANE_QUERY];
    return ROUTE_JOB;
}

static enum MHD_Result
handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
       const char *version, const char *upload_data, size_t *upload_data_size, void **req_cls)
{
    (void)version;
    struct fs_http *h = cls;
    struct req *r = *req_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r)
            return MHD_NO;
        r->h = h;
        r->c = c;
        fs_buf_init(&r->body, 0);
        *req_cls = r;
        pthread_mutex_lock(&h->conn_lock);
        h->n_reqs++;
        pthread_mutex_unlock(&h->conn_lock);
        enum route rt = route(h, r, url, method);
        if (rt == ROUTE_EARLY)
            return queue_answer(r);
        r->state = rt == ROUTE_JOB ? RQ_TO_SUBMIT : RQ_READY;
        return MHD_YES;
    }
    if (*upload_data_size) {
        /* Only a host-event post keeps its body (bounded); any other is discarded. */
        if (r->hd == H_HOST_EVENTS && r->state == RQ_TO_SUBMIT &&
            !fs_buf_append(&r->upload, upload_data, *upload_data_size)) {
            fs_buf_free(&r->upload);
            char msg[96];
            snprintf(msg, sizeof msg, "request body too large (at most %u bytes)",
                     FS_HOST_EVENTS_MAX_BODY);
            set_error(r, MHD_HTTP_CONTENT_TOO_LARGE, msg);
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    /* The request has been read whole (until now it ran against the head deadline,
     * a trickled body included); answering now keeps the connection alive. */
    conn_phase(h, c, PH_WORK);
    if (r->state == RQ_TO_SUBMIT) {
        const char *why = submit_job(h, r);
        if (!why)
            return MHD_YES; /* r is the worker's until it resumes the connection */
        set_error(r, MHD_HTTP_SERVICE_UNAVAILABLE, why);
    }
    if (r->state == RQ_READY) {
        if (r->hd == H_TIME && r->status == MHD_HTTP_OK) {
            fs_buf_init(&r->body, 256);
            fs_analysis_time(r->receive_ns, &r->body);
        }
        return queue_answer(r);
    }
    return MHD_YES;
}

static void
req_done(void *cls, struct MHD_Connection *c, void **req_cls, enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    struct fs_http *h = cls;
    struct req *r = *req_cls;
    if (r) {
        if (r->snap)
            snap_release(r->snap);
        raw_unreserve(h, r->reserved);
        fs_buf_free(&r->body);
        if (r->have_q)
            fs_raw_query_free(&r->q);
        fs_buf_free(&r->upload);
        if (r->auth)
            explicit_bzero(r->auth, strlen(r->auth));
        free(r->auth);
        free_args(r);
        free(r);
        *req_cls = NULL;
        pthread_mutex_lock(&h->conn_lock);
        if (--h->n_reqs == 0)
            pthread_cond_broadcast(&h->drain_cond);
        pthread_mutex_unlock(&h->conn_lock);
    }
    /* The next request on a kept-alive connection has its own head deadline. */
    conn_phase(h, c, PH_HEAD);
}

static char *
read_file(const char *path, char *errbuf, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    char *data = NULL;
    if (!f) {
        snprintf(errbuf, errlen, "cannot open %s", path);
        return NULL;
    }
    data = malloc(MAX_TLS_FILE_BYTES + 1);
    if (!data) {
        snprintf(errbuf, errlen, "out of memory");
        goto cleanup;
    }
    size_t n = fread(data, 1, MAX_TLS_FILE_BYTES + 1, f);
    if (n > MAX_TLS_FILE_BYTES || ferror(f)) {
        snprintf(errbuf, errlen, "cannot read %s (or larger than 1 MiB)", path);
        free(data);
        data = NULL;
        goto cleanup;
    }
    data[n] = '\0';
cleanup:
    fclose(f);
    return data;
}

struct fs_http *
fs_http_start(const struct fs_http_opts *o, struct fs_store *st, char *errbuf, size_t errlen)
{
    struct fs_http *h = calloc(1, sizeof *h);
    struct addrinfo *ai = NULL;
    if (!h) {
        snprintf(errbuf, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&h->conn_lock, NULL);
    pthread_mutex_init(&h->queue_lock, NULL);
    pthread_mutex_init(&h->snap_lock, NULL);
    pthread_mutex_init(&h->log_lock, NULL);
    for (int i = 0; i < N_LANES; i++) {
        h->lanes[i].h = h;
        pthread_cond_init(&h->lanes[i].cond, NULL);
    }
    pthread_cond_init(&h->snap_cond, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->sweep_cond, &ca);
    pthread_cond_init(&h->drain_cond, &ca);
    pthread_condattr_destroy(&ca);
    h->st = st;
    h->cluster = o->cluster;
    h->scrapers = fs_scrape_watch_new();
    h->store_created_us = o->store_created_us;
    h->http_created_us = fs_realtime_us();
    h->an = o->analysis;
    h->topo = o->topology;
    h->log_window_us = fs_monotonic_us();
    unsigned threads = o->threads ? o->threads : 2;
    unsigned maxconn = o->max_connections ? o->max_connections : 64;
    unsigned timeout = o->connection_timeout_s ? o->connection_timeout_s : 10;
    if (maxconn < threads)
        maxconn = threads;
    h->head_timeout_us = (int64_t)(o->head_timeout_s ? o->head_timeout_s : 10) * 1000000;
    h->response_timeout_us =
        (int64_t)(o->response_timeout_s ? o->response_timeout_s : 60) * 1000000;
    h->raw_time_us = (int64_t)(o->raw_time_limit_ms ? o->raw_time_limit_ms : 10000) * 1000;
    h->share_us = o->metrics_share_ms > 0 ? (int64_t)o->metrics_share_ms * 1000 : 0;
    h->raw_budget = o->raw_inflight_bytes ? o->raw_inflight_bytes : MAX_RAW_BYTES;
    unsigned want[N_LANES];
    want[LANE_CHEAP] = 1; /* /metrics renders once per burst (shared snapshot) */
    want[LANE_QUERY] = o->query_threads ? o->query_threads : 2;
    /* One answer may take the budget's share of one worker, so that every worker can
     * render at once; a larger answer is the client's to narrow (400). */
    h->raw_max = h->raw_budget / want[LANE_QUERY];
    /* Keep an eighth of the connections (at least two) for newcomers. */
    unsigned reserve = maxconn / 8 > 2 ? maxconn / 8 : 2;
    h->soft_conn_limit = maxconn > reserve ? maxconn - reserve : 1;
    if (o->bearer_token && *o->bearer_token) {
        h->token = strdup(o->bearer_token);
        if (!h->token) {
            snprintf(errbuf, errlen, "out of memory");
            goto fail;
        }
        h->token_len = strlen(h->token);
    }

    for (int k = 0; k < N_LANES; k++) {
        struct lane *l = &h->lanes[k];
        l->workers = calloc(want[k], sizeof *l->workers);
        if (!l->workers) {
            snprintf(errbuf, errlen, "out of memory");
            goto fail;
        }
        for (; l->n_workers < want[k]; l->n_workers++) {
            if (pthread_create(&l->workers[l->n_workers], NULL, worker_main, l) != 0) {
                snprintf(errbuf, errlen, "cannot start the HTTP query threads");
                goto fail;
            }
        }
    }
    if (pthread_create(&h->sweeper, NULL, sweeper_main, h) != 0) {
        snprintf(errbuf, errlen, "cannot start the HTTP sweeper thread");
        goto fail;
    }
    h->sweeper_started = true;

    const char *host = o->host && *o->host ? o->host : "127.0.0.1";
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    char portstr[8];
    snprintf(portstr, sizeof portstr, "%u", (unsigned)o->port);
    int gai = getaddrinfo(host, portstr, &hints, &ai);
    if (gai != 0 || !ai) {
        snprintf(errbuf, errlen, "cannot resolve listen address %s: %s", host, gai_strerror(gai));
        goto fail;
    }

    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | MHD_USE_AUTO |
                     MHD_ALLOW_SUSPEND_RESUME;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    bool tls = o->tls_cert_file && o->tls_key_file;
    if (tls) {
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
            snprintf(errbuf, errlen, "this libmicrohttpd has no TLS support");
            goto fail;
        }
        h->cert = read_file(o->tls_cert_file, errbuf, errlen);
        if (!h->cert)
            goto fail;
        h->key = read_file(o->tls_key_file, errbuf, errlen);
        if (!h->key)
            goto fail;
        flags |= MHD_USE_TLS;
    }

    /* Per client address: a quarter of the connections, so that one address (or two)
     * cannot take them all. */
    unsigned per_ip = maxconn / 4 ? maxconn / 4 : 1;
    struct MHD_OptionItem tls_opts[] = {
        {MHD_OPTION_HTTPS_MEM_KEY, 0, h->key},
        {MHD_OPTION_HTTPS_MEM_CERT, 0, h->cert},
        {MHD_OPTION_END, 0, NULL},
    };
    /* The logger goes first so that option errors are routed too. */
    h->d = MHD_start_daemon(
        flags, 0, NULL, NULL, handle, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,
        MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_CONNECTION_LIMIT, maxconn, MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip,
        MHD_OPTION_CONNECTION_TIMEOUT, timeout, MHD_OPTION_CONNECTION_MEMORY_LIMIT, POOL_BYTES,
        MHD_OPTION_NOTIFY_CONNECTION, notify_conn, h, MHD_OPTION_NOTIFY_COMPLETED, req_done, h,
        MHD_OPTION_ARRAY, tls ? tls_opts : &tls_opts[2], MHD_OPTION_END);
    if (!h->d) {
        snprintf(errbuf, errlen, "cannot listen on %s port %u (address in use, or bad TLS files?)",
                 host, (unsigned)o->port);
        goto fail;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? di->port : o->port;
    freeaddrinfo(ai);
    bool v6 = strchr(host, ':') != NULL;
    fs_log(FS_LOG_INFO, "http", "listening on %s%s%s:%u%s", v6 ? "[" : "", host, v6 ? "]" : "",
           (unsigned)h->port, tls ? " (https)" : "");
    return h;
fail:
    if (ai)
        freeaddrinfo(ai);
    fs_http_stop(h);
    return NULL;
}

uint16_t
fs_http_port(const struct fs_http *h)
{
    return h->port;
}

unsigned
fs_http_open_connections(struct fs_http *h)
{
    pthread_mutex_lock(&h->conn_lock);
    unsigned n = h->n_conns;
    pthread_mutex_unlock(&h->conn_lock);
    return n;
}

/* Waits until every request begun has ended (sent, or its connection closed), or
 * DRAIN_US has passed. */
static void
drain_requests(struct fs_http *h)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += DRAIN_US / 1000000;
    ts.tv_nsec += (DRAIN_US % 1000000) * 1000;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&h->conn_lock);
    while (h->n_reqs > 0)
        if (pthread_cond_timedwait(&h->drain_cond, &h->conn_lock, &ts) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&h->conn_lock);
}

void
fs_http_stop(struct fs_http *h)
{
    if (!h)
        return;
    /* Workers first: they answer what is queued ("shutting down") and resume every
     * suspended connection, which libmicrohttpd needs before it can stop. */
    pthread_mutex_lock(&h->queue_lock);
    h->stopping = true;
    for (int k = 0; k < N_LANES; k++)
        pthread_cond_broadcast(&h->lanes[k].cond);
    pthread_mutex_unlock(&h->queue_lock);
    for (int k = 0; k < N_LANES; k++) {
        for (unsigned i = 0; i < h->lanes[k].n_workers; i++)
            pthread_join(h->lanes[k].workers[i], NULL);
        free(h->lanes[k].workers);
    }
    if (h->d) {
        /* The answers the workers made (a read cut by the stop is answered from local
         * data) are still to be sent: MHD_stop_daemon would drop them, so it waits, no
         * longer than DRAIN_US, with no new connection accepted. */
        MHD_socket ls = MHD_quiesce_daemon(h->d);
        drain_requests(h);
        MHD_stop_daemon(h->d); /* destroys responses: every snapshot reference is released */
        if (ls != MHD_INVALID_SOCKET)
            close(ls);
    }
    if (h->sweeper_started) {
        pthread_mutex_lock(&h->conn_lock);
        h->sweeper_stop = true;
        pthread_cond_signal(&h->sweep_cond);
        pthread_mutex_unlock(&h->conn_lock);
        pthread_join(h->sweeper, NULL);
    }
    if (h->current && --h->current->refs == 0)
        snap_retire(h, h->current);
    snap_free(h->spare);
    fs_scrape_watch_free(h->scrapers);
    if (h->token)
        explicit_bzero(h->token, h->token_len);
    free(h->token);
    free(h->cert);
    if (h->key)
        explicit_bzero(h->key, strlen(h->key));
    free(h->key);
    pthread_cond_destroy(&h->sweep_cond);
    pthread_cond_destroy(&h->drain_cond);
    for (int k = 0; k < N_LANES; k++)
        pthread_cond_destroy(&h->lanes[k].cond);
    pthread_cond_destroy(&h->snap_cond);
    pthread_mutex_destroy(&h->log_lock);
    pthread_mutex_destroy(&h->snap_lock);
    pthread_mutex_destroy(&h->queue_lock);
    pthread_mutex_destroy(&h->conn_lock);
    free(h);
}
