/*
 * The HTTP endpoint over real loopback sockets: status codes and JSON error bodies for
 * each class of bad request, gzip of /metrics (inflated with zlib), raw query results
 * against what was pushed, /api/v1/targets, the HTML index, and the bearer token.
 */
#include <arpa/inet.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "http/analysis_api.h"
#include "http/api.h"
#include "http/http.h"
#include "store/store.h"
#include "synth.h"
#include "util/clock.h"

/* ASan keeps freed blocks in a quarantine (256 MB by default) that shows as RSS; the
 * RSS bound of test_raw_nonreading_clients is about memory held, so keep it small. */
const char *__asan_default_options(void);
const char *
__asan_default_options(void)
{
    return "quarantine_size_mb=4";
}

/* A fixed past time for ring samples (2024-12-02T09:00:00Z). */
#define T0 1733130000000000LL

struct fixture {
    struct fs_store *st;
    struct fs_target_cfg t;
    struct fs_kv labels[1];
    struct fs_sink *sink;
    struct fs_http *h;
    uint16_t port;
};

struct resp {
    int status;
    char *headers; /* raw header block, lower-cased */
    char *body;
    size_t body_len;
};

static void
resp_free(struct resp *r)
{
    free(r->headers);
    free(r->body);
    memset(r, 0, sizeof *r);
}

