/* The CPU kernels' own thread pool.

   A loop over [0, n) for nt threads is cut into fixed chunks, by n and nt alone (CHUNKS_PER_THREAD per
   thread, at most n): every kernel computes a chunk's results whole, on one thread, so which thread runs a
   chunk never changes the bits, and results are the same at every thread count. The caller publishes the
   loop, wakes the sleeping ones of workers 1 .. nt-1 (no other), and every thread of the loop, the caller
   included, takes the next chunk from one shared counter until none is left. The spare chunks even out
   uneven chunks and a worker that wakes late: it finds fewer chunks, or none, and is never waited for.
   The caller then waits only for chunks others took and still run.

   Waiting is spin-then-sleep on both sides: an idle worker polls for the next loop for g_spin_ns (the
   kernels of one step follow each other within microseconds) and then sleeps on a futex word of its own;
   a caller whose last chunks run elsewhere polls as long and then sleeps until the last chunk wakes it.

   Why not OpenMP: a libgomp region ends at a barrier that every thread of its team must reach (a thread
   whose core another process holds delays every region), and libgomp ends and re-creates threads when a
   region is smaller than the one before. Here a loop wakes only the threads its size asks for and ends
   when its chunks are done.

   One caller at a time: a second thread calling at the same moment, a loop inside a chunk and a fork()ed
   child run the loop on the calling thread. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <limits.h>
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
#define MAX_CHUNKS 0xFFFF /* the chunk fields of g_next are 16 bits */
#define MAX_WORKERS 1023

/* The loop being run: written by the caller before it publishes g_next, read by a thread only after it
   claimed a chunk of that loop (which cannot end, so cannot be replaced, before that chunk is done). */
typedef struct {
    rumus_range_fn fn;
    void *ctx;
    int64_t n, chunks;
} pool_loop;

/* One worker's sleep: `tick` is its futex word, bumped by a caller that saw `asleep`. One cache line each. */
typedef struct {
    _Atomic uint32_t tick;
    _Atomic int asleep;
    uint32_t first_gen; /* the generation current when it was started: it joins the next one */
    char pad[64 - 3 * sizeof(uint32_t)];
} pool_worker;

static pool_loop g_loop;
static pool_worker g_worker[MAX_WORKERS + 1] __attribute__((aligned(64)));
/* what the workers poll: generation (32 bits) | nt (32) */
static _Atomic uint64_t g_cur __attribute__((aligned(64))) = 0;
/* the shared chunk counter: generation (32) | next chunk (16) | chunks (16); a claim is a compare-and-swap
   that fails when the loop changed in between, so a late worker never takes a chunk of the next loop */
static _Atomic uint64_t g_next __attribute__((aligned(64))) = 0;
static _Atomic uint32_t g_done __attribute__((aligned(64))) = 0; /* chunks finished (the caller's futex word) */
static _Atomic int g_caller_asleep = 0;
static int g_workers = 0; /* started; they never exit */
static _Atomic int64_t g_spin_ns = 50000;
static int g_pool_forked = 0;
static pthread_mutex_t g_caller = PTHREAD_MUTEX_INITIALIZER; /* one loop at a time */
static pthread_mutex_t g_start = PTHREAD_MUTEX_INITIALIZER;  /* starting workers */
static _Thread_local int t_in_loop = 0;
static _Atomic int64_t g_loops = 0, g_wakes = 0;

#define GEN(w) ((uint32_t)((w) >> 32))

static inline void rumus_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline int64_t rumus_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#ifdef POOL_FUTEX
static void futex_wait(_Atomic uint32_t *word, uint32_t seen) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}
static void futex_wake(_Atomic uint32_t *word) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
#else
/* elsewhere one condition variable stands in for every futex word; a wake wakes all, who look again */
static pthread_mutex_t g_sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_sleep_cond = PTHREAD_COND_INITIALIZER;
static void futex_wait(_Atomic uint32_t *word, uint32_t seen) {
    pthread_mutex_lock(&g_sleep_lock);
    while (atomic_load_explicit(word, memory_order_acquire) == seen) pthread_cond_wait(&g_sleep_cond, &g_sleep_lock);
    pthread_mutex_unlock(&g_sleep_lock);
}
static void futex_wake(_Atomic uint32_t *word) {
    RUMUS_UNUSED(word);
    pthread_mutex_lock(&g_sleep_lock);
    pthread_cond_broadcast(&g_sleep_cond);
    pthread_mutex_unlock(&g_sleep_lock);
}
#endif

