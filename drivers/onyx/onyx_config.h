/*
 * The ONYX CLI driver's own configuration: one struct per target, built from the
 * target's validated `cli:` block by fs_onyx_config_build (config.c, the block's
 * config_build); target_add receives it and adds the configuration's flow rules.
 *
 * Ownership: every pointer member is owned by the struct and freed by fs_onyx_cfg_free();
 * the driver copies what it keeps, so the caller may free the struct after target_add.
 */
#ifndef FS_ONYX_CONFIG_H
#define FS_ONYX_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

enum fs_onyx_host_key_policy {
    FS_ONYX_HOSTKEY_STRICT = 0, /**< the key must already be in known_hosts (default) */
    FS_ONYX_HOSTKEY_ACCEPT_NEW, /**< record an unknown host's key; a changed key is still refused */
};

/** Default source precedence rank of the CLI driver (lower wins): gNMI 10, CLI 20, SNMP 30. */
#define FS_ONYX_DEFAULT_RANK 20

struct fs_onyx_cfg {
    uint16_t port;                 /**< default 22 */
    char *username;                /**< required */
    struct fs_secret_ref password; /**< password and keyboard-interactive; may be unset */
    char *key_file; /**< private key for publickey auth (public key: key_file.pub); may be NULL */
    char *known_hosts; /**< default ~/.ssh/known_hosts of the collector's user */
    enum fs_onyx_host_key_policy host_key_policy;
    struct fs_secret_ref enable_password; /**< answered when `enable` asks; may be unset */
    int64_t interval_us;                  /**< default 5 s */
    int64_t timeout_us; /**< no progress for this long ends a command as a timeout; default 10 s */
    bool apply_flow_rules; /**< install the flow rules' ACLs (plan-flow-rules shows them) */
    bool plan_only; /**< read the running config and plan, never configure (plan-flow-rules) */
    char *flow_rule_ports;    /**< POSIX ERE (anchored) of the ports the flow-rule ACL is bound to;
                                   default ".*" */
    size_t max_output_bytes;  /**< per command batch; default 16 MiB; beyond it: protocol error */
    bool lldp;                /**< read `show lldp interfaces ethernet remote`; default true */
    int64_t lldp_interval_us; /**< how often; default 30 s (at most once a cycle) */
    struct fs_flow_rule *flow_rules; /**< owned (names too) in the driver's copy; not set by
                                          config_build (the rules come with the target) */
    size_t n_flow_rules;
};

/** Fills the defaults (port 22, 5 s, 10 s, 16 MiB, strict). */
void fs_onyx_cfg_defaults(struct fs_onyx_cfg *c);

/**
 * Deep copy (the driver keeps one per target), with rules (n_rules of them, may be
 * NULL/0) as its flow rules instead of src's. 0, or -1 (no memory; dst zeroed).
 */
int fs_onyx_cfg_copy(const struct fs_onyx_cfg *src, const struct fs_flow_rule *rules,
                     size_t n_rules, struct fs_onyx_cfg *dst);

/** Frees the members (not the struct itself). Accepts a zeroed struct. */
void fs_onyx_cfg_free(struct fs_onyx_cfg *c);

/* The block's operations (struct fs_cfg_block_ops, config/block.h); config.c. The
 * value built is a malloc'd struct fs_onyx_cfg, freed by fs_onyx_config_free. */
struct lyd_node;
struct fs_cfg_errs;
int fs_onyx_config_build(const struct lyd_node *block, void **dcfg, struct fs_cfg_errs *errs);
void fs_onyx_config_free(void *dcfg);
bool fs_onyx_config_equal(const void *a, const void *b);
int64_t fs_onyx_config_interval(const void *dcfg);

#endif
