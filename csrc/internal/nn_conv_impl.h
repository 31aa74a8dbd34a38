/* Included by nn_conv.c once per element type T, with FN(name) adding the dtype suffix. No include guard. */

void FN(rumus_im2col)(const void *xv, void *colsv, const int64_t *g) {
    const T *x = (const T *)xv;
    T *cols = (T *)colsv;
    const int64_t N = g[0], C = g[1], H = g[2], W = g[3], kh = g[4], kw = g[5], sh = g[6], sw = g[7];
    const int64_t ph = g[8], pw = g[9], dh = g[10], dw = g[11], Ho = g[12], Wo = g[13];
    const int64_t R = C * kh * kw, L = Ho * Wo, NL = N * L;
    if (R == 0 || NL == 0) return;
    int nt = rumus_threads_for(R * NL);
    if (nt > R) nt = (int)R;
RUMUS_PARALLEL_FOR
    for (int t = 0; t < nt; t++) {
        for (int64_t r = R * t / nt; r < R * (t + 1) / nt; r++) {
            const int64_t c = r / (kh * kw), i = (r / kw) % kh, j = r % kw;
            const int64_t off = j * dw - pw;
            int64_t lo, hi;
            valid_range(W, off, sw, Wo, &lo, &hi);
            T *dst = cols + r * NL;
            for (int64_t n = 0; n < N; n++) {
                const T *plane = x + (n * C + c) * H * W;
                for (int64_t oh = 0; oh < Ho; oh++, dst += Wo) {
                    const int64_t ih = oh * sh - ph + i * dh;
                    if (ih < 0 || ih >= H) {
                        memset(dst, 0, (size_t)Wo * sizeof(T));
                        continue;
                    }
                    const T *src = plane + ih * W + off;
                    for (int64_t ow = 0; ow < lo; ow++) dst[ow] = 0;
                    if (sw == 1) {
                        memcpy(dst + lo, src + lo, (size_t)(hi - lo) * sizeof(T));
                    } else {
                        for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[ow * sw];
                    }
                    for (int64_t ow = hi; ow < Wo; ow++) dst[ow] = 0;
                }
            }
        }
    }
}

void FN(rumus_col2im)(const void *colsv, void *xv, const int64_t *g) {
    const T *cols = (const T *)colsv;
    T *x = (T *)xv;
    const int64_t N = g[0], C = g[1], H = g[2], W = g[3], kh = g[4], kw = g[5], sh = g[6], sw = g[7];
    const int64_t ph = g[8], pw = g[9], dh = g[10], dw = g[11], Ho = g[12], Wo = g[13];
    const int64_t L = Ho * Wo, NL = N * L;
    if (C == 0 || N == 0) return;
    int nt = rumus_threads_for(C * kh * kw * NL);
    if (nt > C) nt = (int)C;
RUMUS_PARALLEL_FOR
    for (int t = 0; t < nt; t++) {
        /* channels are independent: rows of one channel only ever write that channel's planes */
        for (int64_t c = C * t / nt; c < C * (t + 1) / nt; c++) {
            for (int64_t n = 0; n < N; n++) memset(x + (n * C + c) * H * W, 0, (size_t)(H * W) * sizeof(T));
            for (int64_t i = 0; i < kh; i++) {
                for (int64_t j = 0; j < kw; j++) {
                    const int64_t off = j * dw - pw;
                    int64_t lo, hi;
                    valid_range(W, off, sw, Wo, &lo, &hi);
                    const T *src = cols + ((c * kh + i) * kw + j) * NL;
                    for (int64_t n = 0; n < N; n++) {
                        T *plane = x + (n * C + c) * H * W;
                        for (int64_t oh = 0; oh < Ho; oh++, src += Wo) {
                            const int64_t ih = oh * sh - ph + i * dh;
                            if (ih < 0 || ih >= H) continue;
                            T *dst = plane + ih * W + off;
                            if (sw == 1) {
                                for (int64_t ow = lo; ow < hi; ow++) dst[ow] += src[ow];
                            } else {
                                for (int64_t ow = lo; ow < hi; ow++) dst[ow * sw] += src[ow];
                            }
                        }
                    }
                }
            }
        }
    }
}

/* [c][n][hw] -> [n][c][hw] and back: the GEMM works channel-major over the whole batch. */
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

#define POOL_GEOMETRY                                                                              \
    const int64_t P = g[0], H = g[1], W = g[2], Ho = g[3], Wo = g[4], kh = g[5], kw = g[6];         \
    const int64_t sh = g[7], sw = g[8], ph = g[9], pw = g[10], dh = g[11], dw = g[12];              \
    RUMUS_UNUSED(sh); RUMUS_UNUSED(sw); RUMUS_UNUSED(ph); RUMUS_UNUSED(pw);                          \
    RUMUS_UNUSED(dh); RUMUS_UNUSED(dw);                                                            \
    if (P == 0) return;                                                                            \
    int nt = rumus_threads_for(P * Ho * Wo * kh * kw);                                             \
    if (nt > P) nt = (int)P;

