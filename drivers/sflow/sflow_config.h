/*
 * The sFlow driver's configuration block (`sflow:` under a target): its keys are in
 * fabricscope-sflow.yang, checked and built by sflow_config.c into struct
 * fs_sflow_cfg, which the driver receives as target_add()'s dcfg.
 *
 * Ownership: a struct fs_sflow_cfg and its arrays belong to the configuration it was
 * built for (freed with fs_sflow_config_free() when that is freed).
 */
#ifndef FS_SFLOW_CONFIG_H
#define FS_SFLOW_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "config/block.h"
#include "decode.h"

struct fs_sflow_ifname {
    uint32_t ifindex;
    char *name;
};

struct fs_sflow_cfg {
    struct sflow_addr listen; /**< default :: (dual-stack) */
    uint16_t port;            /**< default 6343 */
    bool has_agent;           /**< agent set; else the target's address (an IP literal) */
    struct sflow_addr agent;
    struct sflow_addr *sources; /**< the sources leaf-list; NULL: the driver's default */
    size_t n_sources;
    bool has_sub_agent;
    uint32_t sub_agent;
    int64_t interval_us;             /**< commit cadence; default 1 s */
    int64_t counter_interval_us;     /**< the agent's counter polling; default 30 s */
    uint32_t max_ports;              /**< default 256 */
    struct fs_sflow_ifname *ifnames; /**< sorted by ifindex */
    size_t n_ifnames;
};

/** fabricscope-sflow.yang, embedded at build time. */
extern const char fs_sflow_yang_module[];

/** Parses an IPv4 or IPv6 literal into *a (family 4 or 6). 0, or -1 if it is none. */
int fs_sflow_parse_addr(const char *s, struct sflow_addr *a);

/** Formats a (IPv6 in its canonical text) into buf; returns buf. */
const char *fs_sflow_addr_str(const struct sflow_addr *a, char *buf, size_t len);

/* The block operations (block.h). */
int fs_sflow_config_build(const struct lyd_node *block, void **dcfg, struct fs_cfg_errs *errs);
void fs_sflow_config_free(void *dcfg);
bool fs_sflow_config_equal(const void *a, const void *b);
/** max(interval, counter_interval): see counter_interval in the YANG module. */
int64_t fs_sflow_config_interval(const void *dcfg);

#endif
