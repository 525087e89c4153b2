/*
 * The drivers of this build (chosen by CMake options) and the names of every driver
 * fabricscope knows. Adding a driver: its folder, one line in each list below (the
 * known names keep a block of a driver a build lacks refusable with that reason), and
 * drivers/CMakeLists.txt.
 */
#include <stdio.h>
#include <string.h>

#include "driver.h"

#ifdef FS_HAVE_GNMI
extern const struct fs_driver fs_driver_gnmi;
#endif
#ifdef FS_HAVE_SNMP
extern const struct fs_driver fs_driver_snmp;
#endif
#ifdef FS_HAVE_ONYX
extern const struct fs_driver fs_driver_onyx;
#endif
#ifdef FS_HAVE_SFLOW
extern const struct fs_driver fs_driver_sflow;
#endif

const struct fs_driver *const fs_builtin_drivers[] = {
#ifdef FS_HAVE_GNMI
    &fs_driver_gnmi,
#endif
#ifdef FS_HAVE_SNMP
    &fs_driver_snmp,
#endif
#ifdef FS_HAVE_ONYX
    &fs_driver_onyx,
#endif
#ifdef FS_HAVE_SFLOW
    &fs_driver_sflow,
#endif
    NULL,
};

const size_t fs_builtin_driver_count =
    sizeof(fs_builtin_drivers) / sizeof(fs_builtin_drivers[0]) - 1;

/* Every driver fabricscope knows is built in by default (CMake options can leave any out). */
const char *const fs_known_driver_names[] = {"gnmi", "cli", "snmp", "sflow"};

const size_t fs_known_driver_count =
    sizeof(fs_known_driver_names) / sizeof(fs_known_driver_names[0]);
