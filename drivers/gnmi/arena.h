/*
 * A bump allocator for protobuf-c unpacking: one received message is unpacked into it,
 * used, and dropped at once with fs_gnmi_arena_reset() (no per-field frees; malloc was a
 * third of the decode cost). Requests that do not fit the chunk get their own malloc'd
 * block, released at reset; the chunk then grows (up to a bound) to fit the next such
 * message whole. It shrinks back: after FS_GNMI_ARENA_WINDOW resets in which no message
 * needed half the chunk, the chunk is cut to what the largest of them needed (at least
 * its first size), so one large message does not keep its chunk for good.
 *
 * The chunk and blocks of 64 KiB or more are mapped (mmap), not taken from malloc.
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

#define FS_GNMI_ARENA_WINDOW 256

struct fs_gnmi_arena {
    ProtobufCAllocator pa; /**< pass &arena.pa to *_unpack() */
    unsigned char *chunk;
    size_t cap, used, max_cap;
    size_t first_cap;       /**< the size it was made with: it never shrinks below */
    size_t win_peak;        /**< the most one message needed in the current window */
    unsigned win_resets;    /**< resets in the current window */
    size_t overflow_bytes;  /**< bytes served outside the chunk since reset */
    size_t overflow_mapped; /**< of those, in blocks mapped on their own (64 KiB or more) */
    size_t overflow_limit;  /**< at most this many overflow bytes until reset; 0: no limit */
    bool overflow_refused;  /**< an allocation was refused for the limit since reset */
    struct fs_gnmi_arena_block *blocks; /**< those allocations */
};

/** Sets the arena up with a first chunk of cap bytes, growing to at most max_cap. */
void fs_gnmi_arena_init(struct fs_gnmi_arena *a, size_t cap, size_t max_cap);

/** n bytes (aligned) valid until the next reset; NULL on no memory or past the overflow
 * limit. */
void *fs_gnmi_arena_alloc(struct fs_gnmi_arena *a, size_t n);

/** Drops everything handed out since the last reset. */
void fs_gnmi_arena_reset(struct fs_gnmi_arena *a);

void fs_gnmi_arena_fini(struct fs_gnmi_arena *a);

#endif
