/* perf script text reader (see import_perf.h). This is tool output, not a standard
 * format, so it is read here by hand, tolerantly. */
#include "importers/import_perf.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "importers/client.h"
#include "importers/command.h"
#include "util/errf.h"

#define MAX_TOKENS 96
/* The most seconds whose ns (with any fraction) fit an int64_t: about year 2262. */
#define MAX_SEC (INT64_MAX / 1000000000 - 1)

/* "123.456789" (up to 9 fraction digits; "123" too unless need_frac) -> ns; the end of
   the number in *end. -1 not such a number, -2 a number past MAX_SEC (range-checked
   before it is scaled to ns; *end is set, so that a caller can tell what followed). */
static int
parse_seconds_ex(const char *s, const char **end, int64_t *ns, bool need_frac)
{
    const char *p = s;
    int64_t sec = 0;
    int digits = 0;
    bool big = false;
    while (isdigit((unsigned char)*p)) {
        if (sec > MAX_SEC)
            big = true;
        else
            sec = sec * 10 + (*p - '0');
        p++;
        digits++;
    }
    if (digits == 0)
        return -1;
    if (sec > MAX_SEC)
        big = true;
    int64_t frac = 0;
    int fd = 0;
    if (*p != '.') {
        if (need_frac)
            return -1;
        if (end)
            *end = p;
        if (big)
            return -2;
        *ns = sec * 1000000000LL;
        return 0;
    }
    p++;
    while (isdigit((unsigned char)*p)) {
        if (fd < 9) {
            frac = frac * 10 + (*p - '0');
            fd++;
        }
        p++;
    }
    if (fd == 0)
        return -1;
    if (end)
        *end = p;
    if (big)
        return -2;
    for (; fd < 9; fd++)
        frac *= 10;
    *ns = sec * 1000000000LL + frac;
    return 0;
}

static int
parse_seconds(const char *s, const char **end, int64_t *ns)
{
    return parse_seconds_ex(s, end, ns, true);
}

int
fs_perf_parse_reference_arg(const char *s, struct fs_perf_ref *ref)
{
    const char *end;
    int64_t tod, clk;
    if (parse_seconds_ex(s, &end, &tod, false) != 0 || *end != '=')
        return -1;
    if (parse_seconds_ex(end + 1, &end, &clk, false) != 0 || *end != '\0')
        return -1;
    ref->known = true;
    ref->tod_ns = tod;
    ref->clock_ns = clk;
    return 0;
}

/* "# reference time: <date> = <S.U> (TOD) = <S.N> (<clock>)": 0 (a reference read, or
   none on this line), -1 with why when its times are out of range. */
static int
header_reference(const char *line, size_t len, struct fs_perf_ref *ref, char *why, size_t whylen)
{
    char buf[512];
    if (len >= sizeof buf)
        return 0;
    memcpy(buf, line, len);
    buf[len] = '\0';
    if (!strstr(buf, "reference time:"))
        return 0;
    char *tod = strstr(buf, " = ");
    if (!tod)
        return 0;
    const char *end;
    int64_t t, c;
    int rt = parse_seconds(tod + 3, &end, &t);
    if (rt == -1 || strncmp(end, " (TOD) = ", 9) != 0)
        return 0;
    int rc = parse_seconds(end + 9, &end, &c);
    if (rc == -1 || *end != ' ')
        return 0;
    if (rt != 0 || rc != 0) {
        fs_errf(why, whylen, "the \"# reference time\" header's %s time is out of range",
                rt != 0 ? "TOD" : "clock");
        return -1;
    }
    ref->known = true;
    ref->tod_ns = t;
    ref->clock_ns = c;
    return 0;
}

static bool
is_pointer(const char *v)
{
    return v[0] == '0' && v[1] == 'x' && strlen(v) >= 10;
}

struct token {
    const char *s;
    size_t n;
};

static bool
tok_eq(const struct token *t, const char *s)
{
    return t->n == strlen(s) && memcmp(t->s, s, t->n) == 0;
}

/* One sample line; 1 = event added, 0 = not a sample, -1 with why (a time out of range,
   no memory). */
