/* Static and host links (collector/topology): the links file in sFlow-RT's shape, the
 * configuration's topology block, the configuration's set in the store (never aging,
 * replaced whole) and hosts' neighbour tables (aging, whole tables). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <cmocka.h>

#include "config/config.h"
#include "topology/links_file.h"
#include "topology/topology.h"

#define S 1000000LL
#define T0 (1800000000LL * S)

static int
parse(const char *text, struct fs_static_link **v, size_t *n, char *err, size_t errlen)
{
    return fs_links_json_parse(text, strlen(text), v, n, err, errlen);
}

static void
test_file_sflowrt_shape(void **state)
{
    (void)state;
    struct fs_static_link *v;
    size_t n;
    char err[256] = "";
    const char *f = "{\"links\":{\"l1\":{\"node1\":\"leaf01\",\"port1\":\"Eth1/1\",\"node2\":"
                    "\"spine01\",\"port2\":\"Eth1/49\",\"extra\":1},\"l2\":{\"node1\":\"leaf01\","
                    "\"port1\":\"Eth1/2\",\"node2\":\"gpu01\",\"port2\":\"mlx5_0\"}},"
                    "\"nodes\":{\"leaf01\":{\"agent\":\"10.0.0.1\"}}}\n";
    assert_int_equal(parse(f, &v, &n, err, sizeof err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(v[0].a_node, "leaf01");
    assert_string_equal(v[0].b_port, "Eth1/49");
    assert_string_equal(v[1].b_node, "gpu01");
    fs_static_links_free(v, n);
    assert_int_equal(parse("{\"links\":{}}", &v, &n, err, sizeof err), 0);
    assert_int_equal(n, 0);
    assert_null(v);
}

static void
expect_bad(const char *text, const char *msg)
{
    struct fs_static_link *v = (void *)1;
    size_t n = 7;
    char err[256] = "";
    assert_int_equal(parse(text, &v, &n, err, sizeof err), -1);
    assert_null(v);
    assert_int_equal(n, 0);
    if (!strstr(err, msg))
        fail_msg("\"%s\" lacks \"%s\"", err, msg);
}

static void
test_file_bad(void **state)
{
    (void)state;
    expect_bad("{\"links\":{\"l1\":{\"node1\":\"a\",\"port1\":\"p\",\"node2\":\"b\"}}}",
               "links.l1.port2: missing");
    expect_bad("{\"links\":{\"l1\":{\"node1\":\"a\",\"port1\":7,\"node2\":\"b\",\"port2\":\"q\"}}}",
               "links.l1.port1: not a string");
    expect_bad(
        "{\"links\":{\"l1\":{\"node1\":\"\",\"port1\":\"p\",\"node2\":\"b\",\"port2\":\"q\"}}}",
        "links.l1.node1: not 1..255 bytes");
    expect_bad(
        "{\"links\":{\"l1\":{\"node1\":\"a\",\"port1\":\"p\",\"node2\":\"a\",\"port2\":\"p\"}}}",
        "links.l1: both ends");
    expect_bad("{\"links\":{\"l1\":[]}}", "links.l1: not an object");
    expect_bad("{\"links\":[]}", "links: not an object");
    expect_bad("{\"nodes\":{}}", "links: missing");
    expect_bad("[1]", "not a JSON object");
    expect_bad("{\"links\":{}", "not JSON");
    expect_bad("{\"links\":{}} {}", "not JSON");
    expect_bad("{\"links\":{\"a\":{\"b\":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]}}}", "not JSON");
}

static void
test_file_bounds(void **state)
{
    (void)state;
    size_t cap = (size_t)(FS_TOPO_MAX_STATIC + 1) * 80 + 32, o = 0;
    char *t = malloc(cap);
    assert_non_null(t);
    o += (size_t)snprintf(t + o, cap - o, "{\"links\":{");
    for (int i = 0; i <= FS_TOPO_MAX_STATIC; i++)
        o += (size_t)snprintf(t + o, cap - o,
                              "%s\"l%d\":{\"node1\":\"a\",\"port1\":\"p%d\",\"node2\":\"b\","
                              "\"port2\":\"q\"}",
                              i ? "," : "", i, i);
    o += (size_t)snprintf(t + o, cap - o, "}}");
    struct fs_static_link *v;
    size_t n;
    char err[256] = "";
    assert_int_equal(fs_links_json_parse(t, o, &v, &n, err, sizeof err), -1);
    assert_non_null(strstr(err, "links: 16385 links, at most 16384"));
    assert_int_equal(fs_links_json_parse(t, FS_LINKS_FILE_MAX_BYTES + 1, &v, &n, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "larger than"));
    free(t);
}

static struct fs_topo_snap
snap(struct fs_topo *t, int64_t now)
{
    struct fs_topo_snap s;
    char err[128];
    assert_int_equal(fs_topo_snapshot(t, now, &s, err, sizeof err), 0);
    return s;
}

static const struct fs_topo_link *
find_link(const struct fs_topo_snap *s, const char *node, const char *port)
{
    for (size_t i = 0; i < s->n_links; i++) {
        const struct fs_topo_link *l = &s->links[i];
        if ((!strcmp(l->a.node, node) && !strcmp(l->a.port, port)) ||
            (!strcmp(l->b.node, node) && !strcmp(l->b.port, port)))
            return l;
    }
    return NULL;
}

static void
test_static_set(void **state)
{
    (void)state;
    struct fs_topo *t = fs_topo_new();
    char err[128] = "";
    /* leaf01 is a target (it reported its own identity). */
    assert_int_equal(fs_topo_local(t, "leaf01", "snmp", "aa:bb", "leaf01.lab", T0, err, sizeof err),
                     0);
    struct fs_topo_static_link l[] = {{"leaf01", "Eth1/1", "gpu-host-01", "mlx5_0"},
                                      {"gpu-host-02", "mlx5_0", "leaf01", "Eth1/2"}};
    assert_int_equal(fs_topo_set_static(t, l, 2, T0, err, sizeof err), 0);
    /* A year later they are still there: hold 0 never expires. */
    struct fs_topo_snap s = snap(t, T0 + 365 * 24 * 3600 * S);
    assert_int_equal(s.n_links, 2);
    const struct fs_topo_link *k = find_link(&s, "gpu-host-02", "mlx5_0");
    assert_non_null(k);
    assert_string_equal(k->sources[0].source, "config");
    assert_string_equal(k->sources[0].reporter, "config");
    assert_int_equal(k->sources[0].hold_us, 0);
    assert_string_equal(k->b.node, "leaf01");
    assert_true(k->b.is_target);
    assert_false(k->a.is_target);
    k = find_link(&s, "gpu-host-01", "mlx5_0");
    assert_non_null(k);
    assert_true(!strcmp(k->b.node, "leaf01") ? k->b.is_target : k->a.is_target);
    /* No node named "config": the configuration is a source, not a system. */
    for (size_t i = 0; i < s.n_nodes; i++)
        assert_string_not_equal(s.nodes[i].name, "config");
    assert_int_equal(s.n_nodes, 3);
    fs_topo_snap_free(&s);
    /* Replaced whole: the kept one keeps first_seen, the other goes now. */
    assert_int_equal(fs_topo_set_static(t, l, 1, T0 + 10 * S, err, sizeof err), 0);
    s = snap(t, T0 + 11 * S);
    assert_int_equal(s.n_links, 1);
    assert_int_equal(s.links[0].first_seen_us, T0);
    fs_topo_snap_free(&s);
    /* Refused whole: the set stays. */
    struct fs_topo_static_link bad[] = {{"a", "p", "b", "q"}, {"a", "", "b", "q"}};
    assert_int_equal(fs_topo_set_static(t, bad, 2, T0 + 12 * S, err, sizeof err), -1);
    assert_non_null(strstr(err, "static link 2"));
    s = snap(t, T0 + 13 * S);
    assert_int_equal(s.n_links, 1);
    fs_topo_snap_free(&s);
    assert_int_equal(fs_topo_set_static(t, NULL, 0, T0 + 14 * S, err, sizeof err), 0);
    s = snap(t, T0 + 15 * S);
    assert_int_equal(s.n_links, 0);
    fs_topo_snap_free(&s);
    fs_topo_free(t);
}

