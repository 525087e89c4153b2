/*
 * Ring time-series (see ring.h for the model).
 *
 * Encoding. Each group has a timeline: one timestamp per batch, numbered by a batch
 * sequence (seq, uint32 per group: 2^32-1 batches, 13 years at 10 Hz, then appends are
 * refused), kept in timeline chunks of TL_BATCHES consecutive batches, delta-of-delta
 * coded (class code below). Each series keeps a singly linked list of closed
 * chunks (oldest first) plus one live head chunk. A chunk stores its first seq and first
 * value in the header; every later sample is a bit string, MSB first in 64-bit words:
 *
 *   '0'                         next batch (seq + 1) and "same again": counter
 *                               delta-of-delta 0, or gauge value unchanged
 *   '1' <seq code> <value code> otherwise
 *
 *   seq code:  '0' +1 | '10' 6 bits (+2..65) | '110' 16 bits (+66..) | '111' 32 bits
 *   counter value: zigzag(delta-of-delta) computed in uint64 wrap-around arithmetic
 *              (exact for any uint64 sequence), in a class code: c leading ones then a
 *              zero (c < 8) or eight ones (c = 8), then CLASS_W[c] bits
 *   gauge value: Gorilla XOR of the IEEE bits: '0' same | '10' bits in the previous
 *              window | '11' 6 bits leading zeros, 6 bits length-1, the bits
 *
 * Eviction. Closed chunks sit in one FIFO in the order they were closed, which is the
 * order of their newest sample up to the jitter between groups; memory_limit and
 * retention pop from its front. A timeline chunk counts the series chunks whose first
 * sample lies in it; timeline chunks at the front with no such chunk are freed (no
 * later series chunk can reach back into them).
 *
 * Concurrency. One mutex. The writer holds it for one batch (a few hundred µs for a
 * 5,000-sample poll); readers hold it only to copy the raw words of the chunks in range
 * and decode after releasing it, so a reader delays the writer by one memcpy at most.
 *
 * Memory accounting counts every allocation at malloc_usable_size() + one word of
 * allocator header, so stats.bytes is what the process really holds for the ring.
 */
#include "store/ring.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_MAX_SAMPLES 1024u
#define CHUNK_MAX_WORDS 128u                  /* 1 KiB of payload, then the chunk closes */
#define CHUNK_CAP_WORDS (CHUNK_MAX_WORDS + 2) /* one sample (<= 114 bits) past the max */
#define TL_BATCHES 64u
#define TL_INIT_WORDS 4u
#define TL_CAP_WORDS ((TL_BATCHES * 72u + 63u) / 64u + 1u)
#define NO_GROUP UINT32_MAX
#define NO_WINDOW 0xffu

struct chunk {
    struct chunk *next;                  /* newer closed chunk of the same series */
    struct chunk *prev;                  /* older closed chunk (reads of recent data walk back) */
    struct chunk *fifo_prev, *fifo_next; /* eviction order; closed chunks only */
    int64_t last_ts;                     /* set at close */
    uint64_t first_val;                  /* raw value (counter, or IEEE bits of a gauge) */
    uint32_t series;
    uint32_t first_seq;
    uint32_t last_seq; /* set at close */
    uint32_t nbits;    /* set at close */
    uint16_t n;        /* set at close */
    uint16_t cap;      /* words allocated in data */
    uint64_t data[];
};

/*
 * The live head chunk: only what a chunk needs while it grows (issue 34: with a closed
 * chunk's header every series' head took a 96-byte block; this one starts in a
 * 48-byte block with three data words, and grows by half again). close_head copies it
 * into a struct chunk of the exact size.
 */
struct head {
    uint64_t first_val; /* raw value (counter, or IEEE bits of a gauge) */
    uint32_t first_seq;
    uint16_t cap; /* words allocated in data */
    uint16_t pad;
    uint64_t data[];
};

/* 64 bytes: the writer touches only this line per sample, the chunk every 64 bits. */
struct series {
    struct head *head;    /* live chunk; NULL before the first sample */
    struct chunk *oldest; /* closed chunks, oldest first; NULL if none */
    struct chunk *newest;
    uint64_t acc;  /* pending bits of head, MSB first, not yet in head->data */
    uint64_t prev; /* previous value (raw bits) */
    uint64_t aux;  /* counter: previous delta; gauge: leading | trailing << 8 */
    uint32_t last_seq;
    uint32_t group; /* NO_GROUP: free slot */
    uint16_t head_n;
    uint16_t head_words; /* words of head->data already written */
    uint8_t acc_bits;
    uint8_t kind;
};

struct tl_chunk {
    uint64_t uid; /* process-wide unique: the key of readers' decoded-timestamp caches */
    int64_t first_ts;
    int64_t last_ts;
    uint32_t refs;    /* series chunks whose first sample lies in this chunk */
    uint32_t *starts; /* the same by batch: offset | count << 6, in offset order */
    uint16_t nstarts, starts_cap;
    uint32_t nbits;
    uint16_t n;
    uint16_t cap;
    uint64_t data[];
};

struct group {
    bool used;
    bool sealed; /* takes no more appends; its chunks are all closed */
    uint32_t next_seq;
    uint32_t nseries;
    int64_t last_ts;
    uint64_t prev_delta;  /* timeline delta-of-delta state */
    struct tl_chunk **tl; /* tl[tl_off .. tl_off+tl_len) cover chunk indices tl_base.. */
    uint32_t tl_off, tl_len, tl_cap;
    uint32_t tl_base; /* seq / TL_BATCHES of tl[tl_off] */
};

/* Series slots come in pages, allocated as needed and never moved: a doubling array held
 * up to twice the slots in use (issue 34: 131 bytes a series at 544,000 series). */
#define SLOT_PAGE_SHIFT 8u
#define SLOT_PAGE (1u << SLOT_PAGE_SHIFT)
struct slot_page {
    struct series s[SLOT_PAGE];
    uint32_t gen[SLOT_PAGE]; /* per slot: bumped at each series_new, so a reused id is
                                detectable */
};

struct fs_ring {
    pthread_mutex_t mu;
    struct fs_ring_opts opts;
    struct slot_page **pages; /* slot id lives in pages[id / SLOT_PAGE] */
    uint32_t npages, pages_cap;
    uint32_t nseries_slots, nseries_cap, nseries_live; /* nseries_cap = npages * SLOT_PAGE */
    uint32_t *free_series;
    uint32_t nfree_series, free_series_cap;
    struct group *groups;
    uint32_t ngroups, groups_cap;
    struct chunk *fifo_head, *fifo_tail;
    uint64_t bytes, samples, evicted_memory, evicted_retention, refused_memory;
    int64_t newest_ts;
    long fail_allocs_after; /* test hook: allocations left before failing; -1 off */
};

