/* The scrape watch: a steady scraper is reported once at its interval, again when the
 * interval changes; an irregular client never; the least recent scraper makes room. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "http/scrape_watch.h"

#define S 1000000LL

/* Requests of key at t0, t0 + iv, ... (n of them); returns what the last one reported
   and counts the reports in *reports. */
static int64_t
scrape(struct fs_scrape_watch *w, uint64_t key, int64_t t0, int64_t iv, int n, int *reports)
{
    int64_t r = 0;
    for (int i = 0; i < n; i++) {
        r = fs_scrape_watch_note(w, key, t0 + i * iv);
        if (r && reports)
            (*reports)++;
    }
    return r;
}

static void
test_steady_reported_once(void **state)
{
    (void)state;
    struct fs_scrape_watch *w = fs_scrape_watch_new();
    assert_non_null(w);
    /* Three intervals are needed: the first three requests report nothing. */
    assert_int_equal(fs_scrape_watch_note(w, 1, 100 * S), 0);
    assert_int_equal(fs_scrape_watch_note(w, 1, 115 * S), 0);
    assert_int_equal(fs_scrape_watch_note(w, 1, 130 * S + 20000), 0);
    /* The fourth: three intervals within 10% of 15 s. */
    assert_int_equal(fs_scrape_watch_note(w, 1, 145 * S - 30000), 15 * S);
    int reports = 0;
    scrape(w, 1, 160 * S, 15 * S, 20, &reports);
    assert_int_equal(reports, 0);
    fs_scrape_watch_free(w);
}

static void
test_interval_change_reported_again(void **state)
{
    (void)state;
    struct fs_scrape_watch *w = fs_scrape_watch_new();
    int reports = 0;
    scrape(w, 7, 0, 15 * S, 10, &reports);
    assert_int_equal(reports, 1);
    /* A 5% change is the same interval; 30 s is another. */
    reports = 0;
    scrape(w, 7, 151 * S, 15 * S + 750000, 10, &reports);
    assert_int_equal(reports, 0);
    reports = 0;
    int64_t last = 0;
    for (int i = 1; i <= 10; i++) {
        int64_t r = fs_scrape_watch_note(w, 7, 400 * S + i * 30 * S);
        if (r) {
            reports++;
            last = r;
        }
    }
    assert_int_equal(reports, 1);
    assert_int_equal(last, 30 * S);
    fs_scrape_watch_free(w);
}

static void
test_irregular_never(void **state)
{
    (void)state;
    struct fs_scrape_watch *w = fs_scrape_watch_new();
    /* A person's curl now and then: 40 s, 3 min, 5 s, 70 s, 12 s, ... */
    static const int64_t at[] = {0, 40, 220, 225, 295, 307, 600, 610, 1400, 1450};
    for (size_t i = 0; i < sizeof at / sizeof *at; i++)
        assert_int_equal(fs_scrape_watch_note(w, 3, at[i] * S), 0);
    /* Two scrapers are told apart by their key: interleaved, each is steady. */
    int64_t r1 = 0, r2 = 0;
    for (int i = 0; i < 6; i++) {
        int64_t a = fs_scrape_watch_note(w, 10, 2000 * S + i * 15 * S);
        int64_t b = fs_scrape_watch_note(w, 11, 2000 * S + i * 15 * S + 4 * S);
        r1 = a ? a : r1;
        r2 = b ? b : r2;
    }
    assert_int_equal(r1, 15 * S);
    assert_int_equal(r2, 15 * S);
    fs_scrape_watch_free(w);
}

static void
test_least_recent_makes_room(void **state)
{
    (void)state;
    struct fs_scrape_watch *w = fs_scrape_watch_new();
    int reports = 0;
    /* Key 1 becomes steady (reported), then FS_SCRAPE_WATCH_SLOTS others arrive, each
       more recent than key 1: key 1 is forgotten, so when it returns steady it is
       reported anew; the others kept their slots. */
    scrape(w, 1, 0, 10 * S, 5, &reports);
    assert_int_equal(reports, 1);
    for (uint64_t k = 100; k < 100 + FS_SCRAPE_WATCH_SLOTS; k++)
        assert_int_equal(fs_scrape_watch_note(w, k, 100 * S + (int64_t)k), 0);
    reports = 0;
    scrape(w, 1, 200 * S, 10 * S, 5, &reports);
    assert_int_equal(reports, 1);
    fs_scrape_watch_free(w);
}

static void
test_unstored_share(void **state)
{
    (void)state;
    assert_true(fs_scrape_watch_unstored_share(10 * S, 15 * S) > 0.333 &&
                fs_scrape_watch_unstored_share(10 * S, 15 * S) < 0.334);
    assert_true(fs_scrape_watch_unstored_share(10 * S, 30 * S) > 0.666 &&
                fs_scrape_watch_unstored_share(10 * S, 30 * S) < 0.667);
    assert_true(fs_scrape_watch_unstored_share(15 * S, 15 * S) == 0.0);
    assert_true(fs_scrape_watch_unstored_share(30 * S, 15 * S) == 0.0);
    assert_true(fs_scrape_watch_unstored_share(0, 15 * S) == 0.0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_steady_reported_once),
        cmocka_unit_test(test_interval_change_reported_again),
        cmocka_unit_test(test_irregular_never),
        cmocka_unit_test(test_least_recent_makes_room),
        cmocka_unit_test(test_unstored_share),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
