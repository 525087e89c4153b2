/*
 * Whole files that must never be seen half written or be something else than they claim.
 *
 * fs_file_replace writes data to a new file beside path (mkstemp in the same directory:
 * a name of its own, never an existing file or a planted link; then the given mode),
 * syncs it, renames it over path and syncs the directory: a reader (or a
 * restart after a crash at any point) finds the old content or the new, never a mix.
 *
 * fs_file_read_regular reads a whole regular file of at most max bytes, opened without
 * following a symbolic link and without blocking on a FIFO. Returns 0 with *data (owned
 * by the caller, free(); NUL-terminated beyond *len) and *len, 1 when path does not
 * exist, -1 on any other problem (err says which).
 */
#ifndef FS_UTIL_FILE_H
#define FS_UTIL_FILE_H

#include <stddef.h>
#include <sys/types.h>

int fs_file_replace(const char *path, const void *data, size_t len, mode_t mode, char *err,
                    size_t errlen);
int fs_file_read_regular(const char *path, size_t max, char **data, size_t *len, char *err,
                         size_t errlen);

#endif
