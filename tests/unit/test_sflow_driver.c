/*
 * The registered sFlow driver (drivers/sflow/driver.c) with a real store, over real UDP on
 * loopback (IPv4 to a 127.0.0.1 socket, IPv6 to a dual-stack [::] one): a target's
 * datagrams reach its series, from its sources only (an IPv4 sender on the dual-stack
 * socket is its IPv4 address; ::1 claiming the agent 127.0.0.1 is rejected, unless
 * listed in sources); datagrams of an agent no target claims and undecodable ones from
 * nobody's source are counted on the socket and create no series, an undecodable one
 * from the target's source is the target's decode error; an agent (and sub-agent) is
 * claimed by one target only; a port's name comes from another source of the target
 * (fabric_port_info of an "snmp" sink) through fs_sink_ifindex_name; targets are added
 * and removed while a sender thread floods the socket (run under TSan: label tsan-ok).
 * Waits are polls of the store with deadlines, never fixed sleeps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"
#include "sflow_build.h"
#include "sflow_config.h"
#include "store/store.h"

#define AGENT 0x7f000001u /* 127.0.0.1 */

static const struct fs_flow_rule rules[] = {
    {.name = "roce", .protocol = FS_PROTO_UDP, .dst_lo = 4791, .dst_hi = 4791, .tc = -1},
};
static const struct sfb_pkt roce = {17, 49152, 4791, 26, 3};

static const struct fs_driver *drv;

/* A UDP port nobody uses now (bound and released: the driver binds it next). */
static uint16_t
free_port(void)
{
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6};
    socklen_t l = sizeof sa;
    int fd = socket(AF_INET6, SOCK_DGRAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &l), 0);
    close(fd);
    return ntohs(sa.sin6_port);
}

/* Sends from a socket bound to the IPv4 address from (host order; 0: any). */
static void
send_from(int family, uint32_t from, uint16_t port, const void *b, size_t n)
{
    int fd = socket(family, SOCK_DGRAM, 0);
    assert_true(fd >= 0);
    if (from) {
        struct sockaddr_in sa = {.sin_family = AF_INET};
        sa.sin_addr.s_addr = htonl(from);
        assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    }
    if (family == AF_INET) {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(sendto(fd, b, n, 0, (struct sockaddr *)&sa, sizeof sa), (ssize_t)n);
    } else {
        struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
        sa.sin6_addr = in6addr_loopback;
        assert_int_equal(sendto(fd, b, n, 0, (struct sockaddr *)&sa, sizeof sa), (ssize_t)n);
    }
    close(fd);
}

static void
send_to(int family, uint16_t port, const void *b, size_t n)
{
    send_from(family, 0, port, b, n);
}

struct find {
    const char *name;
    const char *labels; /* a substring of labels_text */
    double v;
    bool found;
    size_t n_with; /* series whose labels_text contain `with` */
    const char *with;
};

static int
find_cb(void *arg, const struct fs_series_info *s)
{
    struct find *f = arg;
    if (f->with && strstr(s->labels_text, f->with))
        f->n_with++;
    if (f->name && !strcmp(s->name, f->name) && strstr(s->labels_text, f->labels)) {
        f->found = true;
        f->v = s->counter ? (double)s->u * s->scale : s->d;
    }
    return 0;
}

static double
value(struct fs_store *st, const char *name, const char *labels)
{
    struct find f = {.name = name, .labels = labels, .v = -1};
    fs_store_foreach_series(st, false, find_cb, &f);
    return f.found ? f.v : -1;
}

static size_t
series_with(struct fs_store *st, const char *with)
{
    struct find f = {.with = with};
    fs_store_foreach_series(st, false, find_cb, &f);
    return f.n_with;
}

