/*
 * `fabricscope import-nccl-inspector --url URL [--host NAME] [--token-file F] DIR`:
 * the NCCL Inspector profiler plugin's JSON-lines logs (<dump_dir>/<host>-pid<pid>.log,
 * one compact object per completed collective or P2P op; see host-data-facts §4).
 *
 * Each "coll_perf" record becomes kind "nccl.inspector", name <coll> (AllReduce, ...);
 * each "p2p_perf" record name <p2p> (Send, Recv). attrs: rank, n_ranks, comm (id),
 * comm_name, sn, msg_size_bytes, exec_time_us, timing_source, algobw_gbs, busbw_gbs.
 * Time: with NCCL_INSPECTOR_DUMP_VERBOSE the record's event_trace_ts.coll_start_ts
 * (or p2p_start_ts; epoch µs from gettimeofday) starts the range and exec_time_us its
 * length; otherwise only the dump time is known and the range is taken as ending at
 * dump_timestamp_us (attr placement = "dump_time", an upper bound). Host:
 * metadata.hostname unless --host. Lines that are not such records are counted and
 * skipped; a line that is not JSON at all is an error naming file and line.
 * Files read: the regular files of DIR whose names end in ".log" or ".jsonl", in name
 * order, a line at a time (lines up to 1 MiB), so nothing of a log is held but the line
 * being read and the events not yet posted.
 */
#ifndef FS_IMPORT_NCCL_INSPECTOR_H
#define FS_IMPORT_NCCL_INSPECTOR_H

#include <stdbool.h>
#include <stddef.h>

#include "importers/events.h"

/**
 * Reads one log's text (len bytes) into b; name is used in errors. host may be NULL.
 * *skipped counts JSON lines that are not collective/P2P records. 0 or -1 with err.
 */
int fs_import_nccl_inspector_read(const char *text, size_t len, const char *name, const char *host,
                                  struct fs_imp_batch *b, size_t *skipped, char *err,
                                  size_t errlen);

/** Reads every log of dir (see above). 0 or -1 with err. */
int fs_import_nccl_inspector_dir(const char *dir, const char *host, struct fs_imp_batch *b,
                                 size_t *files, size_t *skipped, char *err, size_t errlen);

struct fs_imp_stream;

/**
 * The same, streamed: events are added to b and handed to s (fs_imp_stream_feed) every
 * FS_IMP_STREAM_EVENTS, so b holds at most that many (plus what s holds back). s NULL:
 * b keeps them all (fs_import_nccl_inspector_dir). *events: how many were read in all.
 * On -1, err names the file and line where reading stopped, or says the stream failed
 * (it has reported why); events read before it may be posted.
 */
int fs_import_nccl_inspector_stream(const char *dir, const char *host, struct fs_imp_batch *b,
                                    struct fs_imp_stream *s, size_t *files, size_t *skipped,
                                    size_t *events, char *err, size_t errlen);

/** The subcommand (argv[0] = "import-nccl-inspector"); returns the exit code. */
int fs_import_nccl_inspector_main(int argc, char **argv);

/** Whether a file of an NCCL Inspector output directory is one of its logs (.log, .jsonl):
 *  the importer and the host agent's tail read the same files. */
bool fs_nccl_inspector_is_log_name(const char *name);

#endif
