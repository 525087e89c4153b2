/*
 * ONYX CLI parsers for the layouts that onyx-facts.md has verbatim: prompts, pager,
 * errors, show version (text and JSON), show interfaces ethernet (text and both JSON
 * layouts), congestion-control JSON, and the WJH table. See parse.h for the contract.
 */
#include "parse.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

/* ---------------- samples ---------------- */

void
onyx_samples_free(struct onyx_samples *s)
{
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

void
onyx_samples_clear(struct onyx_samples *s)
{
    s->n = 0;
}

static struct onyx_sample *
push(struct onyx_samples *s, enum fs_metric m)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        struct onyx_sample *v = realloc(s->v, cap * sizeof(*v));
        if (!v)
            return NULL;
        s->v = v;
        s->cap = cap;
    }
    struct onyx_sample *x = &s->v[s->n++];
    memset(x, 0, sizeof(*x));
    x->metric = m;
    x->scale = 1.0;
    return x;
}

static void
label(struct onyx_sample *x, const char *name, const char *value, size_t vlen)
{
    if (x->n_labels >= ONYX_LABELS_MAX)
        return;
    if (vlen >= ONYX_LABEL_VALUE_MAX)
        vlen = ONYX_LABEL_VALUE_MAX - 1;
    x->labels[x->n_labels].name = name;
    memcpy(x->labels[x->n_labels].value, value, vlen);
    x->labels[x->n_labels].value[vlen] = '\0';
    x->n_labels++;
}

/* Internal helpers shared with parse_assumed.c (declared in parse_int.h). */
#include "parse_int.h"

int
onyx_add_counter(struct onyx_samples *s, enum fs_metric m, uint64_t raw, double scale,
                 const char *l1, const char *v1, const char *l2, const char *v2, const char *l3,
                 const char *v3)
{
    struct onyx_sample *x = push(s, m);
    if (!x)
        return -1;
    x->counter = true;
    x->raw = raw;
    x->scale = scale;
    if (l1)
        label(x, l1, v1, strlen(v1));
    if (l2)
        label(x, l2, v2, strlen(v2));
    if (l3)
        label(x, l3, v3, strlen(v3));
    return 0;
}

int
onyx_add_gauge(struct onyx_samples *s, enum fs_metric m, double value, const char *l1,
               const char *v1, const char *l2, const char *v2, const char *l3, const char *v3)
{
    struct onyx_sample *x = push(s, m);
    if (!x)
        return -1;
    x->counter = false;
    x->value = value;
    if (l1)
        label(x, l1, v1, strlen(v1));
    if (l2)
        label(x, l2, v2, strlen(v2));
    if (l3)
        label(x, l3, v3, strlen(v3));
    return 0;
}

void
onyx_errf(char *errbuf, size_t errlen, const char *msg)
{
    if (errbuf && errlen)
        snprintf(errbuf, errlen, "%s", msg);
}

/* ---------------- text helpers ---------------- */

bool
onyx_parse_u64(const char *s, size_t len, uint64_t *out, size_t *used)
{
    uint64_t v = 0;
    size_t i = 0;
    while (i < len && isdigit((unsigned char)s[i])) {
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
        i++;
    }
    if (i == 0)
        return false;
    *out = v;
    if (used)
        *used = i;
    return true;
}

/* Next line of text from *pos on: sets the line start and length (without the line end) and
 * advances *pos. */
bool
onyx_next_line(const char *text, size_t len, size_t *pos, const char **ls, size_t *ll)
{
    if (*pos >= len)
        return false;
    const char *p = text + *pos;
    const char *nl = memchr(p, '\n', len - *pos);
    size_t n = nl ? (size_t)(nl - p) : len - *pos;
    *ls = p;
    *ll = n;
    while (*ll > 0 && (p[*ll - 1] == '\r'))
        (*ll)--;
    *pos += n + (nl ? 1 : 0);
    return true;
}

bool
onyx_next_field(const char *text, size_t len, size_t *pos, const char **k, size_t *kn,
                const char **v, size_t *vn)
{
    const char *ls;
    size_t ll;
    while (onyx_next_line(text, len, pos, &ls, &ll)) {
        const char *colon = memchr(ls, ':', ll);
        if (!colon)
            continue;
        *k = ls;
        *kn = (size_t)(colon - ls);
        *v = colon + 1;
        *vn = ll - *kn - 1;
        onyx_trim(k, kn);
        onyx_trim(v, vn);
        return true;
    }
    return false;
}

/* isspace() of the C locale (the collector never sets another), inlined: trimming runs
 * over every line of every output (issue 34). */
static inline bool
ascii_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

void
onyx_trim(const char **s, size_t *n)
{
    while (*n > 0 && ascii_space((unsigned char)**s)) {
        (*s)++;
        (*n)--;
    }
    while (*n > 0 && ascii_space((unsigned char)(*s)[*n - 1]))
        (*n)--;
}

bool
onyx_eq(const char *s, size_t n, const char *lit)
{
    /* ASCII case folding (strncasecmp of the C locale), inlined: the text parsers compare
     * every key of every line with it (issue 34) */
    size_t l = strlen(lit);
    if (n != l)
        return false;
    for (size_t i = 0; i < l; i++) {
        unsigned char a = (unsigned char)s[i], b = (unsigned char)lit[i];
        if (a != b && (a | 0x20) != (b | 0x20))
            return false;
        if (a != b && !((a | 0x20) >= 'a' && (a | 0x20) <= 'z'))
            return false;
    }
    return true;
}

