/* A leaf-spine fabric in virtual time (see world.h). */
#include "world.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "util/buf.h"

#define S 1000000LL
#define MAX_HOSTS 64
#define HOST_EVENT_EVERY_S 10.0 /* an ordinary AllReduce per rank this often, at most */
#define BACKUP_PERIOD_S 900.0
#define BACKUP_LEN_S 40.0

/* What a congestion event adds to one port while it lasts (per second, or bytes). */
struct contrib {
    int64_t start, end;
    double ecn, queue, drop, pfc_tx, pfc_rx;
};

struct wport {
    /* the port's own load: level x shape(t) + noise */
    double ecn_level, ecn_noise, q_level, q_noise, pfc_level, pfc_noise;
    double ramp_amp, ramp_period_s, ramp_phase;
    int64_t step_at;
    double step_factor;
    bool bursty;
    int64_t next_burst;
    double cum[WK_COUNT]; /* the device's counters since its last reboot */
    struct contrib *c;
    size_t nc, capc;
};

struct wswitch {
    char name[32];
    int n_ports;
    struct wport *port;
    int64_t phase_us, prev_ts;
    int64_t gap_from[8], gap_to[8]; /* no polls in [from, to) */
    bool gap_reboots[8];
    int n_gaps;
};

struct host {
    char name[32];
    int sw, port;                       /* where it hangs: a leaf downlink */
    int job;                            /* which job's rank (-1: none) */
    double offset_s, unc_s, measured_s; /* its clock minus the collector's; its error bar */
    int64_t next_ordinary;              /* the next ordinary event's start */
};

struct world {
    struct world_cfg cfg;
    uint64_t rng;
    int64_t t0, end;
    int n_sw;
    struct wswitch *sw;
    struct world_job job[2];
    int n_jobs;
    bool *victim[2]; /* per global port index */
    int *port_base;  /* global index of each switch's port 0 */
    struct world_port backup;
    struct world_port twin;
    double backup_phase_s;
    int64_t next_backup;
    int64_t strays[16];
    int n_strays, next_stray;
    size_t next_stall[2];
    struct host host[MAX_HOSTS];
    int n_hosts;
    int64_t unrelated[16];
    int unrelated_host[16];
    int64_t unrelated_len[16];
    int n_unrelated;
    char port_names[512][12];
    double ordinary_every_s; /* so that the slow ones stay under 1% of a rank's */
    struct fs_buf body;
};

void
world_cfg_default(struct world_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->leaves = 2;
    c->downlinks = 20;
    c->uplinks = 4;
    c->spines = 2;
    c->kinds =
        WK_BIT(WK_ECN) | WK_BIT(WK_QUEUE) | WK_BIT(WK_DROP) | WK_BIT(WK_PFC_TX) | WK_BIT(WK_PFC_RX);
    c->poll_us = S;
    c->period_min_s = 120;
    c->period_max_s = 1800;
    c->periods = 8.3;
    c->max_dur_s = 5 * 3600;
    c->jitter = 0.005;
    c->busy_share = 0.25;
    c->burst_every_s = 900;
    c->ranks = 4;
    c->unrelated = 3;
    c->host_offset_max_s = 2;
}

static double
urand(struct world *w)
{
    return fs_rng_uniform(&w->rng);
}

static double
gauss(struct world *w)
{
    return fs_rng_gauss(&w->rng);
}

static bool
is_leaf(const struct world *w, int sw)
{
    return sw < w->cfg.leaves;
}

/* The spine port facing leaf l's uplink u, and back. */
static void
uplink_partner(const struct world *w, int l, int u, int *spine, int *sp)
{
    int per = w->cfg.uplinks / w->cfg.spines;
    *spine = w->cfg.leaves + u % w->cfg.spines;
    *sp = l * per + u / w->cfg.spines;
}

static void
spine_partner(const struct world *w, int spine, int sp, int *leaf, int *lp)
{
    int per = w->cfg.uplinks / w->cfg.spines, s = spine - w->cfg.leaves;
    *leaf = sp / per;
    *lp = w->cfg.downlinks + (sp % per) * w->cfg.spines + s;
}

int
world_link_partner(const struct world *w, int sw, int p, int *sw2, int *p2)
{
    if (is_leaf(w, sw)) {
        if (p < w->cfg.downlinks) {
            *sw2 = -1;
            *p2 = p;
            return 0;
        }
        uplink_partner(w, sw, p - w->cfg.downlinks, sw2, p2);
        return 1;
    }
    spine_partner(w, sw, p, sw2, p2);
    return 1;
}

