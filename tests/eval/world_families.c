/* The evaluation's fabric families (see world_families.h). */
#include "world_families.h"

#include <string.h>

#define S 1000000LL

static void
small_fabric(struct world_cfg *c)
{
    c->leaves = 4;
    c->downlinks = 20;
    c->uplinks = 4;
    c->spines = 2;
    c->bursty_share = 0.15;
}

static void
fam_pfc(struct world_cfg *c)
{
    small_fabric(c);
    c->pfc = true;
    c->culprit_uplink = true; /* half of them: see world_family_cfg */
}

static void
fam_ecmp(struct world_cfg *c)
{
    small_fabric(c);
    c->pfc = true;
    c->ecmp = true;
}

static void
fam_ramp(struct world_cfg *c)
{
    small_fabric(c);
    c->busy_share = 0.6;
    c->ramp_share = 0.7;
    c->culprit_busy = true;
}

static void
fam_step(struct world_cfg *c)
{
    small_fabric(c);
    c->busy_share = 0.5;
    c->step_share = 0.3;
    c->culprit_busy = true;
}

static void
fam_resets(struct world_cfg *c)
{
    small_fabric(c);
    c->reboots = 2;
    c->gaps = 4;
}

static void
fam_strays(struct world_cfg *c)
{
    small_fabric(c);
    c->strays = 3;
    c->stray_after_last = true;
}

static void
fam_backup(struct world_cfg *c)
{
    small_fabric(c);
    c->backup = true;
    c->period_min_s = 1740;
    c->period_max_s = 1860;
    c->periods = 9;
    c->max_dur_s = 6 * 3600;
}

static void
fam_two_jobs(struct world_cfg *c)
{
    small_fabric(c);
    c->second_job = true;
}

static void
fam_pod(struct world_cfg *c)
{
    c->leaves = 8;
    c->downlinks = 56;
    c->uplinks = 8;
    c->spines = 4;
    c->kinds = WK_BIT(WK_ECN) | WK_BIT(WK_QUEUE) | WK_BIT(WK_PFC_TX) | WK_BIT(WK_PFC_RX);
    c->poll_us = 5 * S;
    c->period_min_s = 600;
    c->period_max_s = 2400;
    c->periods = 8;
    c->max_dur_s = 8 * 3600;
    c->busy_share = 0.3;
    c->bursty_share = 0.3;
    c->burst_every_s = 1800;
    c->pfc = true;
    c->backup = true;
    c->strays = 2;
    c->ranks = 8;
}

static void
fam_pod_10k(struct world_cfg *c)
{
    fam_pod(c);
    c->leaves = 36;
    c->spines = 8;
    c->poll_us = 10 * S;
    c->backup = false;
    c->strays = 0;
}

/* The same fabrics with their links told to the collector (as LLDP reports them). */
static void
fam_pfc_topology(struct world_cfg *c)
{
    fam_pfc(c);
    c->links_known = true;
}

static void
fam_pod_topology(struct world_cfg *c)
{
    fam_pod(c);
    c->links_known = true;
}

static void
fam_ecmp_topology(struct world_cfg *c)
{
    fam_ecmp(c);
    c->links_known = true;
}

/* A pod with its hosts known: the job's ranks report their switch ports, the culprit is on
   their paths, and another tenant's incast off every path departs at each stall too. */
static void
fam_pod_ranks(struct world_cfg *c)
{
    fam_pod(c);
    c->links_known = true;
    c->hosts_known = true;
    c->culprit_on_path = true;
    c->offpath_twin = true;
}

/* The order is the families' random streams (100 + index): append, never insert. */
const struct world_family world_families[] = {
    {"pfc_propagation", fam_pfc, 1},
    {"ecmp_bundle", fam_ecmp, 1},
    {"load_ramp", fam_ramp, 1},
    {"load_step", fam_step, 1},
    {"resets_gaps", fam_resets, 1},
    {"stray_bursts", fam_strays, 1},
    {"backup_in_phase", fam_backup, 1},
    {"two_jobs", fam_two_jobs, 1},
    {"pod", fam_pod, 2},
    {"pod_10k", fam_pod_10k, 5},
    {"pfc_topology", fam_pfc_topology, 1},
    {"pod_topology", fam_pod_topology, 2},
    {"ecmp_topology", fam_ecmp_topology, 1},
    {"pod_ranks", fam_pod_ranks, 2},
};
const size_t world_n_families = sizeof world_families / sizeof world_families[0];

const struct world_family *
world_family_find(const char *name)
{
    for (size_t i = 0; i < world_n_families; i++)
        if (!strcmp(world_families[i].name, name))
            return &world_families[i];
    return NULL;
}

uint64_t
world_family_cfg(const struct world_family *f, uint64_t seed, struct world_cfg *c)
{
    world_cfg_default(c);
    f->setup(c);
    if (f->setup == fam_pfc || f->setup == fam_pfc_topology) /* uplink or downlink in turn */
        c->culprit_uplink = seed % 2 == 0;
    return 100 + (uint64_t)(f - world_families);
}
