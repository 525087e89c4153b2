#include "http/scrape_watch.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

struct scraper {
    uint64_t key;
    int64_t last_us;                       /* its latest request; 0: a free slot */
    int64_t iv_us[FS_SCRAPE_WATCH_STEADY]; /* its latest intervals, newest at iv_next - 1 */
    unsigned n_iv, iv_next;
    int64_t reported_us; /* the steady interval last reported, 0 none */
};

struct fs_scrape_watch {
    pthread_mutex_t lock;
    struct scraper s[FS_SCRAPE_WATCH_SLOTS];
};

struct fs_scrape_watch *
fs_scrape_watch_new(void)
{
    struct fs_scrape_watch *w = calloc(1, sizeof *w);
    if (w)
        pthread_mutex_init(&w->lock, NULL);
    return w;
}

void
fs_scrape_watch_free(struct fs_scrape_watch *w)
{
    if (!w)
        return;
    pthread_mutex_destroy(&w->lock);
    free(w);
}

static bool
within_tenth(int64_t a, int64_t ref)
{
    int64_t d = a > ref ? a - ref : ref - a;
    return d * 10 <= ref;
}

/* The median of the intervals when all lie within 10% of it, else 0. */
static int64_t
steady(const struct scraper *s)
{
    if (s->n_iv < FS_SCRAPE_WATCH_STEADY)
        return 0;
    int64_t v[FS_SCRAPE_WATCH_STEADY];
    for (unsigned i = 0; i < FS_SCRAPE_WATCH_STEADY; i++) {
        int64_t x = s->iv_us[i];
        unsigned j = i;
        for (; j > 0 && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
    int64_t med = v[FS_SCRAPE_WATCH_STEADY / 2];
    if (med <= 0)
        return 0;
    for (unsigned i = 0; i < FS_SCRAPE_WATCH_STEADY; i++)
        if (!within_tenth(v[i], med))
            return 0;
    return med;
}

int64_t
fs_scrape_watch_note(struct fs_scrape_watch *w, uint64_t key, int64_t now_us)
{
    int64_t report = 0;
    pthread_mutex_lock(&w->lock);
    struct scraper *s = NULL, *oldest = &w->s[0];
    for (unsigned i = 0; i < FS_SCRAPE_WATCH_SLOTS; i++) {
        struct scraper *c = &w->s[i];
        if (c->last_us && c->key == key) {
            s = c;
            break;
        }
        if (c->last_us < oldest->last_us)
            oldest = c; /* a free slot (0) is the oldest of all */
    }
    if (!s) {
        *oldest = (struct scraper){.key = key, .last_us = now_us};
        goto out;
    }
    if (now_us > s->last_us) {
        s->iv_us[s->iv_next] = now_us - s->last_us;
        s->iv_next = (s->iv_next + 1) % FS_SCRAPE_WATCH_STEADY;
        if (s->n_iv < FS_SCRAPE_WATCH_STEADY)
            s->n_iv++;
    }
    s->last_us = now_us;
    int64_t iv = steady(s);
    if (iv && (!s->reported_us || !within_tenth(iv, s->reported_us))) {
        s->reported_us = iv;
        report = iv;
    }
out:
    pthread_mutex_unlock(&w->lock);
    return report;
}

double
fs_scrape_watch_unstored_share(int64_t poll_us, int64_t scrape_us)
{
    if (poll_us <= 0 || scrape_us <= poll_us)
        return 0.0;
    return 1.0 - (double)poll_us / (double)scrape_us;
}
