/* `fabricscope host-agent` (see agent.h). */
#include "hostagent/agent.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <microhttpd.h>

#include "analysis/host_events.h"
#include "config/block.h"
#include "hostagent/agent_config.h"
#include "hostagent/capture.h"
#include "hostagent/lldp.h"
#include "hostagent/offset_track.h"
#include "hostagent/runcmd.h"
#include "hostagent/safefile.h"
#include "hostagent/spool.h"
#include "hostagent/tail.h"
#include "importers/client.h"
#include "importers/import_perf.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/log.h"

#define TAIL_READ_MAX (1u << 20) /* bytes of log lines per batch */
/* One thread does everything: a collector that does not answer must not hold the
 * loop (and a capture's start) for long: each request gets collector.timeout (connecting
 * at most CONNECT_TIMEOUT_S of it), and each turn of the loop posts for about as long. */
#define CONNECT_TIMEOUT_S 3L
#define SPOOL_RETRY_MAX_US 10000000
#define LLDPCTL_TIMEOUT_US 10000000 /* lldpctl asks a local daemon: seconds is a hang */

enum cap_state { CAP_IDLE, CAP_ARMED, CAP_RUNNING };

/* What /metrics shows; written by the loop, read by libmicrohttpd's thread. */
struct counters {
    int64_t offset_ns, unc_ns, measured_at_ns; /* measured_at_ns 0: never */
    uint64_t clock_jumps, clock_failures;
    uint64_t posted, stored, duplicates, refused;
    uint64_t spool_bytes, spool_events, spool_dropped_events;
    uint64_t captures, capture_failures, capture_events;
    uint64_t nccl_lines_bad;
    uint64_t commands, command_failures, command_events;
    uint64_t lldp_posts, lldp_failures, lldp_neighbors; /* lldp_neighbors: the last post's */
};

struct agent {
    struct fs_agent_cfg cfg;
    struct fs_imp_client cli;
    struct fs_offset_track clock;
    struct fs_spool spool;
    struct fs_tail tail;
    bool tail_on, down, waiting_reported;
    int64_t next_clock_us, next_tail_us, next_spool_us, next_poll_us, spool_retry_us;
    int64_t turn_end_us; /* this turn of the loop starts no more posting after it */
    /* capture */
    enum cap_state cap;
    int64_t win_start_ns, win_end_ns; /* host clock */
    int64_t last_capture_us;          /* monotonic start of the last capture, 0: none */
    pid_t perf;
    char raw[4096], what[512], last_failure[96];
    char *env_token;         /* FABRICSCOPE_TOKEN, taken out of the environment (owned) */
    bool plain_warned;       /* the token over http:// to another host was said */
    char tail_reported[160]; /* the tail's last error, as logged ("": none) */
    char plan_reported[160]; /* why captures cannot be planned, as last logged ("": they can) */
    int64_t plan_reported_us;
    unsigned capture_seq;
    bool quota_reported;
    /* command */
    struct fs_runcmd cmd;
    int64_t next_cmd_us;
    char cmd_reported[160]; /* the last kind of outcome reported (once each) */
    /* lldp: lldpctl's runs and the neighbour posts */
    struct fs_runcmd lldp;
    int64_t next_lldp_us;
    char lldp_reported[160]; /* as cmd_reported */
    /* metrics */
    pthread_mutex_t mu;
    struct counters c;
    struct MHD_Daemon *mhd;
};

static volatile sig_atomic_t g_stop, g_reload;

static void command_start(struct agent *a, int64_t win_start_ns, int64_t win_end_ns);

static void
on_signal(int sig)
{
    if (sig == SIGHUP)
        g_reload = 1;
    else
        g_stop = 1;
}

static int64_t
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Whether this turn of the loop may start another request of its posting work. */
static bool
turn_left(const struct agent *a)
{
    return fs_monotonic_us() < a->turn_end_us;
}

/* The client's timeouts from cfg: collector.timeout, connecting within 3 s of it. */
static void
set_timeouts(struct fs_imp_client *cli, const struct fs_agent_cfg *cfg)
{
    cli->timeout_s = (long)(cfg->request_timeout_us / 1000000);
    cli->connect_timeout_s =
        cli->timeout_s < CONNECT_TIMEOUT_S ? cli->timeout_s : CONNECT_TIMEOUT_S;
}

static void
sync_spool_counters(struct agent *a)
{
    pthread_mutex_lock(&a->mu);
    a->c.spool_bytes = a->spool.bytes;
    a->c.spool_events = a->spool.events;
    a->c.spool_dropped_events = a->spool.dropped_events;
    pthread_mutex_unlock(&a->mu);
}

static void
collector_down(struct agent *a, const char *why)
{
    if (!a->down)
        fs_log(FS_LOG_WARN, "agent", "collector unreachable, spooling: %s", why);
    a->down = true;
}

static void
collector_up(struct agent *a)
{
    if (a->down)
        fs_log(FS_LOG_INFO, "agent", "collector reachable again (%zu batches spooled)",
               a->spool.files);
    a->down = false;
}

/* 400 and 413 will never be taken: posting them again would block the spool forever. */
static bool
refused_for_good(long status)
{
    return status == 400 || status == 413;
}

static void
count_posted(struct agent *a, const struct fs_imp_post_result *r)
{
    pthread_mutex_lock(&a->mu);
    a->c.posted += r->posted;
    a->c.stored += r->stored;
    a->c.duplicates += r->duplicates;
    pthread_mutex_unlock(&a->mu);
}

static void
count_refused(struct agent *a, size_t n, const char *why)
{
    fs_log(FS_LOG_ERROR, "agent", "the collector refused %zu events for good: %s", n, why);
    pthread_mutex_lock(&a->mu);
    a->c.refused += n;
    pthread_mutex_unlock(&a->mu);
}

/*
 * Posts b with the offset measured nearest capture_ns, or spools it (always while older
 * batches wait in the spool, so the order holds). 0 when every event is with the
 * collector, refused for good or spooled; -1 when the disk refused the spool (the
 * caller keeps its position and tries again).
 */
