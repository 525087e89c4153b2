/*
 * Series selectors, the PromQL subset /api/v1/raw accepts:
 *   metric_name
 *   metric_name{label="v", label!="v", label=~"re", label!~"re"}
 *   {__name__=~"re", ...}
 * Strings are PromQL strings: "..." or '...' with Go escapes (\" \' \\ \n \t \r \a \b
 * \f \v \xHH \ooo \uHHHH \UHHHHHHHH), or `raw`. Regexes are POSIX extended, anchored
 * at both ends like Prometheus (`re` matches only the whole value). As in Prometheus a
 * missing label counts as the empty string (label="" matches series without it), and
 * a selector must have at least one matcher that does not match the empty string.
 *
 * Pure: no I/O, no globals; safe to use from several threads once parsed.
 * Ownership: fs_selector_parse() returns a selector owned by the caller, freed with
 * fs_selector_free(); it keeps no pointer into the input text.
 */
#ifndef FS_SELECTOR_H
#define FS_SELECTOR_H

#include <stdbool.h>
#include <stddef.h>

#include "store/sink.h" /* struct fs_label */

/** Limits that keep a hostile selector cheap to compile and match. */
#define FS_SELECTOR_MAX_LEN 4096
#define FS_SELECTOR_MAX_MATCHERS 32
/*
 * Regexes are bounded before compiling (glibc's regcomp copies a counted repetition's
 * operand, so nested counts multiply, and its closures grow with the square of a run of
 * optional positions): pattern bytes, positions after expansion, the longest optional
 * run, counts, group nesting, and the estimated compiled size summed over a selector.
 * Within these a regex compiles in about a millisecond and 1.3 MB at worst.
 */
#define FS_SELECTOR_MAX_REGEX_LEN 1024
#define FS_SELECTOR_MAX_REGEX_COST 2000
#define FS_SELECTOR_MAX_REGEX_RUN 256
#define FS_SELECTOR_MAX_REPEAT 1000
#define FS_SELECTOR_MAX_REGEX_DEPTH 32
#define FS_SELECTOR_MAX_REGEX_BYTES (4 * 1024 * 1024)

enum fs_match_op { FS_MATCH_EQ, FS_MATCH_NE, FS_MATCH_RE, FS_MATCH_NRE };

struct fs_selector;

/**
 * Parses text (len bytes, need not be NUL-terminated).
 * @return 0 and *out set, or -1 with errbuf filled (position and reason) and *out NULL.
 */
int fs_selector_parse(const char *text, size_t len, struct fs_selector **out, char *errbuf,
                      size_t errlen);

/** Estimated bytes its compiled regexes take (to bound a request's total). */
size_t fs_selector_regex_bytes(const struct fs_selector *s);

/** Frees a selector; accepts NULL. */
void fs_selector_free(struct fs_selector *s);

/** True when a series named `name` with these labels matches (labels in any order). */
bool fs_selector_match(const struct fs_selector *s, const char *name, const struct fs_label *labels,
                       size_t n_labels);

/** Number of matchers, the metric name counting as one `__name__="..."` matcher. */
size_t fs_selector_count(const struct fs_selector *s);

/** The i-th matcher (for tests): label name, operator, value as unescaped. */
void fs_selector_get(const struct fs_selector *s, size_t i, const char **label,
                     enum fs_match_op *op, const char **value);

#endif
