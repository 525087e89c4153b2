/*
 * The SNMP driver: net-snmp's single-session API, asynchronous, one thread for every SNMP
 * target, epoll on each session's socket (a thousand targets pass FD_SETSIZE).
 *
 * Threads. Every net-snmp call (library init, session open/close, v3 key setup, sends,
 * reads, timeouts) happens on the driver thread: net-snmp's USM user list and its
 * session internals are global and not thread-safe. The scheduler's calls
 * (cycle_start, cycle_cancel, target_remove) hand requests over through a mutex-protected
 * queue and an eventfd; target_remove waits until the thread has dropped the target.
 *
 * A cycle walks the phases of map.h in order (GET of the scalars, then multi-column
 * GETBULK walks), one request in flight per target; the per-request timeout and the
 * retries are shrunk to fit the cycle's deadline, and the deadline itself ends the cycle
 * as a timeout, so a slow or dead switch never holds the others.
 *
 * Everything slow that is not I/O with the switch happens off the driver thread, once per
 * target and ahead of its first cycle: a small preparation thread reads the credentials,
 * derives the SNMPv3 keys (a million hash rounds each) and resolves the address; the
 * driver thread opens the session from the numeric address and the ready keys. A failure
 * there (unknown host, missing secret) is retried with a doubling backoff (1 s .. 60 s);
 * cycles in between end with its message. Credentials and keys are never logged and are
 * wiped when the target goes.
 *
 * A cycle that reaches its deadline, a per-cycle bound or an unanswered request emits
 * what arrived (FS_POLL_PARTIAL at the deadline or a bound); interfaces past
 * FS_SNMP_MAX_IFS are a counted truncation, never a failure.
 *
 * Clock. The scalars GET also asks for HOST-RESOURCES-MIB hrSystemDate where the agent
 * has it: the device's clock read between the GET's send and its answer, handed to the
 * sink (fs_sink_clock), whose filter detects the second edges of a whole-second clock
 * (net-snmp's agent) across polls. An agent without it answers noSuchObject: ignored.
 *
 * Clock probes. Polls come at a fixed phase to the agent's second edge, so their readings
 * alone leave the offset about a second wide. Once a poll has seen hrSystemDate in whole
 * seconds (no tenths), the driver thread sends, between cycles, GETs of hrSystemDate.0
 * alone at the times the shared prober picks (clock/clock_probe.h, via sink.h: the
 * agent's next second edge in the middle of the round trip under the current estimate,
 * fs_sink_clock_estimate), each answer handed to fs_sink_clock with its own send and
 * receive times. A timerfd (CLOCK_REALTIME, absolute) wakes the thread at the planned
 * time (epoll's timeout is milliseconds). One probe at a time per target, never planned
 * inside a cycle and planned to be answered before the next one is due; a cycle that
 * starts anyway runs beside it (a separate request, its own callback). No retries: a
 * probe that times out is dropped (counted as a probe without gain). The prober stops
 * once the uncertainty reaches max(5 ms, 2 round trips), checks the estimate every 30 s
 * (a device clock step), and pauses after probes that did not narrow it.
 */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <net-snmp/net-snmp-config.h>
#include <net-snmp/net-snmp-includes.h>
#include <net-snmp/library/large_fd_set.h>

#include "driver.h"
#include "util/log.h"
#include "map.h"
#include "lldp.h"
#include "snmp_driver.h"
#include "util/clock.h"

_Static_assert(sizeof(oid) == sizeof(unsigned long), "map.h passes OIDs as unsigned long");

#define SUBSYS "snmp"
#define MAX_COLS 32
#define MIN_TIMEOUT_US 20000
/* A probe's timeout: 10 round trips, at least this (an answer later than that is honest
 * but too wide to narrow anything), at most the configured timeout. */
#define PROBE_TIMEOUT_MIN_US 200000

enum rq_kind { RQ_CYCLE, RQ_CANCEL, RQ_REMOVE, RQ_PREPARED };

#define PREP_BACKOFF_MIN_US 1000000
#define PREP_BACKOFF_MAX_US 60000000

enum prep_state { PREP_PENDING, PREP_READY, PREP_FAILED };

/* What the preparation thread hands to the driver thread (secrets: wiped when freed). */
struct prep_out {
    enum prep_state state;
    enum fs_poll_result fail_kind;
    char err[200];
    char peer[96]; /* "udp:192.0.2.1:161" / "udp6:[2001:db8::1]:161" */
    char community[256];
    u_char auth_key[USM_AUTH_KU_LEN];
    size_t auth_key_len;
    u_char priv_key[USM_PRIV_KU_LEN];
    size_t priv_key_len;
};

/* One target's preparation: copies of the config it needs (the core may free the
 * config once target_remove returns, the job may outlive that while it runs). */
struct prep_job {
    struct snmp_target *t; /* NULL once the target is removed; under plock */
    char *name;            /* the target's, for log lines */
    char *address;
    uint16_t port;
    struct fs_snmp_cfg cfg; /* scalars only; the strings below are the job's own */
    struct fs_secret_ref community, auth_pw, priv_pw;
    char *user;
    bool queued, running;
    int64_t not_before_us, backoff_us;
    struct prep_job *next;
    struct prep_out out; /* under plock */
};

struct rq {
    enum rq_kind kind;
    struct snmp_target *t;
    uint64_t cycle_id;
    int64_t deadline_us;
    struct rq *next;
};

struct walkcol {
    oid root[FS_SNMP_OID_MAX];
    size_t root_len;
    oid cur[FS_SNMP_OID_MAX];
    size_t cur_len;
    bool done;
};

struct snmp_target;

/* A link of an intrusive doubly linked list of targets (driver thread only). */
struct tlink {
    struct snmp_target *next, *prev;
};

struct snmp_target {
    struct snmp_drv *drv;
    const struct fs_target_cfg *tcfg;
    const struct fs_snmp_cfg *snmp; /* the target's snmp block */
    struct fs_sink *sink;
    atomic_bool busy; /* a cycle was accepted and has not ended */
    /* --- driver thread only --- */
    void *sessp; /* net-snmp single-session handle */
    int fd;
    bool v3_ready; /* engineID known and USM user created */
    bool in_cycle;
    bool removed;         /* set under drv->qlock */
    bool removed_pending; /* RQ_REMOVE is being handled: nothing more goes to the sink */
    uint64_t cycle_id;
    int64_t start_us, deadline_us;
    int64_t timer_us; /* next retransmission/timeout check (monotonic) */
    int64_t req_timeout_us;
    int reqid;            /* the request in flight, 0 if none */
    int64_t sent_real_us; /* realtime of the last send (for the device clock) */
    int reps;             /* current max-repetitions (halved on tooBig) */
    enum fs_snmp_phase ph;
    bool map_again; /* the IFMAP phase runs after the data (unknown ifIndex) */
    /* The walk that comes first after the scalars and the map: FS_SNMP_PH_IFDATA (then
     * the fallback and QoS) or FS_SNMP_PH_QOS (then the interface data). See walk_turn. */
    enum fs_snmp_phase walk_first;
    uint64_t qos_first_cycles; /* cycles that walked QoS first (in the target's detail) */
    struct walkcol cols[MAX_COLS];
    size_t ncols;
    uint32_t pdus;
    struct fs_snmp_tmap tm;
    struct fs_snmp_poll poll;
    struct tlink alink; /* active list (a cycle in flight) */
    /* clock probes (see the top of the file) */
    struct fs_clock_prober prober; /* the policy's state; prober.at_us: the planned probe */
    bool clock_seen;               /* a poll read hrSystemDate: the agent serves it */
    bool clock_fine;               /* a reading showed tenths of a second: no probing */
    int64_t cycle_start_real_us;   /* when the last cycle started (realtime) */
    int probe_reqid;               /* the probe in flight; 0: none */
    int64_t probe_sent_real_us;    /* realtime just before its send */
    int64_t probe_timer_us;        /* its next timeout check (monotonic) */
    struct tlink plink;            /* probe list (a probe planned or in flight) */
    bool in_plist;
    /* LLDP (see lldp_begin): the neighbour table is read after the counters of a cycle
     * when lldp_interval has passed since the last complete read. */
    bool lldp_due;            /* this cycle reads it (decided when it begins) */
    bool in_lldp;             /* the counters are emitted; the LLDP walk is under way */
    bool counters_emitted;    /* this cycle's samples went to the sink already */
    int64_t lldp_last_us;     /* monotonic start of the last complete read; 0 none */
    struct fs_snmp_lldp lldp; /* the read in progress */
    uint64_t lldp_reads, lldp_cut;
    size_t lldp_neighbors; /* in the last complete read */
    bool lldp_mib;         /* the last complete read found LLDP-MIB */
    bool wait_prep;        /* the cycle waits for the preparation thread */
    struct prep_job *job;  /* under drv->plock; NULL after target_remove detached it */
};

struct snmp_drv {
    pthread_t thr;
    bool thr_started;
    int epfd, evfd;
    pthread_mutex_t qlock;
    pthread_cond_t qcond;
    struct rq *qhead, *qtail;
    bool stop;
    struct snmp_target *active;  /* targets in a cycle (alink) */
    struct snmp_target *probing; /* targets with a probe planned or in flight (plink) */
    int tfd;                     /* timerfd (CLOCK_REALTIME, absolute): the earliest probe */
    int64_t tfd_armed_us;        /* what it is armed for; 0: disarmed */
    netsnmp_large_fd_set lfs;
    int lfs_size;
    /* the preparation thread */
    pthread_t prep_thr;
    bool prep_started, prep_stop, prep_exited;
    bool lib_ready; /* net-snmp is initialized (the driver thread did it); under plock */
    pthread_mutex_t plock;
    pthread_cond_t pcond;
    struct prep_job *prep_head; /* jobs to run, any order; each picks its not_before time */
};

/* ---- net-snmp logging into fs_log ---- */

static int
log_cb(int major, int minor, void *server_arg, void *client_arg)
{
    (void)major;
    (void)minor;
    (void)client_arg;
    const struct snmp_log_message *m = server_arg;
    if (!m || !m->msg)
        return 0;
    enum fs_log_level lvl = m->priority <= LOG_ERR       ? FS_LOG_ERROR
                            : m->priority <= LOG_WARNING ? FS_LOG_WARN
                            : m->priority <= LOG_INFO    ? FS_LOG_INFO
                                                         : FS_LOG_DEBUG;
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", m->msg);
    size_t n = strlen(buf);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    if (n)
        fs_log(lvl, SUBSYS, "net-snmp: %s", buf);
    return 0;
}

/* Starts net-snmp as a pure manager: no snmp.conf, no MIB files (Debian ships none of the
 * IETF ones, and every OID here is numeric), no persistent state written anywhere. */
