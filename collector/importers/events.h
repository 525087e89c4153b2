/*
 * Host events collected by an importer before they are posted, and the POST body they
 * become (the shape documented in analysis/host_events.h).
 *
 * Ownership: a batch owns its events and every string in them (copied on add);
 * fs_imp_batch_free releases all. Threads: none.
 */
#ifndef FS_IMP_EVENTS_H
#define FS_IMP_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/host_events.h"
#include "util/buf.h"

struct fs_imp_attr {
    char *key, *value;
    bool is_string;
};

struct fs_imp_event {
    char *host, *kind, *name;
    int64_t start_ns, end_ns; /**< host clock, ns since the epoch */
    struct fs_imp_attr attrs[FS_HOST_EVENTS_MAX_ATTRS];
    size_t n_attrs;
};

struct fs_imp_batch {
    struct fs_imp_event *ev;
    size_t n, cap;
};

/**
 * Appends an event (strings copied, cut to FS_HOST_EVENTS_MAX_STR bytes) and returns it
 * for attrs, or NULL on no memory. end_ns < start_ns is stored as an instant.
 */
struct fs_imp_event *fs_imp_add(struct fs_imp_batch *b, const char *host, const char *kind,
                                const char *name, int64_t start_ns, int64_t end_ns);

/** Adds a string attr (ignored past FS_HOST_EVENTS_MAX_ATTRS). 0 or -1 (no memory). */
int fs_imp_attr_str(struct fs_imp_event *e, const char *key, const char *value);
/** Adds a numeric attr. */
int fs_imp_attr_int(struct fs_imp_event *e, const char *key, int64_t value);
int fs_imp_attr_double(struct fs_imp_event *e, const char *key, double value);

void fs_imp_batch_free(struct fs_imp_batch *b);

/**
 * Appends the POST body for events [from, to) with the measured host offset
 * (host minus collector) and its uncertainty. Returns 0, or -1 when out overflowed.
 */
int fs_imp_body(const struct fs_imp_batch *b, size_t from, size_t to, int64_t offset_ns,
                int64_t uncertainty_ns, struct fs_buf *out);

#endif
