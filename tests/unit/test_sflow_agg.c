/*
 * The sFlow driver's pure parts (drivers/sflow/agg.c, sflow_config.c): the sflow block's
 * refusals (named by key path) and defaults; flow-rule matching of sampled packets
 * (RoCEv2 CE and not, TCP port ranges, tc from DSCP and from the egress queue record);
 * the aggregate's exact estimates (samples x rate, frame bytes, CE share, queue depth
 * max and p90, drops by reason name); loss accounting (gaps, reorder within the window,
 * late after a flush, agent restart, sequence restart, sample gaps, the agent's own drop
 * counts); decode errors counted whole; the bounds (over_limit); agent restarts 3 s, 13 s
 * and 5 min after the start told from duplicates and reordering, and counters that went
 * back re-based (never a 2^32 jump); sampling rate changes counted.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agg.h"
#include "config/config.h"
#include "daemon.h"
#include "driver.h"
#include "sflow_build.h"

#define AGENT 0x0a000001u /* 10.0.0.1 */

/* ---------------- a recording emitter ---------------- */

struct rec {
    char key[256];
    double v;
};

struct recorder {
    struct rec r[512];
    size_t n;
    int ifname_calls;
    const char *core_name; /* what "another source" calls ifIndex 7, or NULL */
    int resets;            /* port counter resets declared */
};

static void
rec_put(struct recorder *rc, enum fs_metric m, const struct fs_label *l, size_t n, double v)
{
    char key[256];
    size_t o = (size_t)snprintf(key, sizeof key, "%s", fs_metric_defs[m].name);
    for (size_t i = 0; i < n && o < sizeof key; i++)
        o += (size_t)snprintf(key + o, sizeof key - o, "%s%s=%s", i ? "," : "{", l[i].name,
                              l[i].value);
    if (n && o < sizeof key)
        snprintf(key + o, sizeof key - o, "}");
    for (size_t i = 0; i < rc->n; i++)
        if (!strcmp(rc->r[i].key, key)) {
            rc->r[i].v = v;
            return;
        }
    assert_true(rc->n < sizeof rc->r / sizeof rc->r[0]);
    snprintf(rc->r[rc->n].key, sizeof rc->r[rc->n].key, "%s", key);
    rc->r[rc->n++].v = v;
}

static void
rec_counter(void *arg, enum fs_metric m, const struct fs_label *l, size_t n, uint64_t raw,
            unsigned bits)
{
    (void)bits;
    rec_put(arg, m, l, n, (double)raw);
}

static void
rec_gauge(void *arg, enum fs_metric m, const struct fs_label *l, size_t n, double v)
{
    rec_put(arg, m, l, n, v);
}

static int
rec_ifname(void *arg, uint32_t ifindex, char *buf, size_t len)
{
    struct recorder *rc = arg;
    rc->ifname_calls++;
    if (ifindex == 7 && rc->core_name) {
        snprintf(buf, len, "%s", rc->core_name);
        return 1;
    }
    return 0;
}

static void
rec_rate(void *arg, const char *iface, double v)
{
    (void)arg, (void)iface, (void)v;
}

static void
rec_reset(void *arg, const char *iface)
{
    struct recorder *rc = arg;
    assert_non_null(iface);
    rc->resets++;
}

static const struct fs_sflow_emit rec_emit = {rec_counter, rec_gauge, rec_ifname, rec_rate,
                                              rec_reset};

/* The recorded value of key, or -1 when it was never emitted. */
static double
val(const struct recorder *rc, const char *key)
{
    for (size_t i = 0; i < rc->n; i++)
        if (!strcmp(rc->r[i].key, key))
            return rc->r[i].v;
    return -1;
}

/* ---------------- rules ---------------- */

static const struct fs_flow_rule rules[] = {
    {.name = "roce", .protocol = FS_PROTO_UDP, .dst_lo = 4791, .dst_hi = 4791, .tc = -1},
    {.name = "roce-ce",
     .protocol = FS_PROTO_UDP,
     .dst_lo = 4791,
     .dst_hi = 4791,
     .ecn_ce = true,
     .tc = -1},
    {.name = "sockets", .protocol = FS_PROTO_TCP, .dst_lo = 50000, .dst_hi = 50999, .tc = -1},
    {.name = "roce-tc3", .protocol = FS_PROTO_UDP, .dst_lo = 4791, .dst_hi = 4791, .tc = 3},
};
#define N_RULES (sizeof rules / sizeof rules[0])

static const struct fs_sflow_ifname names[] = {{101, "Eth1/1"}};

static struct fs_sflow_agg *
agg_new(uint32_t max_ports)
{
    char err[128];
    struct fs_sflow_agg_opts o = {.rules = rules,
                                  .n_rules = N_RULES,
                                  .max_ports = max_ports,
                                  .ifnames = names,
                                  .n_ifnames = 1};
    struct fs_sflow_agg *a = fs_sflow_agg_new(&o, err, sizeof err);
    assert_non_null(a);
    return a;
}

static const struct sfb_pkt roce_ce = {17, 49152, 4791, 26, 3};
static const struct sfb_pkt roce = {17, 49152, 4791, 26, 2};
static const struct sfb_pkt tcp_in = {6, 40000, 50500, 0, 0};
static const struct sfb_pkt tcp_out = {6, 40000, 51000, 0, 0};

static struct sflow_packet
decoded(const struct sfb_pkt *p)
{
    uint8_t b[128];
    struct sflow_packet pk;
    size_t n = sfb_packet_bytes(p, b);
    sflow_decode_packet_header(1, b, n, &pk);
    return pk;
}