static _Atomic uint64_t tl_uid_next = 1;

static inline struct series *
slot(const struct fs_ring *r, uint32_t id)
{
    return &r->pages[id >> SLOT_PAGE_SHIFT]->s[id & (SLOT_PAGE - 1u)];
}

static inline uint32_t *
gen_of(const struct fs_ring *r, uint32_t id)
{
    return &r->pages[id >> SLOT_PAGE_SHIFT]->gen[id & (SLOT_PAGE - 1u)];
}

/* Each reader thread keeps the timestamps of the timeline chunks it decoded last: reading
 * many series of one target decodes its timeline once. Content is immutable for a given
 * (uid, n), so a hit is always right. Allocated on a thread's first read (135 KiB), freed
 * when it exits; not counted in the ring's bytes (it belongs to the reader thread). */
#define TLC_SLOTS 256u
struct tlc_entry {
    uint64_t uid;
    uint32_t n;
    int64_t ts[TL_BATCHES];
};
static _Thread_local struct tlc_entry *tlc;
static pthread_key_t tlc_key;
static pthread_once_t tlc_once = PTHREAD_ONCE_INIT;
static bool tlc_key_ok;

static void
tlc_key_init(void)
{
    tlc_key_ok = pthread_key_create(&tlc_key, free) == 0;
}

/* This thread's cache; NULL (no caching) if it cannot be had. */
static struct tlc_entry *
tlc_get(void)
{
    if (!tlc) {
        pthread_once(&tlc_once, tlc_key_init);
        if (tlc_key_ok) {
            tlc = calloc(TLC_SLOTS, sizeof(*tlc));
            if (tlc && pthread_setspecific(tlc_key, tlc) != 0) {
                free(tlc);
                tlc = NULL;
            }
        }
    }
    return tlc;
}

static inline struct tlc_entry *
tlc_slot(struct tlc_entry *cache, uint64_t uid)
{
    return &cache[(uid * 0x9e3779b97f4a7c15ULL) >> 56];
}

static const uint8_t CLASS_W[9] = {0, 5, 10, 16, 24, 32, 40, 48, 64};

/* ---- memory accounting ------------------------------------------------------------ */

static uint64_t
msize(const void *p)
{
    return p ? (uint64_t)malloc_usable_size((void *)p) + sizeof(size_t) : 0;
}

/* The test hook (fs_ring_test_fail_allocs): whether this allocation may proceed. */
static bool
alloc_allowed(struct fs_ring *r)
{
    if (r->fail_allocs_after < 0)
        return true;
    if (r->fail_allocs_after == 0)
        return false;
    r->fail_allocs_after--;
    return true;
}

/* realloc that keeps r->bytes exact; returns NULL (old block kept) on failure. */
static void *
acct_realloc(struct fs_ring *r, void *p, size_t size)
{
    uint64_t old = msize(p);
    void *q = alloc_allowed(r) ? realloc(p, size) : NULL;
    if (q) {
        r->bytes -= old;
        r->bytes += msize(q);
    }
    return q;
}

static void
acct_free(struct fs_ring *r, void *p)
{
    r->bytes -= msize(p);
    free(p);
}

/* ---- bit helpers --------------------------------------------------------------------- */

static inline uint64_t
zigzag(uint64_t d)
{
    return (d << 1) ^ (uint64_t)((int64_t)d >> 63);
}

static inline uint64_t
unzigzag(uint64_t z)
{
    return (z >> 1) ^ (0 - (z & 1));
}

static inline unsigned
class_of(uint64_t z)
{
    unsigned c = 0;
    while (c < 8 && (CLASS_W[c] == 0 ? z != 0 : (z >> CLASS_W[c]) != 0))
        c++;
    return c;
}

/* Writes n (1..64) bits of v at bit pos of zeroed words w. */
static inline void
wbits(uint64_t *w, uint64_t pos, uint64_t v, unsigned n)
{
    uint64_t i = pos >> 6;
    unsigned o = (unsigned)(pos & 63);
    if (o + n <= 64) {
        w[i] |= v << (64 - o - n);
    } else {
        unsigned rest = o + n - 64;
        w[i] |= v >> rest;
        w[i + 1] |= v << (64 - rest);
    }
}

/* 64 bits starting at pos; the word after the last one used must be readable. */
static inline uint64_t
peek64(const uint64_t *w, uint64_t pos)
{
    uint64_t i = pos >> 6;
    unsigned o = (unsigned)(pos & 63);
    return (w[i] << o) | ((w[i + 1] >> 1) >> (63 - o));
}

/* n (0..64) bits at pos; reads nothing when n is 0 (pos may be the end). */
static inline uint64_t
getbits(const uint64_t *w, uint64_t pos, unsigned n)
{
    return n ? peek64(w, pos) >> (64 - n) : 0;
}

/* ---- timeline ------------------------------------------------------------------------ */

static struct tl_chunk *
tl_of(const struct group *g, uint32_t seq)
{
    return g->tl[g->tl_off + (seq / TL_BATCHES - g->tl_base)];
}

/* Timestamp of batch seq (which must be held). */
static int64_t
tl_ts(const struct group *g, uint32_t seq)
{
    const struct tl_chunk *t = tl_of(g, seq);
    unsigned want = seq % TL_BATCHES;
    uint64_t ts = (uint64_t)t->first_ts, delta = 0; /* wrap-around arithmetic: no UB */
    uint64_t pos = 0;
    for (unsigned i = 1; i <= want; i++) {
        uint64_t p = peek64(t->data, pos);
        unsigned c = (unsigned)__builtin_clzll(~p | 1);
        if (c > 8)
            c = 8;
        pos += c < 8 ? c + 1 : 8;
        uint64_t z = getbits(t->data, pos, CLASS_W[c]);
        pos += CLASS_W[c];
        delta += unzigzag(z);
        ts += delta;
    }
    return (int64_t)ts;
}

static void
tl_close_head(struct fs_ring *r, struct group *g)
{
    struct tl_chunk *t = g->tl[g->tl_off + g->tl_len - 1];
    uint32_t words = (t->nbits + 63) / 64 + 1; /* +1: readers peek one word past */
    if (words < t->cap) {
        struct tl_chunk *q = acct_realloc(r, t, sizeof(*t) + words * 8u);
        if (q) {
            q->cap = (uint16_t)words;
            g->tl[g->tl_off + g->tl_len - 1] = q;
        }
    }
}

