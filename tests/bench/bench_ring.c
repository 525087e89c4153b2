/*
 * Ring benchmark. Prints `BENCH <name> <value> <unit>` lines.
 *
 * Workload (pinned, seeded; described also in tests/bench/README.md, "Ring workload"):
 *   - 100 TORs x 64 ports x 78 series = 4,992 series per TOR (499,200 in all):
 *       14 port counters (in/out octets, in/out ucast, in/out mcast, in/out bcast,
 *          in/out discards, in/out errors, in FCS errors, out ECN-marked),
 *       8 TC queues x (tx bytes, tx packets, drops, ECN-marked counters; depth and
 *          watermark gauges, bytes),
 *       8 PFC priorities x (rx pause, tx pause counters).
 *   - One poll per TOR per second; TOR t polls at t*10 ms into the second plus 0-4 ms of
 *     jitter, so polls of different TORs interleave. One poll = one fs_ring_append of the
 *     TOR's 4,992 points (a group per TOR).
 *   - Ports (drawn per port): 25% busy, 25% slow, 50% idle. Busy: in/out rates a random
 *     walk between 5% and 95% of 400 Gb/s with bursts (2%/s chance, 1-5 s at 98%); 4 KiB
 *     RoCE packets +-5%; TC3 carries 95% of the bytes, TC0 5%, TC6 the CNPs; ECN marks
 *     and PFC pauses on priority 3 during bursts. Slow: 0-2 kB/s and 0-5 packets/s on
 *     TC0. Idle: only an LLDP frame every 30 s. Error, discard and drop counters are flat
 *     apart from rare events (1 in 2,000 port-polls). Queue-depth gauges: zero, TC3 of
 *     busy ports at a multiple of 96-byte cells during bursts and 10% of other polls.
 *   - Generator: splitmix64, seed 20261202 plus the TOR number; counters start at
 *     random values below 2^48 (octets) or 2^32.
 *
 * Figures:
 *   ring_bytes_per_sample_*: 10 TORs for 3,600 s (one hour, 180 M samples). _all is one
 *     ring with everything: stats.bytes (all memory: chunks, timelines, series table,
 *     headers, allocator overhead) / stats.samples. _flat, _busy_counter and _gauge are
 *     separate rings fed with only the series of that class (flat: error/discard/drop
 *     counters, idle-port counters, TC and PFC counters of non-busy ports; busy_counter:
 *     octets, packets and TC0/TC3 tx counters of busy ports; gauge: all gauges), each
 *     with its own timelines.
 *   ring_decode_msamples_per_s: every series of the _all ring read back whole
 *     (fs_ring_read: copy under the lock, decode outside), one thread, TOR by TOR, so
 *     the reader's cache of decoded timeline chunks is warm; _random_order reads half
 *     the series in random order across TORs, so timelines are mostly decoded again.
 *   ring_ingest_ns_per_sample_p50/_p99: all 100 TORs; 900 s of warm-up (not timed),
 *     then memory_limit is set to the bytes held, so eviction runs throughout the next
 *     300 s (where the first flat chunks close, at 1,024 samples),
 *     whose polls are timed one by one (time of fs_ring_append / points), while a reader
 *     thread reads the last 60 s of random series continuously.
 * With --openmetrics FILE it only writes TOR 0's first PROM_SECS seconds as OpenMetrics
 * text (for bench_prom_tsdb.sh) and prints ring_bytes_per_sample_all_prom_subset, the
 * ring's figure on exactly those samples.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/ring.h"

#define PORTS 64
#define PER_PORT 78
#define PER_TOR (PORTS * PER_PORT)
#define ALL_TORS 100
#define COMP_TORS 10
#define COMP_SECS 3600
#define WARM_SECS 900
#define MEAS_SECS 300
#define PROM_SECS 1200
#define SEED 20261202ULL
#define T0 1767225600000000LL /* 2026-01-01T00:00:00Z */
#define LINE_BPS 50e9         /* 400 Gb/s in bytes */

enum cls { BUSY, SLOW, IDLE };
enum cat { CAT_FLAT, CAT_BUSY, CAT_SLOW, CAT_OTHER, CAT_GAUGE, NCAT };

