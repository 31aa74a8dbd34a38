/* The runner of the row kernels that contracts/rumus_contracts/ops/row_c.py renders from the row-op
   table (row_ops.py): every row along one dim computed whole by one thread of the pool (csrc/pool.c),
   so results do not depend on the thread count.

   meta (elements): [nk, kept shape[nk], kept out strides[nk], kept in strides[nk], n, out stride, in stride];
   a second input (the backward ops' y) shares the first's strides; column operands (a norm's weight and
   bias) arrive as contiguous pointers, already offset. A per-row output (logsumexp) has out stride 0 along
   the row. Column sums (a norm backward's weight and bias gradients) are contiguous outputs of n values:
   the rows are split into at most ROW_SUM_PARTS partitions fixed by the shape, each adding its rows in
   order into its own double accumulators, which are then added in partition order and rounded once, so
   the sums do not depend on the thread count either. Row inputs and further row outputs (one value per
   row: a class index, a saved logsumexp) are contiguous in row order.

   ptrs (RUMUS_ROW_PTRS): column operands [2], column sums [2], row inputs [4], row outputs [2]; NULL where
   unused. prm: the op's parameters [4], then for an entry with grouped columns (row_ops.py's
   grouped_columns: element i of row r reads column (r % G) * (n / S) + i / S) its G and S [2]; the
   column operands and sums are then G * n / S long. Other entries read prm[0..3] only. */
#ifndef RUMUS_ROW_LOOPS_H
#define RUMUS_ROW_LOOPS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "fastmath.h"
#include "half.h"
#include "row_max.h"
#include "rumus.h"

/* One row: n elements, output w strided by so bytes, inputs in[] strided by si bytes, then the column
   operands (contiguous, the same for every row); prm the op's parameters; acc the row's partition's
   column-sum accumulators (n doubles per sum; NULL for ops without); rin the row inputs, rout the further
   row outputs (each contiguous in row order), r the row's index there. */
typedef void (*rumus_row_fn)(char *w, const char *const *in, int64_t n, int64_t so, int64_t si, const double *prm,
                             double *acc, const char *const *rin, char *const *rout, int64_t r);

#define RUMUS_ROW_PTRS 10

/* nb rows side by side (row b's element i at in[0] + b * sz + i * si), outputs os bytes apart: per-row ops
   along a strided dim whose kept inner dim is contiguous (row_c.py's block form). */
typedef void (*rumus_block_fn)(char *w, int64_t os, const char *const *in, int64_t n, int64_t si, int64_t nb,
                               const double *prm);

#define ROW_SUM_PARTS 64

typedef struct {
    const char *name;
    rumus_row_fn fn;
    int sz;               /* bytes per element of every operand */
    int nin, ncol;        /* inputs, column operands */
    int64_t grain;        /* elements per thread (0: the streaming default) */
    int64_t serial_below; /* fewer elements than this run on one thread (0: no such bound) */
    int nsum;             /* column sums */
    void (*store)(char *d, int64_t j, double v); /* value j of a column sum, rounded once */
    rumus_block_fn block;                        /* the block form, or NULL */
    int grouped;                                 /* grouped columns: prm[4], prm[5] are (G, S) */
} rumus_row_entry;

typedef struct {
    rumus_rlayout L;
    int64_t n, so, si;
    char *o;
    const char *in[4];
    int nin, nops;
    double prm[6];        /* the op's parameters, then (G, S): (1, 1) but for grouped columns */
    rumus_row_fn fn;
    double *acc;          /* column sums: parts x nsum x ncol accumulators */
    int64_t rows, parts, ncol;
    int nsum;
    const rumus_row_entry *e;
    const char *rin[4];
    char *rout[2];
    rumus_block_fn block; /* set where the layout suits the block form */
} rumus_row_job;

/* row r (its row operands at index r) */
static inline void rumus_row_one(const rumus_row_job *j, int64_t r, char *w, const char *const *in, double *acc) {
    j->fn(w, in, j->n, j->so, j->si, j->prm, acc, j->rin, j->rout, r);
}

static void rumus_row_range(void *p, int64_t s, int64_t e) {
    const rumus_row_job *j = (const rumus_row_job *)p;
    rumus_kept_iter it;
    rumus_kept_start(&j->L, j->L.nk, s, &it);
    if (j->block) { /* blocks of rows along the kept inner dim, never across its end */
        const int last = j->L.nk - 1;
        for (int64_t r = s; r < e;) {
            int64_t nb = j->L.ksh[last] - it.idx[last];
            if (nb > RUMUS_ROW_LANES) nb = RUMUS_ROW_LANES;
            if (nb > e - r) nb = e - r;
            const char *in[1] = {j->in[0] + it.xo};
            j->block(j->o + it.oo, j->L.kout[last], in, j->n, j->si, nb, j->prm);
            r += nb;
            for (int64_t b = 0; b < nb; b++) rumus_kept_next(&j->L, j->L.nk, &it);
        }
        return;
    }
    const char *in[4];
    for (int k = 0; k < j->nops; k++) in[k] = j->in[k];
    for (int64_t r = s; r < e; r++, rumus_kept_next(&j->L, j->L.nk, &it)) {
        for (int k = 0; k < j->nin; k++) in[k] = j->in[k] + it.xo;
        rumus_row_one(j, r, j->o + it.oo, in, NULL);
    }
}

