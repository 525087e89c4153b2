/* The Prometheus query API answer parser: matrix and vector answers fed in pieces of
 * every size, error documents, and the bounds (labels, nesting, points); the client's
 * request headers (compression) and its extra connections, against a loopback server. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "history/prom_query.h"

struct got {
    size_t series, points, labels;
    char first_target[64];
    int64_t first_ts, last_ts;
    double sum;
    int nan;
    int stop_after; /* stop when this many series were seen (0: never) */
};

static int
series_cb(void *arg, const struct fs_prom_series *s)
{
    struct got *g = arg;
    g->series++;
    g->labels += s->n_labels;
    for (size_t i = 0; i < s->n_labels; i++)
        if (g->series == 1 && !strcmp(s->labels[i].name, "target"))
            snprintf(g->first_target, sizeof g->first_target, "%s", s->labels[i].value);
    for (size_t i = 0; i < s->n; i++) {
        if (isnan(s->v[i]))
            g->nan++;
        else if (isfinite(s->v[i]))
            g->sum += s->v[i];
        if (!g->points)
            g->first_ts = s->ts_us[i];
        g->last_ts = s->ts_us[i];
        g->points++;
    }
    return g->stop_after && g->series >= (size_t)g->stop_after ? 7 : 0;
}

/* Parses text fed in pieces of chunk bytes; returns finish's code, err filled. */
static int
parse(const char *text, size_t chunk, uint64_t max_points, struct got *g, char *err, size_t len)
{
    struct fs_prom_parser *p = fs_prom_parser_new(series_cb, g, max_points);
    assert_non_null(p);
    size_t n = strlen(text);
    for (size_t o = 0; o < n; o += chunk)
        if (fs_prom_parser_feed(p, text + o, n - o < chunk ? n - o : chunk))
            break;
    int rc = fs_prom_parser_finish(p, NULL, NULL, err, len);
    fs_prom_parser_free(p);
    return rc;
}

