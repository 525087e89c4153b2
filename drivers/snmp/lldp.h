/*
 * LLDP-MIB (IEEE 802.1AB-2005, 1.0.8802.1.1.2) rows -> neighbours: the pure half of the
 * SNMP driver's topology read, like map.h is for the counters. No I/O, no net-snmp.
 *
 * What is read: lldpLocChassisIdSubtype/lldpLocChassisId/lldpLocSysName (the switch's own
 * identity, GET with the cycle's scalars), lldpLocPortTable (lldpLocPortIdSubtype,
 * lldpLocPortId, lldpLocPortDesc, indexed by lldpLocPortNum) and lldpRemTable
 * (lldpRemChassisIdSubtype, lldpRemChassisId, lldpRemPortIdSubtype, lldpRemPortId,
 * lldpRemPortDesc, lldpRemSysName, indexed by lldpRemTimeMark.lldpRemLocalPortNum.
 * lldpRemIndex).
 *
 * The local port of a neighbour (its lldpRemLocalPortNum) is named as the driver's
 * counters name it, so links join series: the interface of the ifIndex map (map.h) whose
 * ifName is the lldpLocPortId or the lldpLocPortDesc of that port number; else the
 * interface whose ifIndex is the port number (lldpd, and many agents, number LLDP ports
 * by ifIndex); else the lldpLocPortId when it is an interface name, else its
 * description; else "lldp-port-<num>".
 *
 * Everything an agent sends is untrusted: a value of the wrong type, an index of the
 * wrong shape, a string with any bytes is skipped or made printable (anomalies counted);
 * rows past the bounds are dropped (truncated set).
 *
 * Ownership: struct fs_snmp_lldp belongs to the caller (fs_snmp_lldp_free); strings handed
 * to the callbacks are valid during the call only.
 */
#ifndef FS_SNMP_LLDP_H
#define FS_SNMP_LLDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "map.h"

#define FS_LLDP_MAX_ROWS 2048 /**< rows kept per table and read */
#define FS_LLDP_ID_MAX 255    /**< chassis and port ids as received (LLDP: 1..255 bytes) */
#define FS_LLDP_TEXT_MAX 256  /**< sysName, port descriptions */

/** An id as received; made printable (fs_snmp_lldp_id_text) once its subtype is known. */
struct fs_snmp_lldp_id {
    unsigned char b[FS_LLDP_ID_MAX];
    size_t len;
};

struct fs_snmp_lldp_loc {
    uint32_t num;
    int id_subtype; /**< 0 unknown */
    struct fs_snmp_lldp_id id;
    char desc[FS_LLDP_TEXT_MAX];
};

struct fs_snmp_lldp_rem {
    uint32_t timemark, local_port, index;
    int chassis_subtype, port_subtype; /**< 0 unknown */
    struct fs_snmp_lldp_id chassis_id, port_id;
    char port_desc[FS_LLDP_TEXT_MAX];
    char sys_name[FS_LLDP_TEXT_MAX];
};

/** One read of the tables. Zero-initialize, then fs_snmp_lldp_reset() per read. */
struct fs_snmp_lldp {
    struct fs_snmp_lldp_loc *locs;
    size_t n_locs, cap_locs;
    struct fs_snmp_lldp_rem *rems;
    size_t n_rems, cap_rems;
    int local_chassis_subtype;
    struct fs_snmp_lldp_id local_chassis_id;
    char local_sys_name[FS_LLDP_TEXT_MAX];
    bool have_local_chassis_id, have_local_sys_name;
    bool seen;          /**< the agent has LLDP-MIB: some LLDP object was there */
    bool truncated;     /**< a bound dropped rows */
    uint64_t anomalies; /**< varbinds skipped: wrong type or index */
};

/** Empties l for a new read (keeps its memory). */
void fs_snmp_lldp_reset(struct fs_snmp_lldp *l);
void fs_snmp_lldp_free(struct fs_snmp_lldp *l);

/** The scalars to GET with the cycle's scalars (lldpLoc*): at most max written. */
size_t fs_snmp_lldp_scalars(struct fs_snmp_req_oid *out, size_t max);

/** The columns to walk (lldpLocPortTable, lldpRemTable): at most max written. */
size_t fs_snmp_lldp_columns(struct fs_snmp_req_oid *out, size_t max);

/**
 * Takes one varbind (a scalar's answer or a walked column's row). Returns 1 kept, 0
 * ignored (not ours, noSuchObject and the like: silent; wrong type or index: counted),
 * -1 at a bound (stop the walk; truncated is set).
 */
int fs_snmp_lldp_add(struct fs_snmp_lldp *l, const struct fs_snmp_vb *vb);

/** Receives the result of fs_snmp_lldp_finish (see sink.h's fs_sink_lldp_*). */
struct fs_snmp_lldp_emit {
    void *arg;
    void (*local)(void *arg, const char *chassis_id, const char *sys_name);
    void (*neighbor)(void *arg, const struct fs_lldp_neighbor *n);
};

/**
 * Names every remote row's local port through tm (see above) and hands the neighbours to
 * e, after the local identity when the agent gave one. Rows without a chassis id and
 * without a sysName are skipped (counted). Returns the number of neighbours emitted.
 */
size_t fs_snmp_lldp_finish(struct fs_snmp_lldp *l, const struct fs_snmp_tmap *tm,
                           const struct fs_snmp_lldp_emit *e);

/**
 * A printable form of an LLDP id (chassis or port) of that subtype: MAC addresses as
 * aa:bb:cc:dd:ee:ff, network addresses (IPv4/IPv6) in their usual notation, other ids as
 * text when they are printable UTF-8, else as colon-separated hex. Returns out.
 */
const char *fs_snmp_lldp_id_text(bool chassis, int subtype, const unsigned char *b, size_t len,
                                 char *out, size_t outlen);

#endif
