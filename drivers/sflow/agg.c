/* Sequence accounting, flow-rule matching and aggregation of one sFlow target (agg.h). */
#include "agg.h"

#include <inttypes.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 64
#define RESERVOIR 64 /* values per cell and interval for the quantiles */
#define MAX_SUB_AGENTS 16
#define NAME_MAX_LEN 256
#define NAME_RETRY_US (5 * INT64_C(1000000)) /* ask the core again for an unnamed port */
/* The longest a datagram can be overtaken in the network: one sent this much (agent
 * uptime) before the highest seen is not late but another agent instance's. */
#define REORDER_MAX_MS 5000u
/* Packets a counter sample may show beyond its octets' growth: an agent reads its
 * counters a moment apart, and a quiet port's octets may lag its packets by a few. */
#define PKT_SLACK 65536u

const char *const fs_sflow_lost_kind_names[FS_SFLOW_LOST_KIND_COUNT] = {
    "flow", "counters", "discard", "agent_dropped", "discard_rate_limited", "over_limit"};
const char *const fs_sflow_reset_kind_names[FS_SFLOW_RESET_KIND_COUNT] = {
    "agent_restart", "datagram", "sample", "counters"};
const char *const fs_sflow_decode_reason_names[FS_SFLOW_DEC_REASON_COUNT] = {
    "truncated", "length", "version", "malformed"};
const char *const fs_sflow_pool_result_names[FS_SFLOW_POOL_RESULT_COUNT] = {"ok", "mismatch"};

/* A sequence window: bit i of seen is number high - i. */
struct seqwin {
    bool init;
    uint32_t high;
    uint64_t seen;
};

enum seq_verdict { SEQ_NEXT, SEQ_LATE, SEQ_DUP, SEQ_RESET };

struct sub_agent {
    bool used;
    uint32_t id;
    uint32_t uptime_ms; /* of the highest datagram */
    struct seqwin dgram;
    /* What was received in the window (dgram.seen also has the numbers settled lost):
     * bit i is number dgram.high - i; the uptime and a hash of each, by number % WINDOW,
     * tell a duplicate (the same bytes) from another agent instance's datagram. */
    uint64_t known;
    uint32_t up[WINDOW], hash[WINDOW];
};

enum src_kind { SRC_FLOW = 0, SRC_COUNTERS, SRC_DISCARD };

struct source {
    bool used;
    uint32_t sub_agent, type, index;
    enum src_kind kind;
    struct seqwin seq;
    bool have_drops;
    uint32_t drops; /* the agent's cumulative drops field, last seen */
    bool have_rate;
    uint32_t rate; /* flow sources: the sampling rate of the last in-order sample */
    /* flow sources: the sample pool against the sequence numbers (agg.h) */
    bool have_pool;
    uint32_t pool_seq, pool; /* the last in-order sample's sequence number and pool */
    uint64_t pool_n;         /* samples accounted since the last check */
    double pool_got;         /* their pool increase */
    double pool_want;        /* samples x sampling rate */
    double pool_var;         /* samples x rate^2: the variance random sampling allows */
};

/* NAME_AGENT: the agent's own port name record (1005); the core is still asked, every
 * NAME_RETRY_US, for the name the target's other sources give the port. */
enum name_kind { NAME_NONE = 0, NAME_FALLBACK, NAME_AGENT, NAME_CORE, NAME_CONFIG };

struct port {
    bool used;
    uint32_t ifindex;
    enum name_kind name_kind;
    int64_t name_retry_mono;
    char name[NAME_MAX_LEN];
    /* counter sample state */
    bool fresh; /* a counter sample arrived since the last flush */
    bool have_prev;
    bool went_back; /* its counters went back: declared a reset at the next flush */
    bool restarted; /* the agent restarted since the port's last counter sample */
    struct sflow_if_counters g;
    uint32_t prev_pkts[2][3]; /* rx/tx x unicast, multicast, broadcast */
    uint64_t pkts[2];         /* their unwrapped sum */
};

struct cell {
    bool used;
    uint16_t rule;
    uint32_t ifindex;
    uint64_t pkts, bytes, ce;
    /* this interval */
    uint32_t n_depth, n_delay;
    uint64_t seen_depth, seen_delay;
    uint32_t depth_max, delay_max;
    uint32_t *res; /* 2 x RESERVOIR: depths then delays; allocated at the first record */
};

struct drop_cell {
    bool used;
    uint16_t rule;
    uint32_t ifindex, reason;
    uint64_t n;
};

struct fs_sflow_agg {
    struct fs_flow_rule *rules; /* copies; names point into the caller's rules */
    size_t n_rules;
    uint32_t max_ports;
    const struct fs_sflow_ifname *ifnames;
    size_t n_ifnames;

    struct sub_agent subs[MAX_SUB_AGENTS];
    struct source *srcs;
    size_t src_cap, src_len, src_max;
    struct port *ports;
    size_t port_cap, port_len;
    struct cell *cells;
    size_t cell_cap, cell_len, cell_max;
    struct drop_cell *drops;
    size_t drop_cap, drop_len;

    bool restarted;
    uint64_t rng;
    int64_t now_mono;
    struct sub_agent *cur_sub;     /* the datagram being aggregated */
    struct fs_sflow_dgram feed_dg; /* fs_sflow_agg_feed's scratch */
    struct fs_sflow_agg_stats st;
    struct fs_sflow_rate_change rate_change;
};

/* ---------------- small helpers ---------------- */

static uint64_t
mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
}

static size_t
pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

static uint64_t
next_rand(struct fs_sflow_agg *a)
{
    a->rng ^= a->rng << 13;
    a->rng ^= a->rng >> 7;
    a->rng ^= a->rng << 17;
    return a->rng;
}

/* Marks seq in w; newly lost numbers (pushed out of the window unseen) go to *lost. */
static enum seq_verdict
seq_update(struct seqwin *w, uint32_t seq, uint64_t *lost)
{
    int32_t d;
    if (!w->init) {
        /* Nothing before the first number is expected: the window starts full. */
        *w = (struct seqwin){.init = true, .high = seq, .seen = ~UINT64_C(0)};
        return SEQ_NEXT;
    }
    d = (int32_t)(seq - w->high);
    if (d > 0) {
        if (d >= WINDOW) {
            *lost += (uint64_t)(WINDOW - __builtin_popcountll(w->seen)) + (uint64_t)(d - WINDOW);
            w->seen = 1;
        } else {
            uint64_t out = w->seen >> (WINDOW - d);
            *lost += (uint64_t)(d - __builtin_popcountll(out));
            w->seen = (w->seen << d) | 1;
        }
        w->high = seq;
        return SEQ_NEXT;
    }
    if (d > -WINDOW) {
        uint64_t bit = UINT64_C(1) << (unsigned)(-d);
        if (w->seen & bit)
            return SEQ_DUP;
        w->seen |= bit;
        return SEQ_LATE;
    }
    /* What was still missing before the restart is lost. */
    *lost += (uint64_t)(WINDOW - __builtin_popcountll(w->seen));
    *w = (struct seqwin){.init = true, .high = seq, .seen = ~UINT64_C(0)};
    return SEQ_RESET;
}

