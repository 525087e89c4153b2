/*
 * Non-blocking SSH shell connection on libssh2 (see ssh.h). Every libssh2 call of the
 * driver is in this file.
 */
#include "ssh.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libssh2.h>
#include <openssl/evp.h>

#include "driver.h" /* fs_file_read */
#include "util/log.h"

#define SUBSYS "cli"

enum st {
    ST_RESOLVE, /* the name's lookup runs on a worker */
    ST_CONNECT,
    ST_HANDSHAKE,
    ST_HOSTKEY,
    ST_HOSTKEY_WAIT, /* the known_hosts check runs on a worker */
    ST_AUTHLIST,
    ST_KEYS_WAIT, /* the key files are read on a worker */
    ST_AUTH_PUBKEY,
    ST_AUTH_PASSWORD,
    ST_AUTH_KBDINT,
    ST_CHANNEL,
    ST_PTY,
    ST_SHELL,
    ST_OPEN,
};

struct bjob;

struct onyx_ssh {
    int fd;
    int wfd; /* eventfd: a worker's job for this connection is done (read while st waits) */
    struct bjob *job; /* the job in flight or done and not yet taken; shared with the worker */
    enum st st;
    LIBSSH2_SESSION *sess;
    LIBSSH2_CHANNEL *ch;
    char *host, *user, *password, *key_file, *known_hosts, *target;
    uint16_t port;
    bool accept_new;
    char methods[256];
    bool tried_pubkey, tried_password, tried_kbdint;
    /* The key pair read by a worker, held from ST_KEYS_WAIT until the publickey attempt
       ends, then wiped. pub is NULL when key_file has no ".pub" beside it. */
    char *priv, *pub;
    size_t privlen, publen;
};

/* ---------------- blocking calls, off the I/O thread ----------------
 *
 * A name lookup may take the resolver's whole timeout and a known_hosts file may sit on a
 * slow disk: both run on a small pool of worker threads, never on the thread that serves
 * every session. A job is shared by its connection and the pool (refs, under pool.lock);
 * the worker signals completion on its own dup of the connection's eventfd, so a
 * connection freed meanwhile (target removed) neither waits for the job nor is written to:
 * the job is dropped (unrun if still queued) when the worker is done with it. known_hosts
 * checks are serialized (kh_lock): two accept-new appends to one file must not race. The
 * key files of publickey authentication are read there too (libssh2's _fromfile calls
 * would fopen them on the I/O thread, and a FIFO there would hold every session). */

#define POOL_MAX 8 /* worker threads at most; more jobs queue */

enum bjob_kind { J_RESOLVE, J_HOSTKEY, J_KEYS };

struct bjob {
    enum bjob_kind kind;
    int efd;           /* owned: dup of the connection's wfd, written once when done */
    int refs;          /* under pool.lock: the connection's and the pool's */
    bool done;         /* under pool.lock */
    struct bjob *next; /* under pool.lock: the queue */
    /* inputs (owned copies) */
    char *host, *known_hosts, *target;
    char *key_file; /* J_KEYS */
    uint16_t port;
    bool accept_new;
    unsigned char *key; /* J_HOSTKEY: the server's host key blob */
    size_t klen;
    int ktype;
    char fp_new[80];
    /* outputs, read by the connection once done */
    int rc;
    char err[512];
    struct sockaddr_storage addr; /* J_RESOLVE: the first address */
    socklen_t addrlen;
    int family;
    char *priv, *pub; /* J_KEYS: the files' contents (wiped on free unless taken) */
    size_t privlen, publen;
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct bjob *head, *tail;
    int threads, idle;
    bool stop;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0, 0, false};
static pthread_mutex_t kh_lock = PTHREAD_MUTEX_INITIALIZER;

static void
wipe_free(char *p, size_t n)
{
    if (!p)
        return;
    explicit_bzero(p, n);
    free(p);
}

static void
bjob_free(struct bjob *j)
{
    if (j->efd >= 0)
        close(j->efd);
    wipe_free(j->priv, j->privlen);
    wipe_free(j->pub, j->publen);
    free(j->key_file);
    free(j->host);
    free(j->known_hosts);
    free(j->target);
    free(j->key);
    free(j);
}

/* Drops one reference; call with pool.lock held. */
static void
bjob_unref_locked(struct bjob *j)
{
    if (--j->refs == 0)
        bjob_free(j);
}

static void
bjob_release(struct bjob *j)
{
    if (!j)
        return;
    pthread_mutex_lock(&pool.lock);
    bjob_unref_locked(j);
    pthread_mutex_unlock(&pool.lock);
}

static void run_hostkey_job(struct bjob *j);

#define KEY_FILE_MAX (64u << 10) /* an OpenSSH or PEM private key is a few KiB */

/* Reads the key pair with the core's reader: a regular file only (a FIFO is refused, never
   waited on), bounded. A missing ".pub" is no error: libssh2 derives the public key. */
static void
run_keys_job(struct bjob *j)
{
    char key[300], pubpath[4096];
    struct stat st;
    snprintf(key, sizeof(key), "targets[%s].cli.key_file", j->target);
    j->rc = ONYX_SSH_FAIL_AUTH;
    if (fs_file_read(j->key_file, key, KEY_FILE_MAX, &j->priv, &j->privlen, j->err,
                     sizeof(j->err)) != 0)
        return;
    if ((size_t)snprintf(pubpath, sizeof(pubpath), "%s.pub", j->key_file) >= sizeof(pubpath)) {
        snprintf(j->err, sizeof(j->err), "%s: %s: path too long", key, j->key_file);
        return;
    }
    if (stat(pubpath, &st) != 0 && errno == ENOENT) {
        j->rc = ONYX_SSH_DONE;
        return;
    }
    if (fs_file_read(pubpath, key, KEY_FILE_MAX, &j->pub, &j->publen, j->err, sizeof(j->err)) != 0)
        return;
    j->rc = ONYX_SSH_DONE;
}