/* A port name token: Eth<digits>/<digits>[/<digits>]. */
bool
onyx_is_port_name(const char *s, size_t n)
{
    if (n < 6 || strncmp(s, "Eth", 3) != 0)
        return false;
    size_t i = 3, groups = 0;
    while (i < n) {
        size_t d = 0;
        while (i < n && isdigit((unsigned char)s[i])) {
            i++;
            d++;
        }
        if (d == 0)
            return false;
        groups++;
        if (i == n)
            break;
        if (s[i] != '/')
            return false;
        i++;
        if (i == n)
            return false;
    }
    return groups >= 2 && groups <= 3;
}

size_t
onyx_clean(char *buf, size_t len)
{
    /* The bytes that need handling; the runs of other bytes between them (a line, as a
     * rule: the pty ends each with \r) move in one memmove (issue 34: byte by byte, this
     * was 8% of the ONYX I/O thread). */
    static const bool special[256] = {[0x1b] = true, [0x9b] = true, ['\r'] = true, ['\b'] = true};
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        size_t run = i;
        while (i < len && !special[(unsigned char)buf[i]])
            i++;
        if (i > run) {
            if (o != run)
                memmove(buf + o, buf + run, i - run);
            o += i - run;
            if (i == len)
                break;
        }
        unsigned char c = (unsigned char)buf[i];
        if (c == 0x1b || c == 0x9b) {
            size_t j = i + 1;
            if (c == 0x1b && j < len && (buf[j] == '>' || buf[j] == '=')) {
                i = j;
                continue;
            }
            if (c == 0x1b) {
                if (j < len && buf[j] == '[')
                    j++;
                else
                    continue; /* a lone ESC: drop it */
            }
            while (j < len && (isdigit((unsigned char)buf[j]) || buf[j] == ';' || buf[j] == '?'))
                j++;
            if (j < len && isalpha((unsigned char)buf[j]))
                i = j;
            else
                i = j - 1;
            continue;
        }
        if (c == '\r')
            continue;
        if (c == '\b') {
            if (o > 0 && buf[o - 1] != '\n')
                o--;
        }
    }
    return o;
}

static size_t
last_line_start(const char *buf, size_t len)
{
    size_t i = len;
    while (i > 0 && buf[i - 1] != '\n')
        i--;
    return i;
}

enum onyx_mode
onyx_prompt_at_end(const char *buf, size_t len, size_t *prompt_start)
{
    size_t st = last_line_start(buf, len);
    const char *l = buf + st;
    size_t n = len - st;
    while (n > 0 && (l[n - 1] == ' ' || l[n - 1] == '\r'))
        n--;
    if (n < 3)
        return ONYX_MODE_NONE;
    char last = l[n - 1];
    if (last != '#' && last != '>')
        return ONYX_MODE_NONE;
    /* hostname: a token without spaces at the line start */
    size_t i = 0;
    while (i < n && !isspace((unsigned char)l[i]) && l[i] != '[' && l[i] != '(')
        i++;
    if (i == 0)
        return ONYX_MODE_NONE;
    while (i < n && l[i] == ' ')
        i++;
    bool tagged = false;
    if (i < n && l[i] == '[') { /* [standalone: master] */
        const char *close = memchr(l + i, ']', n - i);
        if (!close || !memchr(l + i, ':', (size_t)(close - (l + i))))
            return ONYX_MODE_NONE;
        i = (size_t)(close - l) + 1;
        tagged = true;
        while (i < n && l[i] == ' ')
            i++;
    }
    enum onyx_mode mode;
    if (i < n && l[i] == '(') {
        if (n - i < 8 || strncmp(l + i, "(config", 7) != 0)
            return ONYX_MODE_NONE;
        const char *close = memchr(l + i, ')', n - i);
        if (!close)
            return ONYX_MODE_NONE;
        i = (size_t)(close - l) + 1;
        while (i < n && l[i] == ' ')
            i++;
        if (i != n - 1 || last != '#')
            return ONYX_MODE_NONE;
        mode = ONYX_MODE_CONFIG;
    } else {
        if (i != n - 1)
            return ONYX_MODE_NONE;
        mode = last == '#' ? ONYX_MODE_ENABLE : ONYX_MODE_USER;
    }
    /* Without the cluster tag a prompt must still end with "> " / "# " to be told from
     * an output line that happens to end in '#' or '>'. */
    if (!tagged && (len - st) == n)
        return ONYX_MODE_NONE;
    if (prompt_start)
        *prompt_start = st;
    return mode;
}

bool
onyx_pager_at_end(const char *buf, size_t len, size_t *pager_start)
{
    size_t st = last_line_start(buf, len);
    const char *l = buf + st;
    size_t n = len - st;
    if (n < 9 || strncmp(l, "lines ", 6) != 0)
        return false;
    size_t i = 6, u;
    uint64_t v;
    if (!onyx_parse_u64(l + i, n - i, &v, &u))
        return false;
    i += u;
    if (i >= n || l[i] != '-')
        return false;
    i++;
    if (!onyx_parse_u64(l + i, n - i, &v, &u))
        return false;
    if (pager_start)
        *pager_start = st;
    return true;
}

bool
onyx_password_prompt_at_end(const char *buf, size_t len)
{
    size_t st = last_line_start(buf, len);
    const char *l = buf + st;
    size_t n = len - st;
    onyx_trim(&l, &n);
    return n >= 9 && strncasecmp(l + n - 9, "password:", 9) == 0;
}

