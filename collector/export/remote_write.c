/*
 * Prometheus remote-write 1.0 senders; see remote_write.h for the model.
 *
 * Per sender: a series table indexed by ring id (labels prepared once as protobuf-c
 * Label structs, the high-water mark, the count of queued samples referring to it), the
 * queue (a circular array of samples pointing at their series), scratch arrays for one
 * batch (so a send allocates nothing once warm), and one curl easy handle (its
 * connection is kept alive between requests). The state counts live series per metric
 * family: the families a metadata round describes.
 */
#include "export/remote_write.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <snappy-c.h>

#include "metrics_catalogue.h"
#include "remote.pb-c.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/url.h"

#define SUBSYS "remote_write"
#define SCAN_INTERVAL_US 100000  /* how often the ring is walked for new samples */
#define READ_CHUNK 1024          /* ring samples read per fs_store_read call */
#define SCAN_CHUNK 4096          /* series per read-locked chunk of the walk */
#define RATE_WINDOW_US 1000000   /* the ingest rate behind the horizon is measured per second, */
#define RATE_WEIGHT 0.2          /* averaged with this weight (a time constant of ~5 s) */
#define SECRET_REREAD_US 1000000 /* secret files are read again at most this often */
#define FLUSH_LIMIT_US 2000000   /* last send at shutdown */
#define RETRY_AFTER_MAX_S 600    /* a Retry-After beyond this is taken as this */
#define ERR_BODY_MAX 256
/* Packed size bounds: a Sample is at most a tag and 8 bytes (value) plus a tag and a
 * 10-byte varint (timestamp), inside a tag and a 1-byte length; a TimeSeries adds its tag
 * and a length varint of at most 10 bytes to its labels and samples. */
#define PACKED_SAMPLE_MAX (2 + 9 + 11)
#define PACKED_SERIES_OVERHEAD 11

/* One series as the sender knows it. Owned by the state's table while live, then by the
 * queue items still referring to it (freed when the last one leaves). */
struct rw_series {
    uint32_t id, gen;
    bool live;
    uint64_t seen; /* number of the last scan that listed it */
    enum fs_metric metric;
    int64_t hw_us; /* timestamp of the newest sample taken from the ring */
    uint64_t pending;
    bool counter;
    double scale;
    Prometheus__Label *labels; /* sorted by name, __name__ and external labels included */
    Prometheus__Label **label_ptrs;
    size_t n_labels;
    size_t labels_packed; /* bytes of its labels inside a packed TimeSeries */
    uint64_t batch_mark;  /* scratch of batch building */
    size_t batch_ts;
};

struct rw_item {
    struct rw_series *s;
    int64_t ts_ms;
    double v;
    int64_t enq_us; /* monotonic time it was queued: the batch deadline runs from it */
};

/* What a restarted sender of the same URL takes over: nothing is sent twice or skipped. */
struct rw_state {
    struct rw_series **by_id;
    size_t by_id_cap;
    struct rw_item *q;
    size_t q_cap, q_head, q_len;
    int64_t from_us; /* a series first seen starts after this time */
    uint64_t scan_no;
    uint64_t batch_no; /* goes on across senders: series carry marks of earlier batches */
    uint32_t fam_live[FS_METRIC_COUNT]; /* live series of each metric family */
};

enum { RUN = 0, STOP_HANDOVER = 1, STOP_FLUSH = 2 };

struct rw_sender {
    struct rw_sender *next;     /* the manager's list */
    struct rw_sender *reg_next; /* the process-wide registry (self metrics) */
    struct fs_remote_write *mgr;
    struct fs_remote_write_cfg cfg; /* own deep copy */
    char shown_url[512];            /* cfg.url without credentials: logs and labels */
    char *remote_name;
    struct fs_kv *ext; /* external labels, own copy */
    size_t n_ext;
    struct rw_state st;
    pthread_t thread;
    bool started;
    pthread_mutex_t lock; /* guards stop and wakes the thread */
    pthread_cond_t cond;
    atomic_int stop;
    _Atomic int64_t flush_deadline_us;

    /* batch scratch, max_samples_per_send each */
    Prometheus__Sample *samples;
    Prometheus__Sample **sample_ptrs;
    Prometheus__TimeSeries *ts;
    Prometheus__TimeSeries **ts_ptrs;
    struct rw_series **ts_series;
    size_t *ts_fill;
    uint8_t *pb;
    size_t pb_cap;
    char *snap;
    size_t snap_cap;
    struct fs_ring_sample *rbuf;
    struct rw_series **todo; /* scratch of a walk: series with samples to read */
    size_t todo_cap;

    /* metadata: one round's entries (pointing into the catalogue) and its families */
    Prometheus__MetricMetadata md[FS_METRIC_COUNT];
    Prometheus__MetricMetadata *md_ptrs[FS_METRIC_COUNT];
    bool md_described[FS_METRIC_COUNT];
    uint64_t md_rejected_logged;
    bool md_failing;

    CURL *curl;
    struct curl_slist *hdrs;
    char auth_value[4200];
    char password[1024];
    int64_t secrets_read_us; /* 0: never */
    char err_body[ERR_BODY_MAX + 1];
    size_t err_len;

    /* ingest rate for the horizon */
    int64_t rate_start_us;
    uint64_t rate_count;
    double rate_avg; /* samples per second; < 0 before the first measurement */

    /* stats, read by the render without the thread's cooperation */
    _Atomic uint64_t pending, sent, failed, retried, dropped, requests, bytes;
    _Atomic uint64_t md_sent, md_failed;
    _Atomic int64_t highest_sent_ms;
    _Atomic uint64_t rate_milli; /* samples per 1000 s */
};

