/*
 * Configuration: one YAML file, walked against the compiled-in YANG module
 * (schemas/fabricscope-config.yang) and then validated by libyang, refused whole on
 * any problem. See DESIGN.md "Configuration" for the keys.
 *
 * Ownership: fs_config_parse()/fs_config_load() return a tree owned by the caller and
 * freed with fs_config_free(); every string and array in it belongs to that tree.
 * Secrets are never stored here: only the file or environment variable that holds them.
 */
#ifndef FS_CONFIG_H
#define FS_CONFIG_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FS_CONFIG_MAX_BYTES (1024 * 1024)

/** Where a secret comes from: exactly one of file/env is set. */
struct fs_secret_ref {
    char *file;
    char *env;
};

enum fs_proto { FS_PROTO_ANY = 0, FS_PROTO_TCP, FS_PROTO_UDP };

struct fs_flow_rule {
    char *name;
    enum fs_proto protocol;
    uint16_t dst_lo, dst_hi; /**< both 0: any */
    uint16_t src_lo, src_hi; /**< both 0: any */
    bool ecn_ce;
    int tc; /**< -1: any */
};

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

struct fs_snmp_cfg {
    uint16_t port;                /**< default 161 */
    enum fs_snmp_version version; /**< default 2c */
    struct fs_secret_ref community;
    char *user; /**< v3 */
    enum fs_snmp_auth auth_protocol;
    struct fs_secret_ref auth_password;
    enum fs_snmp_priv priv_protocol;
    struct fs_secret_ref priv_password;
    bool allow_weak_crypto;
    int64_t interval_us; /**< default 10 s */
    int64_t timeout_us;  /**< per request; default 2 s */
    int retries;         /**< default 1 */
    int max_repetitions; /**< default 50 */
    int qos_index_base;  /**< -1 auto (default), 0 or 1 */
};

struct fs_cli_cfg {
    char *driver;  /**< "onyx" */
    uint16_t port; /**< default 22 */
    char *username;
    struct fs_secret_ref password;
    char *key_file;
    char *known_hosts;
    int64_t interval_us; /**< default 5 s */
    int64_t timeout_us;  /**< default 10 s */
    bool apply_flow_rules;
};

enum fs_gnmi_mode { FS_GNMI_SAMPLE = 0, FS_GNMI_ON_CHANGE, FS_GNMI_TARGET_DEFINED };

struct fs_gnmi_subscription {
    char *path;
    enum fs_gnmi_mode mode;
    int64_t interval_us;
};

struct fs_gnmi_cfg {
    uint16_t port; /**< default 9339 */
    bool insecure; /**< plaintext only when said so */
    char *tls_ca_file, *tls_cert_file, *tls_key_file, *tls_server_name;
    char *username;
    struct fs_secret_ref password;
    struct fs_gnmi_subscription *subscriptions;
    size_t n_subscriptions;
};

struct fs_kv {
    char *key;
    char *value;
};

struct fs_target_cfg {
    char *name;
    char *address;
    struct fs_kv *labels; /**< static labels, sorted by key */
    size_t n_labels;
    char *iface_include, *iface_exclude;        /**< POSIX extended regexes as written, or NULL */
    regex_t iface_include_re, iface_exclude_re; /**< compiled when the string is set */
    struct fs_snmp_cfg *snmp;                   /**< NULL when the target has no snmp block */
    struct fs_cli_cfg *cli;
    struct fs_gnmi_cfg *gnmi;
    char *source_precedence[3]; /**< default {"gnmi","cli","snmp"} */
    bool expose_all_sources;
    int64_t staleness_intervals; /**< series leave /metrics after this many intervals; default 3 */
};

struct fs_config {
    char *path;           /**< the file it came from */
    char *listen_host;    /**< default 127.0.0.1 */
    uint16_t listen_port; /**< default 9464 */
    char *http_tls_cert_file, *http_tls_key_file;
    struct fs_secret_ref http_bearer_token;
    uint64_t memory_limit; /**< bytes; default 256 MiB */
    int64_t retention_us;  /**< default 1 h */
    struct fs_flow_rule *flow_rules;
    size_t n_flow_rules;
    struct fs_target_cfg *targets;
    size_t n_targets;
};

/** Which driver blocks this build accepts (names as in driver.h). */
struct fs_config_opts {
    const char *const *drivers;
    size_t n_drivers;
};

/**
 * Parses and validates a whole configuration.
 * @param[in] text, len  the YAML document (need not be NUL-terminated)
 * @param[in] filename   used in messages ("demo.yaml:7:13: ...")
 * @param[out] out       the configuration on success (caller frees), NULL on failure
 * @param[out] errors    on failure a malloc'd text with every problem, one per line,
 *                       `FILE:LINE:COL: key.path: reason` (caller frees); NULL on success
 * @return 0 on success, else the number of problems found
 */
int fs_config_parse(const char *text, size_t len, const char *filename,
                    const struct fs_config_opts *opts, struct fs_config **out, char **errors);

/** Reads FILE (refusing files over FS_CONFIG_MAX_BYTES) and calls fs_config_parse(). */
int fs_config_load(const char *path, const struct fs_config_opts *opts, struct fs_config **out,
                   char **errors);

/** Frees a configuration; accepts NULL. */
void fs_config_free(struct fs_config *cfg);

/** True when two targets' configurations are identical (a reload keeps their state). */
bool fs_target_cfg_equal(const struct fs_target_cfg *a, const struct fs_target_cfg *b);

/**
 * Reads a secret into buf (trailing newline stripped). Errors name the file or variable,
 * never the content. Returns 0 or -1.
 */
int fs_secret_read(const struct fs_secret_ref *ref, char *buf, size_t len, char *errbuf,
                   size_t errlen);

/** Parses "100ms", "10s", "5m", "1h", "1d" (a whole number and one unit) into µs; -1 if bad. */
int64_t fs_parse_duration(const char *s);

/** Parses "256MiB", "1GiB", "4096", "64KiB", "10MB" into bytes; returns 0 on success. */
int fs_parse_size(const char *s, uint64_t *out);

#endif