/* At a flush: what is still missing is lost, and stays lost. */
static uint64_t
seq_settle(struct seqwin *w)
{
    uint64_t lost = 0;
    if (w->init) {
        lost = (uint64_t)(WINDOW - __builtin_popcountll(w->seen));
        w->seen = ~UINT64_C(0);
    }
    return lost;
}

/* ---------------- drop reasons ---------------- */

/* host-sflow's sflow_drop.h, codes 0-15 and 256-372. Two codes are printed there as
 * 33 and 36 among 33x/36x neighbours (dev_hdr, tc_egress): taken as 332 and 366. */
static const char *const reasons_low[] = {
    "net_unreachable",           "host_unreachable",      "protocol_unreachable",
    "port_unreachable",          "frag_needed",           "src_route_failed",
    "dst_net_unknown",           "dst_host_unknown",      "src_host_isolated",
    "dst_net_prohibited",        "dst_host_prohibited",   "dst_net_tos_unreachable",
    "dst_host_tos_unreacheable", "comm_admin_prohibited", "host_precedence_violation",
    "precedence_cutoff"};
static const char *const reasons_high[] = {"unknown",
                                           "ttl_exceeded",
                                           "acl",
                                           "no_buffer_space",
                                           "red",
                                           "traffic_shaping",
                                           "pkt_too_big",
                                           "src_mac_is_multicast",
                                           "vlan_tag_mismatch",
                                           "ingress_vlan_filter",
                                           "ingress_spanning_tree_filter",
                                           "port_list_is_empty",
                                           "port_loopback_filter",
                                           "blackhole_route",
                                           "non_ip",
                                           "uc_dip_over_mc_dmac",
                                           "dip_is_loopback_address",
                                           "sip_is_mc",
                                           "sip_is_loopback_address",
                                           "ip_header_corrupted",
                                           "ipv4_sip_is_limited_bc",
                                           "ipv6_mc_dip_reserved_scope",
                                           "ipv6_mc_dip_interface_local_scope",
                                           "unresolved_neigh",
                                           "mc_reverse_path_forwarding",
                                           "non_routable_packet",
                                           "decap_error",
                                           "overlay_smac_is_mc",
                                           "unknown_l2",
                                           "unknown_l3",
                                           "unknown_l3_exception",
                                           "unknown_buffer",
                                           "unknown_tunnel",
                                           "unknown_l4",
                                           "sip_is_unspecified",
                                           "mlag_port_isolation",
                                           "blackhole_arp_neigh",
                                           "src_mac_is_dmac",
                                           "dmac_is_reserved",
                                           "sip_is_class_e",
                                           "mc_dmac_mismatch",
                                           "sip_is_dip",
                                           "dip_is_local_network",
                                           "dip_is_link_local",
                                           "overlay_smac_is_dmac",
                                           "egress_vlan_filter",
                                           "uc_reverse_path_forwarding",
                                           "split_horizon",
                                           "locked_port",
                                           "dmac_filter",
                                           "blackhole_nexthop",
                                           "vxlan_parsing",
                                           "llc_snap_parsing",
                                           "vlan_parsing",
                                           "pppoe_ppp_parsing",
                                           "mpls_parsing",
                                           "arp_parsing",
                                           "ip_1_parsing",
                                           "ip_n_parsing",
                                           "gre_parsing",
                                           "udp_parsing",
                                           "tcp_parsing",
                                           "ipsec_parsing",
                                           "sctp_parsing",
                                           "dccp_parsing",
                                           "gtp_parsing",
                                           "esp_parsing",
                                           "unknown_parsing",
                                           "pkt_too_small",
                                           "unhandled_proto",
                                           "ipv6disabled",
                                           "invalid_proto",
                                           "ip_noproto",
                                           "skb_csum",
                                           "skb_ucopy_fault",
                                           "dev_ready",
                                           "dev_hdr",
                                           "dup_frag",
                                           "skb_gso_seg",
                                           "reverse_path_forwarding",
                                           "icmp_parsing",
                                           "tcp_md5notfound",
                                           "tcp_md5unexpected",
                                           "tcp_md5failure",
                                           "tcp_flags",
                                           "tcp_zerowindow",
                                           "tcp_old_data",
                                           "tcp_overwindow",
                                           "tcp_ofomerge",
                                           "tcp_rfc7323_paws",
                                           "tcp_invalid_sequence",
                                           "tcp_reset",
                                           "tcp_invalid_syn",
                                           "tcp_close",
                                           "tcp_fastopen",
                                           "tcp_old_ack",
                                           "tcp_too_old_ack",
                                           "tcp_ack_unsent_data",
                                           "tcp_ofo_queue_prune",
                                           "tcp_ofo_drop",
                                           "tcp_minttl",
                                           "ipv6_bad_exthdr",
                                           "ipv6_ndisc_frag",
                                           "ipv6_ndisc_hop_limit",
                                           "ipv6_ndisc_bad_code",
                                           "ipv6_ndisc_bad_options",
                                           "ipv6_ndisc_ns_otherhost",
                                           "tap_filter",
                                           "tap_txfilter",
                                           "tc_ingress",
                                           "tc_egress",
                                           "xdp",
                                           "cpu_backlog",
                                           "bpf_cgroup_egress",
                                           "xfrm_policy",
                                           "socket_filter",
                                           "bgp_flowspec"};

const char *
fs_sflow_drop_reason(uint32_t code, char *buf, size_t len)
{
    const size_t n_low = sizeof reasons_low / sizeof reasons_low[0];
    const size_t n_high = sizeof reasons_high / sizeof reasons_high[0];
    if (code < n_low)
        return reasons_low[code];
    if (code >= 256 && code - 256 < n_high)
        return reasons_high[code - 256];
    snprintf(buf, len, "code_%" PRIu32, code);
    return buf;
}

/* ---------------- matching ---------------- */

int
fs_sflow_packet_tc(const struct sflow_flow_records *r)
{
    int tc = -1;
    if (r->has_egress_queue)
        tc = (int)(r->egress_queue > 255 ? 255 : r->egress_queue);
    else if (r->raw.present && r->raw.packet.ip_version != 0)
        tc = r->raw.packet.dscp >> 3;
    return tc;
}

static bool
port_in(uint16_t lo, uint16_t hi, bool has, uint16_t v)
{
    return (lo == 0 && hi == 0) || (has && v >= lo && v <= hi);
}

bool
fs_sflow_rule_match(const struct fs_flow_rule *r, const struct sflow_packet *p, int tc)
{
    bool ok = p->ip_version != 0;
    if (ok && r->protocol == FS_PROTO_TCP)
        ok = p->ip_protocol == 6;
    else if (ok && r->protocol == FS_PROTO_UDP)
        ok = p->ip_protocol == 17;
    ok = ok && port_in(r->dst_lo, r->dst_hi, p->has_ports, p->dst_port) &&
         port_in(r->src_lo, r->src_hi, p->has_ports, p->src_port);
    if (ok && r->ecn_ce)
        ok = p->ecn == 3;
    if (ok && r->tc >= 0)
        ok = tc == r->tc;
    return ok;
}

/* ---------------- tables ---------------- */

