/*
 * Configuration: one YAML file, walked against the compiled-in YANG module
 * (schemas/fabricscope-config.yang) plus each driver's module (its block under a
 * target, see block.h), then validated by libyang, refused whole on any problem.
 *
 * Layers (each file calls only the ones before it): parse.c (strict value parsers) ->
 * tree.c (YAML node tree, problem list, positions and key paths of data nodes) ->
 * schema.c (the libyang context: core module + driver modules) -> yaml.c (libyaml
 * reading, the walk against the schema) -> model.c (semantic checks, building struct
 * fs_config, driver blocks) -> config.c (these entry points, file and secret reading).
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

#include "config/block.h"
#include "topology/links_file.h"

#define FS_CONFIG_MAX_BYTES (1024 * 1024)

enum fs_proto { FS_PROTO_ANY = 0, FS_PROTO_TCP, FS_PROTO_UDP };

struct fs_flow_rule {
    char *name;
    enum fs_proto protocol;
    uint16_t dst_lo, dst_hi; /**< both 0: any */
    uint16_t src_lo, src_hi; /**< both 0: any */
    bool ecn_ce;
    int tc; /**< -1: any */
};

/** A driver block of a target: the driver's own configuration value. */
struct fs_target_block {
    const struct fs_cfg_block_ops *ops; /**< the driver's block (from fs_config_opts) */
    void *cfg;                          /**< built by ops->config_build, owned here */
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
    struct fs_target_block *blocks;             /**< one per driver block the target has, in the
                                                     order of fs_config_opts.blocks */
    size_t n_blocks;
    char **source_precedence; /**< every block name of this build, most preferred first:
                                   the listed ones, then the rest by default_rank */
    size_t n_source_precedence;
    bool expose_all_sources;
    int64_t staleness_intervals; /**< series leave /metrics after this many intervals; default 3 */
    const struct fs_flow_rule *flow_rules; /**< the configuration's flow_rules (owned by the
                                                struct fs_config), for drivers that count or
                                                install them per target */
    size_t n_flow_rules;
};

/** One remote_write receiver (Prometheus remote-write 1.0); durations in µs. */
struct fs_remote_write_cfg {
    char *url;
    char *name; /**< remote_name of the self metrics; NULL: the URL is used */
    int64_t remote_timeout_us;
    struct fs_secret_ref bearer_token;        /**< bearer_token_file, or none */
    char *basic_auth_username;                /**< NULL: no basic auth */
    struct fs_secret_ref basic_auth_password; /**< basic_auth.password_file */
    char *tls_ca_file, *tls_cert_file, *tls_key_file;
    bool tls_insecure_skip_verify;
    struct fs_kv *headers; /**< extra headers, sorted by name */
    size_t n_headers;
    uint64_t capacity;                      /**< queue.capacity, samples; default 100000 */
    uint64_t max_samples_per_send;          /**< default 2000 */
    int64_t batch_send_deadline_us;         /**< default 5 s */
    int64_t min_backoff_us, max_backoff_us; /**< default 30 ms, 5 s */
    bool metadata_send;                     /**< metadata.send; default true */
    int64_t metadata_send_interval_us;      /**< metadata.send_interval; default 1 min */
    uint64_t metadata_max_per_send;         /**< metadata.max_samples_per_send: metadata entries
                                                 per request; default 500 */
};

/** analysis.history: a Prometheus-compatible query API (auth, TLS, headers as above). */
struct fs_history_cfg {
    char *url; /**< the API base; /api/v1/... is appended */
    int64_t remote_timeout_us;
    struct fs_secret_ref bearer_token;
    char *basic_auth_username; /**< NULL: no basic auth */
    struct fs_secret_ref basic_auth_password;
    char *tls_ca_file, *tls_cert_file, *tls_key_file;
    bool tls_insecure_skip_verify;
    struct fs_kv *headers; /**< sorted by name */
    size_t n_headers;
    int64_t step_us;            /**< step of the first reading of all series; default 1 min */
    uint64_t max_points;        /**< bound of the first reading, and of each raw query; 2,000,000 */
    int64_t scrape_interval_us; /**< of a Prometheus that scraped /metrics; default 15 s */
    int64_t poll_interval_us;   /**< of the fabricscope it scraped; default 10 s */
    bool compression;           /**< ask for gzip answers; default false */
    bool prefetch;              /**< keep the horizon's departures read ahead; default true */
};

