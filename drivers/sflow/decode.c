/*
 * sFlow v5 datagram decoder (see decode.h). XDR: every item is big-endian and a multiple
 * of 4 bytes; structures are tagged with a data_format (enterprise << 12 | format) and a
 * byte length, which is what lets unknown ones be skipped.
 */
#include "decode.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* A window [pos, end) of the datagram; offsets are from the datagram's start so that
 * error messages can name them. Invariant: pos <= end <= datagram length. */
struct cursor {
    const uint8_t *buf;
    size_t pos;
    size_t end;
};

struct decoder {
    const uint8_t *buf;
    size_t len;
    char *err;
    size_t errlen;
    struct sflow_decode_stats stats;
};

static int decode_fail(struct decoder *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
decode_fail(struct decoder *d, const char *fmt, ...)
{
    if (d->err && d->errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->err, d->errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static size_t
cursor_left(const struct cursor *c)
{
    return c->end - c->pos;
}

static uint32_t
load_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static uint16_t
load_be16(const uint8_t *p)
{
    return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}

/* Reads a u32; false (cursor unchanged) if fewer than 4 bytes are left. */
static bool
cursor_u32(struct cursor *c, uint32_t *v)
{
    bool ok = cursor_left(c) >= 4;
    if (ok) {
        *v = load_be32(c->buf + c->pos);
        c->pos += 4;
    }
    return ok;
}

static bool
cursor_u64(struct cursor *c, uint64_t *v)
{
    bool ok = cursor_left(c) >= 8;
    if (ok) {
        *v = (uint64_t)load_be32(c->buf + c->pos) << 32 | load_be32(c->buf + c->pos + 4);
        c->pos += 8;
    }
    return ok;
}

static const char *
sample_name(uint32_t enterprise, uint32_t format)
{
    const char *name = "unknown sample";
    if (enterprise == 0) {
        switch (format) {
        case SFLOW_SAMPLE_FLOW:
            name = "flow sample";
            break;
        case SFLOW_SAMPLE_COUNTERS:
            name = "counter sample";
            break;
        case SFLOW_SAMPLE_FLOW_EXPANDED:
            name = "expanded flow sample";
            break;
        case SFLOW_SAMPLE_COUNTERS_EXPANDED:
            name = "expanded counter sample";
            break;
        case SFLOW_SAMPLE_DISCARD:
            name = "discarded packet sample";
            break;
        default:
            break;
        }
    }
    return name;
}

/* Where in the datagram a problem is: formatted only when there is one (a snprintf per
 * sample and record would cost most of the decoder's time). */
struct loc {
    uint32_t sample, enterprise, format;
    bool has_record;
    uint32_t record;
    char buf[96];
};

static const char *
loc_str(struct loc *l)
{
    char where[64];
    snprintf(where, sizeof(where), "sample %u (%s %u:%u)", l->sample,
             sample_name(l->enterprise, l->format), l->enterprise, l->format);
    if (l->has_record)
        snprintf(l->buf, sizeof(l->buf), "%s record %u", where, l->record);
    else
        snprintf(l->buf, sizeof(l->buf), "%s", where);
    return l->buf;
}

/* ---------------- sampled packet header ---------------- */

static void
packet_ports(const uint8_t *p, size_t left, uint8_t protocol, struct sflow_packet *pkt)
{
    /* UDP: 8-byte header, then the RoCEv2 BTH (12 bytes) when it goes to port 4791. */
    if ((protocol == 6 || protocol == 17) && left < 4) {
        pkt->truncated = true;
    } else if (protocol == 6 || protocol == 17) {
        pkt->has_ports = true;
        pkt->src_port = load_be16(p);
        pkt->dst_port = load_be16(p + 2);
        if (protocol == 17 && pkt->dst_port == 4791 && left < 8 + 12) {
            pkt->truncated = true;
        } else if (protocol == 17 && pkt->dst_port == 4791) {
            const uint8_t *bth = p + 8;
            pkt->has_bth = true;
            pkt->bth_opcode = bth[0];
            pkt->bth_dest_qp = load_be32(bth + 4) & 0xffffffu;
            pkt->bth_psn = load_be32(bth + 8) & 0xffffffu;
        }
    }
}

static void
packet_ipv4(const uint8_t *p, size_t left, struct sflow_packet *pkt)
{
    if (left < 20) {
        pkt->truncated = true;
    } else if ((p[0] >> 4) == 4) {
        size_t ihl = (size_t)(p[0] & 0x0f) * 4;
        pkt->ip_version = 4;
        pkt->dscp = p[1] >> 2;
        pkt->ecn = p[1] & 3;
        pkt->ttl = p[8];
        pkt->ip_protocol = p[9];
        pkt->src_ip.family = 4;
        memcpy(pkt->src_ip.bytes, p + 12, 4);
        pkt->dst_ip.family = 4;
        memcpy(pkt->dst_ip.bytes, p + 16, 4);
        /* Ports only in the first fragment, and only behind a sane header length. */
        if (ihl >= 20 && (load_be16(p + 6) & 0x1fff) == 0) {
            if (left < ihl)
                pkt->truncated = true;
            else
                packet_ports(p + ihl, left - ihl, pkt->ip_protocol, pkt);
        }
    }
}

static void
packet_ipv6(const uint8_t *p, size_t left, struct sflow_packet *pkt)
{
    if (left < 40) {
        pkt->truncated = true;
    } else if ((p[0] >> 4) == 6) {
        uint8_t tclass = (uint8_t)((p[0] & 0x0f) << 4 | p[1] >> 4);
        pkt->ip_version = 6;
        pkt->dscp = tclass >> 2;
        pkt->ecn = tclass & 3;
        pkt->ip_protocol = p[6];
        pkt->ttl = p[7];
        pkt->src_ip.family = 6;
        memcpy(pkt->src_ip.bytes, p + 8, 16);
        pkt->dst_ip.family = 6;
        memcpy(pkt->dst_ip.bytes, p + 24, 16);
        /* Extension headers are not walked: ports only when UDP/TCP follows directly. */
        packet_ports(p + 40, left - 40, pkt->ip_protocol, pkt);
    }
}

/* Ethernet, then 802.1Q/802.1ad tags (the outermost is reported), then IP. */
static void
packet_ethernet(const uint8_t *bytes, size_t len, struct sflow_packet *pkt)
{
    size_t pos = 14;
    if (len < 14) {
        pkt->truncated = true;
    } else {
        pkt->has_ethernet = true;
        memcpy(pkt->dst_mac, bytes, 6);
        memcpy(pkt->src_mac, bytes + 6, 6);
        pkt->ethertype = load_be16(bytes + 12);
        /* Bounded by len: each tag consumes 4 bytes. */
        while (!pkt->truncated && (pkt->ethertype == 0x8100 || pkt->ethertype == 0x88a8)) {
            if (len - pos < 4) {
                pkt->truncated = true;
            } else {
                if (!pkt->has_vlan) {
                    uint16_t tci = load_be16(bytes + pos);
                    pkt->has_vlan = true;
                    pkt->vlan_pcp = (uint8_t)(tci >> 13);
                    pkt->vlan_id = tci & 0x0fff;
                }
                pkt->ethertype = load_be16(bytes + pos + 2);
                pos += 4;
            }
        }
        if (!pkt->truncated && pkt->ethertype == 0x0800)
            packet_ipv4(bytes + pos, len - pos, pkt);
        else if (!pkt->truncated && pkt->ethertype == 0x86dd)
            packet_ipv6(bytes + pos, len - pos, pkt);
    }
}

void
sflow_decode_packet_header(uint32_t protocol, const uint8_t *bytes, size_t len,
                           struct sflow_packet *pkt)
{
    memset(pkt, 0, sizeof(*pkt));
    if (protocol == SFLOW_HEADER_ETHERNET)
        packet_ethernet(bytes, len, pkt);
    else if (protocol == SFLOW_HEADER_IPV4)
        packet_ipv4(bytes, len, pkt);
    else if (protocol == SFLOW_HEADER_IPV6)
        packet_ipv6(bytes, len, pkt);
}

/* ---------------- flow records ---------------- */

/* Decodes the body of one known flow record (c spans exactly the record). */
static int
flow_record_body(struct decoder *d, uint32_t format, struct cursor *c, struct sflow_flow_records *r,
                 struct loc *where)
{
    int rc = 0;
    uint32_t v;
    switch (format) {
    case SFLOW_FLOW_RAW_HEADER: {
        struct sflow_raw_header h = {.present = true};
        size_t padded;
        if (!cursor_u32(c, &h.protocol) || !cursor_u32(c, &h.frame_length) ||
            !cursor_u32(c, &h.stripped) || !cursor_u32(c, &h.header_length)) {
            rc = decode_fail(d,
                             "%s (raw packet header): record shorter than its 16-byte fixed "
                             "part",
                             loc_str(where));
            break;
        }
        if (h.header_length > cursor_left(c)) {
            rc = decode_fail(d,
                             "%s (raw packet header): header length %u runs past its record "
                             "(%zu bytes left) at offset %zu",
                             loc_str(where), h.header_length, cursor_left(c), c->pos);
            break;
        }
        h.header = c->buf + c->pos;
        /* XDR pads opaque data to 4 bytes; an agent that leaves the padding out is
         * tolerated, the record's own length bounds what follows. */
        padded = ((size_t)h.header_length + 3) & ~(size_t)3;
        c->pos += padded < cursor_left(c) ? padded : cursor_left(c);
        if (!r->raw.present) {
            sflow_decode_packet_header(h.protocol, h.header, h.header_length, &h.packet);
            r->raw = h;
        }
        break;
    }
    case SFLOW_FLOW_EGRESS_QUEUE:
    case SFLOW_FLOW_TRANSIT_DELAY:
    case SFLOW_FLOW_QUEUE_DEPTH:
        if (!cursor_u32(c, &v)) {
            rc = decode_fail(d, "%s (format %u): record shorter than 4 bytes", loc_str(where),
                             format);
            break;
        }
        if (format == SFLOW_FLOW_EGRESS_QUEUE && !r->has_egress_queue) {
            r->has_egress_queue = true;
            r->egress_queue = v;
        } else if (format == SFLOW_FLOW_TRANSIT_DELAY && !r->has_transit_delay) {
            r->has_transit_delay = true;
            r->transit_delay_ns = v;
        } else if (format == SFLOW_FLOW_QUEUE_DEPTH && !r->has_queue_depth) {
            r->has_queue_depth = true;
            r->queue_depth_bytes = v;
        }
        break;
    default:
        break;
    }
    return rc;
}

static bool
flow_record_known(uint32_t enterprise, uint32_t format)
{
    return enterprise == 0 &&
           (format == SFLOW_FLOW_RAW_HEADER || format == SFLOW_FLOW_EGRESS_QUEUE ||
            format == SFLOW_FLOW_TRANSIT_DELAY || format == SFLOW_FLOW_QUEUE_DEPTH);
}

/* Decodes flow_record<> (count, then tagged records) that fills the rest of sample c. */
static int
flow_records(struct decoder *d, struct cursor *c, struct sflow_flow_records *r, struct loc *where)
{
    int rc = 0;
    if (!cursor_u32(c, &r->n_records))
        rc = decode_fail(d, "%s: ends before its record count at offset %zu", loc_str(where),
                         c->pos);
    for (uint32_t i = 0; rc == 0 && i < r->n_records; i++) {
        uint32_t tag, length;
        struct cursor rec;
        if (!cursor_u32(c, &tag) || !cursor_u32(c, &length)) {
            rc = decode_fail(d, "%s: declares %u records but ends after %u at offset %zu",
                             loc_str(where), r->n_records, i, c->pos);
            break;
        }
        if (length > cursor_left(c)) {
            where->has_record = true;
            where->record = i;
            rc =
                decode_fail(d,
                            "%s (format %u:%u): length %u runs past its sample (%zu bytes "
                            "left) at offset %zu",
                            loc_str(where), tag >> 12, tag & 0xfff, length, cursor_left(c), c->pos);
            break;
        }
        rec = (struct cursor){.buf = c->buf, .pos = c->pos, .end = c->pos + length};
        c->pos += length;
        if (flow_record_known(tag >> 12, tag & 0xfff)) {
            where->has_record = true;
            where->record = i;
            rc = flow_record_body(d, tag & 0xfff, &rec, r, where);
            where->has_record = false;
        } else {
            r->n_unknown_records++;
            d->stats.n_unknown_records++;
        }
    }
    return rc;
}

/* ---------------- counter records ---------------- */

static int
counter_generic(struct cursor *c, struct sflow_if_counters *g)
{
    bool ok = cursor_u32(c, &g->if_index) && cursor_u32(c, &g->if_type) &&
              cursor_u64(c, &g->if_speed) && cursor_u32(c, &g->if_direction) &&
              cursor_u32(c, &g->if_status) && cursor_u64(c, &g->in_octets) &&
              cursor_u32(c, &g->in_ucast) && cursor_u32(c, &g->in_multicast) &&
              cursor_u32(c, &g->in_broadcast) && cursor_u32(c, &g->in_discards) &&
              cursor_u32(c, &g->in_errors) && cursor_u32(c, &g->in_unknown_protos) &&
              cursor_u64(c, &g->out_octets) && cursor_u32(c, &g->out_ucast) &&
              cursor_u32(c, &g->out_multicast) && cursor_u32(c, &g->out_broadcast) &&
              cursor_u32(c, &g->out_discards) && cursor_u32(c, &g->out_errors) &&
              cursor_u32(c, &g->promiscuous);
    return ok ? 0 : -1;
}

static int
counter_ethernet(struct cursor *c, struct sflow_eth_counters *e)
{
    uint32_t *fields[] = {&e->alignment_errors,
                          &e->fcs_errors,
                          &e->single_collision_frames,
                          &e->multiple_collision_frames,
                          &e->sqe_test_errors,
                          &e->deferred_transmissions,
                          &e->late_collisions,
                          &e->excessive_collisions,
                          &e->internal_mac_transmit_errors,
                          &e->carrier_sense_errors,
                          &e->frame_too_longs,
                          &e->internal_mac_receive_errors,
                          &e->symbol_errors};
    int rc = 0;
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]) && rc == 0; i++)
        if (!cursor_u32(c, fields[i]))
            rc = -1;
    return rc;
}

