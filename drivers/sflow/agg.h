/*
 * What the sFlow driver does with a datagram once it knows whose it is: sequence
 * accounting, flow-rule matching and the per-interval aggregate of one target. Pure: no
 * sockets, no threads, no sink (the caller's emitter receives the values), so the unit
 * tests, the fuzzer and the bench drive exactly the code the driver runs.
 *
 * Per datagram (fs_sflow_check decodes it once, whole, into a scratch;
 * fs_sflow_agg_datagram commits it): the datagram sequence of its sub-agent and each
 * sample source's sample sequence (flow, counters, discards: one sequence each) go
 * through a 64-wide window: a number up to 64 places late is not lost; at each flush
 * every number still missing in a window is declared lost, and one arriving after that
 * is dropped as a duplicate (a datagram counted lost stays lost). A number more than 64
 * behind restarts the sequence (counted, no loss). An agent restart is told from
 * reordering by sequence and uptime together (dgram_classify in agg.c): a datagram
 * whose uptime is behind the highest's by more than a network delays one (5 s), or out
 * of line with the uptimes of the numbers received around it, or a number received
 * before with other bytes (a duplicate has the same), is another agent instance's. A
 * restart settles what was missing as lost and starts the sequences over; a port's next
 * counter sample adds its packets as the store takes its octets (on_counters in agg.c),
 * and the driver commits the interval before the restarting datagram
 * (fs_sflow_agg_restarts).
 *
 * Port counters: a counter sample whose octets went back, or whose packets grew more
 * than its octets, restarted counting (a restart the datagrams did not show): it only
 * sets the port's base (counted: resets kind counters), never adds a wrap's 2^32.
 *
 * Sampling rates: a flow sample in sequence whose sampling rate differs from the one its
 * data source announced in its previous sample is counted (rate_changes; the driver logs
 * it): a reconfiguration, or a sender that is not the agent. The new rate is used.
 *
 * Flow samples: the sampled header is matched against every flow rule (protocol, ports,
 * ECN = CE from the IP header's ECN bits, tc); each rule it matches gets, on the sample's
 * port, sampling_rate estimated packets, sampling_rate x frame_length estimated bytes,
 * sampling_rate CE packets when ECN is CE, and its queue depth and transit delay records
 * in the interval's maximum and 90th percentile. tc is the egress queue record (1036)
 * when present, else DSCP >> 3 (the common 8-class mapping: CS0..CS7). The port is the
 * output ifIndex for egress-sampled packets (the sample carries queue or transit records,
 * or its data source is the output port), else the data source (the input port of
 * ingress sampling); ifIndex 0 is the port named "unknown".
 *
 * Sample pools: a flow sample's sample_pool counts the packets its source saw (mod 2^32),
 * so between two in-order samples of one source it grows by about (sequence increase) x
 * sampling rate. Per source the increases are summed; at a flush, a source with at least
 * FS_SFLOW_POOL_MIN_SAMPLES samples summed is checked (result ok or mismatch): a pool
 * increase off from samples x rate by more than FS_SFLOW_POOL_SIGMAS standard deviations
 * of random sampling (sqrt(samples) x rate) plus one rate is a mismatch: the agent's
 * sampling rate field or its sample accounting is wrong, and so are the estimates. A pool
 * that grew by less than the samples taken is a mismatch at once. Late samples and
 * sequence restarts are not checked (a restart starts the sums over).
 *
 * Discard samples (sflow_drops.txt): each notification counts 1 for each matching rule,
 * on the output port when known (else the input), by reason name; notifications are
 * rate-limited, not sampled, so they are never scaled; the agent's count of unreported
 * drops is counted as lost samples (discard_rate_limited).
 *
 * Port names: the configured map, else the name another source of the target gives the
 * ifIndex (the emitter's ifname), else the agent's port name record (1005, host-sflow
 * sends one with each generic counter record), else ifIndex<N>.
 *
 * Counter samples (generic interface): the port's octets, packets (unicast + multicast
 * + broadcast, unwrapped here from the three 32-bit counters into one exact 64-bit sum),
 * discards, errors, oper/admin state and speed, emitted at the next flush.
 *
 * Bounds (per aggregate, fixed at creation): ports (distinct ifIndex) <= max_ports;
 * rule x port cells <= n_rules x max_ports; drop cells (rule, port, reason) <= the same;
 * sample sources <= 4 x max_ports; sub-agents <= 16. What does not fit is counted
 * (lost samples, kind over_limit) and dropped. The tables are allocated whole at
 * creation (open addressing, at most half full); a rule x port cell's quantile buffers
 * (512 bytes) when its first queue or transit record comes. fs_sflow_agg_bound() gives the
 * exact maximum: about 1.2 KB per port plus 0.7 KB per rule and port, more by the
 * rounding of table sizes to powers of two (256 ports and 8 rules: 1.75 MB; 64 ports and
 * 4 rules: 0.26 MB; the largest, 4096 ports and 32 rules: 97 MB).
 *
 * Threads: an aggregate is used by one thread at a time.
 * Ownership: the aggregate owns everything it allocates (fs_sflow_agg_free); it copies
 * the rules' fields it needs, but keeps pointers to the rule names and to the interface
 * map of its options: the caller keeps those alive as long as the aggregate.
 */
