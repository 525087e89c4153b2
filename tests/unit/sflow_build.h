/*
 * Builds sFlow v5 datagrams for the sFlow driver's tests and bench (a test helper, header
 * only: included by one translation unit each). XDR big-endian, tagged structures with
 * their lengths filled in at the end.
 */
#ifndef FS_TEST_SFLOW_BUILD_H
#define FS_TEST_SFLOW_BUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct sfb {
    uint8_t b[8192];
    size_t n;
    size_t n_samples_at; /* where the header's sample count is */
    uint32_t n_samples;
};

static inline void
sfb_u32(struct sfb *x, uint32_t v)
{
    if (x->n + 4 > sizeof x->b)
        return;
    x->b[x->n++] = (uint8_t)(v >> 24);
    x->b[x->n++] = (uint8_t)(v >> 16);
    x->b[x->n++] = (uint8_t)(v >> 8);
    x->b[x->n++] = (uint8_t)v;
}

static inline void
sfb_put_at(struct sfb *x, size_t at, uint32_t v)
{
    x->b[at] = (uint8_t)(v >> 24);
    x->b[at + 1] = (uint8_t)(v >> 16);
    x->b[at + 2] = (uint8_t)(v >> 8);
    x->b[at + 3] = (uint8_t)v;
}

static inline size_t
sfb_begin(struct sfb *x, uint32_t format)
{
    sfb_u32(x, format);
    sfb_u32(x, 0);
    return x->n;
}

static inline void
sfb_end(struct sfb *x, size_t body)
{
    sfb_put_at(x, body - 4, (uint32_t)(x->n - body));
}

/** Starts a datagram of IPv4 agent agent (host order). */
static inline void
sfb_datagram(struct sfb *x, uint32_t agent, uint32_t sub, uint32_t seq, uint32_t uptime)
{
    x->n = 0;
    x->n_samples = 0;
    sfb_u32(x, 5);
    sfb_u32(x, 1);
    sfb_u32(x, agent);
    sfb_u32(x, sub);
    sfb_u32(x, seq);
    sfb_u32(x, uptime);
    x->n_samples_at = x->n;
    sfb_u32(x, 0);
}

/** A sampled packet: IPv4 UDP (RoCEv2 when dport 4791) or TCP. */
struct sfb_pkt {
    uint8_t proto; /* 17 or 6 */
    uint16_t sport, dport;
    uint8_t dscp, ecn;
};

/* Ethernet + IPv4 + UDP + BTH (or TCP): the first bytes of the frame. */
static inline size_t
sfb_packet_bytes(const struct sfb_pkt *p, uint8_t *out)
{
    size_t n = 0;
    static const uint8_t macs[12] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1};
    memcpy(out, macs, 12);
    out[12] = 0x08;
    out[13] = 0x00;
    n = 14;
    uint8_t *ip = out + n;
    memset(ip, 0, 20);
    ip[0] = 0x45;
    ip[1] = (uint8_t)(p->dscp << 2 | (p->ecn & 3));
    ip[8] = 64;
    ip[9] = p->proto;
    ip[12] = 192, ip[13] = 168, ip[14] = 1, ip[15] = 10;
    ip[16] = 192, ip[17] = 168, ip[18] = 2, ip[19] = 20;
    n += 20;
    uint8_t *l4 = out + n;
    l4[0] = (uint8_t)(p->sport >> 8), l4[1] = (uint8_t)p->sport;
    l4[2] = (uint8_t)(p->dport >> 8), l4[3] = (uint8_t)p->dport;
    if (p->proto == 17) {
        memset(l4 + 4, 0, 4 + 12);
        l4[8] = 0x0a; /* BTH opcode: RDMA write only */
        n += 8 + 12;
    } else {
        memset(l4 + 4, 0, 16);
        l4[12] = 5 << 4;
        n += 20;
    }
    return n;
}

static inline void
sfb_raw_header(struct sfb *x, const struct sfb_pkt *p, uint32_t frame_length)
{
    uint8_t hdr[128];
    size_t hl = sfb_packet_bytes(p, hdr);
    size_t r = sfb_begin(x, 1);
    sfb_u32(x, 1); /* Ethernet */
    sfb_u32(x, frame_length);
    sfb_u32(x, 4);
    sfb_u32(x, (uint32_t)hl);
    if (x->n + hl + 4 <= sizeof x->b) {
        memcpy(x->b + x->n, hdr, hl);
        x->n += hl;
        while (x->n % 4)
            x->b[x->n++] = 0;
    }
    sfb_end(x, r);
}

