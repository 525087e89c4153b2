/*
 * /metrics scrape benchmark: a store with 100,000 (then 1,000,000) series fed by the
 * synthetic test source, ingest running on another thread the whole time, and a whole
 * HTTP GET over loopback timed from connect to the last byte (median of several).
 * Also counts mallocs during a render into a reused buffer, per series, with a malloc
 * interposer in this binary.
 *
 *   bench_scrape [--quick]     (--quick: 100k only)
 * Prints: BENCH metrics_scrape_ms_100k_plain|_100k_gzip|_1m_plain <v> ms,
 *         BENCH metrics_render_cpu_ms_100k|_1m <v> ms (the render alone, into a grown
 *         buffer, CPU time of the rendering thread: the rest of a scrape is the transfer),
 *         BENCH metrics_mallocs_per_series <v> count
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http/expo.h"
#include "http/http.h"
#include "store/store.h"
#include "synth.h"

/* ---- malloc counting: only on the thread that sets `counting` ---- */

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);

static _Thread_local bool counting;
static _Atomic uint64_t n_mallocs;

void *
malloc(size_t n)
{
    if (counting)
        atomic_fetch_add_explicit(&n_mallocs, 1, memory_order_relaxed);
    return __libc_malloc(n);
}

void *
calloc(size_t a, size_t b)
{
    if (counting)
        atomic_fetch_add_explicit(&n_mallocs, 1, memory_order_relaxed);
    return __libc_calloc(a, b);
}

void *
realloc(void *p, size_t n)
{
    if (counting)
        atomic_fetch_add_explicit(&n_mallocs, 1, memory_order_relaxed);
    return __libc_realloc(p, n);
}

/* ---- */

static double
mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

struct ingest {
    struct fs_synth *sy;
    size_t n_targets;
    atomic_bool stop;
    uint64_t polls;
};

static void *
ingest_main(void *arg)
{
    struct ingest *in = arg;
    uint64_t cycle = 3;
    while (!atomic_load(&in->stop)) {
        for (size_t i = 0; i < in->n_targets && !atomic_load(&in->stop); i++) {
            fs_synth_poll_target(in->sy, i, fs_synth_now_us(), cycle);
            in->polls++;
        }
        cycle++;
    }
    return NULL;
}

