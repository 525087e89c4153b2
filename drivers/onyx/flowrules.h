/*
 * Flow rules -> ONYX ACL configuration: the plan (`fabricscope plan-flow-rules`) and what
 * apply_flow_rules sends. Pure functions, no I/O.
 *
 * Each flow rule becomes one IPv4 ACL named FS_ONYX_ACL_PREFIX + rule name with one entry,
 * sequence FS_ONYX_ACL_SEQ. Only ACLs whose name starts with the prefix are ever touched,
 * and in them only that entry: an entry someone else added to a prefixed ACL is left alone.
 * The plan is computed against the running configuration, so applying it twice changes
 * nothing the second time.
 *
 * The entry's L4-port / ECN keywords are NOT in onyx-facts.md (section 3.3): the syntax
 * is ONE assumption, in rule_entry() of flowrules.c, UNVERIFIED against a real switch.
 * Binding the ACLs to ports is not planned (which ports carry the traffic is the
 * operator's call).
 *
 * Ownership: a plan owns its strings; free it with onyx_plan_free().
 */
#ifndef FS_ONYX_FLOWRULES_H
#define FS_ONYX_FLOWRULES_H

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"

#define FS_ONYX_ACL_PREFIX "fabricscope-"
#define FS_ONYX_ACL_SEQ 10

struct onyx_plan {
    char **cmds; /**< configuration commands in order, starting in config mode */
    size_t n, cap;
    char **rollback; /**< what undoes the additions of this plan, in order */
    size_t n_rollback, cap_rollback;
};

/**
 * Computes the commands that make the running configuration hold exactly the flow rules'
 * ACL entries. running (may be NULL: not read) is `show running-config` output; with NULL
 * the plan assumes none of the project's ACLs exist. Returns 0 or -1 (no memory, or a
 * rule that cannot be expressed) with errbuf.
 */
int onyx_flow_plan(const struct fs_flow_rule *rules, size_t n_rules, const char *running,
                   size_t running_len, struct onyx_plan *out, char *errbuf, size_t errlen);

/** The ACL entry text of a rule (after `seq-number N `). */
int onyx_flow_rule_entry(const struct fs_flow_rule *rule, char *buf, size_t len);

void onyx_plan_free(struct onyx_plan *p);

#endif
