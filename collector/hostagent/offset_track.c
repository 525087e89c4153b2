/* The agent's offset measurements over time (see offset_track.h). */
#include "hostagent/offset_track.h"

static const struct fs_agent_meas *
nth(const struct fs_offset_track *t, size_t i)
{
    return &t->m[(t->head + i) % FS_AGENT_CLOCK_KEEP];
}

void
fs_offset_track_add(struct fs_offset_track *t, const struct fs_agent_meas *m, bool *jumped)
{
    struct fs_agent_meas prev;
    *jumped = false;
    if (fs_offset_track_last(t, &prev)) {
        int64_t d = m->offset_ns - prev.offset_ns;
        *jumped = (d < 0 ? -d : d) > m->unc_ns + prev.unc_ns;
    }
    if (t->n < FS_AGENT_CLOCK_KEEP) {
        t->m[(t->head + t->n) % FS_AGENT_CLOCK_KEEP] = *m;
        t->n++;
    } else {
        t->m[t->head] = *m;
        t->head = (t->head + 1) % FS_AGENT_CLOCK_KEEP;
    }
}

bool
fs_offset_track_last(const struct fs_offset_track *t, struct fs_agent_meas *out)
{
    if (!t->n)
        return false;
    *out = *nth(t, t->n - 1);
    return true;
}

bool
fs_offset_track_at(const struct fs_offset_track *t, int64_t t_ns, struct fs_agent_meas *out)
{
    if (!t->n)
        return false;
    /* Binary search for the first measurement taken after t_ns. */
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (nth(t, mid)->at_ns <= t_ns)
            lo = mid + 1;
        else
            hi = mid;
    }
    const struct fs_agent_meas *best = lo < t->n ? nth(t, lo) : nth(t, t->n - 1);
    if (lo > 0 && lo < t->n && t_ns - nth(t, lo - 1)->at_ns <= nth(t, lo)->at_ns - t_ns)
        best = nth(t, lo - 1);
    int64_t d = t_ns > best->at_ns ? t_ns - best->at_ns : best->at_ns - t_ns;
    *out = *best;
    out->unc_ns += d / (1000000 / FS_AGENT_DRIFT_PPM);
    return true;
}
