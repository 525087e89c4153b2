/*
 * A bump allocator for protobuf-c unpacking: one received message is unpacked into it,
 * used, and dropped at once with fs_gnmi_arena_reset() (no per-field frees; malloc was a
 * third of the decode cost). Requests that do not fit the chunk get their own malloc'd
 * block, released at reset; the chunk then grows (up to a bound) to fit the next such
 * message whole.
 *
 * Ownership: the arena is the caller's (init/fini); memory handed out belongs to the
 * arena and is valid until the next reset. Not thread-safe: one arena per thread.
 */
#ifndef FS_GNMI_ARENA_H
#define FS_GNMI_ARENA_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>

struct fs_gnmi_arena_block;

struct fs_gnmi_arena {
    ProtobufCAllocator pa; /**< pass &arena.pa to *_unpack() */
    unsigned char *chunk;
    size_t cap, used, max_cap;
    size_t overflow_bytes; /**< bytes served outside the chunk since reset */
    size_t overflow_limit; /**< at most this many overflow bytes until reset; 0: no limit */
    bool overflow_refused; /**< an allocation was refused for the limit since reset */
    struct fs_gnmi_arena_block *blocks; /**< those allocations */
};

/** Sets the arena up with a first chunk of cap bytes, growing to at most max_cap. */
void fs_gnmi_arena_init(struct fs_gnmi_arena *a, size_t cap, size_t max_cap);

/** Drops everything handed out since the last reset. */
void fs_gnmi_arena_reset(struct fs_gnmi_arena *a);

void fs_gnmi_arena_fini(struct fs_gnmi_arena *a);

#endif
