/*
 * The sFlow v5 driver: UDP sockets -> decode -> the agent's target -> aggregate (agg.c)
 * -> one batch per target and interval into its sink.
 *
 * Threads. One receive thread serves every socket (epoll, non-blocking recvmmsg into a
 * fixed buffer) and commits every target's batches. target_add/target_remove run on the
 * daemon's main thread. Everything shared (the socket and target lists, each target's
 * aggregate and sink calls) is touched only under the driver's mutex, which the
 * receive thread holds while it handles one bounded turn (at most BURST datagrams per
 * socket, then the due flushes); target_remove unlinks the target under it, so once it
 * returns the thread cannot reach the target. A socket is closed under the mutex too, and
 * the thread finds sockets by an id, never by a file descriptor that may be reused.
 *
 * Whose a datagram is: the agent address (and sub-agent) inside it picks the target, and
 * its UDP sender must be one of that target's sources (sflow.sources, default the agent
 * and the target's address), else it is dropped unread: the payload is whatever its
 * sender wrote. A datagram whose header cannot be read goes by its sender alone.
 *
 * Fairness and bounds: sockets are served in turn, BURST datagrams each; per datagram
 * the work is bounded by its length; per target the aggregate is bounded (agg.h). A
 * flood from one agent sharing a socket with others fills that socket's kernel buffer,
 * whose overflow the kernel drops for all of them: give a noisy agent its own port.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agg.h"
#include "driver.h"
#include "sflow_config.h"
#include "util/clock.h"
#include "util/log.h"

#define BURST 256     /* datagrams per socket per turn */
#define RECV_BATCH 16 /* recvmmsg batch */
/* Datagrams arriving in a stream are taken in batches: after a turn that found some,
 * within STREAM_GAP_US of the previous such turn, the thread waits COALESCE_US before it
 * asks for more, instead of being woken for every datagram or two (a wake-up cost more
 * than the datagram's whole decode and aggregation: 36,000 wake-ups for 150,000
 * datagrams, half the thread's CPU, in bench_sflow_peers.sh). It delays a datagram by
 * at most COALESCE_US (a commit interval is usually 1 s); the socket's buffer holds
 * what arrives meanwhile (RCVBUF held 3,640 datagrams of 1,400 bytes on loopback: 2 ms
 * at 1.8 million a second). */
#define COALESCE_US 2000
#define STREAM_GAP_US 10000
#define DGRAM_BUF 65536          /* a UDP payload fits */
#define TICK_MS 100              /* the longest wait between flush checks */
#define RCVBUF (4 * 1024 * 1024) /* asked for; the kernel caps it at rmem_max */
#define LOG_WINDOW_US (10 * INT64_C(1000000))
#define LOG_PER_WINDOW 5
#define REJECT_LOG_US (60 * INT64_C(1000000)) /* a rejected source is logged once a minute */
#define REJECT_LOG_SLOTS 16                   /* sources remembered for that */
#define MAX_SOURCES 66                        /* the leaf-list's 64, or agent + address */

struct sock {
    struct sock *next;
    uint64_t id;
    int fd;
    struct sflow_addr listen;
    uint16_t port;
    size_t n_targets;
    char label[64]; /* "[::]:6343", the listen label */
    uint64_t unknown_agent, undecodable;
    uint64_t rejected_source; /* claimed a target, from a source the target does not accept */
    int64_t log_window_mono;
    unsigned logs_in_window, logs_suppressed;
    struct {
        struct sflow_addr from;
        int64_t mono;
    } reject_log[REJECT_LOG_SLOTS]; /* when each rejected source was last logged */
    struct tgt *last;               /* the target of the previous datagram: bursts come per agent */
};

struct tgt {
    struct tgt *next;
    struct sock *sock;
    char *name;
    char agent_str[64];
    struct sflow_addr agent;
    bool has_sub;
    uint32_t sub;
    struct sflow_addr sources[MAX_SOURCES]; /* UDP sources whose datagrams count */
    size_t n_sources;
    struct fs_sink *sink;
    struct fs_sflow_agg *agg;
    int64_t interval_us, silent_us;
    int64_t next_flush_mono, last_dgram_mono;
    bool data_since_flush, ever, silent_reported, first_flush;
    int64_t log_window_mono;
    unsigned logs_in_window;
    uint64_t rate_changes_logged;
};