static void
run_resolve_job(struct bjob *j)
{
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char port[8];
    snprintf(port, sizeof(port), "%u", (unsigned)j->port);
    int gai = getaddrinfo(j->host, port, &hints, &ai);
    if (gai != 0 || !ai || ai->ai_addrlen > sizeof(j->addr)) {
        snprintf(j->err, sizeof(j->err), "cannot resolve %s: %s", j->host,
                 gai != 0 ? gai_strerror(gai) : "no usable address");
        j->rc = ONYX_SSH_FAIL;
    } else {
        memcpy(&j->addr, ai->ai_addr, ai->ai_addrlen);
        j->addrlen = ai->ai_addrlen;
        j->family = ai->ai_family;
        j->rc = ONYX_SSH_DONE;
    }
    if (ai)
        freeaddrinfo(ai);
}

/* Marks j done and wakes its connection (if it still has one). Call with pool.lock held. */
static void
bjob_finish_locked(struct bjob *j)
{
    j->done = true;
    uint64_t one = 1;
    ssize_t w = write(j->efd, &one, sizeof(one));
    (void)w;
    bjob_unref_locked(j);
}

static void *
pool_worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (!pool.head && !pool.stop) {
            pool.idle++;
            pthread_cond_wait(&pool.cond, &pool.lock);
            pool.idle--;
        }
        if (pool.stop)
            break;
        struct bjob *j = pool.head;
        pool.head = j->next;
        if (!pool.head)
            pool.tail = NULL;
        bool orphan = j->refs == 1; /* its connection is gone: nobody wants the answer */
        pthread_mutex_unlock(&pool.lock);
        if (!orphan) {
            if (j->kind == J_RESOLVE)
                run_resolve_job(j);
            else if (j->kind == J_KEYS)
                run_keys_job(j);
            else
                run_hostkey_job(j);
        }
        pthread_mutex_lock(&pool.lock);
        bjob_finish_locked(j);
    }
    pool.threads--;
    pthread_cond_broadcast(&pool.cond);
    pthread_mutex_unlock(&pool.lock);
    return NULL;
}

/* Queues j (taking the pool's reference); starts a worker when none is idle. */
static int
bjob_submit(struct bjob *j, char *errbuf, size_t errlen)
{
    pthread_mutex_lock(&pool.lock);
    if (pool.idle == 0 && pool.threads < POOL_MAX) {
        pthread_t th;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &a, pool_worker, NULL) == 0)
            pool.threads++;
        pthread_attr_destroy(&a);
    }
    if (pool.threads == 0) {
        pthread_mutex_unlock(&pool.lock);
        snprintf(errbuf, errlen, "cannot start a worker thread");
        return -1;
    }
    j->next = NULL;
    if (pool.tail)
        pool.tail->next = j;
    else
        pool.head = j;
    pool.tail = j;
    pthread_cond_signal(&pool.cond);
    pthread_mutex_unlock(&pool.lock);
    return 0;
}

/* A job for s (refs: s and the pool), signalling on a dup of s->wfd. */
static struct bjob *
bjob_new(struct onyx_ssh *s, enum bjob_kind kind)
{
    struct bjob *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    j->kind = kind;
    j->refs = 2;
    j->port = s->port;
    j->accept_new = s->accept_new;
    j->efd = fcntl(s->wfd, F_DUPFD_CLOEXEC, 0);
    j->host = strdup(s->host);
    j->target = strdup(s->target);
    j->known_hosts = s->known_hosts ? strdup(s->known_hosts) : NULL;
    if (j->efd < 0 || !j->host || !j->target || (s->known_hosts && !j->known_hosts)) {
        bjob_free(j);
        return NULL;
    }
    return j;
}

/* Whether s's job is done; then the eventfd is reset for the next one. */
static bool
bjob_take(struct onyx_ssh *s)
{
    pthread_mutex_lock(&pool.lock);
    bool done = s->job->done;
    pthread_mutex_unlock(&pool.lock);
    if (done) {
        uint64_t v;
        ssize_t r = read(s->wfd, &v, sizeof(v));
        (void)r;
    }
    return done;
}

int
onyx_ssh_global_init(char *errbuf, size_t errlen)
{
    pthread_mutex_lock(&pool.lock);
    pool.stop = false;
    pthread_mutex_unlock(&pool.lock);
    int rc = libssh2_init(0);
    if (rc != 0) {
        snprintf(errbuf, errlen, "libssh2_init failed (%d)", rc);
        return -1;
    }
    return 0;
}

void
onyx_ssh_global_cleanup(void)
{
    /* Workers stuck in a name lookup cannot be interrupted: wait 2 s for them, then leave
       them (detached; they touch nothing of libssh2 after a lookup) and libssh2 set up. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 2;
    pthread_mutex_lock(&pool.lock);
    pool.stop = true;
    pthread_cond_broadcast(&pool.cond);
    while (pool.threads > 0 && pthread_cond_timedwait(&pool.cond, &pool.lock, &ts) == 0)
        ;
    for (struct bjob *j = pool.head, *n; j; j = n) {
        n = j->next;
        bjob_finish_locked(j);
    }
    pool.head = pool.tail = NULL;
    bool idle = pool.threads == 0;
    pthread_mutex_unlock(&pool.lock);
    if (idle)
        libssh2_exit();
}

static char *
dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* Opens the socket and starts the TCP connect to a resolved address. */
static int
start_tcp(struct onyx_ssh *s, int family, const struct sockaddr *addr, socklen_t alen, char *errbuf,
          size_t errlen)
{
    s->fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->fd < 0) {
        snprintf(errbuf, errlen, "socket: %s", strerror(errno));
        return ONYX_SSH_FAIL;
    }
    if (connect(s->fd, addr, alen) != 0 && errno != EINPROGRESS) {
        snprintf(errbuf, errlen, "connect to %s:%u: %s", s->host, (unsigned)s->port,
                 strerror(errno));
        return ONYX_SSH_FAIL;
    }
    s->st = ST_CONNECT;
    return ONYX_SSH_DONE;
}

