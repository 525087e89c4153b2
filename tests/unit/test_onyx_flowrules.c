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

static const char *const ports2[] = {"Eth1/1", "Eth1/2"};

static void
test_fresh_switch(void **state)
{
    (void)state;
    struct onyx_plan p;
    char err[128];
    const char *run =
        "##\n## Running database \"initial\"\n##\nno cli default prefix-modes enable\n";
    assert_int_equal(onyx_flow_plan(rules, 2, run, strlen(run), ports2, 2, &p, err, sizeof(err)),
                     0);
    /* one ACL, the CE rule first (first match), the catch-all before anything is bound */
    const char *want[] = {
        "ipv4 access-list fabricscope-flows",
        "seq-number 60000 permit ip any any",
        "seq-number 10 permit udp any any dst-port-range 4791 4791 ecn 3",
        "seq-number 20 permit udp any any dst-port-range 4791 4791",
        "exit",
        "interface ethernet 1/1 ipv4 port access-group fabricscope-flows",
        "interface ethernet 1/2 ipv4 port access-group fabricscope-flows",
    };
    expect_cmds(&p, want, 7);
    assert_int_equal(p.n_bound, 2);
    assert_int_equal(p.n_rollback, 3);
    assert_string_equal(p.rollback[0], "interface ethernet 1/1 no ipv4 port access-group");
    assert_string_equal(p.rollback[2], "no ipv4 access-list fabricscope-flows");
    assert_int_equal(p.n_notes, 1); /* the tc an ACL cannot match */
    assert_non_null(strstr(p.notes[0], "tc 3"));
    onyx_plan_free(&p);
    /* not read at all: the ACL, no binding, and a note saying why */
    assert_int_equal(onyx_flow_plan(rules, 2, NULL, 0, NULL, 0, &p, err, sizeof(err)), 0);
    assert_int_equal(p.n, 5);
    assert_int_equal(p.n_notes, 2);
    assert_non_null(strstr(p.notes[1], "ports were not read"));
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
        "   ipv4 access-list fabricscope-flows\n"
        "   ipv4 access-list fabricscope-flows seq-number 10 permit udp any any dst-port-range "
        "4791 4791 ecn 3\n"
        "   ipv4 access-list fabricscope-flows seq-number 20 permit udp any any dst-port-range "
        "4791 4791\n"
        "   ipv4 access-list fabricscope-flows seq-number 60000 permit ip any any\n"
        "   ipv4 access-list nmn-hmn\n"
        "   ipv4 access-list nmn-hmn seq-number 10 deny ip 10.252.0.0 mask 255.255.128.0 any\n"
        "   interface ethernet 1/1 ipv4 port access-group fabricscope-flows\n"
        "   interface ethernet 1/2 ipv4 port access-group fabricscope-flows\n";
    assert_int_equal(onyx_flow_plan(rules, 2, flat, strlen(flat), ports2, 2, &p, err, sizeof(err)),
                     0);
    assert_int_equal(p.n, 0);
    assert_int_equal(p.n_bound, 2);
    onyx_plan_free(&p);
    const char *block = "ipv4 access-list fabricscope-flows\n"
                        "  bind-point rif\n"
                        "  seq-number 10 permit udp any any dst-port-range 4791 4791 ecn 3\n"
                        "  seq-number 20 permit udp any any dst-port-range 4791 4791\n"
                        "  seq-number 60000 permit ip any any\n"
                        "  exit\n"
                        "interface ethernet 1/1\n"
                        "  mtu 9216 force\n"
                        "  ipv4 port access-group fabricscope-flows\n"
                        "  exit\n"
                        "interface ethernet 1/2 ipv4 port access-group fabricscope-flows\n";
    assert_int_equal(
        onyx_flow_plan(rules, 2, block, strlen(block), ports2, 2, &p, err, sizeof(err)), 0);
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
        "ipv4 access-list fabricscope-flows seq-number 10 permit udp any any dst-port-range 4791 "
        "4792\n"
        "ipv4 access-list fabricscope-flows seq-number 30 deny ip any any\n"
        "ipv4 access-list fabricscope-flows seq-number 60000 permit ip any any\n"
        "ipv4 access-list fabricscope-old seq-number 10 permit tcp any any\n"
        "ipv4 access-list fabricscope-mixed seq-number 10 permit tcp any any\n"
        "ipv4 access-list fabricscope-mixed seq-number 30 permit ip any any\n"
        "ipv4 access-list other seq-number 10 permit udp any any dst-port-range 4791 4791\n"
        "interface ethernet 1/1 ipv4 port access-group fabricscope-flows\n"
        "interface ethernet 1/2 ipv4 port access-group other\n"
        "interface ethernet 1/3 ipv4 port access-group fabricscope-flows\n";
    assert_int_equal(onyx_flow_plan(rules, 1, run, strlen(run), ports2, 2, &p, err, sizeof(err)),
                     0);
    const char *want[] = {
        "ipv4 access-list fabricscope-flows",
        "no seq-number 30",
        "no seq-number 10",
        "seq-number 10 permit udp any any dst-port-range 4791 4791",
        "exit",
        "interface ethernet 1/3 no ipv4 port access-group",
        "no ipv4 access-list fabricscope-old",
        "ipv4 access-list fabricscope-mixed",
        "no seq-number 10",
        "exit",
    };
    expect_cmds(&p, want, 10);
    assert_int_equal(p.n_bound, 1); /* 1/2 has the operator's ACL: left alone */
    int foreign = 0;
    for (size_t i = 0; i < p.n_notes; i++)
        foreign += strstr(p.notes[i], "Eth1/2 is bound to ACL other") != NULL;
    assert_int_equal(foreign, 1);
    /* rollback restores the old entries of our ACL */
    assert_string_equal(p.rollback[0], "ipv4 access-list fabricscope-flows");
    assert_string_equal(p.rollback[2], "seq-number 10 permit udp any any dst-port-range 4791 4792");
    assert_string_equal(p.rollback[3], "seq-number 30 deny ip any any");
    for (size_t i = 0; i < p.n; i++)
        assert_null(strstr(p.cmds[i], "list other"));
    onyx_plan_free(&p);
    /* no rule left: everything of ours goes, unbinding first */
    assert_int_equal(onyx_flow_plan(rules, 0, run, strlen(run), ports2, 2, &p, err, sizeof(err)),
                     0);
    assert_string_equal(p.cmds[0], "interface ethernet 1/1 no ipv4 port access-group");
    assert_string_equal(p.cmds[1], "interface ethernet 1/3 no ipv4 port access-group");
    assert_string_equal(p.cmds[2], "no ipv4 access-list fabricscope-flows");
    onyx_plan_free(&p);
}

