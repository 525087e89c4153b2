/*
 * openconfig-lldp state -> the topology: the gNMI driver's mirror of a target's LLDP
 * neighbour table. Pure: no I/O, no gRPC.
 *
 * The map (map.h) turns the leaves and deletes of
 *   /lldp/state/{chassis-id,system-name}                          (the target's own identity)
 *   /lldp/interfaces/interface[name]/neighbors/neighbor[id]/state/{chassis-id,port-id,
 *                                   port-id-type,port-description,system-name}
 * into struct fs_gnmi_lldp_event; the driver applies them to a struct fs_gnmi_lldp and
 * hands the whole table to the sink (fs_sink_lldp_*) when it is known complete.
 *
 * Why a mirror: the driver subscribes ON_CHANGE (gnmi.c says why), so a neighbour is sent
 * once and then only when it changes or goes (a delete); the topology ages out what is not
 * renewed, so the driver re-states the mirror every lldp_interval itself.
 *
 * Completeness: after a (re)connect, or before each POLL snapshot, every entry is marked
 * stale (fs_gnmi_lldp_mark_stale); the snapshot renews what the target still has, and at
 * its sync_response the entries still stale are removed (fs_gnmi_lldp_sweep): the table is
 * then exactly the target's.
 *
 * Everything the target sends is untrusted: strings are cut at FS_GNMI_LLDP_STR_MAX - 1
 * bytes (the sink makes them printable), at most FS_GNMI_LLDP_MAX neighbours are kept
 * (more are counted in over; a table that overflowed is not complete).
 *
 * Ownership: struct fs_gnmi_lldp belongs to the caller (zero-initialize it; free with
 * fs_gnmi_lldp_free). Event strings are the caller's, copied.
 */
#ifndef FS_GNMI_LLDP_H
#define FS_GNMI_LLDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/sink.h"

#define FS_GNMI_LLDP_MAX 2048
#define FS_GNMI_LLDP_STR_MAX 128

enum fs_gnmi_lldp_kind {
    FS_GNMI_LLDP_LOCAL_CHASSIS = 0, /**< /lldp/state/chassis-id = value ("" deleted) */
    FS_GNMI_LLDP_LOCAL_NAME,        /**< /lldp/state/system-name = value */
    FS_GNMI_LLDP_NB_FIELD,          /**< neighbour (iface, id) field = value ("" deleted) */
    FS_GNMI_LLDP_NB_DELETE,         /**< neighbour(s) gone: iface NULL all, id NULL all of iface */
};

enum fs_gnmi_lldp_field {
    FS_GNMI_LLDP_CHASSIS_ID = 0,
    FS_GNMI_LLDP_PORT_ID,
    FS_GNMI_LLDP_PORT_ID_TYPE,
    FS_GNMI_LLDP_PORT_DESCR,
    FS_GNMI_LLDP_SYS_NAME,
    FS_GNMI_LLDP_FIELDS
};

/** One LLDP leaf or delete as the map read it; strings are the map's, valid during the call. */
struct fs_gnmi_lldp_event {
    enum fs_gnmi_lldp_kind kind;
    enum fs_gnmi_lldp_field field; /**< FS_GNMI_LLDP_NB_FIELD */
    const char *iface;             /**< the local interface (the `name` key) */
    const char *id;                /**< the neighbour's `id` key */
    const char *value;
};

struct fs_gnmi_lldp_nb {
    char iface[FS_GNMI_LLDP_STR_MAX];
    char id[FS_GNMI_LLDP_STR_MAX];
    char f[FS_GNMI_LLDP_FIELDS][FS_GNMI_LLDP_STR_MAX];
    bool stale;
};

struct fs_gnmi_lldp {
    struct fs_gnmi_lldp_nb *v;
    size_t n, cap;
    char local_chassis[FS_GNMI_LLDP_STR_MAX];
    char local_name[FS_GNMI_LLDP_STR_MAX];
    uint64_t over;  /**< neighbours refused at FS_GNMI_LLDP_MAX (or no memory) */
    bool overflown; /**< a neighbour was refused since the last sweep: not complete */
};

/** Applies one event. Returns 1 when the table changed, 0 when not, -1 when refused. */
int fs_gnmi_lldp_apply(struct fs_gnmi_lldp *l, const struct fs_gnmi_lldp_event *ev);

/** Marks every neighbour stale (a snapshot that renews them is coming). */
void fs_gnmi_lldp_mark_stale(struct fs_gnmi_lldp *l);

/** Removes the neighbours still stale; returns how many went. Clears overflown. */
size_t fs_gnmi_lldp_sweep(struct fs_gnmi_lldp *l);

/**
 * Hands the table to the sink: the local identity when known, then every neighbour
 * (named as sink.h's struct fs_lldp_neighbor says; entries with neither chassis id nor
 * system name are skipped). Returns the number handed. Does not end the table.
 */
size_t fs_gnmi_lldp_report(const struct fs_gnmi_lldp *l, struct fs_sink *sink);

/**
 * The remote port name of a neighbour: its port id when the id is an interface name
 * (port-id-type INTERFACE_NAME, or no type and an id that is no MAC address), else its
 * description when it has one, else its id.
 */
const char *fs_gnmi_lldp_port(const struct fs_gnmi_lldp_nb *nb);

void fs_gnmi_lldp_free(struct fs_gnmi_lldp *l);

#endif
