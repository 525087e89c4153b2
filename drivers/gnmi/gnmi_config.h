/*
 * The gNMI driver's own configuration block (`gnmi:` under a target), built by the
 * driver's config_build callback from the validated configuration tree.
 *
 * Ownership: fs_gnmi_cfg_free() frees the struct and every string and array in it
 * (all malloc'd). Secrets are never stored here, only where to read them.
 */
#ifndef FS_GNMI_CONFIG_H
#define FS_GNMI_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "map.h"

/** Where a secret comes from: exactly one of file/env is set. */
struct fs_gnmi_secret {
    char *file;
    char *env;
};

/** Requested encoding; AUTO lets Capabilities choose (PROTO, else JSON_IETF, else JSON). */
enum fs_gnmi_encoding {
    FS_GNMI_ENC_AUTO = 0,
    FS_GNMI_ENC_PROTO,
    FS_GNMI_ENC_JSON,
    FS_GNMI_ENC_JSON_IETF,
};

/** Per-path subscription mode (gNMI SubscriptionMode). */
enum fs_gnmi_sub_mode {
    FS_GNMI_SUB_SAMPLE = 0,
    FS_GNMI_SUB_ON_CHANGE,
    FS_GNMI_SUB_TARGET_DEFINED,
};

/** SubscriptionList mode. */
enum fs_gnmi_list_mode {
    FS_GNMI_LIST_STREAM = 0,
    FS_GNMI_LIST_ONCE, /**< one snapshot per interval: the stream is reopened each time */
    FS_GNMI_LIST_POLL, /**< one open stream, a Poll request per interval */
};

struct fs_gnmi_subscription {
    char *path; /**< gNMI path string: "/qos/interfaces/interface[name=*]/output" */
    enum fs_gnmi_sub_mode mode;
    int64_t interval_us;  /**< SAMPLE interval; 0: the target's choice */
    int64_t heartbeat_us; /**< 0: none */
    bool suppress_redundant;
};

struct fs_gnmi_cfg {
    uint16_t port;       /**< default 9339 */
    bool insecure;       /**< plaintext; only when the config says so */
    char *tls_ca_file;   /**< NULL: the system's roots */
    char *tls_cert_file; /**< client certificate (mTLS), optional */
    char *tls_key_file;
    char *tls_server_name; /**< name checked in the certificate instead of the address */
    char *username;        /**< NULL: no credentials metadata */
    struct fs_gnmi_secret password;
    enum fs_gnmi_encoding encoding;
    enum fs_gnmi_list_mode list_mode;
    bool updates_only;
    int64_t interval_us;    /**< ONCE/POLL period and staleness base; default 10 s */
    int64_t stall_us;       /**< no message for this long: reconnect; 0: derived from the
                                 subscriptions (3 x the shortest sample/heartbeat period) */
    int64_t backoff_min_us; /**< first reconnect delay; 0: 1 s */
    int64_t backoff_max_us; /**< reconnect delay cap; 0: 30 s */
    struct fs_gnmi_subscription *subscriptions;
    size_t n_subscriptions;
    struct fs_gnmi_user_map *user_maps; /**< see map.h */
    size_t n_user_maps;
    struct fs_gnmi_acl_rule *acl_rules; /**< ACL entry -> flow rule name (map.h) */
    size_t n_acl_rules;
    bool expose_unmapped; /**< reserved: unmapped updates are counted and dropped */
};

/** Fills the defaults into a zeroed struct. */
void fs_gnmi_cfg_defaults(struct fs_gnmi_cfg *c);

/** Frees c and everything it owns; accepts NULL. */
void fs_gnmi_cfg_free(struct fs_gnmi_cfg *c);

#endif
