/*
 * Analysis benchmarks.
 *   BENCH host_events_ingest_per_s: POST bodies of 1,000 NCCL-like events each (host,
 *     kind, name, start, end and two attrs; ~160 bytes an event, the batch size the
 *     importers post), parsed, validated and stored; 2,000,000 events in all into a
 *     store large enough to keep them.
 *   BENCH host_events_json_c_parse_only_per_s: json-c alone parsing and freeing the same
 *     bodies, the ceiling the ingest can reach (for context).
 *   BENCH incidents_ms and BENCH correlate_ms: one hour at 1 s (3,600 samples, plus 300 s
 *     of baseline history before the hour) over 100,000 series, 1,000 host windows for
 *     correlate. Both include the departure scan of every series (the dominant cost),
 *     then episode/recurrence finding or the ranking. Scaling: the series' values come
 *     from a pool of 512 pre-generated arrays (noisy rates, flat zeros, stray marks,
 *     noisy queue gauges, bursty busy ports) handed out in turn, plus one culprit port
 *     surging 2 s every 30 s, so generation is not timed and memory stays small; reading
 *     the samples out of the ring is not included (see ring_decode_msamples_per_s).
 *     Times are the thread's CPU time (the work is single-threaded).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "analysis/correlate.h"
#include "analysis/host_events.h"
#include "analysis/incidents.h"

/* The analysis is single-threaded: its CPU time, which on a 2-core machine shared with
   other builds is what the code costs (wall time there measures the neighbours too). */
static double
cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
bench_host_events(void)
{
    const size_t per_post = 1000, posts = 2000;
    const int64_t t0 = 1796236354000000000LL;
    size_t cap = per_post * 256 + 256;
    char *body = malloc(cap);
    char err[256];
    struct fs_host_events_opts o = {2ULL << 30, 24LL * 3600 * 1000000000LL};
    struct fs_host_events *hs = fs_host_events_new(&o, err, sizeof err);
    if (!body || !hs) {
        fprintf(stderr, "bench_analysis: %s\n", hs ? "out of memory" : err);
        exit(1);
    }
    double parse_s = 0, jc_s = 0;
    size_t total = 0, bytes = 0;
    for (size_t p = 0; p < posts; p++) {
        size_t l = (size_t)snprintf(body, cap,
                                    "{\"host_offset_ns\":-40000000,"
                                    "\"host_offset_uncertainty_ns\":51000,\"events\":[");
        for (size_t i = 0; i < per_post; i++) {
            int64_t s = t0 + (int64_t)(p * per_post + i) * 100000000LL;
            l += (size_t)snprintf(body + l, cap - l,
                                  "%s{\"host\":\"gpu-node-%02zu\",\"kind\":\"nccl.kernel\","
                                  "\"name\":\"AllReduce\",\"start\":%lld,\"end\":%lld,"
                                  "\"attrs\":{\"stream\":%zu,\"size_bytes\":1048576}}",
                                  i ? "," : "", p % 16, (long long)s,
                                  (long long)(s + 2500000 + (int64_t)(i % 97) * 1000), i % 8);
        }
        l += (size_t)snprintf(body + l, cap - l, "]}");
        bytes += l;
        double a = now_s();
        struct json_object *jo = json_tokener_parse(body);
        json_object_put(jo);
        jc_s += now_s() - a;
        a = now_s();
        size_t stored = 0;
        int rc = fs_host_events_ingest(hs, body, l, t0, &stored, err, sizeof err);
        parse_s += now_s() - a;
        if (rc != 0 || stored != per_post) {
            fprintf(stderr, "bench_analysis: ingest failed: %d %s\n", rc, err);
            exit(1);
        }
        total += stored;
    }
    struct fs_host_events_stats st;
    fs_host_events_stats(hs, &st);
    fprintf(stderr, "# host events: %zu events, %.0f bytes/event posted, %.0f bytes/event held\n",
            total, (double)bytes / (double)total, (double)st.bytes / (double)st.events);
    printf("BENCH host_events_ingest_per_s %.0f events/s\n", (double)total / parse_s);
    printf("BENCH host_events_json_c_parse_only_per_s %.0f events/s\n", (double)total / jc_s);
    fs_host_events_free(hs);
    free(body);
}

/* ---- departures, incidents, correlate ---- */

#define AN_S 1000000LL
#define AN_T0 (1796236354LL * AN_S)
#define AN_HIST 600
#define AN_NPTS (3600 + AN_HIST)
#define AN_POOL 512

static uint64_t an_rng = 20261203;