/* partitions [s, e) of the rows, each into its own accumulators */
static void rumus_row_parts(void *p, int64_t s, int64_t e) {
    const rumus_row_job *j = (const rumus_row_job *)p;
    const char *in[4];
    for (int k = 0; k < j->nops; k++) in[k] = j->in[k];
    for (int64_t t = s; t < e; t++) {
        const int64_t r0 = j->rows * t / j->parts, r1 = j->rows * (t + 1) / j->parts;
        double *acc = j->acc + t * j->nsum * j->ncol;
        rumus_kept_iter it;
        rumus_kept_start(&j->L, j->L.nk, r0, &it);
        for (int64_t r = r0; r < r1; r++, rumus_kept_next(&j->L, j->L.nk, &it)) {
            for (int k = 0; k < j->nin; k++) in[k] = j->in[k] + it.xo;
            rumus_row_one(j, r, j->o + it.oo, in, acc);
        }
    }
}

/* The column sums: partitions on the pool, then added in partition order (zeros when there are no rows). */
static void rumus_rows_sums(const rumus_row_entry *e, rumus_row_job *job, int nt, char *const *sums) {
    const int64_t n = job->ncol, parts = job->rows < ROW_SUM_PARTS ? job->rows : ROW_SUM_PARTS;
    const int64_t width = (int64_t)e->nsum * n;
    if (width == 0) return;
    double *acc = (double *)calloc((size_t)(parts > 0 ? parts * width : width), sizeof(double));
    if (!acc) return; /* callers check nothing: the outputs keep their zero-filled bytes */
    job->acc = acc;
    job->parts = parts;
    job->nsum = e->nsum;
    if (parts > 0) rumus_parallel_for(nt, parts, rumus_row_parts, job); /* n = parts: the partition is the result's */
    for (int k = 0; k < e->nsum; k++) {
        for (int64_t j = 0; j < n; j++) {
            double v = 0.0;
            for (int64_t t = 0; t < parts; t++) v += acc[t * width + k * n + j];
            e->store(sums[k], j, v);
        }
    }
    free(acc);
}

static void rumus_rows_exec(const rumus_row_entry *e, const int64_t *meta, char *o, int64_t oo, char *x, int64_t xo,
                            char *y, int64_t yo, char *const *ptrs, const double *prm) {
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
    if ((rows == 0 || job.n == 0) && !e->nsum) return;
    job.rows = rows;
    job.acc = NULL;
    job.o = o + oo * e->sz;
    char *const ins[2] = {x + xo * e->sz, e->nin > 1 ? y + yo * e->sz : NULL};
    job.e = e;
    job.block = e->block && nk >= 1 && job.L.kin[nk - 1] == e->sz && job.si != e->sz ? e->block : NULL;
    for (int k = 0; k < 4; k++) job.rin[k] = ptrs[4 + k];
    for (int k = 0; k < 2; k++) job.rout[k] = ptrs[8 + k];
    job.nin = e->nin;
    job.nops = e->nin + e->ncol;
    for (int k = 0; k < e->nin; k++) job.in[k] = ins[k];
    for (int k = 0; k < e->ncol; k++) job.in[e->nin + k] = ptrs[k];
    for (int k = 0; k < 4; k++) job.prm[k] = prm[k];
    job.prm[4] = e->grouped ? prm[4] : 1.0;
    job.prm[5] = e->grouped ? prm[5] : 1.0;
    /* the column operands' length (grouped: G channels of n / S per row's block) */
    job.ncol = e->grouped && prm[5] > 0 ? (int64_t)prm[4] * (job.n / (int64_t)prm[5]) : job.n;
    job.fn = e->fn;
    const int64_t work = rows * job.n;
    int nt = e->grain ? rumus_threads_for_units_grain(rows, work, e->grain) : rumus_threads_for_units(rows, work);
    if (work < e->serial_below) nt = 1;
    if (e->nsum) {
        rumus_rows_sums(e, &job, nt, ptrs + 2);
        return;
    }
    rumus_parallel_for(nt, rows, rumus_row_range, &job);
}

#endif
