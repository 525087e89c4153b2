/* Selector parsing (valid and invalid) and Prometheus matching semantics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "http/selector.h"

static struct fs_selector *
parse_ok(const char *text)
{
    struct fs_selector *s = NULL;
    char err[256] = "";
    int rc = fs_selector_parse(text, strlen(text), &s, err, sizeof err);
    if (rc != 0)
        fail_msg("expected \"%s\" to parse, got: %s", text, err);
    assert_non_null(s);
    return s;
}

static void
parse_bad(const char *text, const char *why)
{
    struct fs_selector *s = (struct fs_selector *)1;
    char err[256] = "";
    int rc = fs_selector_parse(text, strlen(text), &s, err, sizeof err);
    if (rc == 0)
        fail_msg("expected \"%s\" to be refused", text);
    assert_null(s);
    if (why && !strstr(err, why))
        fail_msg("\"%s\": error \"%s\" lacks \"%s\"", text, err, why);
}

static void
test_valid(void **state)
{
    (void)state;
    static const char *const ok[] = {
        "up",
        "fabric_port_bytes_total",
        "  fabric_port_bytes_total  ",
        "ns:metric:rate5m",
        "_x",
        "m{}",
        "m{a=\"b\"}",
        "m{a=\"b\",}",
        "m { a = \"b\" , c != 'd' }",
        "m{a=~\"b.*\",c!~\"\"}",
        "{__name__=\"m\"}",
        "{__name__=~\"fabric_.+\"}",
        "{a=\"x\"}",
        "{a=~\".+\"}",
        "{a!=\"\"}",
        "m{a=`raw\\n`}",
        "m{a=\"\\\"\\\\\\n\\t\\x41\\101\\u00e9\\U0001F600\"}",
        "m{a='it\\'s'}",
        "m{interface=~\"Eth1/(1|2)\"}",
        "m{a=~\"[0-9]{1,3}\"}",
        "m{a=~\"[*+?]+\"}",
        "m{a=~\"[[:alpha:]]+x*\"}",
        "m{a=~\"(a*b)c*\"}",
        "m{a=~\"((a{9}){9}){9}\"}",
        "m{a=~\"(x{2})*\"}",
        "m{a=~\"a{,5}\"}",
        "m{a=~\"(a?){50}\"}",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        fs_selector_free(parse_ok(ok[i]));
}

static void
test_invalid(void **state)
{
    (void)state;
    parse_bad("", "empty");
    parse_bad("   ", "empty");
    parse_bad("{}", "empty string");
    parse_bad("{a=\"\"}", "empty string");
    parse_bad("{a=~\".*\"}", "empty string");
    parse_bad("{a!~\".+\"}", "empty string");
    parse_bad("1abc", "metric name");
    parse_bad("m{", "unexpected end");
    parse_bad("m{a}", "expected one of");
    parse_bad("m{a=}", "quoted string");
    parse_bad("m{a=b}", "quoted string");
    parse_bad("m{a==\"b\"}", "quoted string");
    parse_bad("m{a=\"b\"", "unexpected end");
    parse_bad("m{a=\"b}", "unterminated");
    parse_bad("m{a=\"b\" c=\"d\"}", "expected ','");
    parse_bad("m{,}", "label name");
    parse_bad("m{1a=\"b\"}", "label name");
    parse_bad("m{a:b=\"c\"}", "expected one of");
    parse_bad("m{a=\"\\q\"}", "unknown escape");
    parse_bad("m{a=\"\\x4\"}", "bad digit");
    parse_bad("m{a=\"\\x00\"}", "invalid escaped");
    parse_bad("m{a=\"\\uD800\"}", "invalid escaped");
    parse_bad("m{a=\"\\400\"}", "invalid escaped");
    parse_bad("m{a='\\\"'}", "unknown escape");
    parse_bad("m{a=\"x\ny\"}", "newline");
    parse_bad("m{a=~\"(\"}", "bad regex");
    parse_bad("m{a=~\"a)(b\"}", "bad regex");
    parse_bad("m{a=~\"(a)\\\\1\"}", "back-references");
    parse_bad("m{a=~`(a)\\1`}", "back-references");
    parse_bad("m{a=~\"((a{50}){50}){50}\"}", "too costly");
    parse_bad("m{a=~\"(a*)*\"}", "unbounded repetition");
    parse_bad("m{a=~\"(a+)+\"}", "unbounded repetition");
    parse_bad("m{a=~\"(a|b*)+\"}", "unbounded repetition");
    parse_bad("m{a=~\"(x+y){2,}\"}", "unbounded repetition");
    parse_bad("m{a=~\"a{3,2}\"}", "malformed repetition");
    parse_bad("m{a=~\"a{1001}\"}", "above 1000");
    parse_bad("m{a=~\"a{0,600}\"}", "optional positions");
    parse_bad("m{a=~\"c++\"}", "nested repetition");
    parse_bad("m{a=~\"x*?\"}", "nested repetition");
    parse_bad("m{a=~\"x{2}*\"}", "nested repetition");
    parse_bad("m{__name__=\"x\"}", "twice");
    parse_bad("m x", "after the selector");
    parse_bad("m{a=\"b\"} x", "after the selector");
    parse_bad("m{a=\"b\"}}", "after the selector");
    parse_bad("rate(m[5m])", "after the selector");
    parse_bad("m[5m]", "after the selector");
    parse_bad("m offset 5m", "after the selector");
    parse_bad("m{a=\"b\"}{c=\"d\"}", "after the selector");

    char big[FS_SELECTOR_MAX_LEN + 10];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    parse_bad(big, "longer than");

    char many[2048] = "m{";
    for (int i = 0; i < FS_SELECTOR_MAX_MATCHERS + 1; i++) {
        char one[32];
        snprintf(one, sizeof one, "l%d=\"v\",", i);
        strcat(many, one);
    }
    strcat(many, "}");
    parse_bad(many, "more than");

    /* A NUL byte inside the given length is refused, not silently cut. */
    struct fs_selector *s = NULL;
    char err[128];
    assert_int_not_equal(fs_selector_parse("m{a=\"x\0y\"}", 11, &s, err, sizeof err), 0);
    assert_null(s);
}