static void
test_match(void **state)
{
    (void)state;
    struct sflow_packet ce = decoded(&roce_ce), nce = decoded(&roce), t1 = decoded(&tcp_in),
                        t2 = decoded(&tcp_out);
    assert_true(fs_sflow_rule_match(&rules[0], &ce, 3));
    assert_true(fs_sflow_rule_match(&rules[0], &nce, 3));
    assert_true(fs_sflow_rule_match(&rules[1], &ce, 3));
    assert_false(fs_sflow_rule_match(&rules[1], &nce, 3));
    assert_false(fs_sflow_rule_match(&rules[0], &t1, 0)); /* TCP is not a UDP rule */
    assert_true(fs_sflow_rule_match(&rules[2], &t1, 0));
    assert_false(fs_sflow_rule_match(&rules[2], &t2, 0)); /* 51000 is past 50999 */
    assert_false(fs_sflow_rule_match(&rules[2], &ce, 3));
    /* tc: DSCP 26 (AF31) >> 3 = 3; the egress queue record wins over DSCP */
    struct sflow_flow_records r = {0};
    r.raw.present = true;
    r.raw.packet = ce;
    assert_int_equal(fs_sflow_packet_tc(&r), 3);
    assert_true(fs_sflow_rule_match(&rules[3], &ce, fs_sflow_packet_tc(&r)));
    r.has_egress_queue = true;
    r.egress_queue = 5;
    assert_int_equal(fs_sflow_packet_tc(&r), 5);
    assert_false(fs_sflow_rule_match(&rules[3], &ce, fs_sflow_packet_tc(&r)));
    /* no IP header read: no rule applies, even one without constraints */
    struct sflow_packet none = {0};
    struct fs_flow_rule any = {.name = "any", .tc = -1};
    assert_false(fs_sflow_rule_match(&any, &none, -1));
    assert_true(fs_sflow_rule_match(&any, &t2, 0));
    char b[32];
    assert_string_equal(fs_sflow_drop_reason(259, b, sizeof b), "no_buffer_space");
    assert_string_equal(fs_sflow_drop_reason(0, b, sizeof b), "net_unreachable");
    assert_string_equal(fs_sflow_drop_reason(258, b, sizeof b), "acl");
    assert_string_equal(fs_sflow_drop_reason(9999, b, sizeof b), "code_9999");
}

static void
feed(struct fs_sflow_agg *a, const struct sfb *x)
{
    assert_int_equal(fs_sflow_agg_feed(a, x->b, x->n, 1), 0);
}

static void
test_aggregate(void **state)
{
    (void)state;
    struct fs_sflow_agg *a = agg_new(16);
    struct recorder rc = {.core_name = "Eth1/7"};
    struct sfb x;
    uint32_t depths[10] = {100, 900, 300, 400, 500, 600, 700, 800, 200, 1000};
    sfb_datagram(&x, AGENT, 0, 1, 1000);
    /* 10 egress-sampled CE RoCE samples on 101 with queue depth and transit delay */
    for (uint32_t i = 0; i < 10; i++) {
        struct sfb_flow f = {.seq = 1 + i,
                             .source = 101,
                             .rate = 1000,
                             .in = 3,
                             .out = 101,
                             .pkt = roce_ce,
                             .frame_length = 4158,
                             .has_depth = true,
                             .depth = depths[i],
                             .has_delay = true,
                             .delay_ns = 1000 * (i + 1)};
        sfb_flow_sample(&x, &f);
    }
    /* 30 non-CE on 101 (egress: the source is the output), 5 TCP ingress-sampled on 7 */
    for (uint32_t i = 0; i < 30; i++) {
        struct sfb_flow f = {.seq = 11 + i,
                             .source = 101,
                             .rate = 1000,
                             .in = 3,
                             .out = 101,
                             .pkt = roce,
                             .frame_length = 4158};
        sfb_flow_sample(&x, &f);
    }
    for (uint32_t i = 0; i < 5; i++) {
        struct sfb_flow f = {.seq = 1 + i,
                             .source = 7,
                             .rate = 4096,
                             .in = 7,
                             .out = 9,
                             .pkt = tcp_in,
                             .frame_length = 1500};
        sfb_flow_sample(&x, &f);
    }
    sfb_discard_sample(&x, 1, 3, 101, 259, 0, &roce_ce);
    sfb_discard_sample(&x, 2, 3, 101, 259, 0, &roce);
    sfb_discard_sample(&x, 3, 3, 0, 258, 0, &roce); /* no output: the input port */
    sfb_counter_sample(&x, 1, 101, 123456789, 10, 5, 3);
    feed(a, &x);
    fs_sflow_agg_flush(a, &rec_emit, &rc, 1);

    assert_true(val(&rc, "fabric_flow_rule_packets_total{rule=roce,interface=Eth1/1}") == 40000);
    assert_true(val(&rc, "fabric_flow_rule_bytes_total{rule=roce,interface=Eth1/1}") ==
                40000.0 * 4158);
    assert_true(val(&rc, "fabric_flow_rule_ecn_marked_packets_total{rule=roce,interface=Eth1/1}") ==
                10000);
    assert_true(val(&rc, "fabric_flow_rule_packets_total{rule=roce-ce,interface=Eth1/1}") == 10000);
    assert_true(val(&rc, "fabric_flow_rule_packets_total{rule=roce-tc3,interface=Eth1/1}") ==
                40000);
    /* ifIndex 7 is named by "another source"; the configured 101 never asks */
    assert_true(val(&rc, "fabric_flow_rule_packets_total{rule=sockets,interface=Eth1/7}") ==
                5 * 4096);
    assert_true(val(&rc, "fabric_flow_rule_queue_depth_max_bytes{rule=roce,interface=Eth1/1}") ==
                1000);
    assert_true(val(&rc, "fabric_flow_rule_queue_depth_p90_bytes{rule=roce,interface=Eth1/1}") ==
                900);
    assert_true(val(&rc, "fabric_flow_rule_transit_delay_max_seconds{rule=roce,interface=Eth1/1}") >
                9.99e-6);
    assert_true(val(&rc, "fabric_flow_rule_dropped_packets_total{rule=roce,interface=Eth1/1,"
                         "reason=no_buffer_space}") == 2);
    assert_true(val(&rc, "fabric_flow_rule_dropped_packets_total{rule=roce-ce,interface=Eth1/1,"
                         "reason=no_buffer_space}") == 1);
    assert_true(val(&rc, "fabric_flow_rule_dropped_packets_total{rule=roce,interface=ifIndex3,"
                         "reason=acl}") == 1);
    assert_true(val(&rc, "fabric_port_bytes_total{interface=Eth1/1,direction=rx}") == 123456789);
    assert_true(val(&rc, "fabric_port_oper_up{interface=Eth1/1}") == 1);
    assert_true(val(&rc, "fabric_port_speed_bps{interface=Eth1/1}") == 100e9);
    assert_true(val(&rc, "fabricscope_sflow_datagrams_total") == 1);
    assert_true(val(&rc, "fabricscope_sflow_lost_samples_total{kind=flow}") == 0);

    /* Next interval: no transit records, so no new gauges; counters keep counting; the
     * packet counter sum unwraps its 32-bit parts (unicast wrapped) exactly. */
    int calls = rc.ifname_calls;
    rc.n = 0;
    sfb_datagram(&x, AGENT, 0, 2, 2000);
    struct sfb_flow f = {.seq = 41,
                         .source = 101,
                         .rate = 1000,
                         .in = 3,
                         .out = 101,
                         .pkt = roce,
                         .frame_length = 4158};
    sfb_flow_sample(&x, &f);
    /* 5 GB more octets: room for the 2^32 unicast packets of the wrap */
    sfb_counter_sample(&x, 2, 101, 5123456789ull, 4, 6, 1);
    feed(a, &x);
    fs_sflow_agg_flush(a, &rec_emit, &rc, 2);
    assert_true(val(&rc, "fabric_flow_rule_packets_total{rule=roce,interface=Eth1/1}") == 41000);
    assert_true(val(&rc, "fabric_flow_rule_queue_depth_max_bytes{rule=roce,interface=Eth1/1}") ==
                -1);
    assert_true(val(&rc, "fabric_port_packets_total{interface=Eth1/1,direction=rx}") ==
                (double)((4u - 10u) + (6u - 5u))); /* (2^32 - 6) + 1 */
    assert_true(val(&rc, "fabric_port_oper_up{interface=Eth1/1}") == 0);
    /* names are cached: found names are not asked for again */
    assert_int_equal(rc.ifname_calls, calls);
    fs_sflow_agg_free(a);
}

