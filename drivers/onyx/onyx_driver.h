/*
 * The ONYX CLI driver (SSH): entry points.
 *
 * The functions below are the driver; fs_driver_onyx (block "cli", registered in
 * drivers/registry.c) is its driver.h vtable: its target_add takes the struct
 * fs_onyx_cfg that config_build made plus the configuration's flow rules from the
 * target. The test harnesses (tests/integration/onyx_poll.c) call the functions
 * directly with a struct they fill.
 *
 * Threads: one I/O thread (started by fs_onyx_init) runs every target's SSH session with
 * epoll; the functions below may be called from any thread and hand the work over.
 * Ownership: the driver copies name, address and cfg; sink stays the caller's and must
 * stay valid until fs_onyx_target_remove() returns.
 */
#ifndef FS_ONYX_DRIVER_H
#define FS_ONYX_DRIVER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "driver.h"
#include "onyx_config.h"
#include "store/sink.h"

extern const struct fs_driver fs_driver_onyx;
/** The block's YANG module (fabricscope-cli.yang, embedded at build time). */
extern const char fs_onyx_yang_module[];

int fs_onyx_init(void **state, char *errbuf, size_t errlen);
void fs_onyx_shutdown(void *state);

/** Adds a target with cfg's flow rules: no I/O until its first cycle. */
int fs_onyx_target_add(void *state, const char *name, const char *address,
                       const struct fs_onyx_cfg *cfg, struct fs_sink *sink, void **tstate,
                       char *errbuf, size_t errlen);
/** Removes a target; on return no callback for it runs any more (no fs_sink_done for a cycle in
 * flight). */
void fs_onyx_target_remove(void *state, void *tstate);
/** Starts a cycle ending by deadline_us (monotonic µs); FS_DRV_BUSY while one runs. */
int fs_onyx_cycle_start(void *state, void *tstate, uint64_t cycle_id, int64_t deadline_us);
/** Ends the cycle in flight as a timeout (the session is closed: its state is unknown). */
void fs_onyx_cycle_cancel(void *state, void *tstate);
/** JSON members for /api/v1/targets: session, release, json layout, dropped commands, ECN profile.
 */
size_t fs_onyx_target_describe(void *state, void *tstate, char *buf, size_t len);
/**
 * The flow-rule plan computed from the running config of the last session (cfg.plan_only
 * or apply_flow_rules): the configuration commands, one per line, "" when nothing is to
 * change. -1 (buf "") if no running config was read yet: the caller then says it could
 * not read it and may show onyx_flow_plan(rules, NULL) as the offline plan.
 */
int fs_onyx_target_plan(void *state, void *tstate, char *buf, size_t len);

/**
 * Copies every byte received from and sent to the target's shell into f (cleaned of
 * escapes; sent lines prefixed "<<< "), for `probe --transcript`. NULL stops. The caller
 * keeps f open until it sets NULL or removes the target.
 */
void fs_onyx_set_transcript(void *state, void *tstate, FILE *f);

#endif
