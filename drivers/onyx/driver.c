/*
 * The ONYX CLI driver: one I/O thread runs every target's persistent SSH shell with epoll
 * (ssh.c does the SSH part; it hands name lookups and known_hosts to its worker threads,
 * so nothing here blocks), speaks the ONYX CLI (prompts, enable, paging, pager, `%`
 * errors) and turns each command's output into samples (parse.c). Each session is read
 * at most RX_SLICE_BYTES per turn: a flooding peer yields to the others.
 *
 * Session: connect/handshake/host key/auth/shell (ssh.c) -> wait for the first prompt,
 * learn its `<host> [<tag>: <role>] ` prefix -> `enable` (answering the password prompt
 * when an enable password is configured) -> `no cli session paging enable` -> ready. The
 * shell is kept across cycles. A slow shell keeps it: when a cycle's budget runs out the
 * cycle ends (timeout) and the answers still owed are read and dropped before the next
 * batch (abandon_cycle, draining); a connection still being set up goes on. Only a session
 * that answers nothing at all for timeout_us (or breaks) is closed, and the next cycle
 * reconnects. Only a refused login backs off (1 s doubling to 60 s, reset by a good
 * cycle), cycles in between failing fast with its error: each retry is a failed login on
 * the device.
 *
 * Cycle: commands are written in batches (all at once, the shell reads them in turn) and
 * the output is split at the prompts (the learned prefix and a mode suffix), found
 * wherever the lines break: a shell that echoes type-ahead at once (a pty with kernel echo)
 * echoes the whole batch before the first output and prints each later output on the
 * prompt's line. Echoes are removed by matching the commands sent, in order, wherever they
 * are (onyx_strip_echoes). Commands: show clock (first, so the request and
 * response times bound the device's answer), show version, show interfaces ethernet
 * | json-print, counters tc 0-7 and pfc prio 0-7 for all ports, congestion-control
 * | json-print of every port the previous cycle listed (the first cycle: after its
 * listing), show telemetry flows (when flow rules are configured; or show
 * what-just-happened where telemetry flows is missing), show lldp interfaces ethernet
 * remote last (every lldp_interval, after the counters; its text layout is assumed:
 * parse_assumed.c A7), up to MAX_BATCH a batch.
 * When they cannot all fit the cycle's budget at the costs measured, the per-TC and
 * per-port ones are spread over cycles (spread_k, spread_update), and before each batch
 * those that would miss the deadline are left to the next cycle (defer_unfit).
 * A command answered with `% Unrecognized command` is dropped for this target for good
 * and reported once (log and target detail). When the `| json-print` form of a command
 * fails (a `%` error, or JSON the parser does not know, as a newer release's layout), its
 * text form is queued at once in the same cycle and used for this target from then on,
 * reported once with the reason (log, cli_text_fallbacks in the detail). Only the port
 * counters (show interfaces ethernet) are essential: any other command failing leaves the
 * cycle FS_POLL_PARTIAL (the target stays up, the other commands' data is kept).
 * Every cycle has a deadline, every session timeout_us without progress, and the output of
 * a batch is bounded (max_output_bytes).
 *
 * Type-ahead a CLI mishandles: a pager that takes a pipelined command as its keys (a pager
 * line inside an output), the echo of a later command of the batch inside an output (its
 * lines, numbers included, may be cut), or a batch whose next answer never comes while the
 * shell sits quiet at its prompt (type-ahead dropped). Each turns pipelining off for the
 * target for good (one_at_a_time), keeps the session and the cycle, drops the batch's
 * remaining output until the shell is quiet at its prompt, resynchronizes with an empty
 * line, and sends the commands again from the one that went wrong, one at a time.
 *
 * Clock probes. `show clock` prints whole seconds and polls come at a fixed phase to the
 * device's second edge, so the poll readings alone leave the offset about a second wide.
 * Between cycles, while the core's estimate (fs_sink_clock_estimate) is wider than
 * max(5 ms, 2 round trips), the I/O thread sends single `show clock` commands timed by a
 * timerfd so that the device's next second edge falls in the middle of the round trip
 * under the current estimate (clock/clock_probe.h, via sink.h: the planner and the
 * prober, whose policy the SNMP driver shares); each answer goes to fs_sink_clock exactly
 * like the poll's. One probe at a time on the session (state SS_PROBE), never inside a
 * cycle, at least PROBE_SPACING_US apart, planned to end before the next cycle is due; a
 * cycle that arrives during a probe sends its batch when the probe's answer is in (a
 * round trip, milliseconds). Once narrow enough, probing stops until the estimate widens
 * again (the drift allowance). Every CHECK_US, and at once when a reading moves the
 * estimate beyond its uncertainty, two check probes whose readings the bound predicts
 * with certainty test it: after a device clock step they contradict the old readings
 * (the filter drops them) and are repeated while they move the estimate. A probe whose
 * time always falls on the polls is left out (the poll's own `show clock` is read at
 * that phase); the detail says "blocked". A check is moved next to the polls instead.
 */
#include <errno.h>
#include <pthread.h>
#include <regex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "flowrules.h"
#include "onyx_driver.h"
#include "parse.h"
#include "ssh.h"
#include "store/sink.h"
#include "util/clock.h"
#include "util/log.h"
#include "wjh_tally.h"

/* The receive buffer a session keeps between answers (it grows for one and shrinks back). */
#define RX_KEEP_BYTES (256u << 10)
/* At most this much is read from one session per turn: a peer that floods faster than the
 * I/O thread can take it yields to the other sessions (the rest is read on the next turn). */
#define RX_SLICE_BYTES (256u << 10)

#define SUBSYS "cli"
#define MAX_BATCH 32
#define SECRET_MAX 512
#define BACKOFF_MAX_US 60000000LL
#define JSON_PIPE " | json-print"

enum cmd_kind {
    K_CLOCK,
    K_VERSION,
    K_IFACES,
    K_TC,
    K_PFC,
    K_CC,
    K_FLOWS,
    K_WJH,
    K_ACL,
    K_RUNCFG,
    K_CONFIG,
    K_ROLLBACK,
    K_LLDP,
    K_COUNT
};
static const char *const kind_names[K_COUNT] = {
    "show clock",
    "show version",
    "show interfaces ethernet",
    "show interfaces ethernet counters tc",
    "show interfaces ethernet counters pfc prio",
    "show interfaces ethernet <port> congestion-control",
    "show telemetry flows",
    "show what-just-happened",
    ("show ipv4 access-lists " FS_ONYX_ACL_NAME), /* parenthesized: one element */
    "show running-config",
    "flow rule configuration",
    "flow rule rollback",
    "show lldp interfaces ethernet remote",
};

struct cmd {
    enum cmd_kind kind;
    bool spread; /* a per-TC or per-port command: read every spread_k cycles when spread */
    char text[96];
};

/*
 * The series handles of one command's samples, by position (fs_sink_counter_h): the n-th
 * sample of its output goes through h[n], so a poll whose outputs list the same series in
 * the same order (every poll but the first, as a rule) resolves no labels in the store; a
 * sample that moved or is new takes the key path once. Keyed by the command's text.
 */
struct hcache {
    uint32_t hash; /* of text */
    char text[96];
    struct fs_series_handle *h; /* cap of them, owned here */
    size_t cap;
};
/* Distinct commands a target keeps handles for (83 a poll of 64 ports, a few more when
 * the form changes); past it all are dropped and refilled. */
#define HCACHE_MAX 512

enum sess { SS_DOWN, SS_SSH, SS_BANNER, SS_ENABLE, SS_PAGING, SS_READY, SS_BUSY, SS_PROBE };

struct onyx_target {
    struct onyx_drv *drv;
    char *name, *address;
    struct fs_onyx_cfg cfg;
    struct fs_sink *sink;
    atomic_bool busy;
    pthread_mutex_t detail_lock;
    char detail[8192];        /* under detail_lock */
    FILE *transcript;         /* under detail_lock */
    bool transcript_mid_line; /* under detail_lock: the last byte written was not a newline */

    /* --- I/O thread only --- */
    bool removed;
    struct onyx_ssh *ssh;
    uint32_t events; /* registered epoll events; 0: not registered */
    int reg_fd;      /* the fd registered (onyx_ssh_fd() may change while connecting) */
    bool more_rx;    /* the last turn stopped at RX_SLICE_BYTES: read on without waiting */
    enum sess ss;
    bool enable_pw_sent;
    char prefix[160];
    size_t prefix_len;
    char *rx;
    size_t rx_len, rx_cap;
    char esc_hold[32];
    size_t esc_len;
    char *tx;
    size_t tx_len, tx_cap;
    /* cycle */
    bool in_cycle;
    uint64_t cycle_id;
    int64_t deadline_us, progress_us;
    struct cmd *q;
    size_t nq, capq, sent, done, batch_end;
    size_t resp_start;    /* in rx: where the next command's output starts (after a prompt) */
    size_t resp_next;     /* set by response_end: after the prompt that ends it */
    size_t echo_next;     /* q index: the first command sent whose echo was not seen yet */
    bool requeued;        /* the response just handled queued its command's text form */
    bool draining;        /* a cycle ended while the shell still owed answers: they are read
                             and dropped, then the session is ready again */
    size_t owed;          /* answers still owed while draining */
    size_t drained_bytes; /* received while draining: beyond max_output it is a runaway (a
                             pager without end would otherwise keep the session forever) */
    int64_t batch_lo_us;  /* realtime when the batch was written */
    enum fs_poll_result result;
    char msg[256];
    /* across cycles */
    int fail_count;
    int64_t next_connect_us;
    enum fs_poll_result last_fail;
    char last_fail_msg[384];
    bool lacks[K_COUNT];
    bool json_off[K_COUNT];          /* the `| json-print` form failed: text form from now on */
    char json_off_why[K_COUNT][160]; /* why (for the detail) */
    /* A command whose output the parser did not recognise (its layout is an assumption):
     * why and the first lines it printed, for the detail; "" when it parses. */
    char layout_cmd[K_COUNT][96]; /* the command of that kind that failed (tc 3 of tc N) */
    char layout_err[K_COUNT][128];
    char layout_lines[K_COUNT][160];
    char release[32];
    double last_uptime;
    /* LLDP: the neighbour table is read in the first cycle lldp_interval after the last
     * read (lldp_due), its command last in the batch: after the counters. */
    int64_t lldp_last_mono; /* when the last answer was handled; 0: never */
    uint64_t lldp_reads;    /* complete tables handed to the topology */
    uint64_t lldp_cut;      /* tables not complete (truncated) or not understood */
    size_t lldp_neighbors;  /* in the last table */
    /* The CLI mishandles type-ahead (pipelined commands): one command at a time from then
     * on, for the target's life (sessions included: it is the firmware's way, and each
     * retry would cost a garbled or lost cycle); why, for the detail. */
    bool one_at_a_time;
    char pipelining_off[200];
    char forged[120];   /* the first forged prompt's line in the response being split; "" */
    bool resync;        /* a pipelined batch went wrong: its outputs are dropped until the
                           shell sits quiet at its prompt, then an empty line is sent and its
                           prompt awaited (draining), then the batch goes on one at a time */
    size_t batch_start; /* q index of the batch's first command */
    /* draining: the first answer owed may be lost to type-ahead (the abandoned batch was
     * pipelined, answered in part, the owed command's echo not seen); that command */
    bool owed_maybe_lost;
    char owed_cmd[96];
    /* Whether the cycle fits its interval: each batch's first answer measures a round
     * trip (sent to answered: the network and one command); a cycle needs at least one per
     * batch, one per command when one at a time. */
    int64_t batch_sent_mono_us;
    int64_t rtt_min_us; /* this cycle's smallest; 0: none measured */
    unsigned rounds;    /* batches sent this cycle */
    char too_slow[200]; /* why the cycle cannot fit its interval; "" when it can */
    /* Spreading. When the whole command set cannot be answered within a cycle's budget at
     * the costs measured, the per-TC and per-port commands (units: counters tc N, pfc prio
     * N, the congestion-control of each port, in that order) are read over spread_k
     * cycles: each cycle reads the next ceil(units / spread_k) of them in rotation from
     * spread_cursor, which moves on by the units answered (a unit left out for lack of
     * time comes first in the next cycle); the other commands run every cycle. spread_k
     * follows the measured costs (spread_update), back to 1 when the whole set fits. */
    unsigned spread_k;       /* >= 1 */
    size_t spread_cursor;    /* the unit the next cycle starts at */
    size_t spread_base;      /* this cycle: the units known when it started */
    size_t spread_units;     /* this cycle: units in all (read now or not) */
    size_t spread_answered;  /* this cycle: units answered */
    size_t fixed_cmds;       /* this cycle: commands run every cycle (clock, version, ...) */
    bool cc_queued;          /* this cycle's congestion-control commands are queued */
    char spread_why[256];    /* why spread_k > 1; "" at 1 */
    uint64_t deferred_total; /* spread commands left for a later cycle by the deadline guard */
    int64_t budget_us;       /* this cycle's: its deadline minus its start (monotonic) */
    int64_t rtt_sum_us;      /* this cycle: the batches' first answers (round trips) */
    unsigned rtt_n;
    int64_t gap_sum_us; /* this cycle: time between consecutive answers of a batch */
    unsigned gap_n;
    int64_t prev_answer_mono_us;
    int64_t cost_rtt_us; /* the last measured mean round trip; 0: none yet */
    int64_t cost_cmd_us; /* the last measured time per later answer of a pipelined batch */
    char **ports;
    size_t nports;
    size_t ports_listed; /* > ONYX_MAX_PORTS: the switch listed this many (cut); else 0 */
    char profile[160];
    struct onyx_wjh_tally wjh;    /* WJH drops counted once each, across polls and sessions */
    int64_t clock_utc_offset_s;   /* show clock's UTC offset: the zone of WJH time stamps */
    uint64_t wjh_events;          /* WJH rows with new drops handed over as device events */
    uint64_t wjh_events_unplaced; /* not placed (clock not measured yet) or over the bound */
    unsigned wjh_events_poll;     /* handed over in this poll (bounded) */
    regex_t ports_re;             /* cfg.flow_rule_ports, anchored; compiled when ports_re_ok */
    bool ports_re_ok;
    size_t *acl_order;      /* onyx_flow_order() of the flow rules (n_flow_rules of them) */
    char acl_counters[200]; /* the ACL counters' state, for the detail */
    bool rules_checked;     /* this session compared the running config with the flow rules */
    bool config_failed, config_in_flight;
    struct onyx_plan plan; /* I/O thread writes it under detail_lock */
    bool plan_ready;       /* under detail_lock */
    uint64_t sessions, cycles_ok;
    struct onyx_samples samples;
    struct hcache *hc; /* nhc of them (room for caphc), owned here */
    size_t nhc, caphc;
    /* clock probes (see the top of the file) */
    struct fs_clock_prober prober; /* the policy's state; prober.at_us: the planned probe */
    int64_t cycle_start_real_us;   /* when the last cycle started (realtime) */
    int64_t probe_lo_us;           /* realtime when the probe in flight was written */
    int64_t probe_sent_mono_us;    /* monotonic, same instant (its timeout) */
};