/* series index within a port */
enum {
    IN_OCT,
    OUT_OCT,
    IN_UC,
    OUT_UC,
    IN_MC,
    OUT_MC,
    IN_BC,
    OUT_BC,
    IN_DISC,
    OUT_DISC,
    IN_ERR,
    OUT_ERR,
    IN_FCS,
    OUT_ECN,
    TC0 = 14, /* + q*6 + {0 bytes, 1 pkts, 2 drops, 3 ecn, 4 depth, 5 watermark} */
    PFC0 = 62 /* + prio*2 + {0 rx, 1 tx} */
};

struct port {
    uint8_t cls, burst;
    double rin, rout;
};

struct tor {
    uint64_t rng;
    uint64_t val[PER_TOR];
    struct port port[PORTS];
};

static uint64_t
sm64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double
unif(uint64_t *s)
{
    return (double)(sm64(s) >> 11) * (1.0 / 9007199254740992.0);
}

static bool
is_gauge(int k)
{
    return k >= TC0 && k < PFC0 && ((k - TC0) % 6) >= 4;
}

static enum cat
cat_of(int cls, int k)
{
    if (is_gauge(k))
        return CAT_GAUGE;
    bool traffic = k <= OUT_UC || k == TC0 + 0 || k == TC0 + 1;
    if (cls == BUSY && (traffic || k == TC0 + 18 || k == TC0 + 19))
        return CAT_BUSY;
    if (cls == SLOW && traffic)
        return CAT_SLOW;
    if (cls == BUSY && (k == OUT_ECN || k == TC0 + 21 || k == TC0 + 36 || k == TC0 + 37 ||
                        k == PFC0 + 6 || k == PFC0 + 7))
        return CAT_OTHER; /* bursty */
    return CAT_FLAT;
}

static void
tor_init(struct tor *t, int n)
{
    t->rng = SEED + (uint64_t)n;
    for (int p = 0; p < PORTS; p++) {
        double u = unif(&t->rng);
        struct port *ps = &t->port[p];
        ps->cls = u < 0.25 ? BUSY : u < 0.5 ? SLOW : IDLE;
        ps->rin = 0.05 + 0.9 * unif(&t->rng);
        ps->rout = 0.05 + 0.9 * unif(&t->rng);
        for (int k = 0; k < PER_PORT; k++) {
            uint64_t *v = &t->val[p * PER_PORT + k];
            *v = is_gauge(k) ? 0 : k <= OUT_OCT ? sm64(&t->rng) >> 16 : sm64(&t->rng) >> 32;
        }
    }
}

static uint64_t
dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    return u;
}

static double
walk(uint64_t *s, double r)
{
    r *= 1.0 + (unif(s) - 0.5) * 0.1;
    return r < 0.05 ? 0.05 : r > 0.95 ? 0.95 : r;
}

