/* Included by nn_conv.c once per element type T, with FN(name) adding the dtype suffix. No include guard. */

/* ---- stride 1, dilation 1 in both dims (any padding and kernel size): a channel's band of input rows
   is first laid out, with its zero padding, in a per-thread plane: plane row t is input row oh0 - ph + t
   (t < Hb = oh1 - oh0 + kh - 1), plane column q is input column q - pw (q < Wp = Wo + kw - 1). Then im2col
   row (c, i, j) of output row oh is the plain segment plane[(oh - oh0 + i) * Wp + j ...][0, Wo): no bounds
   per segment, no branches per element. ---- */

/* Plane rows [0, Hb) of channel xc (H x W) from input row r0 on: the input where it lies inside the
   image, zeros elsewhere. */
static void FN(plane_fill)(const T *xc, T *plane, int64_t H, int64_t W, int64_t r0, int64_t Hb, int64_t pw,
                           int64_t Wp) {
    const int64_t a = pw < 0 ? 0 : (pw > Wp ? Wp : pw); /* plane columns [a, b) lie inside the image */
    const int64_t b = pw + W < a ? a : (pw + W > Wp ? Wp : pw + W);
    for (int64_t t = 0; t < Hb; t++) {
        T *row = plane + t * Wp;
        const int64_t ih = r0 + t;
        if (ih < 0 || ih >= H) {
            memset(row, 0, (size_t)Wp * sizeof(T));
            continue;
        }
        memset(row, 0, (size_t)a * sizeof(T));
        memcpy(row + a, xc + ih * W + (a - pw), (size_t)(b - a) * sizeof(T));
        memset(row + b, 0, (size_t)(Wp - b) * sizeof(T));
    }
}

/* The inverse for the rows inside the image: plane columns [a, b) back into channel xc. */
static void FN(plane_store)(const T *plane, T *xc, int64_t H, int64_t W, int64_t r0, int64_t Hb, int64_t pw,
                            int64_t Wp) {
    const int64_t a = pw < 0 ? 0 : (pw > Wp ? Wp : pw);
    const int64_t b = pw + W < a ? a : (pw + W > Wp ? Wp : pw + W);
    const int64_t t0 = -r0 > 0 ? -r0 : 0, t1 = H - r0 < Hb ? H - r0 : Hb;
    for (int64_t t = t0; t < t1; t++)
        memcpy(xc + (r0 + t) * W + (a - pw), plane + t * Wp + a, (size_t)(b - a) * sizeof(T));
}

/* n elements from s to d: 16-byte blocks, the last one overlapping its predecessor (a pure copy, so the
   twice-written elements get the same value). */
static inline void FN(copy_segment)(T *restrict d, const T *restrict s, int64_t n) {
    enum { V = 16 / sizeof(T) };
    if (n < V) {
        for (int64_t k = 0; k < n; k++) d[k] = s[k];
        return;
    }
    int64_t k = 0;
    for (; k + V <= n; k += V) memcpy(d + k, s + k, 16);
    if (k < n) memcpy(d + n - V, s + n - V, 16);
}

static inline void FN(add_segment)(T *restrict d, const T *restrict s, int64_t n) {
    for (int64_t k = 0; k < n; k++) d[k] += s[k];
}

/* A channel's kh*kw im2col rows from its plane (nb output rows of Wo), and the adjoint's additions. */
static void FN(plane_to_rows)(const T *plane, T *cols, int64_t ld, int64_t kh, int64_t kw, int64_t Wp, int64_t Wo,
                              int64_t nb) {
    for (int64_t i = 0; i < kh; i++)
        for (int64_t j = 0; j < kw; j++) {
            T *dst = cols + (i * kw + j) * ld;
            const T *src = plane + i * Wp + j;
            for (int64_t t = 0; t < nb; t++) FN(copy_segment)(dst + t * Wo, src + t * Wp, Wo);
        }
}

static void FN(rows_to_plane)(const T *cols, int64_t ld, T *plane, int64_t kh, int64_t kw, int64_t Wp, int64_t Wo,
                              int64_t nb) {
    for (int64_t i = 0; i < kh; i++)
        for (int64_t j = 0; j < kw; j++) {
            const T *src = cols + (i * kw + j) * ld;
            T *dst = plane + i * Wp + j;
            for (int64_t t = 0; t < nb; t++) FN(add_segment)(dst + t * Wp, src + t * Wo, Wo);
        }
}

#ifdef RUMUS_CONV_SEG512
__attribute__((target("avx512f"))) static void FN(plane_to_rows512)(const T *plane, T *cols, int64_t ld, int64_t kh,
                                                                    int64_t kw, int64_t Wp, int64_t Wo, int64_t nb) {
    for (int64_t i = 0; i < kh; i++)
        for (int64_t j = 0; j < kw; j++) {
            T *dst = cols + (i * kw + j) * ld;
            const T *src = plane + i * Wp + j;
            for (int64_t t = 0; t < nb; t++) FN(seg_copy512)(dst + t * Wo, src + t * Wp, Wo);
        }
}