struct fs_remote_write {
    struct fs_store *store;
    struct rw_sender *senders;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rw_sender *registry;

/* ---- configuration copies ---- */

static int
dup_opt(char **dst, const char *src)
{
    *dst = NULL;
    if (!src)
        return 0;
    *dst = strdup(src);
    return *dst ? 0 : -1;
}

static int
secret_copy(struct fs_secret_ref *dst, const struct fs_secret_ref *src)
{
    return dup_opt(&dst->file, src->file) | dup_opt(&dst->env, src->env) |
           dup_opt(&dst->key, src->key);
}

static void
secret_free(struct fs_secret_ref *r)
{
    free(r->file);
    free(r->env);
    free(r->key);
}

static void
cfg_free(struct fs_remote_write_cfg *c)
{
    free(c->url);
    free(c->name);
    secret_free(&c->bearer_token);
    free(c->basic_auth_username);
    secret_free(&c->basic_auth_password);
    free(c->tls_ca_file);
    free(c->tls_cert_file);
    free(c->tls_key_file);
    for (size_t i = 0; i < c->n_headers; i++) {
        free(c->headers[i].key);
        free(c->headers[i].value);
    }
    free(c->headers);
    memset(c, 0, sizeof *c);
}

static int
kv_copy(struct fs_kv **dst, size_t *n_dst, const struct fs_kv *src, size_t n)
{
    *dst = NULL;
    *n_dst = 0;
    if (!n)
        return 0;
    if (!(*dst = calloc(n, sizeof **dst)))
        return -1;
    *n_dst = n;
    int rc = 0;
    for (size_t i = 0; i < n; i++)
        rc |= dup_opt(&(*dst)[i].key, src[i].key) | dup_opt(&(*dst)[i].value, src[i].value);
    return rc;
}

static void
kv_free(struct fs_kv *kv, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(kv[i].key);
        free(kv[i].value);
    }
    free(kv);
}

static int
cfg_copy(struct fs_remote_write_cfg *d, const struct fs_remote_write_cfg *s)
{
    *d = *s;
    d->headers = NULL;
    d->n_headers = 0;
    int rc = dup_opt(&d->url, s->url) | dup_opt(&d->name, s->name) |
             secret_copy(&d->bearer_token, &s->bearer_token) |
             dup_opt(&d->basic_auth_username, s->basic_auth_username) |
             secret_copy(&d->basic_auth_password, &s->basic_auth_password) |
             dup_opt(&d->tls_ca_file, s->tls_ca_file) |
             dup_opt(&d->tls_cert_file, s->tls_cert_file) |
             dup_opt(&d->tls_key_file, s->tls_key_file) |
             kv_copy(&d->headers, &d->n_headers, s->headers, s->n_headers);
    return rc ? -1 : 0;
}

static bool
kv_equal(const struct fs_kv *a, size_t na, const struct fs_kv *b, size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (strcmp(a[i].key, b[i].key) || strcmp(a[i].value, b[i].value))
            return false;
    return true;
}

/* ---- series and queue ---- */

static void
series_free(struct rw_series *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_labels; i++) {
        free(s->labels[i].name);
        free(s->labels[i].value);
    }
    free(s->labels);
    free(s->label_ptrs);
    free(s);
}

static int
label_cmp(const void *a, const void *b)
{
    return strcmp(((const Prometheus__Label *)a)->name, ((const Prometheus__Label *)b)->name);
}

/* The series' labels for the wire: __name__, its own, then the external labels it does
 * not have itself; sorted by name as the protocol requires. */
static struct rw_series *
series_new(const struct fs_series_info *in, const struct fs_kv *ext, size_t n_ext, int64_t from_us)
{
    struct rw_series *s = calloc(1, sizeof *s);
    size_t cap = 1 + in->n_labels + n_ext, n = 0;
    if (!s)
        return NULL;
    s->labels = calloc(cap, sizeof *s->labels);
    s->label_ptrs = calloc(cap, sizeof *s->label_ptrs);
    if (!s->labels || !s->label_ptrs)
        goto fail;
    for (size_t i = 0; i < cap; i++)
        prometheus__label__init(&s->labels[i]);
    s->labels[n].name = strdup("__name__");
    s->labels[n].value = strdup(in->name);
    s->n_labels = ++n;
    if (!s->labels[0].name || !s->labels[0].value)
        goto fail;
    for (size_t i = 0; i < in->n_labels; i++) {
        s->labels[n].name = strdup(in->labels[i].name);
        s->labels[n].value = strdup(in->labels[i].value);
        s->n_labels = ++n;
        if (!s->labels[n - 1].name || !s->labels[n - 1].value)
            goto fail;
    }
    for (size_t i = 0; i < n_ext; i++) {
        bool own = false;
        for (size_t j = 0; j < in->n_labels && !own; j++)
            own = !strcmp(in->labels[j].name, ext[i].key);
        if (own)
            continue;
        s->labels[n].name = strdup(ext[i].key);
        s->labels[n].value = strdup(ext[i].value);
        s->n_labels = ++n;
        if (!s->labels[n - 1].name || !s->labels[n - 1].value)
            goto fail;
    }
    qsort(s->labels, n, sizeof *s->labels, label_cmp);
    for (size_t i = 0; i < n; i++)
        s->label_ptrs[i] = &s->labels[i];
    Prometheus__TimeSeries ts = PROMETHEUS__TIME_SERIES__INIT;
    ts.n_labels = n;
    ts.labels = s->label_ptrs;
    s->labels_packed = prometheus__time_series__get_packed_size(&ts);
    s->id = in->id;
    s->gen = in->gen;
    s->metric = in->metric;
    s->live = true;
    s->counter = in->counter;
    s->scale = in->counter ? in->scale : 1.0;
    s->hw_us = from_us;
    return s;
fail:
    series_free(s);
    return NULL;
}

/* The series leaves the table; it is freed now or when its last queued sample leaves. */
static void
series_retire(struct rw_state *st, struct rw_series *s)
{
    st->by_id[s->id] = NULL;
    st->fam_live[s->metric]--;
    s->live = false;
    if (s->pending == 0)
        series_free(s);
}

static void
item_release(struct rw_item *it)
{
    struct rw_series *s = it->s;
    if (--s->pending == 0 && !s->live)
        series_free(s);
}

/* Removes the n oldest queued samples. */
static void
queue_pop(struct rw_state *st, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        item_release(&st->q[st->q_head]);
        st->q_head = (st->q_head + 1) % st->q_cap;
    }
    st->q_len -= n;
}

