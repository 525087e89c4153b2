/*
 * Parsers of ONYX (MLNX-OS) CLI output: pure functions over a byte buffer, no I/O, no
 * globals. Each turns one command's output into normalized samples (metrics of the
 * generated catalogue, their labels and a raw value) that the driver hands to the sink.
 *
 * Tolerance, because real CLIs demand it: any column width or key padding, blank lines,
 * `N\A` values (skipped), split ports (`Eth1/16/3`), counters up to 2^64-1 kept exact in
 * a uint64_t, unknown lines and fields of newer releases ignored.
 *
 * Layouts taken from /work/shared/reference/onyx-facts.md as VERBATIM captures are parsed
 * here (parse.c); layouts the facts do not have are ASSUMPTIONS and live only in
 * parse_assumed.c, which lists each one (see the table at its top).
 *
 * Ownership: the caller owns a struct onyx_samples and frees it with onyx_samples_free().
 * Input buffers are the caller's and are never written (except onyx_clean, in place).
 */
#ifndef FS_ONYX_PARSE_H
#define FS_ONYX_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "metrics_catalogue.h"

#define ONYX_LABELS_MAX 3
#define ONYX_LABEL_VALUE_MAX 64

/** One normalized sample. Label names are static strings; values are copied in. */
struct onyx_sample {
    enum fs_metric metric;
    bool counter; /**< true: raw is a 64-bit device counter; false: value is a gauge */
    uint64_t raw; /**< counter value as the device printed it */
    double scale; /**< exported value = raw * scale (1 unless the device's unit is finer) */
    double value; /**< gauge value */
    unsigned n_labels;
    struct {
        const char *name;
        char value[ONYX_LABEL_VALUE_MAX];
    } labels[ONYX_LABELS_MAX];
};

/** A growable list of samples; zero-initialize, free with onyx_samples_free(). */
struct onyx_samples {
    struct onyx_sample *v;
    size_t n, cap;
};

void onyx_samples_free(struct onyx_samples *s);
/** Appends a counter sample with up to three labels (NULL name: absent; values cut to the
 *  label size); the parsers and the driver's own totals (WJH, ACL) use it. -1: no memory. */
int onyx_add_counter(struct onyx_samples *s, enum fs_metric m, uint64_t raw, double scale,
                     const char *l1, const char *v1, const char *l2, const char *v2, const char *l3,
                     const char *v3);
/** Empties the list, keeping its memory for the next command. */
void onyx_samples_clear(struct onyx_samples *s);

/* ---------------- session text ---------------- */

enum onyx_mode { ONYX_MODE_NONE = 0, ONYX_MODE_USER, ONYX_MODE_ENABLE, ONYX_MODE_CONFIG };

/**
 * Strips ANSI escape sequences (ESC [ ... letter, ESC > / ESC =, CSI 0x9b), carriage
 * returns and backspace pairs (`x\b`) in place. Returns the new length.
 */
size_t onyx_clean(char *buf, size_t len);

/**
 * Whether buf (cleaned) ends with a CLI prompt, e.g. `sw [standalone: master] (config) # `.
 * Returns the mode, or ONYX_MODE_NONE; *prompt_start (may be NULL) gets the offset of the
 * prompt line.
 */
enum onyx_mode onyx_prompt_at_end(const char *buf, size_t len, size_t *prompt_start);

/** Whether buf ends with the pager prompt (`lines 183-204 `, `lines 256-269/269 (END) `). */
bool onyx_pager_at_end(const char *buf, size_t len, size_t *pager_start);

/** Whether buf ends with a password prompt (`Password:` / `password: `). */
bool onyx_password_prompt_at_end(const char *buf, size_t len);

/**
 * The first prompt in a shell's output from offset from: the learned prompt prefix (e.g.
 * `sw [standalone: master] `) then a mode suffix (`> `, `# `, `(config...) # `), wherever
 * the lines break: at a line start, right after another prompt (a command without output),
 * after an output without a final line end (a prefix without the `[...]` tag only at a
 * line start or at from); and the next output may follow it on the same
 * line (a shell that echoes type-ahead at once, as a pty with kernel echo, prints each
 * output right after the prompt). True with *pstart / *pend (the prompt's first byte / the
 * first byte after it); false when there is none yet (one still arriving counts as none).
 */
bool onyx_next_prompt(const char *buf, size_t len, size_t from, const char *prefix,
                      size_t prefix_len, size_t *pstart, size_t *pend);

/**
 * Removes the shell's echoes from one command's output, in place: a line that is (spaces
 * trimmed) one of cmds[0..n) — the commands sent whose echo was not seen yet, in the order
 * sent — is an echo, wherever it is (a shell may echo a whole batch before the first
 * output). Echoes come in order: matching cmds[j] marks cmds[0..j] seen, and later lines
 * are compared with cmds[j+1..n) only. *len gets the new length; returns how many of cmds
 * are now seen.
 */