#ifndef FS_SFLOW_AGG_H
#define FS_SFLOW_AGG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "decode.h"
#include "metrics_catalogue.h"
#include "sflow_config.h"
#include "store/sink.h"

enum fs_sflow_lost_kind {
    FS_SFLOW_LOST_FLOW = 0,
    FS_SFLOW_LOST_COUNTERS,
    FS_SFLOW_LOST_DISCARD,
    FS_SFLOW_LOST_AGENT_DROPPED,
    FS_SFLOW_LOST_DISCARD_RATE_LIMITED,
    FS_SFLOW_LOST_OVER_LIMIT,
    FS_SFLOW_LOST_KIND_COUNT
};

enum fs_sflow_reset_kind {
    FS_SFLOW_RESET_AGENT_RESTART = 0,
    FS_SFLOW_RESET_DATAGRAM,
    FS_SFLOW_RESET_SAMPLE,
    FS_SFLOW_RESET_COUNTERS, /**< a port's counter sample went back */
    FS_SFLOW_RESET_KIND_COUNT
};

enum fs_sflow_decode_reason {
    FS_SFLOW_DEC_TRUNCATED = 0,
    FS_SFLOW_DEC_LENGTH,
    FS_SFLOW_DEC_VERSION,
    FS_SFLOW_DEC_MALFORMED,
    FS_SFLOW_DEC_REASON_COUNT
};

/* The sample pool check (see the header comment). */
enum fs_sflow_pool_result {
    FS_SFLOW_POOL_OK = 0,
    FS_SFLOW_POOL_MISMATCH,
    FS_SFLOW_POOL_RESULT_COUNT
};
#define FS_SFLOW_POOL_MIN_SAMPLES 100
#define FS_SFLOW_POOL_SIGMAS 6.0

extern const char *const fs_sflow_pool_result_names[FS_SFLOW_POOL_RESULT_COUNT];
extern const char *const fs_sflow_lost_kind_names[FS_SFLOW_LOST_KIND_COUNT];
extern const char *const fs_sflow_reset_kind_names[FS_SFLOW_RESET_KIND_COUNT];
extern const char *const fs_sflow_decode_reason_names[FS_SFLOW_DEC_REASON_COUNT];

