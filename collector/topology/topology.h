/*
 * The topology: which port of which switch is cabled to which port of which system, as
 * the switches (and later the hosts and the configuration) report it.
 *
 * Nodes are the targets (switches, named as in the configuration) and the remote systems
 * their neighbour tables name (by LLDP sysName, else chassis id). A link joins a local
 * target's port (its `interface` label value, so that links join the target's series)
 * to a remote node's port.
 *
 * What is kept is reports, not links: one per (reporter target, source, local port,
 * remote chassis/sysName, remote port), each with first_seen and last_seen (wall clock,
 * µs). Links are made from them when read (fs_topo_snapshot): a remote system whose
 * chassis id or sysName is a target's own (fs_topo_local), or whose sysName is a
 * target's name, is that target, so switch A port x seeing switch B port y and B port y
 * seeing A port x read as one link with both reports among its sources.
 *
 * Aging. Neighbour tables are read whole (driver: every lldp interval), so a report
 * lives as follows:
 *   - a complete table read (fs_topo_table_end) drops at once every report of that
 *     reporter and source not seen since the previous complete read: a link the switch
 *     itself no longer lists goes now, not after a timeout;
 *   - a report not renewed for its hold time expires: hold = max(3 x the reporter's
 *     interval, FS_TOPO_HOLD_FLOOR_US), FS_TOPO_DEFAULT_HOLD_US (LLDP's own default TTL,
 *     4 x 30 s) until the reporter states its interval. So a switch that stops answering
 *     (or a driver cut before its table ended) loses its links after three missed reads;
 *     one missed or late read (a slow cycle) keeps them. The floor keeps a 1 s test
 *     interval from flapping links on a loaded machine.
 * Reports of the configuration (fs_topo_set_static) have hold 0: they never expire, and
 * the configuration's set is replaced whole (each reload). Hosts' reports
 * (fs_topo_host_neighbors) are a whole table per post, held for the post interval's
 * hold like a switch's.
 * Expired reports are removed by every call that takes the lock (no thread of its own).
 * A wall clock that steps back shows age 0 until it catches up, never a negative age.
 *
 * Bounds: at most FS_TOPO_MAX_REPORTS reports and FS_TOPO_MAX_REPORTERS reporters; a
 * report beyond is refused (-1, errbuf says so; counted in fs_topo_stats). Strings are
 * cut at FS_TOPO_STR_MAX - 1 bytes.
 *
 * Threads. Every call takes one mutex; none does I/O or calls out under it. A snapshot is
 * a private copy: render it without any lock.
 *
 * Ownership. The creator owns struct fs_topo (fs_topo_free); a struct fs_topo_snap and
 * everything in it belong to the caller of fs_topo_snapshot (fs_topo_snap_free). Strings
 * passed in are copied.
 */
#ifndef FS_TOPOLOGY_H
#define FS_TOPOLOGY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FS_TOPO_MAX_REPORTS 65536
#define FS_TOPO_MAX_REPORTERS 4096
#define FS_TOPO_STR_MAX 256
#define FS_TOPO_HOLD_FLOOR_US (30 * 1000000LL)
#define FS_TOPO_DEFAULT_HOLD_US (120 * 1000000LL)
/** Static links the configuration may give (topology.links and its links_file). */
#define FS_TOPO_MAX_STATIC 16384
#define FS_TOPO_SOURCE_CONFIG "config"
#define FS_TOPO_SOURCE_HOST "host"
/** Sources one link can list (reporters that saw it); more are counted, not listed. */
#define FS_TOPO_LINK_MAX_SOURCES 8

struct fs_topo;

/** One neighbour as a reporter saw it; all strings are the caller's, NULL reads as "". */
struct fs_topo_neighbor {
    const char *local_port; /**< the reporter's port: its `interface` label value */
    const char *chassis_id; /**< remote chassis id, printable */
    const char *sys_name;   /**< remote sysName */
    const char *port;       /**< the remote port's name to show and join on (ifName-like) */
    const char *port_id;    /**< remote port id, printable */
    const char *port_descr; /**< remote port description */
};

/** Creates an empty topology; NULL when out of memory. */
struct fs_topo *fs_topo_new(void);
void fs_topo_free(struct fs_topo *t);

/**
 * States a target's own LLDP identity (from its local system data), so that other
 * targets' reports naming it resolve to it. Empty strings leave that part unknown.
 * 0, or -1 with errbuf (too many reporters, no memory).
 */