struct sfb_flow {
    uint32_t seq, source, rate, pool, drops, in, out;
    struct sfb_pkt pkt;
    uint32_t frame_length;
    bool has_depth, has_delay, has_queue;
    uint32_t depth, delay_ns, queue;
};

static inline void
sfb_flow_sample(struct sfb *x, const struct sfb_flow *f)
{
    size_t s = sfb_begin(x, 1);
    uint32_t nrec = 1 + f->has_depth + f->has_delay + f->has_queue;
    sfb_u32(x, f->seq);
    sfb_u32(x, f->source); /* type 0 (ifIndex) */
    sfb_u32(x, f->rate);
    sfb_u32(x, f->pool);
    sfb_u32(x, f->drops);
    sfb_u32(x, f->in);
    sfb_u32(x, f->out);
    sfb_u32(x, nrec);
    sfb_raw_header(x, &f->pkt, f->frame_length);
    if (f->has_queue) {
        size_t r = sfb_begin(x, 1036);
        sfb_u32(x, f->queue);
        sfb_end(x, r);
    }
    if (f->has_delay) {
        size_t r = sfb_begin(x, 1039);
        sfb_u32(x, f->delay_ns);
        sfb_end(x, r);
    }
    if (f->has_depth) {
        size_t r = sfb_begin(x, 1040);
        sfb_u32(x, f->depth);
        sfb_end(x, r);
    }
    sfb_end(x, s);
    sfb_put_at(x, x->n_samples_at, ++x->n_samples);
}

static inline void
sfb_discard_sample(struct sfb *x, uint32_t seq, uint32_t in, uint32_t out, uint32_t reason,
                   uint32_t drops, const struct sfb_pkt *p)
{
    size_t s = sfb_begin(x, 5);
    sfb_u32(x, seq);
    sfb_u32(x, 0);
    sfb_u32(x, in);
    sfb_u32(x, drops);
    sfb_u32(x, in);
    sfb_u32(x, out);
    sfb_u32(x, reason);
    sfb_u32(x, 1);
    sfb_raw_header(x, p, 1000);
    sfb_end(x, s);
    sfb_put_at(x, x->n_samples_at, ++x->n_samples);
}

/** A counter sample with a generic interface record of ifindex, after a port name record
 *  (1005, as host-sflow sends it) when name is not NULL (its bytes as given). */
static inline void
sfb_counter_sample_named(struct sfb *x, uint32_t seq, uint32_t ifindex, uint64_t in_octets,
                         uint32_t in_ucast, uint32_t in_mcast, uint32_t status, const char *name)
{
    size_t s = sfb_begin(x, 2), r;
    sfb_u32(x, seq);
    sfb_u32(x, ifindex);
    sfb_u32(x, name ? 2 : 1);
    if (name) {
        size_t len = strlen(name);
        r = sfb_begin(x, 1005);
        sfb_u32(x, (uint32_t)len);
        if (x->n + len + 4 <= sizeof x->b) {
            memcpy(x->b + x->n, name, len);
            x->n += len;
            while (x->n % 4)
                x->b[x->n++] = 0;
        }
        sfb_end(x, r);
    }
    r = sfb_begin(x, 1);
    sfb_u32(x, ifindex);
    sfb_u32(x, 6);
    sfb_u32(x, 0x17u); /* if_speed 100 Gb/s = 0x17_4876E800 */
    sfb_u32(x, 0x4876E800u);
    sfb_u32(x, 1);
    sfb_u32(x, status);
    sfb_u32(x, (uint32_t)(in_octets >> 32));
    sfb_u32(x, (uint32_t)in_octets);
    sfb_u32(x, in_ucast);
    sfb_u32(x, in_mcast);
    for (int i = 0; i < 4; i++)
        sfb_u32(x, 0); /* broadcast, discards, errors, unknown protos */
    sfb_u32(x, 0);
    sfb_u32(x, 0); /* out octets */
    for (int i = 0; i < 6; i++)
        sfb_u32(x, 0); /* out ucast, mcast, bcast, discards, errors, promiscuous */
    sfb_end(x, r);
    sfb_end(x, s);
    sfb_put_at(x, x->n_samples_at, ++x->n_samples);
}

/** A counter sample with a generic interface record of ifindex. */
static inline void
sfb_counter_sample(struct sfb *x, uint32_t seq, uint32_t ifindex, uint64_t in_octets,
                   uint32_t in_ucast, uint32_t in_mcast, uint32_t status)
{
    sfb_counter_sample_named(x, seq, ifindex, in_octets, in_ucast, in_mcast, status, NULL);
}

#endif
