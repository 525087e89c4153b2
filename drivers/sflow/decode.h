/*
 * Decoder of one sFlow version 5 datagram (sflow.org sflow_version_5.txt, with the
 * dropped-packet notification of sflow_drops.txt and the transit/queue flow records of
 * sflow_transit.txt). A pure library: no sockets, no globals, no allocation. The driver
 * feeds it received UDP payloads; tests and the fuzzer feed it buffers.
 *
 * What is decoded:
 *   - the datagram header (version 5 only; IPv4 or IPv6 agent address);
 *   - flow samples (format 1) and expanded flow samples (3): the raw packet header record
 *     (1), decoded further into Ethernet, 802.1Q, IPv4/IPv6, UDP/TCP and the RoCEv2 Base
 *     Transport Header when the UDP destination port is 4791; the extended egress queue
 *     (1036), transit delay (1039) and queue depth (1040) records;
 *   - counter samples (2) and expanded counter samples (4): generic interface (1),
 *     Ethernet (2) and port name (1005, host-sflow's portName) counter records;
 *   - dropped-packet notifications (sample format 5): reason code, input/output and the
 *     same flow records as a flow sample.
 * Samples and records of other enterprises or formats are skipped by their length and
 * counted. A length that runs past its container (datagram, sample, record) is an error
 * whose message names the sample, the record and the byte offset.
 *
 * Bounds. Every read is checked against the end of the datagram, the sample or the
 * record it belongs to; nothing is read past `len` bytes of the caller's buffer. The
 * loops are bounded by the data: each sample and each record consumes at least 8 bytes,
 * so a huge declared count ends at the end of the buffer, with an error.
 *
 * Ownership. The caller owns the datagram buffer; it is never written. Pointers in the
 * structures passed to the callback (sflow_raw_header.header,
 * sflow_counter_sample.port_name) point into that buffer and
 * are valid while the caller keeps it. The structures themselves live on the decoder's
 * stack and are valid only during the callback: copy what you keep. The decoder
 * allocates nothing.
 */
#ifndef FS_SFLOW_DECODE_H
#define FS_SFLOW_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** The largest datagram the decoder accepts (a UDP payload cannot be larger). */
#define SFLOW_DATAGRAM_MAX 65535u

/** Sample formats (enterprise 0). */
enum sflow_sample_format {
    SFLOW_SAMPLE_FLOW = 1,
    SFLOW_SAMPLE_COUNTERS = 2,
    SFLOW_SAMPLE_FLOW_EXPANDED = 3,
    SFLOW_SAMPLE_COUNTERS_EXPANDED = 4,
    SFLOW_SAMPLE_DISCARD = 5, /**< sflow_drops.txt: discarded_packet */
};

/** Flow record formats (enterprise 0) that the decoder reads. */
enum sflow_flow_record_format {
    SFLOW_FLOW_RAW_HEADER = 1,
    SFLOW_FLOW_EGRESS_QUEUE = 1036, /**< sflow_transit.txt refers to it (extended_egress_queue) */
    SFLOW_FLOW_TRANSIT_DELAY = 1039,
    SFLOW_FLOW_QUEUE_DEPTH = 1040,
};

/** Counter record formats (enterprise 0) that the decoder reads. */
enum sflow_counter_record_format {
    SFLOW_COUNTERS_GENERIC_IF = 1,
    SFLOW_COUNTERS_ETHERNET = 2,
    SFLOW_COUNTERS_PORT_NAME = 1005, /**< host-sflow: string portName<255> */
};

/** The longest port name (host-sflow's SFL_MAX_PORTNAME_LEN, the XDR bound). */
#define SFLOW_PORT_NAME_MAX 255u

/** header_protocol values of the raw packet header record that the decoder parses. */
enum sflow_header_protocol {
    SFLOW_HEADER_ETHERNET = 1,
    SFLOW_HEADER_IPV4 = 11,
    SFLOW_HEADER_IPV6 = 12,
};

