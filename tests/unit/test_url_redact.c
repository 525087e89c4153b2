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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_userinfo_replaced),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