static void
state_free(struct rw_state *st)
{
    if (st->q)
        queue_pop(st, st->q_len);
    for (size_t i = 0; i < st->by_id_cap; i++)
        if (st->by_id[i])
            series_retire(st, st->by_id[i]);
    free(st->by_id);
    free(st->q);
    memset(st, 0, sizeof *st);
}

/* Moves st's queue into one of capacity cap (the oldest beyond it dropped, counted). */
static int
queue_resize(struct rw_state *st, size_t cap, uint64_t *dropped)
{
    struct rw_item *q = calloc(cap, sizeof *q);
    if (!q)
        return -1;
    if (st->q_len > cap) {
        *dropped += st->q_len - cap;
        queue_pop(st, st->q_len - cap);
    }
    for (size_t i = 0; i < st->q_len; i++)
        q[i] = st->q[(st->q_head + i) % st->q_cap];
    free(st->q);
    st->q = q;
    st->q_cap = cap;
    st->q_head = 0;
    return 0;
}

static void
enqueue(struct rw_sender *w, struct rw_series *s, int64_t ts_us, double v, int64_t now)
{
    struct rw_state *st = &w->st;
    if (st->q_len == st->q_cap) { /* past the horizon: the oldest goes */
        queue_pop(st, 1);
        atomic_fetch_add(&w->dropped, 1);
    }
    struct rw_item *it = &st->q[(st->q_head + st->q_len) % st->q_cap];
    it->s = s;
    it->ts_ms = ts_us >= 0 ? ts_us / 1000 : -((-ts_us + 999) / 1000);
    it->v = v;
    it->enq_us = now;
    s->pending++;
    st->q_len++;
}

/* ---- walking the ring ---- */

struct scan_ctx {
    struct rw_sender *w;
    struct rw_series **todo;
    size_t n, cap;
    bool nomem;
};

static int
scan_cb(void *arg, const struct fs_series_info *in)
{
    struct scan_ctx *c = arg;
    struct rw_state *st = &c->w->st;
    if (in->id >= st->by_id_cap) {
        size_t ncap = st->by_id_cap ? st->by_id_cap : 1024;
        while (ncap <= in->id)
            ncap *= 2;
        struct rw_series **n = realloc(st->by_id, ncap * sizeof *n);
        if (!n)
            goto nomem;
        memset(n + st->by_id_cap, 0, (ncap - st->by_id_cap) * sizeof *n);
        st->by_id = n;
        st->by_id_cap = ncap;
    }
    struct rw_series *s = st->by_id[in->id];
    if (s && s->gen != in->gen) { /* the id was reused: a new series */
        series_retire(st, s);
        s = NULL;
    }
    if (!s) {
        s = series_new(in, c->w->ext, c->w->n_ext, st->from_us);
        if (!s)
            goto nomem;
        st->by_id[in->id] = s;
        st->fam_live[s->metric]++;
    }
    s->seen = st->scan_no;
    if (in->ts_us > s->hw_us) {
        if (c->n == c->cap) {
            size_t ncap = c->cap ? c->cap * 2 : 256;
            struct rw_series **t = realloc(c->todo, ncap * sizeof *t);
            if (!t)
                goto nomem;
            c->todo = t;
            c->cap = ncap;
        }
        c->todo[c->n++] = s;
    }
    return 0;
nomem:
    c->nomem = true;
    return 1;
}

/* Takes every sample the ring holds past each series' high-water mark into the queue. */
static void
scan(struct rw_sender *w, struct fs_store *store)
{
    struct rw_state *st = &w->st;
    /* The list of series to read is kept from walk to walk: a large one would otherwise be
     * mapped and unmapped (page faults) every 100 ms. */
    struct scan_ctx c = {.w = w, .todo = w->todo, .cap = w->todo_cap};
    uint64_t cursor = 0;
    int64_t now = fs_monotonic_us();
    uint64_t taken = 0;

    st->scan_no++;
    while (!fs_store_foreach_series_chunk(store, false, &cursor, SCAN_CHUNK, scan_cb, &c) &&
           !c.nomem)
        ;
    if (!c.nomem) /* a complete walk: series it did not list are gone */
        for (size_t i = 0; i < st->by_id_cap; i++)
            if (st->by_id[i] && st->by_id[i]->seen != st->scan_no)
                series_retire(st, st->by_id[i]);
    for (size_t i = 0; i < c.n; i++) {
        struct rw_series *s = c.todo[i];
        for (;;) {
            bool trunc = false;
            long n = fs_store_read(store, s->id, s->gen, s->hw_us + 1, INT64_MAX, w->rbuf,
                                   READ_CHUNK, &trunc);
            if (n <= 0)
                break;
            for (long j = 0; j < n; j++) {
                const struct fs_ring_sample *r = &w->rbuf[j];
                enqueue(w, s, r->ts_us, s->counter ? (double)r->v.u * s->scale : r->v.d, now);
            }
            s->hw_us = w->rbuf[n - 1].ts_us;
            taken += (uint64_t)n;
            if (!trunc)
                break;
        }
    }
    w->todo = c.todo;
    w->todo_cap = c.cap;
    atomic_store(&w->pending, st->q_len);

    w->rate_count += taken;
    if (now - w->rate_start_us >= RATE_WINDOW_US) {
        double rate = (double)w->rate_count * 1e6 / (double)(now - w->rate_start_us);
        if (w->rate_avg >= 0)
            rate = RATE_WEIGHT * rate + (1 - RATE_WEIGHT) * w->rate_avg;
        w->rate_avg = rate;
        atomic_store(&w->rate_milli, (uint64_t)(rate * 1000.0));
        w->rate_start_us = now;
        w->rate_count = 0;
    }
}

/* ---- HTTP ---- */

static size_t
body_cb(char *p, size_t size, size_t n, void *arg)
{
    struct rw_sender *w = arg;
    size_t len = size * n, room = ERR_BODY_MAX - w->err_len;
    size_t k = len < room ? len : room;
    memcpy(w->err_body + w->err_len, p, k);
    w->err_len += k;
    w->err_body[w->err_len] = '\0';
    return len;
}