/* One whole GET; returns the bytes of the answer (headers included), 0 on failure. */
static size_t
scrape(uint16_t port, bool gzip, char **buf, size_t *cap)
{
    char req[256];
    int rl = snprintf(req, sizeof req,
                      "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s\r\n",
                      gzip ? "Accept-Encoding: gzip\r\n" : "");
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        send(fd, req, (size_t)rl, MSG_NOSIGNAL) != rl) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    size_t len = 0;
    for (;;) {
        if (len + (1 << 20) > *cap) {
            *cap = *cap ? *cap * 2 : (64u << 20);
            *buf = realloc(*buf, *cap);
        }
        ssize_t n = recv(fd, *buf + len, *cap - len, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    if (len < 12 || memcmp(*buf + 9, "200", 3) != 0)
        return 0;
    return len;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double
median_scrape(uint16_t port, bool gzip, int runs, size_t *bytes)
{
    double t[32];
    char *buf = NULL;
    size_t cap = 0;
    scrape(port, gzip, &buf, &cap); /* warm: buffers grow to size once */
    for (int i = 0; i < runs; i++) {
        double t0 = mono_ms();
        *bytes = scrape(port, gzip, &buf, &cap);
        t[i] = mono_ms() - t0;
        if (!*bytes) {
            fprintf(stderr, "scrape failed\n");
            exit(1);
        }
    }
    free(buf);
    qsort(t, (size_t)runs, sizeof t[0], cmp_double);
    return t[runs / 2];
}

static int
run(size_t n_targets, size_t ports, const char *label, bool with_gzip, bool count_mallocs, int runs)
{
    char err[256];
    struct fs_ring_opts ro = {.memory_limit = 4ULL << 30, .retention_us = 3600LL * 1000000};
    struct fs_store *st = fs_store_new(&ro, err, sizeof err);
    if (!st) {
        fprintf(stderr, "store: %s\n", err);
        return 1;
    }
    double t0 = mono_ms();
    struct fs_synth *sy = fs_synth_new(st, "tor", n_targets, ports, 60 * 1000000LL);
    if (!sy) {
        fprintf(stderr, "synth: no memory\n");
        return 1;
    }
    fs_synth_poll(sy, fs_synth_now_us(), 1);
    fs_synth_poll(sy, fs_synth_now_us(), 2);
    size_t series = fs_synth_series(sy);
    fprintf(stderr, "%s: %zu series populated in %.0f ms\n", label, series, mono_ms() - t0);

    struct fs_http_opts o = {.host = "127.0.0.1", .port = 0, .threads = 2};
    struct fs_http *h = fs_http_start(&o, st, err, sizeof err);
    if (!h) {
        fprintf(stderr, "http: %s\n", err);
        return 1;
    }
    struct ingest in = {.sy = sy, .n_targets = n_targets};
    pthread_t th;
    pthread_create(&th, NULL, ingest_main, &in);

    size_t bytes = 0;
    double plain = median_scrape(fs_http_port(h), false, runs, &bytes);
    printf("BENCH metrics_scrape_ms_%s_plain %.1f ms\n", label, plain);
    fprintf(stderr, "  plain response %zu bytes\n", bytes);
    if (with_gzip) {
        double gz = median_scrape(fs_http_port(h), true, runs, &bytes);
        printf("BENCH metrics_scrape_ms_%s_gzip %.1f ms\n", label, gz);
        fprintf(stderr, "  gzip response %zu bytes\n", bytes);
    }
    {
        /* The render alone (into a buffer that has grown), on this thread's CPU clock:
         * what a scrape costs before its first byte leaves, apart from the transfer. */
        struct fs_buf b;
        fs_buf_init(&b, 1u << 30);
        fs_expo_render(st, &b);
        double rt[5];
        for (int i = 0; i < 5; i++) {
            fs_buf_reset(&b);
            struct timespec c0, c1;
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
            fs_expo_render(st, &b);
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
            rt[i] = (double)(c1.tv_sec - c0.tv_sec) * 1e3 + (double)(c1.tv_nsec - c0.tv_nsec) / 1e6;
        }
        qsort(rt, 5, sizeof rt[0], cmp_double);
        printf("BENCH metrics_render_cpu_ms_%s %.1f ms\n", label, rt[2]);
        fs_buf_free(&b);
    }
    if (count_mallocs) {
        struct fs_buf b;
        fs_buf_init(&b, 1u << 30);
        fs_expo_render(st, &b); /* grows the buffer once */
        fs_buf_reset(&b);
        atomic_store(&n_mallocs, 0);
        counting = true;
        fs_expo_render(st, &b);
        counting = false;
        uint64_t m = atomic_load(&n_mallocs);
        printf("BENCH metrics_mallocs_per_series %.4f count\n", (double)m / (double)series);
        fprintf(stderr, "  %llu mallocs in one render of %zu series\n", (unsigned long long)m,
                series);
        fs_buf_free(&b);
    }
    atomic_store(&in.stop, true);
    pthread_join(th, NULL);
    fprintf(stderr, "  ingest ran %llu target polls meanwhile\n", (unsigned long long)in.polls);
    fflush(stdout);
    fs_http_stop(h);
    fs_synth_free(sy);
    fs_store_free(st);
    return 0;
}

int
main(int argc, char **argv)
{
    bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    /* 25 targets x 91 ports x 44 = 100,100 series; 250 targets: 1,001,000. */
    if (run(25, 91, "100k", true, true, 9) != 0)
        return 1;
    if (!quick && run(250, 91, "1m", false, false, 3) != 0)
        return 1;
    return 0;
}
