/*
 * The host agent runs as root: the files of its state directory, and the NCCL Inspector
 * logs of a directory the job's user can write, are opened so that a planted symlink or
 * FIFO is refused instead of followed (or blocked on).
 *
 * Ownership: nothing is kept; descriptors returned are the caller's. Threads: any.
 */
#ifndef FS_AGENT_SAFEFILE_H
#define FS_AGENT_SAFEFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

/**
 * path is a directory this process may keep its state in: created (0750) when missing
 * (with create; without, a missing one is good: it will be), then a directory owned by the
 * effective user and writable by no group or other user (nobody else can place a name in
 * it). 0, or -1 with err saying what is wrong and the fix.
 */
int fs_agent_private_dir(const char *path, bool create, char *err, size_t errlen);

/**
 * Opens path for reading without following a symlink and without blocking on a FIFO;
 * only a regular file is taken (st filled when not NULL). The descriptor (blocking again),
 * or -1 with err.
 */
int fs_agent_open_regular(const char *path, struct stat *st, char *err, size_t errlen);

/**
 * Creates path afresh for writing (a name left there, a symlink included, is removed
 * first; then O_CREAT|O_EXCL|O_NOFOLLOW). The descriptor, or -1 with errno.
 */
int fs_agent_create(const char *path, int mode);

#endif