enum rq_kind { RQ_ADD, RQ_CYCLE, RQ_CANCEL, RQ_REMOVE, RQ_STOP };

struct rq {
    enum rq_kind kind;
    struct onyx_target *t;
    uint64_t cycle_id;
    int64_t deadline_us;
    struct rq *next;
};

struct onyx_drv {
    pthread_t thread;
    int epfd, evfd;
    int tfd;              /* timerfd (CLOCK_REALTIME, absolute): the earliest planned probe */
    int64_t tfd_armed_us; /* what it is armed for; 0: disarmed (I/O thread only) */
    pthread_mutex_t qlock;
    pthread_cond_t qcond;
    struct rq *qhead, *qtail;
    uint64_t removed_seq, remove_req_seq;
    struct onyx_target **targets; /* I/O thread only */
    size_t ntargets, captargets;
    /* When the last epoll_wait returned (I/O thread only): a session not ready then, and
     * not read since, had sent nothing up to that moment. Silence is judged up to it, not
     * up to now: after a long turn (a 10 MB answer on a slow build) the next bytes may be
     * waiting, unread, in the socket. */
    int64_t polled_us;
};

/* ---------------- helpers ---------------- */

static void update_detail(struct onyx_target *t);
static bool rx_ends_at_prompt(const struct onyx_target *t);
static bool rx_blank_from(const struct onyx_target *t, size_t from);

static int
buf_append(char **buf, size_t *len, size_t *cap, const char *data, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t nc = *cap ? *cap : 8192;
        while (nc < *len + n + 1)
            nc *= 2;
        char *p = realloc(*buf, nc);
        if (!p)
            return -1;
        *buf = p;
        *cap = nc;
    }
    memcpy(*buf + *len, data, n);
    *len += n;
    (*buf)[*len] = '\0';
    return 0;
}

static void
transcript_write(struct onyx_target *t, const char *pre, const char *data, size_t n)
{
    pthread_mutex_lock(&t->detail_lock);
    if (t->transcript) {
        /* A sent line starts a line of its own (after a prompt it would not). */
        if (pre && t->transcript_mid_line)
            fputc('\n', t->transcript);
        if (pre)
            fputs(pre, t->transcript);
        fwrite(data, 1, n, t->transcript);
        if (n > 0)
            t->transcript_mid_line = data[n - 1] != '\n';
        fflush(t->transcript);
    }
    pthread_mutex_unlock(&t->detail_lock);
}

static void
epoll_update(struct onyx_target *t)
{
    struct onyx_drv *d = t->drv;
    if (!t->ssh)
        return;
    uint32_t ev = onyx_ssh_events(t->ssh);
    if (t->tx_len > 0)
        ev |= EPOLLOUT;
    int fd = onyx_ssh_fd(t->ssh);
    if (t->events && fd != t->reg_fd) {
        /* Both fds stay open while the connection lives: the old one is still ours. */
        epoll_ctl(d->epfd, EPOLL_CTL_DEL, t->reg_fd, NULL);
        t->events = 0;
    }
    if (ev == t->events)
        return;
    struct epoll_event e = {.events = ev, .data.ptr = t};
    int op = t->events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(d->epfd, op, fd, &e) == 0) {
        t->events = ev;
        t->reg_fd = fd;
    }
}

static void
close_session(struct onyx_target *t)
{
    if (t->ssh) {
        if (t->events)
            epoll_ctl(t->drv->epfd, EPOLL_CTL_DEL, t->reg_fd, NULL);
        onyx_ssh_free(t->ssh);
    }
    t->ssh = NULL;
    t->events = 0;
    t->more_rx = false;
    t->ss = SS_DOWN;
    t->rx_len = 0;
    t->tx_len = 0;
    t->esc_len = 0;
    t->resp_start = 0;
    t->enable_pw_sent = false;
    t->rules_checked = false; /* a new session checks the running config again */
    t->config_in_flight = false;
    t->prober.at_us = 0;
    t->draining = false;
    t->resync = false;
    t->owed = 0;
}

static void plan_probe(struct onyx_target *t);

/* The least time n commands take: a round trip (rtt) per batch, per command when one at a
 * time, and within a pipelined batch per_cmd for each answer after the first. */
static int64_t
predict_us(const struct onyx_target *t, size_t n, int64_t rtt, int64_t per_cmd)
{
    size_t rounds = t->one_at_a_time ? n : (n + MAX_BATCH - 1) / MAX_BATCH;
    return (int64_t)rounds * rtt + (int64_t)(n - rounds) * per_cmd;
}

/* The fewest slices with which a cycle's commands take at most room at the measured costs
 * (the units' count when even one unit a cycle does not fit). */
static unsigned
spread_fit(const struct onyx_target *t, int64_t room)
{
    size_t units = t->spread_units ? t->spread_units : 1;
    for (size_t k = 1; k <= units; k++)
        if (predict_us(t, t->fixed_cmds + (t->spread_units + k - 1) / k, t->cost_rtt_us,
                       t->cost_cmd_us) <= room)
            return (unsigned)k;
    return (unsigned)units;
}

/* At a cycle's end: whether the whole command set can fit the interval at the round trip
 * measured, one round trip per batch (per command when pipelining is off); said once when
 * it cannot (log), and in the detail while so. */
static void
check_fit(struct onyx_target *t)
{
    if (t->rtt_min_us <= 0 || t->cfg.interval_us <= 0)
        return;
    size_t n = t->fixed_cmds + t->spread_units;
    int64_t need = predict_us(t, n, t->rtt_min_us, 0);
    if (need <= t->cfg.interval_us) {
        t->too_slow[0] = '\0';
        return;
    }
    bool first = !t->too_slow[0];
    snprintf(t->too_slow, sizeof(t->too_slow),
             "%zu commands %s take at least %.1f s at the %.0f ms round trip measured, more "
             "than the interval (%.1f s)",
             n, t->one_at_a_time ? "one at a time" : "in their batches", (double)need / 1e6,
             (double)t->rtt_min_us / 1e3, (double)t->cfg.interval_us / 1e6);
    if (first)
        fs_log(FS_LOG_WARN, SUBSYS, "target %s: its polls cannot fit their interval: %s", t->name,
               t->too_slow);
}

/* Shares of a cycle's budget: spreading goes up when the commands would take more than
 * SPREAD_UP_PCT of it, and down only when fewer slices take at most SPREAD_DOWN_PCT (so
 * that a round trip near the bound does not flip it every cycle). */
#define SPREAD_UP_PCT 75
#define SPREAD_DOWN_PCT 50

/* At a cycle's end: the costs it measured (mean round trip, time per later answer of a
 * batch) and from them the slices the next cycles use. */
static void
spread_update(struct onyx_target *t)
{
    /* Smoothed (a quarter of the new cycle's): one cycle slowed by a busy moment moves
     * them little; the deadline guard (defer_unfit) covers such a cycle itself. */
    if (t->rtt_n > 0)
        t->cost_rtt_us = t->cost_rtt_us > 0 ? (3 * t->cost_rtt_us + t->rtt_sum_us / t->rtt_n) / 4
                                            : t->rtt_sum_us / t->rtt_n;
    if (t->gap_n > 0)
        t->cost_cmd_us = t->cost_cmd_us > 0 ? (3 * t->cost_cmd_us + t->gap_sum_us / t->gap_n) / 4
                                            : t->gap_sum_us / t->gap_n;
    if (t->rtt_n == 0 || t->budget_us <= 0)
        return; /* nothing measured (no batch answered) */
    unsigned k = t->spread_k;
    unsigned up = spread_fit(t, t->budget_us * SPREAD_UP_PCT / 100);
    unsigned down = spread_fit(t, t->budget_us * SPREAD_DOWN_PCT / 100);
    if (up > k)
        k = up;
    else if (down < k)
        k = down;
    size_t n = t->fixed_cmds + t->spread_units;
    if (k > 1)
        snprintf(t->spread_why, sizeof(t->spread_why),
                 "the %zu per-TC and per-port commands are read over %u polls (%zu a poll): "
                 "all %zu commands %s would take about %.1f s at the %.0f ms round trip "
                 "measured, more than a poll's budget (%.1f s)",
                 t->spread_units, k, (t->spread_units + k - 1) / k, n,
                 t->one_at_a_time ? "one at a time" : "in their batches",
                 (double)predict_us(t, n, t->cost_rtt_us, t->cost_cmd_us) / 1e6,
                 (double)t->cost_rtt_us / 1e3, (double)t->budget_us / 1e6);
    else
        t->spread_why[0] = '\0';
    if (k == t->spread_k)
        return;
    if (k > 1)
        fs_log(FS_LOG_WARN, SUBSYS, "target %s: spreading its commands over %u polls: %s", t->name,
               k, t->spread_why);
    else
        fs_log(FS_LOG_INFO, SUBSYS,
               "target %s: all its commands fit a poll again (%.0f ms round trip): no more "
               "spreading",
               t->name, (double)t->cost_rtt_us / 1e3);
    t->spread_k = k;
    fs_sink_set_spread(t->sink, k);
}

static void
finish_cycle(struct onyx_target *t, enum fs_poll_result r, const char *msg)
{
    if (!t->in_cycle)
        return;
    t->in_cycle = false;
    check_fit(t);
    if (t->spread_base > 0) /* the units not answered come first in the next cycle */
        t->spread_cursor = (t->spread_cursor + t->spread_answered) % t->spread_base;
    spread_update(t);
    if (r == FS_POLL_OK) {
        t->fail_count = 0;
        t->cycles_ok++;
    }
    plan_probe(t);
    update_detail(t);
    /* Not busy before done: the done callback may start the next cycle at once. */
    atomic_store(&t->busy, false);
    fs_sink_done(t->sink, t->cycle_id, r, msg && msg[0] ? msg : NULL);
}

/* A lost session: close it and end the cycle with r. Only a refused login (r auth: a
 * security event on the device each time) backs off, 1 s doubling to 60 s, and cycles in
 * between fail fast with its error; anything else is retried by the next cycle. */
static void
fail_session(struct onyx_target *t, enum fs_poll_result r, const char *msg)
{
    close_session(t);
    t->fail_count++;
    int64_t b = 0;
    if (r == FS_POLL_AUTH) {
        b = 1000000LL << (t->fail_count - 1 < 6 ? t->fail_count - 1 : 6);
        if (b > BACKOFF_MAX_US)
            b = BACKOFF_MAX_US;
    }
    t->next_connect_us = fs_monotonic_us() + b;
    t->last_fail = r;
    snprintf(t->last_fail_msg, sizeof(t->last_fail_msg), "%s", msg);
    if (b > 0)
        fs_log(FS_LOG_ERROR, SUBSYS, "target %s: %s (backoff: next login in %.0f s)", t->name, msg,
               (double)b / 1e6);
    else
        fs_log(FS_LOG_WARN, SUBSYS, "target %s: %s (reconnecting at the next cycle)", t->name, msg);
    finish_cycle(t, r, msg);
}

/* The cycle's time is up but the shell is alive (slow, not lost): the cycle ends with r,
 * the session stays. Answers the shell still owes for this cycle's commands are read and
 * dropped (draining) before the next cycle's batch goes out; a connection or a clock probe
 * in progress just goes on. Only a shell that stops answering altogether for timeout_us
 * is closed (check_timeouts). */
static void
abandon_cycle(struct onyx_target *t, enum fs_poll_result r, const char *msg)
{
    if (t->ss == SS_BUSY && !t->draining && !t->resync) {
        if (t->config_in_flight) { /* half-applied configuration: start over cleanly */
            fail_session(t, r, msg);
            return;
        }
        t->draining = true;
        t->drained_bytes = 0;
        t->owed = t->batch_end - t->done;
        t->owed_maybe_lost = !t->one_at_a_time && t->batch_end - t->batch_start > 1 &&
                             t->done > t->batch_start && t->echo_next <= t->done;
        snprintf(t->owed_cmd, sizeof(t->owed_cmd), "%s", t->done < t->nq ? t->q[t->done].text : "");
    }
    fs_log(FS_LOG_WARN, SUBSYS, "target %s: %s", t->name, msg);
    finish_cycle(t, r, msg);
}

static void
send_text(struct onyx_target *t, const char *s, bool secret)
{
    size_t n = strlen(s);
    if (buf_append(&t->tx, &t->tx_len, &t->tx_cap, s, n) < 0 ||
        buf_append(&t->tx, &t->tx_len, &t->tx_cap, "\n", 1) < 0)
        return;
    if (secret)
        transcript_write(t, "<<< ", "********\n", 9);
    else {
        transcript_write(t, "<<< ", s, n);
        transcript_write(t, NULL, "\n", 1);
    }
}

static void
flush_tx(struct onyx_target *t)
{
    while (t->ssh && t->tx_len > 0) {
        size_t n = 0;
        int r = onyx_ssh_write(t->ssh, t->tx, t->tx_len, &n);
        if (r == ONYX_SSH_AGAIN || (r == ONYX_SSH_DONE && n == 0))
            break;
        if (r != ONYX_SSH_DONE) {
            fail_session(t, FS_POLL_PROTOCOL, "write to the shell failed");
            return;
        }
        memmove(t->tx, t->tx + n, t->tx_len - n);
        t->tx_len -= n;
    }
    if (t->tx_len)
        explicit_bzero(t->tx + t->tx_len, t->tx_cap - t->tx_len);
    else if (t->tx_cap)
        explicit_bzero(t->tx, t->tx_cap); /* an enable password may have passed through */
}

/* ---------------- command queue ---------------- */

static void queue_cmd(struct onyx_target *t, enum cmd_kind k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#include <stdarg.h>
static void
queue_cmd(struct onyx_target *t, enum cmd_kind k, const char *fmt, ...)
{
    if (t->lacks[k])
        return;
    if (t->nq == t->capq) {
        size_t nc = t->capq ? t->capq * 2 : 64;
        struct cmd *q = realloc(t->q, nc * sizeof(*q));
        if (!q)
            return;
        t->q = q;
        t->capq = nc;
    }
    struct cmd *c = &t->q[t->nq++];
    c->kind = k;
    c->spread = false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->text, sizeof(c->text), fmt, ap);
    va_end(ap);
}

/* The command just queued (if queue_cmd queued one after nq_before) is a spread unit. */
static void
mark_spread(struct onyx_target *t, size_t nq_before)
{
    if (t->nq > nq_before)
        t->q[t->nq - 1].spread = true;
}

/* Queues spread unit u of this cycle's (ntc per-TC, npfc per-priority, then one per port
 * listed). */
static void
queue_unit(struct onyx_target *t, size_t u, size_t ntc, size_t npfc)
{
    size_t n = t->nq;
    if (u < ntc) {
        queue_cmd(t, K_TC, "show interfaces ethernet counters tc %zu", u);
    } else if (u < ntc + npfc) {
        queue_cmd(t, K_PFC, "show interfaces ethernet counters pfc prio %zu", u - ntc);
    } else if (u - ntc - npfc < t->nports) {
        const char *p = t->ports[u - ntc - npfc];
        queue_cmd(t, K_CC, "show interfaces ethernet %s congestion-control%s",
                  strncmp(p, "Eth", 3) == 0 ? p + 3 : p, t->json_off[K_CC] ? "" : JSON_PIPE);
    }
    mark_spread(t, n);
}

