/* The static table of the drivers compiled into this build (chosen by CMake options). */
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

const struct fs_driver *
fs_driver_find(const char *name)
{
    for (size_t i = 0; i < fs_builtin_driver_count; i++)
        if (strcmp(fs_builtin_drivers[i]->name, name) == 0)
            return fs_builtin_drivers[i];
    return NULL;
}
