/*
 * ONYX CLI parsers: every verbatim output of onyx-facts.md (tests/sim/onyx/fixtures/,
 * copied byte for byte) parses to the values it shows; the assumed layouts (the
 * simulator's) parse too; tolerance cases (column widths, N\A, split ports, 2^53+1,
 * overflow, extra fields, ANSI/CR noise).
 */
#include <ctype.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include "parse.h"
#include "parse_int.h"
#include "wjh_tally.h"

static char *
fixture(const char *name, size_t *len)
{
    const char *src = getenv("FS_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof(path), "%s/tests/sim/onyx/fixtures/%s", src ? src : ".", name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open fixture %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* The sample of metric m whose labels include every given name=value pair. */
static const struct onyx_sample *
find(const struct onyx_samples *s, enum fs_metric m, const char *l1, const char *v1, const char *l2,
     const char *v2, const char *l3, const char *v3)
{
    const char *ln[3] = {l1, l2, l3}, *lv[3] = {v1, v2, v3};
    const struct onyx_sample *hit = NULL;
    for (size_t i = 0; i < s->n; i++) {
        const struct onyx_sample *x = &s->v[i];
        if (x->metric != m)
            continue;
        bool ok = true;
        for (int k = 0; k < 3 && ln[k]; k++) {
            bool found = false;
            for (unsigned j = 0; j < x->n_labels; j++)
                if (!strcmp(x->labels[j].name, ln[k]) && !strcmp(x->labels[j].value, lv[k]))
                    found = true;
            ok = ok && found;
        }
        if (ok) {
            if (hit)
                fail_msg("two samples match metric %d", (int)m);
            hit = x;
        }
    }
    return hit;
}

static size_t
count_metric(const struct onyx_samples *s, enum fs_metric m)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++)
        n += s->v[i].metric == m;
    return n;
}

#define PORT_COUNTER(s, m, port, dir, want)                                                        \
    do {                                                                                           \
        const struct onyx_sample *x_ =                                                             \
            find(s, m, "interface", port, "direction", dir, NULL, NULL);                           \
        assert_non_null(x_);                                                                       \
        assert_true(x_->counter);                                                                  \
        assert_true(x_->raw == (uint64_t)(want));                                                  \
    } while (0)

/* ---------------- show version ---------------- */

static void
test_version_text_3_6_1102(void **state)
{
    (void)state;
    size_t n;
    char *t = fixture("version_3.6.1102.txt", &n);
    struct onyx_version v;
    char err[128];
    assert_int_equal(onyx_parse_version_text(t, n, &v, err, sizeof(err)), 0);
    assert_string_equal(v.product, "MLNX-OS");
    assert_string_equal(v.release, "3.6.1102");
    assert_string_equal(v.model, "x86onie");
    assert_string_equal(v.serial, "MT1628X26331");
    assert_true(fabs(v.uptime_s - (48 * 86400 + 59 * 60 + 15.328)) < 1e-6);
    assert_false(onyx_release_new_json(v.release));
    free(t);
}

static void
test_version_text_3_6_5000(void **state)
{
    (void)state;
    size_t n;
    char *t = fixture("version_3.6.5000.txt", &n);
    struct onyx_version v;
    char err[128];
    assert_int_equal(onyx_parse_version_text(t, n, &v, err, sizeof(err)), 0);
    assert_string_equal(v.release, "3.6.5000");
    assert_string_equal(v.serial, "MT1632X00205");
    assert_true(fabs(v.uptime_s - (86400 + 16 * 3600 + 31 * 60 + 43.856)) < 1e-6);
    struct onyx_samples s = {0};
    assert_int_equal(onyx_version_samples(&v, &s), 0);
    const struct onyx_sample *x =
        find(&s, FS_M_DEVICE_INFO, "model", "x86onie", "os", "MLNX-OS", "version", "3.6.5000");
    assert_non_null(x);
    assert_true(x->value == 1.0);
    assert_non_null(find(&s, FS_M_DEVICE_UPTIME, NULL, NULL, NULL, NULL, NULL, NULL));
    onyx_samples_free(&s);
    free(t);
}

static void
test_version_json(void **state)
{
    (void)state;
    size_t n;
    char *t = fixture("version.json", &n);
    struct onyx_version v;
    char err[128];
    assert_int_equal(onyx_parse_version_json(t, n, &v, err, sizeof(err)), 0);
    assert_string_equal(v.product, "MLNX-OS");
    assert_string_equal(v.release, "3.6.5000");
    assert_string_equal(v.serial, "MT1708X07233");
    assert_true(fabs(v.uptime_s - (2 * 86400 + 13 * 3600 + 40 * 60 + 34.992)) < 1e-6);
    free(t);
}

static void
test_release_compare(void **state)
{
    (void)state;
    assert_true(onyx_release_cmp("3.6.6000", "3.6.5000") > 0);
    assert_true(onyx_release_cmp("3.10.1", "3.6.8012") > 0);
    assert_int_equal(onyx_release_cmp("3.6.6000", "3.6.6000"), 0);
    assert_true(onyx_release_new_json("3.6.6000"));
    assert_true(onyx_release_new_json("3.8.2306"));
    assert_false(onyx_release_new_json("3.6.5000"));
}

/* ---------------- show interfaces ethernet ---------------- */

static void
check_zero_port(const struct onyx_samples *s, const char *port)
{
    static const enum fs_metric ms[] = {FS_M_PORT_PACKETS, FS_M_PORT_BYTES, FS_M_PORT_ERRORS,
                                        FS_M_PORT_DISCARDS};
    for (size_t i = 0; i < 4; i++) {
        PORT_COUNTER(s, ms[i], port, "rx", 0);
        PORT_COUNTER(s, ms[i], port, "tx", 0);
    }
}

static void
test_interfaces_text_3_6_1102(void **state)
{
    (void)state;
    size_t n;
    char *t = fixture("interfaces_3.6.1102.txt", &n);
    struct onyx_samples s = {0};
    char err[128];
    assert_int_equal(onyx_parse_interfaces_text(t, n, &s, err, sizeof(err)), 0);
    check_zero_port(&s, "Eth1/1");
    assert_true(find(&s, FS_M_PORT_OPER_UP, "interface", "Eth1/1", 0, 0, 0, 0)->value == 0);
    assert_true(find(&s, FS_M_PORT_ADMIN_UP, "interface", "Eth1/1", 0, 0, 0, 0)->value == 1);
    assert_true(find(&s, FS_M_PORT_SPEED, "interface", "Eth1/1", 0, 0, 0, 0)->value == 100e9);
    assert_int_equal(s.n, 11);
    onyx_samples_free(&s);
    free(t);
}