static int
tl_append(struct fs_ring *r, struct group *g, int64_t ts)
{
    uint32_t seq = g->next_seq;
    if (seq % TL_BATCHES == 0) {
        if (g->tl_len > 0)
            tl_close_head(r, g);
        if (g->tl_off + g->tl_len == g->tl_cap) {
            if (g->tl_off > 0) {
                memmove(g->tl, g->tl + g->tl_off, g->tl_len * sizeof(*g->tl));
                g->tl_off = 0;
            } else {
                uint32_t ncap = g->tl_cap ? g->tl_cap * 2 : 4;
                struct tl_chunk **nt = acct_realloc(r, g->tl, ncap * sizeof(*nt));
                if (!nt)
                    return -1;
                g->tl = nt;
                g->tl_cap = ncap;
            }
        }
        struct tl_chunk *t = alloc_allowed(r) ? calloc(1, sizeof(*t) + TL_INIT_WORDS * 8u) : NULL;
        if (!t)
            return -1;
        r->bytes += msize(t);
        t->uid = atomic_fetch_add_explicit(&tl_uid_next, 1, memory_order_relaxed);
        t->first_ts = t->last_ts = ts;
        t->n = 1;
        t->cap = TL_INIT_WORDS;
        if (g->tl_len == 0)
            g->tl_base = seq / TL_BATCHES;
        g->tl[g->tl_off + g->tl_len++] = t;
        g->prev_delta = 0;
    } else {
        struct tl_chunk *t = g->tl[g->tl_off + g->tl_len - 1];
        uint64_t delta = (uint64_t)ts - (uint64_t)t->last_ts;
        uint64_t z = zigzag(delta - g->prev_delta);
        unsigned c = class_of(z);
        if (t->nbits + 72u + 64u > t->cap * 64u) {
            uint32_t ncap = t->cap * 2u < TL_CAP_WORDS ? t->cap * 2u : TL_CAP_WORDS;
            struct tl_chunk *q = acct_realloc(r, t, sizeof(*t) + ncap * 8u);
            if (!q)
                return -1;
            memset(q->data + q->cap, 0, (ncap - q->cap) * 8u);
            q->cap = (uint16_t)ncap;
            g->tl[g->tl_off + g->tl_len - 1] = t = q;
        }
        if (c < 8)
            wbits(t->data, t->nbits, ((uint64_t)1 << (c + 1)) - 2, c + 1);
        else
            wbits(t->data, t->nbits, 0xff, 8);
        t->nbits += c < 8 ? c + 1 : 8;
        if (CLASS_W[c]) {
            wbits(t->data, t->nbits, z, CLASS_W[c]);
            t->nbits += CLASS_W[c];
        }
        t->n++;
        t->last_ts = ts;
        g->prev_delta = delta;
    }
    g->next_seq = seq + 1;
    g->last_ts = ts;
    return 0;
}

static void
tl_free(struct fs_ring *r, struct tl_chunk *t)
{
    acct_free(r, t->starts);
    acct_free(r, t);
}

/* Counts a series chunk starting at seq. Chunks open at the newest batch, so offsets
 * arrive in order and the list is append-only. */
static bool
tl_start_add(struct fs_ring *r, const struct group *g, uint32_t seq)
{
    struct tl_chunk *t = tl_of(g, seq);
    uint32_t off = seq % TL_BATCHES;
    if (t->nstarts > 0 && (t->starts[t->nstarts - 1] & 63u) == off) {
        t->starts[t->nstarts - 1] += 64u;
    } else {
        if (t->nstarts == t->starts_cap) {
            uint16_t ncap = t->starts_cap ? (uint16_t)(t->starts_cap * 2) : 2;
            uint32_t *ns = acct_realloc(r, t->starts, ncap * sizeof(*ns));
            if (!ns)
                return false;
            t->starts = ns;
            t->starts_cap = ncap;
        }
        t->starts[t->nstarts++] = off | 64u;
    }
    t->refs++;
    return true;
}

static void
tl_start_del(const struct group *g, uint32_t seq)
{
    struct tl_chunk *t = tl_of(g, seq);
    uint32_t off = seq % TL_BATCHES;
    for (uint16_t i = 0; i < t->nstarts; i++) {
        if ((t->starts[i] & 63u) == off) {
            t->starts[i] -= 64u;
            break;
        }
    }
    t->refs--;
}

/* Frees timeline chunks at the front that no series chunk starts in (never the head). */
static void
tl_trim(struct fs_ring *r, struct group *g)
{
    while (g->tl_len > 1 && g->tl[g->tl_off]->refs == 0) {
        tl_free(r, g->tl[g->tl_off]);
        g->tl_off++;
        g->tl_len--;
        g->tl_base++;
    }
}

/* ---- series chunks ------------------------------------------------------------------- */

static void
fifo_push(struct fs_ring *r, struct chunk *c)
{
    c->fifo_next = NULL;
    c->fifo_prev = r->fifo_tail;
    if (r->fifo_tail)
        r->fifo_tail->fifo_next = c;
    else
        r->fifo_head = c;
    r->fifo_tail = c;
}

static void
fifo_unlink(struct fs_ring *r, struct chunk *c)
{
    if (c->fifo_prev)
        c->fifo_prev->fifo_next = c->fifo_next;
    else
        r->fifo_head = c->fifo_next;
    if (c->fifo_next)
        c->fifo_next->fifo_prev = c->fifo_prev;
    else
        r->fifo_tail = c->fifo_prev;
}

/* Data words a head block of the allocator can hold (its slack included), at most
 * CHUNK_CAP_WORDS. */
static uint16_t
head_cap(const struct head *h)
{
    size_t words = (malloc_usable_size((void *)h) - sizeof(*h)) / 8u;
    return (uint16_t)(words < CHUNK_CAP_WORDS ? words : CHUNK_CAP_WORDS);
}

/* Makes room for one more word in the head; false on no memory. */
static bool
head_reserve(struct fs_ring *r, struct series *s)
{
    struct head *h = s->head;
    if (s->head_words < h->cap)
        return true;
    /* By half again while small (most heads stay small: the bench_store_mem fleet's
     * bytes a sample 0.27 by doubling, 0.21 so), then doubling: as many reallocs in a
     * chunk's life as doubling from 2 words had (bench_ring's ingest). */
    uint32_t ncap = h->cap < 16u ? h->cap + (h->cap / 2u > 2u ? h->cap / 2u : 2u) : h->cap * 2u;
    if (ncap > CHUNK_CAP_WORDS)
        ncap = CHUNK_CAP_WORDS;
    struct head *q = acct_realloc(r, h, sizeof(*h) + ncap * 8u);
    if (!q)
        return false;
    q->cap = head_cap(q);
    s->head = q;
    return true;
}