static struct port *
port_get(struct fs_sflow_agg *a, uint32_t ifindex)
{
    size_t mask = a->port_cap - 1, i = mix(ifindex) & mask;
    while (a->ports[i].used) {
        if (a->ports[i].ifindex == ifindex)
            return &a->ports[i];
        i = (i + 1) & mask;
    }
    if (a->port_len >= a->max_ports)
        return NULL;
    a->port_len++;
    memset(&a->ports[i], 0, sizeof a->ports[i]);
    a->ports[i].used = true;
    a->ports[i].ifindex = ifindex;
    return &a->ports[i];
}

static struct cell *
cell_get(struct fs_sflow_agg *a, uint16_t rule, uint32_t ifindex)
{
    size_t mask = a->cell_cap - 1, i = mix((uint64_t)rule << 32 | ifindex) & mask;
    while (a->cells[i].used) {
        if (a->cells[i].rule == rule && a->cells[i].ifindex == ifindex)
            return &a->cells[i];
        i = (i + 1) & mask;
    }
    if (a->cell_len >= a->cell_max || !port_get(a, ifindex))
        return NULL;
    a->cell_len++;
    memset(&a->cells[i], 0, sizeof a->cells[i]);
    a->cells[i].used = true;
    a->cells[i].rule = rule;
    a->cells[i].ifindex = ifindex;
    return &a->cells[i];
}

static struct drop_cell *
drop_get(struct fs_sflow_agg *a, uint16_t rule, uint32_t ifindex, uint32_t reason)
{
    uint64_t key = (uint64_t)rule << 48 ^ (uint64_t)reason << 32 ^ ifindex;
    size_t mask = a->drop_cap - 1, i = mix(key) & mask;
    while (a->drops[i].used) {
        struct drop_cell *d = &a->drops[i];
        if (d->rule == rule && d->ifindex == ifindex && d->reason == reason)
            return d;
        i = (i + 1) & mask;
    }
    if (a->drop_len >= a->cell_max || !port_get(a, ifindex))
        return NULL;
    a->drop_len++;
    a->drops[i] =
        (struct drop_cell){.used = true, .rule = rule, .ifindex = ifindex, .reason = reason};
    return &a->drops[i];
}

static struct source *
source_get(struct fs_sflow_agg *a, uint32_t sub, enum src_kind kind, uint32_t type, uint32_t index)
{
    uint64_t key =
        (uint64_t)sub * 0x9e3779b97f4a7c15ULL ^ (uint64_t)kind << 56 ^ (uint64_t)type << 32 ^ index;
    size_t mask = a->src_cap - 1, i = mix(key) & mask;
    while (a->srcs[i].used) {
        struct source *s = &a->srcs[i];
        if (s->sub_agent == sub && s->kind == kind && s->type == type && s->index == index)
            return s;
        i = (i + 1) & mask;
    }
    if (a->src_len >= a->src_max)
        return NULL;
    a->src_len++;
    a->srcs[i] =
        (struct source){.used = true, .sub_agent = sub, .type = type, .index = index, .kind = kind};
    return &a->srcs[i];
}

static struct sub_agent *
sub_get(struct fs_sflow_agg *a, uint32_t id)
{
    struct sub_agent *free_slot = NULL;
    for (size_t i = 0; i < MAX_SUB_AGENTS; i++) {
        if (a->subs[i].used && a->subs[i].id == id)
            return &a->subs[i];
        if (!a->subs[i].used && !free_slot)
            free_slot = &a->subs[i];
    }
    if (free_slot)
        *free_slot = (struct sub_agent){.used = true, .id = id};
    return free_slot;
}

/* ---------------- construction ---------------- */

struct fs_sflow_agg *
fs_sflow_agg_new(const struct fs_sflow_agg_opts *o, char *errbuf, size_t errlen)
{
    struct fs_sflow_agg *a = NULL;
    size_t rules = o->n_rules ? o->n_rules : 1;
    if (o->max_ports == 0 || o->max_ports > 4096 || o->n_rules > UINT16_MAX) {
        snprintf(errbuf, errlen, "sflow: max_ports must be 1..4096 and rules at most 65535");
        return NULL;
    }
    a = calloc(1, sizeof *a);
    if (!a)
        goto oom;
    a->max_ports = o->max_ports;
    a->ifnames = o->ifnames;
    a->n_ifnames = o->n_ifnames;
    a->n_rules = o->n_rules;
    a->rng = 0x2545f4914f6cdd1dULL;
    a->rules = calloc(rules, sizeof *a->rules);
    a->port_cap = pow2_at_least((size_t)o->max_ports * 2);
    a->ports = calloc(a->port_cap, sizeof *a->ports);
    a->src_max = (size_t)o->max_ports * 4;
    a->src_cap = pow2_at_least(a->src_max * 2);
    a->srcs = calloc(a->src_cap, sizeof *a->srcs);
    a->cell_max = rules * o->max_ports;
    a->cell_cap = pow2_at_least(a->cell_max * 2);
    a->cells = calloc(a->cell_cap, sizeof *a->cells);
    a->drop_cap = a->cell_cap;
    a->drops = calloc(a->drop_cap, sizeof *a->drops);
    if (!a->rules || !a->ports || !a->srcs || !a->cells || !a->drops)
        goto oom;
    for (size_t i = 0; i < o->n_rules; i++)
        a->rules[i] = o->rules[i];
    return a;
oom:
    fs_sflow_agg_free(a);
    snprintf(errbuf, errlen, "out of memory");
    return NULL;
}

void
fs_sflow_agg_free(struct fs_sflow_agg *a)
{
    if (!a)
        return;
    for (size_t i = 0; a->cells && i < a->cell_cap; i++)
        free(a->cells[i].res);
    free(a->cells);
    free(a->drops);
    fs_sflow_dgram_free(&a->feed_dg);
    free(a->srcs);
    free(a->ports);
    free(a->rules);
    free(a);
}

/* ---------------- datagrams ---------------- */

static enum fs_sflow_decode_reason
classify(const char *msg)
{
    enum fs_sflow_decode_reason r = FS_SFLOW_DEC_MALFORMED;
    if (strstr(msg, "version"))
        r = FS_SFLOW_DEC_VERSION;
    else if (strstr(msg, "runs past the datagram") || strstr(msg, "ends ") ||
             strstr(msg, "shorter than"))
        r = FS_SFLOW_DEC_TRUNCATED; /* the datagram (or a record) ends before its content */
    else if (strstr(msg, "runs past") || strstr(msg, "larger than"))
        r = FS_SFLOW_DEC_LENGTH; /* a nested length that lies about its container */
    return r;
}

void
fs_sflow_dgram_free(struct fs_sflow_dgram *dg)
{
    free(dg->samples);
    *dg = (struct fs_sflow_dgram){0};
}

/* The decoder's callback: a copy of each sample, committed only once the whole datagram
 * decoded (fs_sflow_agg_datagram). */
static void
keep_sample(const struct sflow_datagram_header *hdr, const struct sflow_sample *s, void *arg)
{
    struct fs_sflow_dgram *dg = arg;
    (void)hdr;
    if (dg->n < dg->cap)
        dg->samples[dg->n++] = *s;
    else
        dg->overflow = true;
}

