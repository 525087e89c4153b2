/*
 * GET /api/v1/topology: the links the topology holds (collector/topology), as JSON. A thin
 * adapter: parameters are checked here, the topology is copied (fs_topo_snapshot, one
 * short lock) and rendered without any lock.
 *
 *   /api/v1/topology[?node=<name>][&source=<source>]
 *     node   only links with an end at that node (a target's name, or a remote system's)
 *     source only links with a report from that source ("snmp", "gnmi", ...)
 *   Each at most once, 1..FS_TOPO_STR_MAX-1 bytes; any other parameter is an error.
 *
 * Answer:
 *   {"status":"success","data":{"time":"<RFC 3339>",
 *     "nodes":[{"name","kind":"target"|"remote","chassis_id","sys_name"}],
 *     "links":[{"a":{"node","port","kind"},"b":{...},
 *               "sources":[{"source","reported_by","first_seen","last_seen","hold_s"}],
 *               "first_seen","last_seen","age_s"}]}}
 * With a filter, nodes lists only the nodes of the links kept.
 *
 * Ownership: the caller owns q and out.
 */
#ifndef FS_TOPOLOGY_API_H
#define FS_TOPOLOGY_API_H

#include <stddef.h>
#include <stdint.h>

#include "http/api.h"
#include "topology/topology.h"
#include "util/buf.h"

struct fs_topology_query {
    char node[FS_TOPO_STR_MAX];   /**< "" no filter */
    char source[FS_TOPO_STR_MAX]; /**< "" no filter */
};

/** Checks the parameters into *q: 0, or -1 with err (the client's mistake: 400). */
int fs_topology_query_parse(const struct fs_query_arg *args, size_t n, struct fs_topology_query *q,
                            char *err, size_t errlen);

/**
 * Appends the answer for q at now_us to out. Returns the HTTP status: 200, or 500 (no
 * memory; out holds the error JSON then).
 */
int fs_api_topology(struct fs_topo *t, const struct fs_topology_query *q, int64_t now_us,
                    struct fs_buf *out);

#endif