__attribute__((target("avx512f"))) static void FN(rows_to_plane512)(const T *cols, int64_t ld, T *plane, int64_t kh,
                                                                    int64_t kw, int64_t Wp, int64_t Wo, int64_t nb) {
    for (int64_t i = 0; i < kh; i++)
        for (int64_t j = 0; j < kw; j++) {
            const T *src = cols + (i * kw + j) * ld;
            T *dst = plane + i * Wp + j;
            for (int64_t t = 0; t < nb; t++) FN(seg_add512)(dst + t * Wp, src + t * Wo, Wo);
        }
}
#else
static void FN(plane_to_rows512)(const T *plane, T *cols, int64_t ld, int64_t kh, int64_t kw, int64_t Wp, int64_t Wo,
                                 int64_t nb) {
    FN(plane_to_rows)(plane, cols, ld, kh, kw, Wp, Wo, nb); /* not reached: seg512() is 0 here */
}

static void FN(rows_to_plane512)(const T *cols, int64_t ld, T *plane, int64_t kh, int64_t kw, int64_t Wp, int64_t Wo,
                                 int64_t nb) {
    FN(rows_to_plane)(cols, ld, plane, kh, kw, Wp, Wo, nb);
}
#endif

/* im2col_rows for stride 1, dilation 1. Returns 0 (nothing written) where the plane had no memory. */
static int FN(im2col_rows_s1)(const T *x, T *cols, int64_t ld, const int64_t *g, int64_t C, int64_t oh0, int64_t oh1) {
    const s1_band b = s1_band_of(g, oh0, oh1);
    if (b.nb <= 0 || b.Wo <= 0) return 1;
    T *plane = (T *)conv_plane_scratch((size_t)(b.Hb * b.Wp) * sizeof(T));
    if (!plane) return 0;
    const int wide = seg512();
    for (int64_t c = 0; c < C; c++) {
        FN(plane_fill)(x + c * b.H * b.W, plane, b.H, b.W, oh0 - b.ph, b.Hb, b.pw, b.Wp);
        T *rows = cols + c * b.kh * b.kw * ld;
        if (wide)
            FN(plane_to_rows512)(plane, rows, ld, b.kh, b.kw, b.Wp, b.Wo, b.nb);
        else
            FN(plane_to_rows)(plane, rows, ld, b.kh, b.kw, b.Wp, b.Wo, b.nb);
    }
    return 1;
}

/* col2im_rows for stride 1, dilation 1: the channel's band is loaded into the plane, cols rows are added
   in order r = 0, 1, ... (each element gets at most one addend per row, as in the generic code, so every
   element sees the same additions in the same order), and the band is stored back. */
static int FN(col2im_rows_s1)(const T *cols, int64_t ld, T *x, const int64_t *g, int64_t C, int64_t oh0, int64_t oh1) {
    const s1_band b = s1_band_of(g, oh0, oh1);
    if (b.nb <= 0 || b.Wo <= 0) return 1;
    T *plane = (T *)conv_plane_scratch((size_t)(b.Hb * b.Wp) * sizeof(T));
    if (!plane) return 0;
    const int wide = seg512();
    for (int64_t c = 0; c < C; c++) {
        T *xc = x + c * b.H * b.W;
        FN(plane_fill)(xc, plane, b.H, b.W, oh0 - b.ph, b.Hb, b.pw, b.Wp);
        const T *rows = cols + c * b.kh * b.kw * ld;
        if (wide)
            FN(rows_to_plane512)(rows, ld, plane, b.kh, b.kw, b.Wp, b.Wo, b.nb);
        else
            FN(rows_to_plane)(rows, ld, plane, b.kh, b.kw, b.Wp, b.Wo, b.nb);
        FN(plane_store)(plane, xc, b.H, b.W, oh0 - b.ph, b.Hb, b.pw, b.Wp);
    }
    return 1;
}

/* im2col of one sample's channels [0, C) (x points at the first) for output rows [oh0, oh1):
   cols[r][(oh - oh0) * Wo + ow] for r = (c*kh + i)*kw + j, rows `ld` elements apart. */
