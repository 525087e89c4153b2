/*
 * Flow rules -> ONYX ACL plan and per-rule counts (see flowrules.h).
 */
#include "flowrules.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/*
 * ASSUMPTION (UNVERIFIED, the only place it is made): the IPv4 ACL entry syntax for L4
 * ports and the ECN match. onyx-facts.md has `seq-number N <permit|deny> ip <src> <dst>`
 * verbatim, not the L4 keywords; these are:
 *   permit <udp|tcp|ip> any any [src-port-range LO HI] [dst-port-range LO HI] [ecn 3]
 * (ECN codepoint 3 = CE).
 */
int
onyx_flow_rule_entry(const struct fs_flow_rule *r, char *buf, size_t len)
{
    const char *proto = r->protocol == FS_PROTO_UDP   ? "udp"
                        : r->protocol == FS_PROTO_TCP ? "tcp"
                                                      : "ip";
    if ((r->src_lo || r->src_hi || r->dst_lo || r->dst_hi) && r->protocol == FS_PROTO_ANY)
        return -1; /* ports need a protocol */
    size_t o = (size_t)snprintf(buf, len, "permit %s any any", proto);
    if ((r->src_lo || r->src_hi) && o < len)
        o += (size_t)snprintf(buf + o, len - o, " src-port-range %u %u", (unsigned)r->src_lo,
                              (unsigned)r->src_hi);
    if ((r->dst_lo || r->dst_hi) && o < len)
        o += (size_t)snprintf(buf + o, len - o, " dst-port-range %u %u", (unsigned)r->dst_lo,
                              (unsigned)r->dst_hi);
    if (r->ecn_ce && o < len)
        o += (size_t)snprintf(buf + o, len - o, " ecn 3");
    return o < len ? 0 : -1;
}

/* ---------------- rule geometry ---------------- */

static bool
range_within(uint16_t blo, uint16_t bhi, uint16_t alo, uint16_t ahi)
{
    if (alo == 0 && ahi == 0)
        return true; /* a: any */
    if (blo == 0 && bhi == 0)
        return false;
    return blo >= alo && bhi <= ahi;
}

bool
onyx_flow_rule_within(const struct fs_flow_rule *b, const struct fs_flow_rule *a)
{
    if (a->protocol != FS_PROTO_ANY && a->protocol != b->protocol)
        return false;
    if (a->ecn_ce && !b->ecn_ce)
        return false;
    return range_within(b->dst_lo, b->dst_hi, a->dst_lo, a->dst_hi) &&
           range_within(b->src_lo, b->src_hi, a->src_lo, a->src_hi);
}

static unsigned
width(uint16_t lo, uint16_t hi)
{
    return lo == 0 && hi == 0 ? 65536u : (unsigned)(hi - lo) + 1u;
}

/* Specificity order: a rule within another sorts before it (CE before not CE, then the
 * narrower destination and source ranges, then a named protocol before any); ties keep
 * the configured order. */
static int
more_specific(const struct fs_flow_rule *x, const struct fs_flow_rule *y)
{
    if (x->ecn_ce != y->ecn_ce)
        return x->ecn_ce ? -1 : 1;
    unsigned wx = width(x->dst_lo, x->dst_hi), wy = width(y->dst_lo, y->dst_hi);
    if (wx != wy)
        return wx < wy ? -1 : 1;
    wx = width(x->src_lo, x->src_hi);
    wy = width(y->src_lo, y->src_hi);
    if (wx != wy)
        return wx < wy ? -1 : 1;
    if ((x->protocol == FS_PROTO_ANY) != (y->protocol == FS_PROTO_ANY))
        return x->protocol == FS_PROTO_ANY ? 1 : -1;
    return 0;
}

void
onyx_flow_order(const struct fs_flow_rule *rules, size_t n, size_t *order)
{
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    for (size_t i = 1; i < n; i++) { /* insertion sort: stable, n <= 1024 */
        size_t v = order[i], j = i;
        while (j > 0 && more_specific(&rules[v], &rules[order[j - 1]]) < 0) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = v;
    }
}

