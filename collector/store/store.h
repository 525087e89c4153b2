/*
 * The store: every series the collector knows (name + labels interned once to an id),
 * its latest value, the ring history behind it, and the per-(target, driver) instances
 * that produce them with their health. One store lives for the whole process and
 * survives reloads; targets whose configuration did not change keep their series,
 * ring data and counter state.
 *
 * Threads. Drivers write through sinks (sink.h) from their own threads. Readers (HTTP)
 * use the fs_store_foreach_* calls below, which hold a read lock for the duration of
 * the iteration: callbacks copy or format into memory and must never do I/O on a
 * client socket. Latest values are read atomically; they are never torn.
 *
 * Removal. A removed instance (fs_store_sink_remove) is no longer polled, listed or
 * exported, but its series stay readable (fs_store_foreach_series with exported false,
 * fs_store_read) until retention or the memory limit has taken their samples.
 *
 * Ownership. All pointers handed to callbacks belong to the store and are valid only
 * during the callback (a series' labels and labels_text are joined for the callback from
 * its instance's labels and its interned label set: see fs_store_label_sets).
 */
#ifndef FS_STORE_H
#define FS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "metrics_catalogue.h"
#include "store/ring.h"
#include "store/sink.h"

struct fs_store;

/** One series as seen by a reader. */
struct fs_series_info {
    uint32_t id;  /**< ring series id: pass to fs_store_read() with gen */
    uint32_t gen; /**< generation of id: ids are reused once a series is deleted */
    enum fs_metric metric;
    const char *name;              /**< the metric name, e.g. fabric_port_bytes_total */
    bool counter;                  /**< value in u (exact) if true, else in d */
    double scale;                  /**< counters: exposed value is u * scale (1.0 almost
                                        always; e.g. 0.001 for a pause time counted in ms).
                                        Ring samples of the series carry the same unit as u. */
    const struct fs_label *labels; /**< target, static labels (sorted), metric labels, source */
    size_t n_labels;
    const char *labels_text; /**< the same rendered for exposition: `target="tor1",...` */
    size_t labels_text_len;
    /** labels_text in three pieces, one after the other (the instance's labels, the
        series' own, source). fs_store_foreach_series_text fills only these (labels and
        labels_text NULL, n_labels 0), sparing the exposition a copy. */
    const char *text_part[3];
    size_t text_part_len[3];
    uint64_t u;
    double d;
    int64_t ts_us; /**< time of the latest sample (realtime µs), 0 if none */
    bool exported; /**< false when stale or hidden by source precedence */
};

/** Called per series; return non-zero to stop the iteration. */
typedef int (*fs_series_cb)(void *arg, const struct fs_series_info *s);

/**
 * Iterates over all series, grouped by metric in catalogue order (every series of one
 * metric comes before the next metric's). Exported-only when only_exported is set.
 */
void fs_store_foreach_series(struct fs_store *st, bool only_exported, fs_series_cb cb, void *arg);

/** fs_store_foreach_series() for the exposition: only text_part is filled (see there). */
void fs_store_foreach_series_text(struct fs_store *st, bool only_exported, fs_series_cb cb,
                                  void *arg);

/**
 * fs_store_foreach_series() in chunks, so that a long scan (a regex query) never holds
 * the store's read lock for long and writers get in between chunks. Visits at most max
 * series from *cursor (0 to begin), advances *cursor, and returns true once the
 * iteration is complete (or false also when cb stopped it). Series removed between
 * chunks may make a later series be skipped; none is visited twice.
 */
bool fs_store_foreach_series_chunk(struct fs_store *st, bool only_exported, uint64_t *cursor,
                                   size_t max, fs_series_cb cb, void *arg);

/**
 * Reads ring history of one series (see fs_ring_read), named by the (id, gen) pair a
 * fs_store_foreach_series callback saw. -1 if that series is gone, including when its
 * id now belongs to another series (swept, or removed and evicted, in between).
 */
long fs_store_read(struct fs_store *st, uint32_t series, uint32_t gen, int64_t start_us,
                   int64_t end_us, struct fs_ring_sample *out, size_t max, bool *truncated);

enum fs_instance_state {
    FS_INST_IDLE = 0, /**< no cycle has ended yet */
    FS_INST_UP,       /**< the last cycle succeeded */
    FS_INST_DOWN,     /**< the last cycle failed; retrying with backoff */
};

/*
 * Flapping. A target whose session or stream keeps dropping and coming back would read
 * "up" between drops; the store keeps it visible, the same for every driver, from the
 * fs_sink_done() results alone:
 *   - a drop is a failed cycle (a result other than OK and PARTIAL) of an instance that
 *     was up; a reconnect is a successful cycle of an instance that was down
 *     (fabricscope_target_reconnects_total);
 *   - an up instance with FS_FLAP_DROPS or more drops within the last FS_FLAP_WINDOW_US
 *     is "flapping" (state_name; its state stays FS_INST_UP and fabricscope_target_up
 *     1, since its data flows between drops);
 *   - the last error (failure or partial) stays shown with its time until the instance
 *     has had none for max(FS_STABLE_MIN_US, FS_STABLE_INTERVALS x its interval).
 */