struct drv {
    pthread_mutex_t lock;
    pthread_t thr;
    bool started;
    int epfd, evfd;
    bool stop; /* under lock */
    struct sock *socks;
    struct tgt *tgts;
    uint64_t next_id;
    uint8_t *bufs;            /* RECV_BATCH x DGRAM_BUF, the receive thread's */
    struct fs_sflow_dgram dg; /* the receive thread's: each datagram decoded once into it */
    struct sockaddr_storage from[RECV_BATCH];
};

/* ---- helpers ---- */

static bool
addr_eq(const struct sflow_addr *a, const struct sflow_addr *b)
{
    return a->family == b->family && !memcmp(a->bytes, b->bytes, a->family == 4 ? 4 : 16);
}

/* The UDP sender as an address: an IPv4 sender on a dual-stack socket (::ffff:a.b.c.d) is
 * the IPv4 address a.b.c.d, as a configuration names it. */
static void
sender_addr(const struct sockaddr_storage *ss, struct sflow_addr *a)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    memset(a, 0, sizeof *a);
    if (ss->ss_family == AF_INET) {
        a->family = 4;
        memcpy(a->bytes, &((const struct sockaddr_in *)ss)->sin_addr, 4);
    } else if (ss->ss_family == AF_INET6) {
        const uint8_t *b = ((const struct sockaddr_in6 *)ss)->sin6_addr.s6_addr;
        if (!memcmp(b, mapped, sizeof mapped)) {
            a->family = 4;
            memcpy(a->bytes, b + 12, 4);
        } else {
            a->family = 6;
            memcpy(a->bytes, b, 16);
        }
    }
}

static bool
source_ok(const struct tgt *t, const struct sflow_addr *from)
{
    for (size_t i = 0; i < t->n_sources; i++)
        if (addr_eq(&t->sources[i], from))
            return true;
    return false;
}

/* Rate limit of warnings: LOG_PER_WINDOW lines per LOG_WINDOW_US, then silence. */
static bool
log_due(int64_t *window, unsigned *n, int64_t now)
{
    if (now - *window >= LOG_WINDOW_US) {
        *window = now;
        *n = 0;
    }
    return (*n)++ < LOG_PER_WINDOW;
}

static void
publish_detail(struct tgt *t)
{
    const struct fs_sflow_agg_stats *s = fs_sflow_agg_get_stats(t->agg);
    char buf[512];
    snprintf(buf, sizeof buf,
             "\"sflow_agent\":\"%s\",\"sflow_listen\":\"%s\",\"sflow_datagrams\":%" PRIu64
             ",\"sflow_flow_samples\":%" PRIu64 ",\"sflow_counter_samples\":%" PRIu64
             ",\"sflow_discard_samples\":%" PRIu64 ",\"sflow_lost_datagrams\":%" PRIu64
             ",\"sflow_duplicates\":%" PRIu64 ",\"sflow_memory_bytes\":%zu",
             t->agent_str, t->sock->label, s->datagrams, s->flow_samples, s->counter_samples,
             s->discard_samples, s->lost_datagrams, s->duplicates, fs_sflow_agg_bytes(t->agg));
    fs_sink_set_detail(t->sink, buf);
}