static int
gidx(const struct world *w, int sw, int p)
{
    return w->port_base[sw] + p;
}

static int
add_contrib(struct world *w, int sw, int p, const struct contrib *c)
{
    struct wport *pt = &w->sw[sw].port[p];
    if (pt->nc == pt->capc) {
        size_t cap = pt->capc ? pt->capc * 2 : 8;
        void *q = realloc(pt->c, cap * sizeof *pt->c);
        if (!q)
            return -1;
        pt->c = q;
        pt->capc = cap;
    }
    pt->c[pt->nc++] = *c;
    return 0;
}

static void
mark_victim(struct world *w, int job, int sw, int p)
{
    if (job >= 0)
        w->victim[job][gidx(w, sw, p)] = true;
}

/* Units of a congestion event of intensity 1 at its origin. */
#define ECN_UNIT 1e5
#define QUEUE_UNIT 4e6
#define DROP_UNIT 2e3
#define PFC_UNIT 5e3

/* A paused port: the pauses it receives, its egress queue building and marking. */
static void
paused(struct world *w, int job, int sw, int p, int64_t at, int64_t len, double x)
{
    struct contrib c = {at, at + len, 0.25 * ECN_UNIT * x, 0.5 * QUEUE_UNIT * x,
                        0,  0,        PFC_UNIT * x};
    add_contrib(w, sw, p, &c);
    mark_victim(w, job, sw, p);
}

/* A port sending pauses to its link partner. */
static void
pausing(struct world *w, int job, int sw, int p, int64_t at, int64_t len, double x)
{
    struct contrib c = {at, at + len, 0, 0, 0, PFC_UNIT * x, 0};
    add_contrib(w, sw, p, &c);
    mark_victim(w, job, sw, p);
}

/* Congestion at egress port (sw, p) over [at, at + len): the origin's queue, marks and
   (with drops) tail drops; with PFC, the pauses it spreads (world.h). job: whose stall
   (its victims recorded), -1 for none. */
static void congest_at(struct world *w, int job, int sw, int p, int64_t at, int64_t len, double x,
                       bool drops, bool spread);

static void
congest(struct world *w, int job, int sw, int p, int64_t at, int64_t len, double x, bool drops)
{
    congest_at(w, job, sw, p, at, len, x, drops, w->cfg.pfc);
}

static void
congest_at(struct world *w, int job, int sw, int p, int64_t at, int64_t len, double x, bool drops,
           bool spread)
{
    struct wport *pt = &w->sw[sw].port[p];
    struct contrib c = {at,
                        at + len,
                        (ECN_UNIT + 0.8 * pt->ecn_level) * x,
                        QUEUE_UNIT * x,
                        drops ? DROP_UNIT * x : 0,
                        0,
                        0};
    add_contrib(w, sw, p, &c);
    if (!spread)
        return;
    const struct world_cfg *cf = &w->cfg;
    int64_t hop = 200000 + (int64_t)(urand(w) * 200000);
    if (is_leaf(w, sw) && p < cf->downlinks) {
        /* Toward a host: the leaf pauses its uplinks (traffic from the spines) ... */
        for (int u = 0; u < cf->uplinks; u++) {
            int spn, sp;
            pausing(w, job, sw, cf->downlinks + u, at + hop / 2, len, 0.8 * x);
            uplink_partner(w, sw, u, &spn, &sp);
            paused(w, job, spn, sp, at + hop, len, 0.8 * x);
            /* ... and each spine its ports from the other leaves, which receive it. */
            for (int q = 0; q < w->sw[spn].n_ports; q++) {
                int l2, lp2;
                spine_partner(w, spn, q, &l2, &lp2);
                if (l2 == sw)
                    continue;
                pausing(w, job, spn, q, at + 2 * hop, len, 0.4 * x);
                paused(w, job, l2, lp2, at + 2 * hop + hop / 2, len, 0.4 * x);
            }
        }
    } else if (is_leaf(w, sw)) {
        /* Toward a spine: the leaf pauses the hosts that send into it. */
        for (int d = 0; d < cf->downlinks; d += 3)
            pausing(w, job, sw, d, at + hop / 2, len, 0.6 * x);
    } else {
        /* A spine port toward a leaf: the spine pauses the other leaves' uplinks to it. */
        int l0, lp0;
        spine_partner(w, sw, p, &l0, &lp0);
        for (int q = 0; q < w->sw[sw].n_ports; q++) {
            int l2, lp2;
            spine_partner(w, sw, q, &l2, &lp2);
            if (l2 == l0)
                continue;
            pausing(w, job, sw, q, at + hop, len, 0.5 * x);
            paused(w, job, l2, lp2, at + hop + hop / 2, len, 0.5 * x);
        }
    }
}

