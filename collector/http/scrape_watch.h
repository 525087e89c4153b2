/*
 * Who scrapes /metrics, and how often. A TSDB that scrapes less often than a switch is
 * polled stores only the latest poll at each scrape: the polls in between never reach
 * it (their queue watermarks are lost, their counter increases merged into the next
 * stored one), and a stall inside one is what its history cannot place. The HTTP
 * endpoint notes each /metrics request here; once a scraper's requests come at a steady
 * interval (its last FS_SCRAPE_WATCH_STEADY intervals within 10% of their median) the
 * interval is reported, once, and again only when it changes by more than 10%. A
 * person's occasional curl is not steady and is never reported.
 *
 * Scrapers are told apart by a key the caller makes (the client's address and
 * User-Agent); at most FS_SCRAPE_WATCH_SLOTS are followed, the one heard from least
 * recently making room for a new one.
 *
 * Ownership: fs_scrape_watch_new returns an object the caller frees with
 * fs_scrape_watch_free. Thread-safe: fs_scrape_watch_note may be called from any thread.
 */
#ifndef FS_HTTP_SCRAPE_WATCH_H
#define FS_HTTP_SCRAPE_WATCH_H

#include <stdint.h>

#define FS_SCRAPE_WATCH_SLOTS 16
#define FS_SCRAPE_WATCH_STEADY 3

struct fs_scrape_watch;

/** A new watch, or NULL when out of memory. */
struct fs_scrape_watch *fs_scrape_watch_new(void);

void fs_scrape_watch_free(struct fs_scrape_watch *w);

/**
 * Notes a request of scraper `key` at now_us (monotonic µs). Returns the scraper's
 * steady interval in µs when it is to be reported now (newly steady, or steady at an
 * interval more than 10% from the one last reported), else 0.
 */
int64_t fs_scrape_watch_note(struct fs_scrape_watch *w, uint64_t key, int64_t now_us);

/**
 * The share of the polls of a target polled every poll_us that a scraper scraping every
 * scrape_us never stores (each scrape stores the latest poll only): 1 - poll / scrape,
 * 0 when the scrape is not slower.
 */
double fs_scrape_watch_unstored_share(int64_t poll_us, int64_t scrape_us);

#endif
