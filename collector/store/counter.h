/*
 * Counter arithmetic: turns the raw values a device reports for one counter into a
 * value that never goes down, across wraps, clears, reboots and width changes.
 *
 * Pure: no locks, no store types, no clock of its own (the caller passes the sample
 * time). One struct fs_counter per series, owned and serialized by the caller.
 *
 * Rules, for a sample raw of width bits (32 or 64) at time ts_us, the previous sample
 * being last_raw of width last_bits at last_ts_us:
 *   - first sample: the exposed value is raw.
 *   - bits != last_bits: a discontinuity; raw becomes the new base, the exposed value
 *     does not move at this step (never unwrapped across widths).
 *   - raw >= last_raw: the exposed value grows by raw - last_raw (a declared reset that
 *     finds the counter still higher is not a reset of this counter).
 *   - raw < last_raw after a declared reset: rebased, grows by raw (counted from zero).
 *   - raw < last_raw, 32 bits, last_raw < 2^32, no declared reset: a wrap (grows by 2^32 - last_raw
 * + raw) when that increase is plausible, else a clear (grows by raw). Plausible: no bound is known
 * (max_per_s <= 0), or increase <= 1.1 * max_per_s * elapsed seconds.
 *   - any other raw < last_raw (64 bits, or a 32-bit sum past 2^32): a clear (grows
 *     by raw).
 * The exposed value saturates at UINT64_MAX rather than wrap.
 */
#ifndef FS_COUNTER_H
#define FS_COUNTER_H

#include <stdbool.h>
#include <stdint.h>

/** What one update observed (beyond ordinary growth). */
enum fs_counter_event {
    FS_COUNTER_NONE = 0,    /**< first sample, or ordinary growth (or flat) */
    FS_COUNTER_WRAPPED,     /**< a 32-bit wrap was unwrapped */
    FS_COUNTER_CLEARED,     /**< went down with no declared reset and no plausible wrap */
    FS_COUNTER_REBASED,     /**< went down after a declared reset */
    FS_COUNTER_WIDTH_CHANGE /**< the width changed: rebased without growth */
};

/** State of one counter; zero-initialize before the first sample. */
struct fs_counter {
    uint64_t value;    /**< the exposed monotonic value */
    uint64_t last_raw; /**< previous raw value */
    int64_t last_ts_us;
    uint8_t last_bits; /**< 0 before the first sample */
};

/**
 * Feeds one raw sample; returns the new exposed value. reset_declared: a reset that
 * covers this counter was declared since its previous sample. max_per_s: the largest
 * plausible increase per second of this counter (0: unknown). *ev (may be NULL)
 * receives what happened.
 */
uint64_t fs_counter_update(struct fs_counter *c, uint64_t raw, unsigned bits, int64_t ts_us,
                           bool reset_declared, double max_per_s, enum fs_counter_event *ev);

/**
 * The plausible increase per second of a counter on a port of the given line rate:
 * octets_per_s for an octet counter (is_octets), octets_per_s / 64 (minimum frames)
 * otherwise; 0 when the rate is unknown (<= 0).
 */
double fs_counter_max_per_s(double octets_per_s, bool is_octets);

#endif
