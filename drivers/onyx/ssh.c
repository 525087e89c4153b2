/*
 * Non-blocking SSH shell connection on libssh2 (see ssh.h). Every libssh2 call of the
 * driver is in this file.
 */
#include "ssh.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libssh2.h>
#include <openssl/evp.h>

#include "util/log.h"

#define SUBSYS "cli"

enum st {
    ST_CONNECT,
    ST_HANDSHAKE,
    ST_HOSTKEY,
    ST_AUTHLIST,
    ST_AUTH_PUBKEY,
    ST_AUTH_PASSWORD,
    ST_AUTH_KBDINT,
    ST_CHANNEL,
    ST_PTY,
    ST_SHELL,
    ST_OPEN,
};

struct onyx_ssh {
    int fd;
    enum st st;
    LIBSSH2_SESSION *sess;
    LIBSSH2_CHANNEL *ch;
    char *host, *user, *password, *key_file, *known_hosts, *target;
    uint16_t port;
    bool accept_new;
    char methods[256];
    bool tried_pubkey, tried_password, tried_kbdint;
};

int
onyx_ssh_global_init(char *errbuf, size_t errlen)
{
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
    libssh2_exit();
}

static char *
dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
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
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    char port[8];
    snprintf(port, sizeof(port), "%u", (unsigned)p->port);
    int gai = getaddrinfo(p->host, port, &hints, &ai);
    if (gai != 0) {
        snprintf(errbuf, errlen, "cannot resolve %s: %s", p->host, gai_strerror(gai));
        goto fail;
    }
    s->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->fd < 0) {
        snprintf(errbuf, errlen, "socket: %s", strerror(errno));
        goto fail;
    }
    if (connect(s->fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
        snprintf(errbuf, errlen, "connect to %s:%u: %s", p->host, (unsigned)p->port,
                 strerror(errno));
        goto fail;
    }
    freeaddrinfo(ai);
    s->st = ST_CONNECT;
    return s;
fail:
    if (ai)
        freeaddrinfo(ai);
    onyx_ssh_free(s);
    return NULL;
}

int
onyx_ssh_fd(const struct onyx_ssh *s)
{
    return s->fd;
}