int
fs_sflow_check(struct fs_sflow_dgram *dg, const uint8_t *buf, size_t len, bool *hdr_ok,
               enum fs_sflow_decode_reason *reason, char *err, size_t errlen)
{
    char local[256];
    /* A known sample takes at least 20 bytes (tag, length, sequence, source id and record
     * count of a counter sample): room for len / 20 is room for all of them. */
    size_t need = len <= SFLOW_DATAGRAM_MAX ? len / 20 + 1 : 0;
    int rc;
    if (!err || errlen == 0) {
        err = local;
        errlen = sizeof local;
    }
    dg->n = 0;
    dg->overflow = false;
    if (need > dg->cap) {
        struct sflow_sample *p = realloc(dg->samples, need * sizeof *p);
        if (p) {
            dg->samples = p;
            dg->cap = need;
        }
    }
    rc = sflow_decode_datagram(buf, len, keep_sample, dg, &dg->hdr, NULL, err, errlen);
    if (rc == 0 && dg->overflow) {
        snprintf(err, errlen, "out of memory for the datagram's %u samples", dg->hdr.n_samples);
        rc = -1;
    }
    /* The agent is known once the header's fixed part was read whole. */
    *hdr_ok = dg->hdr.version == 5 && dg->hdr.agent.family != 0 &&
              len >= (dg->hdr.agent.family == 4 ? 28u : 40u);
    if (rc != 0) {
        *reason = classify(err);
        dg->n = 0; /* nothing of a refused datagram can be committed */
    }
    return rc;
}

void
fs_sflow_agg_decode_error(struct fs_sflow_agg *a, enum fs_sflow_decode_reason reason)
{
    if ((unsigned)reason < FS_SFLOW_DEC_REASON_COUNT)
        a->st.decode_errors[reason]++;
}

static enum seq_verdict
sample_seq(struct fs_sflow_agg *a, enum src_kind kind, uint32_t type, uint32_t index, uint32_t seq,
           struct source **out)
{
    uint64_t lost = 0;
    struct source *s = source_get(a, a->cur_sub->id, kind, type, index);
    *out = s;
    if (!s) {
        a->st.lost_samples[FS_SFLOW_LOST_OVER_LIMIT]++;
        return SEQ_DUP;
    }
    enum seq_verdict v = seq_update(&s->seq, seq, &lost);
    if (v == SEQ_RESET)
        a->st.resets[FS_SFLOW_RESET_SAMPLE]++;
    a->st.lost_samples[kind == SRC_FLOW       ? FS_SFLOW_LOST_FLOW
                       : kind == SRC_COUNTERS ? FS_SFLOW_LOST_COUNTERS
                                              : FS_SFLOW_LOST_DISCARD] += lost;
    return v;
}

/* The sample pool of an in-order flow sample against the previous one's: the pool grows
   by the packets the source saw, about (sequence increase) x sampling rate. A pool that
   grew by fewer packets than samples were taken is wrong at once; otherwise the sums go
   to the source's check at the next flush (pool_verdict). */
static void
pool_update(struct fs_sflow_agg *a, struct source *s, enum seq_verdict v,
            const struct sflow_flow_sample *f)
{
    if (!s || v == SEQ_LATE || v == SEQ_DUP)
        return;
    if (v == SEQ_NEXT && s->have_pool) {
        uint32_t dseq = f->sequence - s->pool_seq, dpool = f->sample_pool - s->pool;
        if (dpool < dseq) {
            a->st.pool_checks[FS_SFLOW_POOL_MISMATCH]++;
            s->pool_n = 0;
            s->pool_got = s->pool_want = s->pool_var = 0;
        } else {
            double r = (double)f->sampling_rate;
            s->pool_n += dseq;
            s->pool_got += (double)dpool;
            s->pool_want += (double)dseq * r;
            s->pool_var += (double)dseq * r * r;
        }
    } else { /* the first sample, or the sequence restarted: start over */
        s->pool_n = 0;
        s->pool_got = s->pool_want = s->pool_var = 0;
    }
    s->have_pool = true;
    s->pool_seq = f->sequence;
    s->pool = f->sample_pool;
}

/* At a flush, a source with FS_SFLOW_POOL_MIN_SAMPLES accounted: its pool increase must
   be its samples x rate within FS_SFLOW_POOL_SIGMAS standard deviations of random
   sampling (each sample's skip has a standard deviation of about the rate), plus one
   rate for sampling in fixed blocks. */
static void
pool_verdict(struct fs_sflow_agg *a, struct source *s)
{
    if (s->kind != SRC_FLOW || s->pool_n < FS_SFLOW_POOL_MIN_SAMPLES)
        return;
    double tol = FS_SFLOW_POOL_SIGMAS * sqrt(s->pool_var) + s->pool_want / (double)s->pool_n;
    a->st.pool_checks[fabs(s->pool_got - s->pool_want) > tol ? FS_SFLOW_POOL_MISMATCH
                                                             : FS_SFLOW_POOL_OK]++;
    s->pool_n = 0;
    s->pool_got = s->pool_want = s->pool_var = 0;
}

/* The agent's cumulative drop count of a source: its increase is lost samples. */
static void
source_drops(struct fs_sflow_agg *a, struct source *s, uint32_t drops, enum fs_sflow_lost_kind k)
{
    if (!s)
        return;
    if (s->have_drops && drops >= s->drops)
        a->st.lost_samples[k] += drops - s->drops;
    s->have_drops = true;
    s->drops = drops;
}

static void
interval_value(struct fs_sflow_agg *a, uint32_t *res, uint32_t *n, uint64_t *seen, uint32_t *max,
               uint32_t v)
{
    if (*seen == 0 || v > *max)
        *max = v;
    /* Algorithm R: a uniform sample of the interval's values, RESERVOIR at most. */
    if (*seen < RESERVOIR) {
        res[(*n)++] = v;
    } else {
        uint64_t j = next_rand(a) % (*seen + 1);
        if (j < RESERVOIR)
            res[j] = v;
    }
    (*seen)++;
}

static void
on_flow(struct fs_sflow_agg *a, const struct sflow_flow_sample *f)
{
    const struct sflow_flow_records *r = &f->records;
    struct source *src;
    uint32_t port;
    bool egress;
    int tc;

    a->st.flow_samples++;
    enum seq_verdict v =
        sample_seq(a, SRC_FLOW, f->source_id_type, f->source_id_index, f->sequence, &src);
    pool_update(a, src, v, f);
    if (src && (v == SEQ_NEXT || v == SEQ_RESET)) {
        if (src->have_rate && src->rate != f->sampling_rate) {
            a->st.rate_changes++;
            a->rate_change =
                (struct fs_sflow_rate_change){a->st.rate_changes, f->source_id_type,
                                              f->source_id_index, src->rate, f->sampling_rate};
        }
        src->have_rate = true;
        src->rate = f->sampling_rate;
    }
    source_drops(a, src, f->drops, FS_SFLOW_LOST_AGENT_DROPPED);
    if (!r->raw.present)
        return;
    egress = r->has_queue_depth || r->has_transit_delay || r->has_egress_queue ||
             (f->source_id_type == 0 && f->output.format == 0 &&
              f->output.value == f->source_id_index && f->output.value != 0);
    if (egress && f->output.format == 0)
        port = f->output.value;
    else if (f->source_id_type == 0)
        port = f->source_id_index;
    else
        port = f->input.format == 0 ? f->input.value : 0;
    tc = fs_sflow_packet_tc(r);
    for (size_t i = 0; i < a->n_rules; i++) {
        struct cell *c;
        if (!fs_sflow_rule_match(&a->rules[i], &r->raw.packet, tc))
            continue;
        a->st.matched++;
        c = cell_get(a, (uint16_t)i, port);
        if (!c) {
            a->st.lost_samples[FS_SFLOW_LOST_OVER_LIMIT]++;
            continue;
        }
        c->pkts += f->sampling_rate;
        c->bytes += (uint64_t)f->sampling_rate * r->raw.frame_length;
        if (r->raw.packet.ecn == 3)
            c->ce += f->sampling_rate;
        if ((r->has_queue_depth || r->has_transit_delay) && !c->res)
            c->res = malloc(2 * RESERVOIR * sizeof *c->res);
        if (c->res && r->has_queue_depth)
            interval_value(a, c->res, &c->n_depth, &c->seen_depth, &c->depth_max,
                           r->queue_depth_bytes);
        if (c->res && r->has_transit_delay)
            interval_value(a, c->res + RESERVOIR, &c->n_delay, &c->seen_delay, &c->delay_max,
                           r->transit_delay_ns);
    }
}

