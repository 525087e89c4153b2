/*
 * The HTTP endpoint on libmicrohttpd (see http.h). Every response body is complete in
 * memory before it is handed to libmicrohttpd, so a slow client only ever holds its
 * own buffer, never a store lock.
 */
#include "http/http.h"

#include <arpa/inet.h>
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
#include <zlib.h>

#include "http/api.h"
#include "util/buf.h"
#include "http/expo.h"
#include "util/log.h"

#define MAX_URL_BYTES 8192         /* path plus decoded query; longer is 414 */
#define MAX_BODY_BYTES (64 * 1024) /* no endpoint takes a body; larger is 413 */
#define MAX_ARGS 64
#define MAX_METRICS_BYTES ((size_t)1 << 30)
#define MAX_JSON_BYTES ((size_t)256 << 20)
#define MAX_TLS_FILE_BYTES (1024 * 1024)
#define METRICS_CTYPE "text/plain; version=0.0.4; charset=utf-8"
#define JSON_CTYPE "application/json"

enum handler { H_METRICS, H_RAW, H_TARGETS, H_HEALTHZ, H_INDEX, H_OTHER, H_COUNT };
static const char *const handler_names[H_COUNT] = {"metrics", "raw",   "targets",
                                                   "healthz", "index", "other"};
static const unsigned status_codes[] = {200, 400, 401, 404, 405, 413, 414, 500};
#define N_CODES (sizeof status_codes / sizeof status_codes[0])

/*
 * A /metrics render buffer. Pooled buffers keep their memory between scrapes, which is
 * what makes a steady-state render allocation-free; one is busy from render until
 * libmicrohttpd has sent the response and called slot_release().
 */
struct slot {
    struct fs_http *h;
    struct fs_buf plain, gz;
    z_stream zs;
    bool zinit, busy, pooled;
};

struct fs_http {
    struct MHD_Daemon *d;
    struct fs_store *st;
    char *token;
    size_t token_len;
    char *cert, *key;
    uint16_t port;
    pthread_mutex_t pool_lock;
    struct slot *slots;
    size_t n_slots;
    _Atomic uint64_t counts[H_COUNT][N_CODES];
};

static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
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

static void
slot_clear(struct slot *s)
{
    fs_buf_free(&s->plain);
    fs_buf_free(&s->gz);
    if (s->zinit)
        deflateEnd(&s->zs);
    s->zinit = false;
}

static struct slot *
slot_get(struct fs_http *h)
{
    struct slot *s = NULL;
    pthread_mutex_lock(&h->pool_lock);
    for (size_t i = 0; i < h->n_slots; i++) {
        if (!h->slots[i].busy) {
            s = &h->slots[i];
            s->busy = true;
            break;
        }
    }
    pthread_mutex_unlock(&h->pool_lock);
    if (!s) {
        /* More concurrent scrapes than pooled buffers: a one-off buffer. */
        s = calloc(1, sizeof *s);
        if (!s)
            return NULL;
        s->h = h;
        fs_buf_init(&s->plain, MAX_METRICS_BYTES);
        fs_buf_init(&s->gz, MAX_METRICS_BYTES);
        s->busy = true;
    }
    fs_buf_reset(&s->plain);
    fs_buf_reset(&s->gz);
    return s;
}

static void
slot_release(void *cls)
{
    struct slot *s = cls;
    if (!s->pooled) {
        slot_clear(s);
        free(s);
        return;
    }
    pthread_mutex_lock(&s->h->pool_lock);
    s->busy = false;
    pthread_mutex_unlock(&s->h->pool_lock);
}