bool
onyx_error_line(const char *text, size_t len, char *msg, size_t msglen)
{
    size_t pos = 0, ll;
    const char *ls;
    while (onyx_next_line(text, len, &pos, &ls, &ll)) {
        if (ll > 0 && ls[0] == '%') {
            if (msg && msglen) {
                size_t n = ll < msglen - 1 ? ll : msglen - 1;
                memcpy(msg, ls, n);
                msg[n] = '\0';
            }
            return true;
        }
    }
    return false;
}

/* The mode suffix of a prompt at buf[i]: 1 with *end after it, 0 when the buffer ends
 * before it is complete, -1 when buf[i] does not start one. */
static int
prompt_suffix(const char *buf, size_t len, size_t i, size_t *end)
{
    if (i >= len)
        return 0;
    if (buf[i] == '(') {
        static const char cfg[] = "(config";
        size_t k = 0;
        for (; k < sizeof(cfg) - 1; k++) {
            if (i + k >= len)
                return 0;
            if (buf[i + k] != cfg[k])
                return -1;
        }
        for (i += k; i < len && buf[i] != ')'; i++)
            if (buf[i] == '\n')
                return -1;
        if (i >= len)
            return 0;
        for (i++; i < len && buf[i] == ' '; i++)
            ;
        if (i >= len)
            return 0;
        if (buf[i] != '#')
            return -1;
    } else if (buf[i] != '#' && buf[i] != '>') {
        return -1;
    }
    /* The trailing space real prompts have; a line end is taken too. */
    if (i + 1 >= len)
        return 0;
    if (buf[i + 1] != ' ' && buf[i + 1] != '\n')
        return -1;
    *end = i + 2;
    return 1;
}

bool
onyx_next_prompt(const char *buf, size_t len, size_t from, const char *prefix, size_t prefix_len,
                 size_t *pstart, size_t *pend)
{
    bool found = false;
    size_t i = from;
    /* Anywhere, not only at line starts: an output without a final line end runs into the
     * prompt. A tagged prefix (`host [standalone: master] `) and a suffix together do not
     * occur in outputs; a bare `host ` might, so that one only starts a line. */
    const bool tagged = memchr(prefix, ']', prefix_len) != NULL;
    while (!found && prefix_len > 0 && i + prefix_len <= len) {
        const char *p = memchr(buf + i, prefix[0], len - i);
        if (!p || (size_t)(p - buf) + prefix_len > len)
            break;
        i = (size_t)(p - buf);
        bool may_start = tagged || i == from || buf[i - 1] == '\n';
        if (may_start && memcmp(p, prefix, prefix_len) == 0) {
            int r = prompt_suffix(buf, len, i + prefix_len, pend);
            if (r == 0)
                break; /* still arriving */
            if (r > 0) {
                *pstart = i;
                found = true;
            }
        }
        i++;
    }
    return found;
}

size_t
onyx_strip_echoes(char *text, size_t *len, const char *const *cmds, size_t n)
{
    size_t seen = 0, r = 0, w = 0, l = *len;
    /* Each command's length once: this runs over every line of every output. */
    size_t lens[64];
    /* The commands' first bytes: a line starting otherwise (spaces trimmed) is no echo,
     * and is not trimmed at its end nor compared (issue 34). */
    bool first[256] = {false};
    for (size_t j = 0; j < n; j++) {
        if (j < 64)
            lens[j] = strlen(cmds[j]);
        first[(unsigned char)cmds[j][0]] = true;
    }
    while (r < l) {
        const char *nl = memchr(text + r, '\n', l - r);
        size_t e = nl ? (size_t)(nl - text) + 1 : l;
        const char *s = text + r;
        size_t sn = (nl ? e - 1 : e) - r;
        while (sn > 0 && ascii_space((unsigned char)*s)) {
            s++;
            sn--;
        }
        if (sn > 0 && !first[(unsigned char)*s])
            sn = 0;
        onyx_trim(&s, &sn);
        bool echo = false;
        for (size_t j = seen; j < n && sn > 0 && !echo; j++)
            if ((j < 64 ? lens[j] : strlen(cmds[j])) == sn && memcmp(s, cmds[j], sn) == 0) {
                echo = true;
                seen = j + 1;
            }
        if (!echo) {
            if (w != r)
                memmove(text + w, text + r, e - r);
            w += e - r;
        }
        r = e;
    }
    *len = w;
    return seen;
}

bool
onyx_json_span(const char *text, size_t len, size_t *start, size_t *end)
{
    size_t pos = 0, ll, lstart;
    const char *ls;
    bool have = false;
    *start = *end = 0;
    while (lstart = pos, onyx_next_line(text, len, &pos, &ls, &ll)) {
        if (ll == 0)
            continue;
        if (!have && (ls[0] == '[' || ls[0] == '{')) {
            *start = lstart;
            have = true;
        }
        if (have && (ls[0] == ']' || ls[0] == '}'))
            *end = lstart + ll;
    }
    if (!have)
        return false;
    /* A one-line document ("[]", "{...}") starts and ends on the same line. */
    if (*end <= *start) {
        size_t p = *start;
        const char *l2 = NULL;
        size_t n2 = 0;
        if (onyx_next_line(text, len, &p, &l2, &n2))
            *end = *start + n2;
    }
    return true;
}

