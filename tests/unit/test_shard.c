/*
 * Sharding and external labels: the rendezvous assignment (each target exactly once,
 * resharding moves only what it must), --shard parsing, the shard and external_labels
 * configuration keys and the running cluster view.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster.h"
#include "config/config.h"

#define N_TARGETS 30

static void
target_name(char *buf, size_t len, int i)
{
    snprintf(buf, len, "leaf%02d.pod%d", i, i % 4);
}

/* 30 targets over 3 shards: each target is owned by exactly one shard, and every
 * shard instance (fs_shard_mine) agrees with the owner. */
static void
test_each_target_once(void **state)
{
    (void)state;
    int per_shard[3] = {0};
    for (int i = 0; i < N_TARGETS; i++) {
        char name[32];
        target_name(name, sizeof name, i);
        uint32_t owner = fs_shard_owner(name, 3);
        assert_true(owner < 3);
        int mine = 0;
        for (uint32_t s = 0; s < 3; s++) {
            struct fs_shard sh = {s, 3};
            if (fs_shard_mine(&sh, name)) {
                mine++;
                assert_int_equal(s, owner);
            }
        }
        assert_int_equal(mine, 1);
        per_shard[owner]++;
        /* Stable: the same name always hashes to the same owner. */
        assert_int_equal(fs_shard_owner(name, 3), owner);
    }
    /* Not a promise of balance, but no shard may be empty with 30 targets. */
    for (int s = 0; s < 3; s++)
        assert_true(per_shard[s] > 0);
    assert_int_equal(per_shard[0] + per_shard[1] + per_shard[2], N_TARGETS);
}

/* 3 -> 4 shards: a target that changes owner moves to the new shard 3, never between
 * old shards, and about a quarter of them move. */
static void
test_reshard_moves_only_to_new(void **state)
{
    (void)state;
    int moved = 0;
    for (int i = 0; i < N_TARGETS; i++) {
        char name[32];
        target_name(name, sizeof name, i);
        uint32_t before = fs_shard_owner(name, 3), after = fs_shard_owner(name, 4);
        if (before != after) {
            assert_int_equal(after, 3);
            moved++;
        }
    }
    print_message("3 -> 4 shards: %d of %d targets moved\n", moved, N_TARGETS);
    /* Expected 7.5 of 30; rendezvous hashing over these names moves between 4 and 12. */
    assert_true(moved >= 4 && moved <= 12);

    /* Over many names the share converges on 1/4. */
    int big = 20000, mv = 0;
    for (int i = 0; i < big; i++) {
        char name[32];
        snprintf(name, sizeof name, "sw-%d", i);
        uint32_t a = fs_shard_owner(name, 3), b = fs_shard_owner(name, 4);
        if (a != b) {
            assert_int_equal(b, 3);
            mv++;
        }
    }
    print_message("3 -> 4 shards: %.3f of %d names moved\n", (double)mv / big, big);
    assert_true(mv > big / 4 - big / 50 && mv < big / 4 + big / 50);
}

/* Shrinking 4 -> 3 moves only shard 3's targets. */
static void
test_shrink_moves_only_removed(void **state)
{
    (void)state;
    for (int i = 0; i < 2000; i++) {
        char name[32];
        snprintf(name, sizeof name, "spine-%d", i);
        uint32_t a = fs_shard_owner(name, 4), b = fs_shard_owner(name, 3);
        if (a != 3)
            assert_int_equal(a, b);
    }
}

/* The hash is part of the contract (a fleet of mixed versions must agree): fixed
 * answers for fixed names, worked out by hand from cluster.h's description (FNV-1a 64,
 * SplitMix64 finalizer; an independent Python rendering gave the same). */
static void
test_hash_is_fixed(void **state)
{
    (void)state;
    assert_int_equal(fs_shard_owner("anything", 0), 0);
    assert_int_equal(fs_shard_owner("anything", 1), 0);
    assert_int_equal(fs_shard_owner("tor1", 8), 4);
    assert_int_equal(fs_shard_owner("tor1", 3), 2);
    assert_int_equal(fs_shard_owner("spine-2", 8), 1);
    assert_int_equal(fs_shard_owner("leaf07.pod3", 8), 6);
    assert_int_equal(fs_shard_owner("sw-1", 3), 1);
    assert_int_equal(fs_shard_owner("sw-1", 4), 3);
    /* Spread: 800 names over 8 shards, none far from 100. */
    int hist[8] = {0};
    for (int i = 0; i < 800; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%d", i);
        hist[fs_shard_owner(name, 8)]++;
    }
    for (int s = 0; s < 8; s++)
        assert_true(hist[s] > 60 && hist[s] < 140);
}

static void
test_shard_parse(void **state)
{
    (void)state;
    struct fs_shard s;
    char err[160];
    assert_int_equal(fs_shard_parse("0/3", &s, err, sizeof err), 0);
    assert_int_equal(s.index, 0);
    assert_int_equal(s.count, 3);
    assert_int_equal(fs_shard_parse("2/3", &s, err, sizeof err), 0);
    assert_int_equal(s.index, 2);
    const char *bad[] = {"3/3", "1", "/3", "1/", "-1/3", "1/0", "1/3x", "a/b", "1/5000", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(fs_shard_parse(bad[i], &s, err, sizeof err), -1);
        assert_non_null(strstr(err, "INDEX/COUNT"));
    }
}