/* The next chunk of loop `gen`, or -1 when none is left (or another loop began). */
static int64_t claim(uint32_t gen) {
    uint64_t v = atomic_load_explicit(&g_next, memory_order_acquire);
    for (;;) {
        const uint64_t next = (v >> 16) & 0xFFFF, chunks = v & 0xFFFF;
        if (GEN(v) != gen || next >= chunks) return -1;
        if (atomic_compare_exchange_weak_explicit(&g_next, &v, v + (1u << 16), memory_order_acq_rel,
                                                  memory_order_acquire))
            return (int64_t)next;
    }
}

/* Chunks of loop `gen` until none is left; the thread that finishes the last one wakes a sleeping caller
   (seq_cst against the caller's flag-then-look at the end of run). */
static void run_chunks(uint32_t gen) {
    int64_t c;
    while ((c = claim(gen)) >= 0) {
        const pool_loop L = g_loop;
        L.fn(L.ctx, L.n * c / L.chunks, L.n * (c + 1) / L.chunks);
        const uint32_t done = atomic_fetch_add_explicit(&g_done, 1, memory_order_seq_cst) + 1;
        if (done == (uint32_t)L.chunks && atomic_load_explicit(&g_caller_asleep, memory_order_seq_cst))
            futex_wake(&g_done);
    }
}

static void *worker_main(void *arg) {
    const int self = (int)(intptr_t)arg;
    pool_worker *me = &g_worker[self];
    uint32_t seen = me->first_gen;
    t_in_loop = 1; /* a loop inside a chunk runs on this thread */
    for (;;) {
        uint64_t cur = atomic_load_explicit(&g_cur, memory_order_acquire);
        if (GEN(cur) != seen) {
            seen = GEN(cur);
            if (self < (int)(uint32_t)cur) run_chunks(seen); /* a loop takes its nt threads, no more */
            continue;
        }
        const int64_t until = rumus_now_ns() + atomic_load_explicit(&g_spin_ns, memory_order_relaxed);
        for (int i = 1; GEN(atomic_load_explicit(&g_cur, memory_order_acquire)) == seen; i++) {
            rumus_cpu_relax();
            if ((i & 31) == 0 && rumus_now_ns() >= until) break;
        }
        if (GEN(atomic_load_explicit(&g_cur, memory_order_acquire)) != seen) continue;
        /* asleep, then a last look at g_cur: a caller publishing meanwhile either sees the flag and bumps
           the tick (so the wait returns at once), or published before the look */
        atomic_store_explicit(&me->asleep, 1, memory_order_seq_cst);
        const uint32_t tick = atomic_load_explicit(&me->tick, memory_order_seq_cst);
        if (GEN(atomic_load_explicit(&g_cur, memory_order_seq_cst)) == seen) futex_wait(&me->tick, tick);
        atomic_store_explicit(&me->asleep, 0, memory_order_relaxed);
    }
    return NULL;
}

/* Workers up to `want` (started once, never ended); returns how many there are. Called holding g_caller. */
static int ensure_workers(int want) {
    if (want > MAX_WORKERS) want = MAX_WORKERS;
    if (g_workers >= want) return g_workers;
    pthread_mutex_lock(&g_start);
    while (g_workers < want) {
        const int self = g_workers + 1;
        g_worker[self].first_gen = GEN(atomic_load_explicit(&g_cur, memory_order_relaxed));
        pthread_attr_t attr;
        pthread_t tid;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        const int rc = pthread_create(&tid, &attr, worker_main, (void *)(intptr_t)self);
        pthread_attr_destroy(&attr);
        if (rc != 0) break;
        g_workers++;
    }
    pthread_mutex_unlock(&g_start);
    return g_workers;
}

