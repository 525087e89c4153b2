/*
 * Predicted captures: which recurring incident of the collector's GET /api/v1/incidents
 * the agent follows, and running perf around it.
 *
 * A capture is `perf record -k mono -e E1 -e E2 ... -a -o FILE --max-size=NK -- sleep
 * SECONDS` (the monotonic clock, so that `perf script --header --ns` carries the reference
 * time the importer places samples with; --max-size what the raw quota leaves, perf's
 * headers and build ids come on top, about 10% here), then `perf script --header -i FILE`
 * read through a pipe a line at a time (fs_perf_stream_line) and handed on in pieces of
 * FS_CAPTURE_PIECE_EVENTS events: the agent never holds the whole text. perf runs as a
 * child process of the agent, one at a time; its stderr goes to FILE.log, which is read
 * to tell a refusal (permissions, a tracepoint this kernel lacks) from a capture.
 *
 * Ownership: callers own every buffer and batch. Threads: the owner's.
 */
#ifndef FS_AGENT_CAPTURE_H
#define FS_AGENT_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hostagent/agent_config.h"
#include "importers/events.h"

/** The answers the agent reads: at most this much (a larger one is refused unparsed). */
#define FS_CAPTURE_ANSWER_MAX (1u << 20)
/** Events of a capture handed to the sink at a time (the collector's batch). */
#define FS_CAPTURE_PIECE_EVENTS 5000
/** A perf script line longer than this is no sample: skipped whole. */
#define FS_CAPTURE_LINE_MAX (64u << 10)
/** How far ahead of the collector's now a window may be armed. */
#define FS_CAPTURE_MAX_AHEAD_NS (86400LL * 1000000000)
/** next_expected beyond this (year 2096) is not a time: its ns would near INT64_MAX. */
#define FS_CAPTURE_MAX_SECONDS 4e9

/**
 * From an /api/v1/incidents answer, the earliest next_expected (collector clock, ns) of
 * the recurring groups the configuration follows (a series of one of capture.targets or
 * capture.rules; every group when both are empty) that is not before not_before_ns and
 * at most FS_CAPTURE_MAX_AHEAD_NS after it. 1 with *next_ns and a description in what,
 * 0 when none, -1 with err (not an answer). A followed group whose next_expected is not a
 * finite number of seconds, or too far ahead, is skipped; err then says so (else "")
 * whatever the return.
 */
int fs_capture_pick(const char *json, const struct fs_agent_cfg *cfg, int64_t not_before_ns,
                    int64_t *next_ns, char *what, size_t whatlen, char *err, size_t errlen);

/*
 * perf's ring buffer per CPU (perf record -m, pages). perf checks --max-size as it writes
 * and, once past it, still drains every CPU's buffer: a capture can end up to this much
 * per CPU beyond max_bytes (the agent keeps that room, fs_capture_overshoot).
 */
#define FS_CAPTURE_MMAP_PAGES 32

/** Bytes a capture may write past its max_bytes on this machine: every CPU's buffer. */
uint64_t fs_capture_overshoot(void);

/**
 * Starts perf record for duration_us into raw (its stderr to raw.log), its samples
 * bounded by max_bytes (perf record --max-size, in KiB; FS_CAPTURE_MMAP_PAGES a CPU). The child's
 * pid, or -1 with err (fork failed).
 */
pid_t fs_capture_start(const struct fs_agent_cfg *cfg, const char *raw, int64_t duration_us,
                       uint64_t max_bytes, char *err, size_t errlen);

/**
 * Takes a piece of a capture's events (1..FS_CAPTURE_PIECE_EVENTS; the importer frees
 * them after). 0 to go on, -1 with err to stop the import.
 */
typedef int (*fs_capture_sink)(void *ctx, struct fs_imp_batch *b, char *err, size_t errlen);

/**
 * After perf record exited with wait status ws: runs perf script on raw and hands its
 * samples, under host, to sink piece by piece; *events counts those sink took.
 * interrupted: the agent stopped perf early with SIGINT (its exit status is then not a
 * failure; what it wrote is imported); perf stopping at --max-size is no failure either.
 * 0 (*events may be 0: nothing happened), or -1 with err: what perf said and, for a
 * refusal it knows, the fix, or the sink's err (pieces taken before stay taken).
 */
int fs_capture_import(const struct fs_agent_cfg *cfg, const char *raw, int ws, bool interrupted,
                      fs_capture_sink sink, void *ctx, size_t *events, char *err, size_t errlen);

/** Runs the hook (if any) in the background, detached (never waited for), with the window
 *  in its environment. */
void fs_capture_hook(const struct fs_agent_cfg *cfg, const char *phase, int64_t start_ns,
                     int64_t end_ns);

#endif