/* string portName<255>: the length, the bytes, XDR padding (tolerated when left out, as
 * for the raw header). -1 when the length runs past the record; a name that cannot be a
 * label (empty, too long, a control byte) is left out. */
static int
counter_port_name(struct cursor *c, struct sflow_counter_sample *s)
{
    uint32_t len;
    bool usable;
    if (!cursor_u32(c, &len) || len > cursor_left(c))
        return -1;
    usable = len > 0 && len <= SFLOW_PORT_NAME_MAX;
    for (uint32_t i = 0; usable && i < len; i++)
        usable = c->buf[c->pos + i] >= 0x20 && c->buf[c->pos + i] != 0x7f;
    if (usable && !s->port_name) {
        s->port_name = c->buf + c->pos;
        s->port_name_len = len;
    } else if (!usable) {
        s->n_bad_port_names++;
    }
    return 0;
}

static int
counter_records(struct decoder *d, struct cursor *c, struct sflow_counter_sample *s,
                struct loc *where)
{
    int rc = 0;
    if (!cursor_u32(c, &s->n_records))
        rc = decode_fail(d, "%s: ends before its record count at offset %zu", loc_str(where),
                         c->pos);
    for (uint32_t i = 0; rc == 0 && i < s->n_records; i++) {
        uint32_t tag, length, enterprise, format;
        struct cursor rec;
        if (!cursor_u32(c, &tag) || !cursor_u32(c, &length)) {
            rc = decode_fail(d, "%s: declares %u records but ends after %u at offset %zu",
                             loc_str(where), s->n_records, i, c->pos);
            break;
        }
        enterprise = tag >> 12;
        format = tag & 0xfff;
        if (length > cursor_left(c)) {
            rc = decode_fail(d,
                             "%s record %u (format %u:%u): length %u runs past its sample (%zu "
                             "bytes left) at offset %zu",
                             loc_str(where), i, enterprise, format, length, cursor_left(c), c->pos);
            break;
        }
        rec = (struct cursor){.buf = c->buf, .pos = c->pos, .end = c->pos + length};
        c->pos += length;
        if (enterprise == 0 && format == SFLOW_COUNTERS_GENERIC_IF) {
            struct sflow_if_counters g;
            if (counter_generic(&rec, &g) != 0)
                rc = decode_fail(d,
                                 "%s record %u (generic interface counters): length %u shorter "
                                 "than 88",
                                 loc_str(where), i, length);
            else if (!s->has_generic) {
                s->has_generic = true;
                s->generic = g;
            }
        } else if (enterprise == 0 && format == SFLOW_COUNTERS_PORT_NAME) {
            if (counter_port_name(&rec, s) != 0)
                rc = decode_fail(d,
                                 "%s record %u (port name): its string runs past the record "
                                 "(length %u)",
                                 loc_str(where), i, length);
        } else if (enterprise == 0 && format == SFLOW_COUNTERS_ETHERNET) {
            struct sflow_eth_counters e;
            if (counter_ethernet(&rec, &e) != 0)
                rc = decode_fail(d, "%s record %u (Ethernet counters): length %u shorter than 52",
                                 loc_str(where), i, length);
            else if (!s->has_ethernet) {
                s->has_ethernet = true;
                s->ethernet = e;
            }
        } else {
            s->n_unknown_records++;
            d->stats.n_unknown_records++;
        }
    }
    return rc;
}