/* The excerpt in the facts ends after the first element ("},"): close the list. */
static char *
close_excerpt(char *t, size_t *n)
{
    char *end = strrchr(t, '}');
    assert_non_null(end);
    size_t keep = (size_t)(end - t) + 1;
    char *o = malloc(keep + 4);
    memcpy(o, t, keep);
    memcpy(o + keep, "\n]\n", 4);
    *n = keep + 3;
    free(t);
    return o;
}

static void
test_interfaces_json_header_layout(void **state)
{
    (void)state;
    size_t n;
    char *t = close_excerpt(fixture("interfaces_header.json", &n), &n);
    struct onyx_samples s = {0};
    char err[128];
    assert_int_equal(onyx_parse_interfaces_json(t, n, &s, err, sizeof(err)), 0);
    check_zero_port(&s, "Eth1/1");
    assert_true(find(&s, FS_M_PORT_SPEED, "interface", "Eth1/1", 0, 0, 0, 0)->value == 40e9);
    assert_true(find(&s, FS_M_PORT_OPER_UP, "interface", "Eth1/1", 0, 0, 0, 0)->value == 0);
    assert_true(find(&s, FS_M_PORT_ADMIN_UP, "interface", "Eth1/1", 0, 0, 0, 0)->value == 1);
    onyx_samples_free(&s);
    free(t);

    t = close_excerpt(fixture("interfaces_header_min.json", &n), &n);
    assert_int_equal(onyx_parse_interfaces_json(t, n, &s, err, sizeof(err)), 0);
    assert_true(find(&s, FS_M_PORT_SPEED, "interface", "Eth1/1", 0, 0, 0, 0)->value == 100e9);
    assert_int_equal(count_metric(&s, FS_M_PORT_BYTES), 0);
    onyx_samples_free(&s);
    free(t);
}

/* The >= 3.6.6000 layout (DERIVED in the facts) with a split port, 2^53+1, N\A, an extra
 * field and the CLI's lines around the JSON. */
static void
test_interfaces_json_port_keyed_layout(void **state)
{
    (void)state;
    const char *t =
        "sw [standalone: master] # show interfaces ethernet | json-print\n"
        "[\n"
        "  {\"Eth1/16/3\": [{\"Operational state\": \"Up\", \"Admin state\": \"Enabled\",\n"
        "     \"Actual speed\": \"25G\", \"Some future field\": {\"x\": 1},\n"
        "     \"Rx\": {\"bytes\": \"9007199254740993\", \"packets\": \"N\\\\A\"},\n"
        "     \"Tx\": {\"bytes\": \"18446744073709551615\", \"hoq discard packets\": \"3\"}}]},\n"
        "  {\"Vlan 10\": [{\"State\": \"Down\"}]}\n"
        "]\n"
        "sw [standalone: master] # ";
    struct onyx_samples s = {0};
    char err[128];
    assert_int_equal(onyx_parse_interfaces_json(t, strlen(t), &s, err, sizeof(err)), 0);
    PORT_COUNTER(&s, FS_M_PORT_BYTES, "Eth1/16/3", "rx", 9007199254740993ULL);
    PORT_COUNTER(&s, FS_M_PORT_BYTES, "Eth1/16/3", "tx", UINT64_MAX);
    assert_null(find(&s, FS_M_PORT_PACKETS, "interface", "Eth1/16/3", "direction", "rx", 0, 0));
    assert_true(find(&s, FS_M_PORT_SPEED, "interface", "Eth1/16/3", 0, 0, 0, 0)->value == 25e9);
    assert_true(find(&s, FS_M_PORT_OPER_UP, "interface", "Eth1/16/3", 0, 0, 0, 0)->value == 1);
    onyx_samples_free(&s);
}

/* The newer padded text layout (DERIVED): `Key     : value`, counters indented 4 spaces,
 * extra counters, blank lines, a counter past 2^64 (skipped, not wrapped). */
static void
test_interfaces_text_padded_layout(void **state)
{
    (void)state;
    const char *t = "\r\n"
                    "Eth1/2\r\n"
                    "  Admin state                      : Enabled\r\n"
                    "  Operational state                : Up\r\n"
                    "  Actual speed                     : 100G\r\n"
                    "\r\n"
                    "  Rx:\r\n"
                    "  Rx\r\n"
                    "    9007199254740993     packets\r\n"
                    "    123456789012         bytes\r\n"
                    "    0                    fcs errors\r\n"
                    "    99999999999999999999 error packets\r\n"
                    "  Tx\r\n"
                    "    7                    packets\r\n"
                    "    N\\A                  bytes\r\n"
                    "\r\n\r\n"
                    "Eth1/16/3\r\n"
                    "  Operational state: Down\r\n";
    struct onyx_samples s = {0};
    char err[128];
    assert_int_equal(onyx_parse_interfaces_text(t, strlen(t), &s, err, sizeof(err)), 0);
    PORT_COUNTER(&s, FS_M_PORT_PACKETS, "Eth1/2", "rx", 9007199254740993ULL);
    PORT_COUNTER(&s, FS_M_PORT_BYTES, "Eth1/2", "rx", 123456789012ULL);
    PORT_COUNTER(&s, FS_M_PORT_PACKETS, "Eth1/2", "tx", 7);
    assert_null(find(&s, FS_M_PORT_ERRORS, "interface", "Eth1/2", "direction", "rx", 0, 0));
    assert_null(find(&s, FS_M_PORT_BYTES, "interface", "Eth1/2", "direction", "tx", 0, 0));
    assert_true(find(&s, FS_M_PORT_OPER_UP, "interface", "Eth1/16/3", 0, 0, 0, 0)->value == 0);
    onyx_samples_free(&s);
    assert_int_not_equal(onyx_parse_interfaces_text("garbage\n", 8, &s, err, sizeof(err)), 0);
    onyx_samples_free(&s);
}

/* ---------------- congestion control ---------------- */