static struct world_port
random_port(struct world *w, bool leaf_downlink)
{
    struct world_port r;
    if (leaf_downlink) {
        r.sw = (int)(urand(w) * w->cfg.leaves);
        r.port = (int)(urand(w) * w->cfg.downlinks);
    } else {
        r.sw = (int)(urand(w) * w->n_sw);
        r.port = (int)(urand(w) * w->sw[r.sw].n_ports);
    }
    return r;
}

static bool
same_port(struct world_port a, int sw, int p)
{
    return a.sw == sw && a.port == p;
}

static void
plan_job(struct world *w, struct world_job *j, double period, double start_s, double dur)
{
    const struct world_cfg *c = &w->cfg;
    j->period_s = period;
    double t = start_s;
    while (t <= dur) {
        int64_t at = w->t0 + (int64_t)((t + (urand(w) * 2 - 1) * c->jitter * period) * 1e6);
        bool missed = urand(w) < c->miss;
        int64_t len = (int64_t)((2 + urand(w)) * 1e6);
        if (!missed && j->n_stall < WORLD_MAX_STALLS && at + len < w->end - S) {
            j->stall[j->n_stall] = at;
            j->stall_len[j->n_stall++] = len;
        }
        t += period;
    }
    j->next_us = w->t0 + (int64_t)(t * 1e6);
}

static void
choose_origin(struct world *w, struct world_job *j, const struct world_job *other)
{
    const struct world_cfg *c = &w->cfg;
    for (;;) {
        int l = (int)(urand(w) * c->leaves);
        if (c->ecmp && j == &w->job[0]) {
            j->n_origin = c->uplinks < WORLD_MAX_BUNDLE ? c->uplinks : WORLD_MAX_BUNDLE;
            for (int u = 0; u < j->n_origin; u++)
                j->origin[u] = (struct world_port){l, c->downlinks + u};
        } else if (c->culprit_on_path && j == &w->job[0]) {
            /* A rank's downlink, placed as the hosts are (world_new). */
            int r = (int)(urand(w) * c->ranks);
            j->origin[0] = (struct world_port){r % c->leaves, (r / c->leaves) % c->downlinks};
            j->n_origin = 1;
        } else {
            bool up = c->culprit_uplink && j == &w->job[0];
            j->origin[0] = (struct world_port){l, up ? c->downlinks + (int)(urand(w) * c->uplinks)
                                                     : (int)(urand(w) * c->downlinks)};
            j->n_origin = 1;
        }
        bool clash = false;
        for (int a = 0; other && a < other->n_origin; a++)
            for (int b = 0; b < j->n_origin; b++)
                clash |= other->origin[a].sw == j->origin[b].sw;
        if (!clash)
            return;
    }
}

bool
world_host(const struct world *w, int i, const char **name, int *sw, int *port, int *job)
{
    if (i < 0 || i >= w->n_hosts)
        return false;
    if (name)
        *name = w->host[i].name;
    if (sw)
        *sw = w->host[i].sw;
    if (port)
        *port = w->host[i].port;
    if (job)
        *job = w->host[i].job;
    return true;
}

struct world_port
world_twin(const struct world *w)
{
    return w->twin;
}

int64_t
world_t0(const struct world *w)
{
    return w->t0;
}

int64_t
world_end(const struct world *w)
{
    return w->end;
}

int
world_switches(const struct world *w)
{
    return w->n_sw;
}

int
world_ports(const struct world *w, int sw)
{
    return w->sw[sw].n_ports;
}

const char *
world_switch_name(const struct world *w, int sw)
{
    return w->sw[sw].name;
}

const char *
world_port_name(const struct world *w, int port)
{
    return w->port_names[port];
}

const struct world_cfg *
world_cfg(const struct world *w)
{
    return &w->cfg;
}

