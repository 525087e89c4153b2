/* The topology store (collector/topology/topology.c): links from both ends read as one,
 * a complete table drops what it no longer lists, reports age out by their hold, bounds,
 * and concurrent reporters and readers. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "http/topology_api.h"
#include "topology/topology.h"

#define S 1000000LL /* one second in µs */
#define T0 (1800000000LL * S)

static void
nb(struct fs_topo *t, const char *target, const char *lport, const char *chassis,
   const char *sysname, const char *rport, int64_t now)
{
    char err[128] = "";
    struct fs_topo_neighbor n = {lport, chassis, sysname, rport, rport, ""};
    assert_int_equal(fs_topo_neighbor(t, target, "snmp", &n, now, err, sizeof err), 0);
}

static struct fs_topo_snap
snap(struct fs_topo *t, int64_t now)
{
    struct fs_topo_snap s;
    char err[128];
    assert_int_equal(fs_topo_snapshot(t, now, &s, err, sizeof err), 0);
    return s;
}

static void
test_host_links(void **state)
{
    (void)state;
    struct fs_topo *t = fs_topo_new();
    assert_non_null(t);
    nb(t, "sw", "swp2", "52:4a:c4:b7:ad:80", "host2", "eth0", T0);
    nb(t, "sw", "swp1", "3e:84:07:52:79:ff", "host1", "eth0", T0 + 1);
    nb(t, "sw", "swp1", "3e:84:07:52:79:ff", "host1", "eth0", T0 + 5 * S); /* renewed */
    struct fs_topo_snap s = snap(t, T0 + 6 * S);
    assert_int_equal(s.n_links, 2);
    /* Canonical order: a <= b; "host1" < "sw". */
    assert_string_equal(s.links[0].a.node, "host1");
    assert_string_equal(s.links[0].a.port, "eth0");
    assert_false(s.links[0].a.is_target);
    assert_string_equal(s.links[0].b.node, "sw");
    assert_string_equal(s.links[0].b.port, "swp1");
    assert_true(s.links[0].b.is_target);
    assert_int_equal(s.links[0].first_seen_us, T0 + 1);
    assert_int_equal(s.links[0].last_seen_us, T0 + 5 * S);
    assert_int_equal(s.links[0].n_sources, 1);
    assert_string_equal(s.links[0].sources[0].source, "snmp");
    assert_string_equal(s.links[0].sources[0].reporter, "sw");
    assert_int_equal(s.n_nodes, 3);
    assert_string_equal(s.nodes[0].name, "host1");
    assert_string_equal(s.nodes[0].chassis_id, "3e:84:07:52:79:ff");
    assert_string_equal(s.nodes[2].name, "sw");
    assert_true(s.nodes[2].is_target);
    fs_topo_snap_free(&s);
    fs_topo_free(t);
}

/* A sees B and B sees A: one link, both reports among its sources; B is known by its
 * chassis id (fs_topo_local), A by its sysName being its target name. */