static void
test_host_neighbors(void **state)
{
    (void)state;
    struct fs_topo *t = fs_topo_new();
    char err[128] = "";
    assert_int_equal(fs_topo_local(t, "leaf01", "snmp", "aa:bb", "leaf01.lab", T0, err, sizeof err),
                     0);
    struct fs_topo_neighbor n[] = {{"eth0", "aa:bb", "leaf01.lab", "swp1", "swp1", "swp1"},
                                   {"eth1", "cc:dd", "other-sw", "swp9", "swp9", ""}};
    assert_int_equal(fs_topo_host_neighbors(t, "gpu01", n, 2, 10 * S, T0, err, sizeof err), 0);
    /* The configuration states the same cable: one link, two sources. */
    struct fs_topo_static_link l[] = {{"leaf01", "swp1", "gpu01", "eth0"}};
    assert_int_equal(fs_topo_set_static(t, l, 1, T0, err, sizeof err), 0);
    struct fs_topo_snap s = snap(t, T0 + S);
    assert_int_equal(s.n_links, 2);
    const struct fs_topo_link *k = find_link(&s, "gpu01", "eth0");
    assert_non_null(k);
    assert_int_equal(k->n_sources, 2);
    bool host = false;
    for (size_t i = 0; i < k->n_sources; i++)
        if (!strcmp(k->sources[i].source, "host")) {
            host = true;
            assert_string_equal(k->sources[i].reporter, "gpu01");
            assert_int_equal(k->sources[i].hold_us, 30 * S);
        }
    assert_true(host);
    assert_string_equal(k->a.node, "gpu01");
    assert_false(k->a.is_target);
    assert_string_equal(k->b.node, "leaf01"); /* its chassis id is leaf01's */
    assert_true(k->b.is_target);
    k = find_link(&s, "gpu01", "eth1");
    assert_non_null(k);
    assert_string_equal(k->b.node, "other-sw");
    assert_false(k->b.is_target);
    fs_topo_snap_free(&s);
    /* The next post lists eth0 only: eth1 goes at once. */
    assert_int_equal(fs_topo_host_neighbors(t, "gpu01", n, 1, 10 * S, T0 + 10 * S, err, sizeof err),
                     0);
    s = snap(t, T0 + 11 * S);
    assert_int_equal(s.n_links, 1);
    fs_topo_snap_free(&s);
    /* The host stops posting: its report ages out after its hold (3 x 10 s, the floor),
     * the configuration's stays. */
    s = snap(t, T0 + 10 * S + 31 * S);
    assert_int_equal(s.n_links, 1);
    assert_int_equal(s.links[0].n_sources, 1);
    assert_string_equal(s.links[0].sources[0].source, "config");
    fs_topo_snap_free(&s);
    /* Refusals: no host name, a neighbour without a port. */
    assert_int_equal(fs_topo_host_neighbors(t, "", n, 1, 10 * S, T0, err, sizeof err), -1);
    struct fs_topo_neighbor bad = {"", "aa", "x", "p", "p", ""};
    assert_int_equal(fs_topo_host_neighbors(t, "h", &bad, 1, 10 * S, T0, err, sizeof err), -1);
    fs_topo_free(t);
}

