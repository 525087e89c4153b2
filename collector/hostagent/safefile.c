/* Files root opens in directories (see safefile.h). */
#include "hostagent/safefile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/errf.h"

int
fs_agent_private_dir(const char *path, bool create, char *err, size_t errlen)
{
    struct stat st;
    if (create && mkdir(path, 0750) != 0 && errno != EEXIST) {
        fs_errf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (!create && stat(path, &st) != 0 && errno == ENOENT)
        return 0;
    if (stat(path, &st) != 0) {
        fs_errf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        fs_errf(err, errlen, "%s is not a directory", path);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        fs_errf(err, errlen,
                "%s belongs to uid %ld, not to the agent's (%ld): another user could plant "
                "files the agent writes as root (fix: chown %ld %s, or another state_dir)",
                path, (long)st.st_uid, (long)geteuid(), (long)geteuid(), path);
        return -1;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        fs_errf(err, errlen,
                "%s is writable by its group or by others (mode %04o): another user could "
                "plant files the agent writes as root (fix: chmod go-w %s)",
                path, (unsigned)(st.st_mode & 07777), path);
        return -1;
    }
    return 0;
}

int
fs_agent_open_regular(const char *path, struct stat *st, char *err, size_t errlen)
{
    struct stat own;
    struct stat *s = st ? st : &own;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        fs_errf(err, errlen, "%s: %s", path,
                errno == ELOOP ? "a symbolic link (not followed)" : strerror(errno));
        return -1;
    }
    if (fstat(fd, s) != 0 || !S_ISREG(s->st_mode)) {
        fs_errf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int
fs_agent_create(const char *path, int mode)
{
    if (unlink(path) != 0 && errno != ENOENT)
        return -1;
    return open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
}