/* Commits the target's interval (under the lock, receive thread or target_add). */
static void
flush_target(struct tgt *t, int64_t now_mono)
{
    struct fs_label l[2] = {{"listen", t->sock->label}, {"kind", "unknown_agent"}};
    if (fs_sflow_agg_take_restart(t->agg))
        fs_sink_counter_reset(t->sink, FS_RESET_REBOOT, NULL);
    else if (t->first_flush)
        /* A re-added target (a reload) counts from 0 again: not a clear. */
        fs_sink_counter_reset(t->sink, FS_RESET_DISCONTINUITY, NULL);
    t->first_flush = false;
    fs_sink_begin(t->sink, fs_realtime_us());
    fs_sflow_agg_flush(t->agg, &fs_sflow_sink_emit, t->sink, now_mono);
    fs_sink_counter(t->sink, FS_M_SFLOW_SOCKET_DROPPED, l, 2, t->sock->unknown_agent, 64);
    l[1].value = "undecodable";
    fs_sink_counter(t->sink, FS_M_SFLOW_SOCKET_DROPPED, l, 2, t->sock->undecodable, 64);
    l[1] = (struct fs_label){"reason", "source"};
    fs_sink_counter(t->sink, FS_M_SFLOW_REJECTED, l, 2, t->sock->rejected_source, 64);
    fs_sink_end(t->sink);
    publish_detail(t);
    if (t->data_since_flush) {
        fs_sink_done(t->sink, 0, FS_POLL_OK, NULL);
        t->silent_reported = false;
    } else if (t->ever && !t->silent_reported && now_mono - t->last_dgram_mono > t->silent_us) {
        char msg[160];
        snprintf(msg, sizeof msg, "no sFlow datagram from agent %s for %" PRId64 " s", t->agent_str,
                 (now_mono - t->last_dgram_mono) / 1000000);
        fs_log(FS_LOG_WARN, "sflow", "%s: %s", t->name, msg);
        fs_sink_done(t->sink, 0, FS_POLL_TIMEOUT, msg);
        t->silent_reported = true;
    }
    t->data_since_flush = false;
    t->next_flush_mono += t->interval_us;
    if (t->next_flush_mono <= now_mono)
        t->next_flush_mono = now_mono + t->interval_us;
}

static struct tgt *
find_target(struct drv *d, struct sock *s, const struct sflow_datagram_header *h)
{
    struct tgt *t = s->last;
    if (t && addr_eq(&t->agent, &h->agent) && (!t->has_sub || t->sub == h->sub_agent_id))
        return t;
    for (t = d->tgts; t; t = t->next)
        if (t->sock == s && addr_eq(&t->agent, &h->agent) &&
            (!t->has_sub || t->sub == h->sub_agent_id))
            break;
    s->last = t;
    return t;
}

/* The one target of s that accepts datagrams from `from`, or NULL (none, or several). */
static struct tgt *
target_by_source(struct drv *d, struct sock *s, const struct sflow_addr *from)
{
    struct tgt *found = NULL;
    for (struct tgt *t = d->tgts; t; t = t->next)
        if (t->sock == s && source_ok(t, from)) {
            if (found)
                return NULL;
            found = t;
        }
    return found;
}

/* A rejected source is logged once a minute (and within the socket's budget): a spoofer
 * or a misconfigured relay would otherwise write a line per datagram. */
static bool
reject_log_due(struct sock *s, const struct sflow_addr *from, int64_t now)
{
    size_t slot = REJECT_LOG_SLOTS, oldest = 0;
    for (size_t i = 0; i < REJECT_LOG_SLOTS && slot == REJECT_LOG_SLOTS; i++)
        if (s->reject_log[i].from.family && addr_eq(&s->reject_log[i].from, from))
            slot = i;
    if (slot < REJECT_LOG_SLOTS && now - s->reject_log[slot].mono < REJECT_LOG_US)
        return false;
    if (slot == REJECT_LOG_SLOTS) { /* a new one takes a free slot, else the oldest */
        for (size_t i = 1; i < REJECT_LOG_SLOTS; i++)
            if (!s->reject_log[oldest].from.family)
                break;
            else if (!s->reject_log[i].from.family ||
                     s->reject_log[i].mono < s->reject_log[oldest].mono)
                oldest = i;
        slot = oldest;
    }
    s->reject_log[slot].from = *from;
    s->reject_log[slot].mono = now;
    return log_due(&s->log_window_mono, &s->logs_in_window, now);
}

