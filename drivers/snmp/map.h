/*
 * SNMP varbinds -> normalized samples: the pure half of the SNMP driver.
 *
 * Nothing here does I/O or touches net-snmp; the driver (driver.c) walks the tables and
 * feeds every received varbind to fs_snmp_poll_add() in a neutral form (struct fs_snmp_vb),
 * then fs_snmp_poll_finish() joins the rows (ifIndex -> ifName, the three packet columns,
 * HC vs. 32-bit columns, QoS index base) and emits samples through a callback table, one
 * batch per PDU that carried them (the sample timestamp is the PDU's arrival time).
 *
 * Everything an agent sends is untrusted: any type in any column, OIDs of any length,
 * repeated or out-of-order rows, strings with any bytes. Values of the wrong type are
 * counted as anomalies and skipped, per column; nothing fails the poll but a bound.
 *
 * Ownership. struct fs_snmp_tmap (per target, survives cycles) and struct fs_snmp_poll
 * (per cycle) belong to the caller and are released with their _free functions. Strings
 * handed to the emitter belong to the tmap and are valid only during the call.
 */
#ifndef FS_SNMP_MAP_H
#define FS_SNMP_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics_catalogue.h"
#include "store/sink.h"

/** Value types as seen on the wire (a neutral copy of the ASN.1/SMI tags). */
enum fs_snmp_vt {
    FS_VT_OTHER = 0,
    FS_VT_INTEGER,
    FS_VT_OCTETS,
    FS_VT_NULL,
    FS_VT_OID,
    FS_VT_IPADDR,
    FS_VT_COUNTER32,
    FS_VT_GAUGE32,
    FS_VT_TIMETICKS,
    FS_VT_OPAQUE,
    FS_VT_COUNTER64,
    FS_VT_NOSUCHOBJECT,
    FS_VT_NOSUCHINSTANCE,
    FS_VT_ENDOFMIBVIEW,
};

/** One received varbind; every pointer is the caller's and only read during the call. */
struct fs_snmp_vb {
    const unsigned long *oid; /**< sub-identifiers (net-snmp's `oid` is unsigned long) */
    size_t oid_len;
    enum fs_snmp_vt type;
    int64_t i;                /**< FS_VT_INTEGER */
    uint64_t u;               /**< COUNTER32, GAUGE32, TIMETICKS, COUNTER64 */
    const unsigned char *str; /**< FS_VT_OCTETS (not terminated) */
    size_t str_len;
    const unsigned long *oidv; /**< FS_VT_OID value */
    size_t oidv_len;
};

/** Walk phases of one cycle, in order; the driver walks the columns of each. */
enum fs_snmp_phase {
    FS_SNMP_PH_SCALARS = 0, /**< one GET: sysDescr, sysObjectID, sysUpTime, ifTableLastChange,
                               hrSystemUptime */
    FS_SNMP_PH_IFMAP,       /**< ifName, ifAlias, ifDescr (when the ifIndex map is refreshed) */
    FS_SNMP_PH_IFDATA,      /**< counters and state of IF-MIB (and ifName, to check the map) */
    FS_SNMP_PH_IFFALLBACK,  /**< 32-bit columns for interfaces whose HC columns were missing */
    FS_SNMP_PH_QOS,         /**< MELLANOX-QOS-MIB */
    FS_SNMP_PH_COUNT
};

/** A column (table walk) or scalar (GET) to request. */
struct fs_snmp_req_oid {
    const unsigned long *oid;
    size_t len;
};

#define FS_SNMP_OID_MAX 128         /**< longest OID we ever keep or send */
#define FS_SNMP_MAX_IFS 4096        /**< interfaces per target kept in the ifIndex map */
#define FS_SNMP_MAX_RECS (1u << 18) /**< varbinds kept per cycle */
#define FS_SNMP_MAX_PDUS 8192       /**< PDUs per cycle */
#define FS_SNMP_NAME_MAX 64
#define FS_SNMP_ALIAS_MAX 128
#define FS_SNMP_DESCR_MAX 256
#define FS_SNMP_MAX_TC 16 /**< traffic classes/priorities exported: 0..15 */

