/* URLs as the collector shows them: no user:password@ (util/url.h), and a remote_write
 * sender's URL in its self metrics likewise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "util/url.h"

static void
test_userinfo_replaced(void **state)
{
    (void)state;
    char out[128];
    fs_url_redact("https://alice:s3cret@prom.example:9090/api/v1/write", out, sizeof out);
    assert_string_equal(out, "https://***@prom.example:9090/api/v1/write");
    /* the userinfo ends at the authority's last '@'; an '@' in the path is not it */
    fs_url_redact("http://a@b:p@w@host/x@y?q=@", out, sizeof out);
    assert_string_equal(out, "http://***@host/x@y?q=@");
    fs_url_redact("http://host:9090/path@x", out, sizeof out);
    assert_string_equal(out, "http://host:9090/path@x");
    fs_url_redact("user:pw@host", out, sizeof out);
    assert_string_equal(out, "***@host");
    /* cut, never past the buffer */
    char small[12];
    fs_url_redact("http://u:p@averyveryverylonghost/", small, sizeof small);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_null(strstr(small, "u:p"));
}

/* The one reading of an authority every redaction uses (the configuration's messages,
 * the history client's host, fs_url_redact): on a slice that is not terminated, with or
 * without a scheme required. */
static void
test_authority(void **state)
{
    (void)state;
    struct fs_url_parts p;
    const char *u = "https://a:b@c@host:9090/x@y";
    assert_true(fs_url_authority(u, strlen(u), true, &p));
    assert_int_equal(p.auth, 8);
    assert_int_equal(p.host, 14);
    assert_int_equal(p.end, 23);
    /* Cut inside the userinfo: no '@' seen, no userinfo. */
    assert_true(fs_url_authority(u, 10, true, &p));
    assert_int_equal(p.host, p.auth);
    assert_int_equal(p.end, 10);
    assert_false(fs_url_authority("user@host", 9, true, &p));
    assert_true(fs_url_authority("user@host", 9, false, &p));
    assert_int_equal(p.host, 5);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_userinfo_replaced),
        cmocka_unit_test(test_authority),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
