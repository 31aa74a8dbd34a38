/* Test probes of the kernels' thread pool (csrc/pool.c): loops whose units record which thread, and on which
   CPU, ran them, busy for set times, so tests can check ownership, keeping apart, the caller's wait and
   rumus_parallel_together's promise without timing real kernels. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdatomic.h>
#include <stddef.h>

#include "internal/pool_thread.h"
#include "internal/rumus.h"
#include "runtime.h"

/* A loop of n units over nt threads: each unit records in owner[unit] the pool index of the thread that ran
   it (0: the caller) and, where cpu is not NULL, in cpu[unit] the CPU it ran on, then stays busy for
   caller_spin_ns on the caller and spin_ns on a worker (uneven: a caller left waiting for a worker's chunk). */
typedef struct {
    int32_t *owner, *cpu;
    int64_t spin_ns, caller_spin_ns;
} probe_job;

static void probe_range(void *ctx, int64_t u0, int64_t u1) {
    const probe_job *j = (const probe_job *)ctx;
    const int self = rumus_pool_self();
    for (int64_t u = u0; u < u1; u++) {
        j->owner[u] = self;
        if (j->cpu) j->cpu[u] = rumus_current_cpu();
        const int64_t until = rumus_now_ns() + (self == 0 ? j->caller_spin_ns : j->spin_ns);
        while (rumus_now_ns() < until) rumus_cpu_relax();
    }
}

void rumus_pool_probe_where(int nt, int64_t n, int64_t caller_spin_ns, int64_t spin_ns, int32_t *owner,
                            int32_t *cpu) {
    probe_job j = {owner, cpu, spin_ns, caller_spin_ns};
    rumus_parallel_for(nt, n, probe_range, &j);
}

void rumus_pool_probe(int nt, int64_t n, int64_t spin_ns, int32_t *owner) {
    rumus_pool_probe_where(nt, n, spin_ns, spin_ns, owner, NULL);
}

/* rumus_parallel_together's promise. n parts, each recording its thread's pool index in owner[part] and then
   waiting (up to 2 s) until all n have started, as OpenBLAS's jobs wait on each other. Returns how many parts
   gave up waiting (0: they ran at once), or -1 where the pool could not take it. */
typedef struct {
    int32_t *owner;
    _Atomic int started, gave_up;
    int n;
} together_job;

static void together_range(void *ctx, int64_t p0, int64_t p1) {
    together_job *j = (together_job *)ctx;
    for (int64_t p = p0; p < p1; p++) {
        j->owner[p] = rumus_pool_self();
        atomic_fetch_add_explicit(&j->started, 1, memory_order_acq_rel);
        const int64_t until = rumus_now_ns() + 2000000000LL;
        while (atomic_load_explicit(&j->started, memory_order_acquire) < j->n) {
            if (rumus_now_ns() > until) {
                atomic_fetch_add_explicit(&j->gave_up, 1, memory_order_relaxed);
                break;
            }
            rumus_cpu_relax();
        }
    }
}

int rumus_pool_probe_together(int n, int32_t *owner) {
    together_job j = {owner, 0, 0, n};
    if (!rumus_parallel_together(n, together_range, &j)) return -1;
    return atomic_load_explicit(&j.gave_up, memory_order_relaxed);
}