static int
deliver(struct agent *a, const struct fs_imp_batch *b, int64_t capture_ns)
{
    struct fs_agent_meas m;
    struct fs_buf body;
    char err[600];
    int rc = 0;
    if (b->n == 0)
        return 0;
    if (!fs_offset_track_at(&a->clock, capture_ns, &m)) {
        /* Once: they wait in their files (or perf's output) until the collector answers. */
        if (!a->waiting_reported)
            fs_log(FS_LOG_WARN, "agent", "no clock offset measured yet: %zu events wait", b->n);
        a->waiting_reported = true;
        return -1;
    }
    fs_buf_init(&body, FS_HOST_EVENTS_MAX_BODY);
    for (size_t from = 0; from < b->n && rc == 0; from += FS_IMP_BATCH) {
        size_t to = from + FS_IMP_BATCH < b->n ? from + FS_IMP_BATCH : b->n;
        fs_buf_reset(&body);
        if (fs_imp_body(b, from, to, m.offset_ns, m.unc_ns, &body) != 0) {
            count_refused(a, to - from, "body larger than the collector takes");
            continue;
        }
        if (a->spool.files == 0) {
            long status;
            struct fs_imp_post_result r;
            if (fs_imp_client_post_body(&a->cli, body.data, body.len, to - from, &status, &r, err,
                                        sizeof err) == 0 &&
                status >= 200 && status <= 299) {
                collector_up(a);
                count_posted(a, &r);
                continue;
            }
            if (status && refused_for_good(status)) {
                count_refused(a, to - from, err);
                continue;
            }
            collector_down(a, err);
        }
        if (fs_spool_put(&a->spool, body.data, body.len, to - from, err, sizeof err) != 0) {
            fs_log(FS_LOG_ERROR, "agent", "%s", err);
            rc = -1;
        }
    }
    fs_buf_free(&body);
    sync_spool_counters(a);
    return rc;
}

/* Posts spooled batches, oldest first, until the spool is empty, the collector fails or
 * the turn is over (the rest next turn: a slow collector must not hold the clock and the
 * captures for the whole spool). */
static void
flush_spool(struct agent *a)
{
    char name[300], err[600];
    while (a->spool.files && !g_stop && turn_left(a)) {
        char *body;
        size_t len, n;
        int r = fs_spool_oldest(&a->spool, &body, &len, &n, name, sizeof name, err, sizeof err);
        if (r <= 0) {
            if (r < 0)
                fs_log(FS_LOG_ERROR, "agent", "%s", err);
            break;
        }
        long status;
        struct fs_imp_post_result pr;
        int prc = fs_imp_client_post_body(&a->cli, body, len, n, &status, &pr, err, sizeof err);
        free(body);
        bool ok = prc == 0 && status >= 200 && status <= 299;
        if (!ok && !(prc == 0 && refused_for_good(status))) {
            collector_down(a, err);
            a->spool_retry_us = a->spool_retry_us ? a->spool_retry_us * 2 : 1000000;
            if (a->spool_retry_us > SPOOL_RETRY_MAX_US)
                a->spool_retry_us = SPOOL_RETRY_MAX_US;
            a->next_spool_us = fs_monotonic_us() + a->spool_retry_us;
            break;
        }
        if (ok) {
            collector_up(a);
            count_posted(a, &pr);
        } else {
            count_refused(a, n, err);
        }
        a->spool_retry_us = 0;
        if (fs_spool_remove(&a->spool, name, err, sizeof err) != 0) {
            fs_log(FS_LOG_ERROR, "agent", "%s", err);
            break;
        }
        if (a->spool.files == 0)
            fs_log(FS_LOG_INFO, "agent", "spool posted: empty again");
    }
    sync_spool_counters(a);
}

static int
measure(struct agent *a)
{
    char err[600];
    struct fs_agent_meas m;
    bool jumped;
    struct fs_agent_meas prev;
    bool had = fs_offset_track_last(&a->clock, &prev);
    if (fs_imp_client_offset_rounds(&a->cli, a->cfg.clock_rounds, &m.offset_ns, &m.unc_ns, err,
                                    sizeof err) != 0) {
        collector_down(a, err);
        pthread_mutex_lock(&a->mu);
        a->c.clock_failures++;
        pthread_mutex_unlock(&a->mu);
        return -1;
    }
    collector_up(a);
    m.at_ns = now_ns();
    fs_offset_track_add(&a->clock, &m, &jumped);
    if (!had)
        fs_log(FS_LOG_INFO, "agent", "clock offset %+.3f ms (± %.3f ms) from the collector's",
               (double)m.offset_ns / 1e6, (double)m.unc_ns / 1e6);
    else if (jumped)
        fs_log(FS_LOG_WARN, "agent",
               "clock offset jumped from %+.3f ms (± %.3f) to %+.3f ms (± %.3f): the host's or "
               "the collector's clock was stepped",
               (double)prev.offset_ns / 1e6, (double)prev.unc_ns / 1e6, (double)m.offset_ns / 1e6,
               (double)m.unc_ns / 1e6);
    pthread_mutex_lock(&a->mu);
    a->c.offset_ns = m.offset_ns;
    a->c.unc_ns = m.unc_ns;
    a->c.measured_at_ns = m.at_ns;
    a->c.clock_jumps += jumped;
    pthread_mutex_unlock(&a->mu);
    return 0;
}

/* Tails until no file has new lines, a batch could not be placed or the turn is over
 * (then it goes on next turn). */
static void
tail_step(struct agent *a)
{
    char err[600];
    for (int i = 0; i < 64 && !g_stop; i++) {
        if (!turn_left(a)) {
            a->next_tail_us = 0;
            return;
        }
        struct fs_imp_batch b = {0};
        struct fs_tail_pos pos;
        int r = fs_tail_next(&a->tail, a->cfg.host, TAIL_READ_MAX, &b, &pos, err, sizeof err);
        int64_t end = 0;
        for (size_t k = 0; k < b.n; k++)
            if (b.ev[k].end_ns > end)
                end = b.ev[k].end_ns;
        bool placed = r == 1 && deliver(a, &b, end ? end : now_ns()) == 0;
        fs_imp_batch_free(&b);
        pthread_mutex_lock(&a->mu);
        a->c.nccl_lines_bad = a->tail.lines_bad;
        pthread_mutex_unlock(&a->mu);
        /* A directory that is not there yet (no job has run) is said once, and again
         * when it can be read: not every scan_interval. */
        if (r < 0 && strncmp(a->tail_reported, err, sizeof a->tail_reported - 1) != 0) {
            size_t l = strnlen(err, sizeof a->tail_reported - 1);
            memcpy(a->tail_reported, err, l);
            a->tail_reported[l] = '\0';
            fs_log(FS_LOG_WARN, "agent", "nccl_inspector: %s (reported once, until it changes)",
                   err);
        } else if (r < 0) {
            fs_log(FS_LOG_DEBUG, "agent", "nccl_inspector: %s", err);
        } else if (a->tail_reported[0]) {
            fs_log(FS_LOG_INFO, "agent", "nccl_inspector: %s is read again", a->cfg.nccl_dir);
            a->tail_reported[0] = '\0';
        }
        if (!placed)
            return;
        if (fs_tail_commit(&a->tail, &pos, err, sizeof err) != 0) {
            fs_log(FS_LOG_ERROR, "agent", "%s", err);
            return;
        }
    }
}

/* Bytes the raw capture files of state_dir take. */
static uint64_t
raw_bytes(const struct agent *a)
{
    DIR *d = opendir(a->cfg.state_dir);
    uint64_t sum = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        struct stat st;
        char p[4400];
        if (strncmp(de->d_name, "capture-", 8) != 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", a->cfg.state_dir, de->d_name);
        if (lstat(p, &st) == 0 && S_ISREG(st.st_mode))
            sum += (uint64_t)st.st_size;
    }
    if (d)
        closedir(d);
    return sum;
}

