/*
 * The SNMP driver's configuration block (`snmp:` under a target): its keys are in
 * fabricscope-snmp.yang, checked and built by config.c into struct fs_snmp_cfg, which
 * the driver receives as target_add()'s dcfg.
 *
 * Ownership: a struct fs_snmp_cfg and its strings belong to the configuration it was
 * built for (freed with fs_snmp_config_free() when that is freed).
 */
#ifndef FS_SNMP_CONFIG_H
#define FS_SNMP_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "config/block.h"

enum fs_snmp_version { FS_SNMP_V2C = 2, FS_SNMP_V3 = 3 };
enum fs_snmp_auth {
    FS_AUTH_NONE = 0,
    FS_AUTH_MD5,
    FS_AUTH_SHA,
    FS_AUTH_SHA224,
    FS_AUTH_SHA256,
    FS_AUTH_SHA384,
    FS_AUTH_SHA512
};
enum fs_snmp_priv { FS_PRIV_NONE = 0, FS_PRIV_DES, FS_PRIV_AES128 };
enum fs_snmp_security_level {
    FS_SNMP_AUTH_PRIV = 0,
    FS_SNMP_AUTH_NO_PRIV,
    FS_SNMP_NO_AUTH_NO_PRIV
};

struct fs_snmp_cfg {
    uint16_t port;                /**< default 161 */
    enum fs_snmp_version version; /**< default 2c */
    struct fs_secret_ref community;
    char *user; /**< v3 */
    enum fs_snmp_auth auth_protocol;
    struct fs_secret_ref auth_password;
    enum fs_snmp_priv priv_protocol;
    struct fs_secret_ref priv_password;
    /** v3: what the block asked for (authPriv unless written); a weaker level than
     *  authPriv is refused unless asked for explicitly. */
    enum fs_snmp_security_level security_level;
    bool allow_weak_crypto;
    int64_t interval_us;      /**< default 10 s */
    int64_t timeout_us;       /**< per request; default 2 s */
    int retries;              /**< default 1 */
    int max_repetitions;      /**< default 50 */
    int qos_index_base;       /**< -1 auto (default), 0 or 1 */
    bool lldp;                /**< walk LLDP-MIB for the topology; default true */
    int64_t lldp_interval_us; /**< at most this often (and at most once per cycle); 30 s */
};

/** fabricscope-snmp.yang, embedded at build time. */
extern const char fs_snmp_yang_module[];

/* The block operations (block.h). */
int fs_snmp_config_build(const struct lyd_node *block, void **dcfg, struct fs_cfg_errs *errs);
void fs_snmp_config_free(void *dcfg);
bool fs_snmp_config_equal(const void *a, const void *b);
int64_t fs_snmp_config_interval(const void *dcfg);

#endif
