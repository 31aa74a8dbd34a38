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
   Here a loop of `nt` parts wakes at most nt - 1 sleeping workers (fewer when some still poll after the
   last loop): workers 1 .. nt-1, each thread owning a fixed run of the loop's chunks (see pool_slot), so
   the same data meets the same core op after op and step after step. The caller works too, and a thread
   whose own chunks are done takes others' from their ends: a worker that has not woken yet when the chunks
   are gone is never waited for. The caller waits only for chunks that were taken and are still running.

   The loop is cut into chunks by its size and `nt` alone: which thread runs a chunk never changes what
   it computes, so results are the same bits at every thread count (every kernel's unit of work is
   computed whole, by one thread).

   Waiting workers spin for g_spin_ns (RUMUS_SPIN_US; ~50 us bridges the gap between two kernels of a
   step) and then sleep on a futex (Linux) or a condition variable; a caller waiting for chunks others
   run sleeps after a millisecond (see finish). A worker that wakes on the caller's CPU moves to another (see
   keep_off_callers_cpu). One caller at a time uses the pool;
   a second thread calling at the same moment, a loop inside a loop, and a fork()ed child run on the
   calling thread. The tests' probe loops are in pool_probes.c. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <time.h>

#include "internal/pool_thread.h"
#include "internal/rumus.h"
#include "runtime.h"

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#define POOL_FUTEX 1
#endif

#define CHUNKS_PER_THREAD 4
#define MAX_CHUNKS 0xFFFF   /* the chunk fields of a slot word are 16 bits */
#define MAX_WORKERS 1023
#define MAX_SLOTS (MAX_WORKERS + 1)

/* Stepping out (a worker whose core another process takes), see worker_step_out. */
#define STEP_OUT_LEAST_NT 4                /* loops of fewer threads keep every worker in */
#define STEP_OUT_WINDOW_NS 20000000LL      /* two preemptions this close: the core is shared */
#define STEP_OUT_FIRST_NS 20000000LL       /* the first time out; doubled while the core stays shared */
#define STEP_OUT_LONGEST_NS 1000000000LL
#define STEP_OUT_CHECK_NS 50000LL          /* look at the thread's preemptions at most this often */
#define CALLER_SLEEP_AFTER_NS 1000000LL    /* a caller waits this long for others' chunks before sleeping */

/* The loop being run. Written by the caller before it publishes a new generation in g_cur, read by a
   thread only after it claimed a chunk of that generation (the loop cannot end, so the caller cannot
   write the next loop, before that chunk is done). */
typedef struct {
    rumus_range_fn fn;
    void *ctx;
    int64_t n, chunks;
} pool_loop;

/* Thread s of a loop (the caller is 0, worker w is w) owns a fixed run of its chunks, [chunks*s/nt,
   chunks*(s+1)/nt): the same thread gets the same part of the same loop every time, so an op that reads what
   the op before it wrote over the same range (Adam's states, a ReLU after a GEMM's rows), or the same
   arrays a step later, finds them in its own core's cache. With chunks taken first-come (up to session 8)
   the mapping followed timing, and settled per run into a fast or a slow pattern: the MLP step took 1.30 or
   1.78 ms at 2 threads, block after block (Adam's update 56 or 199 us), on the dev machine. A thread whose own
   chunks are done takes chunks from the end of other threads' runs, so a late or descheduled thread is
   never waited for. Per slot, one word: generation (32 bits) | next chunk (16) | end (16), so a chunk is
   taken with one compare-and-swap that fails if the loop changed in between; one cache line each, since
   every claim writes it. */
typedef struct {
    _Atomic uint64_t word;
    _Atomic int asleep;   /* worker s sleeps on the futex (its bit in the wake bitset) */
    _Atomic int out;      /* worker s stepped out (worker_step_out): woken only for a loop that needs every thread */
    _Atomic int injected; /* for tests: preemptions worker s counts on top of its own (rumus_pool_inject_preemptions) */
    _Atomic int cpu;      /* the CPU thread s started its last loop on (-1: none yet) */
    _Atomic int fake_on_callers; /* for tests: at its next loop worker s takes itself to be on the caller's CPU */
    char pad[64 - sizeof(uint64_t) - 5 * sizeof(int)];
} pool_slot;

