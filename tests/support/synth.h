/*
 * A test-only synthetic source that feeds a store directly through sinks, for the
 * exposition, HTTP and scrape-benchmark tests. The product ships no fake driver; this
 * lives under tests/ only.
 *
 * Ownership: fs_synth_new() returns a fabric the caller frees with fs_synth_free(),
 * which removes its sinks from the store (the store itself is the caller's).
 */
#ifndef FS_TEST_SYNTH_H
#define FS_TEST_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/** Series reported per port by fs_synth_poll(). */
#define FS_SYNTH_SERIES_PER_PORT 44

struct fs_synth;

/**
 * Adds n_targets targets named "<prefix>NNN" (source "synth", static labels pod and rack)
 * with `ports` ports each to st. interval_us is the poll interval declared to the store.
 */
struct fs_synth *fs_synth_new(struct fs_store *st, const char *prefix, size_t n_targets,
                              size_t ports, int64_t interval_us);

/** Reports one whole poll of every target at ts_us (cycle numbers the poll, from 1). */
void fs_synth_poll(struct fs_synth *s, int64_t ts_us, uint64_t cycle);

/** Reports one poll of target i only. */
void fs_synth_poll_target(struct fs_synth *s, size_t i, int64_t ts_us, uint64_t cycle);

size_t fs_synth_series(const struct fs_synth *s);

void fs_synth_free(struct fs_synth *s);

/** CLOCK_REALTIME in µs. */
int64_t fs_synth_now_us(void);

#endif