static void
report_capture_failure(struct agent *a, const char *err)
{
    pthread_mutex_lock(&a->mu);
    a->c.capture_failures++;
    pthread_mutex_unlock(&a->mu);
    /* Once per kind of failure: the same refusal every min_interval is no news. */
    if (strncmp(a->last_failure, err, sizeof a->last_failure - 1) == 0) {
        fs_log(FS_LOG_DEBUG, "agent", "%s", err);
        return;
    }
    size_t l = strnlen(err, sizeof a->last_failure - 1);
    memcpy(a->last_failure, err, l);
    a->last_failure[l] = '\0';
    fs_log(FS_LOG_ERROR, "agent", "%s (reported once; the agent keeps running)", err);
}

/* The raw quota left for perf record's --max-size: 7/8 of what capture.raw_quota_bytes
 * leaves, as perf's own headers and build ids come on top of its limit, less what it
 * drains from every CPU's buffer once past it (fs_capture_overshoot). 0: not enough for
 * a capture (less than FS_CAPTURE_MIN_RAW). */
#define FS_CAPTURE_MIN_RAW (1ull << 20)
static uint64_t
raw_room(const struct agent *a)
{
    uint64_t used = raw_bytes(a);
    uint64_t left = used < a->cfg.raw_quota_bytes ? a->cfg.raw_quota_bytes - used : 0;
    left -= left / 8;
    uint64_t over = fs_capture_overshoot();
    left = left > over ? left - over : 0;
    return left >= FS_CAPTURE_MIN_RAW ? left : 0;
}

/* Starts perf now for the rest of the window. 0 or -1 (reported). */
static int
capture_begin(struct agent *a)
{
    char err[600];
    int64_t dur_us = (a->win_end_ns - now_ns()) / 1000;
    uint64_t room = raw_room(a);
    if (dur_us < 100000)
        dur_us = 100000;
    if (dur_us > a->cfg.max_length_us)
        dur_us = a->cfg.max_length_us;
    if (!room) {
        snprintf(err, sizeof err,
                 "raw captures in %s leave less than 1MiB of capture.raw_quota_bytes: not "
                 "captured",
                 a->cfg.state_dir);
        report_capture_failure(a, err);
        return -1;
    }
    snprintf(a->raw, sizeof a->raw, "%s/capture-%" PRId64 "-%u.data", a->cfg.state_dir,
             a->win_start_ns / 1000000000, a->capture_seq++);
    a->perf = fs_capture_start(&a->cfg, a->raw, dur_us, room, err, sizeof err);
    if (a->perf < 0) {
        report_capture_failure(a, err);
        return -1;
    }
    a->last_capture_us = fs_monotonic_us();
    fs_capture_hook(&a->cfg, "start", a->win_start_ns, a->win_end_ns);
    fs_log(FS_LOG_INFO, "agent",
           "capture started: perf record for %.1f s into %s (at most %" PRIu64 " KiB)",
           (double)dur_us / 1e6, a->raw, room >> 10);
    return 0;
}

/* A piece of the capture's events: posted or spooled with the offset nearest the
 * window's middle. */
static int
capture_piece(void *ctx, struct fs_imp_batch *b, char *err, size_t errlen)
{
    struct agent *a = ctx;
    if (deliver(a, b, a->win_start_ns / 2 + a->win_end_ns / 2) == 0)
        return 0;
    snprintf(err, errlen,
             "capture %s: %zu events not placed (no clock offset yet, or the spool refused "
             "them)",
             a->raw, b->n);
    return -1;
}

/* perf exited with ws: import, post, clean up. 0 when events were placed. */
static int
capture_end(struct agent *a, int ws, bool interrupted)
{
    char err[800], log[4200];
    size_t n = 0;
    int rc = -1;
    fs_capture_hook(&a->cfg, "end", a->win_start_ns, a->win_end_ns);
    if (fs_capture_import(&a->cfg, a->raw, ws, interrupted, capture_piece, a, &n, err,
                          sizeof err) != 0) {
        report_capture_failure(a, err);
    } else {
        fs_log(FS_LOG_INFO, "agent", "capture %s: %zu events placed", a->raw, n);
        a->last_failure[0] = '\0';
        rc = 0;
    }
    /* Placed pieces count, whatever became of the rest. */
    pthread_mutex_lock(&a->mu);
    a->c.captures += rc == 0;
    a->c.capture_events += n;
    pthread_mutex_unlock(&a->mu);
    snprintf(log, sizeof log, "%s.log", a->raw);
    if (!a->cfg.keep_raw || rc != 0) {
        unlink(a->raw);
        unlink(log);
    }
    a->perf = 0;
    return rc;
}

/* Captures cannot be planned (why): logged when the reason changes, and again every
 * PLAN_REPORT_US while it lasts; planned again is logged once. */
#define PLAN_REPORT_US (600LL * 1000000)
static void
plan_failed(struct agent *a, const char *why)
{
    int64_t mono = fs_monotonic_us();
    if (strncmp(a->plan_reported, why, sizeof a->plan_reported - 1) == 0 &&
        mono < a->plan_reported_us + PLAN_REPORT_US) {
        fs_log(FS_LOG_DEBUG, "agent", "captures cannot be planned: %s", why);
        return;
    }
    snprintf(a->plan_reported, sizeof a->plan_reported, "%s", why);
    a->plan_reported_us = mono;
    fs_log(FS_LOG_WARN, "agent",
           "captures cannot be planned: %s (reported again in %lld min while it lasts)", why,
           (long long)(PLAN_REPORT_US / 60000000));
}

static void
plan_ok(struct agent *a)
{
    if (a->plan_reported[0])
        fs_log(FS_LOG_INFO, "agent", "captures can be planned again");
    a->plan_reported[0] = '\0';
}

/* Polls the collector's predictions and arms a window around the next one; while a
 * window is armed, a newer prediction moves it and a withdrawn one disarms it (an
 * unreachable collector leaves it armed). */