size_t onyx_strip_echoes(char *text, size_t *len, const char *const *cmds, size_t n);

/**
 * The first line of text that starts with `%` (a command error), copied into msg without
 * the line end. Returns true if there is one.
 */
bool onyx_error_line(const char *text, size_t len, char *msg, size_t msglen);

/**
 * The span of a `| json-print` output: from the first line starting with `[` or `{` to
 * the end of the last line starting with `]` or `}` (the CLI prints other lines around
 * it). Returns false if there is no such span.
 */
bool onyx_json_span(const char *text, size_t len, size_t *start, size_t *end);

/** Parses a decimal uint64 (exact past 2^53); false on overflow or no digits. */
bool onyx_parse_u64(const char *s, size_t len, uint64_t *out, size_t *used);

/* ---------------- show version ---------------- */

struct onyx_version {
    char product[32]; /**< "MLNX-OS" or "Onyx" */
    char release[32]; /**< "3.6.1102" */
    char model[64];   /**< "x86onie" */
    char serial[64];
    double uptime_s; /**< < 0 when absent */
};

/** `show version` text (Key: value lines). */
int onyx_parse_version_text(const char *text, size_t len, struct onyx_version *v, char *errbuf,
                            size_t errlen);
/** `show version | json-print`. */
int onyx_parse_version_json(const char *text, size_t len, struct onyx_version *v, char *errbuf,
                            size_t errlen);
/** Compares two dotted releases numerically ("3.6.6000" vs "3.10.1"): <0, 0, >0. */
int onyx_release_cmp(const char *a, const char *b);
/** Whether release prints `show interfaces ethernet | json-print` as {"Eth1/1": [..]}
 * (>= 3.6.6000). */
bool onyx_release_new_json(const char *release);
/** Uptime text `48d 0h 59m 15.328s` in seconds; < 0 if it does not parse. */
double onyx_parse_uptime(const char *s);
/** fabric_device_info and fabric_device_uptime_seconds from a parsed version. */
int onyx_version_samples(const struct onyx_version *v, struct onyx_samples *out);

/* ---------------- show interfaces ethernet ---------------- */

/** Text form: per-port blocks `Eth1/1` / `  Key: value` / `Rx` / `  N  packets` ... */
int onyx_parse_interfaces_text(const char *text, size_t len, struct onyx_samples *out, char *errbuf,
                               size_t errlen);
/** `| json-print`, either layout (list of {"header": "Eth1/1", ...} or of {"Eth1/1": [..]}). */
int onyx_parse_interfaces_json(const char *text, size_t len, struct onyx_samples *out, char *errbuf,
                               size_t errlen);
/** Speed text ("100 Gbps", "100G", "Unknown") in bit/s; < 0 if unknown. */
double onyx_parse_speed(const char *s);

/* ---------------- congestion control ---------------- */

/** The configured ECN/RED profile of one TC, as printed (for target_describe). */
struct onyx_tc_profile {
    int tc;
    char mode[16];           /**< none, RED, ECN, both */
    char threshold_mode[16]; /**< relative, absolute */
    char min[24], max[24];   /**< "9%", "500 KB" */
};

/**
 * `show interfaces ethernet <port> congestion-control | json-print`: the port's ECN-marked
 * packets, per-TC RED dropped packets; profiles (may be NULL) gets up to 8 TC profiles
 * and *n_profiles their count.
 */
int onyx_parse_congestion_json(const char *text, size_t len, struct onyx_samples *out,
                               struct onyx_tc_profile *profiles, size_t *n_profiles, char *errbuf,
                               size_t errlen);

/* ---------------- per-TC, PFC, clock, telemetry flows (assumed layouts) ---------------- */

/**
 * `show interfaces ethernet <port> congestion-control` text form (the fallback when the
 * JSON form fails): the same samples and profiles as onyx_parse_congestion_json. Layout
 * ASSUMED: parse_assumed.c (A4).
 */
int onyx_parse_congestion_text(const char *text, size_t len, struct onyx_samples *out,
                               struct onyx_tc_profile *profiles, size_t *n_profiles, char *errbuf,
                               size_t errlen);

/** `show interfaces ethernet counters tc N` (all ports). Layout ASSUMED: parse_assumed.c. */
int onyx_parse_tc_counters(const char *text, size_t len, struct onyx_samples *out, char *errbuf,
                           size_t errlen);
/** `show interfaces ethernet counters pfc prio N` (all ports). Layout ASSUMED. */
int onyx_parse_pfc_counters(const char *text, size_t len, struct onyx_samples *out, char *errbuf,
                            size_t errlen);

/** `show clock`. Layout ASSUMED. *resolution_us is 1000000 for whole seconds. */
int onyx_parse_clock(const char *text, size_t len, int64_t *device_us, int64_t *resolution_us,
                     char *errbuf, size_t errlen);

/** The `UTC offset` line of `show clock` in seconds (local minus UTC): 0 and *offset_s = 0
 *  when found, -1 (and *offset_s = 0) when the output has none. Layout ASSUMED (A2). */