static void
netsnmp_start(void)
{
    snmp_disable_log();
    netsnmp_register_loghandler(NETSNMP_LOGHANDLER_CALLBACK, LOG_DEBUG);
    snmp_register_callback(SNMP_CALLBACK_LIBRARY, SNMP_CALLBACK_LOGGING, log_cb, NULL);
    netsnmp_ds_set_boolean(NETSNMP_DS_LIBRARY_ID, NETSNMP_DS_LIB_DONT_READ_CONFIGS, 1);
    netsnmp_ds_set_boolean(NETSNMP_DS_LIBRARY_ID, NETSNMP_DS_LIB_DISABLE_PERSISTENT_LOAD, 1);
    netsnmp_ds_set_boolean(NETSNMP_DS_LIBRARY_ID, NETSNMP_DS_LIB_DISABLE_PERSISTENT_SAVE, 1);
    netsnmp_ds_set_boolean(NETSNMP_DS_LIBRARY_ID, NETSNMP_DS_LIB_DONT_PERSIST_STATE, 1);
    netsnmp_set_mib_directory("");
    setenv("MIBS", "", 1);
    init_snmp("fabricscope");
}

/* ---- requests from the scheduler ---- */

static void
wake(struct snmp_drv *d)
{
    uint64_t one = 1;
    ssize_t r = write(d->evfd, &one, sizeof(one));
    (void)r; /* a full counter still wakes the thread */
}

static int
enqueue(struct snmp_drv *d, enum rq_kind k, struct snmp_target *t, uint64_t id, int64_t dl)
{
    struct rq *r = calloc(1, sizeof(*r));
    if (!r)
        return -1;
    r->kind = k;
    r->t = t;
    r->cycle_id = id;
    r->deadline_us = dl;
    pthread_mutex_lock(&d->qlock);
    if (d->qtail)
        d->qtail->next = r;
    else
        d->qhead = r;
    d->qtail = r;
    pthread_mutex_unlock(&d->qlock);
    wake(d);
    return 0;
}

/* ---- preparation, off the driver thread ---- */

static void
secret_ref_free(struct fs_secret_ref *r)
{
    free(r->file);
    free(r->env);
    r->file = r->env = NULL;
}

static int
secret_ref_copy(struct fs_secret_ref *dst, const struct fs_secret_ref *src)
{
    dst->file = src->file ? strdup(src->file) : NULL;
    dst->env = src->env ? strdup(src->env) : NULL;
    return (src->file && !dst->file) || (src->env && !dst->env) ? -1 : 0;
}

static void
job_free(struct prep_job *j)
{
    if (!j)
        return;
    explicit_bzero(&j->out, sizeof(j->out));
    free(j->name);
    free(j->address);
    free(j->user);
    secret_ref_free(&j->community);
    secret_ref_free(&j->auth_pw);
    secret_ref_free(&j->priv_pw);
    free(j);
}

static struct prep_job *
job_new(const struct fs_target_cfg *tcfg, const struct fs_snmp_cfg *c)
{
    struct prep_job *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    j->cfg = *c;
    j->cfg.user = NULL;
    memset(&j->cfg.community, 0, sizeof(j->cfg.community));
    memset(&j->cfg.auth_password, 0, sizeof(j->cfg.auth_password));
    memset(&j->cfg.priv_password, 0, sizeof(j->cfg.priv_password));
    j->name = strdup(tcfg->name ? tcfg->name : "?");
    j->address = strdup(tcfg->address);
    j->port = c->port ? c->port : 161;
    j->user = c->user ? strdup(c->user) : NULL;
    j->backoff_us = PREP_BACKOFF_MIN_US;
    if (!j->name || !j->address || (c->user && !j->user) ||
        secret_ref_copy(&j->community, &c->community) ||
        secret_ref_copy(&j->auth_pw, &c->auth_password) ||
        secret_ref_copy(&j->priv_pw, &c->priv_password)) {
        job_free(j);
        return NULL;
    }
    return j;
}

/* Resolves the address once (getaddrinfo may wait seconds for DNS) into a numeric peer. */
static int
resolve_peer(const struct prep_job *j, struct prep_out *o)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM}, *res = NULL;
    char host[INET6_ADDRSTRLEN];
    int rc = getaddrinfo(j->address, NULL, &hints, &res);
    if (rc != 0 || !res) {
        snprintf(o->err, sizeof(o->err), "cannot resolve %.100s: %s", j->address,
                 rc ? gai_strerror(rc) : "no address");
        o->fail_kind = FS_POLL_PROTOCOL;
        if (res)
            freeaddrinfo(res);
        return -1;
    }
    rc = getnameinfo(res->ai_addr, res->ai_addrlen, host, sizeof(host), NULL, 0, NI_NUMERICHOST);
    int family = res->ai_family;
    freeaddrinfo(res);
    if (rc != 0) {
        snprintf(o->err, sizeof(o->err), "cannot resolve %.100s: %s", j->address, gai_strerror(rc));
        o->fail_kind = FS_POLL_PROTOCOL;
        return -1;
    }
    if (family == AF_INET6)
        snprintf(o->peer, sizeof(o->peer), "udp6:[%s]:%u", host, j->port);
    else
        snprintf(o->peer, sizeof(o->peer), "udp:%s:%u", host, j->port);
    return 0;
}

static const oid *auth_oid(enum fs_snmp_auth a, size_t *len);

/* Reads the credentials and derives the v3 keys (Ku; localized per engine later). */
static int
derive_keys(const struct prep_job *j, struct prep_out *o)
{
    const struct fs_snmp_cfg *c = &j->cfg;
    char secret[256];
    int rc = -1;
    secret[0] = '\0';
    o->fail_kind = FS_POLL_AUTH;
    if (c->version != FS_SNMP_V3) {
        if (fs_secret_read(&j->community, o->community, sizeof(o->community), o->err,
                           sizeof(o->err)) != 0)
            goto out;
        rc = 0;
        goto out;
    }
    size_t alen = 0;
    const oid *ap = auth_oid(c->auth_protocol, &alen);
    if (!j->user || !*j->user) {
        snprintf(o->err, sizeof(o->err), "snmp v3 needs a user");
        goto out;
    }
    if ((c->auth_protocol == FS_AUTH_MD5 || c->auth_protocol == FS_AUTH_SHA ||
         c->priv_protocol == FS_PRIV_DES) &&
        !c->allow_weak_crypto) {
        snprintf(o->err, sizeof(o->err),
                 "weak SNMPv3 crypto (MD5, SHA-1 or DES) needs allow_weak_crypto: true");
        goto out;
    }
    if (ap) {
        if (fs_secret_read(&j->auth_pw, secret, sizeof(secret), o->err, sizeof(o->err)) != 0)
            goto out;
        if (strlen(secret) < 8) {
            snprintf(o->err, sizeof(o->err), "the v3 auth password is shorter than 8 characters");
            goto out;
        }
        o->auth_key_len = sizeof(o->auth_key);
        if (generate_Ku(ap, (u_int)alen, (u_char *)secret, strlen(secret), o->auth_key,
                        &o->auth_key_len) != SNMPERR_SUCCESS) {
            snprintf(o->err, sizeof(o->err), "cannot derive the v3 auth key");
            goto out;
        }
        explicit_bzero(secret, sizeof(secret));
        if (c->priv_protocol != FS_PRIV_NONE) {
            if (fs_secret_read(&j->priv_pw, secret, sizeof(secret), o->err, sizeof(o->err)) != 0)
                goto out;
            if (strlen(secret) < 8) {
                snprintf(o->err, sizeof(o->err),
                         "the v3 priv password is shorter than 8 characters");
                goto out;
            }
            o->priv_key_len = sizeof(o->priv_key);
            if (generate_Ku(ap, (u_int)alen, (u_char *)secret, strlen(secret), o->priv_key,
                            &o->priv_key_len) != SNMPERR_SUCCESS) {
                snprintf(o->err, sizeof(o->err), "cannot derive the v3 priv key");
                goto out;
            }
        }
    }
    rc = 0;
out:
    explicit_bzero(secret, sizeof(secret));
    return rc;
}

static void
prep_run(const struct prep_job *j, struct prep_out *o)
{
    memset(o, 0, sizeof(*o));
    if (derive_keys(j, o) != 0 || resolve_peer(j, o) != 0) {
        char err[sizeof(o->err)];
        enum fs_poll_result k = o->fail_kind;
        memcpy(err, o->err, sizeof(err));
        explicit_bzero(o, sizeof(*o));
        memcpy(o->err, err, sizeof(err));
        o->fail_kind = k;
        o->state = PREP_FAILED;
        return;
    }
    o->state = PREP_READY;
}

static void
prep_unlink(struct snmp_drv *d, struct prep_job *j)
{
    for (struct prep_job **pp = &d->prep_head; *pp; pp = &(*pp)->next) {
        if (*pp == j) {
            *pp = j->next;
            j->next = NULL;
            j->queued = false;
            return;
        }
    }
}

static int enqueue(struct snmp_drv *d, enum rq_kind k, struct snmp_target *t, uint64_t id,
                   int64_t dl);

static void *
prep_thread(void *arg)
{
    struct snmp_drv *d = arg;
    pthread_mutex_lock(&d->plock);
    /* Key derivation uses net-snmp's crypto: not before the library is set up. */
    while (!d->prep_stop && !d->lib_ready)
        pthread_cond_wait(&d->pcond, &d->plock);
    while (!d->prep_stop) {
        int64_t now = fs_monotonic_us(), next = INT64_MAX;
        struct prep_job *j = NULL;
        for (struct prep_job *q = d->prep_head; q; q = q->next) {
            if (q->not_before_us <= now) {
                j = q;
                break;
            }
            if (q->not_before_us < next)
                next = q->not_before_us;
        }
        if (!j) {
            if (next == INT64_MAX) {
                pthread_cond_wait(&d->pcond, &d->plock);
            } else {
                /* pcond waits on CLOCK_MONOTONIC (see snmp_init) */
                struct timespec ts = {.tv_sec = next / 1000000,
                                      .tv_nsec = (long)(next % 1000000) * 1000};
                pthread_cond_timedwait(&d->pcond, &d->plock, &ts);
            }
            continue;
        }
        prep_unlink(d, j);
        j->running = true;
        pthread_mutex_unlock(&d->plock);
        struct prep_out o;
        prep_run(j, &o);
        pthread_mutex_lock(&d->plock);
        j->running = false;
        if (!j->t) { /* removed meanwhile */
            explicit_bzero(&o, sizeof(o));
            job_free(j);
            continue;
        }
        j->out = o;
        explicit_bzero(&o, sizeof(o));
        if (j->out.state == PREP_FAILED) {
            /* Logged here, once per attempt; the cycles in between only report it. */
            fs_log(FS_LOG_WARN, SUBSYS, "target %s: %s (tried again in %lld s)", j->name,
                   j->out.err, (long long)(j->backoff_us / 1000000));
            j->not_before_us = fs_monotonic_us() + j->backoff_us;
            j->backoff_us =
                j->backoff_us * 2 > PREP_BACKOFF_MAX_US ? PREP_BACKOFF_MAX_US : j->backoff_us * 2;
            j->next = d->prep_head;
            d->prep_head = j;
            j->queued = true;
        } else {
            j->backoff_us = PREP_BACKOFF_MIN_US;
        }
        /* Under plock: target_remove detaches under it first, and its RQ_REMOVE then
         * queues behind this, so the driver thread still has the target. */
        enqueue(d, RQ_PREPARED, j->t, 0, 0);
    }
    d->prep_exited = true;
    pthread_cond_broadcast(&d->pcond);
    pthread_mutex_unlock(&d->plock);
    return NULL;
}