/* How often the neighbour table is read: the first cycle at least lldp_interval after
 * the last read, so a whole number of intervals (as the SNMP driver's). */
static int64_t
lldp_period_us(const struct onyx_target *t)
{
    int64_t iv = t->cfg.interval_us > 0 ? t->cfg.interval_us : 5000000;
    int64_t l = t->cfg.lldp_interval_us > iv ? t->cfg.lldp_interval_us : iv;
    return (l + iv - 1) / iv * iv;
}

/* Half an interval of slack: cycles start on a schedule, answers come a little later.
 * Never in a cycle that opens the session: its budget already holds the login, and the
 * counters come first (so the first read is in a session's second cycle). */
static bool
lldp_due(const struct onyx_target *t)
{
    int64_t iv = t->cfg.interval_us > 0 ? t->cfg.interval_us : 5000000;
    bool open = t->ss == SS_READY || t->ss == SS_BUSY || t->ss == SS_PROBE;
    return open && (t->lldp_last_mono == 0 ||
                    fs_monotonic_us() - t->lldp_last_mono >= lldp_period_us(t) - iv / 2);
}

static void
lldp_neighbor_cb(const struct onyx_lldp_remote *r, void *arg)
{
    struct onyx_target *t = arg;
    struct fs_lldp_neighbor n = {.local_port = r->local_port,
                                 .chassis_id = r->chassis_id,
                                 .sys_name = r->sys_name,
                                 .port = r->port,
                                 .port_id = r->port_id,
                                 .port_descr = r->port_descr};
    fs_sink_lldp_neighbor(t->sink, &n);
}

/* `show lldp interfaces ethernet remote` (layout ASSUMED, parse_assumed.c A7): each
 * neighbour to the topology, then the table's end when the whole output was read. An
 * output not in that layout drops nothing (the links then age out if it stays so). */
static int
lldp_table(struct onyx_target *t, const char *text, size_t len, char *err, size_t errlen)
{
    bool truncated = false;
    int n = onyx_parse_lldp_remote(text, len, lldp_neighbor_cb, t, &truncated, err, errlen);
    t->lldp_last_mono = fs_monotonic_us();
    if (n >= 0 && !truncated) {
        fs_sink_lldp_end(t->sink, lldp_period_us(t));
        t->lldp_reads++;
        t->lldp_neighbors = (size_t)n;
    } else {
        t->lldp_cut++;
    }
    if (truncated)
        fs_log(FS_LOG_WARN, SUBSYS,
               "target %s: more than %d LLDP neighbours: the table is not complete, no link "
               "of it is dropped",
               t->name, ONYX_LLDP_MAX);
    return n < 0 ? -1 : 0;
}

static void
build_batch1(struct onyx_target *t)
{
    t->nq = t->sent = t->done = t->batch_end = 0;
    queue_cmd(t, K_CLOCK, "show clock");
    queue_cmd(t, K_VERSION, "show version");
    queue_cmd(t, K_IFACES, "show interfaces ethernet%s", t->json_off[K_IFACES] ? "" : JSON_PIPE);
    /* The units: the ports are those the last listing showed (their commands go in the
     * first batch: with pipelining a round trip fewer); the first cycle queues them after
     * the listing (process_responses), all of them. */
    size_t ntc = t->lacks[K_TC] ? 0 : 8, npfc = t->lacks[K_PFC] ? 0 : 8;
    size_t ncc = t->lacks[K_CC] ? 0 : t->nports;
    size_t units = ntc + npfc + ncc;
    size_t now = (units + t->spread_k - 1) / t->spread_k;
    t->spread_base = t->spread_units = units;
    t->spread_answered = 0;
    t->cc_queued = ncc > 0;
    for (size_t j = 0; j < now; j++)
        queue_unit(t, (t->spread_cursor + j) % units, ntc, npfc);
    if (t->cfg.n_flow_rules > 0) {
        if (!t->lacks[K_FLOWS])
            queue_cmd(t, K_FLOWS, "show telemetry flows");
        else
            queue_cmd(t, K_WJH, "show what-just-happened");
        /* Without the telemetry view, per-rule packets and bytes come from the flow-rule
         * ACL's entry counters (its output layout is assumed: parse_assumed.c). */
        if (t->lacks[K_FLOWS] && !t->lacks[K_ACL] && t->acl_order)
            queue_cmd(t, K_ACL, "%s", kind_names[K_ACL]);
    }
    if (t->cfg.lldp && lldp_due(t))
        queue_cmd(t, K_LLDP, "%s", kind_names[K_LLDP]);
    t->fixed_cmds = 0;
    for (size_t i = 0; i < t->nq; i++)
        t->fixed_cmds += !t->q[i].spread;
    if ((t->cfg.apply_flow_rules || t->cfg.plan_only) && !t->rules_checked)
        queue_cmd(t, K_RUNCFG, "show running-config");
}

/* The running config arrived: queue what makes it hold the flow rules (apply_flow_rules). */
static void
plan_flow_rules(struct onyx_target *t, const char *text, size_t len)
{
    char err[256];
    struct onyx_plan plan;
    /* the ports shown by this cycle's interface listing that flow_rule_ports selects */
    const char **sel = t->nports ? calloc(t->nports, sizeof(*sel)) : NULL;
    size_t nsel = 0;
    for (size_t i = 0; sel && i < t->nports; i++)
        if (!t->ports_re_ok || regexec(&t->ports_re, t->ports[i], 0, NULL, 0) == 0)
            sel[nsel++] = t->ports[i];
    int prc = onyx_flow_plan(t->cfg.flow_rules, t->cfg.n_flow_rules, text, len, sel, nsel, &plan,
                             err, sizeof(err));
    free(sel);
    for (size_t i = 0; prc == 0 && i < plan.n_notes; i++)
        fs_log(FS_LOG_WARN, SUBSYS, "target %s: flow rules: %s", t->name, plan.notes[i]);
    pthread_mutex_lock(&t->detail_lock);
    onyx_plan_free(&t->plan);
    if (prc == 0)
        t->plan = plan;
    t->plan_ready = false;
    pthread_mutex_unlock(&t->detail_lock);
    if (prc != 0) {
        fs_log(FS_LOG_ERROR, SUBSYS, "target %s: flow rules: %s", t->name, err);
        t->rules_checked = true; /* the configuration is wrong, not the switch: no retry */
        return;
    }
    pthread_mutex_lock(&t->detail_lock);
    t->plan_ready = true;
    pthread_mutex_unlock(&t->detail_lock);
    if (t->cfg.plan_only) {
        t->rules_checked = true;
        return;
    }
    if (t->plan.n == 0) {
        t->rules_checked = true;
        fs_log(FS_LOG_INFO, SUBSYS, "target %s: flow rule ACLs already in place", t->name);
        return;
    }
    fs_log(FS_LOG_INFO, SUBSYS, "target %s: applying %zu flow rule configuration commands", t->name,
           t->plan.n);
    t->config_failed = false;
    t->config_in_flight = true;
    queue_cmd(t, K_CONFIG, "configure terminal");
    for (size_t i = 0; i < t->plan.n; i++)
        queue_cmd(t, K_CONFIG, "%s", t->plan.cmds[i]);
    queue_cmd(t, K_CONFIG, "exit");
}

/* After the configuration commands ran: done, or undo what this session added. */
static void
finish_flow_rules(struct onyx_target *t)
{
    t->config_in_flight = false;
    if (!t->config_failed) {
        t->rules_checked = true;
        fs_log(FS_LOG_INFO, SUBSYS, "target %s: flow rule ACLs applied", t->name);
        return;
    }
    fs_log(FS_LOG_ERROR, SUBSYS, "target %s: flow rule configuration failed; rolling back",
           t->name);
    t->rules_checked = true; /* no retry storm: the next session checks again */
    queue_cmd(t, K_ROLLBACK, "configure terminal");
    for (size_t i = 0; i < t->plan.n_rollback; i++)
        queue_cmd(t, K_ROLLBACK, "%s", t->plan.rollback[i]);
    queue_cmd(t, K_ROLLBACK, "exit");
}

/* Before a batch goes out: the spread commands still queued that would not be answered by
 * the cycle's deadline at the costs measured (this cycle's, else the last) are left to
 * their slice's next turn rather than failed, latest first. The other commands stay. */
static void
defer_unfit(struct onyx_target *t)
{
    int64_t rtt = t->rtt_n ? t->rtt_sum_us / t->rtt_n : t->cost_rtt_us;
    int64_t per = t->gap_n ? t->gap_sum_us / t->gap_n : t->cost_cmd_us;
    if (rtt <= 0 || t->sent >= t->nq)
        return;
    /* a twentieth of the budget kept for what the estimate leaves out */
    int64_t room = t->deadline_us - fs_monotonic_us() - t->budget_us / 20;
    size_t i = t->nq;
    while (t->nq > t->sent && predict_us(t, t->nq - t->sent, rtt, per) > room) {
        while (i > t->sent && !t->q[i - 1].spread)
            i--;
        if (i == t->sent)
            break;
        fs_log(FS_LOG_DEBUG, SUBSYS, "target %s: `%s` left to the next cycle (no time left)",
               t->name, t->q[i - 1].text);
        memmove(&t->q[i - 1], &t->q[i], (t->nq - i) * sizeof(*t->q));
        t->nq--;
        i--;
        t->deferred_total++;
    }
}

static void
send_batch(struct onyx_target *t)
{
    defer_unfit(t);
    if (t->sent >= t->nq) { /* all that was left is deferred */
        t->ss = SS_READY;
        finish_cycle(t, t->result, t->msg);
        return;
    }
    size_t max = t->one_at_a_time ? 1 : MAX_BATCH;
    size_t end = t->sent + max < t->nq ? t->sent + max : t->nq;
    for (size_t i = t->sent; i < end; i++)
        send_text(t, t->q[i].text, false);
    t->echo_next = t->sent;
    t->batch_start = t->sent;
    t->batch_end = end;
    t->sent = end;
    t->ss = SS_BUSY;
    t->batch_lo_us = fs_realtime_us();
    t->batch_sent_mono_us = fs_monotonic_us();
    t->rounds++;
    flush_tx(t);
}

/* ---------------- responses ---------------- */

static void
hcache_free(struct onyx_target *t)
{
    for (size_t i = 0; i < t->nhc; i++)
        free(t->hc[i].h);
    free(t->hc);
    t->hc = NULL;
    t->nhc = t->caphc = 0;
}

/* The handles of command text for n samples (zeroed when new), or NULL when out of memory
 * (the samples then take the key path). */
static struct fs_series_handle *
hcache_get(struct onyx_target *t, const char *text, size_t n)
{
    uint32_t hash = 2166136261u; /* FNV-1a */
    for (const char *p = text; *p; p++)
        hash = (hash ^ (unsigned char)*p) * 16777619u;
    struct hcache *e = NULL;
    for (size_t i = 0; i < t->nhc && !e; i++)
        if (t->hc[i].hash == hash && strcmp(t->hc[i].text, text) == 0)
            e = &t->hc[i];
    if (!e) {
        if (t->nhc == HCACHE_MAX)
            hcache_free(t);
        if (t->nhc == t->caphc) {
            size_t nc = t->caphc ? t->caphc * 2 : 16;
            struct hcache *v = realloc(t->hc, nc * sizeof(*v));
            if (!v)
                return NULL;
            t->hc = v;
            t->caphc = nc;
        }
        e = &t->hc[t->nhc++];
        *e = (struct hcache){.hash = hash};
        snprintf(e->text, sizeof(e->text), "%s", text);
    }
    if (n > e->cap) {
        struct fs_series_handle *v = realloc(e->h, n * sizeof(*v));
        if (!v)
            return NULL;
        memset(v + e->cap, 0, (n - e->cap) * sizeof(*v));
        e->h = v;
        e->cap = n;
    }
    return e->h;
}

static void
emit(struct onyx_target *t, const struct cmd *c, int64_t ts)
{
    if (t->samples.n == 0)
        return;
    struct fs_series_handle *hs = hcache_get(t, c->text, t->samples.n);
    fs_sink_begin(t->sink, ts);
    for (size_t i = 0; i < t->samples.n; i++) {
        const struct onyx_sample *x = &t->samples.v[i];
        struct fs_label l[ONYX_LABELS_MAX];
        for (unsigned j = 0; j < x->n_labels; j++) {
            l[j].name = x->labels[j].name;
            l[j].value = x->labels[j].value;
        }
        if (hs && !x->counter)
            fs_sink_gauge_h(t->sink, &hs[i], x->metric, l, x->n_labels, x->value);
        else if (hs)
            fs_sink_counter_h(t->sink, &hs[i], x->metric, l, x->n_labels, x->raw, 64, x->scale);
        else if (!x->counter)
            fs_sink_gauge(t->sink, x->metric, l, x->n_labels, x->value);
        else
            fs_sink_counter_scaled(t->sink, x->metric, l, x->n_labels, x->raw, 64, x->scale);
    }
    fs_sink_end(t->sink);
}

/* Whether a response holds a pager prompt line (`lines 1-24 ...`). */
static bool
has_pager_line(const char *text, size_t len)
{
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        /* Only a line starting "lines " can be one: the full check for those alone (this
           runs over every output). */
        if (n >= 9 && memcmp(p, "lines ", 6) == 0 && onyx_pager_at_end(p, n, NULL))
            return true;
        p = nl ? nl + 1 : end;
    }
    return false;
}

/* A command failed (r: what it means for the cycle when the command is essential). Only
 * the port counters are: another command's failure leaves the cycle partial, the target up
 * and the other commands' data flowing. A worse result already set is kept. */
static void
cmd_result(struct onyx_target *t, const struct cmd *c, enum fs_poll_result r, const char *err)
{
    if (c->kind != K_IFACES)
        r = FS_POLL_PARTIAL;
    if (t->result == FS_POLL_OK || (t->result == FS_POLL_PARTIAL && r != FS_POLL_PARTIAL)) {
        t->result = r;
        snprintf(t->msg, sizeof(t->msg), "`%.80s`: %.150s", c->text, err);
    }
}

static void
cmd_failed(struct onyx_target *t, const struct cmd *c, enum fs_poll_result r, const char *err)
{
    cmd_result(t, c, r, err);
    fs_log(FS_LOG_WARN, SUBSYS, "target %s: `%s`: %s", t->name, c->text, err);
}

static void update_detail(struct onyx_target *t);

/* The output of c (text, len) was not in the layout its parser knows (err): said once per
 * kind of command, with the first lines the device printed, in the log and in the detail
 * until it parses again; the cycle is partial (the port counters' failure fails it), the
 * other commands' data kept. */
