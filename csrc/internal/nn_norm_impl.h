/* Included by nn_norm.c once per element type T, with FN(name) adding the dtype suffix, LD(v) widening a
   stored value to double and ST(d) rounding a double into T (float16/bfloat16: once). No include guard. */

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
