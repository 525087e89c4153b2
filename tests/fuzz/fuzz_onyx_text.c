/*
 * libFuzzer target for every ONYX CLI text parser (drivers/onyx/parse*.c): whatever a
 * hostile or broken switch could print. The input runs through the session-text helpers
 * (clean, prompt, pager, password, error line) and each text parser in turn; samples must
 * carry only known label names and bounded values.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "wjh_tally.h"

static void
check(const struct onyx_samples *s)
{
    for (size_t i = 0; i < s->n; i++) {
        const struct onyx_sample *x = &s->v[i];
        if ((unsigned)x->metric >= FS_METRIC_COUNT || x->n_labels > ONYX_LABELS_MAX)
            abort();
        for (unsigned j = 0; j < x->n_labels; j++)
            if (!x->labels[j].name || strlen(x->labels[j].value) >= ONYX_LABEL_VALUE_MAX)
                abort();
    }
}

/* Each row goes through the tally as the driver's does; a row is never more new drops
 * than it holds. */
static void
wjh_cb(const struct onyx_wjh_record *r, void *arg)
{
    struct onyx_wjh_tally *t = arg;
    if (strlen(r->reason) >= sizeof(r->reason) || strlen(r->src_ip) >= sizeof(r->src_ip) ||
        strlen(r->window_start) >= sizeof(r->window_start))
        abort();
    struct fs_flow_rule rule = {.protocol = FS_PROTO_UDP, .dst_lo = 4791, .dst_hi = 4791};
    (void)onyx_wjh_matches_rule(r, &rule);
    int64_t fresh = onyx_wjh_tally_row(t, r);
    if (fresh > 0 && (uint64_t)fresh > r->count)
        abort();
    if (fresh > 0 && onyx_wjh_tally_add(t, "r", r->reason, (uint64_t)fresh) < 0)
        abort();
}

/* An LLDP neighbour: every string bounded and NUL-terminated, one that names a system. */
static void
lldp_cb(const struct onyx_lldp_remote *r, void *arg)
{
    size_t *n = arg;
    if (strlen(r->local_port) >= sizeof(r->local_port) ||
        strlen(r->chassis_id) >= sizeof(r->chassis_id) || strlen(r->port) >= sizeof(r->port) ||
        strlen(r->sys_name) >= sizeof(r->sys_name) || (!r->chassis_id[0] && !r->sys_name[0]) ||
        !r->local_port[0])
        abort();
    (*n)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char err[128], msg[128];
    struct onyx_samples s = {0};
    struct onyx_version v;
    int64_t us, res;
    size_t st;

    (void)onyx_prompt_at_end(buf, size, &st);
    (void)onyx_pager_at_end(buf, size, &st);
    (void)onyx_password_prompt_at_end(buf, size);
    (void)onyx_error_line(buf, size, msg, sizeof(msg));
    (void)onyx_parse_version_text(buf, size, &v, err, sizeof(err));
    (void)onyx_parse_clock(buf, size, &us, &res, err, sizeof(err));
    {
        int64_t zone = 0;
        (void)onyx_parse_clock_utc_offset(buf, size, &zone);
        if (zone < -24 * 3600 || zone > 24 * 3600)
            abort();
        (void)onyx_parse_wjh_time(buf, zone, &us);
        char ws[32], we[32];
        if (onyx_parse_wjh_window(buf, size, ws, sizeof(ws), we, sizeof(we)) == 0 &&
            (strlen(ws) >= sizeof(ws) || strlen(we) >= sizeof(we)))
            abort();
    }
    {
        uint64_t pk[4], by[4];
        bool seen[4];
        (void)onyx_parse_acl_counters(buf, size, pk, by, seen, 4, err, sizeof(err));
    }
    /* the same table twice: the second poll finds nothing new */
    struct onyx_wjh_tally tally = {0};
    for (int poll = 0; poll < 2; poll++) {
        onyx_wjh_tally_begin(&tally);
        (void)onyx_parse_wjh(buf, size, wjh_cb, &tally, err, sizeof(err));
        onyx_wjh_tally_end(&tally, "");
        if (poll == 0)
            for (size_t i = 0; i < tally.n_totals; i++)
                tally.totals[i].drops = 0;
    }
    for (size_t i = 0; i < tally.n_totals; i++)
        if (tally.totals[i].drops != 0 && !tally.overflow)
            abort();
    onyx_wjh_tally_free(&tally);
    {
        size_t nb = 0;
        bool trunc = false;
        int r = onyx_parse_lldp_remote(buf, size, lldp_cb, &nb, &trunc, err, sizeof(err));
        if ((r >= 0 && (size_t)r != nb) || r > ONYX_LLDP_MAX)
            abort();
    }
    (void)onyx_parse_interfaces_text(buf, size, &s, err, sizeof(err));
    check(&s);
    onyx_samples_clear(&s);
    (void)onyx_parse_tc_counters(buf, size, &s, err, sizeof(err));
    (void)onyx_parse_pfc_counters(buf, size, &s, err, sizeof(err));
    (void)onyx_parse_telemetry_flows(buf, size, &s, err, sizeof(err));
    check(&s);
    onyx_samples_free(&s);
    size_t n = onyx_clean(buf, size);
    if (n > size)
        abort();
    (void)onyx_prompt_at_end(buf, n, &st);
    free(buf);
    return 0;
}
