/*
 * The agent's configured command (command: in its file): one run of argv, without a
 * shell, in a process group of its own, its standard output read into a bounded buffer
 * and the first KiB of its standard error kept, without blocking the agent's loop.
 *
 * Ownership: struct fs_runcmd is the caller's (zeroed before its first start); it owns its pipes
 * and its output buffer until fs_runcmd_free. Threads: the owner's. Only one run per struct at a
 * time.
 */
#ifndef FS_AGENT_RUNCMD_H
#define FS_AGENT_RUNCMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/buf.h"

struct fs_runcmd {
    pid_t pid;          /**< 0: no run */
    int out_fd, err_fd; /**< -1 once closed */
    bool reaped;        /**< the child was waited for; status is its wait status */
    int status;
    bool timed_out, cut;      /**< killed for the timeout, or for output beyond the bound */
    bool stopped;             /**< killed by fs_runcmd_kill (the agent stops) */
    int64_t start_mono_us;    /**< monotonic */
    int64_t start_ns, end_ns; /**< wall clock, this host's */
    struct fs_buf out;        /**< standard output (at most max_output bytes) */
    char err_text[1024];      /**< the start of its standard error */
    size_t err_len;
};

/**
 * Starts argv (NULL-terminated; argv[0] looked up in PATH unless it has a /). With
 * win_end_ns != 0, FS_WINDOW_START_NS and FS_WINDOW_END_NS are set in its environment.
 * 0, or -1 with err (no pipe, no fork). A command that cannot be executed starts and
 * exits 127 with the reason on its standard error.
 */
int fs_runcmd_start(struct fs_runcmd *r, char *const argv[], uint64_t max_output,
                    int64_t win_start_ns, int64_t win_end_ns, char *err, size_t errlen);

/** True while a run is started and not yet over (fs_runcmd_step returned 1). */
bool fs_runcmd_running(const struct fs_runcmd *r);

/**
 * Reads what the run wrote, waiting at most wait_ms for something to read; kills the
 * process group once timeout_us has passed or the output reaches its bound. 1 when the
 * run is over (both pipes at their end, the child reaped; end_ns set), else 0.
 */
int fs_runcmd_step(struct fs_runcmd *r, int64_t timeout_us, int wait_ms);

/** Kills the run's process group and waits until it is over (the agent stops). */
void fs_runcmd_kill(struct fs_runcmd *r);

/** "exited with status 3", "killed by signal 9", ... of a run that is over. */
void fs_runcmd_describe(const struct fs_runcmd *r, char *out, size_t outlen);

/** Releases the output buffer and closes what is open (a running child is killed). */
void fs_runcmd_free(struct fs_runcmd *r);

#endif
