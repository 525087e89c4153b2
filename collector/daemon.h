/*
 * The daemon's life: load and validate the configuration, start the store, drivers,
 * scheduler and HTTP endpoint, reload on SIGHUP (validate first; a bad file changes
 * nothing), stop cleanly on SIGTERM/SIGINT. Also the one-shot subcommands.
 */
#ifndef FS_DAEMON_H
#define FS_DAEMON_H

#include <stdbool.h>
#include <stdio.h>

#include "cluster.h"
#include "config/config.h"

/** The config options listing the drivers this build has. */
void fs_daemon_config_opts(struct fs_config_opts *o);

/** Validates FILE; prints every problem to err. Returns 0 (good) or 2 (bad). */
int fs_check_config(const char *path, FILE *out, FILE *err);

/** Runs until SIGTERM/SIGINT. Returns the process exit code (0, 1 runtime error, 2 bad config). */
int fs_daemon_run(const char *config_path);

/** fs_daemon_run() polling only the targets of shard (--shard I/N), which overrides
 *  the configuration's shard block at start and on every reload; NULL: as configured. */
int fs_daemon_run_shard(const char *config_path, const struct fs_shard *shard);

/**
 * `systemctl reload` (ExecReload): asks the daemon of process pid to reload its file and
 * waits up to timeout_s for its verdict. The request is SIGHUP sent with sigqueue() and a
 * value the daemon recognises; the daemon answers the sender with FS_RELOAD_VERDICT_SIG
 * carrying 0 (applied) or 1 (refused: its log says why). A plain SIGHUP (kill) still
 * reloads, unanswered. Prints the outcome (refusal or failure to err). Returns 0 applied,
 * 1 refused, no answer in time, or no such process.
 */
int fs_daemon_reload(long pid, int timeout_s, FILE *out, FILE *err);

/** Options of fs_probe(). */
struct fs_probe_opts {
    bool transcript; /**< print each driver's raw exchange with the target (drivers that
                          have one) before the exposition */
};

/**
 * Polls one target (named by target, not NULL) once with every driver it has a block
 * for, then prints what would be exported and every error. po may be NULL (no options).
 * Returns 0 if every driver succeeded, 1 otherwise, 2 on a bad configuration or unknown
 * target.
 */
int fs_probe(const char *config_path, const char *target, const struct fs_probe_opts *po, FILE *out,
             FILE *err);

/**
 * Prints, per target (only target when not NULL), the configuration commands the
 * drivers that install the flow rules would send, touching nothing: each such driver
 * reads the device's state in one plan-mode cycle first. Returns 0, 1 when a device
 * could not be read (its offline plan was printed) or a driver failed, 2 on a bad
 * configuration or unknown target.
 */
int fs_plan_flow_rules(const char *config_path, const char *target, FILE *out, FILE *err);

#endif