static int
parse_line(const char *line, size_t len, const char *host, const struct fs_perf_ref *ref,
           struct fs_imp_batch *b, char *why, size_t whylen)
{
    struct token tk[MAX_TOKENS];
    size_t nt = 0;
    for (size_t i = 0; i < len && nt < MAX_TOKENS;) {
        while (i < len && (line[i] == ' ' || line[i] == '\t'))
            i++;
        if (i >= len)
            break;
        size_t j = i;
        while (j < len && line[j] != ' ' && line[j] != '\t')
            j++;
        tk[nt++] = (struct token){line + i, j - i};
        i = j;
    }
    /* The time token "<sec>.<frac>:" followed by "<subsys>:<event>:". */
    size_t ti;
    int64_t t_ns = 0;
    for (ti = 1; ti + 1 < nt; ti++) {
        const struct token *t = &tk[ti], *e = &tk[ti + 1];
        if (t->n < 4 || t->s[t->n - 1] != ':' || !isdigit((unsigned char)t->s[0]))
            continue;
        char tb[40];
        if (t->n >= sizeof tb)
            continue;
        memcpy(tb, t->s, t->n - 1);
        tb[t->n - 1] = '\0';
        const char *colon = memchr(e->s, ':', e->n);
        if (e->n < 4 || e->s[e->n - 1] != ':' || !colon || colon == e->s ||
            colon >= e->s + e->n - 2)
            continue;
        const char *end;
        int pr = parse_seconds(tb, &end, &t_ns);
        if (pr == -2) {
            fs_errf(why, whylen, "sample time %s s out of range", tb);
            return -1;
        }
        if (pr != 0 || *end != '\0')
            continue;
        break;
    }
    if (ti + 1 >= nt)
        return 0;
    /* Before the time: [cpu] (optional), tid[/tid], comm (the rest). */
    size_t k = ti;
    char cpu[16] = "", tid[32] = "";
    if (k > 0 && tk[k - 1].n >= 3 && tk[k - 1].s[0] == '[' && tk[k - 1].s[tk[k - 1].n - 1] == ']' &&
        tk[k - 1].n < sizeof cpu + 2) {
        memcpy(cpu, tk[k - 1].s + 1, tk[k - 1].n - 2);
        cpu[tk[k - 1].n - 2] = '\0';
        k--;
    }
    if (k > 0 && isdigit((unsigned char)tk[k - 1].s[0]) && tk[k - 1].n < sizeof tid) {
        memcpy(tid, tk[k - 1].s, tk[k - 1].n);
        tid[tk[k - 1].n] = '\0';
        k--;
    }
    char comm[FS_HOST_EVENTS_MAX_STR + 1] = "";
    if (k > 0) {
        size_t cl = (size_t)(tk[k - 1].s + tk[k - 1].n - tk[0].s);
        if (cl > FS_HOST_EVENTS_MAX_STR)
            cl = FS_HOST_EVENTS_MAX_STR;
        memcpy(comm, tk[0].s, cl);
        comm[cl] = '\0';
    }
    const struct token *ev = &tk[ti + 1];
    char name[128], kind[160];
    size_t en = ev->n - 1 < sizeof name - 1 ? ev->n - 1 : sizeof name - 1;
    memcpy(name, ev->s, en);
    name[en] = '\0';
    const char *ev_name = strchr(name, ':');
    if (!ev_name || !ev_name[1])
        return 0;
    snprintf(kind, sizeof kind, "perf.%s", ev_name + 1);
    /* TOD + (sample - reference clock): all three from input, so checked. */
    int64_t wall;
    if (__builtin_sub_overflow(t_ns, ref->clock_ns, &wall) ||
        __builtin_add_overflow(ref->tod_ns, wall, &wall)) {
        fs_errf(why, whylen,
                "sample time %" PRId64 ".%09" PRId64 " s is out of range of the reference time",
                t_ns / 1000000000, t_ns % 1000000000);
        return -1;
    }
    struct fs_imp_event *e = fs_imp_add(b, host, kind, name, wall, wall);
    if (!e)
        goto oom;
    if ((comm[0] && fs_imp_attr_str(e, "comm", comm) != 0) ||
        (tid[0] && fs_imp_attr_str(e, "tid", tid) != 0) ||
        (cpu[0] && fs_imp_attr_int(e, "cpu", atoi(cpu)) != 0))
        goto oom;
    /* key=value fields; "reason: X" (kfree_skb) is the one with a colon. */
    for (size_t i = ti + 2; i < nt; i++) {
        char key[FS_HOST_EVENTS_MAX_KEY + 1], val[FS_HOST_EVENTS_MAX_STR + 1];
        const struct token *t = &tk[i];
        const char *eq = memchr(t->s, '=', t->n);
        if (tok_eq(t, "reason:") && i + 1 < nt) {
            snprintf(key, sizeof key, "reason");
            size_t vl = tk[i + 1].n < FS_HOST_EVENTS_MAX_STR ? tk[i + 1].n : FS_HOST_EVENTS_MAX_STR;
            memcpy(val, tk[i + 1].s, vl);
            val[vl] = '\0';
            i++;
        } else if (eq && eq > t->s && (size_t)(eq - t->s) <= FS_HOST_EVENTS_MAX_KEY) {
            size_t kl = (size_t)(eq - t->s), vl = t->n - kl - 1;
            if (vl > FS_HOST_EVENTS_MAX_STR)
                vl = FS_HOST_EVENTS_MAX_STR;
            memcpy(key, t->s, kl);
            key[kl] = '\0';
            memcpy(val, eq + 1, vl);
            val[vl] = '\0';
        } else {
            continue;
        }
        if (is_pointer(val) || !val[0])
            continue;
        if (fs_imp_attr_str(e, key, val) != 0)
            goto oom;
    }
    /* The 5-tuple's protocol for tcp:* and udp:* tracepoints (kfree_skb's "protocol" is
       an ethertype, so only added when the event names it). */
    if ((strncmp(name, "tcp:", 4) == 0 || strncmp(name, "udp:", 4) == 0) &&
        fs_imp_attr_str(e, "l4", strncmp(name, "tcp:", 4) == 0 ? "tcp" : "udp") != 0)
        goto oom;
    return 1;
oom:
    fs_errf(why, whylen, "out of memory");
    return -1;
}