const struct world_job *
world_job(const struct world *w, int i)
{
    return i >= 0 && i < w->n_jobs ? &w->job[i] : NULL;
}

struct world_port
world_backup(const struct world *w)
{
    return w->backup;
}

bool
world_is_victim(const struct world *w, int j, int sw, int p)
{
    return j >= 0 && j < w->n_jobs && !world_is_origin(w, j, sw, p) && w->victim[j][gidx(w, sw, p)];
}

bool
world_is_origin(const struct world *w, int j, int sw, int p)
{
    if (j < 0 || j >= w->n_jobs)
        return false;
    for (int i = 0; i < w->job[j].n_origin; i++)
        if (same_port(w->job[j].origin[i], sw, p))
            return true;
    return false;
}

int64_t
world_unrelated(const struct world *w, int i)
{
    return i >= 0 && i < w->n_unrelated ? w->unrelated[i] : -1;
}

int64_t
world_stray(const struct world *w, int i)
{
    return i >= 0 && i < w->n_strays ? w->strays[i] : -1;
}

static void
init_port(struct world *w, struct wport *pt)
{
    const struct world_cfg *c = &w->cfg;
    bool busy = urand(w) < c->busy_share;
    pt->ecn_level = busy ? 1e4 + urand(w) * 2e5 : urand(w) * 5;
    pt->ecn_noise = busy ? pt->ecn_level * (0.03 + 0.25 * urand(w)) : 1 + urand(w) * 2;
    pt->q_level = busy ? 1e5 + urand(w) * 1e6 : urand(w) * 2e3;
    pt->q_noise = busy ? pt->q_level * (0.05 + 0.25 * urand(w)) : 500 + urand(w) * 1e3;
    pt->pfc_level = busy ? urand(w) * 50 : 0;
    pt->pfc_noise = busy ? 1 + pt->pfc_level * 0.3 : 0.2;
    pt->step_factor = 1;
    pt->step_at = INT64_MAX;
    if (urand(w) < c->ramp_share) {
        pt->ramp_amp = 0.3 + 0.5 * urand(w);
        pt->ramp_period_s = (4 + 20 * urand(w)) * 3600;
        pt->ramp_phase = urand(w) * 2 * M_PI;
    }
    if (urand(w) < c->step_share) {
        pt->step_at = w->t0 + (int64_t)(urand(w) * (double)(w->end - w->t0));
        pt->step_factor = 2 + 3 * urand(w);
    }
    pt->bursty = urand(w) < c->bursty_share;
    pt->next_burst = w->t0 + (int64_t)(-log(1 - urand(w)) * c->burst_every_s * 1e6);
}