static void
test_congestion_json(void **state)
{
    (void)state;
    size_t n;
    char *t = fixture("congestion_1_1.json", &n);
    struct onyx_samples s = {0};
    struct onyx_tc_profile prof[8];
    size_t np = 0;
    char err[128];
    assert_int_equal(onyx_parse_congestion_json(t, n, &s, prof, &np, err, sizeof(err)), 0);
    const struct onyx_sample *x = find(&s, FS_M_PORT_ECN_MARKED, "interface", "Eth1/1", 0, 0, 0, 0);
    assert_non_null(x);
    assert_true(x->raw == 0);
    assert_int_equal(count_metric(&s, FS_M_QUEUE_WRED_DROPPED), 2);
    assert_non_null(find(&s, FS_M_QUEUE_WRED_DROPPED, "interface", "Eth1/1", "tc", "2", 0, 0));
    assert_non_null(find(&s, FS_M_QUEUE_WRED_DROPPED, "interface", "Eth1/1", "tc", "3", 0, 0));
    assert_int_equal(np, 8);
    assert_int_equal(prof[3].tc, 3);
    assert_string_equal(prof[3].mode, "ECN");
    assert_string_equal(prof[3].threshold_mode, "absolute");
    assert_string_equal(prof[3].min, "500 KB");
    assert_string_equal(prof[3].max, "1550 KB");
    assert_string_equal(prof[2].mode, "RED");
    assert_string_equal(prof[2].min, "9%");
    assert_string_equal(prof[0].mode, "none");
    onyx_samples_free(&s);
    free(t);
}

/* ---------------- session text ---------------- */

static void
test_prompts_from_captures(void **state)
{
    (void)state;
    size_t n;
    char *t = fixture("prompts.txt", &n);
    /* Each captured line is "<prompt><command>": the prompt part must be recognised. */
    static const struct {
        const char *prefix_end;
        enum onyx_mode mode;
    } want[] = {
        {"(config) #", ONYX_MODE_CONFIG}, {"] #", ONYX_MODE_ENABLE}, {"] >", ONYX_MODE_USER}};
    size_t found = 0;
    char *line = strtok(t, "\n");
    while (line) {
        for (size_t k = 0; k < 3; k++) {
            char *p = strstr(line, want[k].prefix_end);
            if (p && strstr(line, "[standalone: master]")) {
                size_t plen = (size_t)(p - line) + strlen(want[k].prefix_end);
                size_t st = 99;
                assert_int_equal(onyx_prompt_at_end(line, plen, &st), want[k].mode);
                assert_int_equal(st, 0);
                found++;
                break;
            }
        }
        line = strtok(NULL, "\n");
    }
    assert_int_equal(found, 3);
    free(t);

    const char *more[] = {"switch-f66e1c [standalone: master] (config interface ethernet 1/19) # ",
                          "sw-spine-001 [mlag-domain: master] # ",
                          "out\nsw-spine-001 [standalone: master] (config) # "};
    assert_int_equal(onyx_prompt_at_end(more[0], strlen(more[0]), NULL), ONYX_MODE_CONFIG);
    assert_int_equal(onyx_prompt_at_end(more[1], strlen(more[1]), NULL), ONYX_MODE_ENABLE);
    size_t st;
    assert_int_equal(onyx_prompt_at_end(more[2], strlen(more[2]), &st), ONYX_MODE_CONFIG);
    assert_int_equal(st, 4);
    /* output lines that merely end in '#' or '>' are not prompts */
    assert_int_equal(onyx_prompt_at_end("Build ID:          #1-dev", 25, NULL), ONYX_MODE_NONE);
    assert_int_equal(onyx_prompt_at_end("a -> b", 6, NULL), ONYX_MODE_NONE);
    assert_int_equal(onyx_prompt_at_end("##\n##", 5, NULL), ONYX_MODE_NONE);
}

static void
test_pager_password_errors_clean(void **state)
{
    (void)state;
    assert_true(onyx_pager_at_end("x\nlines 183-204 ", 16, NULL));
    const char *last = "x\nlines 256-269/269 (END) ";
    size_t st;
    assert_true(onyx_pager_at_end(last, strlen(last), &st));
    assert_int_equal(st, 2);
    assert_false(onyx_pager_at_end("lines of text", 13, NULL));
    assert_true(onyx_password_prompt_at_end("Password: ", 10));
    assert_true(onyx_password_prompt_at_end("\r\npassword: ", 12));

    char msg[64];
    const char *e1 = "→ % Unrecognized command \"ib\".";
    assert_false(onyx_error_line(e1, strlen(e1), msg, sizeof(msg))); /* arrow is the notes' */
    const char *e2 = "show ib\n% Unrecognized command \"ib\".\nType \"?\" for help.\n";
    assert_true(onyx_error_line(e2, strlen(e2), msg, sizeof(msg)));
    assert_string_equal(msg, "% Unrecognized command \"ib\".");
    const char *e3 = "\n% Port 1/4 is part of a port channel";
    assert_true(onyx_error_line(e3, strlen(e3), msg, sizeof(msg)));
    assert_string_equal(msg, "% Port 1/4 is part of a port channel");

    char buf[] = "\x1b[?1h\x1b=ab\x1b[Kc\r\nd x\bX\x1b>\x9b"
                 "2Je";
    size_t n = onyx_clean(buf, sizeof(buf) - 1);
    assert_int_equal(n, 8);
    assert_memory_equal(buf, "abc\nd Xe", 8);
}

/* onyx_clean as it was byte by byte (before issue 34 moved runs in one memmove): the
 * oracle of test_clean_matches_bytewise. */
static size_t
clean_bytewise(char *buf, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
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
                    continue;
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
            continue;
        }
        buf[o++] = (char)c;
    }
    return o;
}

/* Random text of escapes, carriage returns, backspaces, newlines and plain runs: the
 * same result as byte by byte, at every length (sequences cut at the end included). */
static void
test_clean_matches_bytewise(void **state)
{
    (void)state;
    static const char alphabet[] = "\x1b\x9b\r\b\n[;?0123>=aKm xyz{}\"";
    unsigned seed = 34;
    for (int round = 0; round < 20000; round++) {
        char a[96], b[96];
        seed = seed * 1103515245u + 12345u;
        size_t n = (seed >> 16) % sizeof a;
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            a[i] = alphabet[(seed >> 16) % (sizeof alphabet - 1)];
        }
        memcpy(b, a, n);
        size_t na = onyx_clean(a, n), nb = clean_bytewise(b, n);
        assert_int_equal(na, nb);
        assert_memory_equal(a, b, na);
    }
}

/* ---------------- splitting a shell's output at prompts ---------------- */

#define P "sw-1 [standalone: master] "

/* Cuts stream into outputs at prompts from *from, as the driver does: the next output's text
 * (echoes of sent[*seen..n) removed) into out; false when no complete output is left. */
static bool
next_output(char *stream, size_t len, size_t *from, const char *const *sent, size_t n, size_t *seen,
            char *out, size_t outlen)
{
    size_t ps = 0, pe = 0;
    if (!onyx_next_prompt(stream, len, *from, P, strlen(P), &ps, &pe))
        return false;
    size_t tl = ps - *from;
    *seen += onyx_strip_echoes(stream + *from, &tl, sent + *seen, n - *seen);
    assert_true(tl < outlen);
    memcpy(out, stream + *from, tl);
    out[tl] = '\0';
    *from = pe;
    return true;
}

