/*
 * The live tail of the NCCL Inspector plugin's log directory: the regular files whose
 * names end in .log or .jsonl (as import-nccl-inspector reads them), read from where
 * the last accepted batch ended, complete lines only, parsed by the importer's
 * fs_import_nccl_inspector_read.
 *
 * Position per file: device, inode and byte offset, kept in <state_dir>/nccl-tail.json
 * (written atomically by fs_tail_commit, which the agent calls only once the collector
 * took the batch or it sits in the spool). A file replaced under the same name (another
 * inode) or truncated below the offset is read from its start again. After a crash
 * between the post and the commit, the batch is posted again and the collector drops it
 * as duplicates (its events have the same identity). Files no longer in dir leave the
 * file table at the next scan (and the state file at its next write, or start).
 *
 * Bad lines (not JSON, or longer than a batch) are counted in lines_bad and logged
 * rate-limited: the first one, then every FS_TAIL_BAD_REPORT_US at most one line saying
 * how many more there were (a job writing 1 MiB of garbage is not 500,000 log lines).
 *
 * Ownership: a tail owns its strings and its file table (fs_tail_close). Threads: the
 * owner's.
 */
#ifndef FS_AGENT_TAIL_H
#define FS_AGENT_TAIL_H

#include <stddef.h>
#include <stdint.h>

#include "importers/events.h"

struct fs_tail_file {
    char *name; /**< file name in dir */
    uint64_t dev, ino;
    uint64_t offset; /**< bytes posted (or spooled) */
};

/** At most one warning about bad lines per this many µs. */
#define FS_TAIL_BAD_REPORT_US (60LL * 1000000)

struct fs_tail {
    char *dir, *state_path;
    struct fs_tail_file *f;
    size_t n, cap;
    uint64_t lines_bad;      /**< lines that were not JSON or longer than a batch, skipped
                                  (logged, rate-limited) */
    uint64_t bad_unreported; /**< bad lines since the last warning, not logged yet */
    int64_t bad_reported_us; /**< monotonic time of the last warning; 0: none yet */
};

/** Where a batch of fs_tail_next ends, for fs_tail_commit. */
struct fs_tail_pos {
    size_t file; /**< index into f */
    uint64_t dev, ino, offset;
};

/** Opens the tail of dir with its state file in state_dir. 0 or -1 with err. */
int fs_tail_open(struct fs_tail *t, const char *dir, const char *state_dir, char *err,
                 size_t errlen);
void fs_tail_close(struct fs_tail *t);

/**
 * Reads the next new complete lines of one file (at most max_bytes of them) into b
 * under host (NULL: each record's own hostname), and where they end into *pos.
 * 1 when lines were read (b may still be empty: lines without records), 0 when no file
 * has new complete lines, -1 with err.
 */
int fs_tail_next(struct fs_tail *t, const char *host, size_t max_bytes, struct fs_imp_batch *b,
                 struct fs_tail_pos *pos, char *err, size_t errlen);

/** Records pos as done and writes the state file (atomically). 0 or -1 with err. */
int fs_tail_commit(struct fs_tail *t, const struct fs_tail_pos *pos, char *err, size_t errlen);

#endif
