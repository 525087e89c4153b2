/*
 * The built-in web view (GET /): index.html, fabricscope.css and fabricscope.js from
 * collector/http/web/, compiled into the binary at build time (embed.cmake), so the
 * page needs no file on disk and no network at run time.
 *
 * The files hold no data: the script fetches /api/v1/targets, /api/v1/raw,
 * /api/v1/incidents, /api/v1/topology and /api/v1/correlate, sending the bearer token
 * when one is configured. That is why the
 * HTTP layer serves these files without the token (a browser cannot attach one to a
 * navigation) while every data endpoint still requires it.
 *
 * Ownership: the table and its bytes are static, read-only, never freed.
 */
#ifndef FS_WEB_ASSETS_H
#define FS_WEB_ASSETS_H

#include <stddef.h>

struct fs_web_asset {
    const char *path;  /**< URL path, e.g. "/" or "/web/fabricscope.js" */
    const char *ctype; /**< Content-Type header value */
    const char *data;  /**< the file's bytes (NUL-terminated for convenience) */
    size_t len;        /**< bytes in data, without the NUL */
    const char *etag;  /**< strong ETag, quoted: a prefix of the bytes' SHA-256 */
};

/** Ends with an entry whose path is NULL. */
extern const struct fs_web_asset fs_web_assets[];

/** The asset served at url, or NULL. */
const struct fs_web_asset *fs_web_asset_find(const char *url);

/**
 * Whether an If-None-Match header value names etag (a comma-separated list of
 * entity tags, weak ones compared weakly as RFC 9110 says for GET, or "*").
 */
int fs_web_etag_matches(const char *if_none_match, const char *etag);

#endif