struct world *
world_new(const struct world_cfg *cfg, uint64_t seed, uint64_t family, int64_t end_us)
{
    struct world *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->cfg = *cfg;
    const struct world_cfg *c = &w->cfg;
    w->rng = fs_rng_seed(seed, family);
    fs_buf_init(&w->body, 64 << 20);
    double period = c->period_s > 0
                        ? c->period_s
                        : c->period_min_s + urand(w) * (c->period_max_s - c->period_min_s);
    double dur = period * c->periods + 600;
    if (dur > c->max_dur_s)
        dur = c->max_dur_s;
    w->end = end_us;
    w->t0 = end_us - (int64_t)(dur * 1e6);
    w->n_sw = c->leaves + c->spines;
    w->sw = calloc((size_t)w->n_sw, sizeof *w->sw);
    w->port_base = calloc((size_t)w->n_sw, sizeof *w->port_base);
    if (!w->sw || !w->port_base)
        goto fail;
    int total = 0;
    for (int k = 0; k < w->n_sw; k++) {
        struct wswitch *sw = &w->sw[k];
        if (k < c->leaves)
            snprintf(sw->name, sizeof sw->name, "leaf%02d", k + 1);
        else
            snprintf(sw->name, sizeof sw->name, "spine%02d", k - c->leaves + 1);
        sw->n_ports =
            k < c->leaves ? c->downlinks + c->uplinks : c->leaves * c->uplinks / c->spines;
        sw->port = calloc((size_t)sw->n_ports, sizeof *sw->port);
        if (!sw->port)
            goto fail;
        sw->phase_us = 5000 + (int64_t)(urand(w) * (double)(c->poll_us / 2));
        sw->prev_ts = w->t0 - c->poll_us;
        w->port_base[k] = total;
        total += sw->n_ports;
        for (int p = 0; p < sw->n_ports; p++)
            init_port(w, &sw->port[p]);
    }
    for (int p = 0; p < 512; p++)
        snprintf(w->port_names[p], sizeof w->port_names[p], "Eth1/%d", p + 1);
    /* The jobs. */
    w->n_jobs = c->second_job ? 2 : 1;
    for (int j = 0; j < w->n_jobs; j++) {
        w->victim[j] = calloc((size_t)total, sizeof *w->victim[j]);
        if (!w->victim[j])
            goto fail;
    }
    choose_origin(w, &w->job[0], NULL);
    w->job[0].name = "ncclAllReduce";
    plan_job(w, &w->job[0], period, 120 + urand(w) * 60, dur);
    if (c->second_job) {
        choose_origin(w, &w->job[1], &w->job[0]);
        w->job[1].name = "ncclAllGather";
        double p2 = period * (0.55 + 0.9 * urand(w));
        if (p2 < 120)
            p2 = 120;
        plan_job(w, &w->job[1], p2, 200 + urand(w) * 100, dur);
    }
    for (int j = 0; j < w->n_jobs; j++)
        for (int i = 0; i < w->job[j].n_origin; i++) {
            struct wport *pt = &w->sw[w->job[j].origin[i].sw].port[w->job[j].origin[i].port];
            pt->bursty = false;
            if (c->culprit_busy && j == 0) {
                pt->ecn_level = 1.5e5;
                pt->ecn_noise = 3e4;
                pt->q_level = 8e5;
                pt->q_noise = 1.5e5;
            }
        }
    w->backup.sw = -1;
    if (c->backup) {
        do
            w->backup = random_port(w, true);
        while (world_is_origin(w, 0, w->backup.sw, w->backup.port));
        w->sw[w->backup.sw].port[w->backup.port].bursty = false;
        /* In phase with the stalls now and then: a period near half the job's drifts
           through them. */
        w->backup_phase_s = urand(w) * BACKUP_PERIOD_S;
        w->next_backup = w->t0 + (int64_t)(w->backup_phase_s * 1e6);
    }
    w->twin.sw = -1;
    if (c->offpath_twin) {
        bool taken;
        do {
            w->twin = random_port(w, true);
            taken = world_is_origin(w, 0, w->twin.sw, w->twin.port) ||
                    (w->backup.sw == w->twin.sw && w->backup.port == w->twin.port);
            /* no job's rank behind it (placed as below) */
            for (int j = 0; j < w->n_jobs; j++)
                for (int r = 0; r < c->ranks; r++)
                    taken |= w->twin.sw == (r + j) % c->leaves &&
                             w->twin.port == (r / c->leaves + 7 * j) % c->downlinks;
        } while (taken);
        w->sw[w->twin.sw].port[w->twin.port].bursty = false;
    }
    /* Strays of the culprit between stalls, one of them after the last if asked. */
    const struct world_job *j0 = &w->job[0];
    for (int i = 0; i < c->strays && i < 16 && j0->n_stall >= 2; i++) {
        int64_t at;
        if (i == 0 && c->stray_after_last) {
            /* Near where the next stall would be: inside the slot's tolerance. */
            at = j0->stall[j0->n_stall - 1] + (int64_t)((0.88 + 0.07 * urand(w)) * period * 1e6);
            if (at > w->end - 10 * S)
                at = w->end - 10 * S;
        } else {
            size_t k = (size_t)(urand(w) * (double)(j0->n_stall - 1));
            at = j0->stall[k] + (int64_t)((0.2 + 0.6 * urand(w)) * period * 1e6);
        }
        w->strays[w->n_strays++] = at;
    }
    for (int i = 1; i < w->n_strays; i++) /* in time order */
        for (int k = i; k > 0 && w->strays[k] < w->strays[k - 1]; k--) {
            int64_t t = w->strays[k];
            w->strays[k] = w->strays[k - 1];
            w->strays[k - 1] = t;
        }
    /* Gaps and reboots. */
    int n_gaps = (int)floor(c->gaps + urand(w)), n_reb = (int)floor(c->reboots + urand(w));
    if (c->gaps <= 0)
        n_gaps = 0;
    if (c->reboots <= 0)
        n_reb = 0;
    for (int i = 0; i < n_gaps + n_reb; i++) {
        struct wswitch *sw = &w->sw[(int)(urand(w) * w->n_sw)];
        if (sw->n_gaps == 8)
            continue;
        int64_t at = w->t0 + 600 * S + (int64_t)(urand(w) * (double)(w->end - w->t0 - 900 * S));
        sw->gap_from[sw->n_gaps] = at;
        sw->gap_to[sw->n_gaps] = at + (int64_t)((30 + 90 * urand(w)) * 1e6);
        sw->gap_reboots[sw->n_gaps++] = i >= n_gaps;
        if (getenv("EVAL_VERBOSE"))
            fprintf(stderr, "  %s %s at %.1f for %.1f s\n", sw->name,
                    i >= n_gaps ? "reboots" : "misses polls", (double)(at - w->t0) / 1e6,
                    (double)(sw->gap_to[sw->n_gaps - 1] - at) / 1e6);
    }
    /* Hosts: the jobs' ranks behind leaf downlinks, each with its clock. A rank's slow
       events (stalls, stragglers) stay under a hundredth of its events, as in a real job
       (thousands of collectives an hour), so the default slow=p99 finds them. */
    w->ordinary_every_s = dur / (150.0 * (double)(w->job[0].n_stall + 4));
    if (w->ordinary_every_s > HOST_EVENT_EVERY_S)
        w->ordinary_every_s = HOST_EVENT_EVERY_S;
    for (int j = 0; j < w->n_jobs && w->n_hosts < MAX_HOSTS; j++)
        for (int r = 0; r < c->ranks && w->n_hosts < MAX_HOSTS; r++) {
            struct host *h = &w->host[w->n_hosts++];
            h->sw = (r + j) % c->leaves;
            h->port = (r / c->leaves + 7 * j) % c->downlinks;
            snprintf(h->name, sizeof h->name, "gpu-%s-%d", w->sw[h->sw].name + 4, h->port + 1);
            h->job = j;
            h->offset_s = (urand(w) * 2 - 1) * c->host_offset_max_s;
            h->unc_s = 0.0005 + urand(w) * 0.02;
            h->measured_s = h->offset_s + (urand(w) * 2 - 1) * h->unc_s;
            h->next_ordinary = w->t0 + (int64_t)(urand(w) * w->ordinary_every_s * 1e6);
        }
    /* Slow windows without a switch-side cause, at least a minute from any stall and from
       any stray of the culprit (a stray is a surge of the culprit: one a scrape before a
       slow window is a switch-side cause as far as the data can tell). */
    for (int i = 0; i < c->unrelated && i < 16;) {
        int64_t at = w->t0 + 60 * S + (int64_t)(urand(w) * (double)(w->end - w->t0 - 120 * S));
        bool near = false;
        for (int j = 0; j < w->n_jobs; j++)
            for (size_t k = 0; k < w->job[j].n_stall; k++)
                near |= llabs(at - w->job[j].stall[k]) < 60 * S;
        for (int k = 0; k < w->n_strays; k++)
            near |= llabs(at - w->strays[k]) < 60 * S;
        if (near)
            continue;
        w->unrelated[w->n_unrelated] = at;
        w->unrelated_host[w->n_unrelated] = (int)(urand(w) * c->ranks);
        w->unrelated_len[w->n_unrelated++] = (int64_t)((1.5 + urand(w)) * 1e6);
        i++;
    }
    return w;
fail:
    world_free(w);
    return NULL;
}

