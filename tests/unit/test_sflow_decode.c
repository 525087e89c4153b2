/*
 * sFlow v5 decoder (drivers/sflow/decode.c) on built datagrams: a valid one with every kind
 * of sample decodes to its fields; every prefix of it is refused without reading past the
 * prefix (each is copied into a buffer of exactly its size, so a sanitizer build catches an
 * over-read); lengths past their container name where; zero samples, version 4, huge sample
 * and record counts, short counter records, oversize datagrams; unknown samples and records
 * are skipped and counted; the sampled-header parser on QinQ, IPv4 options, fragments and
 * cut headers; port name records (1005): kept when usable as a name, ignored and counted
 * when empty, over 255 bytes or with a control byte, an error when past their record.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decode.h"

/* ---------------- an XDR writer ---------------- */

struct xdr {
    uint8_t b[4096];
    size_t n;
};

static void
put32(struct xdr *x, uint32_t v)
{
    assert_true(x->n + 4 <= sizeof(x->b));
    x->b[x->n++] = (uint8_t)(v >> 24);
    x->b[x->n++] = (uint8_t)(v >> 16);
    x->b[x->n++] = (uint8_t)(v >> 8);
    x->b[x->n++] = (uint8_t)v;
}

static void
put64(struct xdr *x, uint64_t v)
{
    put32(x, (uint32_t)(v >> 32));
    put32(x, (uint32_t)v);
}

static void
put_bytes(struct xdr *x, const uint8_t *p, size_t n)
{
    assert_true(x->n + n + 3 <= sizeof(x->b));
    memcpy(x->b + x->n, p, n);
    x->n += n;
    while (x->n % 4)
        x->b[x->n++] = 0;
}

/* Starts a tagged structure; returns where its length goes (filled by tlv_end). */
static size_t
tlv_begin(struct xdr *x, uint32_t enterprise, uint32_t format)
{
    put32(x, enterprise << 12 | format);
    put32(x, 0);
    return x->n;
}

static void
tlv_end(struct xdr *x, size_t body)
{
    uint32_t len = (uint32_t)(x->n - body);
    x->b[body - 4] = (uint8_t)(len >> 24);
    x->b[body - 3] = (uint8_t)(len >> 16);
    x->b[body - 2] = (uint8_t)(len >> 8);
    x->b[body - 1] = (uint8_t)len;
}

static void
put_header(struct xdr *x, uint32_t n_samples)
{
    put32(x, 5);
    put32(x, 1);
    put32(x, 0x0a000001); /* 10.0.0.1 */
    put32(x, 7);          /* sub-agent */
    put32(x, 42);         /* sequence */
    put32(x, 123456);     /* uptime */
    put32(x, n_samples);
}

/* A tagged RoCEv2 frame: VLAN 100 PCP 3, IPv4 DSCP 26 CE, UDP to 4791, BTH. */
static size_t
roce_frame(uint8_t *f)
{
    static const uint8_t frame[] = {
        0x02, 0,           0,    0,    0,    0x02, 0x02, 0,    0,  0,  0, 0x01, /* dst, src */
        0x81, 0x00,        0x60, 0x64, /* 802.1Q: PCP 3, VLAN 100 */
        0x08, 0x00,                    /* IPv4 */
        0x45, 26 << 2 | 3, 0,    60,   0x12, 0x34, 0x40, 0,    64, 17, 0, 0,
        192,  168,         1,    1,    192,  168,  1,    2,    /* IPv4 header, TTL 64, UDP */
        0xc3, 0x50,        0x12, 0xb7, 0,    40,   0,    0,    /* UDP 50000 -> 4791 */
        0x0a, 0x40,        0xff, 0xff, 0,    0x12, 0x34, 0x56, /* BTH: opcode 10, dest QP 0x123456
                                                                */
        0x80, 0xab,        0xcd, 0xef,                         /* AckReq, PSN 0xabcdef */
        1,    2,           3,    4,    5,    6,    7,    8,    9,  10};
    memcpy(f, frame, sizeof(frame));
    return sizeof(frame);
}

