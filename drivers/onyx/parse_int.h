/*
 * Helpers shared by parse.c and parse_assumed.c; not part of the parser's contract.
 */
#ifndef FS_ONYX_PARSE_INT_H
#define FS_ONYX_PARSE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "parse.h"

struct json_object;

int onyx_add_gauge(struct onyx_samples *s, enum fs_metric m, double value, const char *l1,
                   const char *v1, const char *l2, const char *v2, const char *l3, const char *v3);
void onyx_errf(char *errbuf, size_t errlen, const char *msg);
bool onyx_next_line(const char *text, size_t len, size_t *pos, const char **ls, size_t *ll);
/** The next `Key: value` line from *pos on (split at its first colon, both sides trimmed);
 *  lines without a colon are skipped. */
bool onyx_next_field(const char *text, size_t len, size_t *pos, const char **k, size_t *kn,
                     const char **v, size_t *vn);
void onyx_trim(const char **s, size_t *n);
bool onyx_eq(const char *s, size_t n, const char *lit);
bool onyx_is_port_name(const char *s, size_t n);
/** The JSON document inside a json-print output; the caller json_object_put()s it. */
struct json_object *onyx_json_parse(const char *text, size_t len, char *errbuf, size_t errlen);
bool onyx_json_u64(struct json_object *o, const char *key, uint64_t *v);
const char *onyx_json_str(struct json_object *o, const char *key);

#endif
