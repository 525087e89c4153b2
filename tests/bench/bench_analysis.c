/*
 * Analysis benchmarks.
 *   BENCH host_events_ingest_per_s: POST bodies of 1,000 NCCL-like events each (host,
 *     kind, name, start, end and two attrs; ~160 bytes an event, the batch size the
 *     importers post), parsed, validated and stored; 2,000,000 events in all into a
 *     store large enough to keep them.
 *   BENCH host_events_yajl_parse_only_per_s: yajl alone parsing the same bodies with
 *     callbacks that do nothing (numbers as text, as the ingest takes them), the ceiling
 *     the ingest can reach (for context).
 *   BENCH incidents_arrays_ms and BENCH correlate_arrays_ms (the analysis alone; the
 *     requests end to end, reading the ring, are bench_analysis_ring's incidents_ms and
 *     correlate_ms): one hour at 1 s (3,600 samples, plus 300 s
 *     of baseline history before the hour) over 100,000 series, 1,000 host windows for
 *     correlate. Both include the departure scan of every series (the dominant cost),
 *     then episode/recurrence finding or the ranking. Scaling: the series' values come
 *     from a pool of 500 pre-generated arrays (noisy rates, flat zeros, stray marks,
 *     noisy queue gauges, bursty busy ports; the mix below) handed out in turn, plus one
 *     culprit port surging 2 s every 30 s, so generation is not timed and memory stays
 *     small; reading the samples out of the ring is not included (see
 *     ring_decode_msamples_per_s). _stress_bursty20: the same with a fifth of all series
 *     bursty.
 *     The scan runs on 2 threads (the API scans on up to 4); the figures are wall time,
 *     with the CPU time on stderr (this machine's 2 cores are shared, so wall time also
 *     measures the neighbours).
 *   BENCH import_nsys_mb_per_s: an Nsight Systems-shaped SQLite file (2026.4 columns)
 *     with 400,000 kernels (a third NCCL, names through StringIds) and 100,000 NVTX
 *     ranges (half NCCL-domain push/pop ranges), read by fs_import_nsys_read; file size
 *     over wall time (the file is in the page cache after being written).
 */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yajl/yajl_parse.h>

#include "analysis/correlate.h"
#include "analysis/host_events.h"
#include "analysis/incidents.h"
#include "importers/import_nsys.h"

static double
proc_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
yajl_noop(void *ctx)
{
    (void)ctx;
    return 1;
}

static int
yajl_noop_bool(void *ctx, int v)
{
    (void)ctx;
    (void)v;
    return 1;
}

static int
yajl_noop_text(void *ctx, const char *s, size_t len)
{
    (void)ctx;
    (void)s;
    (void)len;
    return 1;
}

static int
yajl_noop_utext(void *ctx, const unsigned char *s, size_t len)
{
    (void)ctx;
    (void)s;
    (void)len;
    return 1;
}

static const yajl_callbacks yajl_noop_callbacks = {
    .yajl_null = yajl_noop,
    .yajl_boolean = yajl_noop_bool,
    .yajl_number = yajl_noop_text,
    .yajl_string = yajl_noop_utext,
    .yajl_start_map = yajl_noop,
    .yajl_map_key = yajl_noop_utext,
    .yajl_end_map = yajl_noop,
    .yajl_start_array = yajl_noop,
    .yajl_end_array = yajl_noop,
};

/* yajl over one body, doing nothing with it; false on a parse error. */
static bool
yajl_parse_only(const char *body, size_t len)
{
    yajl_handle h = yajl_alloc(&yajl_noop_callbacks, NULL, NULL);
    if (!h)
        return false;
    bool ok = yajl_parse(h, (const unsigned char *)body, len) == yajl_status_ok &&
              yajl_complete_parse(h) == yajl_status_ok;
    yajl_free(h);
    return ok;
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
    double parse_s = 0, yajl_s = 0;
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
        if (!yajl_parse_only(body, l)) {
            fprintf(stderr, "bench_analysis: yajl refused the body\n");
            exit(1);
        }
        yajl_s += now_s() - a;
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
    printf("BENCH host_events_yajl_parse_only_per_s %.0f events/s\n", (double)total / yajl_s);
    fs_host_events_free(hs);
    free(body);
}