static void
capture_poll(struct agent *a)
{
    struct fs_buf resp;
    struct fs_agent_meas m;
    char err[600], why[700];
    long status = 0;
    int64_t next = 0, now = now_ns();
    if (!fs_offset_track_at(&a->clock, now, &m)) {
        plan_failed(a, "no clock offset measured yet");
        return;
    }
    /* Bounded: json-c holds a parsed answer in many times its size. */
    fs_buf_init(&resp, FS_CAPTURE_ANSWER_MAX);
    int grc = fs_imp_client_get(&a->cli, "/api/v1/incidents", &resp, &status, err, sizeof err);
    if (resp.overflow) {
        /* Every one: a collector that answers this is broken or hostile. */
        fs_log(FS_LOG_WARN, "agent",
               "GET /api/v1/incidents: answer larger than %u KiB refused unread",
               FS_CAPTURE_ANSWER_MAX >> 10);
        plan_failed(a, "the answer of GET /api/v1/incidents is too large");
        goto out;
    }
    if (grc != 0) {
        plan_failed(a, err);
        goto out;
    }
    if (status != 200) {
        snprintf(why, sizeof why, "GET /api/v1/incidents: HTTP %ld%s", status,
                 status == 401 || status == 403
                     ? " (the collector's http.bearer_token_file: give the agent that token in "
                       "collector.token_file)"
                     : "");
        plan_failed(a, why);
        goto out;
    }
    /* Windows on the host's clock: collector time + offset (host minus collector). */
    int64_t coll_now = now - m.offset_ns;
    char what[sizeof a->what];
    int r = fs_capture_pick(resp.data ? resp.data : "", &a->cfg, coll_now, &next, what, sizeof what,
                            err, sizeof err);
    if (r < 0 || (r == 0 && err[0])) {
        plan_failed(a, err);
    } else {
        if (err[0]) /* another group's refused time, this one is good */
            fs_log(FS_LOG_DEBUG, "agent", "%s", err);
        plan_ok(a);
    }
    if (r == 0 && a->cap == CAP_ARMED) {
        fs_log(FS_LOG_INFO, "agent", "capture disarmed: the incident is no longer predicted");
        a->cap = CAP_IDLE;
    }
    if (r != 1)
        goto out;
    int64_t start = next + m.offset_ns - a->cfg.lead_us * 1000;
    int64_t end = next + m.offset_ns + a->cfg.length_us * 1000;
    if (end - start > a->cfg.max_length_us * 1000)
        end = start + a->cfg.max_length_us * 1000;
    int64_t wait_us = (start - now) / 1000;
    if (a->last_capture_us && fs_monotonic_us() + (wait_us > 0 ? wait_us : 0) - a->last_capture_us <
                                  a->cfg.min_interval_us) {
        fs_log(FS_LOG_DEBUG, "agent", "next incident within capture.min_interval: not captured");
        goto out;
    }
    if (!raw_room(a)) {
        if (!a->quota_reported)
            fs_log(FS_LOG_WARN, "agent",
                   "raw captures in %s leave less than 1MiB of capture.raw_quota_bytes: no "
                   "capture until some are removed",
                   a->cfg.state_dir);
        a->quota_reported = true;
        goto out;
    }
    a->quota_reported = false;
    /* Polled again while armed: the same window (the offset moves it by µs) is no news. */
    bool moved = a->cap != CAP_ARMED || llabs(start - a->win_start_ns) >= 1000000000;
    bool rearmed = a->cap == CAP_ARMED;
    a->win_start_ns = start;
    a->win_end_ns = end;
    a->cap = CAP_ARMED;
    snprintf(a->what, sizeof a->what, "%s", what);
    if (moved)
        fs_log(FS_LOG_INFO, "agent", "capture %s: %.1f s from now for %.1f s (%s)",
               rearmed ? "re-armed" : "armed", (double)wait_us / 1e6, (double)(end - start) / 1e9,
               a->what);
out:
    fs_buf_free(&resp);
}

static void
capture_step(struct agent *a)
{
    int64_t mono = fs_monotonic_us();
    /* Armed too: a prediction can move or go, and the window must follow it. */
    if (a->cap != CAP_RUNNING && mono >= a->next_poll_us) {
        a->next_poll_us = mono + a->cfg.poll_us;
        capture_poll(a);
    }
    if (a->cap == CAP_ARMED && now_ns() >= a->win_start_ns) {
        if (a->cfg.cmd_argv && a->cfg.cmd_at_capture)
            command_start(a, a->win_start_ns, a->win_end_ns);
        a->cap = capture_begin(a) == 0 ? CAP_RUNNING : CAP_IDLE;
    }
    if (a->cap == CAP_RUNNING) {
        int ws;
        pid_t p = waitpid(a->perf, &ws, WNOHANG);
        if (p == a->perf || (p < 0 && errno == ECHILD)) {
            (void)capture_end(a, p == a->perf ? ws : 0, false);
            a->cap = CAP_IDLE;
            a->next_poll_us = mono;
        }
    }
}

/* ---- the configured command ---- */

/* Once per kind of outcome (how): the same failure every interval is no news. */
static void
report_command(struct agent *a, const char *how, const char *detail, bool error)
{
    if (strcmp(a->cmd_reported, how) == 0) {
        fs_log(FS_LOG_DEBUG, "agent", "command %s: %s", how, detail);
        return;
    }
    snprintf(a->cmd_reported, sizeof a->cmd_reported, "%s", how);
    fs_log(error ? FS_LOG_ERROR : FS_LOG_WARN, "agent",
           "command %s %s: %s (reported once; the agent keeps running)", a->cfg.cmd_argv[0], how,
           detail[0] ? detail : "(nothing on its stderr)");
}

static void
command_start(struct agent *a, int64_t win_start_ns, int64_t win_end_ns)
{
    char err[300];
    if (fs_runcmd_running(&a->cmd)) {
        report_command(a, "still running", "this run is skipped", false);
        return;
    }
    if (fs_runcmd_start(&a->cmd, a->cfg.cmd_argv, a->cfg.cmd_max_output, win_start_ns, win_end_ns,
                        err, sizeof err) != 0)
        report_command(a, "not started", err, true);
}

/* The run is over: how it ended (reported), its output imported and posted with the
 * offset measured nearest the middle of the run. */
