/* libFuzzer target: a links file in sFlow-RT's topology shape (topology/links_file.h),
 * then the links it gave into a topology store as the configuration's set. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "topology/links_file.h"
#include "topology/topology.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct fs_topo *t;
    char err[256];
    struct fs_static_link *v = NULL;
    size_t n = 0;
    if (!t && !(t = fs_topo_new()))
        return 0;
    if (fs_links_json_parse((const char *)data, size, &v, &n, err, sizeof err) != 0)
        return 0;
    struct fs_topo_static_link *s = calloc(n ? n : 1, sizeof *s);
    if (s) {
        for (size_t i = 0; i < n; i++)
            s[i] = (struct fs_topo_static_link){v[i].a_node, v[i].a_port, v[i].b_node, v[i].b_port};
        (void)fs_topo_set_static(t, s, n, 1800000000000000LL, err, sizeof err);
        struct fs_topo_snap snap;
        if (fs_topo_snapshot(t, 1800000000000000LL, &snap, err, sizeof err) == 0)
            fs_topo_snap_free(&snap);
    }
    free(s);
    fs_static_links_free(v, n);
    return 0;
}
