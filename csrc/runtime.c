/* Threading policy, OpenBLAS's jobs on the kernels' thread pool, and the generic strided N-d iterator
   every elementwise kernel runs on.

   One thread budget: the C kernels' loops and numpy's OpenBLAS share one pool of threads (csrc/pool.c).
   OpenBLAS hands its jobs to rumus_blas_callback (openblas_set_threads_callback_function), which runs
   them on the pool, so OpenBLAS's own worker threads never get work and never spin against the
   kernels' threads (they spun ~2^28 cycles after every call: 15 cores busy on a 16-core host). */
#include <pthread.h>
#include <stdlib.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "internal/rumus.h"
#include "runtime.h"

static int g_threads = 1;
static int64_t g_threshold = 65536;

/* the budget: every loop names how many threads its work needs, up to this (csrc/pool.c) */
void rumus_set_num_threads(int n) { g_threads = n < 1 ? 1 : n; }

int rumus_get_num_threads(void) { return g_threads; }

/* Grains, one per kernel class (internal/rumus.h lists the classes). A grain is the work below which a
   kernel stays on the calling thread and wakes no other; above it each thread gets at least half a grain,
   some 15-50 us of that class's work on one core, while waking a thread and waiting for it cost a few us
   (more with more threads and on a loaded machine). Measured on the dev Xeon, one thread, under load (so
   ~2x the quiet figures): an add 0.55 ns per element, softmax 3.6 and cross-entropy 4.0 ns per element, a
   BLAS multiply-add 0.046 ns, flash attention ~0.38 ns per multiply-add of its own loops (csrc/gemm_blocked.c
   says why its grain is 2^19). So the thread count of a kernel follows its size, never just the budget: a
   128x10x256 product stays on one thread, a 128x256x256 one (32 blocks) takes up to 32, a 32K-element add
   1 (split in two, the MLP step's 128x256 ops made the step slower with more threads).
   rumus_set_parallel_threshold sets the elementwise grain only. */
void rumus_set_parallel_threshold(int64_t elements) { g_threshold = elements < 2 ? 2 : elements; }
int64_t rumus_get_parallel_threshold(void) { return g_threshold; }

int64_t rumus_grain(int kernel_class) {
    switch (kernel_class) {
    case 0: return g_threshold;
    case 1: return RUMUS_GRAIN_ROWS;
    case 2: return RUMUS_GRAIN_MACS;
    default: return RUMUS_GRAIN_LOOP_MACS;
    }
}

int rumus_threads_for_grain(int64_t work, int64_t grain) {
    if (g_threads <= 1 || work < grain) return 1;
    const int64_t most = work / (grain / 2); /* keep >= grain/2 of work per thread */
    return most < g_threads ? (int)(most < 1 ? 1 : most) : g_threads;
}

int rumus_threads_for(int64_t work) { return rumus_threads_for_grain(work, g_threshold); }


int rumus_threads_for_units_grain(int64_t units, int64_t work, int64_t grain) {
    const int nt = rumus_threads_for_grain(work, grain);
    return units < nt ? (int)(units < 1 ? 1 : units) : nt;
}

int rumus_threads_for_units(int64_t units, int64_t work) { return rumus_threads_for_units_grain(units, work, g_threshold); }

/* ---- freed memory kept for the next step ----------------------------------------------------------

   Every op's output is a fresh numpy buffer. glibc serves a large one from mmap (then returns it to the
   kernel on free) or from the heap top (which it trims once more than M_TRIM_THRESHOLD is free there), so
   the same step allocates the same megabytes again and again and takes a page fault on every 4 KiB page
   the kernel writes first: measured on the CNN step, the conv bias add's output faulted on all of its
   784 pages every step, making a memory-speed add 2.5x slower than a relu of the same size (more with
   many threads: faults serialise on the process's page tables). Allocations up to `mmap_max` bytes
   therefore come from the heap, and up to `keep` free bytes stay there for the next step.
   Returns 1 where applied (glibc), 0 elsewhere. */