void
onyx_flow_rule_counts(const struct fs_flow_rule *rules, size_t n, const size_t *order,
                      const uint64_t *entry_pk, const uint64_t *entry_by, uint64_t *rule_pk,
                      uint64_t *rule_by, uint64_t *ce_pk)
{
    for (size_t k = 0; k < n; k++) {
        size_t a = order[k];
        rule_pk[a] = rule_by[a] = 0;
        ce_pk[a] = UINT64_MAX;
        for (size_t m = 0; m <= k; m++) {
            const struct fs_flow_rule *b = &rules[order[m]];
            if (!onyx_flow_rule_within(b, &rules[a]))
                continue;
            /* an identical rule earlier took the packets: count them for both */
            rule_pk[a] += entry_pk[m];
            rule_by[a] += entry_by[m];
        }
        if (rules[a].ecn_ce)
            continue;
        /* the same rule with ecn: ce gives this rule's CE-marked packets */
        for (size_t m = 0; m < k; m++) {
            const struct fs_flow_rule *b = &rules[order[m]];
            if (b->ecn_ce && b->protocol == rules[a].protocol && b->dst_lo == rules[a].dst_lo &&
                b->dst_hi == rules[a].dst_hi && b->src_lo == rules[a].src_lo &&
                b->src_hi == rules[a].src_hi) {
                ce_pk[a] = 0;
                for (size_t q = 0; q <= m; q++)
                    if (onyx_flow_rule_within(&rules[order[q]], b))
                        ce_pk[a] += entry_pk[q];
                break;
            }
        }
    }
}

bool
onyx_port_cli_name(const char *name, char *buf, size_t len)
{
    if (strncasecmp(name, "Eth", 3) != 0)
        return false;
    const char *p = name + 3;
    if (!isdigit((unsigned char)*p))
        return false;
    for (const char *q = p; *q; q++)
        if (!isdigit((unsigned char)*q) && *q != '/')
            return false;
    return (size_t)snprintf(buf, len, "%s", p) < len;
}

/* ---------------- plan building ---------------- */

static int push(char ***v, size_t *n, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
push(char ***v, size_t *n, size_t *cap, const char *fmt, ...)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        char **p = realloc(*v, nc * sizeof(*p));
        if (!p)
            return -1;
        *v = p;
        *cap = nc;
    }
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (!((*v)[*n] = strdup(line)))
        return -1;
    (*n)++;
    return 0;
}

#define CMD(p, ...) push(&(p)->cmds, &(p)->n, &(p)->cap, __VA_ARGS__)
#define UNDO(p, ...) push(&(p)->rollback, &(p)->n_rollback, &(p)->cap_rollback, __VA_ARGS__)
#define NOTE(p, ...) push(&(p)->notes, &(p)->n_notes, &(p)->cap_notes, __VA_ARGS__)

void
onyx_plan_free(struct onyx_plan *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->cmds[i]);
    for (size_t i = 0; i < p->n_rollback; i++)
        free(p->rollback[i]);
    for (size_t i = 0; i < p->n_notes; i++)
        free(p->notes[i]);
    free(p->cmds);
    free(p->rollback);
    free(p->notes);
    memset(p, 0, sizeof(*p));
}

struct acl_entry {
    unsigned seq;
    char text[384];
};

/* One of the project's ACLs as the running configuration has it. */
struct acl_state {
    char name[128];
    struct acl_entry *e;
    size_t n_e, cap_e;
    bool wanted;
};

/* A port's IPv4 ACL binding in the running configuration. */
struct binding {
    char port[32]; /* "1/49" */
    char acl[128];
};

struct running {
    struct acl_state *acl;
    size_t n_acl, cap_acl;
    struct binding *b;
    size_t n_b, cap_b;
};

static void
running_free(struct running *r)
{
    for (size_t i = 0; i < r->n_acl; i++)
        free(r->acl[i].e);
    free(r->acl);
    free(r->b);
    memset(r, 0, sizeof(*r));
}

static bool
name_ok(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_' && *s != '.')
            return false;
    return true;
}

static struct acl_state *
acl_find(struct running *r, const char *name)
{
    for (size_t i = 0; i < r->n_acl; i++)
        if (!strcmp(r->acl[i].name, name))
            return &r->acl[i];
    return NULL;
}

