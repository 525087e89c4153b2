/* The Prometheus query API client: a streaming parse of matrix and vector answers. */
#include "history/prom_query.h"
#include "util/decimal.h"
#include "util/url.h"

#include <curl/curl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "util/log.h"

/* ---- the answer's parser ---- */

/* What a container is, from where it sits in the document. */
enum role {
    R_SKIP,   /* anything we do not read (warnings, stats, unknown keys) */
    R_ROOT,   /* {"status":..,"data":..,"error":..} */
    R_DATA,   /* {"resultType":..,"result":..} */
    R_RESULT, /* [element, ...] */
    R_ELEM,   /* {"metric":{..},"values":[..]} or "value":[t,v] */
    R_METRIC, /* {"label":"value", ...} */
    R_VALUES, /* [[t,"v"], ...] */
    R_POINT,  /* [t, "v"] */
};

/* Which key of a map the next value belongs to. */
enum key {
    K_OTHER,
    K_STATUS,
    K_DATA,
    K_ERROR,
    K_ERROR_TYPE,
    K_RESULT_TYPE,
    K_RESULT,
    K_METRIC,
    K_VALUES,
    K_VALUE,
    K_LABEL,
};

struct frame {
    enum role role;
    enum key key; /* maps: the key being read */
    int index;    /* arrays: elements seen */
};

struct fs_prom_parser {
    yajl_handle y;
    fs_prom_series_cb cb;
    void *arg;
    uint64_t max_points, points, series;
    struct frame st[FS_PROM_MAX_DEPTH];
    int depth;
    bool ok_status, error_status, failed;
    int stopped;
    char status_text[64];
    char error_text[512];
    char why[160];
    /* The element being read: labels as offsets into lbuf, then its points. */
    char *lbuf;
    size_t llen, lcap;
    size_t loff[FS_PROM_MAX_LABELS][2];
    size_t n_labels;
    bool have_label_name;
    int64_t *ts;
    double *v;
    size_t n, cap;
    double pt_t; /* the point being read */
    bool pt_has_t;
};

static int
fail(struct fs_prom_parser *p, const char *fmt, ...)
{
    if (!p->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->why, sizeof p->why, fmt, ap);
        va_end(ap);
        p->failed = true;
    }
    return 0; /* tells yajl to stop */
}

static struct frame *
top(struct fs_prom_parser *p)
{
    return p->depth > 0 ? &p->st[p->depth - 1] : NULL;
}

/* The role of a container that begins where the parser stands. */
static enum role
child_role(const struct frame *f)
{
    if (!f)
        return R_ROOT;
    switch (f->role) {
    case R_ROOT:
        return f->key == K_DATA ? R_DATA : R_SKIP;
    case R_DATA:
        return f->key == K_RESULT ? R_RESULT : R_SKIP;
    case R_RESULT:
        return R_ELEM;
    case R_ELEM:
        return f->key == K_METRIC   ? R_METRIC
               : f->key == K_VALUES ? R_VALUES
               : f->key == K_VALUE  ? R_POINT
                                    : R_SKIP;
    case R_VALUES:
        return R_POINT;
    default:
        return R_SKIP;
    }
}

static int
push(struct fs_prom_parser *p, bool is_map)
{
    struct frame *f = top(p);
    enum role r = child_role(f);
    if (f && f->role == R_POINT)
        return fail(p, "a point holds a container");
    if (f && f->role == R_METRIC)
        return fail(p, "a label value is not a string");
    if (p->depth == FS_PROM_MAX_DEPTH)
        return fail(p, "nested deeper than %d", FS_PROM_MAX_DEPTH);
    bool want_map = r == R_ROOT || r == R_DATA || r == R_ELEM || r == R_METRIC;
    bool want_array = r == R_RESULT || r == R_VALUES || r == R_POINT;
    if ((want_map && !is_map) || (want_array && is_map))
        return fail(p, "unexpected %s", is_map ? "object" : "array");
    if (f && f->role != R_SKIP)
        f->index++;
    p->st[p->depth++] = (struct frame){r, K_OTHER, 0};
    if (r == R_ELEM) {
        p->llen = 0;
        p->n_labels = 0;
        p->n = 0;
    }
    if (r == R_POINT)
        p->pt_has_t = false;
    return 1;
}