/* Flow sample (compact) with queue/transit records, an unknown record and the header. */
static void
put_flow_sample(struct xdr *x)
{
    uint8_t frame[128];
    size_t n = roce_frame(frame);
    size_t s = tlv_begin(x, 0, SFLOW_SAMPLE_FLOW);
    put32(x, 1001);         /* sequence */
    put32(x, 0 << 24 | 17); /* source id */
    put32(x, 400);          /* rate */
    put32(x, 40000);        /* pool */
    put32(x, 2);            /* drops */
    put32(x, 17);           /* input */
    put32(x, 1u << 30 | 5); /* output: format 1 (discarded), value 5 */
    put32(x, 5);            /* records */
    size_t r = tlv_begin(x, 0, SFLOW_FLOW_EGRESS_QUEUE);
    put32(x, 3);
    tlv_end(x, r);
    r = tlv_begin(x, 0, SFLOW_FLOW_TRANSIT_DELAY);
    put32(x, 12345);
    tlv_end(x, r);
    r = tlv_begin(x, 0, SFLOW_FLOW_QUEUE_DEPTH);
    put32(x, 65536);
    tlv_end(x, r);
    r = tlv_begin(x, 4242, 9); /* unknown */
    put32(x, 0xdeadbeef);
    tlv_end(x, r);
    r = tlv_begin(x, 0, SFLOW_FLOW_RAW_HEADER);
    put32(x, SFLOW_HEADER_ETHERNET);
    put32(x, (uint32_t)n + 4);
    put32(x, 4);
    put32(x, (uint32_t)n);
    put_bytes(x, frame, n);
    tlv_end(x, r);
    tlv_end(x, s);
}

static void
put_counter_sample(struct xdr *x)
{
    size_t s = tlv_begin(x, 0, SFLOW_SAMPLE_COUNTERS_EXPANDED);
    put32(x, 77);
    put32(x, 0);
    put32(x, 1u << 28); /* an ifIndex beyond 24 bits */
    put32(x, 2);
    size_t r = tlv_begin(x, 0, SFLOW_COUNTERS_GENERIC_IF);
    put32(x, 1u << 28);
    put32(x, 6);
    put64(x, 400000000000ull);
    put32(x, 1);
    put32(x, 3);
    put64(x, 0xfffffffffffffff0ull); /* in octets */
    for (int i = 0; i < 6; i++)
        put32(x, 100 + (uint32_t)i);
    put64(x, 1ull << 60); /* out octets */
    for (int i = 0; i < 5; i++)
        put32(x, 200 + (uint32_t)i);
    put32(x, 0);
    tlv_end(x, r);
    r = tlv_begin(x, 0, SFLOW_COUNTERS_ETHERNET);
    for (int i = 0; i < 13; i++)
        put32(x, 300 + (uint32_t)i);
    tlv_end(x, r);
    tlv_end(x, s);
}

static void
put_discard_sample(struct xdr *x)
{
    uint8_t frame[128];
    size_t n = roce_frame(frame);
    size_t s = tlv_begin(x, 0, SFLOW_SAMPLE_DISCARD);
    put32(x, 9);   /* sequence */
    put32(x, 0);   /* source type */
    put32(x, 21);  /* source index */
    put32(x, 4);   /* drops */
    put32(x, 21);  /* input */
    put32(x, 0);   /* output unknown */
    put32(x, 259); /* reason: no_buffer_space */
    put32(x, 1);
    size_t r = tlv_begin(x, 0, SFLOW_FLOW_RAW_HEADER);
    put32(x, SFLOW_HEADER_ETHERNET);
    put32(x, (uint32_t)n + 4);
    put32(x, 4);
    put32(x, 50); /* cut inside the BTH: not a multiple of 4, padded */
    put_bytes(x, frame, 50);
    tlv_end(x, r);
    tlv_end(x, s);
}

static void
put_unknown_sample(struct xdr *x)
{
    size_t s = tlv_begin(x, 4242, 3);
    put32(x, 1);
    put32(x, 2);
    tlv_end(x, s);
}

/* The full datagram: flow, unknown, counters, discard. */
static void
build_datagram(struct xdr *x)
{
    memset(x, 0, sizeof(*x));
    put_header(x, 4);
    put_flow_sample(x);
    put_unknown_sample(x);
    put_counter_sample(x);
    put_discard_sample(x);
}

/* ---------------- collecting what the decoder reports ---------------- */

struct seen {
    unsigned n;
    struct sflow_sample s[8];
};

static void
collect(const struct sflow_datagram_header *hdr, const struct sflow_sample *s, void *arg)
{
    struct seen *seen = arg;
    (void)hdr;
    if (seen->n < 8)
        seen->s[seen->n] = *s;
    seen->n++;
}