/* A pty with kernel echo, a batch sent at once: every echo comes first, then each output
 * starts on the prompt's line (the JSON document after `# `), commands without output
 * leave prompts back to back. */
static void
test_split_outputs_on_prompt_lines(void **state)
{
    (void)state;
    const char *const sent[] = {"show clock", "show interfaces ethernet | json-print",
                                "configure terminal", "exit", "show version"};
    char stream[] = "show clock\n"
                    "show interfaces ethernet | json-print\n"
                    "configure terminal\n"
                    "exit\n"
                    "show version\n"
                    "Time:       09:14:00\nDate:       2026/12/04\n" P "# [\n"
                    "    {\n"
                    "        \"Eth1/1\": [\n"
                    "            {\"Operational state\": \"Up\", \"Rx\": {\"bytes\": \"5\"}}\n"
                    "        ]\n"
                    "    }\n"
                    "]\n" P "# " P "(config) # " P "# Product name:      Onyx\n"
                    "Product release:   3.8.2306\n" P "# ";
    size_t len = strlen(stream), from = 0, seen = 0;
    char out[512], err[128];
    struct onyx_samples s = {0};

    assert_true(next_output(stream, len, &from, sent, 5, &seen, out, sizeof(out)));
    assert_int_equal(seen, 5); /* all five echoes were in the first output */
    assert_string_equal(out, "Time:       09:14:00\nDate:       2026/12/04\n");
    int64_t us, res;
    assert_int_equal(onyx_parse_clock(out, strlen(out), &us, &res, err, sizeof(err)), 0);

    assert_true(next_output(stream, len, &from, sent, 5, &seen, out, sizeof(out)));
    assert_int_equal(out[0], '[');
    assert_int_equal(onyx_parse_interfaces_json(out, strlen(out), &s, err, sizeof(err)), 0);
    PORT_COUNTER(&s, FS_M_PORT_BYTES, "Eth1/1", "rx", 5);

    assert_true(next_output(stream, len, &from, sent, 5, &seen, out, sizeof(out)));
    assert_string_equal(out, ""); /* configure terminal */
    assert_true(next_output(stream, len, &from, sent, 5, &seen, out, sizeof(out)));
    assert_string_equal(out, ""); /* exit, answered by the (config) prompt */
    assert_true(next_output(stream, len, &from, sent, 5, &seen, out, sizeof(out)));
    struct onyx_version v;
    assert_int_equal(onyx_parse_version_text(out, strlen(out), &v, err, sizeof(err)), 0);
    assert_string_equal(v.release, "3.8.2306");
    assert_false(next_output(stream, len, &from, sent, 5, &seen, out, sizeof(out)));
    assert_int_equal(from, len);
    onyx_samples_free(&s);
}

/* The CLI's own echo (`<prompt><command>` then the output on the next line), output
 * without a final line end, echoes interleaved in the middle of an output. */
static void
test_split_outputs_cli_echo(void **state)
{
    (void)state;
    const char *const sent[] = {"show clock", "show version"};
    char stream[] = "show clock\n% Unrecognized command \"clock\".\nType \"?\" for help.\n" P
                    "# show version\nProduct name:      Onyx\nProduct release:   3.6.5000" P "# ";
    size_t len = strlen(stream), from = 0, seen = 0;
    char out[256], msg[64];
    assert_true(next_output(stream, len, &from, sent, 2, &seen, out, sizeof(out)));
    assert_int_equal(seen, 1);
    assert_true(onyx_error_line(out, strlen(out), msg, sizeof(msg)));
    assert_string_equal(msg, "% Unrecognized command \"clock\".");
    /* "...3.6.5000" runs into the prompt: found all the same */
    assert_true(next_output(stream, len, &from, sent, 2, &seen, out, sizeof(out)));
    assert_int_equal(seen, 2);
    assert_string_equal(out, "Product name:      Onyx\nProduct release:   3.6.5000");
    assert_int_equal(from, len);

    /* Echoes anywhere, in order; an output line equal to an earlier command is kept. */
    const char *const cmds[] = {"a b", "c", "d"};
    char t[] = "x\n  c  \ny\na b\nd\nz";
    size_t tl = strlen(t);
    assert_int_equal(onyx_strip_echoes(t, &tl, cmds, 3), 3);
    assert_int_equal(tl, 9);
    assert_memory_equal(t, "x\ny\na b\nz", 9);
    /* issue 34: lines are trimmed of every isspace() byte and compared only when they
     * start with a command's first byte; a tabbed echo still goes, a look-alike stays */
    const char *const cmds2[] = {"show clock", "show version"};
    char t2[] = "\t show clock \r\nshow clocks\n\v\fshow version\t\nhow version\n";
    size_t t2l = strlen(t2);
    assert_int_equal(onyx_strip_echoes(t2, &t2l, cmds2, 2), 2);
    assert_int_equal(t2l, strlen("show clocks\nhow version\n"));
    assert_memory_equal(t2, "show clocks\nhow version\n", t2l);
}

/* onyx_eq is strncasecmp of the C locale over the whole literal (issue 34 inlined it):
 * every pair of bytes from letters, their neighbours and case mates. */
static void
test_eq_matches_strncasecmp(void **state)
{
    (void)state;
    static const char set[] = "aAzZ@`[{_-09 \x80\xc1\xe1";
    for (size_t i = 0; i < sizeof set - 1; i++)
        for (size_t j = 0; j < sizeof set - 1; j++) {
            char s[3] = {'x', set[i], 0}, lit[3] = {'X', set[j], 0};
            assert_int_equal(onyx_eq(s, 2, lit), strncasecmp(s, lit, 2) == 0);
            assert_false(onyx_eq(s, 1, lit));
        }
    assert_true(onyx_eq("Rx Packets", 10, "rx packets"));
    assert_false(onyx_eq("Rx Packets", 9, "rx packets"));
}

