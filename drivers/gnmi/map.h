/*
 * gNMI Notification -> normalized samples: the pure half of the gNMI driver.
 *
 * No I/O and no gRPC here: the driver hands every decoded Notification (protobuf-c)
 * to fs_gnmi_map_notification(), which joins prefix and path, resolves the joined path
 * to a catalogue metric and labels (built-in OpenConfig/Cumulus table, then the user's
 * mappings), decodes the value (PROTO typed values, JSON and JSON_IETF through json-c)
 * and reports the samples through an emitter (one batch per notification).
 *
 * Resolution is cached per target: the joined path is hashed and looked up, so a steady
 * stream costs one hash, one lookup and one compare per update. Unmapped paths are
 * cached too. The cache is bounded in entries and bytes (a hostile target may send
 * endless distinct, long paths): when full, paths are resolved without being cached and
 * counted in cache_overflow.
 *
 * Cumulus nvidia-wjh: the string leaf `drop` of
 * /interfaces/interface[name]/wjh/aggregate/<group>/reasons/reason[id][severity] holds
 * JSON. Its layout is ASSUMED (the facts show the paths, not the JSON): an object with
 * "count" (drops in the aggregate's sample window; a number or a numeric string), an
 * optional "reason" (text) and optional "window_start"/"window_end" (the sample
 * window's bounds, ns since the epoch, numbers or numeric strings). Parsed with json-c
 * (the map's JSON library), at most FS_GNMI_WJH_JSON_MAX bytes and depth 8. The
 * aggregate is a window, not a counter (as ONYX's WJH table, drivers/onyx/wjh_tally.h):
 * per (interface, group, id, severity) the first sight adds its count, a later one adds
 * what the count grew, or its whole count when its window starts after the previous one
 * ended; a count that shrinks adds nothing, never a clear. The total goes out as
 * fabric_port_wjh_dropped_packets_total{interface, group, reason} (reason: the JSON's
 * "reason", else "id_<id>"); per port only: the assumed layout carries no 5-tuple to
 * match a flow rule with. At most FS_GNMI_WJH_MAX aggregates per target (more counted
 * in wjh_rejected).
 *
 * openconfig-lldp: the leaves of /lldp/state (chassis-id, system-name) and of
 * /lldp/interfaces/interface[name]/neighbors/neighbor[id]/state (chassis-id, port-id,
 * port-id-type, port-description, system-name; the other leaves there are consumed and
 * ignored), and deletes of /lldp, /lldp/interfaces, an interface, its neighbors, a
 * neighbor, its state or one of those leaves, go to the emitter's lldp callback as
 * struct fs_gnmi_lldp_event (lldp.h): text, not samples. Values of any type are taken as
 * their text; keys `*` or absent in a delete mean every one.
 *
 * Everything a target sends is untrusted: any value type for any path, paths of any
 * depth, keys with any bytes, JSON of any shape. Bad values are counted as rejected (by
 * reason, enum fs_gnmi_reject) and skipped; nothing here fails. A JSON value is parsed
 * on a thread that serves many targets, so it is bounded: at most
 * FS_GNMI_JSON_MAX_BYTES and FS_GNMI_JSON_MAX_DEPTH levels (json-c stops at the depth).
 * A notification timestamp more than FS_GNMI_TS_MAX_SKEW_US from its arrival (or
 * negative) is not used for the clock estimate and is counted in bad_timestamps; its
 * values still count (samples are stamped with the arrival time anyway).
 *
 * Fleets: the targets of one model send the same paths, and a resolved path costs about
 * 200 bytes (key, labels), thousands a target. Maps given the same struct
 * fs_gnmi_map_shared (opts.shared) whose options resolve alike share one copy of each
 * resolved path; each map keeps only its table of pointers to them (about 20 bytes a
 * path), its own deleted marks and its own bounds (cache_max, cache_max_bytes count every
 * entry the map holds, shared or not). With ACL entries named by description
 * (rule_names), the paths resolved through them (ACL counters) follow the target's own
 * descriptions and stay the map's own; its other paths are shared.
 *
 * Ownership. struct fs_gnmi_map belongs to the caller (fs_gnmi_map_new/_free); it copies
 * what it needs from the options. Label strings handed to the emitter belong to the map
 * and are valid only during the call. Not thread-safe: one map per target, one thread
 * (maps sharing a struct fs_gnmi_map_shared may run on different threads: it has a lock,
 * taken only when a path is not in the map's own table).
 */