/* Aborts a transfer when the sender must stop now (handover) or its last send is late. */
static int
progress_cb(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    struct rw_sender *w = arg;
    (void)dt, (void)dn, (void)ut, (void)un;
    int stop = atomic_load(&w->stop);
    if (stop == STOP_HANDOVER)
        return 1;
    if (stop == STOP_FLUSH && fs_monotonic_us() > atomic_load(&w->flush_deadline_us))
        return 1;
    return 0;
}

/* (Re)builds the header list; the bearer token is read from its file at most once a
 * second, so a rotated token is picked up without a reload. */
static int
prepare_auth(struct rw_sender *w, char *err, size_t errlen)
{
    int64_t now = fs_monotonic_us();
    if (w->hdrs && w->secrets_read_us && now - w->secrets_read_us < SECRET_REREAD_US)
        return 0;
    const struct fs_remote_write_cfg *c = &w->cfg;
    struct curl_slist *h = NULL, *t;
    char line[4400], token[4096];
    int rc = -1;

    if (c->bearer_token.file || c->bearer_token.env) {
        if (fs_secret_read(&c->bearer_token, token, sizeof token, err, errlen) != 0)
            goto out;
        snprintf(w->auth_value, sizeof w->auth_value, "Authorization: Bearer %s", token);
        memset(token, 0, sizeof token);
        if (!(t = curl_slist_append(h, w->auth_value)))
            goto nomem;
        h = t;
    }
    if (c->basic_auth_username) {
        if (fs_secret_read(&c->basic_auth_password, w->password, sizeof w->password, err, errlen) !=
            0)
            goto out;
        curl_easy_setopt(w->curl, CURLOPT_USERNAME, c->basic_auth_username);
        curl_easy_setopt(w->curl, CURLOPT_PASSWORD, w->password);
        curl_easy_setopt(w->curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
    }
    static const char *const fixed[] = {"Content-Encoding: snappy",
                                        "Content-Type: application/x-protobuf",
                                        "X-Prometheus-Remote-Write-Version: 0.1.0", "Expect:"};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) {
        if (!(t = curl_slist_append(h, fixed[i])))
            goto nomem;
        h = t;
    }
    for (size_t i = 0; i < c->n_headers; i++) {
        snprintf(line, sizeof line, "%s: %s", c->headers[i].key, c->headers[i].value);
        if (!(t = curl_slist_append(h, line)))
            goto nomem;
        h = t;
    }
    curl_slist_free_all(w->hdrs);
    w->hdrs = h;
    h = NULL;
    curl_easy_setopt(w->curl, CURLOPT_HTTPHEADER, w->hdrs);
    w->secrets_read_us = now;
    rc = 0;
    goto out;
nomem:
    snprintf(err, errlen, "out of memory");
out:
    memset(line, 0, sizeof line);
    curl_slist_free_all(h);
    return rc;
}

static int
curl_setup(struct rw_sender *w, char *err, size_t errlen)
{
    const struct fs_remote_write_cfg *c = &w->cfg;
    if (!(w->curl = curl_easy_init())) {
        snprintf(err, errlen, "cannot create an HTTP client");
        return -1;
    }
    CURL *h = w->curl;
    long timeout_ms = (long)(c->remote_timeout_us / 1000);
    curl_easy_setopt(h, CURLOPT_URL, c->url);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 10000 ? timeout_ms : 10000L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "fabricscope/" FS_VERSION);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, body_cb);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, w);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, progress_cb);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, w);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (c->tls_ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, c->tls_ca_file);
    if (c->tls_cert_file) {
        curl_easy_setopt(h, CURLOPT_SSLCERT, c->tls_cert_file);
        curl_easy_setopt(h, CURLOPT_SSLKEY, c->tls_key_file);
    }
    if (c->tls_insecure_skip_verify) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    return 0;
}

enum send_result { SENT, RETRY, REJECTED };

/* w->pb of n bytes at least; -1 when out of memory. */
static int
pb_reserve(struct rw_sender *w, size_t n)
{
    if (n <= w->pb_cap)
        return 0;
    uint8_t *p = realloc(w->pb, n);
    if (!p)
        return -1;
    w->pb = p;
    w->pb_cap = n;
    return 0;
}

/* Compresses the packed WriteRequest w->pb[0..plen) and POSTs it: SENT on a 2xx, RETRY on
 * a 5xx, 429 or transport error (*retry_after_s from a Retry-After header, else 0),
 * REJECTED on any other answer; why says what failed. */
static enum send_result
post(struct rw_sender *w, size_t plen, long *retry_after_s, char *why, size_t whylen)
{
    *retry_after_s = 0;
    size_t clen = snappy_max_compressed_length(plen);
    if (clen > w->snap_cap) {
        char *p = realloc(w->snap, clen);
        if (!p) {
            snprintf(why, whylen, "out of memory");
            return RETRY;
        }
        w->snap = p;
        w->snap_cap = clen;
    }
    if (snappy_compress((const char *)w->pb, plen, w->snap, &clen) != SNAPPY_OK) {
        snprintf(why, whylen, "snappy compression failed");
        return RETRY;
    }
    if (prepare_auth(w, why, whylen) != 0)
        return RETRY;
    w->err_len = 0;
    w->err_body[0] = '\0';
    curl_easy_setopt(w->curl, CURLOPT_POSTFIELDS, w->snap);
    curl_easy_setopt(w->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)clen);
    CURLcode cc = curl_easy_perform(w->curl);
    if (cc != CURLE_OK) {
        snprintf(why, whylen, "%s", curl_easy_strerror(cc));
        return RETRY;
    }
    long code = 0;
    curl_easy_getinfo(w->curl, CURLINFO_RESPONSE_CODE, &code);
    if (code >= 200 && code < 300) {
        atomic_fetch_add(&w->bytes, clen);
        return SENT;
    }
    /* Keep the receiver's reason (one line) for the log. */
    for (char *p = w->err_body; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    snprintf(why, whylen, "HTTP %ld: %s", code, w->err_body);
    if (code == 429 || code >= 500) {
        curl_off_t ra = 0;
        if (curl_easy_getinfo(w->curl, CURLINFO_RETRY_AFTER, &ra) == CURLE_OK && ra > 0)
            *retry_after_s = ra > RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S : (long)ra;
        return RETRY;
    }
    return REJECTED;
}