static pool_loop g_loop;
static pool_slot g_slots[MAX_SLOTS] __attribute__((aligned(64)));
/* generation (32 bits) | 1 where any thread may help, past its nt (rumus_parallel_together) (1) | nt (16) */
static _Atomic uint64_t g_cur = 0;
static _Atomic uint32_t g_done = 0;      /* chunks of the current loop finished (a futex word) */
static _Atomic int g_caller_asleep = 0;  /* the caller sleeps on g_done until the last chunk is done */
static _Atomic uint32_t g_wake = 0;      /* bumped per loop; sleeping workers wait on it */
static int g_workers = 0;                /* started (they never exit) */
static int64_t g_spin_ns = 50000;
static int g_pool_forked = 0;
static pthread_mutex_t g_caller = PTHREAD_MUTEX_INITIALIZER; /* one loop at a time */
static pthread_mutex_t g_start = PTHREAD_MUTEX_INITIALIZER;  /* starting workers */
static _Thread_local int t_in_loop = 0;
static _Thread_local int t_self = 0; /* this thread's index in the pool: 0 on callers, w on worker w */
static _Atomic int64_t g_loops = 0, g_wakes = 0, g_step_outs = 0, g_moves = 0;
static _Atomic int g_out = 0; /* workers stepped out now */
/* set from Python (rumus_pool_set_step_out, tests) while workers read them: atomics, relaxed */
static _Atomic int g_step_out_least_nt = STEP_OUT_LEAST_NT; /* 0: never step out */
static _Atomic int64_t g_step_out_first_ns = STEP_OUT_FIRST_NS;
static _Atomic int g_count_injected_only = 0; /* tests: preemptions are only those injected */
static _Atomic int g_keep_apart = 1;          /* workers move off the caller's CPU (keep_off_callers_cpu) */
#ifndef POOL_FUTEX
static pthread_mutex_t g_sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_sleep_cond = PTHREAD_COND_INITIALIZER;
#endif

#define CUR_GEN(c) ((uint32_t)((c) >> 32))
#define CUR_ANY(c) ((int)(((c) >> 16) & 1))
#define CUR_NT(c) ((int)((c)&0xFFFF))

/* Worker w's bit in the futex bitset: workers 32 apart share one, and one woken for nothing goes back. */
static uint32_t wake_bit(int w) { return 1u << ((w - 1) & 31); }

#ifdef POOL_FUTEX
/* Sleep until woken, g_wake moved past `seen`, or the monotonic clock reads `deadline_ns`. */
static void sleep_until_changed_or(int w, uint32_t seen, int64_t deadline_ns) {
    const struct timespec at = {(time_t)(deadline_ns / 1000000000), (long)(deadline_ns % 1000000000)};
    syscall(SYS_futex, (uint32_t *)&g_wake, FUTEX_WAIT_BITSET_PRIVATE, seen, &at, NULL, wake_bit(w));
}
#endif

static void sleep_until_changed(int w, uint32_t seen) {
#ifdef POOL_FUTEX
    syscall(SYS_futex, (uint32_t *)&g_wake, FUTEX_WAIT_BITSET_PRIVATE, seen, NULL, NULL, wake_bit(w));
#else
    RUMUS_UNUSED(w);
    pthread_mutex_lock(&g_sleep_lock);
    while (atomic_load_explicit(&g_wake, memory_order_acquire) == seen) pthread_cond_wait(&g_sleep_cond, &g_sleep_lock);
    pthread_mutex_unlock(&g_sleep_lock);
#endif
}

/* Wake the sleeping ones of workers 1 .. nt-1 (the loop's own threads), and no other; those stepped out only
   for a loop whose parts must all run at once (any). */
