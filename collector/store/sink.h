/*
 * The sink: how a driver hands samples of one target to the core.
 *
 * One sink exists per (target, driver) pair and is owned by the core. The calls for one
 * sink must not run concurrently (a target's cycle is reported by one driver thread at a
 * time); different sinks may be used from different threads at once.
 *
 * A batch is the samples that arrived together (one PDU, one CLI command's output, one
 * gNMI notification): fs_sink_begin() stamps it with the arrival time, the samples
 * follow, fs_sink_end() commits it to the ring and to the latest values in one step.
 * A cycle may hold several batches; fs_sink_done() ends the cycle.
 *
 * Counters are reported raw, as the device counts them; the core keeps the exposed value
 * monotonic (the arithmetic is collector/store/counter.h):
 *   - a counter that goes down after fs_sink_counter_reset() covering it is rebased: the
 *     exposed value continues from where it was, plus the new raw value. A counter in the
 *     reset's scope whose next raw value is higher or equal just continues.
 *   - a 32-bit counter that goes down with no declared reset is unwrapped once when the
 *     implied increase (2^32 - previous + raw) is plausible for the interface's line rate
 *     (fs_sink_set_max_rate) and the time elapsed, else it is a clear (rebased).
 *   - a 64-bit counter that goes down with no declared reset is a clear (rebased).
 *   - a sample whose width (bits) differs from the series' previous one is a
 *     discontinuity: the new raw value becomes the base, the exposed value stays.
 * fabricscope_counters_reset_total{kind} counts: each declared reset once, at the
 * first counter in its scope that went down (a declared reset under which no counter
 * went down is not counted); each wrap; clears and width discontinuities at most once
 * per batch each.
 */
#ifndef FS_SINK_H
#define FS_SINK_H

#include <stddef.h>
#include <stdint.h>

#include "clock/clock_probe.h" /* a driver's clock prober, fed by this sink */
#include "metrics_catalogue.h"

struct fs_sink;

/** A label of a sample; both strings are the caller's and are copied if kept. */
struct fs_label {
    const char *name;
    const char *value;
};

/** How a cycle ended; maps to fabricscope_poll_errors_total{kind}. */
enum fs_poll_result {
    FS_POLL_OK = 0,
    FS_POLL_TIMEOUT,  /**< no answer in time (also: wrong SNMPv2c community) */
    FS_POLL_AUTH,     /**< authentication refused */
    FS_POLL_PROTOCOL, /**< the peer broke the protocol or the connection */
    FS_POLL_PARSE,    /**< the answer could not be understood */
    FS_POLL_PARTIAL,  /**< the cycle ended early (deadline, size limit) with part of its
                           data committed: the instance stays up; counted as
                           fabricscope_poll_errors_total{kind="partial"}, msg shows in
                           /api/v1/targets */
};

enum fs_reset_kind {
    FS_RESET_WRAP = 0,
    FS_RESET_REBOOT,
    FS_RESET_DISCONTINUITY,
    FS_RESET_CLEARED,
    FS_RESET_KIND_COUNT
};

/**
 * Starts a batch whose samples arrived at ts_us (CLOCK_REALTIME microseconds). A ts_us
 * earlier than the sink's previous batch (the collector's clock stepped back) is stamped
 * 1 µs after that batch instead, so the timeline stays monotonic; the step is counted in
 * fabricscope_clock_steps_total and logged (rate-limited).
 */
void fs_sink_begin(struct fs_sink *s, int64_t ts_us);

/**
 * Adds a counter sample. bits is the device counter's width (32 or 64); labels are the
 * metric's own labels (interface, tc, direction, ...), not target, source or static ones.
 * An `interface` label is normalized and filtered by the target's include/exclude rules
 * here (kept up to 255 bytes, cut between characters); samples of excluded interfaces
 * are dropped. Label values are kept as given when
 * valid UTF-8; an invalid byte or a control character becomes '?'. A sample that would
 * create a series beyond the target's series limit (fs_store_set_series_limit) is
 * dropped and counted in fabricscope_series_limit_dropped_samples_total.
 */
void fs_sink_counter(struct fs_sink *s, enum fs_metric m, const struct fs_label *labels,
                     size_t n_labels, uint64_t raw, unsigned bits);

/**
 * Like fs_sink_counter() for a device counter kept in a finer unit than the metric's
 * (PFC pause milliseconds or TxWait microseconds of a *_seconds_total metric): unwrapping
 * and rebasing work on raw exactly as for fs_sink_counter(); the exposed value is the
 * monotonic raw count times scale (e.g. 1e-3). Added for the SNMP driver.
 */