static void FN(im2col_rows)(const T *x, T *cols, int64_t ld, const int64_t *g, int64_t C, int64_t oh0, int64_t oh1) {
    const int64_t H = g[2], W = g[3], kh = g[4], kw = g[5], sh = g[6], sw = g[7];
    const int64_t ph = g[8], pw = g[9], dh = g[10], dw = g[11], Ho = g[12], Wo = g[13];
    if (sh == 1 && sw == 1 && dh == 1 && dw == 1 && FN(im2col_rows_s1)(x, cols, ld, g, C, oh0, oh1)) return;
    for (int64_t r = 0; r < C * kh * kw; r++) {
        T *dst = cols + r * ld;
        const int64_t c = r / (kh * kw), i = (r / kw) % kh, j = r % kw;
        const int64_t off = j * dw - pw;
        int64_t lo, hi, top, bottom; /* columns, and output rows, whose input lies inside the image */
        valid_range(W, off, sw, Wo, &lo, &hi);
        valid_range(H, i * dh - ph, sh, Ho, &top, &bottom);
        top = top < oh0 ? oh0 : (top > oh1 ? oh1 : top);
        bottom = bottom > oh1 ? oh1 : (bottom < top ? top : bottom);
        memset(dst, 0, (size_t)((top - oh0) * Wo) * sizeof(T)); /* rows reading the padding above */
        dst += (top - oh0) * Wo;
        const T *src = x + c * H * W + (top < bottom ? (top * sh - ph + i * dh) * W + off : 0);
        for (int64_t oh = top; oh < bottom; oh++, dst += Wo, src += sh * W) {
            for (int64_t ow = 0; ow < lo; ow++) dst[ow] = 0;
            if (sw == 1) {
                for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[ow];
            } else {
                for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[ow * sw];
            }
            for (int64_t ow = hi; ow < Wo; ow++) dst[ow] = 0;
        }
        memset(dst, 0, (size_t)((oh1 - bottom) * Wo) * sizeof(T)); /* and below */
    }
}

/* The adjoint: adds cols (laid out as im2col_rows writes them) into the sample's channels [0, C).
   Rows are added in order r = 0, 1, ...: a fixed order, whatever the thread count. */
static void FN(col2im_rows)(const T *cols, int64_t ld, T *x, const int64_t *g, int64_t C, int64_t oh0, int64_t oh1) {
    const int64_t H = g[2], W = g[3], kh = g[4], kw = g[5], sh = g[6], sw = g[7];
    const int64_t ph = g[8], pw = g[9], dh = g[10], dw = g[11], Ho = g[12], Wo = g[13];
    if (sh == 1 && sw == 1 && dh == 1 && dw == 1 && FN(col2im_rows_s1)(cols, ld, x, g, C, oh0, oh1)) return;
    for (int64_t r = 0; r < C * kh * kw; r++) {
        const int64_t c = r / (kh * kw), i = (r / kw) % kh, j = r % kw;
        const int64_t off = j * dw - pw;
        int64_t lo, hi, top, bottom;
        valid_range(W, off, sw, Wo, &lo, &hi);
        valid_range(H, i * dh - ph, sh, Ho, &top, &bottom);
        top = top < oh0 ? oh0 : (top > oh1 ? oh1 : top);
        bottom = bottom > oh1 ? oh1 : (bottom < top ? top : bottom);
        const T *src = cols + r * ld + (top - oh0) * Wo;
        T *dst = x + c * H * W + (top < bottom ? (top * sh - ph + i * dh) * W + off : 0);
        for (int64_t oh = top; oh < bottom; oh++, src += Wo, dst += sh * W) {
            if (sw == 1) {
                for (int64_t ow = lo; ow < hi; ow++) dst[ow] += src[ow];
            } else {
                for (int64_t ow = lo; ow < hi; ow++) dst[ow * sw] += src[ow];
            }
        }
    }
}

/* A whole-batch im2col (in = x, out = cols) or col2im (in = cols, out = x) on the pool: samples are
   independent. sn: a sample's first element in cols, sr: the distance between cols rows. */
typedef struct {
    const T *in;
    T *out;
    const int64_t *g;
    int64_t sn, sr;
} FN(cols_job);

static void FN(im2col_samples)(void *ctx, int64_t n0, int64_t n1) {
    const FN(cols_job) *j = (const FN(cols_job) *)ctx;
    const int64_t *g = j->g;
    const int64_t C = g[1], H = g[2], W = g[3], Ho = g[12], sn = j->sn, sr = j->sr;
    for (int64_t n = n0; n < n1; n++) FN(im2col_rows)(j->in + n * C * H * W, j->out + n * sn, sr, g, C, 0, Ho);
}

static void FN(col2im_samples)(void *ctx, int64_t n0, int64_t n1) {
    const FN(cols_job) *j = (const FN(cols_job) *)ctx;
    const int64_t *g = j->g;
    const int64_t C = g[1], H = g[2], W = g[3], Ho = g[12], sn = j->sn, sr = j->sr;
    for (int64_t n = n0; n < n1; n++) {
        T *xn = j->out + n * C * H * W;
        memset(xn, 0, (size_t)(C * H * W) * sizeof(T));
        FN(col2im_rows)(j->in + n * sn, sr, xn, g, C, 0, Ho);
    }
}

void FN(rumus_im2col)(const void *xv, void *colsv, const int64_t *g) {
    const int64_t N = g[0], C = g[1], Ho = g[12];
    const int64_t R = C * g[4] * g[5], L = Ho * g[13];
    const int64_t sn = g[14] ? L : R * L, sr = g[14] ? N * L : L; /* layout: per sample, or channel-major */
    if (R == 0 || N == 0 || L == 0) return;
    FN(cols_job) j = {(const T *)xv, (T *)colsv, g, sn, sr};
    rumus_parallel_for(rumus_threads_for_units(N, N * R * L), N, FN(im2col_samples), &j);
}

