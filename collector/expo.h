/*
 * Prometheus text exposition (format 0.0.4) of everything the store exports plus
 * fabricscope's own metrics, into a caller-supplied buffer. No timestamps are written.
 * Allocation-free per series once the buffer has grown to size.
 */
#ifndef FS_EXPO_H
#define FS_EXPO_H

#include "buf.h"
#include "store.h"

/** Renders /metrics into out (appending). Returns 0, or -1 if out overflowed its max. */
int fs_expo_render(struct fs_store *st, struct fs_buf *out);

#endif
