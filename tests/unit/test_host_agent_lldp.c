/* The host agent's LLDP neighbours: lldpctl -f json as lldpd 1.0.16 prints it (one
 * neighbour: "interface" an object; several: a list; none: "lldp" empty; a chassis
 * without sysName), the body it posts, and the collector's ingest of that body
 * (validation, the listener) into the topology with source "host". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "analysis/host_events.h"
#include "hostagent/lldp.h"
#include "topology/topology.h"

#define NOW_NS 1800000000000000000LL

/* Trimmed from lldpd 1.0.16's real output (tests/fuzz/corpus/fuzz_agent_lldp). */
#define IFACE(nic, sys, mac, pidtype, pid, descr)                                                  \
    "{\"" nic "\":{\"via\":\"LLDP\",\"rid\":\"2\",\"age\":\"0 day, 00:00:03\",\"chassis\":{\"" sys \
    "\":{\"id\":{\"type\":\"mac\",\"value\":\"" mac "\"},\"descr\":\"Debian\",\"capability\":"     \
    "[{\"type\":\"Bridge\",\"enabled\":false}]}},\"port\":{\"id\":{\"type\":\"" pidtype            \
    "\",\"value\":\"" pid "\"},\"descr\":\"" descr "\",\"ttl\":\"4\"}}}"

static const char one[] = "{\"lldp\":{\"interface\":" IFACE(
    "eth0", "sw1", "42:e8:11:2b:61:07", "mac", "42:e8:11:2b:61:07", "swp1") "}}";
static const char two[] = "{\"lldp\":{\"interface\":[" IFACE(
    "eth0", "sw1", "42:e8:11:2b:61:07", "mac", "42:e8:11:2b:61:07",
    "swp1") "," IFACE("eth1", "sw1", "42:e8:11:2b:61:07", "ifname", "swp2", "uplink") "]}}";