/** An address: family 0 (absent), 4 or 6; IPv4 uses bytes[0..3], network order. */
struct sflow_addr {
    uint8_t family;
    uint8_t bytes[16];
};

struct sflow_datagram_header {
    uint32_t version; /**< always 5 after a successful decode */
    struct sflow_addr agent;
    uint32_t sub_agent_id;
    uint32_t sequence;
    uint32_t uptime_ms;
    uint32_t n_samples; /**< as declared; all of them were decoded on success */
};

/**
 * What the sampled header bytes say, as far as they go. A sampled header is routinely cut
 * (128 bytes by default), so ending early is not an error: `truncated` tells that a layer
 * announced by the one before it did not fit, and the has_* flags tell what was read.
 */
struct sflow_packet {
    bool has_ethernet;
    uint8_t dst_mac[6], src_mac[6];
    bool has_vlan; /**< the outermost 802.1Q/802.1ad tag */
    uint16_t vlan_id;
    uint8_t vlan_pcp;
    uint16_t ethertype; /**< after the VLAN tags (0 when the header starts at IP) */
    uint8_t ip_version; /**< 0 (none read), 4 or 6 */
    struct sflow_addr src_ip, dst_ip;
    uint8_t dscp;        /**< upper six bits of the TOS / traffic class */
    uint8_t ecn;         /**< lower two bits; 3 is CE */
    uint8_t ip_protocol; /**< IPv4 protocol or IPv6 next header */
    uint8_t ttl;         /**< IPv4 TTL or IPv6 hop limit */
    bool has_ports;      /**< UDP or TCP ports read (first fragment only) */
    uint16_t src_port, dst_port;
    bool has_bth; /**< RoCEv2 Base Transport Header (UDP destination port 4791) */
    uint8_t bth_opcode;
    uint32_t bth_dest_qp; /**< 24 bits */
    uint32_t bth_psn;     /**< 24 bits */
    bool truncated;
};

/** The raw packet header record (flow record 1). */
struct sflow_raw_header {
    bool present;
    uint32_t protocol;      /**< header_protocol */
    uint32_t frame_length;  /**< original length of the packet */
    uint32_t stripped;      /**< bytes removed before sampling */
    uint32_t header_length; /**< bytes of `header` */
    const uint8_t *header;  /**< points into the caller's datagram buffer */
    struct sflow_packet packet;
};

/**
 * The flow records of a flow sample or of a discarded-packet notification. When a record
 * format occurs more than once, the first one is kept (the others are still counted).
 */
struct sflow_flow_records {
    struct sflow_raw_header raw;
    bool has_egress_queue;
    uint32_t egress_queue;
    bool has_transit_delay;
    uint32_t transit_delay_ns;
    bool has_queue_depth;
    uint32_t queue_depth_bytes;
    uint32_t n_records;         /**< as declared (all decoded or skipped) */
    uint32_t n_unknown_records; /**< skipped by length */
};

/** An interface as a flow sample gives it: format (0 ifIndex, 1 discarded, 2 multiple). */
struct sflow_interface {
    uint32_t format;
    uint32_t value;
};

/** Flow sample, compact (1) or expanded (3): both are returned in the expanded form. */
struct sflow_flow_sample {
    uint32_t sequence;
    uint32_t source_id_type;
    uint32_t source_id_index;
    uint32_t sampling_rate;
    uint32_t sample_pool;
    uint32_t drops;
    struct sflow_interface input, output;
    struct sflow_flow_records records;
};

/** Discarded-packet notification (sample 5 of sflow_drops.txt). */
struct sflow_discard_sample {
    uint32_t sequence;
    uint32_t source_id_type;
    uint32_t source_id_index;
    uint32_t drops;
    uint32_t input;  /**< ifIndex, 0 if unknown */
    uint32_t output; /**< ifIndex, 0 if unknown */
    uint32_t reason; /**< drop_reason code as sent */
    struct sflow_flow_records records;
};