struct fs_sflow_agg_stats {
    uint64_t datagrams;  /**< accepted (decoded, not duplicates) */
    uint64_t duplicates; /**< dropped: their sequence number was seen or declared lost */
    uint64_t lost_datagrams;
    uint64_t lost_samples[FS_SFLOW_LOST_KIND_COUNT];
    uint64_t resets[FS_SFLOW_RESET_KIND_COUNT];
    uint64_t decode_errors[FS_SFLOW_DEC_REASON_COUNT];
    uint64_t flow_samples, counter_samples, discard_samples;
    uint64_t matched;                                 /**< (sample, rule) matches */
    uint64_t pool_checks[FS_SFLOW_POOL_RESULT_COUNT]; /**< sample pool checks by result */
    uint64_t rate_changes; /**< flow samples whose rate differs from their source's previous */
};

/** The last sampling rate change (n: how many so far, as stats.rate_changes). */
struct fs_sflow_rate_change {
    uint64_t n;
    uint32_t source_type, source_index;
    uint32_t old_rate, new_rate;
};

struct fs_sflow_agg_opts {
    const struct fs_flow_rule *rules; /**< the target's flow rules */
    size_t n_rules;
    uint32_t max_ports;                    /**< 1..4096 */
    const struct fs_sflow_ifname *ifnames; /**< configured names, sorted by ifindex */
    size_t n_ifnames;
};

/** Where a flush goes; the driver's is the target's sink. Every member is set. */
struct fs_sflow_emit {
    void (*counter)(void *arg, enum fs_metric m, const struct fs_label *l, size_t n, uint64_t raw,
                    unsigned bits);
    void (*gauge)(void *arg, enum fs_metric m, const struct fs_label *l, size_t n, double v);
    /** The name another source gave ifindex (fs_sink_ifindex_name): 1 found, else 0. */
    int (*ifname)(void *arg, uint32_t ifindex, char *buf, size_t len);
    /** The port's line rate (fs_sink_set_max_rate), from a counter sample's ifSpeed. */
    void (*max_rate)(void *arg, const char *iface, double octets_per_s);
    /** The port's counters restarted (fs_sink_counter_reset of the interface): called
     *  before its counters in the flush after a counter sample went back. */
    void (*reset)(void *arg, const char *iface);
};

/** The emitter onto a target's sink (arg: the struct fs_sink *): what the driver flushes
 *  into, and what the benchmark measures. */
extern const struct fs_sflow_emit fs_sflow_sink_emit;

struct fs_sflow_agg;

/** NULL with errbuf on failure (out of memory, bad options). Free with fs_sflow_agg_free. */
struct fs_sflow_agg *fs_sflow_agg_new(const struct fs_sflow_agg_opts *o, char *errbuf,
                                      size_t errlen);
void fs_sflow_agg_free(struct fs_sflow_agg *a);

/**
 * One datagram decoded once: fs_sflow_check() decodes it whole into this scratch (its
 * header and a copy of every known sample), and fs_sflow_agg_datagram() commits those
 * samples to an aggregate without decoding again. Nothing reaches an aggregate before
 * the whole datagram decoded: a datagram that lies anywhere, even in its last record, is
 * refused whole.
 * Ownership: the scratch belongs to whoever declared it (the driver: one for its receive
 * thread; fs_sflow_agg_feed: the aggregate's own); `samples` is its allocation, grown
 * to what the largest datagram so far needed and reused for the next one; released by
 * fs_sflow_dgram_free. Zero-initialised is empty. The samples point into the datagram
 * buffer (sflow_raw_header.header, sflow_counter_sample.port_name): the caller keeps the
 * buffer unchanged from the check to the commit.
 */
struct fs_sflow_dgram {
    struct sflow_datagram_header hdr;
    struct sflow_sample *samples; /**< n decoded samples, in datagram order */
    size_t n, cap;
    bool overflow; /**< more samples than cap (cannot happen: cap is sized from len) */
};

void fs_sflow_dgram_free(struct fs_sflow_dgram *dg);

/**
 * Decodes a whole datagram into dg (sflow_decode_datagram, once) and fills dg->hdr.
 * 0 when it decodes; else -1 with *reason set and the decoder's message in err (dg then
 * holds no samples). *hdr_ok tells whether the header (agent, sub-agent) could be read,
 * so that a bad datagram can still be counted against its agent.
 */