static char *
cfg_errors(const char *text, struct fs_config **out)
{
    char *errors = NULL;
    struct fs_config *cfg = NULL;
    fs_config_parse(text, strlen(text), "t.yaml", NULL, &cfg, &errors);
    if (out)
        *out = cfg;
    else
        fs_config_free(cfg);
    return errors;
}

static void
test_config_block(void **state)
{
    (void)state;
    char path[] = "/tmp/fs_links_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *f = "{\"links\":{\"x\":{\"node1\":\"leaf02\",\"port1\":\"Eth1/3\",\"node2\":"
                    "\"spine01\",\"port2\":\"Eth1/49\"}}}";
    assert_int_equal(write(fd, f, strlen(f)), (ssize_t)strlen(f));
    close(fd);
    char text[1024];
    snprintf(text, sizeof text,
             "topology:\n"
             "  links:\n"
             "    - {a: {node: leaf01, port: Eth1/1}, b: {node: gpu-host-01, port: mlx5_0}}\n"
             "  links_file: %s\n",
             path);
    struct fs_config *cfg = NULL;
    char *e = cfg_errors(text, &cfg);
    if (e)
        fail_msg("%s", e);
    assert_int_equal(cfg->n_topo_links, 2);
    assert_string_equal(cfg->topo_links[0].b_node, "gpu-host-01");
    assert_string_equal(cfg->topo_links[1].a_node, "leaf02");
    assert_string_equal(cfg->topo_links_file, path);
    fs_config_free(cfg);

    /* A bad file refuses the configuration, naming the key and the file's problem. */
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_int_equal(write(fd, "{\"links\":{\"x\":{}}}", 18), 18);
    close(fd);
    e = cfg_errors(text, NULL);
    assert_non_null(e);
    if (!strstr(e, "topology.links_file: ") || !strstr(e, "links.x.node1: missing"))
        fail_msg("%s", e);
    free(e);
    unlink(path);
    e = cfg_errors(text, NULL);
    assert_non_null(e);
    if (!strstr(e, "topology.links_file"))
        fail_msg("%s", e);
    free(e);

    /* Entries are named by position; a missing port and a written index are refused. */
    e = cfg_errors("topology:\n  links:\n    - {a: {node: x, port: p}, b: {node: y, port: q}}\n"
                   "    - {a: {node: x, port: p}, b: {node: y}}\n",
                   NULL);
    assert_non_null(e);
    if (!strstr(e, "topology.links[#2].b"))
        fail_msg("%s", e);
    free(e);
    e = cfg_errors("topology:\n  links:\n    - {index: 1, a: {node: x, port: p}, b: {node: y, "
                   "port: q}}\n",
                   NULL);
    assert_non_null(e);
    if (!strstr(e, "is the entry's position"))
        fail_msg("%s", e);
    free(e);
    e = cfg_errors("topology:\n  links:\n    - {a: {node: x, port: p}, b: {node: x, port: p}}\n",
                   NULL);
    assert_non_null(e);
    if (!strstr(e, "both ends"))
        fail_msg("%s", e);
    free(e);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_sflowrt_shape), cmocka_unit_test(test_file_bad),
        cmocka_unit_test(test_file_bounds),        cmocka_unit_test(test_static_set),
        cmocka_unit_test(test_host_neighbors),     cmocka_unit_test(test_config_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