static void
test_both_ends_one_link(void **state)
{
    (void)state;
    char err[128];
    struct fs_topo *t = fs_topo_new();
    assert_int_equal(
        fs_topo_local(t, "leaf1", "snmp", "aa:aa:aa:aa:aa:01", "leaf1.lab", T0, err, sizeof err),
        0);
    assert_int_equal(
        fs_topo_local(t, "spine1", "snmp", "bb:bb:bb:bb:bb:01", "sp1.lab", T0, err, sizeof err), 0);
    nb(t, "leaf1", "Eth1/49", "bb:bb:bb:bb:bb:01", "sp1.lab", "Eth1/1", T0);
    nb(t, "spine1", "Eth1/1", "aa:aa:aa:aa:aa:01", "leaf1.lab", "Eth1/49", T0 + 2 * S);
    /* A host behind leaf1, and leaf1 seen by a switch that is not a target. */
    nb(t, "leaf1", "Eth1/1", "cc:00:00:00:00:01", "gpu1", "enp1s0", T0);
    struct fs_topo_snap s = snap(t, T0 + 3 * S);
    assert_int_equal(s.n_links, 2);
    const struct fs_topo_link *l = &s.links[1];
    assert_string_equal(l->a.node, "leaf1");
    assert_string_equal(l->a.port, "Eth1/49");
    assert_string_equal(l->b.node, "spine1");
    assert_string_equal(l->b.port, "Eth1/1");
    assert_true(l->a.is_target && l->b.is_target);
    assert_int_equal(l->n_sources, 2);
    assert_int_equal(l->first_seen_us, T0);
    assert_int_equal(l->last_seen_us, T0 + 2 * S);
    bool seen_leaf = false, seen_spine = false;
    for (size_t i = 0; i < l->n_sources; i++) {
        seen_leaf |= strcmp(l->sources[i].reporter, "leaf1") == 0;
        seen_spine |= strcmp(l->sources[i].reporter, "spine1") == 0;
    }
    assert_true(seen_leaf && seen_spine);
    /* Nodes: gpu1, leaf1, spine1: the remote names of targets are not nodes of their own. */
    assert_int_equal(s.n_nodes, 3);
    assert_string_equal(s.nodes[1].sys_name, "leaf1.lab");
    fs_topo_snap_free(&s);

    /* Without the local identity, a sysName equal to the target's name resolves too. */
    struct fs_topo *u = fs_topo_new();
    nb(u, "a", "p1", "11", "b", "q1", T0);
    nb(u, "b", "q1", "22", "a", "p1", T0);
    s = snap(u, T0);
    assert_int_equal(s.n_links, 1);
    assert_int_equal(s.links[0].n_sources, 2);
    fs_topo_snap_free(&s);
    fs_topo_free(u);
    fs_topo_free(t);
}

/* A complete table drops at once what it no longer lists; a table that is cut (no end)
 * drops nothing. */
static void
test_table_end_removes(void **state)
{
    (void)state;
    struct fs_topo *t = fs_topo_new();
    nb(t, "sw", "swp1", "01", "h1", "eth0", T0);
    nb(t, "sw", "swp2", "02", "h2", "eth0", T0);
    nb(t, "other", "x1", "03", "h3", "eth0", T0);
    assert_int_equal(fs_topo_table_end(t, "sw", "snmp", 2 * S, T0), 0);
    /* Next read: h2 is gone from the switch's table. */
    nb(t, "sw", "swp1", "01", "h1", "eth0", T0 + 2 * S);
    assert_int_equal(fs_topo_table_end(t, "sw", "snmp", 2 * S, T0 + 2 * S), 1);
    struct fs_topo_snap s = snap(t, T0 + 2 * S);
    assert_int_equal(s.n_links, 2); /* h1-sw, h3-other: another reporter's links stay */
    assert_string_equal(s.links[0].a.node, "h1");
    assert_string_equal(s.links[1].a.node, "h3");
    fs_topo_snap_free(&s);
    /* A cut read (neighbours, no end) keeps what it did not get to. */
    nb(t, "sw", "swp3", "04", "h4", "eth0", T0 + 4 * S);
    s = snap(t, T0 + 4 * S);
    assert_int_equal(s.n_links, 3);
    fs_topo_snap_free(&s);
    /* Its end makes it a complete table of swp3 alone: swp1 goes; then an empty one. */
    assert_int_equal(fs_topo_table_end(t, "sw", "snmp", 2 * S, T0 + 6 * S), 1);
    assert_int_equal(fs_topo_table_end(t, "sw", "snmp", 2 * S, T0 + 8 * S), 1);
    s = snap(t, T0 + 8 * S);
    assert_int_equal(s.n_links, 1);
    fs_topo_snap_free(&s);
    struct fs_topo_stats st;
    fs_topo_stats(t, &st);
    assert_int_equal(st.dropped, 3);
    fs_topo_free(t);
}