static void
test_parse_shapes(void **state)
{
    (void)state;
    struct fs_agent_lldp_nbr v[8];
    size_t n, dropped;
    char err[256] = "";
    assert_int_equal(fs_agent_lldp_parse(one, strlen(one), v, 8, &n, &dropped, err, sizeof err), 0);
    assert_int_equal(n, 1);
    assert_string_equal(v[0].nic, "eth0");
    assert_string_equal(v[0].sys_name, "sw1");
    assert_string_equal(v[0].chassis_id, "42:e8:11:2b:61:07");
    assert_string_equal(v[0].port, "swp1"); /* a MAC id: the description names the port */
    assert_string_equal(v[0].port_id, "42:e8:11:2b:61:07");
    assert_int_equal(fs_agent_lldp_parse(two, strlen(two), v, 8, &n, &dropped, err, sizeof err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(v[1].nic, "eth1");
    assert_string_equal(v[1].port, "swp2"); /* an ifname id is the port's name */
    assert_string_equal(v[1].port_descr, "uplink");
    /* The bound: the rest counted. */
    assert_int_equal(fs_agent_lldp_parse(two, strlen(two), v, 1, &n, &dropped, err, sizeof err), 0);
    assert_int_equal(n, 1);
    assert_int_equal(dropped, 1);
    const char *none = "{\n  \"lldp\": {\n    \n  }\n}\n";
    assert_int_equal(fs_agent_lldp_parse(none, strlen(none), v, 8, &n, &dropped, err, sizeof err),
                     0);
    assert_int_equal(n, 0);
    /* No sysName: the chassis object is the chassis. */
    const char *nosys = "{\"lldp\":{\"interface\":{\"eth0\":{\"chassis\":{\"id\":{\"type\":\"mac\","
                        "\"value\":\"aa:bb\"}},\"port\":{\"id\":{\"type\":\"ifname\",\"value\":"
                        "\"Ethernet1/1\"}}}}}}";
    assert_int_equal(fs_agent_lldp_parse(nosys, strlen(nosys), v, 8, &n, &dropped, err, sizeof err),
                     0);
    assert_int_equal(n, 1);
    assert_string_equal(v[0].chassis_id, "aa:bb");
    assert_string_equal(v[0].sys_name, "");
    assert_string_equal(v[0].port, "Ethernet1/1");
    /* Bytes that are not UTF-8 (a Latin-1 sysName, an overlong '/') become '?': the
     * collector takes UTF-8 only. */
    const char *latin = "{\"lldp\":{\"interface\":{\"eth0\":{\"chassis\":{\"sw\xe9\xc3\xa9"
                        "1\":{\"id\":"
                        "{\"value\":\"aa\"}}},\"port\":{\"id\":{\"type\":\"ifname\",\"value\":"
                        "\"swp\xc0\xaf"
                        "1\"}}}}}}";
    assert_int_equal(fs_agent_lldp_parse(latin, strlen(latin), v, 8, &n, &dropped, err, sizeof err),
                     0);
    assert_int_equal(n, 1);
    assert_string_equal(v[0].sys_name, "sw?\xc3\xa9"
                                       "1");
    assert_string_equal(v[0].port, "swp??1");
    /* Unnamed neighbours are skipped, not posted. */
    const char *noport = "{\"lldp\":{\"interface\":{\"eth0\":{\"chassis\":{\"sw\":{}}}}}}";
    assert_int_equal(
        fs_agent_lldp_parse(noport, strlen(noport), v, 8, &n, &dropped, err, sizeof err), 0);
    assert_int_equal(n, 0);
    assert_int_equal(dropped, 1);
}

static void
test_parse_bad(void **state)
{
    (void)state;
    struct fs_agent_lldp_nbr v[2];
    size_t n = 9, dropped = 9;
    char err[256] = "";
    assert_int_equal(fs_agent_lldp_parse("{\"lldp\":", 8, v, 2, &n, &dropped, err, sizeof err), -1);
    assert_non_null(strstr(err, "not JSON"));
    assert_int_equal(n, 0);
    assert_int_equal(fs_agent_lldp_parse("[]", 2, v, 2, &n, &dropped, err, sizeof err), -1);
    assert_non_null(strstr(err, "lldp: missing"));
    const char *b = "{\"lldp\":{\"interface\":[1]}}";
    assert_int_equal(fs_agent_lldp_parse(b, strlen(b), v, 2, &n, &dropped, err, sizeof err), -1);
    assert_non_null(strstr(err, "lldp.interface[0]: not an object"));
    b = "{\"lldp\":{\"interface\":\"x\"}}";
    assert_int_equal(fs_agent_lldp_parse(b, strlen(b), v, 2, &n, &dropped, err, sizeof err), -1);
    b = "{\"lldp\":{}} x";
    assert_int_equal(fs_agent_lldp_parse(b, strlen(b), v, 2, &n, &dropped, err, sizeof err), -1);
}

struct seen {
    char host[64];
    size_t count;
    int64_t interval_ns;
    char port0[64];
};

static int
listener(void *arg, const char *host, const struct fs_host_neighbor *n, size_t count,
         int64_t interval_ns, int64_t now_ns, char *errbuf, size_t errlen)
{
    (void)now_ns;
    (void)errbuf;
    (void)errlen;
    struct seen *s = arg;
    snprintf(s->host, sizeof s->host, "%s", host);
    s->count = count;
    s->interval_ns = interval_ns;
    snprintf(s->port0, sizeof s->port0, "%s", count ? n[0].port : "");
    return 0;
}

static struct fs_host_events *
store(struct seen *s)
{
    char err[128];
    struct fs_host_events_opts o = {1 << 20, 3600LL * 1000000000LL};
    struct fs_host_events *hs = fs_host_events_new(&o, err, sizeof err);
    assert_non_null(hs);
    fs_host_events_set_neighbor_listener(hs, listener, s);
    return hs;
}

static int
post(struct fs_host_events *hs, const char *body, struct fs_host_events_receipt *r, char *err,
     size_t errlen)
{
    return fs_host_events_post(hs, body, strlen(body), NOW_NS, r, err, errlen);
}

static void
test_body_ingest(void **state)
{
    (void)state;
    struct fs_agent_lldp_nbr v[8];
    size_t n, dropped, len;
    char err[256] = "", *body;
    struct seen s = {0};
    struct fs_host_events *hs = store(&s);
    assert_int_equal(fs_agent_lldp_parse(two, strlen(two), v, 8, &n, &dropped, err, sizeof err), 0);
    assert_int_equal(fs_agent_lldp_body("gpu01", 30, v, n, &body, &len, err, sizeof err), 0);
    struct fs_host_events_receipt r;
    assert_int_equal(fs_host_events_post(hs, body, len, NOW_NS, &r, err, sizeof err), 0);
    free(body);
    assert_true(r.neighbors_given);
    assert_int_equal(r.neighbors, 2);
    assert_int_equal(r.stored, 0);
    assert_string_equal(s.host, "gpu01");
    assert_int_equal(s.count, 2);
    assert_int_equal(s.interval_ns, 30000000000LL);
    assert_string_equal(s.port0, "swp1");
    /* An empty table is news too (every link went). */
    assert_int_equal(fs_agent_lldp_body("gpu01", 30, v, 0, &body, &len, err, sizeof err), 0);
    assert_int_equal(fs_host_events_post(hs, body, len, NOW_NS, &r, err, sizeof err), 0);
    free(body);
    assert_int_equal(s.count, 0);
    /* With events beside them. */
    assert_int_equal(post(hs,
                          "{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":0,\"events\":[{"
                          "\"host\":\"gpu01\",\"kind\":\"k\",\"name\":\"n\",\"start\":1}],"
                          "\"neighbors\":{\"host\":\"gpu01\",\"interval_s\":5,\"list\":[{\"nic\":"
                          "\"eth0\",\"sys_name\":\"sw1\",\"port\":\"swp9\"}]}}",
                          &r, err, sizeof err),
                     0);
    assert_int_equal(r.stored, 1);
    assert_int_equal(r.neighbors, 1);
    assert_string_equal(s.port0, "swp9");
    fs_host_events_free(hs);
}

static void
expect_400(struct fs_host_events *hs, const char *body, const char *msg)
{
    struct fs_host_events_receipt r;
    char err[256] = "";
    assert_int_equal(post(hs, body, &r, err, sizeof err), 400);
    if (!strstr(err, msg))
        fail_msg("\"%s\" lacks \"%s\"", err, msg);
}

static void
test_ingest_bad(void **state)
{
    (void)state;
    struct seen s = {0};
    struct fs_host_events *hs = store(&s);
#define NB(x) "{\"neighbors\":{\"host\":\"h\",\"interval_s\":30,\"list\":[" x "]}}"
    expect_400(hs, NB("{\"nic\":\"eth0\",\"sys_name\":\"sw\"}"), "neighbors.list[0].port: missing");
    expect_400(hs, NB("{\"nic\":\"eth0\",\"port\":\"p\"}"), "needs chassis_id or sys_name");
    expect_400(hs, NB("{\"sys_name\":\"s\",\"port\":\"p\"}"), "neighbors.list[0].nic");
    expect_400(hs, NB("{\"nic\":\"e\",\"port\":\"p\",\"sys_name\":\"s\",\"color\":\"red\"}"),
               "neighbors.list[0]: unknown member \"color\"");
    expect_400(hs, NB("{\"nic\":\"e\",\"port\":7,\"sys_name\":\"s\"}"),
               "neighbors.list[0].port: not a string");
    expect_400(hs, NB("1"), "neighbors.list[0]: not an object");
    expect_400(hs, "{\"neighbors\":{\"host\":\"h\",\"interval_s\":0,\"list\":[]}}",
               "neighbors.interval_s");
    expect_400(hs, "{\"neighbors\":{\"host\":\"h\",\"list\":[]}}", "neighbors.interval_s: missing");
    expect_400(hs, "{\"neighbors\":{\"interval_s\":3,\"list\":[]}}", "neighbors.host: missing");
    expect_400(hs, "{\"neighbors\":{\"host\":\"h\",\"interval_s\":3}}", "neighbors.list: missing");
    expect_400(hs, "{\"neighbors\":{\"host\":\"\",\"interval_s\":3,\"list\":[]}}",
               "neighbors.host");
    expect_400(hs, "{\"neighbors\":[]}", "neighbors: not an object");
    expect_400(hs, "{\"neighbors\":{\"host\":\"h\",\"interval_s\":3,\"list\":[],\"x\":1}}",
               "neighbors: unknown member \"x\"");
    /* The bound: 65 items. */
    char big[65 * 64 + 128];
    size_t o = (size_t)snprintf(big, sizeof big,
                                "{\"neighbors\":{\"host\":\"h\",\"interval_s\":3,\"list\":[");
    for (int i = 0; i < 65; i++)
        o += (size_t)snprintf(big + o, sizeof big - o,
                              "%s{\"nic\":\"e%d\",\"port\":\"p\","
                              "\"sys_name\":\"s\"}",
                              i ? "," : "", i);
    snprintf(big + o, sizeof big - o, "]}}");
    expect_400(hs, big, "neighbors.list: more than 64 items");
    /* Without neighbours an empty post is still refused. */
    expect_400(hs, "{\"host_offset_ns\":0,\"host_offset_uncertainty_ns\":0,\"events\":[]}",
               "events: 0 items");
    assert_int_equal(s.count, 0);
    assert_string_equal(s.host, "");
    fs_host_events_free(hs);
}

/* Through the topology as the daemon wires it: the host's link to the switch port. */
static int
to_topo(void *arg, const char *host, const struct fs_host_neighbor *n, size_t count,
        int64_t interval_ns, int64_t now_ns, char *errbuf, size_t errlen)
{
    struct fs_topo_neighbor v[FS_HOST_EVENTS_MAX_NEIGHBORS];
    for (size_t i = 0; i < count; i++)
        v[i] = (struct fs_topo_neighbor){n[i].nic,  n[i].chassis_id, n[i].sys_name,
                                         n[i].port, n[i].port_id,    n[i].port_descr};
    return fs_topo_host_neighbors(arg, host, v, count, interval_ns / 1000, now_ns / 1000, errbuf,
                                  errlen);
}

static void
test_into_topology(void **state)
{
    (void)state;
    char err[256];
    struct fs_host_events_opts o = {1 << 20, 3600LL * 1000000000LL};
    struct fs_host_events *hs = fs_host_events_new(&o, err, sizeof err);
    struct fs_topo *t = fs_topo_new();
    fs_host_events_set_neighbor_listener(hs, to_topo, t);
    assert_int_equal(
        fs_topo_local(t, "sw1", "snmp", "42:e8:11:2b:61:07", "sw1", NOW_NS / 1000, err, sizeof err),
        0);
    struct fs_agent_lldp_nbr v[8];
    size_t n, dropped, len;
    char *body;
    assert_int_equal(fs_agent_lldp_parse(one, strlen(one), v, 8, &n, &dropped, err, sizeof err), 0);
    assert_int_equal(fs_agent_lldp_body("gpu01", 10, v, n, &body, &len, err, sizeof err), 0);
    struct fs_host_events_receipt r;
    assert_int_equal(fs_host_events_post(hs, body, len, NOW_NS, &r, err, sizeof err), 0);
    free(body);
    struct fs_topo_snap s;
    assert_int_equal(fs_topo_snapshot(t, NOW_NS / 1000, &s, err, sizeof err), 0);
    assert_int_equal(s.n_links, 1);
    assert_string_equal(s.links[0].a.node, "gpu01");
    assert_string_equal(s.links[0].a.port, "eth0");
    assert_string_equal(s.links[0].b.node, "sw1");
    assert_string_equal(s.links[0].b.port, "swp1");
    assert_true(s.links[0].b.is_target);
    assert_string_equal(s.links[0].sources[0].source, "host");
    assert_string_equal(s.links[0].sources[0].reporter, "gpu01");
    fs_topo_snap_free(&s);
    fs_host_events_set_neighbor_listener(hs, NULL, NULL);
    fs_topo_free(t);
    fs_host_events_free(hs);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_shapes),  cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_body_ingest),   cmocka_unit_test(test_ingest_bad),
        cmocka_unit_test(test_into_topology),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