void fs_sink_counter_scaled(struct fs_sink *s, enum fs_metric m, const struct fs_label *labels,
                            size_t n_labels, uint64_t raw, unsigned bits, double scale);

/** Adds a gauge sample (see fs_sink_counter for labels). */
void fs_sink_gauge(struct fs_sink *s, enum fs_metric m, const struct fs_label *labels,
                   size_t n_labels, double value);

/**
 * A series as a sample call through it last resolved it, kept by the driver so that the
 * next sample of the same (metric, labels) skips resolving the labels (cleaning them,
 * building the series key, probing the sink's hash): a driver reporting thousands of
 * samples a cycle (ONYX: 5,442) keeps one per sample. Zero it before its first use; its
 * members are the store's. Owned by the caller; it holds no reference (nothing to free).
 */
struct fs_series_handle {
    void *series;
    uint64_t epoch;
};

/**
 * fs_sink_counter_scaled() (scale 1.0: fs_sink_counter()) through a handle, with exactly
 * its outcome. When *h was filled by this sink for this metric and these labels (compared
 * with the labels as the store keeps them, cleaned and normalized) and the series still
 * exists, the sample goes to it directly; else (first use, a handle of other labels or of
 * another sink, a series deleted since by a sweep, the sink revived by a reload) the labels
 * are resolved as fs_sink_counter() does and *h is refilled (zeroed when the sample is
 * dropped). So a driver may keep its handles by position (the n-th sample of a command's
 * output): a sample that moved just takes the slower path once. A retired series
 * (fs_sink_retire) is exported again by its next sample, as on the key path.
 */
void fs_sink_counter_h(struct fs_sink *s, struct fs_series_handle *h, enum fs_metric m,
                       const struct fs_label *labels, size_t n_labels, uint64_t raw, unsigned bits,
                       double scale);

/** fs_sink_gauge() through a handle (see fs_sink_counter_h). */
void fs_sink_gauge_h(struct fs_sink *s, struct fs_series_handle *h, enum fs_metric m,
                     const struct fs_label *labels, size_t n_labels, double value);

/** Commits the batch. */
void fs_sink_end(struct fs_sink *s);

/**
 * Retires a series at once: the series of metric m with these labels (resolved like a
 * sample's) stops being exported now rather than when it would go stale, e.g. because
 * the device deleted the path behind it. Its history stays readable (fs_store_read)
 * and its counter state is kept; its next sample exports it again (a sample of the same
 * batch counts when it comes after the retire). No series of that name: nothing happens.
 * May be called inside or outside a batch.
 */
void fs_sink_retire(struct fs_sink *s, enum fs_metric m, const struct fs_label *labels,
                    size_t n_labels);

/**
 * Declares that counters may have restarted on the device: interface NULL covers all
 * counters of this sink (e.g. kind REBOOT), an interface name only that interface's
 * (e.g. DISCONTINUITY or CLEARED). Call before the batch carrying the new values. The
 * next sample of each covered counter is rebased if it is lower than the previous one
 * (taken as counted from zero), and just continues if it is not. The reset is counted
 * in fabricscope_counters_reset_total{kind} once, when the first covered counter is
 * rebased; never if none is. A declaration covers each counter's next sample only.
 */
void fs_sink_counter_reset(struct fs_sink *s, enum fs_reset_kind kind, const char *interface);

/**
 * Says that the driver reads each series of this sink only every `polls` cycles (it
 * spreads its commands over cycles when they cannot all fit one): a series then stays
 * exported for staleness_intervals x polls intervals after its last sample instead of
 * staleness_intervals. 1 (the default) or 0 restores the usual bound. Same threading as
 * the other calls of this sink.
 */
void fs_sink_set_spread(struct fs_sink *s, unsigned polls);

/**
 * Sets the line rate of an interface, octets per second (0: unknown, the default). It
 * bounds what a 32-bit counter of that interface that goes down may be read as: a wrap
 * only if 2^32 - previous + raw <= 1.1 x rate x elapsed seconds for an octet counter
 * (metric unit "bytes"), <= 1.1 x rate / 64 x elapsed for the others (packets); else a
 * clear. With no rate known every such drop is a wrap. May be called at any time between
 * batches (e.g. when ifHighSpeed is read); the name is normalized like `interface`
 * labels.
 */
