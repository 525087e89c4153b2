/*
 * libFuzzer target for the sFlow v5 datagram decoder (drivers/sflow/decode.c): whatever a
 * hostile or broken agent could send to the collector port. The input is copied into a
 * buffer of exactly its size (an over-read is a sanitizer report); every sample handed to
 * the callback must hold its invariants: raw header bytes inside the datagram, 24-bit BTH
 * fields, a known kind, decoded counts within the declared ones.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
    case SFLOW_KIND_COUNTERS:
        if (s->u.counters.n_unknown_records > s->u.counters.n_records)
            abort();
        break;
    default:
        abort();
    }
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
    free(buf);
    return 0;
}