/* A datagram of sequence seq (uptime up) with one flow sample of sample sequence sseq. */
static void
one(struct fs_sflow_agg *a, uint32_t seq, uint32_t uptime, uint32_t sseq)
{
    struct sfb x;
    sfb_datagram(&x, AGENT, 0, seq, uptime);
    struct sfb_flow f = {.seq = sseq,
                         .source = 101,
                         .rate = 100,
                         .in = 3,
                         .out = 101,
                         .pkt = roce,
                         .frame_length = 1000};
    sfb_flow_sample(&x, &f);
    fs_sflow_agg_feed(a, x.b, x.n, 1);
}

static void
test_loss(void **state)
{
    (void)state;
    struct fs_sflow_agg *a = agg_new(16);
    struct recorder rc = {0};
    const struct fs_sflow_agg_stats *s = fs_sflow_agg_get_stats(a);
    /* gap: 1, 2, 6 (3, 4, 5 missing); reorder: 8 before 7 is no loss */
    one(a, 1, 100, 1);
    one(a, 2, 200, 2);
    one(a, 6, 600, 6);
    one(a, 8, 800, 8);
    one(a, 7, 700, 7);
    assert_int_equal(s->lost_datagrams, 0); /* not yet: within the window until a flush */
    fs_sflow_agg_flush(a, &rec_emit, &rc, 1);
    assert_int_equal(s->lost_datagrams, 3);
    assert_int_equal(s->lost_samples[FS_SFLOW_LOST_FLOW], 3);
    assert_true(val(&rc, "fabricscope_sflow_lost_datagrams_total") == 3);
    /* 4 arriving after the flush declared it lost: dropped, stays lost */
    one(a, 4, 400, 4);
    assert_int_equal(s->duplicates, 1);
    assert_int_equal(s->datagrams, 5);
    /* a jump of 100: 9..44 leave the window unseen at once, 45..107 when settled */
    one(a, 108, 10800, 108);
    assert_int_equal(s->lost_datagrams, 3 + 36);
    /* agent restart: uptime back, sequences from 1: no loss, one restart */
    one(a, 1, 50, 1);
    one(a, 2, 60, 2);
    fs_sflow_agg_flush(a, &rec_emit, &rc, 2);
    assert_int_equal(s->resets[FS_SFLOW_RESET_AGENT_RESTART], 1);
    assert_true(fs_sflow_agg_take_restart(a));
    assert_false(fs_sflow_agg_take_restart(a));
    assert_int_equal(s->lost_datagrams, 102);
    /* sequence far back with the uptime going on: a datagram sequence reset */
    one(a, 500, 100000, 500);
    one(a, 3, 100100, 3);
    assert_int_equal(s->resets[FS_SFLOW_RESET_DATAGRAM], 1);
    assert_int_equal(s->resets[FS_SFLOW_RESET_SAMPLE], 1);
    /* the agent's own drop count: its increase is lost samples */
    struct sfb x;
    sfb_datagram(&x, AGENT, 0, 4, 100200);
    struct sfb_flow f = {.seq = 4,
                         .source = 101,
                         .rate = 100,
                         .drops = 10,
                         .in = 3,
                         .out = 101,
                         .pkt = roce,
                         .frame_length = 1000};
    sfb_flow_sample(&x, &f);
    f.seq = 5;
    f.drops = 25;
    sfb_flow_sample(&x, &f);
    feed(a, &x);
    assert_int_equal(s->lost_samples[FS_SFLOW_LOST_AGENT_DROPPED], 25); /* 0 -> 10 -> 25 */
    /* a truncated datagram is counted whole and changes nothing else */
    uint64_t before = s->datagrams;
    sfb_datagram(&x, AGENT, 0, 5, 100300);
    sfb_flow_sample(&x, &f);
    assert_int_equal(fs_sflow_agg_feed(a, x.b, x.n - 8, 1), -1);
    assert_int_equal(
        s->decode_errors[FS_SFLOW_DEC_TRUNCATED] + s->decode_errors[FS_SFLOW_DEC_LENGTH], 1);
    assert_int_equal(s->datagrams, before);
    x.b[3] = 4; /* version 4 */
    assert_int_equal(fs_sflow_agg_feed(a, x.b, x.n, 1), -1);
    assert_int_equal(s->decode_errors[FS_SFLOW_DEC_VERSION], 1);
    fs_sflow_agg_free(a);
}