void fs_sink_set_max_rate(struct fs_sink *s, const char *interface, double octets_per_s);

/**
 * Counts a restart of the device's management agent (e.g. the SNMP agent's sysUpTime
 * went back while the device's own uptime did not) in
 * fabricscope_agent_restarts_total{target,source}. Touches no counter: counters that
 * kept counting continue, and one that did go down is handled by the usual rules.
 */
void fs_sink_agent_restart(struct fs_sink *s);

/**
 * Ends the cycle cycle_id (streaming drivers: 0) with its result. msg (may be NULL) is
 * a short reason without secrets; it shows in /api/v1/targets and the log. On a sink
 * marked streaming (fs_store_sink_set_streaming) a failure means the stream ended:
 * every sample committed before it stops being exported at once (history kept), so a
 * lower-precedence source of the target takes over without waiting for staleness.
 * Samples of later batches are exported as usual. A failure of an instance that was up
 * counts as a drop, a success of one that was down as a reconnect: the core shows a
 * (target, source) with repeated drops as flapping and keeps its last error for a while
 * (store.h, Flapping), so a driver needs nothing more than this call to report a session
 * or stream that went down and came back.
 */
void fs_sink_done(struct fs_sink *s, uint64_t cycle_id, enum fs_poll_result r, const char *msg);

/**
 * Reports a clock measurement: the device said device_us while our clock read between
 * local_lo_us and local_hi_us (realtime). The core feeds each target's clock filter
 * (clock/clock.h: the intersection of the last 10 minutes' bounds, resolution guessed
 * from the readings, 20 ppm drift allowed) and exports its offset and uncertainty.
 * Measurements must come in time order (an older one is ignored).
 */
void fs_sink_clock(struct fs_sink *s, int64_t device_us, int64_t local_lo_us, int64_t local_hi_us);

/**
 * States what the target's clock bounds rest on, for the answers that place its samples
 * in time (/api/v1/targets `clock_basis`, /api/v1/correlate `clocks`): for example a
 * delivery delay that is assumed rather than measured, with the key that sets it. text
 * is copied (at most FS_SINK_CLOCK_BASIS_MAX - 1 bytes). Without a call, readings through
 * fs_sink_clock_prober_reading state their round trip, and other fs_sink_clock readings
 * "bounds reported by the driver". Same threading as the other calls of this sink.
 */
#define FS_SINK_CLOCK_BASIS_MAX 256
void fs_sink_clock_basis(struct fs_sink *s, const char *text);

/**
 * Reports an event the device stamped with its own clock (a What-Just-Happened drop, ...):
 * [device_start_us, device_end_us] on the device's clock (equal for an instant), kind (a
 * dotted family, e.g. "wjh.drop"), name, attrs (all copied by the receiver). The core
 * places it on the collector's axis with the target's measured clock offset, whose
 * uncertainty stays with the event, and hands it to the store's device-event listener
 * (fs_store_set_device_event_listener: the daemon keeps it with the host events, host =
 * the target's name, so /api/v1/correlate and the trace export show it). Returns 0 when
 * delivered; 1 when not placed: no clock measured yet, or no listener (the caller
 * counts it); -1 when the listener failed. Same threading as the other calls.
 */
int fs_sink_device_event(struct fs_sink *s, int64_t device_start_us, int64_t device_end_us,
                         const char *kind, const char *name, const struct fs_label *attrs,
                         size_t n_attrs);

/**
 * Reads the sink's current clock estimate (what fs_sink_clock's measurements gave, as
 * /api/v1/targets shows it): returns 1 with *offset_us (device minus collector) and
 * *uncertainty_us (half width, >= 1) filled when known, 0 (outputs untouched) when no
 * measurement was taken yet. Read-only; a driver uses it to decide whether more
 * measurements are worth taking (for a whole-second clock: when and whether to probe,
 * with the planner and prober of clock/clock_probe.h, included above so that drivers
 * reach them through this header). Same threading as the other calls of this sink.
 */
int fs_sink_clock_estimate(struct fs_sink *s, int64_t *offset_us, int64_t *uncertainty_us);

/**
 * A reading of a whole-second device clock whose driver probes it (p: the target's
 * prober, clock/clock_probe.h): fs_sink_clock(device_us, local_lo_us, local_hi_us),
 * then the prober learns the round trip and the resolution res_us. A poll's reading
 * (probe false) that moves the estimate beyond its uncertainty makes the prober check it;
 * a probe's answer (probe true: after fs_clock_prober_sent) gets the prober's verdict.
 * A device clock step and a pause of probing are logged (subsystem: the source). Same
 * threading as the other calls of this sink; p belongs to the caller.
 */
