/*
 * The agent's on-disk spool: POST bodies (fs_imp_body) the collector could not take yet,
 * one file each in <state_dir>/spool/, named <seq>-<events>.json so that a directory
 * listing is the posting order. Files are written whole (temporary file, fsync, rename),
 * so a crash leaves either the whole body or none. Bounded by max_bytes: a body that
 * would exceed it first drops the oldest files, counted in dropped_events.
 *
 * The index of the spooled files (name, events, size, oldest first) is kept in memory,
 * read from the directory once by fs_spool_open: put, oldest, drop and remove never list
 * the directory (a day's outage of batches is posted in linear time). The directory is
 * the agent's own (private): files put there behind its back are seen at the next start.
 *
 * Ownership: a spool owns its dir string and its index (fs_spool_close). Threads: the
 * owner's.
 */
#ifndef FS_AGENT_SPOOL_H
#define FS_AGENT_SPOOL_H

#include <stddef.h>
#include <stdint.h>

/** A spooled file: "<seq>-<events>.json" (seq and events at most 20 digits each). */
struct fs_spool_entry {
    char name[48];
    uint64_t seq, size;
    size_t events;
};

struct fs_spool {
    char *dir;
    struct fs_spool_entry *q; /**< q[head .. head + files), oldest first */
    size_t head, cap;
    uint64_t max_bytes;
    uint64_t bytes;          /**< what the spooled files take now */
    size_t files, events;    /**< spooled now */
    uint64_t next_seq;       /**< next file's number */
    uint64_t dropped_events; /**< dropped to the bound since start */
    uint64_t dropped_files;
};

/** Opens (creates) dir and counts what a previous run left there. 0 or -1 with err. */
int fs_spool_open(struct fs_spool *s, const char *dir, uint64_t max_bytes, char *err,
                  size_t errlen);
void fs_spool_close(struct fs_spool *s);

/**
 * Spools one body of n_events events, dropping the oldest files while the bound would be
 * exceeded (a body larger than the bound alone is dropped itself and counted).
 * 0 or -1 with err (the disk refused: the caller keeps its data).
 */
int fs_spool_put(struct fs_spool *s, const char *body, size_t len, size_t n_events, char *err,
                 size_t errlen);

/**
 * The oldest body: 1 with *body (malloc'd, NUL-terminated; the caller frees), its length,
 * event count and file name (for fs_spool_remove); 0 when empty, or when the oldest was
 * not a regular file (a symlink or FIFO no agent wrote: removed and logged); -1 with err.
 */
int fs_spool_oldest(struct fs_spool *s, char **body, size_t *len, size_t *n_events, char *name,
                    size_t namelen, char *err, size_t errlen);

/** Removes a spooled file (after the collector took it). 0 or -1 with err. */
int fs_spool_remove(struct fs_spool *s, const char *name, char *err, size_t errlen);

#endif