static void wake_sleepers(int nt, int any) {
    uint32_t mask = 0;
    int count = 0;
    for (int w = 1; w < nt; w++)
        if (atomic_load_explicit(&g_slots[w].asleep, memory_order_seq_cst) && /* pairs with the worker's store */
            (any || !atomic_load_explicit(&g_slots[w].out, memory_order_relaxed))) {
            mask |= wake_bit(w);
            count++;
        }
    if (count == 0) return;
    atomic_fetch_add_explicit(&g_wakes, count, memory_order_relaxed);
#ifdef POOL_FUTEX
    syscall(SYS_futex, (uint32_t *)&g_wake, FUTEX_WAKE_BITSET_PRIVATE, INT32_MAX, NULL, NULL, mask);
#else
    pthread_mutex_lock(&g_sleep_lock);
    pthread_cond_broadcast(&g_sleep_cond);
    pthread_mutex_unlock(&g_sleep_lock);
#endif
}

/* Take one chunk of loop `gen` from slot s: its next one (own == 1) or its last one (a helper's); -1: none. */
static int64_t claim(int s, uint32_t gen, int own) {
    _Atomic uint64_t *word = &g_slots[s].word;
    uint64_t v = atomic_load_explicit(word, memory_order_acquire);
    for (;;) {
        const uint64_t next = (v >> 16) & 0xFFFF, end = v & 0xFFFF;
        if ((uint32_t)(v >> 32) != gen || next >= end) return -1;
        const uint64_t to = own ? v + (1u << 16) : v - 1;
        if (atomic_compare_exchange_weak_explicit(word, &v, to, memory_order_acq_rel, memory_order_acquire))
            return own ? (int64_t)next : (int64_t)end - 1;
    }
}