static struct acl_state *
acl_get(struct running *r, const char *name)
{
    struct acl_state *a = acl_find(r, name);
    if (a)
        return a;
    if (r->n_acl == r->cap_acl) {
        size_t nc = r->cap_acl ? r->cap_acl * 2 : 8;
        struct acl_state *v = realloc(r->acl, nc * sizeof(*v));
        if (!v)
            return NULL;
        r->acl = v;
        r->cap_acl = nc;
    }
    a = &r->acl[r->n_acl++];
    memset(a, 0, sizeof(*a));
    snprintf(a->name, sizeof(a->name), "%s", name);
    return a;
}

static int
acl_entry_set(struct acl_state *a, unsigned seq, const char *text)
{
    for (size_t i = 0; i < a->n_e; i++)
        if (a->e[i].seq == seq) {
            snprintf(a->e[i].text, sizeof(a->e[i].text), "%s", text);
            return 0;
        }
    if (a->n_e == a->cap_e) {
        size_t nc = a->cap_e ? a->cap_e * 2 : 8;
        struct acl_entry *v = realloc(a->e, nc * sizeof(*v));
        if (!v)
            return -1;
        a->e = v;
        a->cap_e = nc;
    }
    a->e[a->n_e].seq = seq;
    snprintf(a->e[a->n_e].text, sizeof(a->e[a->n_e].text), "%s", text);
    a->n_e++;
    return 0;
}

static const char *
acl_entry_text(const struct acl_state *a, unsigned seq)
{
    for (size_t i = 0; a && i < a->n_e; i++)
        if (a->e[i].seq == seq)
            return a->e[i].text;
    return NULL;
}

static int
binding_set(struct running *r, const char *port, const char *acl)
{
    for (size_t i = 0; i < r->n_b; i++)
        if (!strcmp(r->b[i].port, port)) {
            snprintf(r->b[i].acl, sizeof(r->b[i].acl), "%s", acl);
            return 0;
        }
    if (r->n_b == r->cap_b) {
        size_t nc = r->cap_b ? r->cap_b * 2 : 16;
        struct binding *v = realloc(r->b, nc * sizeof(*v));
        if (!v)
            return -1;
        r->b = v;
        r->cap_b = nc;
    }
    snprintf(r->b[r->n_b].port, sizeof(r->b[r->n_b].port), "%s", port);
    snprintf(r->b[r->n_b].acl, sizeof(r->b[r->n_b].acl), "%s", acl);
    r->n_b++;
    return 0;
}

static const char *
binding_of(const struct running *r, const char *port)
{
    for (size_t i = 0; i < r->n_b; i++)
        if (!strcmp(r->b[i].port, port))
            return r->b[i].acl;
    return NULL;
}

static bool
ours(const char *acl)
{
    return strncmp(acl, FS_ONYX_ACL_PREFIX, strlen(FS_ONYX_ACL_PREFIX)) == 0;
}

/* Reads the project's ACLs (`ipv4 access-list NAME [seq-number N TEXT]` flat, or the
 * header followed by indented `seq-number N TEXT` lines) and every port's IPv4 ACL
 * binding (`interface ethernet 1/N ipv4 port access-group NAME` flat, or the interface
 * header followed by an indented `ipv4 port access-group NAME`). */