int
fs_import_perf_read(const char *text, size_t len, const char *host, const struct fs_perf_ref *given,
                    struct fs_imp_batch *b, size_t *skipped, char *err, size_t errlen)
{
    struct fs_perf_ref ref = {0};
    *skipped = 0;
    /* The header comes first; find the reference before reading samples. */
    if (given && given->known) {
        ref = *given;
    } else {
        for (size_t i = 0; i < len;) {
            const char *nl = memchr(text + i, '\n', len - i);
            size_t l = nl ? (size_t)(nl - (text + i)) : len - i;
            if (l > 0 && text[i] == '#' && header_reference(text + i, l, &ref, err, errlen) != 0)
                return -1;
            i += l + 1;
        }
    }
    if (!ref.known) {
        fs_errf(err, errlen,
                "no \"# reference time\" header: record with `perf record -k mono` and run "
                "`perf script --header`, or give --reference TOD=CLOCK or --reference now");
        return -1;
    }
    size_t lines = 0, events = 0, lineno = 0;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t l = nl ? (size_t)(nl - (text + i)) : len - i;
        const char *line = text + i;
        i += l + 1;
        lineno++;
        size_t a = 0;
        while (a < l && (line[a] == ' ' || line[a] == '\t' || line[a] == '\r'))
            a++;
        if (a == l || line[a] == '#')
            continue;
        lines++;
        char why[160];
        int r = parse_line(line, l, host, &ref, b, why, sizeof why);
        if (r < 0) {
            fs_errf(err, errlen, "line %zu: %s", lineno, why);
            return -1;
        }
        if (r == 0)
            (*skipped)++;
        else
            events++;
    }
    if (lines > 0 && events == 0) {
        fs_errf(err, errlen, "none of %zu lines is a perf script tracepoint sample", lines);
        return -1;
    }
    return 0;
}

void
fs_perf_stream_init(struct fs_perf_stream *s, const struct fs_perf_ref *given)
{
    memset(s, 0, sizeof *s);
    if (given && given->known)
        s->ref = *given;
}

int
fs_perf_stream_line(struct fs_perf_stream *s, const char *line, size_t len, const char *host,
                    struct fs_imp_batch *b, char *err, size_t errlen)
{
    s->lineno++;
    while (len && (line[len - 1] == '\r' || line[len - 1] == '\n'))
        len--;
    size_t a = 0;
    while (a < len && (line[a] == ' ' || line[a] == '\t' || line[a] == '\r'))
        a++;
    if (a == len)
        return 0;
    if (line[a] == '#') {
        /* A given reference wins; a header line after the samples began changes nothing. */
        struct fs_perf_ref hdr = {0};
        if (!s->started && !s->ref.known &&
            header_reference(line + a, len - a, &hdr, err, errlen) != 0)
            return -1;
        if (hdr.known)
            s->ref = hdr;
        return 0;
    }
    if (!s->started && !s->ref.known) {
        fs_errf(err, errlen,
                "no \"# reference time\" header before the first sample: record with "
                "`perf record -k mono` and run `perf script --header`");
        return -1;
    }
    s->started = true;
    s->lines++;
    char why[160];
    int r = parse_line(line, len, host, &s->ref, b, why, sizeof why);
    if (r < 0) {
        fs_errf(err, errlen, "line %zu: %s", s->lineno, why);
        return -1;
    }
    if (r == 0)
        s->skipped++;
    else
        s->events++;
    return r;
}

