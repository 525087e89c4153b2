/*
 * Driver blocks of the configuration: the part of the configuration layer a driver
 * sees. A target's `snmp:` (or any other driver's) block is described by a YANG module
 * the driver ships and is built into the driver's own structure by the driver's
 * config_build(); the configuration layer never knows a driver's keys or structure.
 *
 * The daemon passes the blocks of this build in struct fs_config_opts (config.h);
 * drivers/driver.h embeds struct fs_cfg_block_ops in struct fs_driver. This header
 * does not include driver.h: the configuration layer sits below the drivers.
 *
 * Reading a block. config_build() gets the block's node of the walked data tree (every
 * key the user wrote, plus the YANG defaults) and reads it with the fs_cfg_* accessors
 * below; libyang itself need not be included. Problems are reported with
 * fs_cfg_node_err(), which places them at the node's line:column with its key path
 * ("targets[tor1].snmp.user: ..."), exactly like the core's own problems.
 */
#ifndef FS_CONFIG_BLOCK_H
#define FS_CONFIG_BLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lyd_node;    /* a node of the walked configuration tree (opaque here) */
struct fs_cfg_errs; /* the problems of one parse (opaque here) */

/** Where a secret comes from: exactly one of file/env is set. */
struct fs_secret_ref {
    char *file;
    char *env;
    char *key; /**< the key that named it ("targets[tor1].snmp.community_file"), for messages */
};

/**
 * One driver's configuration block. All members are set (none may be NULL).
 *
 * Ownership: the struct and its strings are static data of the driver. The value built
 * by config_build() belongs to the struct fs_config it was built for and is freed by
 * config_free() when that configuration is freed.
 */
struct fs_cfg_block_ops {
    /** The block's key under a target, the `source` label and the log subsystem ("snmp"):
     *  [a-z][a-z0-9_]*, unique in the build. */
    const char *name;
    /** Default source precedence, lower wins (gnmi 10, cli 20, sflow 25, snmp 30). A target's
     *  source_precedence lists sources first; the others follow by rank. */
    int default_rank;
    /** YANG 1.1 module text (NUL-terminated). It imports fabricscope-config (prefix fsc)
     *  and contains `augment "/fsc:targets" { container NAME { presence ...; ... } }`,
     *  nothing else at the top level. Types, ranges, patterns, defaults, mandatory and
     *  must statements there are checked before config_build() runs. */
    const char *yang_module;
    /**
     * Checks what YANG cannot express and builds the driver's value of one block.
     * Called once per target that has the block, with the block's node (defaults
     * present). Problems go to errs through fs_cfg_node_err(); the configuration is then
     * refused and *dcfg (if set) freed with config_free(). Not called for a block the
     * walker already reported a problem in (other parts of the file may have problems).
     * @param[out] dcfg the built value: set (non-NULL) on success; may be set even when
     *                  problems were reported or on -1, and is then freed by config_free
     * @return 0, or -1 when out of memory (the parse fails with "out of memory")
     */
    int (*config_build)(const struct lyd_node *block, void **dcfg, struct fs_cfg_errs *errs);
    /** Frees a value of config_build(); accepts NULL. */
    void (*config_free)(void *dcfg);
    /** True when two built values configure the same thing (a reload keeps the
     *  driver's state for the target). */
    bool (*config_equal)(const void *a, const void *b);
    /** The block's cadence in µs (> 0): the poll interval of a polling driver, the
     *  expected update interval of a streaming one. Staleness is measured in it. */
    int64_t (*config_interval)(const void *dcfg);
    /** The driver reads the target's flow rules (fs_target_cfg.flow_rules): a change of
     *  them restarts its instances on reload; other drivers' instances are kept. */
    bool uses_flow_rules;
};

/* ---- Reading a block (for config_build) ---- */

/** The child data node name of parent (a written key or a YANG default), or NULL. */
const struct lyd_node *fs_cfg_kid(const struct lyd_node *parent, const char *name);

/** Like fs_cfg_kid() but only a key the user wrote (not a default), or NULL. */
const struct lyd_node *fs_cfg_given(const struct lyd_node *parent, const char *name);

/** The next sibling after prev (NULL: the first child of parent) named name, or NULL:
 *  iterates the entries of a list. */
const struct lyd_node *fs_cfg_next(const struct lyd_node *parent, const struct lyd_node *prev,
                                   const char *name);

/** The top-level node name among the siblings from first (a document's top level, see
 *  fs_cfg_doc_load in config.h), or NULL. */
const struct lyd_node *fs_cfg_top(const struct lyd_node *first, const char *name);

/** Canonical text of a leaf node ("10s", "true", "2c"). */
const char *fs_cfg_value(const struct lyd_node *leaf);

/** Canonical text of the child leaf name of parent, or NULL when it has none. */
const char *fs_cfg_cval(const struct lyd_node *parent, const char *name);

/** Child leaf name as a boolean (false when absent). */
bool fs_cfg_bool(const struct lyd_node *parent, const char *name);

/** Child leaf name as a whole number; dflt when absent. */
long fs_cfg_long(const struct lyd_node *parent, const char *name, long dflt);

/** Child duration leaf name in µs; dflt when absent. */
int64_t fs_cfg_duration_us(const struct lyd_node *parent, const char *name, int64_t dflt);

/** Copies the child leaf name into *dst (malloc'd; NULL when absent). 0 or -1 (no memory). */
int fs_cfg_strdup(char **dst, const struct lyd_node *parent, const char *name);

/** Fills ref from the child leaves STEM_file / STEM_env of parent. 0 or -1 (no memory). */
int fs_cfg_secret_ref(struct fs_secret_ref *ref, const struct lyd_node *parent, const char *stem);

/** Frees what fs_cfg_secret_ref() allocated (not ref itself). */
void fs_cfg_secret_ref_free(struct fs_secret_ref *ref);

/** True when two secret refs name the same file or variable. */
bool fs_cfg_secret_ref_equal(const struct fs_secret_ref *a, const struct fs_secret_ref *b);

/** NULL-safe string equality. */
bool fs_cfg_str_equal(const char *a, const char *b);

/** True when the walker already reported a problem directly inside this mapping: its
 *  values may be missing, so checks of it are skipped. */
bool fs_cfg_node_bad(const struct lyd_node *n);

/**
 * Records a problem about node n: position of n (of its key when at_key), key path of
 * n, then the reason. Never put a secret's value in the reason.
 */
void fs_cfg_node_err(struct fs_cfg_errs *errs, const struct lyd_node *n, bool at_key,
                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
