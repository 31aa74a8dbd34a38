/* Included by nn_norm.c once per element type T, with FN(name) adding the dtype suffix, LD(v) widening a
   stored value to double and ST(d) rounding a double into T (float16/bfloat16: once). No include guard. */

/* mean and 1/sqrt(var + eps) of n contiguous values (two passes: no cancellation for offset data). */
static inline void FN(moments)(const T *x, int64_t n, double eps, double *mean, double *rstd) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += LD(x[i]);
    const double m = n ? s / (double)n : 0.0;
    double v = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double d = LD(x[i]) - m;
        v += d * d;
    }
    *mean = m;
    *rstd = 1.0 / sqrt((n ? v / (double)n : 0.0) + eps);
}

/* The forward of group norm (layer and RMS norm are rendered row ops: row_c.py): row r holds cg channels
   of s values each, channel k of row r using weight/bias c0 + k with c0 = (r % groups) * cg;
   y = (x - mean) * rstd * w + b. */
typedef struct {
    const T *x, *w, *b;
    T *y;
    int64_t cg, s, groups;
    double eps;
} FN(norm_rows_job);

/* rows [begin, end), each whole on one thread */
static void FN(norm_rows_range)(void *p, int64_t begin, int64_t end) {
    const FN(norm_rows_job) *j = (const FN(norm_rows_job) *)p;
    const T *x = j->x, *w = j->w, *b = j->b;
    T *y = j->y;
    const int64_t cg = j->cg, s = j->s, groups = j->groups, len = cg * s;
    const double eps = j->eps;
    for (int64_t r = begin; r < end; r++) {
        const T *xr = x + r * len;
        T *yr = y + r * len;
        double mean, rstd;
        FN(moments)(xr, len, eps, &mean, &rstd);
        const int64_t c0 = (r % groups) * cg;
        for (int64_t k = 0; k < cg; k++) {
            const double a = rstd * LD(w[c0 + k]), bk = LD(b[c0 + k]);
            for (int64_t i = 0; i < s; i++) yr[k * s + i] = ST((LD(xr[k * s + i]) - mean) * a + bk);
        }
    }
}

static void FN(norm_rows)(const T *x, const T *w, const T *b, T *y, int64_t rows, int64_t cg, int64_t s,
                          int64_t groups, double eps) {
    const int64_t len = cg * s;
    if (rows == 0 || len == 0) return;
    const int nt = norm_threads(rows, rows * len);
    FN(norm_rows_job) j = {x, w, b, y, cg, s, groups, eps};
    rumus_parallel_for(nt, rows, FN(norm_rows_range), &j);
}

/* ---- group norm: row (n, g) is a contiguous block of Cg channels x S positions ----------------- */

void FN(rumus_group_norm)(const void *xv, const void *wv, const void *bv, void *yv, int64_t n, int64_t c, int64_t s,
                          int64_t groups, double eps) {
    FN(norm_rows)((const T *)xv, (const T *)wv, (const T *)bv, (T *)yv, n * groups, c / groups, s, groups, eps);
}

typedef struct {
    const T *g, *x, *w;
    T *gx;
    double *acc;
    int64_t rows, c, s, groups, parts;
    double eps;
} FN(group_backward_job);

/* partitions [begin, end) of group_norm_backward's rows, each into its own (gw, gb) accumulators */
static void FN(group_backward_range)(void *p, int64_t begin, int64_t end) {
    const FN(group_backward_job) *j = (const FN(group_backward_job) *)p;
    const T *g = j->g, *x = j->x, *w = j->w;
    T *gx = j->gx;
    double *acc = j->acc;
    const int64_t rows = j->rows, c = j->c, s = j->s, groups = j->groups, parts = j->parts;
    const int64_t cg = c / groups, len = cg * s;
    const double eps = j->eps;
    for (int64_t t = begin; t < end; t++) {
        double *aw = acc + t * 2 * c, *ab = aw + c;
        for (int64_t r = rows * t / parts; r < rows * (t + 1) / parts; r++) {
            const T *gr = g + r * len, *xr = x + r * len;
            T *gxr = gx + r * len;
            const int64_t c0 = (r % groups) * cg;
            double mean, rstd, s1 = 0.0, s2 = 0.0;
            FN(moments)(xr, len, eps, &mean, &rstd);
            for (int64_t k = 0; k < cg; k++) {
                const double wk = LD(w[c0 + k]);
                double sw = 0.0, sb = 0.0;
                for (int64_t i = 0; i < s; i++) {
                    const double gi = LD(gr[k * s + i]), xh = (LD(xr[k * s + i]) - mean) * rstd;
                    sw += gi * xh;
                    sb += gi;
                }
                aw[c0 + k] += sw;
                ab[c0 + k] += sb;
                s1 += wk * sb;
                s2 += wk * sw;
            }
            s1 /= (double)len;
            s2 /= (double)len;
            for (int64_t k = 0; k < cg; k++) {
                const double wk = LD(w[c0 + k]);
                for (int64_t i = 0; i < s; i++) {
                    const double xh = (LD(xr[k * s + i]) - mean) * rstd;
                    gxr[k * s + i] = ST(rstd * (LD(gr[k * s + i]) * wk - s1 - xh * s2));
                }
            }
        }
    }
}