static void run_chunk(int64_t c) {
    const pool_loop L = g_loop;
    L.fn(L.ctx, L.n * c / L.chunks, L.n * (c + 1) / L.chunks);
    /* the last chunk wakes a sleeping caller; seq_cst against its flag-then-look (see finish) */
    const uint32_t done = atomic_fetch_add_explicit(&g_done, 1, memory_order_seq_cst) + 1;
#ifdef POOL_FUTEX
    if (done == (uint32_t)L.chunks && atomic_load_explicit(&g_caller_asleep, memory_order_seq_cst))
        syscall(SYS_futex, (uint32_t *)&g_done, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
#else
    RUMUS_UNUSED(done);
#endif
}

/* Thread `self` in loop `cur`: its own chunks in order (self < nt), then the others' from their ends, until
   none is left (or another loop began). */
static void run_loop(uint64_t cur, int self) {
    const uint32_t gen = CUR_GEN(cur);
    const int nt = CUR_NT(cur);
    int64_t c;
    if (self < nt)
        while ((c = claim(self, gen, 1)) >= 0) run_chunk(c);
    for (int i = 1; i <= nt; i++) {
        const int s = (self + i) % nt;
        while ((c = claim(s, gen, 0)) >= 0) run_chunk(c);
        if (CUR_GEN(atomic_load_explicit(&g_cur, memory_order_acquire)) != gen) return;
    }
}

/* Preemptions of the calling thread so far: involuntary context switches (another runnable thread was given
   its core), plus those a test injected for worker `self`. */
static int injected_only(void) { return atomic_load_explicit(&g_count_injected_only, memory_order_relaxed); }

static int64_t preemptions(int self) {
    int64_t n = atomic_load_explicit(&g_slots[self].injected, memory_order_relaxed);
#ifdef RUSAGE_THREAD
    struct rusage ru;
    if (!injected_only() && getrusage(RUSAGE_THREAD, &ru) == 0) n += (int64_t)ru.ru_nivcsw;
#endif
    return n;
}

/* Out until `deadline_ns`: asleep, and woken only for a loop whose parts must all run at once
   (rumus_parallel_together: OpenBLAS's jobs wait on each other), which it runs before sleeping again. The
   flag is set before the last look at the current loop, as in worker_main's sleep: a caller publishing such a
   loop either sees it and wakes this worker, or published before that look. `ran`: the generation of the
   loop it ran last (a loop of any threads published since still needs it). */
#ifdef POOL_FUTEX
static void sit_out(int self, uint32_t ran, int64_t deadline_ns) {
    atomic_store_explicit(&g_slots[self].out, 1, memory_order_relaxed);
    while (rumus_now_ns() < deadline_ns) {
        atomic_store_explicit(&g_slots[self].asleep, 1, memory_order_seq_cst);
        const uint32_t seen = atomic_load_explicit(&g_wake, memory_order_seq_cst);
        const uint64_t cur = atomic_load_explicit(&g_cur, memory_order_acquire);
        if (CUR_ANY(cur) && CUR_GEN(cur) != ran) {
            atomic_store_explicit(&g_slots[self].asleep, 0, memory_order_relaxed);
            ran = CUR_GEN(cur);
            run_loop(cur, self);
            continue;
        }
        sleep_until_changed_or(self, seen, deadline_ns);
    }
    atomic_store_explicit(&g_slots[self].asleep, 0, memory_order_relaxed);
    atomic_store_explicit(&g_slots[self].out, 0, memory_order_relaxed);
}
#endif

/* A worker's view of its core, for stepping out. */
typedef struct {
    int64_t checked_ns, preempted_ns, back_ns, out_ns, seen;
} core_watch;

/* Stepping out (issue 11's busy neighbour). A loop waits for every chunk taken, so a worker that another
   process's thread preempts while it runs a chunk holds the loop up for that thread's whole time slice
   (0.75-3 ms on Linux): with a spinner pinned on one of 16 cores, an MLP step of 1.5 ms took 1.25x its time
   alone, where the core's share is 1.03x. A worker preempted twice within STEP_OUT_WINDOW_NS shares its core,
   so it leaves the pool for a while (sleeping, never woken for a loop: its own chunks go to the others) and
   the other process keeps that core; back, it steps out again for twice as long (up to STEP_OUT_LONGEST_NS)
   while its core stays shared. The loop's chunks and their owners do not change, so neither do results.
   Only loops of g_step_out_least_nt or more threads, and at most a quarter of their threads at once: on
   a few cores one step out costs more than the sharing (measured on 2 cores: the MLP step 1.66x its time with
   a spinner beside it, 1.45x on one thread, but the transformer step 1.72x and 1.87x), and where most
   workers are preempted (another library's threads poll on every core) stepping out would leave the loop on
   too few. `cur`: the loop it just ran. Returns 1 if it stepped out (and is back). */
static int worker_step_out(int self, uint64_t cur, core_watch *cw) {
#ifndef POOL_FUTEX
    RUMUS_UNUSED(self);
    RUMUS_UNUSED(cur);
    RUMUS_UNUSED(cw);
    return 0;
#else
    const int nt = CUR_NT(cur), least = atomic_load_explicit(&g_step_out_least_nt, memory_order_relaxed);
    if (least <= 0 || nt < least) return 0;
    const int64_t t = rumus_now_ns();
    if (t - cw->checked_ns < STEP_OUT_CHECK_NS) return 0;
    const int64_t p = preemptions(self), before = cw->checked_ns;
    cw->checked_ns = t;
    if (p < cw->seen) cw->seen = p; /* a test switched to counting injected ones only */
    if (p <= cw->seen) return 0;
    /* (a test's injected preemptions count as close together however slowly a loaded machine runs its loops) */
    const int twice = p - cw->seen >= 2 && (injected_only() || t - before <= STEP_OUT_WINDOW_NS);
    const int shared = twice || t - cw->preempted_ns <= STEP_OUT_WINDOW_NS;
    cw->seen = p;
    cw->preempted_ns = t;
    if (!shared) return 0;
    int out = atomic_load_explicit(&g_out, memory_order_relaxed);
    do {
        if (out >= nt / 4) return 0;
    } while (!atomic_compare_exchange_weak_explicit(&g_out, &out, out + 1, memory_order_relaxed, memory_order_relaxed));
    /* back less than a second ago and shared again: twice as long */
    cw->out_ns = cw->back_ns && t - cw->back_ns < STEP_OUT_LONGEST_NS
                     ? (cw->out_ns * 2 < STEP_OUT_LONGEST_NS ? cw->out_ns * 2 : STEP_OUT_LONGEST_NS)
                     : atomic_load_explicit(&g_step_out_first_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&g_step_outs, 1, memory_order_relaxed);
    sit_out(self, CUR_GEN(cur), rumus_now_ns() + cw->out_ns);
    atomic_fetch_sub_explicit(&g_out, 1, memory_order_relaxed);
    cw->back_ns = cw->checked_ns = rumus_now_ns();
    cw->seen = preemptions(self); /* the switches of its sleep are voluntary; the count starts afresh */
    cw->preempted_ns = 0;
    return 1;
#endif
}

/* Keeping off the caller's CPU (issue 11's busy neighbour on few cores). The caller runs the step's Python
   and its own chunks, so a step goes at the caller's speed: a worker sharing its CPU halves it. Linux's
   wake-up placement puts a woken worker there whenever no CPU is idle, and the load balancer leaves two tasks
   on one CPU against one on another: with a process spinning on one of 2 cores, the worker queued behind the
   caller, the spinner kept a core to itself, and the caller waited for a CPU 35% of a transformer step (busy /
   alone 1.71x, the core's share 1.33x). So a worker that starts a loop on the caller's CPU moves: to its
   allowed CPUs less the caller's and, where some are left, less those the loop's other workers started their
   last loop on; then back to its mask as it was (read now: a user's own affinity stands), so the scheduler
   may move it again later. Measured paired (benchmarks/cpu_pool_ab.py --setting keep_apart): 1.45x on the dev
   machine, 1.31x on 2 of the 16-core host's CPUs (1.77x off); as good as every thread pinned by hand. Not when
   the loop has more threads than the CPUs it may use (some share one anyway), nor where the process may run
   on one CPU. The chunks do not change, so neither do results. */
static void keep_off_callers_cpu(int self, uint64_t cur, int caller_cpu) {
    int cpu = rumus_current_cpu();
    if (atomic_load_explicit(&g_slots[self].fake_on_callers, memory_order_relaxed) &&
        atomic_exchange_explicit(&g_slots[self].fake_on_callers, 0, memory_order_relaxed))
        cpu = caller_cpu;
    atomic_store_explicit(&g_slots[self].cpu, cpu, memory_order_relaxed);
#if defined(__linux__)
    if (cpu < 0 || cpu != caller_cpu || cpu >= CPU_SETSIZE || !atomic_load_explicit(&g_keep_apart, memory_order_relaxed))
        return;
    cpu_set_t allowed, to, unused;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || !CPU_ISSET(cpu, &allowed)) return;
    const int nt = CUR_NT(cur);
    if (CPU_COUNT(&allowed) < (nt > 2 ? nt : 2)) return;
    to = allowed;
    CPU_CLR(cpu, &to);
    unused = to;
    for (int s = 1; s < nt; s++) {
        const int c = s == self ? -1 : atomic_load_explicit(&g_slots[s].cpu, memory_order_relaxed);
        if (c >= 0 && c < CPU_SETSIZE) CPU_CLR(c, &unused);
    }
    if (CPU_COUNT(&unused) > 0) to = unused;
    if (sched_setaffinity(0, sizeof to, &to) != 0) return; /* moves this thread before it returns */
    sched_setaffinity(0, sizeof allowed, &allowed);
    atomic_store_explicit(&g_slots[self].cpu, rumus_current_cpu(), memory_order_relaxed);
    atomic_fetch_add_explicit(&g_moves, 1, memory_order_relaxed);
#else
    RUMUS_UNUSED(cur);
#endif
}