static int
emit(struct fs_prom_parser *p)
{
    struct fs_prom_label l[FS_PROM_MAX_LABELS];
    for (size_t i = 0; i < p->n_labels; i++)
        l[i] = (struct fs_prom_label){p->lbuf + p->loff[i][0], p->lbuf + p->loff[i][1]};
    struct fs_prom_series s = {l, p->n_labels, p->ts, p->v, p->n};
    p->series++;
    int rc = p->cb ? p->cb(p->arg, &s) : 0;
    if (rc) {
        p->stopped = rc;
        return fail(p, "stopped (%d)", rc);
    }
    return 1;
}

static int
pop(struct fs_prom_parser *p)
{
    struct frame *f = top(p);
    if (!f)
        return fail(p, "unbalanced");
    if (f->role == R_POINT && f->index != 2)
        return fail(p, "a point is not [time, \"value\"]");
    if (f->role == R_METRIC && p->have_label_name)
        return fail(p, "a label without a value");
    int rc = 1;
    if (f->role == R_ELEM)
        rc = emit(p);
    p->depth--;
    return rc;
}

static int
cb_start_map(void *ctx)
{
    return push(ctx, true);
}

static int
cb_end_map(void *ctx)
{
    return pop(ctx);
}

static int
cb_start_array(void *ctx)
{
    return push(ctx, false);
}

static int
cb_end_array(void *ctx)
{
    return pop(ctx);
}

static int
cb_map_key(void *ctx, const unsigned char *k, size_t len)
{
    struct fs_prom_parser *p = ctx;
    struct frame *f = top(p);
    if (!f)
        return fail(p, "unbalanced");
#define IS(s) (len == sizeof(s) - 1 && memcmp(k, s, len) == 0)
    switch (f->role) {
    case R_ROOT:
        f->key = IS("status")      ? K_STATUS
                 : IS("data")      ? K_DATA
                 : IS("error")     ? K_ERROR
                 : IS("errorType") ? K_ERROR_TYPE
                                   : K_OTHER;
        break;
    case R_DATA:
        f->key = IS("resultType") ? K_RESULT_TYPE : IS("result") ? K_RESULT : K_OTHER;
        break;
    case R_ELEM:
        f->key = IS("metric")   ? K_METRIC
                 : IS("values") ? K_VALUES
                 : IS("value")  ? K_VALUE
                                : K_OTHER;
        break;
    case R_METRIC: {
        if (p->n_labels == FS_PROM_MAX_LABELS)
            return fail(p, "a series has more than %d labels", FS_PROM_MAX_LABELS);
        if (len > FS_PROM_MAX_STRING)
            return fail(p, "a label name is longer than %d bytes", FS_PROM_MAX_STRING);
        if (p->llen + len + 1 > p->lcap) {
            size_t cap = p->lcap ? p->lcap * 2 : 1024;
            while (cap < p->llen + len + 1)
                cap *= 2;
            char *b = realloc(p->lbuf, cap);
            if (!b)
                return fail(p, "out of memory");
            p->lbuf = b;
            p->lcap = cap;
        }
        p->loff[p->n_labels][0] = p->llen;
        memcpy(p->lbuf + p->llen, k, len);
        p->lbuf[p->llen + len] = '\0';
        p->llen += len + 1;
        p->have_label_name = true;
        f->key = K_LABEL;
        break;
    }
    default:
        f->key = K_OTHER;
    }
#undef IS
    return 1;
}

static void
copy_text(char *dst, size_t cap, const unsigned char *s, size_t len)
{
    size_t k = len < cap - 1 ? len : cap - 1;
    memcpy(dst, s, k);
    dst[k] = '\0';
}

static int
add_point(struct fs_prom_parser *p, double t, double v)
{
    if (p->max_points && p->points >= p->max_points)
        return fail(p, "more than %llu points", (unsigned long long)p->max_points);
    if (!isfinite(t) || t < -9.2e12 || t > 9.2e12)
        return fail(p, "a point's time is out of range");
    int64_t us = llround(t * 1e6);
    p->points++;
    if (p->n && us <= p->ts[p->n - 1])
        return 1; /* out of order or repeated: the analysis needs ascending times */
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 1024;
        int64_t *ts = realloc(p->ts, cap * sizeof *ts);
        if (!ts)
            return fail(p, "out of memory");
        p->ts = ts;
        double *vv = realloc(p->v, cap * sizeof *vv);
        if (!vv)
            return fail(p, "out of memory");
        p->v = vv;
        p->cap = cap;
    }
    p->ts[p->n] = us;
    p->v[p->n] = v;
    p->n++;
    return 1;
}

