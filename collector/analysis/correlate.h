/*
 * Correlation: for each slow host event (or explicit window), which switch series
 * departed from their own baseline in that window, ranked; then per series across all
 * events ("tor1 Eth1/49 ECN surge during 14 of 15 slow AllReduces").
 *
 * A series is a suspect for a window [start, end] (collector axis) when one of its
 * departure runs (incidents.h) overlaps [start - lead - u, end + lag + u], where u is the
 * window's clock uncertainty plus the series' time uncertainty. A counter's run already
 * spans the whole polling interval in which it rose (from the previous sample), so lead
 * and lag only absorb small effects (a surge building up just before the collective
 * stretches); larger values blame ports for windows next to, not inside, a surge.
 * Suspects are ranked by the evidence that the series explains the windows, across all of
 * them (with two windows or more): evidence = consistency x sqrt(precision), where
 * consistency is the share of windows in which the series departs and precision the
 * (Laplace-smoothed) share of the series' departure runs in the analysed range that fall
 * in some window ("departs in most stalls, rarely otherwise"). A quiet port whose random
 * burst meets one stall has low consistency; a busy port that surges at every stall has
 * consistency 1 however modest its z; a job that departs on its own schedule (a backup
 * every 10 minutes) has low precision. Ties, and a single window, are ranked as
 * fs_an_rank_cmp() says (incidents.h): by z up to FS_AN_Z_SURE, then the most specific
 * series first.
 *
 * Cause before effect. A PFC pause is an effect: a switch pauses the ports that feed an
 * egress queue it cannot drain, and the pause spreads hop by hop, each paused port's own
 * queue building and marking. Without the links, a window still says which departures are
 * explained by another one of it: pauses sent by a switch while one of its ports departs
 * in a cause kind (queue, ECN, drops) are that congestion's; pauses received, while a
 * port of another switch departs in a cause kind; and a port's queue, ECN and drops while
 * the same port receives pauses (it is paused: a victim, not an origin). A departure so
 * explained in a window does not count for the series' consistency (it departs because
 * something else did), and a cause-kind run outside every window during which its port
 * received pauses does not count against its precision (a paused origin still only
 * congests when paused, not at random). So victims rank below their origin whatever
 * their z; a pause that nothing in the window explains (a host's NIC pausing its switch
 * port) still ranks as a cause. In a window, explained suspects come after unexplained
 * ones, whatever their evidence across windows (the origin of other stalls, paused here by
 * an unrelated burst's spread, is not this window's cause), unless the window falls on
 * the suspect's own recurring train (fs_corr_opts.trains: the stall it recurs with,
 * coincidentally paused); a group is demoted only when all its members departing in the
 * window are. Among suspects demoted alike, evidence ranks, then explained ones last.
 *
 * With the links (fs_corr_opts.links, from LLDP or the configuration), a received pause is
 * explained by its link partner's pauses only, and each explained departure names the one
 * that explains it (paused_by): a window's victims form the origin's propagation tree
 * (which port paused which, by onset; fs_corr_result.tree) instead of competing with it.
 *
 * The slow ranks' paths. A window whose slow ranks are known (the hosts of the slow events
 * that overlap it, each mapped to its switch port by the links) is answered from the ports
 * their traffic can cross (fs_an_path_ports: their switch ports, those switches' uplinks
 * and the ports at the uplinks' other ends): a suspect is on the path when its port is, or
 * when a departure on the path is its effect (a chain of paused_by reaches it: a PFC
 * origin off the path whose pauses spread onto it), or a member of its group is. Suspects
 * off every path are still listed, after those on it, marked as such, and such a departure
 * does not count for its series' consistency (it explains nothing the ranks waited for).
 *
 * Ports departing together. Cause-kind series of one switch, of one metric and traffic
 * class, unexplained, that depart in the same windows (each in at least 80% of the
 * other's, both in two windows or more) are one suspect group: the ports of an ECMP
 * bundle congest together when the hash spreads one flow set over them. With the links,
 * the bundle is known: only ports cabled to switches (uplinks) are grouped, and half of
 * each other's windows is enough; two host ports of a leaf that congest together are
 * not one. The group is listed once, led by its strongest member, with each member's
 * share of the group's excess over baseline across the windows.
 * lag = run start - window start.
 *
 * Ownership: reports are freed with fs_corr_report_free; series indexes refer to the
 * fs_departures object they were computed from (keep it alive). Threads: none.
 */
#ifndef FS_ANALYSIS_CORRELATE_H
#define FS_ANALYSIS_CORRELATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/effects.h"
#include "analysis/incidents.h"

#define FS_CORR_TOP 5

/** A window to explain: a host event on the collector axis, or one given by the user. */
struct fs_corr_window {
    int64_t start_us, end_us;
    int64_t uncertainty_us; /**< the host offset's uncertainty (0 for user windows) */
    size_t ref;             /**< the caller's index (e.g. into its event copy) */
    /** The ports on the window's slow ranks' paths (fs_an_path_ports: sorted, unique), or
     *  none (n_path 0): not known. The caller's, read during fs_correlate only; windows
     *  may share one array (the same slow ranks). */
    const struct fs_an_port *path;
    size_t n_path;
};

