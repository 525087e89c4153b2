/*
 * A hand-written parser for the PromQL series-selector subset of selector.h. PromQL has
 * no C library; the grammar here is tiny and the fuzzer (tests/fuzz/fuzz_selector.c)
 * covers it.
 */
#include "http/selector.h"

#include <regex.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct matcher {
    char *label;
    enum fs_match_op op;
    char *value;
    regex_t re;
    bool has_re;
    bool matches_empty;
};

struct fs_selector {
    struct matcher m[FS_SELECTOR_MAX_MATCHERS];
    size_t n;
    size_t regex_bytes; /* estimated, see regex_check */
};

struct parser {
    const char *s;
    size_t len, pos;
    char *err;
    size_t errlen;
    unsigned long regex_bytes; /* estimate, summed over the selector's regexes */
};

static int fail(struct parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
fail(struct parser *p, const char *fmt, ...)
{
    if (p->err && p->errlen) {
        int n = snprintf(p->err, p->errlen, "col %zu: ", p->pos + 1);
        if (n >= 0 && (size_t)n < p->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return -1;
}

static void
skip_ws(struct parser *p)
{
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
                               p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
        p->pos++;
}

static bool
is_alpha_(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool
is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Reads an identifier; colons are allowed only in metric names. Returns a malloc'd copy. */
static char *
ident(struct parser *p, bool colon)
{
    size_t st = p->pos;
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        bool ok = is_alpha_(c) || (colon && c == ':') || (p->pos > st && is_digit(c));
        if (!ok)
            break;
        p->pos++;
    }
    if (p->pos == st)
        return NULL;
    return strndup(p->s + st, p->pos - st);
}

static int
hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static size_t
utf8_put(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Parses a quoted string at p->pos into a malloc'd, unescaped copy (*out). */
static int
string_lit(struct parser *p, char **out)
{
    *out = NULL;
    if (p->pos >= p->len)
        return fail(p, "expected a quoted string, found the end");
    char q = p->s[p->pos];
    if (q != '"' && q != '\'' && q != '`')
        return fail(p, "expected a quoted string");
    size_t start = p->pos;
    p->pos++;
    /* Unescaping never makes a string longer than its source (\U.... gives at most 4). */
    char *o = malloc(p->len - start + 1);
    if (!o)
        return fail(p, "out of memory");
    size_t n = 0;
    for (;;) {
        if (p->pos >= p->len) {
            p->pos = start;
            free(o);
            return fail(p, "unterminated string");
        }
        char c = p->s[p->pos];
        if (c == q) {
            p->pos++;
            break;
        }
        if (c == '\0') {
            free(o);
            return fail(p, "NUL byte in string");
        }
        if (q == '`' || c != '\\') {
            if (c == '\n' && q != '`') {
                free(o);
                return fail(p, "newline in string");
            }
            o[n++] = c;
            p->pos++;
            continue;
        }
        /* An escape. */
        if (p->pos + 1 >= p->len) {
            free(o);
            return fail(p, "unterminated escape");
        }
        char e = p->s[p->pos + 1];
        uint32_t cp = 0;
        int digits = 0, base = 16;
        switch (e) {
        case 'a':
            o[n++] = '\a';
            break;
        case 'b':
            o[n++] = '\b';
            break;
        case 'f':
            o[n++] = '\f';
            break;
        case 'n':
            o[n++] = '\n';
            break;
        case 'r':
            o[n++] = '\r';
            break;
        case 't':
            o[n++] = '\t';
            break;
        case 'v':
            o[n++] = '\v';
            break;
        case '\\':
            o[n++] = '\\';
            break;
        case '"':
        case '\'':
            if (e != q) {
                free(o);
                return fail(p, "unknown escape sequence \\%c", e);
            }
            o[n++] = e;
            break;
        case 'x':
            digits = 2;
            break;
        case 'u':
            digits = 4;
            break;
        case 'U':
            digits = 8;
            break;
        default:
            if (e >= '0' && e <= '7') {
                digits = 3;
                base = 8;
                break;
            }
            free(o);
            if ((unsigned char)e >= 0x20 && (unsigned char)e < 0x7f)
                return fail(p, "unknown escape sequence \\%c", e);
            return fail(p, "unknown escape sequence");
        }
        if (!digits) {
            p->pos += 2;
            continue;
        }
        size_t d0 = p->pos + (base == 8 ? 1 : 2);
        if (d0 + (size_t)digits > p->len) {
            free(o);
            return fail(p, "short escape sequence");
        }
        for (int i = 0; i < digits; i++) {
            int v = hexval(p->s[d0 + (size_t)i]);
            if (v < 0 || v >= base) {
                free(o);
                return fail(p, "bad digit in escape sequence");
            }
            cp = cp * (uint32_t)base + (uint32_t)v;
        }
        if (cp == 0 || (base == 8 && cp > 255) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF && (e == 'u' || e == 'U'))) {
            free(o);
            return fail(p, "invalid escaped character");
        }
        if (e == 'x' || base == 8)
            o[n++] = (char)cp; /* a byte, as in Go */
        else
            n += utf8_put(o + n, cp);
        p->pos = d0 + (size_t)digits;
    }
    o[n] = '\0';
    *out = o;
    return 0;
}

/* Skips a bracket expression starting at re[i] == '['; returns the index of its ']'
 * (or of the terminating NUL, which regcomp then refuses). */
static size_t
skip_bracket(const char *re, size_t i)
{
    size_t j = i + 1;
    if (re[j] == '^')
        j++;
    if (re[j] == ']')
        j++;
    while (re[j] && re[j] != ']') {
        if (re[j] == '[' && (re[j + 1] == ':' || re[j + 1] == '=' || re[j + 1] == '.')) {
            char kind = re[j + 1];
            j += 2;
            while (re[j] && !(re[j] == kind && re[j + 1] == ']'))
                j++;
            if (re[j])
                j += 2;
            continue;
        }
        j++;
    }
    return j;
}

/*
 * What a regex may cost, decided before regcomp sees it (all of this is linear in the
 * pattern and never calls regcomp). glibc compiles a counted repetition by copying its
 * operand, so ((a{9}){9}){9} is 729 copies and each further level multiplies by nine:
 * positions are counted multiplicatively over nesting. Its epsilon closures grow with
 * the square of a run of positions that may all be skipped (a{0,600} or (a?){600}
 * take 6 MB): the longest such run is tracked too. An unbounded repetition of something
 * that already repeats without bound ((a+)+, (a*)*) is refused, as the README promises.
 * Recursive descent over ERE: alternation, concatenation, piece (atom, one quantifier).
 */
struct re_cost {
    unsigned long positions; /* after expanding repetitions, as glibc does */
    unsigned long prefix;    /* skippable positions at the start */
    unsigned long suffix;    /* skippable positions at the end */
    unsigned long run;       /* longest run of skippable positions */
    bool nullable;           /* matches the empty string */
    bool unbounded;          /* contains *, + or {m,} */
};

struct re_walk {
    const char *re;
    size_t i;
    int depth;
    char *why;
    size_t whylen;
};

#define COST_CAP ((unsigned long)FS_SELECTOR_MAX_REGEX_COST + 1)

/* Saturating arithmetic: anything above the budget is "too much", and stays so. */
static unsigned long
cost_mul(unsigned long a, unsigned long b)
{
    if (a && b > COST_CAP / a)
        return COST_CAP;
    return a * b > COST_CAP ? COST_CAP : a * b;
}

static unsigned long
cost_add(unsigned long a, unsigned long b)
{
    return a + b > COST_CAP ? COST_CAP : a + b;
}

static unsigned long
umax(unsigned long a, unsigned long b)
{
    return a > b ? a : b;
}

/* A skippable whole: every position is in one run. */
static void
cost_all_skippable(struct re_cost *c)
{
    c->nullable = true;
    c->prefix = c->suffix = c->run = c->positions;
}

/* Appends b to a (concatenation). */
static void
cost_concat(struct re_cost *a, const struct re_cost *b)
{
    unsigned long join = cost_add(a->suffix, b->prefix);
    a->run = umax(umax(a->run, b->run), join);
    if (a->nullable)
        a->prefix = cost_add(a->positions, b->prefix);
    a->suffix = b->nullable ? cost_add(a->suffix, b->positions) : b->suffix;
    a->positions = cost_add(a->positions, b->positions);
    a->nullable = a->nullable && b->nullable;
    a->unbounded |= b->unbounded;
    if (a->nullable)
        cost_all_skippable(a);
}

static int walk_alt(struct re_walk *w, struct re_cost *out);

static bool
is_quantifier(const char *re, size_t i)
{
    char c = re[i];
    return c == '*' || c == '+' || c == '?' ||
           (c == '{' && (is_digit(re[i + 1]) || re[i + 1] == ','));
}

/* Reads {m}, {m,}, {m,n} or {,n} at w->re[w->i] == '{'. */
static int
walk_interval(struct re_walk *w, unsigned long *lo, unsigned long *hi, bool *open)
{
    const char *p = w->re + w->i + 1;
    unsigned long m = 0, n;
    bool have_m = false;
    for (; is_digit(*p); p++, have_m = true)
        if ((m = m * 10 + (unsigned long)(*p - '0')) > FS_SELECTOR_MAX_REPEAT)
            goto too_big;
    n = m;
    *open = false;
    if (*p == ',') {
        p++;
        if (!is_digit(*p))
            *open = true;
        for (n = 0; is_digit(*p); p++)
            if ((n = n * 10 + (unsigned long)(*p - '0')) > FS_SELECTOR_MAX_REPEAT)
                goto too_big;
    } else if (!have_m) {
        goto malformed;
    }
    if (*p != '}' || (*open && !have_m) || (!*open && n < m))
        goto malformed;
    *lo = m;
    *hi = *open ? m : n;
    w->i = (size_t)(p - w->re) + 1;
    return 0;
malformed:
    snprintf(w->why, w->whylen, "malformed repetition at offset %zu", w->i);
    return -1;
too_big:
    snprintf(w->why, w->whylen, "repetition count above %d", FS_SELECTOR_MAX_REPEAT);
    return -1;
}

/* Applies the quantifier at w->re[w->i] to the atom's cost x. */
static int
walk_quantifier(struct re_walk *w, struct re_cost *x)
{
    char q = w->re[w->i];
    bool open = q == '*' || q == '+';
    unsigned long lo = q == '+' ? 1 : 0, hi = 1;
    if (q == '{') {
        if (walk_interval(w, &lo, &hi, &open) != 0)
            return -1;
    } else {
        w->i++;
    }
    if (is_quantifier(w->re, w->i)) {
        snprintf(w->why, w->whylen, "invalid nested repetition operator");
        return -1;
    }
    if (open && x->unbounded) {
        snprintf(w->why, w->whylen,
                 "an unbounded repetition of something that repeats without bound, like "
                 "(a+)+, is not allowed");
        return -1;
    }
    /* glibc's expansion: lo mandatory copies, then hi - lo optional ones (x{m,} is m
     * copies and a starred one, x+ is xx*), one node per copy besides. */
    unsigned long copies = umax(open ? lo + 1 : hi, 1);
    unsigned long optional = open ? 1 : hi - lo;
    struct re_cost r = *x;
    r.positions = cost_add(cost_mul(x->positions, copies), copies);
    r.unbounded = x->unbounded || open;
    if (x->nullable || lo == 0) {
        cost_all_skippable(&r);
    } else {
        /* Mandatory copies break runs; the optional tail is one run with x's suffix. */
        unsigned long tail = cost_add(cost_mul(x->positions, optional), x->suffix);
        r.nullable = false;
        r.prefix = x->prefix;
        r.suffix = optional ? tail : x->suffix;
        r.run = umax(umax(x->run, cost_add(x->suffix, x->prefix)), r.suffix);
    }
    *x = r;
    return 0;
}

/* One piece: an atom and at most one quantifier. */
static int
walk_piece(struct re_walk *w, struct re_cost *out)
{
    const char *re = w->re;
    struct re_cost x = {1, 0, 0, 0, false, false};
    char ch = re[w->i];
    if (ch == '(') {
        if (++w->depth > FS_SELECTOR_MAX_REGEX_DEPTH) {
            snprintf(w->why, w->whylen, "groups nested deeper than %d",
                     FS_SELECTOR_MAX_REGEX_DEPTH);
            return -1;
        }
        w->i++;
        if (walk_alt(w, &x) != 0)
            return -1;
        x.positions = cost_add(x.positions, 1);
        if (re[w->i] != ')') {
            snprintf(w->why, w->whylen, "missing )");
            return -1;
        }
        w->i++;
        w->depth--;
    } else if (ch == '[') {
        w->i = skip_bracket(re, w->i);
        if (re[w->i])
            w->i++;
    } else if (ch == '\\') {
        if (re[w->i + 1] >= '1' && re[w->i + 1] <= '9') {
            snprintf(w->why, w->whylen, "back-references are not supported");
            return -1;
        }
        w->i += re[w->i + 1] ? 2 : 1;
    } else if (ch == '^' || ch == '$') {
        w->i++;
        x.nullable = true; /* an anchor consumes nothing */
        cost_all_skippable(&x);
    } else if (is_quantifier(re, w->i)) {
        /* A quantifier with nothing to repeat: regcomp refuses it or takes it
         * literally; one position either way. */
        w->i++;
        *out = x;
        return 0;
    } else {
        w->i++; /* a literal or '.' */
    }
    if (is_quantifier(re, w->i) && walk_quantifier(w, &x) != 0)
        return -1;
    *out = x;
    return 0;
}

/* branch ('|' branch)* up to the ')' closing the group, or the end. */
static int
walk_alt(struct re_walk *w, struct re_cost *out)
{
    struct re_cost alt = {0, 0, 0, 0, true, false}, branch = alt;
    bool first = true;
    unsigned long n_nullable = 0;
    for (;;) {
        char ch = w->re[w->i];
        if (ch == ')' && w->depth == 0) {
            snprintf(w->why, w->whylen, "unmatched )");
            return -1;
        }
        bool end = !ch || ch == ')';
        if (end || ch == '|') {
            /* Branches that match the empty string are joined by epsilon edges with
             * each other: glibc's closures grow with their square ((|||){9} nested
             * twice takes gigabytes), so each such branch costs their count. */
            if (branch.nullable && !(first && end))
                branch.positions = cost_add(branch.positions, ++n_nullable);
            if (first) {
                alt = branch;
            } else {
                alt.positions = cost_add(cost_add(alt.positions, branch.positions), 1);
                alt.prefix = umax(alt.prefix, branch.prefix);
                alt.suffix = umax(alt.suffix, branch.suffix);
                alt.run = umax(alt.run, branch.run);
                alt.nullable |= branch.nullable;
                alt.unbounded |= branch.unbounded;
                if (alt.nullable)
                    cost_all_skippable(&alt);
            }
            first = false;
            if (end)
                break;
            w->i++;
            branch = (struct re_cost){0, 0, 0, 0, true, false};
            continue;
        }
        struct re_cost piece;
        if (walk_piece(w, &piece) != 0)
            return -1;
        cost_concat(&branch, &piece);
    }
    *out = alt;
    return 0;
}

/*
 * Refuses patterns that would make glibc slow or huge: longer than
 * FS_SELECTOR_MAX_REGEX_LEN, expanding past FS_SELECTOR_MAX_REGEX_COST positions or a
 * skippable run of FS_SELECTOR_MAX_REGEX_RUN, nested unbounded repetitions, a
 * repetition applied to a repetition (`a**`, `a+?`; RE2, which Prometheus uses, refuses
 * these too), back-references. *bytes gets an estimate of what regcomp will allocate.
 */
static int
regex_check(const char *re, unsigned long *bytes, char *why, size_t whylen)
{
    if (strlen(re) > FS_SELECTOR_MAX_REGEX_LEN) {
        snprintf(why, whylen, "regex longer than %d bytes", FS_SELECTOR_MAX_REGEX_LEN);
        return -1;
    }
    struct re_walk w = {re, 0, 0, why, whylen};
    struct re_cost c;
    /* glibc takes an unmatched ')' as a literal, but inside our ^( )$ it would close
     * the wrapper and regroup the rest: refused, as RE2 does. */
    if (walk_alt(&w, &c) != 0)
        return -1;
    if (c.positions > FS_SELECTOR_MAX_REGEX_COST) {
        snprintf(why, whylen,
                 "regex too costly: its repetitions expand to more than %d positions "
                 "(nested counts multiply)",
                 FS_SELECTOR_MAX_REGEX_COST);
        return -1;
    }
    if (c.run > FS_SELECTOR_MAX_REGEX_RUN) {
        snprintf(why, whylen,
                 "regex too costly: more than %d optional positions in a row (like "
                 "a{0,%d} or (a?){%d})",
                 FS_SELECTOR_MAX_REGEX_RUN, FS_SELECTOR_MAX_REGEX_RUN + 1,
                 FS_SELECTOR_MAX_REGEX_RUN + 1);
        return -1;
    }
    /* Measured on glibc 2.36: about 120 bytes a position, 17 per pair in a run. */
    *bytes = 128 * c.positions + 17 * c.run * c.run;
    return 0;
}

static int
compile_matcher(struct parser *p, struct matcher *m)
{
    if (m->op == FS_MATCH_EQ || m->op == FS_MATCH_NE) {
        bool empty = m->value[0] == '\0';
        m->matches_empty = m->op == FS_MATCH_EQ ? empty : !empty;
        return 0;
    }
    char why[160];
    unsigned long bytes = 0;
    if (regex_check(m->value, &bytes, why, sizeof why) != 0)
        return fail(p, "bad regex for label %s: %s", m->label, why);
    p->regex_bytes += bytes;
    if (p->regex_bytes > FS_SELECTOR_MAX_REGEX_BYTES)
        return fail(p, "the regexes of one selector would take more than %d KiB compiled",
                    FS_SELECTOR_MAX_REGEX_BYTES / 1024);
    regex_t probe;
    /* Compile alone first so "a)(b" cannot become valid once wrapped in ^( )$. */
    int rc = regcomp(&probe, m->value, REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
        regerror(rc, &probe, why, sizeof why);
        return fail(p, "bad regex for label %s: %s", m->label, why);
    }
    regfree(&probe);
    size_t vl = strlen(m->value);
    char *anch = malloc(vl + 5);
    if (!anch)
        return fail(p, "out of memory");
    memcpy(anch, "^(", 2);
    memcpy(anch + 2, m->value, vl);
    memcpy(anch + 2 + vl, ")$", 3);
    rc = regcomp(&m->re, vl ? anch : "^$", REG_EXTENDED | REG_NOSUB);
    free(anch);
    if (rc != 0) {
        regerror(rc, &m->re, why, sizeof why);
        return fail(p, "bad regex for label %s: %s", m->label, why);
    }
    m->has_re = true;
    bool e = regexec(&m->re, "", 0, NULL, 0) == 0;
    m->matches_empty = m->op == FS_MATCH_RE ? e : !e;
    return 0;
}

static struct matcher *
add_matcher(struct parser *p, struct fs_selector *s)
{
    if (s->n >= FS_SELECTOR_MAX_MATCHERS) {
        fail(p, "more than %d matchers", FS_SELECTOR_MAX_MATCHERS);
        return NULL;
    }
    struct matcher *m = &s->m[s->n++];
    memset(m, 0, sizeof *m);
    return m;
}

static int
parse_braces(struct parser *p, struct fs_selector *s, bool have_name)
{
    p->pos++; /* '{' */
    for (;;) {
        skip_ws(p);
        if (p->pos >= p->len)
            return fail(p, "unexpected end, expected a label name or '}'");
        if (p->s[p->pos] == '}') {
            p->pos++;
            return 0;
        }
        size_t lpos = p->pos;
        struct matcher *m = add_matcher(p, s);
        if (!m)
            return -1;
        m->label = ident(p, false);
        if (!m->label)
            return fail(p, "expected a label name");
        if (have_name && strcmp(m->label, "__name__") == 0) {
            p->pos = lpos;
            return fail(p, "metric name must not be set twice");
        }
        skip_ws(p);
        if (p->pos + 1 <= p->len && p->s[p->pos] == '=') {
            if (p->pos + 1 < p->len && p->s[p->pos + 1] == '~') {
                m->op = FS_MATCH_RE;
                p->pos += 2;
            } else {
                m->op = FS_MATCH_EQ;
                p->pos += 1;
            }
        } else if (p->pos + 1 < p->len && p->s[p->pos] == '!' &&
                   (p->s[p->pos + 1] == '=' || p->s[p->pos + 1] == '~')) {
            m->op = p->s[p->pos + 1] == '=' ? FS_MATCH_NE : FS_MATCH_NRE;
            p->pos += 2;
        } else {
            return fail(p, "expected one of =, !=, =~, !~ after label %s", m->label);
        }
        skip_ws(p);
        if (string_lit(p, &m->value) != 0)
            return -1;
        if (compile_matcher(p, m) != 0)
            return -1;
        skip_ws(p);
        if (p->pos >= p->len)
            return fail(p, "unexpected end, expected ',' or '}'");
        if (p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->s[p->pos] != '}')
            return fail(p, "expected ',' or '}'");
    }
}

int
fs_selector_parse(const char *text, size_t len, struct fs_selector **out, char *errbuf,
                  size_t errlen)
{
    struct parser p = {text, len, 0, errbuf, errlen, 0};
    int rc = -1;
    *out = NULL;
    struct fs_selector *s = calloc(1, sizeof *s);
    if (!s)
        return fail(&p, "out of memory");
    if (len > FS_SELECTOR_MAX_LEN) {
        fail(&p, "selector longer than %d bytes", FS_SELECTOR_MAX_LEN);
        goto cleanup;
    }
    skip_ws(&p);
    bool have_name = false;
    if (p.pos < len && (is_alpha_(text[p.pos]) || text[p.pos] == ':')) {
        struct matcher *m = add_matcher(&p, s);
        m->label = strdup("__name__");
        m->op = FS_MATCH_EQ;
        m->value = ident(&p, true);
        if (!m->label || !m->value) {
            fail(&p, "out of memory");
            goto cleanup;
        }
        have_name = true;
        skip_ws(&p);
    }
    if (p.pos < len && text[p.pos] == '{') {
        if (parse_braces(&p, s, have_name) != 0)
            goto cleanup;
        skip_ws(&p);
    } else if (!have_name) {
        fail(&p, p.pos < len ? "expected a metric name or '{'" : "empty selector");
        goto cleanup;
    }
    if (p.pos < len) {
        fail(&p, "unexpected text after the selector");
        goto cleanup;
    }
    bool nonempty = false;
    for (size_t i = 0; i < s->n; i++)
        nonempty |= !s->m[i].matches_empty;
    if (!nonempty) {
        p.pos = 0;
        fail(&p, "a selector needs at least one matcher that does not match the empty string");
        goto cleanup;
    }
    s->regex_bytes = p.regex_bytes;
    *out = s;
    s = NULL;
    rc = 0;
cleanup:
    fs_selector_free(s);
    return rc;
}

void
fs_selector_free(struct fs_selector *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        free(s->m[i].label);
        free(s->m[i].value);
        if (s->m[i].has_re)
            regfree(&s->m[i].re);
    }
    free(s);
}

static bool
match_one(const struct matcher *m, const char *v)
{
    switch (m->op) {
    case FS_MATCH_EQ:
        return strcmp(v, m->value) == 0;
    case FS_MATCH_NE:
        return strcmp(v, m->value) != 0;
    case FS_MATCH_RE:
        return regexec(&m->re, v, 0, NULL, 0) == 0;
    case FS_MATCH_NRE:
        return regexec(&m->re, v, 0, NULL, 0) != 0;
    }
    return false;
}

bool
fs_selector_match(const struct fs_selector *s, const char *name, const struct fs_label *labels,
                  size_t n_labels)
{
    for (size_t i = 0; i < s->n; i++) {
        const struct matcher *m = &s->m[i];
        const char *v = "";
        if (strcmp(m->label, "__name__") == 0) {
            v = name ? name : "";
        } else {
            for (size_t j = 0; j < n_labels; j++) {
                if (strcmp(labels[j].name, m->label) == 0) {
                    v = labels[j].value ? labels[j].value : "";
                    break;
                }
            }
        }
        if (!match_one(m, v))
            return false;
    }
    return true;
}

size_t
fs_selector_regex_bytes(const struct fs_selector *s)
{
    return s->regex_bytes;
}

size_t
fs_selector_count(const struct fs_selector *s)
{
    return s->n;
}

void
fs_selector_get(const struct fs_selector *s, size_t i, const char **label, enum fs_match_op *op,
                const char **value)
{
    *label = s->m[i].label;
    *op = s->m[i].op;
    *value = s->m[i].value;
}