static void
layout_mismatch(struct onyx_target *t, const struct cmd *c, const char *err, const char *text,
                size_t len)
{
    cmd_result(t, c, FS_POLL_PARSE, err);
    if (t->layout_err[c->kind][0])
        return;
    char lines[sizeof(t->layout_lines[0])];
    size_t o = 0, pos = 0;
    for (int n = 0; n < 3 && pos < len;) {
        const char *ls = text + pos, *nl = memchr(ls, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - ls) : len - pos;
        pos += ll + 1;
        while (ll > 0 && (ls[ll - 1] == '\r' || ls[ll - 1] == ' '))
            ll--;
        if (ll == 0)
            continue;
        o += (size_t)snprintf(lines + o, sizeof(lines) - o, "%s%.*s", n ? " | " : "",
                              (int)(ll < 60 ? ll : 60), ls);
        if (o >= sizeof(lines))
            break;
        n++;
    }
    if (o == 0)
        snprintf(lines, sizeof(lines), "(nothing)");
    snprintf(t->layout_err[c->kind], sizeof(t->layout_err[c->kind]), "%.120s", err[0] ? err : "?");
    snprintf(t->layout_cmd[c->kind], sizeof(t->layout_cmd[c->kind]), "%.90s", c->text);
    snprintf(t->layout_lines[c->kind], sizeof(t->layout_lines[c->kind]), "%s", lines);
    fs_log(FS_LOG_WARN, SUBSYS,
           "target %s: `%s` printed a layout this driver does not know (%s); its first lines: "
           "%s; its series are missing until it parses, the others are kept",
           t->name, c->text, err, lines);
    update_detail(t);
}

static bool
is_json_form(const struct cmd *c)
{
    size_t n = strlen(c->text), k = strlen(JSON_PIPE);
    return n > k && strcmp(c->text + n - k, JSON_PIPE) == 0;
}

/* The `| json-print` form of c failed (why): its text form is queued for this cycle and
 * used from now on for this target; reported once. */
static void
json_fallback(struct onyx_target *t, const struct cmd *c, const char *why)
{
    char text[sizeof(c->text)];
    snprintf(text, sizeof(text), "%.*s", (int)(strlen(c->text) - strlen(JSON_PIPE)), c->text);
    if (!t->json_off[c->kind]) {
        t->json_off[c->kind] = true;
        snprintf(t->json_off_why[c->kind], sizeof(t->json_off_why[c->kind]), "%s", why);
        fs_log(FS_LOG_WARN, SUBSYS,
               "target %s: `%s` failed (%s); using the text form of `%s` for this target", t->name,
               c->text, why, kind_names[c->kind]);
        update_detail(t);
    }
    size_t n = t->nq;
    bool spread = c->spread;
    queue_cmd(t, c->kind, "%s", text); /* c may move: its text was copied */
    if (spread)
        mark_spread(t, n);
    t->requeued = true;
}

/* The ports a switch may list: the largest Spectrum has 256 with every split; a listing
 * beyond this is a hostile or broken device, and each port costs a command per cycle. */
#define ONYX_MAX_PORTS 1024

static void
learn_ports(struct onyx_target *t)
{
    for (size_t i = 0; i < t->nports; i++)
        free(t->ports[i]);
    free(t->ports);
    t->ports = NULL;
    t->nports = 0;
    size_t n = 0;
    for (size_t i = 0; i < t->samples.n; i++)
        n += t->samples.v[i].metric == FS_M_PORT_OPER_UP;
    if (n > ONYX_MAX_PORTS) {
        if (t->ports_listed != n)
            fs_log(FS_LOG_WARN, SUBSYS,
                   "target %s: the switch lists %zu ports; per-port commands go to the first "
                   "%d only",
                   t->name, n, ONYX_MAX_PORTS);
        t->ports_listed = n;
        n = ONYX_MAX_PORTS;
    } else {
        t->ports_listed = 0;
    }
    if (n == 0 || !(t->ports = calloc(n, sizeof(*t->ports))))
        return;
    for (size_t i = 0; i < t->samples.n && t->nports < n; i++)
        if (t->samples.v[i].metric == FS_M_PORT_OPER_UP && t->samples.v[i].n_labels == 1 &&
            (t->ports[t->nports] = strdup(t->samples.v[i].labels[0].value)))
            t->nports++;
}

/* Device events handed over per poll at most: a full table of new rows must not flood
 * the host-event store (the counters keep every drop). */
#define WJH_EVENTS_PER_POLL 256

/*
 * A WJH row's new drops as a timestamped device event (kind "wjh.drop", name: the
 * reason), so /api/v1/correlate and the trace export show when they happened: a raw
 * record at its own time stamp; an aggregated row over the part of its Sample Window
 * that is new since the previous table (its whole window when the windows do not meet).
 */
static void
wjh_event(struct onyx_target *t, const struct onyx_wjh_record *r, uint64_t drops, const char *rule)
{
    int64_t a_us, b_us, prev_us;
    if (r->aggregated) {
        if (onyx_parse_wjh_time(r->window_start, t->clock_utc_offset_s, &a_us) != 0 ||
            onyx_parse_wjh_time(r->window_end, t->clock_utc_offset_s, &b_us) != 0 || b_us < a_us)
            goto unplaced;
        if (t->wjh.prev_window_end[0] &&
            onyx_parse_wjh_time(t->wjh.prev_window_end, t->clock_utc_offset_s, &prev_us) == 0 &&
            prev_us > a_us && prev_us <= b_us)
            a_us = prev_us;
    } else if (onyx_parse_wjh_time(r->timestamp, t->clock_utc_offset_s, &a_us) == 0) {
        b_us = a_us;
    } else {
        goto unplaced;
    }
    if (t->wjh_events_poll >= WJH_EVENTS_PER_POLL)
        goto unplaced;
    char n[24], sp[16], dp[16];
    snprintf(n, sizeof(n), "%llu", (unsigned long long)drops);
    struct fs_label at[8];
    size_t na = 0;
    at[na++] = (struct fs_label){"drops", n};
    if (r->sport[0])
        at[na++] = (struct fs_label){"interface", r->sport};
    if (rule)
        at[na++] = (struct fs_label){"rule", rule};
    if (r->proto[0])
        at[na++] = (struct fs_label){"proto", r->proto};
    if (r->src_ip[0]) {
        at[na++] = (struct fs_label){"saddr", r->src_ip};
        snprintf(sp, sizeof(sp), "%d", r->src_port);
        if (r->src_port >= 0)
            at[na++] = (struct fs_label){"sport", sp};
    }
    if (r->dst_ip[0]) {
        at[na++] = (struct fs_label){"daddr", r->dst_ip};
        snprintf(dp, sizeof(dp), "%d", r->dst_port);
        if (r->dst_port >= 0)
            at[na++] = (struct fs_label){"dport", dp};
    }
    if (fs_sink_device_event(t->sink, a_us, b_us, "wjh.drop", r->reason[0] ? r->reason : "drop", at,
                             na) != 0)
        goto unplaced;
    t->wjh_events_poll++;
    t->wjh_events++;
    return;
unplaced:
    t->wjh_events_unplaced++;
}

struct wjh_acc {
    struct onyx_target *t;
    char window_end[32];
    bool oom;
};

/* One row of the WJH table: its new drops (wjh_tally.h) go to the totals of every rule
 * it matches. */
static void
wjh_record(const struct onyx_wjh_record *r, void *arg)
{
    struct wjh_acc *a = arg;
    struct onyx_target *t = a->t;
    snprintf(a->window_end, sizeof(a->window_end), "%s", r->window_end);
    int64_t fresh = onyx_wjh_tally_row(&t->wjh, r);
    if (fresh < 0) {
        a->oom = true;
        return;
    }
    const char *first_rule = NULL;
    for (size_t i = 0; i < t->cfg.n_flow_rules; i++) {
        const struct fs_flow_rule *rule = &t->cfg.flow_rules[i];
        /* a rule with no drops yet still gets its total (0) once a row matches it */
        if (onyx_wjh_matches_rule(r, rule)) {
            if (!first_rule)
                first_rule = rule->name;
            if (onyx_wjh_tally_add(&t->wjh, rule->name, r->reason, (uint64_t)fresh) < 0)
                a->oom = true;
        }
    }
    if (fresh > 0)
        wjh_event(t, r, (uint64_t)fresh, first_rule);
}

/* The WJH totals as samples: one counter per (rule, reason), each drop counted once. */
static void
wjh_samples(struct onyx_target *t)
{
    for (size_t i = 0; i < t->wjh.n_totals; i++) {
        const struct onyx_wjh_total *w = &t->wjh.totals[i];
        if (onyx_add_counter(&t->samples, FS_M_FLOW_RULE_DROPPED, w->drops, 1.0, "rule", w->rule,
                             "reason", w->reason, NULL, NULL) != 0)
            return;
    }
}

/* The flow-rule ACL's entry counters -> per-rule packets, bytes and (where a rule has
 * its `ecn: ce` twin) CE-marked packets (flowrules.h). */
static int
acl_counters(struct onyx_target *t, const char *text, size_t len, char *err, size_t errlen)
{
    size_t n = t->cfg.n_flow_rules;
    uint64_t *v = calloc(n * 7, sizeof(*v));
    bool *seen = calloc(n, sizeof(*seen));
    int rc = -1;
    if (!v || !seen) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    uint64_t *epk = v, *eby = v + n, *rpk = v + 2 * n, *rby = v + 3 * n, *ce = v + 4 * n;
    if (onyx_parse_acl_counters(text, len, epk, eby, seen, n, err, errlen) != 0)
        goto out;
    size_t missing = 0;
    for (size_t k = 0; k < n; k++)
        missing += !seen[k];
    if (missing) {
        snprintf(err, errlen, "access-list counters: %zu of %zu entries without a packet count",
                 missing, n);
        goto out;
    }
    onyx_flow_rule_counts(t->cfg.flow_rules, n, t->acl_order, epk, eby, rpk, rby, ce);
    for (size_t i = 0; i < n; i++) {
        const char *rule = t->cfg.flow_rules[i].name;
        if (onyx_add_counter(&t->samples, FS_M_FLOW_RULE_PACKETS, rpk[i], 1.0, "rule", rule, NULL,
                             NULL, NULL, NULL) != 0 ||
            onyx_add_counter(&t->samples, FS_M_FLOW_RULE_BYTES, rby[i], 1.0, "rule", rule, NULL,
                             NULL, NULL, NULL) != 0 ||
            (ce[i] != UINT64_MAX &&
             onyx_add_counter(&t->samples, FS_M_FLOW_RULE_ECN_MARKED, ce[i], 1.0, "rule", rule,
                              NULL, NULL, NULL, NULL) != 0)) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
    }
    snprintf(t->acl_counters, sizeof(t->acl_counters),
             "read (layout assumed, unverified against a real switch)");
    rc = 0;
out:
    free(v);
    free(seen);
    return rc;
}

static void
handle_response(struct onyx_target *t, const struct cmd *c, const char *text, size_t len,
                int64_t now_real)
{
    char err[256];
    onyx_samples_clear(&t->samples);
    if (c->kind == K_CONFIG || c->kind == K_ROLLBACK) {
        if (onyx_error_line(text, len, err, sizeof(err))) {
            fs_log(FS_LOG_ERROR, SUBSYS, "target %s: `%s`: %s", t->name, c->text, err);
            if (c->kind == K_CONFIG && !t->config_failed) {
                t->config_failed = true;
                if (t->result == FS_POLL_OK) {
                    t->result = FS_POLL_PROTOCOL;
                    snprintf(t->msg, sizeof(t->msg), "flow rules: `%.60s`: %.120s", c->text, err);
                }
            }
        }
        return;
    }
    if (c->kind == K_RUNCFG && !onyx_error_line(text, len, err, sizeof(err))) {
        plan_flow_rules(t, text, len);
        return;
    }
    const bool json = is_json_form(c);
    if (onyx_error_line(text, len, err, sizeof(err))) {
        bool unknown = strstr(err, "Unrecognized") || strstr(err, "Invalid command") ||
                       strstr(err, "nknown command");
        if (c->kind == K_ACL && !unknown) {
            /* the ACL is not on the switch (apply_flow_rules installs it): no failure */
            snprintf(t->acl_counters, sizeof(t->acl_counters), "absent: %.150s", err);
            update_detail(t);
            return;
        }
        if (json) {
            json_fallback(t, c, err);
        } else if (unknown) {
            if (!t->lacks[c->kind])
                fs_log(FS_LOG_WARN, SUBSYS,
                       "target %s: `%s` not supported (%s); dropped for this target", t->name,
                       kind_names[c->kind], err);
            t->lacks[c->kind] = true;
        } else {
            /* The command exists but failed: the cycle did not get what it asked for. */
            cmd_failed(t, c, FS_POLL_PROTOCOL, err);
        }
        update_detail(t);
        return;
    }
    int rc = 0;
    switch (c->kind) {
    case K_CLOCK: {
        int64_t dev_us, res_us;
        rc = onyx_parse_clock(text, len, &dev_us, &res_us, err, sizeof(err));
        if (rc == 0)
            onyx_parse_clock_utc_offset(text, len, &t->clock_utc_offset_s);
        /* The raw reading: the device read dev_us (truncated to its resolution) while our
         * clock was between the batch's send and this answer. The core's filter does the
         * rest (second-edge detection across polls and clock probes for a whole-second
         * clock). */
        if (rc == 0)
            fs_sink_clock_prober_reading(t->sink, &t->prober, dev_us, res_us, t->batch_lo_us,
                                         now_real, false);
        break;
    }
    case K_VERSION: {
        struct onyx_version v;
        rc = onyx_parse_version_text(text, len, &v, err, sizeof(err));
        if (rc == 0) {
            if (v.uptime_s >= 0 && t->last_uptime >= 0 && v.uptime_s + 1.0 < t->last_uptime) {
                fs_log(FS_LOG_INFO, SUBSYS, "target %s: uptime went from %.0f s to %.0f s: reboot",
                       t->name, t->last_uptime, v.uptime_s);
                fs_sink_counter_reset(t->sink, FS_RESET_REBOOT, NULL);
                /* the rebooted device's WJH table is a new one: all its rows are new */
                t->wjh.had_prev = false;
            }
            if (v.uptime_s >= 0)
                t->last_uptime = v.uptime_s;
            snprintf(t->release, sizeof(t->release), "%s", v.release);
            rc = onyx_version_samples(&v, &t->samples);
        }
        break;
    }
    case K_IFACES:
        rc = json ? onyx_parse_interfaces_json(text, len, &t->samples, err, sizeof(err))
                  : onyx_parse_interfaces_text(text, len, &t->samples, err, sizeof(err));
        if (rc == 0)
            learn_ports(t);
        break;
    case K_TC:
        rc = onyx_parse_tc_counters(text, len, &t->samples, err, sizeof(err));
        break;
    case K_PFC:
        rc = onyx_parse_pfc_counters(text, len, &t->samples, err, sizeof(err));
        break;
    case K_CC: {
        struct onyx_tc_profile prof[8];
        size_t np = 0;
        rc = json ? onyx_parse_congestion_json(text, len, &t->samples, prof, &np, err, sizeof(err))
                  : onyx_parse_congestion_text(text, len, &t->samples, prof, &np, err, sizeof(err));
        for (size_t i = 0; rc == 0 && i < np && !t->profile[0]; i++)
            if (strcasecmp(prof[i].mode, "none") != 0)
                snprintf(t->profile, sizeof(t->profile), "tc %d %s %s min %s max %s", prof[i].tc,
                         prof[i].mode, prof[i].threshold_mode, prof[i].min, prof[i].max);
        break;
    }
    case K_FLOWS:
        rc = onyx_parse_telemetry_flows(text, len, &t->samples, err, sizeof(err));
        break;
    case K_WJH: {
        struct wjh_acc a = {.t = t};
        t->wjh_events_poll = 0;
        onyx_wjh_tally_begin(&t->wjh);
        rc = onyx_parse_wjh(text, len, wjh_record, &a, err, sizeof(err)) < 0 ? -1 : 0;
        if (rc == 0 && a.oom) {
            snprintf(err, sizeof(err), "what-just-happened: out of memory counting records");
            rc = -1;
        }
        if (rc == 0) {
            /* An empty table still says where its window ended: the next table's new
             * drops came after it (wjh_event). */
            char ws[32];
            if (!a.window_end[0])
                onyx_parse_wjh_window(text, len, ws, sizeof(ws), a.window_end,
                                      sizeof(a.window_end));
            onyx_wjh_tally_end(&t->wjh, a.window_end);
            if (t->wjh.overflow)
                fs_log(FS_LOG_WARN, SUBSYS,
                       "target %s: the WJH table has more than %d rows: rows beyond them are "
                       "counted again in every poll",
                       t->name, ONYX_WJH_MAX_ROWS);
            wjh_samples(t);
        }
        break;
    }
    case K_ACL:
        rc = acl_counters(t, text, len, err, sizeof(err));
        break;
    case K_LLDP:
        rc = lldp_table(t, text, len, err, sizeof(err));
        break;
    case K_RUNCFG:
    case K_CONFIG:
    case K_ROLLBACK:
    case K_COUNT:
        break;
    }
    if (rc != 0 && json) {
        onyx_samples_clear(&t->samples); /* the text form's answer replaces it */
        json_fallback(t, c, err);
    } else if (rc != 0) {
        layout_mismatch(t, c, err, text, len);
    } else if (t->layout_err[c->kind][0] && strcmp(t->layout_cmd[c->kind], c->text) == 0) {
        fs_log(FS_LOG_INFO, SUBSYS, "target %s: `%s` parses again", t->name, c->text);
        t->layout_err[c->kind][0] = '\0';
        update_detail(t);
    }
    emit(t, c, now_real);
}