/* Parses the JSON span of text; NULL (with errbuf) if there is none or it is invalid. */
struct json_object *
onyx_json_parse(const char *text, size_t len, char *errbuf, size_t errlen)
{
    size_t s = 0, e = 0;
    if (!onyx_json_span(text, len, &s, &e)) {
        onyx_errf(errbuf, errlen, "no JSON document in the output");
        return NULL;
    }
    struct json_tokener *tok = json_tokener_new_ex(64);
    if (!tok) {
        onyx_errf(errbuf, errlen, "out of memory");
        return NULL;
    }
    struct json_object *o = json_tokener_parse_ex(tok, text + s, (int)(e - s));
    if (!o || json_tokener_get_error(tok) != json_tokener_success) {
        if (errbuf && errlen)
            snprintf(errbuf, errlen, "invalid JSON: %s",
                     json_tokener_error_desc(json_tokener_get_error(tok)));
        if (o)
            json_object_put(o);
        o = NULL;
    }
    json_tokener_free(tok);
    return o;
}

/* A JSON member's value as uint64; strings ("123") and integers accepted. */
bool
onyx_json_u64(struct json_object *o, const char *key, uint64_t *v)
{
    struct json_object *m;
    if (!json_object_object_get_ex(o, key, &m) || !m)
        return false;
    if (json_object_is_type(m, json_type_int) || json_object_is_type(m, json_type_string)) {
        const char *s = json_object_get_string(m);
        size_t n = strlen(s), used;
        while (n > 0 && isspace((unsigned char)*s)) {
            s++;
            n--;
        }
        return onyx_parse_u64(s, n, v, &used);
    }
    return false;
}

const char *
onyx_json_str(struct json_object *o, const char *key)
{
    struct json_object *m;
    if (!json_object_object_get_ex(o, key, &m) || !m || !json_object_is_type(m, json_type_string))
        return NULL;
    return json_object_get_string(m);
}

/* ---------------- show version ---------------- */

int
onyx_release_cmp(const char *a, const char *b)
{
    while (*a || *b) {
        uint64_t x = 0, y = 0;
        size_t u;
        if (isdigit((unsigned char)*a) && onyx_parse_u64(a, strlen(a), &x, &u))
            a += u;
        if (isdigit((unsigned char)*b) && onyx_parse_u64(b, strlen(b), &y, &u))
            b += u;
        if (x != y)
            return x < y ? -1 : 1;
        /* skip one separator (or stop at a non-numeric tail) */
        bool ma = *a == '.', mb = *b == '.';
        if (!ma && !mb)
            break;
        if (ma)
            a++;
        if (mb)
            b++;
    }
    return 0;
}

bool
onyx_release_new_json(const char *release)
{
    return onyx_release_cmp(release, "3.6.6000") >= 0;
}

double
onyx_parse_uptime(const char *s)
{
    double total = 0;
    bool any = false;
    while (*s) {
        while (*s == ' ' || *s == ',')
            s++;
        if (!*s)
            break;
        char *end;
        double v = strtod(s, &end);
        if (end == s)
            return -1;
        s = end;
        switch (*s) {
        case 'd':
            total += v * 86400;
            break;
        case 'h':
            total += v * 3600;
            break;
        case 'm':
            total += v * 60;
            break;
        case 's':
            total += v;
            break;
        default:
            return -1;
        }
        s++;
        any = true;
    }
    return any ? total : -1;
}

static void
copy_field(char *dst, size_t dlen, const char *s, size_t n)
{
    /* The 3.6.1102 capture quotes the serial number: drop quotes and backslashes. */
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < dlen; i++)
        if (s[i] != '"' && s[i] != '\\')
            dst[o++] = s[i];
    dst[o] = '\0';
}

static void
version_field(struct onyx_version *v, const char *k, size_t kn, const char *val, size_t vn)
{
    if (onyx_eq(k, kn, "Product name"))
        copy_field(v->product, sizeof(v->product), val, vn);
    else if (onyx_eq(k, kn, "Product release"))
        copy_field(v->release, sizeof(v->release), val, vn);
    else if (onyx_eq(k, kn, "Product model"))
        copy_field(v->model, sizeof(v->model), val, vn);
    else if (onyx_eq(k, kn, "System serial num"))
        copy_field(v->serial, sizeof(v->serial), val, vn);
    else if (onyx_eq(k, kn, "Uptime")) {
        char tmp[64];
        copy_field(tmp, sizeof(tmp), val, vn);
        v->uptime_s = onyx_parse_uptime(tmp);
    }
}

int
onyx_parse_version_text(const char *text, size_t len, struct onyx_version *v, char *errbuf,
                        size_t errlen)
{
    memset(v, 0, sizeof(*v));
    v->uptime_s = -1;
    size_t pos = 0, kn, vn;
    const char *k, *val;
    while (onyx_next_field(text, len, &pos, &k, &kn, &val, &vn))
        version_field(v, k, kn, val, vn);
    if (!v->release[0]) {
        onyx_errf(errbuf, errlen, "show version: no \"Product release\" line");
        return -1;
    }
    return 0;
}

int
onyx_parse_version_json(const char *text, size_t len, struct onyx_version *v, char *errbuf,
                        size_t errlen)
{
    memset(v, 0, sizeof(*v));
    v->uptime_s = -1;
    struct json_object *o = onyx_json_parse(text, len, errbuf, errlen);
    if (!o)
        return -1;
    int rc = -1;
    if (!json_object_is_type(o, json_type_object)) {
        onyx_errf(errbuf, errlen, "show version: JSON is not an object");
        goto out;
    }
    json_object_object_foreach(o, key, val)
    {
        if (json_object_is_type(val, json_type_string)) {
            const char *s = json_object_get_string(val);
            version_field(v, key, strlen(key), s, strlen(s));
        }
    }
    if (!v->release[0]) {
        onyx_errf(errbuf, errlen, "show version: no \"Product release\" member");
        goto out;
    }
    rc = 0;
out:
    json_object_put(o);
    return rc;
}