/* ---- sink adapter for map.c ---- */

static void
em_reset(void *arg, enum fs_reset_kind kind, const char *iface)
{
    fs_sink_counter_reset(((struct snmp_target *)arg)->sink, kind, iface);
}

static void
em_begin(void *arg, int64_t ts)
{
    fs_sink_begin(((struct snmp_target *)arg)->sink, ts);
}

static void
em_counter(void *arg, enum fs_metric m, const struct fs_label *l, size_t n, uint64_t raw,
           unsigned bits, double scale)
{
    struct snmp_target *t = arg;
    /* ms and µs counters of *_seconds_total metrics keep their raw unit in the core. */
    if (scale == 1.0)
        fs_sink_counter(t->sink, m, l, n, raw, bits);
    else
        fs_sink_counter_scaled(t->sink, m, l, n, raw, bits, scale);
}

static void
em_gauge(void *arg, enum fs_metric m, const struct fs_label *l, size_t n, double v)
{
    fs_sink_gauge(((struct snmp_target *)arg)->sink, m, l, n, v);
}

static void
em_end(void *arg)
{
    fs_sink_end(((struct snmp_target *)arg)->sink);
}

static void
em_agent_restart(void *arg)
{
    struct snmp_target *t = arg;
    fs_log(FS_LOG_INFO, SUBSYS, "target %s: the SNMP agent restarted (the device did not)",
           t->tcfg->name);
    fs_sink_agent_restart(t->sink);
}

static void
em_max_rate(void *arg, const char *iface, double octets_per_s)
{
    fs_sink_set_max_rate(((struct snmp_target *)arg)->sink, iface, octets_per_s);
}

static void
em_note(void *arg, const char *msg)
{
    fs_log(FS_LOG_WARN, SUBSYS, "target %s: %s", ((struct snmp_target *)arg)->tcfg->name, msg);
}

static void
em_lldp_local(void *arg, const char *chassis_id, const char *sys_name)
{
    fs_sink_lldp_local(((struct snmp_target *)arg)->sink, chassis_id, sys_name);
}

static void
em_lldp_nb(void *arg, const struct fs_lldp_neighbor *n)
{
    fs_sink_lldp_neighbor(((struct snmp_target *)arg)->sink, n);
}

/* ---- cycles ---- */

/* The link of t at offset off (alink or plink). */
static struct tlink *
tlink_of(struct snmp_target *t, size_t off)
{
    return (struct tlink *)((char *)t + off);
}

static void
tlist_add(struct snmp_target **head, struct snmp_target *t, size_t off)
{
    tlink_of(t, off)->prev = NULL;
    tlink_of(t, off)->next = *head;
    if (*head)
        tlink_of(*head, off)->prev = t;
    *head = t;
}

static void
tlist_del(struct snmp_target **head, struct snmp_target *t, size_t off)
{
    struct tlink *l = tlink_of(t, off);
    if (l->prev)
        tlink_of(l->prev, off)->next = l->next;
    else if (*head == t)
        *head = l->next;
    if (l->next)
        tlink_of(l->next, off)->prev = l->prev;
    l->next = l->prev = NULL;
}

#define ALINK offsetof(struct snmp_target, alink)
#define PLINK offsetof(struct snmp_target, plink)

/* Keeps t on the probe list exactly while it has a probe planned or in flight. */
static void
probe_list_sync(struct snmp_target *t)
{
    bool want = t->prober.at_us > 0 || t->probe_reqid != 0;
    if (want && !t->in_plist)
        tlist_add(&t->drv->probing, t, PLINK);
    else if (!want && t->in_plist)
        tlist_del(&t->drv->probing, t, PLINK);
    t->in_plist = want;
}

static void
update_detail(struct snmp_target *t)
{
    char buf[1280];
    size_t n = fs_snmp_tmap_describe(&t->tm, buf, sizeof(buf));
    snprintf(buf + n, sizeof(buf) - n,
             ",\"snmp_clock_probes\":%llu,\"snmp_clock_probing\":\"%s\","
             "\"walk_first\":\"%s\",\"qos_first_cycles\":%llu,"
             "\"lldp\":%s,\"lldp_mib\":%s,\"lldp_reads\":%llu,\"lldp_cut\":%llu,"
             "\"lldp_neighbors\":%zu,\"lldp_anomalies\":%llu",
             (unsigned long long)t->prober.sent,
             t->prober.state ? t->prober.state : FS_CLOCK_PROBER_STATE_NONE,
             t->walk_first == FS_SNMP_PH_QOS ? "qos" : "interfaces",
             (unsigned long long)t->qos_first_cycles, t->snmp->lldp ? "true" : "false",
             t->lldp_mib ? "true" : "false", (unsigned long long)t->lldp_reads,
             (unsigned long long)t->lldp_cut, t->lldp_neighbors,
             (unsigned long long)t->lldp.anomalies);
    fs_sink_set_detail(t->sink, buf);
}

static void plan_probe(struct snmp_target *t);

/* Hands the cycle's counter samples to the sink, once per cycle (before the LLDP walk,
 * or at the cycle's end): all of them, or the part before a cut; none when the target
 * goes. */
static void
emit_counters(struct snmp_target *t, enum fs_poll_result r)
{
    if (t->counters_emitted)
        return;
    t->counters_emitted = true;
    if (r != FS_POLL_OK)
        fs_snmp_poll_cut(&t->poll);
    if (!t->removed_pending && t->poll.n_pdus > 0) {
        struct fs_snmp_emit e = {.arg = t,
                                 .reset = em_reset,
                                 .begin = em_begin,
                                 .counter = em_counter,
                                 .gauge = em_gauge,
                                 .end = em_end,
                                 .agent_restart = em_agent_restart,
                                 .max_rate = em_max_rate,
                                 .note = em_note};
        fs_snmp_poll_finish(&t->tm, &t->poll, &e);
    }
}

/* Ends the cycle in flight: emits what arrived (all of it, or the part before the
 * deadline, a bound or a failed request; not when the target goes), reports the result. */
static void
cycle_end(struct snmp_target *t, enum fs_poll_result r, const char *msg)
{
    char tmsg[160];
    if (!t->in_cycle)
        return;
    t->in_cycle = false;
    t->wait_prep = false;
    t->reqid = 0;
    tlist_del(&t->drv->active, t, ALINK);
    if (t->in_lldp) {
        /* The counters were complete and are in the sink; only the neighbour table was
         * cut: no table end (nothing is dropped on a partial read), tried again after
         * lldp_interval (the links' hold outlasts a missed read). The cycle itself
         * succeeded. */
        t->in_lldp = false;
        t->lldp_cut++;
        fs_logkv(FS_LOG_DEBUG, SUBSYS, NULL, "target %s: LLDP read cut: %s", t->tcfg->name,
                 msg ? msg : "");
        if (!t->removed_pending) {
            r = FS_POLL_OK;
            msg = NULL;
        }
    }
    emit_counters(t, r);
    if (r == FS_POLL_OK && t->poll.truncated) {
        r = FS_POLL_PARTIAL;
        snprintf(tmsg, sizeof(tmsg), "truncated at a bound (%u interfaces kept, at most %u)",
                 (unsigned)t->tm.n_ifs, (unsigned)FS_SNMP_MAX_IFS);
        msg = tmsg;
    }
    plan_probe(t);
    update_detail(t);
    uint64_t id = t->cycle_id;
    atomic_store(&t->busy, false);
    if (r != FS_POLL_OK)
        fs_logkv(FS_LOG_DEBUG, SUBSYS, NULL, "target %s: cycle %llu ended: %s", t->tcfg->name,
                 (unsigned long long)id, msg ? msg : "");
    fs_sink_done(t->sink, id, r, msg);
}

static void
close_session(struct snmp_target *t)
{
    if (t->sessp) {
        if (t->fd >= 0)
            epoll_ctl(t->drv->epfd, EPOLL_CTL_DEL, t->fd, NULL);
        snmp_sess_close(t->sessp);
    }
    t->sessp = NULL;
    t->fd = -1;
    t->v3_ready = false;
}

static const oid *
auth_oid(enum fs_snmp_auth a, size_t *len)
{
    *len = USM_AUTH_PROTO_SHA_LEN;
    switch (a) {
    case FS_AUTH_MD5:
        *len = USM_AUTH_PROTO_MD5_LEN;
        return usmHMACMD5AuthProtocol;
    case FS_AUTH_SHA:
        return usmHMACSHA1AuthProtocol;
    case FS_AUTH_SHA224:
        return usmHMAC128SHA224AuthProtocol;
    case FS_AUTH_SHA256:
        return usmHMAC192SHA256AuthProtocol;
    case FS_AUTH_SHA384:
        return usmHMAC256SHA384AuthProtocol;
    case FS_AUTH_SHA512:
        return usmHMAC384SHA512AuthProtocol;
    case FS_AUTH_NONE:
        break;
    }
    return NULL;
}

/* Opens the target's session on the driver thread from what the preparation made: a
 * numeric peer (no DNS here) and ready keys. errbuf never holds a secret. */