int fs_sflow_check(struct fs_sflow_dgram *dg, const uint8_t *buf, size_t len, bool *hdr_ok,
                   enum fs_sflow_decode_reason *reason, char *err, size_t errlen);

/** Counts a datagram of this aggregate's agent that fs_sflow_check() refused. */
void fs_sflow_agg_decode_error(struct fs_sflow_agg *a, enum fs_sflow_decode_reason reason);

/**
 * Accounts and aggregates one datagram that fs_sflow_check() accepted into dg (buf, len:
 * the same datagram, for the duplicate test's hash). now_mono_us orders name lookups.
 * Returns 0, or 1 when the datagram was dropped as a duplicate.
 */
int fs_sflow_agg_datagram(struct fs_sflow_agg *a, const struct fs_sflow_dgram *dg,
                          const uint8_t *buf, size_t len, int64_t now_mono_us);

/** fs_sflow_check + fs_sflow_agg_datagram (or the decode error), with the aggregate's own
 *  scratch: what the driver does with a datagram of this aggregate's agent; for the
 *  bench, the tests and the fuzzer. */
int fs_sflow_agg_feed(struct fs_sflow_agg *a, const uint8_t *buf, size_t len, int64_t now_mono_us);

/** True when fs_sflow_agg_datagram() would take this datagram (checked by fs_sflow_check)
 *  for another agent instance's: the driver commits the interval before it, so that the
 *  old instance's last values reach the store before the reset is declared. Changes
 *  nothing. */
bool fs_sflow_agg_restarts(const struct fs_sflow_agg *a, const struct fs_sflow_dgram *dg,
                           const uint8_t *buf, size_t len);

/** True once after the agent restarted (its uptime went back): the driver declares a
 *  reset (fs_sink_counter_reset) before its next batch. */
bool fs_sflow_agg_take_restart(struct fs_sflow_agg *a);

/**
 * Emits the aggregate through e: every rule x port counter (cumulative), the interval's
 * queue-depth and transit-delay gauges where the interval had records, port counters
 * that changed, and the self metrics (fabricscope_sflow_*). Then starts a new interval:
 * interval maxima and quantiles are cleared and sequence numbers still missing are
 * declared lost (counted before they are emitted).
 */
void fs_sflow_agg_flush(struct fs_sflow_agg *a, const struct fs_sflow_emit *e, void *arg,
                        int64_t now_mono_us);

const struct fs_sflow_agg_stats *fs_sflow_agg_get_stats(const struct fs_sflow_agg *a);

/** What the last sampling rate change was, for the driver to log. */
const struct fs_sflow_rate_change *fs_sflow_agg_last_rate_change(const struct fs_sflow_agg *a);

/** Bytes the aggregate holds now (tables and quantile buffers). */
size_t fs_sflow_agg_bytes(const struct fs_sflow_agg *a);

/** The most an aggregate of n_rules rules and max_ports ports ever holds (agg.h's bound,
 *  exactly; the README's figures come from it). */
size_t fs_sflow_agg_bound(size_t n_rules, uint32_t max_ports);

/* ---- exposed for the tests ---- */

/** The traffic class of a sampled packet: the egress queue record, else DSCP >> 3;
 *  -1 when neither is known. */
int fs_sflow_packet_tc(const struct sflow_flow_records *r);

/** True when the sampled packet p (of traffic class tc, -1 unknown) matches rule r. */
bool fs_sflow_rule_match(const struct fs_flow_rule *r, const struct sflow_packet *p, int tc);

/** The stable lower-case name of a drop reason code (host-sflow's sflow_drop.h names);
 *  an unknown code is "code_N" in buf. Returns the name. */
const char *fs_sflow_drop_reason(uint32_t code, char *buf, size_t len);

#endif