/* Appends n (1..64) bits; v < 2^n. */
static inline bool
put(struct fs_ring *r, struct series *s, uint64_t v, unsigned n)
{
    unsigned used = s->acc_bits;
    if (used + n < 64) {
        s->acc |= v << (64 - used - n);
        s->acc_bits = (uint8_t)(used + n);
        return true;
    }
    unsigned rest = used + n - 64;
    uint64_t w = s->acc | (v >> rest);
    if (!head_reserve(r, s))
        return false;
    s->head->data[s->head_words++] = w;
    s->acc = rest ? v << (64 - rest) : 0;
    s->acc_bits = (uint8_t)rest;
    return true;
}

/* Closes series id's head into a closed chunk of the exact size (readers copy into
 * their own padded buffer, never peek past it); false (head kept) on no memory. */
static bool
close_head(struct fs_ring *r, struct series *s, uint32_t id, const struct group *g)
{
    uint32_t words = s->head_words + (s->acc_bits ? 1u : 0u);
    struct head *hd = s->head;
    struct chunk *h = alloc_allowed(r) ? malloc(sizeof(*h) + (words ? words : 1u) * 8u) : NULL;
    if (!h)
        return false;
    r->bytes += msize(h);
    memcpy(h->data, hd->data, s->head_words * 8u);
    if (s->acc_bits)
        h->data[s->head_words] = s->acc;
    h->cap = (uint16_t)(words ? words : 1u);
    h->first_val = hd->first_val;
    h->first_seq = hd->first_seq;
    h->series = id;
    h->fifo_prev = h->fifo_next = NULL;
    acct_free(r, hd);
    h->nbits = s->head_words * 64u + s->acc_bits;
    h->n = s->head_n;
    h->last_seq = s->last_seq;
    h->last_ts = tl_ts(g, s->last_seq);
    h->next = NULL;
    h->prev = s->newest;
    if (s->newest)
        s->newest->next = h;
    else
        s->oldest = h;
    s->newest = h;
    fifo_push(r, h);
    s->head = NULL;
    return true;
}

static bool
open_head(struct fs_ring *r, struct series *s, struct group *g, uint32_t seq, uint64_t v)
{
    /* Two data words asked, three had (a 48-byte block). One (the smallest block, 32)
     * saved 16 bytes a series but made the head's growth cost more than that per
     * sample later (bench_store_mem: 0.40 bytes a sample rather than 0.21). */
    struct head *h = alloc_allowed(r) ? malloc(sizeof(*h) + 16u) : NULL;
    if (!h)
        return false;
    if (!tl_start_add(r, g, seq)) {
        free(h);
        return false;
    }
    r->bytes += msize(h);
    h->first_val = v;
    h->first_seq = seq;
    h->cap = head_cap(h);
    h->pad = 0;
    s->head = h;
    s->head_n = 1;
    s->head_words = 0;
    s->acc = 0;
    s->acc_bits = 0;
    s->prev = v;
    s->aux = s->kind == FS_RING_GAUGE ? NO_WINDOW : 0;
    return true;
}

static void
drop_chunk(struct fs_ring *r, struct group *g, struct chunk *c)
{
    tl_start_del(g, c->first_seq);
    r->samples -= c->n;
    acct_free(r, c);
}

/* Evicts the oldest closed chunk (the FIFO front). */
static void
evict_front(struct fs_ring *r, uint64_t *counter)
{
    struct chunk *c = r->fifo_head;
    struct series *s = slot(r, c->series);
    struct group *g = &r->groups[s->group];
    fifo_unlink(r, c);
    /* FIFO order is close order, so c is its series' oldest chunk. */
    s->oldest = c->next;
    if (!s->oldest)
        s->newest = NULL;
    else
        s->oldest->prev = NULL;
    *counter += c->n;
    drop_chunk(r, g, c);
    tl_trim(r, g);
}

static void
enforce_bounds(struct fs_ring *r)
{
    /* (no cutoff below the smallest timestamp, nor before the first append) */
    if (r->newest_ts >= INT64_MIN + r->opts.retention_us) {
        int64_t cutoff = r->newest_ts - r->opts.retention_us;
        while (r->fifo_head && r->fifo_head->last_ts < cutoff)
            evict_front(r, &r->evicted_retention);
    }
    while (r->fifo_head && r->bytes > r->opts.memory_limit)
        evict_front(r, &r->evicted_memory);
}

/* Evicts what the bounds ask for; true if the ring is then within memory_limit (the
 * live heads alone can keep it above: then new series and batches are refused). */
static bool
within_limit(struct fs_ring *r)
{
    enforce_bounds(r);
    return r->bytes <= r->opts.memory_limit;
}

static inline bool
encode_counter(struct fs_ring *r, struct series *s, uint32_t seqd, uint64_t v)
{
    uint64_t delta = v - s->prev;
    uint64_t dod = delta - s->aux;
    bool ok = true;
    s->prev = v;
    s->aux = delta;
    if (seqd == 1 && dod == 0)
        return put(r, s, 0, 1);
    /* control '1' and the seq code in one put */
    if (seqd == 1)
        ok = put(r, s, 2, 2); /* '1' '0' */
    else if (seqd - 2 < 64)
        ok = put(r, s, (6u << 6) | (seqd - 2), 9); /* '1' '10' 6 bits */
    else if (seqd - 66 < 65536)
        ok = put(r, s, (14u << 16) | (seqd - 66), 20); /* '1' '110' 16 bits */
    else
        ok = put(r, s, (15ull << 32) | seqd, 36); /* '1' '111' 32 bits */
    uint64_t z = zigzag(dod);
    unsigned c = class_of(z);
    if (c < 7) /* prefix + value fit in one 64-bit put */
        ok =
            ok && put(r, s, ((((uint64_t)1 << (c + 1)) - 2) << CLASS_W[c]) | z, c + 1 + CLASS_W[c]);
    else if (c == 7)
        ok = ok && put(r, s, 0xfe, 8) && put(r, s, z, 48);
    else
        ok = ok && put(r, s, 0xff, 8) && put(r, s, z, 64);
    return ok;
}

static inline bool
encode_gauge(struct fs_ring *r, struct series *s, uint32_t seqd, uint64_t v)
{
    uint64_t x = v ^ s->prev;
    bool ok = true;
    s->prev = v;
    if (seqd == 1 && x == 0)
        return put(r, s, 0, 1);
    if (seqd == 1)
        ok = put(r, s, 2, 2);
    else if (seqd - 2 < 64)
        ok = put(r, s, (6u << 6) | (seqd - 2), 9);
    else if (seqd - 66 < 65536)
        ok = put(r, s, (14u << 16) | (seqd - 66), 20);
    else
        ok = put(r, s, (15ull << 32) | seqd, 36);
    if (x == 0)
        return ok && put(r, s, 0, 1);
    unsigned lead = (unsigned)__builtin_clzll(x), trail = (unsigned)__builtin_ctzll(x);
    unsigned plead = (unsigned)(s->aux & 0xff), ptrail = (unsigned)(s->aux >> 8);
    if (plead != NO_WINDOW && lead >= plead && trail >= ptrail) {
        unsigned len = 64 - plead - ptrail;
        ok = ok && put(r, s, 2, 2) && put(r, s, x >> ptrail, len);
    } else {
        unsigned len = 64 - lead - trail;
        ok =
            ok && put(r, s, (3u << 12) | (lead << 6) | (len - 1), 14) && put(r, s, x >> trail, len);
        s->aux = lead | (trail << 8);
    }
    return ok;
}

