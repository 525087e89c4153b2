/* Whole-file writes and reads (see file.h). */
#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int
fs_file_replace(const char *path, const void *data, size_t len, mode_t mode, char *err,
                size_t errlen)
{
    int rc = -1, fd = -1, dfd = -1;
    bool made = false;
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16), *dir = strdup(path);
    if (!tmp || !dir) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    snprintf(tmp, plen + 16, "%s.tmp.XXXXXX", path);
    fd = mkstemp(tmp); /* 0600, O_EXCL: never an existing file or link */
    if (fd < 0) {
        snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
        goto out;
    }
    made = true;
    if (mode != 0600 && fchmod(fd, mode) != 0) {
        snprintf(err, errlen, "cannot set the mode of %s: %s", tmp, strerror(errno));
        goto out;
    }
    for (size_t done = 0; done < len;) {
        ssize_t w = write(fd, (const char *)data + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            snprintf(err, errlen, "cannot write %s: %s", tmp, w < 0 ? strerror(errno) : "no space");
            goto out;
        }
        done += (size_t)w;
    }
    if (fsync(fd) != 0) {
        snprintf(err, errlen, "cannot sync %s: %s", tmp, strerror(errno));
        goto out;
    }
    if (close(fd) != 0) {
        fd = -1;
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        goto out;
    }
    made = false;
    /* The rename itself survives a crash only once the directory is synced. */
    dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0)
        fsync(dfd);
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    if (dfd >= 0)
        close(dfd);
    if (made)
        unlink(tmp);
    free(tmp);
    free(dir);
    return rc;
}

int
fs_file_read_regular(const char *path, size_t max, char **data, size_t *len, char *err,
                     size_t errlen)
{
    int rc = -1;
    char *buf = NULL;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return 1;
        snprintf(err, errlen, "cannot open %s: %s", path,
                 errno == ELOOP ? "it is a symbolic link" : strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s is not a regular file", path);
        goto out;
    }
    if ((unsigned long long)st.st_size > max) {
        snprintf(err, errlen, "%s has %lld bytes, more than the %zu it may have", path,
                 (long long)st.st_size, max);
        goto out;
    }
    size_t n = (size_t)st.st_size, got = 0;
    buf = malloc(n + 1);
    if (!buf) {
        snprintf(err, errlen, "out of memory reading %s", path);
        goto out;
    }
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
            goto out;
        }
        if (r == 0)
            break; /* shrank while read: what is there */
        got += (size_t)r;
    }
    buf[got] = '\0';
    *data = buf;
    *len = got;
    buf = NULL;
    rc = 0;
out:
    free(buf);
    close(fd);
    return rc;
}