/** Generic interface counters (counter record 1). */
struct sflow_if_counters {
    uint32_t if_index, if_type;
    uint64_t if_speed;
    uint32_t if_direction, if_status;
    uint64_t in_octets;
    uint32_t in_ucast, in_multicast, in_broadcast, in_discards, in_errors, in_unknown_protos;
    uint64_t out_octets;
    uint32_t out_ucast, out_multicast, out_broadcast, out_discards, out_errors;
    uint32_t promiscuous;
};

/** Ethernet interface counters (counter record 2, dot3Stats). */
struct sflow_eth_counters {
    uint32_t alignment_errors, fcs_errors, single_collision_frames, multiple_collision_frames,
        sqe_test_errors, deferred_transmissions, late_collisions, excessive_collisions,
        internal_mac_transmit_errors, carrier_sense_errors, frame_too_longs,
        internal_mac_receive_errors, symbol_errors;
};

/** Counter sample, compact (2) or expanded (4). */
struct sflow_counter_sample {
    uint32_t sequence;
    uint32_t source_id_type;
    uint32_t source_id_index;
    bool has_generic;
    struct sflow_if_counters generic;
    bool has_ethernet;
    struct sflow_eth_counters ethernet;
    /** The port name record (1005), when one was present and usable as a name: 1 to
     *  SFLOW_PORT_NAME_MAX bytes, none below 0x20 or 0x7f. Not NUL-terminated; points
     *  into the caller's datagram buffer. A name that is not usable is ignored (counted
     *  in n_bad_port_names), one that runs past its record is a decode error. */
    const uint8_t *port_name;
    uint32_t port_name_len; /**< 0: no usable name */
    uint32_t n_bad_port_names;
    uint32_t n_records;
    uint32_t n_unknown_records;
};

enum sflow_sample_kind {
    SFLOW_KIND_FLOW,
    SFLOW_KIND_COUNTERS,
    SFLOW_KIND_DISCARD,
};

/** One decoded sample. `format` tells compact from expanded; only the kind's member is set. */
struct sflow_sample {
    uint32_t index; /**< position in the datagram, from 0 */
    uint32_t format;
    uint32_t length; /**< bytes of the sample body */
    enum sflow_sample_kind kind;
    union {
        struct sflow_flow_sample flow;
        struct sflow_counter_sample counters;
        struct sflow_discard_sample discard;
    } u;
};

/** Called once per decoded sample, in datagram order. */
typedef void (*sflow_sample_fn)(const struct sflow_datagram_header *hdr,
                                const struct sflow_sample *sample, void *arg);

/** What a decode counted; filled on success and on error (counts up to the error). */
struct sflow_decode_stats {
    uint32_t n_samples_decoded; /**< handed to the callback */
    uint32_t n_unknown_samples; /**< skipped by length (other enterprise or format) */
    uint32_t n_unknown_records; /**< flow and counter records skipped by length */
    uint32_t n_trailing_bytes;  /**< after the last declared sample (ignored) */
};

/**
 * Decodes one datagram of `len` bytes. On success returns 0, fills *hdr and *stats and has
 * called on_sample (may be NULL) for every known sample. On error returns -1, writes a
 * message naming where the datagram is wrong into err (errlen bytes, may be 0), and fills
 * *stats with the counts so far: samples before the faulty one have already been handed to
 * on_sample, so a caller that wants all-or-nothing buffers them until the return.
 * hdr and stats may be NULL.
 */
int sflow_decode_datagram(const uint8_t *buf, size_t len, sflow_sample_fn on_sample, void *arg,
                          struct sflow_datagram_header *hdr, struct sflow_decode_stats *stats,
                          char *err, size_t errlen);

/**
 * Decodes sampled header bytes (header_protocol `protocol`) into *pkt. Never fails: what
 * does not fit or is not understood is left unset (see struct sflow_packet). Exposed for
 * tests; sflow_decode_datagram() calls it for every raw packet header record.
 */
void sflow_decode_packet_header(uint32_t protocol, const uint8_t *bytes, size_t len,
                                struct sflow_packet *pkt);

#endif