static int
open_session(struct snmp_target *t, const struct prep_out *po, char *errbuf, size_t errlen)
{
    const struct fs_snmp_cfg *c = t->snmp;
    netsnmp_session s;
    char peer[sizeof(po->peer)], community[sizeof(po->community)];
    int rc = -1;

    snmp_sess_init(&s);
    snprintf(peer, sizeof(peer), "%s", po->peer);
    community[0] = '\0';
    s.peername = peer;
    s.timeout = (long)(c->timeout_us > 0 ? c->timeout_us : 2000000);
    s.retries = c->retries >= 0 ? c->retries : 1;
    if (c->version == FS_SNMP_V3) {
        size_t alen = 0;
        const oid *ap = auth_oid(c->auth_protocol, &alen);
        s.version = SNMP_VERSION_3;
        s.flags |= SNMP_FLAGS_DONT_PROBE; /* discovery is asynchronous, see v3_discover() */
        s.securityModel = SNMP_SEC_MODEL_USM;
        s.securityName = c->user;
        s.securityNameLen = c->user ? strlen(c->user) : 0;
        if (!ap) {
            s.securityLevel = SNMP_SEC_LEVEL_NOAUTH;
        } else {
            s.securityAuthProto = (oid *)ap;
            s.securityAuthProtoLen = alen;
            memcpy(s.securityAuthKey, po->auth_key, po->auth_key_len);
            s.securityAuthKeyLen = po->auth_key_len;
            s.securityLevel = SNMP_SEC_LEVEL_AUTHNOPRIV;
            if (c->priv_protocol != FS_PRIV_NONE) {
                s.securityPrivProto =
                    c->priv_protocol == FS_PRIV_DES ? usmDESPrivProtocol : usmAESPrivProtocol;
                s.securityPrivProtoLen = USM_PRIV_PROTO_AES_LEN;
                memcpy(s.securityPrivKey, po->priv_key, po->priv_key_len);
                s.securityPrivKeyLen = po->priv_key_len;
                s.securityLevel = SNMP_SEC_LEVEL_AUTHPRIV;
            }
        }
    } else {
        s.version = SNMP_VERSION_2c;
        snprintf(community, sizeof(community), "%s", po->community);
        s.community = (u_char *)community;
        s.community_len = strlen(community);
    }
    t->sessp = snmp_sess_open(&s);
    if (!t->sessp) {
        int liberr, syserr;
        char *msg = NULL;
        snmp_error(&s, &liberr, &syserr, &msg);
        snprintf(errbuf, errlen, "cannot open the session: %.120s", msg ? msg : "?");
        free(msg);
        goto out;
    }
    netsnmp_transport *tr = snmp_sess_transport(t->sessp);
    t->fd = tr ? tr->sock : -1;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = t};
    if (t->fd < 0 || epoll_ctl(t->drv->epfd, EPOLL_CTL_ADD, t->fd, &ev) != 0) {
        snprintf(errbuf, errlen, "cannot watch the session socket: %s", strerror(errno));
        close_session(t);
        goto out;
    }
    if (t->fd >= t->drv->lfs_size) {
        netsnmp_large_fd_set_resize(&t->drv->lfs, t->fd + 1);
        t->drv->lfs_size = t->fd + 1;
    }
    t->v3_ready = c->version != FS_SNMP_V3;
    rc = 0;
out:
    /* Wipe what held secrets (also the copies inside the stack session). */
    explicit_bzero(community, sizeof(community));
    explicit_bzero(s.securityAuthKey, sizeof(s.securityAuthKey));
    explicit_bzero(s.securityPrivKey, sizeof(s.securityPrivKey));
    return rc;
}

static int on_response(int op, netsnmp_session *sess, int reqid, netsnmp_pdu *pdu, void *magic);

/* The per-request timeout configured (2 s when unset). */
static int64_t
cfg_timeout_us(const struct fs_snmp_cfg *c)
{
    return c->timeout_us > 0 ? c->timeout_us : 2000000;
}

/* Sends pdu; the timeout and retries shrink to fit what is left of the cycle. */
static int
send_pdu(struct snmp_target *t, netsnmp_pdu *pdu)
{
    const struct fs_snmp_cfg *c = t->snmp;
    netsnmp_session *ss = snmp_sess_session(t->sessp);
    int64_t now = fs_monotonic_us();
    int64_t left = t->deadline_us - now;
    int64_t to = cfg_timeout_us(c);
    int retries = c->retries >= 0 ? c->retries : 1;
    while (retries > 0 && to * (retries + 1) > left)
        retries--;
    if (to > left)
        to = left;
    if (to < MIN_TIMEOUT_US)
        to = MIN_TIMEOUT_US;
    ss->timeout = (long)to;
    ss->retries = retries;
    t->req_timeout_us = to;
    t->timer_us = now + to;
    t->sent_real_us = fs_realtime_us();
    int id = snmp_sess_async_send(t->sessp, pdu, on_response, t);
    if (id == 0) {
        snmp_free_pdu(pdu);
        return -1;
    }
    t->reqid = id;
    return 0;
}

/* HOST-RESOURCES-MIB hrSystemDate.0: DateAndTime (RFC 2579), the device's clock. */
static const oid oid_hrsystemdate[] = {1, 3, 6, 1, 2, 1, 25, 1, 2, 0};
/* lldpObjects (LLDP-MIB): the answers to the lldpLoc scalars asked with the cycle's. */
static const oid oid_lldp[] = {1, 0, 8802, 1, 1, 2, 1};

/*
 * Reads a DateAndTime (8 octets local time, or 11 with the direction and distance from
 * UTC) into µs since the epoch; without the zone (8 octets) the time is taken as UTC.
 * 0, or -1 when it is not a valid DateAndTime.
 */
static int
date_and_time_us(const unsigned char *b, size_t len, int64_t *out)
{
    if (len != 8 && len != 11)
        return -1;
    struct tm tm = {0};
    tm.tm_year = (b[0] << 8 | b[1]) - 1900;
    tm.tm_mon = b[2] - 1;
    tm.tm_mday = b[3];
    tm.tm_hour = b[4];
    tm.tm_min = b[5];
    tm.tm_sec = b[6];
    if (tm.tm_year < 70 || b[2] < 1 || b[2] > 12 || b[3] < 1 || b[3] > 31 || b[4] > 23 ||
        b[5] > 59 || b[6] > 60 || b[7] > 9)
        return -1;
    int64_t s = (int64_t)timegm(&tm);
    if (len == 11) {
        if ((b[8] != '+' && b[8] != '-') || b[9] > 13 || b[10] > 59)
            return -1;
        int64_t east = (int64_t)b[9] * 3600 + b[10] * 60;
        s += b[8] == '+' ? -east : east; /* local time is UTC plus the eastward distance */
    }
    *out = s * 1000000 + (int64_t)b[7] * 100000;
    return 0;
}

/* Whether v is hrSystemDate.0 holding a valid DateAndTime; *dev_us its time. */
static bool
hrsystemdate_of(const netsnmp_variable_list *v, int64_t *dev_us)
{
    return snmp_oid_compare(v->name, v->name_length, oid_hrsystemdate,
                            OID_LENGTH(oid_hrsystemdate)) == 0 &&
           v->type == ASN_OCTET_STR && v->val.string &&
           date_and_time_us(v->val.string, v->val_len, dev_us) == 0;
}

/*
 * A reading of hrSystemDate taken between sent_us and received_us (realtime), from a poll
 * or from a probe: to the sink's filter and the prober (fs_sink_clock_prober_reading).
 */
static void
clock_reading(struct snmp_target *t, int64_t dev_us, int64_t sent_us, int64_t received_us,
              bool probe)
{
    /* net-snmp's agent fills whole seconds; an agent that shows tenths is fine enough
     * without probes. */
    if (dev_us % 1000000 != 0)
        t->clock_fine = true;
    t->clock_seen = true;
    fs_sink_clock_prober_reading(t->sink, &t->prober, dev_us, t->clock_fine ? 100000 : 1000000,
                                 sent_us, received_us, probe);
}

static bool
oid_under(const oid *o, size_t len, const oid *root, size_t rlen)
{
    return len > rlen && memcmp(o, root, rlen * sizeof(oid)) == 0;
}

static void next_phase(struct snmp_target *t);

/* Sends the next GETBULK of the current phase, or moves on when every column is done. */
static void
walk_continue(struct snmp_target *t)
{
    netsnmp_pdu *pdu = snmp_pdu_create(SNMP_MSG_GETBULK);
    size_t n = 0;
    if (!pdu) {
        cycle_end(t, FS_POLL_PROTOCOL, "out of memory");
        return;
    }
    for (size_t i = 0; i < t->ncols; i++) {
        if (t->cols[i].done)
            continue;
        snmp_add_null_var(pdu, t->cols[i].cur, t->cols[i].cur_len);
        n++;
    }
    if (n == 0) {
        snmp_free_pdu(pdu);
        next_phase(t);
        return;
    }
    pdu->non_repeaters = 0;
    pdu->max_repetitions = t->reps;
    if (send_pdu(t, pdu) != 0)
        cycle_end(t, FS_POLL_PROTOCOL, "send failed");
}

/* Starts a multi-column walk of the n columns in req. */
static void
walk_start(struct snmp_target *t, const struct fs_snmp_req_oid *req, size_t n)
{
    t->ncols = n;
    for (size_t i = 0; i < n; i++) {
        struct walkcol *w = &t->cols[i];
        memcpy(w->root, req[i].oid, req[i].len * sizeof(oid));
        w->root_len = req[i].len;
        memcpy(w->cur, req[i].oid, req[i].len * sizeof(oid));
        w->cur_len = req[i].len;
        w->done = false;
    }
    walk_continue(t);
}

static void
phase_begin(struct snmp_target *t)
{
    struct fs_snmp_req_oid req[MAX_COLS];
    size_t n = fs_snmp_phase_oids(t->ph, &t->tm, &t->poll, req, MAX_COLS);
    if (n == 0) {
        next_phase(t);
        return;
    }
    if (t->ph == FS_SNMP_PH_SCALARS) {
        netsnmp_pdu *pdu = snmp_pdu_create(SNMP_MSG_GET);
        if (!pdu) {
            cycle_end(t, FS_POLL_PROTOCOL, "out of memory");
            return;
        }
        for (size_t i = 0; i < n; i++)
            snmp_add_null_var(pdu, (const oid *)req[i].oid, req[i].len);
        snmp_add_null_var(pdu, oid_hrsystemdate, OID_LENGTH(oid_hrsystemdate));
        if (t->lldp_due) {
            /* The switch's own LLDP identity rides with the scalars. */
            struct fs_snmp_req_oid lr[4];
            size_t ln = fs_snmp_lldp_scalars(lr, 4);
            for (size_t i = 0; i < ln; i++)
                snmp_add_null_var(pdu, (const oid *)lr[i].oid, lr[i].len);
        }
        t->ncols = 0;
        if (send_pdu(t, pdu) != 0)
            cycle_end(t, FS_POLL_PROTOCOL, "send failed");
        return;
    }
    walk_start(t, req, n);
}