#ifndef FS_GNMI_MAP_H
#define FS_GNMI_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gnmi.pb-c.h"
#include "lldp.h"
#include "metrics_catalogue.h"
#include "store/sink.h"

#define FS_GNMI_ACL_NAMED_MAX 1024
/* nvidia-wjh aggregates remembered per target (interface, group, reason id, severity) */
#define FS_GNMI_WJH_MAX 4096
/* longest `drop` JSON string parsed */
#define FS_GNMI_WJH_JSON_MAX 65536

/** ACL entry -> flow rule (labels `rule` of fabric_flow_rule_*_total). */
struct fs_gnmi_acl_rule {
    char *acl_name;      /**< the ACL set's name as the target reports it */
    int64_t sequence_id; /**< the entry's sequence-id; -1: every entry of the set */
    char *rule;          /**< flow rule name (config flow_rules[].name) */
};

/** A label of a user mapping: taken from a path key, or fixed. */
struct fs_gnmi_label_src {
    char *label; /**< catalogue label name of the metric, e.g. "interface" */
    char *key;   /**< path key name whose value is the label ("name"), or NULL */
    char *value; /**< fixed value when key is NULL */
};

enum fs_gnmi_value_type { FS_GNMI_COUNTER = 0, FS_GNMI_GAUGE };

/** A user mapping: path pattern -> catalogue metric. */
struct fs_gnmi_user_map {
    char *pattern; /**< "/interfaces/interface/state/counters/in-fcs-errors"; keys in the
                        pattern are ignored, an element `*` matches any one element */
    char *metric;  /**< catalogue metric name, e.g. "fabric_port_errors_total" */
    enum fs_gnmi_value_type type;
    double scale; /**< 0 means 1 */
    struct fs_gnmi_label_src *labels;
    size_t n_labels;
};

struct fs_gnmi_map_opts {
    const struct fs_gnmi_user_map *user_maps;
    size_t n_user_maps;
    const struct fs_gnmi_acl_rule *acl_rules;
    size_t n_acl_rules;
    size_t cache_max; /**< resolved paths kept; 0: 65536 */
    /** ACL entries named by description: the string value of an acl-entry's
     *  config/description or state/description under /acl/acl-sets/acl-set[name] that is
     *  acl_description_prefix (NULL: "") + one of rule_names maps that entry's counters
     *  (matched-packets/-octets, also under /acl/interfaces/..., found by set name and
     *  sequence-id) to that rule, unless acl_rules maps it. A description seen later
     *  than the counters applies from then on (resolved paths are forgotten when an
     *  entry's rule changes); a changed description moves the entry, one naming no rule
     *  removes it. At most FS_GNMI_ACL_NAMED_MAX entries are remembered (more are counted
     *  in acl_named_over). rule_names NULL or n_rule_names 0: off. The names are copied. */
    const char *const *rule_names;
    size_t n_rule_names;
    const char *acl_description_prefix;
    /** Unmapped numeric values (numbers, numeric strings, booleans as 1/0) go out as the
     *  gauge fabric_gnmi_value{path="origin:/a/b[k=v]/c"} (module prefixes dropped)
     *  instead of being dropped; other strings are still dropped (counted unmapped).
     *  The store's per-target series limit bounds how many paths become series. */
    bool expose_unmapped;
    size_t cache_max_bytes; /**< bytes of cached entries (keys, labels); 0: 4 MiB */
    /** Resolved paths shared with the other maps of this set whose options are the same
     *  (see above); NULL: this map's own. The map holds a reference to it. */
    struct fs_gnmi_map_shared *shared;
};

struct fs_gnmi_map_shared;

