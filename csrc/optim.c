/* Fused optimizer steps (PyTorch's Adam/AdamW and SGD update rules), in place, computed in double. */
#include "internal/rumus.h"
#include "optim.h"

typedef struct {
    double lr, beta1, beta2, eps, wd, step_size, sqrt_bc2, sign; /* sign: -1 maximizes (the gradient negated) */
    int decoupled;
    /* amsgrad's running maximum of exp_avg_sq, a fifth operand (rumus_iterate takes four): all operands are
       contiguous, so its element is at the same byte offset from vmax0 as param's is from p0 */
    char *vmax0;
    const char *p0;
} adam_ctx;

typedef struct {
    double lr, momentum, dampening, wd;
    int nesterov, first;
} sgd_ctx;

/* The contiguous loop in T; AMS (a constant) keeps amsgrad's running maximum in X_ and divides by it. */
#define ADAM_CONTIGUOUS(T, AMS)                                                                         \
    for (int64_t i = 0; i < n; i++) {                                                                   \
        const T Pv = P_[i] * tdecay, Gv = tsign * G_[i] + tl2 * Pv;                                     \
        const T Mv = tb1 * M_[i] + ob1 * Gv, Vv = tb2 * V_[i] + ob2 * Gv * Gv;                          \
        T Wv = Vv;                                                                                      \
        M_[i] = Mv;                                                                                     \
        V_[i] = Vv;                                                                                     \
        if (AMS) {                                                                                      \
            Wv = X_[i] < Vv ? Vv : X_[i];                                                               \
            X_[i] = Wv;                                                                                 \
        }                                                                                               \
        P_[i] = Pv - tss * Mv / (_Generic(Wv, float: sqrtf, default: sqrt)(Wv) * tinv + teps);          \
    }

/* operands: param, grad, exp_avg, exp_avg_sq (+ max_exp_avg_sq through the context) */
#define DEF_ADAM(sfx, TT, ...)                                                                          \
    static void adam_##sfx(int64_t n, char **p, const int64_t *s, const void *ctx) {                    \
        typedef TT T;                                                                                   \
        const adam_ctx *c = (const adam_ctx *)ctx;                                                      \
        const double wd = c->wd, b1 = c->beta1, b2 = c->beta2;                                          \
        const double decay = c->decoupled ? 1.0 - c->lr * wd : 1.0, l2 = c->decoupled ? 0.0 : wd;       \
        T *VM_ = c->vmax0 ? (T *)(c->vmax0 + (p[0] - c->p0)) : NULL;                                    \
        if (s[0] == sizeof(T) && s[1] == sizeof(T) && s[2] == sizeof(T) && s[3] == sizeof(T)) {         \
            /* contiguous: arithmetic in T, as PyTorch does, so the loop vectorizes (sqrt, div) */     \
            T *restrict P_ = (T *)p[0], *restrict M_ = (T *)p[2], *restrict V_ = (T *)p[3];             \
            const T *restrict G_ = (const T *)p[1];                                                     \
            const T tb1 = (T)b1, tb2 = (T)b2, ob1 = (T)(1.0 - b1), ob2 = (T)(1.0 - b2);                 \
            const T tdecay = (T)decay, tl2 = (T)l2, tss = (T)c->step_size, tsign = (T)c->sign;          \
            const T tinv = (T)(1.0 / c->sqrt_bc2), teps = (T)c->eps;                                    \
            T *restrict X_ = VM_;                                                                       \
            if (VM_)                                                                                    \
                ADAM_CONTIGUOUS(T, 1)                                                                   \
            else                                                                                        \
                ADAM_CONTIGUOUS(T, 0)                                                                   \
            return;                                                                                     \
        }                                                                                               \
        for (int64_t i = 0; i < n; i++) {                                                               \
            T *pp = (T *)(p[0] + i * s[0]), *pm = (T *)(p[2] + i * s[2]), *pv = (T *)(p[3] + i * s[3]); \
            double P = (double)*pp, G = c->sign * (double)*(const T *)(p[1] + i * s[1]);                \
            if (wd != 0.0) {                                                                            \
                P *= decay;                                                                             \
                G += l2 * P;                                                                            \
            }                                                                                           \
            const double M = b1 * (double)*pm + (1.0 - b1) * G;                                         \
            double V = b2 * (double)*pv + (1.0 - b2) * G * G;                                           \
            *pm = (T)M;                                                                                 \
            *pv = (T)V;                                                                                 \
            if (VM_) {                                                                                  \
                T *px = (T *)(c->vmax0 + ((char *)pp - c->p0));                                         \
                if ((double)*px > V) V = (double)*px;                                                   \
                *px = (T)V;                                                                             \
            }                                                                                           \
            *pp = (T)(P - c->step_size * M / (sqrt(V) / c->sqrt_bc2 + c->eps));                         \
        }                                                                                               \
    }