/* Encodes the n oldest queued samples (grouped per series, each series' samples in
 * timestamp order) as one WriteRequest, compresses it and POSTs it. *retry_after_s is
 * set from a Retry-After header (0 when none). */
static enum send_result
send_batch(struct rw_sender *w, size_t n, int64_t *max_ts_ms, long *retry_after_s, char *why,
           size_t whylen)
{
    struct rw_state *st = &w->st;
    size_t nts = 0;
    int64_t max_ts = INT64_MIN;

    *retry_after_s = 0;
    uint64_t mark = ++st->batch_no;
    for (size_t i = 0; i < n; i++) {
        struct rw_series *s = st->q[(st->q_head + i) % st->q_cap].s;
        if (s->batch_mark != mark) {
            s->batch_mark = mark;
            s->batch_ts = nts;
            prometheus__time_series__init(&w->ts[nts]);
            w->ts[nts].n_labels = s->n_labels;
            w->ts[nts].labels = s->label_ptrs;
            w->ts_ptrs[nts] = &w->ts[nts];
            w->ts_series[nts] = s;
            w->ts_fill[nts] = 0;
            nts++;
        }
        w->ts_fill[s->batch_ts]++;
    }
    size_t off = 0;
    for (size_t k = 0; k < nts; k++) { /* each series' run of sample pointers */
        w->ts[k].samples = w->sample_ptrs + off;
        off += w->ts_fill[k];
        w->ts_fill[k] = 0;
    }
    for (size_t i = 0; i < n; i++) {
        const struct rw_item *it = &st->q[(st->q_head + i) % st->q_cap];
        Prometheus__Sample *smp = &w->samples[i];
        Prometheus__TimeSeries *t = &w->ts[it->s->batch_ts];
        prometheus__sample__init(smp);
        smp->value = it->v;
        smp->timestamp = it->ts_ms;
        t->samples[t->n_samples++] = smp;
        if (it->ts_ms > max_ts)
            max_ts = it->ts_ms;
    }
    Prometheus__WriteRequest req = PROMETHEUS__WRITE_REQUEST__INIT;
    req.n_timeseries = nts;
    req.timeseries = w->ts_ptrs;
    /* An upper bound of the packed size from each series' labels (sized once) and the
     * largest a sample can be, instead of a sizing pass over the whole request: protobuf-c
     * sizes every nested message again while packing it anyway. */
    size_t bound = n * PACKED_SAMPLE_MAX;
    for (size_t k = 0; k < nts; k++)
        bound += PACKED_SERIES_OVERHEAD + w->ts_series[k]->labels_packed;
    if (pb_reserve(w, bound) != 0) {
        snprintf(why, whylen, "out of memory");
        return RETRY;
    }
    size_t plen = prometheus__write_request__pack(&req, w->pb);
    *max_ts_ms = max_ts;
    atomic_fetch_add(&w->requests, 1);
    return post(w, plen, retry_after_s, why, whylen);
}

/* ---- metadata ---- */

/* Fills w->md with the metadata of every family the sender has live series of, in
 * catalogue order, and records them as described; returns their number. */
static size_t
metadata_collect(struct rw_sender *w)
{
    size_t n = 0;
    for (size_t m = 0; m < FS_METRIC_COUNT; m++) {
        w->md_described[m] = w->st.fam_live[m] > 0;
        if (!w->md_described[m])
            continue;
        const struct fs_metric_def *d = &fs_metric_defs[m];
        Prometheus__MetricMetadata *e = &w->md[n];
        prometheus__metric_metadata__init(e);
        e->type = d->type == FS_MT_COUNTER     ? PROMETHEUS__METRIC_METADATA__METRIC_TYPE__COUNTER
                  : d->type == FS_MT_HISTOGRAM ? PROMETHEUS__METRIC_METADATA__METRIC_TYPE__HISTOGRAM
                                               : PROMETHEUS__METRIC_METADATA__METRIC_TYPE__GAUGE;
        /* protobuf-c's fields are not const; packing only reads them */
        e->metric_family_name = (char *)d->name;
        e->help = (char *)d->help;
        w->md_ptrs[n++] = e;
    }
    return n;
}

/* True when the sender has series of a family its last metadata round did not describe. */
static bool
metadata_undescribed(const struct rw_sender *w)
{
    for (size_t m = 0; m < FS_METRIC_COUNT; m++)
        if (w->st.fam_live[m] && !w->md_described[m])
            return true;
    return false;
}

/* One metadata round: every family with live series, metadata_max_per_send entries a
 * request. SENT when every request was answered with a 2xx or a 4xx (its entries counted
 * as failed, the next requests still sent); RETRY at the first 5xx, 429 or transport
 * error (the requests after it are not tried: the whole round is repeated) or when a
 * handover aborted it. */
static enum send_result
send_metadata(struct rw_sender *w, long *retry_after_s, char *why, size_t whylen)
{
    size_t n = metadata_collect(w), per = (size_t)w->cfg.metadata_max_per_send;
    if (per == 0)
        per = n ? n : 1;
    *retry_after_s = 0;
    for (size_t off = 0; off < n; off += per) {
        size_t k = n - off < per ? n - off : per;
        Prometheus__WriteRequest req = PROMETHEUS__WRITE_REQUEST__INIT;
        req.n_metadata = k;
        req.metadata = w->md_ptrs + off;
        enum send_result r = RETRY;
        if (pb_reserve(w, prometheus__write_request__get_packed_size(&req)) != 0)
            snprintf(why, whylen, "out of memory");
        else
            r = post(w, prometheus__write_request__pack(&req, w->pb), retry_after_s, why, whylen);
        if (atomic_load(&w->stop) == STOP_HANDOVER)
            return RETRY; /* aborted: neither sent nor failed */
        if (r == SENT) {
            atomic_fetch_add(&w->md_sent, k);
            continue;
        }
        atomic_fetch_add(&w->md_failed, k);
        if (r == RETRY)
            return RETRY;
        if (w->md_rejected_logged++ % 100 == 0)
            fs_log(FS_LOG_WARN, SUBSYS,
                   "%s: metadata of %zu metric families rejected, sent again in %llds: %s",
                   w->remote_name, k, (long long)(w->cfg.metadata_send_interval_us / 1000000), why);
    }
    return SENT;
}

