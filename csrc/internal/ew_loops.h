/* Loop templates of the generated elementwise kernels: one run of n elements with byte strides,
   calling an inline element function fn(inputs..., p0, p1).  The contiguous case (and for binary ops
   a broadcast scalar operand) gets its own loop so gcc vectorises it; rumus_iterate walks the strided
   N-d space and calls the loop once per innermost run.  ctx carries the op's two parameters.
   T and O are the stored input and output types, C the type fn computes in, LD and ST convert a stored
   value to C and back (RUMUS_AS_IS for the native types; float16/bfloat16 load into float, round once). */
#ifndef RUMUS_EW_LOOPS_H
#define RUMUS_EW_LOOPS_H

#include "rumus.h"

#define EW_PARAMS(T)                                                                                    \
    const T p0 = (T)((const double *)ctx)[0], p1 = (T)((const double *)ctx)[1]

#define EW_LOOP1(name, T, O, C, LD, ST, fn)                                                             \
    RUMUS_CLONES static void name(int64_t n, char **p, const int64_t *s, const void *ctx) {             \
        EW_PARAMS(C);                                                                                   \
        if (s[0] == (int64_t)sizeof(O) && s[1] == (int64_t)sizeof(T)) {                                 \
            O *o = (O *)p[0];                                                                           \
            const T *a = (const T *)p[1];                                                               \
            for (int64_t i = 0; i < n; i++) o[i] = ST(fn(LD(a[i]), p0, p1));                            \
        } else {                                                                                        \
            for (int64_t i = 0; i < n; i++)                                                             \
                *(O *)(p[0] + i * s[0]) = ST(fn(LD(*(const T *)(p[1] + i * s[1])), p0, p1));            \
        }                                                                                               \
    }

/* float32 sin/cos: the vectorised reduction first, then libm for the rare huge, infinite or NaN input */
#define EW_LOOP1_FIXUP(name, T, O, fast, exact)                                                         \
    RUMUS_CLONES static void name(int64_t n, char **p, const int64_t *s, const void *ctx) {             \
        EW_PARAMS(T);                                                                                   \
        if (s[0] == (int64_t)sizeof(O) && s[1] == (int64_t)sizeof(T)) {                                 \
            O *o = (O *)p[0];                                                                           \
            const T *a = (const T *)p[1];                                                               \
            for (int64_t i = 0; i < n; i++) o[i] = fast(a[i], p0, p1);                                  \
            for (int64_t i = 0; i < n; i++)                                                             \
                if (!(fabsf(a[i]) <= RUMUS_TRIG_LIMIT)) o[i] = exact(a[i], p0, p1);                     \
        } else {                                                                                        \
            for (int64_t i = 0; i < n; i++)                                                             \
                *(O *)(p[0] + i * s[0]) = exact(*(const T *)(p[1] + i * s[1]), p0, p1);                 \
        }                                                                                               \
    }

#define EW_LOOP2(name, T, O, C, LD, ST, fn)                                                             \
    RUMUS_CLONES static void name(int64_t n, char **p, const int64_t *s, const void *ctx) {             \
        EW_PARAMS(C);                                                                                   \
        char *po = p[0];                                                                                \
        const char *pa = p[1], *pb = p[2];                                                              \
        const int64_t so = s[0], sa = s[1], sb = s[2];                                                  \
        if (so == (int64_t)sizeof(O)) {                                                                 \
            O *o = (O *)po;                                                                             \
            if (sa == (int64_t)sizeof(T) && sb == (int64_t)sizeof(T)) {                                 \
                const T *A = (const T *)pa, *B = (const T *)pb;                                         \
                for (int64_t i = 0; i < n; i++) o[i] = ST(fn(LD(A[i]), LD(B[i]), p0, p1));              \
                return;                                                                                 \
            }                                                                                           \
            if (sa == (int64_t)sizeof(T) && sb == 0) {                                                  \
                const T *A = (const T *)pa;                                                             \
                const C y = LD(*(const T *)pb);                                                         \
                for (int64_t i = 0; i < n; i++) o[i] = ST(fn(LD(A[i]), y, p0, p1));                     \
                return;                                                                                 \
            }                                                                                           \
            if (sa == 0 && sb == (int64_t)sizeof(T)) {                                                  \
                const T *B = (const T *)pb;                                                             \
                const C x = LD(*(const T *)pa);                                                         \
                for (int64_t i = 0; i < n; i++) o[i] = ST(fn(x, LD(B[i]), p0, p1));                     \
                return;                                                                                 \
            }                                                                                           \
        }                                                                                               \
        for (int64_t i = 0; i < n; i++)                                                                 \
            *(O *)(po + i * so) = ST(fn(LD(*(const T *)(pa + i * sa)), LD(*(const T *)(pb + i * sb)), p0, p1)); \
    }

#define EW_LOOP3(name, T, O, C, LD, ST, fn)                                                             \
    RUMUS_CLONES static void name(int64_t n, char **p, const int64_t *s, const void *ctx) {             \
        EW_PARAMS(C);                                                                                   \
        if (s[0] == (int64_t)sizeof(O) && s[1] == (int64_t)sizeof(T) && s[2] == (int64_t)sizeof(T) &&   \
            s[3] == (int64_t)sizeof(T)) {                                                               \
            O *o = (O *)p[0];                                                                           \
            const T *A = (const T *)p[1], *B = (const T *)p[2], *Z = (const T *)p[3];                   \
            for (int64_t i = 0; i < n; i++) o[i] = ST(fn(LD(A[i]), LD(B[i]), LD(Z[i]), p0, p1));        \
            return;                                                                                     \
        }                                                                                               \
        for (int64_t i = 0; i < n; i++)                                                                 \
            *(O *)(p[0] + i * s[0]) = ST(fn(LD(*(const T *)(p[1] + i * s[1])),                         \
                                            LD(*(const T *)(p[2] + i * s[2])),                          \
                                            LD(*(const T *)(p[3] + i * s[3])), p0, p1));                \
    }

#endif