/** A series' recurring train (an incident the analysis reports): occurrences expected at
 *  next_us - k * period_us, give or take tol_us. */
struct fs_corr_train {
    int64_t next_us;
    double period_us; /**< 0: the series has no train */
    int64_t tol_us;
};

struct fs_corr_opts {
    int64_t lead_us;                    /**< default 0.5 s */
    int64_t lag_us;                     /**< default 0.5 s */
    size_t top;                         /**< suspects kept per window, 1..FS_CORR_TOP, default 5 */
    const struct fs_corr_train *trains; /**< per series of d, or NULL (default): none known;
                                             the caller's, read during fs_correlate only */
    const struct fs_an_link *links;     /**< the fabric's links (effects.h), or NULL
                                             (default): none known; the caller's, read during
                                             fs_correlate only */
    size_t n_links;
};

void fs_corr_opts_default(struct fs_corr_opts *o);

struct fs_corr_suspect {
    uint32_t series;
    double peak_z, peak_value, baseline;
    int64_t peak_us;
    int64_t lag_us;         /**< run start minus window start */
    int64_t uncertainty_us; /**< window's plus series' time uncertainty */
    int specificity;        /**< 3 port and tc, 2 port, 1 flow rule, 0 switch (ranking) */
    double evidence;        /**< the series' evidence across all windows (see above) */
    bool explained;         /**< an effect of another departure of this window (above) */
    bool demoted;           /**< ranked after the window's other suspects (above) */
    int32_t group;          /**< index into the report's groups, -1: none */
    uint32_t paused_by;     /**< when explained: the series of the window whose departure
                                 explains it (a received pause: its link partner's pauses
                                 sent; pauses sent: its switch's congested port; a paused
                                 port's queue: the pauses it received); UINT32_MAX when none
                                 is known (a received pause without the links) */
    int8_t on_path;         /**< -1: the window's path is not known; 1: its port is on the
                                 slow ranks' paths, or its departure explains (through
                                 paused_by, or its group) one on them; 0: off every path */
};

/** One edge of a window's propagation tree: series, explained by paused_by (both series
 *  of d), its run starting at onset_us, hop edges away from the origin. */
struct fs_corr_edge {
    uint32_t series, paused_by;
    int64_t onset_us;
    uint32_t hop;
};
#define FS_CORR_TREE_MAX 64

/** Ports departing together (see above). */
struct fs_corr_group {
    uint32_t *series; /**< members, largest share first (the first leads) */
    double *share;    /**< of the group's excess over baseline, summing to 1 */
    size_t n;
};

struct fs_corr_result {
    struct fs_corr_window window;
    struct fs_corr_suspect top[FS_CORR_TOP];
    size_t n_top;
    /** The propagation tree of the window's first suspect, when that is a cause nothing in
     *  the window explains: every departure of the window whose chain of paused_by reaches
     *  the origin's port (or a port of its group's members), by onset, at most
     *  FS_CORR_TREE_MAX of tree_total.
     *  Owned by the report. */
    struct fs_corr_edge *tree;
    size_t n_tree, tree_total;
};

struct fs_corr_aggregate {
    uint32_t series;
    size_t first;                    /**< windows where it ranked first */
    size_t in_top;                   /**< windows where it was among the top suspects */
    size_t departs;                  /**< windows in which it departed at all */
    size_t explained;                /**< of them, windows where it was an effect (above) */
    size_t runs_total, runs_outside; /**< its departure runs in the range, and outside windows */
    double evidence;
    double max_z;
    int32_t group; /**< index into the report's groups, -1: none */
    bool grouped;  /**< a member of a group that another member leads: listed with it */
};

struct fs_corr_report {
    struct fs_corr_result *results; /**< one per window, in input order */
    size_t n_results;
    struct fs_corr_aggregate *aggregates; /**< every series that departed in a window, by
                                               evidence, then first, then in_top */
    size_t n_aggregates;
    struct fs_corr_group *groups;
    size_t n_groups;
};

/**
 * Ranks suspects for each window. d must be finished. Returns 0 with *out (free with
 * fs_corr_report_free) or -1 on no memory.
 */
int fs_correlate(const struct fs_departures *d, const struct fs_corr_window *w, size_t n,
                 const struct fs_corr_opts *o, struct fs_corr_report **out);
void fs_corr_report_free(struct fs_corr_report *r);

/**
 * Marks the slow ones among n durations that belong to groups (group[i] is any id, e.g.
 * an index per (kind, name)): slow when above the given percentile (0 < pct < 100) of
 * its group's durations and above FS_CORR_SLOW_MIN_FACTOR times its median, or, when
 * factor > 0, above factor times the group's median. Groups of fewer than 2 events have
 * no slow ones. Returns 0 or -1 on no memory.
 */
#define FS_CORR_SLOW_MIN_FACTOR 2.0
int fs_corr_mark_slow(const int64_t *duration, const size_t *group, size_t n, double pct,
                      double factor, bool *slow);

#endif