/* ---- lifecycle ------------------------------------------------------------------------ */

/* Adaptive: a writer that meets a reader's short copy spins instead of sleeping; on a
 * busy machine a sleeping writer can lose its core for a scheduler tick (ms). */
static bool
init_mutex(pthread_mutex_t *mu)
{
    pthread_mutexattr_t at;
    bool ok = pthread_mutexattr_init(&at) == 0;
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
    if (ok)
        pthread_mutexattr_settype(&at, PTHREAD_MUTEX_ADAPTIVE_NP);
#endif
    ok = ok && pthread_mutex_init(mu, &at) == 0;
    pthread_mutexattr_destroy(&at);
    return ok;
}

static bool
opts_ok(const struct fs_ring_opts *o)
{
    return o && o->memory_limit > 0 && o->retention_us > 0;
}

struct fs_ring *
fs_ring_new(const struct fs_ring_opts *opts, char *errbuf, size_t errlen)
{
    struct fs_ring *r = NULL;
    if (!opts_ok(opts)) {
        snprintf(errbuf, errlen, "ring: memory_limit and retention must be > 0");
    } else if (!(r = calloc(1, sizeof(*r)))) {
        snprintf(errbuf, errlen, "ring: out of memory");
    } else if (!init_mutex(&r->mu)) {
        snprintf(errbuf, errlen, "ring: mutex init failed");
        free(r);
        r = NULL;
    } else {
        r->opts = *opts;
        r->bytes = msize(r);
        r->newest_ts = INT64_MIN;
        r->fail_allocs_after = -1;
    }
    return r;
}

void
fs_ring_free(struct fs_ring *r)
{
    if (!r)
        return;
    for (uint32_t i = 0; i < r->nseries_slots; i++) {
        struct series *s = slot(r, i);
        for (struct chunk *c = s->oldest, *n; c; c = n) {
            n = c->next;
            free(c);
        }
        free(s->head);
    }
    for (uint32_t i = 0; i < r->ngroups; i++) {
        struct group *g = &r->groups[i];
        for (uint32_t k = 0; k < g->tl_len; k++) {
            free(g->tl[g->tl_off + k]->starts);
            free(g->tl[g->tl_off + k]);
        }
        free(g->tl);
    }
    for (uint32_t i = 0; i < r->npages; i++)
        free(r->pages[i]);
    free(r->pages);
    free(r->free_series);
    free(r->groups);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

void
fs_ring_set_opts(struct fs_ring *r, const struct fs_ring_opts *opts)
{
    if (!opts_ok(opts))
        return;
    pthread_mutex_lock(&r->mu);
    r->opts = *opts;
    pthread_mutex_unlock(&r->mu);
}

int32_t
fs_ring_group_new(struct fs_ring *r)
{
    int32_t id = -1;
    pthread_mutex_lock(&r->mu);
    for (uint32_t i = 0; i < r->ngroups; i++) {
        if (!r->groups[i].used) {
            id = (int32_t)i;
            break;
        }
    }
    if (id < 0 && r->ngroups < INT32_MAX) {
        if (r->ngroups == r->groups_cap) {
            uint32_t ncap = r->groups_cap ? r->groups_cap * 2 : 8;
            struct group *ng = acct_realloc(r, r->groups, ncap * sizeof(*ng));
            if (ng) {
                r->groups = ng;
                r->groups_cap = ncap;
            }
        }
        if (r->ngroups < r->groups_cap)
            id = (int32_t)r->ngroups++;
    }
    if (id >= 0) {
        memset(&r->groups[id], 0, sizeof(r->groups[id]));
        r->groups[id].used = true;
    }
    pthread_mutex_unlock(&r->mu);
    return id;
}

void
fs_ring_group_delete(struct fs_ring *r, int32_t group)
{
    pthread_mutex_lock(&r->mu);
    if (group >= 0 && (uint32_t)group < r->ngroups && r->groups[group].used &&
        r->groups[group].nseries == 0) {
        struct group *g = &r->groups[group];
        for (uint32_t k = 0; k < g->tl_len; k++)
            tl_free(r, g->tl[g->tl_off + k]);
        acct_free(r, g->tl);
        memset(g, 0, sizeof(*g));
    }
    pthread_mutex_unlock(&r->mu);
}

int32_t
fs_ring_series_new(struct fs_ring *r, int32_t group, enum fs_ring_kind kind)
{
    int32_t id = -1;
    pthread_mutex_lock(&r->mu);
    if (group < 0 || (uint32_t)group >= r->ngroups || !r->groups[group].used ||
        r->groups[group].sealed || (kind != FS_RING_COUNTER && kind != FS_RING_GAUGE))
        goto out;
    if (!within_limit(r)) {
        r->refused_memory++; /* the sample that wanted this series is not kept */
        goto out;
    }
    if (r->nfree_series > 0) {
        id = (int32_t)r->free_series[--r->nfree_series];
    } else {
        if (r->nseries_slots == r->nseries_cap) {
            if (r->nseries_cap > (uint32_t)INT32_MAX - SLOT_PAGE)
                goto out;
            if (r->npages == r->pages_cap) {
                uint32_t ncap = r->pages_cap ? r->pages_cap * 2 : 16;
                struct slot_page **np = acct_realloc(r, r->pages, (size_t)ncap * sizeof(*np));
                if (!np)
                    goto out;
                r->pages = np;
                r->pages_cap = ncap;
            }
            struct slot_page *pg = alloc_allowed(r) ? calloc(1, sizeof(*pg)) : NULL;
            if (!pg)
                goto out;
            r->bytes += msize(pg);
            r->pages[r->npages++] = pg;
            r->nseries_cap += SLOT_PAGE;
        }
        id = (int32_t)r->nseries_slots++;
    }
    memset(slot(r, (uint32_t)id), 0, sizeof(struct series));
    slot(r, id)->group = (uint32_t)group;
    slot(r, id)->kind = (uint8_t)kind;
    (*gen_of(r, (uint32_t)id))++;
    r->groups[group].nseries++;
    r->nseries_live++;
out:
    pthread_mutex_unlock(&r->mu);
    return id;
}

void
fs_ring_series_delete(struct fs_ring *r, uint32_t id)
{
    pthread_mutex_lock(&r->mu);
    if (id < r->nseries_slots && slot(r, id)->group != NO_GROUP) {
        struct series *s = slot(r, id);
        struct group *g = &r->groups[s->group];
        /* the free-id stack may need to grow; if it cannot, the slot is leaked, not
         * the data */
        if (r->nfree_series == r->free_series_cap) {
            uint32_t ncap = r->free_series_cap ? r->free_series_cap * 2 : 64;
            uint32_t *nf = acct_realloc(r, r->free_series, ncap * sizeof(*nf));
            if (nf) {
                r->free_series = nf;
                r->free_series_cap = ncap;
            }
        }
        for (struct chunk *c = s->oldest, *n; c; c = n) {
            n = c->next;
            fifo_unlink(r, c);
            drop_chunk(r, g, c);
        }
        if (s->head) {
            r->samples -= s->head_n;
            tl_start_del(g, s->head->first_seq);
            acct_free(r, s->head);
        }
        tl_trim(r, g);
        g->nseries--;
        r->nseries_live--;
        memset(s, 0, sizeof(*s));
        s->group = NO_GROUP;
        if (r->nfree_series < r->free_series_cap)
            r->free_series[r->nfree_series++] = id;
    }
    pthread_mutex_unlock(&r->mu);
}

/* ---- append --------------------------------------------------------------------------- */

int
fs_ring_append(struct fs_ring *r, int32_t group, int64_t ts_us, const struct fs_ring_point *pts,
               size_t n)
{
    int rc = 0;
    pthread_mutex_lock(&r->mu);
    if (group < 0 || (uint32_t)group >= r->ngroups || !r->groups[group].used) {
        rc = -1;
        goto out;
    }
    struct group *g = &r->groups[group];
    if ((g->next_seq > 0 && ts_us < g->last_ts) || g->next_seq == UINT32_MAX || g->sealed) {
        rc = -1;
        goto out;
    }
    if (!within_limit(r)) {
        r->refused_memory += n;
        rc = -1;
        goto out;
    }
    if (tl_append(r, g, ts_us) != 0) {
        rc = -1;
        goto out;
    }
    uint32_t seq = g->next_seq - 1;
    uint64_t added = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 8 < n && pts[i + 8].series < r->nseries_slots)
            __builtin_prefetch(slot(r, pts[i + 8].series), 1);
        uint32_t id = pts[i].series;
        if (id >= r->nseries_slots || slot(r, id)->group != (uint32_t)group) {
            rc = -1; /* unknown series or another group's: refused, the rest goes in */
            continue;
        }
        struct series *s = slot(r, id);
        uint64_t v = pts[i].v.u; /* gauges too: the IEEE bits, never a conversion */
        if (s->head && s->last_seq == seq) {
            rc = -1; /* twice in one batch */
            continue;
        }
        if (s->head && (s->head_n >= CHUNK_MAX_SAMPLES || s->head_words >= CHUNK_MAX_WORDS) &&
            !close_head(r, s, id, g)) {
            rc = -1;
            continue;
        }
        if (!s->head) {
            if (!open_head(r, s, g, seq, v)) {
                rc = -1;
                continue;
            }
        } else {
            uint32_t seqd = seq - s->last_seq;
            /* What an encode changes; put back if it fails half-way (out of memory):
             * the bits already put would otherwise stay in front of the next sample's
             * and make the rest of the chunk decode as garbage. Words written past
             * head_words are overwritten by the next put. */
            uint64_t acc = s->acc, prev = s->prev, aux = s->aux;
            uint16_t head_words = s->head_words;
            uint8_t acc_bits = s->acc_bits;
            bool ok = s->kind == FS_RING_COUNTER ? encode_counter(r, s, seqd, v)
                                                 : encode_gauge(r, s, seqd, v);
            if (!ok) {
                s->acc = acc;
                s->acc_bits = acc_bits;
                s->head_words = head_words;
                s->prev = prev;
                s->aux = aux;
                rc = -1;
                continue;
            }
            s->head_n++;
        }
        s->last_seq = seq;
        added++;
    }
    r->samples += added;
    if (ts_us > r->newest_ts)
        r->newest_ts = ts_us;
    enforce_bounds(r);