/*
 * Regexes that glibc's regcomp would spend seconds and gigabytes on are refused from
 * their text alone: each refusal must come back well under 50 ms (a generous bound
 * against a slow CI machine; the nested-count example took 2.6 s to compile).
 */
static void
test_costly_regex_refused_fast(void **state)
{
    (void)state;
    static const struct {
        const char *sel, *why;
    } bad[] = {
        {"{__name__=~\"(((((((a{9}){9}){9}){9}){9}){9}){9})\"}", "too costly"},
        {"{__name__=~\"((((a{1000}){1000}){1000}){1000})\"}", "too costly"},
        {"m{a=~\"(a{99}){99}\"}", "too costly"},
        {"m{a=~\"([a-z]{40}|[0-9]{40}){40}\"}", "too costly"},
        {"m{a=~\"(a?){1000}a{1000}\"}", "too costly"},
        {"m{a=~\"(a|b|c|d|e|f|g|h){300}\"}", "too costly"},
        {"m{a=~\"(.?){300}\"}", "optional positions"},
        {"m{a=~\"x{0,900}\"}", "optional positions"},
        {"m{a=~\"(a+)+b\"}", "unbounded repetition"},
        {"m{a=~\"((a*)*)*\"}", "unbounded repetition"},
        {"m{a=~\"(.*.*)*x\"}", "unbounded repetition"},
        {"m{a=~\"||||||||(||||||||){9}){9}){4})\"}", "unmatched )"},
        {"m{a=~\"((||||||||){9}){9}\"}", "too costly"},
        {"m{a=~\"(||||||||){9}\"}", "optional positions"},
    };
    double worst = 0;
    char big[2048];
    memset(big, 'a', sizeof big);
    memcpy(big, "m{a=~\"", 6);
    memcpy(big + sizeof big - 3, "\"}", 3);
    for (size_t i = 0; i <= sizeof bad / sizeof bad[0]; i++) {
        const char *sel = i < sizeof bad / sizeof bad[0] ? bad[i].sel : big;
        const char *why = i < sizeof bad / sizeof bad[0] ? bad[i].why : "longer than";
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        parse_bad(sel, why);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        if (ms >= 50.0)
            fail_msg("refusing %.60s took %.1f ms", sel, ms);
        worst = ms > worst ? ms : worst;
    }
    print_message("%zu costly regexes refused, the slowest in %.3f ms\n",
                  sizeof bad / sizeof bad[0] + 1, worst);
    /* Four of the pathological selectors in one selector: the summed estimate
     * refuses the combination even where each piece alone is allowed. */
    char many[4096] = "m{";
    for (int i = 0; i < 8; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%sa%d=~\"(a?){50}x\"",
                 i ? "," : "", i);
    strcat(many, "}");
    parse_bad(many, "KiB compiled");
}