static int
slot_gzip(struct slot *s)
{
    if (!s->zinit) {
        memset(&s->zs, 0, sizeof s->zs);
        /* Level 1: text metrics compress well already; speed matters more here. */
        if (deflateInit2(&s->zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
            return -1;
        s->zinit = true;
    } else if (deflateReset(&s->zs) != Z_OK) {
        return -1;
    }
    uLong bound = deflateBound(&s->zs, (uLong)s->plain.len);
    if (!fs_buf_reserve(&s->gz, bound))
        return -1;
    s->zs.next_in = (Bytef *)s->plain.data;
    s->zs.avail_in = (uInt)s->plain.len;
    s->zs.next_out = (Bytef *)s->gz.data;
    s->zs.avail_out = (uInt)bound;
    if (deflate(&s->zs, Z_FINISH) != Z_STREAM_END)
        return -1;
    s->gz.len = bound - s->zs.avail_out;
    return 0;
}

static void
common_headers(struct MHD_Response *r, const char *ctype)
{
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
}

/* Queues body (detached from b, freed by libmicrohttpd) with status. */
static enum MHD_Result
reply(struct fs_http *h, struct MHD_Connection *c, enum handler hd, unsigned status,
      const char *ctype, struct fs_buf *b, const char *allow)
{
    size_t len;
    char *data = fs_buf_detach(b, &len);
    if (!data)
        return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(data);
        return MHD_NO;
    }
    common_headers(r, ctype);
    if (allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    if (status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                "Bearer realm=\"fabricscope\"");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    count(h, hd, status);
    if (status >= 500)
        fs_log(FS_LOG_WARN, "http", "%s answered %u", handler_names[hd], status);
    return ret;
}

static enum MHD_Result
reply_error(struct fs_http *h, struct MHD_Connection *c, enum handler hd, unsigned status,
            const char *msg, const char *allow)
{
    struct fs_buf b;
    fs_buf_init(&b, 64 * 1024);
    fs_api_error_json(&b, msg);
    return reply(h, c, hd, status, JSON_CTYPE, &b, allow);
}

struct args_ctx {
    struct fs_query_arg a[MAX_ARGS];
    size_t n;
    size_t bytes;
    bool too_many;
};

static enum MHD_Result
args_cb(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    struct args_ctx *c = cls;
    c->bytes += strlen(key) + 2 + (value ? strlen(value) : 0);
    if (c->n >= MAX_ARGS) {
        c->too_many = true;
        return MHD_YES;
    }
    c->a[c->n].key = key;
    c->a[c->n].value = value;
    c->n++;
    return MHD_YES;
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

static enum MHD_Result
do_metrics(struct fs_http *h, struct MHD_Connection *c)
{
    struct fs_expo_http_count hc[H_COUNT * N_CODES];
    size_t n = 0;
    for (size_t i = 0; i < H_COUNT; i++)
        for (size_t j = 0; j < N_CODES; j++)
            hc[n++] = (struct fs_expo_http_count){
                handler_names[i], status_codes[j],
                atomic_load_explicit(&h->counts[i][j], memory_order_relaxed)};
    struct slot *s = slot_get(h);
    if (!s)
        return reply_error(h, c, H_METRICS, 500, "out of memory", NULL);
    if (fs_expo_render_ex(h->st, &s->plain, hc, n) != 0) {
        slot_release(s);
        return reply_error(h, c, H_METRICS, 500, "the exposition does not fit in memory", NULL);
    }
    bool gz = accepts_gzip(
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING));
    if (gz && slot_gzip(s) != 0) {
        slot_release(s);
        return reply_error(h, c, H_METRICS, 500, "compression failed", NULL);
    }
    struct fs_buf *body = gz ? &s->gz : &s->plain;
    struct MHD_Response *r = MHD_create_response_from_buffer_with_free_callback_cls(
        body->len, body->data, slot_release, s);
    if (!r) {
        slot_release(s);
        return MHD_NO;
    }
    common_headers(r, METRICS_CTYPE);
    MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    if (gz)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    count(h, H_METRICS, 200);
    return ret;
}

static enum MHD_Result
do_raw(struct fs_http *h, struct MHD_Connection *c, const struct args_ctx *args)
{
    struct fs_raw_query q;
    char err[512];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    if (fs_raw_query_parse(args->a, args->n, now, &q, err, sizeof err) != 0)
        return reply_error(h, c, H_RAW, 400, err, NULL);
    struct fs_buf b;
    fs_buf_init(&b, MAX_JSON_BYTES);
    int rc = fs_api_raw(h->st, &q, &b, err, sizeof err);
    fs_raw_query_free(&q);
    if (rc != 0) {
        fs_buf_free(&b);
        return reply_error(h, c, H_RAW, (unsigned)rc, err, NULL);
    }
    return reply(h, c, H_RAW, 200, JSON_CTYPE, &b, NULL);
}

static enum MHD_Result
handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
       const char *version, const char *upload_data, size_t *upload_data_size, void **req_cls)
{
    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    struct fs_http *h = cls;
    static int marker;
    if (*req_cls == &marker) {
        /* A body arrived although a response is already queued: discard it. */
        *upload_data_size = 0;
        return MHD_YES;
    }
    *req_cls = &marker;

    enum handler hd = H_OTHER;
    if (strcmp(url, "/metrics") == 0)
        hd = H_METRICS;
    else if (strcmp(url, "/api/v1/raw") == 0)
        hd = H_RAW;
    else if (strcmp(url, "/api/v1/targets") == 0)
        hd = H_TARGETS;
    else if (strcmp(url, "/healthz") == 0)
        hd = H_HEALTHZ;
    else if (strcmp(url, "/") == 0)
        hd = H_INDEX;

    struct args_ctx args;
    args.n = 0;
    args.bytes = 0;
    args.too_many = false;
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, args_cb, &args);
    if (strlen(url) + args.bytes > MAX_URL_BYTES)
        return reply_error(h, c, hd, MHD_HTTP_URI_TOO_LONG, "request URL too long", NULL);

    const char *cl =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    if ((cl && strtoull(cl, NULL, 10) > MAX_BODY_BYTES) || te)
        return reply_error(h, c, hd, MHD_HTTP_CONTENT_TOO_LARGE, "request body too large", NULL);

    if (hd == H_OTHER)
        return reply_error(h, c, hd, MHD_HTTP_NOT_FOUND, "not found", NULL);
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return reply_error(h, c, hd, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed",
                           "GET, HEAD");
    if (h->token && hd != H_HEALTHZ && !token_ok(h, c))
        return reply_error(h, c, hd, MHD_HTTP_UNAUTHORIZED, "missing or wrong bearer token", NULL);
    if (args.too_many)
        return reply_error(h, c, hd, MHD_HTTP_BAD_REQUEST, "too many query parameters", NULL);
    if (hd != H_RAW && args.n > 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "unknown parameter \"%.64s\"", args.a[0].key);
        return reply_error(h, c, hd, MHD_HTTP_BAD_REQUEST, msg, NULL);
    }

    struct fs_buf b;
    switch (hd) {
    case H_METRICS:
        return do_metrics(h, c);
    case H_RAW:
        return do_raw(h, c, &args);
    case H_TARGETS:
        fs_buf_init(&b, MAX_JSON_BYTES);
        if (fs_api_targets(h->st, &b) != 0) {
            fs_buf_free(&b);
            return reply_error(h, c, hd, 500, "out of memory", NULL);
        }
        return reply(h, c, hd, 200, JSON_CTYPE, &b, NULL);
    case H_HEALTHZ:
        fs_buf_init(&b, 64);
        fs_buf_puts(&b, "{\"status\":\"ok\"}\n");
        return reply(h, c, hd, 200, JSON_CTYPE, &b, NULL);
    case H_INDEX:
        fs_buf_init(&b, MAX_JSON_BYTES);
        if (fs_api_index_html(h->st, &b) != 0) {
            fs_buf_free(&b);
            return reply_error(h, c, hd, 500, "out of memory", NULL);
        }
        return reply(h, c, hd, 200, "text/html; charset=utf-8", &b, NULL);
    default:
        return reply_error(h, c, hd, MHD_HTTP_NOT_FOUND, "not found", NULL);
    }
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
    pthread_mutex_init(&h->pool_lock, NULL);
    h->st = st;
    unsigned threads = o->threads ? o->threads : 2;
    unsigned maxconn = o->max_connections ? o->max_connections : 64;
    unsigned timeout = o->connection_timeout_s ? o->connection_timeout_s : 10;
    if (maxconn < threads)
        maxconn = threads;
    h->n_slots = threads + 1;
    h->slots = calloc(h->n_slots, sizeof *h->slots);
    if (!h->slots) {
        snprintf(errbuf, errlen, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < h->n_slots; i++) {
        h->slots[i].h = h;
        h->slots[i].pooled = true;
        fs_buf_init(&h->slots[i].plain, MAX_METRICS_BYTES);
        fs_buf_init(&h->slots[i].gz, MAX_METRICS_BYTES);
    }
    if (o->bearer_token && *o->bearer_token) {
        h->token = strdup(o->bearer_token);
        if (!h->token) {
            snprintf(errbuf, errlen, "out of memory");
            goto fail;
        }
        h->token_len = strlen(h->token);
    }

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

    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | MHD_USE_AUTO;
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

    /* Per client address: half the connections, so one scraper cannot take them all. */
    unsigned per_ip = maxconn / 2 ? maxconn / 2 : 1;
    struct MHD_OptionItem tls_opts[] = {
        {MHD_OPTION_HTTPS_MEM_KEY, 0, h->key},
        {MHD_OPTION_HTTPS_MEM_CERT, 0, h->cert},
        {MHD_OPTION_END, 0, NULL},
    };
    /* The logger goes first so that option errors are routed too. */
    h->d = MHD_start_daemon(
        flags, 0, NULL, NULL, handle, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_CONNECTION_LIMIT, maxconn, MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip,
        MHD_OPTION_CONNECTION_TIMEOUT, timeout, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)(64 * 1024), MHD_OPTION_ARRAY, tls ? tls_opts : &tls_opts[2], MHD_OPTION_END);
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

void
fs_http_stop(struct fs_http *h)
{
    if (!h)
        return;
    if (h->d)
        MHD_stop_daemon(h->d); /* destroys responses, so every slot is released */
    for (size_t i = 0; h->slots && i < h->n_slots; i++)
        slot_clear(&h->slots[i]);
    free(h->slots);
    if (h->token)
        explicit_bzero(h->token, h->token_len);
    free(h->token);
    free(h->cert);
    if (h->key)
        explicit_bzero(h->key, strlen(h->key));
    free(h->key);
    pthread_mutex_destroy(&h->pool_lock);
    free(h);
}