/* One poll of TOR t at second sec: advances its counters, fills val[] (gauges as bits). */
static void
tor_poll(struct tor *t, int sec)
{
    uint64_t *s = &t->rng;
    for (int p = 0; p < PORTS; p++) {
        struct port *ps = &t->port[p];
        uint64_t *v = &t->val[p * PER_PORT];
        double bin = 0, bout = 0, pin = 0, pout = 0;
        bool burst = false;
        if (ps->cls == BUSY) {
            ps->rin = walk(s, ps->rin);
            ps->rout = walk(s, ps->rout);
            if (ps->burst == 0 && unif(s) < 0.02)
                ps->burst = (uint8_t)(1 + sm64(s) % 5);
            burst = ps->burst > 0;
            if (burst)
                ps->burst--;
            bin = (burst ? 0.98 : ps->rin) * LINE_BPS * (0.99 + 0.02 * unif(s));
            bout = (burst ? 0.98 : ps->rout) * LINE_BPS * (0.99 + 0.02 * unif(s));
            pin = bin / (4096.0 * (0.95 + 0.1 * unif(s)));
            pout = bout / (4096.0 * (0.95 + 0.1 * unif(s)));
        } else if (ps->cls == SLOW) {
            bin = (double)(sm64(s) % 2000);
            bout = (double)(sm64(s) % 2000);
            pin = (double)(sm64(s) % 6);
            pout = (double)(sm64(s) % 6);
        }
        uint64_t lldp = (uint64_t)((sec + p) % 30 == 0);
        v[IN_OCT] += (uint64_t)bin + lldp * 350;
        v[OUT_OCT] += (uint64_t)bout + lldp * 350;
        v[IN_UC] += (uint64_t)pin;
        v[OUT_UC] += (uint64_t)pout;
        v[IN_MC] += lldp;
        v[OUT_MC] += lldp;
        uint64_t q0b = (uint64_t)(bout * (ps->cls == BUSY ? 0.05 : 1.0));
        v[TC0 + 0] += q0b + lldp * 350;
        v[TC0 + 1] += (uint64_t)(pout * (ps->cls == BUSY ? 0.05 : 1.0)) + lldp;
        if (ps->cls == BUSY) {
            v[TC0 + 18] += (uint64_t)bout - q0b;
            v[TC0 + 19] += (uint64_t)(pout * 0.95);
            uint64_t ecn = burst ? sm64(s) % 100000 : (sm64(s) % 10 == 0 ? sm64(s) % 1000 : 0);
            v[OUT_ECN] += ecn;
            v[TC0 + 21] += ecn;
            if (burst) {
                v[TC0 + 36] += 64 * (sm64(s) % 2000); /* CNPs on TC6 */
                v[TC0 + 37] += sm64(s) % 2000;
                v[PFC0 + 6] += sm64(s) % 5000;
                v[PFC0 + 7] += sm64(s) % 5000;
            }
        }
        /* rare error / discard / drop events */
        if (sm64(s) % 2000 == 0) {
            static const int errs[] = {IN_DISC, OUT_DISC, IN_ERR,  OUT_ERR,
                                       IN_FCS,  TC0 + 2,  TC0 + 20};
            v[errs[sm64(s) % 7]] += 1 + sm64(s) % 3;
        }
        /* TC3 queue depth and watermark: zero mostly, cells in bursts */
        double depth = 0, wm = 0;
        if (ps->cls == BUSY) {
            uint64_t x = sm64(s);
            if (burst)
                depth = (double)(x % 20000) * 96.0;
            else if (x % 10 == 0)
                depth = (double)((x >> 8) % 50) * 96.0;
            wm = depth > 0 ? depth + (double)((x >> 20) % 5000) * 96.0 : 0;
        }
        v[TC0 + 22] = dbits(depth);
        v[TC0 + 23] = dbits(wm);
    }
}

static int64_t
poll_ts(struct tor *t, int n, int sec)
{
    return T0 + (int64_t)sec * 1000000 + (int64_t)n * 10000 + (int64_t)(sm64(&t->rng) % 4001);
}

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct fs_ring *
ring_or_die(uint64_t limit, int64_t retention)
{
    char err[128];
    struct fs_ring_opts o = {.memory_limit = limit, .retention_us = retention};
    struct fs_ring *r = fs_ring_new(&o, err, sizeof(err));
    if (!r) {
        fprintf(stderr, "bench_ring: %s\n", err);
        exit(1);
    }
    return r;
}

/* A ring holding some series of some TORs: ids[tor][k] (-1 when not held). */
struct target {
    struct fs_ring *r;
    int32_t group[ALL_TORS];
    int32_t *ids; /* ntors * PER_TOR */
};

static void
target_init(struct target *tg, uint64_t limit, int ntors, struct tor *tors, int cat)
{
    tg->r = ring_or_die(limit, 24LL * 3600 * 1000000);
    tg->ids = malloc((size_t)ntors * PER_TOR * sizeof(int32_t));
    for (int n = 0; n < ntors; n++) {
        tg->group[n] = fs_ring_group_new(tg->r);
        for (int i = 0; i < PER_TOR; i++) {
            int k = i % PER_PORT;
            int c = cat_of(tors[n].port[i / PER_PORT].cls, k);
            tg->ids[n * PER_TOR + i] =
                (cat < 0 || c == cat)
                    ? fs_ring_series_new(tg->r, tg->group[n],
                                         is_gauge(k) ? FS_RING_GAUGE : FS_RING_COUNTER)
                    : -1;
        }
    }
}

static size_t
target_fill(const struct target *tg, int n, const struct tor *t, struct fs_ring_point *pts)
{
    size_t np = 0;
    const int32_t *ids = tg->ids + n * PER_TOR;
    for (int i = 0; i < PER_TOR; i++) {
        if (ids[i] < 0)
            continue;
        pts[np].series = (uint32_t)ids[i];
        pts[np].v.u = t->val[i];
        np++;
    }
    return np;
}