static double
an_urand(void)
{
    uint64_t z = (an_rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

static double
an_gauss(void)
{
    double u = an_urand(), v = an_urand();
    return sqrt(-2 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

static bool
an_surge(int64_t t)
{
    int64_t rel = t - (AN_T0 + AN_HIST * AN_S + 7 * AN_S);
    int64_t m = ((rel % (30 * AN_S)) + 30 * AN_S) % (30 * AN_S);
    return m < 2 * AN_S;
}

static struct fs_departures *
an_scan(int64_t *ts, double *pool, double *culprit, double *scan_ms)
{
    struct fs_departures *d =
        fs_departures_new(NULL, AN_T0 + AN_HIST * AN_S, AN_T0 + (int64_t)AN_NPTS * AN_S);
    double a = cpu_s();
    char target[32], iface[32];
    for (int k = 0; k < 100000; k++) {
        snprintf(target, sizeof target, "tor%d", 1 + k / 1000);
        snprintf(iface, sizeof iface, "Eth1/%d", 1 + (k / 16) % 64);
        bool is_culprit = k == 48 * 16;
        int p = k % AN_POOL;
        bool gauge = p % 5 == 3;
        struct fs_an_series s = {
            .target = target,
            .interface = iface,
            .metric = gauge ? "fabric_queue_depth_bytes" : "fabric_queue_ecn_marked_packets_total",
            .kind = gauge ? FS_AN_QUEUE : FS_AN_ECN,
            .is_rate = !gauge,
            .ts_us = ts,
            .v = is_culprit ? culprit : pool + (size_t)p * AN_NPTS,
            .n = AN_NPTS,
            .abs_floor = gauge ? 10000 : 10,
            .time_uncertainty_us = 2000,
        };
        if (fs_departures_add(d, &s) != 0) {
            fprintf(stderr, "bench_analysis: out of memory\n");
            exit(1);
        }
    }
    if (fs_departures_finish(d) != 0)
        exit(1);
    *scan_ms = (cpu_s() - a) * 1e3;
    return d;
}

static void
bench_incidents_correlate(void)
{
    int64_t *ts = malloc(AN_NPTS * sizeof *ts);
    double *pool = malloc((size_t)AN_POOL * AN_NPTS * sizeof *pool);
    double *culprit = malloc(AN_NPTS * sizeof *culprit);
    if (!ts || !pool || !culprit)
        exit(1);
    for (int i = 0; i < AN_NPTS; i++)
        ts[i] = AN_T0 + i * AN_S + (int64_t)(an_urand() * 20000);
    for (int p = 0; p < AN_POOL; p++) {
        double *v = pool + (size_t)p * AN_NPTS;
        int cls = p % 5;
        bool burst = false;
        for (int i = 0; i < AN_NPTS; i++) {
            if (cls == 4) /* busy port: bursts 2% of seconds, 1-5 s */
                burst = burst ? an_urand() > 0.3 : an_urand() < 0.02;
            v[i] = cls == 0   ? 1000 + 50 * an_gauss()
                   : cls == 1 ? 0
                   : cls == 2 ? (an_urand() < 0.01 ? 5 : 0)
                   : cls == 3 ? fabs(2e5 + 2e4 * an_gauss())
                              : 2e3 + 200 * an_gauss() + (burst ? 3e4 : 0);
        }
    }
    for (int i = 0; i < AN_NPTS; i++)
        culprit[i] = 100 + 10 * an_gauss() + (an_surge(ts[i]) ? 5e4 : 0);

    double scan_ms, scan2_ms;
    struct fs_departures *d = an_scan(ts, pool, culprit, &scan_ms);
    fprintf(stderr, "# scan: %zu series, %zu prefiltered, %zu departing, %zu runs, %.0f ms\n",
            d->series_scanned, d->series_prefiltered, d->n_series, d->n_runs, scan_ms);
    double a = cpu_s();
    struct fs_incident_report *r = NULL;
    if (fs_incidents_find(d, d->end_us, &r) != 0)
        exit(1);
    double inc_ms = (cpu_s() - a) * 1e3;
    fprintf(stderr, "# incidents: %zu episodes, %zu groups; top period %.3f s\n", r->n_episodes,
            r->n_groups, r->n_groups ? r->groups[0].period_us / 1e6 : 0.0);
    fs_incident_report_free(r);
    fs_departures_free(d);

    d = an_scan(ts, pool, culprit, &scan2_ms);
    struct fs_corr_window w[1000];
    for (int i = 0; i < 1000; i++) {
        int64_t s = d->start_us + (int64_t)(an_urand() * 3590.0 * AN_S);
        w[i] = (struct fs_corr_window){s, s + 250000, 50000, (size_t)i};
    }
    a = cpu_s();
    struct fs_corr_report *cr = NULL;
    if (fs_correlate(d, w, 1000, NULL, &cr) != 0)
        exit(1);
    double corr_ms = (cpu_s() - a) * 1e3;
    fprintf(stderr, "# correlate: %zu aggregates; ranking alone %.1f ms\n", cr->n_aggregates,
            corr_ms);
    fs_corr_report_free(cr);
    fs_departures_free(d);
    printf("BENCH incidents_ms %.0f ms\n", scan_ms + inc_ms);
    printf("BENCH correlate_ms %.0f ms\n", scan2_ms + corr_ms);
    free(ts);
    free(pool);
    free(culprit);
}

int
main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    if (!only || strcmp(only, "host_events") == 0)
        bench_host_events();
    if (!only || strcmp(only, "incidents") == 0)
        bench_incidents_correlate();
    return 0;
}