/* ---- departures, incidents, correlate ---- */

#define AN_S 1000000LL
#define AN_T0 (1796236354LL * AN_S)
#define AN_HIST 600
#define AN_NPTS (3600 + AN_HIST)
#define AN_POOL 500

/* Class of each pool array: 0 noisy rate, 1 flat zero, 2 stray marks, 3 noisy gauge,
   4 bursty (busy port). */
static int an_cls[AN_POOL];

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

struct scan_job {
    int from, to;
    const int64_t *ts;
    const double *pool, *culprit;
    struct fs_departures *d;
    int rc;
};

static void *
scan_part(void *arg)
{
    struct scan_job *j = arg;
    char target[32], iface[32];
    for (int k = j->from; k < j->to && j->rc == 0; k++) {
        snprintf(target, sizeof target, "tor%d", 1 + k / 1000);
        snprintf(iface, sizeof iface, "Eth1/%d", 1 + (k / 16) % 64);
        bool is_culprit = k == 48 * 16;
        int p = k % AN_POOL;
        bool gauge = !is_culprit && an_cls[p] == 3; /* the culprit is an ECN rate */
        struct fs_an_series s = {
            .target = target,
            .interface = iface,
            .metric = gauge ? "fabric_queue_depth_bytes" : "fabric_queue_ecn_marked_packets_total",
            .kind = gauge ? FS_AN_QUEUE : FS_AN_ECN,
            .is_rate = !gauge,
            .ts_us = j->ts,
            .v = is_culprit ? j->culprit : j->pool + (size_t)p * AN_NPTS,
            .n = AN_NPTS,
            .abs_floor = gauge ? 10000 : 10,
            .time_uncertainty_us = 2000,
        };
        j->rc = fs_departures_add(j->d, &s);
    }
    return NULL;
}

/* The departure scan of 100,000 series on `threads` threads (as the API does). */
static struct fs_departures *
an_scan(int threads, int64_t *ts, double *pool, double *culprit, double *wall_ms, double *cpu_ms)
{
    struct scan_job jobs[8];
    pthread_t tid[8];
    double a = now_s(), c = proc_cpu_s();
    for (int t = 0; t < threads; t++) {
        jobs[t] = (struct scan_job){
            100000 * t / threads, 100000 * (t + 1) / threads, ts, pool, culprit, NULL, 0};
        jobs[t].d =
            fs_departures_new(NULL, AN_T0 + AN_HIST * AN_S, AN_T0 + (int64_t)AN_NPTS * AN_S);
        if (!jobs[t].d)
            exit(1);
        pthread_create(&tid[t], NULL, scan_part, &jobs[t]);
    }
    for (int t = 0; t < threads; t++)
        pthread_join(tid[t], NULL);
    struct fs_departures *d = jobs[0].d;
    for (int t = 0; t < threads; t++) {
        if (jobs[t].rc != 0 || (t > 0 && fs_departures_merge(d, jobs[t].d) != 0)) {
            fprintf(stderr, "bench_analysis: out of memory\n");
            exit(1);
        }
        if (t > 0)
            fs_departures_free(jobs[t].d);
    }
    if (fs_departures_finish(d) != 0)
        exit(1);
    *wall_ms = (now_s() - a) * 1e3;
    *cpu_ms = (proc_cpu_s() - c) * 1e3;
    return d;
}

/* Percent of series per class (noisy rate, zero, stray, noisy gauge, bursty). */
struct an_mix {
    const char *suffix;
    int pct[5];
};