/** One interface of the cached ifIndex map. */
struct fs_snmp_ifent {
    uint32_t ifindex;
    char ifindex_s[12];
    /** The exported name: ifName, else ifDescr, else "if<N>", normalized (sink.h), valid
     *  UTF-8 without control characters, unique in the map: "#<ifIndex>" is appended to every
     * holder of a name but one. */
    char name[FS_SNMP_NAME_MAX];
    char raw[FS_SNMP_NAME_MAX]; /**< ifName as received (cleaned), to notice a reassignment */
    char alias[FS_SNMP_ALIAS_MAX];
    bool dup; /**< name carries the "#<ifIndex>" suffix */
    bool disc_known;
    uint32_t disc_time; /**< ifCounterDiscontinuityTime at the previous poll */
};

/** Per-target state that survives cycles. Zero-initialize through fs_snmp_tmap_init(). */
struct fs_snmp_tmap {
    struct fs_snmp_ifent *ifs; /**< sorted by ifindex */
    size_t n_ifs;
    bool map_valid;
    bool uptime_known;
    uint32_t uptime; /**< sysUpTime of the previous poll (ticks) */
    bool hrup_known;
    uint32_t
        hrup; /**< hrSystemUptime of the previous poll (ticks): the device's, not the agent's */
    bool iftlc_known;
    uint32_t iftlc;         /**< ifTableLastChange of the previous poll */
    int qos_base_cfg;       /**< -1 auto, 0 or 1 */
    int qos_base;           /**< in use: 0 or 1, -1 not known yet */
    bool qos_absent;        /**< the last QoS walk found no rows */
    unsigned qos_skip;      /**< cycles left before the QoS tables are tried again */
    uint32_t fallback_mask; /**< HC columns missing somewhere: walk their 32-bit twins */
    char model[32], os[32], version[48];
    unsigned cell_bytes;    /**< bytes per buffer cell of the model, 0 if not known */
    uint64_t anomalies;     /**< varbinds skipped for type/range/index problems */
    uint64_t last_varbinds; /**< varbinds received in the last finished cycle */
    uint32_t last_pdus;     /**< PDUs received in the last finished cycle */
    uint64_t resets_reboot, resets_disc;
    uint64_t agent_restarts; /**< sysUpTime went back while hrSystemUptime did not */
    uint64_t renames;        /**< ifIndexes whose exported name changed between maps */
    size_t dup_names;        /**< interfaces of the current map given a "#<ifIndex>" suffix */
    size_t dup_logged;       /**< the most duplicates reported through note() so far */
    bool if_limited;         /**< the map holds FS_SNMP_MAX_IFS interfaces and the agent has more */
    uint32_t max_ifindex;    /**< the highest ifIndex kept when if_limited */
    uint64_t truncated_cycles; /**< cycles that dropped data at a bound (counted truncation) */
};

/** One kept varbind of a cycle (internal to map.c, public for sizing). */
struct fs_snmp_rec {
    uint32_t ifindex;
    uint32_t sub; /**< TC/priority index of QoS rows, else 0 */
    uint16_t col; /**< internal column id */
    uint8_t bits; /**< 32 or 64 for counters, 0 otherwise */
    uint8_t pad;
    uint32_t pdu; /**< index into the cycle's PDU arrival times */
    uint64_t u;
};

/** A string column row of the ifIndex map walk (internal). */
struct fs_snmp_srec {
    uint32_t ifindex;
    uint16_t col;
    char *s;
};

/** Per-cycle accumulator. */
struct fs_snmp_poll {
    struct fs_snmp_rec *recs;
    size_t n_recs, cap_recs;
    struct fs_snmp_srec *srecs;
    size_t n_srecs, cap_srecs;
    int64_t *pdu_ts;
    uint32_t n_pdus, cap_pdus;
    uint32_t cur_pdu;
    bool have_uptime, have_iftlc, have_descr, have_objid, have_hrup;
    uint32_t uptime, uptime_pdu, iftlc, hrup;
    char descr[FS_SNMP_DESCR_MAX];
    unsigned long objid[FS_SNMP_OID_MAX];
    size_t objid_len;
    bool did_map;             /**< the IFMAP phase ran in this cycle */
    bool unknown_index;       /**< a data row named an ifIndex the map does not have, or the ifName
                                   checked with the data differs from the map's */
    enum fs_snmp_phase phase; /**< the phase begun last */
    bool cut;                 /**< the driver ended the cycle early (fs_snmp_poll_cut) */
    bool map_cut;             /**< ... while the IFMAP walk was under way */
    bool truncated;           /**< a bound dropped data in this cycle */
    bool map_limited;         /**< the IFMAP walk stopped at its bound */
    uint32_t *suspect;        /**< ifIndexes whose ifName no longer matches the map */
    size_t n_suspect, cap_suspect;
    bool qos_walked;
    uint32_t qos_rows;
    uint64_t anomalies;
    uint64_t varbinds;
};