static void
pool_one(struct fs_sflow_agg *a, uint32_t dseq, uint32_t sseq, uint32_t pool, uint32_t rate)
{
    struct sfb x;
    sfb_datagram(&x, AGENT, 0, dseq, 1000 + dseq);
    struct sfb_flow f = {.seq = sseq,
                         .source = 101,
                         .rate = rate,
                         .pool = pool,
                         .in = 3,
                         .out = 101,
                         .pkt = roce,
                         .frame_length = 1000};
    sfb_flow_sample(&x, &f);
    fs_sflow_agg_feed(a, x.b, x.n, 1);
}

/* Sample pools against sequence numbers: random skips of mean `rate` (wrapping past
   2^32, with lost samples the pool still covers) pass; an agent whose pool grows by a
   tenth of samples x rate (its rate field lies) fails the check; a pool that grows by
   less than the samples taken fails at once; fewer than 100 samples are not judged. */
static void
test_sample_pool(void **state)
{
    (void)state;
    struct fs_sflow_agg *a = agg_new(16);
    struct recorder rc = {0};
    const struct fs_sflow_agg_stats *s = fs_sflow_agg_get_stats(a);
    uint32_t dseq = 1, sseq = 1, pool = UINT32_MAX - 2000;
    uint64_t h = 42;
    for (int i = 0; i < 120; i++) { /* exponential skips of mean 100, two samples lost */
        h = h * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = ((double)(h >> 11) + 0.5) / 9007199254740992.0;
        pool += 1 + (uint32_t)(-100.0 * log(u));
        pool_one(a, dseq++, sseq, pool, 100);
        sseq += (i == 10 || i == 20) ? 2 : 1;
        if (i == 10 || i == 20)
            pool += 100; /* the lost sample's packets */
    }
    fs_sflow_agg_flush(a, &rec_emit, &rc, 2);
    assert_int_equal(s->pool_checks[FS_SFLOW_POOL_OK], 1);
    assert_int_equal(s->pool_checks[FS_SFLOW_POOL_MISMATCH], 0);
    assert_true(val(&rc, "fabricscope_sflow_sample_pool_checks_total{result=ok}") == 1);
    for (int i = 0; i < 120; i++) { /* the agent says 1 in 100 but samples 1 in 10 */
        pool += 10;
        pool_one(a, dseq++, sseq++, pool, 100);
    }
    fs_sflow_agg_flush(a, &rec_emit, &rc, 3);
    assert_int_equal(s->pool_checks[FS_SFLOW_POOL_MISMATCH], 1);
    assert_true(val(&rc, "fabricscope_sflow_sample_pool_checks_total{result=mismatch}") == 1);
    for (int i = 0; i < 10; i++) { /* too few to judge */
        pool += 10;
        pool_one(a, dseq++, sseq++, pool, 100);
    }
    fs_sflow_agg_flush(a, &rec_emit, &rc, 4);
    assert_int_equal(s->pool_checks[FS_SFLOW_POOL_OK] + s->pool_checks[FS_SFLOW_POOL_MISMATCH], 2);
    sseq += 5; /* five samples, but the pool grew by 3 packets */
    pool += 3;
    pool_one(a, dseq++, sseq, pool, 100);
    assert_int_equal(s->pool_checks[FS_SFLOW_POOL_MISMATCH], 2);
    fs_sflow_agg_free(a);
}

/* ---------------- agent restarts ---------------- */

/* An hsflowd-like agent instance: a datagram a second, its uptime its process's (so a
 * restart sends it back to about 0), each datagram a flow sample and a counter sample of
 * ifIndex 101 whose unicast packets and octets count from the instance's base; its
 * multicast counter mcast throughout (hsflowd sends 2^32-1, unknown). */
struct instance {
    uint32_t seq, sseq, k;
    int32_t jitter_ms;
    uint32_t pkts_base;
    uint64_t oct_base;
    uint32_t mcast;
};

