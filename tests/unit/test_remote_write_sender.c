/*
 * remote_write: the configuration block (keys, defaults, problems), and the sender
 * against an in-process receiver (libmicrohttpd) that decodes every request with the
 * same protobuf-c messages and snappy: labels sorted with __name__, values equal to the
 * ring's converted to float64, timestamps in ms, per-series order, external labels;
 * 5xx retried without loss or duplicates, 429 with Retry-After waited for, 400 dropped
 * and not retried, and a restart with a changed configuration continuing exactly.
 * The receiver tells metadata-only requests from sample requests and counts them apart
 * (a request with both, or neither, fails the test): the sample assertions refer to
 * sample requests. Metadata: sent at start and before a new family's first samples,
 * again every send_interval, entries equal to the catalogue's, at most
 * max_samples_per_send per request, none when send is false, 4xx counted and waited
 * out without stopping samples, 5xx retried with backoff.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <microhttpd.h>
#include <pthread.h>
#include <snappy-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "export/remote_write.h"
#include "http/expo.h"
#include "http/http.h"
#include "remote.pb-c.h"
#include "store/store.h"
#include "util/clock.h"

/* ---- configuration ---- */

static struct fs_config *
parse_ok(const char *text)
{
    struct fs_config *cfg = NULL;
    char *errors = NULL;
    int r = fs_config_parse(text, strlen(text), "t.yaml", NULL, &cfg, &errors);
    if (r != 0)
        fprintf(stderr, "%s\n", errors);
    assert_int_equal(r, 0);
    free(errors);
    return cfg;
}

static char *
parse_bad(const char *text)
{
    struct fs_config *cfg = NULL;
    char *errors = NULL;
    assert_int_not_equal(fs_config_parse(text, strlen(text), "t.yaml", NULL, &cfg, &errors), 0);
    assert_null(cfg);
    assert_non_null(errors);
    return errors;
}

static void
test_config_keys_and_defaults(void **state)
{
    (void)state;
    struct fs_config *c = parse_ok("remote_write:\n"
                                   "  - url: https://mimir.example:443/api/v1/push\n"
                                   "    name: mimir\n"
                                   "    bearer_token_file: /run/token\n"
                                   "    tls: { ca_file: /etc/ca.pem, insecure_skip_verify: true }\n"
                                   "    headers: { X-Scope-OrgID: fabric, A-First: x }\n"
                                   "    queue: { capacity: 5000, max_samples_per_send: 500,\n"
                                   "             batch_send_deadline: 2s, min_backoff: 100ms,\n"
                                   "             max_backoff: 10s }\n"
                                   "    metadata: { send: false, send_interval: 30s,\n"
                                   "                       max_samples_per_send: 100 }\n"
                                   "  - url: http://127.0.0.1:9090/api/v1/write\n"
                                   "    basic_auth: { username: u, password_file: /run/pw }\n");
    assert_int_equal(c->n_remote_write, 2);
    const struct fs_remote_write_cfg *a = &c->remote_write[0], *b = &c->remote_write[1];
    assert_string_equal(a->url, "https://mimir.example:443/api/v1/push");
    assert_string_equal(a->name, "mimir");
    assert_string_equal(a->bearer_token.file, "/run/token");
    assert_string_equal(a->tls_ca_file, "/etc/ca.pem");
    assert_true(a->tls_insecure_skip_verify);
    assert_int_equal(a->n_headers, 2);
    assert_string_equal(a->headers[0].key, "A-First"); /* sorted */
    assert_string_equal(a->headers[1].key, "X-Scope-OrgID");
    assert_string_equal(a->headers[1].value, "fabric");
    assert_int_equal(a->capacity, 5000);
    assert_int_equal(a->max_samples_per_send, 500);
    assert_int_equal(a->batch_send_deadline_us, 2000000);
    assert_int_equal(a->min_backoff_us, 100000);
    assert_int_equal(a->max_backoff_us, 10000000);
    assert_false(a->metadata_send);
    assert_int_equal(a->metadata_send_interval_us, 30000000);
    assert_int_equal(a->metadata_max_per_send, 100);
    /* Prometheus's defaults where it has them */
    assert_null(b->name);
    assert_string_equal(b->basic_auth_username, "u");
    assert_string_equal(b->basic_auth_password.file, "/run/pw");
    assert_int_equal(b->capacity, 100000);
    assert_int_equal(b->max_samples_per_send, 2000);
    assert_int_equal(b->batch_send_deadline_us, 5000000);
    assert_int_equal(b->min_backoff_us, 30000);
    assert_int_equal(b->max_backoff_us, 5000000);
    assert_int_equal(b->remote_timeout_us, 30000000);
    assert_true(b->metadata_send);
    assert_int_equal(b->metadata_send_interval_us, 60000000);
    assert_int_equal(b->metadata_max_per_send, 500);
    assert_false(fs_remote_write_cfg_equal(a, b));
    assert_true(fs_remote_write_cfg_equal(a, a));
    /* a changed metadata is a changed receiver: its sender restarts */
    struct fs_remote_write_cfg b2 = *b;
    b2.metadata_send_interval_us++;
    assert_false(fs_remote_write_cfg_equal(b, &b2));
    b2 = *b;
    b2.metadata_send = false;
    assert_false(fs_remote_write_cfg_equal(b, &b2));
    b2 = *b;
    b2.metadata_max_per_send = 1;
    assert_false(fs_remote_write_cfg_equal(b, &b2));
    fs_config_free(c);
}