/* How often the table is read: at the first cycle at least lldp_interval after the last
 * read, so a whole number of intervals. */
static int64_t
lldp_period_us(const struct fs_snmp_cfg *c)
{
    int64_t iv = c->interval_us > 0 ? c->interval_us : 10000000;
    int64_t l = c->lldp_interval_us > iv ? c->lldp_interval_us : iv;
    return (l + iv - 1) / iv * iv;
}

/* The LLDP read's samples-free end: the neighbours to the sink, then the table end. */
static void
lldp_done(struct snmp_target *t)
{
    t->in_lldp = false;
    if (!t->lldp.truncated) {
        struct fs_snmp_lldp_emit e = {.arg = t, .local = em_lldp_local, .neighbor = em_lldp_nb};
        t->lldp_neighbors = fs_snmp_lldp_finish(&t->lldp, &t->tm, &e);
        /* An agent without LLDP-MIB has an empty table: links it reported before (it lost
         * the MIB, e.g. lldpd stopped) go at once, like any table that no longer has them. */
        fs_sink_lldp_end(t->sink, lldp_period_us(t->snmp));
        t->lldp_mib = t->lldp.seen;
        t->lldp_reads++;
    } else {
        /* More rows than kept: what came is renewed, nothing is dropped on a read that
         * did not hold the whole table. */
        struct fs_snmp_lldp_emit e = {.arg = t, .local = em_lldp_local, .neighbor = em_lldp_nb};
        t->lldp_neighbors = fs_snmp_lldp_finish(&t->lldp, &t->tm, &e);
        t->lldp_cut++;
    }
    cycle_end(t, FS_POLL_OK, NULL);
}

/*
 * After the counter walks of a cycle that reads LLDP: their samples go to the sink now,
 * so the neighbour table never delays them, then lldpLocPortTable and lldpRemTable are
 * walked under the same deadline. An agent without LLDP-MIB answers past the columns at
 * once (an empty, complete table).
 */
static void
lldp_begin(struct snmp_target *t)
{
    struct fs_snmp_req_oid req[MAX_COLS];
    emit_counters(t, FS_POLL_OK);
    t->lldp_last_us = t->start_us; /* even if cut: the next try waits its interval */
    t->in_lldp = true;
    t->ph = FS_SNMP_PH_COUNT; /* no counter phase: walk_turn and the phase order stay out */
    t->reps = t->snmp->max_repetitions > 0 ? t->snmp->max_repetitions : 50;
    size_t n = fs_snmp_lldp_columns(req, MAX_COLS);
    walk_start(t, req, n);
}

/* The counter walks are over: the cycle ends, or goes on with the neighbour table. */
static void
counters_done(struct snmp_target *t)
{
    if (t->lldp_due && !t->in_lldp)
        lldp_begin(t);
    else
        cycle_end(t, FS_POLL_OK, NULL);
}

/* The phase after ph in this cycle's order: scalars, map, then the interface data and the
 * QoS tables in the order walk_first says; FS_SNMP_PH_COUNT after the last. */
static enum fs_snmp_phase
phase_after(const struct snmp_target *t, enum fs_snmp_phase ph)
{
    bool qos_first = t->walk_first == FS_SNMP_PH_QOS;
    switch (ph) {
    case FS_SNMP_PH_SCALARS:
        return FS_SNMP_PH_IFMAP;
    case FS_SNMP_PH_IFMAP:
        return qos_first ? FS_SNMP_PH_QOS : FS_SNMP_PH_IFDATA;
    case FS_SNMP_PH_IFDATA:
        return FS_SNMP_PH_IFFALLBACK;
    case FS_SNMP_PH_IFFALLBACK:
        return qos_first ? FS_SNMP_PH_COUNT : FS_SNMP_PH_QOS;
    case FS_SNMP_PH_QOS:
        return qos_first ? FS_SNMP_PH_IFDATA : FS_SNMP_PH_COUNT;
    case FS_SNMP_PH_COUNT:
        break;
    }
    return FS_SNMP_PH_COUNT;
}

/*
 * Picks the next cycle's first walk after a cycle that ended early. A switch whose whole
 * poll does not fit its interval would otherwise never deliver the tables walked last,
 * and those are the queue, ECN and PFC counters. When the schedule cut the cycle (its
 * deadline, a cancel, or a request whose timeout had been shrunk to the time left) in the
 * walk that came second, that walk goes first next time; when it cut the first walk, the
 * other one gets the next turn, so each is polled at least every other cycle. A request
 * that timed out with its whole configured timeout is the table being slow, not the
 * schedule: the order goes back to interface data first, which never waits on the slow
 * table.
 */
static void
walk_turn(struct snmp_target *t, bool by_schedule)
{
    if (t->ph != FS_SNMP_PH_IFDATA && t->ph != FS_SNMP_PH_IFFALLBACK && t->ph != FS_SNMP_PH_QOS)
        return;
    if (t->map_again)
        return;
    enum fs_snmp_phase cut = t->ph == FS_SNMP_PH_QOS ? FS_SNMP_PH_QOS : FS_SNMP_PH_IFDATA;
    if (!by_schedule)
        t->walk_first = FS_SNMP_PH_IFDATA;
    else if (cut != t->walk_first)
        t->walk_first = cut;
    else
        t->walk_first = cut == FS_SNMP_PH_QOS ? FS_SNMP_PH_IFDATA : FS_SNMP_PH_QOS;
}

static void
next_phase(struct snmp_target *t)
{
    if (t->in_lldp) {
        lldp_done(t);
        return;
    }
    if (t->map_again) {
        /* The second IFMAP walk (unknown ifIndex) was the last phase. */
        counters_done(t);
        return;
    }
    enum fs_snmp_phase nx = phase_after(t, t->ph);
    if (nx != FS_SNMP_PH_COUNT) {
        t->ph = nx;
        phase_begin(t);
        return;
    }
    if (t->poll.unknown_index && !t->poll.did_map) {
        t->map_again = true;
        t->ph = FS_SNMP_PH_IFMAP;
        phase_begin(t);
        return;
    }
    counters_done(t);
}

static void
vb_convert(const netsnmp_variable_list *v, struct fs_snmp_vb *vb)
{
    memset(vb, 0, sizeof(*vb));
    vb->oid = (const unsigned long *)v->name;
    vb->oid_len = v->name_length;
    switch (v->type) {
    case ASN_INTEGER:
        vb->type = FS_VT_INTEGER;
        vb->i = v->val.integer ? *v->val.integer : 0;
        break;
    case ASN_OCTET_STR:
        vb->type = FS_VT_OCTETS;
        vb->str = v->val.string;
        vb->str_len = v->val.string ? v->val_len : 0;
        break;
    case ASN_OBJECT_ID:
        vb->type = FS_VT_OID;
        vb->oidv = (const unsigned long *)v->val.objid;
        vb->oidv_len = v->val.objid ? v->val_len / sizeof(oid) : 0;
        break;
    case ASN_COUNTER:
    case ASN_GAUGE:
    case ASN_TIMETICKS:
        vb->type = v->type == ASN_COUNTER ? FS_VT_COUNTER32
                   : v->type == ASN_GAUGE ? FS_VT_GAUGE32
                                          : FS_VT_TIMETICKS;
        vb->u = v->val.integer ? (uint64_t)(*(const u_long *)v->val.integer & 0xffffffffUL) : 0;
        break;
    case ASN_COUNTER64:
        vb->type = FS_VT_COUNTER64;
        if (v->val.counter64)
            vb->u = ((uint64_t)(v->val.counter64->high & 0xffffffffUL) << 32) |
                    (v->val.counter64->low & 0xffffffffUL);
        break;
    case ASN_NULL:
        vb->type = FS_VT_NULL;
        break;
    case SNMP_NOSUCHOBJECT:
        vb->type = FS_VT_NOSUCHOBJECT;
        break;
    case SNMP_NOSUCHINSTANCE:
        vb->type = FS_VT_NOSUCHINSTANCE;
        break;
    case SNMP_ENDOFMIBVIEW:
        vb->type = FS_VT_ENDOFMIBVIEW;
        break;
    default:
        vb->type = FS_VT_OTHER;
        break;
    }
}

/* Feeds a GETBULK response to the walk: the varbinds come row-major over the columns
 * that were still active when the request was built. */
static int
walk_response(struct snmp_target *t, netsnmp_pdu *pdu)
{
    size_t act[MAX_COLS], nact = 0;
    for (size_t i = 0; i < t->ncols; i++)
        if (!t->cols[i].done)
            act[nact++] = i;
    if (nact == 0)
        return 0;
    bool progress[MAX_COLS] = {false};
    size_t k = 0;
    for (netsnmp_variable_list *v = pdu->variables; v; v = v->next_variable, k++) {
        struct walkcol *w = &t->cols[act[k % nact]];
        if (w->done)
            continue;
        bool beyond = v->type == SNMP_ENDOFMIBVIEW ||
                      !oid_under(v->name, v->name_length, w->root, w->root_len) ||
                      v->name_length > FS_SNMP_OID_MAX;
        /* A non-increasing OID would loop forever: end the column there. */
        if (!beyond && snmp_oid_compare(v->name, v->name_length, w->cur, w->cur_len) <= 0)
            beyond = true;
        if (beyond) {
            w->done = true;
            continue;
        }
        struct fs_snmp_vb vb;
        vb_convert(v, &vb);
        int rc =
            t->in_lldp ? fs_snmp_lldp_add(&t->lldp, &vb) : fs_snmp_poll_add(&t->poll, &t->tm, &vb);
        if (rc == -2) { /* past the interfaces kept: the rest of this column is unused */
            w->done = true;
            continue;
        }
        if (rc == -1) { /* a per-cycle bound: this phase ends here (counted truncation) */
            for (size_t i = 0; i < t->ncols; i++)
                t->cols[i].done = true;
            return 0;
        }
        memcpy(w->cur, v->name, v->name_length * sizeof(oid));
        w->cur_len = v->name_length;
        progress[act[k % nact]] = true;
    }
    /* An agent that returned nothing for a column, without ending it, is broken. */
    for (size_t i = 0; i < nact; i++)
        if (!t->cols[act[i]].done && !progress[act[i]] && k >= nact)
            t->cols[act[i]].done = true;
    if (k == 0)
        return -1;
    return 0;
}

