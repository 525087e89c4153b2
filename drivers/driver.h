/*
 * The one interface between the collector core and a way of talking to a switch.
 *
 * A driver is a folder drivers/NAME/ with a `const struct fs_driver` listed in
 * drivers/registry.c. It reaches the core only through this header, the sink
 * (store/sink.h) and the block accessors of config/block.h; the core never names a
 * driver. Adding one touches drivers/NAME/, drivers/registry.c and
 * drivers/CMakeLists.txt only.
 *
 * Configuration. The driver owns its block under a target (`snmp:`, `gnmi:`, ...): its
 * YANG module (block.yang_module, embedded at build time with fs_driver_yang() of
 * drivers/CMakeLists.txt) describes the keys, its block.config_build() checks what YANG
 * cannot express and builds the driver's own structure, which target_add() receives as
 * dcfg. block.config_interval() gives the core the cadence; block.default_rank the
 * default source precedence.
 *
 * Threads. A driver owns its I/O and its threads (net-snmp's sessions on one thread
 * for all SNMP targets, gRPC's completion queue on its own thread, SSH sessions on a
 * pool). The core never calls into a driver's library. For a polling driver the core's
 * scheduler decides when a target's cycle is due and by when it must end; the driver
 * reports samples and the end of each cycle through the target's sink, which is
 * thread-safe per sink. A streaming driver gets no scheduler entry: it reports samples
 * whenever they arrive and calls fs_sink_done(sink, 0, ...) per received batch or on a
 * stream failure.
 *
 * Blocking. cycle_start() and cycle_cancel() never block (a driver that needs its own
 * thread hands the request over: queue + wakeup); they may be called from the
 * scheduler thread. init(), shutdown(), target_add() and target_remove() are called by
 * the daemon's main thread only; target_remove() blocks until the driver is done with
 * the target (see there).
 *
 * Topology. A driver that reads the device's LLDP neighbour table reports it through the
 * sink like any other data: fs_sink_lldp_local() (the device's own chassis id and
 * sysName), fs_sink_lldp_neighbor() per neighbour (its local port named as the driver's
 * `interface` labels name it), then fs_sink_lldp_end() once the whole table was read;
 * a read cut short ends without it (nothing is dropped then).
 *
 * Ownership. The core owns the target configuration (tcfg, and dcfg inside it) and the
 * sink, and keeps them alive until target_remove() has returned; a driver that needs
 * values after that copies them. The driver owns everything it allocates in *state and
 * *tstate. Config values built by config_build() belong to the configuration and are
 * freed by config_free() when it is freed (block.h).
 */
#ifndef FS_DRIVER_H
#define FS_DRIVER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config/block.h"
#include "config/config.h"
#include "store/sink.h"

/** Bumped on any change of struct fs_driver or of the meaning of its calls. History:
 *  2: configuration blocks owned by drivers (struct fs_cfg_block_ops), stream drivers;
 *  3: the optional target_transcript, target_plan_mode and target_plan. */
#define FS_DRIVER_API_VERSION 3

/** Result codes of driver operations. */
enum fs_drv_rc {
    FS_DRV_OK = 0,
    FS_DRV_ERR = -1,  /**< failed; errbuf says why */
    FS_DRV_BUSY = -2, /**< a cycle of this target is still in flight (the core counts an overrun) */
};

enum fs_driver_kind {
    FS_DRIVER_POLL,   /**< the scheduler starts cycles: cycle_start/cycle_cancel are set */
    FS_DRIVER_STREAM, /**< the driver keeps a subscription per target and reports samples
                           as they arrive; no scheduler entry; cycle_start/cycle_cancel NULL */
};

struct fs_driver {
    /** FS_DRIVER_API_VERSION the driver was written for. First member, so it can be read
     *  whatever the rest looks like; the daemon refuses to use a driver whose version
     *  differs (logged: "driver X: written for driver API N, this fabricscope has M"). */
    unsigned api_version;

    /** The driver's configuration block (config/block.h): name ("snmp", also the
     *  `source` label and log subsystem), default_rank (gnmi 10, cli 20, sflow 25, snmp 30; lower
     *  wins), yang_module, config_build, config_free, config_equal, config_interval. */
    struct fs_cfg_block_ops block;

    /** Polling or streaming; the daemon gives only polling targets a scheduler entry. */
    enum fs_driver_kind kind;

    /**
     * Starts the driver (its threads) once per process, before any target is added.
     * @param[out] state the driver's global state, passed to every other call.
     */
    int (*init)(void **state, char *errbuf, size_t errlen);