/* A number: only a point's time is one. */
static int
cb_number(void *ctx, const char *s, size_t len)
{
    struct fs_prom_parser *p = ctx;
    struct frame *f = top(p);
    if (!f || f->role == R_SKIP || (f->role != R_POINT && f->key == K_OTHER))
        return 1;
    if (f->role != R_POINT || f->index != 0)
        return fail(p, "unexpected number");
    if (len >= 64)
        return fail(p, "a point's time is too long");
    if (!fs_decimal_parse(s, len, &p->pt_t))
        return fail(p, "a point's time is not a number");
    p->pt_has_t = true;
    f->index++;
    return 1;
}

static int
cb_string(void *ctx, const unsigned char *s, size_t len)
{
    struct fs_prom_parser *p = ctx;
    struct frame *f = top(p);
    if (!f || f->role == R_SKIP)
        return 1;
    switch (f->role) {
    case R_ROOT:
        if (f->key == K_STATUS) {
            copy_text(p->status_text, sizeof p->status_text, s, len);
            p->ok_status = strcmp(p->status_text, "success") == 0;
            p->error_status = strcmp(p->status_text, "error") == 0;
        } else if (f->key == K_ERROR) {
            copy_text(p->error_text, sizeof p->error_text, s, len);
        } else if (f->key == K_DATA) {
            return fail(p, "data is not an object");
        }
        return 1;
    case R_DATA:
        if (f->key == K_RESULT_TYPE && !(len == 6 && !memcmp(s, "matrix", 6)) &&
            !(len == 6 && !memcmp(s, "vector", 6)))
            return fail(p, "resultType %.*s is not matrix or vector", (int)(len < 20 ? len : 20),
                        (const char *)s);
        if (f->key == K_RESULT)
            return fail(p, "result is not an array");
        return 1;
    case R_METRIC:
        if (!p->have_label_name)
            return fail(p, "a label value without a name");
        if (len > FS_PROM_MAX_STRING)
            return fail(p, "a label value is longer than %d bytes", FS_PROM_MAX_STRING);
        if (p->llen + len + 1 > p->lcap) {
            size_t cap = p->lcap ? p->lcap * 2 : 1024;
            while (cap < p->llen + len + 1)
                cap *= 2;
            char *b = realloc(p->lbuf, cap);
            if (!b)
                return fail(p, "out of memory");
            p->lbuf = b;
            p->lcap = cap;
        }
        p->loff[p->n_labels][1] = p->llen;
        memcpy(p->lbuf + p->llen, s, len);
        p->lbuf[p->llen + len] = '\0';
        p->llen += len + 1;
        p->n_labels++;
        p->have_label_name = false;
        return 1;
    case R_POINT: {
        if (f->index != 1 || !p->pt_has_t)
            return fail(p, "a point is not [time, \"value\"]");
        if (len >= 64)
            return fail(p, "a point's value is too long");
        double v;
        if (!fs_decimal_parse((const char *)s, len, &v))
            return fail(p, "a point's value \"%.*s\" is not a number", (int)len, (const char *)s);
        f->index++;
        return add_point(p, p->pt_t, v);
    }
    case R_ELEM:
        if (f->key == K_OTHER)
            return 1;
        return fail(p, "unexpected string");
    default:
        return fail(p, "unexpected string");
    }
}

/* null and booleans: fine where we skip, wrong where we read. */
static int
cb_scalar(struct fs_prom_parser *p)
{
    struct frame *f = top(p);
    if (!f || f->role == R_SKIP || (f->role != R_POINT && f->role != R_METRIC && f->key == K_OTHER))
        return 1;
    return fail(p, "unexpected null or boolean");
}

static int
cb_null(void *ctx)
{
    return cb_scalar(ctx);
}

static int
cb_boolean(void *ctx, int b)
{
    (void)b;
    return cb_scalar(ctx);
}

static const yajl_callbacks callbacks = {
    cb_null,      cb_boolean, NULL,       NULL,           cb_number,    cb_string,
    cb_start_map, cb_map_key, cb_end_map, cb_start_array, cb_end_array,
};

struct fs_prom_parser *
fs_prom_parser_new(fs_prom_series_cb cb, void *arg, uint64_t max_points)
{
    struct fs_prom_parser *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->cb = cb;
    p->arg = arg;
    p->max_points = max_points;
    if (!(p->y = yajl_alloc(&callbacks, NULL, p))) {
        free(p);
        return NULL;
    }
    return p;
}

void
fs_prom_parser_free(struct fs_prom_parser *p)
{
    if (!p)
        return;
    yajl_free(p->y);
    free(p->lbuf);
    free(p->ts);
    free(p->v);
    free(p);
}

