/*
 * fs-sflow-dump FILE...: decodes each file as one sFlow v5 datagram (a UDP payload) with
 * drivers/sflow/decode.c and prints one JSON object per datagram, in the shape of the
 * truth that tests/sim/sflow/sflow_gen.py writes (keys of absent fields are left out).
 * A datagram that does not decode prints {"datagram": N, "error": "..."}. Exit status: 0
 * when every file decoded, 1 otherwise, 2 on a usage or I/O error.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"

/* Samples of one datagram, printed after the decode so the header comes first. The
 * callback appends to this buffer; a datagram of 64 KiB cannot print more than this. */
struct dump {
    char *out;
    size_t len, cap;
    unsigned n;
};

static void dump_printf(struct dump *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
dump_printf(struct dump *d, const char *fmt, ...)
{
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(d->out + d->len, d->cap - d->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= d->cap - d->len) {
        fprintf(stderr, "fs-sflow-dump: output buffer too small\n");
        exit(2);
    }
    d->len += (size_t)n;
}

static const char *
addr_str(const struct sflow_addr *a, char *buf, size_t len)
{
    const char *s = "";
    if (a->family == 4)
        s = inet_ntop(AF_INET, a->bytes, buf, (socklen_t)len);
    else if (a->family == 6)
        s = inet_ntop(AF_INET6, a->bytes, buf, (socklen_t)len);
    return s ? s : "";
}

static void
dump_records(struct dump *d, const struct sflow_flow_records *r)
{
    char a[INET6_ADDRSTRLEN], b[INET6_ADDRSTRLEN];
    dump_printf(d, ", \"n_records\": %" PRIu32 ", \"unknown_records\": %" PRIu32, r->n_records,
                r->n_unknown_records);
    if (r->has_egress_queue)
        dump_printf(d, ", \"egress_queue\": %" PRIu32, r->egress_queue);
    if (r->has_transit_delay)
        dump_printf(d, ", \"transit_delay_ns\": %" PRIu32, r->transit_delay_ns);
    if (r->has_queue_depth)
        dump_printf(d, ", \"queue_depth_bytes\": %" PRIu32, r->queue_depth_bytes);
    if (r->raw.present) {
        const struct sflow_packet *p = &r->raw.packet;
        dump_printf(d,
                    ", \"raw\": {\"protocol\": %" PRIu32 ", \"frame_length\": %" PRIu32
                    ", \"stripped\": %" PRIu32 ", \"header_length\": %" PRIu32 ", \"pkt\": {",
                    r->raw.protocol, r->raw.frame_length, r->raw.stripped, r->raw.header_length);
        dump_printf(d, "\"truncated\": %s", p->truncated ? "true" : "false");
        if (p->has_ethernet) {
            const uint8_t *m = p->dst_mac, *s = p->src_mac;
            dump_printf(d,
                        ", \"dst_mac\": \"%02x:%02x:%02x:%02x:%02x:%02x\", \"src_mac\": "
                        "\"%02x:%02x:%02x:%02x:%02x:%02x\", \"ethertype\": %u",
                        m[0], m[1], m[2], m[3], m[4], m[5], s[0], s[1], s[2], s[3], s[4], s[5],
                        p->ethertype);
        }
        if (p->has_vlan)
            dump_printf(d, ", \"vlan\": %u, \"pcp\": %u", p->vlan_id, p->vlan_pcp);
        if (p->ip_version)
            dump_printf(d,
                        ", \"ip_version\": %u, \"src_ip\": \"%s\", \"dst_ip\": \"%s\", \"dscp\": "
                        "%u, \"ecn\": %u, \"ip_protocol\": %u, \"ttl\": %u",
                        p->ip_version, addr_str(&p->src_ip, a, sizeof(a)),
                        addr_str(&p->dst_ip, b, sizeof(b)), p->dscp, p->ecn, p->ip_protocol,
                        p->ttl);
        if (p->has_ports)
            dump_printf(d, ", \"src_port\": %u, \"dst_port\": %u", p->src_port, p->dst_port);
        if (p->has_bth)
            dump_printf(d,
                        ", \"bth_opcode\": %u, \"bth_dest_qp\": %" PRIu32 ", \"bth_psn\": %" PRIu32,
                        p->bth_opcode, p->bth_dest_qp, p->bth_psn);
        dump_printf(d, "}}");
    }
}

static void
dump_counters(struct dump *d, const struct sflow_counter_sample *k)
{
    dump_printf(d, ", \"n_records\": %" PRIu32 ", \"unknown_records\": %" PRIu32, k->n_records,
                k->n_unknown_records);
    if (k->has_generic) {
        const struct sflow_if_counters *g = &k->generic;
        dump_printf(
            d,
            ", \"generic\": {\"if_index\": %" PRIu32 ", \"if_type\": %" PRIu32
            ", \"if_speed\": %" PRIu64 ", \"if_direction\": %" PRIu32 ", \"if_status\": %" PRIu32
            ", \"in_octets\": %" PRIu64 ", \"in_ucast\": %" PRIu32 ", \"in_multicast\": %" PRIu32
            ", \"in_broadcast\": %" PRIu32 ", \"in_discards\": %" PRIu32 ", \"in_errors\": %" PRIu32
            ", \"in_unknown_protos\": %" PRIu32 ", \"out_octets\": %" PRIu64
            ", \"out_ucast\": %" PRIu32 ", \"out_multicast\": %" PRIu32
            ", \"out_broadcast\": %" PRIu32 ", \"out_discards\": %" PRIu32
            ", \"out_errors\": %" PRIu32 ", \"promiscuous\": %" PRIu32 "}",
            g->if_index, g->if_type, g->if_speed, g->if_direction, g->if_status, g->in_octets,
            g->in_ucast, g->in_multicast, g->in_broadcast, g->in_discards, g->in_errors,
            g->in_unknown_protos, g->out_octets, g->out_ucast, g->out_multicast, g->out_broadcast,
            g->out_discards, g->out_errors, g->promiscuous);
    }
    if (k->has_ethernet) {
        const struct sflow_eth_counters *e = &k->ethernet;
        dump_printf(
            d,
            ", \"ethernet\": {\"alignment_errors\": %" PRIu32 ", \"fcs_errors\": %" PRIu32
            ", \"single_collision_frames\": %" PRIu32 ", \"multiple_collision_frames\": %" PRIu32
            ", \"sqe_test_errors\": %" PRIu32 ", \"deferred_transmissions\": %" PRIu32
            ", \"late_collisions\": %" PRIu32 ", \"excessive_collisions\": %" PRIu32
            ", \"internal_mac_transmit_errors\": %" PRIu32 ", \"carrier_sense_errors\": %" PRIu32
            ", \"frame_too_longs\": %" PRIu32 ", \"internal_mac_receive_errors\": %" PRIu32
            ", \"symbol_errors\": %" PRIu32 "}",
            e->alignment_errors, e->fcs_errors, e->single_collision_frames,
            e->multiple_collision_frames, e->sqe_test_errors, e->deferred_transmissions,
            e->late_collisions, e->excessive_collisions, e->internal_mac_transmit_errors,
            e->carrier_sense_errors, e->frame_too_longs, e->internal_mac_receive_errors,
            e->symbol_errors);
    }
}

static void
on_sample(const struct sflow_datagram_header *hdr, const struct sflow_sample *s, void *arg)
{
    struct dump *d = arg;
    (void)hdr;
    dump_printf(d, "%s{\"index\": %" PRIu32 ", \"format\": %" PRIu32, d->n++ ? ", " : "", s->index,
                s->format);
    switch (s->kind) {
    case SFLOW_KIND_FLOW: {
        const struct sflow_flow_sample *f = &s->u.flow;
        dump_printf(
            d,
            ", \"kind\": \"flow\", \"sequence\": %" PRIu32 ", \"source_type\": %" PRIu32
            ", \"source_index\": %" PRIu32 ", \"sampling_rate\": %" PRIu32
            ", \"sample_pool\": %" PRIu32 ", \"drops\": %" PRIu32 ", \"input_format\": %" PRIu32
            ", \"input\": %" PRIu32 ", \"output_format\": %" PRIu32 ", \"output\": %" PRIu32,
            f->sequence, f->source_id_type, f->source_id_index, f->sampling_rate, f->sample_pool,
            f->drops, f->input.format, f->input.value, f->output.format, f->output.value);
        dump_records(d, &f->records);
        break;
    }
    case SFLOW_KIND_COUNTERS: {
        const struct sflow_counter_sample *k = &s->u.counters;
        dump_printf(d,
                    ", \"kind\": \"counters\", \"sequence\": %" PRIu32 ", \"source_type\": %" PRIu32
                    ", \"source_index\": %" PRIu32,
                    k->sequence, k->source_id_type, k->source_id_index);
        dump_counters(d, k);
        break;
    }
    case SFLOW_KIND_DISCARD: {
        const struct sflow_discard_sample *x = &s->u.discard;
        dump_printf(d,
                    ", \"kind\": \"discard\", \"sequence\": %" PRIu32 ", \"source_type\": %" PRIu32
                    ", \"source_index\": %" PRIu32 ", \"drops\": %" PRIu32 ", \"input\": %" PRIu32
                    ", \"output\": %" PRIu32 ", \"reason\": %" PRIu32,
                    x->sequence, x->source_id_type, x->source_id_index, x->drops, x->input,
                    x->output, x->reason);
        dump_records(d, &x->records);
        break;
    }
    }
    dump_printf(d, "}");
}

/* Reads a whole file of at most SFLOW_DATAGRAM_MAX bytes into buf. */
static int
read_datagram(const char *path, uint8_t *buf, size_t *len)
{
    int rc = -1;
    FILE *f = fopen(path, "rb");
    if (f) {
        *len = fread(buf, 1, SFLOW_DATAGRAM_MAX + 1, f);
        rc = ferror(f) || *len > SFLOW_DATAGRAM_MAX ? -1 : 0;
        fclose(f);
    }
    return rc;
}

int
main(int argc, char **argv)
{
    static uint8_t buf[SFLOW_DATAGRAM_MAX + 1];
    static char out[1 << 20];
    int status = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: fs-sflow-dump DATAGRAM_FILE...\n");
        return 2;
    }
    for (int i = 1; i < argc && status != 2; i++) {
        struct dump d = {.out = out, .cap = sizeof(out)};
        struct sflow_datagram_header h;
        struct sflow_decode_stats st;
        char err[256], agent[INET6_ADDRSTRLEN];
        size_t len = 0;
        out[0] = '\0';
        if (read_datagram(argv[i], buf, &len) != 0) {
            fprintf(stderr, "fs-sflow-dump: cannot read %s (or larger than %u bytes)\n", argv[i],
                    SFLOW_DATAGRAM_MAX);
            status = 2;
            break;
        }
        if (sflow_decode_datagram(buf, len, on_sample, &d, &h, &st, err, sizeof(err)) != 0) {
            /* The message has no quotes or backslashes (decode.c writes plain text). */
            printf("{\"datagram\": %d, \"error\": \"%s\"}\n", i - 1, err);
            status = 1;
            continue;
        }
        printf("{\"datagram\": %d, \"version\": %" PRIu32
               ", \"agent\": \"%s\", \"sub_agent\": %" PRIu32 ", \"sequence\": %" PRIu32
               ", \"uptime_ms\": %" PRIu32 ", \"n_samples\": %" PRIu32
               ", \"unknown_samples\": %" PRIu32 ", \"unknown_records\": %" PRIu32
               ", \"trailing_bytes\": %" PRIu32 ", \"samples\": [%s]}\n",
               i - 1, h.version, addr_str(&h.agent, agent, sizeof(agent)), h.sub_agent_id,
               h.sequence, h.uptime_ms, h.n_samples, st.n_unknown_samples, st.n_unknown_records,
               st.n_trailing_bytes, out);
    }
    return status;
}
