/* The importers' client against a real HTTP server (libmicrohttpd on 127.0.0.1, a free
 * port) that answers with the analysis entry points: the NTP-style offset measurement
 * against GET /api/v1/time with a server clock shifted by a known amount, and posting in
 * batches to POST /api/v1/host-events with the bearer token, including a refusal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>

#include "http/analysis_api.h"
#include "importers/client.h"
#include "importers/command.h"

/* The test server's clock runs this far ahead of ours: the host is 40 ms behind it. */
#define SERVER_AHEAD_NS 40000000LL

struct server {
    struct MHD_Daemon *d;
    struct fs_analysis *an;
    uint16_t port;
    int posts;
};

struct upload {
    struct fs_buf body;
    int64_t receive_ns;
};

static int64_t
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static enum MHD_Result
reply(struct MHD_Connection *c, int status, struct fs_buf *b)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(b->len, b->data ? b->data : "", MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result
handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
       const char *version, const char *data, size_t *size, void **con_cls)
{
    (void)version;
    struct server *sv = cls;
    struct upload *up = *con_cls;
    if (!up) {
        up = calloc(1, sizeof *up);
        fs_buf_init(&up->body, 64 << 20);
        up->receive_ns = now_ns() + SERVER_AHEAD_NS;
        *con_cls = up;
        return MHD_YES;
    }
    if (*size) {
        fs_buf_append(&up->body, data, *size);
        *size = 0;
        return MHD_YES;
    }
    struct fs_buf out;
    fs_buf_init(&out, 1 << 20);
    int status;
    if (strcmp(method, "GET") == 0 && strcmp(url, "/api/v1/time") == 0) {
        /* fs_analysis_time reads our clock for send_ns; shift it like receive_ns. */
        status = fs_analysis_time(up->receive_ns, &out);
        char *p = strstr(out.data, "\"send_ns\":");
        long long send = atoll(p + 10) + SERVER_AHEAD_NS;
        fs_buf_reset(&out);
        fs_buf_printf(&out, "{\"receive_ns\":%lld,\"send_ns\":%lld}", (long long)up->receive_ns,
                      send);
    } else if (strcmp(method, "POST") == 0 && strcmp(url, "/api/v1/host-events") == 0) {
        sv->posts++;
        const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
        status =
            fs_analysis_post_host_events(sv->an, auth, up->body.data ? up->body.data : "",
                                         up->body.len, (now_ns() + SERVER_AHEAD_NS) / 1000, &out);
    } else {
        status = 404;
        fs_buf_puts(&out, "{}");
    }
    enum MHD_Result ret = reply(c, status, &out);
    fs_buf_free(&out);
    return ret;
}

static void
completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t)
{
    (void)cls;
    (void)c;
    (void)t;
    struct upload *up = *con_cls;
    if (up) {
        fs_buf_free(&up->body);
        free(up);
    }
    *con_cls = NULL;
}

static int
setup(void **state)
{
    struct server *sv = calloc(1, sizeof *sv);
    char err[256];
    struct fs_host_events_opts ho = {64 << 20, 3600LL * 1000000000LL};
    sv->an = fs_analysis_new(&ho, err, sizeof err);
    assert_non_null(sv->an);
    assert_int_equal(fs_analysis_set_token(sv->an, "tok-123"), 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sv->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, handle, sv,
                             MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                             MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_END);
    assert_non_null(sv->d);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(sv->d, MHD_DAEMON_INFO_BIND_PORT);
    sv->port = di->port;
    *state = sv;
    return 0;
}

static int
teardown(void **state)
{
    struct server *sv = *state;
    MHD_stop_daemon(sv->d);
    fs_analysis_free(sv->an);
    free(sv);
    return 0;
}

