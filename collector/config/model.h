/*
 * The configuration model (internal to config/, above yaml.h): the checks YANG cannot
 * express and the building of struct fs_config from the walked data tree, including
 * each target's driver blocks (built by their drivers, block.h) and its source
 * precedence. fs_config_free(), fs_target_cfg_equal() and fs_target_block_cfg() of
 * config.h live here too.
 */
#ifndef FS_CONFIG_MODEL_H
#define FS_CONFIG_MODEL_H

#include <libyang/libyang.h>

#include "config/config.h"
#include "config/tree.h"

/**
 * Checks and builds cfg from tree (the walked top-level siblings, YANG defaults
 * present). Every problem goes to errs; cfg is then incomplete and only good for
 * fs_config_free(). Driver blocks the walker reported a problem in are not built.
 * @return 0, or -1 when out of memory
 */
int fs_cfg_model_build(const struct lyd_node *tree, const struct fs_config_opts *opts,
                       struct fs_config *cfg, struct fs_cfg_errs *errs);

#endif
