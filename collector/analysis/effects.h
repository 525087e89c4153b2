/*
 * Cause and effect among departures, with or without the fabric's links. A PFC pause is an
 * effect: a switch pauses the ports that feed an egress queue it cannot drain, the pause
 * spreads hop by hop, and each paused port's own egress queue builds and marks. What the
 * series themselves say is enough to tell most of it apart:
 *   - a cause-kind series (queue, ECN marks, drops) congests its own port;
 *   - pauses sent (direction "tx") are the sending switch's: some port of that switch
 *     congested;
 *   - pauses received (direction "rx", paused time, TX wait) are the link partner's: they
 *     are explained when another switch sends pauses at the time (without the links,
 *     any other; with nothing seen sending them, the partner is not watched, or is a
 *     host whose NIC pauses its port, and the received pause is where what can be seen
 *     begins);
 *     With the links (struct fs_an_link: LLDP, the configuration), a received pause is
 *     explained only by its own link partner sending pauses, and a port whose partner is
 *     known but unwatched (a host's NIC, a switch not polled) receives pauses nothing
 *     seen explains: where what can be seen begins;
 *   - a port's queue, marks and drops while that port receives explained pauses are the
 *     pause's: the port is paused, a victim, not an origin. A port paused by something
 *     unseen stays a cause: its congestion is the first the fabric shows.
 * The correlation (correlate.h) uses this per window, the recurrence search (incidents.h)
 * to leave a paused port's departures out of its own train.
 *
 * Threads: none. Ownership: the caller's arrays.
 */
#ifndef FS_ANALYSIS_EFFECTS_H
#define FS_ANALYSIS_EFFECTS_H

#include <stdbool.h>
#include <stdint.h>

#include "analysis/incidents.h"

enum fs_an_role {
    FS_AN_ROLE_CAUSE,          /**< queue, ECN, drops, anything not a pause */
    FS_AN_ROLE_PAUSE_SENT,     /**< PFC pauses sent */
    FS_AN_ROLE_PAUSE_RECEIVED, /**< PFC pauses received, paused time, TX wait */
};

enum fs_an_role fs_an_role_of(const struct fs_an_series_ref *s);

/** A cable between two ports, named as the series name them (target, `interface`); the
 *  caller's strings. A link to a node that is no target (a host) names that node. */
struct fs_an_link {
    const char *a_node, *a_port, *b_node, *b_port;
    bool a_switch, b_switch; /**< the end is a switch (a target), not a host */
};

/** A port by name: a node (target or host) and its port; the caller's strings. */
struct fs_an_port {
    const char *node, *port;
};

/** Orders fs_an_port by node, then port (strcmp). */
int fs_an_port_cmp(const void *a, const void *b);

/**
 * The ports the traffic of hosts[0 .. n_hosts) can cross, as the links say: each host's
 * switch port (the switch end of a link whose other end is the host), and every port of
 * those switches cabled to another switch (uplinks) with the port at its other end. Two
 * tiers: what lies beyond the switches the uplinks reach is not listed. A host matches a
 * link's node when their names up to the first '.' are equal (an LLDP sysName may be a
 * host's FQDN, a host event its short name). Into *out (sorted by fs_an_port_cmp, unique; the
 * caller's to free; strings are the links') and *n_out; hosts with no known switch add
 * nothing (*out NULL, *n_out 0 when none has). 0 or -1 (memory).
 */
int fs_an_path_ports(const struct fs_an_link *links, size_t n_links, const char *const *hosts,
                     size_t n_hosts, struct fs_an_port **out, size_t *n_out);

/** Per series of d: its switch (target) and its port (target and interface) as dense ids
 *  from 0, equal for equal names; a series without an interface gets UINT32_MAX as port.
 *  partner: the port id of its port's link partner when that port has series in d, else
 *  UINT32_MAX; linked: its port has a known link (partner watched or not). */
struct fs_an_place {
    uint32_t sw, port;
    uint32_t partner;
    uint8_t role; /**< enum fs_an_role */
    bool linked;
    bool uplink; /**< its port's link partner is a switch (a bundle member's port) */
};

/** Fills place[0 .. d->n_series) from d and the links (NULL, 0: none known); *n_ports
 *  gets the number of port ids. A port listed on several links keeps the first.
 *  0 or -1 (memory). */
int fs_an_places(const struct fs_departures *d, const struct fs_an_link *links, size_t n_links,
                 struct fs_an_place *place, uint32_t *n_ports);

/**
 * Marks the runs of d (by index, d finished) that are a paused port's: cause-kind runs
 * during which their port received pauses that are explained (each run widened by its
 * series' time uncertainty): while its link partner sent pauses, or, for a port of no
 * known link, while another switch did. out sized d->n_runs. 0 or -1 (memory).
 */
int fs_an_mark_paused_runs(const struct fs_departures *d, const struct fs_an_link *links,
                           size_t n_links, bool *out);

#endif
