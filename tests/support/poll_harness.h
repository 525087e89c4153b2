/*
 * What the test programs that drive a poll driver directly (store + sink + driver, no
 * daemon: snmp-harness, fs-onyx-poll) share: counting the cycles of a round as they
 * complete, timing, and printing the /metrics lines a test greps for. Test-only.
 *
 * Threads: fs_ph_done is the sinks' done callback (driver threads); the rest is called
 * from the harness's main thread. State is process-wide (one harness per process).
 */
#ifndef FS_POLL_HARNESS_H
#define FS_POLL_HARNESS_H

#include <regex.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"
#include "util/buf.h"

#define FS_PH_RESULTS 6 /* enum fs_poll_result: ok, timeout, auth, protocol, parse, partial */

extern const char *const fs_ph_result_names[FS_PH_RESULTS];

/** Starts a round of n cycles. */
void fs_ph_round_begin(size_t n);
/** One cycle of the round did not start (the driver said busy). */
void fs_ph_round_skip(void);
/** Waits until every cycle of the round completed; the result of target 0's last cycle. */
enum fs_poll_result fs_ph_round_wait(void);
/** Done callback for fs_sink_set_done_cb; arg points to the target's index (an int). */
void fs_ph_done(void *arg, uint64_t id, enum fs_poll_result r);
/** Results so far, by enum fs_poll_result. */
unsigned long fs_ph_result_count(enum fs_poll_result r);

int64_t fs_ph_mono_us(void);
/** Process CPU time (user + system), ms. */
double fs_ph_cpu_ms(void);
/** Prints the sample lines of b matching re as "poll N <line>". */
void fs_ph_grep_print(const struct fs_buf *b, const regex_t *re, int poll);

#endif
