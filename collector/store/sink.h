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
 * monotonic: a 32-bit counter that goes down is unwrapped once, a counter that goes down
 * after fs_sink_counter_reset() (or a 64-bit one that goes down) is rebased, and each of
 * these is counted in fabricscope_counters_reset_total{kind}.
 */
#ifndef FS_SINK_H
#define FS_SINK_H

#include <stddef.h>
#include <stdint.h>

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
    FS_POLL_PARTIAL,  /**< the cycle ended (deadline or limit) with part of the data committed */
};

enum fs_reset_kind {
    FS_RESET_WRAP = 0,
    FS_RESET_REBOOT,
    FS_RESET_DISCONTINUITY,
    FS_RESET_CLEARED,
    FS_RESET_KIND_COUNT
};

/** Starts a batch whose samples arrived at ts_us (CLOCK_REALTIME microseconds). */
void fs_sink_begin(struct fs_sink *s, int64_t ts_us);

/**
 * Adds a counter sample. bits is the device counter's width (32 or 64); labels are the
 * metric's own labels (interface, tc, direction, ...), not target, source or static ones.
 * An `interface` label is normalized and filtered by the target's include/exclude rules
 * here; samples of excluded interfaces are dropped.
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

/** Commits the batch. */
void fs_sink_end(struct fs_sink *s);

/**
 * Declares that counters restarted on the device (kind REBOOT: all counters of this
 * sink; DISCONTINUITY or CLEARED with an interface: that interface's counters). The next
 * value of each affected counter is taken as counted from zero. Call before the batch.
 */
void fs_sink_counter_reset(struct fs_sink *s, enum fs_reset_kind kind, const char *interface);

/* TEMP (dropped at merge): the store branch declares and implements these two. They are
 * inline no-ops here because a definition in fs_core (sink_stubs.c) is not extracted from
 * the static library when only the SNMP driver, linked after it, calls it. */
/**
 * The line rate of an interface (from ifHighSpeed/ifSpeed), in octets per second: a
 * 32-bit counter of it that goes down is taken as a wrap only when that is plausible for
 * the rate and the elapsed time, else as a clear.
 */
static inline void
fs_sink_set_max_rate(struct fs_sink *s, const char *interface, double octets_per_s)
{
    (void)s;
    (void)interface;
    (void)octets_per_s;
}

/** Counts a restart of the agent (not of the device); no counter is touched. */
static inline void
fs_sink_agent_restart(struct fs_sink *s)
{
    (void)s;
}

/**
 * Ends the cycle cycle_id (streaming drivers: 0) with its result. msg (may be NULL) is
 * a short reason without secrets; it shows in /api/v1/targets and the log.
 */
void fs_sink_done(struct fs_sink *s, uint64_t cycle_id, enum fs_poll_result r, const char *msg);

/**
 * Reports a clock measurement: the device said device_us while our clock read between
 * local_lo_us and local_hi_us (realtime). The core keeps the offset with the smallest
 * uncertainty of recent measurements.
 */
void fs_sink_clock(struct fs_sink *s, int64_t device_us, int64_t local_lo_us, int64_t local_hi_us);

/** The target's name, for log lines. */
const char *fs_sink_target(const struct fs_sink *s);

/** Normalizes a device port name into buf (ONYX "1/1", "ethernet 1/1", "Eth1/1" -> "Eth1/1"). */
const char *fs_ifname_normalize(const char *name, char *buf, size_t len);

#endif