/* Prompts still arriving, and lines that only look like one. */
static void
test_next_prompt_edges(void **state)
{
    (void)state;
    size_t ps, pe;
    const char *partial[] = {"out\nsw-1 [standalone: mas", "out\n" P, "out\n" P "#",
                             "out\n" P "(config", "out\n" P "(config) "};
    for (size_t i = 0; i < sizeof(partial) / sizeof(partial[0]); i++)
        assert_false(onyx_next_prompt(partial[i], strlen(partial[i]), 0, P, strlen(P), &ps, &pe));
    const char *not_prompt = "x " P "#x\n" P "says hi\n" P "(conf) # \n" P "(config\n) # ";
    assert_false(onyx_next_prompt(not_prompt, strlen(not_prompt), 0, P, strlen(P), &ps, &pe));
    const char *sub = "out\n" P "(config interface ethernet 1/1) # rest";
    assert_true(onyx_next_prompt(sub, strlen(sub), 0, P, strlen(P), &ps, &pe));
    assert_int_equal(ps, 4);
    assert_string_equal(sub + pe, "rest");
    /* An untagged prompt (`host # `) only at a line start: mid-line it may be output. */
    const char *bare = "the sw-1 # 3\nsw-1 # x";
    assert_true(onyx_next_prompt(bare, strlen(bare), 0, "sw-1 ", 5, &ps, &pe));
    assert_int_equal(ps, 13);
    assert_string_equal(bare + pe, "x");
    assert_true(onyx_next_prompt(bare, strlen(bare), 4, "sw-1 ", 5, &ps, &pe));
    assert_int_equal(ps, 4); /* at from: right after the previous prompt */
    const char *user = P "> ";
    assert_true(onyx_next_prompt(user, strlen(user), 0, P, strlen(P), &ps, &pe));
    assert_int_equal(pe, strlen(user));
}

/* The text form of congestion-control (the fallback; layout assumed, the simulator's). */
static void
test_congestion_text(void **state)
{
    (void)state;
    const char *t = "Interface ethernet 1/7\n"
                    "  ECN marked packets: 9007199254740993\n"
                    "TC-0\n"
                    "  Mode: none\n"
                    "TC-3\n"
                    "  Mode: ECN\n"
                    "  Threshold mode: absolute\n"
                    "  Minimum threshold: 500 KB\n"
                    "  Maximum threshold: 1550 KB\n"
                    "  RED dropped packets: 17\n";
    struct onyx_samples s = {0};
    struct onyx_tc_profile prof[8];
    size_t np = 0;
    char err[128];
    assert_int_equal(onyx_parse_congestion_text(t, strlen(t), &s, prof, &np, err, sizeof(err)), 0);
    assert_true(find(&s, FS_M_PORT_ECN_MARKED, "interface", "Eth1/7", 0, 0, 0, 0)->raw ==
                9007199254740993ULL);
    assert_true(find(&s, FS_M_QUEUE_WRED_DROPPED, "interface", "Eth1/7", "tc", "3", 0, 0)->raw ==
                17);
    assert_int_equal(count_metric(&s, FS_M_QUEUE_WRED_DROPPED), 1);
    assert_int_equal(np, 2);
    assert_int_equal(prof[1].tc, 3);
    assert_string_equal(prof[1].mode, "ECN");
    assert_string_equal(prof[1].max, "1550 KB");
    assert_string_equal(prof[0].mode, "none");
    onyx_samples_free(&s);
    assert_int_not_equal(
        onyx_parse_congestion_text("TC-3\n  Mode: ECN\n", 16, &s, NULL, NULL, err, sizeof(err)), 0);
    onyx_samples_free(&s);
}

/* ---------------- WJH (the WJH library's table, verbatim from Cumulus) ---------------- */

struct wjh_acc {
    struct onyx_wjh_record r[8];
    int n;
};

static void
wjh_cb(const struct onyx_wjh_record *r, void *arg)
{
    struct wjh_acc *a = arg;
    if (a->n < 8)
        a->r[a->n++] = *r;
}

static void
test_wjh_tables(void **state)
{
    (void)state;
    size_t n;
    char err[128];
    char *t = fixture("wjh_aggregate.txt", &n);
    struct wjh_acc a = {0};
    assert_int_equal(onyx_parse_wjh(t, n, wjh_cb, &a, err, sizeof(err)), 2);
    assert_string_equal(a.r[0].sport, "swp4");
    assert_string_equal(a.r[0].reason, "Source MAC equals destination MAC");
    assert_true(a.r[0].count == 100);
    assert_string_equal(a.r[0].src_ip, "0.0.0.0");
    assert_int_equal(a.r[0].src_port, 0);
    assert_string_equal(a.r[0].proto, "ip");
    assert_string_equal(a.r[1].sport, "swp1");
    free(t);

    t = fixture("wjh_raw.txt", &n);
    memset(&a, 0, sizeof(a));
    assert_int_equal(onyx_parse_wjh(t, n, wjh_cb, &a, err, sizeof(err)), 1);
    assert_string_equal(a.r[0].timestamp, "21/06/16 12:03:12.728");
    assert_string_equal(a.r[0].sport, "swp1");
    assert_int_equal(a.r[0].src_port, -1);
    assert_string_equal(a.r[0].reason, "Source MAC equals destination MAC");
    assert_true(a.r[0].count == 1);
    free(t);

    struct fs_flow_rule rule = {
        .name = "nccl", .protocol = FS_PROTO_UDP, .dst_lo = 4791, .dst_hi = 4791, .tc = -1};
    struct onyx_wjh_record r = {.proto = "udp", .dst_port = 4791, .src_port = 1};
    assert_true(onyx_wjh_matches_rule(&r, &rule));
    r.dst_port = 4790;
    assert_false(onyx_wjh_matches_rule(&r, &rule));
    r.dst_port = 4791;
    strcpy(r.proto, "tcp");
    assert_false(onyx_wjh_matches_rule(&r, &rule));
    assert_int_equal(onyx_parse_wjh("nothing\n", 8, wjh_cb, &a, err, sizeof(err)), -1);
}

/* One poll of a WJH table through the tally: the new drops of its rows. */
static uint64_t
wjh_poll(struct onyx_wjh_tally *t, const char *text)
{
    struct wjh_acc a = {0};
    char err[128];
    uint64_t fresh = 0;
    onyx_wjh_tally_begin(t);
    int n = onyx_parse_wjh(text, strlen(text), wjh_cb, &a, err, sizeof(err));
    assert_true(n >= 0);
    assert_int_equal(n, a.n);
    for (int i = 0; i < a.n; i++) {
        int64_t f = onyx_wjh_tally_row(t, &a.r[i]);
        assert_true(f >= 0);
        fresh += (uint64_t)f;
    }
    onyx_wjh_tally_end(t, a.n ? a.r[0].window_end : "");
    return fresh;
}

#define RAW_HDR                                                                                    \
    "#    Timestamp              sPort  dPort  Src IP:Port        Dst IP:Port        IP Proto  "   \
    "Drop reason - Recommended action\n"                                                           \
    "---- ---------------------- ------ ------ ------------------ ------------------ --------- "   \
    "-----------------------------------------------\n"
#define RAW_ROW(n, ts, port)                                                                       \
    n "    21/06/16 " ts "  swp1   N/A    10.0.0.1:" port "      10.0.1.1:4791      udp       "    \
      "WRED - Congestion\n"

