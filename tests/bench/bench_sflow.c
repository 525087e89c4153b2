/*
 * sFlow driver throughput on one core: decode + sequence accounting + flow-rule matching +
 * aggregation (fs_sflow_agg_feed, exactly what the driver's receive thread runs per
 * datagram after recvmmsg), with the per-interval commit into a real store's sink
 * (fs_sflow_agg_flush between fs_sink_begin/end) once per 3,000,000 samples, as the
 * driver does once per interval. Prints `BENCH sflow_samples_per_s <value> samples/s`
 * (goal >= 3,000,000) and `BENCH sflow_agg_cpu_s_per_million_samples <value> s`: the
 * process's CPU time (CLOCK_PROCESS_CPUTIME_ID) over the same loop, per million samples,
 * which a loaded machine disturbs less than the wall-clock rate.
 *
 * Workload: 1,024 pre-built datagrams of agent 10.0.0.1, 7 flow samples each (a
 * 1,400-byte datagram's worth), over 64 ports: 80% RoCEv2 (UDP 4791, DSCP 26, 30% CE),
 * 20% TCP NCCL socket traffic; half the samples egress-sampled with queue depth, transit
 * delay and egress queue records. Four flow rules (RoCE, RoCE CE, RoCE tc 3, TCP
 * 50000-50999). Datagram sequence numbers are rewritten to keep increasing, so nothing is
 * dropped as a duplicate.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../unit/sflow_build.h"
#include "agg.h"
#include "store/store.h"

#define N_DGRAMS 1024
#define PER_DGRAM 7
#define PORTS 64
#define FLUSH_EVERY 3000000

static const struct fs_flow_rule rules[] = {
    {.name = "roce", .protocol = FS_PROTO_UDP, .dst_lo = 4791, .dst_hi = 4791, .tc = -1},
    {.name = "roce-ce",
     .protocol = FS_PROTO_UDP,
     .dst_lo = 4791,
     .dst_hi = 4791,
     .ecn_ce = true,
     .tc = -1},
    {.name = "roce-tc3", .protocol = FS_PROTO_UDP, .dst_lo = 4791, .dst_hi = 4791, .tc = 3},
    {.name = "sockets", .protocol = FS_PROTO_TCP, .dst_lo = 50000, .dst_hi = 50999, .tc = -1},
};

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double
cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng = 20261204;

static uint32_t
rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

int
main(void)
{
    static struct sfb pool[N_DGRAMS];
    char err[256];
    uint32_t sseq[PORTS] = {0};
    for (int d = 0; d < N_DGRAMS; d++) {
        sfb_datagram(&pool[d], 0x0a000001u, 0, (uint32_t)d + 1, 1000);
        for (int s = 0; s < PER_DGRAM; s++) {
            uint32_t port = 1 + rnd(PORTS);
            bool roce = rnd(10) < 8, egress = rnd(2) == 0;
            struct sfb_flow f = {.seq = ++sseq[port - 1],
                                 .source = port,
                                 .rate = 10000,
                                 .in = 1 + rnd(PORTS),
                                 .out = egress ? port : 1 + rnd(PORTS),
                                 .frame_length = roce ? 4158 : 1518};
            if (!egress)
                f.in = port;
            f.pkt = roce ? (struct sfb_pkt){17, (uint16_t)(49152 + rnd(1000)), 4791, 26,
                                            (uint8_t)(rnd(10) < 3 ? 3 : 2)}
                         : (struct sfb_pkt){6, (uint16_t)(40000 + rnd(1000)),
                                            (uint16_t)(50000 + rnd(1000)), 0, 0};
            f.has_depth = f.has_delay = f.has_queue = egress;
            f.depth = rnd(1 << 20);
            f.delay_ns = rnd(100000);
            f.queue = 3;
            sfb_flow_sample(&pool[d], &f);
        }
    }

    struct fs_ring_opts ro = {.memory_limit = 256 << 20, .retention_us = 3600LL * 1000000};
    struct fs_store *st = fs_store_new(&ro, err, sizeof err);
    struct fs_target_cfg t = {.name = "tor1", .address = "10.0.0.1"};
    struct fs_sink *sink = st ? fs_store_sink_add(st, &t, "sflow", 1000000) : NULL;
    struct fs_sflow_agg_opts o = {.rules = rules, .n_rules = 4, .max_ports = 256};
    struct fs_sflow_agg *a = fs_sflow_agg_new(&o, err, sizeof err);
    if (!sink || !a) {
        fprintf(stderr, "bench_sflow: %s\n", err);
        return 1;
    }

    uint64_t samples = 0, since_flush = 0;
    uint32_t seq = 1;
    double t0 = now_s(), t1 = t0, c0 = cpu_s();
    const double run =
        getenv("FS_BENCH_QUICK") && !strcmp(getenv("FS_BENCH_QUICK"), "1") ? 0.5 : 2.0;
    while (t1 - t0 < run) {
        for (int i = 0; i < N_DGRAMS; i++) {
            struct sfb *x = &pool[i];
            sfb_put_at(x, 16, seq++); /* datagram sequence, after version/type/addr/sub */
            if (fs_sflow_agg_feed(a, x->b, x->n, 0) != 0) {
                fprintf(stderr, "bench_sflow: a datagram was refused\n");
                return 1;
            }
            samples += PER_DGRAM;
            since_flush += PER_DGRAM;
            if (since_flush >= FLUSH_EVERY) {
                fs_sink_begin(sink, (int64_t)(now_s() * 1e6));
                fs_sflow_agg_flush(a, &fs_sflow_sink_emit, sink, 0);
                fs_sink_end(sink);
                since_flush = 0;
            }
        }
        t1 = now_s();
    }
    double c1 = cpu_s();
    const struct fs_sflow_agg_stats *s = fs_sflow_agg_get_stats(a);
    if (s->flow_samples != samples || s->duplicates != 0) {
        fprintf(stderr, "bench_sflow: %llu samples fed, %llu aggregated, %llu duplicates\n",
                (unsigned long long)samples, (unsigned long long)s->flow_samples,
                (unsigned long long)s->duplicates);
        return 1;
    }
    printf("BENCH sflow_samples_per_s %.0f samples/s\n", (double)samples / (t1 - t0));
    printf("BENCH sflow_agg_cpu_s_per_million_samples %.4f s\n", (c1 - c0) / (double)samples * 1e6);
    fs_sflow_agg_free(a);
    fs_store_sink_remove(st, sink);
    fs_store_free(st);
    return 0;
}
