/* libFuzzer target: selector parsing, then matching against fixed label sets. */
#include <stddef.h>
#include <stdint.h>

#include "http/selector.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct fs_label a[] = {
        {"target", "tor1"},  {"pod", "p1"},      {"interface", "Eth1/1"},
        {"direction", "rx"}, {"source", "snmp"},
    };
    static const struct fs_label b[] = {{"target", ""}, {"tc", "3"}, {"x", "a\nb\"c\\"}};
    struct fs_selector *s = NULL;
    char err[256];
    if (fs_selector_parse((const char *)data, size, &s, err, sizeof err) != 0)
        return 0;
    size_t n = fs_selector_count(s);
    for (size_t i = 0; i < n; i++) {
        const char *l, *v;
        enum fs_match_op op;
        fs_selector_get(s, i, &l, &op, &v);
    }
    (void)fs_selector_match(s, "fabric_port_bytes_total", a, sizeof a / sizeof a[0]);
    (void)fs_selector_match(s, "", b, sizeof b / sizeof b[0]);
    (void)fs_selector_match(s, "up", NULL, 0);
    fs_selector_free(s);
    return 0;
}