struct onyx_ssh *
onyx_ssh_new(const struct onyx_ssh_params *p, char *errbuf, size_t errlen)
{
    struct onyx_ssh *s = calloc(1, sizeof(*s));
    struct addrinfo *ai = NULL;
    if (!s) {
        snprintf(errbuf, errlen, "out of memory");
        return NULL;
    }
    s->fd = -1;
    s->wfd = -1;
    s->port = p->port;
    s->accept_new = p->accept_new;
    s->host = dup_or_null(p->host);
    s->user = dup_or_null(p->username);
    s->password = dup_or_null(p->password);
    s->key_file = dup_or_null(p->key_file);
    s->known_hosts = dup_or_null(p->known_hosts);
    s->target = dup_or_null(p->log_target ? p->log_target : p->host);
    if (!s->host || !s->user || !s->target || (p->password && !s->password) ||
        (p->key_file && !s->key_file) || (p->known_hosts && !s->known_hosts)) {
        snprintf(errbuf, errlen, "out of memory");
        goto fail;
    }
    s->wfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->wfd < 0) {
        snprintf(errbuf, errlen, "eventfd: %s", strerror(errno));
        goto fail;
    }
    /* A numeric address needs no lookup: connect at once. A name goes to a worker. */
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | AI_NUMERICHOST};
    char port[8];
    snprintf(port, sizeof(port), "%u", (unsigned)p->port);
    if (getaddrinfo(p->host, port, &hints, &ai) == 0 && ai) {
        if (start_tcp(s, ai->ai_family, ai->ai_addr, ai->ai_addrlen, errbuf, errlen) != 0)
            goto fail;
        freeaddrinfo(ai);
        return s;
    }
    s->job = bjob_new(s, J_RESOLVE);
    if (!s->job) {
        snprintf(errbuf, errlen, "out of memory");
        goto fail;
    }
    if (bjob_submit(s->job, errbuf, errlen) != 0) {
        bjob_free(s->job);
        s->job = NULL;
        goto fail;
    }
    s->st = ST_RESOLVE;
    return s;
fail:
    if (ai)
        freeaddrinfo(ai);
    onyx_ssh_free(s);
    return NULL;
}

static bool
waits_for_worker(const struct onyx_ssh *s)
{
    return s->st == ST_RESOLVE || s->st == ST_HOSTKEY_WAIT || s->st == ST_KEYS_WAIT;
}

int
onyx_ssh_fd(const struct onyx_ssh *s)
{
    return waits_for_worker(s) ? s->wfd : s->fd;
}

const char *
onyx_ssh_phase(const struct onyx_ssh *s)
{
    switch (s->st) {
    case ST_RESOLVE:
        return "resolving the host name";
    case ST_CONNECT:
        return "connecting";
    case ST_HANDSHAKE:
        return "in the SSH handshake";
    case ST_HOSTKEY:
    case ST_HOSTKEY_WAIT:
        return "checking the host key";
    case ST_OPEN:
        return "open";
    default:
        return "logging in";
    }
}

uint32_t
onyx_ssh_events(const struct onyx_ssh *s)
{
    if (waits_for_worker(s))
        return EPOLLIN;
    if (s->st == ST_CONNECT)
        return EPOLLOUT;
    uint32_t ev = EPOLLIN;
    if (s->sess && (libssh2_session_block_directions(s->sess) & LIBSSH2_SESSION_BLOCK_OUTBOUND))
        ev |= EPOLLOUT;
    return ev;
}

static void
kbdint_cb(const char *name, int name_len, const char *instruction, int instruction_len,
          int num_prompts, const LIBSSH2_USERAUTH_KBDINT_PROMPT *prompts,
          LIBSSH2_USERAUTH_KBDINT_RESPONSE *responses, void **abstract)
{
    (void)name;
    (void)name_len;
    (void)instruction;
    (void)instruction_len;
    (void)prompts;
    struct onyx_ssh *s = *abstract;
    /* Every prompt of a network OS's keyboard-interactive login is the password prompt. */
    for (int i = 0; i < num_prompts; i++) {
        responses[i].text = strdup(s->password ? s->password : "");
        responses[i].length = responses[i].text ? (unsigned)strlen(responses[i].text) : 0;
    }
}

static int
knownhost_keytype(int hostkey_type)
{
    switch (hostkey_type) {
    case LIBSSH2_HOSTKEY_TYPE_RSA:
        return LIBSSH2_KNOWNHOST_KEY_SSHRSA;
    case LIBSSH2_HOSTKEY_TYPE_DSS:
        return LIBSSH2_KNOWNHOST_KEY_SSHDSS;
#ifdef LIBSSH2_HOSTKEY_TYPE_ECDSA_256
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_256:
        return LIBSSH2_KNOWNHOST_KEY_ECDSA_256;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_384:
        return LIBSSH2_KNOWNHOST_KEY_ECDSA_384;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_521:
        return LIBSSH2_KNOWNHOST_KEY_ECDSA_521;
#endif
#ifdef LIBSSH2_HOSTKEY_TYPE_ED25519
    case LIBSSH2_HOSTKEY_TYPE_ED25519:
        return LIBSSH2_KNOWNHOST_KEY_ED25519;
#endif
    default:
        return LIBSSH2_KNOWNHOST_KEY_UNKNOWN;
    }
}

/* "SHA256:<base64 without padding>" of a raw hash. */
static void
fingerprint(const unsigned char *hash, size_t n, char *out, size_t outlen)
{
    unsigned char b64[64];
    int w = EVP_EncodeBlock(b64, hash, (int)n);
    while (w > 0 && b64[w - 1] == '=')
        w--;
    snprintf(out, outlen, "SHA256:%.*s", w, (const char *)b64);
}