static void
inst_build(struct instance *in, struct sfb *x)
{
    in->k++;
    in->seq++;
    sfb_datagram(x, AGENT, 0, in->seq, (uint32_t)((int32_t)(1000 * in->k) + in->jitter_ms));
    struct sfb_flow f = {.seq = ++in->sseq,
                         .source = 101,
                         .rate = 100,
                         .in = 3,
                         .out = 101,
                         .pkt = roce,
                         .frame_length = 1000};
    sfb_flow_sample(x, &f);
    /* 1000 packets and 1 MB a second (the packets' 32 bits wrap when the base is high) */
    sfb_counter_sample(x, in->seq, 101, in->oct_base + 1000000ull * in->k,
                       in->pkts_base + 1000u * in->k, in->mcast, 3);
}

struct run {
    struct fs_sflow_agg *a;
    struct recorder rc;
    double last; /* fabric_port_packets_total rx, last flushed */
    int flushes;
};

/* Flushes and checks the exported packet counter: never back, never more than the
 * 2000 packets two datagrams carry. */
static void
run_flush(struct run *r)
{
    fs_sflow_agg_flush(r->a, &rec_emit, &r->rc, ++r->flushes);
    double v = val(&r->rc, "fabric_port_packets_total{interface=Eth1/1,direction=rx}");
    assert_true(v >= r->last && v - r->last <= 2000);
    r->last = v;
}

static void
run_one(struct run *r, struct instance *in)
{
    struct sfb x;
    inst_build(in, &x);
    assert_int_equal(fs_sflow_agg_feed(r->a, x.b, x.n, 1), 0);
    run_flush(r);
}

/* n datagrams of in, the third sent twice (a duplicate) and the fifth and sixth swapped
 * (reordered within an interval) when n >= 6. */
static void
run_instance(struct run *r, struct instance *in, uint32_t n)
{
    for (uint32_t i = 1; i <= n; i++) {
        struct sfb x, y;
        if (n >= 6 && i == 3) {
            inst_build(in, &x);
            assert_int_equal(fs_sflow_agg_feed(r->a, x.b, x.n, 1), 0);
            assert_int_equal(fs_sflow_agg_feed(r->a, x.b, x.n, 1), 1); /* duplicate */
            run_flush(r);
        } else if (n >= 6 && i == 5) {
            inst_build(in, &x);
            inst_build(in, &y);
            assert_int_equal(fs_sflow_agg_feed(r->a, y.b, y.n, 1), 0);
            assert_int_equal(fs_sflow_agg_feed(r->a, x.b, x.n, 1), 0); /* late */
            run_flush(r);
            i++;
        } else {
            run_one(r, in);
        }
    }
}

/* An agent restarted after `after` seconds, its counters from 0 again (hsflowd's count
 * from its own start). */
static void
restart_after(uint32_t after)
{
    struct run r = {.a = agg_new(16)};
    const struct fs_sflow_agg_stats *s = fs_sflow_agg_get_stats(r.a);
    /* the first instance's packet counter near 2^32: it wraps, which is no restart */
    struct instance one = {.jitter_ms = 37,
                           .pkts_base = 4294960000u,
                           .oct_base = 1000000000000ull,
                           .mcast = UINT32_MAX};
    struct instance two = {.jitter_ms = -63, .mcast = UINT32_MAX};
    run_instance(&r, &one, after);
    run_instance(&r, &two, 8);
    assert_int_equal(s->resets[FS_SFLOW_RESET_AGENT_RESTART], 1);
    assert_int_equal(s->duplicates, after >= 6 ? 2 : 1);
    assert_int_equal(s->datagrams, after + 8);
    assert_int_equal(s->lost_datagrams, 0);
    assert_int_equal(s->lost_samples[FS_SFLOW_LOST_FLOW], 0);
    /* every increase: the new instance's first sample counted from zero (its octets
     * fell), its unknown multicast counter left out (hsflowd's first sample after a
     * restart holds what it counted since its start: dropped, the packets fell short of
     * the octets the store keeps) */
    assert_true(r.last == 1000.0 * (after - 1 + 8));
    assert_true(val(&r.rc, "fabric_flow_rule_packets_total{rule=roce,interface=Eth1/1}") ==
                100.0 * (after + 8));
    fs_sflow_agg_free(r.a);
}

/* hsflowd restarted 3 s, 13 s and 5 min after its start: one restart each, the
 * duplicates and the reordered pair told apart from it, no counter jump. */
static void
test_restart_3s(void **state)
{
    (void)state;
    restart_after(3);
}

static void
test_restart_13s(void **state)
{
    (void)state;
    restart_after(13);
}

static void
test_restart_5min(void **state)
{
    (void)state;
    restart_after(300);
}

/* An agent restarted over counters that went on (a switch's agent over the ASIC's): 500
 * packets crossed between the instances' samples; the new instance's first sample adds
 * them and its own 1000, as the store continues the octets. Octets unknown (0) in the
 * new sample: no telling, only a base. */
static void
test_restart_counters_go_on(void **state)
{
    (void)state;
    struct run r = {.a = agg_new(16)};
    const struct fs_sflow_agg_stats *s = fs_sflow_agg_get_stats(r.a);
    struct instance one = {.jitter_ms = 37, .pkts_base = 4000000u, .oct_base = 1000000000000ull};
    struct instance two = {.jitter_ms = -63,
                           .pkts_base = 4000000u + 3000u + 500u,
                           .oct_base = 1000000000000ull + 3000000ull + 500000ull};
    struct instance three = {.jitter_ms = 11, .oct_base = 0ull - 1000000ull};
    run_instance(&r, &one, 3);
    run_instance(&r, &two, 3);
    assert_int_equal(s->resets[FS_SFLOW_RESET_AGENT_RESTART], 1);
    assert_int_equal(s->resets[FS_SFLOW_RESET_COUNTERS], 0);
    assert_true(r.last == 2000.0 + 1500.0 + 2000.0);
    /* the third instance's first octets are 0, unknown: a base; then it counts */
    run_instance(&r, &three, 3);
    assert_int_equal(s->resets[FS_SFLOW_RESET_AGENT_RESTART], 2);
    assert_true(r.last == 5500.0 + 2000.0);
    fs_sflow_agg_free(r.a);
}