void FN(rumus_col2im)(const void *colsv, void *xv, const int64_t *g) {
    const int64_t N = g[0], C = g[1], Ho = g[12];
    const int64_t R = C * g[4] * g[5], L = Ho * g[13];
    const int64_t sn = g[14] ? L : R * L, sr = g[14] ? N * L : L;
    if (C == 0 || N == 0) return;
    FN(cols_job) j = {(const T *)colsv, (T *)xv, g, sn, sr};
    rumus_parallel_for(rumus_threads_for_units(N, N * R * L), N, FN(col2im_samples), &j);
}

/* ---- the fused convolution: im2col of a band of output rows (in cache) and one BLAS call, per unit ----
   geometry g as above plus g[15] = O (output channels), g[16] = groups; plan in conv_plan_make. */

/* held: the kernel holds OpenBLAS at one thread for all its calls (conv_blas_serial) */
static int FN(gemm)(int held, int ta, int tb, int64_t m, int64_t n, int64_t k, const T *A, int64_t lda, const T *B,
                    int64_t ldb, int accumulate, T *C, int64_t ldc) {
    const int f64 = sizeof(T) == sizeof(double);
    return held ? rumus_gemm_one_held(f64, ta, tb, m, n, k, A, lda, B, ldb, accumulate, C, ldc)
                : rumus_gemm_one(f64, ta, tb, m, n, k, A, lda, B, ldb, accumulate, C, ldc);
}

/* One fused kernel on the pool: its plan and operands (those a direction does not read are NULL), its
   output (y, gx or gw), the weight gradient's partials of batch slices 1.., and the flag a unit sets when
   it had no scratch memory. */
typedef struct {
    conv_plan p;
    const int64_t *g;
    const T *x, *w, *bias, *gy;
    T *out, *part;
    atomic_int failed;
    int held; /* conv_blas_serial's answer: OpenBLAS held at one thread for the whole kernel */
} FN(conv_job);

/* y[n, group, band] = W_group @ im2col(x[n, group], band) (+ bias[o]): every output element is one BLAS
   call's, made the same way at every thread count. The bias (NULL: none) is added to each band right after
   its GEMM, while the band is still in cache: the same additions, in the same order, as a separate add of
   the bias after the convolution, so the results equal the unfused ops' bit for bit. */
static void FN(conv_forward_units)(void *ctx, int64_t u0, int64_t u1) {
    FN(conv_job) *job = (FN(conv_job) *)ctx;
    const conv_plan p = job->p;
    const int64_t *g = job->g;
    const T *x = job->x, *w = job->w, *bias = job->bias;
    T *y = job->out;
    for (int64_t u = u0; u < u1; u++) {
        const int64_t n = u / (p.G * p.tiles), gi = (u / p.tiles) % p.G, oh0 = (u % p.tiles) * p.rows;
        const int64_t oh1 = oh0 + p.rows < p.Ho ? oh0 + p.rows : p.Ho, tw = (oh1 - oh0) * p.Wo;
        T *cols = (T *)conv_scratch((size_t)(p.R * p.TW) * sizeof(T));
        if (!cols) {
            job->failed = 1;
            continue;
        }
        FN(im2col_rows)(x + (n * p.C + gi * p.Cg) * p.H * p.W, cols, tw, g, p.Cg, oh0, oh1);
        T *band = y + (n * p.O + gi * p.Og) * p.L + oh0 * p.Wo;
        FN(gemm)(job->held, 0, 0, p.Og, tw, p.R, w + gi * p.Og * p.R, p.R, cols, tw, 0, band, p.L);
        if (bias)
            for (int64_t o = 0; o < p.Og; o++) {
                const T b = bias[gi * p.Og + o];
                T *row = band + o * p.L;
                for (int64_t t = 0; t < tw; t++) row[t] += b;
            }
    }
}

int FN(rumus_conv2d_fused_bias)(const void *xv, const void *wv, const void *bv, void *yv, const int64_t *g) {
    CONV_BEGIN(p.N * p.G * p.tiles)
    FN(conv_job) job = {p, g, (const T *)xv, (const T *)wv, (const T *)bv, NULL, (T *)yv, NULL, 0, prev};
    rumus_parallel_for(nt, units, FN(conv_forward_units), &job);
    conv_blas_restore(prev);
    return !job.failed;
}

int FN(rumus_conv2d_fused)(const void *xv, const void *wv, void *yv, const int64_t *g) {
    return FN(rumus_conv2d_fused_bias)(xv, wv, NULL, yv, g);
}

/* gx[n, group, channel block] = col2im(W_group[:, block's rows]^T @ gy[n, group]), band after band in
   order within a unit; units write disjoint channels. */
