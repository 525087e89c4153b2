/*
 * Cause and effect among departures, without the fabric's links. A PFC pause is an
 * effect: a switch pauses the ports that feed an egress queue it cannot drain, the pause
 * spreads hop by hop, and each paused port's own egress queue builds and marks. What the
 * series themselves say is enough to tell most of it apart:
 *   - a cause-kind series (queue, ECN marks, drops) congests its own port;
 *   - pauses sent (direction "tx") are the sending switch's: some port of that switch
 *     congested;
 *   - pauses received (direction "rx", paused time, TX wait) are the link partner's;
 *   - a port's queue, marks and drops while that port receives pauses are the pause's:
 *     the port is paused, a victim, not an origin.
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

/** Each port's received-pause runs, to ask whether it was paused during a time. */
struct fs_an_paused {
    size_t *first; /**< per port: its runs are iv[first[p] .. first[p + 1]) */
    int64_t *iv;   /**< start, end pairs, by start */
    int64_t longest;
};

/** Builds it from d's runs (d finished: runs by start). 0 or -1 (memory); free with
 *  fs_an_paused_free either way. */
int fs_an_paused_build(const struct fs_departures *d, const struct fs_an_place *place,
                       uint32_t n_ports, struct fs_an_paused *p);
void fs_an_paused_free(struct fs_an_paused *p);

/** Whether port received pauses during [lo, hi]. */
bool fs_an_paused_during(const struct fs_an_paused *p, uint32_t port, int64_t lo, int64_t hi);

/**
 * Marks the runs of d (by index) that are a paused port's: cause-kind runs during which
 * their port received pauses (widened by the series' time uncertainty). out sized
 * d->n_runs. 0 or -1 (memory).
 */
int fs_an_mark_paused_runs(const struct fs_departures *d, bool *out);

#endif
