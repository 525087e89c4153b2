/* The test-only polling driver; see test_driver.h. One thread per target. */
#include "test_driver.h"
#include "util/clock.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_STARTS 256

struct tsrc {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct fs_sink *sink;
    struct fs_test_behavior b;
    bool stop, pending, running, cancel;
    bool cycle_hangs, cycle_ignores_cancel; /* the running cycle's, taken at its start */
    bool finish;                            /* fs_test_driver_finish() asked */
    enum fs_poll_result finish_result;
    bool gate_open;
    unsigned gate_waiters;
    uint64_t cycle_id;
    uint64_t started, ended, cancelled, value;
    int64_t starts[MAX_STARTS];
};

static void *
tsrc_main(void *arg)
{
    struct tsrc *t = arg;
    pthread_mutex_lock(&t->lock);
    for (;;) {
        while (!t->stop && !t->pending)
            pthread_cond_wait(&t->cond, &t->lock);
        if (t->stop)
            break;
        t->pending = false;
        uint64_t id = t->cycle_id;
        struct fs_test_behavior b = t->b;
        /* Wait out the delay (or forever when hanging) unless cancelled. */
        int64_t until = b.hang ? INT64_MAX : fs_monotonic_us() + b.delay_us;
        while (!(t->cancel && !b.ignore_cancel) && !t->stop && !t->finish &&
               fs_monotonic_us() < until) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += 5 * 1000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&t->cond, &t->lock, &ts);
        }
        bool cancelled = ((t->cancel && !b.ignore_cancel) || t->stop) && !t->finish;
        /* From here the cycle is ending, hung or not: fs_test_driver_idle() must say
         * "busy" until `running` drops, or a test could settle before the done call. */
        t->cycle_hangs = false;
        if (t->finish)
            b.result = t->finish_result;
        t->finish = false;
        t->value += b.step;
        uint64_t v = t->value;
        pthread_mutex_unlock(&t->lock);
        if (!cancelled && b.result == FS_POLL_OK) {
            fs_sink_begin(t->sink, fs_realtime_us());
            for (int p = 1; p <= b.ports; p++) {
                char name[32];
                snprintf(name, sizeof name, "Eth1/%d", p);
                struct fs_label l[] = {{"interface", name}, {"direction", "rx"}};
                fs_sink_counter(t->sink, FS_M_PORT_BYTES, l, 2, v * (uint64_t)p, 64);
                struct fs_label q[] = {{"interface", name}, {"tc", "3"}};
                fs_sink_gauge(t->sink, FS_M_QUEUE_DEPTH, q, 2, (double)(v % 7) * 1024.0);
            }
            fs_sink_end(t->sink);
        }
        fs_sink_done(t->sink, id, cancelled ? FS_POLL_TIMEOUT : b.result,
                     cancelled ? "cancelled at the deadline" : NULL);
        pthread_mutex_lock(&t->lock);
        t->ended++;
        t->running = false;
        t->cancel = false;
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

static int
tsrc_init(void **state, char *errbuf, size_t errlen)
{
    (void)errbuf;
    (void)errlen;
    *state = NULL;
    return FS_DRV_OK;
}

static void
tsrc_shutdown(void *state)
{
    (void)state;
}

static int
tsrc_add(void *state, const struct fs_target_cfg *tcfg, const void *dcfg, struct fs_sink *sink,
         void **tstate, char *errbuf, size_t errlen)
{
    (void)state;
    (void)tcfg;
    (void)dcfg;
    struct tsrc *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(errbuf, errlen, "out of memory");
        return FS_DRV_ERR;
    }
    t->sink = sink;
    t->b = (struct fs_test_behavior){.ports = 4, .step = 1000, .result = FS_POLL_OK};
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->cond, NULL);
    if (pthread_create(&t->thread, NULL, tsrc_main, t) != 0) {
        snprintf(errbuf, errlen, "no thread");
        free(t);
        return FS_DRV_ERR;
    }
    *tstate = t;
    return FS_DRV_OK;
}