int
onyx_version_samples(const struct onyx_version *v, struct onyx_samples *out)
{
    if (onyx_add_gauge(out, FS_M_DEVICE_INFO, 1, "model", v->model, "os",
                       v->product[0] ? v->product : "onyx", "version", v->release) < 0)
        return -1;
    if (v->uptime_s >= 0 && onyx_add_gauge(out, FS_M_DEVICE_UPTIME, v->uptime_s, NULL, NULL, NULL,
                                           NULL, NULL, NULL) < 0)
        return -1;
    return 0;
}

/* ---------------- show interfaces ethernet ---------------- */

double
onyx_parse_speed(const char *s)
{
    while (*s == ' ')
        s++;
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0)
        return -1;
    while (*end == ' ')
        end++;
    switch (toupper((unsigned char)*end)) {
    case 'T':
        return v * 1e12;
    case 'G':
        return v * 1e9;
    case 'M':
        return v * 1e6;
    case 'K':
        return v * 1e3;
    case 'B':
        return v;
    default:
        return -1;
    }
}

/* Rx/Tx counter names of the interface block and the metric each feeds. */
static bool
port_counter_metric(const char *name, size_t n, enum fs_metric *m)
{
    if (onyx_eq(name, n, "packets"))
        *m = FS_M_PORT_PACKETS;
    else if (onyx_eq(name, n, "bytes"))
        *m = FS_M_PORT_BYTES;
    else if (onyx_eq(name, n, "error packets"))
        *m = FS_M_PORT_ERRORS;
    else if (onyx_eq(name, n, "discard packets"))
        *m = FS_M_PORT_DISCARDS;
    else
        return false;
    return true;
}

/* Per-port scalar keys (the same in text and JSON). */
static int
port_scalar(struct onyx_samples *out, const char *port, const char *k, size_t kn, const char *v,
            size_t vn)
{
    char tmp[64];
    if (vn >= sizeof(tmp))
        vn = sizeof(tmp) - 1;
    memcpy(tmp, v, vn);
    tmp[vn] = '\0';
    if (onyx_eq(k, kn, "Operational state")) {
        bool up = strncasecmp(tmp, "up", 2) == 0;
        return onyx_add_gauge(out, FS_M_PORT_OPER_UP, up ? 1 : 0, "interface", port, NULL, NULL,
                              NULL, NULL);
    }
    if (onyx_eq(k, kn, "Admin state")) {
        bool up = strncasecmp(tmp, "enabled", 7) == 0 || strncasecmp(tmp, "up", 2) == 0;
        return onyx_add_gauge(out, FS_M_PORT_ADMIN_UP, up ? 1 : 0, "interface", port, NULL, NULL,
                              NULL, NULL);
    }
    if (onyx_eq(k, kn, "Actual speed")) {
        double bps = onyx_parse_speed(tmp);
        if (bps >= 0)
            return onyx_add_gauge(out, FS_M_PORT_SPEED, bps, "interface", port, NULL, NULL, NULL,
                                  NULL);
    }
    return 0;
}

int
onyx_parse_interfaces_text(const char *text, size_t len, struct onyx_samples *out, char *errbuf,
                           size_t errlen)
{
    size_t pos = 0, ll;
    const char *ls;
    char port[ONYX_LABEL_VALUE_MAX] = "";
    const char *dir = NULL;
    size_t ports = 0;
    while (onyx_next_line(text, len, &pos, &ls, &ll)) {
        const char *t = ls;
        size_t tn = ll;
        onyx_trim(&t, &tn);
        if (tn == 0)
            continue;
        bool indented = isspace((unsigned char)ls[0]);
        if (!indented && onyx_is_port_name(t, tn)) {
            memcpy(port, t, tn < sizeof(port) ? tn : sizeof(port) - 1);
            port[tn < sizeof(port) ? tn : sizeof(port) - 1] = '\0';
            dir = NULL;
            ports++;
            continue;
        }
        if (!port[0])
            continue;
        if (onyx_eq(t, tn, "Rx") || onyx_eq(t, tn, "Tx")) {
            dir = (t[0] == 'R' || t[0] == 'r') ? "rx" : "tx";
            continue;
        }
        if (!indented) { /* another interface kind's block (mgmt0, Po1, Vlan...) */
            port[0] = '\0';
            continue;
        }
        if (isdigit((unsigned char)t[0])) {
            if (!dir)
                continue;
            uint64_t v;
            size_t used;
            if (!onyx_parse_u64(t, tn, &v, &used))
                continue; /* overflowing or garbled number: skip the line */
            const char *name = t + used;
            size_t nn = tn - used;
            onyx_trim(&name, &nn);
            enum fs_metric m;
            if (port_counter_metric(name, nn, &m) &&
                onyx_add_counter(out, m, v, 1.0, "interface", port, "direction", dir, NULL, NULL) <
                    0)
                goto oom;
            continue;
        }
        const char *colon = memchr(t, ':', tn);
        if (colon) {
            const char *k = t, *v = colon + 1;
            size_t kn = (size_t)(colon - t), vn = tn - kn - 1;
            onyx_trim(&k, &kn);
            onyx_trim(&v, &vn);
            if (port_scalar(out, port, k, kn, v, vn) < 0)
                goto oom;
        }
    }
    if (ports == 0) {
        onyx_errf(errbuf, errlen, "show interfaces ethernet: no Eth port block");
        return -1;
    }
    return 0;
oom:
    onyx_errf(errbuf, errlen, "out of memory");
    return -1;
}