static void
on_discard(struct fs_sflow_agg *a, const struct sflow_discard_sample *x)
{
    struct source *src;
    uint32_t port = x->output ? x->output : x->input;
    int tc;
    a->st.discard_samples++;
    sample_seq(a, SRC_DISCARD, x->source_id_type, x->source_id_index, x->sequence, &src);
    source_drops(a, src, x->drops, FS_SFLOW_LOST_DISCARD_RATE_LIMITED);
    if (!x->records.raw.present)
        return;
    tc = fs_sflow_packet_tc(&x->records);
    for (size_t i = 0; i < a->n_rules; i++) {
        struct drop_cell *d;
        if (!fs_sflow_rule_match(&a->rules[i], &x->records.raw.packet, tc))
            continue;
        a->st.matched++;
        d = drop_get(a, (uint16_t)i, port, x->reason);
        if (d)
            d->n++;
        else
            a->st.lost_samples[FS_SFLOW_LOST_OVER_LIMIT]++;
    }
}

static uint32_t
wrap_delta(uint32_t now, uint32_t prev)
{
    return now - prev; /* modulo 2^32: one wrap between two samples at most */
}

/* A 64-bit octet counter is known unless 0 or all ones (sFlow's "unknown"). */
static bool
octets_known(uint64_t v)
{
    return v != 0 && v != UINT64_MAX;
}

/* True when a port's counters went back from prev to g: an octet counter fell (64 bits
 * never wrap), or the packets grew by more than the octets did, plus PKT_SLACK (every
 * packet is at least one octet, so 32-bit packet counters that wrapped grew the octets
 * by as much: packets ahead of the octets went back instead). Per direction, where
 * both octet values are known. */
static bool
counters_went_back(const struct sflow_if_counters *prev, const struct sflow_if_counters *g,
                   const uint32_t prev_pkts[2][3], const uint32_t now[2][3])
{
    uint64_t o0[2] = {prev->in_octets, prev->out_octets}, o1[2] = {g->in_octets, g->out_octets};
    for (int d = 0; d < 2; d++) {
        uint64_t pk = 0;
        if (!octets_known(o0[d]) || !octets_known(o1[d]))
            continue;
        if (o1[d] < o0[d])
            return true;
        for (int j = 0; j < 3; j++)
            pk += wrap_delta(now[d][j], prev_pkts[d][j]);
        if (pk > o1[d] - o0[d] + PKT_SLACK)
            return true;
    }
    return false;
}

/* The packets a direction's counters added from prev to now, its octets from o0 to o1
 * (0 or all ones: unknown), in the port's first sample after an agent restart. Its
 * counters either went on (a switch's agent restarted over the ASIC's counters) or
 * started over with the agent (hsflowd counts from its own start): when the octets fell
 * they count from zero and what the packet counters hold now is new (sFlow's unknown
 * 2^32-1 left out), else they went on. This is how the store reads the raw octets after
 * the restart declared (rebased when lower, else continuing), so packets and octets
 * count the same frames. False (only a base) when the new octets are unknown or the
 * packets grew by more than the octets, plus PKT_SLACK. */
static bool
after_restart(uint64_t o0, uint64_t o1, const uint32_t prev[3], const uint32_t now[3],
              uint64_t *added)
{
    bool zero = octets_known(o0) && o1 < o0;
    uint64_t pk = 0;
    if (!octets_known(o1))
        return false;
    for (int j = 0; j < 3; j++)
        pk += zero ? (now[j] == UINT32_MAX ? 0 : now[j]) : wrap_delta(now[j], prev[j]);
    if (pk > (zero || !octets_known(o0) ? o1 : o1 - o0) + PKT_SLACK)
        return false;
    *added = pk;
    return true;
}

static void
on_counters(struct fs_sflow_agg *a, const struct sflow_counter_sample *k)
{
    struct source *src;
    struct port *p;
    a->st.counter_samples++;
    enum seq_verdict v =
        sample_seq(a, SRC_COUNTERS, k->source_id_type, k->source_id_index, k->sequence, &src);
    /* A late (or repeated) sample is older than the port's values: read as the next one,
     * its counters would go back. */
    if (!k->has_generic || v == SEQ_LATE || v == SEQ_DUP)
        return;
    p = port_get(a, k->generic.if_index);
    if (!p) {
        a->st.lost_samples[FS_SFLOW_LOST_OVER_LIMIT]++;
        return;
    }
    const struct sflow_if_counters *g = &k->generic;
    uint32_t now[2][3] = {{g->in_ucast, g->in_multicast, g->in_broadcast},
                          {g->out_ucast, g->out_multicast, g->out_broadcast}};
    /* 32-bit packet counters summed: unwrapped one by one, so the sum stays exact. After
     * an agent restart the first sample adds what after_restart() finds; a sample whose
     * counters went back otherwise (a restart we did not see) only sets the base (that
     * interval is lost): read as a wrap it would add about 2^32. */
    if (p->have_prev && p->restarted) {
        /* The agent's restart declared every counter's reset already. */
        uint64_t o0[2] = {p->g.in_octets, p->g.out_octets}, o1[2] = {g->in_octets, g->out_octets};
        for (int d = 0; d < 2; d++) {
            uint64_t added;
            if (after_restart(o0[d], o1[d], p->prev_pkts[d], now[d], &added))
                p->pkts[d] += added;
        }
    } else {
        if (p->have_prev && counters_went_back(&p->g, g, p->prev_pkts, now)) {
            a->st.resets[FS_SFLOW_RESET_COUNTERS]++;
            p->went_back = true;
            p->have_prev = false;
        }
        for (int d = 0; d < 2; d++)
            for (int j = 0; j < 3 && p->have_prev; j++)
                p->pkts[d] += wrap_delta(now[d][j], p->prev_pkts[d][j]);
    }
    p->restarted = false;
    memcpy(p->prev_pkts, now, sizeof now);
    p->have_prev = true;
    p->g = *g;
    p->fresh = true;
    if (k->port_name_len && p->name_kind < NAME_CORE &&
        (p->name_kind != NAME_AGENT || strlen(p->name) != k->port_name_len ||
         memcmp(p->name, k->port_name, k->port_name_len) != 0)) {
        /* port_name() asks the configuration and the core first at the next flush */
        memcpy(p->name, k->port_name, k->port_name_len);
        p->name[k->port_name_len] = '\0';
        p->name_kind = NAME_AGENT;
        p->name_retry_mono = a->now_mono;
    }
}