static int
read_running(const char *run, size_t len, struct running *r)
{
    struct acl_state *cur = NULL; /* block form: the ACL the following lines belong to */
    char cur_port[32] = "";       /* block form: the interface the following lines belong to */
    size_t cur_indent = 0;
    const char *p = run, *end = run ? run + len : NULL;
    while (p && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);
        char line[600];
        size_t a = 0;
        while (a < ll && isspace((unsigned char)p[a]))
            a++;
        size_t m = ll - a < sizeof(line) - 1 ? ll - a : sizeof(line) - 1;
        memcpy(line, p + a, m);
        while (m > 0 && isspace((unsigned char)line[m - 1]))
            m--;
        line[m] = '\0';
        p = nl ? nl + 1 : end;
        /* A line with a control byte inside (a tab, a NUL) is not read: its text could
           end up in a command (a rollback re-adds an entry as it was) and reach the CLI
           as keys (a tab completes, a Ctrl-C cancels). */
        bool ctl = false;
        for (size_t i = 0; i < m && !ctl; i++)
            ctl = (unsigned char)line[i] < 0x20 || line[i] == 0x7f;
        if (ctl)
            continue;
        char name[128], port[32];
        int off = 0;
        unsigned seq;
        if ((cur || cur_port[0]) && line[0] != '\0' && (a <= cur_indent || !strcmp(line, "exit"))) {
            /* `exit`, or a line not indented deeper than the header, ends the block */
            cur = NULL;
            cur_port[0] = '\0';
        }
        if (sscanf(line, "ipv4 access-list %127s%n", name, &off) == 1) {
            const char *text = line + off;
            cur = NULL;
            cur_port[0] = '\0';
            if (!ours(name))
                continue;
            struct acl_state *s = acl_get(r, name);
            if (!s)
                return -1;
            while (*text == ' ')
                text++;
            if (*text == '\0') {
                cur = s; /* block form follows */
                cur_indent = a;
                continue;
            }
            if (sscanf(text, "seq-number %u%n", &seq, &off) == 1 &&
                acl_entry_set(s, seq, text[off] ? text + off + 1 : "") < 0)
                return -1;
            continue;
        }
        if (sscanf(line, "interface ethernet %31s%n", port, &off) == 1) {
            const char *text = line + off;
            cur = NULL;
            cur_port[0] = '\0';
            while (*text == ' ')
                text++;
            if (*text == '\0') {
                snprintf(cur_port, sizeof(cur_port), "%s", port);
                cur_indent = a;
                continue;
            }
            if (sscanf(text, "ipv4 port access-group %127s", name) == 1 &&
                binding_set(r, port, name) < 0)
                return -1;
            continue;
        }
        if (cur && sscanf(line, "seq-number %u%n", &seq, &off) == 1) {
            if (acl_entry_set(cur, seq, line[off] ? line + off + 1 : "") < 0)
                return -1;
            continue;
        }
        if (cur_port[0] && sscanf(line, "ipv4 port access-group %127s", name) == 1 &&
            binding_set(r, cur_port, name) < 0)
            return -1;
    }
    return 0;
}

static bool
port_selected(const char *cli, const char *const *ports, size_t n_ports)
{
    char b[32];
    for (size_t i = 0; i < n_ports; i++)
        if (onyx_port_cli_name(ports[i], b, sizeof(b)) && !strcmp(b, cli))
            return true;
    return false;
}