/* Decodes a copy of exactly n bytes, so that any read past it is an over-read. */
static int
decode_exact(const uint8_t *buf, size_t n, struct seen *seen, struct sflow_datagram_header *h,
             struct sflow_decode_stats *st, char *err, size_t errlen)
{
    uint8_t *copy = malloc(n ? n : 1);
    assert_non_null(copy);
    memcpy(copy, buf, n);
    memset(seen, 0, sizeof(*seen));
    int rc = sflow_decode_datagram(copy, n, collect, seen, h, st, err, errlen);
    free(copy);
    return rc;
}

static void
test_valid_datagram(void **state)
{
    (void)state;
    struct xdr x;
    struct seen seen;
    struct sflow_datagram_header h;
    struct sflow_decode_stats st;
    char err[256];
    build_datagram(&x);
    assert_int_equal(decode_exact(x.b, x.n, &seen, &h, &st, err, sizeof(err)), 0);
    assert_string_equal(err, "");
    assert_int_equal(h.version, 5);
    assert_int_equal(h.agent.family, 4);
    assert_memory_equal(h.agent.bytes, ((uint8_t[]){10, 0, 0, 1}), 4);
    assert_int_equal(h.sub_agent_id, 7);
    assert_int_equal(h.sequence, 42);
    assert_int_equal(h.uptime_ms, 123456);
    assert_int_equal(h.n_samples, 4);
    assert_int_equal(seen.n, 3);
    assert_int_equal(st.n_samples_decoded, 3);
    assert_int_equal(st.n_unknown_samples, 1);
    assert_int_equal(st.n_unknown_records, 1);
    assert_int_equal(st.n_trailing_bytes, 0);

    const struct sflow_sample *s = &seen.s[0];
    assert_int_equal(s->kind, SFLOW_KIND_FLOW);
    assert_int_equal(s->index, 0);
    const struct sflow_flow_sample *f = &s->u.flow;
    assert_int_equal(f->sequence, 1001);
    assert_int_equal(f->source_id_type, 0);
    assert_int_equal(f->source_id_index, 17);
    assert_int_equal(f->sampling_rate, 400);
    assert_int_equal(f->sample_pool, 40000);
    assert_int_equal(f->drops, 2);
    assert_int_equal(f->input.format, 0);
    assert_int_equal(f->input.value, 17);
    assert_int_equal(f->output.format, 1);
    assert_int_equal(f->output.value, 5);
    assert_int_equal(f->records.n_records, 5);
    assert_int_equal(f->records.n_unknown_records, 1);
    assert_true(f->records.has_egress_queue && f->records.egress_queue == 3);
    assert_true(f->records.has_transit_delay && f->records.transit_delay_ns == 12345);
    assert_true(f->records.has_queue_depth && f->records.queue_depth_bytes == 65536);
    const struct sflow_raw_header *raw = &f->records.raw;
    assert_true(raw->present);
    assert_int_equal(raw->protocol, 1);
    assert_int_equal(raw->stripped, 4);
    assert_int_equal(raw->header_length, 68);
    const struct sflow_packet *p = &raw->packet;
    assert_true(p->has_ethernet && p->has_vlan);
    assert_int_equal(p->vlan_id, 100);
    assert_int_equal(p->vlan_pcp, 3);
    assert_int_equal(p->ethertype, 0x0800);
    assert_int_equal(p->ip_version, 4);
    assert_memory_equal(p->dst_ip.bytes, ((uint8_t[]){192, 168, 1, 2}), 4);
    assert_int_equal(p->dscp, 26);
    assert_int_equal(p->ecn, 3);
    assert_int_equal(p->ttl, 64);
    assert_int_equal(p->ip_protocol, 17);
    assert_true(p->has_ports && p->src_port == 50000 && p->dst_port == 4791);
    assert_true(p->has_bth);
    assert_int_equal(p->bth_opcode, 10);
    assert_int_equal(p->bth_dest_qp, 0x123456);
    assert_int_equal(p->bth_psn, 0xabcdef);
    assert_false(p->truncated);

    s = &seen.s[1];
    assert_int_equal(s->kind, SFLOW_KIND_COUNTERS);
    assert_int_equal(s->index, 2);
    assert_int_equal(s->format, SFLOW_SAMPLE_COUNTERS_EXPANDED);
    const struct sflow_counter_sample *k = &s->u.counters;
    assert_int_equal(k->source_id_index, 1u << 28);
    assert_true(k->has_generic && k->has_ethernet);
    assert_int_equal(k->generic.if_speed, 400000000000ull);
    assert_true(k->generic.in_octets == 0xfffffffffffffff0ull);
    assert_true(k->generic.out_octets == 1ull << 60);
    assert_int_equal(k->generic.in_ucast, 100);
    assert_int_equal(k->generic.in_unknown_protos, 105);
    assert_int_equal(k->generic.out_errors, 204);
    assert_int_equal(k->ethernet.alignment_errors, 300);
    assert_int_equal(k->ethernet.symbol_errors, 312);

    s = &seen.s[2];
    assert_int_equal(s->kind, SFLOW_KIND_DISCARD);
    const struct sflow_discard_sample *d = &s->u.discard;
    assert_int_equal(d->sequence, 9);
    assert_int_equal(d->source_id_index, 21);
    assert_int_equal(d->drops, 4);
    assert_int_equal(d->input, 21);
    assert_int_equal(d->output, 0);
    assert_int_equal(d->reason, 259);
    assert_int_equal(d->records.raw.header_length, 50);
    /* 50 bytes: Ethernet+VLAN+IPv4+UDP (46) and 4 bytes of the BTH. */
    assert_true(d->records.raw.packet.has_ports);
    assert_false(d->records.raw.packet.has_bth);
    assert_true(d->records.raw.packet.truncated);
}