out:
    pthread_mutex_unlock(&r->mu);
    return rc;
}

/* ---- read ------------------------------------------------------------------------------ */

/* What a reader copies of one chunk under the lock. */
struct copied {
    uint64_t first_val;
    uint64_t off; /* word offset of its data in the scratch buffer */
    uint32_t first_seq;
    uint32_t n;
};

struct copied_tl {
    int64_t first_ts;
    uint64_t off; /* UINT64_MAX: not copied, in this thread's cache */
    uint64_t uid;
    uint32_t n;
};

static inline unsigned
read_seqd(const uint64_t *w, uint64_t *pos)
{
    uint64_t p = peek64(w, *pos);
    if (!(p >> 63)) {
        *pos += 1;
        return 1;
    }
    if (!(p >> 62 & 1)) {
        *pos += 8;
        return (unsigned)(p >> 56 & 63) + 2;
    }
    if (!(p >> 61 & 1)) {
        *pos += 19;
        return (unsigned)(p >> 45 & 0xffff) + 66;
    }
    *pos += 35;
    return (unsigned)(p >> 29);
}

/* Decodes one chunk into out; the samples whose batch has no timestamp in ts[] (outside
 * [seq_lo, seq_hi]) are skipped. Returns samples written (<= room), sets *more when a
 * matching sample did not fit. */