#define FS_FLAP_DROPS 3
#define FS_FLAP_WINDOW_US (300 * 1000000LL)
#define FS_STABLE_MIN_US (60 * 1000000LL)
#define FS_STABLE_INTERVALS 3
/** Drop times kept per instance (recent_drops is counted among these). */
#define FS_FLAP_KEEP 16

/** Kinds of fabricscope_poll_errors_total: timeout, auth, protocol, parse, overrun,
 * partial (a FS_POLL_PARTIAL cycle: counted although the instance stays up). */
#define FS_POLL_ERROR_KINDS 6

/** Histogram buckets of fabricscope_poll_duration_seconds (upper bounds, seconds). */
#define FS_POLL_BUCKETS 10
extern const double fs_poll_bucket_bounds[FS_POLL_BUCKETS];

/** One (target, driver) pair as seen by a reader. */
struct fs_instance_info {
    const char *target;
    const char *source; /**< driver name */
    const char *address;
    enum fs_instance_state state;
    const char *state_name; /**< "idle", "up", "flapping" (up, see Flapping), "down" */
    int64_t interval_us;
    int64_t last_poll_us; /**< realtime µs of the last cycle's end, 0 if none */
    int64_t last_duration_us;
    int64_t last_sample_us; /**< realtime µs the newest committed samples carry, 0 if none
                                 (fabricscope_target_last_sample_timestamp_seconds) */
    const char *last_error; /**< "" if none, or none since the stable period (Flapping) */
    int64_t last_error_us;  /**< realtime µs of last_error, 0 when last_error is "" */
    bool flapping;          /**< up with FS_FLAP_DROPS drops within FS_FLAP_WINDOW_US */
    uint64_t recent_drops;  /**< drops within FS_FLAP_WINDOW_US (at most FS_FLAP_KEEP) */
    uint64_t reconnects;    /**< successful cycles of the instance while it was down */
    uint64_t series;        /**< series of this instance */
    uint64_t consecutive_failures;
    uint64_t poll_errors[FS_POLL_ERROR_KINDS]; /**< by fs_poll_error_kind_names */
    uint64_t counter_resets[FS_RESET_KIND_COUNT];
    uint64_t agent_restarts;       /**< fs_sink_agent_restart() calls */
    uint64_t clock_steps;          /**< batches stamped before the previous one, clamped */
    uint64_t series_limit_dropped; /**< samples dropped at the per-target series limit */
    uint64_t poll_hist[FS_POLL_BUCKETS + 1]; /**< cumulative counts per bucket, +Inf last */
    double poll_sum_seconds;
    uint64_t poll_count;
    bool clock_known;                  /**< a driver measured the device clock (fs_sink_clock) */
    double clock_offset_seconds;       /**< device minus collector */
    double clock_uncertainty_seconds;  /**< the offset is within ± this */
    bool clock_offset_exceeded;        /**< |offset| - uncertainty > the store's clock max offset */
    const char *clock_basis;           /**< what the bounds rest on (fs_sink_clock_basis) */
    const struct fs_kv *static_labels; /**< the target's static labels */
    size_t n_static_labels;
    const char *driver_detail; /**< JSON members from the driver (may be "") */
};

typedef int (*fs_instance_cb)(void *arg, const struct fs_instance_info *in);

/** Iterates over the instances in target order. */
void fs_store_foreach_instance(struct fs_store *st, fs_instance_cb cb, void *arg);

/** Kind names of fabricscope_poll_errors_total, indexed like poll_errors[]. */
extern const char *const fs_poll_error_kind_names[FS_POLL_ERROR_KINDS];
/** Kind names of fabricscope_counters_reset_total. */
extern const char *const fs_reset_kind_names[FS_RESET_KIND_COUNT];

/** Ring statistics plus the number of series. */
void fs_store_ring_stats(struct fs_store *st, struct fs_ring_stats *rs, uint64_t *memory_limit);

/* ---- Writer side (the daemon, the scheduler and tests) ---- */

/** Creates the store with its ring; NULL with errbuf filled on failure. Caller frees. */
struct fs_store *fs_store_new(const struct fs_ring_opts *ro, char *errbuf, size_t errlen);

/** Frees the store with every sink, live or removed; accepts NULL. No sink may be in use. */
void fs_store_free(struct fs_store *st);

/** Applies new ring bounds (reload). */
void fs_store_set_ring_opts(struct fs_store *st, const struct fs_ring_opts *ro);

/**
 * Adds a (target, source) instance and returns its sink (owned by the store until
 * fs_store_sink_remove). If a removed instance of the same target and source with the
 * same static labels still has history, that instance comes back (its series, history
 * and counter state continue) rather than a second set of series with the same labels. tcfg must
 * stay valid until then; it supplies the target name, static labels, interface filters,
 * precedence (tcfg->source_precedence: a source not listed there ranks after every listed
 * one) and staleness. interval_us is the driver's poll interval (for staleness). NULL on no memory.
 */