static void
test_config_problems(void **state)
{
    (void)state;
    char *e = parse_bad("remote_write:\n"
                        "  - url: http://x/w\n"
                        "    bearer_token_file: /t\n"
                        "    basic_auth: { username: u, password_file: /p }\n"
                        "    headers: { content-type: text/plain }\n"
                        "    tls: { cert_file: /c }\n"
                        "    queue: { capacity: 10, min_backoff: 2s, max_backoff: 1s }\n");
    assert_non_null(strstr(e, "exclude each other"));
    assert_non_null(strstr(e, "content-type is set by the sender itself"));
    assert_non_null(strstr(e, "cert_file and key_file go together"));
    assert_non_null(strstr(e, "min_backoff is above max_backoff"));
    assert_non_null(strstr(e, "max_samples_per_send (2000) is above capacity (10)"));
    free(e);
    e = parse_bad(
        "remote_write:\n  - { url: http://a/w, name: r }\n  - { url: http://b/w, name: r }\n");
    assert_non_null(strstr(e, "\"r\" names another remote_write entry too"));
    free(e);
    e = parse_bad("remote_write:\n  - url: localhost:9090\n");
    assert_non_null(strstr(e, "is not an http:// or https:// URL"));
    free(e);
    e = parse_bad("remote_write:\n  - url: http://x/w\n    queue: { capacity: 0 }\n");
    assert_non_null(strstr(e, "remote_write"));
    free(e);
    e = parse_bad("remote_write:\n  - url: http://x/w\n"
                  "    metadata: { send_interval: 500ms }\n");
    assert_non_null(strstr(e, "metadata.send_interval"));
    assert_non_null(strstr(e, "500ms is below the minimum of 1s"));
    free(e);
    e = parse_bad("remote_write:\n  - url: http://x/w\n"
                  "    metadata: { max_samples_per_send: 0 }\n");
    assert_non_null(strstr(e, "metadata.max_samples_per_send"));
    free(e);
    e = parse_bad("remote_write:\n  - url: http://x/w\n    metadata: { send: maybe }\n");
    assert_non_null(strstr(e, "metadata.send"));
    free(e);
}

/* ---- an in-process receiver that decodes ---- */

#define MAX_GOT 4096
#define MAX_MD 256

struct got {
    char labels[512]; /* name=value,... in the order received */
    int64_t ts_ms;
    double v;
    unsigned seq; /* of its request */
};

/* One metadata entry the receiver accepted. */
struct got_md {
    int type;
    char name[128];
    char help[512];
    char unit[64];
    unsigned seq; /* of its request */
};

static struct receiver {
    pthread_mutex_t lock;
    struct MHD_Daemon *mhd;
    unsigned port;
    int codes[16];    /* answers to the first sample requests (0: 204 from then on) */
    int md_codes[16]; /* the same for metadata requests */
    const char *retry_after;
    unsigned seq;      /* requests of both kinds, in arrival order */
    unsigned requests; /* sample requests */
    int64_t request_mono_us[64];
    unsigned request_seq[64];
    unsigned md_requests; /* metadata-only requests */
    int64_t md_request_mono_us[64];
    unsigned md_request_seq[64];
    size_t md_request_entries[64];
    struct got_md md[MAX_MD];
    size_t n_md;
    bool mixed; /* a request with samples and metadata, or with neither */
    char org_id[64];
    char auth[256]; /* Authorization of the last request */
    struct got *got;
    size_t n_got;
    bool bad_encoding;
} rx;

struct upload {
    char *buf;
    size_t len;
};

/* The request's WriteRequest; NULL (and bad_encoding set) when it is not snappy protobuf. */
static Prometheus__WriteRequest *
unpack(const struct upload *u)
{
    size_t plen = 0;
    char *plain = NULL;
    if (snappy_uncompressed_length(u->buf, u->len, &plen) != SNAPPY_OK ||
        !(plain = malloc(plen ? plen : 1)) ||
        snappy_uncompress(u->buf, u->len, plain, &plen) != SNAPPY_OK) {
        rx.bad_encoding = true;
        free(plain);
        return NULL;
    }
    Prometheus__WriteRequest *req =
        prometheus__write_request__unpack(NULL, plen, (const uint8_t *)plain);
    free(plain);
    if (!req)
        rx.bad_encoding = true;
    return req;
}

static void
record_samples(const Prometheus__WriteRequest *req, unsigned seq)
{
    for (size_t i = 0; i < req->n_timeseries; i++) {
        const Prometheus__TimeSeries *t = req->timeseries[i];
        char lab[512];
        size_t o = 0;
        lab[0] = '\0';
        for (size_t k = 0; k < t->n_labels; k++)
            o += (size_t)snprintf(lab + o, sizeof lab - o, "%s%s=%s", k ? "," : "",
                                  t->labels[k]->name, t->labels[k]->value);
        for (size_t k = 0; k < t->n_samples && rx.n_got < MAX_GOT; k++) {
            struct got *g = &rx.got[rx.n_got++];
            snprintf(g->labels, sizeof g->labels, "%s", lab);
            g->ts_ms = t->samples[k]->timestamp;
            g->v = t->samples[k]->value;
            g->seq = seq;
        }
    }
}

static void
record_metadata(const Prometheus__WriteRequest *req, unsigned seq)
{
    for (size_t i = 0; i < req->n_metadata && rx.n_md < MAX_MD; i++) {
        const Prometheus__MetricMetadata *m = req->metadata[i];
        struct got_md *g = &rx.md[rx.n_md++];
        g->type = (int)m->type;
        snprintf(g->name, sizeof g->name, "%s", m->metric_family_name);
        snprintf(g->help, sizeof g->help, "%s", m->help);
        snprintf(g->unit, sizeof g->unit, "%s", m->unit);
        g->seq = seq;
    }
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
           const char *version, const char *data, size_t *size, void **con_cls)
{
    (void)cls, (void)url, (void)method, (void)version;
    struct upload *u = *con_cls;
    if (!u) {
        *con_cls = calloc(1, sizeof *u);
        return *con_cls ? MHD_YES : MHD_NO;
    }
    if (*size) {
        u->buf = realloc(u->buf, u->len + *size);
        memcpy(u->buf + u->len, data, *size);
        u->len += *size;
        *size = 0;
        return MHD_YES;
    }
    pthread_mutex_lock(&rx.lock);
    Prometheus__WriteRequest *req = unpack(u);
    bool is_md = req && req->n_metadata > 0;
    if (req && is_md == (req->n_timeseries > 0))
        rx.mixed = true;
    unsigned seq = rx.seq++, n;
    int code;
    if (is_md) {
        n = rx.md_requests++;
        if (n < 64) {
            rx.md_request_mono_us[n] = fs_monotonic_us();
            rx.md_request_seq[n] = seq;
            rx.md_request_entries[n] = req->n_metadata;
        }
        code = n < 16 && rx.md_codes[n] ? rx.md_codes[n] : 204;
    } else {
        n = rx.requests++;
        if (n < 64) {
            rx.request_mono_us[n] = fs_monotonic_us();
            rx.request_seq[n] = seq;
        }
        code = n < 16 && rx.codes[n] ? rx.codes[n] : 204;
    }
    const char *enc = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Encoding");
    const char *ver =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Prometheus-Remote-Write-Version");
    const char *org = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Scope-OrgID");
    if (!enc || strcmp(enc, "snappy") || !ver || strcmp(ver, "0.1.0"))
        rx.bad_encoding = true;
    snprintf(rx.org_id, sizeof rx.org_id, "%s", org ? org : "");
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    snprintf(rx.auth, sizeof rx.auth, "%s", auth ? auth : "");
    if (req && code == 204) {
        record_samples(req, seq);
        record_metadata(req, seq);
    }
    if (req)
        prometheus__write_request__free_unpacked(req, NULL);
    pthread_mutex_unlock(&rx.lock);
    struct MHD_Response *r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (code != 204 && rx.retry_after)
        MHD_add_response_header(r, "Retry-After", rx.retry_after);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)code, r);
    MHD_destroy_response(r);
    return ok;
}

