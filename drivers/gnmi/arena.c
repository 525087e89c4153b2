/* Bump allocator for protobuf-c (see arena.h). */
#include "arena.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>

struct fs_gnmi_arena_block {
    struct fs_gnmi_arena_block *next;
    alignas(max_align_t) unsigned char data[];
};

#define ALIGN(n) (((n) + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1))

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
    struct fs_gnmi_arena_block *b = malloc(sizeof *b + need);
    if (!b)
        return NULL;
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

void
fs_gnmi_arena_init(struct fs_gnmi_arena *a, size_t cap, size_t max_cap)
{
    a->pa.alloc = arena_alloc;
    a->pa.free = arena_free;
    a->pa.allocator_data = a;
    a->chunk = malloc(cap);
    a->cap = a->chunk ? cap : 0;
    a->max_cap = max_cap > cap ? max_cap : cap;
    a->first_cap = a->cap;
    a->win_peak = 0;
    a->win_resets = 0;
    a->used = 0;
    a->overflow_bytes = 0;
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
        free(b);
    }
    if (a->overflow_bytes && want > a->cap) {
        size_t ncap = want < a->max_cap ? want : a->max_cap;
        if (ncap > a->cap) {
            unsigned char *c = malloc(ncap);
            if (c) {
                free(a->chunk);
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
            unsigned char *c = malloc(keep);
            if (c) {
                free(a->chunk);
                a->chunk = c;
                a->cap = keep;
            }
        }
        a->win_peak = 0;
        a->win_resets = 0;
    }
    a->used = 0;
    a->overflow_bytes = 0;
    a->overflow_refused = false;
}

void
fs_gnmi_arena_fini(struct fs_gnmi_arena *a)
{
    fs_gnmi_arena_reset(a);
    free(a->chunk);
    a->chunk = NULL;
    a->cap = 0;
}