static size_t
decode_chunk(const uint64_t *w, const struct copied *c, uint8_t kind, const int64_t *ts,
             uint32_t seq_lo, uint32_t seq_hi, int64_t start, int64_t end,
             struct fs_ring_sample *out, size_t room, bool *more)
{
    size_t k = 0;
    uint32_t seq = c->first_seq;
    uint64_t v = c->first_val, aux = 0, pos = 0;
    unsigned plead = 0, plen = 0;
    uint32_t left = c->n;
#define EMIT()                                                                                     \
    do {                                                                                           \
        if (seq >= seq_lo && seq <= seq_hi) {                                                      \
            int64_t t_ = ts[seq - seq_lo];                                                         \
            if (t_ >= start && t_ <= end) {                                                        \
                if (k == room) {                                                                   \
                    *more = true;                                                                  \
                    return k;                                                                      \
                }                                                                                  \
                out[k].ts_us = t_;                                                                 \
                out[k].v.u = v;                                                                    \
                k++;                                                                               \
            }                                                                                      \
        }                                                                                          \
    } while (0)
    EMIT();
    left--;
    while (left > 0) {
        uint64_t p = peek64(w, pos);
        if (!(p >> 63)) {
            /* a run of "same again" samples: one bit each */
            unsigned run = p ? (unsigned)__builtin_clzll(p) : 64;
            if (run > left)
                run = left;
            pos += run;
            left -= run;
            for (unsigned i = 0; i < run; i++) {
                seq++;
                if (kind == FS_RING_COUNTER)
                    v += aux;
                EMIT();
            }
            continue;
        }
        pos++;
        seq += read_seqd(w, &pos);
        p = peek64(w, pos);
        if (kind == FS_RING_COUNTER) {
            unsigned cl = (unsigned)__builtin_clzll(~p | 1);
            if (cl > 8)
                cl = 8;
            pos += cl < 8 ? cl + 1 : 8;
            uint64_t z = getbits(w, pos, CLASS_W[cl]);
            pos += CLASS_W[cl];
            aux += unzigzag(z);
            v += aux;
        } else if (p >> 63) {
            if (p >> 62 & 1) {
                plead = (unsigned)(p >> 56 & 63);
                plen = (unsigned)(p >> 50 & 63) + 1;
                pos += 14;
            } else {
                pos += 2;
            }
            uint64_t x = getbits(w, pos, plen);
            pos += plen;
            v ^= x << (64 - plead - plen);
        } else {
            pos += 1;
        }
        left--;
        EMIT();
    }
#undef EMIT
    return k;
}