/* The next command's response in rx: from resp_start (after the previous prompt) to the
 * prompt that ends it, echoes included. True with *end (the prompt's start) and
 * t->resp_next (after the prompt: the next response's start) when complete. */
static bool
response_end(struct onyx_target *t, size_t *end)
{
    return onyx_next_prompt(t->rx, t->rx_len, t->resp_start, t->prefix, t->prefix_len, end,
                            &t->resp_next);
}

/* Forged prompts. A hostile (or broken) peer may print a line that looks like the shell's
 * prompt inside an output; taken for the prompt, it would end that output early and shift
 * every later output onto the wrong command. The shell's own prompt is told apart by what
 * follows it: the shell reads the next command typed ahead at once and echoes it right
 * after its prompt; a command typed after the last one answered, none: nothing follows
 * that prompt until we send again. (A pager that took a typed-ahead command as its keys,
 * or a CLI that dropped type-ahead, skips echoes: any later command's echo counts. A shell
 * that echoed the next command before, a pty echoing type-ahead on arrival or one echoing
 * it into the output, prints the next output right after the prompt: there only the echo
 * of a command already answered after a prompt, or anything after the batch's last
 * prompt, shows a forged one.) */

/* Whether rx from offset from starts with the echo of one of q[lo..hi) (its whole line): 1
 * yes, 0 not known yet (a line still arriving that may be one), -1 no. */
static int
echo_follows(const struct onyx_target *t, size_t from, size_t lo, size_t hi)
{
    const char *a = t->rx + from;
    const size_t n = t->rx_len - from;
    int r = -1;
    for (size_t j = lo; j < hi && r < 1; j++) {
        const char *c = t->q[j].text;
        const size_t cl = strlen(c);
        size_t k = 0;
        while (k < n && k < cl && a[k] == c[k])
            k++;
        if (k < cl) {
            if (k == n)
                r = 0;
            continue;
        }
        while (k < n && (a[k] == ' ' || a[k] == '\r'))
            k++;
        if (k == n)
            r = 0;
        else if (a[k] == '\n')
            r = 1;
    }
    return r;
}

/* The prompt at [ps, pe) of rx ends the output that starts at resp_start; q[lo..hi) were
 * typed after that output's command (lo == hi: none). 1: the shell's prompt, 0: not known
 * yet, -1: a line of the output that looks like a prompt (forged). */
static int
prompt_kind(const struct onyx_target *t, size_t lo, size_t hi, size_t ps, size_t pe)
{
    if (rx_blank_from(t, pe))
        return 1; /* nothing after it (yet): the shell waits for input */
    if (lo >= hi)
        return -1; /* nothing typed after it: the shell prints nothing after its prompt */
    const int pending = echo_follows(t, pe, lo, hi);
    if (pending > 0)
        return 1;
    const int answered = echo_follows(t, pe, t->batch_start, lo);
    if (answered > 0)
        return -1; /* a command already answered is not echoed again */
    if (answered == 0 || pending == 0)
        return 0;
    const char *next = t->q[lo].text;
    return t->echo_next > lo ||
                   memmem(t->rx + t->resp_start, ps - t->resp_start, next, strlen(next))
               ? 1
               : -1;
}

/* The end of an output from resp_start (see response_end) at the shell's prompt, q[lo..hi)
 * typed after its command: 1 with *end and t->resp_next, 0 when not complete yet. A forged
 * prompt found before it goes into t->forged (its line, the first one); pipelined (other
 * commands typed ahead: their outputs follow and the check above is the weaker one), the
 * search stops there: -1. Otherwise it goes on to the prompt nothing follows. */
static int
cmd_end(struct onyx_target *t, size_t lo, size_t hi, bool pipelined, size_t *end)
{
    size_t from = t->resp_start, ps, pe;
    t->forged[0] = '\0';
    while (onyx_next_prompt(t->rx, t->rx_len, from, t->prefix, t->prefix_len, &ps, &pe)) {
        const int k = prompt_kind(t, lo, hi, ps, pe);
        if (k == 0)
            return 0;
        if (k > 0) {
            *end = ps;
            t->resp_next = pe;
            return 1;
        }
        if (!t->forged[0]) {
            const char *nl = memchr(t->rx + ps, '\n', t->rx_len - ps);
            size_t ll = nl ? (size_t)(nl - (t->rx + ps)) : t->rx_len - ps;
            while (ll > 0 && t->rx[ps + ll - 1] == ' ')
                ll--;
            snprintf(t->forged, sizeof(t->forged), "%.*s", (int)(ll < 100 ? ll : 100), t->rx + ps);
        }
        if (pipelined) {
            /* A pager that took typed-ahead bytes as its keys cuts the next command's echo:
             * its own fallback (has_pager_line, process_responses) drops the batch. */
            if (has_pager_line(t->rx + t->resp_start, ps - t->resp_start)) {
                t->forged[0] = '\0';
                *end = ps;
                t->resp_next = pe;
                return 1;
            }
            return -1;
        }
        from = ps + 1;
    }
    return 0;
}

/* Removes from rx what the responses handled used, up to the last prompt's end. */
static void
rx_consume(struct onyx_target *t)
{
    memmove(t->rx, t->rx + t->resp_start, t->rx_len - t->resp_start);
    t->rx_len -= t->resp_start;
    t->resp_start = 0;
    /* One large answer (up to max_output) must not pin its buffer for the session's
     * life: many targets would each keep their largest answer ever. */
    if (t->rx_cap > RX_KEEP_BYTES && t->rx_len < RX_KEEP_BYTES / 2) {
        char *p = realloc(t->rx, RX_KEEP_BYTES);
        if (p) {
            t->rx = p;
            t->rx_cap = RX_KEEP_BYTES;
        }
    }
}

/* Reads and drops the answers an abandoned cycle's commands still owed; then the session is
 * ready, and a cycle that arrived meanwhile sends its batch. */
static void
drain_responses(struct onyx_target *t)
{
    while (t->owed > 0) {
        size_t end;
        if (!response_end(t, &end))
            return;
        t->resp_start = t->resp_next;
        t->owed--;
    }
    rx_consume(t);
    t->draining = false;
    t->ss = SS_READY;
    if (t->in_cycle) {
        send_batch(t);
        return;
    }
    plan_probe(t);
    update_detail(t);
}

/* ---------------- type-ahead the CLI mishandles ---------------- */

/* How long a shell must sit quiet at its prompt while answers are owed before they count
 * as lost (type-ahead dropped), and before a resync's empty line goes out. A CLI at its
 * prompt reads pending input at once; a command that runs long has printed its echo after
 * the prompt (or, echoing type-ahead on arrival, long before), which this rule excludes. */
#define TYPEAHEAD_QUIET_US 500000

/* Pipelining is off for good (see one_at_a_time) and this batch resynchronizes: what the
 * shell still prints for it is dropped; once it sits quiet at its prompt an empty line
 * goes out (resync_send) and its prompt is awaited; the commands from the one that went
 * wrong are then sent again, one at a time. The session and the cycle are kept. */
static void
pipelining_off(struct onyx_target *t, const char *why)
{
    if (!t->one_at_a_time) {
        t->one_at_a_time = true;
        snprintf(t->pipelining_off, sizeof(t->pipelining_off), "%s", why);
        fs_log(FS_LOG_WARN, SUBSYS,
               "target %s: the CLI mishandles type-ahead (%s); sending one command at a "
               "time from now on (the session is kept)",
               t->name, why);
        update_detail(t);
    }
    t->resync = true;
    t->sent = t->done; /* sent again from the command that went wrong */
}

/* The shell sits quiet at its prompt: an empty line, whose prompt ends the resync. */
static void
resync_send(struct onyx_target *t)
{
    t->resync = false;
    t->rx_len = 0;
    t->resp_start = 0;
    t->draining = true;
    t->drained_bytes = 0;
    t->owed = 1;
    send_text(t, "", false);
    flush_tx(t);
    if (t->ss != SS_DOWN)
        epoll_update(t);
}

/* Whether only blanks follow offset from in rx. */
static bool
rx_blank_from(const struct onyx_target *t, size_t from)
{
    for (size_t i = from; i < t->rx_len; i++)
        if (t->rx[i] != ' ' && t->rx[i] != '\n' && t->rx[i] != '\t')
            return false;
    return true;
}

/* A pipelined batch whose next answer will never come: the shell answered earlier
 * commands of the batch, then printed its prompt and nothing after it (not even the next
 * command's echo, nor had it echoed it before) for TYPEAHEAD_QUIET_US. */
static bool
typeahead_lost(const struct onyx_target *t)
{
    if (t->ss != SS_BUSY || t->resync || t->one_at_a_time || !rx_blank_from(t, t->resp_start))
        return false;
    if (t->draining) /* the cycle ran out of time first: the batch it abandoned */
        return t->owed > 0 && t->owed_maybe_lost;
    return t->batch_end - t->batch_start > 1 && t->done > t->batch_start &&
           t->done < t->batch_end && t->echo_next <= t->done;
}

/* Whether rx ends with a prompt, wherever its line starts (a pager's last line, its
 * erasure cleaned away, runs into the prompt after it). */
static bool
rx_ends_at_prompt(const struct onyx_target *t)
{
    size_t back = t->prefix_len + 64, from = t->rx_len > back ? t->rx_len - back : 0;
    size_t ps, pe;
    while (onyx_next_prompt(t->rx, t->rx_len, from, t->prefix, t->prefix_len, &ps, &pe)) {
        if (pe >= t->rx_len)
            return true;
        from = ps + 1;
    }
    return false;
}

/* A resync waits for the shell to sit quiet at its prompt. */
static bool
resync_waits(const struct onyx_target *t)
{
    return t->ss == SS_BUSY && t->resync && rx_ends_at_prompt(t);
}

/* The echo of a command sent after c in this batch inside c's output (echoes stripped):
 * the shell echoed type-ahead into the middle of the output; its lines may be cut. */
static const char *
echo_inside(const struct onyx_target *t, const char *text, size_t len)
{
    /* Every command looked for starts with "show ": where that occurs (as a rule nowhere in
     * an output) is found in one pass and each command compared there only, instead of a
     * search of the whole output per command of the batch (issue 34: 5% of the I/O
     * thread). Past AT_MAX places, one search per command as before. */
    enum { AT_MAX = 16 };
    size_t at[AT_MAX], nat = 0;
    bool many = false;
    for (const char *p = text, *e = text + len;
         p < e && (p = memmem(p, (size_t)(e - p), "show ", 5)); p++) {
        if (nat == AT_MAX) {
            many = true;
            break;
        }
        at[nat++] = (size_t)(p - text);
    }
    for (size_t i = t->done + 1; i < t->batch_end; i++) {
        const char *cmd = t->q[i].text;
        if (strncmp(cmd, "show ", 5) != 0)
            continue;
        size_t cl = strlen(cmd);
        if (many && memmem(text, len, cmd, cl))
            return cmd;
        for (size_t k = 0; !many && k < nat; k++)
            if (len - at[k] >= cl && memcmp(text + at[k], cmd, cl) == 0)
                return cmd;
    }
    return NULL;
}