static void
handle(struct drv *d, struct sock *s, const uint8_t *buf, size_t len,
       const struct sockaddr_storage *ss, int64_t now)
{
    enum fs_sflow_decode_reason reason = FS_SFLOW_DEC_MALFORMED;
    char err[256], a[64], f[64];
    bool hdr_ok;
    struct sflow_addr from;
    int rc = fs_sflow_check(&d->dg, buf, len, &hdr_ok, &reason, err, sizeof err);
    const struct sflow_datagram_header h = d->dg.hdr;
    struct tgt *t;
    sender_addr(ss, &from);
    if (!hdr_ok) {
        /* No agent to read: the sender tells whose it is when one target accepts it. */
        t = target_by_source(d, s, &from);
        if (t) {
            fs_sflow_agg_decode_error(t->agg, reason);
            if (log_due(&t->log_window_mono, &t->logs_in_window, now))
                fs_log(FS_LOG_WARN, "sflow", "%s: dropped a datagram from %s (%s): %s", t->name,
                       fs_sflow_addr_str(&from, f, sizeof f), fs_sflow_decode_reason_names[reason],
                       err);
            return;
        }
        s->undecodable++;
        if (log_due(&s->log_window_mono, &s->logs_in_window, now))
            fs_log(FS_LOG_WARN, "sflow", "%s: dropped an undecodable datagram from %s: %s",
                   s->label, fs_sflow_addr_str(&from, f, sizeof f), err);
        return;
    }
    t = find_target(d, s, &h);
    if (!t) {
        s->unknown_agent++;
        if (log_due(&s->log_window_mono, &s->logs_in_window, now))
            fs_log(FS_LOG_WARN, "sflow",
                   "%s: dropped a datagram of agent %s sub-agent %" PRIu32
                   " from %s, which no target claims",
                   s->label, fs_sflow_addr_str(&h.agent, a, sizeof a), h.sub_agent_id,
                   fs_sflow_addr_str(&from, f, sizeof f));
        return;
    }
    if (!source_ok(t, &from)) {
        /* Before anything of it is read: its sequence, uptime, ports and rates are
         * whatever its sender wrote. */
        s->rejected_source++;
        if (reject_log_due(s, &from, now))
            fs_log(FS_LOG_WARN, "sflow",
                   "%s: dropped a datagram claiming agent %s (target %s) from %s, which is "
                   "not among the target's sources (logged once a minute per source)",
                   s->label, t->agent_str, t->name, fs_sflow_addr_str(&from, f, sizeof f));
        return;
    }
    if (rc != 0) {
        fs_sflow_agg_decode_error(t->agg, reason);
        if (log_due(&t->log_window_mono, &t->logs_in_window, now))
            fs_log(FS_LOG_WARN, "sflow", "%s: dropped a datagram that does not decode (%s): %s",
                   t->name, fs_sflow_decode_reason_names[reason], err);
        return;
    }
    /* An agent restart is a commit boundary: the old instance's last counter samples of
     * this interval are committed before the reset is declared. Else the new instance's
     * samples replaced them unseen: the store rebased the octets from the values before
     * (a poll's octets lost) while the packet sums had counted them. */
    if (fs_sflow_agg_restarts(t->agg, &d->dg, buf, len))
        flush_target(t, now);
    if (fs_sflow_agg_datagram(t->agg, &d->dg, buf, len, now) == 0) {
        t->data_since_flush = true;
        t->ever = true;
        t->last_dgram_mono = now;
    }
    const struct fs_sflow_rate_change *rch = fs_sflow_agg_last_rate_change(t->agg);
    if (rch->n != t->rate_changes_logged) {
        t->rate_changes_logged = rch->n;
        if (log_due(&t->log_window_mono, &t->logs_in_window, now))
            fs_log(FS_LOG_WARN, "sflow",
                   "%s: agent %s changed the sampling rate of data source %" PRIu32 ":%" PRIu32
                   " from 1 in %" PRIu32 " to 1 in %" PRIu32
                   " (estimates across the change mix both)",
                   t->name, t->agent_str, rch->source_type, rch->source_index, rch->old_rate,
                   rch->new_rate);
    }
}