static struct fs_config *
parse_ok(const char *yaml)
{
    struct fs_config *cfg = NULL;
    char *errors = NULL;
    int n = fs_config_parse(yaml, strlen(yaml), "t.yaml", NULL, &cfg, &errors);
    if (n != 0)
        fail_msg("unexpected problems: %s", errors ? errors : "?");
    return cfg;
}

static char *
parse_bad(const char *yaml)
{
    struct fs_config *cfg = NULL;
    char *errors = NULL;
    assert_true(fs_config_parse(yaml, strlen(yaml), "t.yaml", NULL, &cfg, &errors) > 0);
    assert_null(cfg);
    assert_non_null(errors);
    return errors;
}

static void
test_config_keys(void **state)
{
    (void)state;
    struct fs_config *cfg = parse_ok("shard: {index: 1, count: 3}\n"
                                     "external_labels: {replica: b, cluster: \"eu-1\"}\n"
                                     "targets:\n"
                                     "  - name: a\n"
                                     "    address: 127.0.0.1\n");
    assert_int_equal(cfg->shard_index, 1);
    assert_int_equal(cfg->shard_count, 3);
    size_t n = 0;
    const struct fs_kv *l = fs_external_labels(cfg, &n);
    assert_int_equal(n, 2);
    assert_string_equal(l[0].key, "cluster"); /* sorted */
    assert_string_equal(l[0].value, "eu-1");
    assert_string_equal(l[1].key, "replica");
    assert_string_equal(l[1].value, "b");

    /* --shard wins over the file. */
    struct fs_shard o = {2, 4};
    struct fs_shard e = fs_shard_effective(cfg, &o);
    assert_int_equal(e.index, 2);
    assert_int_equal(e.count, 4);
    e = fs_shard_effective(cfg, NULL);
    assert_int_equal(e.index, 1);
    assert_int_equal(e.count, 3);
    fs_config_free(cfg);

    cfg = parse_ok("targets: [{name: a, address: 127.0.0.1}]\n");
    assert_int_equal(cfg->shard_count, 0);
    assert_int_equal(cfg->n_external_labels, 0);
    fs_config_free(cfg);

    char *e1 = parse_bad("shard: {index: 3, count: 3}\n");
    assert_non_null(strstr(e1, "t.yaml:1:16: shard.index: 3 is not below shard.count (3)"));
    free(e1);
    char *e2 = parse_bad("shard: {index: 0}\n");
    assert_non_null(strstr(e2, "count"));
    free(e2);
    char *e3 = parse_bad("external_labels: {target: x}\n");
    assert_non_null(strstr(e3, "fabricscope sets itself"));
    free(e3);
    char *e4 = parse_bad("external_labels: {rack: x}\n"
                         "targets: [{name: a, address: h, labels: {rack: r1}}]\n");
    assert_non_null(strstr(e4, "also a static label of target a"));
    free(e4);
}

struct seen {
    int n, mine, other;
    char last_other[32];
};

static int
seen_cb(void *arg, const char *target, uint32_t owner, bool mine)
{
    struct seen *s = arg;
    s->n++;
    if (mine) {
        s->mine++;
        assert_int_equal(owner, 1);
    } else {
        s->other++;
        assert_int_not_equal(owner, 1);
        snprintf(s->last_other, sizeof s->last_other, "%s", target);
    }
    return 0;
}

static void
test_cluster_view(void **state)
{
    (void)state;
    char yaml[4096];
    size_t o =
        (size_t)snprintf(yaml, sizeof yaml, "external_labels: {replica: \"a\\\"b\"}\ntargets:\n");
    for (int i = 0; i < N_TARGETS; i++) {
        char name[32];
        target_name(name, sizeof name, i);
        o += (size_t)snprintf(yaml + o, sizeof yaml - o, "  - {name: %s, address: h}\n", name);
    }
    struct fs_config *cfg = parse_ok(yaml);
    struct fs_cluster *cl = fs_cluster_new();
    assert_non_null(cl);
    struct fs_shard s = {1, 3};
    assert_int_equal(fs_cluster_update(cl, cfg, &s), 0);
    struct seen sn = {0};
    fs_cluster_foreach_target(cl, seen_cb, &sn);
    assert_int_equal(sn.n, N_TARGETS);
    int expect_mine = 0;
    for (int i = 0; i < N_TARGETS; i++) {
        char name[32];
        target_name(name, sizeof name, i);
        expect_mine += fs_shard_owner(name, 3) == 1;
    }
    assert_int_equal(sn.mine, expect_mine);
    struct fs_buf b;
    fs_buf_init(&b, 4096);
    fs_cluster_labels_text(cl, &b);
    assert_string_equal(b.data, "replica=\"a\\\"b\"");
    fs_buf_free(&b);
    struct fs_shard got = fs_cluster_shard(cl);
    assert_int_equal(got.index, 1);
    assert_int_equal(got.count, 3);
    fs_cluster_free(cl);
    fs_config_free(cfg);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_target_once),
        cmocka_unit_test(test_reshard_moves_only_to_new),
        cmocka_unit_test(test_shrink_moves_only_removed),
        cmocka_unit_test(test_hash_is_fixed),
        cmocka_unit_test(test_shard_parse),
        cmocka_unit_test(test_config_keys),
        cmocka_unit_test(test_cluster_view),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
