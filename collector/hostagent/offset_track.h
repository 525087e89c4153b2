/*
 * The agent's clock offset (host minus collector) over time: each NTP-style burst is
 * kept with when it was taken, so an event is posted with the measurement nearest its
 * own capture time, not whatever holds when it is posted (a spooled or late batch).
 *
 * The uncertainty of a measurement used at a distance d from when it was taken grows by
 * FS_AGENT_DRIFT_PPM of d: a free-running clock drifts by tens of ppm.
 *
 * Ownership: plain value, no allocations. Threads: the owner's.
 */
#ifndef FS_AGENT_OFFSET_TRACK_H
#define FS_AGENT_OFFSET_TRACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FS_AGENT_CLOCK_KEEP 4096 /* about 4.5 h at the default 4 s */
#define FS_AGENT_DRIFT_PPM 20

struct fs_agent_meas {
    int64_t at_ns; /**< host CLOCK_REALTIME when measured */
    int64_t offset_ns, unc_ns;
};

struct fs_offset_track {
    struct fs_agent_meas m[FS_AGENT_CLOCK_KEEP]; /**< ring, oldest at head when full */
    size_t n, head;
};

/**
 * Adds a measurement (at_ns not before the previous one). *jumped is set when it moved
 * from the previous one by more than both their uncertainties together.
 */
void fs_offset_track_add(struct fs_offset_track *t, const struct fs_agent_meas *m, bool *jumped);

/** The latest measurement; false when none. */
bool fs_offset_track_last(const struct fs_offset_track *t, struct fs_agent_meas *out);

/**
 * The measurement nearest t_ns, its uncertainty widened for the distance (see above).
 * false when none was taken yet.
 */
bool fs_offset_track_at(const struct fs_offset_track *t, int64_t t_ns, struct fs_agent_meas *out);

#endif
