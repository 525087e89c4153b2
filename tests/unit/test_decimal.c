/* Decimal text to double (util/decimal.h): whatever the fast path accepts must be
 * strtod's value to the bit, and what it declines must still parse through the fallback. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/decimal.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t
next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Both conversions of s; the fast one, when it accepts, equal to strtod's bit for bit. */
static bool
check(const char *s)
{
    char *e;
    double want = strtod(s, &e);
    bool whole = *s && !*e;
    double got = 12345.0;
    bool fast = fs_decimal_exact(s, strlen(s), &got);
    if (fast) {
        if (!whole)
            fail_msg("fast path took \"%s\", which strtod does not read whole", s);
        if (memcmp(&got, &want, sizeof got) != 0)
            fail_msg("\"%s\": fast %.17g, strtod %.17g", s, got, want);
    }
    double any = 0;
    bool parsed = fs_decimal_parse(s, strlen(s), &any);
    assert_int_equal(parsed, whole && strlen(s) < 64);
    if (parsed && !isnan(want))
        assert_memory_equal(&any, &want, sizeof any);
    return fast;
}

static void
test_known(void **state)
{
    (void)state;
    const char *taken[] = {"0",
                           "-0",
                           "1",
                           "1.",
                           ".5",
                           "15",
                           "1e3",
                           "1E-3",
                           "0.03333333333333333",
                           "1796597880.123",
                           "1234567890123456",
                           "9007199254740992",
                           "-2.5e+10",
                           "00012.5000",
                           "1e22",
                           "1e-22"};
    for (size_t i = 0; i < sizeof taken / sizeof *taken; i++)
        if (!check(taken[i]))
            fail_msg("fast path declined \"%s\"", taken[i]);
    /* beyond the fast path: strtod's business, still parsed */
    const char *declined[] = {"NaN",
                              "+Inf",
                              "-Inf",
                              "0x10",
                              "1e23",
                              "1e-23",
                              "9007199254740993",
                              "12345678901234567890",
                              "0.1234567890123456789012",
                              " 1",
                              "1e400"};
    for (size_t i = 0; i < sizeof declined / sizeof *declined; i++)
        if (check(declined[i]))
            fail_msg("fast path took \"%s\"", declined[i]);
    /* not numbers at all */
    const char *bad[] = {"", "-", ".", "e5", "1e", "1e+", "1x", "--1", "1.2.3", "1 "};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        double v;
        assert_false(fs_decimal_exact(bad[i], strlen(bad[i]), &v));
        assert_false(fs_decimal_parse(bad[i], strlen(bad[i]), &v));
    }
    /* a slice: only len bytes are read */
    double v = 0;
    assert_true(fs_decimal_exact("12.5,7", 4, &v));
    assert_true(v == 12.5);
}

/* Random decimals shaped like Prometheus values and times, and random doubles printed at
 * every precision: each accepted one equal to strtod's. */
static void
test_random_against_strtod(void **state)
{
    (void)state;
    char s[80];
    size_t taken = 0, n = 0, realistic = 0, realistic_taken = 0;
    for (int i = 0; i < 400000; i++, n++) {
        bool real = false;
        switch (next() % 4) {
        case 0: { /* digits, a point somewhere, maybe an exponent */
            int nd = 1 + (int)(next() % 24), dot = (int)(next() % (uint64_t)(nd + 1));
            size_t o = 0;
            if (next() % 4 == 0)
                s[o++] = '-';
            for (int k = 0; k < nd; k++) {
                if (k == dot)
                    s[o++] = '.';
                s[o++] = (char)('0' + next() % 10);
            }
            if (next() % 3 == 0)
                o += (size_t)snprintf(s + o, sizeof s - o, "e%d", (int)(next() % 60) - 30);
            s[o] = '\0';
            break;
        }
        case 1: { /* a random double at a random precision */
            uint64_t b = next();
            double d;
            memcpy(&d, &b, sizeof d);
            snprintf(s, sizeof s, "%.*g", 1 + (int)(next() % 18), d);
            break;
        }
        case 2: { /* a rate as Prometheus prints it: the shortest text that reads back */
            double d = (double)(next() % 100000) / (double)(1 + next() % 120);
            for (int prec = 1; prec <= 17; prec++) {
                snprintf(s, sizeof s, "%.*g", prec, d);
                if (strtod(s, NULL) == d)
                    break;
            }
            real = true;
            break;
        }
        default: /* a time in seconds with milliseconds */
            real = true;
            snprintf(s, sizeof s, "%llu.%03llu",
                     (unsigned long long)(1.7e9 + (double)(next() % 100000000)),
                     (unsigned long long)(next() % 1000));
            break;
        }
        bool fast = check(s);
        taken += fast;
        realistic += real;
        realistic_taken += real && fast;
    }
    /* the fast path is what makes it worth having: times and most rates take it (a rate
       whose shortest text needs 17 digits above 2^53 does not) */
    if (realistic_taken * 4 < realistic * 3)
        fail_msg("the fast path took only %zu of %zu rates and times", realistic_taken, realistic);
    if (taken == 0 || taken == n)
        fail_msg("the random inputs did not reach both paths (%zu of %zu fast)", taken, n);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known),
        cmocka_unit_test(test_random_against_strtod),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