/** A set of shared resolved paths (see above); NULL on no memory. The caller holds one
 *  reference (fs_gnmi_map_shared_release); every map made with it holds another, so it
 *  lives until the last of them is gone. Thread-safe. */
struct fs_gnmi_map_shared *fs_gnmi_map_shared_new(void);

/** Drops the caller's reference; accepts NULL. */
void fs_gnmi_map_shared_release(struct fs_gnmi_map_shared *sh);

/** Resolved paths the set holds now (each counted once however many maps hold it). */
size_t fs_gnmi_map_shared_entries(struct fs_gnmi_map_shared *sh);

/** Largest JSON value parsed (bytes); json-c takes up to about 32 times its size. */
#define FS_GNMI_JSON_MAX_BYTES (1u << 20)
/** Deepest JSON nesting parsed (json-c's limit; the mapping follows 16 levels). */
#define FS_GNMI_JSON_MAX_DEPTH 32
/** A timestamp further than this from its arrival is not a clock reading (1 day). */
#define FS_GNMI_TS_MAX_SKEW_US (86400LL * 1000000)

/** Why a value was rejected (fs_gnmi_map_stats.rejected_by; names: fs_gnmi_reject_names). */
enum fs_gnmi_reject {
    FS_GNMI_REJ_WRONG_TYPE = 0,   /**< a value of a type its mapping cannot use, or null */
    FS_GNMI_REJ_JSON_INVALID,     /**< JSON that does not parse */
    FS_GNMI_REJ_JSON_TOO_DEEP,    /**< JSON nested deeper than FS_GNMI_JSON_MAX_DEPTH */
    FS_GNMI_REJ_JSON_TOO_LARGE,   /**< a JSON value over FS_GNMI_JSON_MAX_BYTES */
    FS_GNMI_REJ_JSON_SHAPE,       /**< a JSON array that is no keyed list (leaf-list, no key) */
    FS_GNMI_REJ_BAD_PATH,         /**< no path, or deeper/longer than the driver follows */
    FS_GNMI_REJ_NO_VALUE,         /**< an update without a value, or of an unknown encoding */
    FS_GNMI_REJ_TOO_MANY_DELETES, /**< deletes beyond 64 in one notification */
    FS_GNMI_REJ_NO_MEMORY,
    FS_GNMI_REJ_COUNT
};
extern const char *const fs_gnmi_reject_names[FS_GNMI_REJ_COUNT];

/** Per-target counts (monotonic). */
struct fs_gnmi_map_stats {
    uint64_t notifications;
    uint64_t updates;          /**< Update messages received */
    uint64_t mapped;           /**< values reported as samples of a mapped metric */
    uint64_t exposed;          /**< unmapped numeric values exported as fabric_gnmi_value */
    uint64_t unmapped;         /**< values of paths no mapping covers (dropped) */
    uint64_t acl_descriptions; /**< ACL entry descriptions read (acl_by_description) */
    uint64_t wjh_records;      /**< nvidia-wjh aggregate `drop` leaves read */
    uint64_t wjh_rejected;     /**< of them: not the assumed JSON layout, or beyond bounds */
    uint64_t acl_named_over;   /**< entries named for a rule beyond FS_GNMI_ACL_NAMED_MAX */
    uint64_t rejected;         /**< values that could not be decoded for their mapping */
    uint64_t rejected_by[FS_GNMI_REJ_COUNT]; /**< rejected, by reason (they sum to it) */
    uint64_t bad_timestamps; /**< notifications whose timestamp was not used (see above) */
    uint64_t deletes;        /**< series marked deleted */
    uint64_t lldp;           /**< openconfig-lldp leaves and deletes read (lldp.h) */
    uint64_t cache_overflow;
    size_t cache_entries;
    size_t cache_bytes;     /**< bytes of the cached entries */
    int64_t last_device_ns; /**< timestamp of the latest notification (device clock) */
};

/**
 * Where samples go. begin/end bracket one notification that has updates or deletes.
 * device_ns is the notification's timestamp (device clock, 0 if absent). deleted is
 * called for each mapped series whose path the target deleted. Any member may be NULL.
 */