int rumus_malloc_keep(int64_t mmap_max, int64_t keep) {
#if defined(__GLIBC__)
    int ok = 1;
    if (mmap_max > 0) ok &= mallopt(M_MMAP_THRESHOLD, (int)(mmap_max > INT32_MAX ? INT32_MAX : mmap_max)) == 1;
    if (keep > 0) ok &= mallopt(M_TRIM_THRESHOLD, (int)(keep > INT32_MAX ? INT32_MAX : keep)) == 1;
    return ok;
#else
    RUMUS_UNUSED(mmap_max);
    RUMUS_UNUSED(keep);
    return 0;
#endif
}

/* ---- OpenBLAS's jobs ---------------------------------------------------------------------------- */

#define BLAS_JOBS_ON_STACK 256

typedef void (*blas_dojob_fn)(int thread_num, void *jobdata, int dojob_data);

typedef struct {
    blas_dojob_fn fn;
    char *data;
    size_t elsize;
    int arg, job;
} blas_job;

static void (*g_blas_set_threads)(int) = NULL; /* openblas_set_num_threads of the attached library */
static int g_blas_threads = 0;                  /* what it was last set to */
static int64_t g_blas_calls = 0, g_blas_jobs = 0;
static pthread_mutex_t g_blas_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int t_in_blas = 0;

static void *blas_job_main(void *p) {
    const blas_job *j = (const blas_job *)p;
    j->fn(j->job, j->data + (size_t)j->job * j->elsize, j->arg);
    return NULL;
}

static void blas_jobs_range(void *ctx, int64_t begin, int64_t end) {
    blas_job *jobs = (blas_job *)ctx;
    for (int64_t i = begin; i < end; i++) blas_job_main(&jobs[i]);
}

/* Jobs [from, to) on threads of their own; returns how many were started (the rest run here). */
static int blas_spawn(blas_job *jobs, pthread_t *tids, int from, int to) {
    int started = 0;
    for (int i = from; i < to; i++) {
        if (pthread_create(&tids[i], NULL, blas_job_main, &jobs[i]) != 0) break;
        started++;
    }
    return started;
}

/* OpenBLAS's level-3 jobs wait on each other (one packs a panel the others read), so all `numjobs`
   must run at once: on the kernels' pool, one job per thread (csrc/pool.c, rumus_parallel_together), or,
   where it cannot promise that many threads (a fork()ed child, a call from inside a kernel's loop, another
   caller using the pool), on threads started for the call. */
void rumus_blas_callback(int sync, void *dojob, int numjobs, size_t elsize, void *jobdata, int dojob_data) {
    RUMUS_UNUSED(sync); /* OpenBLAS passes 1; every job has finished when this returns either way */
    blas_dojob_fn fn = (blas_dojob_fn)dojob;
    char *data = (char *)jobdata;
    if (numjobs <= 0) return;
    if (numjobs == 1) {
        fn(0, data, dojob_data);
        return;
    }
    /* job i uses OpenBLAS's scratch buffer i: two calls at once (two Python threads) would share them */
    const int nested = t_in_blas;
    if (!nested) pthread_mutex_lock(&g_blas_lock);
    t_in_blas = 1;
    g_blas_calls++;
    g_blas_jobs += numjobs;
    blas_job jobs_here[BLAS_JOBS_ON_STACK];
    pthread_t tids_here[BLAS_JOBS_ON_STACK];
    blas_job *jobs = jobs_here;
    pthread_t *tids = tids_here;
    if (numjobs > BLAS_JOBS_ON_STACK) { /* more jobs than cores on any machine seen so far */
        jobs = (blas_job *)malloc(sizeof(blas_job) * (size_t)numjobs);
        tids = (pthread_t *)malloc(sizeof(pthread_t) * (size_t)numjobs);
        if (!jobs || !tids) abort(); /* dropping a job would leave part of the product unwritten */
    }
    for (int i = 0; i < numjobs; i++) jobs[i] = (blas_job){fn, data, elsize, dojob_data, i};
    if (nested || !rumus_parallel_together(numjobs, blas_jobs_range, jobs)) {
        const int extra = blas_spawn(jobs, tids, 1, numjobs);
        blas_job_main(&jobs[0]);
        for (int i = 1 + extra; i < numjobs; i++) blas_job_main(&jobs[i]);
        for (int i = 1; i < 1 + extra; i++) pthread_join(tids[i], NULL);
    }
    if (jobs != jobs_here) {
        free(jobs);
        free(tids);
    }
    t_in_blas = nested;
    if (!nested) pthread_mutex_unlock(&g_blas_lock);
}