/* Hold: 120 s until the reporter states its interval, then max(3 x interval, 30 s). */
static void
test_aging(void **state)
{
    (void)state;
    struct fs_topo *t = fs_topo_new();
    nb(t, "sw", "swp1", "01", "h1", "eth0", T0);
    struct fs_topo_snap s = snap(t, T0 + FS_TOPO_DEFAULT_HOLD_US);
    assert_int_equal(s.n_links, 1);
    assert_int_equal(s.links[0].sources[0].hold_us, FS_TOPO_DEFAULT_HOLD_US);
    fs_topo_snap_free(&s);
    s = snap(t, T0 + FS_TOPO_DEFAULT_HOLD_US + 1);
    assert_int_equal(s.n_links, 0);
    fs_topo_snap_free(&s);

    /* A 1 s interval holds 30 s (the floor), a 20 s one 60 s. */
    nb(t, "sw", "swp1", "01", "h1", "eth0", T0 + 200 * S);
    fs_topo_table_end(t, "sw", "snmp", 1 * S, T0 + 200 * S);
    assert_int_equal(fs_topo_expire(t, T0 + 230 * S), 0);
    assert_int_equal(fs_topo_expire(t, T0 + 230 * S + 1), 1);
    nb(t, "sw", "swp1", "01", "h1", "eth0", T0 + 300 * S);
    fs_topo_table_end(t, "sw", "snmp", 20 * S, T0 + 300 * S);
    assert_int_equal(fs_topo_expire(t, T0 + 359 * S), 0);
    s = snap(t, T0 + 359 * S);
    assert_int_equal(s.links[0].sources[0].hold_us, 60 * S);
    fs_topo_snap_free(&s);
    assert_int_equal(fs_topo_expire(t, T0 + 361 * S), 1);
    /* A clock that stepped back: the report stays (no negative age). */
    nb(t, "sw", "swp1", "01", "h1", "eth0", T0 + 400 * S);
    assert_int_equal(fs_topo_expire(t, T0 + 100 * S), 0);
    fs_topo_free(t);
}

static void
test_refused(void **state)
{
    (void)state;
    char err[128] = "";
    struct fs_topo *t = fs_topo_new();
    struct fs_topo_neighbor n = {"", "01", "h1", "eth0", "eth0", ""};
    assert_int_equal(fs_topo_neighbor(t, "sw", "snmp", &n, T0, err, sizeof err), -1);
    assert_non_null(strstr(err, "local port"));
    struct fs_topo_neighbor m = {"swp1", "", NULL, "eth0", "eth0", ""};
    assert_int_equal(fs_topo_neighbor(t, "sw", "snmp", &m, T0, err, sizeof err), -1);
    /* Long strings are cut, and a renewal with the same long string matches the cut. */
    char big[1000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    struct fs_topo_neighbor b = {big, big, big, big, big, big};
    assert_int_equal(fs_topo_neighbor(t, "sw", "snmp", &b, T0, err, sizeof err), 0);
    assert_int_equal(fs_topo_neighbor(t, "sw", "snmp", &b, T0 + 1, err, sizeof err), 0);
    struct fs_topo_snap s = snap(t, T0 + 1);
    assert_int_equal(s.n_links, 1);
    assert_int_equal(strlen(s.links[0].a.port), FS_TOPO_STR_MAX - 1);
    fs_topo_snap_free(&s);
    struct fs_topo_stats st;
    fs_topo_stats(t, &st);
    assert_int_equal(st.refused, 2);
    assert_int_equal(st.reports, 1);
    fs_topo_free(t);
}

/* Reporters on their own threads, a reader taking snapshots: every snapshot is whole
 * (each link has its ends and a source); run under TSan by make test-tsan. */
struct worker {
    struct fs_topo *t;
    int id;
};

static void *
reporter_main(void *arg)
{
    struct worker *w = arg;
    char target[16], port[16], chassis[16], err[128];
    snprintf(target, sizeof target, "sw%d", w->id);
    for (int round = 0; round < 200; round++) {
        for (int p = 0; p < 16; p++) {
            /* Ports come and go: odd ports only in even rounds. */
            if ((p & 1) && (round & 1))
                continue;
            snprintf(port, sizeof port, "swp%d", p);
            snprintf(chassis, sizeof chassis, "c%d-%d", w->id, p);
            struct fs_topo_neighbor n = {port, chassis, "", "eth0", "eth0", ""};
            fs_topo_neighbor(w->t, target, "snmp", &n, T0 + round * S, err, sizeof err);
        }
        fs_topo_table_end(w->t, target, "snmp", S, T0 + round * S);
    }
    return NULL;
}

static void
test_threads(void **state)
{
    (void)state;
    struct fs_topo *t = fs_topo_new();
    pthread_t th[4];
    struct worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){t, i};
        assert_int_equal(pthread_create(&th[i], NULL, reporter_main, &w[i]), 0);
    }
    for (int k = 0; k < 200; k++) {
        struct fs_topo_snap s = snap(t, T0 + 100 * S);
        for (size_t i = 0; i < s.n_links; i++) {
            assert_non_null(s.links[i].a.node);
            assert_non_null(s.links[i].b.port);
            assert_true(s.links[i].n_sources == 1);
        }
        assert_true(s.n_links <= 64);
        fs_topo_snap_free(&s);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    /* The last round (199, odd) listed the even ports only. */
    struct fs_topo_snap s = snap(t, T0 + 199 * S);
    assert_int_equal(s.n_links, 4 * 8);
    fs_topo_snap_free(&s);
    fs_topo_free(t);
}

