/* Private helpers shared by the kernel files (never fed to cffi's cdef). */
#ifndef RUMUS_INTERNAL_H
#define RUMUS_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RUMUS_MAX_DIMS 64
#define RUMUS_MAX_OPS 4

/* One contiguous run of an elementwise loop: n elements, p[k] the k-th operand (output first),
   s[k] its byte stride along the run; ctx carries the op's scalar parameters. */
typedef void (*rumus_loop_fn)(int64_t n, char **p, const int64_t *s, const void *ctx);

/* A named loop with the item size of each operand, so strides can arrive in elements. */
typedef struct {
    const char *name;
    rumus_loop_fn fn;
    int isz[RUMUS_MAX_OPS];
} rumus_loop_entry;

/* Threads for a kernel, from its work size: 1 below its class's grain (or without OpenMP), then one
   thread per half grain of work, up to the budget (csrc/runtime.c says how the grains were chosen).
   Classes, each with its unit of work:
   - streaming elementwise loops, reductions, copies, norms: elements (rumus_threads_for; the grain is
     rumus_get_parallel_threshold, 65536 unless set);
   - row kernels with an exp or log per element (softmax, log_softmax, cross-entropy): elements, RUMUS_GRAIN_ROWS;
   - products through BLAS (GEMM blocks, conv's GEMMs): multiply-adds, RUMUS_GRAIN_MACS;
   - products in the kernels' own loops (flash attention): multiply-adds, RUMUS_GRAIN_LOOP_MACS. */
#define RUMUS_GRAIN_ROWS ((int64_t)16384)
#define RUMUS_GRAIN_MACS ((int64_t)1 << 19) /* 2^22 left the MLP's 128-row products on <= 4 threads */
#define RUMUS_GRAIN_LOOP_MACS ((int64_t)1 << 18)
int rumus_threads_for(int64_t work);
int rumus_threads_for_grain(int64_t work, int64_t grain);
/* The same, never more threads than `units` independent pieces of work. */
int rumus_threads_for_units(int64_t units, int64_t work);
int rumus_threads_for_units_grain(int64_t units, int64_t work, int64_t grain);

/* Run `fn` over an N-d strided iteration space.  meta (in elements):
   [ndim, shape[ndim], strides of operand 0 [ndim], ..., strides of operand nops-1 [ndim]].
   base[k] already includes the operand's offset. */
void rumus_iterate(int nops, const int64_t *meta, char **base, const int *isz, rumus_loop_fn fn,
                   const void *ctx);

/* Layout of a reduction, parsed from meta (in elements):
   [nk, kept shape[nk], kept out strides[nk], kept in strides[nk], nr, reduced shape[nr], reduced in strides[nr]];
   strides are converted to bytes. outer = product of kept sizes, inner = product of reduced sizes. */
typedef struct {
    int nk, nr;
    int64_t ksh[RUMUS_MAX_DIMS], kout[RUMUS_MAX_DIMS], kin[RUMUS_MAX_DIMS];
    int64_t rsh[RUMUS_MAX_DIMS], rin[RUMUS_MAX_DIMS];
    int64_t outer, inner;
} rumus_rlayout;

void rumus_rlayout_parse(const int64_t *meta, int64_t osz, int64_t xsz, rumus_rlayout *L);

/* Byte offsets (into output and input) of kept position i, for outputs walked one by one. */
static inline void rumus_kept_offsets(const rumus_rlayout *L, int nk, int64_t i, int64_t *oo, int64_t *xo) {
    int64_t a = 0, b = 0;
    for (int d = nk - 1; d >= 0; d--) {
        const int64_t q = i % L->ksh[d];
        i /= L->ksh[d];
        a += q * L->kout[d];
        b += q * L->kin[d];
    }
    *oo = a;
    *xo = b;
}

/* Walking kept positions in order without a division per position (an odometer). */
typedef struct {
    int64_t idx[RUMUS_MAX_DIMS];
    int64_t oo, xo; /* byte offsets of the current position in output and input */
} rumus_kept_iter;

static inline void rumus_kept_start(const rumus_rlayout *L, int nk, int64_t i, rumus_kept_iter *it) {
    int64_t a = 0, b = 0;
    for (int d = nk - 1; d >= 0; d--) {
        const int64_t q = i % L->ksh[d];
        i /= L->ksh[d];
        it->idx[d] = q;
        a += q * L->kout[d];
        b += q * L->kin[d];
    }
    it->oo = a;
    it->xo = b;
}

