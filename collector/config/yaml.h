/*
 * YAML to data tree (internal to config/, above schema.h): libyaml's events into a
 * node tree with positions, then a walk of that tree against the schema that reports
 * every problem with its key path (unknown keys, shapes, types, ranges, patterns,
 * choices, mandatory keys, driver blocks this build lacks) and builds a libyang data
 * tree whose nodes point back at their YAML nodes.
 */
#ifndef FS_CONFIG_YAML_H
#define FS_CONFIG_YAML_H

#include <stddef.h>

#include <libyang/libyang.h>

#include "config/config.h"
#include "config/schema.h"
#include "config/tree.h"

/**
 * Reads one YAML document into *root (NULL for an empty stream; caller frees with
 * fs_ynode_free). A UTF-8 byte-order mark at the start is skipped. Problems go to errs;
 * returns -1 when reading stopped early (syntax error, too deep, out of memory).
 */
int fs_cfg_read_yaml(const char *text, size_t len, struct fs_cfg_errs *errs,
                     struct fs_ynode **root);

/**
 * Walks root against the schema: problems go to errs, the data tree to *tree (top-level
 * siblings, caller frees with lyd_free_all; its nodes' priv point into root, which must
 * outlive it). Blocks named in opts->absent are refused as "this build has no X driver".
 */
void fs_cfg_walk(const struct fs_cfg_schema *sc, const struct fs_config_opts *opts,
                 struct fs_ynode *root, struct fs_cfg_errs *errs, struct lyd_node **tree);

#endif
