/*
 * The CLI driver's configuration block (`cli:` under a target, fabricscope-cli.yang):
 * the checks YANG cannot express and building struct fs_onyx_cfg (onyx_config.h).
 * Flow rules are not part of the block: they are the configuration's, and reach the
 * driver through the target (fs_target_cfg.flow_rules) at target_add.
 */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/block.h"
#include "onyx_config.h"

#define MIN_OUTPUT_BYTES (64u << 10)

int
fs_onyx_config_build(const struct lyd_node *n, void **dcfg, struct fs_cfg_errs *errs)
{
    struct fs_onyx_cfg *c = malloc(sizeof(*c));
    const struct lyd_node *leaf;
    const char *v;
    uint64_t bytes = 0;

    *dcfg = c;
    if (!c)
        return -1;
    fs_onyx_cfg_defaults(c);
    c->port = (uint16_t)fs_cfg_long(n, "port", 22);
    c->interval_us = fs_cfg_duration_us(n, "interval", c->interval_us);
    c->timeout_us = fs_cfg_duration_us(n, "timeout", c->timeout_us);
    c->apply_flow_rules = fs_cfg_bool(n, "apply_flow_rules");
    /* the same keys and defaults as the snmp block's (fabricscope-snmp.yang) */
    c->lldp = fs_cfg_kid(n, "lldp") ? fs_cfg_bool(n, "lldp") : true;
    c->lldp_interval_us = fs_cfg_duration_us(n, "lldp_interval", c->lldp_interval_us);
    v = fs_cfg_cval(n, "host_key_policy");
    c->host_key_policy =
        v && !strcmp(v, "accept-new") ? FS_ONYX_HOSTKEY_ACCEPT_NEW : FS_ONYX_HOSTKEY_STRICT;
    /* Durations of 0 are refused by the walker already. */
    if ((leaf = fs_cfg_kid(n, "max_output"))) {
        if (fs_parse_size(fs_cfg_value(leaf), &bytes) != 0 || bytes < MIN_OUTPUT_BYTES)
            fs_cfg_node_err(errs, leaf, false,
                            "must be at least 64KiB (one 64-port switch's JSON output)");
        else
            c->max_output_bytes = (size_t)bytes;
    }
    if (fs_cfg_strdup(&c->username, n, "username") || fs_cfg_strdup(&c->key_file, n, "key_file") ||
        fs_cfg_strdup(&c->known_hosts, n, "known_hosts") ||
        fs_cfg_secret_ref(&c->password, n, "password") ||
        fs_cfg_secret_ref(&c->enable_password, n, "enable_password") ||
        fs_cfg_strdup(&c->flow_rule_ports, n, "flow_rule_ports"))
        return -1;
    if (c->flow_rule_ports && (leaf = fs_cfg_kid(n, "flow_rule_ports"))) {
        regex_t re;
        char anchored[600];
        snprintf(anchored, sizeof(anchored), "^(%s)$", c->flow_rule_ports);
        int rc = regcomp(&re, anchored, REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
            char why[128];
            regerror(rc, &re, why, sizeof(why));
            fs_cfg_node_err(errs, leaf, false, "not a POSIX extended regular expression: %s", why);
        } else {
            regfree(&re);
        }
    }
    return 0;
}

void
fs_onyx_config_free(void *dcfg)
{
    struct fs_onyx_cfg *c = dcfg;
    if (!c)
        return;
    fs_onyx_cfg_free(c);
    free(c);
}

bool
fs_onyx_config_equal(const void *pa, const void *pb)
{
    const struct fs_onyx_cfg *a = pa, *b = pb;
    if (!a || !b)
        return a == b;
    /* Flow rules are compared with the target (uses_flow_rules), not here. */
    return a->port == b->port && fs_cfg_str_equal(a->username, b->username) &&
           fs_cfg_secret_ref_equal(&a->password, &b->password) &&
           fs_cfg_str_equal(a->key_file, b->key_file) &&
           fs_cfg_str_equal(a->known_hosts, b->known_hosts) &&
           a->host_key_policy == b->host_key_policy &&
           fs_cfg_secret_ref_equal(&a->enable_password, &b->enable_password) &&
           a->interval_us == b->interval_us && a->timeout_us == b->timeout_us &&
           a->apply_flow_rules == b->apply_flow_rules && a->plan_only == b->plan_only &&
           a->max_output_bytes == b->max_output_bytes && a->lldp == b->lldp &&
           a->lldp_interval_us == b->lldp_interval_us &&
           fs_cfg_str_equal(a->flow_rule_ports, b->flow_rule_ports);
}

int64_t
fs_onyx_config_interval(const void *dcfg)
{
    const struct fs_onyx_cfg *c = dcfg;
    return c && c->interval_us > 0 ? c->interval_us : 5000000;
}