/* The WJH table is a window: each drop is counted once, whatever the window does. */
static void
test_wjh_tally_window(void **state)
{
    (void)state;
    struct onyx_wjh_tally t = {0};
    /* Raw records: two identical drops in the same millisecond count twice; a record seen
     * in the previous poll is not new, wherever its row; records that left add nothing. */
    assert_int_equal(wjh_poll(&t, RAW_HDR RAW_ROW("1", "12:00:00.001", "5000")
                                      RAW_ROW("2", "12:00:00.002", "5001")
                                          RAW_ROW("3", "12:00:00.002", "5001")),
                     3);
    assert_int_equal(wjh_poll(&t, RAW_HDR RAW_ROW("1", "12:00:00.002", "5001")
                                      RAW_ROW("2", "12:00:00.002", "5001")
                                          RAW_ROW("3", "12:00:01.000", "5000")),
                     1);
    assert_int_equal(wjh_poll(&t, RAW_HDR RAW_ROW("1", "12:00:01.000", "5000")
                                      RAW_ROW("2", "12:00:01.000", "5000")),
                     1);                        /* one more drop with the same identity */
    assert_int_equal(wjh_poll(&t, RAW_HDR), 0); /* the window emptied: not a clear */
    assert_int_equal(wjh_poll(&t, RAW_HDR RAW_ROW("1", "12:00:05.000", "5000")), 1);
    onyx_wjh_tally_free(&t);

    /* Aggregated rows: what Count grew by while the windows overlap; nothing when it
     * shrinks as the window rolls; the whole Count when the new window starts after the
     * previous one ended (the table was cleared). */
#define AGG(start, end, count)                                                                     \
    "Sample Window : 2021/06/16 " start " - 2021/06/16 " end "\n\n"                                \
    "#  sPort  Src IP:Port     Dst IP:Port     IP Proto  Count  Drop reason - Recommended "        \
    "action\n"                                                                                     \
    "-- ------ --------------- --------------- --------- ------ "                                  \
    "----------------------------------\n"                                                         \
    "1  swp4   10.0.0.1:49152  10.0.1.1:4791   udp       " count "    WRED - Congestion\n"
    assert_int_equal(wjh_poll(&t, AGG("12:00:00.000", "12:10:00.000", "100")), 100);
    assert_int_equal(wjh_poll(&t, AGG("12:00:00.000", "12:11:00.000", "150")), 50);
    assert_int_equal(wjh_poll(&t, AGG("12:05:00.000", "12:20:00.000", "120")), 0);
    assert_int_equal(wjh_poll(&t, AGG("12:05:00.000", "12:21:00.000", "125")), 5);
    assert_int_equal(wjh_poll(&t, AGG("12:30:00.000", "12:31:00.000", "010")), 10);
#undef AGG

    /* Totals per (rule, reason), monotonic; too many reasons of a rule go to "other". */
    assert_int_equal(onyx_wjh_tally_add(&t, "nccl", "WRED", 3), 0);
    assert_int_equal(onyx_wjh_tally_add(&t, "nccl", "WRED", 2), 0);
    char reason[32];
    for (int i = 0; i < 40; i++) {
        snprintf(reason, sizeof(reason), "r%d", i);
        assert_int_equal(onyx_wjh_tally_add(&t, "nccl", reason, 1), 0);
    }
    uint64_t wred = 0, other = 0;
    for (size_t i = 0; i < t.n_totals; i++) {
        if (!strcmp(t.totals[i].reason, "WRED"))
            wred = t.totals[i].drops;
        if (!strcmp(t.totals[i].reason, "other"))
            other = t.totals[i].drops;
    }
    assert_true(wred == 5);
    assert_true(other == 40 - 31); /* 32 reasons a rule, WRED being the first */
    assert_true(t.n_totals == 33);
    onyx_wjh_tally_free(&t);
}

/* A5: the ACL's entry counters, in the simulator's layout and in other plausible ones. */
static void
test_acl_counters(void **state)
{
    (void)state;
    uint64_t pk[3], by[3];
    bool seen[3];
    char err[128];
    const char *sim = "ipv4 access-list fabricscope-flows\n"
                      "  seq-number 10 permit udp any any dst-port-range 4791 4791 ecn 3  (match: "
                      "5 packets, 500 bytes)\n"
                      "  seq-number 20 permit udp any any dst-port-range 4791 4791  (match: 100 "
                      "packets, 10000 bytes)\n"
                      "  seq-number 60000 permit ip any any  (match: 7 packets, 9 bytes)\n";
    assert_int_equal(onyx_parse_acl_counters(sim, strlen(sim), pk, by, seen, 3, err, sizeof(err)),
                     0);
    assert_true(seen[0] && seen[1] && !seen[2]);
    assert_true(pk[0] == 5 && by[0] == 500 && pk[1] == 100 && by[1] == 10000);
    const char *other = "Seq-number 10 permit udp any any\n"
                        "    Packets: 12   Bytes = 3400\n"
                        "seq-number 30 permit tcp any any\n"
                        "    Packets: 1\n";
    assert_int_equal(
        onyx_parse_acl_counters(other, strlen(other), pk, by, seen, 3, err, sizeof(err)), 0);
    assert_true(seen[0] && !seen[1] && seen[2]);
    assert_true(pk[0] == 12 && by[0] == 3400 && pk[2] == 1);
    assert_int_equal(onyx_parse_acl_counters("% nothing\n", 10, pk, by, seen, 3, err, sizeof(err)),
                     -1);
}

/* ---------------- assumed layouts (parse_assumed.c) ---------------- */

