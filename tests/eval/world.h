/*
 * A leaf-spine fabric in virtual time, for make eval: what the switches' counters and
 * queue watermarks show while a training job stalls periodically, and what the job's hosts
 * report. Nothing here reads the product's code: the evaluation feeds what this produces
 * to the analysis and compares the answers with the truth kept here.
 *
 * Switches. `leaves` leaves with `downlinks` host-facing ports (Eth1/1..) and `uplinks`
 * ports to the spines (after them); uplink u of a leaf goes to spine u % spines. A
 * spine has leaves * uplinks / spines ports, Eth1/1 facing leaf 0's first uplink to it,
 * and so on. Each port reports the kinds the configuration asks for, tc / priority 3:
 * ECN-marked packets (counter), the egress queue's watermark since the previous poll
 * (gauge), no-buffer drops (counter), PFC pause frames sent and received (counters).
 *
 * Load. A port's own rates are a level times its load shape (a daily-like ramp, a step
 * that stays) plus Gaussian noise; busy ports sit near line rate with noise up to a
 * quarter of their level, quiet ports near zero. Congestion events add to that: an
 * event at egress port P (a stall's culprit, a random incast burst, a backup job)
 * raises P's queue watermark and ECN marks (and drops in some); with PFC on, P's switch
 * pauses the ports that feed P (pause frames sent there), their link partners receive
 * the pauses, their own egress queues toward P's switch build and mark, and they pause
 * their feeders in turn (one more hop), each hop a little later and weaker. That spread
 * is the event's victims; P is its origin.
 *
 * Stalls. The job's stalls recur with a period (jitter, misses), each 2-3 s; the culprit
 * port (or a leaf's whole uplink bundle, ECMP) is the origin of every stall. The job's
 * ranks (hosts behind leaf downlinks, each with a clock offset it measured to within its
 * uncertainty) report ncclAllReduce ranges: ordinary ones all along, slow ones at each
 * stall, and a few slow ones with no switch-side cause (a straggler).
 *
 * Ownership: world_new returns a world the caller frees with world_free. Threads: none.
 */
#ifndef FS_EVAL_WORLD_H
#define FS_EVAL_WORLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum world_kind { WK_ECN, WK_QUEUE, WK_DROP, WK_PFC_TX, WK_PFC_RX, WK_COUNT };
#define WK_BIT(k) (1u << (k))

#define WORLD_MAX_STALLS 96
#define WORLD_MAX_BUNDLE 8

struct world_cfg {
    int leaves, downlinks, uplinks, spines;
    unsigned kinds;  /* WK_BIT per kind reported */
    int64_t poll_us; /* every switch is polled this often (each at its own phase) */
    double period_s; /* the stall period; 0: drawn in [period_min_s, period_max_s] */
    double period_min_s, period_max_s;
    double periods; /* how many periods the run lasts (at most max_dur_s) */
    double max_dur_s;
    double jitter, miss;      /* stall onsets jittered +-jitter x period; share missed */
    double busy_share;        /* ports near line rate */
    double bursty_share;      /* ports with random incast bursts */
    double burst_every_s;     /* mean time between a bursty port's bursts */
    bool pfc;                 /* congestion pauses its feeders (and theirs) */
    bool culprit_uplink;      /* the culprit is a leaf uplink (else a downlink) */
    bool ecmp;                /* the culprit is a leaf's whole uplink bundle */
    bool culprit_busy;        /* the culprit carries heavy load of its own */
    double ramp_share;        /* ports whose load follows a daily-like ramp (culprit included) */
    double step_share;        /* ports whose load steps up for good at some time */
    double reboots;           /* switch reboots in the run (each: a gap, counters from 0) */
    double gaps;              /* poll gaps (30-120 s) in the run, over all switches */
    int strays;               /* one-interval bursts of the culprit between stalls */
    bool stray_after_last;    /* one of them after the last stall */
    bool backup;              /* an unrelated periodic job (every 15 min) partly in phase */
    bool second_job;          /* a second job stalls on another port, on its own period */
    int ranks;                /* the job's hosts */
    int unrelated;            /* slow windows without a switch-side cause */
    double host_offset_max_s; /* hosts' clock offsets in +-this */
    bool links_known;         /* the collector is told the fabric's links (as LLDP would) */
    bool hosts_known;         /* the job's hosts report their NIC's switch port (host agent) */
    bool culprit_on_path;     /* the culprit is the downlink of one of the job's ranks */
    bool offpath_twin;        /* another tenant's incast, on a port off every job's path and
                                 without PFC spread (a lossy class), in phase with each stall */
};

