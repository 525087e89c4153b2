/* Bump allocator for protobuf-c (see arena.h). */
#include "arena.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

struct fs_gnmi_arena_block {
    struct fs_gnmi_arena_block *next;
    size_t size; /* bytes mapped (the header included); 0: from malloc */
    alignas(max_align_t) unsigned char data[];
};

#define ALIGN(n) (((n) + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1))

/* The chunk and large blocks are mapped, not malloc'd: they live and die with the
 * messages (a chunk regrows, a block goes at reset), and from malloc they left megabytes
 * of free holes in the stream threads' malloc arenas, resident for good (glibc returns
 * only an arena's top), and raised malloc's mmap threshold for every other allocation. */
#define MAP_MIN (64u << 10)

static void *
map_bytes(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void
chunk_free(struct fs_gnmi_arena *a)
{
    if (a->chunk)
        munmap(a->chunk, a->cap);
    a->chunk = NULL;
}

static void *
arena_alloc(void *arg, size_t n)
{
    struct fs_gnmi_arena *a = arg;
    size_t need = ALIGN(n ? n : 1);
    if (a->chunk && need <= a->cap - a->used) {
        void *p = a->chunk + a->used;
        a->used += need;
        return p;
    }
    if (need > SIZE_MAX - sizeof(struct fs_gnmi_arena_block))
        return NULL;
    if (a->overflow_limit &&
        need > a->overflow_limit - (a->overflow_bytes < a->overflow_limit ? a->overflow_bytes
                                                                          : a->overflow_limit)) {
        a->overflow_refused = true;
        return NULL;
    }
    size_t bytes = sizeof(struct fs_gnmi_arena_block) + need;
    struct fs_gnmi_arena_block *b = bytes >= MAP_MIN ? map_bytes(bytes) : malloc(bytes);
    if (!b)
        return NULL;
    b->size = bytes >= MAP_MIN ? bytes : 0;
    a->overflow_mapped += b->size ? need : 0;
    b->next = a->blocks;
    a->blocks = b;
    a->overflow_bytes += need;
    return b->data;
}

static void
arena_free(void *arg, void *p)
{
    (void)arg;
    (void)p; /* everything goes at reset */
}

void *
fs_gnmi_arena_alloc(struct fs_gnmi_arena *a, size_t n)
{
    return arena_alloc(a, n);
}

void
fs_gnmi_arena_init(struct fs_gnmi_arena *a, size_t cap, size_t max_cap)
{
    a->pa.alloc = arena_alloc;
    a->pa.free = arena_free;
    a->pa.allocator_data = a;
    a->chunk = cap ? map_bytes(cap) : NULL;
    a->cap = a->chunk ? cap : 0;
    a->max_cap = max_cap > cap ? max_cap : cap;
    a->first_cap = a->cap;
    a->win_peak = 0;
    a->win_resets = 0;
    a->used = 0;
    a->overflow_bytes = 0;
    a->overflow_mapped = 0;
    a->overflow_limit = 0;
    a->overflow_refused = false;
    a->blocks = NULL;
}

void
fs_gnmi_arena_reset(struct fs_gnmi_arena *a)
{
    size_t want = a->used + a->overflow_bytes;
    if (want > a->win_peak)
        a->win_peak = want;
    while (a->blocks) {
        struct fs_gnmi_arena_block *b = a->blocks;
        a->blocks = b->next;
        if (b->size)
            munmap(b, b->size);
        else
            free(b);
    }
    if (a->overflow_bytes && want > a->cap) {
        size_t ncap = want < a->max_cap ? want : a->max_cap;
        if (ncap > a->cap) {
            unsigned char *c = map_bytes(ncap);
            if (c) {
                chunk_free(a);
                a->chunk = c;
                a->cap = ncap;
            }
        }
    }
    if (++a->win_resets >= FS_GNMI_ARENA_WINDOW) {
        /* a quiet window: give back what the large messages left */
        size_t keep = a->win_peak + a->win_peak / 4;
        if (keep < a->first_cap)
            keep = a->first_cap;
        if (a->cap > a->first_cap && a->win_peak < a->cap / 2 && keep < a->cap) {
            unsigned char *c = map_bytes(keep);
            if (c) {
                chunk_free(a);
                a->chunk = c;
                a->cap = keep;
            }
        }
        a->win_peak = 0;
        a->win_resets = 0;
    }
    a->used = 0;
    a->overflow_bytes = 0;
    a->overflow_mapped = 0;
    a->overflow_refused = false;
}

void
fs_gnmi_arena_fini(struct fs_gnmi_arena *a)
{
    fs_gnmi_arena_reset(a);
    chunk_free(a);
    a->cap = 0;
}
