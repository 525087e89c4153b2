/*
 * One non-blocking SSH connection carrying one interactive shell: the only file of the
 * driver that calls libssh2. Every function returns at once; the caller (the driver's I/O
 * thread) waits on onyx_ssh_fd() for onyx_ssh_events() and calls again.
 *
 * Establishing walks: TCP connect -> SSH handshake -> host key check (known_hosts, which
 * must parse whole or is refused naming the line; strict, or accept-new that appends the
 * key of a host that has none, by temporary file and rename, keeping every other byte; a
 * changed key, or one of another type than the known one, is always refused and logged
 * with both SHA256 fingerprints) -> authentication (publickey when a key file is
 * given, then password, then keyboard-interactive, as the server offers them) -> session
 * channel, pty, shell.
 *
 * The steps that may block (the host name's lookup, the known_hosts read and write, the
 * read of the key files: regular files only, so a FIFO is refused) run on a small pool of worker
 * threads (at most 8; known_hosts checks one at a time), so the thread driving the connections
 * never waits on a resolver or a disk. Meanwhile onyx_ssh_fd() is an eventfd that turns readable
 * when the worker is done: the fd to wait on may change after each onyx_ssh_establish() call.
 * Freeing a connection never waits for its worker (the job's answer is dropped).
 *
 * Threads: a connection is used by one thread at a time; onyx_ssh_global_init() runs once
 * before any connection (libssh2_init is not thread-safe); onyx_ssh_global_cleanup() after
 * the last connection is freed waits up to 2 s for workers still in a lookup.
 * Ownership: the connection copies every parameter and wipes the password on free.
 */
#ifndef FS_ONYX_SSH_H
#define FS_ONYX_SSH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum onyx_ssh_rc {
    ONYX_SSH_DONE = 0,
    ONYX_SSH_AGAIN = 1,         /**< would block: wait for onyx_ssh_events() on the fd */
    ONYX_SSH_FAIL = -1,         /**< connection or protocol failure */
    ONYX_SSH_FAIL_AUTH = -2,    /**< authentication refused */
    ONYX_SSH_FAIL_HOSTKEY = -3, /**< unknown (strict policy) or changed host key */
    ONYX_SSH_EOF = -4,          /**< the peer closed the shell */
};

struct onyx_ssh_params {
    const char *host;
    uint16_t port;
    const char *username;
    const char *password; /**< may be NULL */
    const char *key_file; /**< may be NULL; its public half is key_file + ".pub" if present */
    const char *known_hosts;
    bool accept_new;
    const char *log_target; /**< target name for log lines */
};

int onyx_ssh_global_init(char *errbuf, size_t errlen);
void onyx_ssh_global_cleanup(void);

/** Starts the TCP connect to a numeric address, or the lookup of a name on a worker (never
 * blocks). NULL + errbuf on failure. */
struct onyx_ssh *onyx_ssh_new(const struct onyx_ssh_params *p, char *errbuf, size_t errlen);

/** The fd to wait on now (the socket, or the worker's eventfd); both stay open until free. */
int onyx_ssh_fd(const struct onyx_ssh *s);

/** What the establishment is doing ("resolving the host name", ...), for messages. */
const char *onyx_ssh_phase(const struct onyx_ssh *s);

/** EPOLLIN / EPOLLOUT the connection waits for now (EPOLLIN at least once established). */
uint32_t onyx_ssh_events(const struct onyx_ssh *s);

/** Advances the establishment; DONE once the shell is open. */
int onyx_ssh_establish(struct onyx_ssh *s, char *errbuf, size_t errlen);

/** Reads shell output (stderr is drained and dropped). DONE with *n > 0, AGAIN, EOF or FAIL. */
int onyx_ssh_read(struct onyx_ssh *s, char *buf, size_t len, size_t *n);

/** Writes to the shell; DONE with *n bytes taken (maybe fewer than len), AGAIN or FAIL. */
int onyx_ssh_write(struct onyx_ssh *s, const char *buf, size_t len, size_t *n);

/** Closes (without waiting for the peer) and frees. Accepts NULL. */
void onyx_ssh_free(struct onyx_ssh *s);

#endif
