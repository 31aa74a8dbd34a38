/* The runner of the row kernels that contracts/rumus_contracts/ops/row_c.py renders from the row-op
   table (row_ops.py): every row along one dim computed whole by one thread of the pool (csrc/pool.c),
   so results do not depend on the thread count.

   meta (elements): [nk, kept shape[nk], kept out strides[nk], kept in strides[nk], n, out stride, in stride];
   a second input (the backward ops' y) shares the first's strides; column operands (a norm's weight and
   bias) arrive as contiguous pointers, already offset. */
#ifndef RUMUS_ROW_LOOPS_H
#define RUMUS_ROW_LOOPS_H

#include <math.h>
#include <stdint.h>

#include "fastmath.h"
#include "half.h"
#include "row_max.h"
#include "rumus.h"

/* One row: n elements, output w strided by so bytes, inputs in[] strided by si bytes, then the column
   operands (contiguous, the same for every row); prm the op's parameters. */
typedef void (*rumus_row_fn)(char *w, const char *const *in, int64_t n, int64_t so, int64_t si, const double *prm);

typedef struct {
    const char *name;
    rumus_row_fn fn;
    int sz;               /* bytes per element of every operand */
    int nin, ncol;        /* inputs, column operands */
    int64_t grain;        /* elements per thread (0: the streaming default) */
    int64_t serial_below; /* fewer elements than this run on one thread (0: no such bound) */
} rumus_row_entry;

typedef struct {
    rumus_rlayout L;
    int64_t n, so, si;
    char *o;
    const char *in[4];
    int nin, nops;
    double prm[2];
    rumus_row_fn fn;
} rumus_row_job;

static void rumus_row_range(void *p, int64_t s, int64_t e) {
    const rumus_row_job *j = (const rumus_row_job *)p;
    rumus_kept_iter it;
    rumus_kept_start(&j->L, j->L.nk, s, &it);
    const char *in[4];
    for (int k = 0; k < j->nops; k++) in[k] = j->in[k];
    for (int64_t r = s; r < e; r++, rumus_kept_next(&j->L, j->L.nk, &it)) {
        for (int k = 0; k < j->nin; k++) in[k] = j->in[k] + it.xo;
        j->fn(j->o + it.oo, in, j->n, j->so, j->si, j->prm);
    }
}

static void rumus_rows_exec(const rumus_row_entry *e, const int64_t *meta, char *o, int64_t oo, char *x, int64_t xo,
                            char *y, int64_t yo, char *c0, char *c1, double p0, double p1) {
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
    char *const ins[2] = {x + xo * e->sz, e->nin > 1 ? y + yo * e->sz : NULL};
    char *const cols[2] = {c0, c1};
    job.nin = e->nin;
    job.nops = e->nin + e->ncol;
    for (int k = 0; k < e->nin; k++) job.in[k] = ins[k];
    for (int k = 0; k < e->ncol; k++) job.in[e->nin + k] = cols[k];
    job.prm[0] = p0;
    job.prm[1] = p1;
    job.fn = e->fn;
    const int64_t work = rows * job.n;
    int nt = e->grain ? rumus_threads_for_units_grain(rows, work, e->grain) : rumus_threads_for_units(rows, work);
    if (work < e->serial_below) nt = 1;
    rumus_parallel_for(nt, rows, rumus_row_range, &job);
}

#endif
