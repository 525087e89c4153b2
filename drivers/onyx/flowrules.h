/*
 * Flow rules -> ONYX ACL configuration: the plan (`fabricscope plan-flow-rules`) and what
 * apply_flow_rules sends, and how the ACL's entry counters become per-rule counts. Pure
 * functions, no I/O.
 *
 * All rules live in ONE IPv4 ACL, FS_ONYX_ACL_NAME, bound to the selected ports: ONYX
 * binds one IPv4 ACL per port (ingress only), so one ACL a rule could not be bound to
 * the same port together. Its entries are the rules in specificity order (a rule that
 * lies within another, e.g. the CE-marked part of a rule, comes first: ACLs stop at the
 * first match), sequence 10, 20, ...; the last entry, FS_ONYX_ACL_CATCHALL_SEQ, permits
 * everything, so binding the ACL never drops traffic (an ACL ends with an implicit
 * deny). A port already bound to an ACL that is not the project's is never re-bound (it
 * would replace the operator's ACL): it is skipped and named in the plan's notes.
 *
 * Only ACLs whose name starts with FS_ONYX_ACL_PREFIX are ever changed; other
 * prefixed ACLs (the per-rule ACLs of earlier versions) lose their project entry, and
 * go when nothing else is in them. The plan is computed against the running
 * configuration, so applying it twice changes nothing the second time.
 *
 * ASSUMED, UNVERIFIED against a real switch (onyx-facts has neither): the entry
 * keywords for L4 port ranges and ECN (onyx_flow_rule_entry), and the binding commands
 * `interface ethernet 1/N ipv4 port access-group NAME` (the verbatim form is for
 * `interface vlan`) and its `no` form. A rule's `tc` cannot be matched by an ACL: its ACL
 * count covers every traffic class (a note of the plan says so).
 *
 * Ownership: a plan owns its strings; free it with onyx_plan_free().
 */
#ifndef FS_ONYX_FLOWRULES_H
#define FS_ONYX_FLOWRULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

#define FS_ONYX_ACL_PREFIX "fabricscope-"
#define FS_ONYX_ACL_NAME "fabricscope-flows"
#define FS_ONYX_ACL_SEQ 10 /* the entry of the per-rule ACLs of earlier versions */
#define FS_ONYX_ACL_CATCHALL_SEQ 60000
#define FS_ONYX_ACL_CATCHALL "permit ip any any"

struct onyx_plan {
    char **cmds; /**< configuration commands in order, starting in config mode */
    size_t n, cap;
    char **rollback; /**< what undoes the additions of this plan, in order */
    size_t n_rollback, cap_rollback;
    char **notes; /**< what the plan cannot do or what its counts will miss, one a line */
    size_t n_notes, cap_notes;
    size_t n_bound; /**< ports the ACL is bound to once the plan is applied */
};

/**
 * Computes the commands that make the running configuration hold the flow rules' ACL,
 * bound to ports. running (may be NULL: not read) is `show running-config` output; with
 * NULL the plan assumes none of the project's ACLs exist. ports: the switch's port
 * names as its show commands print them ("Eth1/49", "Eth1/1/2"), already filtered by
 * the target's selection; NULL when they are not known (no binding is planned then, and
 * a note says so). Returns 0 or -1 (no memory, or a rule that cannot be expressed) with
 * errbuf.
 */
int onyx_flow_plan(const struct fs_flow_rule *rules, size_t n_rules, const char *running,
                   size_t running_len, const char *const *ports, size_t n_ports,
                   struct onyx_plan *out, char *errbuf, size_t errlen);

/** The ACL entry text of a rule (after `seq-number N `). */
int onyx_flow_rule_entry(const struct fs_flow_rule *rule, char *buf, size_t len);

/**
 * The order of the rules' entries in the ACL: order[k] is the index of the rule at
 * sequence 10 * (k + 1). A rule within another comes before it. order has n_rules slots.
 */
void onyx_flow_order(const struct fs_flow_rule *rules, size_t n_rules, size_t *order);

/** True when every packet that rule b's ACL entry matches, a's matches too (tc ignored:
 *  an ACL cannot see it). */
bool onyx_flow_rule_within(const struct fs_flow_rule *b, const struct fs_flow_rule *a);

/**
 * Per-rule counts from the ACL's entry counts: each packet is counted by the first entry
 * it matches, so a rule's count is its own entry's plus those of the rules within it
 * (ordered before it). entry_pk/entry_by are indexed like order (entry k = sequence
 * 10 * (k + 1)); rule_pk/rule_by are indexed like rules. ce_pk[i]: the CE-marked packets
 * of rule i, when a rule within it is the same rule with `ecn: ce` (UINT64_MAX when no
 * such rule exists).
 */
void onyx_flow_rule_counts(const struct fs_flow_rule *rules, size_t n_rules, const size_t *order,
                           const uint64_t *entry_pk, const uint64_t *entry_by, uint64_t *rule_pk,
                           uint64_t *rule_by, uint64_t *ce_pk);

/** "Eth1/49" -> "1/49" (the form interface commands take); false if name is not one. */
bool onyx_port_cli_name(const char *name, char *buf, size_t len);

void onyx_plan_free(struct onyx_plan *p);

#endif