static void
on_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t)
{
    (void)cls, (void)c, (void)t;
    struct upload *u = *con_cls;
    if (u)
        free(u->buf);
    free(u);
    *con_cls = NULL;
}

static void
rx_start(const int *codes, size_t n, const char *retry_after)
{
    if (rx.mhd) /* left running by a failed test: its late requests must not count here */
        MHD_stop_daemon(rx.mhd);
    memset(&rx, 0, sizeof rx);
    pthread_mutex_init(&rx.lock, NULL);
    if (n)
        memcpy(rx.codes, codes, n * sizeof *codes);
    rx.retry_after = retry_after;
    rx.got = calloc(MAX_GOT, sizeof *rx.got);
    rx.mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, on_request, NULL,
                              MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL, MHD_OPTION_END);
    assert_non_null(rx.mhd);
    rx.port = MHD_get_daemon_info(rx.mhd, MHD_DAEMON_INFO_BIND_PORT)->port;
}

/* Answers to the first metadata requests; before the sender starts. */
static void
rx_md_codes(const int *codes, size_t n)
{
    pthread_mutex_lock(&rx.lock);
    memcpy(rx.md_codes, codes, n * sizeof *codes);
    pthread_mutex_unlock(&rx.lock);
}

static void
rx_stop(void)
{
    MHD_stop_daemon(rx.mhd); /* its threads are joined: the state is ours now */
    rx.mhd = NULL;
    assert_false(rx.mixed); /* metadata never rides with samples, no request is empty */
    free(rx.got);
    pthread_mutex_destroy(&rx.lock);
}

/* ---- a store with one counter (past 2^53) and one gauge ---- */

struct fixture {
    struct fs_store *st;
    struct fs_target_cfg tcfg;
    struct fs_kv label;
    struct fs_sink *sink;
    struct fs_remote_write *rw;
    struct fs_remote_write_cfg cfg;
    char url[96];
    int64_t t0;
    unsigned polls;
};

static void
fixture_init(struct fixture *f, size_t capacity, size_t per_send)
{
    char err[256];
    struct fs_ring_opts ro = {.memory_limit = 64 << 20, .retention_us = 3600LL * 1000000};
    memset(f, 0, sizeof *f);
    f->st = fs_store_new(&ro, err, sizeof err);
    assert_non_null(f->st);
    f->label = (struct fs_kv){"pod", "p1"};
    f->tcfg.name = "tor1";
    f->tcfg.address = "127.0.0.1";
    f->tcfg.labels = &f->label;
    f->tcfg.n_labels = 1;
    f->sink = fs_store_sink_add(f->st, &f->tcfg, "testsrc", 1000000);
    assert_non_null(f->sink);
    f->rw = fs_remote_write_new(f->st, err, sizeof err);
    assert_non_null(f->rw);
    snprintf(f->url, sizeof f->url, "http://127.0.0.1:%u/api/v1/write", rx.port);
    f->cfg = (struct fs_remote_write_cfg){.url = f->url,
                                          .remote_timeout_us = 5000000,
                                          .capacity = capacity,
                                          .max_samples_per_send = per_send,
                                          .batch_send_deadline_us = 50000,
                                          .min_backoff_us = 10000,
                                          .max_backoff_us = 100000,
                                          .metadata_send = true,
                                          .metadata_send_interval_us = 60000000,
                                          .metadata_max_per_send = 500};
    f->t0 = fs_realtime_us() + 1000000;
}

/* One poll: a counter counting from just below 2^53 by 2^50+3 per poll (odd values past
 * 2^53 are not doubles) and a gauge, 100 ms apart; with oper_up, a third family
 * (fabric_port_oper_up, a gauge). */
static void
poll_families(struct fixture *f, bool oper_up)
{
    struct fs_label l[2] = {{"interface", "Eth1/1"}, {"direction", "rx"}};
    struct fs_label g[2] = {{"interface", "Eth1/1"}, {"tc", "3"}};
    uint64_t base = (UINT64_C(1) << 53) - 5;
    f->polls++;
    fs_sink_begin(f->sink, f->t0 + (int64_t)f->polls * 100000);
    fs_sink_counter(f->sink, FS_M_PORT_BYTES, l, 2,
                    base + (uint64_t)f->polls * ((UINT64_C(1) << 50) + 3), 64);
    fs_sink_gauge(f->sink, FS_M_QUEUE_DEPTH, g, 2, 0.5 + f->polls);
    if (oper_up)
        fs_sink_gauge(f->sink, FS_M_PORT_OPER_UP, g, 1, 1);
    fs_sink_end(f->sink);
}

static void
poll_once(struct fixture *f)
{
    poll_families(f, false);
}

static void
fixture_free(struct fixture *f)
{
    fs_remote_write_free(f->rw);
    fs_store_sink_remove(f->st, f->sink);
    fs_store_free(f->st);
}