static int
port_json(struct onyx_samples *out, const char *port, struct json_object *o)
{
    json_object_object_foreach(o, key, val)
    {
        if (json_object_is_type(val, json_type_string)) {
            const char *s = json_object_get_string(val);
            if (port_scalar(out, port, key, strlen(key), s, strlen(s)) < 0)
                return -1;
        } else if (json_object_is_type(val, json_type_object) &&
                   (strcasecmp(key, "Rx") == 0 || strcasecmp(key, "Tx") == 0)) {
            const char *dir = (key[0] == 'R' || key[0] == 'r') ? "rx" : "tx";
            json_object_object_foreach(val, ck, cv)
            {
                (void)cv;
                enum fs_metric m;
                uint64_t v;
                if (port_counter_metric(ck, strlen(ck), &m) && onyx_json_u64(val, ck, &v) &&
                    onyx_add_counter(out, m, v, 1.0, "interface", port, "direction", dir, NULL,
                                     NULL) < 0)
                    return -1;
            }
        }
    }
    return 0;
}

int
onyx_parse_interfaces_json(const char *text, size_t len, struct onyx_samples *out, char *errbuf,
                           size_t errlen)
{
    struct json_object *root = onyx_json_parse(text, len, errbuf, errlen);
    if (!root)
        return -1;
    int rc = -1;
    size_t ports = 0;
    /* Both layouts are lists; a lone object (one port printed alone) is taken as a list of one. */
    struct json_object *items = root;
    struct json_object *wrap = NULL;
    if (json_object_is_type(root, json_type_object)) {
        wrap = json_object_new_array();
        json_object_array_add(wrap, json_object_get(root));
        items = wrap;
    }
    if (!json_object_is_type(items, json_type_array)) {
        onyx_errf(errbuf, errlen, "show interfaces ethernet: JSON is not a list");
        goto out;
    }
    for (size_t i = 0; i < json_object_array_length(items); i++) {
        struct json_object *el = json_object_array_get_idx(items, i);
        if (!json_object_is_type(el, json_type_object))
            continue;
        const char *header = onyx_json_str(el, "header");
        if (header) { /* before 3.6.6000: {"header": "Eth1/1", ...} */
            if (!onyx_is_port_name(header, strlen(header)))
                continue;
            ports++;
            if (port_json(out, header, el) < 0)
                goto oom;
            continue;
        }
        /* from 3.6.6000: {"Eth1/1": [ {...}, ... ]} (possibly several ports per object) */
        json_object_object_foreach(el, key, val)
        {
            if (!onyx_is_port_name(key, strlen(key)))
                continue;
            ports++;
            if (json_object_is_type(val, json_type_object)) {
                if (port_json(out, key, val) < 0)
                    goto oom;
                continue;
            }
            if (!json_object_is_type(val, json_type_array))
                continue;
            for (size_t j = 0; j < json_object_array_length(val); j++) {
                struct json_object *part = json_object_array_get_idx(val, j);
                if (json_object_is_type(part, json_type_object) && port_json(out, key, part) < 0)
                    goto oom;
            }
        }
    }
    if (ports == 0) {
        onyx_errf(errbuf, errlen, "show interfaces ethernet: no Eth port in the JSON");
        goto out;
    }
    rc = 0;
    goto out;
oom:
    onyx_errf(errbuf, errlen, "out of memory");
out:
    if (wrap)
        json_object_put(wrap);
    json_object_put(root);
    return rc;
}

/* ---------------- congestion control (JSON, verbatim layout) ---------------- */

static void
port_from_cli(const char *s, char *buf, size_t len)
{
    /* "1/1" -> "Eth1/1"; names already starting with "Eth" are kept. */
    if (isdigit((unsigned char)s[0]))
        snprintf(buf, len, "Eth%s", s);
    else
        snprintf(buf, len, "%s", s);
}

int
onyx_parse_congestion_json(const char *text, size_t len, struct onyx_samples *out,
                           struct onyx_tc_profile *profiles, size_t *n_profiles, char *errbuf,
                           size_t errlen)
{
    if (n_profiles)
        *n_profiles = 0;
    struct json_object *root = onyx_json_parse(text, len, errbuf, errlen);
    if (!root)
        return -1;
    int rc = -1;
    char port[ONYX_LABEL_VALUE_MAX] = "";
    if (!json_object_is_type(root, json_type_array)) {
        onyx_errf(errbuf, errlen, "congestion-control: JSON is not a list");
        goto out;
    }
    for (size_t i = 0; i < json_object_array_length(root); i++) {
        struct json_object *el = json_object_array_get_idx(root, i);
        if (!json_object_is_type(el, json_type_object))
            continue;
        const char *ifname = onyx_json_str(el, "Interface ethernet");
        if (ifname) {
            port_from_cli(ifname, port, sizeof(port));
            uint64_t v;
            if (onyx_json_u64(el, "ECN marked packets", &v) &&
                onyx_add_counter(out, FS_M_PORT_ECN_MARKED, v, 1.0, "interface", port, NULL, NULL,
                                 NULL, NULL) < 0)
                goto oom;
            continue;
        }
        const char *header = onyx_json_str(el, "header");
        if (!header || strncasecmp(header, "TC-", 3) != 0 || !port[0])
            continue;
        uint64_t tcn;
        size_t used;
        if (!onyx_parse_u64(header + 3, strlen(header + 3), &tcn, &used) || tcn > 15)
            continue;
        char tc[8];
        snprintf(tc, sizeof(tc), "%u", (unsigned)tcn);
        uint64_t v;
        if (onyx_json_u64(el, "RED dropped packets", &v) &&
            onyx_add_counter(out, FS_M_QUEUE_WRED_DROPPED, v, 1.0, "interface", port, "tc", tc,
                             NULL, NULL) < 0)
            goto oom;
        if (profiles && n_profiles && *n_profiles < 8) {
            struct onyx_tc_profile *p = &profiles[(*n_profiles)++];
            memset(p, 0, sizeof(*p));
            p->tc = (int)tcn;
            const char *s;
            if ((s = onyx_json_str(el, "Mode")))
                snprintf(p->mode, sizeof(p->mode), "%s", s);
            if ((s = onyx_json_str(el, "Threshold mode")))
                snprintf(p->threshold_mode, sizeof(p->threshold_mode), "%s", s);
            if ((s = onyx_json_str(el, "Minimum threshold")))
                snprintf(p->min, sizeof(p->min), "%s", s);
            if ((s = onyx_json_str(el, "Maximum threshold")))
                snprintf(p->max, sizeof(p->max), "%s", s);
        }
    }
    if (!port[0]) {
        onyx_errf(errbuf, errlen, "congestion-control: no \"Interface ethernet\" element");
        goto out;
    }
    rc = 0;
    goto out;
oom:
    onyx_errf(errbuf, errlen, "out of memory");
out:
    json_object_put(root);
    return rc;
}