/* ---- the sender thread ---- */

/* Waits until the monotonic time until_us or a stop; returns the stop state. */
static int
wait_until(struct rw_sender *w, int64_t until_us)
{
    pthread_mutex_lock(&w->lock);
    while (atomic_load(&w->stop) == RUN) {
        int64_t now = fs_monotonic_us();
        if (now >= until_us)
            break;
        /* The condition variable runs on CLOCK_REALTIME: wait the remaining span. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t ns = (int64_t)ts.tv_nsec + (until_us - now) * 1000;
        ts.tv_sec += (time_t)(ns / 1000000000);
        ts.tv_nsec = (long)(ns % 1000000000);
        pthread_cond_timedwait(&w->cond, &w->lock, &ts);
    }
    int stop = atomic_load(&w->stop);
    pthread_mutex_unlock(&w->lock);
    return stop;
}

static uint64_t
rand_u64(uint64_t *x)
{
    /* xorshift64*: jitter needs spread, not secrecy */
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * UINT64_C(2685821657736338717);
}

/* The wait before the next retry: *backoff (min_backoff, doubled at each failure up to
 * max_backoff), drawn between half and all of it so that senders that failed together do
 * not come back together; a Retry-After replaces it. */
static int64_t
retry_delay(const struct rw_sender *w, int64_t *backoff, long retry_after_s, uint64_t *rng)
{
    *backoff = *backoff ? *backoff * 2 : w->cfg.min_backoff_us;
    if (*backoff > w->cfg.max_backoff_us)
        *backoff = w->cfg.max_backoff_us;
    if (retry_after_s > 0)
        return (int64_t)retry_after_s * 1000000;
    return *backoff / 2 + (int64_t)(rand_u64(rng) % (uint64_t)(*backoff / 2 + 1));
}

/* When the next metadata round starts after one that began at started_us and ended in r:
 * send_interval after it, or (RETRY) after the queue's backoff but no later than that. */
static int64_t
metadata_next(struct rw_sender *w, enum send_result r, int64_t started_us, long retry_after_s,
              int64_t *backoff, uint64_t *rng, const char *why)
{
    int64_t interval =
        w->cfg.metadata_send_interval_us > 0 ? w->cfg.metadata_send_interval_us : 60 * 1000000;
    if (r != RETRY) {
        if (w->md_failing)
            fs_log(FS_LOG_INFO, SUBSYS, "%s: metadata sent again", w->remote_name);
        w->md_failing = false;
        *backoff = 0;
        return started_us + interval;
    }
    if (!w->md_failing)
        fs_log(FS_LOG_WARN, SUBSYS, "%s: metadata send failed, retrying with backoff: %s",
               w->remote_name, why);
    w->md_failing = true;
    int64_t delay = retry_delay(w, backoff, retry_after_s, rng);
    return fs_monotonic_us() + (delay < interval ? delay : interval);
}

static void *
sender_main(void *arg)
{
    struct rw_sender *w = arg;
    struct fs_store *store = w->mgr->store;
    struct rw_state *st = &w->st;
    int64_t next_scan = 0, backoff = 0, retry_at = 0;
    /* the next metadata round (never when off) and the backoff of its retries */
    int64_t md_at = w->cfg.metadata_send ? 0 : INT64_MAX, md_backoff = 0;
    uint64_t rng = (uint64_t)fs_monotonic_us() ^ (uint64_t)(uintptr_t)w;
    uint64_t rejected_logged = 0;
    bool failing = false;
    char why[512];

    pthread_setname_np(pthread_self(), "fs-rw"); /* in top, and for the benchmark */
    w->rate_start_us = fs_monotonic_us();
    w->rate_avg = -1;
    for (;;) {
        int stop = atomic_load(&w->stop);
        if (stop == STOP_HANDOVER)
            break;
        int64_t now = fs_monotonic_us();
        if (stop == STOP_FLUSH) {
            if (now > atomic_load(&w->flush_deadline_us) || (st->q_len == 0 && next_scan < 0))
                break;
            if (next_scan >= 0) { /* one last walk, then send what is queued */
                scan(w, store);
                next_scan = -1;
            }
        } else if (now >= next_scan) {
            scan(w, store);
            /* A walk of a very large store is spaced out so that it stays a tenth of the
             * thread's time at most. */
            int64_t took = fs_monotonic_us() - now;
            next_scan = now + (took * 10 > SCAN_INTERVAL_US ? took * 10 : SCAN_INTERVAL_US);
            /* A family not described yet: its metadata goes before its first batch. */
            if (md_at != INT64_MAX && metadata_undescribed(w))
                md_at = now;
        }
        /* While the samples fail, their retries probe the receiver and metadata waits:
         * it never takes a turn from a sample retry. It goes after the first batch that
         * is accepted again. */
        int64_t md_wake = failing ? INT64_MAX : md_at;
        if (stop == RUN && now >= md_wake) {
            long md_retry_after = 0;
            enum send_result r = send_metadata(w, &md_retry_after, why, sizeof why);
            if (atomic_load(&w->stop) == STOP_HANDOVER)
                break;
            md_at = metadata_next(w, r, now, md_retry_after, &md_backoff, &rng, why);
            continue;
        }
        if (stop == RUN && now < retry_at) {
            int64_t until = retry_at < next_scan ? retry_at : next_scan;
            wait_until(w, md_wake < until ? md_wake : until);
            continue;
        }
        size_t n = st->q_len < w->cfg.max_samples_per_send ? st->q_len
                                                           : (size_t)w->cfg.max_samples_per_send;
        bool due = n > 0 && (n == w->cfg.max_samples_per_send || stop != RUN ||
                             now - st->q[st->q_head].enq_us >= w->cfg.batch_send_deadline_us);
        if (!due) {
            if (stop != RUN)
                break;
            int64_t until = next_scan;
            if (n > 0 && st->q[st->q_head].enq_us + w->cfg.batch_send_deadline_us < until)
                until = st->q[st->q_head].enq_us + w->cfg.batch_send_deadline_us;
            wait_until(w, md_wake < until ? md_wake : until);
            continue;
        }
        int64_t max_ts = 0;
        long retry_after = 0;
        enum send_result r = send_batch(w, n, &max_ts, &retry_after, why, sizeof why);
        if (atomic_load(&w->stop) == STOP_HANDOVER)
            break; /* aborted for a restart: the batch stays queued for the next sender */
        if (r == SENT) {
            atomic_fetch_add(&w->sent, n);
            if (max_ts > atomic_load(&w->highest_sent_ms))
                atomic_store(&w->highest_sent_ms, max_ts);
            queue_pop(st, n);
            backoff = 0;
            retry_at = 0;
            if (failing)
                fs_log(FS_LOG_INFO, SUBSYS, "%s: sending again", w->remote_name);
            failing = false;
        } else if (r == REJECTED) {
            atomic_fetch_add(&w->failed, n);
            queue_pop(st, n);
            if (rejected_logged++ % 100 == 0)
                fs_log(FS_LOG_WARN, SUBSYS,
                       "%s: %zu samples rejected, not retried (%llu rejections so far): %s",
                       w->remote_name, n, (unsigned long long)rejected_logged, why);
        } else {
            atomic_fetch_add(&w->retried, n);
            if (stop != RUN)
                break; /* no retries at shutdown */
            retry_at = fs_monotonic_us() + retry_delay(w, &backoff, retry_after, &rng);
            if (!failing)
                fs_log(FS_LOG_WARN, SUBSYS, "%s: send failed, retrying with backoff: %s",
                       w->remote_name, why);
            failing = true;
        }
        atomic_store(&w->pending, st->q_len);
    }
    atomic_store(&w->pending, st->q_len);
    return NULL;
}

/* ---- senders ---- */

static void
sender_free(struct rw_sender *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&registry_lock);
    for (struct rw_sender **pp = &registry; *pp; pp = &(*pp)->reg_next)
        if (*pp == w) {
            *pp = w->reg_next;
            break;
        }
    pthread_mutex_unlock(&registry_lock);
    state_free(&w->st);
    if (w->curl)
        curl_easy_cleanup(w->curl);
    curl_slist_free_all(w->hdrs);
    memset(w->auth_value, 0, sizeof w->auth_value);
    memset(w->password, 0, sizeof w->password);
    free(w->samples);
    free(w->sample_ptrs);
    free(w->ts);
    free(w->ts_ptrs);
    free(w->ts_fill);
    free(w->ts_series);
    free(w->pb);
    free(w->snap);
    free(w->rbuf);
    free(w->todo);
    cfg_free(&w->cfg);
    kv_free(w->ext, w->n_ext);
    free(w->remote_name);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
    free(w);
}