struct fs_sink *fs_store_sink_add(struct fs_store *st, const struct fs_target_cfg *tcfg,
                                  const char *source, int64_t interval_us);

/**
 * Marks the instance as a stream (the daemon does it for FS_DRIVER_STREAM drivers): a
 * failed fs_sink_done() then makes its samples so far stale at once (see sink.h). A
 * polling instance keeps exporting its last values for the staleness bound after a
 * failed cycle. Default: not streaming. Thread-safe.
 */
void fs_store_sink_set_streaming(struct fs_sink *s, bool streaming);

/**
 * Removes an instance: it leaves the instance list and its series stop being exported
 * at once; the sink must not be used after this call, and its tcfg may be freed. Its
 * history stays readable until retention or the memory limit takes it (see Removal
 * above). Accepts NULL.
 */
void fs_store_sink_remove(struct fs_store *st, struct fs_sink *s);

/**
 * Sets the largest number of series one target (all its sources together) may have;
 * 0 means no limit; the default is 50000 (storage.max_series_per_target). A sample that
 * would create a series beyond it is dropped and counted
 * (fabricscope_series_limit_dropped_samples_total). Existing series are kept.
 */
void fs_store_set_series_limit(struct fs_store *st, uint64_t per_target);

#define FS_STORE_DEFAULT_CLOCK_MAX_OFFSET_US 1000

/**
 * Sets the bound (config clock.max_offset) past which a target's clock offset is
 * reported as exceeded (fs_instance_info.clock_offset_exceeded); <= 0: the default 1 ms.
 */
void fs_store_set_clock_max_offset(struct fs_store *st, int64_t max_offset_us);

/**
 * The clocks the store reads: realtime for staleness and the time of a poll, monotonic
 * for durations, sweeps and the plausibility of counter wraps. Tests inject their own
 * to move time without sleeping; NULL (or any NULL function) restores the system's.
 */
struct fs_store_clock {
    int64_t (*realtime_us)(void *arg);
    int64_t (*monotonic_us)(void *arg);
    void *arg;
};
void fs_store_set_clock(struct fs_store *st, const struct fs_store_clock *c);

/**
 * A device-stamped event, placed: fs_sink_device_event's arguments with the target's
 * clock offset (device minus collector) and its uncertainty at the time of the call.
 * Pointers are valid during the listener's call only.
 */
struct fs_device_event {
    const char *target, *source, *kind, *name;
    int64_t device_start_us, device_end_us;
    int64_t clock_offset_us, clock_uncertainty_us;
    const struct fs_label *attrs;
    size_t n_attrs;
};
/** Called on the driver's thread; returns 0 when kept, -1 on failure. */
typedef int (*fs_device_event_cb)(void *arg, const struct fs_device_event *e);
/** Sets (or with NULL clears) the one listener of device events; call before drivers run
 *  or while none reports (the daemon sets it at start). */
void fs_store_set_device_event_listener(struct fs_store *st, fs_device_event_cb cb, void *arg);

/**
 * The listener of what drivers learn from LLDP (fs_sink_lldp_*): the target and source
 * of the sink, the sanitized strings (valid during the call), and the store's wall clock.
 * Called on the driver's thread; the daemon hands them to its topology.
 */
struct fs_lldp_listener {
    void *arg;
    int (*local)(void *arg, const char *target, const char *source, const char *chassis_id,
                 const char *sys_name, int64_t now_us);
    int (*neighbor)(void *arg, const char *target, const char *source,
                    const struct fs_lldp_neighbor *n, int64_t now_us);
    void (*table_end)(void *arg, const char *target, const char *source, int64_t interval_us,
                      int64_t now_us);
};
/** Sets (l NULL: clears) the one LLDP listener; copied. Like the device-event listener:
 *  set before drivers run, cleared after every target is gone. */
void fs_store_set_lldp_listener(struct fs_store *st, const struct fs_lldp_listener *l);

/** Counts a cycle skipped because the previous one overran (scheduler). */
void fs_sink_count_overrun(struct fs_sink *s);

/**
 * Scheduler side: a cycle starts now (for fabricscope_poll_duration_seconds) and, when
 * the driver ends it with fs_sink_done(), cb is called on the driver's thread.
 */
typedef void (*fs_sink_done_cb)(void *arg, uint64_t cycle_id, enum fs_poll_result r);
void fs_sink_set_done_cb(struct fs_sink *s, fs_sink_done_cb cb, void *arg);
void fs_sink_cycle_begin(struct fs_sink *s, uint64_t cycle_id);

/** Number of series in the store. */
uint64_t fs_store_series_count(struct fs_store *st);

/**
 * Number of interned label sets. A series' own labels (the metric's, after cleaning) are
 * interned once per store: series with the same own labels, in any target, share one set
 * (a fleet holds each port's label values once, not once per switch). The store owns the
 * sets; each series holds one reference and the last series to be freed (swept, or its
 * removed target's history gone) frees the set, so the count follows the distinct own
 * label sets of the series held. Target, static labels and source are kept once per
 * instance. For tests and diagnostics.
 */
size_t fs_store_label_sets(struct fs_store *st);

#endif