/* Sends raw request text and reads the whole answer (the request says Connection: close). */
static struct resp
http_raw(uint16_t port, const char *req, size_t req_len)
{
    struct resp r = {0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    size_t off = 0;
    while (off < req_len) {
        ssize_t n = send(fd, req + off, req_len - off, MSG_NOSIGNAL);
        if (n <= 0)
            break; /* the server may answer and close before reading a large body */
        off += (size_t)n;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (len + 4096 > cap)
            buf = realloc(buf, cap *= 2);
        ssize_t n = recv(fd, buf + len, cap - len - 1, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    buf[len] = '\0';
    char *end = strstr(buf, "\r\n\r\n");
    assert_non_null(end);
    assert_int_equal(sscanf(buf, "HTTP/1.1 %d", &r.status), 1);
    size_t hl = (size_t)(end - buf);
    r.headers = strndup(buf, hl);
    for (char *p = r.headers; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    r.body_len = len - hl - 4;
    r.body = malloc(r.body_len + 1);
    memcpy(r.body, end + 4, r.body_len);
    r.body[r.body_len] = '\0';
    free(buf);
    return r;
}

static struct resp
http_req(uint16_t port, const char *method, const char *target, const char *extra_headers)
{
    size_t cap = strlen(target) + 512 + (extra_headers ? strlen(extra_headers) : 0);
    char *req = malloc(cap);
    int n = snprintf(req, cap, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s\r\n",
                     method, target, extra_headers ? extra_headers : "");
    struct resp r = http_raw(port, req, (size_t)n);
    free(req);
    return r;
}

static struct resp
get(uint16_t port, const char *target)
{
    return http_req(port, "GET", target, NULL);
}

static void
has_header(const struct resp *r, const char *h)
{
    if (!strstr(r->headers, h))
        fail_msg("header \"%s\" missing in:\n%s", h, r->headers);
}

/* The answer is status with {"status":"error","error":"...<why>..."} as JSON. */
static void
expect_error(struct resp r, int status, const char *why)
{
    if (r.status != status)
        fail_msg("status %d, expected %d; body: %s", r.status, status, r.body);
    has_header(&r, "content-type: application/json");
    json_object *o = json_tokener_parse(r.body);
    if (!o)
        fail_msg("not JSON: %s", r.body);
    json_object *s, *e;
    assert_true(json_object_object_get_ex(o, "status", &s));
    assert_string_equal(json_object_get_string(s), "error");
    assert_true(json_object_object_get_ex(o, "error", &e));
    if (why && !strstr(json_object_get_string(e), why))
        fail_msg("error \"%s\" lacks \"%s\"", json_object_get_string(e), why);
    json_object_put(o);
    resp_free(&r);
}

static void
push(struct fixture *f, int64_t ts, uint64_t bytes, double depth)
{
    struct fs_label rx[2] = {{"interface", "Eth1/1"}, {"direction", "rx"}};
    struct fs_label q[2] = {{"interface", "Eth1/1"}, {"tc", "3"}};
    fs_sink_begin(f->sink, ts);
    fs_sink_counter(f->sink, FS_M_PORT_BYTES, rx, 2, bytes, 64);
    fs_sink_gauge(f->sink, FS_M_QUEUE_DEPTH, q, 2, depth);
    struct fs_label pfc[3] = {{"interface", "Eth1/1"}, {"direction", "rx"}, {"priority", "3"}};
    fs_sink_counter_scaled(f->sink, FS_M_PFC_PAUSE_SECONDS, pfc, 3, 1500, 64, 1e-3);
    fs_sink_end(f->sink);
}

static int
setup_opts(void **state, const char *token)
{
    struct fixture *f = calloc(1, sizeof *f);
    char err[256];
    struct fs_ring_opts ro = {.memory_limit = 64 << 20, .retention_us = 1000LL * 86400 * 1000000};
    f->st = fs_store_new(&ro, err, sizeof err);
    assert_non_null(f->st);
    f->t.name = "tor<1>&";
    f->t.address = "127.0.0.1";
    f->labels[0] = (struct fs_kv){"pod", "p1"};
    f->t.labels = f->labels;
    f->t.n_labels = 1;
    f->t.staleness_intervals = 3;
    f->sink = fs_store_sink_add(f->st, &f->t, "snmp", 10 * 1000000LL);
    assert_non_null(f->sink);
    /* A detail longer than any fixed buffer: members after 4 KB must still arrive. */
    {
        char d[6000];
        int n = snprintf(d, sizeof d, "\"engine_id\":\"80001f88\",\"long\":\"");
        memset(d + n, 'x', 5000);
        snprintf(d + n + 5000, sizeof d - (size_t)n - 5000, "\",\"pdus\":12");
        fs_sink_set_detail(f->sink, d);
    }
    /* History in the past for raw queries, then a fresh sample for /metrics. */
    push(f, T0, 100, 0);
    push(f, T0 + 1000001, 200, 1.5);
    push(f, T0 + 2000002, 18446744073709551615ULL, 2.25);
    push(f, fs_synth_now_us(), 18446744073709551615ULL, 3);
    fs_sink_done(f->sink, 0, FS_POLL_OK, NULL);
    struct fs_http_opts o = {.host = "127.0.0.1", .port = 0, .bearer_token = token, .threads = 2};
    f->h = fs_http_start(&o, f->st, err, sizeof err);
    if (!f->h)
        fail_msg("fs_http_start: %s", err);
    f->port = fs_http_port(f->h);
    assert_true(f->port > 0);
    *state = f;
    return 0;
}

static int
setup(void **state)
{
    return setup_opts(state, NULL);
}

static int
setup_token(void **state)
{
    return setup_opts(state, "s3cret-token");
}

static int
teardown(void **state)
{
    struct fixture *f = *state;
    fs_http_stop(f->h);
    fs_store_sink_remove(f->st, f->sink);
    fs_store_free(f->st);
    free(f);
    return 0;
}

static void
test_healthz(void **state)
{
    struct fixture *f = *state;
    struct resp r = get(f->port, "/healthz");
    assert_int_equal(r.status, 200);
    has_header(&r, "content-type: application/json");
    assert_string_equal(r.body, "{\"status\":\"ok\"}\n");
    resp_free(&r);
    r = http_req(f->port, "HEAD", "/healthz", NULL);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 0);
    resp_free(&r);
}

static void
test_bad_requests(void **state)
{
    struct fixture *f = *state;
    expect_error(get(f->port, "/nope"), 404, "not found");
    expect_error(get(f->port, "/metrics/"), 404, NULL);
    struct resp r = http_req(f->port, "POST", "/metrics", "Content-Length: 0\r\n");
    has_header(&r, "allow: get, head");
    expect_error(r, 405, "method");
    expect_error(http_req(f->port, "DELETE", "/api/v1/raw?match[]=up", NULL), 405, NULL);
    expect_error(get(f->port, "/metrics?debug=1"), 400, "unknown parameter \"debug\"");
    expect_error(get(f->port, "/healthz?x"), 400, "unknown parameter");
    expect_error(get(f->port, "/api/v1/raw"), 400, "match[] is required");
    expect_error(get(f->port, "/api/v1/raw?match[]=up&foo=bar"), 400, "unknown parameter \"foo\"");
    expect_error(get(f->port, "/api/v1/raw?match[]=up%7B"), 400, "bad selector");
    expect_error(get(f->port, "/api/v1/raw?match[]=%7B%7D"), 400, "bad selector");
    expect_error(get(f->port, "/api/v1/raw?match[]=up%7Ba%3D~%22(%22%7D"), 400, "bad regex");
    expect_error(get(f->port, "/api/v1/raw?match[]=up&start=yesterday"), 400, "start");
    expect_error(get(f->port, "/api/v1/raw?match[]=up&end=2024-13-01T00:00:00Z"), 400, "end");
    expect_error(get(f->port, "/api/v1/raw?match[]=up&start=2&end=1"), 400, "start is after end");
    expect_error(get(f->port, "/api/v1/raw?match[]=up&start=1&start=2"), 400, "twice");
    expect_error(get(f->port, "/api/v1/raw?match[]=up&limit=0"), 400, "limit");
    expect_error(get(f->port, "/api/v1/raw?match[]=up&limit=99999999999"), 400, "limit");
    /* Too many points: three samples in range, limit 2. */
    expect_error(get(f->port, "/api/v1/raw?match[]=fabric_port_bytes_total&start=1733130000"
                              "&end=1733130002.5&limit=2"),
                 400, "more than 2 points");

    /* An over-long URL (but one libmicrohttpd still reads) is 414. */
    size_t n = 12000;
    char *u = malloc(n + 64);
    strcpy(u, "/api/v1/raw?match[]=");
    size_t l = strlen(u);
    memset(u + l, 'a', n);
    u[l + n] = '\0';
    expect_error(get(f->port, u), 414, "too long");
    free(u);

    /* A body larger than any endpoint takes is 413, announced or chunked. */
    expect_error(http_req(f->port, "GET", "/metrics", "Content-Length: 1000000\r\n"), 413, "body");
    expect_error(http_req(f->port, "POST", "/api/v1/raw", "Transfer-Encoding: chunked\r\n"), 413,
                 "body");
}

static void
test_metrics_gzip(void **state)
{
    struct fixture *f = *state;
    struct resp plain = get(f->port, "/metrics");
    assert_int_equal(plain.status, 200);
    has_header(&plain, "content-type: text/plain; version=0.0.4; charset=utf-8");
    const char *line = "fabric_port_bytes_total{target=\"tor<1>&\",pod=\"p1\",interface=\"Eth1/1\","
                       "direction=\"rx\",source=\"snmp\"} 18446744073709551615\n";
    assert_non_null(strstr(plain.body, line));
    assert_null(strstr(plain.headers, "content-encoding"));

    struct resp gz = http_req(f->port, "GET", "/metrics", "Accept-Encoding: br, gzip\r\n");
    assert_int_equal(gz.status, 200);
    has_header(&gz, "content-encoding: gzip");
    has_header(&gz, "vary: accept-encoding");
    assert_true(gz.body_len > 10 && (unsigned char)gz.body[0] == 0x1f &&
                (unsigned char)gz.body[1] == 0x8b);
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    assert_int_equal(inflateInit2(&zs, 15 + 32), Z_OK);
    size_t cap = plain.body_len * 2 + 4096;
    char *out = malloc(cap);
    zs.next_in = (Bytef *)gz.body;
    zs.avail_in = (uInt)gz.body_len;
    zs.next_out = (Bytef *)out;
    zs.avail_out = (uInt)cap - 1;
    assert_int_equal(inflate(&zs, Z_FINISH), Z_STREAM_END);
    size_t olen = cap - 1 - zs.avail_out;
    out[olen] = '\0';
    inflateEnd(&zs);
    assert_non_null(strstr(out, line));
    /* Same text up to the self metrics, which move between two scrapes. */
    const char *cut = strstr(plain.body, "# HELP fabricscope_ring_retention_seconds");
    assert_non_null(cut);
    assert_memory_equal(out, plain.body, (size_t)(cut - plain.body));
    free(out);

    /* gzip;q=0 means no gzip. */
    struct resp q0 = http_req(f->port, "GET", "/metrics", "Accept-Encoding: gzip;q=0\r\n");
    assert_null(strstr(q0.headers, "content-encoding"));
    resp_free(&q0);
    /* Requests are counted. */
    struct resp again = get(f->port, "/metrics");
    assert_non_null(strstr(again.body, "fabricscope_http_requests_total{handler=\"metrics\","
                                       "code=\"200\"} 3\n"));
    resp_free(&again);
    resp_free(&plain);
    resp_free(&gz);
}

static json_object *
parse_success(struct resp *r)
{
    if (r->status != 200)
        fail_msg("status %d: %s", r->status, r->body);
    has_header(r, "content-type: application/json");
    json_object *o = json_tokener_parse(r->body);
    if (!o)
        fail_msg("not JSON: %s", r->body);
    json_object *s;
    assert_true(json_object_object_get_ex(o, "status", &s));
    assert_string_equal(json_object_get_string(s), "success");
    return o;
}

static void
test_raw(void **state)
{
    struct fixture *f = *state;
    struct resp r =
        get(f->port, "/api/v1/raw?match[]=fabric_port_bytes_total%7Binterface%3D%22Eth1%2F1%22%7D"
                     "&match[]=%7B__name__%3D~%22fabric_queue_.%2B%22%7D"
                     "&start=1733130000&end=2024-12-02T09:00:02.000002Z");
    json_object *o = parse_success(&r);
    /* Exact text of the values: µs timestamps and the full uint64. */
    assert_non_null(strstr(r.body, "\"values\":[[1733130000.000000,\"100\"],"
                                   "[1733130001.000001,\"200\"],"
                                   "[1733130002.000002,\"18446744073709551615\"]]"));
    assert_non_null(strstr(r.body, "[[1733130000.000000,\"0\"],[1733130001.000001,\"1.5\"],"
                                   "[1733130002.000002,\"2.25\"]]"));
    json_object *data, *rt, *res;
    assert_true(json_object_object_get_ex(o, "data", &data));
    assert_true(json_object_object_get_ex(data, "resultType", &rt));
    assert_string_equal(json_object_get_string(rt), "matrix");
    assert_true(json_object_object_get_ex(data, "result", &res));
    assert_int_equal(json_object_array_length(res), 2);
    json_object *m0 = json_object_array_get_idx(res, 0), *metric, *v;
    assert_true(json_object_object_get_ex(m0, "metric", &metric));
    assert_true(json_object_object_get_ex(metric, "__name__", &v));
    assert_string_equal(json_object_get_string(v), "fabric_port_bytes_total");
    assert_true(json_object_object_get_ex(metric, "target", &v));
    assert_string_equal(json_object_get_string(v), "tor<1>&");
    assert_true(json_object_object_get_ex(metric, "pod", &v));
    assert_true(json_object_object_get_ex(metric, "source", &v));
    json_object_put(o);
    resp_free(&r);

    /* A counter kept in milliseconds reads out in seconds, exactly. */
    r = get(f->port, "/api/v1/raw?match[]=fabric_pfc_pause_seconds_total"
                     "&start=1733130000&end=1733130000");
    o = parse_success(&r);
    assert_non_null(strstr(r.body, "\"values\":[[1733130000.000000,\"1.5\"]]"));
    json_object_put(o);
    resp_free(&r);

    /* A sub-range, RFC 3339 with an offset; no match gives an empty result. */
    r = get(f->port, "/api/v1/raw?match[]=fabric_port_bytes_total"
                     "&start=2024-12-02T10:00:00.5%2B01:00&end=1733130001.000001");
    o = parse_success(&r);
    assert_non_null(strstr(r.body, "\"values\":[[1733130001.000001,\"200\"]]"));
    json_object_put(o);
    resp_free(&r);
    r = get(f->port, "/api/v1/raw?match[]=nothing_here&start=0&end=1733130002");
    o = parse_success(&r);
    assert_non_null(strstr(r.body, "\"result\":[]"));
    json_object_put(o);
    resp_free(&r);
    /* Default range is the last 5 minutes: only the fresh sample. */
    r = get(f->port, "/api/v1/raw?match[]=fabric_port_bytes_total");
    o = parse_success(&r);
    data = json_object_object_get(o, "data");
    res = json_object_object_get(data, "result");
    assert_int_equal(json_object_array_length(res), 1);
    json_object *vals = json_object_object_get(json_object_array_get_idx(res, 0), "values");
    assert_int_equal(json_object_array_length(vals), 1);
    json_object_put(o);
    resp_free(&r);
}

static void
test_targets_and_index(void **state)
{
    struct fixture *f = *state;
    struct resp r = get(f->port, "/api/v1/targets");
    json_object *o = parse_success(&r);
    json_object *data = json_object_object_get(o, "data");
    assert_true(json_object_is_type(data, json_type_array));
    assert_int_equal(json_object_array_length(data), 1);
    json_object *t = json_object_array_get_idx(data, 0);
    assert_string_equal(json_object_get_string(json_object_object_get(t, "target")), "tor<1>&");
    assert_string_equal(json_object_get_string(json_object_object_get(t, "source")), "snmp");
    assert_string_equal(json_object_get_string(json_object_object_get(t, "state")), "up");
    assert_non_null(json_object_object_get(t, "last_poll"));
    assert_non_null(json_object_object_get(t, "last_poll_unix"));
    assert_int_equal(json_object_get_int(json_object_object_get(t, "series")), 3);
    assert_int_equal(json_object_get_int(json_object_object_get(t, "consecutive_failures")), 0);
    assert_string_equal(json_object_get_string(json_object_object_get(t, "engine_id")), "80001f88");
    assert_int_equal(json_object_get_int(json_object_object_get(t, "pdus")), 12);
    assert_int_equal(json_object_get_string_len(json_object_object_get(t, "long")), 5000);
    json_object *labels = json_object_object_get(t, "labels");
    assert_string_equal(json_object_get_string(json_object_object_get(labels, "pod")), "p1");
    json_object_put(o);
    resp_free(&r);

    /* The web view is a fixed page: its script fetches the data, so none is in it. */
    r = get(f->port, "/");
    assert_int_equal(r.status, 200);
    has_header(&r, "content-type: text/html; charset=utf-8");
    has_header(&r, "cache-control: no-cache");
    has_header(&r, "etag: \"");
    assert_null(strstr(r.body, "tor<1>"));
    assert_null(strstr(r.body, "tor&lt;1"));
    assert_non_null(strstr(r.body, "href=\"/metrics\""));
    assert_non_null(strstr(r.body, "src=\"/web/fabricscope.js\""));
    /* Revalidation: its ETag (also weak, also in a list) answers 304 without a body. */
    const char *e = strstr(r.headers, "etag: \"");
    assert_non_null(e);
    char etag[80], inm[200];
    size_t el = strcspn(e + 6, "\r\n");
    assert_true(el < sizeof etag);
    memcpy(etag, e + 6, el);
    etag[el] = '\0';
    resp_free(&r);
    snprintf(inm, sizeof inm, "If-None-Match: \"other\", W/%s\r\n", etag);
    r = http_req(f->port, "GET", "/", inm);
    assert_int_equal(r.status, 304);
    assert_int_equal(r.body_len, 0);
    resp_free(&r);
    r = http_req(f->port, "GET", "/", "If-None-Match: \"other\"\r\n");
    assert_int_equal(r.status, 200);
    resp_free(&r);
    r = get(f->port, "/web/fabricscope.js");
    assert_int_equal(r.status, 200);
    has_header(&r, "content-type: text/javascript; charset=utf-8");
    assert_non_null(strstr(r.body, "/api/v1/raw"));
    resp_free(&r);
    expect_error(get(f->port, "/web/missing.js"), 404, "not found");
}

static void
test_bearer(void **state)
{
    struct fixture *f = *state;
    struct resp r = get(f->port, "/metrics");
    has_header(&r, "www-authenticate: bearer");
    expect_error(r, 401, "token");
    expect_error(http_req(f->port, "GET", "/api/v1/targets", "Authorization: Bearer wrong\r\n"),
                 401, NULL);
    expect_error(
        http_req(f->port, "GET", "/api/v1/targets", "Authorization: Bearer s3cret-token2\r\n"), 401,
        NULL);
    expect_error(
        http_req(f->port, "GET", "/api/v1/raw", "Authorization: Basic czNjcmV0LXRva2Vu\r\n"), 401,
        NULL);
    /* The web view's files hold no data and a browser cannot send a token with a page
     * load: they are served without it (the script sends it with every data request). */
    r = get(f->port, "/");
    assert_int_equal(r.status, 200);
    resp_free(&r);
    r = http_req(f->port, "GET", "/metrics", "Authorization: Bearer s3cret-token\r\n");
    assert_int_equal(r.status, 200);
    resp_free(&r);
    r = get(f->port, "/healthz");
    assert_int_equal(r.status, 200);
    resp_free(&r);
}

/* The analysis endpoints: routes, methods, their own token for the post, the body
 * bound (from Content-Length and while a chunked body is read), /api/v1/time. */
static void
test_analysis_routes(void **state)
{
    struct fixture *f = *state;
    /* Without an analysis context they do not exist. */
    expect_error(get(f->port, "/api/v1/correlate"), 404, "not found");
    expect_error(get(f->port, "/api/v1/time"), 404, "not found");

    char err[256];
    struct fs_host_events_opts ho = {.memory_limit = 64 << 20, .retention_ns = 3600LL * 1000000000};
    struct fs_analysis *an = fs_analysis_new(&ho, err, sizeof err);
    assert_non_null(an);
    struct fs_http_opts o = {.host = "127.0.0.1", .bearer_token = "s3cret-token", .analysis = an};
    struct fs_http *h = fs_http_start(&o, f->st, err, sizeof err);
    if (!h)
        fail_msg("fs_http_start: %s", err);
    uint16_t port = fs_http_port(h);
    const char *auth = "Authorization: Bearer s3cret-token\r\n";
    char now[32], later[32], body[512], req[1024];
    snprintf(now, sizeof now, "%lld", (long long)fs_realtime_us() * 1000);
    snprintf(later, sizeof later, "%lld", (long long)fs_realtime_us() * 1000 + 1000000);
    snprintf(body, sizeof body,
             "{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":0,\"events\":[{\"host\":"
             "\"h\",\"kind\":\"nccl.kernel\",\"name\":\"AllReduce\",\"start\":%s,\"end\":%s}]}",
             now, later);
#define POST(extra)                                                                                \
    (snprintf(req, sizeof req,                                                                     \
              "POST /api/v1/host-events HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s"            \
              "Content-Length: %zu\r\n\r\n%s",                                                     \
              extra, strlen(body), body),                                                          \
     http_raw(port, req, strlen(req)))

    /* No host_events token yet: 403, whatever the client sends. */
    expect_error(POST("Authorization: Bearer s3cret-token\r\n"), 403, "no bearer token");
    assert_int_equal(fs_analysis_set_token(an, "post-token"), 0);
    /* The endpoint's token is not the post's. */
    struct resp r = POST("Authorization: Bearer s3cret-token\r\n");
    has_header(&r, "www-authenticate: bearer");
    expect_error(r, 401, "token");
    r = POST("Authorization: Bearer post-token\r\n");
    if (r.status != 200 || !strstr(r.body, "\"stored\":1"))
        fail_msg("post: %d %s", r.status, r.body);
    resp_free(&r);
    /* Too large by its Content-Length: refused before the body. */
    expect_error(http_req(port, "POST", "/api/v1/host-events",
                          "Authorization: Bearer post-token\r\nContent-Length: 33554433\r\n"),
                 413, "too large");
    /* Too large while a chunked body is read. */
    size_t big = FS_HOST_EVENTS_MAX_BODY + 1;
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "POST /api/v1/host-events HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                      "Authorization: Bearer post-token\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "%zx\r\n",
                      big);
    char *chunked = malloc((size_t)hl + big + 16);
    assert_non_null(chunked);
    memcpy(chunked, head, (size_t)hl);
    memset(chunked + hl, ' ', big);
    memcpy(chunked + hl + big, "\r\n0\r\n\r\n", 7);
    expect_error(http_raw(port, chunked, (size_t)hl + big + 7), 413, "too large");
    free(chunked);
    /* Methods. */
    r = http_req(port, "GET", "/api/v1/host-events", auth);
    has_header(&r, "allow: post");
    expect_error(r, 405, "method");
    r = http_req(port, "POST", "/api/v1/correlate", auth);
    has_header(&r, "allow: get, head");
    expect_error(r, 405, "method");
    /* /api/v1/time needs no token; receive <= send, both now. */
    int64_t before = fs_realtime_us() * 1000;
    r = get(port, "/api/v1/time");
    int64_t after = fs_realtime_us() * 1000;
    assert_int_equal(r.status, 200);
    long long rn = 0, sn = 0;
    if (sscanf(r.body, "{\"receive_ns\":%lld,\"send_ns\":%lld}", &rn, &sn) != 2)
        fail_msg("time: %s", r.body);
    assert_true(before <= rn && rn <= sn && sn <= after);
    resp_free(&r);
    expect_error(get(port, "/api/v1/time?x=1"), 400, "unknown parameter");
    /* The GET endpoints need the endpoint's token and hand their parameters on. */
    expect_error(get(port, "/api/v1/correlate"), 401, "token");
    r = http_req(port, "GET", "/api/v1/correlate", auth);
    if (r.status != 200 || !strstr(r.body, "\"events_considered\":1"))
        fail_msg("correlate: %d %s", r.status, r.body);
    resp_free(&r);
    expect_error(http_req(port, "GET", "/api/v1/incidents?bogus=1", auth), 400, "bogus");
    r = http_req(port, "GET", "/api/v1/export/trace", auth);
    assert_int_equal(r.status, 200);
    json_object *t = json_tokener_parse(r.body);
    if (!t)
        fail_msg("trace is not JSON: %.300s", r.body);
    json_object_put(t);
    resp_free(&r);
    r = http_req(port, "GET", "/metrics", auth);
    assert_int_equal(r.status, 200);
    if (!strstr(r.body, "\nfabricscope_host_events 1\n") ||
        !strstr(r.body, "# TYPE fabricscope_host_events_ingested_total counter\n"))
        fail_msg("analysis metrics missing");
    resp_free(&r);
#undef POST
    fs_http_stop(h);
    fs_analysis_free(an);
}

/* HTTPS with a fresh self-signed certificate; curl(1) is the TLS client. */
static void
test_https(void **state)
{
    struct fixture *f = *state;
    if (system("command -v openssl >/dev/null && command -v curl >/dev/null") != 0)
        skip();
    char dir[] = "/tmp/fs_tls_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cmd[1024], cert[64], key[64];
    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    snprintf(key, sizeof key, "%s/key.pem", dir);
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
             "-keyout %s -out %s >/dev/null 2>&1",
             key, cert);
    assert_int_equal(system(cmd), 0);
    char err[256];
    struct fs_http_opts o = {
        .host = "127.0.0.1", .tls_cert_file = cert, .tls_key_file = key, .bearer_token = "tok"};
    struct fs_http *h = fs_http_start(&o, f->st, err, sizeof err);
    if (!h)
        fail_msg("https: %s", err);
    snprintf(cmd, sizeof cmd,
             "curl -sk -o /dev/null -w '%%{http_code}' -H 'Authorization: Bearer tok' "
             "https://127.0.0.1:%u/metrics",
             (unsigned)fs_http_port(h));
    FILE *p = popen(cmd, "r");
    char out[32] = "";
    assert_non_null(fgets(out, sizeof out, p));
    pclose(p);
    assert_string_equal(out, "200");
    fs_http_stop(h);

    /* A missing key file is refused with the file named. */
    o.tls_key_file = "/nonexistent/key.pem";
    assert_null(fs_http_start(&o, f->st, err, sizeof err));
    assert_non_null(strstr(err, "/nonexistent/key.pem"));
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void
test_port_in_use(void **state)
{
    struct fixture *f = *state;
    char err[256] = "";
    struct fs_http_opts o = {.host = "127.0.0.1", .port = f->port};
    assert_null(fs_http_start(&o, f->st, err, sizeof err));
    assert_non_null(strstr(err, "cannot listen"));
}

/* ---- hostile clients ---- */

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A TCP connection to 127.0.0.1:port from the loopback address src (127.0.0.0/8 all
 * reach the host), so that tests can play several client addresses. */
static int
connect_from(const char *src, uint16_t port, int rcvbuf)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    if (rcvbuf)
        assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf), 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    assert_int_equal(inet_pton(AF_INET, src, &a.sin_addr), 1);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    a.sin_port = htons(port);
    assert_int_equal(inet_pton(AF_INET, "127.0.0.1", &a.sin_addr), 1);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* Whether the server has closed fd (end of stream or reset), without blocking. */
static bool
closed_by_peer(int fd)
{
    char c[256];
    for (;;) {
        ssize_t n = recv(fd, c, sizeof c, MSG_DONTWAIT);
        if (n == 0)
            return true;
        if (n < 0)
            return errno != EAGAIN && errno != EWOULDBLOCK;
    }
}

/* GET /healthz from src on a fresh connection; returns the seconds to a whole 200. */
static double
healthz_seconds(uint16_t port, const char *src)
{
    double t0 = now_s();
    int fd = connect_from(src, port, 0);
    const char *req = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    assert_int_equal(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
    char buf[2048];
    size_t len = 0;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    while (len < sizeof buf - 1 && poll(&pfd, 1, 5000) == 1) {
        ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    buf[len] = '\0';
    if (!strstr(buf, "HTTP/1.1 200") || !strstr(buf, "{\"status\":\"ok\"}"))
        fail_msg("/healthz from %s: %s", src, buf);
    return now_s() - t0;
}

struct trickler {
    int fd;
    double opened, closed; /* closed 0: still open */
};

/* Sends one more byte of an endless request head to every open trickler; notes which
 * the server has closed. Returns how many are still open. */
static size_t
trickle(struct trickler *t, size_t n)
{
    size_t open = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i].closed)
            continue;
        if (closed_by_peer(t[i].fd) || send(t[i].fd, "a", 1, MSG_NOSIGNAL) != 1) {
            t[i].closed = now_s();
            continue;
        }
        open++;
    }
    return open;
}

