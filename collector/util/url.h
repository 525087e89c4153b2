/*
 * URLs as messages, logs, labels and answers may show them: without the userinfo
 * (`user:password@`) of their authority, which a configuration may carry and nothing
 * the collector prints should.
 */
#ifndef FS_UTIL_URL_H
#define FS_UTIL_URL_H

#include <stdbool.h>
#include <stddef.h>

/** The authority of the URL in s[0..len) (not necessarily terminated): it begins after
 *  "://" (at 0 when there is none, unless need_scheme: then false) and ends at the first
 *  '/', '?' or '#'; its userinfo, when it has one, runs up to its last '@'. */
struct fs_url_parts {
    size_t auth; /**< where the authority begins */
    size_t host; /**< where its host begins: past the userinfo's '@', else auth */
    size_t end;  /**< where it ends */
};
bool fs_url_authority(const char *s, size_t len, bool need_scheme, struct fs_url_parts *p);

/** Copies url into out (len bytes, always terminated, cut at len - 1) with the
 *  authority's userinfo (up to its last '@') replaced by "***@". */
void fs_url_redact(const char *url, char *out, size_t len);

#endif