static void *worker_main(void *arg) {
    const int self = (int)(intptr_t)arg;
    t_self = self;
    t_in_loop = 1; /* a loop inside a chunk runs on this thread */
    uint32_t seen = atomic_load_explicit(&g_wake, memory_order_acquire);
    core_watch cw = {0, 0, 0, 0, preemptions(self)};
    for (;;) {
        /* a loop takes its nt threads, no more: workers past its nt stay out (a loop split two ways right
           after one of the whole budget finds many workers still polling, and only worker 1 joins it) */
        const uint64_t cur = atomic_load_explicit(&g_cur, memory_order_acquire);
        if (self < CUR_NT(cur) || CUR_ANY(cur)) {
            keep_off_callers_cpu(self, cur, atomic_load_explicit(&g_slots[0].cpu, memory_order_relaxed));
            run_loop(cur, self);
            if (!CUR_ANY(cur) && worker_step_out(self, cur, &cw)) {
                seen = atomic_load_explicit(&g_wake, memory_order_acquire);
                continue;
            }
        }
        /* poll for the next loop for a while: kernels of one step follow each other within microseconds */
        const int64_t until = rumus_now_ns() + g_spin_ns;
        int found = 0;
        for (int i = 1;; i++) {
            const uint32_t w = atomic_load_explicit(&g_wake, memory_order_acquire);
            if (w != seen) {
                seen = w;
                found = 1;
                break;
            }
            rumus_cpu_relax();
            if ((i & 31) == 0 && rumus_now_ns() >= until) break;
        }
        if (found) continue;
        /* asleep, then a last look at g_wake (in the futex call): a loop published in between either sees the
           flag and wakes this worker, or changed g_wake before the look, so the call returns at once */
        atomic_store_explicit(&g_slots[self].asleep, 1, memory_order_seq_cst);
        sleep_until_changed(self, seen);
        atomic_store_explicit(&g_slots[self].asleep, 0, memory_order_relaxed);
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
        const int rc = pthread_create(&tid, &attr, worker_main, (void *)(intptr_t)(g_workers + 1));
        pthread_attr_destroy(&attr);
        if (rc != 0) break;
        g_workers++;
    }
    pthread_mutex_unlock(&g_start);
    return g_workers;
}

