/*
 * The host agent's configuration (schemas/fabricscope-host-agent.yang): read and
 * refused whole like the collector's (config/config.h fs_cfg_doc_load), each problem as
 * FILE:LINE:COL: key.path: reason.
 *
 * Ownership: fs_agent_cfg_load fills a caller's struct whose strings and arrays it owns;
 * fs_agent_cfg_free releases them (also after a refused file).
 */
#ifndef FS_AGENT_CONFIG_H
#define FS_AGENT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fs_agent_cfg {
    char *url, *token_file;     /**< collector.url, collector.token_file (NULL: env) */
    int64_t request_timeout_us; /**< collector.timeout (whole seconds) */
    char *host;                 /**< host, or gethostname() */
    char *state_dir;
    int64_t clock_interval_us;
    int clock_rounds;
    char *nccl_dir; /**< nccl_inspector.dir; NULL: no tail */
    int64_t nccl_scan_us;
    bool capture; /**< a capture block is present */
    char **targets, **rules, **events;
    size_t n_targets, n_rules, n_events;
    int64_t poll_us, lead_us, length_us, max_length_us, min_interval_us;
    char *perf, *hook; /**< hook NULL: none */
    uint64_t raw_quota_bytes;
    bool keep_raw;
    uint64_t spool_max_bytes;
    char **cmd_argv; /**< command.argv (NULL-terminated); NULL: no command */
    size_t n_cmd_argv;
    int64_t cmd_interval_us; /**< 0: at_capture */
    bool cmd_at_capture;
    int64_t cmd_timeout_us;
    uint64_t cmd_max_output;
    bool lldp_on;             /**< lldp.enabled */
    int64_t lldp_interval_us; /**< lldp.interval */
    char *lldpctl;            /**< lldp.lldpctl */
    char *lldp_socket;        /**< lldp.socket; NULL: lldpctl's default */
    char *metrics_listen;     /**< NULL: no /metrics */
    char metrics_host[256];
    unsigned metrics_port;
};

/**
 * Reads path into cfg. 0 when good; else the number of problems, with *errors (malloc'd,
 * one "FILE:LINE:COL: key: reason" per line) to print.
 */
int fs_agent_cfg_load(const char *path, struct fs_agent_cfg *cfg, char **errors);

void fs_agent_cfg_free(struct fs_agent_cfg *cfg);

#endif
