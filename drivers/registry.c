/*
 * The drivers of this build (chosen by CMake options) and the names of every driver
 * fabricscope knows. Adding a driver: its folder, one line in each list below (the
 * known names keep a block of a driver a build lacks refusable with that reason), and
 * drivers/CMakeLists.txt.
 */
#include <stdio.h>
#include <string.h>

#include "driver.h"

#ifdef FS_HAVE_SNMP
extern const struct fs_driver fs_driver_snmp;
#endif

const struct fs_driver *const fs_builtin_drivers[] = {
#ifdef FS_HAVE_SNMP
    &fs_driver_snmp,
#endif
    NULL,
};

const size_t fs_builtin_driver_count =
    sizeof(fs_builtin_drivers) / sizeof(fs_builtin_drivers[0]) - 1;

/* gnmi (drivers/gnmi) and cli (drivers/onyx) are known but not built yet. */
const char *const fs_known_driver_names[] = {"gnmi", "cli", "snmp"};

const size_t fs_known_driver_count =
    sizeof(fs_known_driver_names) / sizeof(fs_known_driver_names[0]);

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
    if (drv->kind != FS_DRIVER_POLL && drv->kind != FS_DRIVER_STREAM) {
        snprintf(errbuf, errlen, "driver %s: unknown kind %d", b->name, (int)drv->kind);
        return -1;
    }
    return 0;
}