    /** Stops the driver's threads and frees *state; every target has been removed first. */
    void (*shutdown)(void *state);

    /**
     * Adds one target that has this driver's block. No I/O is needed before the first
     * cycle (a streaming driver may connect at once). The driver may refuse the target
     * (FS_DRV_ERR, e.g. a secret file that cannot be read): the core shows it down with
     * errbuf as the reason and retries on the next reload.
     * @param[in] tcfg  the target (name, address, labels); owned by the core
     * @param[in] dcfg  this driver's block of the target, as built by block.config_build
     * @param[in] sink  where the target's samples go; owned by the core
     * @param[out] tstate the driver's per-target state
     * tcfg, dcfg and sink stay valid until target_remove() returns.
     */
    int (*target_add)(void *state, const struct fs_target_cfg *tcfg, const void *dcfg,
                      struct fs_sink *sink, void **tstate, char *errbuf, size_t errlen);

    /**
     * Removes a target. Blocks until the driver is done with it: the cycle or stream in
     * flight is abandoned (its fs_sink_done may or may not have been called), and when
     * this returns no callback or thread of the driver touches tcfg, dcfg, sink or
     * tstate any more, and tstate is freed. Called from the daemon's main thread after
     * the target's scheduler entry is gone; may take as long as the driver needs to
     * reach a safe point (for SNMP: one turn of its event loop).
     */
    void (*target_remove)(void *state, void *tstate);

    /**
     * Polling drivers: starts one cycle that must end (fs_sink_done(sink, cycle_id, ..))
     * by deadline_us (CLOCK_MONOTONIC microseconds). Non-blocking. Returns FS_DRV_BUSY if
     * the previous one is still running. NULL for streaming drivers.
     */
    int (*cycle_start)(void *state, void *tstate, uint64_t cycle_id, int64_t deadline_us);

    /**
     * Polling drivers: cancels the cycle in flight, if any; the driver then calls
     * fs_sink_done() for it with FS_POLL_TIMEOUT (if it had not already) and can start a
     * new one later. Non-blocking. NULL for streaming drivers.
     */
    void (*cycle_cancel)(void *state, void *tstate);

    /* ---- Optional: the one-shot commands (fabricscope probe, plan-flow-rules). NULL when
     * the driver has nothing of the kind. Called by the main thread only, on a target
     * added for the command, before its first cycle_start(); each cycle they concern is
     * awaited (fs_sink_done) before the next call. */

    /**
     * From now on copies the raw exchange with the target, as text a user can read and
     * send us (what was received, and what was sent: secrets masked), to f; NULL stops.
     * f stays open until it is set to NULL or the target is removed.
     */
    void (*target_transcript)(void *state, void *tstate, FILE *f);

    /**
     * Puts the target in plan mode: its next cycle also reads what the driver needs to
     * plan the configuration it would install on the device (e.g. the running
     * configuration) and changes nothing there, whatever the driver's block says.
     * Set together with target_plan (fs_driver_check()).
     */
    void (*target_plan_mode)(void *state, void *tstate);

    /**
     * After a cycle in plan mode: prints to out the configuration changes the driver
     * would make on the device (its commands, one per line; a line saying nothing is to
     * change when so). Returns 0; 1 when the device's state could not be read (out then
     * says so and shows the plan made without it); -1 with errbuf on an error (e.g. the
     * configuration cannot be expressed on the device).
     */
    int (*target_plan)(void *state, void *tstate, FILE *out, char *errbuf, size_t errlen);
};

/* ---- The registry (drivers/registry.c) ---- */

/** The drivers compiled into this build, in registry order. */
extern const struct fs_driver *const fs_builtin_drivers[];
extern const size_t fs_builtin_driver_count;

/** The block names of every driver fabricscope knows, built into this one or not
 *  (a block of a known driver this build lacks is refused with that reason). */
extern const char *const fs_known_driver_names[];
extern const size_t fs_known_driver_count;

/** Looks a built-in driver up by name; NULL if this build has none of that name. */
const struct fs_driver *fs_driver_find(const char *name);

/** The built-in driver whose block is ops (as found in a target's blocks), or NULL. */
const struct fs_driver *fs_driver_of_block(const struct fs_cfg_block_ops *ops);

/**
 * Checks that the core can use drv: its api_version is FS_DRIVER_API_VERSION, every
 * member its kind needs is set. 0, or -1 with errbuf saying why ("driver X: ...").
 */
int fs_driver_check(const struct fs_driver *drv, char *errbuf, size_t errlen);

#endif