static enum fs_poll_result
report_result(netsnmp_pdu *pdu, const char **msg)
{
    int rt = snmpv3_get_report_type(pdu);
    switch (rt) {
    case SNMPERR_UNKNOWN_USER_NAME:
        *msg = "unknown SNMPv3 user";
        return FS_POLL_AUTH;
    case SNMPERR_AUTHENTICATION_FAILURE:
        *msg = "SNMPv3 authentication failed (wrong password?)";
        return FS_POLL_AUTH;
    case SNMPERR_UNSUPPORTED_SEC_LEVEL:
        *msg = "SNMPv3 security level not supported by the agent";
        return FS_POLL_AUTH;
    case SNMPERR_DECRYPTION_ERR:
        *msg = "SNMPv3 decryption failed (wrong priv password?)";
        return FS_POLL_AUTH;
    case SNMPERR_NOT_IN_TIME_WINDOW:
        *msg = "SNMPv3 not in time window";
        return FS_POLL_AUTH;
    default:
        *msg = "unexpected report PDU";
        return FS_POLL_PROTOCOL;
    }
}

static void v3_discover(struct snmp_target *t);

static int
on_response(int op, netsnmp_session *sess, int reqid, netsnmp_pdu *pdu, void *magic)
{
    struct snmp_target *t = magic;
    (void)sess;
    /* An unauthenticated Report (wrong digest, unknown user) cannot carry the request id
     * (the scoped PDU was not readable); net-snmp matched it by msgID and passes 0. */
    bool report0 = reqid == 0 && pdu && pdu->command == SNMP_MSG_REPORT && t->reqid;
    if (!t->in_cycle || (reqid != t->reqid && !report0))
        return 1; /* a late answer to a cycle that already ended */
    /* net-snmp retransmits (a retry of this very request): nothing ended. */
    if (op == NETSNMP_CALLBACK_OP_RESEND)
        return 1;
    t->reqid = 0;
    if (op == NETSNMP_CALLBACK_OP_TIMED_OUT) {
        /* A table too slow for what is left of the cycle: keep what arrived. */
        walk_turn(t, t->req_timeout_us < cfg_timeout_us(t->snmp));
        if (t->poll.n_pdus > 0)
            cycle_end(t, FS_POLL_PARTIAL, "a request timed out: what arrived was kept");
        else
            cycle_end(t, FS_POLL_TIMEOUT,
                      t->snmp->version == FS_SNMP_V3 ? "timeout" : "timeout (or wrong community)");
        return 1;
    }
    if (op == NETSNMP_CALLBACK_OP_SEC_ERROR && pdu && pdu->command == SNMP_MSG_REPORT) {
        const char *msg;
        enum fs_poll_result r = report_result(pdu, &msg);
        cycle_end(t, r, msg);
        return 1;
    }
    if (op == NETSNMP_CALLBACK_OP_SEC_ERROR) {
        cycle_end(t, FS_POLL_AUTH, "SNMPv3 security error");
        return 1;
    }
    if (op != NETSNMP_CALLBACK_OP_RECEIVED_MESSAGE || !pdu) {
        cycle_end(t, FS_POLL_PROTOCOL, "send failed or disconnected");
        return 1;
    }
    if (pdu->command == SNMP_MSG_REPORT) {
        const char *msg;
        enum fs_poll_result r = report_result(pdu, &msg);
        cycle_end(t, r, msg);
        return 1;
    }
    if (pdu->command != SNMP_MSG_RESPONSE) {
        cycle_end(t, FS_POLL_PROTOCOL, "unexpected PDU type");
        return 1;
    }
    if (++t->pdus > FS_SNMP_MAX_PDUS ||
        (!t->in_lldp && fs_snmp_poll_pdu(&t->poll, fs_realtime_us()) != 0)) {
        t->poll.truncated = true;
        cycle_end(t, FS_POLL_PARTIAL, "too many PDUs in one cycle: what arrived was kept");
        return 1;
    }
    if (pdu->errstat == SNMP_ERR_TOOBIG && t->ph != FS_SNMP_PH_SCALARS && t->reps > 1) {
        t->reps /= 2; /* the agent could not fit the answer: ask for fewer rows */
        walk_continue(t);
        return 1;
    }
    if (pdu->errstat != SNMP_ERR_NOERROR) {
        char msg[96];
        snprintf(msg, sizeof(msg), "agent error %ld (%s)", pdu->errstat,
                 snmp_errstring((int)pdu->errstat));
        cycle_end(t, FS_POLL_PROTOCOL, msg);
        return 1;
    }
    if (t->ph == FS_SNMP_PH_SCALARS) {
        int64_t received_us = fs_realtime_us();
        for (netsnmp_variable_list *v = pdu->variables; v; v = v->next_variable) {
            int64_t dev_us;
            if (hrsystemdate_of(v, &dev_us)) {
                clock_reading(t, dev_us, t->sent_real_us, received_us, false);
                continue;
            }
            if (snmp_oid_compare(v->name, v->name_length, oid_hrsystemdate,
                                 OID_LENGTH(oid_hrsystemdate)) == 0)
                continue; /* noSuchObject or not a DateAndTime: no clock here */
            if (oid_under(v->name, v->name_length, oid_lldp, OID_LENGTH(oid_lldp))) {
                struct fs_snmp_vb lv;
                vb_convert(v, &lv);
                fs_snmp_lldp_add(&t->lldp, &lv);
                continue;
            }
            struct fs_snmp_vb vb;
            vb_convert(v, &vb);
            fs_snmp_poll_add(&t->poll, &t->tm, &vb);
        }
        next_phase(t);
        return 1;
    }
    if (walk_response(t, pdu) != 0) {
        cycle_end(t, FS_POLL_PARSE, "empty walk response");
        return 1;
    }
    walk_continue(t);
    return 1;
}

/* v3 engineID discovery without blocking: a noAuth GET with an empty user, whose Report
 * carries the agent's engineID; then the USM user is created for that engine. */
static int
on_discovery(int op, netsnmp_session *sess, int reqid, netsnmp_pdu *pdu, void *magic)
{
    struct snmp_target *t = magic;
    if (!t->in_cycle || reqid != t->reqid || op == NETSNMP_CALLBACK_OP_RESEND)
        return 1;
    t->reqid = 0;
    if (op == NETSNMP_CALLBACK_OP_TIMED_OUT) {
        cycle_end(t, FS_POLL_TIMEOUT, "timeout (SNMPv3 engine discovery)");
        return 1;
    }
    /* net-snmp hands the usmStatsUnknownEngineIDs report over as a security error. */
    if ((op != NETSNMP_CALLBACK_OP_RECEIVED_MESSAGE && op != NETSNMP_CALLBACK_OP_SEC_ERROR) ||
        !pdu || !pdu->securityEngineIDLen || pdu->securityEngineIDLen > 32) {
        cycle_end(t, FS_POLL_PROTOCOL, "SNMPv3 engine discovery failed");
        return 1;
    }
    free(sess->securityEngineID);
    sess->securityEngineID = netsnmp_memdup(pdu->securityEngineID, pdu->securityEngineIDLen);
    sess->securityEngineIDLen = sess->securityEngineID ? pdu->securityEngineIDLen : 0;
    if (!sess->contextEngineIDLen) {
        free(sess->contextEngineID);
        sess->contextEngineID = netsnmp_memdup(pdu->securityEngineID, pdu->securityEngineIDLen);
        sess->contextEngineIDLen = sess->contextEngineID ? pdu->securityEngineIDLen : 0;
    }
    if (!sess->securityEngineIDLen || usm_create_user_from_session(sess) != SNMPERR_SUCCESS) {
        cycle_end(t, FS_POLL_AUTH, "cannot set up the SNMPv3 user");
        return 1;
    }
    t->v3_ready = true;
    phase_begin(t);
    return 1;
}

static void
v3_discover(struct snmp_target *t)
{
    netsnmp_pdu *pdu = snmp_pdu_create(SNMP_MSG_GET);
    if (!pdu) {
        cycle_end(t, FS_POLL_PROTOCOL, "out of memory");
        return;
    }
    pdu->version = SNMP_VERSION_3;
    pdu->securityName = strdup("");
    pdu->securityNameLen = 0;
    pdu->securityLevel = SNMP_SEC_LEVEL_NOAUTH;
    pdu->securityModel = SNMP_SEC_MODEL_USM;
    const struct fs_snmp_cfg *c = t->snmp;
    netsnmp_session *ss = snmp_sess_session(t->sessp);
    int64_t left = t->deadline_us - fs_monotonic_us();
    int64_t to = c->timeout_us > 0 ? c->timeout_us : 2000000;
    if (to > left)
        to = left > MIN_TIMEOUT_US ? left : MIN_TIMEOUT_US;
    ss->timeout = (long)to;
    ss->retries = 0;
    t->req_timeout_us = to;
    t->timer_us = fs_monotonic_us() + to;
    int id = snmp_sess_async_send(t->sessp, pdu, on_discovery, t);
    if (id == 0) {
        snmp_free_pdu(pdu);
        cycle_end(t, FS_POLL_PROTOCOL, "send failed");
        return;
    }
    t->reqid = id;
}

/* ---- clock probes (see the top of the file) ---- */

/* Plans the next probe (t->prober.at_us) when the target is idle: a session, no cycle,
 * no probe in flight; the prober says why none is planned. Called whenever the target
 * becomes idle (a cycle or a probe ended). */
static void
plan_probe(struct snmp_target *t)
{
    t->prober.at_us = 0;
    if (t->in_cycle || t->removed_pending || !t->sessp || !t->v3_ready || t->probe_reqid) {
        probe_list_sync(t);
        return;
    }
    if (!t->clock_seen) {
        fs_clock_prober_off(&t->prober, "off (no hrSystemDate in the polls)");
    } else if (t->clock_fine) {
        fs_clock_prober_off(&t->prober, "off (the device clock shows tenths of a second)");
    } else {
        struct fs_clock_prober_now n = {
            .now_us = fs_realtime_us(),
            .now_mono_us = fs_monotonic_us(),
            .cycle_start_us = t->cycle_start_real_us,
            .interval_us = fs_snmp_config_interval(t->snmp), /* the scheduler's period */
        };
        n.known = fs_sink_clock_estimate(t->sink, &n.offset_us, &n.uncertainty_us);
        fs_clock_prober_plan(&t->prober, &n);
    }
    probe_list_sync(t);
}

/* The probe's answer (or its timeout, or an error): one more measurement for the core's
 * filter, and the next probe planned. */
