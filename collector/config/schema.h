/*
 * The schema of a configuration (internal to config/, above tree.h): one libyang
 * context holding the core module (schemas/fabricscope-config.yang, compiled in) and
 * the YANG module of every driver block of the build (block.h), each augmenting the
 * core's targets list with its container.
 *
 * Contexts are made once per distinct set of driver modules and kept for the life of
 * the process (compiling costs milliseconds; a daemon uses one set). They are only
 * read after creation, so parses may share them.
 */
#ifndef FS_CONFIG_SCHEMA_H
#define FS_CONFIG_SCHEMA_H

#include <stddef.h>

#include <libyang/libyang.h>

#include "config/config.h"

struct fs_cfg_schema {
    struct ly_ctx *ctx;
    const struct lys_module *core;   /**< fabricscope-config */
    const struct lysc_node *targets; /**< the core's targets list: driver blocks go below */
};

/**
 * The schema for the driver blocks of opts (NULL: none). Checks each driver module: it
 * must compile against the core and add exactly its container NAME under targets.
 * @return the shared schema (never freed), or NULL with errbuf filled
 */
const struct fs_cfg_schema *fs_cfg_schema_get(const struct fs_config_opts *opts, char *errbuf,
                                              size_t errlen);

/**
 * The child of the schema node sparent (NULL: the core module's top level) named
 * name[0..len), whatever module defines it (a driver's container under targets comes
 * from the driver's module); NULL if none.
 */
const struct lysc_node *fs_cfg_schema_child(const struct fs_cfg_schema *sc,
                                            const struct lysc_node *sparent, const char *name,
                                            size_t len);

/**
 * The schema of a standalone document (fs_cfg_doc_load): the core module, whose types
 * and extensions it may import, plus module_text, whose top level is the document's.
 * Made once per module_text (static text, compared by address) and never freed.
 * @return the schema (targets NULL), or NULL with errbuf filled
 */
const struct fs_cfg_schema *fs_cfg_schema_doc(const char *module_text, char *errbuf, size_t errlen);

#endif
