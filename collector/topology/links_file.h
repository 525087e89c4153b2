/*
 * Static links: the entries of the configuration's topology block and the links file it
 * may name, in the shape sFlow-RT's topology takes:
 *   {"links": {"<name>": {"node1": "leaf01", "port1": "Eth1/1",
 *                         "node2": "spine01", "port2": "Eth1/49"}, ...},
 *    "nodes": {...}}
 * Only "links" is read; other members ("nodes", a link's "name", ...) are ignored so a
 * file written for sFlow-RT serves as it is. Parsed with json-c.
 *
 * Bounds: at most FS_LINKS_FILE_MAX_BYTES of text, FS_TOPO_MAX_STATIC links, each node
 * and port 1..FS_TOPO_STR_MAX - 1 bytes without NUL, nesting at most FS_LINKS_FILE_DEPTH.
 *
 * Ownership: the array fs_links_json_parse() fills and its strings belong to the caller
 * (fs_static_links_free).
 */
#ifndef FS_TOPOLOGY_LINKS_FILE_H
#define FS_TOPOLOGY_LINKS_FILE_H

#include <stddef.h>

#define FS_LINKS_FILE_MAX_BYTES (8 * 1024 * 1024)
#define FS_LINKS_FILE_DEPTH 16

/** One static link; both ends a node and a port. */
struct fs_static_link {
    char *a_node, *a_port, *b_node, *b_port;
};

/**
 * Parses a links file's text (need not be NUL-terminated). On success *out holds *n
 * links in the file's order (NULL when none). On failure errbuf names the key path and
 * the problem ("links.l1.port2: missing", "not JSON: ... at byte 17") and *out is NULL.
 * @return 0 or -1
 */
int fs_links_json_parse(const char *text, size_t len, struct fs_static_link **out, size_t *n,
                        char *errbuf, size_t errlen);

/** Frees v[0..n) and v; accepts NULL. */
void fs_static_links_free(struct fs_static_link *v, size_t n);

#endif