static struct fs_remote_write_stats
stats(struct fixture *f)
{
    struct fs_remote_write_stats s;
    memset(&s, 0, sizeof s);
    assert_int_equal(fs_remote_write_stats(f->rw, f->url, &s), 0);
    return s;
}

/* Orders every write the receiver's handler made (all under rx.lock) before the test's
 * reads that follow: the sender learns of a request's end through a socket, which TSan
 * cannot see as an order, so the test takes the lock once itself. */
static void
rx_sync(void)
{
    pthread_mutex_lock(&rx.lock);
    pthread_mutex_unlock(&rx.lock);
}

/* Polls (with a 20 s deadline) until sent + failed reaches n; nothing is in flight then,
 * and the receiver's state may be read without the lock. */
static void
wait_settled(struct fixture *f, uint64_t n)
{
    int64_t until = fs_monotonic_us() + 20000000;
    struct fs_remote_write_stats s;
    do {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
        s = stats(f);
    } while (s.sent + s.failed < n && fs_monotonic_us() < until);
    assert_int_equal(s.sent + s.failed, n);
    rx_sync();
}

/* What the ring holds for each series, converted as the sender must, equals what the
 * receiver decoded, in the same order. */
struct expect_ctx {
    struct fixture *f;
    size_t idx[2];
    bool counter[2];
    uint32_t id[2], gen[2];
    double scale[2];
    size_t n;
};

static int
expect_cb(void *arg, const struct fs_series_info *s)
{
    struct expect_ctx *c = arg;
    if (c->n < 2) {
        c->id[c->n] = s->id;
        c->gen[c->n] = s->gen;
        c->counter[c->n] = s->counter;
        c->scale[c->n] = s->scale;
        c->n++;
    }
    return 0;
}

static void
check_received(struct fixture *f, bool with_ext)
{
    struct expect_ctx c = {.f = f};
    fs_store_foreach_series(f->st, false, expect_cb, &c);
    assert_int_equal(c.n, 2);
    size_t total = 0, inexact = 0;
    for (size_t k = 0; k < 2; k++) {
        struct fs_ring_sample smp[256];
        long n = fs_store_read(f->st, c.id[k], c.gen[k], 0, INT64_MAX, smp, 256, NULL);
        assert_true(n > 0);
        const char *want_labels =
            c.counter[k]
                ? (with_ext
                       ? "__name__=fabric_port_bytes_total,dc=x1,direction=rx,interface=Eth1/1,"
                         "pod=p1,source=testsrc,target=tor1"
                       : "__name__=fabric_port_bytes_total,direction=rx,interface=Eth1/1,pod=p1,"
                         "source=testsrc,target=tor1")
                : (with_ext ? "__name__=fabric_queue_depth_bytes,dc=x1,interface=Eth1/1,pod=p1,"
                              "source=testsrc,target=tor1,tc=3"
                            : "__name__=fabric_queue_depth_bytes,interface=Eth1/1,pod=p1,"
                              "source=testsrc,target=tor1,tc=3");
        long j = 0;
        for (size_t i = 0; i < rx.n_got; i++) {
            if (strcmp(rx.got[i].labels, want_labels))
                continue;
            assert_true(j < n);
            double want = c.counter[k] ? (double)smp[j].v.u * c.scale[k] : smp[j].v.d;
            assert_int_equal(rx.got[i].ts_ms, smp[j].ts_us / 1000);
            assert_true(rx.got[i].v == want);
            if (c.counter[k] && smp[j].v.u > (UINT64_C(1) << 53) &&
                (uint64_t)rx.got[i].v != smp[j].v.u)
                inexact++;
            j++;
        }
        if (j != n && rx.n_got)
            fprintf(stderr, "want %s\n got %s\n", want_labels, rx.got[0].labels);
        assert_int_equal(j, n); /* all, each once, in order */
        total += (size_t)n;
    }
    assert_int_equal(total, rx.n_got);
    assert_true(inexact > 0); /* the float64 rounding above 2^53 was exercised */
}

/* ---- the receiver's state seen from the test ---- */

static struct receiver snap; /* rx as rx_snapshot() copied it */

/* Copies the receiver's state under its lock (the sender may be sending meanwhile). The
 * samples' array is shared: entries below snap.n_got are not written again. */
static void
rx_snapshot(void)
{
    pthread_mutex_lock(&rx.lock);
    snap = rx;
    pthread_mutex_unlock(&rx.lock);
}

/* Polls (20 s deadline) until the receiver has seen n metadata requests, feeding samples
 * meanwhile when feed is set; then snapshots it. */
