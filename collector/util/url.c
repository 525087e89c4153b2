/* URLs without their credentials (see url.h). */
#include "util/url.h"

#include <stdio.h>
#include <string.h>

bool
fs_url_authority(const char *s, size_t len, bool need_scheme, struct fs_url_parts *p)
{
    const char *sep = len >= 3 ? memmem(s, len, "://", 3) : NULL;
    if (!sep && need_scheme)
        return false;
    p->auth = sep ? (size_t)(sep - s) + 3 : 0;
    p->host = p->auth;
    for (p->end = p->auth; p->end < len; p->end++) {
        char c = s[p->end];
        if (c == '/' || c == '?' || c == '#')
            break;
        if (c == '@')
            p->host = p->end + 1;
    }
    return true;
}

void
fs_url_redact(const char *url, char *out, size_t len)
{
    if (len == 0)
        return;
    struct fs_url_parts p;
    fs_url_authority(url, strlen(url), false, &p);
    if (p.host == p.auth)
        snprintf(out, len, "%s", url);
    else
        snprintf(out, len, "%.*s***@%s", (int)p.auth, url, url + p.host);
}