int onyx_parse_clock_utc_offset(const char *text, size_t len, int64_t *offset_s);

/**
 * A WJH table's time stamp ("2021/06/16 12:57:23.046", or the raw table's two-digit
 * year "21/06/16 12:03:12.728") as µs since the epoch on the device's clock. The table
 * prints no zone: it is ASSUMED (A6) to be the one `show clock` states (utc_offset_s).
 * 0, or -1 when the text is not such a stamp.
 */
int onyx_parse_wjh_time(const char *stamp, int64_t utc_offset_s, int64_t *device_us);

/** `show telemetry flows`: per-rule view. Layout ASSUMED (the simulator's). */
int onyx_parse_telemetry_flows(const char *text, size_t len, struct onyx_samples *out, char *errbuf,
                               size_t errlen);

/**
 * `show ipv4 access-lists NAME`: the packet and byte counters of the entries
 * seq-number 10 * (k + 1), k < n_entries, into pk[k] / by[k] (seen[k]: the entry's packet
 * counter was found). Layout ASSUMED (parse_assumed.c, A5). 0, or -1 when no such entry
 * is in the text.
 */
int onyx_parse_acl_counters(const char *text, size_t len, uint64_t *pk, uint64_t *by, bool *seen,
                            size_t n_entries, char *errbuf, size_t errlen);

/* ---------------- LLDP neighbours (assumed layout) ---------------- */

#define ONYX_LLDP_STR_MAX 128
#define ONYX_LLDP_MAX 2048 /**< neighbours read from one output; more: truncated */

/** One remote system of `show lldp interfaces ethernet remote` (strings cut, "" absent). */
struct onyx_lldp_remote {
    char local_port[ONYX_LABEL_VALUE_MAX]; /**< the block's port (`Eth1/1`), as counters name it */
    char chassis_id[ONYX_LLDP_STR_MAX];
    char port_id[ONYX_LLDP_STR_MAX];
    char port_subtype[ONYX_LLDP_STR_MAX]; /**< `Interface Name (5)`, `Mac Address (3)`, ... */
    char port_descr[ONYX_LLDP_STR_MAX];
    char sys_name[ONYX_LLDP_STR_MAX];
    /** The remote port's name to show: the port id when its subtype is an interface name
     *  (or unknown and the id is no MAC address), else the description, else the id. */
    char port[ONYX_LLDP_STR_MAX];
};

/**
 * `show lldp interfaces ethernet remote`. Layout ASSUMED (parse_assumed.c, A7). Calls cb
 * for each remote system that has a chassis id or a system name, in output order. Returns
 * the number of neighbours (0: an empty table), or -1 with errbuf when the output is not
 * that layout (non-blank, yet no port block in it): nothing can be said about the table
 * then. *truncated (may be NULL) is set when more than ONYX_LLDP_MAX were there (the
 * rest are not reported: the table is not complete).
 */
int onyx_parse_lldp_remote(const char *text, size_t len,
                           void (*cb)(const struct onyx_lldp_remote *r, void *arg), void *arg,
                           bool *truncated, char *errbuf, size_t errlen);

/* ---------------- What-Just-Happened ---------------- */

/** One WJH drop record (raw or aggregated; count 1 for a raw record). */
struct onyx_wjh_record {
    /** Identity of the row: a hash of every cell except the row number (`#`) and `Count`,
     *  so the same drop (raw) or the same aggregation key (aggregated) has the same ident
     *  in every poll, wherever the table places it. */
    uint64_t ident;
    bool aggregated; /**< the table has a Count column (an aggregation over its window) */
    /** The table's `Sample Window : A - B` line, split; empty when the output has none. */
    char window_start[32], window_end[32];
    char timestamp[32];
    char sport[24];
    char src_ip[48];
    char dst_ip[48];
    int src_port, dst_port; /**< -1 if absent */
    char proto[12];         /**< "udp", "tcp", "ip", "17", ... */
    char reason[96];        /**< drop reason, without " - recommended action" */
    uint64_t count;
};

/**
 * A WJH table (the layout of the WJH library, verbatim from Cumulus; ONYX's own is not
 * known): columns are found from the dashed ruler line, headers may span two lines.
 * Calls cb for each record; returns the number of records or -1 (no table).
 */
int onyx_parse_wjh(const char *text, size_t len,
                   void (*cb)(const struct onyx_wjh_record *r, void *arg), void *arg, char *errbuf,
                   size_t errlen);

/** The table's `Sample Window : A - B` line (even when the table has no row): 0 with
 *  both ends copied, -1 when the output has none. */
int onyx_parse_wjh_window(const char *text, size_t len, char *start, size_t start_len, char *end,
                          size_t end_len);

/** Whether a WJH record matches a flow rule (protocol, port ranges). */
bool onyx_wjh_matches_rule(const struct onyx_wjh_record *r, const struct fs_flow_rule *rule);

#endif