static void FN(conv_input_grad_units)(void *ctx, int64_t u0, int64_t u1) {
    FN(conv_job) *job = (FN(conv_job) *)ctx;
    const conv_plan p = job->p;
    const int64_t *g = job->g;
    const T *gy = job->gy, *w = job->w;
    T *gx = job->out;
    const int64_t kk = g[4] * g[5];
    for (int64_t u = u0; u < u1; u++) {
        const int64_t n = u / (p.G * p.cblocks), gi = (u / p.cblocks) % p.G, c0 = (u % p.cblocks) * p.cb;
        const int64_t cn = p.Cg - c0 < p.cb ? p.Cg - c0 : p.cb;
        T *gxu = gx + (n * p.C + gi * p.Cg + c0) * p.H * p.W;
        memset(gxu, 0, (size_t)(cn * p.H * p.W) * sizeof(T));
        T *cols = (T *)conv_scratch((size_t)(p.R * p.TW) * sizeof(T));
        if (!cols) {
            job->failed = 1;
            continue;
        }
        for (int64_t oh0 = 0; oh0 < p.Ho; oh0 += p.rows) {
            const int64_t oh1 = oh0 + p.rows < p.Ho ? oh0 + p.rows : p.Ho, tw = (oh1 - oh0) * p.Wo;
            FN(gemm)(job->held, 1, 0, cn * kk, tw, p.Og, w + gi * p.Og * p.R + c0 * kk, p.R,
                     gy + (n * p.O + gi * p.Og) * p.L + oh0 * p.Wo, p.L, 0, cols, tw);
            FN(col2im_rows)(cols, tw, gxu, g, cn, oh0, oh1);
        }
    }
}

int FN(rumus_conv2d_fused_backward_input)(const void *gyv, const void *wv, void *gxv, const int64_t *g) {
    CONV_BEGIN(p.N * p.G * p.cblocks)
    FN(conv_job) job = {p, g, NULL, (const T *)wv, NULL, (const T *)gyv, (T *)gxv, NULL, 0, prev};
    rumus_parallel_for(nt, units, FN(conv_input_grad_units), &job);
    conv_blas_restore(prev);
    return !job.failed;
}

/* gw[group, output block, input channel block] = sum over samples and bands of
   gy[n, group, output block, band] @ im2col(x[n, group, channel block], band)^T.
   The batch is cut into p.slots slices (from the shape alone); slice j sums its samples in order into
   its own partial (slice 0 into gw), and the partials are added in slice order: the same sums in the
   same order at every thread count. */
static void FN(conv_weight_grad_units)(void *ctx, int64_t u0, int64_t u1) {
    FN(conv_job) *job = (FN(conv_job) *)ctx;
    const conv_plan p = job->p;
    const int64_t *g = job->g;
    const T *gy = job->gy, *x = job->x;
    T *gw = job->out, *part = job->part;
    const int64_t size = p.O * p.R, per = p.oblocks * p.cblocks, kk = g[4] * g[5];
    for (int64_t u = u0; u < u1; u++) {
        const int64_t j = u / (p.G * per), gi = (u / per) % p.G, o0 = (u % per) / p.cblocks * p.ob;
        const int64_t c0 = (u % p.cblocks) * p.cb, cn = p.Cg - c0 < p.cb ? p.Cg - c0 : p.cb;
        const int64_t on = p.Og - o0 < p.ob ? p.Og - o0 : p.ob, ch = gi * p.Og + o0;
        T *dst = (j == 0 ? gw : part + (j - 1) * size) + ch * p.R + c0 * kk;
        T *cols = (T *)conv_scratch((size_t)(p.R * p.TW) * sizeof(T));
        if (!cols) {
            job->failed = 1;
            continue;
        }
        int first = 1;
        for (int64_t n = p.N * j / p.slots; n < p.N * (j + 1) / p.slots; n++) {
            for (int64_t oh0 = 0; oh0 < p.Ho; oh0 += p.rows) {
                const int64_t oh1 = oh0 + p.rows < p.Ho ? oh0 + p.rows : p.Ho, tw = (oh1 - oh0) * p.Wo;
                FN(im2col_rows)(x + (n * p.C + gi * p.Cg + c0) * p.H * p.W, cols, tw, g, cn, oh0, oh1);
                FN(gemm)(job->held, 0, 1, on, cn * kk, tw, gy + (n * p.O + ch) * p.L + oh0 * p.Wo, p.L, cols, tw,
                         !first, dst, p.R);
                first = 0;
            }
        }
    }
}

/* Elements [e0, e1) of gw: every element gets its partials added in slice order. */
static void FN(conv_add_partials)(void *ctx, int64_t e0, int64_t e1) {
    const FN(conv_job) *job = (const FN(conv_job) *)ctx;
    const int64_t size = job->p.O * job->p.R;
    T *gw = job->out;
    for (int64_t j = 1; j < job->p.slots; j++) {
        const T *src = job->part + (j - 1) * size;
        for (int64_t e = e0; e < e1; e++) gw[e] += src[e];
    }
}