/* ---------------- samples ---------------- */

/* Reads a source id: compact (type << 24 | index) or expanded (two words). */
static bool
source_id(struct cursor *c, bool expanded, uint32_t *type, uint32_t *index)
{
    uint32_t v;
    bool ok;
    if (expanded) {
        ok = cursor_u32(c, type) && cursor_u32(c, index);
    } else {
        ok = cursor_u32(c, &v);
        if (ok) {
            *type = v >> 24;
            *index = v & 0xffffffu;
        }
    }
    return ok;
}

/* Reads an interface: compact (format in the top 2 bits, 30-bit value) or expanded. */
static bool
interface(struct cursor *c, bool expanded, struct sflow_interface *ifc)
{
    uint32_t v;
    bool ok;
    if (expanded) {
        ok = cursor_u32(c, &ifc->format) && cursor_u32(c, &ifc->value);
    } else {
        ok = cursor_u32(c, &v);
        if (ok) {
            ifc->format = v >> 30;
            ifc->value = v & 0x3fffffffu;
        }
    }
    return ok;
}

static int
sample_body(struct decoder *d, uint32_t format, struct cursor *c, struct sflow_sample *s,
            struct loc *where)
{
    int rc = 0;
    bool expanded =
        format == SFLOW_SAMPLE_FLOW_EXPANDED || format == SFLOW_SAMPLE_COUNTERS_EXPANDED;
    switch (format) {
    case SFLOW_SAMPLE_FLOW:
    case SFLOW_SAMPLE_FLOW_EXPANDED: {
        struct sflow_flow_sample *f = &s->u.flow;
        s->kind = SFLOW_KIND_FLOW;
        if (!cursor_u32(c, &f->sequence) ||
            !source_id(c, expanded, &f->source_id_type, &f->source_id_index) ||
            !cursor_u32(c, &f->sampling_rate) || !cursor_u32(c, &f->sample_pool) ||
            !cursor_u32(c, &f->drops) || !interface(c, expanded, &f->input) ||
            !interface(c, expanded, &f->output))
            rc = decode_fail(d, "%s: shorter than its fixed fields (ends at offset %zu)",
                             loc_str(where), c->end);
        else
            rc = flow_records(d, c, &f->records, where);
        break;
    }
    case SFLOW_SAMPLE_COUNTERS:
    case SFLOW_SAMPLE_COUNTERS_EXPANDED: {
        struct sflow_counter_sample *k = &s->u.counters;
        s->kind = SFLOW_KIND_COUNTERS;
        if (!cursor_u32(c, &k->sequence) ||
            !source_id(c, expanded, &k->source_id_type, &k->source_id_index))
            rc = decode_fail(d, "%s: shorter than its fixed fields (ends at offset %zu)",
                             loc_str(where), c->end);
        else
            rc = counter_records(d, c, k, where);
        break;
    }
    case SFLOW_SAMPLE_DISCARD: {
        struct sflow_discard_sample *x = &s->u.discard;
        s->kind = SFLOW_KIND_DISCARD;
        /* sflow_drops.txt: the source id is always in the expanded form. */
        if (!cursor_u32(c, &x->sequence) ||
            !source_id(c, true, &x->source_id_type, &x->source_id_index) ||
            !cursor_u32(c, &x->drops) || !cursor_u32(c, &x->input) || !cursor_u32(c, &x->output) ||
            !cursor_u32(c, &x->reason))
            rc = decode_fail(d, "%s: shorter than its fixed fields (ends at offset %zu)",
                             loc_str(where), c->end);
        else
            rc = flow_records(d, c, &x->records, where);
        break;
    }
    default:
        break;
    }
    return rc;
}

