/* The machine's own streaming read, measured natively: one thread per core the process may run on,
 * each pinned to its core and summing its share of one buffer with the widest vectors the CPU has. It
 * is the physical yardstick of the bandwidth-bound cases: an OpenCL read-and-sum kernel may itself fall
 * short of what the memory delivers. */
#define _GNU_SOURCE
#include "bench_native.h"

#include "bench_stream.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NATIVE_MAX_THREADS 256

struct bench_native {
    float *data;
    size_t bytes, floats, mapped;
    unsigned threads;
    int cpus[NATIVE_MAX_THREADS];
    pthread_t tid[NATIVE_MAX_THREADS];
    /* A pass: `generation` moves on under the lock, each thread reads its share and counts itself in
     * `finished` (a condition variable, not a barrier: the count is the threads that did start). */
    pthread_mutex_t lock;
    pthread_cond_t go, done;
    unsigned long generation;
    unsigned finished;
    int quit;
    volatile float sink[NATIVE_MAX_THREADS]; /* each thread's sum: the reads cannot be left out */
};

typedef struct native_arg {
    bench_native *n;
    unsigned index;
} native_arg;

typedef float v16f __attribute__((vector_size(64)));

/* The sum of floats [begin, end) (multiples of 64), four vectors in flight. Built for each x86 vector
 * width, chosen at load time by the CPU (target_clones): the tool itself is built for the baseline. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static float native_sum(const float *p, size_t begin, size_t end)
{
    v16f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    for (size_t i = begin; i < end; i += 64) {
        a0 += *(const v16f *)(p + i);
        a1 += *(const v16f *)(p + i + 16);
        a2 += *(const v16f *)(p + i + 32);
        a3 += *(const v16f *)(p + i + 48);
    }
    const v16f a = (a0 + a1) + (a2 + a3);
    float s = 0;
    for (int k = 0; k < 16; k++)
        s += a[k];
    return s;
}

static void *native_thread(void *arg)
{
    const native_arg *a = arg;
    bench_native *n = a->n;
    const unsigned t = a->index;
#ifdef __linux__
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(n->cpus[t], &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* (unpinned if refused: still a read) */
#endif
    unsigned long seen = 0;
    for (;;) {
        pthread_mutex_lock(&n->lock);
        while (n->generation == seen && !n->quit)
            pthread_cond_wait(&n->go, &n->lock);
        seen = n->generation;
        const int quit = n->quit;
        const unsigned threads = n->threads;
        pthread_mutex_unlock(&n->lock);
        if (quit)
            return NULL;
        /* Whole 64-float blocks per thread; the last takes the rest. */
        const size_t blocks = n->floats / 64, per = blocks / threads;
        const size_t begin = (size_t)t * per * 64, end = t + 1 == threads ? blocks * 64 : begin + per * 64;
        n->sink[t] += native_sum(n->data, begin, end);
        pthread_mutex_lock(&n->lock);
        if (++n->finished == n->threads)
            pthread_cond_signal(&n->done);
        pthread_mutex_unlock(&n->lock);
    }
}

int bench_native_open(size_t bytes, bool huge_pages, bench_native **out)
{
    *out = NULL;
    bench_native *n = calloc(1, sizeof *n);
    if (!n)
        return -1;
    n->floats = bytes / 4 / 64 * 64;
    n->bytes = n->floats * 4;
    const size_t huge = (size_t)2 << 20;
    n->mapped = (n->bytes + huge - 1) / huge * huge;
    void *p = mmap(NULL, n->mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || n->floats == 0) {
        if (p != MAP_FAILED)
            munmap(p, n->mapped);
        free(n);
        return -1;
    }
    n->data = p;
#ifdef MADV_HUGEPAGE
    madvise(p, n->mapped, huge_pages ? MADV_HUGEPAGE : MADV_NOHUGEPAGE); /* (advice: ignored where unknown) */
#else
    (void)huge_pages;
#endif
    for (size_t i = 0; i < n->floats; i++) /* every page touched before timing */
        n->data[i] = (float)(i & 7);
#ifdef __linux__
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE && n->threads < NATIVE_MAX_THREADS; c++)
            if (CPU_ISSET(c, &set))
                n->cpus[n->threads++] = c;
#endif
    if (n->threads == 0) {
        const long online = sysconf(_SC_NPROCESSORS_ONLN);
        n->threads = online > 0 ? (online < NATIVE_MAX_THREADS ? (unsigned)online : NATIVE_MAX_THREADS) : 1;
        for (unsigned t = 0; t < n->threads; t++)
            n->cpus[t] = (int)t;
    }
    static native_arg args[NATIVE_MAX_THREADS]; /* (one yardstick open at a time) */
    pthread_mutex_init(&n->lock, NULL);
    pthread_cond_init(&n->go, NULL);
    pthread_cond_init(&n->done, NULL);
    const unsigned wanted = n->threads;
    n->threads = 0; /* the threads that did start (passes share the buffer among them) */
    for (unsigned t = 0; t < wanted; t++) {
        args[t] = (native_arg){n, t};
        if (pthread_create(&n->tid[t], NULL, native_thread, &args[t]) != 0)
            break;
        pthread_mutex_lock(&n->lock);
        n->threads = t + 1;
        pthread_mutex_unlock(&n->lock);
    }
    if (n->threads < wanted) { /* fewer threads than cores: no fair yardstick */
        bench_native_close(n);
        return -1;
    }
    bench_native_pass(n); /* the warm-up */
    *out = n;
    return 0;
}

double bench_native_pass(bench_native *n)
{
    const double t0 = bench_now_seconds();
    pthread_mutex_lock(&n->lock);
    n->finished = 0;
    n->generation++;
    pthread_cond_broadcast(&n->go);
    while (n->finished < n->threads)
        pthread_cond_wait(&n->done, &n->lock);
    pthread_mutex_unlock(&n->lock);
    return bench_now_seconds() - t0;
}

unsigned bench_native_threads(const bench_native *n) { return n->threads; }

size_t bench_native_bytes(const bench_native *n) { return n->bytes; }

void bench_native_close(bench_native *n)
{
    if (!n)
        return;
    pthread_mutex_lock(&n->lock);
    n->quit = 1;
    pthread_cond_broadcast(&n->go);
    pthread_mutex_unlock(&n->lock);
    for (unsigned t = 0; t < n->threads; t++)
        pthread_join(n->tid[t], NULL);
    pthread_cond_destroy(&n->go);
    pthread_cond_destroy(&n->done);
    pthread_mutex_destroy(&n->lock);
    munmap(n->data, n->mapped);
    free(n);
}