static int
on_probe(int op, netsnmp_session *sess, int reqid, netsnmp_pdu *pdu, void *magic)
{
    struct snmp_target *t = magic;
    (void)sess;
    const int64_t received_us = fs_realtime_us();
    /* An unauthenticated Report comes with request id 0 (see on_response). */
    bool report0 = reqid == 0 && pdu && pdu->command == SNMP_MSG_REPORT && t->probe_reqid;
    if ((reqid != t->probe_reqid && !report0) || op == NETSNMP_CALLBACK_OP_RESEND)
        return 1;
    t->probe_reqid = 0;
    if (t->removed_pending) /* the session is closing: nothing more goes to the sink */
        return 1;
    int64_t dev_us;
    if (op == NETSNMP_CALLBACK_OP_TIMED_OUT) {
        if (fs_clock_prober_dropped(&t->prober, fs_monotonic_us()))
            fs_log(FS_LOG_INFO, SUBSYS,
                   "target %s: %d clock probes did not narrow the offset (timeouts); pausing "
                   "probes",
                   t->tcfg->name, FS_CLOCK_PROBER_NO_GAIN_MAX);
    } else if (op == NETSNMP_CALLBACK_OP_RECEIVED_MESSAGE && pdu &&
               pdu->command == SNMP_MSG_RESPONSE && pdu->errstat == SNMP_ERR_NOERROR &&
               pdu->variables && hrsystemdate_of(pdu->variables, &dev_us)) {
        clock_reading(t, dev_us, t->probe_sent_real_us, received_us, true);
    } else {
        fs_log(FS_LOG_WARN, SUBSYS,
               "target %s: clock probe: no hrSystemDate in the answer (%s); probes paused",
               t->tcfg->name,
               op != NETSNMP_CALLBACK_OP_RECEIVED_MESSAGE || !pdu ? "security error or no answer"
               : pdu->errstat != SNMP_ERR_NOERROR ? snmp_errstring((int)pdu->errstat)
                                                  : "not a DateAndTime");
        fs_clock_prober_failed(&t->prober, fs_monotonic_us());
    }
    plan_probe(t);
    update_detail(t);
    return 1;
}

/* Sends the planned probe: a GET of hrSystemDate.0 alone, no retries (a late answer is
 * useless and a retransmission would blur the send time). */
static void
send_probe(struct snmp_target *t)
{
    const struct fs_snmp_cfg *c = t->snmp;
    int64_t off, unc;
    t->prober.at_us = 0;
    netsnmp_pdu *pdu = NULL;
    if (!fs_sink_clock_estimate(t->sink, &off, &unc))
        goto out;
    pdu = snmp_pdu_create(SNMP_MSG_GET);
    if (!pdu)
        goto out;
    snmp_add_null_var(pdu, oid_hrsystemdate, OID_LENGTH(oid_hrsystemdate));
    int64_t to = 10 * fs_clock_prober_rtt(&t->prober);
    if (to < PROBE_TIMEOUT_MIN_US)
        to = PROBE_TIMEOUT_MIN_US;
    if (c->timeout_us > 0 && to > c->timeout_us)
        to = c->timeout_us;
    netsnmp_session *ss = snmp_sess_session(t->sessp);
    ss->timeout = (long)to;
    ss->retries = 0;
    t->probe_timer_us = fs_monotonic_us() + to;
    t->probe_sent_real_us = fs_realtime_us(); /* before the send: the bound stays honest */
    t->probe_reqid = snmp_sess_async_send(t->sessp, pdu, on_probe, t);
    if (t->probe_reqid == 0) {
        fs_log(FS_LOG_WARN, SUBSYS, "target %s: clock probe: send failed; probes paused",
               t->tcfg->name);
        fs_clock_prober_failed(&t->prober, fs_monotonic_us());
        goto out;
    }
    pdu = NULL; /* net-snmp's now */
    fs_clock_prober_sent(&t->prober, off, unc);
out:
    if (pdu)
        snmp_free_pdu(pdu);
    if (t->probe_reqid == 0)
        plan_probe(t);
    else
        probe_list_sync(t);
}

/* Sends the probes that are due; a probe that became late (the thread was busy) is
 * planned again rather than sent with a lopsided cut. */
static void
run_due_probes(struct snmp_drv *d)
{
    for (struct snmp_target *t = d->probing, *next; t; t = next) {
        next = t->plink.next;
        int due = fs_clock_prober_due(&t->prober, fs_realtime_us());
        if (due > 0)
            send_probe(t);
        else if (due < 0)
            plan_probe(t);
    }
}

/* Arms the timerfd for the earliest planned probe. */
static void
arm_probe_timer(struct snmp_drv *d)
{
    int64_t first = 0;
    for (struct snmp_target *t = d->probing; t; t = t->plink.next)
        if (t->prober.at_us > 0 && (first == 0 || t->prober.at_us < first))
            first = t->prober.at_us;
    if (first == d->tfd_armed_us)
        return;
    /* 0 disarms */
    struct itimerspec its = {.it_value = {.tv_sec = (time_t)(first / 1000000),
                                          .tv_nsec = (long)(first % 1000000) * 1000}};
    if (timerfd_settime(d->tfd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
        d->tfd_armed_us = first;
}

/* Opens the session if needed (once the preparation is ready) and starts the walk; a
 * cycle whose preparation is still running waits for RQ_PREPARED (or its deadline). */
static void
session_go(struct snmp_target *t)
{
    char err[256];
    if (!t->sessp) {
        struct prep_out o;
        enum prep_state st = PREP_PENDING;
        bool gone = false;
        pthread_mutex_lock(&t->drv->plock);
        if (!t->job)
            gone = true;
        else if ((st = t->job->out.state) != PREP_PENDING)
            o = t->job->out;
        pthread_mutex_unlock(&t->drv->plock);
        if (gone) {
            cycle_end(t, FS_POLL_TIMEOUT, "target removed");
            return;
        }
        if (st == PREP_PENDING) {
            t->wait_prep = true;
            return;
        }
        if (st == PREP_FAILED) {
            cycle_end(t, o.fail_kind, o.err);
            return;
        }
        int rc = open_session(t, &o, err, sizeof(err));
        explicit_bzero(&o, sizeof(o));
        if (rc != 0) {
            fs_log(FS_LOG_WARN, SUBSYS, "target %s: %s", t->tcfg->name, err);
            cycle_end(t, FS_POLL_PROTOCOL, err);
            return;
        }
        /* The session holds its own copy of the keys now. */
        pthread_mutex_lock(&t->drv->plock);
        if (t->job) {
            explicit_bzero(t->job->out.community, sizeof(t->job->out.community));
            explicit_bzero(t->job->out.auth_key, sizeof(t->job->out.auth_key));
            explicit_bzero(t->job->out.priv_key, sizeof(t->job->out.priv_key));
        }
        pthread_mutex_unlock(&t->drv->plock);
    }
    if (!t->v3_ready)
        v3_discover(t);
    else
        phase_begin(t);
}

static void
cycle_begin(struct snmp_drv *d, struct snmp_target *t, uint64_t id, int64_t deadline)
{
    t->cycle_id = id;
    t->deadline_us = deadline;
    t->start_us = fs_monotonic_us();
    t->in_cycle = true;
    t->reqid = 0;
    t->pdus = 0;
    t->map_again = false;
    t->reps = t->snmp->max_repetitions > 0 ? t->snmp->max_repetitions : 50;
    t->ph = FS_SNMP_PH_SCALARS;
    if (t->walk_first == FS_SNMP_PH_QOS)
        t->qos_first_cycles++;
    fs_snmp_poll_reset(&t->poll);
    t->counters_emitted = false;
    t->in_lldp = false;
    t->lldp_due = t->snmp->lldp && (t->lldp_last_us == 0 ||
                                    t->start_us - t->lldp_last_us >= t->snmp->lldp_interval_us);
    if (t->lldp_due)
        fs_snmp_lldp_reset(&t->lldp);
    t->cycle_start_real_us = fs_realtime_us();
    /* A probe planned for later is dropped: probes go between cycles only (one in flight
     * runs on; its answer is handled by its own callback). */
    t->prober.at_us = 0;
    probe_list_sync(t);
    tlist_add(&d->active, t, ALINK);
    session_go(t);
}

static void
handle_queue(struct snmp_drv *d)
{
    pthread_mutex_lock(&d->qlock);
    struct rq *r = d->qhead;
    d->qhead = d->qtail = NULL;
    pthread_mutex_unlock(&d->qlock);
    while (r) {
        struct rq *next = r->next;
        struct snmp_target *t = r->t;
        switch (r->kind) {
        case RQ_CYCLE:
            if (!t->removed)
                cycle_begin(d, t, r->cycle_id, r->deadline_us);
            break;
        case RQ_CANCEL:
            /* The scheduler cancels at the deadline: keep what arrived, as there. */
            if (t->in_cycle)
                walk_turn(t, true);
            if (t->in_cycle && t->poll.n_pdus > 0)
                cycle_end(t, FS_POLL_PARTIAL, "cancelled at the deadline: what arrived was kept");
            else
                cycle_end(t, FS_POLL_TIMEOUT, "cancelled");
            break;
        case RQ_PREPARED:
            if (t->in_cycle && t->wait_prep) {
                t->wait_prep = false;
                session_go(t);
            }
            break;
        case RQ_REMOVE:
            t->removed_pending = true;
            cycle_end(t, FS_POLL_TIMEOUT, "target removed");
            close_session(t); /* frees a probe in flight too */
            t->probe_reqid = 0;
            t->prober.at_us = 0;
            probe_list_sync(t);
            pthread_mutex_lock(&d->qlock);
            t->removed = true;
            pthread_cond_broadcast(&d->qcond);
            pthread_mutex_unlock(&d->qlock);
            break;
        }
        free(r);
        r = next;
    }
}

static void
check_timers(struct snmp_drv *d)
{
    int64_t now = fs_monotonic_us();
    for (struct snmp_target *t = d->active, *next; t; t = next) {
        next = t->alink.next;
        if (now >= t->deadline_us) {
            if (t->wait_prep)
                cycle_end(t, FS_POLL_TIMEOUT, "address or keys not ready (resolving)");
            else if ((walk_turn(t, true), t->poll.n_pdus > 0))
                cycle_end(t, FS_POLL_PARTIAL, "cycle deadline passed: what arrived was kept");
            else
                cycle_end(t, FS_POLL_TIMEOUT, "cycle deadline passed");
        } else if (t->reqid && now >= t->timer_us) {
            /* net-snmp retransmits or reports the timeout through on_response(). */
            snmp_sess_timeout(t->sessp);
            if (t->in_cycle && t->reqid)
                t->timer_us = now + t->req_timeout_us;
        }
    }
    for (struct snmp_target *t = d->probing, *next; t; t = next) {
        next = t->plink.next;
        if (t->probe_reqid && now >= t->probe_timer_us) {
            /* net-snmp reports the probe's timeout through on_probe(). */
            snmp_sess_timeout(t->sessp);
            if (t->probe_reqid)
                t->probe_timer_us = now + MIN_TIMEOUT_US;
        }
    }
}

static int
next_wait_ms(struct snmp_drv *d)
{
    int64_t now = fs_monotonic_us(), next = now + 1000000;
    for (struct snmp_target *t = d->active; t; t = t->alink.next) {
        if (t->deadline_us < next)
            next = t->deadline_us;
        if (t->reqid && t->timer_us < next)
            next = t->timer_us;
    }
    for (struct snmp_target *t = d->probing; t; t = t->plink.next)
        if (t->probe_reqid && t->probe_timer_us < next)
            next = t->probe_timer_us;
    int64_t ms = (next - now + 999) / 1000;
    return ms < 0 ? 0 : (int)ms;
}

static void *
drv_thread(void *arg)
{
    struct snmp_drv *d = arg;
    struct epoll_event evs[64];
    netsnmp_start();
    pthread_mutex_lock(&d->plock);
    d->lib_ready = true;
    pthread_cond_broadcast(&d->pcond);
    pthread_mutex_unlock(&d->plock);
    netsnmp_large_fd_set_init(&d->lfs, 1024);
    d->lfs_size = 1024;
    for (;;) {
        pthread_mutex_lock(&d->qlock);
        bool stop = d->stop && !d->qhead;
        pthread_mutex_unlock(&d->qlock);
        if (stop)
            break;
        int n = epoll_wait(d->epfd, evs, 64, next_wait_ms(d));
        bool queued = false;
        for (int i = 0; i < n; i++) {
            if (evs[i].data.ptr == NULL) {
                queued = true;
                continue;
            }
            if (evs[i].data.ptr == &d->tfd) {
                uint64_t expirations;
                ssize_t r = read(d->tfd, &expirations, sizeof(expirations));
                (void)r;
                d->tfd_armed_us = 0; /* one-shot: spent */
                continue;
            }
            struct snmp_target *t = evs[i].data.ptr;
            if (!t->sessp || t->fd < 0)
                continue;
            NETSNMP_LARGE_FD_SET(t->fd, &d->lfs);
            snmp_sess_read2(t->sessp, &d->lfs);
            if (t->fd >= 0)
                NETSNMP_LARGE_FD_CLR(t->fd, &d->lfs);
        }
        /* The queue last: a removal it handles lets the remover free the target, and
         * later events of this batch may still point at it (level-triggered epoll
         * reports the sockets again on the next wait). */
        if (queued) {
            uint64_t v;
            ssize_t r = read(d->evfd, &v, sizeof(v));
            (void)r;
            handle_queue(d);
        }
        check_timers(d);
        run_due_probes(d);
        arm_probe_timer(d);
    }
    netsnmp_large_fd_set_cleanup(&d->lfs);
    snmp_shutdown("fabricscope");
    return NULL;
}

/* ---- the vtable ---- */

static void
raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rlim_t old = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
            fs_log(FS_LOG_DEBUG, SUBSYS, "RLIMIT_NOFILE raised from %llu to %llu",
                   (unsigned long long)old, (unsigned long long)rl.rlim_max);
    }
}

