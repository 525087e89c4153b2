/*
 * Host events: time ranges and instants reported by hosts (NCCL kernels and NVTX ranges
 * from Nsight Systems, perf tracepoints, NCCL Inspector records, or any client), kept
 * in a bounded store beside the ring and placed on the collector's clock.
 *
 * Body of POST /api/v1/host-events (JSON, at most FS_HOST_EVENTS_MAX_BODY bytes):
 *
 *   {"host_offset_ns": <int>,               host clock minus collector clock, measured by
 *                                           the poster (e.g. NTP-style against
 *                                           GET /api/v1/time)
 *    "host_offset_uncertainty_ns": <int>=0>, half width of that measurement's bound
 *    "events": [                            1 .. FS_HOST_EVENTS_MAX_PER_POST items
 *      {"host": "gpu-node-3",               1..FS_HOST_EVENTS_MAX_STR bytes each
 *       "kind": "nccl.kernel",              dotted family, e.g. nccl.kernel, nccl.nvtx,
 *                                           nccl.inspector, perf.tcp_retransmit_skb
 *       "name": "AllReduce",
 *       "start": <int>,                     ns since the Unix epoch, HOST clock
 *       "end": <int>,                       optional (absent = instant); end >= start,
 *                                           end - start <= FS_HOST_EVENTS_MAX_DURATION_NS
 *       "attrs": {"k": "v" | number | bool} optional, at most FS_HOST_EVENTS_MAX_ATTRS,
 *                                           keys <= FS_HOST_EVENTS_MAX_KEY bytes, values
 *                                           <= FS_HOST_EVENTS_MAX_STR bytes
 *      }, ...],
 *    "neighbors": {                         optional: the posting host's LLDP neighbours
 *      "host": "gpu-node-3",                the host (1..FS_HOST_EVENTS_MAX_STR bytes)
 *      "interval_s": 30,                    1..86400: it posts them again within this
 *      "list": [                            0..FS_HOST_EVENTS_MAX_NEIGHBORS items, its whole
 *                                           table (an empty list: no neighbour now)
 *        {"nic": "eth0",                    the host's interface (required)
 *         "chassis_id": "42:e8:11:2b:61:07", the switch: chassis id and/or sysName
 *         "sys_name": "leaf01",             (at least one)
 *         "port": "swp1",                   the switch port's name (required)
 *         "port_id": "...", "port_descr": "..."}, ...]}}   optional
 *                                           each string 0..FS_HOST_EVENTS_MAX_NBR_STR bytes
 *
 * With "neighbors", "events" (and then the offsets) may be left out, and "events" may be
 * empty. The neighbours go to the listener set with fs_host_events_set_neighbor_listener
 * (the topology) once the whole body is valid; they are not host events.
 *
 * The body is strict JSON (RFC 8259: UTF-8, no comments, one document, at most 32
 * levels deep); members may come in any order, and a member given twice counts once, at
 * its first place, with its last value. Attr numbers are kept as their JSON text.
 * Unknown members are errors (a typo must not be silently ignored). Validation is item
 * by item; the first bad item is reported by index ("events[12].end: before start") and
 * then nothing of the post is stored (all or nothing). Stored times are on the
 * collector's axis: collector_ns = host_ns - host_offset_ns; the offset and its
 * uncertainty stay with each event.
 *
 * Bounds. memory_limit caps the bytes held (events, strings, attrs); retention caps age
 * (by end time, against the `now` of the next ingest or fs_host_events_expire). The
 * oldest posts go first. A single post larger than the whole limit is refused (413).
 *
 * Posters. fs_host_events_post_as posts as a named poster (a per-host token): every
 * host the post names (each event's, and the neighbours') must match the poster's
 * fnmatch(3) pattern, else the post is refused whole with 403 naming the first that does
 * not; the poster's events are held within its quota, its own oldest posts going first
 * (counted as evicted for quota), so that one host cannot push out the others' events;
 * a post larger than the quota is refused (413). Each event keeps its poster's name.
 *
 * Threads. A rwlock: ingest and expire write, queries read (callbacks run under the read
 * lock: copy what you keep, do no I/O on a client socket).
 *
 * Ownership. The store owns every event; pointers handed to callbacks are valid only
 * during the callback.
 */