/* ---------------- What-Just-Happened table ---------------- */

#define WJH_MAX_COLS 24

struct wjh_col {
    size_t start, end; /* [start, end) in a row; the last column runs to the line's end */
    char name[40];
};

static void
slice(const char *l, size_t n, size_t a, size_t b, const char **s, size_t *sn)
{
    if (a >= n) {
        *s = l + n;
        *sn = 0;
        return;
    }
    if (b > n)
        b = n;
    *s = l + a;
    *sn = b - a;
    onyx_trim(s, sn);
}

static void
split_ip_port(const char *s, size_t n, char *ip, size_t iplen, int *port)
{
    *port = -1;
    ip[0] = '\0';
    if (onyx_eq(s, n, "N/A") || n == 0)
        return;
    const char *colon = NULL;
    for (size_t i = n; i > 0; i--)
        if (s[i - 1] == ':') {
            colon = s + i - 1;
            break;
        }
    size_t ipn = colon ? (size_t)(colon - s) : n;
    if (ipn >= iplen)
        ipn = iplen - 1;
    memcpy(ip, s, ipn);
    ip[ipn] = '\0';
    if (colon) {
        uint64_t v;
        size_t used;
        if (onyx_parse_u64(colon + 1, n - ipn - 1, &v, &used) && v <= 65535)
            *port = (int)v;
    }
}

/* "Sample Window : 2021/06/16 12:57:23.046 - 2021/06/16 14:46:17.701": true and the two
 * ends copied when the line is one. */
static bool
wjh_window_line(const char *ls, size_t ll, char *wstart, size_t wsn, char *wend, size_t wen)
{
    if (ll <= 13 || strncasecmp(ls, "Sample Window", 13) != 0)
        return false;
    const char *s = memchr(ls, ':', ll);
    size_t sn = s ? ll - (size_t)(s + 1 - ls) : 0;
    s = s ? s + 1 : ls;
    const char *dash = NULL;
    for (size_t i = 0; i + 2 < sn; i++)
        if (s[i] == ' ' && s[i + 1] == '-' && s[i + 2] == ' ')
            dash = s + i;
    const char *a = s, *b = dash ? dash + 3 : s + sn;
    size_t an = dash ? (size_t)(dash - s) : sn, bn = dash ? (size_t)(s + sn - b) : 0;
    onyx_trim(&a, &an);
    onyx_trim(&b, &bn);
    copy_field(wstart, wsn, a, an);
    copy_field(wend, wen, b, bn);
    return true;
}

int
onyx_parse_wjh_window(const char *text, size_t len, char *start, size_t start_len, char *end,
                      size_t end_len)
{
    size_t pos = 0, ll;
    const char *ls;
    while (onyx_next_line(text, len, &pos, &ls, &ll))
        if (wjh_window_line(ls, ll, start, start_len, end, end_len))
            return 0;
    return -1;
}