static void snmp_shutdown_drv(void *state);

static int
snmp_init(void **state, char *errbuf, size_t errlen)
{
    struct snmp_drv *d = calloc(1, sizeof(*d));
    int rc = FS_DRV_ERR;
    if (!d) {
        snprintf(errbuf, errlen, "out of memory");
        goto out;
    }
    d->epfd = d->evfd = d->tfd = -1;
    pthread_mutex_init(&d->qlock, NULL);
    pthread_cond_init(&d->qcond, NULL);
    pthread_mutex_init(&d->plock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&d->pcond, &ca);
    pthread_condattr_destroy(&ca);
    raise_nofile();
    d->epfd = epoll_create1(EPOLL_CLOEXEC);
    d->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    d->tfd = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    struct epoll_event tev = {.events = EPOLLIN, .data.ptr = &d->tfd};
    if (d->epfd < 0 || d->evfd < 0 || d->tfd < 0 ||
        epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->evfd, &ev) != 0 ||
        epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->tfd, &tev) != 0) {
        snprintf(errbuf, errlen, "epoll/eventfd/timerfd: %s", strerror(errno));
        goto out;
    }
    if (pthread_create(&d->thr, NULL, drv_thread, d) != 0) {
        snprintf(errbuf, errlen, "cannot start the SNMP thread");
        goto out;
    }
    d->thr_started = true;
    if (pthread_create(&d->prep_thr, NULL, prep_thread, d) != 0) {
        snprintf(errbuf, errlen, "cannot start the SNMP preparation thread");
        goto out;
    }
    d->prep_started = true;
    *state = d;
    d = NULL;
    rc = FS_DRV_OK;
out:
    if (d)
        snmp_shutdown_drv(d);
    return rc;
}

static void
snmp_shutdown_drv(void *state)
{
    struct snmp_drv *d = state;
    if (!d)
        return;
    bool left_behind = false;
    if (d->prep_started) {
        /* A name lookup may take the resolver's whole timeout: shutdown waits 2 s for it
         * at most, then leaves the thread (and d, which it uses) to the process's exit. */
        int64_t until = fs_monotonic_us() + 2000000;
        struct timespec ts = {.tv_sec = until / 1000000, .tv_nsec = (long)(until % 1000000) * 1000};
        pthread_mutex_lock(&d->plock);
        d->prep_stop = true;
        pthread_cond_broadcast(&d->pcond);
        while (!d->prep_exited && pthread_cond_timedwait(&d->pcond, &d->plock, &ts) == 0)
            ;
        left_behind = !d->prep_exited;
        pthread_mutex_unlock(&d->plock);
        if (left_behind) {
            fs_log(FS_LOG_WARN, SUBSYS,
                   "a name lookup is still running at shutdown: not waited for");
            pthread_detach(d->prep_thr);
        } else {
            pthread_join(d->prep_thr, NULL);
        }
    }
    /* Every target was removed: no job is left (target_remove freed or detached them). */
    if (d->thr_started) {
        pthread_mutex_lock(&d->qlock);
        d->stop = true;
        pthread_mutex_unlock(&d->qlock);
        wake(d);
        pthread_join(d->thr, NULL);
    }
    if (d->epfd >= 0)
        close(d->epfd);
    if (d->evfd >= 0)
        close(d->evfd);
    if (d->tfd >= 0)
        close(d->tfd);
    pthread_mutex_destroy(&d->qlock);
    pthread_cond_destroy(&d->qcond);
    if (left_behind)
        return; /* the preparation thread still uses plock, pcond and d */
    pthread_mutex_destroy(&d->plock);
    pthread_cond_destroy(&d->pcond);
    free(d);
}

static int
snmp_target_add(void *state, const struct fs_target_cfg *tcfg, const void *dcfg,
                struct fs_sink *sink, void **tstate, char *errbuf, size_t errlen)
{
    struct snmp_drv *d = state;
    if (!tcfg || !dcfg || !tcfg->address) {
        snprintf(errbuf, errlen, "target has no snmp block or address");
        return FS_DRV_ERR;
    }
    struct snmp_target *t = calloc(1, sizeof(*t));
    if (!t) {
        snprintf(errbuf, errlen, "out of memory");
        return FS_DRV_ERR;
    }
    t->walk_first = FS_SNMP_PH_IFDATA;
    t->drv = d;
    t->tcfg = tcfg;
    t->snmp = dcfg;
    t->sink = sink;
    t->fd = -1;
    t->job = job_new(tcfg, t->snmp);
    if (!t->job) {
        free(t);
        snprintf(errbuf, errlen, "out of memory");
        return FS_DRV_ERR;
    }
    atomic_init(&t->busy, false);
    fs_snmp_tmap_init(&t->tm, t->snmp->qos_index_base);
    update_detail(t);
    /* Credentials, keys and the address are prepared off the driver thread, now. */
    pthread_mutex_lock(&d->plock);
    t->job->t = t;
    t->job->queued = true;
    t->job->next = d->prep_head;
    d->prep_head = t->job;
    pthread_cond_signal(&d->pcond);
    pthread_mutex_unlock(&d->plock);
    *tstate = t;
    return FS_DRV_OK;
}

static void
snmp_target_remove(void *state, void *tstate)
{
    struct snmp_drv *d = state;
    struct snmp_target *t = tstate;
    if (!t)
        return;
    /* Detach the preparation: a job not running is freed here; a running one is freed by
     * the preparation thread when it sees no target (it never touches t or tcfg). */
    pthread_mutex_lock(&d->plock);
    struct prep_job *j = t->job;
    t->job = NULL;
    if (j) {
        j->t = NULL;
        if (!j->running) {
            if (j->queued)
                prep_unlink(d, j);
            job_free(j);
        }
    }
    pthread_mutex_unlock(&d->plock);
    /* The thread drops the target (ends its cycle, closes its session, after which
     * net-snmp has no callback of it left) and flags it under qlock. Requests queued
     * before this one are handled first, so none can name t after it. */
    if (enqueue(d, RQ_REMOVE, t, 0, 0) == 0) {
        pthread_mutex_lock(&d->qlock);
        while (!t->removed)
            pthread_cond_wait(&d->qcond, &d->qlock);
        pthread_mutex_unlock(&d->qlock);
    }
    fs_snmp_tmap_free(&t->tm);
    fs_snmp_poll_free(&t->poll);
    fs_snmp_lldp_free(&t->lldp);
    free(t);
}

static int
snmp_cycle_start(void *state, void *tstate, uint64_t cycle_id, int64_t deadline_us)
{
    struct snmp_target *t = tstate;
    bool expected = false;
    if (!atomic_compare_exchange_strong(&t->busy, &expected, true))
        return FS_DRV_BUSY;
    if (enqueue(state, RQ_CYCLE, t, cycle_id, deadline_us) != 0) {
        atomic_store(&t->busy, false);
        return FS_DRV_ERR;
    }
    return FS_DRV_OK;
}

static void
snmp_cycle_cancel(void *state, void *tstate)
{
    enqueue(state, RQ_CANCEL, tstate, 0, 0);
}

const struct fs_driver fs_driver_snmp = {
    .api_version = FS_DRIVER_API_VERSION,
    .block =
        {
            .name = "snmp",
            .default_rank = 30,
            .yang_module = fs_snmp_yang_module,
            .config_build = fs_snmp_config_build,
            .config_free = fs_snmp_config_free,
            .config_equal = fs_snmp_config_equal,
            .config_interval = fs_snmp_config_interval,
        },
    .kind = FS_DRIVER_POLL,
    .init = snmp_init,
    .shutdown = snmp_shutdown_drv,
    .target_add = snmp_target_add,
    .target_remove = snmp_target_remove,
    .cycle_start = snmp_cycle_start,
    .cycle_cancel = snmp_cycle_cancel,
};
