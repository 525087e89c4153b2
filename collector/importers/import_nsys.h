/*
 * `fabricscope import-nsys REPORT.sqlite --url URL [--host NAME] [--token-file F]`:
 * NCCL activity from an Nsight Systems SQLite export (nsys export --type sqlite).
 *
 * What is read (tables found by name, columns checked with PRAGMA table_info, since the
 * schema changes between releases):
 *   - kernels: CUPTI_ACTIVITY_KIND_KERNEL (or a _V<n> successor) rows whose shortName
 *     (else demangledName; a StringIds reference or, in old exports, text) contains
 *     ncclDevKernel_<Coll> (NCCL >= 2.19) or ncclKernel_<Coll> (<= 2.18) -> kind
 *     "nccl.kernel", name <Coll> (AllReduce, AllGather, ReduceScatter, Broadcast, Reduce,
 *     SendRecv, ...; the name does not reveal the algorithm actually used), attrs kernel,
 *     device, stream;
 *   - NVTX ranges: NVTX_EVENTS rows with an end, named COALESCE(text, StringIds[textId]),
 *     in the "NCCL" domain (its NvtxDomainCreate row) or named nccl* -> kind "nccl.nvtx",
 *     name e.g. ncclAllReduce; message_size_bytes when a DYNAMIC_NVTXPAYLOAD_* table with
 *     an eventId column and a "Message size" column joins to NVTX_EVENTS.eventId
 *     (assumed from the schema notes, not seen in a real export).
 * Rows are stepped one at a time; string ids and message sizes are joined by SQLite
 * (its page cache, and a temporary file for the message-size join), so nothing of the
 * export is held here but the events not yet posted.
 * Times: export ns relative to the session start plus
 * TARGET_INFO_SESSION_START_TIME.utcEpochNs (values above 1e18 are taken as already
 * epoch ns, from `--ts-normalize`). Host: TARGET_INFO_SYSTEM_ENV 'Hostname' unless --host.
 * The offset measured at import time is applied: the host clock is assumed not to have
 * moved against the collector's since the capture.
 */
#ifndef FS_IMPORT_NSYS_H
#define FS_IMPORT_NSYS_H

#include <stddef.h>

#include "importers/events.h"

/**
 * Reads the export at path into b. host may be NULL (taken from the export). Returns 0,
 * or -1 with err saying what is wrong (not a database, not an Nsight export, no session
 * start, no NCCL activity found is NOT an error: b stays empty).
 */
int fs_import_nsys_read(const char *path, const char *host, struct fs_imp_batch *b, char *err,
                        size_t errlen);

struct fs_imp_stream;

/**
 * The same, streamed: events are added to b and handed to s (fs_imp_stream_feed) every
 * FS_IMP_STREAM_EVENTS, so b holds at most that many (plus what s holds back). s NULL:
 * b keeps them all (fs_import_nsys_read). *events: how many were read in all. On -1,
 * err names the row (table and its number in the order read) where reading stopped,
 * or says the stream failed (it has reported why); events read before it may be posted.
 */
int fs_import_nsys_stream(const char *path, const char *host, struct fs_imp_batch *b,
                          struct fs_imp_stream *s, size_t *events, char *err, size_t errlen);

/** The subcommand (argv[0] = "import-nsys"); returns the exit code. */
int fs_import_nsys_main(int argc, char **argv);

#endif
