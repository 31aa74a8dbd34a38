/* The CPU kernels' own thread pool (issue 11): a parallel loop wakes only the threads its work needs, and
   ends when its work is done, not when every thread of a team has checked in.

   Why not OpenMP (which the kernels used up to the second release's session 6)?
   - A libgomp region ends at a barrier that every thread of its team must reach. On a machine where
     another process holds one core, the thread on that core must get a time slice for every region, so
     a step of a few hundred regions waited on that core again and again: a CNN step took 1.19-1.31x its
     time alone with one of 16 cores busy, where the core's share is 1.03x.
   - libgomp ends the surplus threads of its pool when a region is smaller than the one before, and
     creates them again for the next larger one. So every region ran on the whole budget (a kernel split
     two ways woke all 16 threads and waited for them), or paid thread creation on every size change.
   Here a loop of `nt` parts wakes at most nt - 1 sleeping workers (fewer when some still spin after the
   last loop), the caller works too, and the loop's chunks are taken as threads come free: a worker that
   has not woken yet when the chunks are gone is never waited for. The caller waits only for chunks that
   were taken and are still running.

   The loop is cut into chunks by its size and `nt` alone: which thread runs a chunk never changes what
   it computes, so results are the same bits at every thread count (every kernel's unit of work is
   computed whole, by one thread).

   Waiting workers spin for g_spin_ns (RUMUS_SPIN_US; ~50 us bridges the gap between two kernels of a
   step) and then sleep on a futex (Linux) or a condition variable. One caller at a time uses the pool;
   a second thread calling at the same moment, a loop inside a loop, and a fork()ed child run on the
   calling thread. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "internal/rumus.h"
#include "runtime.h"

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#define POOL_FUTEX 1
#endif

#define CHUNKS_PER_THREAD 4
#define MAX_CHUNKS 0xFFFF   /* the chunk fields of the claim word are 16 bits */
#define MAX_WORKERS 1023

/* The loop being run. Written by the caller before it publishes a new generation in g_claim, read by a
   thread only after it claimed a chunk of that generation (the loop cannot end, so the caller cannot
   write the next loop, before that chunk is done). */
typedef struct {
    rumus_range_fn fn;
    void *ctx;
    int64_t n;
} pool_loop;

static pool_loop g_loop;
/* generation (32 bits) | chunks in the loop (16) | next chunk to take (16): one word, so a chunk is taken
   with one compare-and-swap that fails if the loop changed in between */