int rumus_blas_attach(uintptr_t set_callback, uintptr_t set_threads) {
    if (!set_callback || !set_threads) return 0;
    void (*set_cb)(void (*)(int, void *, int, size_t, void *, int)) =
        (void (*)(void (*)(int, void *, int, size_t, void *, int)))set_callback;
    g_blas_set_threads = (void (*)(int))set_threads;
    g_blas_threads = 0;
    set_cb(rumus_blas_callback);
    return 1;
}

int rumus_blas_attached(void) { return g_blas_set_threads != NULL; }

/* OpenBLAS's thread count is one global of the library. RUMUS's GEMMs and convolutions set it to 1 while
   their blocks run (each block one plain call: the split is ours, from the shape alone, so the bits are the
   same at every thread count) and restore the budget after. Two Python threads in such regions at once
   used to race: the first to finish restored the budget while the other's blocks still ran, and those
   blocks were then split by OpenBLAS (different bits, jobs from inside the pool's loops). Regions are now
   counted: the first one in sets 1, the last one out restores the budget, and a budget set meanwhile
   waits for the last one out. (numpy's own calls from another Python thread during a region still see one
   thread: OpenBLAS has no per-thread setting in its pthreads builds.) */
static pthread_mutex_t g_blas_serial_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_blas_serial_depth = 0;
static int g_blas_budget = 0; /* the thread count outside regions (0: never set) */

static void blas_apply(int n) {
    if (g_blas_set_threads && n > 0 && n != g_blas_threads) {
        g_blas_set_threads(n);
        g_blas_threads = n;
    }
}

void rumus_blas_set_threads(int n) {
    if (n < 1) n = 1;
    pthread_mutex_lock(&g_blas_serial_lock);
    g_blas_budget = n;
    if (g_blas_serial_depth == 0) blas_apply(n);
    pthread_mutex_unlock(&g_blas_serial_lock);
}

int rumus_blas_get_threads(void) { return g_blas_budget; }

void rumus_blas_serial_begin(void) {
    pthread_mutex_lock(&g_blas_serial_lock);
    if (g_blas_serial_depth++ == 0) blas_apply(1);
    pthread_mutex_unlock(&g_blas_serial_lock);
}

void rumus_blas_serial_end(void) {
    pthread_mutex_lock(&g_blas_serial_lock);
    if (--g_blas_serial_depth == 0) blas_apply(g_blas_budget);
    pthread_mutex_unlock(&g_blas_serial_lock);
}

int64_t rumus_blas_calls(void) { return g_blas_calls; }
int64_t rumus_blas_jobs(void) { return g_blas_jobs; }

/* The pool's workers do not survive fork(): children run every kernel on their one thread (what PyTorch
   does too), and OpenBLAS's jobs on threads started per call. A lock some other thread of the parent held
   is re-made free (only this thread was copied). */
void rumus_after_fork_child(void) {
    g_threads = 1;
    rumus_pool_after_fork_child();
    pthread_mutex_init(&g_blas_lock, NULL);
    t_in_blas = 0;
}