/* A connection that trickles its request head (or, with body, a whole head and then
 * a body that never ends). */
static struct trickler
trickler_open(const char *src, uint16_t port, bool body)
{
    struct trickler t = {connect_from(src, port, 0), now_s(), 0};
    const char *head = body ? "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n"
                            : "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    assert_int_equal(send(t.fd, head, strlen(head), MSG_NOSIGNAL), (ssize_t)strlen(head));
    return t;
}

/*
 * Slowloris: connections that trickle a request head (a byte every 100 ms, which resets
 * any idle timeout) are closed by the whole-head deadline, /healthz keeps answering
 * within a second meanwhile, and when trickling connections from many addresses fill
 * the connection table the oldest make room for a newcomer.
 */
static void
test_slowloris(void **state)
{
    struct fixture *f = *state;
    char err[256];
    const unsigned head_s = 2;
    struct fs_http_opts o = {.host = "127.0.0.1",
                             .max_connections = 16, /* 4 per address, 2 kept for newcomers */
                             .head_timeout_s = head_s,
                             .connection_timeout_s = 30};
    struct fs_http *h = fs_http_start(&o, f->st, err, sizeof err);
    if (!h)
        fail_msg("fs_http_start: %s", err);
    uint16_t port = fs_http_port(h);

    /* Two trickling connections from 127.0.0.1, /healthz from the same address (the
     * address may hold four). */
    struct trickler t[16];
    size_t n = 0;
    for (; n < 2; n++)
        t[n] = trickler_open("127.0.0.1", port, false);
    t[n++] = trickler_open("127.0.0.5", port, true); /* the same with a body */
    double worst = 0;
    double start = now_s();
    while (trickle(t, n) > 0) {
        if (now_s() - start > head_s + 3)
            fail_msg("trickling connections still open after %.1f s", now_s() - start);
        double hz = healthz_seconds(port, "127.0.0.1");
        worst = hz > worst ? hz : worst;
        struct timespec pace = {0, 100 * 1000000L};
        nanosleep(&pace, NULL); /* the attacker's pace, not a synchronisation */
    }
    for (size_t i = 0; i < n; i++) {
        double held = t[i].closed - t[i].opened;
        if (held < head_s - 0.5 || held > head_s + 1.5)
            fail_msg("trickler %zu closed after %.2f s, deadline %u s", i, held, head_s);
        close(t[i].fd);
    }
    if (worst >= 1.0)
        fail_msg("/healthz took %.3f s under slowloris", worst);
    print_message("slowloris: 3 trickling connections (one in its body) closed by the %u s "
                  "request deadline; "
                  "/healthz worst %.1f ms\n",
                  head_s, worst * 1e3);

    /* Sixteen from four addresses fill the table; newcomers still get in. */
    char src[4][16];
    n = 0;
    for (int a = 0; a < 4; a++) {
        snprintf(src[a], sizeof src[a], "127.0.0.%d", 10 + a);
        for (int k = 0; k < 4; k++)
            t[n++] = trickler_open(src[a], port, false);
    }
    /* The two over the soft limit have closed the two oldest. */
    double t_full = now_s();
    size_t open;
    while ((open = trickle(t, n)) > 14) {
        if (now_s() - t_full > 1.0)
            fail_msg("%zu trickling connections still open, expected the oldest to make room",
                     open);
        struct timespec pace = {0, 20 * 1000000L};
        nanosleep(&pace, NULL);
    }
    double hz = healthz_seconds(port, "127.0.0.3");
    if (hz >= 1.0)
        fail_msg("/healthz took %.3f s with the connection table full", hz);
    open = trickle(t, n);
    print_message("slowloris: table full (16): %zu of 16 trickling connections left open, "
                  "/healthz from a new address %.1f ms\n",
                  open, hz * 1e3);
    for (size_t i = 0; i < n; i++)
        close(t[i].fd);
    fs_http_stop(h);
}