/** The defaults: 2 leaves x 24 ports, 2 spines, every kind, 1 s polls, ECN-only style. */
void world_cfg_default(struct world_cfg *c);

/** A port: a switch (leaves first, then spines) and a port index (0-based). */
struct world_port {
    int sw, port;
};

struct world_job {
    double period_s;
    int64_t stall[WORLD_MAX_STALLS]; /* onsets (collector axis, µs) of the stalls that happen */
    int64_t stall_len[WORLD_MAX_STALLS];
    size_t n_stall;
    int64_t next_us;                            /* the first scheduled stall after the end */
    struct world_port origin[WORLD_MAX_BUNDLE]; /* the culprit: one port or an ECMP bundle */
    int n_origin;
    const char *name; /* the host events' name */
};

/* One series' identity. */
struct world_series {
    int sw, port;
    enum world_kind kind;
};

/** What the world reports, one switch poll at a time. */
struct world_sink {
    void *arg;
    void (*begin)(void *arg, int sw, int64_t ts_us);
    /* A counter (ECN, drops, pause frames) or the watermark gauge of one port. */
    void (*counter)(void *arg, int sw, int port, enum world_kind k, uint64_t v);
    void (*gauge)(void *arg, int sw, int port, enum world_kind k, double v);
    void (*end)(void *arg, int sw);
};

struct world;

/** A world for seed (family picks the random stream). NULL on no memory. */
struct world *world_new(const struct world_cfg *c, uint64_t seed, uint64_t family, int64_t end_us);
void world_free(struct world *w);

int64_t world_t0(const struct world *w);
int64_t world_end(const struct world *w);
int world_switches(const struct world *w);
int world_ports(const struct world *w, int sw);
/** "leaf01", "spine02"; "Eth1/7". Pointers into the world. */
const char *world_switch_name(const struct world *w, int sw);
const char *world_port_name(const struct world *w, int port);
const struct world_cfg *world_cfg(const struct world *w);
/** The job (0) and, with second_job, the other (1); NULL past them. */
const struct world_job *world_job(const struct world *w, int i);
/** The backup job's port, or sw -1. */
struct world_port world_backup(const struct world *w);

/** Polls every switch whose poll falls in (t - poll, t] (each has its own phase). */
void world_step(struct world *w, int64_t t_us, const struct world_sink *out);

/** The cable at port (sw, p): 1 with the switch port it reaches in *sw2, *p2; 0 for a
 *  leaf's host-facing port (its host, "host-LL-PP" port "eth0", in *sw2 = -1). */
int world_link_partner(const struct world *w, int sw, int p, int *sw2, int *p2);

/** True when port (sw, p) was part of the spread of a stall of job j (origin excluded). */
bool world_is_victim(const struct world *w, int j, int sw, int p);
/** True when port (sw, p) is job j's origin (or one of its bundle). */
bool world_is_origin(const struct world *w, int j, int sw, int p);

/** The hosts' events of (from, to] as POST /api/v1/host-events bodies, one per host,
 *  through cb (body, length); bodies are the world's until the next call. Returns the
 *  events written. */
size_t world_host_posts(struct world *w, int64_t from_us, int64_t to_us,
                        void (*cb)(void *arg, const char *body, size_t len), void *arg);

/** Host i of the jobs' ranks: its name, the leaf and downlink it hangs on, its job (any
 *  pointer may be NULL); false past the last. */
bool world_host(const struct world *w, int i, const char **name, int *sw, int *port, int *job);

/** The off-path twin's port (offpath_twin), or sw -1. */
struct world_port world_twin(const struct world *w);

/** A slow host window without a switch-side cause: its start (collector axis), or -1. */
int64_t world_unrelated(const struct world *w, int i);

/** A stray surge of job 0's culprit between its stalls: its time (collector axis), or -1. */
int64_t world_stray(const struct world *w, int i);

#endif
