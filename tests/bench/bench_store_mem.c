/*
 * What the store holds per series, samples apart (issue 34): a fleet built in a real
 * store through the sink API, the heap counted before and after.
 *
 *   bench_store_mem [--quick]   (--quick, or FS_BENCH_QUICK=1: 20 targets instead of 100)
 *
 * Fleet: N targets (two static labels: pod, rack) x 64 ports x 85 series a port, the
 * mix the gNMI and ONYX drivers report (5,440 series a target, ONYX gives 5,442):
 *   - 13 port series: bytes, packets, discards, errors (rx and tx), ECN-marked packets,
 *     oper changes (counters); oper up, admin up, speed (gauges);
 *   - 8 traffic classes x 7: tx packets, tx bytes, ECN-marked, WRED-dropped and
 *     no-buffer-dropped packets (counters); depth and max depth (gauges);
 *   - 8 priorities x rx/tx PFC pause frames (counters).
 * Two polls, so every series holds two samples (the first value lies in the ring
 * chunk's header, the second in the head's first words: no sample payload beyond what
 * a new head always has).
 *
 * Prints
 *   BENCH store_bytes_per_series   heap after the two polls minus before (mallinfo2's
 *                                  uordblks + hblkhd: glibc's in-use bytes, per-block
 *                                  headers and mmapped blocks included), divided by the series
 *   BENCH store_bytes_per_sample   the heap growth of 30 more polls divided by their
 *                                  samples (chunk payload, chunk growth, timelines)
 * and a comment line splitting the first figure into the ring's share (fs_store_ring_stats
 * bytes: series slots, head chunks, timelines) and the rest (series records, labels,
 * indexes). Single-threaded, so mallinfo2's main arena sees every allocation.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

#define PORTS 64
#define MORE_POLLS 30

struct target {
    struct fs_target_cfg cfg;
    struct fs_kv labels[2];
    char name[32], rack[16];
    struct fs_sink *sink;
};

static int64_t fake_real_us = 1798761600000000LL; /* 2027-01-01 */
static int64_t fake_mono_us = 1000000;

static int64_t
fake_real(void *arg)
{
    (void)arg;
    return fake_real_us;
}

static int64_t
fake_mono(void *arg)
{
    (void)arg;
    return fake_mono_us;
}

static size_t
heap_used(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd; /* large arrays are mmapped, outside uordblks */
}

static void
poll_target(struct target *t, uint64_t cycle)
{
    static const char *const dir[2] = {"rx", "tx"};
    static const char *const num[8] = {"0", "1", "2", "3", "4", "5", "6", "7"};
    static const enum fs_metric port_ctr[4] = {FS_M_PORT_BYTES, FS_M_PORT_PACKETS,
                                               FS_M_PORT_DISCARDS, FS_M_PORT_ERRORS};
    static const enum fs_metric tc_ctr[5] = {FS_M_QUEUE_TX_PACKETS, FS_M_QUEUE_TX_BYTES,
                                             FS_M_QUEUE_ECN_MARKED, FS_M_QUEUE_WRED_DROPPED,
                                             FS_M_QUEUE_NO_BUFFER_DROPPED};
    struct fs_sink *k = t->sink;
    fs_sink_cycle_begin(k, cycle);
    fs_sink_begin(k, fake_real_us);
    for (size_t p = 0; p < PORTS; p++) {
        char ifn[32];
        snprintf(ifn, sizeof ifn, "Ethernet1/%zu", p + 1);
        /* busy ports (a quarter) move by a noisy amount, so their samples take bits */
        uint64_t rate = p % 4 == 0 ? 1000003 * (p + 1) + (cycle * 2654435761u + p) % 9973 : p % 3;
        struct fs_label li[1] = {{"interface", ifn}};
        for (int d = 0; d < 2; d++) {
            struct fs_label l[2] = {{"interface", ifn}, {"direction", dir[d]}};
            for (int c = 0; c < 4; c++)
                fs_sink_counter(k, port_ctr[c], l, 2,
                                cycle * rate * (c == 0 ? 1500 : 1) / (c > 1 ? 1000 : 1), 64);
            for (int q = 0; q < 8; q++) {
                struct fs_label lp[3] = {
                    {"interface", ifn}, {"direction", dir[d]}, {"priority", num[q]}};
                fs_sink_counter(k, FS_M_PFC_PAUSE_FRAMES, lp, 3, q == 3 ? cycle : 0, 64);
            }
        }
        fs_sink_counter(k, FS_M_PORT_ECN_MARKED, li, 1, cycle * rate / 100, 64);
        fs_sink_counter(k, FS_M_PORT_OPER_CHANGES, li, 1, 2, 64);
        fs_sink_gauge(k, FS_M_PORT_OPER_UP, li, 1, 1);
        fs_sink_gauge(k, FS_M_PORT_ADMIN_UP, li, 1, 1);
        fs_sink_gauge(k, FS_M_PORT_SPEED, li, 1, 400e9);
        for (int q = 0; q < 8; q++) {
            struct fs_label l[2] = {{"interface", ifn}, {"tc", num[q]}};
            for (int c = 0; c < 5; c++)
                fs_sink_counter(k, tc_ctr[c], l, 2, c < 2 ? cycle * rate * (c ? 187 : 1) / 8 : 0,
                                64);
            double depth = (cycle + p + (uint64_t)q) % 17 == 0 ? 1234.5 * (double)q : 0.0;
            fs_sink_gauge(k, FS_M_QUEUE_DEPTH, l, 2, depth);
            fs_sink_gauge(k, FS_M_QUEUE_DEPTH_MAX, l, 2, depth * 2);
        }
    }
    fs_sink_end(k);
    fs_sink_done(k, cycle, FS_POLL_OK, NULL);
}

