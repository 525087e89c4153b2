/*
 * Flow rules -> ONYX ACL plan: fresh switch, already configured (idempotent, both the
 * flat running-config form and the block form with other sub-commands), a changed rule, a rule no
 * longer configured, foreign ACLs and foreign entries left alone, rollback of additions, names that
 * cannot be ACL names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "flowrules.h"

static struct fs_flow_rule rules[] = {
    {.name = "nccl", .protocol = FS_PROTO_UDP, .dst_lo = 4791, .dst_hi = 4791, .tc = 3},
    {.name = "nccl-ce",
     .protocol = FS_PROTO_UDP,
     .dst_lo = 4791,
     .dst_hi = 4791,
     .ecn_ce = true,
     .tc = -1},
};

static void
expect_cmds(const struct onyx_plan *p, const char *const *want, size_t n)
{
    for (size_t i = 0; i < p->n && i < n; i++)
        assert_string_equal(p->cmds[i], want[i]);
    assert_int_equal(p->n, n);
}

static void
test_fresh_switch(void **state)
{
    (void)state;
    struct onyx_plan p;
    char err[128];
    const char *run =
        "##\n## Running database \"initial\"\n##\nno cli default prefix-modes enable\n";
    assert_int_equal(onyx_flow_plan(rules, 2, run, strlen(run), &p, err, sizeof(err)), 0);
    const char *want[] = {
        "ipv4 access-list fabricscope-nccl",
        "seq-number 10 permit udp any any dst-port-range 4791 4791",
        "exit",
        "ipv4 access-list fabricscope-nccl-ce",
        "seq-number 10 permit udp any any dst-port-range 4791 4791 ecn 3",
        "exit",
    };
    expect_cmds(&p, want, 6);
    assert_int_equal(p.n_rollback, 2);
    assert_string_equal(p.rollback[0], "no ipv4 access-list fabricscope-nccl");
    onyx_plan_free(&p);
    /* not read at all: the same */
    assert_int_equal(onyx_flow_plan(rules, 2, NULL, 0, &p, err, sizeof(err)), 0);
    assert_int_equal(p.n, 6);
    onyx_plan_free(&p);
}

static void
test_idempotent_flat_and_block(void **state)
{
    (void)state;
    struct onyx_plan p;
    char err[128];
    const char *flat =
        "##\n## ACL configuration\n##\n"
        "   ipv4 access-list fabricscope-nccl\n"
        "   ipv4 access-list fabricscope-nccl seq-number 10 permit udp any any dst-port-range 4791 "
        "4791\n"
        "   ipv4 access-list fabricscope-nccl-ce\n"
        "   ipv4 access-list fabricscope-nccl-ce seq-number 10 permit udp any any dst-port-range "
        "4791 4791 ecn 3\n"
        "   ipv4 access-list nmn-hmn\n"
        "   ipv4 access-list nmn-hmn seq-number 10 deny ip 10.252.0.0 mask 255.255.128.0 any\n";
    assert_int_equal(onyx_flow_plan(rules, 2, flat, strlen(flat), &p, err, sizeof(err)), 0);
    assert_int_equal(p.n, 0);
    onyx_plan_free(&p);
    const char *block = "ipv4 access-list fabricscope-nccl\n"
                        "  bind-point rif\n"
                        "  seq-number 10 permit udp any any dst-port-range 4791 4791\n"
                        "  exit\n"
                        "ipv4 access-list fabricscope-nccl-ce\n"
                        "  seq-number 10 permit udp any any dst-port-range 4791 4791 ecn 3\n"
                        "  exit\n";
    assert_int_equal(onyx_flow_plan(rules, 2, block, strlen(block), &p, err, sizeof(err)), 0);
    assert_int_equal(p.n, 0);
    onyx_plan_free(&p);
}

static void
test_changed_stale_and_foreign(void **state)
{
    (void)state;
    struct onyx_plan p;
    char err[128];
    const char *run =
        "ipv4 access-list fabricscope-nccl seq-number 10 permit udp any any dst-port-range 4791 "
        "4792\n"
        "ipv4 access-list fabricscope-nccl seq-number 20 deny ip any any\n"
        "ipv4 access-list fabricscope-old seq-number 10 permit tcp any any\n"
        "ipv4 access-list fabricscope-mixed seq-number 10 permit tcp any any\n"
        "ipv4 access-list fabricscope-mixed seq-number 30 permit ip any any\n"
        "ipv4 access-list other seq-number 10 permit udp any any dst-port-range 4791 4791\n";
    assert_int_equal(onyx_flow_plan(rules, 1, run, strlen(run), &p, err, sizeof(err)), 0);
    const char *want[] = {
        "ipv4 access-list fabricscope-nccl",
        "no seq-number 10",
        "seq-number 10 permit udp any any dst-port-range 4791 4791",
        "exit",
        "no ipv4 access-list fabricscope-old",
        "ipv4 access-list fabricscope-mixed",
        "no seq-number 10",
        "exit",
    };
    expect_cmds(&p, want, 8);
    /* rollback restores the old entry of the changed rule */
    assert_int_equal(p.n_rollback, 4);
    assert_string_equal(p.rollback[2], "seq-number 10 permit udp any any dst-port-range 4791 4792");
    for (size_t i = 0; i < p.n; i++)
        assert_null(strstr(p.cmds[i], "list other"));
    onyx_plan_free(&p);
}

static void
test_bad_rules(void **state)
{
    (void)state;
    struct onyx_plan p;
    char err[128];
    struct fs_flow_rule bad_name = {.name = "has space", .protocol = FS_PROTO_UDP};
    assert_int_not_equal(onyx_flow_plan(&bad_name, 1, NULL, 0, &p, err, sizeof(err)), 0);
    struct fs_flow_rule ports_no_proto = {.name = "x", .dst_lo = 1, .dst_hi = 2};
    assert_int_not_equal(onyx_flow_plan(&ports_no_proto, 1, NULL, 0, &p, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "protocol"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fresh_switch),
        cmocka_unit_test(test_idempotent_flat_and_block),
        cmocka_unit_test(test_changed_stale_and_foreign),
        cmocka_unit_test(test_bad_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