static void
test_truncated_at_every_byte(void **state)
{
    (void)state;
    struct xdr x;
    struct seen seen;
    struct sflow_datagram_header h;
    struct sflow_decode_stats st;
    char err[256];
    build_datagram(&x);
    for (size_t n = 0; n < x.n; n++) {
        err[0] = 'x';
        if (decode_exact(x.b, n, &seen, &h, &st, err, sizeof(err)) != -1)
            fail_msg("a datagram cut at %zu of %zu bytes was accepted", n, x.n);
        if (err[0] == '\0' || err[0] == 'x')
            fail_msg("no message for a datagram cut at %zu bytes", n);
        /* The samples before the cut, and only those, were handed over. */
        assert_int_equal(seen.n, st.n_samples_decoded);
        assert_true(seen.n < 3);
    }
}

/* Overwrites the u32 at offset off. */
static void
poke32(struct xdr *x, size_t off, uint32_t v)
{
    x->b[off] = (uint8_t)(v >> 24);
    x->b[off + 1] = (uint8_t)(v >> 16);
    x->b[off + 2] = (uint8_t)(v >> 8);
    x->b[off + 3] = (uint8_t)v;
}

static void
expect_error(const struct xdr *x, const char *const *parts)
{
    struct seen seen;
    struct sflow_datagram_header h;
    struct sflow_decode_stats st;
    char err[256];
    assert_int_equal(decode_exact(x->b, x->n, &seen, &h, &st, err, sizeof(err)), -1);
    for (; *parts; parts++)
        if (!strstr(err, *parts))
            fail_msg("error '%s' lacks '%s'", err, *parts);
}

static void
test_lengths_past_the_end(void **state)
{
    (void)state;
    struct xdr x;
    /* The first sample's length: header (28 bytes), tag, then the length at 32. */
    build_datagram(&x);
    poke32(&x, 32, (uint32_t)x.n);
    expect_error(&x, (const char *const[]){"sample 0 (flow sample 0:1)", "runs past the datagram",
                                           "offset 36", NULL});
    build_datagram(&x);
    poke32(&x, 32, 0xffffffffu);
    expect_error(&x, (const char *const[]){"sample 0", "length 4294967295", NULL});

    /* The first record's length: sample body at 36, 7 fixed words, record count, tag. */
    build_datagram(&x);
    poke32(&x, 36 + 32 + 4, 1000);
    expect_error(&x, (const char *const[]){"sample 0 (flow sample 0:1) record 0 (format 0:1036)",
                                           "runs past its sample", NULL});

    /* A header length beyond its record: the raw header is record 4 of sample 0. */
    build_datagram(&x);
    size_t rec = 36 + 32;
    for (int i = 0; i < 4; i++) {
        uint32_t len = (uint32_t)x.b[rec + 4] << 24 | (uint32_t)x.b[rec + 5] << 16 |
                       (uint32_t)x.b[rec + 6] << 8 | x.b[rec + 7];
        rec += 8 + len;
    }
    poke32(&x, rec + 8 + 12, 69); /* 68 bytes there; 69 pads to 72 */
    expect_error(&x, (const char *const[]){"record 4", "header length 69 runs past", NULL});
    poke32(&x, rec + 8 + 12, 0xfffffffdu); /* would wrap a 32-bit padded length */
    expect_error(&x, (const char *const[]){"record 4", "header length 4294967293", NULL});
}

