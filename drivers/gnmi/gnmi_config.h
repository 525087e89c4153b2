/*
 * The gNMI driver's own configuration block (`gnmi:` under a target, described by
 * fabricscope-gnmi.yang), built by fs_gnmi_config_build() from the validated
 * configuration tree (the block API of config/block.h).
 *
 * Ownership: fs_gnmi_cfg_free() frees the struct and every string and array in it
 * (all malloc'd). Secrets are never stored here, only where to read them.
 */
#ifndef FS_GNMI_CONFIG_H
#define FS_GNMI_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/block.h"
#include "config/config.h"
#include "map.h"

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
    char *tls_server_name;         /**< name checked in the certificate instead of the address */
    char *username;                /**< NULL: no credentials metadata */
    struct fs_secret_ref password; /**< file or env; both NULL: empty password */
    enum fs_gnmi_encoding encoding;
    enum fs_gnmi_list_mode list_mode;
    bool updates_only;
    int64_t interval_us;    /**< the `interval` key; 0: not given (fs_gnmi_cfg_interval) */
    int64_t stall_us;       /**< no message for this long: reconnect; 0: derived from the
                                 subscriptions (3 x the shortest sample/heartbeat period) */
    int64_t backoff_min_us; /**< first reconnect delay; 0: 1 s */
    int64_t backoff_max_us; /**< reconnect delay cap; 0: 30 s */
    /** clock_max_delivery_delay: the assumed bound the clock offset's error bar rests on
     *  (fs_gnmi_sink_arg.clk_max_delay_us of map.h); 1 ms..10 s, default 5 ms. */
    int64_t clock_max_delay_us;
    /** max_message: largest SubscribeResponse accepted, bytes; 64 KiB..64 MiB, default 4 MiB */
    int64_t max_message_bytes;
    struct fs_gnmi_subscription *subscriptions;
    size_t n_subscriptions;
    struct fs_gnmi_user_map *user_maps; /**< see map.h */
    size_t n_user_maps;
    struct fs_gnmi_acl_rule *acl_rules; /**< ACL entry -> flow rule name (map.h) */
    size_t n_acl_rules;
    bool expose_unmapped;     /**< unmapped numeric values as fabric_gnmi_value{path} (map.h) */
    bool lldp;                /**< subscribe to openconfig-lldp for the topology; default true */
    int64_t lldp_interval_us; /**< how often the LLDP table is re-stated; default 30 s */
    bool acl_by_description;  /**< ACL entries named for a rule by description (map.h) */
    char *acl_description_prefix; /**< before the rule's name in the description; "" */
    /** The target's flow rules (borrowed from the target's config for fs_gnmi_target_add;
     *  NULL in a config built alone): the names acl_by_description looks for. */
    const struct fs_flow_rule *flow_rules;
    size_t n_flow_rules;
};

/** Default of max_message. */
#define FS_GNMI_MAX_MESSAGE_DEFAULT (4 << 20)

/** Fills the defaults into a zeroed struct. */
void fs_gnmi_cfg_defaults(struct fs_gnmi_cfg *c);

/** Frees c and everything it owns; accepts NULL. */
void fs_gnmi_cfg_free(struct fs_gnmi_cfg *c);

/**
 * The target's cadence in µs: the `interval` key when given; otherwise ONCE/POLL 10 s,
 * and STREAM the longest period a subscription promises (its heartbeat, else its sample
 * interval), or 10 min when one promises none (ON_CHANGE, TARGET_DEFINED or
 * suppress_redundant without a heartbeat) so that unchanging values do not go stale.
 * The store measures staleness in it; ONCE/POLL snapshot that often.
 */
int64_t fs_gnmi_cfg_interval(const struct fs_gnmi_cfg *c);

/** The stall bound in µs: stall_us when set; otherwise 3 x the shortest promised period
 *  (ONCE/POLL: 3 x the interval), at least 1 s; 0 (none) when nothing is promised. */
int64_t fs_gnmi_cfg_stall(const struct fs_gnmi_cfg *c);

/** fabricscope-gnmi.yang, embedded at build time (fs_driver_yang of drivers/CMakeLists.txt). */
extern const char fs_gnmi_yang_module[];

/* The block operations (struct fs_cfg_block_ops of config/block.h). */
int fs_gnmi_config_build(const struct lyd_node *block, void **dcfg, struct fs_cfg_errs *errs);
void fs_gnmi_config_free(void *dcfg);
bool fs_gnmi_config_equal(const void *a, const void *b);
int64_t fs_gnmi_config_interval(const void *dcfg);

#endif
