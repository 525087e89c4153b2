/*
 * Counting What-Just-Happened drops from a table that is a window, not a counter.
 *
 * The device's WJH table holds the drops of a recent window: raw records (one row per
 * dropped packet, with its own timestamp) or aggregated rows (one per flow and reason,
 * with a Count over the `Sample Window`). Between two polls the window moves: old rows
 * leave, counts of aggregated rows may shrink, the table may be emptied. Summing it per
 * poll, as a counter, counts a shrinking window as a clear and a drop twice when it
 * stays in the window for two polls.
 *
 * The tally counts each drop once: a raw row is new when its identity (every cell but
 * the row number: timestamp, ports, addresses, reason; onyx_wjh_record.ident) was not in
 * the previous poll's table (as many times as it occurs more often than before); an
 * aggregated row adds what its Count grew since the previous poll, or its whole Count
 * when it was not in the previous table or the window does not overlap the previous one
 * (the table was emptied). A row that leaves the window, or a Count that shrinks, adds
 * nothing. What the tally cannot know: drops that entered and left the window between
 * two polls (poll more often than the window is long), and, for aggregated rows of a
 * rolling window, drops that arrived while as many older ones left (under-counted).
 *
 * Totals are per (rule, reason), monotonic for the tally's life: the driver reports them
 * as 64-bit counters. Bounds: at most ONYX_WJH_MAX_ROWS rows a poll are remembered (more
 * are counted as new each poll and flagged), at most ONYX_WJH_MAX_TOTALS (rule, reason)
 * pairs (further reasons of a rule count under reason "other").
 *
 * Ownership: the tally owns its arrays; onyx_wjh_tally_free() releases them. Not
 * thread-safe: one target's I/O thread uses it.
 */
#ifndef FS_ONYX_WJH_TALLY_H
#define FS_ONYX_WJH_TALLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "parse.h"

#define ONYX_WJH_MAX_ROWS 65536
#define ONYX_WJH_MAX_TOTALS 512

struct onyx_wjh_row {
    uint64_t ident;
    uint64_t count; /* raw: occurrences of the ident in the table; aggregated: its Count */
};

struct onyx_wjh_total {
    char rule[64];
    char reason[96];
    uint64_t drops;
};

/* An open-addressing map ident -> count (ident 0 is stored as 1). */
struct onyx_wjh_rowmap {
    struct onyx_wjh_row *v;
    size_t n, cap; /* cap: 0 or a power of two */
};

struct onyx_wjh_tally {
    struct onyx_wjh_rowmap prev, cur; /* the previous poll's table, this poll's so far */
    char prev_window_end[32];         /* the previous table's window end ("" when unknown) */
    bool had_prev;                    /* a previous table was seen */
    bool overflow;                    /* the last table had more than ONYX_WJH_MAX_ROWS rows */
    struct onyx_wjh_total *totals;
    size_t n_totals, cap_totals;
};

/** Starts the rows of one poll's table (a previous unfinished poll is discarded). */
void onyx_wjh_tally_begin(struct onyx_wjh_tally *t);

/**
 * How many of the row's drops are new since the previous poll (see above). Call once per
 * row of the table, before onyx_wjh_tally_end(). -1 when out of memory (the row is then
 * not remembered and counts as new next time too).
 */
int64_t onyx_wjh_tally_row(struct onyx_wjh_tally *t, const struct onyx_wjh_record *r);

/** Adds n drops to the (rule, reason) total. 0, or -1 when out of memory. */
int onyx_wjh_tally_add(struct onyx_wjh_tally *t, const char *rule, const char *reason, uint64_t n);

/** Ends the poll: its table becomes the previous one. window_end: the table's window end
 *  ("" when the output showed none). Call only when the whole table was read. */
void onyx_wjh_tally_end(struct onyx_wjh_tally *t, const char *window_end);

/** Frees the tally's arrays and zeroes it. */
void onyx_wjh_tally_free(struct onyx_wjh_tally *t);

#endif