/* Reads up to BURST datagrams of s (under the lock); returns how many. */
static int
drain(struct drv *d, struct sock *s)
{
    struct mmsghdr msgs[RECV_BATCH];
    struct iovec iov[RECV_BATCH];
    /* The sender of each datagram: whose it is depends on it (source_ok). */
    int total = 0;
    while (total < BURST) {
        memset(msgs, 0, sizeof msgs);
        for (int i = 0; i < RECV_BATCH; i++) {
            iov[i].iov_base = d->bufs + (size_t)i * DGRAM_BUF;
            iov[i].iov_len = DGRAM_BUF;
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_name = &d->from[i];
            msgs[i].msg_hdr.msg_namelen = sizeof d->from[i];
        }
        int n = recvmmsg(s->fd, msgs, RECV_BATCH, MSG_DONTWAIT, NULL);
        if (n <= 0)
            break;
        int64_t now = fs_monotonic_us();
        for (int i = 0; i < n; i++)
            handle(d, s, d->bufs + (size_t)i * DGRAM_BUF, msgs[i].msg_len, &d->from[i], now);
        total += n;
        if (n < RECV_BATCH)
            break;
    }
    return total;
}

static void *
receive_main(void *arg)
{
    struct drv *d = arg;
    struct epoll_event evs[32];
    int64_t last_data = INT64_MIN / 2;              /* when a turn last found datagrams */
    pthread_setname_np(pthread_self(), "fs-sflow"); /* in top and perf */
    for (;;) {
        int n = epoll_wait(d->epfd, evs, 32, TICK_MS), got = 0;
        bool more = false; /* a socket still had datagrams after its BURST */
        pthread_mutex_lock(&d->lock);
        if (d->stop) {
            pthread_mutex_unlock(&d->lock);
            break;
        }
        for (int i = 0; i < n; i++) {
            uint64_t id = evs[i].data.u64;
            if (id == 0) {
                uint64_t v;
                if (read(d->evfd, &v, sizeof v) < 0) { /* nothing pending: fine */
                }
                continue;
            }
            for (struct sock *s = d->socks; s; s = s->next)
                if (s->id == id) {
                    int k = drain(d, s);
                    got += k;
                    more = more || k >= BURST;
                    break;
                }
        }
        int64_t now = fs_monotonic_us();
        for (struct tgt *t = d->tgts; t; t = t->next)
            if (now >= t->next_flush_mono)
                flush_target(t, now);
        pthread_mutex_unlock(&d->lock);
        if (got > 0 && !more && now - last_data < STREAM_GAP_US) {
            /* In a stream: let the next datagrams gather (outside the lock). */
            struct timespec ts = {0, COALESCE_US * 1000};
            while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR) {
            }
        }
        if (got > 0)
            last_data = now;
    }
    return NULL;
}

/* ---- sockets (main thread, under the lock) ---- */

static struct sock *
sock_get(struct drv *d, const struct fs_sflow_cfg *c, char *errbuf, size_t errlen)
{
    struct sock *s;
    char a[64];
    for (s = d->socks; s; s = s->next)
        if (s->port == c->port && addr_eq(&s->listen, &c->listen))
            return s;
    s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(errbuf, errlen, "out of memory");
        return NULL;
    }
    s->listen = c->listen;
    s->port = c->port;
    fs_sflow_addr_str(&c->listen, a, sizeof a);
    snprintf(s->label, sizeof s->label, c->listen.family == 6 ? "[%s]:%u" : "%s:%u", a,
             (unsigned)c->port);
    if (c->listen.family == 6) {
        struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons(c->port)};
        int off = 0;
        memcpy(&sa.sin6_addr, c->listen.bytes, 16);
        s->fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        /* Dual-stack: IPv4 agents reach [::] too (as v4-mapped senders). */
        if (s->fd >= 0 && (setsockopt(s->fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off) != 0 ||
                           bind(s->fd, (struct sockaddr *)&sa, sizeof sa) != 0))
            goto fail;
    } else {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(c->port)};
        memcpy(&sa.sin_addr, c->listen.bytes, 4);
        s->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (s->fd >= 0 && bind(s->fd, (struct sockaddr *)&sa, sizeof sa) != 0)
            goto fail;
    }
    if (s->fd < 0)
        goto fail;
    int rcv = RCVBUF;
    (void)setsockopt(s->fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv); /* best effort */
    s->id = ++d->next_id;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = s->id};
    if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, s->fd, &ev) != 0)
        goto fail;
    s->next = d->socks;
    d->socks = s;
    fs_log(FS_LOG_INFO, "sflow", "listening on %s", s->label);
    return s;
