/*
 * libFuzzer target for the sFlow v5 datagram decoder (drivers/sflow/decode.c): whatever a
 * hostile or broken agent could send to the collector port. The input is copied into a
 * buffer of exactly its size (an over-read is a sanitizer report); every sample handed to
 * the callback must hold its invariants: raw header bytes inside the datagram, 24-bit BTH
 * fields, a known kind, decoded counts within the declared ones, a port name (counter
 * record 1005) inside the datagram, 1-255 bytes without a control byte.
 *
 * The same input then goes through what the driver does with a datagram of a known
 * agent (drivers/sflow/agg.c: accounting, rule matching, aggregation), twice (the second
 * time it is a duplicate unless it does not decode), and a flush whose every label must
 * be a non-empty string and whose per-rule series must stay within the bounds.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg.h"
#include "decode.h"

struct span {
    const uint8_t *buf;
    size_t len;
    uint32_t n_samples;
};

static void
check_records(const struct span *sp, const struct sflow_flow_records *r)
{
    if (r->n_unknown_records > r->n_records)
        abort();
    if (r->raw.present) {
        const uint8_t *h = r->raw.header;
        if (h < sp->buf || r->raw.header_length > sp->len ||
            (size_t)(h - sp->buf) > sp->len - r->raw.header_length)
            abort();
        const struct sflow_packet *p = &r->raw.packet;
        if (p->bth_dest_qp > 0xffffff || p->bth_psn > 0xffffff || p->ecn > 3 || p->dscp > 63 ||
            p->vlan_id > 4095 || p->vlan_pcp > 7)
            abort();
        if (p->has_bth && (!p->has_ports || p->dst_port != 4791))
            abort();
        /* The decoder's view of the bytes must be stable: decode them again. */
        struct sflow_packet again;
        sflow_decode_packet_header(r->raw.protocol, h, r->raw.header_length, &again);
        if (again.has_ethernet != p->has_ethernet || again.has_vlan != p->has_vlan ||
            again.ethertype != p->ethertype || again.ip_version != p->ip_version ||
            again.has_ports != p->has_ports || again.has_bth != p->has_bth ||
            again.truncated != p->truncated || again.bth_psn != p->bth_psn ||
            memcmp(again.dst_ip.bytes, p->dst_ip.bytes, 16) != 0)
            abort();
    }
}

static void
on_sample(const struct sflow_datagram_header *hdr, const struct sflow_sample *s, void *arg)
{
    const struct span *sp = arg;
    if (hdr->version != 5 || s->index >= hdr->n_samples || s->length > sp->len)
        abort();
    switch (s->kind) {
    case SFLOW_KIND_FLOW:
        check_records(sp, &s->u.flow.records);
        break;
    case SFLOW_KIND_DISCARD:
        check_records(sp, &s->u.discard.records);
        break;
    case SFLOW_KIND_COUNTERS: {
        const struct sflow_counter_sample *k = &s->u.counters;
        if (k->n_unknown_records > k->n_records)
            abort();
        /* a port name: inside the datagram, 1..255 bytes, no control byte */
        if (k->port_name_len) {
            if (k->port_name < sp->buf || k->port_name_len > SFLOW_PORT_NAME_MAX ||
                (size_t)(k->port_name - sp->buf) > sp->len - k->port_name_len)
                abort();
            for (uint32_t i = 0; i < k->port_name_len; i++)
                if (k->port_name[i] < 0x20 || k->port_name[i] == 0x7f)
                    abort();
        }
        break;
    }
    default:
        abort();
    }
}

static const struct fs_flow_rule rules[] = {
    {.name = "roce", .protocol = FS_PROTO_UDP, .dst_lo = 4791, .dst_hi = 4791, .tc = -1},
    {.name = "ce", .ecn_ce = true, .tc = -1},
    {.name = "tc3", .protocol = FS_PROTO_TCP, .src_lo = 1, .src_hi = 1024, .tc = 3},
};
#define MAX_PORTS 4

static size_t emitted_rule_series;

static void
check_labels(const struct fs_label *l, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!l[i].name || !l[i].value || !l[i].value[0])
            abort();
}

static void
emit_counter(void *arg, enum fs_metric m, const struct fs_label *l, size_t n, uint64_t raw,
             unsigned bits)
{
    (void)arg, (void)raw;
    check_labels(l, n);
    if (bits != 32 && bits != 64)
        abort();
    if (m == FS_M_FLOW_RULE_PACKETS)
        emitted_rule_series++;
}

static void
emit_gauge(void *arg, enum fs_metric m, const struct fs_label *l, size_t n, double v)
{
    (void)arg, (void)m;
    check_labels(l, n);
    if (v < 0)
        abort();
}

static int
emit_ifname(void *arg, uint32_t ifindex, char *buf, size_t len)
{
    (void)arg;
    if (ifindex % 2)
        return 0;
    snprintf(buf, len, "Eth1/%u", ifindex);
    return 1;
}

static void
emit_rate(void *arg, const char *iface, double v)
{
    (void)arg, (void)v;
    if (!iface || !iface[0])
        abort();
}

static void
emit_reset(void *arg, const char *iface)
{
    (void)arg;
    if (!iface || !iface[0])
        abort();
}

static const struct fs_sflow_emit emit = {emit_counter, emit_gauge, emit_ifname, emit_rate,
                                          emit_reset};

static void
aggregate(const uint8_t *buf, size_t size)
{
    char err[128];
    struct fs_sflow_agg_opts o = {.rules = rules, .n_rules = 3, .max_ports = MAX_PORTS};
    struct fs_sflow_agg *a = fs_sflow_agg_new(&o, err, sizeof err);
    if (!a)
        return;
    int rc1 = fs_sflow_agg_feed(a, buf, size, 1);
    int rc2 = fs_sflow_agg_feed(a, buf, size, 2);
    const struct fs_sflow_agg_stats *st = fs_sflow_agg_get_stats(a);
    if (rc1 == 0 && (rc2 != 1 || st->datagrams != 1 || st->duplicates != 1))
        abort();
    if (rc1 != 0 && (rc2 != -1 || st->datagrams != 0))
        abort();
    /* A refused datagram is refused whole: nothing of it reaches a counter but the
     * decode error (the samples are committed only after the whole datagram decoded). */
    if (rc1 != 0) {
        struct fs_sflow_agg_stats want;
        memset(&want, 0, sizeof want);
        memcpy(want.decode_errors, st->decode_errors, sizeof want.decode_errors);
        if (memcmp(&want, st, sizeof want) != 0)
            abort();
    }
    emitted_rule_series = 0;
    fs_sflow_agg_flush(a, &emit, NULL, 3);
    if (emitted_rule_series > 3 * MAX_PORTS)
        abort();
    fs_sflow_agg_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    struct span sp = {.buf = buf, .len = size};
    struct sflow_datagram_header h;
    struct sflow_decode_stats st;
    char err[256];
    int rc = sflow_decode_datagram(buf, size, on_sample, &sp, &h, &st, err, sizeof(err));
    if (rc == 0 && (h.version != 5 || st.n_samples_decoded + st.n_unknown_samples != h.n_samples))
        abort();
    if (rc != 0 && (err[0] == '\0' || strlen(err) >= sizeof(err)))
        abort();
    /* A tiny error buffer must still be terminated and never overflowed. */
    char small[8];
    (void)sflow_decode_datagram(buf, size, NULL, NULL, NULL, NULL, small, sizeof(small));
    if (memchr(small, '\0', sizeof(small)) == NULL)
        abort();
    aggregate(buf, size);
    free(buf);
    return 0;
}