static void
on_sample(const struct sflow_datagram_header *hdr, const struct sflow_sample *s, void *arg)
{
    struct fs_sflow_agg *a = arg;
    (void)hdr;
    switch (s->kind) {
    case SFLOW_KIND_FLOW:
        on_flow(a, &s->u.flow);
        break;
    case SFLOW_KIND_COUNTERS:
        on_counters(a, &s->u.counters);
        break;
    case SFLOW_KIND_DISCARD:
        on_discard(a, &s->u.discard);
        break;
    }
}

static void
agent_restart(struct fs_sflow_agg *a, struct sub_agent *sub)
{
    a->st.resets[FS_SFLOW_RESET_AGENT_RESTART]++;
    a->restarted = true;
    a->st.lost_datagrams += seq_settle(&sub->dgram);
    for (size_t i = 0; i < a->src_cap; i++)
        if (a->srcs[i].used && a->srcs[i].sub_agent == sub->id) {
            struct source *s = &a->srcs[i];
            a->st.lost_samples[s->kind == SRC_FLOW       ? FS_SFLOW_LOST_FLOW
                               : s->kind == SRC_COUNTERS ? FS_SFLOW_LOST_COUNTERS
                                                         : FS_SFLOW_LOST_DISCARD] +=
                seq_settle(&s->seq);
            a->srcs[i].seq.init = false;
            a->srcs[i].have_drops = false;
        }
    /* The ports' counters may be the device's, not the agent's: their next samples
     * tell (after_restart). */
    for (size_t i = 0; i < a->port_cap; i++)
        a->ports[i].restarted = true;
}

/* A hash of the datagram's bytes: a duplicate has the same; another datagram with the
 * same sequence number and uptime (another agent instance's) almost surely not. Four
 * independent lanes over 32-byte blocks: one multiply chain over the whole datagram
 * was the aggregate's largest cost (each step waits for the previous multiply). */
static uint32_t
dgram_hash(const uint8_t *b, size_t n)
{
    uint64_t h[4] = {(uint64_t)n * 0x9e3779b97f4a7c15ULL, 0x2545f4914f6cdd1dULL,
                     0x94d049bb133111ebULL, 0xbf58476d1ce4e5b9ULL};
    uint64_t w;
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            memcpy(&w, b + i + 8 * k, 8);
            h[k] = (h[k] ^ w) * 0xff51afd7ed558ccdULL;
            h[k] ^= h[k] >> 29;
        }
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, b + i, 8);
        h[0] = (h[0] ^ w) * 0xff51afd7ed558ccdULL;
        h[0] ^= h[0] >> 29;
    }
    for (; i < n; i++)
        h[1] = (h[1] ^ b[i]) * 0x100000001b3ULL;
    return (uint32_t)mix(h[0] ^ mix(h[1] ^ mix(h[2] ^ mix(h[3]))));
}

enum dgram_verdict { DGRAM_OK, DGRAM_DUP, DGRAM_RESTART };

/*
 * Is a datagram (sequence seq, uptime up) of the agent instance seen so far? Within one
 * instance sequence and uptime grow together. A restart starts both near 0 again, and
 * a quick one (hsflowd's uptime is its process's: restarted after 3 s it sends sequence
 * 1 at uptime ~1 s) looks, by numbers alone, like a datagram slightly late. So:
 *   - ahead of the highest: a restart when its uptime went back (not a 49.7-day wrap);
 *   - 64 or more behind: a restart when its uptime went back, else (seq_update) the
 *     datagram sequence alone restarted;
 *   - a number received before: the same bytes are a duplicate, others a restart;
 *   - else it would be late, which it can only be when its uptime is below the highest's
 *     by no more than a network can delay it (REORDER_MAX_MS) and between the uptimes
 *     of the nearest numbers received below and above it; if not, a restart.
 * DGRAM_OK leaves the rest to seq_update (next, late, or lost at a flush and dropped).
 */
static enum dgram_verdict
dgram_classify(const struct sub_agent *sub, uint32_t seq, uint32_t up, uint32_t hash)
{
    int32_t d = (int32_t)(seq - sub->dgram.high);
    int32_t back = (int32_t)(sub->uptime_ms - up); /* > 0: behind the highest */
    bool wrap = sub->uptime_ms > 0xF0000000u && up < 0x10000000u;
    if (!sub->dgram.init)
        return DGRAM_OK;
    if (d > 0 || d <= -WINDOW)
        return up < sub->uptime_ms && !wrap ? DGRAM_RESTART : DGRAM_OK;
    unsigned i = (unsigned)-d;
    if (sub->known >> i & 1)
        return sub->up[seq % WINDOW] == up && sub->hash[seq % WINDOW] == hash ? DGRAM_DUP
                                                                              : DGRAM_RESTART;
    if (back < 0 || (uint32_t)back > REORDER_MAX_MS)
        return DGRAM_RESTART;
    for (unsigned j = i + 1; j < WINDOW; j++) /* the nearest received below */
        if (sub->known >> j & 1) {
            if ((int32_t)(up - sub->up[(sub->dgram.high - j) % WINDOW]) < 0)
                return DGRAM_RESTART;
            break;
        }
    for (unsigned j = i; j-- > 0;) /* and above (the highest at least) */
        if (sub->known >> j & 1) {
            if ((int32_t)(sub->up[(sub->dgram.high - j) % WINDOW] - up) < 0)
                return DGRAM_RESTART;
            break;
        }
    return DGRAM_OK;
}

int
fs_sflow_agg_datagram(struct fs_sflow_agg *a, const struct fs_sflow_dgram *dg, const uint8_t *buf,
                      size_t len, int64_t now_mono_us)
{
    const struct sflow_datagram_header *hdr = &dg->hdr;
    struct sub_agent *sub = sub_get(a, hdr->sub_agent_id);
    uint64_t lost = 0;
    enum seq_verdict v;
    if (!sub) {
        a->st.lost_samples[FS_SFLOW_LOST_OVER_LIMIT] += hdr->n_samples;
        return 0;
    }
    uint32_t hash = dgram_hash(buf, len);
    int32_t d = (int32_t)(hdr->sequence - sub->dgram.high);
    enum dgram_verdict dv = dgram_classify(sub, hdr->sequence, hdr->uptime_ms, hash);
    if (dv == DGRAM_DUP) {
        a->st.duplicates++;
        return 1;
    }
    if (dv == DGRAM_RESTART) {
        agent_restart(a, sub);
        sub->dgram.init = false;
    }
    bool was_init = sub->dgram.init;
    v = seq_update(&sub->dgram, hdr->sequence, &lost);
    a->st.lost_datagrams += lost;
    if (v == SEQ_DUP) { /* a number declared lost at a flush: it stays lost */
        a->st.duplicates++;
        return 1;
    }
    /* The received mask follows the window (seq_update moved it). */
    if (!was_init || v == SEQ_RESET)
        sub->known = 1;
    else if (v == SEQ_NEXT)
        sub->known = d >= WINDOW ? 1 : (sub->known << d) | 1;
    else
        sub->known |= UINT64_C(1) << (unsigned)(-d);
    sub->up[hdr->sequence % WINDOW] = hdr->uptime_ms;
    sub->hash[hdr->sequence % WINDOW] = hash;
    if (v == SEQ_RESET)
        a->st.resets[FS_SFLOW_RESET_DATAGRAM]++;
    if (v != SEQ_LATE)
        sub->uptime_ms = hdr->uptime_ms;
    a->st.datagrams++;
    a->now_mono = now_mono_us;
    a->cur_sub = sub;
    /* Decoded whole before (fs_sflow_check): committed as a whole. */
    for (size_t i = 0; i < dg->n; i++)
        on_sample(hdr, &dg->samples[i], a);
    a->cur_sub = NULL;
    return 0;
}

