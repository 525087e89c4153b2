/*
 * Analysis benchmarks.
 *   BENCH host_events_ingest_per_s: POST bodies of 1,000 NCCL-like events each (host,
 *     kind, name, start, end and two attrs; ~160 bytes an event, the batch size the
 *     importers post), parsed, validated and stored; 2,000,000 events in all into a
 *     store large enough to keep them.
 *   BENCH host_events_json_c_parse_only_per_s: json-c alone parsing and freeing the same
 *     bodies, the ceiling the ingest can reach (for context).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "analysis/host_events.h"

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

int
main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    if (!only || strcmp(only, "host_events") == 0)
        bench_host_events();
    return 0;
}