static void
test_zero_samples(void **state)
{
    (void)state;
    struct xdr x = {0};
    struct seen seen;
    struct sflow_datagram_header h;
    struct sflow_decode_stats st;
    char err[256];
    put_header(&x, 0);
    assert_int_equal(decode_exact(x.b, x.n, &seen, &h, &st, err, sizeof(err)), 0);
    assert_int_equal(seen.n, 0);
    assert_int_equal(h.n_samples, 0);
    assert_int_equal(st.n_samples_decoded, 0);
    /* Bytes after the last declared sample are counted, not decoded. */
    put32(&x, 0xdeadbeef);
    assert_int_equal(decode_exact(x.b, x.n, &seen, &h, &st, err, sizeof(err)), 0);
    assert_int_equal(st.n_trailing_bytes, 4);
    assert_int_equal(seen.n, 0);
}

static void
test_version_4_and_bad_agent(void **state)
{
    (void)state;
    struct xdr x;
    build_datagram(&x);
    poke32(&x, 0, 4);
    expect_error(&x, (const char *const[]){"version 4", NULL});
    build_datagram(&x);
    poke32(&x, 4, 3);
    expect_error(&x, (const char *const[]){"agent address type 3", NULL});
    /* IPv6 agent: 16 bytes of address, then the rest of the header. */
    struct xdr y = {0};
    struct seen seen;
    struct sflow_datagram_header h;
    struct sflow_decode_stats st;
    char err[256];
    put32(&y, 5);
    put32(&y, 2);
    for (int i = 0; i < 4; i++)
        put32(&y, 0x20010db8u + (uint32_t)i);
    put32(&y, 0);
    put32(&y, 1);
    put32(&y, 2);
    put32(&y, 0);
    assert_int_equal(decode_exact(y.b, y.n, &seen, &h, &st, err, sizeof(err)), 0);
    assert_int_equal(h.agent.family, 6);
    assert_int_equal(h.agent.bytes[15], 0xbb);
}

static void
test_huge_counts(void **state)
{
    (void)state;
    struct xdr x;
    build_datagram(&x);
    poke32(&x, 24, 0xffffffffu); /* number of samples */
    expect_error(&x, (const char *const[]){"declares 4294967295 samples but ends after 4", NULL});
    /* A record count larger than the sample holds. */
    build_datagram(&x);
    poke32(&x, 36 + 28, 0xffffffffu);
    expect_error(&x, (const char *const[]){"sample 0", "declares 4294967295 records", NULL});
}

static void
test_short_counter_record(void **state)
{
    (void)state;
    struct xdr x = {0};
    put_header(&x, 1);
    size_t s = tlv_begin(&x, 0, SFLOW_SAMPLE_COUNTERS);
    put32(&x, 1);
    put32(&x, 3);
    put32(&x, 1);
    size_t r = tlv_begin(&x, 0, SFLOW_COUNTERS_GENERIC_IF);
    for (int i = 0; i < 10; i++)
        put32(&x, 0);
    tlv_end(&x, r);
    tlv_end(&x, s);
    expect_error(&x, (const char *const[]){"generic interface counters", "length 40", NULL});
}

/* A counter sample of ifIndex 3: a port name record whose string declares len bytes and
 * carries the bytes of name (n of them), then a minimal generic record. */
static void
put_named_counter_sample(struct xdr *x, uint32_t len, const uint8_t *name, size_t n)
{
    put_header(x, 1);
    size_t s = tlv_begin(x, 0, SFLOW_SAMPLE_COUNTERS);
    put32(x, 1);
    put32(x, 3);
    put32(x, 2);
    size_t r = tlv_begin(x, 0, SFLOW_COUNTERS_PORT_NAME);
    put32(x, len);
    if (n)
        put_bytes(x, name, n);
    tlv_end(x, r);
    r = tlv_begin(x, 0, SFLOW_COUNTERS_GENERIC_IF);
    for (int i = 0; i < 22; i++)
        put32(x, i == 0 ? 3 : 0);
    tlv_end(x, r);
    tlv_end(x, s);
}