static void
test_tc_and_pfc_counters(void **state)
{
    (void)state;
    const char *tc = "Eth1/1:\n"
                     "  TC 3:\n"
                     "    Tx\n"
                     "      18446744073709551615 packets\n"
                     "      600                  bytes\n"
                     "      0                    unicast no buffer discard\n"
                     "      12000000             queue depth (bytes)\n"
                     "      12000000             max queue depth (bytes)\n"
                     "      5                    something new\n"
                     "\n"
                     "Eth1/16/3:\n"
                     "  TC 3:\n"
                     "      N\\A                  packets\n"
                     "      9007199254740993     bytes\n";
    struct onyx_samples s = {0};
    char err[128];
    assert_int_equal(onyx_parse_tc_counters(tc, strlen(tc), &s, err, sizeof(err)), 0);
    assert_true(find(&s, FS_M_QUEUE_TX_PACKETS, "interface", "Eth1/1", "tc", "3", 0, 0)->raw ==
                UINT64_MAX);
    assert_true(find(&s, FS_M_QUEUE_TX_BYTES, "interface", "Eth1/16/3", "tc", "3", 0, 0)->raw ==
                9007199254740993ULL);
    assert_true(find(&s, FS_M_QUEUE_DEPTH, "interface", "Eth1/1", "tc", "3", 0, 0)->value == 12e6);
    assert_non_null(find(&s, FS_M_QUEUE_DEPTH_MAX, "interface", "Eth1/1", "tc", "3", 0, 0));
    assert_int_equal(s.n, 6);
    onyx_samples_clear(&s);

    const char *pfc = "Eth1/49:\n"
                      "  PFC 3:\n"
                      "    Rx\n"
                      "      500                  pause packets\n"
                      "      50000                pause duration (usec)\n"
                      "    Tx\n"
                      "      0                    pause packets\n"
                      "      7                    pause duration (msec)\n";
    assert_int_equal(onyx_parse_pfc_counters(pfc, strlen(pfc), &s, err, sizeof(err)), 0);
    const struct onyx_sample *x =
        find(&s, FS_M_PFC_PAUSE_FRAMES, "interface", "Eth1/49", "direction", "rx", "priority", "3");
    assert_true(x->raw == 500);
    x = find(&s, FS_M_PFC_PAUSE_SECONDS, "interface", "Eth1/49", "direction", "rx", "priority",
             "3");
    assert_true(x->raw == 50000 && x->scale == 1e-6);
    x = find(&s, FS_M_PFC_PAUSE_SECONDS, "interface", "Eth1/49", "direction", "tx", "priority",
             "3");
    assert_true(x->raw == 7 && x->scale == 1e-3);
    onyx_samples_free(&s);
    assert_int_not_equal(onyx_parse_pfc_counters("", 0, &s, err, sizeof(err)), 0);
}

static void
test_clock(void **state)
{
    (void)state;
    int64_t us, res;
    char err[128];
    const char *c1 = "Time:       08:48:58\nDate:       2026/12/03\nTime zone:  UTC (Etc/UTC)\n"
                     "UTC offset: same as UTC\n";
    assert_int_equal(onyx_parse_clock(c1, strlen(c1), &us, &res, err, sizeof(err)), 0);
    assert_true(us == 1796287738LL * 1000000);
    assert_true(res == 1000000);
    const char *c2 = "Time: 08:48:58.250\nDate: 2026/12/03\nUTC offset: +01:00\n";
    assert_int_equal(onyx_parse_clock(c2, strlen(c2), &us, &res, err, sizeof(err)), 0);
    assert_true(us == (1796287738LL - 3600) * 1000000 + 250000);
    assert_true(res == 1000);
    assert_int_not_equal(onyx_parse_clock("Time: x\n", 8, &us, &res, err, sizeof(err)), 0);
    /* A year or minute of any int is refused before it is scaled to µs (UBSan: signed
       overflow in the fuzz build). */
    const char *c3 = "Time: 08:48:58\nDate: 2147483647/12/03\n";
    assert_int_equal(onyx_parse_clock(c3, strlen(c3), &us, &res, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "in range"));
    const char *c4 = "Time: 08:-2147483648:58\nDate: 2026/12/03\n";
    assert_int_equal(onyx_parse_clock(c4, strlen(c4), &us, &res, err, sizeof(err)), -1);
}

/* WJH time stamps: the device's local time in the zone show clock states (A6). */
static void
test_wjh_time(void **state)
{
    (void)state;
    int64_t off, us;
    const char *c1 = "Time: 08:48:58\nDate: 2026/12/03\nUTC offset: same as UTC\n";
    assert_int_equal(onyx_parse_clock_utc_offset(c1, strlen(c1), &off), -1);
    assert_true(off == 0);
    const char *c2 = "Time: 08:48:58.250\nDate: 2026/12/03\nUTC offset: -05:30\n";
    assert_int_equal(onyx_parse_clock_utc_offset(c2, strlen(c2), &off), 0);
    assert_true(off == -(5 * 3600 + 30 * 60));
    /* The aggregated table's Sample Window stamps and the raw table's two-digit year. */
    assert_int_equal(onyx_parse_wjh_time("2026/12/03 08:48:58.250", 0, &us), 0);
    assert_true(us == 1796287738LL * 1000000 + 250000);
    assert_int_equal(onyx_parse_wjh_time("26/12/03 08:48:58.25", 3600, &us), 0);
    assert_true(us == (1796287738LL - 3600) * 1000000 + 250000);
    assert_int_equal(onyx_parse_wjh_time("2026/12/03 08:48:58", off, &us), 0);
    assert_true(us == (1796287738LL + 5 * 3600 + 30 * 60) * 1000000);
    /* An empty aggregated table still states its window. */
    const char *empty = "Sample Window : 2026/12/03 08:48:48.250 - 2026/12/03 08:48:58.250\n\n"
                        "#  sPort  Count  Drop reason - Recommended action\n"
                        "-- ------ ------ --------------------------------\n";
    char ws[32], we[32];
    assert_int_equal(onyx_parse_wjh_window(empty, strlen(empty), ws, sizeof(ws), we, sizeof(we)),
                     0);
    assert_string_equal(ws, "2026/12/03 08:48:48.250");
    assert_string_equal(we, "2026/12/03 08:48:58.250");
    assert_int_equal(onyx_parse_wjh_window("no window\n", 10, ws, sizeof(ws), we, sizeof(we)), -1);
    assert_int_equal(onyx_parse_wjh_time("boot", 0, &us), -1);
    assert_int_equal(onyx_parse_wjh_time("2026/13/03 08:48:58", 0, &us), -1);
    assert_int_equal(onyx_parse_wjh_time("2026/12/03 08:48:58.x", 0, &us), -1);
}

static void
test_telemetry_flows(void **state)
{
    (void)state;
    const char *t =
        "Rule             Packets          Bytes            ECN-marked   Dropped   Queue-depth\n"
        "---------------- ---------------- ---------------- ------------ --------- -----------\n"
        "nccl-roce        9007199254740993 1000             12           3         0\n"
        "other            N\\A              5                0            0         0\n";
    struct onyx_samples s = {0};
    char err[128];
    assert_int_equal(onyx_parse_telemetry_flows(t, strlen(t), &s, err, sizeof(err)), 0);
    assert_true(find(&s, FS_M_FLOW_RULE_PACKETS, "rule", "nccl-roce", 0, 0, 0, 0)->raw ==
                9007199254740993ULL);
    assert_true(find(&s, FS_M_FLOW_RULE_ECN_MARKED, "rule", "nccl-roce", 0, 0, 0, 0)->raw == 12);
    assert_true(find(&s, FS_M_FLOW_RULE_DROPPED, "rule", "nccl-roce", 0, 0, 0, 0)->raw == 3);
    assert_null(find(&s, FS_M_FLOW_RULE_PACKETS, "rule", "other", 0, 0, 0, 0));
    assert_true(find(&s, FS_M_FLOW_RULE_BYTES, "rule", "other", 0, 0, 0, 0)->raw == 5);
    onyx_samples_free(&s);
}

