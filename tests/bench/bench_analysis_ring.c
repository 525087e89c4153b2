/*
 * The analysis requests end to end, reading the ring: a store holding one hour at 1 s of
 * 100,000 series (plus the baseline window before the hour), fed through sinks as the
 * drivers feed it, then the calls the HTTP handlers make.
 *   BENCH analysis_refresh_ms: fs_analysis_refresh, the daemon's background pass every
 *     30 s, the first time (scans the ring's whole span into the episode log, keeps each
 *     series' baseline for the requests, recomputes the incident metrics).
 *   BENCH analysis_refresh_incremental_ms: the next refresh, 10 s later (the requests
 *     below come 10 s after this one): it scans only
 *     from a minute before the last one (reading the baseline window before that) and
 *     takes the rest from the episode log. A full scan still comes every 30 min.
 *   BENCH incidents_ms: GET /api/v1/incidents with the defaults, 10 s after a refresh
 *     (median of 3): what a request costs between two refreshes.
 *   BENCH correlate_ms: GET /api/v1/correlate with 1,000 host windows spread over the
 *     hour (median of 3).
 * The world: 100 switches of 1,000 series (ECN-marked packets counters and queue depth
 * gauges per port and traffic class): noisy rates, flat zeros, stray marks, noisy
 * gauges and bursty busy ports (25/45/15/12/3 %, as bench_analysis), values handed out
 * from a pool of 500 pre-generated arrays, and one culprit port whose ECN marks surge
 * 2 s every 30 s. The answers are checked (the 30 s recurrence of the culprit, found
 * correlations), so a fast wrong answer fails the benchmark. FS_BENCH_QUICK=1: 10,000
 * series.
 */
#include <json-c/json.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/analysis_api.h"
#include "store/store.h"
#include "util/buf.h"

#define S 1000000LL
#define T0 (1796236354LL * S)
#define HIST 600 /* baseline before the hour */
#define HOUR 3600
#define TAIL 10 /* seconds after the refresh when the requests come */
#define NPTS (HIST + HOUR + TAIL + 2)
#define POOL 500
#define PER_TARGET 1000

static uint64_t rng = 20261204;