void
world_free(struct world *w)
{
    if (!w)
        return;
    for (int k = 0; w->sw && k < w->n_sw; k++) {
        for (int p = 0; w->sw[k].port && p < w->sw[k].n_ports; p++)
            free(w->sw[k].port[p].c);
        free(w->sw[k].port);
    }
    free(w->sw);
    free(w->port_base);
    free(w->victim[0]);
    free(w->victim[1]);
    fs_buf_free(&w->body);
    free(w);
}

/* Starts the congestion events due by t. */
static void
start_events(struct world *w, int64_t t)
{
    const struct world_cfg *c = &w->cfg;
    for (int j = 0; j < w->n_jobs; j++) {
        struct world_job *jb = &w->job[j];
        while (w->next_stall[j] < jb->n_stall && jb->stall[w->next_stall[j]] <= t + c->poll_us) {
            size_t k = w->next_stall[j]++;
            double x = 0.8 + 0.4 * urand(w);
            /* A bundle's members share the load: each marks about as much as one port. */
            for (int i = 0; i < jb->n_origin; i++)
                congest(w, j, jb->origin[i].sw, jb->origin[i].port, jb->stall[k], jb->stall_len[k],
                        x * (0.85 + 0.3 * urand(w)), urand(w) < 0.5);
            /* The other tenant's incast, as strong or stronger, a little before or after. */
            if (j == 0 && w->twin.sw >= 0)
                congest_at(w, -1, w->twin.sw, w->twin.port,
                           jb->stall[k] + (int64_t)((urand(w) - 0.5) * 6e5), jb->stall_len[k],
                           x * (1.0 + urand(w)), false, false);
        }
    }
    while (w->next_stray < w->n_strays && w->strays[w->next_stray] <= t + c->poll_us) {
        const struct world_job *jb = &w->job[0];
        int64_t at = w->strays[w->next_stray++];
        for (int i = 0; i < jb->n_origin; i++)
            congest(w, -1, jb->origin[i].sw, jb->origin[i].port, at, c->poll_us,
                    0.8 + 0.4 * urand(w), false);
    }
    if (w->backup.sw >= 0)
        while (w->next_backup <= t + c->poll_us) {
            congest(w, -1, w->backup.sw, w->backup.port, w->next_backup,
                    (int64_t)(BACKUP_LEN_S * 1e6), 2.5, false);
            w->next_backup += (int64_t)(BACKUP_PERIOD_S * 1e6);
        }
    for (int k = 0; k < w->n_sw; k++)
        for (int p = 0; p < w->sw[k].n_ports; p++) {
            struct wport *pt = &w->sw[k].port[p];
            while (pt->bursty && pt->next_burst <= t + c->poll_us) {
                int64_t len = (int64_t)((2 + 3 * urand(w)) * 1e6);
                congest(w, -1, k, p, pt->next_burst, len, 0.5 + 2 * urand(w), urand(w) < 0.3);
                pt->next_burst += (int64_t)(-log(1 - urand(w)) * c->burst_every_s * 1e6) + len;
            }
        }
}