/* operands: param, grad, momentum_buffer */
#define DEF_SGD(sfx, TT, ...)                                                                           \
    static void sgd_##sfx(int64_t n, char **p, const int64_t *s, const void *ctx) {                     \
        typedef TT T;                                                                                   \
        const sgd_ctx *c = (const sgd_ctx *)ctx;                                                        \
        for (int64_t i = 0; i < n; i++) {                                                               \
            T *pp = (T *)(p[0] + i * s[0]), *pb = (T *)(p[2] + i * s[2]);                               \
            const double P = (double)*pp;                                                               \
            double G = (double)*(const T *)(p[1] + i * s[1]);                                           \
            if (c->wd != 0.0) G += c->wd * P;                                                           \
            if (c->momentum != 0.0) {                                                                   \
                const double B = c->first ? G : c->momentum * (double)*pb + (1.0 - c->dampening) * G;   \
                *pb = (T)B;                                                                             \
                G = c->nesterov ? G + c->momentum * B : B;                                              \
            }                                                                                           \
            *pp = (T)(P - c->lr * G);                                                                   \
        }                                                                                               \
    }

RUMUS_EACH_FLOAT(DEF_ADAM, _)
RUMUS_EACH_FLOAT(DEF_SGD, _)

#define ENT_OPTIM(sfx, TT, ...)                                                                         \
    {"adam_" #sfx, adam_##sfx, {sizeof(TT), sizeof(TT), sizeof(TT), sizeof(TT)}},                       \
    {"sgd_" #sfx, sgd_##sfx, {sizeof(TT), sizeof(TT), sizeof(TT), 0}},

static const rumus_loop_entry TABLE[] = {RUMUS_EACH_FLOAT(ENT_OPTIM, _)};
#define TABLE_SIZE ((int64_t)(sizeof(TABLE) / sizeof(TABLE[0])))

int64_t rumus_optim_find(const char *name) { return rumus_table_find(TABLE, TABLE_SIZE, name); }

void rumus_adam_run(int64_t loop, const int64_t *meta, char *p, int64_t po, char *g, int64_t go, char *m, int64_t mo,
                    char *v, int64_t vo, double lr, double beta1, double beta2, double eps, double weight_decay,
                    int decoupled, double step_size, double sqrt_bc2) {
    const rumus_loop_entry *e = &TABLE[loop];
    char *base[4] = {p + po * e->isz[0], g + go * e->isz[1], m + mo * e->isz[2], v + vo * e->isz[3]};
    const adam_ctx c = {lr, beta1, beta2, eps, weight_decay, step_size, sqrt_bc2, 1.0, decoupled, NULL, NULL};
    rumus_iterate(4, meta, base, e->isz, e->fn, &c);
}

/* 1 - beta**t without the cancellation of 1 - pow near beta = 1 (beta2 = 0.999 at t = 1 loses 5 digits of
   float32 that way; the float64 reference computes 1 - beta**t directly in float64) */
static double bias_correction(double beta, double t) { return beta > 0.0 ? -expm1(t * log(beta)) : 1.0; }

void rumus_adam_dev_run(int64_t loop, const int64_t *meta, char *p, int64_t po, char *g, int64_t go, char *m,
                        int64_t mo, char *v, int64_t vo, char *vmax, int64_t xo, const char *step, int64_t so,
                        const char *found_inf, int64_t fo, double lr, double beta1, double beta2, double eps,
                        double weight_decay, int decoupled, int maximize) {
    if (((const float *)found_inf)[fo] != 0.0f) return; /* the scaler's skipped step: nothing is written */
    const double t = (double)((const float *)step)[so] + 1.0;
    const rumus_loop_entry *e = &TABLE[loop];
    char *base[4] = {p + po * e->isz[0], g + go * e->isz[1], m + mo * e->isz[2], v + vo * e->isz[3]};
    const adam_ctx c = {lr, beta1, beta2, eps, weight_decay, lr / bias_correction(beta1, t),
                        sqrt(bias_correction(beta2, t)), maximize ? -1.0 : 1.0, decoupled,
                        vmax ? vmax + xo * e->isz[0] : NULL, base[0]};
    rumus_iterate(4, meta, base, e->isz, e->fn, &c);
}

void rumus_adam_step_count(int64_t n, char **steps, const int64_t *offsets, const char *found_inf, int64_t fo) {
    if (((const float *)found_inf)[fo] != 0.0f) return;
    for (int64_t k = 0; k < n; k++) ((float *)steps[k])[offsets[k]] += 1.0f;
}

void rumus_sgd_run(int64_t loop, const int64_t *meta, char *p, int64_t po, char *g, int64_t go, char *buf,
                   int64_t bo, double lr, double momentum, double dampening, double weight_decay, int nesterov,
                   int first) {
    const rumus_loop_entry *e = &TABLE[loop];
    char *base[3] = {p + po * e->isz[0], g + go * e->isz[1], buf + bo * e->isz[2]};
    const sgd_ctx c = {lr, momentum, dampening, weight_decay, nesterov, first};
    rumus_iterate(3, meta, base, e->isz, e->fn, &c);
}