#ifndef FS_HOST_EVENTS_H
#define FS_HOST_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FS_HOST_EVENTS_MAX_BODY (32u << 20)
#define FS_HOST_EVENTS_MAX_PER_POST 200000
#define FS_HOST_EVENTS_MAX_STR 256
#define FS_HOST_EVENTS_MAX_KEY 64
#define FS_HOST_EVENTS_MAX_ATTRS 16
#define FS_HOST_EVENTS_MAX_DURATION_NS (24LL * 3600 * 1000000000LL)
#define FS_HOST_EVENTS_MAX_NEIGHBORS 64
#define FS_HOST_EVENTS_MAX_NBR_STR 255
#define FS_HOST_EVENTS_MAX_NBR_INTERVAL_S 86400
#define FS_HOST_EVENTS_MAX_POSTER 64
#define FS_HOST_EVENTS_MAX_POSTERS 1024

/** One LLDP neighbour of a posting host's NIC (strings valid during the listener's call). */
struct fs_host_neighbor {
    const char *nic, *chassis_id, *sys_name, *port, *port_id, *port_descr;
};

/**
 * Receives a valid post's neighbours: host's whole table, n[0..count), to be posted again
 * within interval_ns. Called without any lock of the store, on the posting thread.
 * Returns 0, or -1 with errbuf (logged by the caller; the post stands).
 */
typedef int (*fs_host_neighbors_fn)(void *arg, const char *host, const struct fs_host_neighbor *n,
                                    size_t count, int64_t interval_ns, int64_t now_ns, char *errbuf,
                                    size_t errlen);

struct fs_host_attr {
    const char *key;
    const char *value;
    bool is_string; /**< false: value is the JSON text of a number or bool */
};

struct fs_host_event {
    const char *host, *kind, *name;
    int64_t start_ns, end_ns; /**< collector axis; end == start for instants */
    int64_t host_offset_ns;   /**< host minus collector, as posted */
    int64_t host_offset_uncertainty_ns;
    const struct fs_host_attr *attrs;
    uint32_t n_attrs;
    const char *poster; /**< the token that posted it ("": the shared one) */
};

struct fs_host_events_opts {
    uint64_t memory_limit; /**< bytes, > 0 */
    int64_t retention_ns;  /**< > 0 */
};

struct fs_host_events_stats {
    uint64_t events;            /**< events held */
    uint64_t bytes;             /**< memory held */
    uint64_t posts;             /**< posts held */
    uint64_t ingested_total;    /**< events accepted since creation */
    uint64_t rejected_total;    /**< posts refused (bad body, too large) since creation */
    uint64_t evicted_memory;    /**< events dropped for the memory limit */
    uint64_t evicted_retention; /**< events dropped for age */
    uint64_t duplicates_total;  /**< posted events not stored: already held */
    uint64_t evicted_quota;     /**< events dropped for their poster's quota */
    uint64_t memory_limit;
    int64_t retention_ns;
};

struct fs_host_events;

/** Creates a store; NULL with errbuf filled on bad options or no memory. Caller frees. */
struct fs_host_events *fs_host_events_new(const struct fs_host_events_opts *o, char *errbuf,
                                          size_t errlen);
/** Frees the store; accepts NULL. */
void fs_host_events_free(struct fs_host_events *hs);
/** Sets (fn NULL: clears) where posted neighbours go; arg is fn's. Without one they are
 *  validated and dropped. */
void fs_host_events_set_neighbor_listener(struct fs_host_events *hs, fs_host_neighbors_fn fn,
                                          void *arg);

