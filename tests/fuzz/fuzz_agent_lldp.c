/* libFuzzer target: the host agent's reading of `lldpctl -f json` (hostagent/lldp.h), then
 * the body it would post, through the collector's host-events ingest (which must take
 * every body the agent builds) into a topology. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "analysis/host_events.h"
#include "hostagent/lldp.h"
#include "topology/topology.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
to_topo(void *arg, const char *host, const struct fs_host_neighbor *n, size_t count,
        int64_t interval_ns, int64_t now_ns, char *errbuf, size_t errlen)
{
    struct fs_topo_neighbor v[FS_HOST_EVENTS_MAX_NEIGHBORS];
    for (size_t i = 0; i < count; i++)
        v[i] = (struct fs_topo_neighbor){n[i].nic,  n[i].chassis_id, n[i].sys_name,
                                         n[i].port, n[i].port_id,    n[i].port_descr};
    return fs_topo_host_neighbors(arg, host, v, count, interval_ns / 1000, now_ns / 1000, errbuf,
                                  errlen);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct fs_agent_lldp_nbr v[FS_HOST_EVENTS_MAX_NEIGHBORS];
    static struct fs_host_events *hs;
    static struct fs_topo *t;
    char err[256];
    size_t n = 0, dropped = 0, len = 0;
    char *body = NULL;
    if (!hs) {
        struct fs_host_events_opts o = {1 << 20, 3600LL * 1000000000LL};
        hs = fs_host_events_new(&o, err, sizeof err);
        t = fs_topo_new();
        if (!hs || !t)
            return 0;
        fs_host_events_set_neighbor_listener(hs, to_topo, t);
    }
    if (fs_agent_lldp_parse((const char *)data, size, v, FS_HOST_EVENTS_MAX_NEIGHBORS, &n, &dropped,
                            err, sizeof err) != 0)
        return 0;
    if (fs_agent_lldp_body("gpu01", 30, v, n, &body, &len, err, sizeof err) != 0)
        return 0;
    struct fs_host_events_receipt r;
    /* Every neighbour the parser keeps is one the collector takes. */
    if (fs_host_events_post(hs, body, len, 1800000000000000000LL, &r, err, sizeof err) != 0 ||
        r.neighbors != n) {
        fprintf(stderr, "refused: %s (%zu of %zu neighbours)\n", err, r.neighbors, n);
        abort();
    }
    free(body);
    return 0;
}