/* Row-major index in the plane of the window's first maximum (NaN wins), or -1 if it has no element. */
static inline int64_t FN(window_argmax)(const T *xp, int64_t H, int64_t W, int64_t h0, int64_t w0, int64_t kh,
                                        int64_t kw, int64_t dh, int64_t dw, T *best) {
    int64_t idx = -1;
    T m = (T)-INFINITY;
    for (int64_t i = 0; i < kh; i++) {
        const int64_t ih = h0 + i * dh;
        if (ih < 0 || ih >= H) continue;
        for (int64_t j = 0; j < kw; j++) {
            const int64_t iw = w0 + j * dw;
            if (iw < 0 || iw >= W) continue;
            const T v = xp[ih * W + iw];
            if (idx < 0 || v > m || v != v) { /* PyTorch's rule: a NaN always takes over */
                m = v;
                idx = ih * W + iw;
            }
        }
    }
    *best = m;
    return idx;
}

void FN(rumus_max_pool2d)(const void *xv, void *yv, const int64_t *g) {
    const T *x = (const T *)xv;
    T *y = (T *)yv;
    POOL_GEOMETRY
RUMUS_PARALLEL_FOR
    for (int t = 0; t < nt; t++) {
        for (int64_t p = P * t / nt; p < P * (t + 1) / nt; p++) {
            const T *xp = x + p * H * W;
            T *yp = y + p * Ho * Wo;
            for (int64_t oh = 0; oh < Ho; oh++) {
                for (int64_t ow = 0; ow < Wo; ow++) {
                    T m;
                    FN(window_argmax)(xp, H, W, oh * sh - ph, ow * sw - pw, kh, kw, dh, dw, &m);
                    yp[oh * Wo + ow] = m;
                }
            }
        }
    }
}

void FN(rumus_max_pool2d_backward)(const void *gv, const void *xv, void *gxv, const int64_t *g) {
    const T *gr = (const T *)gv;
    const T *x = (const T *)xv;
    T *gx = (T *)gxv;
    POOL_GEOMETRY
RUMUS_PARALLEL_FOR
    for (int t = 0; t < nt; t++) {
        for (int64_t p = P * t / nt; p < P * (t + 1) / nt; p++) {
            const T *xp = x + p * H * W;
            const T *gp = gr + p * Ho * Wo;
            T *gxp = gx + p * H * W;
            memset(gxp, 0, (size_t)(H * W) * sizeof(T));
            for (int64_t oh = 0; oh < Ho; oh++) {
                for (int64_t ow = 0; ow < Wo; ow++) {
                    T m;
                    const int64_t idx = FN(window_argmax)(xp, H, W, oh * sh - ph, ow * sw - pw, kh, kw, dh, dw, &m);
                    if (idx >= 0) gxp[idx] += gp[oh * Wo + ow];
                }
            }
        }
    }
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

void FN(rumus_avg_pool2d)(const void *xv, void *yv, const int64_t *g) {
    const T *x = (const T *)xv;
    T *y = (T *)yv;
    POOL_GEOMETRY
RUMUS_PARALLEL_FOR
    for (int t = 0; t < nt; t++) {
        for (int64_t p = P * t / nt; p < P * (t + 1) / nt; p++) {
            const T *xp = x + p * H * W;
            T *yp = y + p * Ho * Wo;
            for (int64_t oh = 0; oh < Ho; oh++) {
                for (int64_t ow = 0; ow < Wo; ow++) {
                    int64_t h0, h1, w0, w1;
                    const double div = FN(avg_window)(g, oh, ow, &h0, &h1, &w0, &w1);
                    double s = 0.0;
                    for (int64_t ih = h0; ih < h1; ih++)
                        for (int64_t iw = w0; iw < w1; iw++) s += (double)xp[ih * W + iw];
                    yp[oh * Wo + ow] = (h0 < h1 && w0 < w1) ? (T)(s / div) : (T)0;
                }
            }
        }
    }
}

void FN(rumus_avg_pool2d_backward)(const void *gv, void *gxv, const int64_t *g) {
    const T *gr = (const T *)gv;
    T *gx = (T *)gxv;
    POOL_GEOMETRY
RUMUS_PARALLEL_FOR
    for (int t = 0; t < nt; t++) {
        for (int64_t p = P * t / nt; p < P * (t + 1) / nt; p++) {
            const T *gp = gr + p * Ho * Wo;
            T *gxp = gx + p * H * W;
            memset(gxp, 0, (size_t)(H * W) * sizeof(T));
            for (int64_t oh = 0; oh < Ho; oh++) {
                for (int64_t ow = 0; ow < Wo; ow++) {
                    int64_t h0, h1, w0, w1;
                    const double div = FN(avg_window)(g, oh, ow, &h0, &h1, &w0, &w1);
                    const T v = (T)((double)gp[oh * Wo + ow] / div);
                    for (int64_t ih = h0; ih < h1; ih++)
                        for (int64_t iw = w0; iw < w1; iw++) gxp[ih * W + iw] += v;
                }
            }
        }
    }
}

#undef POOL_GEOMETRY