static void
command_end(struct agent *a)
{
    struct fs_runcmd *r = &a->cmd;
    struct fs_imp_batch b = {0};
    char how[160], why[300], err[1200];
    const char *text = r->out.data ? r->out.data : "";
    size_t len = r->out.len, skipped = 0;
    bool failed = !r->stopped &&
                  (r->timed_out || r->cut || !WIFEXITED(r->status) || WEXITSTATUS(r->status) != 0);
    bool placed = false;
    for (size_t i = 0; i < r->err_len; i++)
        if (r->err_text[i] == '\n' || r->err_text[i] == '\t')
            r->err_text[i] = ' ';
    while (r->err_len && r->err_text[r->err_len - 1] == ' ')
        r->err_text[--r->err_len] = '\0';
    fs_runcmd_describe(r, how, sizeof how);
    snprintf(err, sizeof err, "stderr: %s", r->err_len ? r->err_text : "(empty)");
    if (r->stopped)
        fs_log(FS_LOG_INFO, "agent", "command %s %s", a->cfg.cmd_argv[0], how);
    else if (failed || r->err_len)
        report_command(a, how, err, failed);
    else
        a->cmd_reported[0] = '\0';
    if (r->cut) /* its complete lines only */
        while (len && text[len - 1] != '\n')
            len--;
    if (len && memchr(text, '\n', len)) {
        /* Without perf script's "# reference time" header, the samples are on this host's
         * CLOCK_MONOTONIC (perf -k mono; perf's default clock on the kernels seen). */
        struct fs_perf_ref ref = {0};
        if (!memmem(text, len, "# reference time:", 17)) {
            struct timespec rt, mt;
            clock_gettime(CLOCK_REALTIME, &rt);
            clock_gettime(CLOCK_MONOTONIC, &mt);
            ref.known = true;
            ref.tod_ns = (int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec;
            ref.clock_ns = (int64_t)mt.tv_sec * 1000000000 + mt.tv_nsec;
        }
        if (fs_import_perf_read(text, len, a->cfg.host, &ref, &b, &skipped, why, sizeof why) != 0) {
            failed = true;
            report_command(a, "output not imported", why, true);
        } else if (deliver(a, &b, r->start_ns / 2 + r->end_ns / 2) != 0) {
            failed = true;
            fs_log(FS_LOG_WARN, "agent",
                   "command: %zu events not placed (no clock offset yet, "
                   "or the spool refused them)",
                   b.n);
        } else {
            placed = true;
        }
    }
    if (placed || len == 0)
        fs_log(FS_LOG_DEBUG, "agent", "command %s %s: %zu events placed", a->cfg.cmd_argv[0], how,
               b.n);
    pthread_mutex_lock(&a->mu);
    a->c.commands++;
    a->c.command_failures += failed;
    a->c.command_events += placed ? b.n : 0;
    pthread_mutex_unlock(&a->mu);
    fs_imp_batch_free(&b);
}

/* ---- LLDP neighbours ---- */

/* Once per kind of problem, as report_command; a success clears it (the next failure is
 * news again). */
static void
report_lldp(struct agent *a, const char *how, const char *detail)
{
    pthread_mutex_lock(&a->mu);
    a->c.lldp_failures++;
    pthread_mutex_unlock(&a->mu);
    if (strcmp(a->lldp_reported, how) == 0) {
        fs_log(FS_LOG_DEBUG, "agent", "lldp: %s: %s", how, detail);
        return;
    }
    snprintf(a->lldp_reported, sizeof a->lldp_reported, "%s", how);
    fs_log(FS_LOG_WARN, "agent",
           "lldp: %s: %s (reported once; no neighbours posted until it works)", how, detail);
}

static void
lldp_start(struct agent *a)
{
    char err[300];
    char *argv[] = {a->cfg.lldpctl, "-f", "json", NULL, NULL, NULL};
    if (a->cfg.lldp_socket) {
        argv[3] = "-u";
        argv[4] = a->cfg.lldp_socket;
    }
    if (fs_runcmd_start(&a->lldp, argv, FS_AGENT_LLDP_MAX_BYTES, 0, 0, err, sizeof err) != 0)
        report_lldp(a, "lldpctl not started", err);
}

/* lldpctl is over: its neighbours parsed and posted as this host's whole table. A failed
 * run posts nothing: the collector keeps what it has until its hold runs out. */
static void
lldp_end(struct agent *a)
{
    struct fs_runcmd *r = &a->lldp;
    struct fs_agent_lldp_nbr *v = NULL;
    char how[160], err[1200];
    char *body = NULL;
    size_t n = 0, dropped = 0, len = 0;
    if (r->stopped)
        goto out;
    if (r->timed_out || r->cut || !WIFEXITED(r->status) || WEXITSTATUS(r->status) != 0) {
        fs_runcmd_describe(r, how, sizeof how);
        for (size_t i = 0; i < r->err_len; i++)
            if (r->err_text[i] == '\n' || r->err_text[i] == '\t')
                r->err_text[i] = ' ';
        snprintf(err, sizeof err, "stderr: %s", r->err_len ? r->err_text : "(empty)");
        report_lldp(a, how, err);
        goto out;
    }
    v = calloc(FS_HOST_EVENTS_MAX_NEIGHBORS, sizeof *v);
    if (!v) {
        report_lldp(a, "out of memory", "");
        goto out;
    }
    if (fs_agent_lldp_parse(r->out.data ? r->out.data : "", r->out.len, v,
                            FS_HOST_EVENTS_MAX_NEIGHBORS, &n, &dropped, err, sizeof err) != 0) {
        report_lldp(a, "output not read", err);
        goto out;
    }
    if (dropped)
        fs_log(FS_LOG_DEBUG, "agent", "lldp: %zu neighbour(s) left out (unnamed or beyond %d)",
               dropped, FS_HOST_EVENTS_MAX_NEIGHBORS);
    /* The collector holds them three posts' time: the interval in whole seconds, up. */
    int64_t iv_s = (a->cfg.lldp_interval_us + 999999) / 1000000;
    if (fs_agent_lldp_body(a->cfg.host, iv_s, v, n, &body, &len, err, sizeof err) != 0) {
        report_lldp(a, "body not built", err);
        goto out;
    }
    long status = 0;
    struct fs_imp_post_result pr;
    if (fs_imp_client_post_body(&a->cli, body, len, 0, &status, &pr, err, sizeof err) != 0 ||
        status < 200 || status > 299) {
        report_lldp(a, status ? "post refused" : "collector unreachable", err);
        goto out;
    }
    if (a->lldp_reported[0])
        fs_log(FS_LOG_INFO, "agent", "lldp: neighbours posted again (%zu)", n);
    a->lldp_reported[0] = '\0';
    pthread_mutex_lock(&a->mu);
    a->c.lldp_posts++;
    a->c.lldp_neighbors = n;
    pthread_mutex_unlock(&a->mu);
out:
    free(body);
    free(v);
}

/* ---- /metrics ---- */

static enum MHD_Result
serve(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
      const char *version, const char *data, size_t *data_len, void **req)
{
    struct agent *a = cls;
    (void)version;
    (void)data;
    (void)data_len;
    (void)req;
    struct fs_buf b;
    fs_buf_init(&b, 1 << 20);
    unsigned code = 200;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        code = 405;
        fs_buf_puts(&b, "method not allowed\n");
    } else if (strcmp(url, "/metrics") != 0) {
        code = 404;
        fs_buf_puts(&b, "not found: the agent serves /metrics only\n");
    } else {
        pthread_mutex_lock(&a->mu);
        struct counters c = a->c;
        pthread_mutex_unlock(&a->mu);
#define G(name, help, fmt, v)                                                                      \
    fs_buf_printf(&b,                                                                              \
                  "# HELP fabricscope_host_agent_" name " " help "\n"                              \
                  "# TYPE fabricscope_host_agent_" name " gauge\n"                                 \
                  "fabricscope_host_agent_" name " " fmt "\n",                                     \
                  v)
#define C(name, help, v)                                                                           \
    fs_buf_printf(&b,                                                                              \
                  "# HELP fabricscope_host_agent_" name " " help "\n"                              \
                  "# TYPE fabricscope_host_agent_" name " counter\n"                               \
                  "fabricscope_host_agent_" name " %" PRIu64 "\n",                                 \
                  v)
        if (c.measured_at_ns) {
            G("clock_offset_seconds", "This host's clock minus the collector's (last burst).",
              "%.9f", (double)c.offset_ns / 1e9);
            G("clock_uncertainty_seconds", "Uncertainty of the offset.", "%.9f",
              (double)c.unc_ns / 1e9);
            G("clock_age_seconds", "Time since the offset was measured.", "%.3f",
              (double)(now_ns() - c.measured_at_ns) / 1e9);
        }
        C("clock_jumps_total", "Offset changes larger than both uncertainties.", c.clock_jumps);
        C("clock_failures_total", "Offset bursts that failed.", c.clock_failures);
        C("events_posted_total", "Events the collector accepted.", c.posted);
        C("events_duplicates_total", "Of them, held by the collector already.", c.duplicates);
        C("events_refused_total", "Events the collector refused for good (400, 413).", c.refused);
        G("spool_bytes", "Bytes of batches waiting in the spool.", "%" PRIu64, c.spool_bytes);
        G("spool_events", "Events waiting in the spool.", "%" PRIu64, c.spool_events);
        C("spool_dropped_events_total", "Events dropped from the full spool, oldest first.",
          c.spool_dropped_events);
        C("captures_total", "perf captures imported and placed.", c.captures);
        C("capture_failures_total", "perf captures that failed.", c.capture_failures);
        C("capture_events_total", "Events of the perf captures.", c.capture_events);
        C("nccl_lines_bad_total", "NCCL Inspector lines that were not JSON (skipped).",
          c.nccl_lines_bad);
        C("commands_total", "Runs of the configured command that ended.", c.commands);
        C("command_failures_total",
          "Of them, runs that failed (exit status, timeout, output bound, not imported).",
          c.command_failures);
        C("command_events_total", "Events of the command's output placed.", c.command_events);
        C("lldp_posts_total", "Posts of this host's LLDP neighbours the collector accepted.",
          c.lldp_posts);
        C("lldp_failures_total",
          "lldpctl runs that failed or were not read, and neighbour posts not accepted.",
          c.lldp_failures);
        G("lldp_neighbors", "Neighbours in the last accepted post.", "%" PRIu64, c.lldp_neighbors);
#undef G
#undef C
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(b.len, b.data ? b.data : (void *)"", MHD_RESPMEM_MUST_COPY);
    fs_buf_free(&b);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type",
                            code == 200 ? "text/plain; version=0.0.4" : "text/plain");
    enum MHD_Result ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

/* Serves /metrics as cfg's metrics.listen says into *mhd. 0 or -1 with err. */
static int
metrics_start(struct agent *a, const struct fs_agent_cfg *cfg, struct MHD_Daemon **mhd, char *err,
              size_t errlen)
{
    const char *host = cfg->metrics_host;
    unsigned port = cfg->metrics_port;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD;
    if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
    } else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        flags |= MHD_USE_IPv6;
    } else {
        snprintf(err, errlen, "metrics.listen: %s is not an IP address", host);
        return -1;
    }
    *mhd = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, serve, a, MHD_OPTION_SOCK_ADDR,
                            (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT, 16u,
                            MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    if (!*mhd) {
        snprintf(err, errlen, "metrics.listen: cannot listen on %s", cfg->metrics_listen);
        return -1;
    }
    return 0;
}

