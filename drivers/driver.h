/*
 * The one interface between the collector core and a way of talking to a switch.
 *
 * Threads. A driver owns its I/O and its threads (net-snmp's sessions on one thread
 * for all SNMP targets, gRPC's completion queue on its own thread, SSH sessions on a
 * pool). The core never calls into a driver's library. The core's scheduler decides
 * when a polling target's cycle is due and by when it must end; the driver reports
 * samples and the end of each cycle through the target's sink (sink.h), which is
 * thread-safe. Streaming drivers (gNMI) report samples whenever they arrive and call
 * fs_sink_done() per received batch or on stream failure.
 *
 * Every operation below is non-blocking and may be called from the core's scheduler
 * thread; a driver that needs its own thread hands the request over (queue + wakeup).
 *
 * Ownership. The core owns the target configuration (struct fs_target_cfg) and keeps it
 * alive until target_remove() has returned; a driver that needs values after that copies
 * them. The driver owns everything it allocates in *state and *tstate.
 */
#ifndef FS_DRIVER_H
#define FS_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "store/sink.h"

#define FS_DRIVER_API_VERSION 1

/** Result codes of driver operations. */
enum fs_drv_rc {
    FS_DRV_OK = 0,
    FS_DRV_ERR = -1,  /**< failed; errbuf says why */
    FS_DRV_BUSY = -2, /**< a cycle of this target is still in flight (the core counts an overrun) */
};

enum fs_driver_kind {
    FS_DRIVER_POLL,   /**< the scheduler starts cycles */
    FS_DRIVER_STREAM, /**< the driver keeps a subscription; samples arrive on their own */
};

struct fs_driver {
    const char
        *name; /**< config block key, `source` label and log subsystem: "snmp", "cli", "gnmi" */
    int api_version; /**< FS_DRIVER_API_VERSION */
    enum fs_driver_kind kind;

    /**
     * Starts the driver (its threads) once per process, before any target is added.
     * @param[out] state the driver's global state, passed to every other call.
     */
    int (*init)(void **state, char *errbuf, size_t errlen);

    /** Stops the driver's threads and frees *state; every target has been removed first. */
    void (*shutdown)(void *state);

    /**
     * Adds one target that has a block for this driver (tcfg->snmp, ->cli or ->gnmi set).
     * No I/O happens before the first cycle (stream drivers may connect at once).
     * @param[in] tcfg  owned by the core, valid until target_remove() returns.
     * @param[in] sink  owned by the core, valid until target_remove() returns.
     * @param[out] tstate the driver's per-target state.
     */
    int (*target_add)(void *state, const struct fs_target_cfg *tcfg, struct fs_sink *sink,
                      void **tstate, char *errbuf, size_t errlen);

    /**
     * Removes a target: cancels its cycle or stream and waits until no callback for it
     * can run any more; after return the driver never touches tcfg, sink or tstate.
     */
    void (*target_remove)(void *state, void *tstate);

    /**
     * Polling drivers: starts one cycle that must end (fs_sink_done) by deadline_us
     * (CLOCK_MONOTONIC microseconds). Returns FS_DRV_BUSY if the previous one is still
     * running. Streaming drivers leave this NULL.
     */
    int (*cycle_start)(void *state, void *tstate, uint64_t cycle_id, int64_t deadline_us);

    /**
     * Cancels the cycle in flight, if any; the driver then calls fs_sink_done() for it
     * with FS_POLL_TIMEOUT (if it had not already) and can start a new one later.
     */
    void (*cycle_cancel)(void *state, void *tstate);

    /**
     * Optional: writes a JSON object's members (without braces, e.g. `"qos_index_base":1`)
     * describing driver-specific state of the target for /api/v1/targets.
     * Returns the number of bytes written (truncated at len-1; buf always terminated).
     */
    size_t (*target_describe)(void *state, void *tstate, char *buf, size_t len);
};

/** The drivers compiled into this build (drivers/registry.c). */
extern const struct fs_driver *const fs_builtin_drivers[];
extern const size_t fs_builtin_driver_count;

/** Looks a built-in driver up by name; NULL if this build has none of that name. */
const struct fs_driver *fs_driver_find(const char *name);

#endif
