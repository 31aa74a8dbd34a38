/* The runner of the row kernels that contracts/rumus_contracts/ops/row_c.py renders from the row-op
   table (row_ops.py): every row along one dim computed whole by one thread of the pool (csrc/pool.c),
   so results do not depend on the thread count.

   meta (elements): [nk, kept shape[nk], kept out strides[nk], kept in strides[nk], n, out stride, in stride];
   a second input (the backward ops' y) shares the first's strides. */
#ifndef RUMUS_ROW_LOOPS_H
#define RUMUS_ROW_LOOPS_H

#include <math.h>
#include <stdint.h>

#include "fastmath.h"
#include "half.h"
#include "row_max.h"
#include "rumus.h"

/* One row: n elements, output w strided by so bytes, inputs in[] strided by si bytes. */
typedef void (*rumus_row_fn)(char *w, const char *const *in, int64_t n, int64_t so, int64_t si);

typedef struct {
    const char *name;
    rumus_row_fn fn;
    int sz;        /* bytes per element of every operand */
    int nin;       /* inputs */
    int64_t grain; /* elements per thread (0: the streaming default) */
} rumus_row_entry;

typedef struct {
    rumus_rlayout L;
    int64_t n, so, si;
    char *o;
    const char *in[2];
    rumus_row_fn fn;
} rumus_row_job;

static void rumus_row_range(void *p, int64_t s, int64_t e) {
    const rumus_row_job *j = (const rumus_row_job *)p;
    rumus_kept_iter it;
    rumus_kept_start(&j->L, j->L.nk, s, &it);
    for (int64_t r = s; r < e; r++, rumus_kept_next(&j->L, j->L.nk, &it)) {
        const char *in[2] = {j->in[0] + it.xo, j->in[1] ? j->in[1] + it.xo : j->in[1]};
        j->fn(j->o + it.oo, in, j->n, j->so, j->si);
    }
}

static void rumus_rows_exec(const rumus_row_entry *e, const int64_t *meta, char *o, int64_t oo, char *x, int64_t xo,
                            char *y, int64_t yo) {
    rumus_row_job job;
    const int nk = (int)meta[0];
    const int64_t *d = meta + 1 + 3 * nk;
    job.L.nk = nk;
    job.L.nr = 0;
    job.L.inner = 1;
    job.L.outer = 1;
    for (int k = 0; k < nk; k++) {
        job.L.ksh[k] = meta[1 + k];
        job.L.kout[k] = meta[1 + nk + k] * e->sz;
        job.L.kin[k] = meta[1 + 2 * nk + k] * e->sz;
        job.L.outer *= job.L.ksh[k];
    }
    job.n = d[0];
    job.so = d[1] * e->sz;
    job.si = d[2] * e->sz;
    const int64_t rows = job.L.outer;
    if (rows == 0 || job.n == 0) return;
    job.o = o + oo * e->sz;
    job.in[0] = x + xo * e->sz;
    job.in[1] = e->nin > 1 ? y + yo * e->sz : NULL;
    job.fn = e->fn;
    const int64_t work = rows * job.n;
    const int nt = e->grain ? rumus_threads_for_units_grain(rows, work, e->grain) : rumus_threads_for_units(rows, work);
    rumus_parallel_for(nt, rows, rumus_row_range, &job);
}

#endif