static _Atomic uint64_t g_claim = 0;
static _Atomic int64_t g_done = 0;       /* chunks of the current loop finished */
static _Atomic int g_joined = 0;         /* threads that took part in the current loop, the caller first */
static _Atomic int g_want = 0;           /* how many the current loop may have (its nt) */
static _Atomic uint32_t g_wake = 0;      /* bumped per loop; sleeping workers wait on it */
static _Atomic int g_spinning = 0;       /* workers awake and polling (not asleep) */
static int g_workers = 0;                /* started (they never exit) */
static int64_t g_spin_ns = 50000;
static int g_pool_forked = 0;
static pthread_mutex_t g_caller = PTHREAD_MUTEX_INITIALIZER; /* one loop at a time */
static pthread_mutex_t g_start = PTHREAD_MUTEX_INITIALIZER;  /* starting workers */
static _Thread_local int t_in_loop = 0;
static _Atomic int64_t g_loops = 0, g_wakes = 0;
#ifndef POOL_FUTEX
static pthread_mutex_t g_sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_sleep_cond = PTHREAD_COND_INITIALIZER;
#endif

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until_changed(uint32_t seen) {
#ifdef POOL_FUTEX
    syscall(SYS_futex, (uint32_t *)&g_wake, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
#else
    pthread_mutex_lock(&g_sleep_lock);
    while (atomic_load_explicit(&g_wake, memory_order_acquire) == seen) pthread_cond_wait(&g_sleep_cond, &g_sleep_lock);
    pthread_mutex_unlock(&g_sleep_lock);
#endif
}

static void wake_sleepers(int count) {
    if (count <= 0) return;
    atomic_fetch_add_explicit(&g_wakes, count, memory_order_relaxed);
#ifdef POOL_FUTEX
    syscall(SYS_futex, (uint32_t *)&g_wake, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
#else
    pthread_mutex_lock(&g_sleep_lock);
    pthread_cond_broadcast(&g_sleep_cond);
    pthread_mutex_unlock(&g_sleep_lock);
#endif
}

/* Take and run chunks of loop `gen` until none is left (or another loop began). */
static void run_chunks(uint64_t gen) {
    uint64_t s = atomic_load_explicit(&g_claim, memory_order_acquire);
    for (;;) {
        const uint64_t chunks = (s >> 16) & 0xFFFF, next = s & 0xFFFF;
        if ((s >> 32) != gen || next >= chunks) return;
        if (!atomic_compare_exchange_weak_explicit(&g_claim, &s, s + 1, memory_order_acq_rel, memory_order_acquire))
            continue; /* s now holds the current word */
        const pool_loop L = g_loop;
        L.fn(L.ctx, L.n * (int64_t)next / (int64_t)chunks, L.n * (int64_t)(next + 1) / (int64_t)chunks);
        atomic_fetch_add_explicit(&g_done, 1, memory_order_release);
        s = atomic_load_explicit(&g_claim, memory_order_acquire);
    }
}

static void *worker_main(void *arg) {
    RUMUS_UNUSED(arg);
    t_in_loop = 1; /* a loop inside a chunk runs on this thread */
    uint32_t seen = atomic_load_explicit(&g_wake, memory_order_acquire);
    for (;;) {
        /* a loop takes its nt threads, no more: a loop split two ways right after one of the whole budget
           finds many workers still polling, and only one of them joins it */
        const uint64_t gen = atomic_load_explicit(&g_claim, memory_order_acquire) >> 32;
        if (atomic_fetch_add_explicit(&g_joined, 1, memory_order_acq_rel) <
            atomic_load_explicit(&g_want, memory_order_acquire))
            run_chunks(gen);
        /* poll for the next loop for a while: kernels of one step follow each other within microseconds */
        const int64_t until = now_ns() + g_spin_ns;
        int found = 0;
        for (int i = 1;; i++) {
            const uint32_t w = atomic_load_explicit(&g_wake, memory_order_acquire);
            if (w != seen) {
                seen = w;
                found = 1;
                break;
            }
            cpu_relax();
            if ((i & 31) == 0 && now_ns() >= until) break;
        }
        if (found) continue;
        atomic_fetch_sub_explicit(&g_spinning, 1, memory_order_acq_rel);
        sleep_until_changed(seen); /* returns at once if a loop was published in between */
        atomic_fetch_add_explicit(&g_spinning, 1, memory_order_acq_rel);
        seen = atomic_load_explicit(&g_wake, memory_order_acquire);
    }
    return NULL;
}

/* Workers up to `want` (started once, never ended); returns how many there are. */
static int ensure_workers(int want) {
    if (want > MAX_WORKERS) want = MAX_WORKERS;
    if (g_workers >= want) return g_workers;
    pthread_mutex_lock(&g_start);
    while (g_workers < want) {
        pthread_attr_t attr;
        pthread_t tid;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        atomic_fetch_add_explicit(&g_spinning, 1, memory_order_acq_rel); /* it starts awake */
        const int rc = pthread_create(&tid, &attr, worker_main, NULL);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            atomic_fetch_sub_explicit(&g_spinning, 1, memory_order_acq_rel);
            break;
        }
        g_workers++;
    }
    pthread_mutex_unlock(&g_start);
    return g_workers;
}

/* Publish a loop of `chunks` chunks and wake enough workers for `nt` threads in all, of which at most
   `joiners` (the caller included) take part; the caller holds g_caller. */
static void publish(rumus_range_fn fn, void *ctx, int64_t n, int64_t chunks, int nt, int joiners) {
    g_loop = (pool_loop){fn, ctx, n};
    atomic_store_explicit(&g_done, 0, memory_order_relaxed);
    atomic_store_explicit(&g_joined, 1, memory_order_relaxed);
    atomic_store_explicit(&g_want, joiners, memory_order_relaxed);
    const uint64_t gen = (atomic_load_explicit(&g_claim, memory_order_relaxed) >> 32) + 1;
    atomic_store_explicit(&g_claim, (gen << 32) | ((uint64_t)chunks << 16), memory_order_release);
    atomic_fetch_add_explicit(&g_wake, 1, memory_order_acq_rel);
    atomic_fetch_add_explicit(&g_loops, 1, memory_order_relaxed);
    /* polling workers see the new loop by themselves; wake sleepers only for the rest */
    wake_sleepers(nt - 1 - atomic_load_explicit(&g_spinning, memory_order_acquire));
}

/* The caller's part: chunks, then wait for the chunks others took. */
static void finish(int64_t chunks) {
    t_in_loop = 1;
    run_chunks(atomic_load_explicit(&g_claim, memory_order_relaxed) >> 32);
    t_in_loop = 0;
    for (int i = 1; atomic_load_explicit(&g_done, memory_order_acquire) < chunks; i++) {
        if (i < 4096)
            cpu_relax();
        else
            sched_yield(); /* a chunk's thread lost its core: let it (or another process) have this one */
    }
}

static int pool_usable(void) { return !g_pool_forked && !t_in_loop; }

void rumus_parallel_for(int nt, int64_t n, rumus_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (nt > n) nt = (int)n;
    if (nt <= 1 || !pool_usable() || pthread_mutex_trylock(&g_caller) != 0) {
        fn(ctx, 0, n);
        return;
    }
    const int workers = ensure_workers(nt - 1);
    if (workers < nt - 1) nt = workers + 1;
    int64_t chunks = (int64_t)nt * CHUNKS_PER_THREAD;
    if (chunks > n) chunks = n;
    if (chunks > MAX_CHUNKS) chunks = MAX_CHUNKS;
    if (nt <= 1) {
        pthread_mutex_unlock(&g_caller);
        fn(ctx, 0, n);
        return;
    }
    publish(fn, ctx, n, chunks, nt, nt);
    finish(chunks);
    pthread_mutex_unlock(&g_caller);
}

int rumus_parallel_together(int n, rumus_range_fn fn, void *ctx) {
    if (n <= 1) {
        if (n == 1) fn(ctx, 0, 1);
        return 1;
    }
    if (n > MAX_WORKERS + 1 || !pool_usable() || pthread_mutex_trylock(&g_caller) != 0) return 0;
    if (ensure_workers(n - 1) < n - 1) {
        pthread_mutex_unlock(&g_caller);
        return 0;
    }
    /* one chunk per part; a thread takes a second part only after its first is done, and parts that wait
       on each other cannot be done before all have started, so n threads run them at once */
    publish(fn, ctx, n, n, n, MAX_WORKERS + 1); /* every thread that comes: a ticket wasted by a late
                                                    worker must not leave a part without its own thread */
    finish(n);
    pthread_mutex_unlock(&g_caller);
    return 1;
}

void rumus_pool_set_spin_us(int64_t us) { g_spin_ns = (us < 0 ? 0 : us) * 1000; }
int64_t rumus_pool_get_spin_us(void) { return g_spin_ns / 1000; }
int rumus_pool_workers(void) { return g_workers; }
int64_t rumus_pool_loops(void) { return atomic_load_explicit(&g_loops, memory_order_relaxed); }
int64_t rumus_pool_wakes(void) { return atomic_load_explicit(&g_wakes, memory_order_relaxed); }

/* After fork(): the workers were not copied. Every loop runs on the calling thread. */
void rumus_pool_after_fork_child(void) {
    g_pool_forked = 1;
    pthread_mutex_init(&g_caller, NULL);
    pthread_mutex_init(&g_start, NULL);
    t_in_loop = 0;
}