/* Stops the thread: STOP_HANDOVER at once, STOP_FLUSH after a last send. */
static void
sender_stop(struct rw_sender *w, int how)
{
    if (!w->started)
        return;
    atomic_store(&w->flush_deadline_us, fs_monotonic_us() + FLUSH_LIMIT_US);
    pthread_mutex_lock(&w->lock);
    atomic_store(&w->stop, how);
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    w->started = false;
}

/* A sender for cfg; it takes over *inherit (the state of the previous sender of the same
 * URL) when given, else starts from the samples taken from now on. */
static struct rw_sender *
sender_start(struct fs_remote_write *rw, const struct fs_remote_write_cfg *cfg,
             const struct fs_kv *ext, size_t n_ext, struct rw_state *inherit,
             uint64_t inherited_dropped, char *err, size_t errlen)
{
    struct rw_sender *w = calloc(1, sizeof *w);
    size_t m = cfg->max_samples_per_send;
    if (!w) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    w->mgr = rw;
    atomic_store(&w->highest_sent_ms, 0);
    fs_url_redact(cfg->url, w->shown_url, sizeof w->shown_url);
    if (cfg_copy(&w->cfg, cfg) || kv_copy(&w->ext, &w->n_ext, ext, n_ext) ||
        dup_opt(&w->remote_name, cfg->name ? cfg->name : w->shown_url))
        goto nomem;
    w->samples = calloc(m, sizeof *w->samples);
    w->sample_ptrs = calloc(m, sizeof *w->sample_ptrs);
    w->ts = calloc(m, sizeof *w->ts);
    w->ts_ptrs = calloc(m, sizeof *w->ts_ptrs);
    w->ts_fill = calloc(m, sizeof *w->ts_fill);
    w->ts_series = calloc(m, sizeof *w->ts_series);
    w->rbuf = calloc(READ_CHUNK, sizeof *w->rbuf);
    if (!w->samples || !w->sample_ptrs || !w->ts || !w->ts_ptrs || !w->ts_fill || !w->ts_series ||
        !w->rbuf)
        goto nomem;
    if (inherit) {
        w->st = *inherit;
        memset(inherit, 0, sizeof *inherit);
        uint64_t dropped = inherited_dropped;
        if (w->st.q_cap != cfg->capacity && queue_resize(&w->st, cfg->capacity, &dropped))
            goto nomem;
        atomic_store(&w->dropped, dropped);
    } else {
        w->st.from_us = fs_realtime_us();
        w->st.q_cap = cfg->capacity;
        if (!(w->st.q = calloc(w->st.q_cap, sizeof *w->st.q)))
            goto nomem;
    }
    atomic_store(&w->pending, w->st.q_len);
    if (curl_setup(w, err, errlen) != 0)
        goto fail;
    if (pthread_create(&w->thread, NULL, sender_main, w) != 0) {
        snprintf(err, errlen, "cannot start the sender thread");
        goto fail;
    }
    w->started = true;
    pthread_mutex_lock(&registry_lock);
    w->reg_next = registry;
    registry = w;
    pthread_mutex_unlock(&registry_lock);
    fs_log(FS_LOG_INFO, SUBSYS, "%s: sending to %s (queue of %llu samples, %llu per request)",
           w->remote_name, w->shown_url, (unsigned long long)cfg->capacity,
           (unsigned long long)cfg->max_samples_per_send);
    return w;
nomem:
    snprintf(err, errlen, "out of memory");
fail:
    sender_free(w);
    return NULL;
}

