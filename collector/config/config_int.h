/*
 * Internals of the configuration subsystem, shared by config.c (YAML reading, the
 * schema walk, libyang stages) and config_model.c (semantic checks, building struct
 * fs_config, secrets, durations). Not for other subsystems: use config.h.
 */
#ifndef FS_CONFIG_INT_H
#define FS_CONFIG_INT_H

#include <stdbool.h>
#include <stddef.h>

#include <libyang/libyang.h>

#include "config/config.h"

/* Problems beyond this many are summarized in one line: a broken file needs fixing
 * from the top, and the cap bounds the work on hostile input. */
#define FS_CFG_MAX_ERRORS 100

enum fs_ynode_kind { FS_Y_SCALAR, FS_Y_MAP, FS_Y_SEQ };

/**
 * One YAML node, built from libyaml events. A tree of these is owned by its root and
 * freed with fs_ynode_free(). Data nodes of the libyang tree point at the ynode they
 * came from through lyd_node.priv (not owned), which is how later stages find a line
 * and column for a problem.
 */
struct fs_ynode {
    enum fs_ynode_kind kind;
    unsigned line, col;     /**< 1-based start */
    char *str;              /**< scalar text, NUL-terminated, owned */
    size_t len;             /**< scalar length in bytes (no NULs inside) */
    bool plain;             /**< plain (unquoted) scalar */
    struct fs_ynode **kids; /**< map: key, value, key, value...; seq: items (owned) */
    size_t n, cap;
    const struct fs_ynode *key; /**< for a mapping value: its key */
    bool bad;                   /**< a problem was reported directly inside this mapping */
};

void fs_ynode_free(struct fs_ynode *n);

struct fs_cfg_err {
    unsigned line, col;
    size_t seq;
    char *text; /**< "key.path: reason", owned */
};

/** Problems found so far; owns its texts. */
struct fs_cfg_errs {
    struct fs_cfg_err *v;
    size_t n, cap;
    size_t dropped; /**< problems beyond FS_CFG_MAX_ERRORS (checking stops at the first) */
    bool oom;
};

/** Records one problem at line:col. path may be "" for the document itself. */
void fs_cfg_err_add(struct fs_cfg_errs *e, unsigned line, unsigned col, const char *path,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/** True once the cap is reached: callers may stop looking for more. */
bool fs_cfg_errs_full(const struct fs_cfg_errs *e);

/** Position of a data node (its key when at_key and it has one); implicit nodes use their
 * nearest explicit ancestor; 1:1 when there is none. */
void fs_cfg_node_pos(const struct lyd_node *n, bool at_key, unsigned *line, unsigned *col);

/** Writes the user-facing key path of a data node ("targets[tor1].snmp.port"). */
void fs_cfg_node_path(const struct lyd_node *n, char *buf, size_t len);

/** Records a problem about data node n (position and key path taken from n). */
void fs_cfg_node_err(struct fs_cfg_errs *e, const struct lyd_node *n, bool at_key, const char *fmt,
                     ...) __attribute__((format(printf, 4, 5)));

/** True when the walker already reported a problem inside this node's mapping; semantic
 * checks of that block are skipped since its values may be missing or defaulted. */
bool fs_cfg_node_bad(const struct lyd_node *n);

/** True for keys whose values are never shown in messages (secrets and their refs). */
bool fs_cfg_key_hidden(const char *key);

/** Semantic checks YANG cannot express, on the walked tree (defaults present). */
void fs_cfg_check_semantics(const struct lyd_node *tree, struct fs_cfg_errs *errs);

/** Builds the public configuration from a validated tree; 0 or -1 (out of memory). */
int fs_cfg_build(const struct lyd_node *tree, struct fs_config *cfg);

/** First top-level/child data node named name (schema name), or NULL. */
const struct lyd_node *fs_cfg_child(const struct lyd_node *first, const char *name);

/** Canonical value of the child leaf name of parent (NULL: none). */
const char *fs_cfg_cval(const struct lyd_node *parent, const char *name);

#endif