int fs_topo_local(struct fs_topo *t, const char *target, const char *source, const char *chassis_id,
                  const char *sys_name, int64_t now_us, char *errbuf, size_t errlen);

/**
 * Records (or renews) one neighbour of target seen through source at now_us. A report
 * with an empty local port, or neither chassis id nor sysName, is refused. 0, or -1 with
 * errbuf.
 */
int fs_topo_neighbor(struct fs_topo *t, const char *target, const char *source,
                     const struct fs_topo_neighbor *n, int64_t now_us, char *errbuf, size_t errlen);

/**
 * Says that target's whole neighbour table (through source) was read, and will be read
 * again within interval_us (<= 0: unknown, the default hold): reports of that reporter
 * not renewed since its previous table end are removed now. Returns how many went.
 */
size_t fs_topo_table_end(struct fs_topo *t, const char *target, const char *source,
                         int64_t interval_us, int64_t now_us);

/**
 * Records one host's whole neighbour table (source "host", reporter = host, which is
 * not a target): each n[i].local_port is the host's NIC, the rest its switch and port.
 * The host posts again within interval_us (<= 0: unknown): the hold is as for
 * fs_topo_table_end, and reports the host no longer lists go now. 0, or -1 with errbuf
 * (an empty host name, a neighbour without port or remote name, a bound): what came
 * before the bad one is kept.
 */
int fs_topo_host_neighbors(struct fs_topo *t, const char *host, const struct fs_topo_neighbor *n,
                           size_t count, int64_t interval_us, int64_t now_us, char *errbuf,
                           size_t errlen);

/** One link the configuration states; strings are the caller's. */
struct fs_topo_static_link {
    const char *a_node, *a_port, *b_node, *b_port;
};

/**
 * Replaces the configuration's links (source "config", reporter "config") by links[0..count):
 * they never expire; a link kept from the previous set keeps its first_seen, one not in
 * this set goes now. Refused whole (the old set stays) when count > FS_TOPO_MAX_STATIC or
 * a node or port is empty; at the store's report bound or out of memory, the links
 * recorded before that one stand. 0, or -1 with errbuf.
 */
int fs_topo_set_static(struct fs_topo *t, const struct fs_topo_static_link *links, size_t count,
                       int64_t now_us, char *errbuf, size_t errlen);

/** Removes reports older than their hold at now_us; returns how many went. */
size_t fs_topo_expire(struct fs_topo *t, int64_t now_us);

/** One report behind a link. */
struct fs_topo_source {
    char *source;   /**< "snmp", "gnmi", "cli", "sflow", "config", "host" */
    char *reporter; /**< the target (or host) that reported it */
    int64_t first_seen_us, last_seen_us, hold_us; /**< hold_us 0: never expires */
};

struct fs_topo_end {
    char *node; /**< a target's name, or a remote system's sysName (else chassis id) */
    char *port;
    bool is_target; /**< node is a configured target */
};

/** A link: a and b in a fixed order (a <= b by node, then port). */
struct fs_topo_link {
    struct fs_topo_end a, b;
    struct fs_topo_source sources[FS_TOPO_LINK_MAX_SOURCES];
    size_t n_sources;
    int64_t first_seen_us, last_seen_us; /**< over its sources */
};

struct fs_topo_node {
    char *name;
    bool is_target;
    char *chassis_id; /**< "" when not known */
    char *sys_name;   /**< "" when not known */
};

struct fs_topo_snap {
    struct fs_topo_node *nodes; /**< sorted by name */
    size_t n_nodes;
    struct fs_topo_link *links; /**< sorted by a, then b */
    size_t n_links;
    int64_t now_us;
};

/**
 * Copies the current topology, expired reports removed at now_us, into *out (the
 * caller's; fs_topo_snap_free). 0, or -1 with errbuf (no memory; *out is then empty).
 */
int fs_topo_snapshot(struct fs_topo *t, int64_t now_us, struct fs_topo_snap *out, char *errbuf,
                     size_t errlen);
void fs_topo_snap_free(struct fs_topo_snap *s);

struct fs_topo_stats {
    size_t reports, reporters;
    uint64_t refused; /**< reports refused at a bound */
    uint64_t expired; /**< reports removed by age */
    uint64_t dropped; /**< reports removed by a complete table that no longer had them */
};
void fs_topo_stats(struct fs_topo *t, struct fs_topo_stats *out);

#endif