int
onyx_flow_plan(const struct fs_flow_rule *rules, size_t n_rules, const char *running,
               size_t running_len, const char *const *ports, size_t n_ports, struct onyx_plan *out,
               char *errbuf, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    struct running have = {0};
    size_t *order = NULL;
    char(*want)[384] = NULL;
    int rc = -1;
    if (read_running(running, running_len, &have) != 0)
        goto oom;
    if (n_rules &&
        (!(order = calloc(n_rules, sizeof(*order))) || !(want = calloc(n_rules, sizeof(*want)))))
        goto oom;
    for (size_t i = 0; i < n_rules; i++) {
        const struct fs_flow_rule *r = &rules[i];
        if (!r->name || !name_ok(r->name) || strlen(r->name) > 100) {
            snprintf(errbuf, errlen, "flow rule name \"%s\" cannot name an ACL",
                     r->name ? r->name : "");
            goto out;
        }
        if (onyx_flow_rule_entry(r, want[i], sizeof(want[i])) != 0) {
            snprintf(errbuf, errlen, "flow rule %s: ports need protocol udp or tcp", r->name);
            goto out;
        }
        if (r->tc >= 0 && NOTE(out,
                               "flow rule %s: an ACL cannot match tc %d: its ACL count covers "
                               "every traffic class",
                               r->name, r->tc) < 0)
            goto oom;
    }
    onyx_flow_order(rules, n_rules, order);
    /* Partial overlaps: the later rule's count misses what the earlier one took. */
    for (size_t k = 0; k < n_rules; k++)
        for (size_t m = 0; m < k; m++) {
            const struct fs_flow_rule *a = &rules[order[m]], *b = &rules[order[k]];
            bool disjoint =
                (a->protocol != FS_PROTO_ANY && b->protocol != FS_PROTO_ANY &&
                 a->protocol != b->protocol) ||
                (!(a->dst_lo == 0 && a->dst_hi == 0) && !(b->dst_lo == 0 && b->dst_hi == 0) &&
                 (a->dst_hi < b->dst_lo || b->dst_hi < a->dst_lo)) ||
                (!(a->src_lo == 0 && a->src_hi == 0) && !(b->src_lo == 0 && b->src_hi == 0) &&
                 (a->src_hi < b->src_lo || b->src_hi < a->src_lo));
            if (!disjoint && !onyx_flow_rule_within(a, b) &&
                NOTE(out,
                     "flow rules %s and %s overlap: packets both match are counted for %s only",
                     a->name, b->name, a->name) < 0)
                goto oom;
        }

    /* ---- the ACL: the catch-all first, so a bound ACL never lacks it ---- */
    struct acl_state *flows = acl_find(&have, FS_ONYX_ACL_NAME);
    if (flows)
        flows->wanted = n_rules > 0;
    bool acl_new = !flows && n_rules > 0;
    bool acl_changed = false;
    if (n_rules > 0) {
        const char *cur = acl_entry_text(flows, FS_ONYX_ACL_CATCHALL_SEQ);
        bool differs = !cur || strcmp(cur, FS_ONYX_ACL_CATCHALL) != 0;
        for (size_t k = 0; k < n_rules && !differs; k++) {
            cur = acl_entry_text(flows, (unsigned)(10 * (k + 1)));
            differs = !cur || strcmp(cur, want[order[k]]) != 0;
        }
        for (size_t i = 0; flows && i < flows->n_e && !differs; i++)
            differs = flows->e[i].seq != FS_ONYX_ACL_CATCHALL_SEQ &&
                      (flows->e[i].seq % 10 != 0 || flows->e[i].seq / 10 > n_rules);
        if (differs) {
            acl_changed = true;
            if (CMD(out, "ipv4 access-list %s", FS_ONYX_ACL_NAME) < 0)
                goto oom;
            cur = acl_entry_text(flows, FS_ONYX_ACL_CATCHALL_SEQ);
            if (!cur || strcmp(cur, FS_ONYX_ACL_CATCHALL) != 0) {
                if ((cur && CMD(out, "no seq-number %d", FS_ONYX_ACL_CATCHALL_SEQ) < 0) ||
                    CMD(out, "seq-number %d %s", FS_ONYX_ACL_CATCHALL_SEQ, FS_ONYX_ACL_CATCHALL) <
                        0)
                    goto oom;
            }
            /* entries no rule has any more */
            for (size_t i = 0; flows && i < flows->n_e; i++) {
                unsigned s = flows->e[i].seq;
                if (s != FS_ONYX_ACL_CATCHALL_SEQ && (s % 10 != 0 || s / 10 > n_rules) &&
                    CMD(out, "no seq-number %u", s) < 0)
                    goto oom;
            }
            for (size_t k = 0; k < n_rules; k++) {
                unsigned s = (unsigned)(10 * (k + 1));
                cur = acl_entry_text(flows, s);
                if (cur && !strcmp(cur, want[order[k]]))
                    continue;
                if ((cur && CMD(out, "no seq-number %u", s) < 0) ||
                    CMD(out, "seq-number %u %s", s, want[order[k]]) < 0)
                    goto oom;
            }
            if (CMD(out, "exit") < 0)
                goto oom;
        }
    }

    /* ---- bindings ---- */
    if (n_rules > 0 && !ports &&
        NOTE(out, "the switch's ports were not read: binding the ACL "
                  "to them is planned when the switch answers") < 0)
        goto oom;
    for (size_t i = 0; ports && n_rules > 0 && i < n_ports; i++) {
        char cli[32];
        if (!onyx_port_cli_name(ports[i], cli, sizeof(cli)))
            continue;
        const char *b = binding_of(&have, cli);
        if (b && !strcmp(b, FS_ONYX_ACL_NAME)) {
            out->n_bound++;
            continue;
        }
        if (b && !ours(b)) {
            if (NOTE(out, "port %s is bound to ACL %s: left alone (no flow rule counts there)",
                     ports[i], b) < 0)
                goto oom;
            continue;
        }
        /* another of the project's ACLs (bound by hand): unbound first, as a port takes
         * one IPv4 ACL */
        if ((b && CMD(out, "interface ethernet %s no ipv4 port access-group", cli) < 0) ||
            CMD(out, "interface ethernet %s ipv4 port access-group %s", cli, FS_ONYX_ACL_NAME) <
                0 ||
            UNDO(out, "interface ethernet %s no ipv4 port access-group", cli) < 0)
            goto oom;
        out->n_bound++;
    }
    /* ports bound to the project's ACLs that are no longer selected, or no rule is left;
     * with the ports unknown, the bindings of our ACL stay */
    for (size_t i = 0; i < have.n_b; i++) {
        const struct binding *b = &have.b[i];
        if (!ours(b->acl))
            continue;
        bool selected = n_rules > 0 && ports && port_selected(b->port, ports, n_ports);
        bool keep = !strcmp(b->acl, FS_ONYX_ACL_NAME) && n_rules > 0 && (!ports || selected);
        if (keep || selected) /* kept, or re-bound to our ACL above */
            continue;
        if (CMD(out, "interface ethernet %s no ipv4 port access-group", b->port) < 0)
            goto oom;
    }
    if (acl_new && UNDO(out, "no ipv4 access-list %s", FS_ONYX_ACL_NAME) < 0)
        goto oom;
    if (!acl_new && acl_changed) {
        /* rollback: the entries as they were */
        if (UNDO(out, "ipv4 access-list %s", FS_ONYX_ACL_NAME) < 0)
            goto oom;
        for (size_t k = 0; k < n_rules; k++) {
            unsigned s = (unsigned)(10 * (k + 1));
            const char *cur = acl_entry_text(flows, s);
            if (cur && !strcmp(cur, want[order[k]]))
                continue;
            if (UNDO(out, "no seq-number %u", s) < 0 ||
                (cur && UNDO(out, "seq-number %u %s", s, cur) < 0))
                goto oom;
        }
        for (size_t i = 0; i < flows->n_e; i++) {
            unsigned s = flows->e[i].seq;
            if (s != FS_ONYX_ACL_CATCHALL_SEQ && (s % 10 != 0 || s / 10 > n_rules) &&
                UNDO(out, "seq-number %u %s", s, flows->e[i].text) < 0)
                goto oom;
        }
        if (UNDO(out, "exit") < 0)
            goto oom;
    }

    /* ---- the project's other ACLs (and ours when no rule is left): our entries go, the
     * ACL too when nothing else is in it. Unbinding came first. ---- */
    for (size_t k = 0; k < have.n_acl; k++) {
        struct acl_state *h = &have.acl[k];
        if (h->wanted)
            continue;
        bool is_flows = !strcmp(h->name, FS_ONYX_ACL_NAME);
        size_t others = 0;
        for (size_t i = 0; i < h->n_e; i++)
            others += !is_flows && h->e[i].seq != FS_ONYX_ACL_SEQ;
        if (!is_flows && !acl_entry_text(h, FS_ONYX_ACL_SEQ))
            continue; /* nothing of ours in it */
        if (others == 0) {
            if (CMD(out, "no ipv4 access-list %s", h->name) < 0)
                goto oom;
        } else if (CMD(out, "ipv4 access-list %s", h->name) < 0 ||
                   CMD(out, "no seq-number %d", FS_ONYX_ACL_SEQ) < 0 || CMD(out, "exit") < 0) {
            goto oom;
        }
    }
    rc = 0;
    goto out;
oom:
    snprintf(errbuf, errlen, "out of memory");
out:
    running_free(&have);
    free(order);
    free(want);
    if (rc != 0)
        onyx_plan_free(out);
    return rc;
}
