/*
 * Many collectors: which shard polls a target, and the external labels that tell
 * replicas apart. Nothing here is a cluster of its own: N instances given the same
 * configuration and different shard indexes agree on the split by hashing alone.
 *
 * The assignment is rendezvous (highest random weight) hashing of the target's name:
 * every shard draws a weight from hash(name, shard) and the highest wins. Adding a
 * shard moves only the targets the new shard wins (about 1/count of them); removing
 * one moves only that shard's targets. The hash is fixed (FNV-1a 64 of the name,
 * mixed with the shard number by SplitMix64's finalizer) and never depends on the
 * platform, the build or the order of targets in the file.
 *
 * struct fs_cluster is the running view shared by the daemon (the one writer, at
 * start and on every reload) and the HTTP workers (readers of /api/v1/targets and
 * /metrics): it copies what it keeps, under its own lock.
 */
#ifndef FS_CLUSTER_H
#define FS_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "util/buf.h"

/** The shard (0..count-1) that owns target; 0 when count is 0 or 1. */
uint32_t fs_shard_owner(const char *target, uint32_t count);

/** The shard settings in force: --shard overrides the configuration's shard block. */
struct fs_shard {
    uint32_t index, count; /**< count 0: not sharded (every target is this instance's) */
};

/** Parses "I/N" (0 <= I < N <= 4096) into *out; returns 0, or -1 with errbuf filled. */
int fs_shard_parse(const char *text, struct fs_shard *out, char *errbuf, size_t errlen);

/** The effective shard: *override when it is set (count > 0), else cfg's shard block. */
struct fs_shard fs_shard_effective(const struct fs_config *cfg, const struct fs_shard *override);

/** Whether the instance running shard s polls target. */
bool fs_shard_mine(const struct fs_shard *s, const char *target);

/**
 * The external labels of a configuration (sorted by name), for any code that
 * exports series (remote_write): they belong on every series it sends. The array
 * belongs to cfg.
 */
const struct fs_kv *fs_external_labels(const struct fs_config *cfg, size_t *n);

struct fs_cluster;

/** A view with no targets and no labels; NULL when out of memory. Freed with fs_cluster_free(). */
struct fs_cluster *fs_cluster_new(void);
void fs_cluster_free(struct fs_cluster *cl);

/** Replaces the view with cfg's targets and external labels under shard s (copied);
 *  returns 0, or -1 when out of memory (the previous view stays). */
int fs_cluster_update(struct fs_cluster *cl, const struct fs_config *cfg, const struct fs_shard *s);

/** The shard in force. */
struct fs_shard fs_cluster_shard(struct fs_cluster *cl);

/** Appends the external labels as exposition label text, `a="x",b="y"` (escaped), to
 *  out; nothing when there are none (or cl is NULL). */
void fs_cluster_labels_text(struct fs_cluster *cl, struct fs_buf *out);

/** Calls cb for every configured target in file order with the shard that owns it and
 *  whether this instance polls it; stops at cb's first non-zero return, which it returns.
 *  cb runs under the view's lock: it must not call back into cl. */
int fs_cluster_foreach_target(struct fs_cluster *cl,
                              int (*cb)(void *arg, const char *target, uint32_t owner, bool mine),
                              void *arg);

#endif