fail:
    snprintf(errbuf, errlen, "sflow: cannot listen on UDP %s: %s", s->label, strerror(errno));
    if (s->fd >= 0)
        close(s->fd);
    free(s);
    return NULL;
}

static void
sock_put(struct drv *d, struct sock *s)
{
    if (--s->n_targets > 0)
        return;
    for (struct sock **pp = &d->socks; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    epoll_ctl(d->epfd, EPOLL_CTL_DEL, s->fd, NULL);
    close(s->fd);
    free(s);
}

/* ---- driver operations ---- */

static void sflow_shutdown(void *state);

static int
sflow_init(void **state, char *errbuf, size_t errlen)
{
    struct drv *d = calloc(1, sizeof *d);
    int rc = FS_DRV_ERR;
    if (!d) {
        snprintf(errbuf, errlen, "out of memory");
        return FS_DRV_ERR;
    }
    pthread_mutex_init(&d->lock, NULL);
    d->epfd = epoll_create1(EPOLL_CLOEXEC);
    d->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    d->bufs = malloc((size_t)RECV_BATCH * DGRAM_BUF);
    if (d->epfd < 0 || d->evfd < 0 || !d->bufs) {
        snprintf(errbuf, errlen, "sflow: cannot start: %s", strerror(errno));
        goto done;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
    if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->evfd, &ev) != 0 ||
        pthread_create(&d->thr, NULL, receive_main, d) != 0) {
        snprintf(errbuf, errlen, "sflow: cannot start its receive thread");
        goto done;
    }
    d->started = true;
    rc = FS_DRV_OK;
done:
    if (rc != FS_DRV_OK)
        sflow_shutdown(d);
    else
        *state = d;
    return rc;
}

