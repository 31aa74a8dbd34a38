/* The AVX-512 VNNI quantized matmuls (csrc/quant_vnni.c), called by csrc/quant.c's dispatch only when
   the CPU has them (rumus_quant_vnni_compiled() says whether this compiler could build them at all). */
#ifndef RUMUS_QUANT_VNNI_H
#define RUMUS_QUANT_VNNI_H

#include <stdint.h>

int rumus_quant_vnni_compiled(void);
/* Both return 0 on success, -1 when a scratch allocation failed (out is then untouched). */
int rumus_q8_linear_vnni(float *out, const float *x, const uint32_t *words, int64_t m, int64_t k, int64_t n,
                         int64_t bs);
int rumus_int4_linear_vnni(float *out, const float *x, const uint32_t *words, const float *scales,
                           const float *zeros, int64_t m, int64_t k, int64_t n, int64_t g);

#endif
