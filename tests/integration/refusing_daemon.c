/*
 * fs-refusing-daemon: fabricscope's daemon (fs_daemon_run, the code the shipped binary
 * runs) with a driver table whose "snmp" driver is the real one except that target_add
 * refuses the targets named, one per line, in the file $FS_REFUSE_TARGETS at the time
 * of the call. The real SNMP driver never refuses a target it has a block for, so this is
 * how a test drives the daemon's "refused by its driver" path (shown down, retried on
 * every reload). Test-only: the product ships no such driver.
 *
 * usage: fs-refusing-daemon -c CONFIG
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "driver.h"

extern const struct fs_driver fs_driver_snmp;

/* Filled in main() from the real driver, so every operation but target_add is its own. */
static struct fs_driver refusing_snmp;

/* This program's registry, instead of drivers/registry.c. */
const struct fs_driver *const fs_builtin_drivers[] = {&refusing_snmp, NULL};
const size_t fs_builtin_driver_count = 1;

const struct fs_driver *
fs_driver_find(const char *name)
{
    return strcmp(name, refusing_snmp.name) == 0 ? &refusing_snmp : NULL;
}

static bool
listed(const char *target)
{
    const char *path = getenv("FS_REFUSE_TARGETS");
    char line[256];
    bool found = false;
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f)
        return false;
    while (!found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        found = strcmp(line, target) == 0;
    }
    fclose(f);
    return found;
}

static int
refusing_target_add(void *state, const struct fs_target_cfg *tcfg, struct fs_sink *sink,
                    void **tstate, char *errbuf, size_t errlen)
{
    if (listed(tcfg->name)) {
        snprintf(errbuf, errlen, "refused by the test (listed in FS_REFUSE_TARGETS)");
        return FS_DRV_ERR;
    }
    return fs_driver_snmp.target_add(state, tcfg, sink, tstate, errbuf, errlen);
}

int
main(int argc, char **argv)
{
    if (argc != 3 || strcmp(argv[1], "-c") != 0) {
        fprintf(stderr, "usage: fs-refusing-daemon -c CONFIG\n");
        return 2;
    }
    refusing_snmp = fs_driver_snmp;
    refusing_snmp.target_add = refusing_target_add;
    return fs_daemon_run(argv[2]);
}