static void
syntax_error(struct fs_prom_parser *p, const char *buf, size_t len)
{
    unsigned char *e = yajl_get_error(p->y, 0, (const unsigned char *)buf, len);
    fail(p, "not JSON: %s", e ? (const char *)e : "syntax error");
    if (e)
        yajl_free_error(p->y, e);
}

int
fs_prom_parser_feed(struct fs_prom_parser *p, const char *buf, size_t len)
{
    if (p->failed)
        return -1;
    if (yajl_parse(p->y, (const unsigned char *)buf, len) != yajl_status_ok) {
        if (!p->failed)
            syntax_error(p, buf, len);
        return -1;
    }
    return 0;
}

int
fs_prom_parser_finish(struct fs_prom_parser *p, uint64_t *points, uint64_t *series, char *err,
                      size_t errlen)
{
    if (!p->failed && yajl_complete_parse(p->y) != yajl_status_ok && !p->failed)
        syntax_error(p, NULL, 0);
    if (points)
        *points = p->points;
    if (series)
        *series = p->series;
    if (p->failed) {
        snprintf(err, errlen, "%s", p->why);
        return -1;
    }
    if (p->error_status) {
        snprintf(err, errlen, "the server answered: %s",
                 p->error_text[0] ? p->error_text : "error (no reason given)");
        return -1;
    }
    if (!p->ok_status) {
        snprintf(err, errlen, "the answer has no status \"success\"");
        return -1;
    }
    return 0;
}

int
fs_prom_parser_stopped(const struct fs_prom_parser *p)
{
    return p->stopped;
}

/* ---- the HTTP client ---- */

struct fs_prom_client {
    struct fs_history_cfg *cfg;
    CURL *curl;
    pthread_mutex_t lock;
    /* The further connections fs_prom_client_conn hands out, made on first use and kept
       (with their connection to the server) until c is freed; c owns them. */
    struct fs_prom_client *more[FS_PROM_CONNS - 1];
    const atomic_bool *cancel; /* the owner's; NULL: never cancelled */
};

void
fs_prom_client_set_cancel(struct fs_prom_client *c, const atomic_bool *cancel)
{
    c->cancel = cancel;
    for (size_t i = 0; i < FS_PROM_CONNS - 1; i++)
        if (c->more[i])
            c->more[i]->cancel = cancel;
}

static bool
cancelled(const struct fs_prom_client *c)
{
    return c->cancel && atomic_load(c->cancel);
}

/* libcurl calls it about once a second while nothing arrives, more often while it does. */
static int
cancel_cb(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    return cancelled(arg);
}

struct fs_prom_client *
fs_prom_client_conn(struct fs_prom_client *c, size_t i, char *err, size_t errlen)
{
    if (i == 0)
        return c;
    if (i >= FS_PROM_CONNS) {
        snprintf(err, errlen, "no connection %zu (at most %d)", i, FS_PROM_CONNS);
        return NULL;
    }
    if (!c->more[i - 1] && (c->more[i - 1] = fs_prom_client_new(c->cfg, err, errlen)))
        c->more[i - 1]->cancel = c->cancel;
    return c->more[i - 1];
}