static void
sflow_shutdown(void *state)
{
    struct drv *d = state;
    if (!d)
        return;
    if (d->started) {
        uint64_t one = 1;
        pthread_mutex_lock(&d->lock);
        d->stop = true;
        pthread_mutex_unlock(&d->lock);
        if (write(d->evfd, &one, sizeof one) < 0) { /* the tick ends the wait anyway */
        }
        pthread_join(d->thr, NULL);
    }
    /* Every target was removed first (driver.h); sockets go with their last target. */
    if (d->evfd >= 0)
        close(d->evfd);
    if (d->epfd >= 0)
        close(d->epfd);
    free(d->bufs);
    fs_sflow_dgram_free(&d->dg);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

static void
tgt_free(struct tgt *t)
{
    if (!t)
        return;
    fs_sflow_agg_free(t->agg);
    free(t->name);
    free(t);
}

static int
sflow_target_add(void *state, const struct fs_target_cfg *tcfg, const void *dcfg,
                 struct fs_sink *sink, void **tstate, char *errbuf, size_t errlen)
{
    struct drv *d = state;
    const struct fs_sflow_cfg *c = dcfg;
    struct tgt *t = calloc(1, sizeof *t);
    int rc = FS_DRV_ERR;
    *tstate = NULL;
    if (!t || !(t->name = strdup(tcfg->name))) {
        snprintf(errbuf, errlen, "out of memory");
        tgt_free(t);
        return FS_DRV_ERR;
    }
    t->sink = sink;
    t->first_flush = true;
    t->has_sub = c->has_sub_agent;
    t->sub = c->sub_agent;
    t->agent = c->agent;
    if (!c->has_agent && fs_sflow_parse_addr(tcfg->address, &t->agent) != 0) {
        snprintf(errbuf, errlen,
                 "targets[%s].sflow.agent is required: the address %s is not an IP literal",
                 tcfg->name, tcfg->address);
        goto done;
    }
    fs_sflow_addr_str(&t->agent, t->agent_str, sizeof t->agent_str);
    if (c->n_sources > 0) {
        for (size_t i = 0; i < c->n_sources && i < MAX_SOURCES; i++)
            t->sources[t->n_sources++] = c->sources[i];
    } else {
        /* The agent itself, and the target's address (the switch's management address,
         * which its datagrams may leave from when the agent address is a loopback). */
        struct sflow_addr addr;
        t->sources[t->n_sources++] = t->agent;
        if (fs_sflow_parse_addr(tcfg->address, &addr) == 0 && !addr_eq(&addr, &t->agent))
            t->sources[t->n_sources++] = addr;
    }
    t->interval_us = c->interval_us;
    t->silent_us = 2 * c->counter_interval_us;
    struct fs_sflow_agg_opts o = {.rules = tcfg->flow_rules,
                                  .n_rules = tcfg->n_flow_rules,
                                  .max_ports = c->max_ports,
                                  .ifnames = c->ifnames,
                                  .n_ifnames = c->n_ifnames};
    if (!(t->agg = fs_sflow_agg_new(&o, errbuf, errlen)))
        goto done;
    pthread_mutex_lock(&d->lock);
    for (struct tgt *o2 = d->tgts; o2; o2 = o2->next)
        if (o2->sock->port == c->port && addr_eq(&o2->sock->listen, &c->listen) &&
            addr_eq(&o2->agent, &t->agent) && (!o2->has_sub || !t->has_sub || o2->sub == t->sub)) {
            snprintf(errbuf, errlen,
                     "targets[%s].sflow: agent %s%s is already claimed by target %s on %s",
                     tcfg->name, t->agent_str, t->has_sub ? " (this sub-agent)" : "", o2->name,
                     o2->sock->label);
            pthread_mutex_unlock(&d->lock);
            goto done;
        }
    t->sock = sock_get(d, c, errbuf, errlen);
    if (t->sock) {
        t->sock->n_targets++;
        t->next_flush_mono = fs_monotonic_us() + t->interval_us;
        t->next = d->tgts;
        d->tgts = t;
        rc = FS_DRV_OK;
    }
    pthread_mutex_unlock(&d->lock);
done:
    if (rc == FS_DRV_OK)
        *tstate = t;
    else
        tgt_free(t);
    return rc;
}

static void
sflow_target_remove(void *state, void *tstate)
{
    struct drv *d = state;
    struct tgt *t = tstate;
    if (!t)
        return;
    /* Under the lock the receive thread is between turns: once unlinked, unreachable. */
    pthread_mutex_lock(&d->lock);
    for (struct tgt **pp = &d->tgts; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    if (t->sock->last == t)
        t->sock->last = NULL;
    sock_put(d, t->sock);
    pthread_mutex_unlock(&d->lock);
    tgt_free(t);
}

const struct fs_driver fs_driver_sflow = {
    .api_version = FS_DRIVER_API_VERSION,
    .block =
        {
            .name = "sflow",
            /* Between cli (20) and snmp (30): its port counters come every 20-30 s from
             * counter samples (coarser than a 10 s SNMP poll would be were it preferred,
             * but pushed by the switch itself), and its flow-rule figures are estimates
             * from samples, below the exact per-rule counters of gNMI and the CLI. */
            .default_rank = 25,
            .yang_module = fs_sflow_yang_module,
            .config_build = fs_sflow_config_build,
            .config_free = fs_sflow_config_free,
            .config_equal = fs_sflow_config_equal,
            .config_interval = fs_sflow_config_interval,
            .uses_flow_rules = true,
        },
    .kind = FS_DRIVER_STREAM,
    .init = sflow_init,
    .shutdown = sflow_shutdown,
    .target_add = sflow_target_add,
    .target_remove = sflow_target_remove,
    .cycle_start = NULL,
    .cycle_cancel = NULL,
};
