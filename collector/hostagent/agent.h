/*
 * `fabricscope host-agent -c FILE [--check-config] [--once]`: the agent that runs on a
 * GPU host (README "Host agent"). One thread runs a loop of due steps:
 *   - clock: every clock.interval, a burst of clock.rounds GET /api/v1/time rounds
 *     (lowest delay kept) into the offset track (offset_track.h);
 *   - nccl_inspector: every scan_interval, new complete lines of the logs (tail.h)
 *     become a batch;
 *   - capture: poll /api/v1/incidents, arm a window around the next predicted
 *     incident, run perf in it (capture.h);
 *   - command: every command.interval (or at each capture window's start) the
 *     configured command runs (runcmd.h); its perf script-style output is imported;
 *   - every batch is posted with the offset measured nearest its events, or spooled
 *     (spool.h) while the collector does not take it; the spool is posted oldest first
 *     when it answers again.
 * A second thread (libmicrohttpd's) serves /metrics when metrics.listen is set; the
 * counters it reads are behind a mutex.
 *
 * Ownership: everything lives in the subcommand's own struct, freed before it returns.
 */
#ifndef FS_HOST_AGENT_H
#define FS_HOST_AGENT_H

/** The subcommand (argv[0] = "host-agent"); returns the exit code (0, 1 failure, 2 bad
 *  usage or configuration). */
int fs_host_agent_main(int argc, char **argv);

#endif