/* A restart the datagrams do not show (the new instance's first four lost, its fifth
 * ahead in sequence and uptime): its counter sample went back, which only sets a new
 * base (resets kind counters, the port's reset declared), never a wrap of 2^32. */
static void
test_counters_back(void **state)
{
    (void)state;
    struct run r = {.a = agg_new(16)};
    const struct fs_sflow_agg_stats *s = fs_sflow_agg_get_stats(r.a);
    struct instance one = {.jitter_ms = 37, .pkts_base = 4000000u, .oct_base = 1000000000000ull};
    struct instance two = {.jitter_ms = -63};
    struct sfb x;
    run_instance(&r, &one, 3);
    for (int i = 0; i < 4; i++)
        inst_build(&two, &x); /* never arrive */
    run_instance(&r, &two, 3);
    assert_int_equal(s->resets[FS_SFLOW_RESET_AGENT_RESTART], 0);
    assert_int_equal(s->resets[FS_SFLOW_RESET_COUNTERS], 1);
    assert_int_equal(r.rc.resets, 1);
    assert_true(r.last == 1000.0 * (2 + 2));
    assert_true(val(&r.rc, "fabricscope_sflow_sequence_resets_total{kind=counters}") == 1);
    fs_sflow_agg_free(r.a);
}

/* A source's sampling rate changing is counted (and can be logged), the new rate used. */
static void
test_rate_change(void **state)
{
    (void)state;
    struct fs_sflow_agg *a = agg_new(16);
    struct recorder rc = {0};
    const struct fs_sflow_agg_stats *s = fs_sflow_agg_get_stats(a);
    pool_one(a, 1, 1, 100, 100);
    pool_one(a, 2, 2, 200, 100);
    assert_int_equal(s->rate_changes, 0);
    pool_one(a, 3, 3, 10200, 10000);
    assert_int_equal(s->rate_changes, 1);
    const struct fs_sflow_rate_change *c = fs_sflow_agg_last_rate_change(a);
    assert_int_equal(c->n, 1);
    assert_int_equal(c->source_index, 101);
    assert_int_equal(c->old_rate, 100);
    assert_int_equal(c->new_rate, 10000);
    fs_sflow_agg_flush(a, &rec_emit, &rc, 1);
    assert_true(val(&rc, "fabricscope_sflow_sampling_rate_changes_total") == 1);
    assert_true(val(&rc, "fabric_flow_rule_packets_total{rule=roce,interface=Eth1/1}") == 10200);
    fs_sflow_agg_free(a);
}

/* Port names: the agent's port name record names an interface no other source names;
 * the configured map comes first; a renamed port takes the new name; a name another
 * source gives the port (the core's, asked again every 5 s) replaces the agent's. */
static void
test_port_names(void **state)
{
    (void)state;
    struct fs_sflow_agg *a = agg_new(16);
    struct recorder rc = {0};
    struct sfb x;
    sfb_datagram(&x, AGENT, 0, 1, 1000);
    sfb_counter_sample_named(&x, 1, 5, 1000, 1, 0, 3, "swp5");
    sfb_counter_sample_named(&x, 1, 7, 1000, 1, 0, 3, "eth7-agent");
    sfb_counter_sample_named(&x, 1, 101, 1000, 1, 0, 3, "agent-101");
    feed(a, &x);
    fs_sflow_agg_flush(a, &rec_emit, &rc, 1);
    assert_true(val(&rc, "fabric_port_oper_up{interface=swp5}") == 1);
    assert_true(val(&rc, "fabric_port_oper_up{interface=eth7-agent}") == 1);
    assert_true(val(&rc, "fabric_port_oper_up{interface=Eth1/1}") == 1); /* configured */
    assert_true(val(&rc, "fabric_port_oper_up{interface=agent-101}") == -1);
    assert_true(val(&rc, "fabric_port_oper_up{interface=ifIndex5}") == -1);
    /* the agent renames port 5; another source names port 7 (asked again after 5 s) */
    rc.n = 0;
    rc.core_name = "Eth1/7";
    sfb_datagram(&x, AGENT, 0, 2, 2000);
    sfb_counter_sample_named(&x, 2, 5, 2000, 2, 0, 3, "swp5-renamed");
    sfb_counter_sample_named(&x, 2, 7, 2000, 2, 0, 3, "eth7-agent");
    feed(a, &x);
    fs_sflow_agg_flush(a, &rec_emit, &rc, 10000000);
    assert_true(val(&rc, "fabric_port_oper_up{interface=swp5-renamed}") == 1);
    assert_true(val(&rc, "fabric_port_oper_up{interface=Eth1/7}") == 1);
    assert_true(val(&rc, "fabric_port_oper_up{interface=eth7-agent}") == -1);
    fs_sflow_agg_free(a);
}