static void
curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct fs_remote_write *
fs_remote_write_new(struct fs_store *st, char *errbuf, size_t errlen)
{
    struct fs_remote_write *rw = calloc(1, sizeof *rw);
    if (!rw) {
        snprintf(errbuf, errlen, "out of memory");
        return NULL;
    }
    /* Once, before any sender thread exists: curl's global state is not thread-safe to
     * set up. */
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, curl_init_once);
    rw->store = st;
    return rw;
}

int
fs_remote_write_apply(struct fs_remote_write *rw, const struct fs_remote_write_cfg *cfgs, size_t n,
                      const struct fs_kv *ext, size_t n_ext, char *errbuf, size_t errlen)
{
    struct rw_sender *old = rw->senders, *fresh = NULL, **tail = &fresh;
    int rc = 0;

    rw->senders = NULL;
    for (size_t i = 0; i < n; i++) {
        const struct fs_remote_write_cfg *c = &cfgs[i];
        struct rw_sender **pp = &old, *w = NULL;
        for (; *pp; pp = &(*pp)->next)
            if (!strcmp((*pp)->cfg.url, c->url))
                break;
        if (*pp) {
            struct rw_sender *prev = *pp;
            *pp = prev->next;
            if (fs_remote_write_cfg_equal(&prev->cfg, c) &&
                kv_equal(prev->ext, prev->n_ext, ext, n_ext)) {
                w = prev; /* unchanged: keeps running */
            } else {
                sender_stop(prev, STOP_HANDOVER);
                w = sender_start(rw, c, ext, n_ext, &prev->st, atomic_load(&prev->dropped), errbuf,
                                 errlen);
                if (w) {
                    /* the counters go on: a restart is not a reset of what was sent */
                    atomic_store(&w->sent, atomic_load(&prev->sent));
                    atomic_store(&w->failed, atomic_load(&prev->failed));
                    atomic_store(&w->retried, atomic_load(&prev->retried));
                    atomic_store(&w->requests, atomic_load(&prev->requests));
                    atomic_store(&w->bytes, atomic_load(&prev->bytes));
                    atomic_store(&w->md_sent, atomic_load(&prev->md_sent));
                    atomic_store(&w->md_failed, atomic_load(&prev->md_failed));
                    atomic_store(&w->highest_sent_ms, atomic_load(&prev->highest_sent_ms));
                    fs_log(FS_LOG_INFO, SUBSYS, "%s: restarted with its changed configuration",
                           w->remote_name);
                }
                sender_free(prev);
            }
        } else {
            w = sender_start(rw, c, ext, n_ext, NULL, 0, errbuf, errlen);
        }
        if (!w) {
            char shown[512];
            fs_url_redact(c->url, shown, sizeof shown);
            fs_log(FS_LOG_ERROR, SUBSYS, "%s: %s", shown, errbuf);
            rc = -1;
            continue;
        }
        w->next = NULL;
        *tail = w;
        tail = &w->next;
    }
    while (old) { /* removed receivers */
        struct rw_sender *w = old;
        old = w->next;
        sender_stop(w, STOP_HANDOVER);
        fs_log(FS_LOG_INFO, SUBSYS, "%s: removed (%zu queued samples dropped)", w->remote_name,
               w->st.q_len);
        sender_free(w);
    }
    rw->senders = fresh;
    return rc;
}

void
fs_remote_write_free(struct fs_remote_write *rw)
{
    if (!rw)
        return;
    /* Every thread is told first, so their last sends run side by side. */
    for (struct rw_sender *w = rw->senders; w; w = w->next)
        if (w->started) {
            atomic_store(&w->flush_deadline_us, fs_monotonic_us() + FLUSH_LIMIT_US);
            pthread_mutex_lock(&w->lock);
            atomic_store(&w->stop, STOP_FLUSH);
            pthread_cond_signal(&w->cond);
            pthread_mutex_unlock(&w->lock);
        }
    while (rw->senders) {
        struct rw_sender *w = rw->senders;
        rw->senders = w->next;
        if (w->started)
            pthread_join(w->thread, NULL);
        w->started = false;
        sender_free(w);
    }
    free(rw);
}

static void
fill_stats(struct rw_sender *w, struct fs_remote_write_stats *out)
{
    out->pending = atomic_load(&w->pending);
    out->sent = atomic_load(&w->sent);
    out->failed = atomic_load(&w->failed);
    out->retried = atomic_load(&w->retried);
    out->dropped = atomic_load(&w->dropped);
    out->requests = atomic_load(&w->requests);
    out->bytes_sent = atomic_load(&w->bytes);
    out->metadata_sent = atomic_load(&w->md_sent);
    out->metadata_failed = atomic_load(&w->md_failed);
    out->highest_sent_ms = atomic_load(&w->highest_sent_ms);
}

int
fs_remote_write_stats(struct fs_remote_write *rw, const char *url,
                      struct fs_remote_write_stats *out)
{
    for (struct rw_sender *w = rw->senders; w; w = w->next) {
        if (strcmp(w->cfg.url, url))
            continue;
        fill_stats(w, out);
        return 0;
    }
    return -1;
}

/* ---- self metrics ---- */

void
fs_remote_write_foreach(fs_remote_write_cb cb, void *arg)
{
    pthread_mutex_lock(&registry_lock);
    for (struct rw_sender *w = registry; w; w = w->reg_next) {
        struct fs_remote_write_info in = {.remote_name = w->remote_name,
                                          .url = w->shown_url,
                                          .capacity = w->cfg.capacity,
                                          .horizon_seconds = INFINITY};
        fill_stats(w, &in.stats);
        uint64_t r = atomic_load(&w->rate_milli);
        if (r)
            in.horizon_seconds = (double)w->cfg.capacity * 1000.0 / (double)r;
        cb(arg, &in);
    }
    pthread_mutex_unlock(&registry_lock);
}