/* Keep-alive: curl (a real client) fetches three URLs over one connection. */
static void
test_keepalive(void **state)
{
    struct fixture *f = *state;
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "curl -sv -o /dev/null -o /dev/null -o /dev/null http://127.0.0.1:%u/metrics "
             "http://127.0.0.1:%u/healthz 'http://127.0.0.1:%u/api/v1/raw?match[]=up' 2>&1",
             (unsigned)f->port, (unsigned)f->port, (unsigned)f->port);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[512];
    int reused = 0, closes = 0, oks = 0;
    while (fgets(line, sizeof line, p)) {
        reused += strstr(line, "Re-using existing connection") != NULL;
        closes += strncasecmp(line, "< Connection: close", 19) == 0;
        oks += strncmp(line, "< HTTP/1.1 200", 14) == 0;
    }
    assert_int_equal(pclose(p), 0);
    assert_int_equal(oks, 3);
    assert_int_equal(reused, 2);
    assert_int_equal(closes, 0);
}

/* %00 in any parameter is refused, not cut short; so are a thousand parameters. */
static void
test_nul_and_many_params(void **state)
{
    struct fixture *f = *state;
    expect_error(get(f->port, "/api/v1/raw?match[]=fabric_x%00%7Bjunk"), 400, "NUL");
    expect_error(get(f->port, "/api/v1/raw?match[]=up&start=1%00"), 400, "NUL");
    expect_error(get(f->port, "/api/v1/raw?match[]%00x=up"), 400, "NUL");
    /* The query-string parser (the fuzzers' way in) refuses it too. */
    struct fs_raw_query q;
    char err[256] = "";
    const char *qs = "match[]=fabric_x%00%7Bjunk";
    assert_int_equal(fs_raw_query_parse_string(qs, strlen(qs), T0, &q, err, sizeof err), -1);
    assert_non_null(strstr(err, "NUL"));
    char *u = malloc(16 * 1024);
    strcpy(u, "/api/v1/raw?match[]=up");
    for (int i = 0; i < 1000; i++)
        sprintf(u + strlen(u), "&a%d=1", i);
    expect_error(get(f->port, u), 400, "too many query parameters");
    free(u);
    /* Still serving. */
    struct resp r = get(f->port, "/healthz");
    assert_int_equal(r.status, 200);
    resp_free(&r);
}