/* ---- LLDP neighbours (layout A7, assumed) ---- */

struct lldp_rec {
    struct onyx_lldp_remote r[8];
    size_t n;
};

static void
lldp_rec_cb(const struct onyx_lldp_remote *r, void *arg)
{
    struct lldp_rec *x = arg;
    if (x->n < 8)
        x->r[x->n] = *r;
    x->n++;
}

static void
test_lldp_remote(void **state)
{
    (void)state;
    /* the assumed layout: a port line (with its port channel), key padding, `;` pairs,
     * two neighbours of one port (Remote Index), unknown lines, N/A values */
    const char *t = "\n"
                    "Eth1/1\n"
                    "Remote Index               : 1\n"
                    "Remote chassis id          : 0c:42:a1:de:ad:01 ; chassis id subtype : Mac "
                    "Address (4)\n"
                    "Remote port-id             : Eth1/33 ; port id subtype : Interface Name (5)\n"
                    "Remote port description    : Eth1/33\n"
                    "Remote system name         : spine01\n"
                    "Remote system description  : Onyx 3.9: a description : with colons\n"
                    "Remote system capabilities : B, R\n"
                    "Something new in 3.10      : 7\n"
                    "\n"
                    "Eth1/2 (Po100)\n"
                    "Remote Index               : 1\n"
                    "Remote chassis id          : aa:bb:cc:dd:ee:ff ; chassis id subtype : Mac "
                    "Address (4)\n"
                    "Remote port-id             : 11:22:33:44:55:66 ; port id subtype : Mac "
                    "Address (3)\n"
                    "Remote port description    : eth0\n"
                    "Remote system name         : N/A\n"
                    "Remote Index               : 2\n"
                    "Remote chassis id          : 0c:42:a1:de:ad:02\n"
                    "Remote port-id             : swp7\n"
                    "Remote system name         : leaf2\n"
                    "\n"
                    "Eth1/3:\n"
                    "Remote Index               : 1\n"
                    "Remote port-id             : Eth1/9\n";
    struct lldp_rec x = {0};
    bool trunc = true;
    char err[160];
    assert_int_equal(onyx_parse_lldp_remote(t, strlen(t), lldp_rec_cb, &x, &trunc, err, sizeof err),
                     3);
    assert_false(trunc);
    assert_int_equal(x.n, 3);
    assert_string_equal(x.r[0].local_port, "Eth1/1");
    assert_string_equal(x.r[0].chassis_id, "0c:42:a1:de:ad:01");
    assert_string_equal(x.r[0].port_id, "Eth1/33");
    assert_string_equal(x.r[0].port, "Eth1/33");
    assert_string_equal(x.r[0].sys_name, "spine01");
    assert_string_equal(x.r[1].local_port, "Eth1/2");
    assert_string_equal(x.r[1].sys_name, ""); /* N/A */
    assert_string_equal(x.r[1].port, "eth0"); /* a MAC port id: its description */
    assert_string_equal(x.r[2].local_port, "Eth1/2");
    assert_string_equal(x.r[2].port, "swp7"); /* no subtype, no MAC: the id */
    assert_string_equal(x.r[2].sys_name, "leaf2");
    /* Eth1/3's entry names no system: not a neighbour */

    /* an empty table: blank, or port lines without remote systems */
    x.n = 0;
    assert_int_equal(onyx_parse_lldp_remote("", 0, lldp_rec_cb, &x, NULL, err, sizeof err), 0);
    const char *e = "\n  \nEth1/1\n\nEth1/2\n";
    assert_int_equal(onyx_parse_lldp_remote(e, strlen(e), lldp_rec_cb, &x, NULL, err, sizeof err),
                     0);
    assert_int_equal(x.n, 0);

    /* junk: not this layout, so nothing can be said about the table */
    const char *j = "Remote chassis id : 00:11:22:33:44:55\nlorem ipsum\n\x01\x02\xff\n";
    assert_int_equal(onyx_parse_lldp_remote(j, strlen(j), lldp_rec_cb, &x, NULL, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "A7"));
    assert_int_equal(x.n, 0);
    /* a port line of another shape is no block title */
    const char *o = "Eth1/1 is up\nRemote system name : x\n";
    assert_int_equal(onyx_parse_lldp_remote(o, strlen(o), lldp_rec_cb, &x, NULL, err, sizeof err),
                     -1);

    /* a long value is cut, never overrun */
    char big[600];
    memset(big, 'x', sizeof big);
    char t2[800];
    snprintf(t2, sizeof t2, "Eth1/4\nRemote system name : %.*s\n", (int)sizeof big, big);
    x.n = 0;
    assert_int_equal(onyx_parse_lldp_remote(t2, strlen(t2), lldp_rec_cb, &x, NULL, err, sizeof err),
                     1);
    assert_int_equal(strlen(x.r[0].sys_name), ONYX_LLDP_STR_MAX - 1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_text_3_6_1102),
        cmocka_unit_test(test_clean_matches_bytewise),
        cmocka_unit_test(test_eq_matches_strncasecmp),
        cmocka_unit_test(test_version_text_3_6_5000),
        cmocka_unit_test(test_version_json),
        cmocka_unit_test(test_release_compare),
        cmocka_unit_test(test_interfaces_text_3_6_1102),
        cmocka_unit_test(test_interfaces_json_header_layout),
        cmocka_unit_test(test_interfaces_json_port_keyed_layout),
        cmocka_unit_test(test_interfaces_text_padded_layout),
        cmocka_unit_test(test_congestion_json),
        cmocka_unit_test(test_prompts_from_captures),
        cmocka_unit_test(test_pager_password_errors_clean),
        cmocka_unit_test(test_split_outputs_on_prompt_lines),
        cmocka_unit_test(test_split_outputs_cli_echo),
        cmocka_unit_test(test_next_prompt_edges),
        cmocka_unit_test(test_congestion_text),
        cmocka_unit_test(test_wjh_tables),
        cmocka_unit_test(test_wjh_tally_window),
        cmocka_unit_test(test_acl_counters),
        cmocka_unit_test(test_tc_and_pfc_counters),
        cmocka_unit_test(test_clock),
        cmocka_unit_test(test_wjh_time),
        cmocka_unit_test(test_telemetry_flows),
        cmocka_unit_test(test_lldp_remote),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