static void
tsrc_remove(void *state, void *tstate)
{
    (void)state;
    struct tsrc *t = tstate;
    pthread_mutex_lock(&t->lock);
    t->stop = true;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
    pthread_join(t->thread, NULL);
    pthread_cond_destroy(&t->cond);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* Blocks while the gate is shut (lock held). */
static void
gate_wait(struct tsrc *t)
{
    t->gate_waiters++;
    pthread_cond_broadcast(&t->cond);
    while (!t->gate_open && !t->stop)
        pthread_cond_wait(&t->cond, &t->lock);
    t->gate_waiters--;
}

static int
tsrc_cycle_start(void *state, void *tstate, uint64_t cycle_id, int64_t deadline_us)
{
    (void)state;
    (void)deadline_us;
    struct tsrc *t = tstate;
    int rc = FS_DRV_OK;
    pthread_mutex_lock(&t->lock);
    if (t->b.gate_start)
        gate_wait(t);
    if (t->running) {
        rc = FS_DRV_BUSY;
    } else {
        t->running = true;
        t->pending = true;
        t->cycle_hangs = t->b.hang;
        t->cycle_ignores_cancel = t->b.ignore_cancel;
        t->cycle_id = cycle_id;
        if (t->started < MAX_STARTS)
            t->starts[t->started] = fs_monotonic_us();
        t->started++;
        pthread_cond_broadcast(&t->cond);
    }
    pthread_mutex_unlock(&t->lock);
    return rc;
}

static void
tsrc_cycle_cancel(void *state, void *tstate)
{
    (void)state;
    struct tsrc *t = tstate;
    pthread_mutex_lock(&t->lock);
    if (t->b.gate_cancel)
        gate_wait(t);
    if (t->running) {
        t->cancel = true;
        t->cancelled++;
        pthread_cond_broadcast(&t->cond);
    }
    pthread_mutex_unlock(&t->lock);
}

/* Driven directly by the tests (never through a configuration): no config block ops. */
const struct fs_driver fs_test_driver = {
    .api_version = FS_DRIVER_API_VERSION,
    .block = {.name = "testsrc", .default_rank = 100},
    .kind = FS_DRIVER_POLL,
    .init = tsrc_init,
    .shutdown = tsrc_shutdown,
    .target_add = tsrc_add,
    .target_remove = tsrc_remove,
    .cycle_start = tsrc_cycle_start,
    .cycle_cancel = tsrc_cycle_cancel,
};

void
fs_test_driver_set(void *tstate, const struct fs_test_behavior *b)
{
    struct tsrc *t = tstate;
    pthread_mutex_lock(&t->lock);
    t->b = *b;
    pthread_mutex_unlock(&t->lock);
}

void
fs_test_driver_finish(void *tstate, enum fs_poll_result r)
{
    struct tsrc *t = tstate;
    pthread_mutex_lock(&t->lock);
    if (t->running) {
        t->finish = true;
        t->finish_result = r;
        pthread_cond_broadcast(&t->cond);
    }
    pthread_mutex_unlock(&t->lock);
}

unsigned
fs_test_driver_in_gate(void *tstate)
{
    struct tsrc *t = tstate;
    pthread_mutex_lock(&t->lock);
    unsigned n = t->gate_waiters;
    pthread_mutex_unlock(&t->lock);
    return n;
}

void
fs_test_driver_open_gate(void *tstate)
{
    struct tsrc *t = tstate;
    pthread_mutex_lock(&t->lock);
    t->gate_open = true;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
}

bool
fs_test_driver_idle(void *tstate)
{
    struct tsrc *t = tstate;
    pthread_mutex_lock(&t->lock);
    bool idle =
        !t->running || (t->cycle_hangs && (!t->cancel || t->cycle_ignores_cancel) && !t->finish);
    pthread_mutex_unlock(&t->lock);
    return idle;
}

#define GETTER(field)                                                                              \
    uint64_t fs_test_driver_##field(void *tstate)                                                  \
    {                                                                                              \
        struct tsrc *t = tstate;                                                                   \
        pthread_mutex_lock(&t->lock);                                                              \
        uint64_t v = t->field;                                                                     \
        pthread_mutex_unlock(&t->lock);                                                            \
        return v;                                                                                  \
    }
GETTER(started)
GETTER(ended)
GETTER(cancelled)

size_t
fs_test_driver_start_times(void *tstate, int64_t *out, size_t max)
{
    struct tsrc *t = tstate;
    pthread_mutex_lock(&t->lock);
    size_t n = t->started < MAX_STARTS ? (size_t)t->started : MAX_STARTS;
    if (n > max)
        n = max;
    memcpy(out, t->starts, n * sizeof *out);
    pthread_mutex_unlock(&t->lock);
    return n;
}