static long
ring_read(struct fs_ring *r, uint32_t id, uint32_t gen, bool check_gen, int64_t start_us,
          int64_t end_us, struct fs_ring_sample *out, size_t max, bool *truncated)
{
    long ret = 0;
    uint64_t *buf = NULL;
    int64_t *ts = NULL;
    struct copied *cs = NULL;
    struct copied_tl *tls = NULL;
    size_t ncs = 0, ntl = 0;
    uint32_t seq_lo = 0, seq_hi = 0;
    uint8_t kind = 0;
    bool more = false;
    struct tlc_entry *cache = tlc_get();

    pthread_mutex_lock(&r->mu);
    if (id >= r->nseries_slots || slot(r, id)->group == NO_GROUP ||
        (check_gen && *gen_of(r, id) != gen)) {
        ret = -1;
        goto unlock;
    }
    struct series *s = slot(r, id);
    struct group *g = &r->groups[s->group];
    kind = s->kind;
    if ((!s->head && !s->oldest) || start_us > end_us || g->tl_len == 0)
        goto unlock;
    /* batch range from the timeline chunks' time bounds (binary searches) */
    struct tl_chunk **tl = g->tl + g->tl_off;
    uint32_t lo = 0, hi = g->tl_len;
    while (lo < hi) { /* first chunk with last_ts >= start */
        uint32_t mid = lo + (hi - lo) / 2;
        if (tl[mid]->last_ts < start_us)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint32_t k_lo = lo;
    lo = 0, hi = g->tl_len;
    while (lo < hi) { /* first chunk with first_ts > end */
        uint32_t mid = lo + (hi - lo) / 2;
        if (tl[mid]->first_ts <= end_us)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (k_lo >= lo)
        goto unlock;
    uint32_t k_hi = lo - 1;
    seq_lo = (g->tl_base + k_lo) * TL_BATCHES;
    seq_hi = (g->tl_base + k_hi) * TL_BATCHES + tl[k_hi]->n - 1;
    if (seq_hi > s->last_seq)
        seq_hi = s->last_seq;
    /* pass 1: count the chunks and words to copy */
    size_t words = 0, nchunks = 0;
    struct chunk *first = NULL, *from = s->oldest;
    /* A read of recent samples (the usual one) starts from the newest closed chunk and
       walks back: walking an hour of chunks from the oldest, pointer by pointer, cost
       more than decoding the few that are read. */
    if (s->newest && s->newest->last_seq < seq_lo) {
        from = NULL; /* only the live chunk holds samples that recent */
    } else if (s->newest && (!s->newest->prev || s->newest->prev->last_seq < seq_lo)) {
        from = s->newest;
    } else if (from && (int64_t)seq_lo - from->first_seq > (int64_t)s->newest->last_seq - seq_lo) {
        from = s->newest;
        while (from->prev && from->prev->last_seq >= seq_lo)
            from = from->prev;
    }
    for (struct chunk *c = from; c; c = c->next) {
        if (c->last_seq < seq_lo || c->first_seq > seq_hi)
            continue;
        if (!first)
            first = c;
        nchunks++;
        words += (c->nbits + 63) / 64 + 2;
    }
    bool with_head = s->head && s->head->first_seq <= seq_hi;
    if (with_head) {
        nchunks++;
        words += s->head_words + 3u;
    }
    if (!first && !with_head)
        goto unlock;
    uint32_t first_seq = first ? first->first_seq : s->head->first_seq;
    if (first_seq > seq_lo)
        seq_lo = first_seq;
    if (seq_lo > seq_hi)
        goto unlock;
    uint32_t t_lo = seq_lo / TL_BATCHES - g->tl_base, t_hi = seq_hi / TL_BATCHES - g->tl_base;
    for (uint32_t k = t_lo; k <= t_hi; k++)
        words += (tl[k]->nbits + 63) / 64 + 2;
    buf = malloc(words * 8u);
    cs = malloc(nchunks * sizeof(*cs));
    tls = malloc((t_hi - t_lo + 1) * sizeof(*tls));
    ts = malloc(((size_t)(t_hi - t_lo + 1) * TL_BATCHES) * sizeof(*ts));
    if (!buf || !cs || !tls || !ts) {
        ret = -1;
        goto unlock;
    }
    /* pass 2: copy */
    size_t off = 0;
    for (struct chunk *c = first; c; c = c->next) {
        if (c->first_seq > seq_hi)
            break;
        uint32_t nw = (c->nbits + 63) / 64;
        memcpy(buf + off, c->data, nw * 8u);
        buf[off + nw] = buf[off + nw + 1] = 0;
        cs[ncs++] = (struct copied){c->first_val, off, c->first_seq, c->n};
        off += nw + 2;
    }
    if (with_head) {
        memcpy(buf + off, s->head->data, s->head_words * 8u);
        buf[off + s->head_words] = s->acc;
        buf[off + s->head_words + 1] = buf[off + s->head_words + 2] = 0;
        cs[ncs++] = (struct copied){s->head->first_val, off, s->head->first_seq, s->head_n};
        off += s->head_words + 3u;
    }
    for (uint32_t k = t_lo; k <= t_hi; k++) {
        const struct tlc_entry *e = cache ? tlc_slot(cache, tl[k]->uid) : NULL;
        if (e && e->uid == tl[k]->uid && e->n == tl[k]->n) {
            tls[ntl++] = (struct copied_tl){tl[k]->first_ts, UINT64_MAX, tl[k]->uid, tl[k]->n};
            continue;
        }
        uint32_t nw = (tl[k]->nbits + 63) / 64;
        memcpy(buf + off, tl[k]->data, nw * 8u);
        buf[off + nw] = buf[off + nw + 1] = 0;
        tls[ntl++] = (struct copied_tl){tl[k]->first_ts, off, tl[k]->uid, tl[k]->n};
        off += nw + 2;
    }
unlock:
    pthread_mutex_unlock(&r->mu);
    if (ret == 0 && ncs > 0) {
        /* timestamps of batches tl_seq0.., then the samples */
        /* cache hits first: decoding a miss may overwrite a slot a hit is in */
        for (size_t k = 0; k < ntl; k++)
            if (tls[k].off == UINT64_MAX)
                memcpy(ts + k * TL_BATCHES, tlc_slot(cache, tls[k].uid)->ts,
                       tls[k].n * sizeof(*ts));
        for (size_t k = 0; k < ntl; k++) {
            int64_t *o = ts + k * TL_BATCHES;
            if (tls[k].off == UINT64_MAX)
                continue;
            const uint64_t *w = buf + tls[k].off;
            uint64_t t = (uint64_t)tls[k].first_ts, delta = 0;
            uint64_t pos = 0;
            o[0] = (int64_t)t;
            for (uint32_t i = 1; i < tls[k].n; i++) {
                uint64_t p = peek64(w, pos);
                unsigned c = (unsigned)__builtin_clzll(~p | 1);
                if (c > 8)
                    c = 8;
                pos += c < 8 ? c + 1 : 8;
                uint64_t z = getbits(w, pos, CLASS_W[c]);
                pos += CLASS_W[c];
                delta += unzigzag(z);
                t += delta;
                o[i] = (int64_t)t;
            }
            if (cache) {
                struct tlc_entry *e = tlc_slot(cache, tls[k].uid);
                e->uid = tls[k].uid;
                e->n = tls[k].n;
                memcpy(e->ts, o, tls[k].n * sizeof(*o));
            }
        }
        uint32_t tl_base_seq = seq_lo - seq_lo % TL_BATCHES;
        size_t got = 0;
        for (size_t k = 0; k < ncs && !more; k++)
            got += decode_chunk(buf + cs[k].off, &cs[k], kind, ts + (seq_lo - tl_base_seq), seq_lo,
                                seq_hi, start_us, end_us, out + got, max - got, &more);
        ret = (long)got;
    }
    if (truncated)
        *truncated = more;
    free(buf);
    free(cs);
    free(tls);
    free(ts);
    return ret;
}

long
fs_ring_read(struct fs_ring *r, uint32_t id, int64_t start_us, int64_t end_us,
             struct fs_ring_sample *out, size_t max, bool *truncated)
{
    return ring_read(r, id, 0, false, start_us, end_us, out, max, truncated);
}

void
fs_ring_stats(struct fs_ring *r, struct fs_ring_stats *st)
{
    memset(st, 0, sizeof(*st));
    pthread_mutex_lock(&r->mu);
    st->bytes = r->bytes;
    st->samples = r->samples;
    st->series = r->nseries_live;
    st->evicted_memory = r->evicted_memory;
    st->evicted_retention = r->evicted_retention;
    st->refused_memory = r->refused_memory;
    if (r->samples > 0) {
        st->newest_ts_us = r->newest_ts;
        /* per group: the first batch a live series chunk starts at, in the front
         * timeline chunk (trimming keeps the front referenced) */
        bool any = false;
        for (uint32_t i = 0; i < r->ngroups; i++) {
            const struct group *g = &r->groups[i];
            if (!g->used || g->tl_len == 0 || g->tl[g->tl_off]->refs == 0)
                continue;
            const struct tl_chunk *f = g->tl[g->tl_off];
            uint16_t k = 0;
            while (k + 1 < f->nstarts && f->starts[k] < 64u)
                k++;
            int64_t t = tl_ts(g, (g->tl_base * TL_BATCHES) + (f->starts[k] & 63u));
            if (!any || t < st->oldest_ts_us)
                st->oldest_ts_us = t;
            any = true;
        }
    }
    pthread_mutex_unlock(&r->mu);
}

uint32_t
fs_ring_series_gen(struct fs_ring *r, uint32_t id)
{
    uint32_t g = 0;
    pthread_mutex_lock(&r->mu);
    if (id < r->nseries_slots && slot(r, id)->group != NO_GROUP)
        g = *gen_of(r, id);
    pthread_mutex_unlock(&r->mu);
    return g;
}

long
fs_ring_read_gen(struct fs_ring *r, uint32_t id, uint32_t gen, int64_t start_us, int64_t end_us,
                 struct fs_ring_sample *out, size_t max, bool *truncated)
{
    /* ids change hands only under r->mu: the check shares the read's one hold */
    return ring_read(r, id, gen, true, start_us, end_us, out, max, truncated);
}

long
fs_ring_series_samples(struct fs_ring *r, uint32_t id)
{
    long n = -1;
    pthread_mutex_lock(&r->mu);
    if (id < r->nseries_slots && slot(r, id)->group != NO_GROUP) {
        const struct series *s = slot(r, id);
        n = s->head ? s->head_n : 0;
        for (const struct chunk *c = s->oldest; c; c = c->next)
            n += c->n;
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

void
fs_ring_group_seal(struct fs_ring *r, int32_t group, const uint32_t *series, size_t n)
{
    pthread_mutex_lock(&r->mu);
    if (group >= 0 && (uint32_t)group < r->ngroups && r->groups[group].used) {
        struct group *g = &r->groups[group];
        g->sealed = true;
        for (size_t i = 0; i < n; i++) {
            if (series[i] >= r->nseries_slots)
                continue;
            struct series *s = slot(r, series[i]);
            /* a head that cannot be closed (no memory) stays live until its series
             * is deleted: it is still read, only not evicted */
            if (s->group == (uint32_t)group && s->head)
                close_head(r, s, series[i], g);
        }
        if (g->tl_len > 0)
            tl_close_head(r, g);
    }
    pthread_mutex_unlock(&r->mu);
}

void
fs_ring_group_reopen(struct fs_ring *r, int32_t group)
{
    pthread_mutex_lock(&r->mu);
    if (group >= 0 && (uint32_t)group < r->ngroups && r->groups[group].used)
        r->groups[group].sealed = false;
    pthread_mutex_unlock(&r->mu);
}

void
fs_ring_test_fail_allocs(struct fs_ring *r, long after)
{
    pthread_mutex_lock(&r->mu);
    r->fail_allocs_after = after < 0 ? -1 : after;
    pthread_mutex_unlock(&r->mu);
}