int FN(rumus_conv2d_fused_backward_weight)(const void *gyv, const void *xv, void *gwv, const int64_t *g) {
    T *gw = (T *)gwv;
    CONV_BEGIN(p.slots * p.G * p.oblocks * p.cblocks)
    const int64_t size = p.O * p.R;
    if (p.N == 0 || p.L == 0) {
        conv_blas_restore(prev);
        memset(gw, 0, (size_t)size * sizeof(T));
        return 1;
    }
    T *part = NULL;
    if (p.slots > 1 && !(part = (T *)malloc((size_t)((p.slots - 1) * size) * sizeof(T)))) {
        conv_blas_restore(prev);
        return 0;
    }
    FN(conv_job) job = {p, g, (const T *)xv, NULL, NULL, (const T *)gyv, gw, part, 0, prev};
    rumus_parallel_for(nt, units, FN(conv_weight_grad_units), &job);
    conv_blas_restore(prev);
    if (part) {
        rumus_parallel_for(rumus_threads_for(size * (p.slots - 1)), size, FN(conv_add_partials), &job);
        free(part);
    }
    return !job.failed;
}

/* [c][n][hw] <-> [n][c][hw]: the channel-major GEMM works over the whole batch at once. */
void FN(rumus_conv_to_nchw)(const void *srcv, void *dstv, int64_t n, int64_t c, int64_t hw) {
    const T *src = (const T *)srcv;
    T *dst = (T *)dstv;
    for (int64_t b = 0; b < n; b++)
        for (int64_t k = 0; k < c; k++) memcpy(dst + (b * c + k) * hw, src + (k * n + b) * hw, (size_t)hw * sizeof(T));
}

void FN(rumus_conv_from_nchw)(const void *srcv, void *dstv, int64_t n, int64_t c, int64_t hw) {
    const T *src = (const T *)srcv;
    T *dst = (T *)dstv;
    for (int64_t k = 0; k < c; k++)
        for (int64_t b = 0; b < n; b++) memcpy(dst + (k * n + b) * hw, src + (b * c + k) * hw, (size_t)hw * sizeof(T));
}

/* ---- pooling: planes are independent ---------------------------------------------------------- */

/* A plane's sizes and windows, named from g. */
#define POOL_WINDOWS                                                                               \
    const int64_t H = g[1], W = g[2], Ho = g[3], Wo = g[4], kh = g[5], kw = g[6];                   \
    const int64_t sh = g[7], sw = g[8], ph = g[9], pw = g[10], dh = g[11], dw = g[12];              \
    RUMUS_UNUSED(kh); RUMUS_UNUSED(kw); RUMUS_UNUSED(sh); RUMUS_UNUSED(sw);                          \
    RUMUS_UNUSED(ph); RUMUS_UNUSED(pw); RUMUS_UNUSED(dh); RUMUS_UNUSED(dw);

/* A pooling kernel's first lines: its geometry, and its threads `nt` over the P planes. */
#define POOL_GEOMETRY                                                                              \
    const int64_t P = g[0];                                                                        \
    POOL_WINDOWS                                                                                   \
    if (P == 0) return;                                                                            \
    const int nt = rumus_threads_for_units(P, P * (H * W + Ho * Wo * kh * kw));

/* One pooling kernel on the pool, over planes: `in` (x, or the gradient arriving) into `out`; max
   pooling's gradient also reads x. */
typedef struct {
    const T *in, *x;
    T *out;
    const int64_t *g;
    int fast2, tiled, backward;
} FN(pool_job);

/* The window's rows [ilo, ihi) and columns [jlo, jhi) inside the plane (divisions only at borders). */
static inline void FN(window_range)(int64_t H, int64_t W, int64_t h0, int64_t w0, int64_t kh, int64_t kw, int64_t dh,
                                    int64_t dw, int64_t *r) {
    if (h0 >= 0 && h0 + (kh - 1) * dh < H) {
        r[0] = 0;
        r[1] = kh;
    } else {
        valid_range(H, h0, dh, kh, &r[0], &r[1]);
    }
    if (w0 >= 0 && w0 + (kw - 1) * dw < W) {
        r[2] = 0;
        r[3] = kw;
    } else {
        valid_range(W, w0, dw, kw, &r[2], &r[3]);
    }
}

/* Row-major index in the plane of the window's maximum, or -1 if the window holds no element, with
   PyTorch's rule (a later element wins if it is greater or NaN). The max and the first element equal to
   it are found with selects (no data-dependent branches: on random data those mispredict more than the
   loads cost); a window holding a NaN is redone with the rule spelled out. */