static bool
sample_known(uint32_t enterprise, uint32_t format)
{
    return enterprise == 0 && format >= SFLOW_SAMPLE_FLOW && format <= SFLOW_SAMPLE_DISCARD;
}

static int
datagram_header(struct decoder *d, struct cursor *c, struct sflow_datagram_header *h)
{
    int rc = 0;
    uint32_t addr_type;
    if (!cursor_u32(c, &h->version)) {
        rc = decode_fail(d, "datagram of %zu bytes ends before its version", d->len);
    } else if (h->version != 5) {
        rc = decode_fail(d, "sFlow version %u, only version 5 is decoded", h->version);
    } else if (!cursor_u32(c, &addr_type)) {
        rc = decode_fail(d, "datagram ends before the agent address type");
    } else if (addr_type != 1 && addr_type != 2) {
        rc = decode_fail(d, "agent address type %u is neither IPv4 (1) nor IPv6 (2)", addr_type);
    } else {
        size_t n = addr_type == 1 ? 4 : 16;
        if (cursor_left(c) < n) {
            rc = decode_fail(d, "datagram ends inside the agent address at offset %zu", c->pos);
        } else {
            h->agent.family = addr_type == 1 ? 4 : 6;
            memcpy(h->agent.bytes, c->buf + c->pos, n);
            c->pos += n;
            if (!cursor_u32(c, &h->sub_agent_id) || !cursor_u32(c, &h->sequence) ||
                !cursor_u32(c, &h->uptime_ms) || !cursor_u32(c, &h->n_samples))
                rc = decode_fail(d, "datagram of %zu bytes ends inside its header", d->len);
        }
    }
    return rc;
}

