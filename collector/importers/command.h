/*
 * What every import subcommand shares: its command line (--url, --host, --token-file,
 * --host-offset, --offset-file, --offset-now, --help, plus the importer's own options)
 * and reading an input whole (the importers stream theirs: client.h, fs_imp_stream).
 *
 * Ownership: the strings in struct fs_imp_args point into argv. Threads: main only
 * (getopt).
 */
#ifndef FS_IMP_COMMAND_H
#define FS_IMP_COMMAND_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include "importers/events.h"
#include "util/buf.h"

/** How the host's clock offset (host minus collector) of the capture is known. */
enum fs_imp_offset_source {
    FS_IMP_OFFSET_MEASURE_NOW, /**< measured by this run (refused for an old capture
                                    unless --offset-now says so) */
    FS_IMP_OFFSET_GIVEN,       /**< --host-offset NS[:UNCERTAINTY_NS] */
    FS_IMP_OFFSET_FILE,        /**< --offset-file FILE, written by `fabricscope clock-offset`
                                    on the capture host at capture time */
};

struct fs_imp_args {
    const char *url, *host, *token_file;
    enum fs_imp_offset_source offset_source;
    const char *offset_file;
    int64_t host_offset_ns, host_offset_unc_ns; /**< FS_IMP_OFFSET_GIVEN */
    bool offset_now;                            /**< --offset-now */
    int first_operand;                          /**< argv index of the first non-option argument */
};

/** A capture whose last event ended longer ago than this is not posted with an offset
 *  measured now (clocks drift, and the import may run on another host). */
#define FS_IMP_STALE_CAPTURE_NS (5LL * 60 * 1000000000)

/** An importer's own option: handle returns 0, or an exit code (2 for a bad value). */
struct fs_imp_extra {
    struct option opt; /**< opt.val is the short option letter */
    int (*handle)(const char *arg, void *ctx);
};

/**
 * Parses argv for the command `name` (e.g. "import-perf"). usage is printed for --help.
 * operands is how many non-option arguments the command takes (0 or 1); need_host makes
 * --host mandatory. Returns -1 to go on, or the exit code to return at once (0 after
 * --help, 2 on a usage error, with the reason on stderr).
 */
int fs_imp_parse_args(int argc, char **argv, const char *name, const char *usage,
                      const struct fs_imp_extra *extra, size_t n_extra, void *ctx, int operands,
                      bool need_host, struct fs_imp_args *out);

/**
 * Reads f to its end into out (initialised here, at most 1 GiB; the caller frees it).
 * 0, or -1 with err ("larger than 1 GiB", a read error).
 */
int fs_imp_read_all(FILE *f, struct fs_buf *out, char *err, size_t errlen);

#endif