struct fs_gnmi_emit {
    void (*begin)(void *arg, int64_t recv_us, int64_t device_ns);
    void (*counter)(void *arg, enum fs_metric m, const struct fs_label *labels, size_t n,
                    uint64_t raw, double scale);
    void (*gauge)(void *arg, enum fs_metric m, const struct fs_label *labels, size_t n,
                  double value);
    void (*deleted)(void *arg, enum fs_metric m, const struct fs_label *labels, size_t n);
    void (*end)(void *arg);
    /** An openconfig-lldp leaf or delete (see the LLDP paragraph above); outside any
     *  batch, not a sample. */
    void (*lldp)(void *arg, const struct fs_gnmi_lldp_event *ev);
    /** Optional: counter and gauge with the map's series handle for the path (one per
     *  cached path of this map, reset when the cache drops it; see fs_sink_counter_h),
     *  used instead of counter and gauge for a path the cache holds. */
    void (*counter_h)(void *arg, struct fs_series_handle *h, enum fs_metric m,
                      const struct fs_label *labels, size_t n, uint64_t raw, double scale);
    void (*gauge_h)(void *arg, struct fs_series_handle *h, enum fs_metric m,
                    const struct fs_label *labels, size_t n, double value);
};

/**
 * The emitter that writes into a sink (arg: struct fs_gnmi_sink_arg *): batches via
 * fs_sink_begin/end stamped with the receive time, counters as 64-bit, deleted series
 * retired at once (fs_sink_retire: no longer exported, history kept), and the device
 * timestamps as clock measurements (fs_sink_clock) by minimum-delay filtering: per second,
 * the least delayed notification, bounded above by the best lag of the last minute plus
 * the assumed maximum delivery delay clk_max_delay_us (see map.c).
 */
extern const struct fs_gnmi_emit fs_gnmi_sink_emit;
/** Per-second best lags kept for the upper bound (seconds): a device clock stepping back
 *  is followed this long after the step. */
#define FS_GNMI_CLOCK_LAGS 60
/** The default of clk_max_delay_us (config clock_max_delivery_delay). */
#define FS_GNMI_CLOCK_MAX_DELAY_US 5000
struct fs_gnmi_sink_arg {
    struct fs_sink *sink;
    /** Assumed: the least delayed notification of the last FS_GNMI_CLOCK_LAGS seconds was
     *  stamped at most this long before it arrived (µs; the clock offset's upper bound
     *  rests on it); <= 0: FS_GNMI_CLOCK_MAX_DELAY_US. Set before the first notification. */
    int64_t clk_max_delay_us;
    /* internal state of the clock measurement (zero-initialized) */
    bool clk_have;
    int64_t clk_bucket_us, clk_best_dev_us, clk_best_recv_us;
    int64_t clk_lags[FS_GNMI_CLOCK_LAGS];
    size_t clk_n, clk_head;
};

/** Creates a map; NULL with errbuf filled on a bad option (unknown metric or label). */
struct fs_gnmi_map *fs_gnmi_map_new(const struct fs_gnmi_map_opts *o, char *errbuf, size_t errlen);

void fs_gnmi_map_free(struct fs_gnmi_map *m);

/** Maps one notification received at recv_us (CLOCK_REALTIME µs). */
void fs_gnmi_map_notification(struct fs_gnmi_map *m, const Gnmi__Notification *n, int64_t recv_us,
                              const struct fs_gnmi_emit *e, void *arg);

const struct fs_gnmi_map_stats *fs_gnmi_map_get_stats(const struct fs_gnmi_map *m);

/**
 * Parses a gNMI path string ("origin:/a/b[k=v][k2=*]/c"; `\` escapes `]`, `[`, `/`, `=`
 * and `\` inside names and key values) into *out (caller frees with
 * protobuf_c_message_free_unpacked(&out->base, NULL)). An origin is recognised only
 * before the first '/'. Returns 0, or -1 with errbuf filled.
 */
int fs_gnmi_path_parse(const char *s, Gnmi__Path **out, char *errbuf, size_t errlen);

/** Looks a catalogue metric up by name; -1 if none. */
int fs_gnmi_metric_by_name(const char *name);

#endif
