void rumus_set_num_threads(int n);
int rumus_get_num_threads(void);
void rumus_set_parallel_threshold(int64_t elements);
int64_t rumus_get_parallel_threshold(void);
/* the grain of a kernel class: 0 elementwise (elements), 1 row kernels (elements), 2 BLAS products
   (multiply-adds), 3 the kernels' own products (multiply-adds); see internal/rumus.h */
int64_t rumus_grain(int kernel_class);
/* threads for `work` units of a class with this grain (internal/rumus.h), and the pool's loop, for kernels
   compiled at run time (rm.compile's fused chains, backends/rumus_cpu/fused.py) */
int rumus_threads_for_grain(int64_t work, int64_t grain);
void rumus_parallel_for(int nt, int64_t n, void (*fn)(void *, int64_t, int64_t), void *ctx);
void rumus_after_fork_child(void);
/* the kernels' thread pool (csrc/pool.c): how long idle workers poll before sleeping, and counters */
void rumus_pool_set_spin_us(int64_t us);
int64_t rumus_pool_get_spin_us(void);
int rumus_pool_workers(void);
int64_t rumus_pool_loops(void);
int64_t rumus_pool_wakes(void);
void rumus_pool_after_fork_child(void);
void rumus_pool_probe(int nt, int64_t n, int64_t spin_ns, int32_t *owner);
/* stepping out (a worker whose core another process shares sleeps a while): loops of least_nt threads or
   more (0: never), the first time out in microseconds (0: the default); counters; a test's preemptions */
void rumus_pool_set_step_out(int least_nt, int64_t first_us);
int rumus_pool_get_step_out(void);
int64_t rumus_pool_step_outs(void);
int rumus_pool_out(void);
void rumus_pool_inject_preemptions(int w, int k);
void rumus_pool_count_injected_only(int only);
int rumus_pool_probe_together(int n, int32_t *owner);
/* keeping off the caller's CPU (a worker that starts a loop there moves): on/off, moves so far; for tests a
   worker that takes itself to be there at its next loop, and a probe that records each unit's CPU */
void rumus_pool_set_keep_apart(int on);
int rumus_pool_get_keep_apart(void);
int64_t rumus_pool_moves(void);
void rumus_pool_fake_on_callers_cpu(int w);
/* for tests (pool_probes.c): units busy for caller_spin_ns on the caller and spin_ns on a worker, each
   recording its thread and (cpu not NULL) its CPU */
void rumus_pool_probe_where(int nt, int64_t n, int64_t caller_spin_ns, int64_t spin_ns, int32_t *owner,
                            int32_t *cpu);
/* glibc: large buffers from the heap, freed memory kept for the next step (see runtime.c) */
int rumus_malloc_keep(int64_t mmap_max, int64_t keep);
/* one thread budget: OpenBLAS's jobs run on the kernels' threads (see runtime.c) */
void rumus_blas_callback(int sync, void *dojob, int numjobs, size_t elsize, void *jobdata, int dojob_data);
int rumus_blas_attach(uintptr_t set_callback, uintptr_t set_threads);
int rumus_blas_attached(void);
void rumus_blas_set_threads(int n);
int rumus_blas_get_threads(void);
/* RUMUS's own BLAS calls on one thread each, from begin to end (nested and concurrent regions counted) */
void rumus_blas_serial_begin(void);
void rumus_blas_serial_end(void);
int64_t rumus_blas_calls(void);
int64_t rumus_blas_jobs(void);