/* The endpoint's adapter: parameters checked, filters, the JSON's shape. */
static void
test_api(void **state)
{
    (void)state;
    char err[256];
    struct fs_topology_query q;
    struct fs_query_arg bad[] = {{"bogus", "1"}};
    assert_int_equal(fs_topology_query_parse(bad, 1, &q, err, sizeof err), -1);
    assert_non_null(strstr(err, "bogus"));
    struct fs_query_arg twice[] = {{"node", "a"}, {"node", "b"}};
    assert_int_equal(fs_topology_query_parse(twice, 2, &q, err, sizeof err), -1);
    struct fs_query_arg empty[] = {{"source", NULL}};
    assert_int_equal(fs_topology_query_parse(empty, 1, &q, err, sizeof err), -1);
    struct fs_query_arg good[] = {{"node", "h2"}, {"source", "snmp"}};
    assert_int_equal(fs_topology_query_parse(good, 2, &q, err, sizeof err), 0);

    struct fs_topo *t = fs_topo_new();
    nb(t, "sw", "swp1", "01", "h1", "eth0", T0);
    nb(t, "sw", "swp2", "02", "h2", "eth\"0", T0);
    struct fs_buf out;
    fs_buf_init(&out, 1 << 20);
    assert_int_equal(fs_api_topology(t, &q, T0 + 1500000, &out), 200);
    assert_non_null(strstr(out.data, "\"links\":[{\"a\":{\"node\":\"h2\",\"port\":\"eth\\\"0\""));
    assert_non_null(strstr(out.data, "\"age_s\":1.500"));
    assert_null(strstr(out.data, "\"h1\""));
    assert_non_null(strstr(out.data, "\"hold_s\":120"));
    fs_buf_reset(&out);
    memset(&q, 0, sizeof q);
    assert_int_equal(fs_api_topology(t, &q, T0, &out), 200);
    assert_non_null(strstr(out.data, "\"name\":\"h1\",\"kind\":\"remote\""));
    fs_buf_free(&out);
    fs_topo_free(t);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_links),
        cmocka_unit_test(test_both_ends_one_link),
        cmocka_unit_test(test_table_end_removes),
        cmocka_unit_test(test_aging),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_api),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