/* The key type name at the start of an SSH public key blob ("ssh-ed25519"), or "?". */
static void
blob_type(const unsigned char *blob, size_t n, char *out, size_t outlen)
{
    snprintf(out, outlen, "?");
    if (n < 4)
        return;
    size_t tl = (size_t)blob[0] << 24 | (size_t)blob[1] << 16 | (size_t)blob[2] << 8 | blob[3];
    if (tl == 0 || tl > n - 4 || tl >= outlen)
        return;
    for (size_t i = 0; i < tl; i++)
        if (blob[4 + i] <= ' ' || blob[4 + i] > '~')
            return;
    snprintf(out, outlen, "%.*s", (int)tl, (const char *)blob + 4);
}

/* The SHA256 fingerprint and key type of a known_hosts entry's base64 key blob. */
static void
stored_key(const char *key_b64, char *fp, size_t fplen, char *type, size_t typelen)
{
    size_t n = strlen(key_b64);
    unsigned char *raw = malloc(n + 4);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    snprintf(fp, fplen, "(unreadable)");
    snprintf(type, typelen, "?");
    if (!raw)
        return;
    int len = EVP_DecodeBlock(raw, (const unsigned char *)key_b64, (int)n);
    if (len > 0) {
        if (n >= 1 && key_b64[n - 1] == '=')
            len--;
        if (n >= 2 && key_b64[n - 2] == '=')
            len--;
        if (EVP_Digest(raw, (size_t)len, md, &mdlen, EVP_sha256(), NULL) == 1)
            fingerprint(md, mdlen, fp, fplen);
        blob_type(raw, (size_t)len, type, typelen);
    }
    free(raw);
}

/* The bytes of a known_hosts file as read, to append to (never reformatted by libssh2). */
struct kh_file {
    char *data; /* NUL-terminated */
    size_t len;
    bool exists;
    struct stat st; /* when it exists */
};

#define KH_MAX_BYTES (64u << 20)