/* ---- the subcommand ---- */

/* What start-up refuses of a valid file (the token, state_dir's owner and mode), checked
 * without creating anything, err naming the key: --check-config and start-up both refuse
 * it with the exit code of a bad file, 2 (the unit does not restart on it; its
 * ExecStartPre and reload fail on it). 0 or -1 with err. */
static int
check_startup(const struct agent *a, char *err, size_t errlen)
{
    struct fs_imp_client cli;
    char why[700];
    if (fs_imp_client_open_token(&cli, a->cfg.url, a->cfg.token_file, a->env_token, why,
                                 sizeof why) != 0) {
        snprintf(err, errlen, "%s%s", a->cfg.token_file ? "collector.token_file: " : "", why);
        return -1;
    }
    fs_imp_client_close(&cli);
    if (fs_agent_private_dir(a->cfg.state_dir, false, why, sizeof why) != 0) {
        snprintf(err, errlen, "state_dir: %s", why);
        return -1;
    }
    char spool[4200];
    snprintf(spool, sizeof spool, "%s/spool", a->cfg.state_dir);
    if (fs_agent_private_dir(spool, false, why, sizeof why) != 0) {
        snprintf(err, errlen, "state_dir: %s", why);
        return -1;
    }
    return 0;
}

/* A token sent in clear to another host can be read on the way: said once. */
static void
warn_plain_http(struct agent *a, const struct fs_imp_client *cli)
{
    if (a->plain_warned || !cli->auth_header || strncmp(cli->base_url, "http://", 7) != 0)
        return;
    CURLU *u = curl_url();
    char *host = NULL;
    if (!u || curl_url_set(u, CURLUPART_URL, cli->base_url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
        curl_url_cleanup(u);
        return;
    }
    struct in_addr v4;
    bool loopback = strcmp(host, "localhost") == 0 || strcmp(host, "[::1]") == 0 ||
                    (inet_pton(AF_INET, host, &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127);
    if (!loopback) {
        fs_log(FS_LOG_WARN, "agent",
               "the bearer token is sent over http:// to %s: anyone on the path can read it "
               "(use https:// for a collector on another host)",
               host);
        a->plain_warned = true;
    }
    curl_free(host);
    curl_url_cleanup(u);
}

static int
agent_open(struct agent *a, char *err, size_t errlen)
{
    char dir[4200];
    char why[700];
    if (fs_agent_private_dir(a->cfg.state_dir, true, why, sizeof why) != 0) {
        snprintf(err, errlen, "state_dir: %s", why);
        return -1;
    }
    if (fs_imp_client_open_token(&a->cli, a->cfg.url, a->cfg.token_file, a->env_token, err,
                                 errlen) != 0)
        return -1;
    warn_plain_http(a, &a->cli);
    set_timeouts(&a->cli, &a->cfg);
    snprintf(dir, sizeof dir, "%s/spool", a->cfg.state_dir);
    if (fs_spool_open(&a->spool, dir, a->cfg.spool_max_bytes, err, errlen) != 0)
        return -1;
    if (a->spool.files)
        fs_log(FS_LOG_INFO, "agent", "%zu batches (%zu events) wait in the spool", a->spool.files,
               a->spool.events);
    sync_spool_counters(a);
    if (a->cfg.nccl_dir) {
        if (fs_tail_open(&a->tail, a->cfg.nccl_dir, a->cfg.state_dir, err, errlen) != 0)
            return -1;
        a->tail_on = true;
    }
    if (a->cfg.metrics_listen && metrics_start(a, &a->cfg, &a->mhd, err, errlen) != 0)
        return -1;
    return 0;
}

static void
agent_close(struct agent *a)
{
    fs_runcmd_free(&a->cmd);
    fs_runcmd_free(&a->lldp);
    if (a->mhd)
        MHD_stop_daemon(a->mhd);
    if (a->tail_on)
        fs_tail_close(&a->tail);
    if (a->spool.dir)
        fs_spool_close(&a->spool);
    if (a->cli.curl)
        fs_imp_client_close(&a->cli);
    fs_agent_cfg_free(&a->cfg);
    if (a->env_token) {
        memset(a->env_token, 0, strlen(a->env_token));
        free(a->env_token);
    }
    pthread_mutex_destroy(&a->mu);
}

/* Logs each line of a refusal (FILE:LINE:COL: key: reason). */
static void
log_refusal(const char *path, const char *errors)
{
    const char *p = errors ? errors : "out of memory\n";
    fs_log(FS_LOG_ERROR, "agent", "reload of %s refused; the running configuration stays:", path);
    while (*p) {
        const char *nl = strchr(p, '\n');
        int n = nl ? (int)(nl - p) : (int)strlen(p);
        if (n)
            fs_log(FS_LOG_ERROR, "agent", "  %.*s", n, p);
        p += n + (nl ? 1 : 0);
    }
}

/*
 * SIGHUP: the file is read again. A file the validation refuses, or whose collector,
 * state directory, log directory or /metrics address cannot be opened, is refused whole
 * and the running configuration stays. Else the new parts replace the old: tail positions
 * and the spool are on disk (the new ones read them back), the clock track is kept
 * unless the collector's URL changed, an armed window is dropped (picked again with the
 * new settings) and a running command ends (what it printed is imported).
 */
static void
reload(struct agent *a, const char *path)
{
    struct fs_agent_cfg nc;
    struct fs_imp_client cli = {0};
    struct fs_spool sp = {0};
    struct fs_tail tl = {0};
    struct MHD_Daemon *mhd = NULL;
    char *errors = NULL, err[800], dir[4200];
    bool tail_on = false, same_listen;
    if (fs_agent_cfg_load(path, &nc, &errors) != 0) {
        log_refusal(path, errors);
        goto refused;
    }
    same_listen = fs_cfg_str_equal(nc.metrics_listen, a->cfg.metrics_listen);
    char why[700];
    if (fs_agent_private_dir(nc.state_dir, true, why, sizeof why) != 0) {
        snprintf(err, sizeof err, "state_dir: %s", why);
        goto failed;
    }
    if (fs_imp_client_open_token(&cli, nc.url, nc.token_file, a->env_token, err, sizeof err) != 0)
        goto failed;
    warn_plain_http(a, &cli);
    set_timeouts(&cli, &nc);
    snprintf(dir, sizeof dir, "%s/spool", nc.state_dir);
    if (fs_spool_open(&sp, dir, nc.spool_max_bytes, err, sizeof err) != 0)
        goto failed;
    if (nc.nccl_dir) {
        if (fs_tail_open(&tl, nc.nccl_dir, nc.state_dir, err, sizeof err) != 0)
            goto failed;
        tail_on = true;
    }
    if (!same_listen && nc.metrics_listen && metrics_start(a, &nc, &mhd, err, sizeof err) != 0)
        goto failed;

    /* Accepted: end what belongs to the old configuration, then swap. */
    if (fs_runcmd_running(&a->cmd)) {
        fs_runcmd_kill(&a->cmd);
        command_end(a);
    }
    if (fs_runcmd_running(&a->lldp))
        fs_runcmd_kill(&a->lldp); /* read again at once with the new settings */
    if (a->cap == CAP_ARMED)
        a->cap = CAP_IDLE;
    if (!fs_cfg_str_equal(nc.url, a->cfg.url))
        memset(&a->clock, 0, sizeof a->clock);
    sp.dropped_events += a->spool.dropped_events;
    sp.dropped_files += a->spool.dropped_files;
    tl.lines_bad += a->tail.lines_bad;
    fs_imp_client_close(&a->cli);
    fs_spool_close(&a->spool);
    if (a->tail_on)
        fs_tail_close(&a->tail);
    if (!same_listen) {
        if (a->mhd)
            MHD_stop_daemon(a->mhd);
        a->mhd = mhd;
    }
    a->cli = cli;
    a->spool = sp;
    a->tail = tl;
    a->tail_on = tail_on;
    fs_agent_cfg_free(&a->cfg);
    a->cfg = nc;
    a->next_clock_us = a->next_tail_us = a->next_spool_us = a->next_poll_us = a->next_cmd_us = 0;
    a->next_lldp_us = 0;
    a->waiting_reported = false;
    a->cmd_reported[0] = '\0';
    a->lldp_reported[0] = '\0';
    a->plan_reported[0] = '\0';
    a->tail_reported[0] = '\0';
    sync_spool_counters(a);
    fs_log(FS_LOG_INFO, "agent", "configuration reloaded from %s: collector %s, state in %s", path,
           a->cfg.url, a->cfg.state_dir);
    free(errors);
    return;
failed:
    fs_log(FS_LOG_ERROR, "agent", "reload of %s refused; the running configuration stays: %s", path,
           err);
    if (mhd)
        MHD_stop_daemon(mhd);
    if (tail_on)
        fs_tail_close(&tl);
    if (sp.dir)
        fs_spool_close(&sp);
    if (cli.curl)
        fs_imp_client_close(&cli);
refused:
    fs_agent_cfg_free(&nc);
    free(errors);
}

static int
run(struct agent *a, const char *path)
{
    fs_log(FS_LOG_INFO, "agent", "host-agent for %s started: collector %s, state in %s",
           a->cfg.host, a->cfg.url, a->cfg.state_dir);
    while (!g_stop) {
        /* Not while perf runs: its import needs the configuration it started with. */
        if (g_reload && a->cap != CAP_RUNNING) {
            g_reload = 0;
            reload(a, path);
        }
        int64_t mono = fs_monotonic_us();
        /* A turn's budget: what is due and finds the turn over waits for the next one,
         * whose first items (a capture's start, the clock) come before the posting. */
        a->turn_end_us = mono + a->cfg.request_timeout_us;
        if (a->cfg.capture)
            capture_step(a);
        if (mono >= a->next_clock_us && turn_left(a)) {
            a->next_clock_us = mono + a->cfg.clock_interval_us;
            (void)measure(a);
        }
        if (a->spool.files && mono >= a->next_spool_us)
            flush_spool(a);
        if (a->tail_on && mono >= a->next_tail_us && turn_left(a)) {
            a->next_tail_us = mono + a->cfg.nccl_scan_us;
            tail_step(a);
        }
        if (a->cfg.cmd_argv && !a->cfg.cmd_at_capture && mono >= a->next_cmd_us &&
            !fs_runcmd_running(&a->cmd)) {
            a->next_cmd_us = mono + a->cfg.cmd_interval_us;
            command_start(a, 0, 0);
        }
        if (a->cfg.lldp_on && mono >= a->next_lldp_us && !fs_runcmd_running(&a->lldp)) {
            a->next_lldp_us = mono + a->cfg.lldp_interval_us;
            lldp_start(a);
        }
        /* lldpctl answers at once: polled without waiting, the tick below sleeps. */
        if (fs_runcmd_running(&a->lldp) && fs_runcmd_step(&a->lldp, LLDPCTL_TIMEOUT_US, 0) == 1)
            lldp_end(a);
        if (fs_runcmd_running(&a->cmd)) {
            /* The tick waits on the command's output instead of sleeping. */
            if (fs_runcmd_step(&a->cmd, a->cfg.cmd_timeout_us, 50) == 1)
                command_end(a);
        } else {
            struct timespec ts = {0, 50 * 1000000};
            nanosleep(&ts, NULL);
        }
    }
    if (fs_runcmd_running(&a->lldp))
        fs_runcmd_kill(&a->lldp);
    if (fs_runcmd_running(&a->cmd)) {
        /* What it printed so far is still imported. */
        fs_runcmd_kill(&a->cmd);
        command_end(a);
    }
    if (a->cap == CAP_RUNNING) {
        /* perf writes what it has on SIGINT: the window so far is still imported. */
        int ws = 0;
        kill(a->perf, SIGINT);
        while (waitpid(a->perf, &ws, 0) < 0 && errno == EINTR)
            ;
        (void)capture_end(a, ws, true);
    }
    fs_log(FS_LOG_INFO, "agent", "stopped");
    return 0;
}

/* --once: one capture of capture.length now, posted; the exit code. */
static int
once(struct agent *a)
{
    if (measure(a) != 0) {
        fprintf(stderr, "fabricscope host-agent: the collector's clock cannot be read; nothing "
                        "captured\n");
        return 1;
    }
    a->win_start_ns = now_ns();
    a->win_end_ns = a->win_start_ns + a->cfg.length_us * 1000;
    if (a->cfg.cmd_argv && a->cfg.cmd_at_capture)
        command_start(a, a->win_start_ns, a->win_end_ns);
    if (capture_begin(a) != 0)
        return 1;
    int ws = 0;
    bool interrupted = false;
    while (waitpid(a->perf, &ws, 0) < 0) {
        if (errno != EINTR)
            break;
        if (g_stop && !interrupted) {
            kill(a->perf, SIGINT);
            interrupted = true;
        }
    }
    size_t spooled = a->spool.files;
    int crc = capture_end(a, ws, interrupted);
    /* The command of the window (command.at_capture) ends too, whatever perf did. */
    while (fs_runcmd_running(&a->cmd)) {
        if (g_stop)
            fs_runcmd_kill(&a->cmd);
        if (fs_runcmd_step(&a->cmd, a->cfg.cmd_timeout_us, 50) == 1)
            command_end(a);
    }
    if (crc != 0)
        return 1;
    pthread_mutex_lock(&a->mu);
    struct counters c = a->c;
    pthread_mutex_unlock(&a->mu);
    printf("fabricscope host-agent: captured %" PRIu64 " events (the command %" PRIu64 "), %" PRIu64
           " posted (%" PRIu64 " stored), host clock %+.3f ms from the collector's (± %.3f ms)%s\n",
           c.capture_events, c.command_events, c.posted, c.stored, (double)c.offset_ns / 1e6,
           (double)c.unc_ns / 1e6,
           a->spool.files > spooled ? "; the rest is spooled for the running agent" : "");
    return a->spool.files > spooled ? 1 : 0;
}

int
fs_host_agent_main(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"check-config", no_argument, NULL, 'C'},
                                         {"once", no_argument, NULL, 'o'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    /* The subcommand of fabricscope, or the fabricscope-host-agent binary. */
    const char *prog =
        strcmp(argv[0], "host-agent") == 0 ? "fabricscope host-agent" : "fabricscope-host-agent";
    const char *path = NULL;
    bool check = false, one = false;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            path = optarg;
            break;
        case 'C':
            check = true;
            break;
        case 'o':
            one = true;
            break;
        case 'h':
            printf("usage: %s -c FILE [--check-config] [--once]\n"
                   "  the agent of a GPU host: measures its clock offset to the collector,\n"
                   "  posts NCCL Inspector records as they are written, and runs perf around\n"
                   "  the collector's next predicted incident (README \"Host agent\");\n"
                   "  --check-config: validate FILE and exit 0 (good) or 2 (bad, or what\n"
                   "  start-up would refuse on this host: a missing token file, ...);\n"
                   "  --once: one capture of capture.length now, posted, then exit;\n"
                   "  SIGHUP reloads FILE (a bad file is refused whole, the running\n"
                   "  configuration stays), SIGTERM or SIGINT stops\n",
                   prog);
            return 0;
        default:
            return 2;
        }
    }
    if (!path || optind != argc) {
        fprintf(stderr, "%s: usage: %s -c FILE [--check-config] [--once]\n", prog, prog);
        return 2;
    }
    struct agent *a = calloc(1, sizeof *a);
    char *errors = NULL, err[800];
    int rc = 2;
    if (!a) {
        fprintf(stderr, "fabricscope host-agent: out of memory\n");
        return 1;
    }
    pthread_mutex_init(&a->mu, NULL);
    /* Out of the environment before anything is started: perf, the command and the hook
     * would inherit it. Kept for the client (and a reload's). */
    const char *env_token = getenv("FABRICSCOPE_TOKEN");
    if (env_token && !(a->env_token = strdup(env_token))) {
        fprintf(stderr, "fabricscope host-agent: out of memory\n");
        rc = 1;
        goto out;
    }
    unsetenv("FABRICSCOPE_TOKEN");
    if (fs_agent_cfg_load(path, &a->cfg, &errors) != 0) {
        fputs(errors ? errors : "out of memory\n", stderr);
        goto out;
    }
    /* --check-config refuses what start-up would (exit 2 both): the unit's ExecStartPre
     * and reload check exactly what the agent will run with. */
    if (check_startup(a, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s%s\n", check ? path : "fabricscope host-agent",
                check ? "start-up would refuse it on this host: " : "", err);
        goto out;
    }
    if (check) {
        printf("%s: good\n", path);
        rc = 0;
        goto out;
    }
    if (one && !a->cfg.capture) {
        fprintf(stderr, "fabricscope host-agent: --once needs a capture: block in %s\n", path);
        goto out;
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    rc = 1;
    if (agent_open(a, err, sizeof err) != 0) {
        fprintf(stderr, "fabricscope host-agent: %s\n", err);
        goto out;
    }
    rc = one ? once(a) : run(a, path);
out:
    free(errors);
    agent_close(a);
    free(a);
    return rc;
}
