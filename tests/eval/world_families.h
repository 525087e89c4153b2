/*
 * The evaluation's fabric families (world.h): each one world_cfg setup, kept here so that
 * eval_fabric (the worlds fed in-process to the analysis) and world_om (the same worlds
 * written as a Prometheus would hold them) build the same fabric from a family and a seed.
 *
 *   pfc_propagation  the congested port pauses its feeders, whose partners' queues build
 *                    and mark, and pause theirs (every congestion, stalls and bursts)
 *   ecmp_bundle      the culprit is a leaf's whole uplink bundle (4 ports), PFC on
 *   load_ramp        most ports (the culprit too) follow daily-like ramps
 *   load_step        ports step up for good (a job starting), the culprit among them
 *   resets_gaps      switches reboot (a gap, counters from zero) and miss polls
 *   stray_bursts     the culprit bursts between stalls, once after the last
 *   backup_in_phase  a backup every 15 min, in and out of phase with 30-min stalls
 *   two_jobs         a second job stalls on its own period; only the first posts events
 *   pod              8 leaves x 64 ports and 4 spines (2,304 series, 5 s polls), PFC,
 *                    bursts, a backup and strays of the culprit
 *   pod_10k          36 leaves and 8 spines (10,368 series, 10 s polls): chance at scale
 *
 * Threads: none; the table is constant.
 */
#ifndef FS_EVAL_WORLD_FAMILIES_H
#define FS_EVAL_WORLD_FAMILIES_H

#include <stddef.h>
#include <stdint.h>

#include "world.h"

struct world_family {
    const char *name;
    void (*setup)(struct world_cfg *c);
    int seed_div; /* eval_fabric runs a 1/seed_div share of the seeds */
};

extern const struct world_family world_families[];
extern const size_t world_n_families;

/** The family called name, or NULL. */
const struct world_family *world_family_find(const char *name);

/** c for family f and seed: the defaults, the family's setup and its per-seed choices
 *  (pfc_propagation: an uplink culprit for even seeds, a downlink for odd ones). Returns
 *  the random stream world_new takes for the family. */
uint64_t world_family_cfg(const struct world_family *f, uint64_t seed, struct world_cfg *c);

#endif