/** Frees h (NULL is fine). */
void fs_history_cfg_free(struct fs_history_cfg *h);
/** A deep copy the caller owns (fs_history_cfg_free), or NULL (no memory). */
struct fs_history_cfg *fs_history_cfg_copy(const struct fs_history_cfg *s);

/** True when two histories' configurations are identical (NULL equals NULL only): a
 *  reload keeps the client and what it read. */
bool fs_history_cfg_equal(const struct fs_history_cfg *a, const struct fs_history_cfg *b);

/** True when two receivers' configurations are identical (a reload keeps the sender). */
bool fs_remote_write_cfg_equal(const struct fs_remote_write_cfg *a,
                               const struct fs_remote_write_cfg *b);

struct fs_config {
    char *path;           /**< the file it came from */
    char *listen_host;    /**< default 127.0.0.1 */
    uint16_t listen_port; /**< default 9464 */
    char *http_tls_cert_file, *http_tls_key_file;
    struct fs_secret_ref http_bearer_token;
    uint64_t memory_limit;                  /**< bytes; default 256 MiB */
    int64_t retention_us;                   /**< default 1 h */
    uint64_t max_series_per_target;         /**< storage.max_series_per_target; default 50000 */
    struct fs_secret_ref host_events_token; /**< host_events.bearer_token_*; none: posts 403 */
    struct fs_host_token_cfg {              /**< host_events.tokens, in the order written */
        char *name, *hosts;
        struct fs_secret_ref token; /**< token_file or token_env */
        uint64_t memory_limit;      /**< default 8 MiB */
    } *host_tokens;
    size_t n_host_tokens;
    uint64_t host_events_memory_limit;      /**< bytes; default 64 MiB */
    int64_t host_events_retention_us;       /**< default 6 h */
    int64_t clock_max_offset_us;            /**< clock.max_offset; default 1 ms */
    struct fs_analysis_cfg {                /**< analysis: (defaults in the YANG model) */
        double z_threshold;                 /**< default 6 */
        int64_t baseline_window_us;         /**< default 10 min */
        int64_t merge_gap_us;               /**< default 2 s */
        int64_t horizon_us;                 /**< default 24 h */
        uint32_t min_occurrences;           /**< default 3 */
        double max_period_spread;           /**< default 0.1 */
        int64_t episode_retention_us;       /**< default 7 d */
        uint64_t episode_memory_limit;      /**< bytes; default 64 MiB */
        int64_t request_timeout_us;         /**< default 30 s */
        struct fs_history_cfg *history;     /**< analysis.history, or NULL */
    } analysis;
    uint32_t shard_index, shard_count; /**< shard: {index, count}; count 0: no shard block
                                            (every target is polled) */
    struct fs_kv *external_labels;     /**< external_labels, sorted by key (remote_write and
                                            /metrics add them to every series) */
    size_t n_external_labels;
    struct fs_flow_rule *flow_rules;
    size_t n_flow_rules;
    struct fs_target_cfg *targets;
    size_t n_targets;
    struct fs_remote_write_cfg *remote_write; /**< in the order written */
    size_t n_remote_write;
    /** topology: topology.links in the order written, then the links_file's links in
     *  the file's order (read and checked at parse time). */
    struct fs_static_link *topo_links;
    size_t n_topo_links;
    char *topo_links_file; /**< topology.links_file, or NULL */
    char *state_dir;       /**< state_dir, or NULL */
};

/**
 * The driver blocks this build has (the daemon takes them from drivers/registry.c).
 * NULL opts, or none listed: a configuration with no driver block at all.
 */
