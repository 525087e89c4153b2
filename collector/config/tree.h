/*
 * The configuration's trees and problems (internal to config/, above parse.h): the
 * YAML node tree with line and column, the problem list, and the positions and key
 * paths of libyang data nodes that came from YAML nodes. The block.h accessors for
 * drivers are implemented here too.
 */
#ifndef FS_CONFIG_TREE_H
#define FS_CONFIG_TREE_H

#include <stdbool.h>
#include <stddef.h>

#include <libyang/libyang.h>

#include "config/config.h"

/* Problems beyond this many are summarized in one line: a broken file needs fixing
 * from the top, and the cap bounds the work on hostile input. */
#define FS_CFG_MAX_ERRORS 100
#define FS_CFG_CORE_MODULE "fabricscope-config"
#define FS_CFG_MAX_DEPTH 64
#define FS_CFG_PATH_MAX 512
#define FS_CFG_SHOW_MAX 48 /* longest excerpt of a user's text in a message, in bytes */

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

/** Appends kid to parent (which then owns it); 0 or -1 (no memory, kid not taken). */
int fs_ynode_append(struct fs_ynode *parent, struct fs_ynode *kid);

/** "a mapping", "a list" or "a value". */
const char *fs_ynode_kind_name(const struct fs_ynode *v);

/** A YAML null: an empty plain scalar, ~ or null. */
bool fs_ynode_is_null(const struct fs_ynode *v);

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

/** True when any problem (or out of memory) was recorded. */
bool fs_cfg_errs_any(const struct fs_cfg_errs *e);

/** Every problem as "FILE:LINE:COL: text\n", sorted by position (malloc'd; NULL: no
 *  memory). */
char *fs_cfg_errs_format(struct fs_cfg_errs *e, const char *filename);

/** Frees the texts; e is empty afterwards. */
void fs_cfg_errs_free(struct fs_cfg_errs *e);

/**
 * Copies user text for a message: at most FS_CFG_SHOW_MAX bytes, cut at a UTF-8
 * character boundary, control bytes, quotes and backslashes replaced by '?' so a
 * message stays one line; other (UTF-8) characters are kept. "..." marks a cut.
 */
void fs_cfg_show(char *dst, size_t dlen, const char *s, size_t len);

/** The extension instance fsc:NAME on schema node s, or NULL. */
const struct lysc_ext_instance *fs_cfg_find_ext(const struct lysc_node *s, const char *name);

/** True for keys whose values are never shown in messages (secrets and their refs). */
bool fs_cfg_key_hidden(const char *key);

/** Position of a data node (its key when at_key and it has one); implicit nodes use their
 * nearest explicit ancestor; 1:1 when there is none. */
void fs_cfg_node_pos(const struct lyd_node *n, bool at_key, unsigned *line, unsigned *col);

/** Writes the user-facing key path of a data node ("targets[tor1].snmp.port"). */
void fs_cfg_node_path(const struct lyd_node *n, char *buf, size_t len);

/** First node named name (schema name) among first and its following siblings, or NULL. */
const struct lyd_node *fs_cfg_child(const struct lyd_node *first, const char *name);

#endif