/* Splits the batch's output at the prompts; handles every complete response. */
static void
process_responses(struct onyx_target *t)
{
    if (t->draining) {
        drain_responses(t);
        return;
    }
    if (t->resync)
        return; /* dropped until the shell is quiet (check_timeouts) */
    while (t->done < t->batch_end) {
        size_t end;
        const bool pipelined = t->batch_end - t->batch_start > 1;
        const int k = cmd_end(t, t->done + 1, t->batch_end, pipelined, &end);
        if (k == 0)
            return;
        if (k < 0) {
            /* Where the outputs split is no longer known: none of the rest is used, and the
             * commands go again one at a time, where a prompt is the shell's only when
             * nothing follows it. */
            char why[200];
            snprintf(why, sizeof(why), "a forged prompt inside the output of `%.60s` (`%.90s`)",
                     t->q[t->done].text, t->forged);
            pipelining_off(t, why);
            return;
        }
        /* A copy: handling may queue commands, which moves t->q. */
        const struct cmd c = t->q[t->done];
        const char *sent[MAX_BATCH];
        size_t ns = 0;
        for (size_t i = t->echo_next; i < t->batch_end && ns < MAX_BATCH; i++)
            sent[ns++] = t->q[i].text;
        size_t len = end - t->resp_start;
        t->echo_next += onyx_strip_echoes(t->rx + t->resp_start, &len, sent, ns);
        t->requeued = false;
        if (!t->one_at_a_time) {
            const char *other = echo_inside(t, t->rx + t->resp_start, len);
            bool pager = !other && has_pager_line(t->rx + t->resp_start, len);
            char why[200] = "";
            if (other)
                snprintf(why, sizeof(why), "type-ahead echoed inside an output: `%.60s` in `%.60s`",
                         other, c.text);
            else if (pager)
                snprintf(why, sizeof(why),
                         "pager: the CLI pages despite `no cli session paging enable` and took "
                         "typed-ahead commands as its keys (`%.60s`)",
                         c.text);
            if (other || pager) {
                pipelining_off(t, why);
                return;
            }
        }
        const int64_t now_mono = fs_monotonic_us();
        if (t->done == t->batch_start) {
            int64_t rtt = now_mono - t->batch_sent_mono_us;
            if (rtt > 0 && (t->rtt_min_us == 0 || rtt < t->rtt_min_us))
                t->rtt_min_us = rtt;
            if (rtt > 0) {
                t->rtt_sum_us += rtt;
                t->rtt_n++;
            }
        } else if (now_mono >= t->prev_answer_mono_us) {
            t->gap_sum_us += now_mono - t->prev_answer_mono_us;
            t->gap_n++;
        }
        t->prev_answer_mono_us = now_mono;
        if (t->forged[0]) {
            /* A line the shell did not print as its prompt: the output is the peer's
             * word, not the command's answer. */
            char err[200];
            snprintf(err, sizeof(err),
                     "a forged prompt inside its output (`%.100s`, followed by more output): "
                     "output dropped",
                     t->forged);
            cmd_failed(t, &c, FS_POLL_PROTOCOL, err);
        } else {
            handle_response(t, &c, t->rx + t->resp_start, len, fs_realtime_us());
        }
        if (c.spread && !t->requeued)
            t->spread_answered++;
        t->done++;
        t->resp_start = t->resp_next;
        /* After the port list's last form (not one whose text form was just queued),
         * when no earlier listing gave the ports. */
        if (c.kind == K_IFACES && !t->requeued && !t->lacks[K_CC] && !t->cc_queued) {
            for (size_t i = 0; i < t->nports; i++)
                queue_unit(t, i, 0, 0);
            t->spread_units += t->nports;
            t->cc_queued = true;
        }
    }
    /* The batch is complete: drop its text, up to the last prompt. */
    rx_consume(t);
    if (t->config_in_flight) {
        bool pending = false;
        for (size_t i = t->done; i < t->nq; i++)
            pending = pending || t->q[i].kind == K_CONFIG;
        if (!pending)
            finish_flow_rules(t);
    }
    if (t->sent < t->nq) {
        send_batch(t);
        return;
    }
    t->ss = SS_READY;
    finish_cycle(t, t->result, t->msg);
}

/* ---------------- clock probes ---------------- */

/* Plans the next probe (t->prober.at_us) when the session is idle; the prober says why
 * none is planned. Called whenever the session becomes idle (a cycle or a probe ended). */
static void
plan_probe(struct onyx_target *t)
{
    t->prober.at_us = 0;
    if (t->ss != SS_READY || t->in_cycle || t->removed)
        return;
    if (t->lacks[K_CLOCK]) {
        fs_clock_prober_off(&t->prober, FS_CLOCK_PROBER_STATE_NONE);
        return;
    }
    struct fs_clock_prober_now n = {
        .now_us = fs_realtime_us(),
        .now_mono_us = fs_monotonic_us(),
        .cycle_start_us = t->cycle_start_real_us,
        .interval_us = t->cfg.interval_us,
    };
    n.known = fs_sink_clock_estimate(t->sink, &n.offset_us, &n.uncertainty_us);
    fs_clock_prober_plan(&t->prober, &n);
}

static void
send_probe(struct onyx_target *t)
{
    int64_t off, unc;
    t->prober.at_us = 0;
    if (!fs_sink_clock_estimate(t->sink, &off, &unc))
        return;
    fs_clock_prober_sent(&t->prober, off, unc);
    t->ss = SS_PROBE;
    send_text(t, "show clock", false);
    t->probe_sent_mono_us = fs_monotonic_us();
    t->probe_lo_us = fs_realtime_us(); /* before the write: the bound stays honest */
    flush_tx(t);
    if (t->ss != SS_DOWN)
        epoll_update(t);
}

/* The probe's answer: one more measurement for the core's filter. */
static void
process_probe(struct onyx_target *t)
{
    size_t end;
    if (cmd_end(t, 0, 0, false, &end) <= 0)
        return;
    const int64_t now_real = fs_realtime_us();
    char *text = t->rx + t->resp_start;
    size_t len = end - t->resp_start;
    const char *sent[1] = {"show clock"};
    onyx_strip_echoes(text, &len, sent, 1);
    char err[256];
    int64_t dev_us, res_us;
    if (t->forged[0])
        snprintf(err, sizeof(err), "a forged prompt inside its output (`%.100s`)", t->forged);
    if (t->forged[0] || onyx_error_line(text, len, err, sizeof(err)) ||
        onyx_parse_clock(text, len, &dev_us, &res_us, err, sizeof(err)) != 0) {
        fs_log(FS_LOG_WARN, SUBSYS, "target %s: clock probe: `show clock`: %s; probes paused",
               t->name, err);
        fs_clock_prober_failed(&t->prober, fs_monotonic_us());
    } else {
        fs_sink_clock_prober_reading(t->sink, &t->prober, dev_us, res_us, t->probe_lo_us, now_real,
                                     true);
    }
    t->resp_start = t->resp_next;
    rx_consume(t);
    t->ss = SS_READY;
    if (t->in_cycle) {
        send_batch(t); /* the cycle arrived during the probe and waited for its answer */
        return;
    }
    plan_probe(t);
    update_detail(t);
}

/* The session text after the shell opened, up to the ready state. */
static void
process_setup(struct onyx_target *t)
{
    size_t st = 0;
    if (t->ss == SS_BANNER && t->rx_len >= 2 && strstr(t->rx, "wizard") &&
        t->rx[t->rx_len - 1] == ' ' && t->rx[t->rx_len - 2] == '?') {
        t->rx_len = 0;
        send_text(t, "no", false);
        return;
    }
    if (t->ss == SS_ENABLE && !t->enable_pw_sent && onyx_password_prompt_at_end(t->rx, t->rx_len)) {
        char pw[SECRET_MAX], err[256];
        t->rx_len = 0;
        t->enable_pw_sent = true;
        if (!t->cfg.enable_password.file && !t->cfg.enable_password.env) {
            fail_session(t, FS_POLL_AUTH, "`enable` asks for a password and none is configured");
            return;
        }
        if (fs_secret_read(&t->cfg.enable_password, pw, sizeof(pw), err, sizeof(err)) != 0) {
            fail_session(t, FS_POLL_AUTH, err);
            return;
        }
        send_text(t, pw, true);
        explicit_bzero(pw, sizeof(pw));
        return;
    }
    enum onyx_mode m = onyx_prompt_at_end(t->rx, t->rx_len, &st);
    if (m == ONYX_MODE_NONE)
        return;
    if (t->ss == SS_BANNER) {
        /* The prompt prefix: through "] " when tagged, else the host name and a space. */
        const char *line = t->rx + st;
        size_t n = t->rx_len - st;
        const char *br = memchr(line, ']', n);
        size_t plen = br ? (size_t)(br - line) + 1 : 0;
        if (!br)
            while (plen < n && line[plen] != ' ')
                plen++;
        if (plen < n && line[plen] == ' ')
            plen++;
        if (plen >= sizeof(t->prefix))
            plen = sizeof(t->prefix) - 1;
        memcpy(t->prefix, line, plen);
        t->prefix[plen] = '\0';
        t->prefix_len = plen;
    }
    t->rx_len = 0;
    switch (t->ss) {
    case SS_BANNER:
    case SS_ENABLE:
        if (m == ONYX_MODE_USER) {
            if (t->ss == SS_ENABLE) {
                fail_session(t, FS_POLL_AUTH, "`enable` refused");
                return;
            }
            t->ss = SS_ENABLE;
            send_text(t, "enable", false);
            return;
        }
        t->ss = SS_PAGING;
        send_text(t, "no cli session paging enable", false);
        return;
    case SS_PAGING:
        t->ss = SS_READY;
        fs_log(FS_LOG_INFO, SUBSYS, "target %s: CLI session ready (prompt \"%s\")", t->name,
               t->prefix);
        if (t->in_cycle)
            send_batch(t);
        return;
    default:
        return;
    }
}

/* Appends received bytes, cleaned; an escape sequence cut by the read is held back. */
static int
rx_append(struct onyx_target *t, const char *data, size_t n)
{
    char tmp[65536 + 64];
    size_t m = t->esc_len;
    memcpy(tmp, t->esc_hold, m);
    memcpy(tmp + m, data, n);
    m += n;
    t->esc_len = 0;
    for (size_t i = m > 16 ? m - 16 : 0; i < m; i++) {
        if (tmp[i] == 0x1b || (unsigned char)tmp[i] == 0x9b) {
            size_t j = i + 1;
            if (j < m && tmp[j] == '[')
                j++;
            while (j < m && ((tmp[j] >= '0' && tmp[j] <= '9') || tmp[j] == ';' || tmp[j] == '?'))
                j++;
            if (j >= m && m - i < sizeof(t->esc_hold)) { /* incomplete */
                t->esc_len = m - i;
                memcpy(t->esc_hold, tmp + i, t->esc_len);
                m = i;
                break;
            }
        }
    }
    size_t c = onyx_clean(tmp, m);
    transcript_write(t, NULL, tmp, c);
    return buf_append(&t->rx, &t->rx_len, &t->rx_cap, tmp, c);
}

/* The session ended before the CLI ever showed a prompt: the account's shell or forced
 * command failed to start (or refused us). What it printed, if anything, usually names
 * the cause (a missing or unreadable program), so its last line goes into the error. */
static void
fail_before_prompt(struct onyx_target *t)
{
    char msg[384];
    const char *end = t->rx + t->rx_len, *line = NULL;
    size_t len = 0;
    while (end > t->rx && len == 0) {
        const char *e = end;
        while (e > t->rx && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' '))
            e--;
        const char *b = e;
        while (b > t->rx && b[-1] != '\n' && b[-1] != '\r')
            b--;
        line = b;
        len = (size_t)(e - b);
        end = b;
    }
    if (len > 0)
        snprintf(msg, sizeof(msg),
                 "the switch closed the session before showing a prompt: check that the "
                 "account's shell or forced command works (it printed: %.*s)",
                 (int)(len < 200 ? len : 200), line);
    else
        snprintf(msg, sizeof(msg),
                 "the switch closed the session before showing a prompt: "
                 "check that the account's shell or forced command works");
    fail_session(t, FS_POLL_PROTOCOL, msg);
}

static void
target_io(struct onyx_target *t)
{
    char err[256] = "";
    if (t->ss == SS_SSH) {
        int r = onyx_ssh_establish(t->ssh, err, sizeof(err));
        if (r == ONYX_SSH_AGAIN) {
            epoll_update(t);
            return;
        }
        if (r != ONYX_SSH_DONE) {
            fail_session(t,
                         r == ONYX_SSH_FAIL_AUTH || r == ONYX_SSH_FAIL_HOSTKEY ? FS_POLL_AUTH
                                                                               : FS_POLL_TIMEOUT,
                         err);
            return;
        }
        t->ss = SS_BANNER;
        t->sessions++;
        t->progress_us = fs_monotonic_us();
    }
    static char buf[65536];
    /* libssh2 may hold data already taken from the socket: a turn cut short is resumed
       by the I/O thread's loop (more_rx), not by epoll. */
    t->more_rx = false;
    for (size_t got = 0;;) {
        if (got >= RX_SLICE_BYTES) {
            t->more_rx = true;
            break;
        }
        size_t n = 0;
        int r = onyx_ssh_read(t->ssh, buf, sizeof(buf), &n);
        if (r == ONYX_SSH_AGAIN)
            break;
        got += n;
        if (r == ONYX_SSH_EOF) {
            if (t->ss == SS_BANNER)
                fail_before_prompt(t);
            else
                fail_session(t, FS_POLL_PROTOCOL, "the switch closed the session");
            return;
        }
        if (r != ONYX_SSH_DONE) {
            fail_session(t, FS_POLL_PROTOCOL, "read from the shell failed");
            return;
        }
        t->progress_us = fs_monotonic_us();
        if (t->draining)
            t->drained_bytes += n;
        if (rx_append(t, buf, n) < 0 || t->rx_len > t->cfg.max_output_bytes ||
            t->drained_bytes > t->cfg.max_output_bytes) {
            char m[96];
            snprintf(m, sizeof(m), "runaway output (more than max_output, %zu bytes)",
                     t->cfg.max_output_bytes);
            fail_session(t, FS_POLL_PROTOCOL, m);
            return;
        }
    }
    size_t ps;
    /* A pager line with the prompt after it on the same line (its key came from
     * type-ahead; the erasure between them cleaned away) waits for nothing. */
    if (t->ss != SS_SSH && onyx_pager_at_end(t->rx, t->rx_len, &ps) &&
        !(t->prefix_len > 0 && rx_ends_at_prompt(t))) {
        t->rx_len = ps; /* paging is on after all: page on */
        t->rx[ps] = '\0';
        if (buf_append(&t->tx, &t->tx_len, &t->tx_cap, " ", 1) < 0)
            return;
    }
    if (t->ss == SS_BUSY)
        process_responses(t);
    else if (t->ss == SS_PROBE)
        process_probe(t);
    else if (t->ss != SS_READY && t->ss != SS_DOWN)
        process_setup(t);
    if (t->ss != SS_DOWN) {
        flush_tx(t);
        epoll_update(t);
    }
}

static void
start_connect(struct onyx_target *t)
{
    char pw[SECRET_MAX] = "", err[256];
    bool have_pw = t->cfg.password.file || t->cfg.password.env;
    if (have_pw && fs_secret_read(&t->cfg.password, pw, sizeof(pw), err, sizeof(err)) != 0) {
        fail_session(t, FS_POLL_AUTH, err);
        return;
    }
    struct onyx_ssh_params p = {
        .host = t->address,
        .port = t->cfg.port,
        .username = t->cfg.username,
        .password = have_pw ? pw : NULL,
        .key_file = t->cfg.key_file,
        .known_hosts = t->cfg.known_hosts,
        .accept_new = t->cfg.host_key_policy == FS_ONYX_HOSTKEY_ACCEPT_NEW,
        .log_target = t->name,
    };
    t->ssh = onyx_ssh_new(&p, err, sizeof(err));
    explicit_bzero(pw, sizeof(pw));
    if (!t->ssh) {
        fail_session(t, FS_POLL_TIMEOUT, err);
        return;
    }
    t->ss = SS_SSH;
    t->progress_us = fs_monotonic_us();
    target_io(t);
}