int64_t rumus_find_named(const void *table, int64_t count, size_t entry_size, const char *name) {
    const char *entries = (const char *)table;
    for (int64_t i = 0; i < count; i++) {
        const char *entry_name; /* the first member, at offset 0 of every entry */
        memcpy(&entry_name, entries + i * (int64_t)entry_size, sizeof entry_name);
        if (strcmp(entry_name, name) == 0) return i;
    }
    return -1;
}

int64_t rumus_table_find(const rumus_loop_entry *table, int64_t count, const char *name) {
    return rumus_find_named(table, count, sizeof *table, name);
}

/* Elements [start, end) of the flattened (row-major) iteration space, one innermost run at a time. */
static void run_range(int nops, int ndim, const int64_t *shape, const int64_t *bst, char **base,
                      rumus_loop_fn fn, const void *ctx, int64_t start, int64_t end) {
    int64_t idx[RUMUS_MAX_DIMS];
    int64_t inner[RUMUS_MAX_OPS];
    char *p[RUMUS_MAX_OPS];
    const int last = ndim - 1;
    int64_t rem = start;
    for (int d = last; d >= 0; d--) {
        idx[d] = rem % shape[d];
        rem /= shape[d];
    }
    for (int k = 0; k < nops; k++) inner[k] = bst[k * ndim + last];
    int64_t pos = start;
    while (pos < end) {
        for (int k = 0; k < nops; k++) {
            char *q = base[k];
            const int64_t *st = bst + k * ndim;
            for (int d = 0; d < ndim; d++) q += idx[d] * st[d];
            p[k] = q;
        }
        int64_t n = shape[last] - idx[last];
        if (n > end - pos) n = end - pos;
        fn(n, p, inner, ctx);
        pos += n;
        idx[last] += n;
        if (idx[last] >= shape[last]) {
            idx[last] = 0;
            for (int d = last - 1; d >= 0; d--) {
                if (++idx[d] < shape[d]) break;
                idx[d] = 0;
            }
        }
    }
}

/* Tiled walk over the last two dims, for operands laid out "across" the iteration order (a
   transposed read or write): TILE x TILE blocks keep both sides' cache lines in use.
   Work units are (position in the leading dims, band of TILE rows). */
#define TILE 64
static void run_tiles(int nops, int ndim, const int64_t *shape, const int64_t *bst, char **base, rumus_loop_fn fn,
                      const void *ctx, int64_t u0, int64_t u1) {
    const int r = ndim - 2, c = ndim - 1;
    const int64_t bands = (shape[r] + TILE - 1) / TILE;
    int64_t inner[RUMUS_MAX_OPS];
    char *p[RUMUS_MAX_OPS], *lead[RUMUS_MAX_OPS];
    for (int k = 0; k < nops; k++) inner[k] = bst[k * ndim + c];
    for (int64_t u = u0; u < u1; u++) {
        int64_t rem = u / bands;
        const int64_t i0 = (u % bands) * TILE, i1 = i0 + TILE < shape[r] ? i0 + TILE : shape[r];
        for (int k = 0; k < nops; k++) lead[k] = base[k];
        for (int d = r - 1; d >= 0; d--) {
            const int64_t q = rem % shape[d];
            rem /= shape[d];
            for (int k = 0; k < nops; k++) lead[k] += q * bst[k * ndim + d];
        }
        for (int64_t j0 = 0; j0 < shape[c]; j0 += TILE) {
            const int64_t n = shape[c] - j0 < TILE ? shape[c] - j0 : TILE;
            for (int64_t i = i0; i < i1; i++) {
                for (int k = 0; k < nops; k++) p[k] = lead[k] + i * bst[k * ndim + r] + j0 * inner[k];
                fn(n, p, inner, ctx);
            }
        }
    }
}