struct fs_prom_client *
fs_prom_client_new(const struct fs_history_cfg *cfg, char *err, size_t errlen)
{
    struct fs_prom_client *c = calloc(1, sizeof *c);
    if (!c || !(c->cfg = fs_history_cfg_copy(cfg)) || !(c->curl = curl_easy_init())) {
        snprintf(err, errlen, "out of memory");
        fs_prom_client_free(c);
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

void
fs_prom_client_free(struct fs_prom_client *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < FS_PROM_CONNS - 1; i++)
        fs_prom_client_free(c->more[i]);
    if (c->curl) {
        curl_easy_cleanup(c->curl);
        pthread_mutex_destroy(&c->lock);
    }
    fs_history_cfg_free(c->cfg);
    free(c);
}

struct transfer {
    struct fs_prom_parser *p;
    uint64_t bytes, max_bytes;
    bool too_big;
    char head[160]; /* the body's first bytes, for an error that is not JSON */
    size_t head_len;
};

static size_t
write_cb(char *buf, size_t size, size_t n, void *arg)
{
    struct transfer *t = arg;
    size_t len = size * n;
    if (t->head_len < sizeof t->head - 1) {
        size_t k = sizeof t->head - 1 - t->head_len;
        k = k < len ? k : len;
        memcpy(t->head + t->head_len, buf, k);
        t->head_len += k;
        t->head[t->head_len] = '\0';
    }
    t->bytes += len;
    if (t->max_bytes && t->bytes > t->max_bytes) {
        t->too_big = true;
        return 0;
    }
    return fs_prom_parser_feed(t->p, buf, len) == 0 ? len : 0;
}

void
fs_prom_url_host(const char *url, char *out, size_t len)
{
    struct fs_url_parts p;
    fs_url_authority(url, strlen(url), false, &p);
    size_t k = p.end - p.host;
    snprintf(out, len, "%.*s", (int)(k < 200 ? k : 200), url + p.host);
}

static int
get(struct fs_prom_client *c, const char *path_and_query, uint64_t max_points, fs_prom_series_cb cb,
    void *arg, char *err, size_t errlen)
{
    const struct fs_history_cfg *cfg = c->cfg;
    char host[256], token[4096], password[1024], line[4400], e2[384] = "";
    struct curl_slist *hdrs = NULL, *t;
    struct fs_prom_parser *p = NULL;
    char *url = NULL;
    int rc = -1;

    fs_prom_url_host(cfg->url, host, sizeof host);
    if (cancelled(c)) {
        snprintf(err, errlen, "history %s: read cancelled", host);
        return -1;
    }
    size_t ul = strlen(cfg->url);
    while (ul && cfg->url[ul - 1] == '/')
        ul--;
    if (!(url = malloc(ul + strlen(path_and_query) + 1)) ||
        !(p = fs_prom_parser_new(cb, arg, max_points))) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    memcpy(url, cfg->url, ul);
    strcpy(url + ul, path_and_query);
    if (cfg->bearer_token.file || cfg->bearer_token.env) {
        if (fs_secret_read(&cfg->bearer_token, token, sizeof token, err, errlen) != 0)
            goto out;
        snprintf(line, sizeof line, "Authorization: Bearer %s", token);
        if (!(t = curl_slist_append(hdrs, line)))
            goto nomem;
        hdrs = t;
    }
    if (!(t = curl_slist_append(hdrs, "Accept: application/json")))
        goto nomem;
    hdrs = t;
    for (size_t i = 0; i < cfg->n_headers; i++) {
        snprintf(line, sizeof line, "%s: %s", cfg->headers[i].key, cfg->headers[i].value);
        if (!(t = curl_slist_append(hdrs, line)))
            goto nomem;
        hdrs = t;
    }
    CURL *h = c->curl;
    curl_easy_reset(h);
    long timeout_ms = (long)(cfg->remote_timeout_us / 1000);
    struct transfer tr = {p, 0, max_points ? max_points * 96 + (64u << 20) : 0, false, "", 0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 10000 ? timeout_ms : 10000L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "fabricscope/" FS_VERSION);
    /* No Accept-Encoding unless asked for (analysis.history.compression): the server's
       gzip is slower than any LAN. */
    if (cfg->compression)
        curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &tr);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (c->cancel) {
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, cancel_cb);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    }
    if (cfg->basic_auth_username) {
        if (fs_secret_read(&cfg->basic_auth_password, password, sizeof password, err, errlen) != 0)
            goto out;
        curl_easy_setopt(h, CURLOPT_USERNAME, cfg->basic_auth_username);
        curl_easy_setopt(h, CURLOPT_PASSWORD, password);
        curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
    }
    if (cfg->tls_ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, cfg->tls_ca_file);
    if (cfg->tls_cert_file) {
        curl_easy_setopt(h, CURLOPT_SSLCERT, cfg->tls_cert_file);
        curl_easy_setopt(h, CURLOPT_SSLKEY, cfg->tls_key_file);
    }
    if (cfg->tls_insecure_skip_verify) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    CURLcode cc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    /* The secrets leave the handle with the request. */
    curl_easy_setopt(h, CURLOPT_PASSWORD, "");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    if (tr.too_big) {
        snprintf(err, errlen, "history %s: the answer is larger than %llu bytes", host,
                 (unsigned long long)tr.max_bytes);
        goto out;
    }
    uint64_t pts = 0, nser = 0;
    int prc = fs_prom_parser_finish(p, &pts, &nser, e2, sizeof e2);
    if (fs_log_get_level() == FS_LOG_DEBUG) {
        /* Where a request's time goes: the server's first byte, the whole answer (parsed
           as it arrived, so the rest is transfer and parse). */
        double first = 0, total = 0;
        curl_off_t bytes = 0;
        curl_easy_getinfo(h, CURLINFO_STARTTRANSFER_TIME, &first);
        curl_easy_getinfo(h, CURLINFO_TOTAL_TIME, &total);
        curl_easy_getinfo(h, CURLINFO_SIZE_DOWNLOAD_T, &bytes);
        fs_log(FS_LOG_DEBUG, "history",
               "%s %.160s: HTTP %ld, first byte %.0f ms, done %.0f ms, %lld bytes, %llu series, "
               "%llu points",
               host, path_and_query, status, first * 1e3, total * 1e3, (long long)bytes,
               (unsigned long long)nser, (unsigned long long)pts);
    }
    if (fs_prom_parser_stopped(p)) {
        snprintf(err, errlen, "%s", e2);
        goto out;
    }
    if (cc == CURLE_ABORTED_BY_CALLBACK) {
        snprintf(err, errlen, "history %s: read cancelled", host);
        goto out;
    }
    if (cc != CURLE_OK && cc != CURLE_WRITE_ERROR) {
        snprintf(err, errlen, "history %s: %s", host, curl_easy_strerror(cc));
        goto out;
    }
    if (status != 200) {
        /* The server's error document when it sent one, else its first line. */
        if (prc && strncmp(e2, "the server answered: ", 21) != 0) {
            size_t k = strcspn(tr.head, "\r\n");
            snprintf(e2, sizeof e2, "%.*s", (int)(k < 120 ? k : 120), tr.head);
            for (char *q = e2; *q; q++)
                if ((unsigned char)*q < 0x20 || (unsigned char)*q > 0x7e)
                    *q = '?';
        }
        snprintf(err, errlen, "history %s: HTTP %ld%s%s", host, status, e2[0] ? ": " : "",
                 e2[0] ? e2 : "");
        goto out;
    }
    if (prc) {
        snprintf(err, errlen, "history %s: %s", host, e2);
        goto out;
    }
    rc = 0;
    goto out;
