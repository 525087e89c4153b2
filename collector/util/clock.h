/*
 * The two clocks of the collector, in microseconds: CLOCK_REALTIME for sample timestamps
 * (what users correlate with host data) and CLOCK_MONOTONIC for deadlines, intervals and
 * durations (immune to clock steps).
 */
#ifndef FS_CLOCK_H
#define FS_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t
fs_realtime_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline int64_t
fs_monotonic_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

#endif