/* Publish a loop of `chunks` chunks over nt threads' runs (any = 1: every thread that comes may help) and
   wake those of the nt - 1 workers that sleep; the caller holds g_caller. Returns the published word. */
static uint64_t publish(rumus_range_fn fn, void *ctx, int64_t n, int64_t chunks, int nt, int any) {
    g_loop = (pool_loop){fn, ctx, n, chunks};
    atomic_store_explicit(&g_slots[0].cpu, rumus_current_cpu(), memory_order_relaxed);
    atomic_store_explicit(&g_done, 0, memory_order_relaxed);
    const uint64_t gen = (uint64_t)(CUR_GEN(atomic_load_explicit(&g_cur, memory_order_relaxed)) + 1u);
    for (int s = 0; s < nt; s++) {
        const uint64_t lo = (uint64_t)(chunks * s / nt), hi = (uint64_t)(chunks * (s + 1) / nt);
        atomic_store_explicit(&g_slots[s].word, (gen << 32) | (lo << 16) | hi, memory_order_relaxed);
    }
    const uint64_t cur = (gen << 32) | ((uint64_t)any << 16) | (uint64_t)nt;
    atomic_store_explicit(&g_cur, cur, memory_order_release);
    atomic_fetch_add_explicit(&g_wake, 1, memory_order_seq_cst);
    atomic_fetch_add_explicit(&g_loops, 1, memory_order_relaxed);
    /* polling workers see the new loop by themselves; wake the loop's sleeping ones only */
    wake_sleepers(nt, any);
    return cur;
}

/* The caller's part: its own chunks and any left, then wait for the chunks others took: polling for
   g_spin_ns, then yielding its CPU to any thread waiting for it, and after CALLER_SLEEP_AFTER_NS asleep
   until the last chunk's thread wakes it: a chunk that late is held by a worker that lost its CPU for a time
   slice, and the caller's CPU may serve another thread meanwhile. (It used to sched_yield() for as long as
   it waited, which returns at once when no thread waits for this CPU: it kept the CPU busy for nothing.)
   Not asleep sooner: on a VM waking a thread that sleeps costs up to tens of microseconds. */
