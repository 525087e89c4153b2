/*
 * `fabricscope import-perf --url URL --host NAME [--reference TOD=CLOCK|now]
 *  [--token-file F] < perf-script.txt`: tracepoint samples from `perf script` text
 * (tcp:tcp_retransmit_skb, skb:kfree_skb, net:net_dev_xmit, or any other) as instant
 * host events: kind "perf.<event>" (e.g. perf.tcp_retransmit_skb), name "<subsys>:<event>",
 * attrs comm, tid, cpu and the tracepoint's key=value fields (kfree_skb's "reason: X"
 * too), kernel pointers (0x...) left out, and l4 = tcp|udp for tcp:* and udp:* events
 * (with saddr/daddr/sport/dport, the 5-tuple). Field sets differ by kernel; every field found
 * is kept, none is required.
 *
 * Line shape (perf script's default fields for tracepoints):
 *   <comm, may contain spaces> <tid>[/<tid>] [<cpu>] <sec>.<frac>: <subsys>:<event>: <fields>
 *
 * Wall clock. perf's sample times are on the recording clock. With `perf record -k mono`
 * the `perf script --header` output carries
 *   # reference time: <date> = <sec>.<usec> (TOD) = <sec>.<nsec> (monotonic)
 * and a sample's wall time is TOD + (sample - reference). Without that header, give
 * --reference TOD=CLOCK (both in seconds with fractions), or --reference now to use this
 * host's current CLOCK_REALTIME - CLOCK_MONOTONIC (valid when run on the recording host,
 * recorded with -k mono, or without -k on kernels whose perf clock follows
 * CLOCK_MONOTONIC, as observed on this project's machines).
 *
 * Ownership: the caller owns the batch; the reader keeps nothing.
 */
#ifndef FS_IMPORT_PERF_H
#define FS_IMPORT_PERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "importers/events.h"

struct fs_perf_ref {
    bool known;
    int64_t tod_ns;   /**< wall clock at the reference instant */
    int64_t clock_ns; /**< the recording clock at the same instant */
};

/** Parses "S.F=S.F" (TOD=CLOCK, seconds). 0 or -1. */
int fs_perf_parse_reference_arg(const char *s, struct fs_perf_ref *ref);

/**
 * Reads perf script text (len bytes, need not be NUL-terminated). A reference given by
 * the caller (known) takes precedence over the header's. *skipped counts non-comment
 * lines that were not samples. 0, or -1 with err (no reference, no memory, or lines but
 * no sample at all).
 */
int fs_import_perf_read(const char *text, size_t len, const char *host,
                        const struct fs_perf_ref *given, struct fs_imp_batch *b, size_t *skipped,
                        char *err, size_t errlen);

/**
 * Streamed reading, one line at a time, for output too large to hold (the host agent's
 * import of a capture): the "# reference time" header must come before the first
 * sample (perf script --header writes it there). Counts only; the caller owns the
 * batch and empties it as it likes.
 */
struct fs_perf_stream {
    struct fs_perf_ref ref; /**< given, or the header's once started */
    bool started;           /**< a non-comment line was seen: the reference is settled */
    size_t lineno, lines, events, skipped;
};

/** given (known or not) takes precedence over the header's reference, as above. */
void fs_perf_stream_init(struct fs_perf_stream *s, const struct fs_perf_ref *given);

/**
 * One line (len bytes, without its newline, need not be NUL-terminated) into b.
 * 1: an event added, 0: a comment, a blank line or not a sample (counted in skipped),
 * -1 with err (no reference before the first sample, a time out of range, no memory).
 */
int fs_perf_stream_line(struct fs_perf_stream *s, const char *line, size_t len, const char *host,
                        struct fs_imp_batch *b, char *err, size_t errlen);

/** The subcommand (argv[0] = "import-perf"); reads stdin; returns the exit code. */
int fs_import_perf_main(int argc, char **argv);

#endif