/* The regex, four times in one request, is refused fast over HTTP too. */
static void
test_costly_regex_http(void **state)
{
    struct fixture *f = *state;
    const char *m = "match[]=%7B__name__%3D~%22(((((((a%7B9%7D)%7B9%7D)%7B9%7D)%7B9%7D)%7B9%7D)"
                    "%7B9%7D)%7B9%7D)%22%7D";
    char u[2048];
    snprintf(u, sizeof u, "/api/v1/raw?%s&%s&%s&%s", m, m, m, m);
    double t0 = now_s();
    expect_error(get(f->port, u), 400, "too costly");
    double dt = now_s() - t0;
    if (dt >= 0.5)
        fail_msg("refusal took %.3f s", dt);
    print_message("costly regex x4 refused over HTTP in %.2f ms\n", dt * 1e3);
    expect_error(get(f->port, "/api/v1/raw?match[]=%7Ba%3D~%22(a%2B)%2B%22%7D"), 400,
                 "unbounded repetition");
}

/* Scrapes within the share window get the very same render (the request counter in
 * it does not move), and a fresh one after. */
static void
test_metrics_shared(void **state)
{
    struct fixture *f = *state;
    char err[256];
    struct fs_http_opts o = {.host = "127.0.0.1", .metrics_share_ms = 60000};
    struct fs_http *h = fs_http_start(&o, f->st, err, sizeof err);
    if (!h)
        fail_msg("fs_http_start: %s", err);
    struct resp a = get(fs_http_port(h), "/metrics");
    struct resp b = get(fs_http_port(h), "/metrics");
    assert_int_equal(a.status, 200);
    assert_int_equal(b.status, 200);
    assert_int_equal(a.body_len, b.body_len);
    assert_memory_equal(a.body, b.body, a.body_len);
    assert_null(strstr(b.body, "handler=\"metrics\",code=\"200\"} 1\n"));
    resp_free(&a);
    resp_free(&b);
    fs_http_stop(h);
}

#if defined(__SANITIZE_THREAD__)
#define RSS_IS_MEANINGFUL 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RSS_IS_MEANINGFUL 0
#endif
#endif
#ifndef RSS_IS_MEANINGFUL
#define RSS_IS_MEANINGFUL 1
#endif

/* VmRSS of this process in bytes. */
static size_t
rss_bytes(void)
{
    FILE *fp = fopen("/proc/self/status", "r");
    char line[256];
    size_t kb = 0;
    assert_non_null(fp);
    while (fgets(line, sizeof line, fp))
        if (sscanf(line, "VmRSS: %zu kB", &kb) == 1)
            break;
    fclose(fp);
    return kb * 1024;
}

/*
 * Sixty clients ask for a ~4 MB /api/v1/raw answer each and never read it. Without a
 * bound that pins about 240 MB; with a 16 MiB in-flight budget most get 503 with
 * Retry-After, RSS stays within the budget plus slack, and once the whole-response
 * deadline closes the stuck ones the budget is free again.
 */