static void finish(uint64_t cur, int64_t chunks) {
    t_in_loop = 1;
    run_loop(cur, 0);
    t_in_loop = 0;
    int64_t since = 0;
    for (int i = 1;; i++) {
        if (atomic_load_explicit(&g_done, memory_order_acquire) >= (uint32_t)chunks) return;
        if ((i & 31) != 0) {
            rumus_cpu_relax();
            continue;
        }
        const int64_t t = rumus_now_ns();
        if (since == 0) since = t;
        if (t - since < g_spin_ns) continue;
        if (t - since < CALLER_SLEEP_AFTER_NS) {
            sched_yield();
            continue;
        }
#ifdef POOL_FUTEX
        /* asleep, then a last look: the last chunk's thread either sees the flag and wakes it, or counted
           before the look (and a count after the look makes the futex call return at once) */
        atomic_store_explicit(&g_caller_asleep, 1, memory_order_seq_cst);
        const uint32_t seen = atomic_load_explicit(&g_done, memory_order_seq_cst);
        if (seen < (uint32_t)chunks) syscall(SYS_futex, (uint32_t *)&g_done, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
        atomic_store_explicit(&g_caller_asleep, 0, memory_order_relaxed);
#else
        sched_yield();
#endif
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
    finish(publish(fn, ctx, n, chunks, nt, 0), chunks);
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
    /* one chunk per part, part s worker s's own; a thread takes another's part only after its own is done
       (or, past n, when it has none), and parts that wait on each other cannot be done before all have
       started, so n threads run them at once */
    finish(publish(fn, ctx, n, n, n, 1), n);
    pthread_mutex_unlock(&g_caller);
    return 1;
}

void rumus_pool_set_spin_us(int64_t us) { g_spin_ns = (us < 0 ? 0 : us) * 1000; }
int64_t rumus_pool_get_spin_us(void) { return g_spin_ns / 1000; }
int rumus_pool_workers(void) { return g_workers; }
int64_t rumus_pool_loops(void) { return atomic_load_explicit(&g_loops, memory_order_relaxed); }
int64_t rumus_pool_wakes(void) { return atomic_load_explicit(&g_wakes, memory_order_relaxed); }
int64_t rumus_pool_step_outs(void) { return atomic_load_explicit(&g_step_outs, memory_order_relaxed); }
int rumus_pool_self(void) { return t_self; }
int rumus_pool_out(void) { return atomic_load_explicit(&g_out, memory_order_relaxed); }
int64_t rumus_pool_moves(void) { return atomic_load_explicit(&g_moves, memory_order_relaxed); }
void rumus_pool_set_keep_apart(int on) { atomic_store_explicit(&g_keep_apart, on != 0, memory_order_relaxed); }
int rumus_pool_get_keep_apart(void) { return atomic_load_explicit(&g_keep_apart, memory_order_relaxed); }
void rumus_pool_fake_on_callers_cpu(int w) {
    if (w >= 1 && w <= MAX_WORKERS) atomic_store_explicit(&g_slots[w].fake_on_callers, 1, memory_order_relaxed);
}

void rumus_pool_set_step_out(int least_nt, int64_t first_us) {
    atomic_store_explicit(&g_step_out_least_nt, least_nt < 0 ? 0 : least_nt, memory_order_relaxed);
    const int64_t first_ns = first_us > 0 ? first_us * 1000 : STEP_OUT_FIRST_NS;
    atomic_store_explicit(&g_step_out_first_ns, first_ns, memory_order_relaxed);
}
int rumus_pool_get_step_out(void) { return atomic_load_explicit(&g_step_out_least_nt, memory_order_relaxed); }

/* For tests: worker w counts `k` more preemptions (it looks after its next loop); only = 1: the workers count
   only those (the machine's own preemptions would make other workers step out at moments a test cannot know). */
void rumus_pool_count_injected_only(int only) {
    atomic_store_explicit(&g_count_injected_only, only, memory_order_relaxed);
}
void rumus_pool_inject_preemptions(int w, int k) {
    if (w >= 1 && w <= MAX_WORKERS) atomic_fetch_add_explicit(&g_slots[w].injected, k, memory_order_relaxed);
}

/* After fork(): the workers were not copied. Every loop runs on the calling thread. */
void rumus_pool_after_fork_child(void) {
    g_pool_forked = 1;
    pthread_mutex_init(&g_caller, NULL);
    pthread_mutex_init(&g_start, NULL);
    t_in_loop = 0;
}
