/* What code on the kernels' thread pool (csrc/pool.c) may ask: the monotonic clock, one polite step of a
   busy wait, the CPU it runs on, and its index in the pool. Shared by pool.c and its test probes
   (pool_probes.c). A .c file including this defines _GNU_SOURCE first (sched_getcpu). */
#ifndef RUMUS_POOL_THREAD_H
#define RUMUS_POOL_THREAD_H

#include <sched.h>
#include <stdint.h>
#include <time.h>

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

/* The CPU the calling thread runs on (-1 where unknown). */
static inline int rumus_current_cpu(void) {
#if defined(__linux__)
    return sched_getcpu();
#else
    return -1;
#endif
}

/* The calling thread's index in the pool: 0 on a caller (any thread outside the pool), w on worker w. */
int rumus_pool_self(void);

#endif