void FN(rumus_group_norm_backward)(const void *gv, const void *xv, const void *wv, void *gxv, void *gwv, void *gbv,
                                   int64_t n, int64_t c, int64_t s, int64_t groups, double eps) {
    const T *g = (const T *)gv, *x = (const T *)xv, *w = (const T *)wv;
    T *gx = (T *)gxv, *gw = (T *)gwv, *gb = (T *)gbv;
    const int64_t rows = n * groups, cg = c / groups, len = cg * s;
    const int nt = norm_threads(rows, rows * len);
    const int64_t parts = rows < NORM_PARTS ? rows : NORM_PARTS;  /* fixed by the shape, never the thread count */
    double *acc = (double *)calloc((size_t)(parts * 2 * c > 0 ? parts * 2 * c : 1), sizeof(double));
    if (!acc) return;
    if (rows > 0 && len > 0) {
        FN(group_backward_job) j = {g, x, w, gx, acc, rows, c, s, groups, parts, eps};
        rumus_parallel_for(nt, parts, FN(group_backward_range), &j); /* n = parts: the partition is the result's */
    }
    for (int64_t j = 0; j < c; j++) {
        double sw = 0.0, sb = 0.0;
        for (int64_t t = 0; t < parts; t++) {
            sw += acc[t * 2 * c + j];
            sb += acc[t * 2 * c + c + j];
        }
        gw[j] = ST(sw);
        gb[j] = ST(sb);
    }
    free(acc);
}

/* ---- batch norm: channels are independent; channel k's values are N runs of S ------------------ */

/* mean and (biased) variance of channel k, in double, two passes */
static void FN(channel_moments)(const T *x, int64_t n, int64_t c, int64_t s, int64_t k, double *mean, double *var) {
    const double m = (double)(n * s);
    double sum = 0.0, sq = 0.0;
    for (int64_t b = 0; b < n; b++) {
        const T *xr = x + (b * c + k) * s;
        for (int64_t i = 0; i < s; i++) sum += LD(xr[i]);
    }
    const double mu = m > 0 ? sum / m : 0.0;
    for (int64_t b = 0; b < n; b++) {
        const T *xr = x + (b * c + k) * s;
        for (int64_t i = 0; i < s; i++) {
            const double d = LD(xr[i]) - mu;
            sq += d * d;
        }
    }
    *mean = mu;
    *var = m > 0 ? sq / m : 0.0;
}

/* One batch-norm pass over channels: its operands (unused ones NULL). Channels are independent, each
   computed whole on one thread. */
typedef struct {
    const T *x, *w, *b, *g;
    const T *mean, *var;
    T *y, *gx, *gw, *gb, *mean_out, *var_out;
    int64_t n, c, s;
    double eps;
    int training;
} FN(bn_job);

static void FN(bn_stats_range)(void *p, int64_t begin, int64_t end) {
    const FN(bn_job) *j = (const FN(bn_job) *)p;
    const T *x = j->x;
    T *mean = j->mean_out, *var = j->var_out;
    const int64_t n = j->n, c = j->c, s = j->s;
    for (int64_t k = begin; k < end; k++) {
        double mu, v;
        FN(channel_moments)(x, n, c, s, k, &mu, &v);
        mean[k] = ST(mu);
        var[k] = ST(v);
    }
}

void FN(rumus_batch_norm_stats)(const void *xv, void *meanv, void *varv, int64_t n, int64_t c, int64_t s) {
    if (c == 0) return;
    const int nt = norm_threads(c, n * c * s);
    FN(bn_job) j = {.x = (const T *)xv, .mean_out = (T *)meanv, .var_out = (T *)varv, .n = n, .c = c, .s = s};
    rumus_parallel_for(nt, c, FN(bn_stats_range), &j);
}

/* In training the statistics are batch_norm_stats(x). Where T is too narrow to hold them well
   (STATS_FROM_X: float16/bfloat16) the forward recomputes them in double instead of reading them rounded
   (the backward's contract is the statistics it is given: it reads them). */
static void FN(bn_stats_of)(const T *x, const T *mean, const T *var, int64_t n, int64_t c, int64_t s, int64_t k,
                            int training, double *mu, double *v) {
    if (training && STATS_FROM_X) {
        FN(channel_moments)(x, n, c, s, k, mu, v);
    } else {
        *mu = LD(mean[k]);
        *v = LD(var[k]);
    }
}