/* Run [0, n) as `chunks` chunks on nt threads (nt - 1 workers exist); the caller holds g_caller. */
static void run(int nt, int64_t n, int64_t chunks, rumus_range_fn fn, void *ctx) {
    g_loop = (pool_loop){fn, ctx, n, chunks};
    atomic_store_explicit(&g_done, 0, memory_order_relaxed);
    const uint64_t gen = (uint64_t)(GEN(atomic_load_explicit(&g_cur, memory_order_relaxed)) + 1u);
    atomic_store_explicit(&g_next, (gen << 32) | (uint64_t)chunks, memory_order_release);
    atomic_store_explicit(&g_cur, (gen << 32) | (uint64_t)nt, memory_order_seq_cst);
    atomic_fetch_add_explicit(&g_loops, 1, memory_order_relaxed);
    for (int w = 1; w < nt; w++) /* polling workers see the loop by themselves */
        if (atomic_load_explicit(&g_worker[w].asleep, memory_order_seq_cst)) {
            atomic_fetch_add_explicit(&g_worker[w].tick, 1, memory_order_seq_cst);
            futex_wake(&g_worker[w].tick);
            atomic_fetch_add_explicit(&g_wakes, 1, memory_order_relaxed);
        }
    t_in_loop = 1;
    run_chunks((uint32_t)gen);
    t_in_loop = 0;
    const int64_t until = rumus_now_ns() + atomic_load_explicit(&g_spin_ns, memory_order_relaxed);
    for (int i = 1; atomic_load_explicit(&g_done, memory_order_acquire) < (uint32_t)chunks; i++) {
        rumus_cpu_relax();
        if ((i & 31) != 0 || rumus_now_ns() < until) continue;
        /* asleep, then a last look: the last chunk's thread either sees the flag and wakes it, or counted
           before the look */
        atomic_store_explicit(&g_caller_asleep, 1, memory_order_seq_cst);
        const uint32_t seen = atomic_load_explicit(&g_done, memory_order_seq_cst);
        if (seen < (uint32_t)chunks) futex_wait(&g_done, seen);
        atomic_store_explicit(&g_caller_asleep, 0, memory_order_relaxed);
    }
}

/* Takes the pool for a loop of nt threads (1: the caller has it and nt - 1 workers exist), else 0. */
static int take_pool(int nt) {
    if (g_pool_forked || t_in_loop || pthread_mutex_trylock(&g_caller) != 0) return 0;
    if (ensure_workers(nt - 1) >= nt - 1) return 1;
    pthread_mutex_unlock(&g_caller);
    return 0;
}

void rumus_parallel_for(int nt, int64_t n, rumus_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (nt > n) nt = (int)n;
    if (nt > MAX_WORKERS + 1) nt = MAX_WORKERS + 1;
    if (nt <= 1 || !take_pool(nt)) {
        fn(ctx, 0, n);
        return;
    }
    int64_t chunks = (int64_t)nt * CHUNKS_PER_THREAD;
    if (chunks > n) chunks = n;
    if (chunks > MAX_CHUNKS) chunks = MAX_CHUNKS;
    run(nt, n, chunks, fn, ctx);
    pthread_mutex_unlock(&g_caller);
}

/* One chunk per thread. A thread takes its next chunk only after its current one returns, and parts that
   wait for each other return only once all have started, so the n parts run on n threads at once. */
int rumus_parallel_together(int n, rumus_range_fn fn, void *ctx) {
    if (n <= 1) {
        if (n == 1) fn(ctx, 0, 1);
        return 1;
    }
    if (n > MAX_WORKERS + 1 || !take_pool(n)) return 0;
    run(n, n, n, fn, ctx);
    pthread_mutex_unlock(&g_caller);
    return 1;
}

void rumus_pool_set_spin_us(int64_t us) {
    atomic_store_explicit(&g_spin_ns, (us < 0 ? 0 : us) * 1000, memory_order_relaxed);
}
int64_t rumus_pool_get_spin_us(void) { return atomic_load_explicit(&g_spin_ns, memory_order_relaxed) / 1000; }
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
