/*
 * Flow rules -> ONYX ACL plan (see flowrules.h).
 */
#include "flowrules.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---------------- plan building ---------------- */

static int
push(char ***v, size_t *n, size_t *cap, const char *fmt, const char *a, const char *b)
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
    snprintf(line, sizeof(line), fmt, a, b);
    if (!((*v)[*n] = strdup(line)))
        return -1;
    (*n)++;
    return 0;
}

#define CMD(p, fmt, a, b) push(&(p)->cmds, &(p)->n, &(p)->cap, fmt, a, b)
#define UNDO(p, fmt, a, b) push(&(p)->rollback, &(p)->n_rollback, &(p)->cap_rollback, fmt, a, b)

void
onyx_plan_free(struct onyx_plan *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->cmds[i]);
    for (size_t i = 0; i < p->n_rollback; i++)
        free(p->rollback[i]);
    free(p->cmds);
    free(p->rollback);
    memset(p, 0, sizeof(*p));
}

/* One of the project's ACLs as the running configuration has it. */
struct acl_state {
    char name[128];
    char entry[384]; /* our sequence's text, "" if absent */
    size_t other_entries;
    bool wanted;
};

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

/* Reads `ipv4 access-list NAME [seq-number N TEXT]` (flat) and `ipv4 access-list NAME`
 * followed by indented `seq-number N TEXT` lines (block form). */
static int
read_running(const char *run, size_t len, struct acl_state **out, size_t *n_out)
{
    struct acl_state *v = NULL;
    size_t n = 0, cap = 0;
    long cur = -1; /* block form: the ACL the following seq-number lines belong to */
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
        char name[128];
        int off = 0;
        unsigned seq;
        const char *text = NULL;
        if (sscanf(line, "ipv4 access-list %127s%n", name, &off) == 1) {
            text = line + off;
            cur = -1;
            if (strncmp(name, FS_ONYX_ACL_PREFIX, strlen(FS_ONYX_ACL_PREFIX)) != 0)
                continue;
            long idx = -1;
            for (size_t i = 0; i < n; i++)
                if (!strcmp(v[i].name, name))
                    idx = (long)i;
            if (idx < 0) {
                if (n == cap) {
                    cap = cap ? cap * 2 : 8;
                    struct acl_state *nv = realloc(v, cap * sizeof(*nv));
                    if (!nv) {
                        free(v);
                        return -1;
                    }
                    v = nv;
                }
                memset(&v[n], 0, sizeof(v[n]));
                snprintf(v[n].name, sizeof(v[n].name), "%s", name);
                idx = (long)n++;
            }
            while (*text == ' ')
                text++;
            if (*text == '\0') {
                cur = idx; /* block form follows */
                cur_indent = a;
                continue;
            }
            if (sscanf(text, "seq-number %u%n", &seq, &off) == 1) {
                if (seq == FS_ONYX_ACL_SEQ)
                    snprintf(v[idx].entry, sizeof(v[idx].entry), "%s", text + off + 1);
                else
                    v[idx].other_entries++;
            }
            continue;
        }
        if (cur >= 0 && sscanf(line, "seq-number %u%n", &seq, &off) == 1) {
            if (seq == FS_ONYX_ACL_SEQ)
                snprintf(v[cur].entry, sizeof(v[cur].entry), "%s", line + off + 1);
            else
                v[cur].other_entries++;
            continue;
        }
        /* `exit`, or a line not indented deeper than the header, ends the block */
        if (cur >= 0 && line[0] != '\0' && (a <= cur_indent || !strcmp(line, "exit")))
            cur = -1;
    }
    *out = v;
    *n_out = n;
    return 0;
}

int
onyx_flow_plan(const struct fs_flow_rule *rules, size_t n_rules, const char *running,
               size_t running_len, struct onyx_plan *out, char *errbuf, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    struct acl_state *have = NULL;
    size_t n_have = 0;
    int rc = -1;
    if (read_running(running, running_len, &have, &n_have) != 0) {
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    char seq[16];
    snprintf(seq, sizeof(seq), "%d", FS_ONYX_ACL_SEQ);
    for (size_t i = 0; i < n_rules; i++) {
        const struct fs_flow_rule *r = &rules[i];
        char name[160], entry[384];
        if (!r->name || !name_ok(r->name) || strlen(r->name) > 100) {
            snprintf(errbuf, errlen, "flow rule name \"%s\" cannot name an ACL",
                     r->name ? r->name : "");
            goto out;
        }
        if (onyx_flow_rule_entry(r, entry, sizeof(entry)) != 0) {
            snprintf(errbuf, errlen, "flow rule %s: ports need protocol udp or tcp", r->name);
            goto out;
        }
        snprintf(name, sizeof(name), "%s%s", FS_ONYX_ACL_PREFIX, r->name);
        struct acl_state *h = NULL;
        for (size_t k = 0; k < n_have; k++)
            if (!strcmp(have[k].name, name))
                h = &have[k];
        if (h)
            h->wanted = true;
        if (h && !strcmp(h->entry, entry))
            continue; /* already there */
        if (CMD(out, "ipv4 access-list %s%s", name, "") < 0)
            goto oom;
        if (h && h->entry[0] && CMD(out, "no seq-number %s%s", seq, "") < 0)
            goto oom;
        if (CMD(out, "seq-number %s %s", seq, entry) < 0 || CMD(out, "exit%s%s", "", "") < 0)
            goto oom;
        /* rollback of this session's additions */
        if (!h) {
            if (UNDO(out, "no ipv4 access-list %s%s", name, "") < 0)
                goto oom;
        } else if (UNDO(out, "ipv4 access-list %s%s", name, "") < 0 ||
                   UNDO(out, "no seq-number %s%s", seq, "") < 0 ||
                   (h->entry[0] && UNDO(out, "seq-number %s %s", seq, h->entry) < 0) ||
                   UNDO(out, "exit%s%s", "", "") < 0) {
            goto oom;
        }
    }
    /* The project's ACLs no rule wants any more: our entry goes; the ACL too if it is empty. */
    for (size_t k = 0; k < n_have; k++) {
        struct acl_state *h = &have[k];
        if (h->wanted || !h->entry[0])
            continue;
        if (h->other_entries == 0) {
            if (CMD(out, "no ipv4 access-list %s%s", h->name, "") < 0)
                goto oom;
        } else if (CMD(out, "ipv4 access-list %s%s", h->name, "") < 0 ||
                   CMD(out, "no seq-number %s%s", seq, "") < 0 ||
                   CMD(out, "exit%s%s", "", "") < 0) {
            goto oom;
        }
    }
    rc = 0;
    goto out;
oom:
    snprintf(errbuf, errlen, "out of memory");
out:
    free(have);
    if (rc != 0)
        onyx_plan_free(out);
    return rc;
}
