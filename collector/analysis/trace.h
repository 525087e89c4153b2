/*
 * Chrome Trace Event JSON (opens in Perfetto and chrome://tracing) for a time range:
 * switch counters as counter tracks, incidents and drops as instant events, host events
 * as slices, so the switch side sits next to an Nsight export.
 *
 * Layout. One process per switch ("switch tor1") and per host ("host gpu-node-3"), named
 * with metadata events. A counter track per port/queue/metric ("Eth1/49 tc3 ecn marked/s",
 * values as rates); instants on their process; slices on one thread per (host, track),
 * with extra lanes ("nccl.kernel #2") when ranges overlap without nesting, which the
 * format does not allow on one thread.
 *
 * Time. `ts`/`dur` are microseconds relative to a file origin (the range start), in plain
 * decimals with nanosecond digits: epoch microseconds would lose sub-µs precision in
 * doubles and scientific notation is misread by some viewers. The origin is kept in
 * otherData: {"epoch_origin_ns": <int>, "epoch_origin": "<RFC 3339>"}.
 *
 * Use: fs_trace_new, then any number of counter/instant/slice calls (slices of one
 * track in start order), then fs_trace_finish, which appends the closing metadata and
 * frees the writer. The JSON goes to the caller's fs_buf (util/buf.h); when the buffer
 * reaches its maximum the calls return -1 and the document is incomplete.
 * Ownership: the writer borrows out until fs_trace_finish/fs_trace_free.
 */
#ifndef FS_ANALYSIS_TRACE_H
#define FS_ANALYSIS_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/host_events.h"
#include "util/buf.h"

struct fs_trace;

/** Starts a document whose timestamps are relative to origin_ns (epoch ns). NULL on ENOMEM. */
struct fs_trace *fs_trace_new(struct fs_buf *out, int64_t origin_ns);

/** A counter track: n samples (epoch µs, value). 0 or -1 (buffer full / no memory). */
int fs_trace_counter(struct fs_trace *t, const char *process, const char *track,
                     const int64_t *ts_us, const double *v, size_t n);

/**
 * An instant event on a process. args_json, if not NULL, is a complete JSON object
 * written as the event's args. 0 or -1.
 */
int fs_trace_instant(struct fs_trace *t, const char *process, const char *name, int64_t ts_ns,
                     const char *args_json);

/** A slice (start_ns <= end_ns, epoch ns) on track of process, with attrs as args. 0 or -1. */
int fs_trace_slice(struct fs_trace *t, const char *process, const char *track, const char *name,
                   int64_t start_ns, int64_t end_ns, const struct fs_host_attr *attrs,
                   size_t n_attrs);

/**
 * Appends the process/thread names and otherData (extra_members, if not NULL, are more
 * JSON members for otherData, e.g. "\"clock_uncertainty_ns\":5000"), closes the
 * document and frees t. 0, or -1 when the buffer overflowed at any point.
 */
int fs_trace_finish(struct fs_trace *t, const char *extra_members);

/** Frees t without finishing (error paths). Accepts NULL. */
void fs_trace_free(struct fs_trace *t);

#endif
