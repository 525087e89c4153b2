/* Shared parts of the driver harnesses (see poll_harness.h). */
#include "poll_harness.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

const char *const fs_ph_result_names[FS_PH_RESULTS] = {"ok",       "timeout", "auth",
                                                       "protocol", "parse",   "partial"};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static size_t pending;
static unsigned long results[FS_PH_RESULTS];
static enum fs_poll_result last0;

void
fs_ph_round_begin(size_t n)
{
    pthread_mutex_lock(&lock);
    pending = n;
    pthread_mutex_unlock(&lock);
}

void
fs_ph_round_skip(void)
{
    pthread_mutex_lock(&lock);
    pending--;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

enum fs_poll_result
fs_ph_round_wait(void)
{
    pthread_mutex_lock(&lock);
    while (pending > 0)
        pthread_cond_wait(&cond, &lock);
    enum fs_poll_result r = last0;
    pthread_mutex_unlock(&lock);
    return r;
}

void
fs_ph_done(void *arg, uint64_t id, enum fs_poll_result r)
{
    (void)id;
    const int *index = arg;
    pthread_mutex_lock(&lock);
    if ((unsigned)r < FS_PH_RESULTS)
        results[r]++;
    if (index && *index == 0)
        last0 = r;
    pending--;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

unsigned long
fs_ph_result_count(enum fs_poll_result r)
{
    pthread_mutex_lock(&lock);
    unsigned long n = (unsigned)r < FS_PH_RESULTS ? results[r] : 0;
    pthread_mutex_unlock(&lock);
    return n;
}

int64_t
fs_ph_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

double
fs_ph_cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

void
fs_ph_grep_print(const struct fs_buf *b, const regex_t *re, int poll)
{
    const char *p = b->data, *end = b->data + b->len;
    char line[1024];
    while (p && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (n < sizeof(line) && n > 0 && p[0] != '#') {
            memcpy(line, p, n);
            line[n] = '\0';
            if (regexec(re, line, 0, NULL, 0) == 0)
                printf("poll %d %s\n", poll, line);
        }
        p = nl ? nl + 1 : end;
    }
}
