/*
 * The SNMP driver's vtable (see driver.h); registry.c lists it.
 */
#ifndef FS_SNMP_DRIVER_H
#define FS_SNMP_DRIVER_H

#include <stdint.h>
#include <stdio.h>

#include "config/config.h"
#include "driver.h"
#include "snmp_config.h"

extern const struct fs_driver fs_driver_snmp;

#endif
