/*
 * fs-refusing-daemon: fabricscope's daemon (fs_daemon_run, the code the shipped binary
 * runs) with a driver table whose "snmp" driver is the real one except that target_add
 * refuses the targets named, one per line, in the file $FS_REFUSE_TARGETS at the time
 * of the call. The real SNMP driver never refuses a target it has a block for, so this is
 * how a test drives the daemon's "refused by its driver" path (shown down, retried on
 * every reload). Its target_remove also never returns for the targets listed in
 * $FS_HANG_ON_REMOVE, a driver stuck at shutdown. Test-only: the product ships no such
 * driver.
 *
 * usage: fs-refusing-daemon -c CONFIG
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "driver.h"

extern const struct fs_driver fs_driver_snmp;

/* Filled in main() from the real driver, so every operation but target_add is its own. */
static struct fs_driver refusing_snmp;

/* This program's tables, instead of drivers/registry.c (lookups come from lookup.c). */
const struct fs_driver *const fs_builtin_drivers[] = {&refusing_snmp, NULL};
const size_t fs_builtin_driver_count = 1;
const char *const fs_known_driver_names[] = {"snmp"};
const size_t fs_known_driver_count = 1;

/* The names of the targets added, by driver state, for target_remove. */
#define MAX_NAMES 64
static struct {
    void *tstate;
    char name[64];
} names[MAX_NAMES];
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether target is a line of the file named by environment variable var. */
static bool
listed(const char *var, const char *target)
{
    const char *path = getenv(var);
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
refusing_target_add(void *state, const struct fs_target_cfg *tcfg, const void *dcfg,
                    struct fs_sink *sink, void **tstate, char *errbuf, size_t errlen)
{
    if (listed("FS_REFUSE_TARGETS", tcfg->name)) {
        snprintf(errbuf, errlen, "refused by the test (listed in FS_REFUSE_TARGETS)");
        return FS_DRV_ERR;
    }
    int rc = fs_driver_snmp.target_add(state, tcfg, dcfg, sink, tstate, errbuf, errlen);
    if (rc == FS_DRV_OK) {
        pthread_mutex_lock(&names_lock);
        for (size_t i = 0; i < MAX_NAMES; i++)
            if (!names[i].tstate) {
                names[i].tstate = *tstate;
                snprintf(names[i].name, sizeof names[i].name, "%s", tcfg->name);
                break;
            }
        pthread_mutex_unlock(&names_lock);
    }
    return rc;
}

static void
hanging_target_remove(void *state, void *tstate)
{
    char name[64] = "";
    pthread_mutex_lock(&names_lock);
    for (size_t i = 0; i < MAX_NAMES; i++)
        if (names[i].tstate == tstate) {
            snprintf(name, sizeof name, "%s", names[i].name);
            names[i].tstate = NULL;
        }
    pthread_mutex_unlock(&names_lock);
    if (listed("FS_HANG_ON_REMOVE", name))
        for (;;)
            pause();
    fs_driver_snmp.target_remove(state, tstate);
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
    refusing_snmp.target_remove = hanging_target_remove;
    return fs_daemon_run(argv[2]);
}
