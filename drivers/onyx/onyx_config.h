/*
 * The ONYX CLI driver's own configuration: one struct per target, built from the
 * validated configuration tree by the driver's config_build callback (once driver.h
 * gives drivers their own config blocks), or today from struct fs_cli_cfg
 * (fs_onyx_cfg_from_cli). target_add receives it.
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

/** Default source precedence rank of the CLI driver (lower wins): gNMI 0, CLI 1, SNMP 2. */
#define FS_ONYX_DEFAULT_RANK 1

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
    size_t max_output_bytes; /**< per command batch; default 16 MiB; beyond it: protocol error */
    struct fs_flow_rule *flow_rules; /**< copied in (names owned) */
    size_t n_flow_rules;
};

/** Fills the defaults (port 22, 5 s, 10 s, 16 MiB, strict). */
void fs_onyx_cfg_defaults(struct fs_onyx_cfg *c);

/**
 * Builds the driver config from today's struct fs_cli_cfg and the global flow rules
 * (may be NULL/0). Returns 0, or -1 with errbuf (no memory).
 */
int fs_onyx_cfg_from_cli(const struct fs_cli_cfg *cli, const struct fs_flow_rule *rules,
                         size_t n_rules, struct fs_onyx_cfg *out, char *errbuf, size_t errlen);

/** Deep copy (the driver keeps one per target). */
int fs_onyx_cfg_copy(const struct fs_onyx_cfg *src, struct fs_onyx_cfg *dst);

/** Frees the members (not the struct itself). Accepts a zeroed struct. */
void fs_onyx_cfg_free(struct fs_onyx_cfg *c);

#endif