static double
shape(const struct world *w, const struct wport *pt, int64_t t)
{
    double f = 1;
    if (pt->ramp_amp > 0) {
        f = 1 + pt->ramp_amp *
                    sin(2 * M_PI * (double)(t - w->t0) / 1e6 / pt->ramp_period_s + pt->ramp_phase);
        if (f < 0.1)
            f = 0.1;
    }
    if (t >= pt->step_at)
        f *= pt->step_factor;
    return f;
}

static bool
in_gap(const struct wswitch *sw, int64_t t, bool *reboot_before)
{
    for (int i = 0; i < sw->n_gaps; i++)
        if (t >= sw->gap_from[i] && t < sw->gap_to[i])
            return true;
    *reboot_before = false;
    for (int i = 0; i < sw->n_gaps; i++)
        if (sw->gap_reboots[i] && sw->prev_ts < sw->gap_to[i] && t >= sw->gap_to[i])
            *reboot_before = true;
    return false;
}

void
world_step(struct world *w, int64_t t, const struct world_sink *out)
{
    const struct world_cfg *c = &w->cfg;
    start_events(w, t);
    for (int k = 0; k < w->n_sw; k++) {
        struct wswitch *sw = &w->sw[k];
        int64_t ts = t + sw->phase_us + (int64_t)(urand(w) * 5000);
        bool reboot = false;
        if (in_gap(sw, ts, &reboot))
            continue;
        double dt = (double)(ts - sw->prev_ts) / 1e6;
        out->begin(out->arg, k, ts);
        for (int p = 0; p < sw->n_ports; p++) {
            struct wport *pt = &sw->port[p];
            double f = shape(w, pt, ts);
            double add[WK_COUNT] = {0}, qmax = 0;
            size_t keep = 0;
            for (size_t i = 0; i < pt->nc; i++) {
                const struct contrib *cb = &pt->c[i];
                int64_t lo = cb->start > sw->prev_ts ? cb->start : sw->prev_ts;
                int64_t hi = cb->end < ts ? cb->end : ts;
                if (hi > lo) {
                    double ov = (double)(hi - lo) / 1e6;
                    add[WK_ECN] += cb->ecn * ov;
                    add[WK_DROP] += cb->drop * ov;
                    add[WK_PFC_TX] += cb->pfc_tx * ov;
                    add[WK_PFC_RX] += cb->pfc_rx * ov;
                    if (cb->queue > qmax)
                        qmax = cb->queue;
                }
                if (cb->end > ts)
                    pt->c[keep++] = *cb;
            }
            pt->nc = keep;
            if (reboot)
                memset(pt->cum, 0, sizeof pt->cum);
            double ecn = pt->ecn_level * f + pt->ecn_noise * sqrt(f) * gauss(w);
            pt->cum[WK_ECN] += (ecn > 0 ? ecn * dt : 0) + add[WK_ECN];
            double pfc = pt->pfc_level * f + pt->pfc_noise * gauss(w);
            pt->cum[WK_PFC_TX] += (pfc > 0 ? pfc * dt : 0) + add[WK_PFC_TX];
            double pfr = pt->pfc_level * f + pt->pfc_noise * gauss(w);
            pt->cum[WK_PFC_RX] += (pfr > 0 ? pfr * dt : 0) + add[WK_PFC_RX];
            pt->cum[WK_DROP] += add[WK_DROP] + (urand(w) < 0.001 ? 1 : 0);
            double q = pt->q_level * f + pt->q_noise * sqrt(f) * fabs(gauss(w));
            if (qmax > 0)
                q += qmax;
            for (int kd = 0; kd < WK_COUNT; kd++) {
                if (!(c->kinds & WK_BIT(kd)))
                    continue;
                if (kd == WK_QUEUE)
                    out->gauge(out->arg, k, p, WK_QUEUE, floor(q));
                else
                    out->counter(out->arg, k, p, (enum world_kind)kd, (uint64_t)pt->cum[kd]);
            }
        }
        out->end(out->arg, k);
        sw->prev_ts = ts;
    }
}