static int64_t
mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Polls until the series exceeds above (10 s deadline: TSan is slow). */
static void
wait_above(struct fs_store *st, const char *name, const char *labels, double above)
{
    int64_t until = mono_ms() + 10000;
    while (value(st, name, labels) <= above) {
        if (mono_ms() > until)
            fail_msg("%s{%s} stays at %g", name, labels, above);
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
}

/* Polls until the series has value want (10 s deadline: TSan is slow). */
static void
wait_value(struct fs_store *st, const char *name, const char *labels, double want)
{
    int64_t until = mono_ms() + 10000;
    double v;
    while ((v = value(st, name, labels)) != want) {
        if (mono_ms() > until)
            fail_msg("%s{%s} is %g, not %g", name, labels, v, want);
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
}

struct env {
    struct fs_store *st;
    void *state;
    struct fs_target_cfg t;
    struct fs_sflow_cfg c;
    struct fs_sink *sink;
    void *ts;
};

static void
env_target(struct env *e, const char *name, const char *listen, uint16_t port)
{
    char err[256];
    e->t.name = (char *)name;
    e->t.address = "127.0.0.1";
    e->t.flow_rules = rules;
    e->t.n_flow_rules = 1;
    assert_int_equal(fs_sflow_parse_addr(listen, &e->c.listen), 0);
    assert_int_equal(fs_sflow_parse_addr("127.0.0.1", &e->c.agent), 0);
    e->c.has_agent = true;
    e->c.port = port;
    e->c.interval_us = e->c.interval_us ? e->c.interval_us : 50000; /* set by the test, or */
    e->c.counter_interval_us = 30000000;
    e->c.max_ports = 16;
    e->sink = fs_store_sink_add(e->st, &e->t, "sflow", 30000000);
    assert_non_null(e->sink);
    fs_store_sink_set_streaming(e->sink, true);
    int rc = drv->target_add(e->state, &e->t, &e->c, e->sink, &e->ts, err, sizeof err);
    if (rc != FS_DRV_OK)
        fail_msg("target_add: %s", err);
}

static void
one_flow(struct sfb *x, uint32_t agent, uint32_t seq, uint32_t ifindex)
{
    sfb_datagram(x, agent, 0, seq, 1000 + seq);
    struct sfb_flow f = {.seq = seq,
                         .source = ifindex,
                         .rate = 1000,
                         .in = ifindex,
                         .out = 99,
                         .pkt = roce,
                         .frame_length = 1000};
    sfb_flow_sample(x, &f);
}

static struct fs_store *
store(void)
{
    char err[128];
    struct fs_ring_opts ro = {.memory_limit = 64 << 20, .retention_us = 3600LL * 1000000};
    struct fs_store *st = fs_store_new(&ro, err, sizeof err);
    assert_non_null(st);
    return st;
}

static void
test_datagrams_and_unknown_agents(void **state)
{
    (void)state;
    char err[256];
    struct env e = {.st = store()};
    struct sfb x;
    uint16_t port = free_port();
    assert_int_equal(drv->init(&e.state, err, sizeof err), FS_DRV_OK);
    env_target(&e, "tor1", "::", port);
    /* An IPv4 sender reaches the dual-stack socket as its IPv4 address, the target's;
     * ::1 is no source of agent 127.0.0.1: rejected, nothing of it counted. */
    one_flow(&x, AGENT, 1, 5);
    send_to(AF_INET, port, x.b, x.n);
    one_flow(&x, AGENT, 2, 5);
    send_to(AF_INET6, port, x.b, x.n);
    wait_value(e.st, "fabricscope_sflow_datagrams_rejected_total", "reason=\"source\"", 1);
    wait_value(e.st, "fabric_flow_rule_packets_total", "interface=\"ifIndex5\"", 1000);
    send_to(AF_INET, port, x.b, x.n);
    wait_value(e.st, "fabric_flow_rule_packets_total", "interface=\"ifIndex5\"", 2000);
    /* an agent nobody claims, and a datagram that is not sFlow from nobody's source:
     * counted on the socket, no series; from the target's address, its decode error */
    one_flow(&x, 0x0a090909u, 1, 6);
    send_to(AF_INET, port, x.b, x.n);
    send_from(AF_INET, 0x7f000002u, port, "garbage!", 8);
    send_to(AF_INET, port, "garbage!", 8);
    wait_value(e.st, "fabricscope_sflow_socket_dropped_datagrams_total", "kind=\"unknown_agent\"",
               1);
    wait_value(e.st, "fabricscope_sflow_socket_dropped_datagrams_total", "kind=\"undecodable\"", 1);
    wait_value(e.st, "fabricscope_sflow_decode_errors_total", "reason=\"version\"", 1);
    assert_int_equal(series_with(e.st, "ifIndex6"), 0);
    /* a truncated datagram of the agent: counted as a decode error, the next one counts */
    one_flow(&x, AGENT, 3, 5);
    send_to(AF_INET, port, x.b, x.n - 12);
    one_flow(&x, AGENT, 4, 5);
    send_to(AF_INET, port, x.b, x.n);
    wait_value(e.st, "fabric_flow_rule_packets_total", "interface=\"ifIndex5\"", 3000);
    double dec = value(e.st, "fabricscope_sflow_decode_errors_total", "reason=\"truncated\"") +
                 value(e.st, "fabricscope_sflow_decode_errors_total", "reason=\"length\"");
    assert_true(dec == 1);
    /* the same agent on the same socket cannot be claimed twice */
    struct env e2 = {.st = e.st, .state = e.state};
    e2.t.name = "tor1-again";
    e2.t.address = "127.0.0.1";
    e2.c = e.c;
    struct fs_sink *s2 = fs_store_sink_add(e.st, &e2.t, "sflow", 30000000);
    assert_int_equal(drv->target_add(e.state, &e2.t, &e2.c, s2, &e2.ts, err, sizeof err),
                     FS_DRV_ERR);
    assert_non_null(strstr(err, "already claimed by target tor1"));
    fs_store_sink_remove(e.st, s2);
    drv->target_remove(e.state, e.ts);
    fs_store_sink_remove(e.st, e.sink);
    drv->shutdown(e.state);
    fs_store_free(e.st);
}

static void
test_names_from_other_source(void **state)
{
    (void)state;
    char err[256];
    struct env e = {.st = store()};
    struct sfb x;
    uint16_t port = free_port();
    assert_int_equal(drv->init(&e.state, err, sizeof err), FS_DRV_OK);
    env_target(&e, "tor1", "127.0.0.1", port);
    /* the SNMP driver of the same target named ifIndex 105 Eth1/5 */
    struct fs_sink *snmp = fs_store_sink_add(e.st, &e.t, "snmp", 10000000);
    struct fs_label l[3] = {{"interface", "Eth1/5"}, {"alias", "uplink"}, {"ifindex", "105"}};
    char buf[64];
    fs_sink_begin(snmp, 1);
    fs_sink_gauge(snmp, FS_M_PORT_INFO, l, 3, 1);
    fs_sink_end(snmp);
    assert_int_equal(fs_sink_ifindex_name(e.sink, 105, buf, sizeof buf), 1);
    assert_string_equal(buf, "Eth1/5");
    assert_int_equal(fs_sink_ifindex_name(e.sink, 106, buf, sizeof buf), 0);
    /* a sink's own port_info does not count (it asks for the others') */
    assert_int_equal(fs_sink_ifindex_name(snmp, 105, buf, sizeof buf), 0);
    one_flow(&x, AGENT, 1, 105);
    send_to(AF_INET, port, x.b, x.n);
    wait_value(e.st, "fabric_flow_rule_packets_total", "interface=\"Eth1/5\"", 1000);
    drv->target_remove(e.state, e.ts);
    fs_store_sink_remove(e.st, e.sink);
    fs_store_sink_remove(e.st, snmp);
    drv->shutdown(e.state);
    fs_store_free(e.st);
}

/* An agent restart is a commit boundary: the old instance's last counter sample (3 MB)
 * and the new instance's first (hsflowd's zero) arrive in one 2 s interval; the store
 * sees the 3 MB before the restart's reset, then rebases the zero onto it. (Committed
 * together, the zero replaced the 3 MB unseen: the octets stayed at the 1 MB before,
 * while the packets had counted the 2,000 in between.) */
static void
test_restart_commits_first(void **state)
{
    (void)state;
    char err[256];
    struct env e = {.st = store(), .c = {.interval_us = 2000000}};
    struct sfb x, y;
    uint16_t port = free_port();
    const char *rx = "interface=\"ifIndex105\",direction=\"rx\"";
    assert_int_equal(drv->init(&e.state, err, sizeof err), FS_DRV_OK);
    env_target(&e, "tor1", "127.0.0.1", port);
    sfb_datagram(&x, AGENT, 0, 1, 10000);
    sfb_counter_sample(&x, 1, 105, 1000000, 1000, 0, 3);
    send_to(AF_INET, port, x.b, x.n);
    wait_value(e.st, "fabric_port_bytes_total", rx, 1000000);
    sfb_datagram(&x, AGENT, 0, 2, 11000);
    sfb_counter_sample(&x, 2, 105, 3000000, 3000, 0, 3);
    sfb_datagram(&y, AGENT, 0, 1, 500); /* the new instance: number 1 again, other bytes */
    sfb_counter_sample(&y, 1, 105, 0, 0, 0, 3);
    send_to(AF_INET, port, x.b, x.n);
    send_to(AF_INET, port, y.b, y.n);
    wait_value(e.st, "fabricscope_sflow_sequence_resets_total", "agent_restart", 1);
    wait_value(e.st, "fabric_port_packets_total", rx, 2000);
    wait_value(e.st, "fabric_port_bytes_total", rx, 3000000);
    drv->target_remove(e.state, e.ts);
    fs_store_sink_remove(e.st, e.sink);
    drv->shutdown(e.state);
    fs_store_free(e.st);
}

struct flood {
    uint16_t port;
    atomic_bool stop;
};

static void *
flood_main(void *arg)
{
    struct flood *f = arg;
    struct sfb x;
    uint32_t seq = 1;
    while (!atomic_load(&f->stop)) {
        one_flow(&x, AGENT, seq++, 5);
        send_to(AF_INET, f->port, x.b, x.n);
    }
    return NULL;
}

static void
test_add_remove_under_flood(void **state)
{
    (void)state;
    char err[256];
    struct env e = {.st = store()};
    struct flood f = {.port = free_port()};
    pthread_t th;
    assert_int_equal(drv->init(&e.state, err, sizeof err), FS_DRV_OK);
    /* A second target keeps the socket open while the first comes and goes. */
    struct env keep = {.st = e.st, .state = e.state};
    env_target(&keep, "other", "127.0.0.1", f.port);
    assert_int_equal(fs_sflow_parse_addr("127.0.0.9", &keep.c.agent), 0);
    drv->target_remove(e.state, keep.ts);
    assert_int_equal(
        drv->target_add(e.state, &keep.t, &keep.c, keep.sink, &keep.ts, err, sizeof err),
        FS_DRV_OK);
    assert_int_equal(pthread_create(&th, NULL, flood_main, &f), 0);
    for (int i = 0; i < 20; i++) {
        double before = value(e.st, "fabricscope_sflow_datagrams_total", "target=\"tor1\"");
        env_target(&e, "tor1", "127.0.0.1", f.port);
        wait_above(e.st, "fabricscope_sflow_datagrams_total", "target=\"tor1\"", before);
        drv->target_remove(e.state, e.ts);
        fs_store_sink_remove(e.st, e.sink);
    }
    atomic_store(&f.stop, true);
    pthread_join(th, NULL);
    drv->target_remove(e.state, keep.ts);
    fs_store_sink_remove(e.st, keep.sink);
    drv->shutdown(e.state);
    fs_store_free(e.st);
}

static int
setup(void **state)
{
    (void)state;
    drv = fs_driver_find("sflow");
    return drv ? 0 : -1;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_datagrams_and_unknown_agents),
        cmocka_unit_test(test_names_from_other_source),
        cmocka_unit_test(test_restart_commits_first),
        cmocka_unit_test(test_add_remove_under_flood),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