static void
wait_md_requests(struct fixture *f, unsigned n, bool feed)
{
    int64_t until = fs_monotonic_us() + 20000000;
    for (rx_snapshot(); snap.md_requests < n && fs_monotonic_us() < until; rx_snapshot()) {
        if (feed)
            poll_once(f);
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    assert_true(snap.md_requests >= n);
}

/* The request number (seq) of the first accepted sample of family name; UINT_MAX if none. */
static unsigned
first_sample_seq(const char *name)
{
    char prefix[160];
    size_t len = (size_t)snprintf(prefix, sizeof prefix, "__name__=%s,", name);
    for (size_t i = 0; i < snap.n_got; i++)
        if (!strncmp(snap.got[i].labels, prefix, len))
            return snap.got[i].seq;
    return UINT32_MAX;
}

/* The first accepted metadata entry of family name; the test fails without one. */
static const struct got_md *
md_find(const char *name)
{
    for (size_t i = 0; i < snap.n_md; i++)
        if (!strcmp(snap.md[i].name, name))
            return &snap.md[i];
    fail_msg("no metadata of %s received", name);
    return NULL;
}

/* Each accepted entry says what /metrics says of its family in # HELP and # TYPE (the
 * TYPE line's name: a counter with _total), with no unit (/metrics writes none). */
static void
check_md_like_exposition(struct fixture *f)
{
    struct fs_buf out;
    fs_buf_init(&out, 1 << 20);
    assert_int_equal(fs_expo_render(f->st, &out), 0);
    fs_buf_append(&out, "", 1);
    for (size_t i = 0; i < snap.n_md; i++) {
        const struct got_md *g = &snap.md[i];
        const char *type = g->type == PROMETHEUS__METRIC_METADATA__METRIC_TYPE__COUNTER ? "counter"
                           : g->type == PROMETHEUS__METRIC_METADATA__METRIC_TYPE__GAUGE ? "gauge"
                                                                                        : "other";
        char want[1024];
        snprintf(want, sizeof want, "# HELP %s %s\n# TYPE %s %s\n", g->name, g->help, g->name,
                 type);
        if (!strstr(out.data, want))
            fail_msg("metadata entry not as /metrics has it: %s", want);
        assert_string_equal(g->unit, "");
    }
    fs_buf_free(&out);
}

static void
test_sends_ring_exactly(void **state)
{
    (void)state;
    struct fixture f;
    rx_start(NULL, 0, NULL);
    fixture_init(&f, 1000, 7);
    struct fs_kv hdr = {"X-Scope-OrgID", "tenant-a"};
    f.cfg.headers = &hdr;
    f.cfg.n_headers = 1;
    struct fs_kv ext[2] = {{"dc", "x1"}, {"pod", "overridden-by-the-series"}};
    char err[256];
    /* Credentials in the URL (sent as basic auth) never show on /metrics. */
    char with_pw[2 * sizeof f.url], shown[2 * sizeof f.url];
    snprintf(with_pw, sizeof with_pw, "http://rw-user:rw-pass@%s", f.url + strlen("http://"));
    snprintf(shown, sizeof shown, "http://***@%s", f.url + strlen("http://"));
    f.cfg.url = with_pw;
    assert_int_equal(fs_remote_write_apply(f.rw, &f.cfg, 1, ext, 2, err, sizeof err), 0);
    assert_true(strlen(with_pw) < sizeof f.url);
    memcpy(f.url, with_pw, strlen(with_pw) + 1); /* stats() looks the sender up by it */
    f.cfg.url = f.url;
    for (int i = 0; i < 40; i++)
        poll_once(&f);
    wait_settled(&f, 80);
    struct fs_remote_write_stats s = stats(&f);
    assert_int_equal(s.sent, 80);
    assert_int_equal(s.retried + s.failed + s.dropped, 0);
    assert_int_equal(s.highest_sent_ms, (f.t0 + 40 * 100000) / 1000);
    assert_false(rx.bad_encoding);
    assert_string_equal(rx.org_id, "tenant-a");
    check_received(&f, true);

    struct fs_buf out;
    fs_buf_init(&out, 1 << 20);
    assert_int_equal(fs_expo_render(f.st, &out), 0);
    fs_buf_append(&out, "", 1);
    assert_null(strstr(out.data, "rw-pass"));
    char want[512];
    snprintf(want, sizeof want,
             "fabricscope_remote_write_samples_sent_total{remote_name=\"%s\",url=\"%s\"} 80\n",
             shown, shown);
    assert_non_null(strstr(out.data, want));
    assert_non_null(
        strstr(out.data, "# TYPE fabricscope_remote_write_queue_horizon_seconds gauge\n"));
    /* Metadata of both families before their first samples: one request, or two when the
     * sender's first walk fell between the creation of the two series (the first poll runs
     * while the sender starts). The counters on /metrics. */
    rx_snapshot();
    assert_true(snap.md_requests == 1 || snap.md_requests == 2);
    assert_true(md_find("fabric_port_bytes_total")->seq <
                first_sample_seq("fabric_port_bytes_total"));
    assert_true(md_find("fabric_queue_depth_bytes")->seq <
                first_sample_seq("fabric_queue_depth_bytes"));
    assert_int_equal(s.metadata_sent, snap.n_md);
    assert_int_equal(s.metadata_failed, 0);
    snprintf(want, sizeof want,
             "fabricscope_remote_write_metadata_sent_total{remote_name=\"%s\",url=\"%s\"} %zu\n",
             shown, shown, snap.n_md);
    assert_non_null(strstr(out.data, want));
    snprintf(want, sizeof want,
             "fabricscope_remote_write_metadata_failed_total{remote_name=\"%s\",url=\"%s\"} 0\n",
             shown, shown);
    assert_non_null(strstr(out.data, want));
    fs_buf_free(&out);
    fixture_free(&f);
    rx_stop();
}

static void
test_retries_5xx_and_429(void **state)
{
    (void)state;
    struct fixture f;
    int codes[] = {503, 500, 429};
    rx_start(codes, 3, "1");
    fixture_init(&f, 1000, 100);
    /* metadata due many times while the samples fail for ~3 s: it must wait for them */
    f.cfg.metadata_send_interval_us = 300000;
    char err[256];
    assert_int_equal(fs_remote_write_apply(f.rw, &f.cfg, 1, NULL, 0, err, sizeof err), 0);
    for (int i = 0; i < 20; i++)
        poll_once(&f);
    wait_settled(&f, 40);
    struct fs_remote_write_stats s = stats(&f);
    assert_int_equal(s.failed + s.dropped, 0);
    assert_true(s.retried >= 3); /* each failed attempt counts its samples */
    assert_true(rx.requests >= 4);
    /* Retry-After: 1 on the 503 and the 429: a second at least before the next try */
    assert_true(rx.request_mono_us[1] - rx.request_mono_us[0] >= 990000);
    assert_true(rx.request_mono_us[3] - rx.request_mono_us[2] >= 990000);
    check_received(&f, false); /* nothing lost, nothing twice */
    /* no metadata request took a turn between the first failed and the accepted one */
    rx_snapshot();
    assert_true(snap.md_requests >= 1);
    for (unsigned i = 0; i < snap.md_requests && i < 64; i++)
        assert_false(snap.md_request_seq[i] > snap.request_seq[0] &&
                     snap.md_request_seq[i] < snap.request_seq[3]);
    fixture_free(&f);
    rx_stop();
}

static void
test_400_not_retried(void **state)
{
    (void)state;
    struct fixture f;
    int codes[] = {400};
    rx_start(codes, 1, NULL);
    fixture_init(&f, 1000, 1000);
    f.cfg.batch_send_deadline_us = 2000000; /* one batch for the first ten polls */
    char err[256];
    assert_int_equal(fs_remote_write_apply(f.rw, &f.cfg, 1, NULL, 0, err, sizeof err), 0);
    for (int i = 0; i < 10; i++)
        poll_once(&f);
    wait_settled(&f, 20);
    struct fs_remote_write_stats s = stats(&f);
    assert_int_equal(s.failed, 20);
    assert_int_equal(s.sent, 0);
    assert_int_equal(s.retried, 0);
    assert_int_equal(rx.requests, 1);
    /* the next batch goes through: the sender did not stop */
    for (int i = 0; i < 5; i++)
        poll_once(&f);
    wait_settled(&f, 30);
    assert_int_equal(stats(&f).sent, 10);
    assert_int_equal(rx.requests, 2);
    fixture_free(&f);
    rx_stop();
}

static void
test_restart_continues(void **state)
{
    (void)state;
    struct fixture f;
    rx_start(NULL, 0, NULL);
    fixture_init(&f, 1000, 10);
    char err[256];
    assert_int_equal(fs_remote_write_apply(f.rw, &f.cfg, 1, NULL, 0, err, sizeof err), 0);
    for (int i = 0; i < 15; i++)
        poll_once(&f);
    wait_settled(&f, 30);
    /* a changed header restarts the sender of the same URL: it takes over where it was */
    struct fs_kv hdr = {"X-Scope-OrgID", "tenant-b"};
    f.cfg.headers = &hdr;
    f.cfg.n_headers = 1;
    assert_int_equal(fs_remote_write_apply(f.rw, &f.cfg, 1, NULL, 0, err, sizeof err), 0);
    for (int i = 0; i < 15; i++)
        poll_once(&f);
    wait_settled(&f, 60);
    assert_string_equal(rx.org_id, "tenant-b");
    check_received(&f, false);
    /* a smaller queue on restart keeps the newest and counts the rest */
    f.cfg.capacity = 12;
    assert_int_equal(fs_remote_write_apply(f.rw, &f.cfg, 1, NULL, 0, err, sizeof err), 0);
    assert_int_equal(stats(&f).dropped, 0); /* nothing was queued */
    /* removing it stops it */
    assert_int_equal(fs_remote_write_apply(f.rw, NULL, 0, NULL, 0, err, sizeof err), 0);
    struct fs_remote_write_stats s;
    assert_int_equal(fs_remote_write_stats(f.rw, f.url, &s), -1);
    fixture_free(&f);
    rx_stop();
}

static void
write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static bool
auth_is(const char *want)
{
    pthread_mutex_lock(&rx.lock);
    bool same = !strcmp(rx.auth, want);
    pthread_mutex_unlock(&rx.lock);
    return same;
}

/* Polls the fixture until the receiver saw Authorization: want (10 s deadline). */
static void
wait_auth(struct fixture *f, const char *want)
{
    int64_t until = fs_monotonic_us() + 10000000;
    while (!auth_is(want) && fs_monotonic_us() < until) {
        poll_once(f);
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    /* The sender goes on sending while the test reads: a copy under the lock. */
    char got[sizeof rx.auth];
    pthread_mutex_lock(&rx.lock);
    memcpy(got, rx.auth, sizeof got);
    pthread_mutex_unlock(&rx.lock);
    assert_string_equal(got, want);
}

static void
test_auth_from_files(void **state)
{
    (void)state;
    struct fixture f;
    char dir[] = "/tmp/fs-rw-auth.XXXXXX", tok[64], pw[64], err[256];
    assert_non_null(mkdtemp(dir));
    snprintf(tok, sizeof tok, "%s/token", dir);
    snprintf(pw, sizeof pw, "%s/password", dir);
    write_file(tok, "tok-1\n");
    write_file(pw, "s3cret\n");
    rx_start(NULL, 0, NULL);
    fixture_init(&f, 1000, 2);
    f.cfg.bearer_token.file = tok;
    assert_int_equal(fs_remote_write_apply(f.rw, &f.cfg, 1, NULL, 0, err, sizeof err), 0);
    wait_auth(&f, "Bearer tok-1");
    write_file(tok, "tok-2\n"); /* rotated: read again within a second, no reload */
    wait_auth(&f, "Bearer tok-2");
    f.cfg.bearer_token.file = NULL;
    f.cfg.basic_auth_username = "fabric";
    f.cfg.basic_auth_password.file = pw;
    assert_int_equal(fs_remote_write_apply(f.rw, &f.cfg, 1, NULL, 0, err, sizeof err), 0);
    wait_auth(&f, "Basic ZmFicmljOnMzY3JldA=="); /* base64("fabric:s3cret") */
    fixture_free(&f);
    rx_stop();
    unlink(tok);
    unlink(pw);
    rmdir(dir);
}

/* Polls until cond(stats) holds (10 s deadline), feeding samples meanwhile. */
static struct fs_remote_write_stats
wait_stats(struct fixture *f, bool (*cond)(const struct fs_remote_write_stats *))
{
    int64_t until = fs_monotonic_us() + 10000000;
    struct fs_remote_write_stats s = stats(f);
    while (!cond(&s) && fs_monotonic_us() < until) {
        poll_once(f);
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
        s = stats(f);
    }
    assert_true(cond(&s));
    return s;
}

static uint64_t failed_floor; /* answered(): more failed samples than this */

static bool
answered(const struct fs_remote_write_stats *s)
{
    return s->failed > failed_floor; /* the server's 4xx: the TLS handshake succeeded */
}

static bool
retrying(const struct fs_remote_write_stats *s)
{
    return s->retried > 0;
}

/* TLS: the project's own HTTPS endpoint as the peer (it answers a POST to the write path
 * with a 4xx, which only a completed handshake can bring). Verified with tls.ca_file;
 * without it the self-signed certificate is refused (a transport error, retried);
 * insecure_skip_verify accepts it. */
static void
test_tls_ca_file(void **state)
{
    (void)state;
    struct fixture f;
    char dir[] = "/tmp/fs-rw-tls.XXXXXX", cert[64], key[64], cmd[512], err[256];
    assert_non_null(mkdtemp(dir));
    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    snprintf(key, sizeof key, "%s/key.pem", dir);
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
             "-addext subjectAltName=IP:127.0.0.1 -keyout %s -out %s >/dev/null 2>&1",
             key, cert);
    assert_int_equal(system(cmd), 0);
    rx_start(NULL, 0, NULL); /* unused here; the fixture names its port */
    fixture_init(&f, 1000, 2);
    struct fs_http_opts o = {.host = "127.0.0.1", .tls_cert_file = cert, .tls_key_file = key};
    struct fs_http *h = fs_http_start(&o, f.st, err, sizeof err);
    if (!h)
        fail_msg("https endpoint: %s", err);
    snprintf(f.url, sizeof f.url, "https://127.0.0.1:%u/api/v1/write", (unsigned)fs_http_port(h));

    f.cfg.tls_ca_file = cert;
    failed_floor = 0;
    assert_int_equal(fs_remote_write_apply(f.rw, &f.cfg, 1, NULL, 0, err, sizeof err), 0);
    struct fs_remote_write_stats s = wait_stats(&f, answered);
    assert_int_equal(s.retried, 0);

    f.cfg.tls_ca_file = NULL; /* the system's CAs do not know it */
    assert_int_equal(fs_remote_write_apply(f.rw, &f.cfg, 1, NULL, 0, err, sizeof err), 0);
    uint64_t failed_before = stats(&f).failed;
    s = wait_stats(&f, retrying);
    assert_int_equal(s.failed, failed_before);

    f.cfg.tls_insecure_skip_verify = true;
    failed_floor = failed_before;
    assert_int_equal(fs_remote_write_apply(f.rw, &f.cfg, 1, NULL, 0, err, sizeof err), 0);
    wait_stats(&f, answered);

    fs_http_stop(h);
    fixture_free(&f);
    rx_stop();
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- metadata ---- */

/* At start (before the first samples) and before a new family's first samples: each
 * family once, as the catalogue and /metrics have it. */
static void
test_metadata_at_start_and_for_new_families(void **state)
{
    (void)state;
    struct fixture f;
    char err[256];
    rx_start(NULL, 0, NULL);
    fixture_init(&f, 1000, 100); /* send_interval 60 s: nothing periodic in this test */
    poll_once(&f);               /* both series exist when the sender starts */
    assert_int_equal(fs_remote_write_apply(f.rw, &f.cfg, 1, NULL, 0, err, sizeof err), 0);
    for (int i = 0; i < 4; i++)
        poll_once(&f);
    wait_settled(&f, 10);
    rx_snapshot();
    assert_int_equal(snap.md_requests, 1);
    assert_int_equal(snap.md_request_entries[0], 2);
    assert_int_equal(snap.n_md, 2);
    const struct got_md *bytes = md_find("fabric_port_bytes_total");
    const struct got_md *depth = md_find("fabric_queue_depth_bytes");
    assert_non_null(bytes);
    assert_non_null(depth);
    assert_int_equal(bytes->type, PROMETHEUS__METRIC_METADATA__METRIC_TYPE__COUNTER);
    assert_string_equal(bytes->help, "Octets received (rx) or sent (tx) on the port.");
    assert_int_equal(depth->type, PROMETHEUS__METRIC_METADATA__METRIC_TYPE__GAUGE);
    assert_true(bytes->seq < first_sample_seq("fabric_port_bytes_total"));
    assert_true(depth->seq < first_sample_seq("fabric_queue_depth_bytes"));
    check_md_like_exposition(&f);

    /* a third family: described again (all three), before its first samples */
    for (int i = 0; i < 5; i++)
        poll_families(&f, true);
    wait_settled(&f, 25);
    rx_snapshot();
    assert_int_equal(snap.md_requests, 2);
    assert_int_equal(snap.md_request_entries[1], 3);
    const struct got_md *up = md_find("fabric_port_oper_up");
    assert_non_null(up);
    assert_int_equal(up->type, PROMETHEUS__METRIC_METADATA__METRIC_TYPE__GAUGE);
    assert_true(first_sample_seq("fabric_port_oper_up") != UINT32_MAX);
    assert_true(up->seq < first_sample_seq("fabric_port_oper_up"));
    check_md_like_exposition(&f);
    struct fs_remote_write_stats s = stats(&f);
    assert_int_equal(s.metadata_sent, 5);
    assert_int_equal(s.metadata_failed, 0);
    assert_int_equal(s.sent, 25);
    fixture_free(&f);
    rx_stop();
}

static bool
md_sent_8(const struct fs_remote_write_stats *s)
{
    return s->metadata_sent >= 8;
}

/* Sent again every send_interval (300 ms here), the same entries each time. */
static void
test_metadata_every_interval(void **state)
{
    (void)state;
    struct fixture f;
    char err[256];
    rx_start(NULL, 0, NULL);
    fixture_init(&f, 1000, 100);
    f.cfg.metadata_send_interval_us = 300000;
    poll_once(&f);
    assert_int_equal(fs_remote_write_apply(f.rw, &f.cfg, 1, NULL, 0, err, sizeof err), 0);
    wait_md_requests(&f, 4, true);
    for (unsigned i = 0; i < 4; i++) {
        assert_int_equal(snap.md_request_entries[i], 2);
        if (i > 0) /* the interval, not a hurry: half of it at least (the requests' own
                    * times vary under load) */
            assert_true(snap.md_request_mono_us[i] - snap.md_request_mono_us[i - 1] >= 150000);
    }
    for (size_t i = 0; i < snap.n_md; i++)
        assert_true(!strcmp(snap.md[i].name, "fabric_port_bytes_total") ||
                    !strcmp(snap.md[i].name, "fabric_queue_depth_bytes"));
    check_md_like_exposition(&f);
    /* The receiver logs a request before it answers, the sender counts it after the
       answer: wait for the count (TSan saw 6 of 8 read in between). */
    wait_stats(&f, md_sent_8);
    fixture_free(&f);
    rx_stop();
}

/* max_samples_per_send bounds the entries of one metadata request: 3 families, 2 a request. */
static void
test_metadata_max_per_send(void **state)
{
    (void)state;
    struct fixture f;
    char err[256];
    rx_start(NULL, 0, NULL);
    fixture_init(&f, 1000, 100);
    f.cfg.metadata_max_per_send = 2;
    poll_families(&f, true); /* all three series exist at start */
    assert_int_equal(fs_remote_write_apply(f.rw, &f.cfg, 1, NULL, 0, err, sizeof err), 0);
    for (int i = 0; i < 4; i++)
        poll_families(&f, true);
    wait_settled(&f, 15);
    rx_snapshot();
    assert_int_equal(snap.md_requests, 2);
    assert_int_equal(snap.md_request_entries[0], 2);
    assert_int_equal(snap.md_request_entries[1], 1);
    assert_int_equal(snap.n_md, 3);
    assert_non_null(md_find("fabric_port_bytes_total"));
    assert_non_null(md_find("fabric_queue_depth_bytes"));
    assert_non_null(md_find("fabric_port_oper_up"));
    assert_true(snap.md_request_seq[1] < first_sample_seq("fabric_port_oper_up"));
    assert_int_equal(stats(&f).metadata_sent, 3);
    fixture_free(&f);
    rx_stop();
}

/* send: false sends no metadata, over a window of several intervals in which samples go. */
static void
test_metadata_send_false(void **state)
{
    (void)state;
    struct fixture f;
    char err[256];
    rx_start(NULL, 0, NULL);
    fixture_init(&f, 1000, 100);
    f.cfg.metadata_send = false;
    f.cfg.metadata_send_interval_us = 100000;
    poll_once(&f);
    assert_int_equal(fs_remote_write_apply(f.rw, &f.cfg, 1, NULL, 0, err, sizeof err), 0);
    /* an observation window of 6 intervals, not a wait for an event */
    int64_t until = fs_monotonic_us() + 600000;
    while (fs_monotonic_us() < until) {
        poll_once(&f);
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    wait_settled(&f, 2 * f.polls);
    rx_snapshot();
    assert_true(snap.requests >= 2);
    assert_int_equal(snap.md_requests, 0);
    struct fs_remote_write_stats s = stats(&f);
    assert_int_equal(s.metadata_sent + s.metadata_failed, 0);
    fixture_free(&f);
    rx_stop();
}

/* A 4xx on metadata: counted, not retried before the next interval; samples go on, all of
 * them, in order. */
static void
test_metadata_4xx_counted_samples_go_on(void **state)
{
    (void)state;
    struct fixture f;
    char err[256];
    int md_codes[] = {400, 400};
    rx_start(NULL, 0, NULL);
    rx_md_codes(md_codes, 2);
    fixture_init(&f, 1000, 100);
    f.cfg.metadata_send_interval_us = 300000;
    poll_once(&f);
    assert_int_equal(fs_remote_write_apply(f.rw, &f.cfg, 1, NULL, 0, err, sizeof err), 0);
    wait_md_requests(&f, 3, true);
    /* not retried: the next try is the next interval (half of it at least, as above) */
    assert_true(snap.md_request_mono_us[1] - snap.md_request_mono_us[0] >= 150000);
    assert_true(snap.md_request_mono_us[2] - snap.md_request_mono_us[1] >= 150000);
    wait_settled(&f, 2 * f.polls);
    struct fs_remote_write_stats s = stats(&f);
    assert_int_equal(s.metadata_failed, 4); /* two requests of two entries */
    assert_true(s.metadata_sent >= 2);
    assert_int_equal(s.sent, 2 * f.polls);
    assert_int_equal(s.failed + s.retried + s.dropped, 0);
    rx_snapshot();
    assert_true(snap.requests >= 1);
    check_received(&f, false);
    fixture_free(&f);
    rx_stop();
}

/* A 5xx on metadata: retried with the queue's backoff (well before the 60 s interval),
 * counted per failed attempt; the samples are neither retried nor held back. */
static void
test_metadata_5xx_retried_with_backoff(void **state)
{
    (void)state;
    struct fixture f;
    char err[256];
    int md_codes[] = {503, 500};
    rx_start(NULL, 0, NULL);
    rx_md_codes(md_codes, 2);
    fixture_init(&f, 1000, 100); /* send_interval 60 s, backoff 10 ms .. 100 ms */
    poll_once(&f);
    assert_int_equal(fs_remote_write_apply(f.rw, &f.cfg, 1, NULL, 0, err, sizeof err), 0);
    wait_md_requests(&f, 3, true);
    /* at least half of min_backoff, then of twice it */
    assert_true(snap.md_request_mono_us[1] - snap.md_request_mono_us[0] >= 5000);
    assert_true(snap.md_request_mono_us[2] - snap.md_request_mono_us[1] >= 10000);
    wait_settled(&f, 2 * f.polls);
    struct fs_remote_write_stats s = stats(&f);
    assert_int_equal(s.metadata_failed, 4);
    assert_int_equal(s.metadata_sent, 2);
    assert_int_equal(s.failed + s.retried + s.dropped, 0);
    rx_snapshot();
    assert_int_equal(snap.md_requests, 3);
    assert_int_equal(snap.n_md, 2);
    check_received(&f, false);
    fixture_free(&f);
    rx_stop();
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_keys_and_defaults),
        cmocka_unit_test(test_config_problems),
        cmocka_unit_test(test_sends_ring_exactly),
        cmocka_unit_test(test_retries_5xx_and_429),
        cmocka_unit_test(test_400_not_retried),
        cmocka_unit_test(test_restart_continues),
        cmocka_unit_test(test_auth_from_files),
        cmocka_unit_test(test_tls_ca_file),
        cmocka_unit_test(test_metadata_at_start_and_for_new_families),
        cmocka_unit_test(test_metadata_every_interval),
        cmocka_unit_test(test_metadata_max_per_send),
        cmocka_unit_test(test_metadata_send_false),
        cmocka_unit_test(test_metadata_4xx_counted_samples_go_on),
        cmocka_unit_test(test_metadata_5xx_retried_with_backoff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