/* First match: a rule's count is its entry's plus those of the rules within it. */
static void
test_counts_from_entries(void **state)
{
    (void)state;
    struct fs_flow_rule r3[] = {
        {.name = "nccl", .protocol = FS_PROTO_UDP, .dst_lo = 4791, .dst_hi = 4791, .tc = -1},
        {.name = "sockets", .protocol = FS_PROTO_TCP, .dst_lo = 50000, .dst_hi = 51000, .tc = -1},
        {.name = "nccl-ce",
         .protocol = FS_PROTO_UDP,
         .dst_lo = 4791,
         .dst_hi = 4791,
         .ecn_ce = true,
         .tc = -1},
    };
    size_t order[3];
    onyx_flow_order(r3, 3, order);
    assert_int_equal(order[0], 2);
    assert_int_equal(order[1], 0);
    assert_int_equal(order[2], 1);
    uint64_t epk[] = {5, 100, 40}, eby[] = {500, 10000, 4000}, pk[3], by[3], ce[3];
    onyx_flow_rule_counts(r3, 3, order, epk, eby, pk, by, ce);
    assert_true(pk[0] == 105 && by[0] == 10500 && ce[0] == 5);
    assert_true(pk[1] == 40 && ce[1] == UINT64_MAX);
    assert_true(pk[2] == 5 && ce[2] == UINT64_MAX);
    assert_true(onyx_flow_rule_within(&r3[2], &r3[0]));
    assert_false(onyx_flow_rule_within(&r3[0], &r3[2]));
    char b[16];
    assert_true(onyx_port_cli_name("Eth1/1/2", b, sizeof(b)));
    assert_string_equal(b, "1/1/2");
    assert_false(onyx_port_cli_name("mgmt0", b, sizeof(b)));
}

static void
test_bad_rules(void **state)
{
    (void)state;
    struct onyx_plan p;
    char err[128];
    struct fs_flow_rule bad_name = {.name = "has space", .protocol = FS_PROTO_UDP};
    assert_int_not_equal(onyx_flow_plan(&bad_name, 1, NULL, 0, NULL, 0, &p, err, sizeof(err)), 0);
    struct fs_flow_rule ports_no_proto = {.name = "x", .dst_lo = 1, .dst_hi = 2};
    assert_int_not_equal(onyx_flow_plan(&ports_no_proto, 1, NULL, 0, NULL, 0, &p, err, sizeof(err)),
                         0);
    assert_non_null(strstr(err, "protocol"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fresh_switch),
        cmocka_unit_test(test_idempotent_flat_and_block),
        cmocka_unit_test(test_changed_stale_and_foreign),
        cmocka_unit_test(test_counts_from_entries),
        cmocka_unit_test(test_bad_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