/* Reads the whole file into f (a missing file is empty, f->exists false). */
static int
kh_read(const char *path, struct kh_file *f, char *errbuf, size_t errlen)
{
    memset(f, 0, sizeof(*f));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        f->data = calloc(1, 1);
        if (!f->data) {
            snprintf(errbuf, errlen, "out of memory");
            return -1;
        }
        return 0;
    }
    if (fd < 0 || fstat(fd, &f->st) != 0) {
        snprintf(errbuf, errlen, "cannot read known_hosts %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    f->exists = true;
    size_t cap = 4096;
    const char *oom = "out of memory";
    f->data = malloc(cap);
    if (!f->data)
        snprintf(errbuf, errlen, "%s", oom);
    while (f->data) {
        if (f->len + 1 == cap) {
            char *d = cap > KH_MAX_BYTES ? NULL : realloc(f->data, cap * 2);
            if (!d) {
                if (cap > KH_MAX_BYTES)
                    snprintf(errbuf, errlen, "known_hosts %s is larger than %u MiB", path,
                             KH_MAX_BYTES >> 20);
                else
                    snprintf(errbuf, errlen, "%s", oom);
                break;
            }
            f->data = d;
            cap *= 2;
        }
        ssize_t r = read(fd, f->data + f->len, cap - 1 - f->len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(errbuf, errlen, "cannot read known_hosts %s: %s", path, strerror(errno));
            break;
        }
        if (r == 0) {
            f->data[f->len] = '\0';
            close(fd);
            return 0;
        }
        f->len += (size_t)r;
    }
    close(fd);
    free(f->data);
    f->data = NULL;
    return -1;
}

/* Feeds every line of f to libssh2, one at a time, so that a line it cannot parse is
 * known by its number: the whole file is then refused (libssh2_knownhost_readfile would
 * stop there and the hosts after it would look unknown). Blank lines and comments are
 * skipped here. Lines with a marker (@cert-authority, @revoked) are refused: libssh2 does
 * not know them and would read the marker as a host name, silently ignoring a revocation.
 * So is a line libssh2 accepts but takes no host from. */
static int
kh_parse(struct onyx_ssh *s, LIBSSH2_KNOWNHOSTS *kh, const struct kh_file *f, char *errbuf,
         size_t errlen)
{
    char *line = NULL;
    size_t cap = 0;
    unsigned long no = 0;
    int rc = 0;
    struct libssh2_knownhost *last = NULL; /* the last entry read so far */
    for (size_t off = 0; off < f->len && rc == 0;) {
        const char *p = f->data + off;
        const char *nl = memchr(p, '\n', f->len - off);
        size_t n = nl ? (size_t)(nl - p) : f->len - off;
        off += n + (nl ? 1 : 0);
        no++;
        size_t i = 0;
        while (i < n && (p[i] == ' ' || p[i] == '\t'))
            i++;
        if (i == n || p[i] == '#' || (i + 1 == n && p[i] == '\r'))
            continue;
        const char *why = NULL;
        if (memchr(p, '\0', n))
            why = "it contains a NUL byte";
        else if (p[i] == '@')
            why = "markers (@cert-authority, @revoked) are not supported";
        if (!why) {
            /* libssh2 wants the line as fgets gives it: newline and NUL at the end. */
            if (n + 2 > cap) {
                char *l = realloc(line, n + 2);
                if (!l) {
                    snprintf(errbuf, errlen, "out of memory");
                    rc = ONYX_SSH_FAIL;
                    break;
                }
                line = l;
                cap = n + 2;
            }
            memcpy(line, p, n);
            line[n] = '\n';
            line[n + 1] = '\0';
            if (libssh2_knownhost_readline(kh, line, n + 1, LIBSSH2_KNOWNHOST_FILE_OPENSSH) != 0) {
                char *msg = NULL;
                libssh2_session_last_error(s->sess, &msg, NULL, 0);
                why = msg && msg[0] ? msg : "libssh2 refuses it";
            } else {
                /* libssh2 also says yes to lines it drops (1.10: host names of one or two
                   characters, a |1| hash without its second '|'): that host's key would
                   be unknown. Entries are appended in order: this line's follow last. */
                bool got = false;
                struct libssh2_knownhost *e = NULL;
                while (libssh2_knownhost_get(kh, &e, last) == 0) {
                    last = e;
                    got = true;
                }
                if (!got)
                    why = "libssh2 takes no host from it (a name of 1-2 characters or a "
                          "malformed |1| hash)";
            }
        }
        if (why) {
            snprintf(errbuf, errlen, "known_hosts %s line %lu cannot be parsed: %s", s->known_hosts,
                     no, why);
            rc = ONYX_SSH_FAIL_HOSTKEY;
        }
    }
    free(line);
    return rc;
}

static int
write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Appends one line to the file's bytes as read: written to a temporary file in the same
 * directory, synced, then renamed over the file (a reader sees the old or the new file,
 * never a part; every other byte is kept). The file's mode (and owner, where allowed) is
 * kept; a new file gets 0644. A symbolic link is followed: the file it points to is
 * replaced, the link stays. */
static int
kh_append(const char *path, const struct kh_file *f, const char *line, size_t n, char *errbuf,
          size_t errlen)
{
    if (f->exists && !S_ISREG(f->st.st_mode)) {
        /* /dev/null, say: never replaced by a file. */
        snprintf(errbuf, errlen, "cannot record the host key in %s: not a regular file", path);
        return -1;
    }
    char *real = f->exists ? realpath(path, NULL) : NULL;
    const char *target = real ? real : path;
    size_t tl = strlen(target);
    char *tmp = malloc(tl + 16);
    char *dir = malloc(tl + 2);
    int fd = -1, rc = -1;
    const char *step = "out of memory";
    int err = 0;
    if (!tmp || !dir)
        goto out;
    snprintf(tmp, tl + 16, "%s.tmp.XXXXXX", target);
    fd = mkstemp(tmp);
    step = "mkstemp";
    if (fd < 0)
        goto fail;
    bool need_nl = f->len > 0 && f->data[f->len - 1] != '\n';
    step = "write";
    if (write_all(fd, f->data, f->len) != 0 || (need_nl && write_all(fd, "\n", 1) != 0) ||
        write_all(fd, line, n) != 0)
        goto fail;
    step = "chmod";
    if (fchmod(fd, f->exists ? (f->st.st_mode & 07777) : 0644) != 0)
        goto fail;
    if (f->exists && (f->st.st_uid != geteuid() || f->st.st_gid != getegid()))
        (void)!fchown(fd, f->st.st_uid, f->st.st_gid); /* best effort: root may, others not */
    step = "fsync";
    if (fsync(fd) != 0)
        goto fail;
    step = "close";
    if (close(fd) != 0) {
        fd = -1;
        goto fail;
    }
    fd = -1;
    step = "rename";
    if (rename(tmp, target) != 0)
        goto fail;
    /* The rename itself is durable once the directory is synced. */
    memcpy(dir, target, tl + 1);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, tl + 2, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    rc = 0;
    goto out;
fail:
    err = errno;
    if (fd >= 0)
        close(fd);
    if (tmp && strcmp(step, "mkstemp") != 0)
        unlink(tmp);
out:
    if (rc != 0)
        snprintf(errbuf, errlen, "cannot record the host key in %s: %s%s%s", path, step,
                 err ? ": " : "", err ? strerror(err) : "");
    free(real);
    free(tmp);
    free(dir);
    return rc;
}

/* Records a new host's key: the line libssh2 formats for it, appended to the file. */
static int
record_new_key(struct onyx_ssh *s, LIBSSH2_KNOWNHOSTS *kh, const struct kh_file *f, const char *key,
               size_t klen, int kt, const char *fp_new, char *errbuf, size_t errlen)
{
    char name[300];
    if (s->port == 22)
        snprintf(name, sizeof(name), "%s", s->host);
    else
        snprintf(name, sizeof(name), "[%s]:%u", s->host, (unsigned)s->port);
    struct libssh2_knownhost *added = NULL;
    if (libssh2_knownhost_addc(kh, name, NULL, key, klen, NULL, 0,
                               LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | kt,
                               &added) != 0 ||
        !added) {
        snprintf(errbuf, errlen, "cannot record the host key in %s: libssh2 refused it",
                 s->known_hosts);
        return ONYX_SSH_FAIL_HOSTKEY;
    }
    size_t cap = 1024, n = 0;
    char *line = NULL;
    for (;;) {
        char *l = realloc(line, cap);
        if (!l) {
            free(line);
            snprintf(errbuf, errlen, "out of memory");
            return ONYX_SSH_FAIL;
        }
        line = l;
        int r =
            libssh2_knownhost_writeline(kh, added, line, cap, &n, LIBSSH2_KNOWNHOST_FILE_OPENSSH);
        if (r == 0)
            break;
        if (r != LIBSSH2_ERROR_BUFFER_TOO_SMALL || n + 1 <= cap || cap > (1u << 20)) {
            free(line);
            snprintf(errbuf, errlen, "cannot record the host key in %s: libssh2 cannot format it",
                     s->known_hosts);
            return ONYX_SSH_FAIL_HOSTKEY;
        }
        cap = n + 1;
    }
    int r = kh_append(s->known_hosts, f, line, n, errbuf, errlen);
    free(line);
    if (r != 0)
        return ONYX_SSH_FAIL_HOSTKEY;
    fs_log(FS_LOG_WARN, SUBSYS, "target %s: recorded new host key %s of %s in %s (accept-new)",
           s->target, fp_new, name, s->known_hosts);
    return ONYX_SSH_DONE;
}

/* Checks (and under accept-new records) the server's key, on a worker: s is a stand-in
 * whose session only serves libssh2's known_hosts calls. */
static int
check_host_key(struct onyx_ssh *s, const char *key, size_t klen, int ktype, const char *fp_new,
               char *errbuf, size_t errlen)
{
    char fp_old[80], type_new[64], type_old[64];
    if (!key || !s->known_hosts) {
        snprintf(errbuf, errlen, "no host key or no known_hosts file");
        return ONYX_SSH_FAIL_HOSTKEY;
    }
    blob_type((const unsigned char *)key, klen, type_new, sizeof(type_new));
    struct kh_file f;
    if (kh_read(s->known_hosts, &f, errbuf, errlen) != 0)
        return ONYX_SSH_FAIL_HOSTKEY;
    LIBSSH2_KNOWNHOSTS *kh = libssh2_knownhost_init(s->sess);
    if (!kh) {
        free(f.data);
        snprintf(errbuf, errlen, "out of memory");
        return ONYX_SSH_FAIL;
    }
    /* A missing file is an empty list (accept-new then creates it); one that does not
       parse whole is refused, whatever the policy. */
    int rc = kh_parse(s, kh, &f, errbuf, errlen);
    if (rc != 0)
        goto out;
    rc = ONYX_SSH_FAIL_HOSTKEY;
    int kt = knownhost_keytype(ktype);
    struct libssh2_knownhost *found = NULL;
    int r = libssh2_knownhost_checkp(
        kh, s->host, s->port, key, klen,
        LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | kt, &found);
    if (r == LIBSSH2_KNOWNHOST_CHECK_NOTFOUND) {
        /* libssh2 compares only keys of the presented type: a host known by a key of
           another type looks new. Any key type (0) finds it: then it is a changed key too,
           never a new host (accept-new only records hosts that have no key at all). A match
           there is the very same key blob (which names its own type) under another type
           name on its line: the key that was trusted, so a match. */
        found = NULL;
        r = libssh2_knownhost_checkp(kh, s->host, s->port, key, klen,
                                     LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW,
                                     &found);
    }
    switch (r) {
    case LIBSSH2_KNOWNHOST_CHECK_MATCH:
        rc = ONYX_SSH_DONE;
        break;
    case LIBSSH2_KNOWNHOST_CHECK_MISMATCH:
        stored_key(found && found->key ? found->key : "", fp_old, sizeof(fp_old), type_old,
                   sizeof(type_old));
        fs_logkv(FS_LOG_ERROR, SUBSYS, NULL,
                 "target %s: HOST KEY CHANGED for %s port %u: known_hosts %s has a %s key %s, "
                 "the server presented a %s key %s; refused",
                 s->target, s->host, (unsigned)s->port, s->known_hosts, type_old, fp_old, type_new,
                 fp_new);
        snprintf(errbuf, errlen, "host key changed (known %s %s, presented %s %s)", type_old,
                 fp_old, type_new, fp_new);
        break;
    case LIBSSH2_KNOWNHOST_CHECK_NOTFOUND:
        if (!s->accept_new) {
            snprintf(errbuf, errlen, "host key %s not in %s (host_key_policy strict)", fp_new,
                     s->known_hosts);
            break;
        }
        rc = record_new_key(s, kh, &f, key, klen, kt, fp_new, errbuf, errlen);
        break;
    default:
        snprintf(errbuf, errlen, "host key check failed");
        break;
    }
out:
    libssh2_knownhost_free(kh);
    free(f.data);
    return rc;
}

static void
run_hostkey_job(struct bjob *j)
{
    struct onyx_ssh stand_in = {.fd = -1,
                                .wfd = -1,
                                .host = j->host,
                                .known_hosts = j->known_hosts,
                                .target = j->target,
                                .port = j->port,
                                .accept_new = j->accept_new};
    pthread_mutex_lock(&kh_lock);
    stand_in.sess = libssh2_session_init();
    if (!stand_in.sess) {
        snprintf(j->err, sizeof(j->err), "out of memory");
        j->rc = ONYX_SSH_FAIL;
    } else {
        j->rc = check_host_key(&stand_in, (const char *)j->key, j->klen, j->ktype, j->fp_new,
                               j->err, sizeof(j->err));
        libssh2_session_free(stand_in.sess);
    }
    pthread_mutex_unlock(&kh_lock);
}

/* Hands the host key check to a worker: ONYX_SSH_AGAIN, or a failure. */
static int
submit_hostkey(struct onyx_ssh *s, char *errbuf, size_t errlen)
{
    size_t klen = 0;
    int ktype = 0;
    const char *key = libssh2_session_hostkey(s->sess, &klen, &ktype);
    const char *hash = libssh2_hostkey_hash(s->sess, LIBSSH2_HOSTKEY_HASH_SHA256);
    if (!key || !s->known_hosts) {
        snprintf(errbuf, errlen, "no host key or no known_hosts file");
        return ONYX_SSH_FAIL_HOSTKEY;
    }
    struct bjob *j = bjob_new(s, J_HOSTKEY);
    if (!j || !(j->key = malloc(klen ? klen : 1))) {
        if (j)
            bjob_free(j);
        snprintf(errbuf, errlen, "out of memory");
        return ONYX_SSH_FAIL;
    }
    memcpy(j->key, key, klen);
    j->klen = klen;
    j->ktype = ktype;
    snprintf(j->fp_new, sizeof(j->fp_new), "(none)");
    if (hash)
        fingerprint((const unsigned char *)hash, 32, j->fp_new, sizeof(j->fp_new));
    if (bjob_submit(j, errbuf, errlen) != 0) {
        bjob_free(j);
        return ONYX_SSH_FAIL;
    }
    s->job = j;
    s->st = ST_HOSTKEY_WAIT;
    return ONYX_SSH_AGAIN;
}

/* Hands the key files' read to a worker: ONYX_SSH_AGAIN (ST_KEYS_WAIT), or a failure. */
static int
submit_keys(struct onyx_ssh *s, char *errbuf, size_t errlen)
{
    struct bjob *j = bjob_new(s, J_KEYS);
    if (!j || !(j->key_file = strdup(s->key_file))) {
        if (j)
            bjob_free(j);
        snprintf(errbuf, errlen, "out of memory");
        return ONYX_SSH_FAIL;
    }
    if (bjob_submit(j, errbuf, errlen) != 0) {
        bjob_free(j);
        return ONYX_SSH_FAIL;
    }
    s->job = j;
    s->st = ST_KEYS_WAIT;
    return ONYX_SSH_AGAIN;
}

static void
drop_keys(struct onyx_ssh *s)
{
    wipe_free(s->priv, s->privlen);
    wipe_free(s->pub, s->publen);
    s->priv = s->pub = NULL;
    s->privlen = s->publen = 0;
}

static bool
offered(const struct onyx_ssh *s, const char *m)
{
    size_t n = strlen(m);
    for (const char *p = s->methods; (p = strstr(p, m)); p += n)
        if ((p == s->methods || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

/* The next auth method to try, or ST_CHANNEL-less failure. */
static int
next_auth(struct onyx_ssh *s, char *errbuf, size_t errlen)
{
    if (s->key_file && !s->tried_pubkey && offered(s, "publickey"))
        return submit_keys(s, errbuf, errlen);
    if (s->password && !s->tried_password && offered(s, "password")) {
        s->st = ST_AUTH_PASSWORD;
        return ONYX_SSH_AGAIN;
    }
    if (s->password && !s->tried_kbdint && offered(s, "keyboard-interactive")) {
        s->st = ST_AUTH_KBDINT;
        return ONYX_SSH_AGAIN;
    }
    snprintf(errbuf, errlen, "authentication refused (server offers %s)", s->methods);
    return ONYX_SSH_FAIL_AUTH;
}

static int
lib_error(struct onyx_ssh *s, const char *what, char *errbuf, size_t errlen)
{
    char *msg = NULL;
    libssh2_session_last_error(s->sess, &msg, NULL, 0);
    snprintf(errbuf, errlen, "%s: %s", what, msg ? msg : "failed");
    return ONYX_SSH_FAIL;
}

int
onyx_ssh_establish(struct onyx_ssh *s, char *errbuf, size_t errlen)
{
    for (;;) {
        int r;
        switch (s->st) {
        case ST_RESOLVE: {
            if (!bjob_take(s))
                return ONYX_SSH_AGAIN;
            struct bjob *j = s->job;
            s->job = NULL;
            r = j->rc;
            if (r == ONYX_SSH_DONE)
                r = start_tcp(s, j->family, (const struct sockaddr *)&j->addr, j->addrlen, errbuf,
                              errlen);
            else
                snprintf(errbuf, errlen, "%s", j->err);
            bjob_release(j);
            if (r != ONYX_SSH_DONE)
                return r;
            break;
        }
        case ST_CONNECT: {
            int err = 0;
            socklen_t el = sizeof(err);
            if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
                err = errno;
            if (err == EINPROGRESS || err == EALREADY)
                return ONYX_SSH_AGAIN;
            if (err != 0) {
                snprintf(errbuf, errlen, "connect to %s:%u: %s", s->host, (unsigned)s->port,
                         strerror(err));
                return ONYX_SSH_FAIL;
            }
            s->sess = libssh2_session_init_ex(NULL, NULL, NULL, s);
            if (!s->sess) {
                snprintf(errbuf, errlen, "out of memory");
                return ONYX_SSH_FAIL;
            }
            libssh2_session_set_blocking(s->sess, 0);
            s->st = ST_HANDSHAKE;
            break;
        }
        case ST_HANDSHAKE:
            r = libssh2_session_handshake(s->sess, s->fd);
            if (r == LIBSSH2_ERROR_EAGAIN)
                return ONYX_SSH_AGAIN;
            if (r != 0)
                return lib_error(s, "SSH handshake", errbuf, errlen);
            s->st = ST_HOSTKEY;
            break;
        case ST_HOSTKEY:
            return submit_hostkey(s, errbuf, errlen);
        case ST_HOSTKEY_WAIT: {
            if (!bjob_take(s))
                return ONYX_SSH_AGAIN;
            struct bjob *j = s->job;
            s->job = NULL;
            r = j->rc;
            if (r != ONYX_SSH_DONE)
                snprintf(errbuf, errlen, "%s", j->err);
            bjob_release(j);
            if (r != ONYX_SSH_DONE)
                return r;
            s->st = ST_AUTHLIST;
            break;
        }
        case ST_AUTHLIST: {
            const char *list = libssh2_userauth_list(s->sess, s->user, (unsigned)strlen(s->user));
            if (!list) {
                if (libssh2_userauth_authenticated(s->sess)) {
                    s->st = ST_CHANNEL;
                    break;
                }
                if (libssh2_session_last_errno(s->sess) == LIBSSH2_ERROR_EAGAIN)
                    return ONYX_SSH_AGAIN;
                return lib_error(s, "SSH auth list", errbuf, errlen);
            }
            snprintf(s->methods, sizeof(s->methods), "%s", list);
            r = next_auth(s, errbuf, errlen);
            if (r != ONYX_SSH_AGAIN)
                return r;
            break;
        }
        case ST_KEYS_WAIT: {
            if (!bjob_take(s))
                return ONYX_SSH_AGAIN;
            struct bjob *j = s->job;
            s->job = NULL;
            r = j->rc;
            if (r == ONYX_SSH_DONE) {
                /* The buffers move to the connection (the job no longer wipes them). */
                s->priv = j->priv, s->privlen = j->privlen;
                s->pub = j->pub, s->publen = j->publen;
                j->priv = j->pub = NULL;
                s->st = ST_AUTH_PUBKEY;
            } else {
                snprintf(errbuf, errlen, "%s", j->err);
            }
            bjob_release(j);
            if (r != ONYX_SSH_DONE)
                return r;
            break;
        }
        case ST_AUTH_PUBKEY: {
            /* libssh2 keeps what it parsed across EAGAIN calls, from these same buffers:
               they are dropped only once the attempt is over. */
            r = libssh2_userauth_publickey_frommemory(s->sess, s->user, strlen(s->user), s->pub,
                                                      s->publen, s->priv, s->privlen, NULL);
            if (r == LIBSSH2_ERROR_EAGAIN)
                return ONYX_SSH_AGAIN;
            s->tried_pubkey = true;
            drop_keys(s);
            if (r == 0) {
                s->st = ST_CHANNEL;
                break;
            }
            if (r == LIBSSH2_ERROR_FILE) {
                /* the key data (the files were read) could not be parsed */
                snprintf(errbuf, errlen,
                         "targets[%s].cli.key_file: %s is not a private key libssh2 can read "
                         "(or it needs a passphrase)",
                         s->target, s->key_file);
                return ONYX_SSH_FAIL_AUTH;
            }
            r = next_auth(s, errbuf, errlen);
            if (r != ONYX_SSH_AGAIN)
                return r;
            break;
        }
        case ST_AUTH_PASSWORD:
            r = libssh2_userauth_password(s->sess, s->user, s->password);
            if (r == LIBSSH2_ERROR_EAGAIN)
                return ONYX_SSH_AGAIN;
            s->tried_password = true;
            if (r == 0) {
                s->st = ST_CHANNEL;
                break;
            }
            if (r != LIBSSH2_ERROR_AUTHENTICATION_FAILED && r != LIBSSH2_ERROR_PASSWORD_EXPIRED)
                return lib_error(s, "SSH password auth", errbuf, errlen);
            r = next_auth(s, errbuf, errlen);
            if (r != ONYX_SSH_AGAIN)
                return r;
            break;
        case ST_AUTH_KBDINT:
            r = libssh2_userauth_keyboard_interactive(s->sess, s->user, kbdint_cb);
            if (r == LIBSSH2_ERROR_EAGAIN)
                return ONYX_SSH_AGAIN;
            s->tried_kbdint = true;
            if (r == 0) {
                s->st = ST_CHANNEL;
                break;
            }
            if (r != LIBSSH2_ERROR_AUTHENTICATION_FAILED)
                return lib_error(s, "SSH keyboard-interactive auth", errbuf, errlen);
            r = next_auth(s, errbuf, errlen);
            if (r != ONYX_SSH_AGAIN)
                return r;
            break;
        case ST_CHANNEL:
            /* Authenticated: the password is not needed any more. */
            if (s->password) {
                explicit_bzero(s->password, strlen(s->password));
                free(s->password);
                s->password = NULL;
            }
            s->ch = libssh2_channel_open_session(s->sess);
            if (!s->ch) {
                if (libssh2_session_last_errno(s->sess) == LIBSSH2_ERROR_EAGAIN)
                    return ONYX_SSH_AGAIN;
                return lib_error(s, "SSH channel", errbuf, errlen);
            }
            /* A pty merges the shell's stderr into its output; anything sent as extended
               data anyway is dropped by libssh2 (its window given back), so a read need
               not drain it first: that cost two socket reads per turn. The mode is set
               before the call's flush, which cannot wait on a channel with nothing yet. */
            (void)libssh2_channel_handle_extended_data2(s->ch,
                                                        LIBSSH2_CHANNEL_EXTENDED_DATA_IGNORE);
            s->st = ST_PTY;
            break;
        case ST_PTY:
            /* Wide enough that no output line is wrapped; paging is switched off by command. */
            r = libssh2_channel_request_pty_ex(s->ch, "vt100", 5, NULL, 0, 511, 24, 0, 0);
            if (r == LIBSSH2_ERROR_EAGAIN)
                return ONYX_SSH_AGAIN;
            if (r != 0)
                return lib_error(s, "SSH pty", errbuf, errlen);
            s->st = ST_SHELL;
            break;
        case ST_SHELL:
            r = libssh2_channel_shell(s->ch);
            if (r == LIBSSH2_ERROR_EAGAIN)
                return ONYX_SSH_AGAIN;
            if (r != 0)
                return lib_error(s, "SSH shell", errbuf, errlen);
            s->st = ST_OPEN;
            return ONYX_SSH_DONE;
        case ST_OPEN:
            return ONYX_SSH_DONE;
        }
    }
}

int
onyx_ssh_read(struct onyx_ssh *s, char *buf, size_t len, size_t *n)
{
    *n = 0;
    if (s->st != ST_OPEN)
        return ONYX_SSH_FAIL;
    ssize_t r = libssh2_channel_read(s->ch, buf, len);
    if (r > 0) {
        *n = (size_t)r;
        return ONYX_SSH_DONE;
    }
    if (r == LIBSSH2_ERROR_EAGAIN || (r == 0 && !libssh2_channel_eof(s->ch)))
        return ONYX_SSH_AGAIN;
    if (r == 0)
        return ONYX_SSH_EOF;
    return ONYX_SSH_FAIL;
}

int
onyx_ssh_write(struct onyx_ssh *s, const char *buf, size_t len, size_t *n)
{
    *n = 0;
    if (s->st != ST_OPEN)
        return ONYX_SSH_FAIL;
    ssize_t r = libssh2_channel_write(s->ch, buf, len);
    if (r >= 0) {
        *n = (size_t)r;
        return ONYX_SSH_DONE;
    }
    if (r == LIBSSH2_ERROR_EAGAIN)
        return ONYX_SSH_AGAIN;
    return ONYX_SSH_FAIL;
}

void
onyx_ssh_free(struct onyx_ssh *s)
{
    if (!s)
        return;
    if (s->sess) {
        /* Best effort goodbye, then the socket goes down so nothing below can wait on it. */
        (void)libssh2_session_disconnect(s->sess, "bye");
        if (s->fd >= 0)
            shutdown(s->fd, SHUT_RDWR);
        for (int i = 0; s->ch && i < 3 && libssh2_channel_free(s->ch) == LIBSSH2_ERROR_EAGAIN; i++)
            ;
        for (int i = 0; i < 3 && libssh2_session_free(s->sess) == LIBSSH2_ERROR_EAGAIN; i++)
            ;
    }
    bjob_release(s->job); /* a job still running is dropped when its worker is done */
    drop_keys(s);
    if (s->wfd >= 0)
        close(s->wfd);
    if (s->fd >= 0)
        close(s->fd);
    if (s->password) {
        explicit_bzero(s->password, strlen(s->password));
        free(s->password);
    }
    free(s->host);
    free(s->user);
    free(s->key_file);
    free(s->known_hosts);
    free(s->target);
    free(s);
}