static void
test_bounds(void **state)
{
    (void)state;
    struct fs_sflow_agg *a = agg_new(2);
    struct recorder rc = {0};
    const struct fs_sflow_agg_stats *s = fs_sflow_agg_get_stats(a);
    struct sfb x;
    sfb_datagram(&x, AGENT, 0, 1, 100);
    for (uint32_t p = 1; p <= 4; p++) {
        struct sfb_flow f = {.seq = 1,
                             .source = p,
                             .rate = 10,
                             .in = p,
                             .out = 50,
                             .pkt = tcp_in,
                             .frame_length = 100};
        sfb_flow_sample(&x, &f);
    }
    feed(a, &x);
    fs_sflow_agg_flush(a, &rec_emit, &rc, 1);
    /* two ports fit; the samples of the others are counted, not kept */
    assert_true(val(&rc, "fabric_flow_rule_packets_total{rule=sockets,interface=ifIndex1}") == 10);
    assert_true(val(&rc, "fabric_flow_rule_packets_total{rule=sockets,interface=ifIndex2}") == 10);
    assert_true(val(&rc, "fabric_flow_rule_packets_total{rule=sockets,interface=ifIndex3}") == -1);
    assert_int_equal(s->lost_samples[FS_SFLOW_LOST_OVER_LIMIT], 2);
    /* every cell full with quantile buffers: still within the stated bound */
    sfb_datagram(&x, AGENT, 0, 2, 200);
    for (uint32_t p = 1; p <= 2; p++) {
        struct sfb_flow f = {.seq = 2,
                             .source = p,
                             .rate = 10,
                             .in = 9,
                             .out = p,
                             .pkt = roce_ce,
                             .frame_length = 100,
                             .has_depth = true,
                             .depth = 5,
                             .has_queue = true,
                             .queue = 3};
        sfb_flow_sample(&x, &f);
    }
    sfb_discard_sample(&x, 1, 1, 1, 259, 0, &roce_ce);
    sfb_discard_sample(&x, 2, 2, 2, 258, 0, &tcp_in);
    feed(a, &x);
    assert_true(fs_sflow_agg_bytes(a) <= fs_sflow_agg_bound(N_RULES, 2));
    /* 6 of the 8 cells have quantile buffers (the TCP ones had no records) */
    assert_int_equal(fs_sflow_agg_bytes(a), fs_sflow_agg_bound(N_RULES, 2) - 2 * 512);
    fs_sflow_agg_free(a);
}

/* ---------------- the sflow block ---------------- */

static struct fs_config_opts opts;

static int
parse(const char *yaml, struct fs_config **cfg, char **errors)
{
    *cfg = NULL;
    *errors = NULL;
    return fs_config_parse(yaml, strlen(yaml), "t.yaml", &opts, cfg, errors);
}

static void
test_config(void **state)
{
    (void)state;
    struct fs_config *cfg;
    char *errors;
    const struct fs_driver *d = fs_driver_find("sflow");
    if (!d)
        skip(); /* a build with FS_DRIVER_SFLOW=OFF: the block is refused, tested elsewhere */
    assert_int_equal(d->kind, FS_DRIVER_STREAM);
    assert_true(d->block.uses_flow_rules);
    assert_int_equal(parse("targets:\n"
                           "  - name: tor1\n"
                           "    address: 10.0.0.1\n"
                           "    sflow: {}\n",
                           &cfg, &errors),
                     0);
    const struct fs_sflow_cfg *c = fs_target_block_cfg(&cfg->targets[0], &d->block);
    assert_non_null(c);
    char b[64];
    assert_string_equal(fs_sflow_addr_str(&c->listen, b, sizeof b), "::");
    assert_int_equal(c->port, 6343);
    assert_false(c->has_agent);
    assert_string_equal(fs_sflow_addr_str(&c->agent, b, sizeof b), "10.0.0.1");
    assert_int_equal(c->interval_us, 1000000);
    assert_int_equal(d->block.config_interval(c), 30000000); /* counter_interval */
    assert_int_equal(c->max_ports, 256);
    fs_config_free(cfg);
    free(errors);

    assert_int_not_equal(parse("targets:\n"
                               "  - name: tor1\n"
                               "    address: tor1.example\n"
                               "    sflow: { listen: 1.2.3, agent: '::1::2', sub_agent: 2 }\n",
                               &cfg, &errors),
                         0);
    assert_null(cfg);
    assert_non_null(strstr(errors, "targets[tor1].sflow.listen: 1.2.3 is not an IPv4 or IPv6"));
    assert_non_null(strstr(errors, "targets[tor1].sflow.agent: ::1::2 is not an IPv4 or IPv6"));
    free(errors);
    assert_int_not_equal(parse("targets:\n"
                               "  - name: tor1\n"
                               "    address: tor1.example\n"
                               "    sflow: { port: 0 }\n",
                               &cfg, &errors),
                         0);
    assert_non_null(strstr(errors, "targets[tor1].sflow.port"));
    free(errors);
    assert_int_not_equal(parse("targets:\n"
                               "  - name: tor1\n"
                               "    address: tor1.example\n"
                               "    sflow: { interface_names: { 5: Eth1/5 } }\n",
                               &cfg, &errors),
                         0);
    assert_non_null(strstr(errors, "targets[tor1].sflow: agent is required"));
    free(errors);
    assert_int_equal(parse("targets:\n"
                           "  - name: tor1\n"
                           "    address: tor1.example\n"
                           "    sflow: { agent: 'fd00::1', sub_agent: 3, counter_interval: 20s,"
                           " interval: 500ms, interface_names: { 9: Eth1/9, 5: Eth1/5 } }\n",
                           &cfg, &errors),
                     0);
    c = fs_target_block_cfg(&cfg->targets[0], &d->block);
    assert_true(c->has_agent && c->has_sub_agent && c->sub_agent == 3);
    assert_int_equal(d->block.config_interval(c), 20000000);
    assert_int_equal(c->n_ifnames, 2);
    assert_int_equal(c->ifnames[0].ifindex, 5); /* sorted */
    assert_string_equal(c->ifnames[1].name, "Eth1/9");
    fs_config_free(cfg);
    free(errors);
}

