/* Lookup of the embedded web view files (see web_assets.h). */
#include "http/web/web_assets.h"

#include <string.h>

const struct fs_web_asset *
fs_web_asset_find(const char *url)
{
    for (const struct fs_web_asset *a = fs_web_assets; a->path; a++)
        if (strcmp(a->path, url) == 0)
            return a;
    return NULL;
}

int
fs_web_etag_matches(const char *if_none_match, const char *etag)
{
    if (!if_none_match)
        return 0;
    size_t el = strlen(etag);
    const char *p = if_none_match;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (*p == '*')
            return 1;
        if (strncmp(p, "W/", 2) == 0)
            p += 2; /* weak comparison: the opaque tags must match */
        const char *tag = p;
        if (*p == '"') {
            p++;
            while (*p && *p != '"')
                p++;
            if (*p == '"')
                p++;
        } else {
            while (*p && *p != ',')
                p++;
        }
        if ((size_t)(p - tag) == el && strncmp(tag, etag, el) == 0)
            return 1;
        while (*p && *p != ',')
            p++;
    }
    return 0;
}