bool
fs_sflow_agg_restarts(const struct fs_sflow_agg *a, const struct fs_sflow_dgram *dg,
                      const uint8_t *buf, size_t len)
{
    const struct sflow_datagram_header *h = &dg->hdr;
    for (size_t i = 0; i < MAX_SUB_AGENTS; i++)
        if (a->subs[i].used && a->subs[i].id == h->sub_agent_id) {
            const struct sub_agent *sub = &a->subs[i];
            int32_t d = (int32_t)(h->sequence - sub->dgram.high);
            /* The bytes matter only for a number received before (hashed only then). */
            bool known =
                sub->dgram.init && d <= 0 && d > -WINDOW && (sub->known >> (unsigned)-d & 1);
            uint32_t hash = known ? dgram_hash(buf, len) : 0;
            return dgram_classify(sub, h->sequence, h->uptime_ms, hash) == DGRAM_RESTART;
        }
    return false;
}

int
fs_sflow_agg_feed(struct fs_sflow_agg *a, const uint8_t *buf, size_t len, int64_t now_mono_us)
{
    enum fs_sflow_decode_reason reason;
    bool hdr_ok;
    if (fs_sflow_check(&a->feed_dg, buf, len, &hdr_ok, &reason, NULL, 0) != 0) {
        fs_sflow_agg_decode_error(a, reason);
        return -1;
    }
    return fs_sflow_agg_datagram(a, &a->feed_dg, buf, len, now_mono_us);
}

bool
fs_sflow_agg_take_restart(struct fs_sflow_agg *a)
{
    bool r = a->restarted;
    a->restarted = false;
    return r;
}

/* The tables' sizes for these options (what fs_sflow_agg_new allocates). */
static size_t
table_bytes(size_t n_rules, uint32_t max_ports)
{
    size_t rules = n_rules ? n_rules : 1, cells = rules * max_ports;
    return sizeof(struct fs_sflow_agg) + rules * sizeof(struct fs_flow_rule) +
           pow2_at_least((size_t)max_ports * 2) * sizeof(struct port) +
           pow2_at_least((size_t)max_ports * 4 * 2) * sizeof(struct source) +
           pow2_at_least(cells * 2) * (sizeof(struct cell) + sizeof(struct drop_cell));
}

size_t
fs_sflow_agg_bound(size_t n_rules, uint32_t max_ports)
{
    size_t rules = n_rules ? n_rules : 1;
    return table_bytes(n_rules, max_ports) + rules * max_ports * 2 * RESERVOIR * sizeof(uint32_t);
}

size_t
fs_sflow_agg_bytes(const struct fs_sflow_agg *a)
{
    size_t n = table_bytes(a->n_rules, a->max_ports);
    for (size_t i = 0; i < a->cell_cap; i++)
        if (a->cells[i].res)
            n += 2 * RESERVOIR * sizeof(uint32_t);
    return n;
}

const struct fs_sflow_agg_stats *
fs_sflow_agg_get_stats(const struct fs_sflow_agg *a)
{
    return &a->st;
}

const struct fs_sflow_rate_change *
fs_sflow_agg_last_rate_change(const struct fs_sflow_agg *a)
{
    return &a->rate_change;
}

/* ---------------- flush ---------------- */

static int
cmp_u32(const void *pa, const void *pb)
{
    uint32_t x = *(const uint32_t *)pa, y = *(const uint32_t *)pb;
    return x < y ? -1 : x > y;
}

/* Nearest-rank 90th percentile of n values (sorted in place). */
static uint32_t
p90(uint32_t *v, uint32_t n)
{
    uint32_t rank = (9 * n + 9) / 10; /* ceil(0.9 n), 1-based */
    qsort(v, n, sizeof *v, cmp_u32);
    return v[rank ? rank - 1 : 0];
}

static const struct fs_sflow_ifname *
config_name(const struct fs_sflow_agg *a, uint32_t ifindex)
{
    size_t lo = 0, hi = a->n_ifnames;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (a->ifnames[mid].ifindex < ifindex)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < a->n_ifnames && a->ifnames[lo].ifindex == ifindex ? &a->ifnames[lo] : NULL;
}

/* The port's interface label: the configured map, else what another source of the
 * target calls it, else the agent's port name record, else ifIndex<N> (the core asked
 * again every few seconds until it knows the port). */
static const char *
port_name(struct fs_sflow_agg *a, const struct fs_sflow_emit *e, void *arg, uint32_t ifindex)
{
    struct port *p = port_get(a, ifindex);
    char core[NAME_MAX_LEN];
    if (!p)
        return "unknown";
    if (p->name_kind == NAME_NONE ||
        ((p->name_kind == NAME_FALLBACK || p->name_kind == NAME_AGENT) &&
         a->now_mono >= p->name_retry_mono)) {
        const struct fs_sflow_ifname *c = config_name(a, ifindex);
        if (c) {
            snprintf(p->name, sizeof p->name, "%s", c->name);
            p->name_kind = NAME_CONFIG;
        } else if (ifindex == 0) {
            snprintf(p->name, sizeof p->name, "unknown");
            p->name_kind = NAME_CONFIG;
        } else if (e->ifname(arg, ifindex, core, sizeof core)) {
            memcpy(p->name, core, sizeof core);
            p->name_kind = NAME_CORE;
        } else {
            if (p->name_kind != NAME_AGENT) {
                snprintf(p->name, sizeof p->name, "ifIndex%" PRIu32, ifindex);
                p->name_kind = NAME_FALLBACK;
            }
            p->name_retry_mono = a->now_mono + NAME_RETRY_US;
        }
    }
    return p->name;
}

