/*
 * struct fs_onyx_cfg helpers (see onyx_config.h).
 */
#include "onyx_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
fs_onyx_cfg_defaults(struct fs_onyx_cfg *c)
{
    memset(c, 0, sizeof(*c));
    c->port = 22;
    c->interval_us = 5000000;
    c->timeout_us = 10000000;
    c->max_output_bytes = 16u << 20;
    c->host_key_policy = FS_ONYX_HOSTKEY_STRICT;
    c->lldp = true;
    c->lldp_interval_us = 30000000;
}

static int
dup_str(char **dst, const char *src)
{
    *dst = NULL;
    if (!src)
        return 0;
    *dst = strdup(src);
    return *dst ? 0 : -1;
}

static int
dup_ref(struct fs_secret_ref *dst, const struct fs_secret_ref *src)
{
    if (dup_str(&dst->file, src->file) < 0 || dup_str(&dst->env, src->env) < 0 ||
        dup_str(&dst->key, src->key) < 0)
        return -1;
    return 0;
}

static int
dup_rules(struct fs_onyx_cfg *dst, const struct fs_flow_rule *rules, size_t n)
{
    dst->flow_rules = NULL;
    dst->n_flow_rules = 0;
    if (n == 0)
        return 0;
    dst->flow_rules = calloc(n, sizeof(*rules));
    if (!dst->flow_rules)
        return -1;
    for (size_t i = 0; i < n; i++) {
        dst->flow_rules[i] = rules[i];
        dst->flow_rules[i].name = NULL;
        dst->n_flow_rules = i + 1;
        if (dup_str(&dst->flow_rules[i].name, rules[i].name) < 0)
            return -1;
    }
    return 0;
}

int
fs_onyx_cfg_copy(const struct fs_onyx_cfg *src, const struct fs_flow_rule *rules, size_t n_rules,
                 struct fs_onyx_cfg *dst)
{
    *dst = *src;
    /* nothing of src may be freed through dst if a copy below fails */
    dst->username = dst->key_file = dst->known_hosts = dst->flow_rule_ports = NULL;
    memset(&dst->password, 0, sizeof(dst->password));
    memset(&dst->enable_password, 0, sizeof(dst->enable_password));
    dst->flow_rules = NULL;
    dst->n_flow_rules = 0;
    if (dup_str(&dst->username, src->username) < 0 || dup_ref(&dst->password, &src->password) < 0 ||
        dup_str(&dst->key_file, src->key_file) < 0 ||
        dup_str(&dst->known_hosts, src->known_hosts) < 0 ||
        dup_str(&dst->flow_rule_ports, src->flow_rule_ports) < 0 ||
        dup_ref(&dst->enable_password, &src->enable_password) < 0 ||
        dup_rules(dst, rules, n_rules) < 0) {
        fs_onyx_cfg_free(dst);
        return -1;
    }
    return 0;
}

void
fs_onyx_cfg_free(struct fs_onyx_cfg *c)
{
    free(c->username);
    fs_cfg_secret_ref_free(&c->password);
    free(c->key_file);
    free(c->known_hosts);
    free(c->flow_rule_ports);
    fs_cfg_secret_ref_free(&c->enable_password);
    for (size_t i = 0; i < c->n_flow_rules; i++)
        free(c->flow_rules[i].name);
    free(c->flow_rules);
    memset(c, 0, sizeof(*c));
}