/* A datagram whose LAST record lies is refused whole: samples before it (flow samples
 * that match every rule, a discard, a counter sample with a port name) leave no trace in
 * any counter, sequence window, port or name, and the same datagram told right is then
 * taken as new (not a duplicate) and counted once. Each datagram is decoded once
 * (fs_sflow_check into a scratch) and committed only after it decoded whole. */
static void
test_last_record_refused(void **state)
{
    (void)state;
    struct fs_sflow_agg *a = agg_new(16);
    const struct fs_sflow_agg_stats *s = fs_sflow_agg_get_stats(a);
    size_t bytes0 = fs_sflow_agg_bytes(a);
    struct recorder rc = {0};
    struct sfb x;
    sfb_datagram(&x, AGENT, 0, 1, 1000);
    for (uint32_t i = 0; i < 3; i++) {
        struct sfb_flow f = {.seq = 1 + i,
                             .source = 101,
                             .rate = 1000 + i, /* a rate change, were it committed */
                             .in = 3,
                             .out = 101,
                             .pkt = roce_ce,
                             .frame_length = 4158,
                             .has_depth = true,
                             .depth = 100,
                             .has_delay = true,
                             .delay_ns = 1000};
        sfb_flow_sample(&x, &f);
    }
    sfb_discard_sample(&x, 1, 5, 6, 259, 7, &roce);
    sfb_counter_sample_named(&x, 1, 9, 5000, 10, 0, 3, "swp9");
    struct sfb_flow last = {.seq = 4,
                            .source = 101,
                            .rate = 1000,
                            .in = 3,
                            .out = 101,
                            .pkt = tcp_in,
                            .frame_length = 1000,
                            .has_depth = true,
                            .depth = 5};
    sfb_flow_sample(&x, &last);
    /* The last record (queue depth, 1040) declares 0 bytes: shorter than its 4. */
    sfb_put_at(&x, x.n - 8, 0);
    assert_int_equal(fs_sflow_agg_feed(a, x.b, x.n, 1), -1);

    struct fs_sflow_agg_stats want;
    memset(&want, 0, sizeof want);
    want.decode_errors[FS_SFLOW_DEC_TRUNCATED] = 1;
    assert_memory_equal(s, &want, sizeof want);
    assert_int_equal(fs_sflow_agg_last_rate_change(a)->n, 0);
    assert_false(fs_sflow_agg_take_restart(a));
    assert_int_equal(fs_sflow_agg_bytes(a), bytes0); /* no quantile buffer allocated */
    /* The scratch keeps nothing of it either. */
    struct fs_sflow_dgram dg = {0};
    enum fs_sflow_decode_reason reason;
    bool hdr_ok;
    assert_int_equal(fs_sflow_check(&dg, x.b, x.n, &hdr_ok, &reason, NULL, 0), -1);
    assert_true(hdr_ok);
    assert_int_equal(reason, FS_SFLOW_DEC_TRUNCATED);
    assert_int_equal(dg.n, 0);
    fs_sflow_dgram_free(&dg);

    /* Flushed: only self metrics, all 0 but the one decode error; no rule, port or drop
     * series, and no name asked for. */
    fs_sflow_agg_flush(a, &rec_emit, &rc, 2);
    assert_int_equal(s->lost_datagrams, 0);
    for (size_t i = 0; i < rc.n; i++) {
        assert_true(strncmp(rc.r[i].key, "fabricscope_sflow_", 18) == 0);
        if (strstr(rc.r[i].key, "decode_errors") && strstr(rc.r[i].key, "reason=truncated"))
            assert_true(rc.r[i].v == 1);
        else
            assert_true(rc.r[i].v == 0);
    }
    assert_int_equal(rc.ifname_calls, 0);
    assert_int_equal(rc.resets, 0);

    /* Told right, the same sequence number is new: counted once, nothing lost. */
    sfb_put_at(&x, x.n - 8, 4);
    assert_int_equal(fs_sflow_agg_feed(a, x.b, x.n, 3), 0);
    assert_int_equal(s->datagrams, 1);
    assert_int_equal(s->duplicates, 0);
    assert_int_equal(s->flow_samples, 4);
    assert_int_equal(s->discard_samples, 1);
    assert_int_equal(s->counter_samples, 1);
    assert_int_equal(s->rate_changes, 3); /* 1000 -> 1001 -> 1002 -> 1000 */
    fs_sflow_agg_flush(a, &rec_emit, &rc, 4);
    assert_int_equal(s->lost_datagrams, 0);
    assert_int_equal(s->lost_samples[FS_SFLOW_LOST_FLOW], 0);
    assert_true(val(&rc, "fabric_flow_rule_packets_total{rule=roce,interface=Eth1/1}") ==
                1000 + 1001 + 1002);
    assert_true(val(&rc, "fabric_flow_rule_packets_total{rule=sockets,interface=Eth1/1}") == 1000);
    assert_true(val(&rc, "fabric_port_packets_total{interface=swp9,direction=rx}") == 0);
    fs_sflow_agg_free(a);
}

static int
setup(void **state)
{
    (void)state;
    fs_daemon_config_opts(&opts);
    return 0;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match),
        cmocka_unit_test(test_aggregate),
        cmocka_unit_test(test_loss),
        cmocka_unit_test(test_sample_pool),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_restart_3s),
        cmocka_unit_test(test_restart_13s),
        cmocka_unit_test(test_restart_5min),
        cmocka_unit_test(test_counters_back),
        cmocka_unit_test(test_restart_counters_go_on),
        cmocka_unit_test(test_rate_change),
        cmocka_unit_test(test_port_names),
        cmocka_unit_test(test_last_record_refused),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