static void
flush_ports(struct fs_sflow_agg *a, const struct fs_sflow_emit *e, void *arg)
{
    static const char *const dir[2] = {"rx", "tx"};
    for (size_t i = 0; i < a->port_cap; i++) {
        struct port *p = &a->ports[i];
        if (!p->used || !p->fresh)
            continue;
        const char *name = port_name(a, e, arg, p->ifindex);
        const struct sflow_if_counters *g = &p->g;
        struct fs_label l[2] = {{"interface", name}, {"direction", "rx"}};
        uint64_t oct[2] = {g->in_octets, g->out_octets};
        uint32_t disc[2] = {g->in_discards, g->out_discards};
        uint32_t err[2] = {g->in_errors, g->out_errors};
        p->fresh = false;
        if (p->went_back) /* the 32-bit discards and errors are not a wrap either */
            e->reset(arg, name);
        p->went_back = false;
        if (g->if_speed)
            e->max_rate(arg, name, (double)g->if_speed / 8.0);
        for (int d = 0; d < 2; d++) {
            l[1].value = dir[d];
            e->counter(arg, FS_M_PORT_BYTES, l, 2, oct[d], 64);
            e->counter(arg, FS_M_PORT_PACKETS, l, 2, p->pkts[d], 64);
            e->counter(arg, FS_M_PORT_DISCARDS, l, 2, disc[d], 32);
            e->counter(arg, FS_M_PORT_ERRORS, l, 2, err[d], 32);
        }
        /* ifStatus: bit 0 ifAdminStatus up, bit 1 ifOperStatus up (sFlow v5). */
        e->gauge(arg, FS_M_PORT_ADMIN_UP, l, 1, (g->if_status & 1) ? 1 : 0);
        e->gauge(arg, FS_M_PORT_OPER_UP, l, 1, (g->if_status & 2) ? 1 : 0);
        if (g->if_speed)
            e->gauge(arg, FS_M_PORT_SPEED, l, 1, (double)g->if_speed);
    }
}

static void
flush_cells(struct fs_sflow_agg *a, const struct fs_sflow_emit *e, void *arg)
{
    for (size_t i = 0; i < a->cell_cap; i++) {
        struct cell *c = &a->cells[i];
        if (!c->used)
            continue;
        struct fs_label l[2] = {{"rule", a->rules[c->rule].name},
                                {"interface", port_name(a, e, arg, c->ifindex)}};
        e->counter(arg, FS_M_FLOW_RULE_PACKETS, l, 2, c->pkts, 64);
        e->counter(arg, FS_M_FLOW_RULE_BYTES, l, 2, c->bytes, 64);
        e->counter(arg, FS_M_FLOW_RULE_ECN_MARKED, l, 2, c->ce, 64);
        if (c->seen_depth) {
            e->gauge(arg, FS_M_FLOW_RULE_QUEUE_DEPTH_MAX, l, 2, c->depth_max);
            e->gauge(arg, FS_M_FLOW_RULE_QUEUE_DEPTH_P90, l, 2, p90(c->res, c->n_depth));
        }
        if (c->seen_delay) {
            e->gauge(arg, FS_M_FLOW_RULE_TRANSIT_DELAY_MAX, l, 2, c->delay_max * 1e-9);
            e->gauge(arg, FS_M_FLOW_RULE_TRANSIT_DELAY_P90, l, 2,
                     p90(c->res + RESERVOIR, c->n_delay) * 1e-9);
        }
        c->n_depth = c->n_delay = 0;
        c->seen_depth = c->seen_delay = 0;
    }
    for (size_t i = 0; i < a->drop_cap; i++) {
        struct drop_cell *d = &a->drops[i];
        char rb[32];
        if (!d->used)
            continue;
        struct fs_label l[3] = {{"rule", a->rules[d->rule].name},
                                {"interface", port_name(a, e, arg, d->ifindex)},
                                {"reason", fs_sflow_drop_reason(d->reason, rb, sizeof rb)}};
        e->counter(arg, FS_M_FLOW_RULE_DROPPED, l, 3, d->n, 64);
    }
}

static void
flush_self(struct fs_sflow_agg *a, const struct fs_sflow_emit *e, void *arg)
{
    struct fs_label l;
    e->counter(arg, FS_M_SFLOW_DATAGRAMS, NULL, 0, a->st.datagrams, 64);
    e->counter(arg, FS_M_SFLOW_LOST_DATAGRAMS, NULL, 0, a->st.lost_datagrams, 64);
    for (int k = 0; k < FS_SFLOW_LOST_KIND_COUNT; k++) {
        l = (struct fs_label){"kind", fs_sflow_lost_kind_names[k]};
        e->counter(arg, FS_M_SFLOW_LOST_SAMPLES, &l, 1, a->st.lost_samples[k], 64);
    }
    for (int k = 0; k < FS_SFLOW_RESET_KIND_COUNT; k++) {
        l = (struct fs_label){"kind", fs_sflow_reset_kind_names[k]};
        e->counter(arg, FS_M_SFLOW_RESETS, &l, 1, a->st.resets[k], 64);
    }
    for (int k = 0; k < FS_SFLOW_DEC_REASON_COUNT; k++) {
        l = (struct fs_label){"reason", fs_sflow_decode_reason_names[k]};
        e->counter(arg, FS_M_SFLOW_DECODE_ERRORS, &l, 1, a->st.decode_errors[k], 64);
    }
    for (int k = 0; k < FS_SFLOW_POOL_RESULT_COUNT; k++) {
        l = (struct fs_label){"result", fs_sflow_pool_result_names[k]};
        e->counter(arg, FS_M_SFLOW_POOL_CHECKS, &l, 1, a->st.pool_checks[k], 64);
    }
    e->counter(arg, FS_M_SFLOW_RATE_CHANGES, NULL, 0, a->st.rate_changes, 64);
}

void
fs_sflow_agg_flush(struct fs_sflow_agg *a, const struct fs_sflow_emit *e, void *arg,
                   int64_t now_mono_us)
{
    a->now_mono = now_mono_us;
    for (size_t i = 0; i < MAX_SUB_AGENTS; i++)
        if (a->subs[i].used)
            a->st.lost_datagrams += seq_settle(&a->subs[i].dgram);
    for (size_t i = 0; i < a->src_cap; i++) {
        struct source *s = &a->srcs[i];
        if (s->used) {
            a->st.lost_samples[s->kind == SRC_FLOW       ? FS_SFLOW_LOST_FLOW
                               : s->kind == SRC_COUNTERS ? FS_SFLOW_LOST_COUNTERS
                                                         : FS_SFLOW_LOST_DISCARD] +=
                seq_settle(&s->seq);
            pool_verdict(a, s);
        }
    }
    flush_ports(a, e, arg);
    flush_cells(a, e, arg);
    flush_self(a, e, arg);
}

/* ---- the sink as the emitter ---- */

static void
sink_counter(void *arg, enum fs_metric m, const struct fs_label *l, size_t n, uint64_t raw,
             unsigned bits)
{
    fs_sink_counter(arg, m, l, n, raw, bits);
}

static void
sink_gauge(void *arg, enum fs_metric m, const struct fs_label *l, size_t n, double v)
{
    fs_sink_gauge(arg, m, l, n, v);
}

static int
sink_ifname(void *arg, uint32_t ifindex, char *buf, size_t len)
{
    return fs_sink_ifindex_name(arg, ifindex, buf, len);
}

static void
sink_max_rate(void *arg, const char *iface, double octets_per_s)
{
    fs_sink_set_max_rate(arg, iface, octets_per_s);
}

static void
sink_reset(void *arg, const char *iface)
{
    fs_sink_counter_reset(arg, FS_RESET_DISCONTINUITY, iface);
}

const struct fs_sflow_emit fs_sflow_sink_emit = {sink_counter, sink_gauge, sink_ifname,
                                                 sink_max_rate, sink_reset};
