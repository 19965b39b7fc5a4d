/* internal.h -- helpers shared by the library's translation units. Only static inline code and
 * declarations of internal (non-exported) functions live here. */
#ifndef LOFP_INTERNAL_H
#define LOFP_INTERNAL_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>

#include "lofp/lofp.h"

#define LOFP_INTERNAL __attribute__((visibility("hidden")))
#define LOFP_LIKELY(x) __builtin_expect(!!(x), 1)
#define LOFP_UNLIKELY(x) __builtin_expect(!!(x), 0)

static inline uint32_t lofp_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float lofp_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* a * b into *out; returns 0 on overflow. */
static inline int lofp_mul_size(size_t a, size_t b, size_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
static inline int lofp_add_size(size_t a, size_t b, size_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}
static inline size_t lofp_ceil_div(size_t a, size_t b) { return a / b + (a % b != 0); }

/* Reads element i of a dense input of dtype dt as fp32 (exact widening). */
static inline float lofp_load_f32(lofp_dtype dt, const void *x, size_t i)
{
    if (dt == LOFP_DTYPE_F32) return ((const float *)x)[i];
    uint16_t h = ((const uint16_t *)x)[i];
    return dt == LOFP_DTYPE_BF16 ? lofp_bits_f32((uint32_t)h << 16) : lofp_fp16_to_fp32(h);
}

/* Writes fp32 v to element i of a dense output of dtype dt (RNE narrowing). */
static inline void lofp_store_f32(lofp_dtype dt, void *y, size_t i, float v)
{
    if (dt == LOFP_DTYPE_F32) ((float *)y)[i] = v;
    else if (dt == LOFP_DTYPE_BF16) ((uint16_t *)y)[i] = lofp_fp32_to_bf16(v);
    else ((uint16_t *)y)[i] = lofp_fp32_to_fp16(v);
}

/* splitmix64: the project's one source of reproducible random bits. */
static inline uint64_t lofp_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The per-element random word STOCHASTIC rounding uses for flat element index i of a tensor
 * quantized with `seed`: independent of threading and chunking. */
static inline uint32_t lofp_stochastic_bits(uint64_t seed, uint64_t i)
{
    uint64_t s = seed ^ (i * 0xD1B54A32D192ED03ull);
    return (uint32_t)(lofp_splitmix64(&s) >> 32);
}

#endif