struct name_seen {
    char name[300];
    uint32_t len, bad;
    bool generic;
};

static void
collect_name(const struct sflow_datagram_header *hdr, const struct sflow_sample *s, void *arg)
{
    struct name_seen *ns = arg;
    (void)hdr;
    assert_int_equal(s->kind, SFLOW_KIND_COUNTERS);
    ns->len = s->u.counters.port_name_len;
    ns->bad = s->u.counters.n_bad_port_names;
    ns->generic = s->u.counters.has_generic;
    assert_true(ns->len < sizeof ns->name);
    if (ns->len)
        memcpy(ns->name, s->u.counters.port_name, ns->len);
    ns->name[ns->len] = '\0';
}

/* Decodes a copy of exactly the datagram's bytes; the name is copied in the callback. */
static int
decode_name(const struct xdr *x, struct name_seen *ns, char *err, size_t errlen)
{
    uint8_t *copy = malloc(x->n);
    assert_non_null(copy);
    memcpy(copy, x->b, x->n);
    memset(ns, 0, sizeof *ns);
    int rc = sflow_decode_datagram(copy, x->n, collect_name, ns, NULL, NULL, err, errlen);
    free(copy);
    return rc;
}

static void
test_port_name(void **state)
{
    (void)state;
    struct xdr x = {0};
    struct name_seen ns;
    char err[256];
    uint8_t long_name[256];
    memset(long_name, 'a', sizeof long_name);
    put_named_counter_sample(&x, 4, (const uint8_t *)"swp1", 4);
    assert_int_equal(decode_name(&x, &ns, err, sizeof err), 0);
    assert_string_equal(ns.name, "swp1");
    assert_true(ns.generic);
    /* 255 bytes is the longest name; 256, empty or a control byte: ignored, counted */
    memset(&x, 0, sizeof x);
    put_named_counter_sample(&x, 255, long_name, 255);
    assert_int_equal(decode_name(&x, &ns, err, sizeof err), 0);
    assert_int_equal(ns.len, 255);
    const struct {
        uint32_t len;
        const uint8_t *bytes;
    } bad[] = {{256, long_name},
               {0, NULL},
               {5, (const uint8_t *)"sw\np1"},
               {3, (const uint8_t *)"s\x7fp"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&x, 0, sizeof x);
        put_named_counter_sample(&x, bad[i].len, bad[i].bytes, bad[i].len);
        assert_int_equal(decode_name(&x, &ns, err, sizeof err), 0);
        assert_int_equal(ns.len, 0);
        assert_int_equal(ns.bad, 1);
        assert_true(ns.generic);
    }
    /* a length past its record: the datagram does not decode */
    memset(&x, 0, sizeof x);
    put_named_counter_sample(&x, 9, (const uint8_t *)"swp1", 4);
    assert_int_equal(decode_name(&x, &ns, err, sizeof err), -1);
    assert_non_null(strstr(err, "port name"));
}

static void
test_oversize_and_null(void **state)
{
    (void)state;
    char err[128];
    struct sflow_decode_stats st;
    uint8_t *big = calloc(SFLOW_DATAGRAM_MAX + 1, 1);
    assert_non_null(big);
    assert_int_equal(
        sflow_decode_datagram(big, SFLOW_DATAGRAM_MAX + 1, NULL, NULL, NULL, &st, err, sizeof(err)),
        -1);
    assert_non_null(strstr(err, "larger than a UDP payload"));
    free(big);
    assert_int_equal(sflow_decode_datagram(NULL, 0, NULL, NULL, NULL, NULL, err, sizeof(err)), -1);
    assert_int_equal(sflow_decode_datagram(NULL, 4, NULL, NULL, NULL, NULL, NULL, 0), -1);
}