static void
bench_incidents_correlate(const struct an_mix *mix)
{
    int64_t *ts = malloc(AN_NPTS * sizeof *ts);
    double *pool = malloc((size_t)AN_POOL * AN_NPTS * sizeof *pool);
    double *culprit = malloc(AN_NPTS * sizeof *culprit);
    if (!ts || !pool || !culprit)
        exit(1);
    for (int i = 0; i < AN_NPTS; i++)
        ts[i] = AN_T0 + i * AN_S + (int64_t)(an_urand() * 20000);
    for (int p = 0; p < AN_POOL; p++) {
        int q = p % 100, cls = 0, acc = 0;
        for (cls = 0; cls < 4; cls++) {
            acc += mix->pct[cls];
            if (q < acc)
                break;
        }
        an_cls[p] = cls;
        double *v = pool + (size_t)p * AN_NPTS;
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

    const int threads = 2;
    double scan_ms, scan_cpu, scan2_ms, scan2_cpu;
    struct fs_departures *d = an_scan(threads, ts, pool, culprit, &scan_ms, &scan_cpu);
    fprintf(stderr,
            "# scan: %zu series, %zu prefiltered, %zu departing, %zu runs, %.0f ms on %d "
            "threads (%.0f ms CPU)\n",
            d->series_scanned, d->series_prefiltered, d->n_series, d->n_runs, scan_ms, threads,
            scan_cpu);
    double a = now_s();
    struct fs_incident_report *r = NULL;
    if (fs_incidents_find(d, d->end_us, &r) != 0)
        exit(1);
    double inc_ms = (now_s() - a) * 1e3;
    fprintf(stderr, "# incidents: %zu episodes, %zu groups; top period %.3f s; %.0f ms\n",
            r->n_episodes, r->n_groups, r->n_groups ? r->groups[0].period_us / 1e6 : 0.0, inc_ms);
    if (r->n_groups == 0 || fabs(r->groups[0].period_us - 30e6) > 1e6) {
        fprintf(stderr, "bench_analysis: the 30 s recurrence was not found\n");
        exit(1);
    }
    fs_incident_report_free(r);
    fs_departures_free(d);

    d = an_scan(threads, ts, pool, culprit, &scan2_ms, &scan2_cpu);
    struct fs_corr_window w[1000];
    for (int i = 0; i < 1000; i++) {
        int64_t s0 = d->start_us + (int64_t)(an_urand() * 3590.0 * AN_S);
        w[i] = (struct fs_corr_window){s0, s0 + 250000, 50000, (size_t)i, NULL, 0};
    }
    a = now_s();
    struct fs_corr_report *cr = NULL;
    if (fs_correlate(d, w, 1000, NULL, &cr) != 0)
        exit(1);
    double corr_ms = (now_s() - a) * 1e3;
    fprintf(stderr, "# correlate: %zu aggregates; ranking alone %.1f ms\n", cr->n_aggregates,
            corr_ms);
    fs_corr_report_free(cr);
    fs_departures_free(d);
    fprintf(stderr, "# CPU time: incidents %.0f ms, correlate %.0f ms\n", scan_cpu + inc_ms,
            scan2_cpu + corr_ms);
    printf("BENCH incidents_arrays_ms%s %.0f ms\n", mix->suffix, scan_ms + inc_ms);
    printf("BENCH correlate_arrays_ms%s %.0f ms\n", mix->suffix, scan2_ms + corr_ms);
    free(ts);
    free(pool);
    free(culprit);
}

/* ---- import-nsys ---- */

static void
sql(sqlite3 *db, const char *q)
{
    char *msg = NULL;
    if (sqlite3_exec(db, q, NULL, NULL, &msg) != SQLITE_OK) {
        fprintf(stderr, "bench_analysis: sqlite: %s\n", msg);
        exit(1);
    }
}

static void
bench_import_nsys(void)
{
    char path[128];
    snprintf(path, sizeof path, "/tmp/fs-bench-nsys-%d.sqlite", (int)getpid());
    unlink(path);
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK)
        exit(1);
    sql(db, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN;"
            "CREATE TABLE StringIds(id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);"
            "CREATE TABLE TARGET_INFO_SESSION_START_TIME(utcEpochNs INTEGER, utcTime TEXT, "
            "localTime TEXT);"
            "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES(1796236354000000000,'','');"
            "CREATE TABLE TARGET_INFO_SYSTEM_ENV(globalVid INTEGER, devStateName TEXT, name TEXT,"
            " nameEnum INTEGER, value TEXT);"
            "INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES(1,'','Hostname',0,'gpu-node-1');"
            "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT "
            "NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,"
            " streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName "
            "INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType "
            "INTEGER, gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, blockY "
            "INTEGER, blockZ INTEGER, registersPerThread INTEGER, staticSharedMemory INTEGER, "
            "dynamicSharedMemory INTEGER);"
            "CREATE TABLE NVTX_EVENTS(start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT "
            "NULL, rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid "
            "INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER);"
            "INSERT INTO StringIds VALUES(1,'ncclDevKernel_AllReduce_Sum_bf16_RING_LL');"
            "INSERT INTO StringIds VALUES(2,'ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn');"
            "INSERT INTO StringIds VALUES(3,'void at::native::elementwise_kernel<128, 4>(int)');"
            "INSERT INTO StringIds VALUES(4,'NCCL');"
            "INSERT INTO StringIds VALUES(5,'ncclAllReduce');"
            "INSERT INTO StringIds VALUES(6,'forward');"
            "INSERT INTO NVTX_EVENTS(start,end,eventType,textId,domainId) VALUES(1,NULL,75,4,3);");
    sqlite3_stmt *k, *nv;
    sqlite3_prepare_v2(db,
                       "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES(?,?,?,1,NULL,?,?,1,?,?,NULL,"
                       "0,128,1,1,256,1,1,64,0,0)",
                       -1, &k, NULL);
    sqlite3_prepare_v2(db,
                       "INSERT INTO NVTX_EVENTS(start,end,eventType,textId,domainId) "
                       "VALUES(?,?,59,?,?)",
                       -1, &nv, NULL);
    for (int i = 0; i < 400000; i++) {
        int64_t t = 60000000000LL + (int64_t)i * 250000;
        int name = 1 + i % 3;
        sqlite3_bind_int64(k, 1, t);
        sqlite3_bind_int64(k, 2, t + 200000);
        sqlite3_bind_int(k, 3, i % 8);
        sqlite3_bind_int(k, 4, 7 + i % 4);
        sqlite3_bind_int(k, 5, i);
        sqlite3_bind_int(k, 6, name);
        sqlite3_bind_int(k, 7, name);
        sqlite3_step(k);
        sqlite3_reset(k);
    }
    for (int i = 0; i < 100000; i++) {
        int64_t t = 60000000000LL + (int64_t)i * 1000000;
        sqlite3_bind_int64(nv, 1, t);
        sqlite3_bind_int64(nv, 2, t + 300000);
        sqlite3_bind_int(nv, 3, i % 2 ? 5 : 6);
        sqlite3_bind_int(nv, 4, i % 2 ? 3 : 0);
        sqlite3_step(nv);
        sqlite3_reset(nv);
    }
    sqlite3_finalize(k);
    sqlite3_finalize(nv);
    sql(db, "COMMIT;");
    sqlite3_close(db);
    struct stat sb;
    stat(path, &sb);
    struct fs_imp_batch b = {0};
    char err[512];
    double a = now_s();
    if (fs_import_nsys_read(path, NULL, &b, err, sizeof err) != 0) {
        fprintf(stderr, "bench_analysis: %s\n", err);
        exit(1);
    }
    double dt = now_s() - a;
    fprintf(stderr, "# import-nsys: %.1f MB, %zu events in %.0f ms\n", (double)sb.st_size / 1e6,
            b.n, dt * 1e3);
    printf("BENCH import_nsys_mb_per_s %.1f MB/s\n", (double)sb.st_size / 1e6 / dt);
    fs_imp_batch_free(&b);
    unlink(path);
}

int
main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    if (!only || strcmp(only, "host_events") == 0)
        bench_host_events();
    /* The ring benchmark's fabric (tests/bench/README.md): a quarter of the ports busy,
       and of an analysed port's ~50 series (ECN, depth, watermark, drops, PFC per TC or
       priority) about 6 burst with it: ~3% bursty; most are flat. Then a stress mix with
       a fifth of all series bursty (1.3 M departure runs in the hour). */
    static const struct an_mix fabric = {"", {25, 45, 15, 12, 3}};
    static const struct an_mix stress = {"_stress_bursty20", {20, 20, 20, 20, 20}};
    if (!only || strcmp(only, "incidents") == 0) {
        bench_incidents_correlate(&fabric);
        bench_incidents_correlate(&stress);
    }
    if (!only || strcmp(only, "import_nsys") == 0)
        bench_import_nsys();
    return 0;
}