static const char matrix[] =
    "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":["
    "{\"metric\":{\"__name__\":\"fabric_queue_depth_bytes\",\"target\":\"leaf1\","
    "\"interface\":\"Eth1/1\",\"tc\":\"3\",\"job\":\"fs\",\"instance\":\"a:9464\"},"
    "\"values\":[[1733300000.25,\"10\"],[1733300015,\"NaN\"],[1733300030,\"2.5e1\"],"
    "[1733300030,\"99\"]]},"
    "{\"metric\":{\"target\":\"leaf2\"},\"values\":[[1733300000,\"+Inf\"],[1733300015,\"1\"]]}]},"
    "\"warnings\":[\"ignored\",{\"nested\":[1,2,null,true]}],\"stats\":{\"a\":[[1]]}}";

static void
test_matrix_any_chunking(void **state)
{
    (void)state;
    /* Every piece size from 1 byte (each token split) to all at once. */
    for (size_t chunk = 1; chunk <= sizeof matrix; chunk++) {
        struct got g = {0};
        char err[256] = "";
        int rc = parse(matrix, chunk, 0, &g, err, sizeof err);
        if (rc != 0)
            fail_msg("chunk %zu: %s", chunk, err);
        assert_int_equal(g.series, 2);
        assert_int_equal(g.labels, 7);
        assert_string_equal(g.first_target, "leaf1");
        /* The repeated time (1733300030 twice) keeps the first value only. */
        assert_int_equal(g.points, 5);
        assert_int_equal(g.nan, 1);
        assert_true(fabs(g.sum - 36.0) < 1e-9);
        assert_true(g.first_ts == 1733300000250000LL);
    }
}

static void
test_vector(void **state)
{
    (void)state;
    struct got g = {0};
    char err[256];
    assert_int_equal(parse("{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":"
                           "[{\"metric\":{},\"value\":[1733300000,\"1234\"]}]}}",
                           7, 0, &g, err, sizeof err),
                     0);
    assert_int_equal(g.series, 1);
    assert_int_equal(g.points, 1);
    assert_true(g.sum == 1234);
}

static void
expect_error(const char *text, uint64_t max_points, const char *why)
{
    struct got g = {0};
    char err[256] = "";
    if (parse(text, 5, max_points, &g, err, sizeof err) == 0)
        fail_msg("accepted: %s", text);
    if (!strstr(err, why))
        fail_msg("error \"%s\" lacks \"%s\" (for %s)", err, why, text);
}

static void
test_errors(void **state)
{
    (void)state;
    expect_error("{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"parse error at char "
                 "3\"}",
                 0, "the server answered: parse error at char 3");
    expect_error("Unauthorized\n", 0, "not JSON");
    expect_error("{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[", 0,
                 "not JSON");
    expect_error("{\"data\":{\"resultType\":\"matrix\",\"result\":[]}}", 0, "no status");
    expect_error(
        "{\"status\":\"success\",\"data\":{\"resultType\":\"scalar\",\"result\":[1,\"2\"]}}", 0,
        "resultType scalar");
    expect_error("{\"status\":\"success\",\"data\":{\"result\":[{\"metric\":{\"a\":1}}]}}", 0,
                 "unexpected number");
    expect_error("{\"status\":\"success\",\"data\":{\"result\":[{\"values\":[[1,\"x\"]]}]}}", 0,
                 "is not a number");
    expect_error("{\"status\":\"success\",\"data\":{\"result\":[{\"values\":[[1]]}]}}", 0,
                 "a point is not");
    expect_error("{\"status\":\"success\",\"data\":{\"result\":[{\"values\":[[\"1\",\"2\"]]}]}}", 0,
                 "a point is not");
    expect_error("{\"status\":\"success\",\"data\":{\"result\":[{\"values\":[[1,\"2\",3]]}]}}", 0,
                 "unexpected number");
}

static void
test_bounds(void **state)
{
    (void)state;
    /* 65 labels. */
    char big[8192];
    size_t o = (size_t)snprintf(big, sizeof big,
                                "{\"status\":\"success\",\"data\":{\"result\":[{\"metric\":{");
    for (int i = 0; i < 65; i++)
        o += (size_t)snprintf(big + o, sizeof big - o, "%s\"l%d\":\"v\"", i ? "," : "", i);
    snprintf(big + o, sizeof big - o, "},\"values\":[]}]}}");
    expect_error(big, 0, "more than 64 labels");
    /* Nesting deeper than the bound, where nothing is read (warnings). */
    o = (size_t)snprintf(big, sizeof big, "{\"status\":\"success\",\"warnings\":");
    for (int i = 0; i < 20; i++)
        big[o++] = '[';
    for (int i = 0; i < 20; i++)
        big[o++] = ']';
    snprintf(big + o, sizeof big - o, "}");
    expect_error(big, 0, "nested deeper");
    /* Points past max_points. */
    expect_error("{\"status\":\"success\",\"data\":{\"result\":[{\"values\":[[1,\"1\"],[2,\"2\"],"
                 "[3,\"3\"]]}]}}",
                 2, "more than 2 points");
}

static void
test_callback_stops(void **state)
{
    (void)state;
    struct got g = {.stop_after = 1};
    char err[256] = "";
    struct fs_prom_parser *p = fs_prom_parser_new(series_cb, &g, 0);
    assert_non_null(p);
    assert_int_equal(fs_prom_parser_feed(p, matrix, strlen(matrix)), -1);
    assert_int_equal(fs_prom_parser_finish(p, NULL, NULL, err, sizeof err), -1);
    assert_int_equal(fs_prom_parser_stopped(p), 7);
    assert_int_equal(g.series, 1);
    assert_non_null(strstr(err, "stopped (7)"));
    fs_prom_parser_free(p);
}

/* The history URL's user:password@ is in no message: not in fs_prom_url_host (the host
   errors and the answers' history server name), not in a failed query's error. */
static void
test_url_credentials_hidden(void **state)
{
    (void)state;
    char h[256];
    fs_prom_url_host("https://fsuser:s3cret@mimir.example:8443/prometheus?x=1", h, sizeof h);
    assert_string_equal(h, "mimir.example:8443");
    fs_prom_url_host("http://a@b:p@w@prom:9090", h, sizeof h);
    assert_string_equal(h, "prom:9090");
    fs_prom_url_host("http://prom:9090/path@x", h, sizeof h);
    assert_string_equal(h, "prom:9090");
    fs_prom_url_host("http://[::1]:9090/", h, sizeof h);
    assert_string_equal(h, "[::1]:9090");
    /* A port nothing listens on (bound, then closed): the query fails at once. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    close(fd);
    char url[128], want[64], err[512] = "";
    snprintf(url, sizeof url, "http://fsuser:s3cret@127.0.0.1:%u/", ntohs(sa.sin_port));
    snprintf(want, sizeof want, "history 127.0.0.1:%u: ", ntohs(sa.sin_port));
    struct fs_history_cfg cfg = {.url = url, .remote_timeout_us = 5000000};
    struct fs_prom_client *c = fs_prom_client_new(&cfg, err, sizeof err);
    assert_non_null(c);
    struct got g = {0};
    assert_int_equal(
        fs_prom_query_instant(c, "up", 1796236354000000LL, 0, series_cb, &g, err, sizeof err), -1);
    assert_non_null(strstr(err, want));
    assert_null(strstr(err, "s3cret"));
    assert_null(strstr(err, "fsuser"));
    fs_prom_client_free(c);
}

/* A one-shot loopback HTTP server: accepts `n` connections one after another, keeps
   each request's head, answers a one-element vector and closes. */
struct fake {
    int fd, n;
    unsigned port;
    char req[4][2048];
};

static void *
fake_run(void *arg)
{
    struct fake *f = arg;
    static const char body[] =
        "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":"
        "[{\"metric\":{\"target\":\"leaf1\"},\"value\":[1796236354,\"7\"]}]}}";
    for (int i = 0; i < f->n; i++) {
        int c = accept(f->fd, NULL, NULL);
        if (c < 0)
            return NULL;
        size_t o = 0;
        while (o + 1 < sizeof f->req[i] && !strstr(f->req[i], "\r\n\r\n")) {
            ssize_t k = read(c, f->req[i] + o, sizeof f->req[i] - 1 - o);
            if (k <= 0)
                break;
            o += (size_t)k;
            f->req[i][o] = '\0';
        }
        char head[256];
        int hl = snprintf(head, sizeof head,
                          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                          sizeof body - 1);
        if (write(c, head, (size_t)hl) != hl || write(c, body, sizeof body - 1) < 0)
            i = f->n;
        close(c);
    }
    return NULL;
}

/* A listening socket on a free loopback port (its number in *port). */
static int
listen_loopback(unsigned *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    *port = ntohs(sa.sin_port);
    return fd;
}

static void
fake_start(struct fake *f, int n, pthread_t *t)
{
    memset(f, 0, sizeof *f);
    f->n = n;
    f->fd = listen_loopback(&f->port);
    assert_int_equal(pthread_create(t, NULL, fake_run, f), 0);
}

/* One query with analysis.history.compression as given; the request's head in req. */
static void
query_with(bool compression, char *req, size_t len)
{
    struct fake f;
    pthread_t t;
    fake_start(&f, 1, &t);
    char url[64], err[512] = "";
    snprintf(url, sizeof url, "http://127.0.0.1:%u", f.port);
    struct fs_history_cfg cfg = {
        .url = url, .remote_timeout_us = 5000000, .compression = compression};
    struct fs_prom_client *c = fs_prom_client_new(&cfg, err, sizeof err);
    assert_non_null(c);
    struct got g = {0};
    assert_int_equal(
        fs_prom_query_instant(c, "up", 1796236354000000LL, 0, series_cb, &g, err, sizeof err), 0);
    assert_int_equal(g.series, 1);
    pthread_join(t, NULL);
    close(f.fd);
    snprintf(req, len, "%s", f.req[0]);
    fs_prom_client_free(c);
}

/* No gzip unless asked for: the server's compression cost more than the bytes it saved
   (issue 30: 0.7 s a raw query of a pod's 8 hours, on loopback). */
static void
test_compression(void **state)
{
    (void)state;
    char req[2048];
    query_with(false, req, sizeof req);
    assert_non_null(strstr(req, "GET /api/v1/query?"));
    assert_null(strcasestr(req, "Accept-Encoding"));
    query_with(true, req, sizeof req);
    assert_non_null(strcasestr(req, "Accept-Encoding"));
    assert_non_null(strstr(req, "gzip"));
}

/* The extra connections: the client itself as the first, the others made once, kept and
   each able to query (on a connection of its own); none past FS_PROM_CONNS. */
static void
test_connections(void **state)
{
    (void)state;
    struct fake f;
    pthread_t t;
    fake_start(&f, 2, &t);
    char url[64], err[512] = "";
    snprintf(url, sizeof url, "http://127.0.0.1:%u", f.port);
    struct fs_history_cfg cfg = {.url = url, .remote_timeout_us = 5000000};
    struct fs_prom_client *c = fs_prom_client_new(&cfg, err, sizeof err);
    assert_non_null(c);
    assert_ptr_equal(fs_prom_client_conn(c, 0, err, sizeof err), c);
    struct fs_prom_client *c1 = fs_prom_client_conn(c, 1, err, sizeof err);
    assert_non_null(c1);
    assert_ptr_not_equal(c1, c);
    assert_ptr_equal(fs_prom_client_conn(c, 1, err, sizeof err), c1);
    struct fs_prom_client *last = fs_prom_client_conn(c, FS_PROM_CONNS - 1, err, sizeof err);
    assert_non_null(last);
    assert_null(fs_prom_client_conn(c, FS_PROM_CONNS, err, sizeof err));
    struct got g = {0};
    assert_int_equal(
        fs_prom_query_instant(c1, "up", 1796236354000000LL, 0, series_cb, &g, err, sizeof err), 0);
    assert_int_equal(
        fs_prom_query_instant(last, "up", 1796236354000000LL, 0, series_cb, &g, err, sizeof err),
        0);
    assert_int_equal(g.series, 2);
    assert_string_equal(g.first_target, "leaf1");
    pthread_join(t, NULL);
    close(f.fd);
    fs_prom_client_free(c); /* frees c1 and last too (ASan would see a leak) */
}

/* Cancels once a connection has arrived (the query is then waiting for an answer that
   never comes) and keeps it open. */
struct hang {
    int fd, conn;
    atomic_bool *cancel;
};

static void *
hang_run(void *arg)
{
    struct hang *h = arg;
    h->conn = accept(h->fd, NULL, NULL);
    atomic_store(h->cancel, true);
    return NULL;
}

/* fs_prom_client_set_cancel: a query waiting on a server that never answers stops within
   about a second of the flag (not at remote_timeout, 60 s here), on a connection made
   before the flag was given; one made after it inherits it and fails at once. */
static void
test_cancel(void **state)
{
    (void)state;
    atomic_bool cancel = false;
    struct hang h = {.cancel = &cancel, .conn = -1};
    unsigned port;
    h.fd = listen_loopback(&port);
    char url[64], err[512] = "";
    snprintf(url, sizeof url, "http://127.0.0.1:%u", port);
    struct fs_history_cfg cfg = {.url = url, .remote_timeout_us = 60000000};
    struct fs_prom_client *c = fs_prom_client_new(&cfg, err, sizeof err);
    assert_non_null(c);
    struct fs_prom_client *c1 = fs_prom_client_conn(c, 1, err, sizeof err);
    assert_non_null(c1);
    fs_prom_client_set_cancel(c, &cancel);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hang_run, &h), 0);
    struct got g = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(
        fs_prom_query_instant(c1, "up", 1796236354000000LL, 0, series_cb, &g, err, sizeof err), -1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_join(t, NULL);
    assert_true(h.conn >= 0); /* it was cancelled inside the read, not before it */
    double took = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_true(took < 10.0);
    assert_non_null(strstr(err, "read cancelled"));
    assert_int_equal(g.series, 0);
    err[0] = '\0';
    struct fs_prom_client *c2 = fs_prom_client_conn(c, 2, err, sizeof err);
    assert_non_null(c2);
    assert_int_equal(
        fs_prom_query_instant(c2, "up", 1796236354000000LL, 0, series_cb, &g, err, sizeof err), -1);
    assert_non_null(strstr(err, "read cancelled"));
    close(h.conn);
    close(h.fd);
    fs_prom_client_free(c);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matrix_any_chunking),
        cmocka_unit_test(test_vector),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_callback_stops),
        cmocka_unit_test(test_url_credentials_hidden),
        cmocka_unit_test(test_compression),
        cmocka_unit_test(test_connections),
        cmocka_unit_test(test_cancel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
