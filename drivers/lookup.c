/* Looking drivers up in this build's tables (registry.c) and checking them; see driver.h.
 * Apart from the tables, so a test program can bring its own tables and reuse these. */
#include <stdio.h>
#include <string.h>

#include "driver.h"

const struct fs_driver *
fs_driver_find(const char *name)
{
    for (size_t i = 0; i < fs_builtin_driver_count; i++)
        if (strcmp(fs_builtin_drivers[i]->block.name, name) == 0)
            return fs_builtin_drivers[i];
    return NULL;
}

const struct fs_driver *
fs_driver_of_block(const struct fs_cfg_block_ops *ops)
{
    for (size_t i = 0; i < fs_builtin_driver_count; i++)
        if (&fs_builtin_drivers[i]->block == ops)
            return fs_builtin_drivers[i];
    return NULL;
}

int
fs_driver_check(const struct fs_driver *drv, char *errbuf, size_t errlen)
{
    const struct fs_cfg_block_ops *b;

    if (!drv) {
        snprintf(errbuf, errlen, "no driver");
        return -1;
    }
    /* Only api_version may be read before it is known to match. */
    if (drv->api_version != FS_DRIVER_API_VERSION) {
        snprintf(errbuf, errlen, "a driver was written for driver API %u, this fabricscope has %u",
                 drv->api_version, (unsigned)FS_DRIVER_API_VERSION);
        return -1;
    }
    b = &drv->block;
    if (!b->name || !b->name[0] || !b->yang_module || !b->config_build || !b->config_free ||
        !b->config_equal || !b->config_interval || !drv->init || !drv->shutdown ||
        !drv->target_add || !drv->target_remove) {
        snprintf(errbuf, errlen, "driver %s: a required member is not set",
                 b->name ? b->name : "(unnamed)");
        return -1;
    }
    for (const char *c = b->name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') ||
              (c > b->name && ((*c >= '0' && *c <= '9') || *c == '_')))) {
            snprintf(errbuf, errlen, "driver \"%s\": a name is [a-z][a-z0-9_]*", b->name);
            return -1;
        }
    if (drv->kind == FS_DRIVER_POLL && (!drv->cycle_start || !drv->cycle_cancel)) {
        snprintf(errbuf, errlen, "driver %s: a polling driver needs cycle_start and cycle_cancel",
                 b->name);
        return -1;
    }
    if (!drv->target_plan_mode != !drv->target_plan) {
        snprintf(errbuf, errlen, "driver %s: target_plan_mode and target_plan go together",
                 b->name);
        return -1;
    }
    if (drv->kind != FS_DRIVER_POLL && drv->kind != FS_DRIVER_STREAM) {
        snprintf(errbuf, errlen, "driver %s: unknown kind %d", b->name, (int)drv->kind);
        return -1;
    }
    return 0;
}