nomem:
    snprintf(err, errlen, "out of memory");
out:
    memset(token, 0, sizeof token);
    memset(password, 0, sizeof password);
    memset(line, 0, sizeof line);
    curl_slist_free_all(hdrs);
    fs_prom_parser_free(p);
    free(url);
    return rc;
}

/* Seconds with millisecond precision, as the API takes them. */
static void
api_time(char *out, size_t len, int64_t us)
{
    snprintf(out, len, "%lld.%03lld", (long long)(us / 1000000),
             (long long)((us % 1000000) / 1000));
}

int
fs_prom_query_range(struct fs_prom_client *c, const char *query, int64_t start_us, int64_t end_us,
                    int64_t step_us, uint64_t max_points, fs_prom_series_cb cb, void *arg,
                    char *err, size_t errlen)
{
    char s[32], e[32], st[32];
    api_time(s, sizeof s, start_us);
    api_time(e, sizeof e, end_us);
    api_time(st, sizeof st, step_us > 1000 ? step_us : 1000);
    pthread_mutex_lock(&c->lock);
    char *q = curl_easy_escape(c->curl, query, 0);
    char *pq = NULL;
    int rc = -1;
    if (q) {
        size_t len = strlen(q) + 128;
        if ((pq = malloc(len)))
            snprintf(pq, len, "/api/v1/query_range?query=%s&start=%s&end=%s&step=%s", q, s, e, st);
    }
    if (!pq)
        snprintf(err, errlen, "out of memory");
    else
        rc = get(c, pq, max_points, cb, arg, err, errlen);
    pthread_mutex_unlock(&c->lock);
    curl_free(q);
    free(pq);
    return rc;
}

int
fs_prom_query_instant(struct fs_prom_client *c, const char *query, int64_t at_us,
                      uint64_t max_points, fs_prom_series_cb cb, void *arg, char *err,
                      size_t errlen)
{
    char at[32];
    api_time(at, sizeof at, at_us);
    pthread_mutex_lock(&c->lock);
    char *q = curl_easy_escape(c->curl, query, 0);
    char *pq = NULL;
    int rc = -1;
    if (q) {
        size_t len = strlen(q) + 64;
        if ((pq = malloc(len)))
            snprintf(pq, len, "/api/v1/query?query=%s&time=%s", q, at);
    }
    if (!pq)
        snprintf(err, errlen, "out of memory");
    else
        rc = get(c, pq, max_points, cb, arg, err, errlen);
    pthread_mutex_unlock(&c->lock);
    curl_free(q);
    free(pq);
    return rc;
}