static void
test_packet_headers(void **state)
{
    (void)state;
    struct sflow_packet p;
    uint8_t f[128];
    size_t n = roce_frame(f);

    /* QinQ: an 802.1ad tag outside the 802.1Q one; the outer tag is reported. */
    uint8_t q[160];
    memcpy(q, f, 12);
    q[12] = 0x88, q[13] = 0xa8, q[14] = 0x20, q[15] = 0x0a; /* PCP 1, VLAN 10 */
    memcpy(q + 16, f + 12, n - 12);
    sflow_decode_packet_header(SFLOW_HEADER_ETHERNET, q, n + 4, &p);
    assert_true(p.has_vlan);
    assert_int_equal(p.vlan_id, 10);
    assert_int_equal(p.vlan_pcp, 1);
    assert_int_equal(p.ethertype, 0x0800);
    assert_true(p.has_bth);

    /* Every cut of the frame: never more than what fits, truncated when a layer is cut. */
    for (size_t cut = 0; cut < n; cut++) {
        uint8_t *c = malloc(cut ? cut : 1);
        assert_non_null(c);
        memcpy(c, f, cut);
        sflow_decode_packet_header(SFLOW_HEADER_ETHERNET, c, cut, &p);
        free(c);
        assert_true(p.has_bth == (cut >= 58));
        assert_true(p.has_ports == (cut >= 42));
        assert_true(p.ip_version == (cut >= 38 ? 4 : 0));
        if (cut < 58)
            assert_true(p.truncated);
    }

    /* IPv4 with options (IHL 6): ports after 24 bytes. A later fragment: no ports. */
    uint8_t o[128];
    memcpy(o, f + 18, n - 18); /* from the IPv4 header */
    uint8_t opt[128];
    memcpy(opt, o, 20);
    opt[0] = 0x46;
    memset(opt + 20, 1, 4);
    memcpy(opt + 24, o + 20, n - 18 - 20);
    sflow_decode_packet_header(SFLOW_HEADER_IPV4, opt, n - 18 + 4, &p);
    assert_int_equal(p.ip_version, 4);
    assert_true(p.has_ports && p.dst_port == 4791);
    assert_true(p.has_bth && p.bth_dest_qp == 0x123456);
    o[6] = 0x00, o[7] = 0x10; /* fragment offset 16 */
    sflow_decode_packet_header(SFLOW_HEADER_IPV4, o, n - 18, &p);
    assert_int_equal(p.ip_version, 4);
    assert_false(p.has_ports);
    /* A bad IHL (< 5) reads the IP header but no ports. */
    o[6] = 0x40, o[7] = 0;
    o[0] = 0x42;
    sflow_decode_packet_header(SFLOW_HEADER_IPV4, o, n - 18, &p);
    assert_int_equal(p.ip_version, 4);
    assert_false(p.has_ports);

    /* IPv6 TCP with traffic class 0x6b (DSCP 26, ECN 3), hop limit 63. */
    uint8_t v6[14 + 40 + 20] = {0};
    v6[12] = 0x86, v6[13] = 0xdd;
    v6[14] = 0x66, v6[15] = 0xb0; /* version 6, traffic class 0x6b */
    v6[14 + 6] = 6, v6[14 + 7] = 63;
    v6[14 + 8] = 0xfd, v6[14 + 39] = 2;
    v6[54] = 0xc3, v6[55] = 0x50, v6[56] = 0xc3, v6[57] = 0x51;
    sflow_decode_packet_header(SFLOW_HEADER_ETHERNET, v6, sizeof(v6), &p);
    assert_int_equal(p.ip_version, 6);
    assert_int_equal(p.dscp, 26);
    assert_int_equal(p.ecn, 3);
    assert_int_equal(p.ttl, 63);
    assert_int_equal(p.src_ip.bytes[0], 0xfd);
    assert_int_equal(p.dst_ip.bytes[15], 2);
    assert_true(p.has_ports && p.src_port == 50000 && p.dst_port == 50001);
    assert_false(p.has_bth);
    sflow_decode_packet_header(SFLOW_HEADER_ETHERNET, v6, 14 + 39, &p);
    assert_int_equal(p.ip_version, 0);
    assert_true(p.truncated);

    /* An unknown header protocol: nothing read, not an error. */
    sflow_decode_packet_header(99, f, n, &p);
    assert_false(p.has_ethernet);
    assert_int_equal(p.ip_version, 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_datagram),
        cmocka_unit_test(test_truncated_at_every_byte),
        cmocka_unit_test(test_lengths_past_the_end),
        cmocka_unit_test(test_zero_samples),
        cmocka_unit_test(test_version_4_and_bad_agent),
        cmocka_unit_test(test_huge_counts),
        cmocka_unit_test(test_short_counter_record),
        cmocka_unit_test(test_oversize_and_null),
        cmocka_unit_test(test_port_name),
        cmocka_unit_test(test_packet_headers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