/* Whether some operand steps further along the last dim than along the one before it. */
static int crossed(int nops, int ndim, const int64_t *shape, const int64_t *bst) {
    if (ndim < 2 || shape[ndim - 1] < TILE / 2 || shape[ndim - 2] < TILE / 2) return 0;
    for (int k = 0; k < nops; k++) {
        const int64_t a = bst[k * ndim + ndim - 2], b = bst[k * ndim + ndim - 1];
        if (a != 0 && (b < 0 ? -b : b) > (a < 0 ? -a : a)) return 1;
    }
    return 0;
}

/* One elementwise loop on the pool: its operands, and how [begin, end) of the pool's range maps to them. */
typedef struct {
    int nops, ndim;
    const int64_t *shape, *bst;
    char **base;
    rumus_loop_fn fn;
    const void *ctx;
    int64_t total;
} iterate_job;

/* A 1-d run, in units of 64 elements (chunk borders on multiples of 64 keep vector loops aligned). */
static void iterate_flat(void *p, int64_t u0, int64_t u1) {
    const iterate_job *j = (const iterate_job *)p;
    const int64_t s = u0 * 64, e = u1 * 64 < j->total ? u1 * 64 : j->total;
    char *q[RUMUS_MAX_OPS];
    for (int k = 0; k < j->nops; k++) q[k] = j->base[k] + s * j->bst[k];
    j->fn(e - s, q, j->bst, j->ctx);
}

static void iterate_tiles(void *p, int64_t u0, int64_t u1) {
    const iterate_job *j = (const iterate_job *)p;
    run_tiles(j->nops, j->ndim, j->shape, j->bst, j->base, j->fn, j->ctx, u0, u1);
}

static void iterate_range(void *p, int64_t s, int64_t e) {
    const iterate_job *j = (const iterate_job *)p;
    run_range(j->nops, j->ndim, j->shape, j->bst, j->base, j->fn, j->ctx, s, e);
}

void rumus_iterate(int nops, const int64_t *meta, char **base, const int *isz, rumus_loop_fn fn,
                   const void *ctx) {
    const int ndim = (int)meta[0];
    const int64_t *shape = meta + 1;
    int64_t total = 1;
    for (int d = 0; d < ndim; d++) total *= shape[d];
    if (total <= 0) return;
    int64_t bst[RUMUS_MAX_OPS * RUMUS_MAX_DIMS];
    for (int k = 0; k < nops; k++)
        for (int d = 0; d < ndim; d++) bst[k * ndim + d] = meta[1 + ndim + k * ndim + d] * isz[k];
    const int nt = rumus_threads_for(total);
    iterate_job j = {nops, ndim, shape, bst, base, fn, ctx, total};
    if (ndim == 1) { /* the common case after collapsing: one run, no index bookkeeping */
        if (nt <= 1)
            fn(total, base, bst, ctx);
        else
            rumus_parallel_for(nt, (total + 63) / 64, iterate_flat, &j);
        return;
    }
    if (crossed(nops, ndim, shape, bst)) {
        const int64_t units = total / (shape[ndim - 1] * shape[ndim - 2]) * ((shape[ndim - 2] + TILE - 1) / TILE);
        rumus_parallel_for(nt, units, iterate_tiles, &j);
        return;
    }
    rumus_parallel_for(nt, total, iterate_range, &j);
}

void rumus_rlayout_parse(const int64_t *meta, int64_t osz, int64_t xsz, rumus_rlayout *L) {
    const int nk = (int)meta[0];
    const int64_t *m = meta + 1;
    L->nk = nk;
    L->outer = 1;
    for (int d = 0; d < nk; d++) {
        L->ksh[d] = m[d];
        L->kout[d] = m[nk + d] * osz;
        L->kin[d] = m[2 * nk + d] * xsz;
        L->outer *= m[d];
    }
    m += 3 * nk;
    const int nr = (int)m[0];
    m += 1;
    L->nr = nr;
    L->inner = 1;
    for (int d = 0; d < nr; d++) {
        L->rsh[d] = m[d];
        L->rin[d] = m[nr + d] * xsz;
        L->inner *= m[d];
    }
}