static double
bytes_per_sample(struct fs_ring *r)
{
    struct fs_ring_stats st;
    fs_ring_stats(r, &st);
    return st.samples ? (double)st.bytes / (double)st.samples : 0;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- compression and decode -------------------------------------------------------- */

static void
bench_compression(void)
{
    static const char *const names[] = {"flat", "busy_counter", NULL, NULL, "gauge"};
    struct tor *tors = calloc(COMP_TORS, sizeof(*tors));
    struct fs_ring_point *pts = malloc(PER_TOR * sizeof(*pts));
    for (int n = 0; n < COMP_TORS; n++)
        tor_init(&tors[n], n);
    struct target all, part[NCAT];
    target_init(&all, UINT64_MAX, COMP_TORS, tors, -1);
    for (int c = 0; c < NCAT; c++)
        if (names[c])
            target_init(&part[c], UINT64_MAX, COMP_TORS, tors, c);
    for (int sec = 0; sec < COMP_SECS; sec++) {
        for (int n = 0; n < COMP_TORS; n++) {
            tor_poll(&tors[n], sec);
            int64_t ts = poll_ts(&tors[n], n, sec);
            size_t np = target_fill(&all, n, &tors[n], pts);
            fs_ring_append(all.r, all.group[n], ts, pts, np);
            for (int c = 0; c < NCAT; c++) {
                if (!names[c])
                    continue;
                np = target_fill(&part[c], n, &tors[n], pts);
                fs_ring_append(part[c].r, part[c].group[n], ts, pts, np);
            }
        }
    }
    for (int c = 0; c < NCAT; c++) {
        if (!names[c])
            continue;
        printf("BENCH ring_bytes_per_sample_%s %.3f bytes\n", names[c],
               bytes_per_sample(part[c].r));
        fs_ring_free(part[c].r);
        free(part[c].ids);
    }
    struct fs_ring_stats st;
    fs_ring_stats(all.r, &st);
    printf("BENCH ring_bytes_per_sample_all %.3f bytes\n", (double)st.bytes / (double)st.samples);
    printf("BENCH ring_samples_held_all %llu samples\n", (unsigned long long)st.samples);
    fflush(stdout);

    /* decode: every series back, whole history */
    size_t cap = COMP_SECS + 16;
    struct fs_ring_sample *out = malloc(cap * sizeof(*out));
    uint64_t got = 0;
    double t0 = now_s();
    for (int i = 0; i < COMP_TORS * PER_TOR; i++) {
        long k = fs_ring_read(all.r, (uint32_t)all.ids[i], INT64_MIN, INT64_MAX, out, cap, NULL);
        if (k > 0)
            got += (uint64_t)k;
    }
    double dt = now_s() - t0;
    if (got != st.samples)
        fprintf(stderr, "bench_ring: decoded %llu of %llu samples\n", (unsigned long long)got,
                (unsigned long long)st.samples);
    printf("BENCH ring_decode_msamples_per_s %.1f Msamples/s\n", (double)got / dt / 1e6);
    /* the same without the reader's timestamp cache helping: series in random order
     * across the TORs, so most timeline chunks are decoded again */
    uint64_t rs = SEED;
    got = 0;
    t0 = now_s();
    for (int i = 0; i < COMP_TORS * PER_TOR / 2; i++) {
        uint32_t id = (uint32_t)all.ids[sm64(&rs) % (COMP_TORS * PER_TOR)];
        long k = fs_ring_read(all.r, id, INT64_MIN, INT64_MAX, out, cap, NULL);
        if (k > 0)
            got += (uint64_t)k;
    }
    dt = now_s() - t0;
    printf("BENCH ring_decode_msamples_per_s_random_order %.1f Msamples/s\n",
           (double)got / dt / 1e6);
    fflush(stdout);
    free(out);
    fs_ring_free(all.r);
    free(all.ids);
    free(pts);
    free(tors);
}

/* ---- ingest with a concurrent reader and eviction ------------------------------------ */

struct reader_arg {
    struct fs_ring *r;
    uint32_t nseries;
    atomic_int stop;
    atomic_llong now_ts;
    uint64_t reads, samples;
};

static void *
reader_main(void *p)
{
    struct reader_arg *a = p;
    struct fs_ring_sample out[128];
    uint64_t s = SEED ^ 0xabcdef;
    while (!atomic_load(&a->stop)) {
        uint32_t id = (uint32_t)(sm64(&s) % a->nseries);
        int64_t end = atomic_load(&a->now_ts);
        long k = fs_ring_read(a->r, id, end - 60000000LL, end, out, 128, NULL);
        a->reads++;
        if (k > 0)
            a->samples += (uint64_t)k;
    }
    return NULL;
}

static void
bench_ingest(void)
{
    struct tor *tors = calloc(ALL_TORS, sizeof(*tors));
    struct fs_ring_point *pts = malloc(PER_TOR * sizeof(*pts));
    for (int n = 0; n < ALL_TORS; n++)
        tor_init(&tors[n], n);
    struct target all;
    target_init(&all, UINT64_MAX, ALL_TORS, tors, -1);
    struct reader_arg ra = {.r = all.r, .nseries = ALL_TORS * PER_TOR};
    pthread_t th;
    atomic_store(&ra.now_ts, T0);
    pthread_create(&th, NULL, reader_main, &ra);
    size_t nmeas = 0;
    double *ns = malloc((size_t)MEAS_SECS * ALL_TORS * sizeof(*ns));
    double busy = 0;
    uint64_t nsamples = 0;
    struct fs_ring_stats st0 = {0};
    for (int sec = 0; sec < WARM_SECS + MEAS_SECS; sec++) {
        if (sec == WARM_SECS) {
            /* from here on the ring is at its limit: every new chunk evicts old ones */
            fs_ring_stats(all.r, &st0);
            struct fs_ring_opts o = {.memory_limit = st0.bytes,
                                     .retention_us = 24LL * 3600 * 1000000};
            fs_ring_set_opts(all.r, &o);
        }
        for (int n = 0; n < ALL_TORS; n++) {
            tor_poll(&tors[n], sec);
            int64_t ts = poll_ts(&tors[n], n, sec);
            size_t np = target_fill(&all, n, &tors[n], pts);
            double t0 = now_s();
            fs_ring_append(all.r, all.group[n], ts, pts, np);
            double dt = now_s() - t0;
            atomic_store(&ra.now_ts, ts);
            if (sec >= WARM_SECS) {
                ns[nmeas++] = dt * 1e9 / (double)np;
                busy += dt;
                nsamples += np;
            }
        }
    }
    atomic_store(&ra.stop, 1);
    pthread_join(th, NULL);
    struct fs_ring_stats st;
    fs_ring_stats(all.r, &st);
    qsort(ns, nmeas, sizeof(*ns), cmp_double);
    printf("BENCH ring_ingest_ns_per_sample_p50 %.1f ns\n", ns[nmeas / 2]);
    printf("BENCH ring_ingest_ns_per_sample_p99 %.1f ns\n", ns[nmeas * 99 / 100]);
    printf("BENCH ring_ingest_msamples_per_s %.1f Msamples/s\n", (double)nsamples / busy / 1e6);
    /* memory_limit binds on the live heads too: a refused batch would flatter the ingest
     * figures, so show that none was */
    printf("BENCH ring_ingest_refused_samples %llu samples\n",
           (unsigned long long)st.refused_memory);
    printf("BENCH ring_ingest_evicted_during_measure %llu samples\n",
           (unsigned long long)(st.evicted_memory - st0.evicted_memory));
    printf("BENCH ring_ingest_concurrent_reads %llu reads\n", (unsigned long long)ra.reads);
    printf("BENCH ring_ingest_memory_limit %.1f MiB\n", (double)st0.bytes / 1048576.0);
    fflush(stdout);
    free(ns);
    fs_ring_free(all.r);
    free(all.ids);
    free(pts);
    free(tors);
}

/* ---- OpenMetrics export of TOR 0 for promtool ----------------------------------------- */

static const char *
family(int k, char *lab, size_t len, const char *port)
{
    static const char *const portf[] = {
        "port_in_octets",      "port_out_octets",         "port_in_ucast_pkts",
        "port_out_ucast_pkts", "port_in_mcast_pkts",      "port_out_mcast_pkts",
        "port_in_bcast_pkts",  "port_out_bcast_pkts",     "port_in_discards",
        "port_out_discards",   "port_in_errors",          "port_out_errors",
        "port_in_fcs_errors",  "port_out_ecn_marked_pkts"};
    static const char *const tcf[] = {"queue_tx_octets",   "queue_tx_pkts",
                                      "queue_drop_pkts",   "queue_ecn_marked_pkts",
                                      "queue_depth_bytes", "queue_watermark_bytes"};
    static const char *const pfcf[] = {"pfc_rx_pause_frames", "pfc_tx_pause_frames"};
    if (k < TC0) {
        snprintf(lab, len, "target=\"tor000\",interface=\"%s\"", port);
        return portf[k];
    }
    if (k < PFC0) {
        snprintf(lab, len, "target=\"tor000\",interface=\"%s\",tc=\"%d\"", port, (k - TC0) / 6);
        return tcf[(k - TC0) % 6];
    }
    snprintf(lab, len, "target=\"tor000\",interface=\"%s\",priority=\"%d\"", port, (k - PFC0) / 2);
    return pfcf[(k - PFC0) % 2];
}

static int
bench_openmetrics(const char *path)
{
    struct tor t;
    tor_init(&t, 0);
    uint64_t *vals = malloc((size_t)PER_TOR * PROM_SECS * sizeof(*vals));
    int64_t *ts = malloc(PROM_SECS * sizeof(*ts));
    struct fs_ring_point *pts = malloc(PER_TOR * sizeof(*pts));
    struct target tg;
    target_init(&tg, UINT64_MAX, 1, &t, -1);
    for (int sec = 0; sec < PROM_SECS; sec++) {
        tor_poll(&t, sec);
        ts[sec] = poll_ts(&t, 0, sec);
        for (int i = 0; i < PER_TOR; i++)
            vals[(size_t)i * PROM_SECS + (size_t)sec] = t.val[i];
        size_t np = target_fill(&tg, 0, &t, pts);
        fs_ring_append(tg.r, tg.group[0], ts[sec], pts, np);
    }
    printf("BENCH ring_bytes_per_sample_all_prom_subset %.3f bytes\n", bytes_per_sample(tg.r));
    fflush(stdout);
    fs_ring_free(tg.r);
    free(tg.ids);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return 1;
    }
    /* family by family (a family's lines must be contiguous), series by series */
    static char buf[1 << 20];
    setvbuf(f, buf, _IOFBF, sizeof(buf));
    for (int k = 0; k < PER_PORT; k++) {
        if (k >= TC0 && k < PFC0 && (k - TC0) >= 6)
            continue; /* TC families are written once, all queues together */
        if (k >= PFC0 + 2)
            continue;
        char lab[160];
        const char *fam = family(k, lab, sizeof(lab), "x");
        bool gauge = is_gauge(k);
        fprintf(f, "# TYPE fabricscope_%s %s\n", fam, gauge ? "gauge" : "counter");
        int nsub = k < TC0 ? 1 : k < PFC0 ? 8 : 8, stride = k < TC0 ? 0 : k < PFC0 ? 6 : 2;
        for (int p = 0; p < PORTS; p++) {
            char port[32];
            snprintf(port, sizeof(port), "Ethernet%d", p * 4);
            for (int sub = 0; sub < nsub; sub++) {
                int kk = k + sub * stride;
                family(kk, lab, sizeof(lab), port);
                const uint64_t *v = vals + (size_t)(p * PER_PORT + kk) * PROM_SECS;
                for (int sec = 0; sec < PROM_SECS; sec++) {
                    if (gauge) {
                        double d;
                        memcpy(&d, &v[sec], sizeof(d));
                        fprintf(f, "fabricscope_%s{%s} %.17g %lld.%06lld\n", fam, lab, d,
                                (long long)(ts[sec] / 1000000), (long long)(ts[sec] % 1000000));
                    } else {
                        fprintf(f, "fabricscope_%s_total{%s} %llu %lld.%06lld\n", fam, lab,
                                (unsigned long long)v[sec], (long long)(ts[sec] / 1000000),
                                (long long)(ts[sec] % 1000000));
                    }
                }
            }
        }
    }
    fprintf(f, "# EOF\n");
    int rc = fclose(f) == 0 ? 0 : 1;
    free(vals);
    free(ts);
    free(pts);
    return rc;
}

int
main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--openmetrics") == 0)
        return bench_openmetrics(argv[2]);
    if (argc != 1) {
        fprintf(stderr, "usage: bench_ring [--openmetrics FILE]\n");
        return 2;
    }
    bench_compression();
    bench_ingest();
    return 0;
}