static double
urand(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

static double
gauss(void)
{
    double u = urand(), v = urand();
    return sqrt(-2 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool
surge(int64_t t)
{
    int64_t rel = t - (T0 + HIST * S + 7 * S);
    int64_t m = ((rel % (30 * S)) + 30 * S) % (30 * S);
    return m < 2 * S;
}

static int
cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double
median3(double v[3])
{
    qsort(v, 3, sizeof *v, cmp_d);
    return v[1];
}

static void
fmt_time(char *b, size_t n, int64_t us)
{
    snprintf(b, n, "%lld.%06lld", (long long)(us / S), (long long)(us % S));
}

/* Does /incidents name the culprit (tor8 Eth1/49) recurring every 30 s? */
static bool
culprit_recurring(const char *doc)
{
    struct json_object *o = json_tokener_parse(doc), *data, *rec;
    bool found = false;
    if (o && json_object_object_get_ex(o, "data", &data) &&
        json_object_object_get_ex(data, "recurring", &rec))
        for (size_t i = 0; i < json_object_array_length(rec) && !found; i++) {
            struct json_object *g = json_object_array_get_idx(rec, i), *ser, *p, *s0, *t, *f;
            if (!json_object_object_get_ex(g, "series", &ser) ||
                !json_object_object_get_ex(g, "period_s", &p) ||
                !(s0 = json_object_array_get_idx(ser, 0)) ||
                !json_object_object_get_ex(s0, "target", &t) ||
                !json_object_object_get_ex(s0, "interface", &f))
                continue;
            found = !strcmp(json_object_get_string(t), "tor8") &&
                    !strcmp(json_object_get_string(f), "Eth1/49") &&
                    fabs(json_object_get_double(p) - 30) < 1;
        }
    json_object_put(o);
    return found;
}

int
main(void)
{
    const char *q = getenv("FS_BENCH_QUICK");
    size_t n_series = q && !strcmp(q, "1") ? 10000 : 100000;
    size_t n_targets = n_series / PER_TARGET;
    char err[256];
    struct fs_ring_opts ro = {.memory_limit = UINT64_C(8) << 30, .retention_us = 7200 * S};
    struct fs_store *st = fs_store_new(&ro, err, sizeof err);
    struct fs_host_events_opts ho = {64 << 20, 3600LL * 1000000000LL};
    struct fs_analysis *an = st ? fs_analysis_new(&ho, err, sizeof err) : NULL;
    double *pool = malloc((size_t)POOL * NPTS * sizeof *pool);
    int *cls = malloc(POOL * sizeof *cls);
    uint64_t *cum = calloc(n_series, sizeof *cum);
    struct fs_target_cfg *tc = calloc(n_targets, sizeof *tc);
    struct fs_sink **sink = calloc(n_targets, sizeof *sink);
    char(*names)[24] = calloc(n_targets, sizeof *names);
    if (!st || !an || !pool || !cls || !cum || !tc || !sink || !names) {
        fprintf(stderr, "bench_analysis_ring: %s\n", st && an ? "out of memory" : err);
        return 1;
    }
    static const int pct[5] = {25, 45, 15, 12, 3};
    for (int p = 0; p < POOL; p++) {
        int qq = p % 100, c = 0, acc = 0;
        for (c = 0; c < 4; c++) {
            acc += pct[c];
            if (qq < acc)
                break;
        }
        cls[p] = c;
        double *v = pool + (size_t)p * NPTS;
        bool burst = false;
        for (int i = 0; i < NPTS; i++) {
            if (c == 4)
                burst = burst ? urand() > 0.3 : urand() < 0.02;
            v[i] = c == 0   ? 1000 + 50 * gauss()
                   : c == 1 ? 0
                   : c == 2 ? (urand() < 0.01 ? 5 : 0)
                   : c == 3 ? fabs(2e5 + 2e4 * gauss())
                            : 2e3 + 200 * gauss() + (burst ? 3e4 : 0);
            if (v[i] < 0)
                v[i] = 0;
        }
    }
    for (size_t k = 0; k < n_targets; k++) {
        snprintf(names[k], sizeof names[k], "tor%zu", k + 1);
        tc[k].name = names[k];
        tc[k].address = "192.0.2.1";
        tc[k].staleness_intervals = 3;
        sink[k] = fs_store_sink_add(st, &tc[k], "snmp", S);
        if (!sink[k]) {
            fprintf(stderr, "bench_analysis_ring: no sink\n");
            return 1;
        }
    }
    char ifname[64][16], tcname[16][4];
    for (int i = 0; i < 64; i++)
        snprintf(ifname[i], sizeof ifname[i], "Eth1/%d", i + 1);
    for (int i = 0; i < 16; i++)
        snprintf(tcname[i], sizeof tcname[i], "%d", i % 8);
    const size_t culprit = 7 * PER_TARGET + 48 * 16; /* tor8 Eth1/49 */

    /* One poll of every switch at second i. */
    double fill0 = now_s();
    int64_t refresh_at = T0 + (int64_t)(HIST + HOUR) * S;
    double refresh_ms = 0, incr_ms = 0;
    for (int i = 0; i < NPTS; i++) {
        int64_t t = T0 + (int64_t)i * S;
        if (t == refresh_at - TAIL * S || t == refresh_at) {
            double a = now_s();
            if (fs_analysis_refresh(an, st, t) != 0) {
                fprintf(stderr, "bench_analysis_ring: refresh failed\n");
                return 1;
            }
            *(t == refresh_at ? &incr_ms : &refresh_ms) = (now_s() - a) * 1e3;
        }
        for (size_t k = 0; k < n_targets; k++) {
            fs_sink_begin(sink[k], t + 5000 + (int64_t)(k * 97 % 20000));
            for (size_t j = 0; j < PER_TARGET; j++) {
                size_t s = k * PER_TARGET + j;
                int p = (int)(s % POOL);
                /* tc 0-7 of a port: ECN counters; the other 8 slots: depth gauges
                   (class 3 arrays), so (metric, interface, tc) is unique. */
                bool gauge = (j % 16) >= 8 && s != culprit;
                struct fs_label l[2] = {{"interface", ifname[(j / 16) % 64]},
                                        {"tc", tcname[j % 16]}};
                if (gauge) {
                    int gp = (p / 100) * 100 + 25 + 45 + 15 + (p % 12); /* a class-3 array */
                    fs_sink_gauge(sink[k], FS_M_QUEUE_DEPTH, l, 2, pool[(size_t)gp * NPTS + i]);
                } else {
                    double r = s == culprit ? 100 + 10 * gauss() + (surge(t) ? 5e4 : 0)
                                            : pool[(size_t)p * NPTS + i];
                    cum[s] += (uint64_t)r;
                    fs_sink_counter(sink[k], FS_M_QUEUE_ECN_MARKED, l, 2, cum[s], 64);
                }
            }
            fs_sink_end(sink[k]);
        }
    }
    int64_t now = T0 + (int64_t)(NPTS - 1) * S + S / 2;
    struct fs_ring_stats rs;
    uint64_t lim;
    fs_store_ring_stats(st, &rs, &lim);
    fprintf(stderr, "# filled %zu series, %llu samples, %.0f MiB of ring in %.0f s\n", n_series,
            (unsigned long long)rs.samples, (double)rs.bytes / 1048576.0, now_s() - fill0);

    struct fs_buf out;
    fs_buf_init(&out, 256 << 20);
    double inc[3], cor[3];
    for (int r = 0; r < 3; r++) {
        fs_buf_reset(&out);
        double a = now_s();
        int rc = fs_analysis_incidents(an, st, NULL, 0, now, &out);
        inc[r] = (now_s() - a) * 1e3;
        if (rc != 200 || !culprit_recurring(out.data)) {
            fprintf(stderr, "bench_analysis_ring: incidents %d without the culprit: %.400s\n", rc,
                    out.data);
            return 1;
        }
    }
    /* 1,000 windows of 250 ms over the hour, the first 30 on the culprit's surges. */
    static struct fs_analysis_arg args[1000];
    static char wb[1000][64];
    for (int i = 0; i < 1000; i++) {
        int64_t s0 = i < 30 ? T0 + (int64_t)(HIST + 7 + 30 * (i * 4 + 1)) * S + S / 2
                            : T0 + HIST * S + (int64_t)(urand() * (HOUR - 10) * (double)S);
        char a[32], b[32];
        fmt_time(a, sizeof a, s0);
        fmt_time(b, sizeof b, s0 + 250000);
        snprintf(wb[i], sizeof wb[i], "%s,%s", a, b);
        args[i] = (struct fs_analysis_arg){"window", wb[i]};
    }
    for (int r = 0; r < 3; r++) {
        fs_buf_reset(&out);
        double a = now_s();
        int rc = fs_analysis_correlate(an, st, args, 1000, now, &out);
        cor[r] = (now_s() - a) * 1e3;
        if (rc != 200 || !strstr(out.data, "\"Eth1/49\"")) {
            fprintf(stderr, "bench_analysis_ring: correlate %d without the culprit: %.400s\n", rc,
                    out.data);
            return 1;
        }
    }
    const char *sfx = n_series == 100000 ? "" : "_quick";
    printf("BENCH analysis_refresh_ms%s %.0f ms\n", sfx, refresh_ms);
    printf("BENCH analysis_refresh_incremental_ms%s %.0f ms\n", sfx, incr_ms);
    printf("BENCH incidents_ms%s %.0f ms\n", sfx, median3(inc));
    printf("BENCH correlate_ms%s %.0f ms\n", sfx, median3(cor));
    fs_buf_free(&out);
    for (size_t k = 0; k < n_targets; k++)
        fs_store_sink_remove(st, sink[k]);
    fs_analysis_free(an);
    fs_store_free(st);
    free(pool);
    free(cls);
    free(cum);
    free(tc);
    free(sink);
    free(names);
    return 0;
}