int
sflow_decode_datagram(const uint8_t *buf, size_t len, sflow_sample_fn on_sample, void *arg,
                      struct sflow_datagram_header *hdr, struct sflow_decode_stats *stats,
                      char *err, size_t errlen)
{
    struct decoder d = {.buf = buf, .len = len, .err = err, .errlen = errlen};
    struct sflow_datagram_header h = {0};
    struct cursor c = {.buf = buf, .pos = 0, .end = len};
    int rc = 0;

    if (err && errlen > 0)
        err[0] = '\0';
    if (!buf && len > 0) {
        rc = decode_fail(&d, "no datagram buffer");
        goto out;
    }
    if (len > SFLOW_DATAGRAM_MAX) {
        rc = decode_fail(&d, "datagram of %zu bytes is larger than a UDP payload", len);
        goto out;
    }
    rc = datagram_header(&d, &c, &h);
    /* Each sample consumes at least 8 bytes: a huge declared count ends at the buffer. */
    for (uint32_t i = 0; rc == 0 && i < h.n_samples; i++) {
        uint32_t tag, length, enterprise, format;
        struct cursor body;
        struct loc where = {0};
        if (!cursor_u32(&c, &tag) || !cursor_u32(&c, &length)) {
            rc = decode_fail(&d, "datagram declares %u samples but ends after %u at offset %zu",
                             h.n_samples, i, c.pos);
            break;
        }
        enterprise = tag >> 12;
        format = tag & 0xfff;
        where.sample = i;
        where.enterprise = enterprise;
        where.format = format;
        if (length > cursor_left(&c)) {
            rc = decode_fail(&d,
                             "%s: length %u runs past the datagram (%zu bytes left) at offset "
                             "%zu",
                             loc_str(&where), length, cursor_left(&c), c.pos);
            break;
        }
        body = (struct cursor){.buf = buf, .pos = c.pos, .end = c.pos + length};
        c.pos += length;
        if (!sample_known(enterprise, format)) {
            d.stats.n_unknown_samples++;
            continue;
        }
        /* Zeroed: has_* flags and counts start false/0 for every sample. */
        struct sflow_sample s;
        memset(&s, 0, sizeof(s));
        s.index = i;
        s.format = format;
        s.length = length;
        rc = sample_body(&d, format, &body, &s, &where);
        if (rc == 0) {
            d.stats.n_samples_decoded++;
            if (on_sample)
                on_sample(&h, &s, arg);
        }
    }
    if (rc == 0)
        d.stats.n_trailing_bytes = (uint32_t)cursor_left(&c);
out:
    if (hdr)
        *hdr = h;
    if (stats)
        *stats = d.stats;
    return rc;
}