/** Changes the bounds (reload); applied at the next ingest or expire. */
void fs_host_events_set_opts(struct fs_host_events *hs, const struct fs_host_events_opts *o);

/**
 * Parses, validates and stores one POST body. now_ns is the collector's realtime (for
 * retention). On success returns 0 and *stored (may be NULL) = events stored. On failure
 * returns an HTTP status (400 malformed or invalid, 413 too large, 500 no memory) with
 * errbuf naming the problem (and the item index); nothing is stored.
 */
int fs_host_events_ingest(struct fs_host_events *hs, const char *body, size_t len, int64_t now_ns,
                          size_t *stored, char *errbuf, size_t errlen);

/** What a post became. Post ids count accepted posts from 1; a post whose events were
 *  all held already gets none (post_id 0). A poster that sent several posts has lost
 *  some to the memory limit when its first post_id is below oldest_post_id. */
struct fs_host_events_receipt {
    size_t stored;                 /**< events stored */
    size_t duplicates;             /**< events already held (or repeated in the post) */
    uint64_t post_id;              /**< this post's, 0 when nothing was stored */
    uint64_t oldest_post_id;       /**< the oldest post still held (0: none) */
    uint64_t last_post_id;         /**< the newest */
    uint64_t evicted_memory_total; /**< events dropped for the memory limit, ever */
    size_t neighbors;              /**< neighbours handed to the listener */
    bool neighbors_given;          /**< the post had "neighbors" */
    bool neighbors_refused;        /**< the listener refused them (logged; the post stands) */
};

/**
 * fs_host_events_ingest with the whole receipt. Idempotent: an event identical to one
 * held (same host, kind, name, start and end on the host's clock, and attrs: the
 * offset it was posted with does not matter) is not stored again, so importing a file
 * twice stores its events once.
 */
int fs_host_events_post(struct fs_host_events *hs, const char *body, size_t len, int64_t now_ns,
                        struct fs_host_events_receipt *receipt, char *errbuf, size_t errlen);

/** Who posts (a per-host token): its name (1..FS_HOST_EVENTS_MAX_POSTER bytes; "" or
 *  NULL: the shared token), the hosts it may post for (NULL: any) and its quota in
 *  bytes (0: the store's limit only). */
struct fs_host_events_poster {
    const char *name;
    const char *hosts;
    uint64_t quota;
};

/** fs_host_events_post as who (NULL: the shared token); see Posters above. 403 when a
 *  host is not who's. */
int fs_host_events_post_as(struct fs_host_events *hs, const struct fs_host_events_poster *who,
                           const char *body, size_t len, int64_t now_ns,
                           struct fs_host_events_receipt *receipt, char *errbuf, size_t errlen);

/** Called per poster that ever posted, under the store's read lock. */
typedef void (*fs_host_poster_cb)(void *arg, const char *name, uint64_t bytes, uint64_t events,
                                  uint64_t evicted_quota);
void fs_host_events_foreach_poster(struct fs_host_events *hs, fs_host_poster_cb cb, void *arg);

/** Drops what retention no longer allows at now_ns. */
void fs_host_events_expire(struct fs_host_events *hs, int64_t now_ns);

/** Called per event; return non-zero to stop. */
typedef int (*fs_host_event_cb)(void *arg, const struct fs_host_event *ev);

/**
 * Calls cb for every event overlapping [start_ns, end_ns] (collector axis) whose kind
 * matches kind_prefix (NULL or "" = all; "nccl" matches "nccl" and "nccl.*"), in post
 * order, oldest post first.
 */
void fs_host_events_foreach(struct fs_host_events *hs, int64_t start_ns, int64_t end_ns,
                            const char *kind_prefix, fs_host_event_cb cb, void *arg);

/** True when kind equals prefix or starts with prefix followed by '.'. */
bool fs_host_event_kind_matches(const char *kind, const char *prefix);

void fs_host_events_stats(struct fs_host_events *hs, struct fs_host_events_stats *out);

#endif