uint32_t
onyx_ssh_events(const struct onyx_ssh *s)
{
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

/* The SHA256 fingerprint of a known_hosts entry's base64 key blob. */
static void
stored_fingerprint(const char *key_b64, char *out, size_t outlen)
{
    size_t n = strlen(key_b64);
    unsigned char *raw = malloc(n + 4);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    snprintf(out, outlen, "(unreadable)");
    if (!raw)
        return;
    int len = EVP_DecodeBlock(raw, (const unsigned char *)key_b64, (int)n);
    if (len > 0) {
        if (n >= 1 && key_b64[n - 1] == '=')
            len--;
        if (n >= 2 && key_b64[n - 2] == '=')
            len--;
        if (EVP_Digest(raw, (size_t)len, md, &mdlen, EVP_sha256(), NULL) == 1)
            fingerprint(md, mdlen, out, outlen);
    }
    free(raw);
}

static int
check_host_key(struct onyx_ssh *s, char *errbuf, size_t errlen)
{
    size_t klen = 0;
    int ktype = 0;
    const char *key = libssh2_session_hostkey(s->sess, &klen, &ktype);
    const char *hash = libssh2_hostkey_hash(s->sess, LIBSSH2_HOSTKEY_HASH_SHA256);
    char fp_new[80] = "(none)", fp_old[80];
    if (hash)
        fingerprint((const unsigned char *)hash, 32, fp_new, sizeof(fp_new));
    if (!key || !s->known_hosts) {
        snprintf(errbuf, errlen, "no host key or no known_hosts file");
        return ONYX_SSH_FAIL_HOSTKEY;
    }
    LIBSSH2_KNOWNHOSTS *kh = libssh2_knownhost_init(s->sess);
    if (!kh) {
        snprintf(errbuf, errlen, "out of memory");
        return ONYX_SSH_FAIL;
    }
    int rc = ONYX_SSH_FAIL_HOSTKEY;
    /* A missing file is an empty list (accept-new then creates it). */
    (void)libssh2_knownhost_readfile(kh, s->known_hosts, LIBSSH2_KNOWNHOST_FILE_OPENSSH);
    int kt = knownhost_keytype(ktype);
    struct libssh2_knownhost *found = NULL;
    int r = libssh2_knownhost_checkp(
        kh, s->host, s->port, key, klen,
        LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | kt, &found);
    switch (r) {
    case LIBSSH2_KNOWNHOST_CHECK_MATCH:
        rc = ONYX_SSH_DONE;
        break;
    case LIBSSH2_KNOWNHOST_CHECK_MISMATCH:
        stored_fingerprint(found && found->key ? found->key : "", fp_old, sizeof(fp_old));
        fs_logkv(FS_LOG_ERROR, SUBSYS, NULL,
                 "target %s: HOST KEY CHANGED for %s port %u: known_hosts %s has %s, the server "
                 "presented %s; refused",
                 s->target, s->host, (unsigned)s->port, s->known_hosts, fp_old, fp_new);
        snprintf(errbuf, errlen, "host key changed (known %s, presented %s)", fp_old, fp_new);
        break;
    case LIBSSH2_KNOWNHOST_CHECK_NOTFOUND:
        if (!s->accept_new) {
            snprintf(errbuf, errlen, "host key %s not in %s (host_key_policy strict)", fp_new,
                     s->known_hosts);
            break;
        }
        {
            char name[300];
            if (s->port == 22)
                snprintf(name, sizeof(name), "%s", s->host);
            else
                snprintf(name, sizeof(name), "[%s]:%u", s->host, (unsigned)s->port);
            if (libssh2_knownhost_addc(
                    kh, name, NULL, key, klen, NULL, 0,
                    LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | kt, NULL) != 0 ||
                libssh2_knownhost_writefile(kh, s->known_hosts, LIBSSH2_KNOWNHOST_FILE_OPENSSH) !=
                    0) {
                snprintf(errbuf, errlen, "cannot record the host key in %s", s->known_hosts);
                break;
            }
            fs_log(FS_LOG_WARN, SUBSYS,
                   "target %s: recorded new host key %s of %s in %s (accept-new)", s->target,
                   fp_new, name, s->known_hosts);
            rc = ONYX_SSH_DONE;
        }
        break;
    default:
        snprintf(errbuf, errlen, "host key check failed");
        break;
    }
    libssh2_knownhost_free(kh);
    return rc;
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
    if (s->key_file && !s->tried_pubkey && offered(s, "publickey")) {
        s->st = ST_AUTH_PUBKEY;
        return ONYX_SSH_AGAIN;
    }
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
            r = check_host_key(s, errbuf, errlen);
            if (r != ONYX_SSH_DONE)
                return r;
            s->st = ST_AUTHLIST;
            break;
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
        case ST_AUTH_PUBKEY: {
            char pub[1024];
            snprintf(pub, sizeof(pub), "%s.pub", s->key_file);
            r = libssh2_userauth_publickey_fromfile(s->sess, s->user, pub, s->key_file, NULL);
            if (r == LIBSSH2_ERROR_EAGAIN)
                return ONYX_SSH_AGAIN;
            s->tried_pubkey = true;
            if (r == 0) {
                s->st = ST_CHANNEL;
                break;
            }
            if (r == LIBSSH2_ERROR_FILE) {
                snprintf(errbuf, errlen, "cannot read key file %s", s->key_file);
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
    char junk[1024];
    ssize_t e;
    while ((e = libssh2_channel_read_stderr(s->ch, junk, sizeof(junk))) > 0)
        ;
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