static inline int64_t FN(window_argmax)(const T *xp, int64_t H, int64_t W, int64_t h0, int64_t w0, int64_t kh,
                                        int64_t kw, int64_t dh, int64_t dw, T *best) {
    int64_t r[4];
    FN(window_range)(H, W, h0, w0, kh, kw, dh, dw, r);
    if (r[0] >= r[1] || r[2] >= r[3]) {
        *best = (T)-INFINITY;
        return -1;
    }
    const T *first = xp + (h0 + r[0] * dh) * W + w0 + r[2] * dw;
    T m = *first;
    int bad = 0;
    for (int64_t i = r[0]; i < r[1]; i++) {
        const T *row = xp + (h0 + i * dh) * W + w0;
        for (int64_t j = r[2]; j < r[3]; j++) {
            const T v = row[j * dw];
            m = v > m ? v : m;
            bad |= v != v;
        }
    }
    int64_t idx = -1;
    if (!bad) {
        for (int64_t i = r[1] - 1; i >= r[0]; i--) { /* backwards, so the first equal element is kept */
            const int64_t row = (h0 + i * dh) * W + w0;
            for (int64_t j = r[3] - 1; j >= r[2]; j--) idx = xp[row + j * dw] == m ? row + j * dw : idx;
        }
    } else {
        for (int64_t i = r[0]; i < r[1]; i++) {
            const int64_t row = (h0 + i * dh) * W + w0;
            for (int64_t j = r[2]; j < r[3]; j++) {
                const T v = xp[row + j * dw];
                if (idx < 0 || v > m || v != v) {
                    m = v;
                    idx = row + j * dw;
                }
            }
        }
    }
    *best = m;
    return idx;
}

/* Whether every window lies inside the plane (no padding reached, no ceil-mode overhang). */
static inline int FN(windows_inside)(const int64_t *g) {
    const int64_t H = g[1], W = g[2], Ho = g[3], Wo = g[4], kh = g[5], kw = g[6], sh = g[7], sw = g[8];
    return g[9] == 0 && g[10] == 0 && (Ho - 1) * sh + (kh - 1) * g[11] < H && (Wo - 1) * sw + (kw - 1) * g[12] < W;
}

/* 2x2 / stride 2 windows inside the plane, one output row: the max as PyTorch's rule gives it. */
static inline void FN(max2x2_row)(const T *r0, const T *r1, T *out, int64_t Wo) {
    for (int64_t ow = 0; ow < Wo; ow++) {
        const T a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
        T m = a;
        m = (b > m) | (b != b) ? b : m;
        m = (c > m) | (c != c) ? c : m;
        m = (d > m) | (d != d) ? d : m;
        out[ow] = m;
    }
}

/* Its gradient: each window's grad goes to its first maximum, every element of the two input rows is
   written once (vectorises). Returns nonzero if a NaN was seen: the caller redoes the row exactly. */
static inline int FN(max2x2_backward_row)(const T *restrict r0, const T *restrict r1, const T *restrict gr,
                                          T *restrict o0, T *restrict o1, int64_t Wo) {
    int bad = 0;
    for (int64_t ow = 0; ow < Wo; ow++) {
        const T a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
        const T m1 = a > b ? a : b, m2 = c > d ? c : d, m = m1 > m2 ? m1 : m2;
        const int ea = a == m, eb = !ea & (b == m), ec = !ea & !eb & (c == m), ed = !ea & !eb & !ec;
        const T v = gr[ow];
        o0[2 * ow] = ea ? v : (T)0;
        o0[2 * ow + 1] = eb ? v : (T)0;
        o1[2 * ow] = ec ? v : (T)0;
        o1[2 * ow + 1] = ed ? v : (T)0;
        bad |= (a != a) | (b != b) | (c != c) | (d != d);
    }
    return bad;
}

static void FN(max_pool_planes)(void *ctx, int64_t p0, int64_t p1) {
    const FN(pool_job) *job = (const FN(pool_job) *)ctx;
    const int64_t *g = job->g;
    POOL_WINDOWS
    const T *x = job->in;
    T *y = job->out;
    const int fast2 = job->fast2;
    for (int64_t p = p0; p < p1; p++) {
        const T *xp = x + p * H * W;
        T *yp = y + p * Ho * Wo;
        for (int64_t oh = 0; oh < Ho; oh++) {
            if (fast2) {
                FN(max2x2_row)(xp + 2 * oh * W, xp + (2 * oh + 1) * W, yp + oh * Wo, Wo);
                continue;
            }
            for (int64_t ow = 0; ow < Wo; ow++) {
                T m;
                FN(window_argmax)(xp, H, W, oh * sh - ph, ow * sw - pw, kh, kw, dh, dw, &m);
                yp[oh * Wo + ow] = m;
            }
        }
    }
}

void FN(rumus_max_pool2d)(const void *xv, void *yv, const int64_t *g) {
    POOL_GEOMETRY
    const int fast2 = kh == 2 && kw == 2 && sh == 2 && sw == 2 && dh == 1 && dw == 1 && FN(windows_inside)(g);
    FN(pool_job) job = {(const T *)xv, NULL, (T *)yv, g, fast2, 0, 0};
    rumus_parallel_for(nt, P, FN(max_pool_planes), &job);
}