int
onyx_parse_wjh(const char *text, size_t len, void (*cb)(const struct onyx_wjh_record *r, void *arg),
               void *arg, char *errbuf, size_t errlen)
{
    size_t pos = 0, ll;
    const char *ls;
    /* Find the ruler: a line of dash runs separated by spaces; the header lines are the
     * non-empty lines just above it, starting at the one whose first token is '#'. */
    const char *hdr[3] = {NULL, NULL, NULL};
    size_t hdrn[3] = {0, 0, 0};
    struct wjh_col cols[WJH_MAX_COLS];
    size_t ncols = 0;
    int records = 0;
    bool in_table = false;
    char wstart[32] = "", wend[32] = "";
    while (onyx_next_line(text, len, &pos, &ls, &ll)) {
        if (!in_table && wjh_window_line(ls, ll, wstart, sizeof(wstart), wend, sizeof(wend)))
            continue;
        if (!in_table) {
            size_t i = 0;
            bool ruler = ll > 0 && ls[0] == '-';
            for (i = 0; ruler && i < ll; i++)
                if (ls[i] != '-' && ls[i] != ' ')
                    ruler = false;
            if (!ruler) {
                if (ll > 0 && ls[0] == '#') {
                    hdr[0] = ls;
                    hdrn[0] = ll;
                    hdr[1] = NULL;
                } else if (hdr[0] && !hdr[1] && ll > 0) {
                    hdr[1] = ls;
                    hdrn[1] = ll;
                } else if (ll > 0) {
                    hdr[0] = hdr[1] = NULL;
                }
                continue;
            }
            if (!hdr[0])
                continue;
            ncols = 0;
            i = 0;
            while (i < ll && ncols < WJH_MAX_COLS) {
                while (i < ll && ls[i] == ' ')
                    i++;
                if (i >= ll)
                    break;
                size_t a = i;
                while (i < ll && ls[i] == '-')
                    i++;
                cols[ncols].start = a;
                cols[ncols].end = i;
                cols[ncols].name[0] = '\0';
                ncols++;
            }
            /* column names: header text under each ruler span (+1 char for slack) */
            for (size_t c = 0; c < ncols; c++) {
                size_t a = cols[c].start, b = c + 1 < ncols ? cols[c + 1].start : (size_t)-1;
                for (int h = 0; h < 2; h++) {
                    if (!hdr[h])
                        continue;
                    const char *s;
                    size_t sn;
                    slice(hdr[h], hdrn[h], a, b, &s, &sn);
                    if (sn == 0)
                        continue;
                    size_t cur = strlen(cols[c].name);
                    snprintf(cols[c].name + cur, sizeof(cols[c].name) - cur, "%s%.*s",
                             cur ? " " : "", (int)sn, s);
                }
            }
            in_table = ncols >= 4;
            continue;
        }
        if (ll == 0)
            continue;
        if (!isdigit((unsigned char)ls[0])) { /* end of this table */
            in_table = false;
            hdr[0] = hdr[1] = NULL;
            continue;
        }
        struct onyx_wjh_record r;
        memset(&r, 0, sizeof(r));
        r.src_port = r.dst_port = -1;
        r.count = 1;
        snprintf(r.window_start, sizeof(r.window_start), "%s", wstart);
        snprintf(r.window_end, sizeof(r.window_end), "%s", wend);
        uint64_t h = 1469598103934665603ull; /* FNV-1a over the identifying cells */
        for (size_t c = 0; c < ncols; c++) {
            const char *s;
            size_t sn;
            size_t b = c + 1 < ncols ? cols[c + 1].start : (size_t)-1;
            slice(ls, ll, cols[c].start, b, &s, &sn);
            const char *nm = cols[c].name;
            if (strcmp(nm, "#") != 0 && strcasecmp(nm, "Count") != 0) {
                for (size_t i = 0; i < sn; i++)
                    h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
                h = (h ^ 0x1f) * 1099511628211ull; /* cell separator */
            }
            if (strcasecmp(nm, "Count") == 0)
                r.aggregated = true;
            if (strcasecmp(nm, "Timestamp") == 0)
                copy_field(r.timestamp, sizeof(r.timestamp), s, sn);
            else if (strcasecmp(nm, "sPort") == 0)
                copy_field(r.sport, sizeof(r.sport), s, sn);
            else if (strcasecmp(nm, "Src IP:Port") == 0)
                split_ip_port(s, sn, r.src_ip, sizeof(r.src_ip), &r.src_port);
            else if (strcasecmp(nm, "Dst IP:Port") == 0)
                split_ip_port(s, sn, r.dst_ip, sizeof(r.dst_ip), &r.dst_port);
            else if (strcasecmp(nm, "IP Proto") == 0)
                copy_field(r.proto, sizeof(r.proto), s, sn);
            else if (strcasecmp(nm, "Count") == 0) {
                uint64_t v;
                size_t used;
                if (onyx_parse_u64(s, sn, &v, &used))
                    r.count = v;
            } else if (strncasecmp(nm, "Drop reason", 11) == 0) {
                const char *dash = NULL;
                for (size_t i = 0; i + 2 < sn; i++)
                    if (s[i] == ' ' && s[i + 1] == '-' && s[i + 2] == ' ') {
                        dash = s + i;
                        break;
                    }
                copy_field(r.reason, sizeof(r.reason), s, dash ? (size_t)(dash - s) : sn);
            }
        }
        if (!r.reason[0])
            continue;
        r.ident = r.aggregated ? (h ^ 0xa5a5a5a5a5a5a5a5ull) * 1099511628211ull : h;
        records++;
        if (cb)
            cb(&r, arg);
    }
    if (records == 0 && ncols == 0) {
        onyx_errf(errbuf, errlen, "what-just-happened: no table");
        return -1;
    }
    return records;
}

bool
onyx_wjh_matches_rule(const struct onyx_wjh_record *r, const struct fs_flow_rule *rule)
{
    if (rule->protocol != FS_PROTO_ANY) {
        bool udp = strcasecmp(r->proto, "udp") == 0 || strcmp(r->proto, "17") == 0;
        bool tcp = strcasecmp(r->proto, "tcp") == 0 || strcmp(r->proto, "6") == 0;
        if ((rule->protocol == FS_PROTO_UDP && !udp) || (rule->protocol == FS_PROTO_TCP && !tcp))
            return false;
    }
    if (rule->dst_lo || rule->dst_hi) {
        if (r->dst_port < rule->dst_lo || r->dst_port > rule->dst_hi)
            return false;
    }
    if (rule->src_lo || rule->src_hi) {
        if (r->src_port < rule->src_lo || r->src_port > rule->src_hi)
            return false;
    }
    return true;
}