static void
do_cycle(struct onyx_target *t, uint64_t id, int64_t deadline)
{
    t->in_cycle = true;
    t->cycle_id = id;
    t->deadline_us = deadline;
    t->result = FS_POLL_OK;
    t->msg[0] = '\0';
    /* A session in the middle of something keeps its own progress clock: a shell that
       stopped answering must not look alive because a new cycle began. */
    if (t->ss == SS_DOWN || t->ss == SS_READY)
        t->progress_us = fs_monotonic_us();
    t->prober.at_us = 0;
    t->cycle_start_real_us = fs_realtime_us();
    t->rtt_min_us = 0;
    t->rounds = 0;
    t->rtt_sum_us = t->gap_sum_us = 0;
    t->rtt_n = t->gap_n = 0;
    t->budget_us = deadline - fs_monotonic_us();
    onyx_samples_clear(&t->samples);
    build_batch1(t);
    if (t->ss == SS_DOWN) {
        int64_t now = fs_monotonic_us();
        if (t->fail_count > 0 && now < t->next_connect_us) {
            char m[448];
            snprintf(m, sizeof(m), "%s (backoff: next connect in %.1f s)", t->last_fail_msg,
                     (double)(t->next_connect_us - now) / 1e6);
            finish_cycle(t, t->last_fail, m);
            return;
        }
        start_connect(t);
        return;
    }
    if (t->ss == SS_READY)
        send_batch(t);
    /* SS_PROBE: the batch follows the probe's answer (process_probe); draining: it follows
       the last owed answer (drain_responses); opening: the ready prompt (process_setup). */
    epoll_update(t);
}

/* What a cycle that ran out of time (or was cancelled) was waiting for. */
static void
slow_msg(const struct onyx_target *t, char *m, size_t len)
{
    if (t->ss == SS_PROBE)
        snprintf(m, len, "a clock probe's answer was still awaited at the end of the cycle");
    else if (t->draining)
        snprintf(m, len, "the shell was still answering the previous cycle (%zu owed)", t->owed);
    else if (t->ss == SS_BUSY && t->done < t->nq)
        snprintf(m, len, "no answer to `%s` in time (the session is kept)", t->q[t->done].text);
    else if (t->ss == SS_DOWN || t->ss == SS_READY)
        snprintf(m, len, "cycle cancelled (the session is kept)");
    else
        snprintf(m, len, "no answer in time while %s (still trying)",
                 t->ss == SS_SSH ? onyx_ssh_phase(t->ssh) : "setting up the CLI session");
}

static void
check_timeouts(struct onyx_drv *d, int64_t now)
{
    for (size_t i = 0; i < d->ntargets; i++) {
        struct onyx_target *t = d->targets[i];
        /* Quiet as seen at the last wait (see polled_us), the session's buffered bytes read. */
        const bool quiet = !t->more_rx && d->polled_us - t->progress_us >= TYPEAHEAD_QUIET_US;
        if (quiet && typeahead_lost(t)) {
            char why[200];
            snprintf(why, sizeof(why),
                     "type-ahead dropped: `%.80s` never answered while the shell sat at its "
                     "prompt",
                     t->draining ? t->owed_cmd : t->q[t->done].text);
            pipelining_off(t, why);
            resync_send(t);
        } else if (quiet && resync_waits(t)) {
            resync_send(t);
        }
        if (t->ss == SS_PROBE && now - t->probe_sent_mono_us >= t->cfg.timeout_us) {
            fail_session(t, FS_POLL_TIMEOUT, "no answer to a clock probe (`show clock`) in time");
            continue;
        }
        /* Lost: nothing at all from a session that owes something, for timeout_us. */
        bool waiting = t->ss != SS_DOWN && t->ss != SS_READY && t->ss != SS_PROBE;
        if (waiting && now - t->progress_us >= t->cfg.timeout_us) {
            char m[200];
            if (t->draining)
                snprintf(m, sizeof(m), "the shell stopped answering (%zu answers owed)", t->owed);
            else if (t->ss == SS_BUSY && t->done < t->nq)
                snprintf(m, sizeof(m), "no answer to `%s` in time", t->q[t->done].text);
            else
                snprintf(m, sizeof(m), "no answer in time while %s",
                         t->ss == SS_SSH ? onyx_ssh_phase(t->ssh) : "setting up the CLI session");
            fail_session(t, FS_POLL_TIMEOUT, m);
            continue;
        }
        if (!t->in_cycle || now < t->deadline_us)
            continue;
        /* Slow: the cycle's budget is spent, the session is kept. */
        char m[220];
        slow_msg(t, m, sizeof(m));
        abandon_cycle(t, FS_POLL_TIMEOUT, m);
    }
}

static int
next_timeout_ms(struct onyx_drv *d, int64_t now)
{
    int64_t best = 1000000;
    for (size_t i = 0; i < d->ntargets; i++) {
        struct onyx_target *t = d->targets[i];
        if (t->more_rx)
            return 0;
        if (t->ss == SS_PROBE && t->probe_sent_mono_us + t->cfg.timeout_us - now < best)
            best = t->probe_sent_mono_us + t->cfg.timeout_us - now;
        if (t->ss != SS_DOWN && t->ss != SS_READY && t->ss != SS_PROBE &&
            t->progress_us + t->cfg.timeout_us - now < best)
            best = t->progress_us + t->cfg.timeout_us - now;
        if (t->in_cycle && t->deadline_us - now < best)
            best = t->deadline_us - now;
        if ((typeahead_lost(t) || resync_waits(t)) &&
            t->progress_us + TYPEAHEAD_QUIET_US - now < best)
            best = t->progress_us + TYPEAHEAD_QUIET_US - now;
    }
    return best <= 0 ? 0 : (int)((best + 999) / 1000);
}

/* ---------------- target lifetime ---------------- */

static void
target_free(struct onyx_target *t)
{
    close_session(t);
    for (size_t i = 0; i < t->nports; i++)
        free(t->ports[i]);
    free(t->ports);
    free(t->rx);
    if (t->tx)
        explicit_bzero(t->tx, t->tx_cap);
    free(t->tx);
    free(t->q);
    onyx_samples_free(&t->samples);
    hcache_free(t);
    onyx_wjh_tally_free(&t->wjh);
    if (t->ports_re_ok)
        regfree(&t->ports_re);
    free(t->acl_order);
    onyx_plan_free(&t->plan);
    fs_onyx_cfg_free(&t->cfg);
    pthread_mutex_destroy(&t->detail_lock);
    free(t->name);
    free(t->address);
    free(t);
}

/* s as the inside of a JSON string: quotes and backslashes escaped, control and non-ASCII
 * bytes as spaces (a device's message may hold anything, not valid UTF-8); cut to fit len. */
static void
json_escape(const char *s, char *out, size_t len)
{
    size_t o = 0;
    for (; *s && o + 3 < len; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            out[o++] = '\\';
        out[o++] = ch < 0x20 || ch >= 0x7f ? ' ' : (char)ch;
    }
    out[o] = '\0';
}

static void
update_detail(struct onyx_target *t)
{
    char dropped[512] = "";
    size_t o = 0;
    for (int k = 0; k < K_COUNT; k++)
        if (t->lacks[k] && o < sizeof(dropped))
            o += (size_t)snprintf(dropped + o, sizeof(dropped) - o, "%s\"%s\"", o ? "," : "",
                                  kind_names[k]);
    char fallbacks[768] = "";
    o = 0;
    for (int k = 0; k < K_COUNT; k++) {
        if (!t->json_off[k] || o >= sizeof(fallbacks))
            continue;
        char why[2 * sizeof(t->json_off_why[k])];
        json_escape(t->json_off_why[k], why, sizeof(why));
        o += (size_t)snprintf(fallbacks + o, sizeof(fallbacks) - o,
                              "%s{\"command\":\"%s\",\"reason\":\"%s\"}", o ? "," : "",
                              kind_names[k], why);
    }
    if (o >= sizeof(fallbacks)) /* cut: keep the JSON valid */
        snprintf(fallbacks, sizeof(fallbacks), "{\"command\":\"(too many)\",\"reason\":\"\"}");
    char layouts[1536] = "";
    o = 0;
    for (int k = 0; k < K_COUNT; k++) {
        if (!t->layout_err[k][0] || o >= sizeof(layouts))
            continue;
        char e[2 * sizeof(t->layout_err[k])], l[2 * sizeof(t->layout_lines[k])];
        char cm[2 * sizeof(t->layout_cmd[k])];
        json_escape(t->layout_cmd[k], cm, sizeof(cm));
        json_escape(t->layout_err[k], e, sizeof(e));
        json_escape(t->layout_lines[k], l, sizeof(l));
        o += (size_t)snprintf(layouts + o, sizeof(layouts) - o,
                              "%s{\"command\":\"%s\",\"error\":\"%s\",\"printed\":\"%s\"}",
                              o ? "," : "", cm, e, l);
    }
    if (o >= sizeof(layouts))
        snprintf(layouts, sizeof(layouts), "{\"command\":\"(too many)\",\"error\":\"\"}");
    char acl_state[2 * sizeof(t->acl_counters)];
    json_escape(t->acl_counters[0]     ? t->acl_counters
                : !t->cfg.n_flow_rules ? "no flow rules"
                : !t->lacks[K_FLOWS]   ? "not read (show telemetry flows gives the rules' counts)"
                                       : "not read yet",
                acl_state, sizeof(acl_state));
    char pipe_off[2 * sizeof(t->pipelining_off)];
    json_escape(t->pipelining_off, pipe_off, sizeof(pipe_off));
    char too_slow[2 * sizeof(t->too_slow)];
    json_escape(t->too_slow, too_slow, sizeof(too_slow));
    char spread_why[2 * sizeof(t->spread_why)];
    json_escape(t->spread_why, spread_why, sizeof(spread_why));
    char d[sizeof(t->detail)];
    snprintf(d, sizeof(d),
             "\"cli_session\":\"%s\",\"cli_release\":\"%s\",\"cli_interfaces_form\":\"%s\","
             "\"cli_text_fallbacks\":[%s],\"cli_layout_mismatches\":[%s],"
             "\"cli_dropped_commands\":[%s],\"cli_ecn_profile\":\"%s\","
             "\"cli_sessions_opened\":%llu,"
             "\"cli_flow_rules\":\"%s\",\"cli_acl_counters\":\"%s\","
             "\"cli_pipelining\":%s,\"cli_pipelining_off\":\"%s\",\"cli_poll_too_slow\":\"%s\","
             "\"cli_poll_spread\":%u,\"cli_poll_spread_why\":\"%s\",\"cli_poll_deferred\":%llu,"
             "\"cli_clock_probes\":%llu,"
             "\"cli_clock_probing\":\"%s\",\"cli_ports_listed_beyond_bound\":%zu,"
             "\"cli_wjh_events\":%llu,\"cli_wjh_events_unplaced\":%llu,"
             "\"cli_lldp\":%s,\"cli_lldp_reads\":%llu,\"cli_lldp_cut\":%llu,"
             "\"cli_lldp_neighbors\":%zu",
             t->ss == SS_DOWN                                               ? "down"
             : (t->ss == SS_READY || t->ss == SS_BUSY || t->ss == SS_PROBE) ? "up"
                                                                            : "opening",
             t->release, t->json_off[K_IFACES] ? "text" : "json", fallbacks, layouts, dropped,
             t->profile, (unsigned long long)t->sessions,
             !t->cfg.apply_flow_rules ? "not applied (apply_flow_rules off)"
             : t->config_in_flight    ? "applying"
             : !t->rules_checked      ? "not checked"
             : t->config_failed       ? "failed, rolled back"
                                      : "in place",
             acl_state, t->one_at_a_time ? "false" : "true", pipe_off, too_slow, t->spread_k,
             spread_why, (unsigned long long)t->deferred_total, (unsigned long long)t->prober.sent,
             t->prober.state ? t->prober.state : FS_CLOCK_PROBER_STATE_NONE, t->ports_listed,
             (unsigned long long)t->wjh_events, (unsigned long long)t->wjh_events_unplaced,
             t->cfg.lldp && !t->lacks[K_LLDP] ? "true" : "false", (unsigned long long)t->lldp_reads,
             (unsigned long long)t->lldp_cut, t->lldp_neighbors);
    pthread_mutex_lock(&t->detail_lock);
    bool changed = strcmp(d, t->detail) != 0;
    if (changed)
        snprintf(t->detail, sizeof(t->detail), "%s", d);
    pthread_mutex_unlock(&t->detail_lock);
    if (changed)
        fs_sink_set_detail(t->sink, d);
}

/* ---------------- the I/O thread ---------------- */

static void
enqueue(struct onyx_drv *d, struct rq *r)
{
    pthread_mutex_lock(&d->qlock);
    r->next = NULL;
    if (d->qtail)
        d->qtail->next = r;
    else
        d->qhead = r;
    d->qtail = r;
    pthread_mutex_unlock(&d->qlock);
    uint64_t one = 1;
    ssize_t w = write(d->evfd, &one, sizeof(one));
    (void)w;
}

static bool
drain_requests(struct onyx_drv *d)
{
    uint64_t v;
    ssize_t rr = read(d->evfd, &v, sizeof(v));
    (void)rr;
    pthread_mutex_lock(&d->qlock);
    struct rq *r = d->qhead;
    d->qhead = d->qtail = NULL;
    pthread_mutex_unlock(&d->qlock);
    bool stop = false;
    while (r) {
        struct rq *next = r->next;
        struct onyx_target *t = r->t;
        switch (r->kind) {
        case RQ_ADD:
            if (d->ntargets == d->captargets) {
                size_t nc = d->captargets ? d->captargets * 2 : 16;
                struct onyx_target **tv = realloc(d->targets, nc * sizeof(*tv));
                if (!tv) {
                    fs_log(FS_LOG_ERROR, SUBSYS, "target %s: out of memory; not polled", t->name);
                    t->removed = true;
                    break;
                }
                d->targets = tv;
                d->captargets = nc;
            }
            d->targets[d->ntargets++] = t;
            break;
        case RQ_CYCLE:
            if (!t->removed)
                do_cycle(t, r->cycle_id, r->deadline_us);
            break;
        case RQ_CANCEL:
            if (!t->removed && t->in_cycle) {
                char m[220];
                slow_msg(t, m, sizeof(m));
                abandon_cycle(t, FS_POLL_TIMEOUT, m);
            }
            break;
        case RQ_REMOVE:
            t->removed = true;
            t->in_cycle = false;
            for (size_t i = 0; i < d->ntargets; i++)
                if (d->targets[i] == t) {
                    d->targets[i] = d->targets[--d->ntargets];
                    break;
                }
            target_free(t);
            pthread_mutex_lock(&d->qlock);
            d->removed_seq++;
            pthread_cond_broadcast(&d->qcond);
            pthread_mutex_unlock(&d->qlock);
            break;
        case RQ_STOP:
            stop = true;
            break;
        }
        free(r);
        r = next;
    }
    return stop;
}

/* Sends the probes that are due; a probe that became late (the thread was busy) is
 * planned again rather than sent with a lopsided cut. */