/* ---- host events ---- */

static void
put_event(struct world *w, const struct host *h, const char *name, int64_t start, int64_t end,
          size_t *n)
{
    /* Posted on the host's clock. */
    int64_t off = (int64_t)llround(h->offset_s * 1e9);
    fs_buf_printf(&w->body,
                  "%s{\"host\":\"%s\",\"kind\":\"nccl.kernel\",\"name\":\"%s\",\"start\":%lld,"
                  "\"end\":%lld}",
                  *n ? "," : "", h->name, name, (long long)(start * 1000 + off),
                  (long long)(end * 1000 + off));
    (*n)++;
}

size_t
world_host_posts(struct world *w, int64_t from, int64_t to,
                 void (*cb)(void *arg, const char *body, size_t len), void *arg)
{
    size_t total = 0;
    for (int hi = 0; hi < w->n_hosts; hi++) {
        struct host *h = &w->host[hi];
        const struct world_job *jb = &w->job[h->job];
        /* The second job's hosts run no agent: its stalls are seen on the switches only. */
        if (h->job != 0)
            continue;
        size_t n = 0;
        fs_buf_reset(&w->body);
        fs_buf_printf(&w->body,
                      "{\"host_offset_ns\":%lld,\"host_offset_uncertainty_ns\":%lld,"
                      "\"events\":[",
                      (long long)llround(h->measured_s * 1e9), (long long)llround(h->unc_s * 1e9));
        while (h->next_ordinary + 100000 <= to) {
            int64_t s = h->next_ordinary;
            int64_t e = s + 20000 + (int64_t)(urand(w) * 60000);
            if (e > from)
                put_event(w, h, jb->name, s, e, &n);
            h->next_ordinary += (int64_t)(w->ordinary_every_s * 1e6 * (0.8 + 0.4 * urand(w)));
        }
        for (size_t k = 0; k < jb->n_stall; k++) {
            int64_t s = jb->stall[k] - (int64_t)(((hi * 37 + (int)k * 11) % 30) * 10000);
            int64_t e =
                jb->stall[k] + jb->stall_len[k] + (int64_t)(((hi * 13 + (int)k) % 20) * 10000);
            if (e > from && e <= to)
                put_event(w, h, jb->name, s, e, &n);
        }
        for (int u = 0; u < w->n_unrelated; u++) {
            int64_t s = w->unrelated[u], e = s + w->unrelated_len[u];
            if (w->unrelated_host[u] == hi && e > from && e <= to)
                put_event(w, h, jb->name, s, e, &n);
        }
        fs_buf_puts(&w->body, "]}");
        if (n)
            cb(arg, w->body.data, w->body.len);
        total += n;
    }
    return total;
}