static void FN(max_pool_backward_planes)(void *ctx, int64_t p0, int64_t p1) {
    const FN(pool_job) *job = (const FN(pool_job) *)ctx;
    const int64_t *g = job->g;
    POOL_WINDOWS
    const T *gr = job->in;
    const T *x = job->x;
    T *gx = job->out;
    const int fast2 = job->fast2, tiled = job->tiled;
    for (int64_t p = p0; p < p1; p++) {
        const T *xp = x + p * H * W;
        const T *gp = gr + p * Ho * Wo;
        T *gxp = gx + p * H * W;
        if (!tiled) memset(gxp, 0, (size_t)(H * W) * sizeof(T));
        for (int64_t oh = 0; oh < Ho; oh++) {
            if (fast2 && !FN(max2x2_backward_row)(xp + 2 * oh * W, xp + (2 * oh + 1) * W, gp + oh * Wo,
                                                  gxp + 2 * oh * W, gxp + (2 * oh + 1) * W, Wo))
                continue;
            if (fast2) { /* a NaN in these rows: clear them and take the exact path */
                memset(gxp + 2 * oh * W, 0, (size_t)(2 * W) * sizeof(T));
            }
            for (int64_t ow = 0; ow < Wo; ow++) {
                T m;
                const int64_t idx = FN(window_argmax)(xp, H, W, oh * sh - ph, ow * sw - pw, kh, kw, dh, dw, &m);
                if (idx >= 0) gxp[idx] += gp[oh * Wo + ow];
            }
        }
    }
}

void FN(rumus_max_pool2d_backward)(const void *gv, const void *xv, void *gxv, const int64_t *g) {
    POOL_GEOMETRY
    const int fast2 = kh == 2 && kw == 2 && sh == 2 && sw == 2 && dh == 1 && dw == 1 && FN(windows_inside)(g);
    const int tiled = fast2 && H == 2 * Ho && W == 2 * Wo; /* the windows cover every element */
    FN(pool_job) job = {(const T *)gv, (const T *)xv, (T *)gxv, g, fast2, tiled, 0};
    rumus_parallel_for(nt, P, FN(max_pool_backward_planes), &job);
}

/* PyTorch's avg_pool2d window: clipped to the padded input for the divisor, to the input for the sum. */
static inline double FN(avg_window)(const int64_t *g, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1, int64_t *w0,
                                    int64_t *w1) {
    const int64_t H = g[1], W = g[2], kh = g[5], kw = g[6], sh = g[7], sw = g[8], ph = g[9], pw = g[10];
    const int64_t include_pad = g[13], divisor = g[14];
    int64_t hs = oh * sh - ph, ws = ow * sw - pw;
    int64_t he = hs + kh < H + ph ? hs + kh : H + ph, we = ws + kw < W + pw ? ws + kw : W + pw;
    const int64_t pool = (he - hs) * (we - ws);
    hs = hs < 0 ? 0 : hs;
    ws = ws < 0 ? 0 : ws;
    he = he > H ? H : he;
    we = we > W ? W : we;
    *h0 = hs;
    *h1 = he;
    *w0 = ws;
    *w1 = we;
    if (divisor > 0) return (double)divisor;
    return include_pad ? (double)pool : (double)((he - hs) * (we - ws));
}

/* Planes [p0, p1). Both directions walk the same windows: forward sums each window of x into y; backward
   spreads each gy element over its window of gx (zeroed first). */
static void FN(avg_pool_planes)(void *ctx, int64_t p0, int64_t p1) {
    const FN(pool_job) *job = (const FN(pool_job) *)ctx;
    const int64_t *g = job->g;
    POOL_WINDOWS
    const T *in = job->in;
    T *out = job->out;
    const int backward = job->backward;
    const int64_t in_plane = backward ? Ho * Wo : H * W, out_plane = backward ? H * W : Ho * Wo;
    for (int64_t p = p0; p < p1; p++) {
        const T *ip = in + p * in_plane;
        T *op = out + p * out_plane;
        if (backward) memset(op, 0, (size_t)(H * W) * sizeof(T));
        for (int64_t oh = 0; oh < Ho; oh++) {
            for (int64_t ow = 0; ow < Wo; ow++) {
                int64_t h0, h1, w0, w1;
                const double div = FN(avg_window)(g, oh, ow, &h0, &h1, &w0, &w1);
                if (backward) {
                    const T v = (T)((double)ip[oh * Wo + ow] / div);
                    for (int64_t ih = h0; ih < h1; ih++)
                        for (int64_t iw = w0; iw < w1; iw++) op[ih * W + iw] += v;
                    continue;
                }
                double s = 0.0;
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++) s += (double)ip[ih * W + iw];
                op[oh * Wo + ow] = (h0 < h1 && w0 < w1) ? (T)(s / div) : (T)0;
            }
        }
    }
}

/* avg pooling of all P planes (backward: its gradient), split over planes. */
static void FN(avg_pool)(const T *in, T *out, const int64_t *g, int backward) {
    POOL_GEOMETRY
    FN(pool_job) job = {in, NULL, out, g, 0, 0, backward};
    rumus_parallel_for(nt, P, FN(avg_pool_planes), &job);
}

void FN(rumus_avg_pool2d)(const void *xv, void *yv, const int64_t *g) {
    FN(avg_pool)((const T *)xv, (T *)yv, g, 0);
}

void FN(rumus_avg_pool2d_backward)(const void *gv, void *gxv, const int64_t *g) {
    FN(avg_pool)((const T *)gv, (T *)gxv, g, 1);
}

#undef POOL_GEOMETRY
#undef POOL_WINDOWS