static void
test_offset_and_post(void **state)
{
    struct server *sv = *state;
    char url[64], err[512], tokfile[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/", (unsigned)sv->port);
    snprintf(tokfile, sizeof tokfile, "/tmp/fs-test-token-%d", (int)getpid());
    FILE *f = fopen(tokfile, "w");
    fputs("tok-123\n", f);
    fclose(f);
    struct fs_imp_client c;
    assert_int_equal(fs_imp_client_open(&c, url, tokfile, err, sizeof err), 0);
    int64_t off, unc;
    assert_int_equal(fs_imp_client_offset(&c, &off, &unc, err, sizeof err), 0);
    print_message("offset %+.3f ms ± %.3f ms (truth %+.3f ms)\n", (double)off / 1e6,
                  (double)unc / 1e6, -(double)SERVER_AHEAD_NS / 1e6);
    /* Host minus collector = -40 ms, within the stated bound (loopback: well under 5 ms). */
    assert_true(llabs(off + SERVER_AHEAD_NS) <= unc);
    assert_true(unc < 5000000);

    struct fs_imp_batch b = {0};
    int64_t t = now_ns();
    for (int i = 0; i < FS_IMP_BATCH + 10; i++) { /* two batches */
        struct fs_imp_event *e = fs_imp_add(&b, "gpu1", "nccl.kernel", "AllReduce",
                                            t + i * 1000000LL, t + i * 1000000LL + 500000);
        assert_non_null(e);
        assert_int_equal(fs_imp_attr_int(e, "stream", 7), 0);
        assert_int_equal(fs_imp_attr_str(e, "comm", "0x\"ab\\"), 0);
    }
    struct fs_imp_post_result pr;
    sv->posts = 0;
    assert_int_equal(fs_imp_client_post(&c, &b, off, unc, &pr, err, sizeof err), 0);
    assert_int_equal(pr.posted, b.n);
    assert_int_equal(pr.stored, b.n);
    assert_int_equal(pr.evicted, 0);
    assert_int_equal(sv->posts, 2);
    struct fs_host_events_stats st;
    fs_host_events_stats(fs_analysis_host_events(sv->an), &st);
    assert_int_equal(st.events, b.n);
    /* The same import again, with another offset: nothing stored twice. */
    assert_int_equal(fs_imp_client_post(&c, &b, off + 123456, unc, &pr, err, sizeof err), 0);
    assert_int_equal(pr.posted, b.n);
    assert_int_equal(pr.stored, 0);
    assert_int_equal(pr.duplicates, b.n);
    fs_host_events_stats(fs_analysis_host_events(sv->an), &st);
    assert_int_equal(st.events, b.n);
    fs_imp_client_close(&c);

    /* A wrong token: the collector's refusal is reported, nothing stored. */
    f = fopen(tokfile, "w");
    fputs("wrong\n", f);
    fclose(f);
    assert_int_equal(fs_imp_client_open(&c, url, tokfile, err, sizeof err), 0);
    assert_int_equal(fs_imp_client_post(&c, &b, off, unc, &pr, err, sizeof err), -1);
    assert_non_null(strstr(err, "HTTP 401"));
    assert_int_equal(pr.posted, 0);
    fs_imp_client_close(&c);
    fs_imp_batch_free(&b);
    unlink(tokfile);

    /* Nothing listening: a clear error. */
    assert_int_equal(fs_imp_client_open(&c, "http://127.0.0.1:1", NULL, err, sizeof err), 0);
    assert_int_equal(fs_imp_client_offset(&c, &off, &unc, err, sizeof err), -1);
    assert_non_null(strstr(err, "/api/v1/time"));
    fs_imp_client_close(&c);
    assert_int_equal(fs_imp_client_open(&c, "ftp://x", NULL, err, sizeof err), -1);
}

/* Runs fs_imp_client_run; its exit code, with what it printed in out and errs. */
static int
run(const struct fs_imp_args *a, const struct fs_imp_batch *b, char *out, char *errs, size_t len)
{
    FILE *o = tmpfile(), *e = tmpfile();
    assert_non_null(o);
    assert_non_null(e);
    int rc = fs_imp_client_run(a, b, "import-test", o, e);
    rewind(o);
    rewind(e);
    size_t n = fread(out, 1, len - 1, o);
    out[n] = '\0';
    n = fread(errs, 1, len - 1, e);
    errs[n] = '\0';
    fclose(o);
    fclose(e);
    return rc;
}

/* The offset of the capture: an old capture is refused without one recorded at capture
 * time; an offset file or a given offset is used as is; a store that drops part of an
 * import makes it fail. */
static void
test_offset_at_capture_and_eviction(void **state)
{
    struct server *sv = *state;
    char url[64], out[2048], errs[2048], path[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u", (unsigned)sv->port);
    setenv("FABRICSCOPE_TOKEN", "tok-123", 1);
    struct fs_imp_batch old = {0};
    int64_t t = now_ns() - 3600LL * 1000000000; /* an hour ago */
    for (int i = 0; i < 10; i++)
        assert_non_null(fs_imp_add(&old, "gpu1", "perf.x", "x", t + i, t + i));
    struct fs_imp_args a = {.url = url, .host = "gpu1"};
    assert_int_equal(run(&a, &old, out, errs, sizeof out), 1);
    assert_non_null(strstr(errs, "the capture ended 60 min ago"));
    assert_non_null(strstr(errs, "--offset-file"));
    a.offset_now = true;
    assert_int_equal(run(&a, &old, out, errs, sizeof out), 0);
    assert_non_null(strstr(out, "posted 10 events, 10 stored"));
    /* Given: used as is (the events land at host time minus it). */
    struct fs_imp_args g = {.url = url,
                            .offset_source = FS_IMP_OFFSET_GIVEN,
                            .host_offset_ns = 5000000,
                            .host_offset_unc_ns = 200};
    struct fs_imp_batch one = {0};
    assert_non_null(fs_imp_add(&one, "gpu2", "perf.y", "y", t, t));
    assert_int_equal(run(&g, &one, out, errs, sizeof out), 0);
    assert_non_null(strstr(out, "+5.000 ms"));
    /* From a file as clock-offset writes it; a broken file is named. */
    snprintf(path, sizeof path, "/tmp/fs-test-offset-%d.json", (int)getpid());
    FILE *f = fopen(path, "w");
    fprintf(f,
            "{\"host\":\"gpu3\",\"offset_ns\":-7000000,\"uncertainty_ns\":300,"
            "\"measured_at_ns\":%lld}\n",
            (long long)t);
    fclose(f);
    struct fs_imp_args fa = {.url = url, .offset_source = FS_IMP_OFFSET_FILE, .offset_file = path};
    struct fs_imp_batch three = {0};
    assert_non_null(fs_imp_add(&three, "gpu3", "perf.z", "z", t, t));
    assert_int_equal(run(&fa, &three, out, errs, sizeof out), 0);
    assert_non_null(strstr(out, "-7.000 ms"));
    assert_non_null(strstr(out, "measured on gpu3"));
    f = fopen(path, "w");
    fputs("{\"offset_ns\": \"soon\"}\n", f);
    fclose(f);
    assert_int_equal(run(&fa, &three, out, errs, sizeof out), 1);
    assert_non_null(strstr(errs, path));
    unlink(path);
    /* A store too small for the import: its first batch is dropped by its second. */
    struct fs_host_events_opts small = {700 << 10, 3600LL * 1000000000LL};
    fs_host_events_set_opts(fs_analysis_host_events(sv->an), &small);
    struct fs_imp_batch big = {0};
    t = now_ns();
    for (int i = 0; i < FS_IMP_BATCH + 3000; i++)
        assert_non_null(
            fs_imp_add(&big, "gpu4", "nccl.kernel", "AllReduce", t + i * 1000, t + i * 1000 + 10));
    struct fs_imp_args na = {.url = url};
    assert_int_equal(run(&na, &big, out, errs, sizeof out), 1);
    assert_non_null(strstr(errs, "the collector dropped"));
    fs_imp_batch_free(&old);
    fs_imp_batch_free(&one);
    fs_imp_batch_free(&three);
    fs_imp_batch_free(&big);
    unsetenv("FABRICSCOPE_TOKEN");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_offset_and_post, setup, teardown),
        cmocka_unit_test_setup_teardown(test_offset_at_capture_and_eviction, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