struct fs_config_opts {
    const struct fs_cfg_block_ops *const *blocks; /**< each driver's block; its YANG module
                                                       is loaded next to the core's */
    size_t n_blocks;
    const char *const *absent; /**< names of drivers fabricscope knows but this build lacks:
                                    such a block is refused as "this build has no X driver" */
    size_t n_absent;
};

/** The value of target t's block ops, or NULL when t has no such block. */
const void *fs_target_block_cfg(const struct fs_target_cfg *t, const struct fs_cfg_block_ops *ops);

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

/** Reads FILE (refusing anything but a regular file, never blocking on a FIFO, and
 *  files over FS_CONFIG_MAX_BYTES) and calls fs_config_parse(). */
int fs_config_load(const char *path, const struct fs_config_opts *opts, struct fs_config **out,
                   char **errors);

/**
 * Builds a caller's structure from a walked document: first is its first top-level node
 * (fs_cfg_top), YANG defaults present. Problems go to errs (fs_cfg_node_err). 0, or -1
 * when out of memory.
 */
typedef int (*fs_cfg_doc_build_fn)(const struct lyd_node *first, void *ctx,
                                   struct fs_cfg_errs *errs);

/**
 * A configuration file of another program of the project (the host agent), with its own
 * YANG module (static text; it may import fabricscope-config for its types): read like
 * fs_config_load() (regular file, at most FS_CONFIG_MAX_BYTES), walked against the
 * module with the same messages ("FILE:LINE:COL: key.path: reason"), built by build,
 * then validated by libyang. Returns 0 when good, else the number of problems with
 * *errors (malloc'd, one per line) set; the caller's structure is then incomplete.
 */
int fs_cfg_doc_load(const char *path, const char *module_text, fs_cfg_doc_build_fn build, void *ctx,
                    char **errors);

/** Frees a configuration; accepts NULL. */
void fs_config_free(struct fs_config *cfg);

/** True when two targets' configurations are identical. */
bool fs_target_cfg_equal(const struct fs_target_cfg *a, const struct fs_target_cfg *b);

struct fs_cfg_block_ops;
/**
 * True when what the instance of driver block ops reads of target a is the same in b
 * (a reload keeps that instance's state): the target's own settings, that block, and
 * the flow rules if the driver reads them (ops->uses_flow_rules). Another driver's block
 * changing, appearing or going does not count. False when either lacks the block.
 */
bool fs_target_instance_equal(const struct fs_target_cfg *a, const struct fs_target_cfg *b,
                              const struct fs_cfg_block_ops *ops);

/**
 * Reads a secret into buf (trailing newline stripped). A file is opened without
 * blocking and must be a regular file (a FIFO or device is refused, never waited on).
 * Errors start with the key that names the secret and name the file or variable,
 * never the content. Returns 0 or -1 (buf wiped).
 */
int fs_secret_read(const struct fs_secret_ref *ref, char *buf, size_t len, char *errbuf,
                   size_t errlen);

/**
 * Reads a whole file that the configuration names (a PEM, a key) into *out: malloc'd,
 * NUL-terminated, its length in *out_len; the caller frees it (wipes it first if it is
 * secret). Opened like a secret file: without blocking, and only a regular file (a FIFO,
 * device or directory is refused, never waited on, e.g. "KEY: PATH is not a regular
 * file"). More than max bytes is refused. Errors start with key (the configuration key
 * that names the file, e.g. "targets[t].gnmi.tls.ca_file"; the path when NULL) and name
 * the file, never its content. Returns 0, or -1 with *out NULL.
 */
int fs_file_read(const char *path, const char *key, size_t max, char **out, size_t *out_len,
                 char *errbuf, size_t errlen);

/** Parses "100ms", "10s", "5m", "1h", "1d" (a whole number and one unit) into µs; -1 if bad. */
int64_t fs_parse_duration(const char *s);

/** Parses "256MiB", "1GiB", "4096", "64KiB", "10MB" into bytes; returns 0 on success. */
int fs_parse_size(const char *s, uint64_t *out);

#endif