static inline void rumus_kept_next(const rumus_rlayout *L, int nk, rumus_kept_iter *it) {
    for (int d = nk - 1; d >= 0; d--) {
        it->oo += L->kout[d];
        it->xo += L->kin[d];
        if (++it->idx[d] < L->ksh[d]) return;
        it->oo -= L->kout[d] * L->ksh[d];
        it->xo -= L->kin[d] * L->ksh[d];
        it->idx[d] = 0;
    }
}

int64_t rumus_table_find(const rumus_loop_entry *table, int64_t count, const char *name);
/* Index of the entry called `name` among `count` structs of `entry_size` bytes whose first member is their
   name (const char *), or -1: the lookup behind every kernel table's *_find. */
int64_t rumus_find_named(const void *table, int64_t count, size_t entry_size, const char *name);
/* rumus_find_named over a whole static array of named entries. */
#define RUMUS_FIND_IN(table, name)                                                                      \
    rumus_find_named((table), (int64_t)(sizeof(table) / sizeof((table)[0])), sizeof((table)[0]), (name))

/* Type lists: M(suffix, C type, ...) once per dtype; the trailing arguments pass through. */
#define RUMUS_EACH_FLOAT(M, ...) M(f32, float, __VA_ARGS__) M(f64, double, __VA_ARGS__)
#define RUMUS_EACH_INT(M, ...) M(i64, int64_t, __VA_ARGS__) M(i32, int32_t, __VA_ARGS__)                \
    M(i16, int16_t, __VA_ARGS__) M(i8, int8_t, __VA_ARGS__) M(u8, uint8_t, __VA_ARGS__)
#define RUMUS_EACH_SINT(M, ...) M(i64, int64_t, __VA_ARGS__) M(i32, int32_t, __VA_ARGS__)               \
    M(i16, int16_t, __VA_ARGS__) M(i8, int8_t, __VA_ARGS__)
#define RUMUS_EACH_NUMERIC(M, ...) RUMUS_EACH_FLOAT(M, __VA_ARGS__) RUMUS_EACH_INT(M, __VA_ARGS__)
#define RUMUS_EACH_SIGNED(M, ...) RUMUS_EACH_FLOAT(M, __VA_ARGS__) RUMUS_EACH_SINT(M, __VA_ARGS__)
/* bool is stored as one byte holding 0 or 1 (numpy's layout). */
#define RUMUS_EACH_ALL(M, ...) RUMUS_EACH_NUMERIC(M, __VA_ARGS__) M(b, uint8_t, __VA_ARGS__)

#define RUMUS_UNUSED(x) (void)(x)
/* The identity load/store of kernels templated over a conversion (float16/bfloat16 use internal/half.h). */
#define RUMUS_AS_IS(x) (x)

/* Hot loops are compiled twice on x86-64 glibc Linux (AVX2 and baseline SSE2; ifunc picks one at
   load time).
   No FMA contraction happens (-std=c11 implies -ffp-contract=off), so both give the same bits. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define RUMUS_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef RUMUS_CLONES
#define RUMUS_CLONES
#endif

/* The same with an AVX-512 variant as well, for row loops whose results cannot depend on the vector width
   (explicit lanes, no FMA): softmax and cross-entropy's float32 rows, ~30% faster where the CPU has it. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define RUMUS_CLONES_WIDE __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef RUMUS_CLONES_WIDE
#define RUMUS_CLONES_WIDE
#endif

/* The kernels' thread pool (csrc/pool.c). fn(ctx, begin, end) runs over [0, n) cut into contiguous chunks
   (a few per thread, by n and nt alone), taken from one shared counter; at most `nt` threads, the caller one
   of them. nt <= 1, a call from inside a loop, a second caller at the same moment or a fork()ed child: one call
   fn(ctx, 0, n) on the calling thread. Each chunk's results must not depend on which thread runs it. */
typedef void (*rumus_range_fn)(void *ctx, int64_t begin, int64_t end);
void rumus_parallel_for(int nt, int64_t n, rumus_range_fn fn, void *ctx);
/* fn(ctx, i, i + 1) for i < n, all n at once on n threads, one part each (parts that wait on each other:
   OpenBLAS's jobs); 0 (nothing run) where the pool cannot promise n threads. */
int rumus_parallel_together(int n, rumus_range_fn fn, void *ctx);

#endif