void fs_sink_clock_prober_reading(struct fs_sink *s, struct fs_clock_prober *p, int64_t device_us,
                                  int64_t res_us, int64_t local_lo_us, int64_t local_hi_us,
                                  bool probe);

/**
 * Sets driver-specific JSON members of the target (without braces, e.g.
 * `"qos_index_base":1,"qos_mib":"..."`), shown in /api/v1/targets; copied. Thread-safe.
 */
void fs_sink_set_detail(struct fs_sink *s, const char *json_members);

/**
 * The interface name another source of the same target gave ifindex: the `interface`
 * label of that source's fabric_port_info series whose `ifindex` label is ifindex (the
 * newest if several), copied into buf (cut to len - 1 bytes). Returns 1 when found, 0
 * when no other live source of the target exported it (yet). For drivers whose protocol
 * carries ifIndex only (sFlow), so that a port gets the same `interface` label from
 * every source. Takes the store's read lock for a scan of the fabric_port_info series:
 * cache the answer, ask again only for an ifIndex not known yet (at most every few
 * seconds). Any thread; touches nothing of s but its target's name.
 */
int fs_sink_ifindex_name(struct fs_sink *s, uint32_t ifindex, char *buf, size_t len);

/**
 * One LLDP neighbour of the target, as the driver read it from the device's neighbour
 * table. Strings are the caller's (copied); NULL reads as "".
 */
struct fs_lldp_neighbor {
    /** The local port, named exactly as the driver's other samples name it in their
     *  `interface` label (normalized here the same way), so links join series. */
    const char *local_port;
    const char *chassis_id; /**< remote chassis id, printable (a MAC as aa:bb:cc:dd:ee:ff) */
    const char *sys_name;   /**< remote sysName; "" when the neighbour sent none */
    /** The remote port's name as it is best shown and joined on: its id when that is an
     *  interface name, else its description when it has one, else its printable id. */
    const char *port;
    const char *port_id;    /**< remote port id, printable */
    const char *port_descr; /**< remote port description, "" when none */
};

/**
 * States the target's own LLDP identity (its local chassis id and sysName, either may be
 * ""), so that another target's neighbour naming it is known as that target: a link
 * seen from both ends then reads as one (collector/topology). Call when read (each
 * table read is fine). Same threading as the other calls of this sink.
 */
void fs_sink_lldp_local(struct fs_sink *s, const char *chassis_id, const char *sys_name);

/**
 * Reports one neighbour of the table being read, stamped now (wall clock). Renews the
 * link when it is known. Returns 0, or -1 when refused (no local port, neither chassis
 * id nor sysName, the topology's bound; logged rate-limited). With no topology listening
 * (fs_store_set_lldp_listener) it does nothing and returns 0. Same threading.
 */
int fs_sink_lldp_neighbor(struct fs_sink *s, const struct fs_lldp_neighbor *n);

/**
 * Says that the whole neighbour table was read (every fs_sink_lldp_neighbor of it came
 * before) and will be read again within interval_us (<= 0: not known). Links of this
 * target and source that the table no longer had are dropped now; a target whose table
 * is not read again loses its links after max(3 x interval_us, 30 s) (120 s with no
 * interval). A read cut short must not call it: nothing is dropped then. Same threading.
 */
void fs_sink_lldp_end(struct fs_sink *s, int64_t interval_us);

/** The target's name, for log lines. */
const char *fs_sink_target(const struct fs_sink *s);

/**
 * Normalizes a device port name into buf (ONYX "1/1", "ethernet 1/1", "Eth1/1" ->
 * "Eth1/1"); other names are kept (as fs_label_sanitize would), cut between characters
 * when longer than len - 1 bytes. Returns buf.
 */
const char *fs_ifname_normalize(const char *name, char *buf, size_t len);

/**
 * Copies a label value into buf (len > 0): valid UTF-8 is kept as it is (so names in
 * any script survive); each invalid byte and each control character other than newline
 * becomes '?'; a value longer than len - 1 bytes is cut between characters. Returns buf.
 * The sink applies it to every label value; drivers need not clean values themselves.
 */
const char *fs_label_sanitize(const char *in, char *buf, size_t len);

#endif