static void FN(bn_forward_range)(void *p, int64_t begin, int64_t end) {
    const FN(bn_job) *j = (const FN(bn_job) *)p;
    const T *x = j->x, *w = j->w, *b = j->b, *mean = j->mean, *var = j->var;
    T *y = j->y;
    const int64_t n = j->n, c = j->c, s = j->s;
    const double eps = j->eps;
    const int training = j->training;
    for (int64_t k = begin; k < end; k++) {
        /* (x - mean) * a + b, never x * a + (b - mean * a): at a large offset (x = mean = 1e6) the
         * folded form subtracts two huge rounded products and leaves garbage (-32 instead of 0),
         * while x - mean is exact there (Sterbenz) and the result is b. */
        double mu, vk;
        FN(bn_stats_of)(x, mean, var, n, c, s, k, training, &mu, &vk);
        const double a = LD(w[k]) / sqrt(vk + eps), bk = LD(b[k]);
        if (sizeof(T) == sizeof(float)) { /* float math vectorises; a is rounded once */
            const T af = (T)a, mf = mean[k], bf = (T)bk;
            for (int64_t bb = 0; bb < n; bb++) {
                const T *xr = x + (bb * c + k) * s;
                T *yr = y + (bb * c + k) * s;
                for (int64_t i = 0; i < s; i++) yr[i] = (xr[i] - mf) * af + bf;
            }
        } else {
            for (int64_t bb = 0; bb < n; bb++) {
                const T *xr = x + (bb * c + k) * s;
                T *yr = y + (bb * c + k) * s;
                for (int64_t i = 0; i < s; i++) yr[i] = ST((LD(xr[i]) - mu) * a + bk);
            }
        }
    }
}

void FN(rumus_batch_norm)(const void *xv, const void *wv, const void *bv, const void *meanv, const void *varv, void *yv,
                          int64_t n, int64_t c, int64_t s, double eps, int training) {
    if (c == 0 || n == 0 || s == 0) return;
    const int nt = norm_threads(c, n * c * s);
    FN(bn_job) j = {.x = (const T *)xv, .w = (const T *)wv, .b = (const T *)bv, .mean = (const T *)meanv,
                    .var = (const T *)varv, .y = (T *)yv, .n = n, .c = c, .s = s, .eps = eps, .training = training};
    rumus_parallel_for(nt, c, FN(bn_forward_range), &j);
}

static void FN(bn_backward_range)(void *p, int64_t begin, int64_t end) {
    const FN(bn_job) *j = (const FN(bn_job) *)p;
    const T *g = j->g, *x = j->x, *w = j->w, *mean = j->mean, *var = j->var;
    T *gx = j->gx, *gw = j->gw, *gb = j->gb;
    const int64_t n = j->n, c = j->c, s = j->s;
    const double eps = j->eps;
    const int training = j->training;
    const double m = (double)(n * s);
    for (int64_t k = begin; k < end; k++) {
        const double mu = LD(mean[k]), invstd = 1.0 / sqrt(LD(var[k]) + eps), wk = LD(w[k]);
        double sg = 0.0, sgx = 0.0;
        for (int64_t b = 0; b < n; b++) {
            const T *gr = g + (b * c + k) * s, *xr = x + (b * c + k) * s;
            for (int64_t i = 0; i < s; i++) {
                sg += LD(gr[i]);
                sgx += LD(gr[i]) * (LD(xr[i]) - mu);
            }
        }
        gb[k] = ST(sg);
        gw[k] = ST(sgx * invstd);
        const double a = wk * invstd;
        const double mg = training && m > 0 ? sg / m : 0.0;
        const double mx = training && m > 0 ? sgx * invstd * invstd / m : 0.0; /* times (x - mu) */
        for (int64_t b = 0; b < n; b++) {
            const T *gr = g + (b * c + k) * s, *xr = x + (b * c + k) * s;
            T *gxr = gx + (b * c + k) * s;
            for (int64_t i = 0; i < s; i++)
                gxr[i] = ST(a * (LD(gr[i]) - mg - (LD(xr[i]) - mu) * mx));
        }
    }
}

void FN(rumus_batch_norm_backward)(const void *gv, const void *xv, const void *wv, const void *meanv, const void *varv,
                                   void *gxv, void *gwv, void *gbv, int64_t n, int64_t c, int64_t s, double eps,
                                   int training) {
    if (c == 0) return;
    const int nt = norm_threads(c, n * c * s);
    FN(bn_job) j = {.g = (const T *)gv, .x = (const T *)xv, .w = (const T *)wv, .mean = (const T *)meanv,
                    .var = (const T *)varv, .gx = (T *)gxv, .gw = (T *)gwv, .gb = (T *)gbv, .n = n, .c = c, .s = s,
                    .eps = eps, .training = training};
    rumus_parallel_for(nt, c, FN(bn_backward_range), &j);
}
