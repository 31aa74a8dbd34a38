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