static void
test_raw_nonreading_clients(void **state)
{
    struct fixture *f = *state;
    char err[256];
    /* One more series with 120k points (about 3.6 MB as JSON). */
    struct fs_target_cfg t = f->t;
    t.name = "bulk";
    struct fs_sink *sk = fs_store_sink_add(f->st, &t, "snmp", 10 * 1000000LL);
    assert_non_null(sk);
    struct fs_label q[2] = {{"interface", "Eth9/9"}, {"tc", "1"}};
    const int points = 120000;
    for (int i = 0; i < points; i++) {
        fs_sink_begin(sk, T0 + 10000000LL + (int64_t)i * 1000);
        fs_sink_gauge(sk, FS_M_QUEUE_DEPTH, q, 2, (double)(i % 977) + 0.5);
        fs_sink_end(sk);
    }
    const size_t budget = 16u << 20;
    /* The whole-response deadline frees the budget of the stuck answers (checked at the
     * end). Until every client has its status line none may have passed it, or its freed
     * budget would let more answers through than the bound below allows: under
     * ThreadSanitizer the sixty answers take about 10 s to come. */
    const int deadline_s = RSS_IS_MEANINGFUL ? 10 : 30;
    struct fs_http_opts o = {.host = "127.0.0.1",
                             .max_connections = 256, /* 64 per address */
                             .raw_inflight_bytes = budget,
                             .response_timeout_s = deadline_s};
    struct fs_http *h = fs_http_start(&o, f->st, err, sizeof err);
    if (!h)
        fail_msg("fs_http_start: %s", err);
    uint16_t port = fs_http_port(h);
    const char *req =
        "GET /api/v1/raw?match[]=fabric_queue_depth_bytes%7Btarget%3D%22bulk%22%7D"
        "&start=1733130000&end=1733140000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    /* Warm up: one whole answer, read, so allocator pools exist before measuring. */
    struct resp w = http_raw(port, req, strlen(req));
    assert_int_equal(w.status, 200);
    size_t answer = w.body_len;
    assert_true(answer > 3u << 20);
    resp_free(&w);

    size_t rss0 = rss_bytes();
    enum { N = 60 };
    int fds[N];
    double sent = now_s();
    for (int i = 0; i < N; i++) {
        fds[i] = connect_from("127.0.0.1", port, 4096);
        assert_int_equal(send(fds[i], req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
    }
    /* /healthz does not queue behind the queries. */
    double hz = healthz_seconds(port, "127.0.0.2");
    if (hz >= 1.0)
        fail_msg("/healthz took %.3f s with 60 queries pending", hz);
    /* Wait (deadline 60 s) until every client has a status line it does not read. */
    int ok = 0, busy = 0;
    double t0 = now_s();
    for (;;) {
        ok = busy = 0;
        for (int i = 0; i < N; i++) {
            char head[64] = "";
            ssize_t n = recv(fds[i], head, sizeof head - 1, MSG_PEEK | MSG_DONTWAIT);
            if (n > 0 && strstr(head, "HTTP/1.1 200"))
                ok++;
            else if (n > 0 && strstr(head, "HTTP/1.1 503"))
                busy++;
        }
        if (ok + busy == N)
            break;
        if (now_s() - t0 > 60)
            fail_msg("after 60 s only %d of %d clients have an answer", ok + busy, N);
        struct pollfd pfd[N];
        for (int i = 0; i < N; i++)
            pfd[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
        poll(pfd, N, 100);
    }
    size_t rss1 = rss_bytes();
    size_t grew = rss1 > rss0 ? rss1 - rss0 : 0;
    print_message("raw: 60 non-reading clients of a %.1f MB answer: %d answered 200, %d got 503; "
                  "RSS %.1f -> %.1f MB (+%.1f MB, budget %zu MiB); /healthz meanwhile %.1f ms\n",
                  (double)answer / 1e6, ok, busy, (double)rss0 / 1e6, (double)rss1 / 1e6,
                  (double)grew / 1e6, budget >> 20, hz * 1e3);
    assert_true(ok >= 1);
    double took = now_s() - sent;
    if (took >= deadline_s)
        fail_msg("the answers took %.1f s, past the %d s response deadline: the bound below "
                 "would not hold what it says",
                 took, deadline_s);
    assert_true((size_t)ok * answer <= budget);
    assert_true(busy >= N - (int)(budget / answer));
    /* TSan's allocator keeps freed memory (and its shadow) resident: RSS says nothing
     * about what is held there, so the bound is checked in the other builds only. */
    if (!RSS_IS_MEANINGFUL)
        print_message("raw: RSS bound not checked under ThreadSanitizer\n");
    else if (grew > budget + (48u << 20))
        fail_msg("RSS grew by %zu MB, over the %zu MiB budget + 48 MB", grew >> 20, budget >> 20);
    /* The 503s say when to come back. */
    for (int i = 0; i < N; i++) {
        char head[512] = "";
        ssize_t n = recv(fds[i], head, sizeof head - 1, MSG_PEEK | MSG_DONTWAIT);
        if (n > 0 && strstr(head, "HTTP/1.1 503")) {
            for (char *c = head; *c; c++)
                *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
            assert_non_null(strstr(head, "retry-after: "));
            break;
        }
    }
    /* The response deadline closes the stuck ones and frees the budget. */
    t0 = now_s();
    for (;;) {
        struct resp r = http_raw(port, req, strlen(req));
        int st = r.status;
        resp_free(&r);
        if (st == 200)
            break;
        assert_int_equal(st, 503);
        if (now_s() - t0 > deadline_s + 12)
            fail_msg("the budget is still taken %d s later", deadline_s + 12);
        struct timespec pace = {0, 200 * 1000000L};
        nanosleep(&pace, NULL); /* a client's retry pace */
    }
    for (int i = 0; i < N; i++)
        close(fds[i]);
    fs_http_stop(h);
    fs_store_sink_remove(f->st, sk);
}

/*
 * A raw query over more series than one scan chunk finds every one (the scan resumes
 * where the last chunk ended), and one over its time limit gives up with 503.
 */
static void
test_raw_scan_chunks_and_deadline(void **state)
{
    struct fixture *f = *state;
    char err[256];
    enum { TARGETS = 5, PER = 2000 };
    struct fs_target_cfg t[TARGETS];
    struct fs_sink *sk[TARGETS];
    char names[TARGETS][16];
    for (int k = 0; k < TARGETS; k++) {
        t[k] = f->t;
        snprintf(names[k], sizeof names[k], "many%d", k);
        t[k].name = names[k];
        sk[k] = fs_store_sink_add(f->st, &t[k], "snmp", 10 * 1000000LL);
        assert_non_null(sk[k]);
        fs_sink_begin(sk[k], fs_synth_now_us());
        for (int i = 0; i < PER; i++) {
            char ifname[16];
            snprintf(ifname, sizeof ifname, "Eth%d/%d", k, i);
            struct fs_label l[2] = {{"interface", ifname}, {"tc", "0"}};
            fs_sink_gauge(sk[k], FS_M_QUEUE_DEPTH, l, 2, (double)i);
        }
        fs_sink_end(sk[k]);
        fs_sink_done(sk[k], 0, FS_POLL_OK, NULL);
    }
    assert_true(TARGETS * PER > 2 * FS_RAW_SCAN_CHUNK);
    struct resp r = get(f->port, "/api/v1/raw?match[]=fabric_queue_depth_bytes%7Btarget%3D~%22"
                                 "many.%2A%22%7D");
    json_object *o = parse_success(&r);
    json_object *res = json_object_object_get(json_object_object_get(o, "data"), "result");
    assert_int_equal(json_object_array_length(res), TARGETS * PER);
    json_object_put(o);
    resp_free(&r);

    /* 1 ms is far less than regex-matching every series takes. */
    struct fs_http_opts opt = {.host = "127.0.0.1", .raw_time_limit_ms = 1};
    struct fs_http *h = fs_http_start(&opt, f->st, err, sizeof err);
    if (!h)
        fail_msg("fs_http_start: %s", err);
    r = get(fs_http_port(h), "/api/v1/raw?match[]=%7Binterface%3D~%22Eth.%2A9.%2A%22%7D");
    has_header(&r, "retry-after: ");
    expect_error(r, 503, "took too long");
    fs_http_stop(h);
    for (int k = 0; k < TARGETS; k++)
        fs_store_sink_remove(f->st, sk[k]);
}

/*
 * Clients that drop their connection mid-request make libmicrohttpd warn once each:
 * fifty of them log at most a handful of lines (the rest are counted for the
 * sweeper's summary line). stderr is captured in a file for the count.
 */
static void
test_warnings_rate_limited(void **state)
{
    struct fixture *f = *state;
    char path[] = "/tmp/fs_http_log_XXXXXX";
    int lf = mkstemp(path);
    assert_true(lf >= 0);
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0);
    assert_int_equal(dup2(lf, 2), 2);
    /* One at a time: accepted (it is in the server's table), then reset; libmicrohttpd
     * warns before it closes, so once the table is empty the warning is written (or
     * counted). */
    double t0 = now_s();
    for (int i = 0; i < 50; i++) {
        int fd = connect_from("127.0.0.1", f->port, 0);
        const char *part = "GET /metrics HTTP/1.1\r\nHo";
        assert_int_equal(send(fd, part, strlen(part), MSG_NOSIGNAL), (ssize_t)strlen(part));
        for (unsigned want = 1;; want = 0) {
            while (fs_http_open_connections(f->h) != want) {
                if (now_s() - t0 > 20)
                    fail_msg("connection %d: %u open, waiting for %u", i,
                             fs_http_open_connections(f->h), want);
                struct timespec pace = {0, 1000000L};
                nanosleep(&pace, NULL);
            }
            if (!want)
                break;
            struct linger lg = {1, 0}; /* a reset, which libmicrohttpd reports */
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
            close(fd);
        }
    }
    fflush(stderr);
    assert_int_equal(dup2(saved, 2), 2);
    close(saved);
    FILE *fp = fdopen(lf, "r");
    assert_non_null(fp);
    rewind(fp);
    char line[1024];
    int warns = 0;
    while (fgets(line, sizeof line, fp))
        warns += strstr(line, "level=warn") && strstr(line, "subsys=http");
    fclose(fp);
    unlink(path);
    print_message("50 reset connections logged %d warning lines (%.0f ms)\n", warns,
                  (now_s() - t0) * 1e3);
    assert_true(warns >= 1);
    assert_true(warns <= 6);
}

/*
 * Sixty /metrics clients that never read: each would pin its own multi-megabyte
 * exposition; at most FS_HTTP_MAX_EXPOSITIONS renders (plus one spare) are alive, so
 * RSS grows by a few expositions, and every client still gets a 200.
 */
/* 20 targets of 2,000 queue series each: a few-MB exposition. */
enum { WIDE_TARGETS = 20, WIDE_PER = 2000 };
struct wide {
    struct fs_target_cfg t[WIDE_TARGETS];
    struct fs_sink *sk[WIDE_TARGETS];
    char names[WIDE_TARGETS][16];
};

static void
add_wide_targets(struct fixture *f, struct wide *w)
{
    for (int k = 0; k < WIDE_TARGETS; k++) {
        w->t[k] = f->t;
        snprintf(w->names[k], sizeof w->names[k], "wide%d", k);
        w->t[k].name = w->names[k];
        w->sk[k] = fs_store_sink_add(f->st, &w->t[k], "snmp", 3600 * 1000000LL);
        assert_non_null(w->sk[k]);
        fs_sink_begin(w->sk[k], fs_synth_now_us());
        for (int i = 0; i < WIDE_PER; i++) {
            char ifname[16];
            snprintf(ifname, sizeof ifname, "Ethernet%d/%d", k, i);
            struct fs_label l[2] = {{"interface", ifname}, {"tc", "0"}};
            fs_sink_gauge(w->sk[k], FS_M_QUEUE_DEPTH, l, 2, (double)i + 0.25);
        }
        fs_sink_end(w->sk[k]);
        fs_sink_done(w->sk[k], 0, FS_POLL_OK, NULL);
    }
}

static void
remove_wide_targets(struct fixture *f, struct wide *w)
{
    for (int k = 0; k < WIDE_TARGETS; k++)
        fs_store_sink_remove(f->st, w->sk[k]);
}

static void
test_metrics_nonreading_clients(void **state)
{
    struct fixture *f = *state;
    char err[256];
    enum { N = 60 };
    struct wide wt;
    add_wide_targets(f, &wt);
    struct fs_http_opts o = {.host = "127.0.0.1", .max_connections = 256, .response_timeout_s = 30};
    struct fs_http *h = fs_http_start(&o, f->st, err, sizeof err);
    if (!h)
        fail_msg("fs_http_start: %s", err);
    uint16_t port = fs_http_port(h);
    const char *req = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    struct resp w = http_raw(port, req, strlen(req));
    assert_int_equal(w.status, 200);
    size_t expo = w.body_len;
    assert_true(expo > 3u << 20);
    resp_free(&w);

    size_t rss0 = rss_bytes();
    int fds[N];
    for (int i = 0; i < N; i++) {
        fds[i] = connect_from("127.0.0.1", port, 4096);
        assert_int_equal(send(fds[i], req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
    }
    double t0 = now_s();
    for (;;) {
        int ok = 0;
        for (int i = 0; i < N; i++) {
            char head[32] = "";
            ssize_t n = recv(fds[i], head, sizeof head - 1, MSG_PEEK | MSG_DONTWAIT);
            ok += n > 0 && strstr(head, "HTTP/1.1 200") != NULL;
        }
        if (ok == N)
            break;
        if (now_s() - t0 > 60)
            fail_msg("after 60 s only %d of %d clients have a 200", ok, N);
        struct pollfd pfd[N];
        for (int i = 0; i < N; i++)
            pfd[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
        poll(pfd, N, 100);
    }
    size_t rss1 = rss_bytes();
    size_t grew = rss1 > rss0 ? rss1 - rss0 : 0;
    size_t bound = (FS_HTTP_MAX_EXPOSITIONS + 1) * expo + (48u << 20);
    print_message("metrics: 60 non-reading clients of a %.1f MB exposition: RSS %.1f -> %.1f MB "
                  "(+%.1f MB; unshared would be %.0f MB)\n",
                  (double)expo / 1e6, (double)rss0 / 1e6, (double)rss1 / 1e6, (double)grew / 1e6,
                  (double)(N * expo) / 1e6);
    if (!RSS_IS_MEANINGFUL)
        print_message("metrics: RSS bound not checked under ThreadSanitizer\n");
    else if (grew > bound)
        fail_msg("RSS grew by %zu MB, over %zu MB", grew >> 20, bound >> 20);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    fs_http_stop(h);
    remove_wide_targets(f, &wt);
}

struct stopper {
    struct fs_http *h;
    double done_s;
};

static void *
stop_main(void *arg)
{
    struct stopper *s = arg;
    fs_http_stop(s->h);
    s->done_s = now_s();
    return NULL;
}

/* Waits (up to 30 s) until fd has the head of a 200 answer. */
static void
wait_head_200(int fd)
{
    double t0 = now_s();
    for (;;) {
        char head[32] = "";
        ssize_t n = recv(fd, head, sizeof head - 1, MSG_PEEK | MSG_DONTWAIT);
        if (n > 0 && strstr(head, "HTTP/1.1 200"))
            return;
        if (now_s() - t0 > 30)
            fail_msg("no 200 head within 30 s");
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        poll(&pfd, 1, 100);
    }
}

/*
 * A stop sends the answers it has begun: a client reading a few-MB /metrics slowly,
 * starting only after the stop was called, gets the whole body (libmicrohttpd's stop
 * alone would close its connection mid-answer). A client that never reads is given up
 * on after the drain's 2 s, so the stop still ends.
 */
static void
test_stop_sends_answers(void **state)
{
    struct fixture *f = *state;
    char err[256];
    struct wide w;
    add_wide_targets(f, &w);
    struct fs_http_opts o = {.host = "127.0.0.1", .response_timeout_s = 30};
    struct fs_http *h = fs_http_start(&o, f->st, err, sizeof err);
    if (!h)
        fail_msg("fs_http_start: %s", err);
    uint16_t port = fs_http_port(h);
    const char *req = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    struct resp whole = http_raw(port, req, strlen(req));
    assert_int_equal(whole.status, 200);
    assert_true(whole.body_len > 3u << 20);

    int slow = connect_from("127.0.0.1", port, 4096), never = connect_from("127.0.0.1", port, 4096);
    assert_int_equal(send(slow, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
    assert_int_equal(send(never, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
    wait_head_200(slow);
    wait_head_200(never);

    struct stopper st = {.h = h};
    pthread_t th;
    double t0 = now_s();
    assert_int_equal(pthread_create(&th, NULL, stop_main, &st), 0);
    /* The slow client: it reads only from 0.3 s into the stop, a buffer at a time. */
    struct pollfd none = {.fd = -1};
    poll(&none, 1, 300);
    size_t got = 0;
    char buf[4096];
    for (;;) {
        ssize_t n = recv(slow, buf, sizeof buf, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    double read_s = now_s() - t0;
    pthread_join(th, NULL);
    double stop_s = st.done_s - t0;
    print_message("stop: the slow client read %zu bytes (the answer %zu with its head) in %.2f s; "
                  "the stop ended after %.2f s\n",
                  got, whole.body_len, read_s, stop_s);
    /* The head is a few hundred bytes; the body is the exposition, as the reading client
       got it (the store did not change). */
    if (got < whole.body_len || got > whole.body_len + 1024)
        fail_msg("the slow client got %zu bytes of a %zu-byte answer", got, whole.body_len);
    if (stop_s < 1.5 || stop_s > 15)
        fail_msg("the stop took %.2f s with a client that never reads (want the 2 s drain)",
                 stop_s);
    close(slow);
    close(never);
    resp_free(&whole);
    remove_wide_targets(f, &w);
}

/* The value of the unlabelled sample name in a /metrics body, or -1. */
static double
metric_value(const char *body, const char *name)
{
    size_t nl = strlen(name);
    for (const char *p = body; (p = strstr(p, name)) != NULL; p += nl)
        if ((p == body || p[-1] == '\n') && p[nl] == ' ')
            return strtod(p + nl + 1, NULL);
    return -1;
}

/*
 * Analysis answers count in the answer budget of /api/v1/raw: non-reading clients of a
 * few-MB /api/v1/export/trace get 200 while the budget lasts and 503 (JSON reason,
 * Retry-After) past it, and once the connections close every byte of the budget is back
 * (fabricscope_http_inflight_bytes 0).
 */
static void
test_analysis_answers_in_budget(void **state)
{
    struct fixture *f = *state;
    char err[256];
    struct fs_host_events_opts ho = {.memory_limit = 64 << 20, .retention_ns = 3600LL * 1000000000};
    struct fs_analysis *an = fs_analysis_new(&ho, err, sizeof err);
    assert_non_null(an);
    assert_int_equal(fs_analysis_set_token(an, "post-token"), 0);
    /* 60000 host events of the last minutes, each a slice of the trace: an answer (about
     * 6 MB) larger than what the kernel's socket buffers take (tcp_wmem's 4 MiB), so
     * that libmicrohttpd holds it until the client reads. */
    enum { EVENTS = 60000 };
    struct fs_buf post, out;
    fs_buf_init(&post, FS_HOST_EVENTS_MAX_BODY);
    fs_buf_puts(&post, "{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":0,\"events\":[");
    long long base = (long long)fs_realtime_us() * 1000 - 300LL * 1000000000;
    for (int i = 0; i < EVENTS; i++)
        fs_buf_printf(&post,
                      "%s{\"host\":\"gpu-host-%02d\",\"kind\":\"nccl.kernel\",\"name\":"
                      "\"AllReduce\",\"start\":%lld,\"end\":%lld}",
                      i ? "," : "", i % 16, base + i * 4000000LL, base + i * 4000000LL + 2000000);
    fs_buf_puts(&post, "]}");
    assert_false(post.overflow);
    fs_buf_init(&out, 1 << 20);
    int st = fs_analysis_post_host_events(an, "Bearer post-token", post.data, post.len,
                                          fs_realtime_us(), &out);
    if (st != 200)
        fail_msg("post: %d %s", st, out.data);
    fs_buf_free(&out);
    fs_buf_free(&post);

    const size_t budget = 24u << 20; /* two query workers: up to 12 MiB each render */
    struct fs_http_opts o = {.host = "127.0.0.1",
                             .max_connections = 256,
                             .analysis = an,
                             .raw_inflight_bytes = budget,
                             .response_timeout_s = 60};
    struct fs_http *h = fs_http_start(&o, f->st, err, sizeof err);
    if (!h)
        fail_msg("fs_http_start: %s", err);
    uint16_t port = fs_http_port(h);
    const char *req = "GET /api/v1/export/trace HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    /* One whole answer, read: its size. */
    struct resp w = http_raw(port, req, strlen(req));
    if (w.status != 200)
        fail_msg("trace: %d %.300s", w.status, w.body);
    size_t answer = w.body_len;
    resp_free(&w);
    if (answer < (5u << 20) || answer > (8u << 20))
        fail_msg("the trace is %zu bytes, not the 5-8 MiB this test needs", answer);

    enum { N = 12 };
    int fds[N];
    for (int i = 0; i < N; i++) {
        fds[i] = connect_from("127.0.0.1", port, 4096);
        assert_int_equal(send(fds[i], req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
    }
    int ok = 0, busy = 0, busy_fd = -1;
    double t0 = now_s();
    for (;;) {
        ok = busy = 0;
        for (int i = 0; i < N; i++) {
            char head[64] = "";
            ssize_t n = recv(fds[i], head, sizeof head - 1, MSG_PEEK | MSG_DONTWAIT);
            if (n > 0 && strstr(head, "HTTP/1.1 200"))
                ok++;
            else if (n > 0 && strstr(head, "HTTP/1.1 503")) {
                busy++;
                busy_fd = fds[i];
            }
        }
        if (ok + busy == N)
            break;
        if (now_s() - t0 > 60)
            fail_msg("after 60 s only %d of %d clients have an answer", ok + busy, N);
        struct pollfd pfd[N];
        for (int i = 0; i < N; i++)
            pfd[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
        poll(pfd, N, 100);
    }
    struct resp m = get(port, "/metrics");
    double held = metric_value(m.body, "fabricscope_http_inflight_bytes");
    double limit = metric_value(m.body, "fabricscope_http_inflight_limit_bytes");
    resp_free(&m);
    print_message("analysis: %d non-reading clients of a %.1f MB trace: %d answered 200, %d got "
                  "503; %.1f MB held of a %.1f MB budget\n",
                  N, (double)answer / 1e6, ok, busy, held / 1e6, limit / 1e6);
    assert_true(ok >= 1);
    assert_true((size_t)ok * answer <= budget);
    assert_true(busy >= N - (int)(budget / answer));
    /* Each answered client holds its answer but what the kernel's send buffer took of it
       (up to tcp_wmem's maximum: the client reads nothing): a freed answer gives its
       budget back, so what is held lies between that and the budget. */
    double wmem_max = 4194304;
    FILE *wf = fopen("/proc/sys/net/ipv4/tcp_wmem", "r");
    if (wf) {
        double a, b, c;
        if (fscanf(wf, "%lf %lf %lf", &a, &b, &c) == 3)
            wmem_max = c;
        fclose(wf);
    }
    double floor_held = (double)ok * ((double)answer - wmem_max);
    assert_true(held >= floor_held && held > 0 && held <= (double)budget);
    assert_true(limit == (double)budget);
    /* A 503 is whole (small): JSON with the reason, and Retry-After. */
    assert_true(busy_fd >= 0);
    {
        char buf[4096];
        size_t len = 0;
        struct pollfd pfd = {.fd = busy_fd, .events = POLLIN};
        while (len < sizeof buf - 1 && poll(&pfd, 1, 5000) == 1) {
            ssize_t n = recv(busy_fd, buf + len, sizeof buf - 1 - len, 0);
            if (n <= 0)
                break;
            len += (size_t)n;
        }
        buf[len] = '\0';
        for (char *c = buf; *c; c++)
            *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
        assert_non_null(strstr(buf, "retry-after: "));
        assert_non_null(strstr(buf, "content-type: application/json"));
        const char *body = strstr(buf, "\r\n\r\n");
        assert_non_null(body);
        json_object *jo = json_tokener_parse(body + 4);
        if (!jo)
            fail_msg("503 body is not JSON: %s", body + 4);
        json_object *e;
        assert_true(json_object_object_get_ex(jo, "error", &e));
        if (!strstr(json_object_get_string(e), "waiting to be sent"))
            fail_msg("503 reason: %s", json_object_get_string(e));
        json_object_put(jo);
    }
    /* Closed connections give their answers' memory back: all of it. */
    for (int i = 0; i < N; i++)
        close(fds[i]);
    t0 = now_s();
    for (;;) {
        m = get(port, "/metrics");
        held = metric_value(m.body, "fabricscope_http_inflight_bytes");
        resp_free(&m);
        if (held == 0)
            break;
        if (now_s() - t0 > 30)
            fail_msg("%.0f bytes of the budget still held 30 s after the clients closed", held);
        struct timespec pace = {0, 100 * 1000000L};
        nanosleep(&pace, NULL); /* a scraper's pace; /metrics renders are shared briefly */
    }
    /* And the budget serves again. */
    struct resp again = http_raw(port, req, strlen(req));
    assert_int_equal(again.status, 200);
    resp_free(&again);
    fs_http_stop(h);
    fs_analysis_free(an);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_healthz, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics_gzip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_raw, setup, teardown),
        cmocka_unit_test_setup_teardown(test_targets_and_index, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bearer, setup_token, teardown),
        cmocka_unit_test_setup_teardown(test_analysis_routes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_https, setup, teardown),
        cmocka_unit_test_setup_teardown(test_port_in_use, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keepalive, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nul_and_many_params, setup, teardown),
        cmocka_unit_test_setup_teardown(test_costly_regex_http, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics_shared, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slowloris, setup, teardown),
        cmocka_unit_test_setup_teardown(test_raw_nonreading_clients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics_nonreading_clients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_sends_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_raw_scan_chunks_and_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_analysis_answers_in_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_warnings_rate_limited, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