static int
perf_reference_arg(const char *arg, void *ctx)
{
    struct fs_perf_ref *ref = ctx;
    if (strcmp(arg, "now") == 0) {
        struct timespec rt, mt;
        clock_gettime(CLOCK_REALTIME, &rt);
        clock_gettime(CLOCK_MONOTONIC, &mt);
        ref->known = true;
        ref->tod_ns = (int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec;
        ref->clock_ns = (int64_t)mt.tv_sec * 1000000000 + mt.tv_nsec;
        return 0;
    }
    if (fs_perf_parse_reference_arg(arg, ref) == 0)
        return 0;
    fprintf(stderr,
            "fabricscope import-perf: --reference wants TOD=CLOCK (seconds up to %lld, "
            "e.g. 1796236354.802946=1016.124836457) or now\n",
            (long long)MAX_SEC);
    return 2;
}

int
fs_import_perf_main(int argc, char **argv)
{
    static const struct fs_imp_extra extra[] = {
        {{"reference", required_argument, NULL, 'r'}, perf_reference_arg}};
    struct fs_perf_ref ref = {0};
    struct fs_imp_args a;
    int rc = fs_imp_parse_args(argc, argv, "import-perf",
                               "--url URL --host NAME [--reference TOD=CLOCK|now] "
                               "[--token-file FILE] < perf-script.txt",
                               extra, 1, &ref, 0, true, &a);
    if (rc >= 0)
        return rc;
    /* Streamed: perf script output of a long capture is gigabytes. Lines are read into a
       fixed buffer (a longer one is skipped whole), events posted every
       FS_IMP_STREAM_EVENTS (fs_imp_stream_flush). */
    struct fs_imp_stream st;
    struct fs_imp_batch b = {0};
    struct fs_perf_ref hdr = {0};
    static char line[64 << 10];
    size_t lines = 0, events = 0, skipped = 0, too_long = 0, lineno = 0;
    bool started = false;
    int read_rc = -1;
    char why[320] = "", empty[160] = "";
    fs_imp_stream_init(&st, &a, "import-perf", stdout, stderr);
    while (fgets(line, sizeof line, stdin)) {
        lineno++;
        size_t l = strlen(line);
        if (l == sizeof line - 1 && line[l - 1] != '\n') { /* longer than the buffer */
            int ch;
            while ((ch = getchar()) != EOF && ch != '\n')
                ;
            too_long++;
            continue;
        }
        while (l > 0 && (line[l - 1] == '\n' || line[l - 1] == '\r'))
            line[--l] = '\0';
        size_t i = 0;
        while (i < l && (line[i] == ' ' || line[i] == '\t'))
            i++;
        if (i == l)
            continue;
        if (line[i] == '#') {
            if (!started && header_reference(line + i, l - i, &hdr, why, sizeof why) != 0)
                goto out;
            continue;
        }
        if (!started) { /* the header is over: the reference is settled */
            started = true;
            if (!ref.known)
                ref = hdr;
            if (!ref.known) {
                snprintf(why, sizeof why,
                         "no \"# reference time\" header before the first sample: record with "
                         "`perf record -k mono` and run `perf script --header`, or give "
                         "--reference TOD=CLOCK or --reference now");
                goto out;
            }
        }
        lines++;
        char lwhy[160];
        int r = parse_line(line, l, a.host, &ref, &b, lwhy, sizeof lwhy);
        if (r < 0) {
            snprintf(why, sizeof why, "line %zu: %s", lineno, lwhy);
            goto out;
        }
        if (r == 0) {
            skipped++;
            continue;
        }
        events++;
        if (fs_imp_stream_feed(&st, &b) != 0)
            goto out;
    }
    if (ferror(stdin)) {
        snprintf(why, sizeof why, "reading stdin failed");
        goto out;
    }
    read_rc = 0;
    if (skipped + too_long)
        fprintf(stderr, "fabricscope import-perf: %zu lines were not samples, skipped%s\n",
                skipped + too_long, too_long ? " (some longer than 64 KiB)" : "");
    if (lines > 0)
        snprintf(empty, sizeof empty, "none of %zu lines is a perf script tracepoint sample",
                 lines);
    else
        snprintf(empty, sizeof empty, "no samples on stdin");
out:
    rc = fs_imp_stream_end(&st, &b, read_rc, why, events, empty);
    fs_imp_batch_free(&b);
    return rc;
}