static void
poll_all(struct target *t, size_t n, uint64_t cycle)
{
    for (size_t i = 0; i < n; i++)
        poll_target(&t[i], cycle);
    fake_real_us += 1000000;
    fake_mono_us += 1000000;
}

int
main(int argc, char **argv)
{
    size_t n = 100;
    const char *q = getenv("FS_BENCH_QUICK");
    if ((argc > 1 && strcmp(argv[1], "--quick") == 0) || (q && strcmp(q, "1") == 0))
        n = 20;
    char err[256];
    int rc = 1;
    struct target *t = calloc(n, sizeof *t);
    struct fs_ring_opts ro = {.memory_limit = 16ULL << 30, .retention_us = 3600LL * 1000000};
    /* The store itself (its ring's empty tables) is not a series' cost. */
    struct fs_store *st = fs_store_new(&ro, err, sizeof err);
    if (!st || !t) {
        fprintf(stderr, "store: %s\n", st ? "no memory" : err);
        goto out;
    }
    struct fs_store_clock clk = {fake_real, fake_mono, NULL};
    fs_store_set_clock(st, &clk);
    size_t before = heap_used();
    for (size_t i = 0; i < n; i++) {
        snprintf(t[i].name, sizeof t[i].name, "leaf%03zu.pod1.example.net", i);
        snprintf(t[i].rack, sizeof t[i].rack, "r%zu", i % 16);
        t[i].labels[0] = (struct fs_kv){"pod", "p1"};
        t[i].labels[1] = (struct fs_kv){"rack", t[i].rack};
        t[i].cfg.name = t[i].name;
        t[i].cfg.address = "192.0.2.1";
        t[i].cfg.labels = t[i].labels;
        t[i].cfg.n_labels = 2;
        t[i].cfg.staleness_intervals = 3;
        t[i].sink = fs_store_sink_add(st, &t[i].cfg, "gnmi", 1000000);
        if (!t[i].sink) {
            fprintf(stderr, "sink: no memory\n");
            goto out;
        }
    }
    poll_all(t, n, 1);
    poll_all(t, n, 2);
    size_t after = heap_used();
    struct fs_ring_stats rs;
    fs_store_ring_stats(st, &rs, NULL);
    uint64_t series = fs_store_series_count(st);
    if (series != n * PORTS * 85 || rs.samples != 2 * series) {
        fprintf(stderr, "bench_store_mem: %llu series and %llu samples, want %zu and twice that\n",
                (unsigned long long)series, (unsigned long long)rs.samples, n * PORTS * 85);
        goto out;
    }
    double per = (double)(after - before) / (double)series;
    printf("BENCH store_bytes_per_series %.1f bytes\n", per);
    fflush(stdout);
    fprintf(stderr,
            "# %zu targets, %llu series, 2 samples each: %.1f bytes a series = ring %.1f "
            "(fs_store_ring_stats bytes) + store %.1f; %.0f KiB a target\n",
            n, (unsigned long long)series, per, (double)rs.bytes / (double)series,
            per - (double)rs.bytes / (double)series, (double)(after - before) / 1024.0 / (double)n);
    uint64_t samples0 = rs.samples;
    for (uint64_t c = 3; c < 3 + MORE_POLLS; c++)
        poll_all(t, n, c);
    size_t later = heap_used();
    fs_store_ring_stats(st, &rs, NULL);
    printf("BENCH store_bytes_per_sample %.2f bytes\n",
           (double)(later - after) / (double)(rs.samples - samples0));
    rc = 0;
out:
    for (size_t i = 0; t && i < n; i++)
        fs_store_sink_remove(st, t[i].sink);
    fs_store_free(st);
    free(t);
    return rc;
}