/** Receives the samples of fs_snmp_poll_finish(); mirrors sink.h. */
struct fs_snmp_emit {
    void *arg;
    void (*reset)(void *arg, enum fs_reset_kind kind, const char *iface);
    void (*begin)(void *arg, int64_t ts_us);
    /** scale converts the device unit to the metric's (1 unless ms/µs -> seconds). */
    void (*counter)(void *arg, enum fs_metric m, const struct fs_label *l, size_t n, uint64_t raw,
                    unsigned bits, double scale);
    void (*gauge)(void *arg, enum fs_metric m, const struct fs_label *l, size_t n, double v);
    void (*end)(void *arg);
    /* Optional (NULL: not called). */
    void (*agent_restart)(void *arg); /**< fs_sink_agent_restart() */
    void (*max_rate)(void *arg, const char *iface, double octets_per_s); /**< set_max_rate */
    void (*note)(void *arg, const char *msg); /**< something worth one log line */
};

/** Initializes tm (qos_index_base from the config: -1 auto, 0 or 1). */
void fs_snmp_tmap_init(struct fs_snmp_tmap *tm, int qos_index_base);
void fs_snmp_tmap_free(struct fs_snmp_tmap *tm);

/** Prepares p for a new cycle (keeps its memory). */
void fs_snmp_poll_reset(struct fs_snmp_poll *p);
void fs_snmp_poll_free(struct fs_snmp_poll *p);

/** Starts a PDU that arrived at ts_us (CLOCK_REALTIME µs). Returns -1 past FS_SNMP_MAX_PDUS. */
int fs_snmp_poll_pdu(struct fs_snmp_poll *p, int64_t ts_us);

/**
 * Takes one varbind of the current PDU. Returns 1 if it belonged to a known column or
 * scalar and was kept, 0 if it was ignored (unknown OID, exception, wrong type: counted
 * in p->anomalies where it is the agent's fault), -1 when a per-cycle bound was reached
 * (end the phase; the cycle is truncated), -2 when the row lies beyond the interfaces
 * kept under FS_SNMP_MAX_IFS (end this column; truncated too).
 */
int fs_snmp_poll_add(struct fs_snmp_poll *p, const struct fs_snmp_tmap *tm,
                     const struct fs_snmp_vb *vb);

/** The driver ends the cycle before its last phase finished (deadline, timeout, bound). */
void fs_snmp_poll_cut(struct fs_snmp_poll *p);

/**
 * The OIDs to request in a phase (scalars for FS_SNMP_PH_SCALARS, column roots
 * otherwise). Returns how many were written to out (at most max); 0 means skip the phase.
 * Decides from tm and from what p has gathered so far, so call it once, when the phase
 * begins (it marks in p that the phase ran).
 */
size_t fs_snmp_phase_oids(enum fs_snmp_phase ph, const struct fs_snmp_tmap *tm,
                          struct fs_snmp_poll *p, struct fs_snmp_req_oid *out, size_t max);

/**
 * Ends the cycle: updates tm (ifIndex map, QoS base, device identity, reset evidence) and
 * emits resets, then the samples batch by batch in PDU order. Returns the number of
 * samples emitted. Also for a cut cycle: what arrived is emitted (an IFMAP walk that was
 * cut is merged into the old map, which is then walked again next cycle).
 *
 * Resets: sysUpTime going back is a device reboot (FS_RESET_REBOOT for the whole target)
 * unless hrSystemUptime was read in both polls and did not go back: then only the agent
 * restarted (agent_restart(), and a DISCONTINUITY for the whole target, so that counters
 * that went down are rebased and the others continue). An ifIndex whose exported name
 * changed, or a name that moved to another ifIndex, is a DISCONTINUITY for that name.
 */
size_t fs_snmp_poll_finish(struct fs_snmp_tmap *tm, struct fs_snmp_poll *p,
                           const struct fs_snmp_emit *e);

/** Model name for a sysObjectID (MELLANOX-PRODUCTS-MIB), or NULL. */
const char *fs_snmp_model_from_objid(const unsigned long *oid, size_t len);

/** Bytes per buffer cell of a model (the one place for it), 0 if not known. */
unsigned fs_snmp_cell_bytes(const char *model);

/** Writes JSON members for /api/v1/targets (`"qos_index_base":1,...`); see driver.h. */
size_t fs_snmp_tmap_describe(const struct fs_snmp_tmap *tm, char *buf, size_t len);

#endif
