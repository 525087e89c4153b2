/*
 * Cause and effect among departures, without the fabric's links. A PFC pause is an
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

/** Per series of d: its switch (target) and its port (target and interface) as dense ids
 *  from 0, equal for equal names; a series without an interface gets UINT32_MAX as port. */
struct fs_an_place {
    uint32_t sw, port;
    uint8_t role; /**< enum fs_an_role */
};

/** Fills place[0 .. d->n_series); *n_ports gets the number of port ids. 0 or -1 (memory). */
int fs_an_places(const struct fs_departures *d, struct fs_an_place *place, uint32_t *n_ports);

/**
 * Marks the runs of d (by index, d finished) that are a paused port's: cause-kind runs
 * during which their port received pauses while another switch sent pauses (each run
 * widened by its series' time uncertainty). out sized d->n_runs. 0 or -1 (memory).
 */
int fs_an_mark_paused_runs(const struct fs_departures *d, bool *out);

#endif