static void
run_due_probes(struct onyx_drv *d)
{
    for (size_t i = 0; i < d->ntargets; i++) {
        struct onyx_target *t = d->targets[i];
        int64_t now = fs_realtime_us();
        if (t->prober.at_us == 0 || now < t->prober.at_us)
            continue;
        if (t->ss != SS_READY || t->in_cycle) {
            t->prober.at_us = 0;
            continue;
        }
        if (fs_clock_prober_due(&t->prober, now) < 0)
            plan_probe(t);
        else
            send_probe(t);
    }
}

/* Arms the timerfd for the earliest planned probe (µs precision; epoll's timeout is ms). */
static void
arm_probe_timer(struct onyx_drv *d)
{
    int64_t first = 0;
    for (size_t i = 0; i < d->ntargets; i++)
        if (d->targets[i]->prober.at_us > 0 && (first == 0 || d->targets[i]->prober.at_us < first))
            first = d->targets[i]->prober.at_us;
    if (first == d->tfd_armed_us)
        return;
    struct itimerspec its;
    memset(&its, 0, sizeof(its));
    if (first > 0) {
        its.it_value.tv_sec = (time_t)(first / 1000000);
        its.it_value.tv_nsec = (long)(first % 1000000) * 1000;
    }
    if (timerfd_settime(d->tfd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
        d->tfd_armed_us = first;
}

static void *
io_thread(void *arg)
{
    struct onyx_drv *d = arg;
    pthread_setname_np(pthread_self(), "fs-onyx-io"); /* in top and perf */
    struct epoll_event ev[64];
    for (;;) {
        int n = epoll_wait(d->epfd, ev, 64, next_timeout_ms(d, fs_monotonic_us()));
        d->polled_us = fs_monotonic_us();
        bool stop = false;
        for (int i = 0; i < n; i++) {
            if (ev[i].data.ptr == NULL) {
                stop = drain_requests(d) || stop;
                continue;
            }
            if (ev[i].data.ptr == &d->tfd) {
                uint64_t expirations;
                ssize_t rr = read(d->tfd, &expirations, sizeof(expirations));
                (void)rr;
                d->tfd_armed_us = 0; /* one-shot: spent */
            }
        }
        /* Targets may have been removed by the requests: look them up again. */
        for (int i = 0; i < n; i++) {
            struct onyx_target *t = ev[i].data.ptr;
            if (!t || ev[i].data.ptr == &d->tfd)
                continue;
            bool live = false;
            for (size_t k = 0; k < d->ntargets && !live; k++)
                live = d->targets[k] == t;
            if (live && t->ssh)
                target_io(t);
        }
        /* Sessions whose last turn was cut short get another (round robin with the
           events above: the next epoll_wait does not block while one is pending). */
        for (size_t k = 0; k < d->ntargets; k++) {
            struct onyx_target *t = d->targets[k];
            if (t->more_rx && t->ssh)
                target_io(t);
        }
        check_timeouts(d, fs_monotonic_us());
        if (stop)
            return NULL;
        run_due_probes(d);
        arm_probe_timer(d);
    }
}

/* ---------------- entry points ---------------- */

int
fs_onyx_init(void **state, char *errbuf, size_t errlen)
{
    struct onyx_drv *d = calloc(1, sizeof(*d));
    if (!d) {
        snprintf(errbuf, errlen, "out of memory");
        return FS_DRV_ERR;
    }
    d->epfd = epoll_create1(EPOLL_CLOEXEC);
    d->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    d->tfd = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
    pthread_mutex_init(&d->qlock, NULL);
    pthread_cond_init(&d->qcond, NULL);
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = NULL};
    struct epoll_event te = {.events = EPOLLIN, .data.ptr = &d->tfd};
    if (d->epfd < 0 || d->evfd < 0 || d->tfd < 0 ||
        epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->evfd, &e) != 0 ||
        epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->tfd, &te) != 0 ||
        onyx_ssh_global_init(errbuf, errlen) != 0) {
        if (errbuf[0] == '\0')
            snprintf(errbuf, errlen, "epoll/eventfd: %s", strerror(errno));
        goto fail;
    }
    if (pthread_create(&d->thread, NULL, io_thread, d) != 0) {
        snprintf(errbuf, errlen, "cannot start the CLI I/O thread");
        onyx_ssh_global_cleanup();
        goto fail;
    }
    *state = d;
    return FS_DRV_OK;
fail:
    if (d->epfd >= 0)
        close(d->epfd);
    if (d->evfd >= 0)
        close(d->evfd);
    if (d->tfd >= 0)
        close(d->tfd);
    pthread_mutex_destroy(&d->qlock);
    pthread_cond_destroy(&d->qcond);
    free(d);
    return FS_DRV_ERR;
}

void
fs_onyx_shutdown(void *state)
{
    struct onyx_drv *d = state;
    struct rq *r = calloc(1, sizeof(*r));
    if (r) {
        r->kind = RQ_STOP;
        enqueue(d, r);
        pthread_join(d->thread, NULL);
    }
    for (size_t i = 0; i < d->ntargets; i++)
        target_free(d->targets[i]);
    free(d->targets);
    onyx_ssh_global_cleanup();
    close(d->epfd);
    close(d->evfd);
    close(d->tfd);
    pthread_mutex_destroy(&d->qlock);
    pthread_cond_destroy(&d->qcond);
    free(d);
}

static int
target_add(void *state, const char *name, const char *address, const struct fs_onyx_cfg *cfg,
           const struct fs_flow_rule *rules, size_t n_rules, struct fs_sink *sink, void **tstate,
           char *errbuf, size_t errlen)
{
    struct onyx_drv *d = state;
    if (!cfg->username || !address) {
        snprintf(errbuf, errlen, "cli: username and address are required");
        return FS_DRV_ERR;
    }
    if (!cfg->password.file && !cfg->password.env && !cfg->key_file) {
        snprintf(errbuf, errlen, "cli: a password or a key_file is required");
        return FS_DRV_ERR;
    }
    struct onyx_target *t = calloc(1, sizeof(*t));
    if (!t || fs_onyx_cfg_copy(cfg, rules, n_rules, &t->cfg) != 0) {
        free(t);
        snprintf(errbuf, errlen, "out of memory");
        return FS_DRV_ERR;
    }
    if (t->cfg.n_flow_rules) {
        if (!(t->acl_order = calloc(t->cfg.n_flow_rules, sizeof(*t->acl_order)))) {
            fs_onyx_cfg_free(&t->cfg);
            free(t);
            snprintf(errbuf, errlen, "out of memory");
            return FS_DRV_ERR;
        }
        onyx_flow_order(t->cfg.flow_rules, t->cfg.n_flow_rules, t->acl_order);
    }
    if (t->cfg.flow_rule_ports) {
        char anchored[600];
        snprintf(anchored, sizeof(anchored), "^(%s)$", t->cfg.flow_rule_ports);
        /* checked when the configuration was read */
        t->ports_re_ok = regcomp(&t->ports_re, anchored, REG_EXTENDED | REG_NOSUB) == 0;
    }
    if (!t->cfg.known_hosts) {
        const char *home = getenv("HOME");
        char p[1024];
        snprintf(p, sizeof(p), "%s/.ssh/known_hosts", home ? home : "");
        t->cfg.known_hosts = strdup(p);
    }
    if (t->cfg.max_output_bytes == 0)
        t->cfg.max_output_bytes = 16u << 20;
    if (t->cfg.timeout_us <= 0)
        t->cfg.timeout_us = 10000000;
    t->drv = d;
    t->name = strdup(name ? name : address);
    t->address = strdup(address);
    t->sink = sink;
    t->last_uptime = -1;
    t->spread_k = 1;
    pthread_mutex_init(&t->detail_lock, NULL);
    atomic_init(&t->busy, false);
    if (!t->name || !t->address || !t->cfg.known_hosts) {
        target_free(t);
        snprintf(errbuf, errlen, "out of memory");
        return FS_DRV_ERR;
    }
    /* The target list belongs to the I/O thread: it adds the target there. */
    struct rq *r = calloc(1, sizeof(*r));
    if (!r) {
        target_free(t);
        snprintf(errbuf, errlen, "out of memory");
        return FS_DRV_ERR;
    }
    r->kind = RQ_ADD;
    r->t = t;
    enqueue(d, r);
    *tstate = t;
    return FS_DRV_OK;
}

int
fs_onyx_target_add(void *state, const char *name, const char *address,
                   const struct fs_onyx_cfg *cfg, struct fs_sink *sink, void **tstate, char *errbuf,
                   size_t errlen)
{
    return target_add(state, name, address, cfg, cfg->flow_rules, cfg->n_flow_rules, sink, tstate,
                      errbuf, errlen);
}

void
fs_onyx_target_remove(void *state, void *tstate)
{
    struct onyx_drv *d = state;
    struct rq *r = calloc(1, sizeof(*r));
    if (!r)
        return;
    r->kind = RQ_REMOVE;
    r->t = tstate;
    pthread_mutex_lock(&d->qlock);
    uint64_t want = ++d->remove_req_seq;
    pthread_mutex_unlock(&d->qlock);
    enqueue(d, r);
    pthread_mutex_lock(&d->qlock);
    while (d->removed_seq < want)
        pthread_cond_wait(&d->qcond, &d->qlock);
    pthread_mutex_unlock(&d->qlock);
}

int
fs_onyx_cycle_start(void *state, void *tstate, uint64_t cycle_id, int64_t deadline_us)
{
    struct onyx_target *t = tstate;
    bool expected = false;
    if (!atomic_compare_exchange_strong(&t->busy, &expected, true))
        return FS_DRV_BUSY;
    struct rq *r = calloc(1, sizeof(*r));
    if (!r) {
        atomic_store(&t->busy, false);
        return FS_DRV_ERR;
    }
    r->kind = RQ_CYCLE;
    r->t = t;
    r->cycle_id = cycle_id;
    r->deadline_us = deadline_us;
    enqueue(state, r);
    return FS_DRV_OK;
}

void
fs_onyx_cycle_cancel(void *state, void *tstate)
{
    struct rq *r = calloc(1, sizeof(*r));
    if (!r)
        return;
    r->kind = RQ_CANCEL;
    r->t = tstate;
    enqueue(state, r);
}

size_t
fs_onyx_target_describe(void *state, void *tstate, char *buf, size_t len)
{
    (void)state;
    struct onyx_target *t = tstate;
    if (len == 0)
        return 0;
    pthread_mutex_lock(&t->detail_lock);
    int w = snprintf(buf, len, "%s", t->detail);
    pthread_mutex_unlock(&t->detail_lock);
    return w < 0 ? 0 : ((size_t)w < len ? (size_t)w : len - 1);
}

int
fs_onyx_target_plan(void *state, void *tstate, char *buf, size_t len)
{
    (void)state;
    struct onyx_target *t = tstate;
    int rc = -1;
    size_t o = 0;
    if (len == 0)
        return -1;
    buf[0] = '\0';
    pthread_mutex_lock(&t->detail_lock);
    if (t->plan_ready) {
        rc = 0;
        for (size_t i = 0; i < t->plan.n_notes && o < len; i++)
            o += (size_t)snprintf(buf + o, len - o, "# %s\n", t->plan.notes[i]);
        if (t->plan.n > 0 && o < len)
            o += (size_t)snprintf(buf + o, len - o, "configure terminal\n");
        for (size_t i = 0; i < t->plan.n && o < len; i++)
            o += (size_t)snprintf(buf + o, len - o, "%s\n", t->plan.cmds[i]);
        if (t->plan.n > 0 && o < len)
            snprintf(buf + o, len - o, "exit\n");
    }
    pthread_mutex_unlock(&t->detail_lock);
    return rc;
}

void
fs_onyx_set_transcript(void *state, void *tstate, FILE *f)
{
    (void)state;
    struct onyx_target *t = tstate;
    pthread_mutex_lock(&t->detail_lock);
    t->transcript = f;
    pthread_mutex_unlock(&t->detail_lock);
}

/* ---------------- the driver.h vtable ---------------- */

static int
vt_target_add(void *state, const struct fs_target_cfg *tcfg, const void *dcfg, struct fs_sink *sink,
              void **tstate, char *errbuf, size_t errlen)
{
    return target_add(state, tcfg->name, tcfg->address, dcfg, tcfg->flow_rules, tcfg->n_flow_rules,
                      sink, tstate, errbuf, errlen);
}

static void
vt_plan_mode(void *state, void *tstate)
{
    (void)state;
    struct onyx_target *t = tstate;
    /* Before the first cycle: the request queue's lock orders this before the I/O
     * thread's reads of cfg. */
    t->cfg.plan_only = true;
}

static int
vt_plan(void *state, void *tstate, FILE *out, char *errbuf, size_t errlen)
{
    struct onyx_target *t = tstate;
    struct onyx_plan plan = {0};
    size_t len = 64u << 10;
    char *buf = malloc(len);
    int rc = -1;

    if (!buf) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    if (t->cfg.n_flow_rules == 0) {
        fprintf(out, "# %s: no flow_rules configured: nothing to install\n", t->name);
        rc = 0;
    } else if (fs_onyx_target_plan(state, tstate, buf, len) == 0) {
        /* the plan's notes are `# ` lines; anything else is a command */
        bool cmds = false;
        for (const char *l = buf; *l && !cmds; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : "")
            cmds = strncmp(l, "# ", 2) != 0;
        if (cmds)
            fprintf(out, "# %s: against its running configuration\n%s", t->name, buf);
        else
            fprintf(out,
                    "# %s: its running configuration already holds the flow rules: "
                    "nothing to send\n%s",
                    t->name, buf);
        rc = 0;
    } else if (onyx_flow_plan(t->cfg.flow_rules, t->cfg.n_flow_rules, NULL, 0, NULL, 0, &plan,
                              errbuf, errlen) == 0) {
        fprintf(out,
                "# %s: could not read the running configuration; the plan if none of the "
                "project's ACLs exist yet:\n",
                t->name);
        for (size_t i = 0; i < plan.n_notes; i++)
            fprintf(out, "# %s\n", plan.notes[i]);
        fprintf(out, "configure terminal\n");
        for (size_t i = 0; i < plan.n; i++)
            fprintf(out, "%s\n", plan.cmds[i]);
        fprintf(out, "exit\n");
        onyx_plan_free(&plan);
        rc = 1;
    }
    free(buf);
    return rc;
}

const struct fs_driver fs_driver_onyx = {
    .api_version = FS_DRIVER_API_VERSION,
    .block =
        {
            .name = "cli",
            .default_rank = FS_ONYX_DEFAULT_RANK,
            .yang_module = fs_onyx_yang_module,
            .config_build = fs_onyx_config_build,
            .config_free = fs_onyx_config_free,
            .config_equal = fs_onyx_config_equal,
            .config_interval = fs_onyx_config_interval,
            .uses_flow_rules = true,
        },
    .kind = FS_DRIVER_POLL,
    .init = fs_onyx_init,
    .shutdown = fs_onyx_shutdown,
    .target_add = vt_target_add,
    .target_remove = fs_onyx_target_remove,
    .cycle_start = fs_onyx_cycle_start,
    .cycle_cancel = fs_onyx_cycle_cancel,
    .target_transcript = fs_onyx_set_transcript,
    .target_plan_mode = vt_plan_mode,
    .target_plan = vt_plan,
};