static void
test_unescape(void **state)
{
    (void)state;
    struct fs_selector *s =
        parse_ok("m{a=\"q\\\"b\\\\n\\n\\x41\\101\\u00e9\", b=`x\\ny`, c='\\''}");
    const char *l, *v;
    enum fs_match_op op;
    assert_int_equal(fs_selector_count(s), 4);
    fs_selector_get(s, 0, &l, &op, &v);
    assert_string_equal(l, "__name__");
    assert_string_equal(v, "m");
    assert_int_equal(op, FS_MATCH_EQ);
    fs_selector_get(s, 1, &l, &op, &v);
    assert_string_equal(l, "a");
    assert_string_equal(v, "q\"b\\n\nAA\xc3\xa9");
    fs_selector_get(s, 2, &l, &op, &v);
    assert_string_equal(v, "x\\ny");
    fs_selector_get(s, 3, &l, &op, &v);
    assert_string_equal(v, "'");
    fs_selector_free(s);

    s = parse_ok("{x!~\"a\", y=~\"b\", z!=\"c\"}");
    fs_selector_get(s, 0, &l, &op, &v);
    assert_int_equal(op, FS_MATCH_NRE);
    fs_selector_get(s, 1, &l, &op, &v);
    assert_int_equal(op, FS_MATCH_RE);
    fs_selector_get(s, 2, &l, &op, &v);
    assert_int_equal(op, FS_MATCH_NE);
    fs_selector_free(s);
}

static const struct fs_label L[] = {
    {"target", "tor1"},  {"pod", "p1"}, {"interface", "Eth1/12"},
    {"direction", "rx"}, {"empty", ""}, {"source", "snmp"},
};
#define NL (sizeof L / sizeof L[0])

static bool
m(const char *sel)
{
    struct fs_selector *s = parse_ok(sel);
    bool r = fs_selector_match(s, "fabric_port_bytes_total", L, NL);
    fs_selector_free(s);
    return r;
}

static void
test_match(void **state)
{
    (void)state;
    assert_true(m("fabric_port_bytes_total"));
    assert_false(m("fabric_port_bytes"));
    assert_true(m("fabric_port_bytes_total{target=\"tor1\"}"));
    assert_false(m("fabric_port_bytes_total{target=\"tor2\"}"));
    assert_true(m("{__name__=\"fabric_port_bytes_total\"}"));
    assert_true(m("{__name__=~\"fabric_.+\"}"));
    assert_false(m("{__name__=~\"fabric\"}"));     /* anchored: a prefix is not a match */
    assert_false(m("{__name__=~\"port_bytes\"}")); /* nor a substring */
    assert_true(m("{__name__!~\"fabricscope_.*\",target=\"tor1\"}"));
    assert_true(m("{interface=~\"Eth1/1[0-9]\"}"));
    assert_false(m("{interface=~\"Eth1/1\"}"));
    assert_true(m("{interface=~\"Eth1/1|Eth1/12\"}")); /* alternation anchored as a whole */
    assert_false(m("{interface=~\"Eth1/1|Eth1/1\"}"));
    assert_true(m("m{interface!~\"Eth1/1\"}") == false); /* name mismatch */
    assert_true(m("fabric_port_bytes_total{interface!~\"Eth1/1\"}"));
    assert_true(m("fabric_port_bytes_total{direction!=\"tx\"}"));
    assert_false(m("fabric_port_bytes_total{direction!=\"rx\"}"));
    assert_true(m("fabric_port_bytes_total{direction=~\"rx|tx\",source=\"snmp\"}"));
    assert_false(m("fabric_port_bytes_total{direction=~\"rx|tx\",source=\"gnmi\"}"));

    /* Empty-label semantics: a missing label is the empty string. */
    assert_true(m("fabric_port_bytes_total{missing=\"\"}"));
    assert_true(m("fabric_port_bytes_total{empty=\"\"}"));
    assert_false(m("fabric_port_bytes_total{pod=\"\"}"));
    assert_false(m("fabric_port_bytes_total{missing!=\"\"}"));
    assert_true(m("fabric_port_bytes_total{pod!=\"\"}"));
    assert_true(m("fabric_port_bytes_total{missing=~\"\"}"));
    assert_true(m("fabric_port_bytes_total{missing=~\".*\"}"));
    assert_false(m("fabric_port_bytes_total{missing=~\".+\"}"));
    assert_true(m("fabric_port_bytes_total{missing!~\".+\"}"));
    assert_true(m("fabric_port_bytes_total{missing!=\"x\"}"));
    assert_false(m("fabric_port_bytes_total{missing=\"x\"}"));

    /* Regexes match across newlines like Prometheus's (?s). */
    struct fs_label nl[] = {{"a", "x\ny"}};
    struct fs_selector *s = parse_ok("{a=~\"x.y\"}");
    assert_true(fs_selector_match(s, "m", nl, 1));
    fs_selector_free(s);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_costly_regex_refused_fast),
        cmocka_unit_test(test_unescape),
        cmocka_unit_test(test_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
