/* cast.c -- exact casts between already-quantized formats (lofp/cast.h, docs/CHECKPOINTS.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "lofp/cast.h"

static void note_unfit(lofp_cast_report *rep, size_t idx)
{
    if (!rep) return;
    if (rep->n_first < 8) rep->first_unfit[rep->n_first++] = idx;
    rep->unfit_blocks++;
}

/* 1 when the 16 code bytes of a 32-block hold a non-zero magnitude (+-0 codes are zeros) */
static int block_nonzero(const uint8_t *c)
{
    int nz = 0;
    for (int i = 0; i < 16; i++) nz |= (c[i] & 0x77) != 0;
    return nz;
}

lofp_status lofp_cast_mxfp4_max_exponent(const uint8_t *codes, const uint8_t *e8m0, size_t rows, size_t k,
                                         int *xmax)
{
    if (!codes || !e8m0 || !xmax || !rows || !k) return LOFP_ERR_INVALID_ARG;
    if (k % 32) return LOFP_ERR_SHAPE;
    const size_t nb = k / 32, cb = k / 2;
    int m = INT32_MIN;
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < nb; b++) {
            uint8_t e = e8m0[r * nb + b];
            if (e == 0xFF) continue;
            if ((int)e - 127 > m && block_nonzero(codes + r * cb + b * 16)) m = (int)e - 127;
        }
    *xmax = m;
    return LOFP_OK;
}

lofp_status lofp_cast_mxfp4_to_nvfp4_with_global(const uint8_t *codes, const uint8_t *e8m0, size_t rows,
                                                 size_t k, float global_scale, uint8_t *nv_codes,
                                                 uint8_t *ue4m3, lofp_cast_report *rep)
{
    if (rep) memset(rep, 0, sizeof *rep);
    if (!codes || !e8m0 || !nv_codes || !ue4m3 || !rows || !k) return LOFP_ERR_INVALID_ARG;
    if (k % 32) return LOFP_ERR_SHAPE;
    int g;
    /* G must be an exact power of two inside fp32's normal range: then the new scales are exact */
    if (!(global_scale > 0.0f) || !isfinite(global_scale) || frexpf(global_scale, &g) != 0.5f) return LOFP_ERR_INVALID_ARG;
    g -= 1;
    if (g < -126 || g > 127) return LOFP_ERR_INVALID_ARG;
    const float G = global_scale;
    const size_t nb = k / 32, cb = k / 2;
    if (nv_codes != codes) memcpy(nv_codes, codes, rows * cb);
    /* UE4M3 bytes of the powers of two 2^-9 .. 2^8 (one encode each, not one per block) */
    uint8_t pow2[18];
    for (int t = -9; t <= 8; t++)
        pow2[t + 9] = (uint8_t)lofp_encode(LOFP_ELEM_UE4M3, ldexpf(1.0f, t), LOFP_RNE, LOFP_SATURATE, 0);
    lofp_scheme nv;
    lofp_scheme_preset("nvfp4", &nv);
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < nb; b++) {
            if (rep) rep->blocks++;
            uint8_t e = e8m0[r * nb + b];
            const uint8_t *c = codes + r * cb + b * 16;
            int nz = block_nonzero(c);
            uint8_t *s = ue4m3 + r * (k / 16) + 2 * b;
            int t = (int)e - 127 + g; /* UE4M3 scale 2^t */
            if (e != 0xFF && (!nz || (t >= -9 && t <= 8))) {
                uint8_t sb = !nz ? 0 : pow2[t + 9];
                s[0] = s[1] = sb;
                continue;
            }
            /* does not fit: requantize the decoded values (NaN blocks become zeros) */
            float v[32];
            for (int i = 0; i < 32; i++) {
                float q = lofp_decode(LOFP_ELEM_E2M1, (c[i / 2] >> (4 * (i & 1))) & 15);
                v[i] = e == 0xFF ? 0.0f : q * lofp_decode(LOFP_ELEM_E8M0, e);
            }
            lofp_status st = lofp_quantize_with_global(&nv, LOFP_DTYPE_F32, v, 2, 16, G,
                                                       nv_codes + r * cb + b * 16, s, NULL);
            if (st != LOFP_OK) return st;
            note_unfit(rep, r * nb + b);
        }
    return LOFP_OK;
}

lofp_status lofp_cast_mxfp4_to_nvfp4(const uint8_t *codes, const uint8_t *e8m0, size_t rows,
                                     size_t k, uint8_t *nv_codes, uint8_t *ue4m3,
                                     float *global_scale, lofp_cast_report *rep)
{
    if (rep) memset(rep, 0, sizeof *rep);
    if (!codes || !e8m0 || !nv_codes || !ue4m3 || !global_scale || !rows || !k) return LOFP_ERR_INVALID_ARG;
    int xmax;
    lofp_status st = lofp_cast_mxfp4_max_exponent(codes, e8m0, rows, k, &xmax);
    if (st) return st;
    /* the largest block exponent maps to UE4M3's largest power of two, 2^8 */
    int g = xmax == INT32_MIN ? 0 : 8 - xmax;
    if (g > 127) g = 127;
    if (g < -126) g = -126;
    *global_scale = ldexpf(1.0f, g);
    return lofp_cast_mxfp4_to_nvfp4_with_global(codes, e8m0, rows, k, *global_scale, nv_codes, ue4m3, rep);
}

/* The dequantized value of code value v with block scale s under each producer's formula. */
static float deq(lofp_profile p, float v, float s, float g)
{
    switch (p) {
    case LOFP_PROFILE_MODELOPT: return v * (s * g);
    case LOFP_PROFILE_TORCHAO: return v * (g * s);
    case LOFP_PROFILE_COMPRESSED_TENSORS: return v * (s / g);
    default: return (v * s) / g;
    }
}

static size_t count_mismatch(lofp_profile from, float in, lofp_profile to, float out,
                             const int *used)
{
    static const float vals[7] = { 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f };
    size_t bad = 0;
    for (int sb = 1; sb < 0x7F; sb++) {
        if (!used[sb]) continue;
        float s = lofp_decode(LOFP_ELEM_UE4M3, (uint32_t)sb);
        for (int i = 0; i < 7; i++) {
            float a = deq(from, vals[i], s, in), b = deq(to, vals[i], s, out);
            if (lofp_f32_bits(a) != lofp_f32_bits(b)) { bad++; break; }
        }
    }
    return bad;
}

lofp_status lofp_cast_nvfp4_global(lofp_profile from, float in, lofp_profile to,
                                   const uint8_t *scales, size_t n, float *out,
                                   lofp_cast_report *rep)
{
    if (rep) memset(rep, 0, sizeof *rep);
    if (!out || (n && !scales) || !(in > 0.0f && isfinite(in))) return LOFP_ERR_INVALID_ARG;
    int used[128] = { 0 };
    for (size_t i = 0; i < n; i++) used[scales[i] & 0x7F] = 1;
    if (rep) rep->blocks = n;
    const int flip = lofp_profile_decode_direction(from) != lofp_profile_decode_direction(to);
    volatile float one = 1.0f;
    float base = flip ? one / in : in;
    if (!(base > 0.0f && isfinite(base))) return LOFP_ERR_INVALID_ARG;
    float best = base;
    size_t bestbad = count_mismatch(from, in, to, base, used);
    uint32_t u = lofp_f32_bits(base);
    for (int d = 1; d <= 16 && bestbad; d++)
        for (int sgn = -1; sgn <= 1 && bestbad; sgn += 2) {
            float c = lofp_bits_f32(u + (uint32_t)(sgn * d));
            if (!(c > 0.0f && isfinite(c))) continue;
            if (count_mismatch(from, in, to, c, used) == 0) { best = c; bestbad = 0; }
        }
    *out = best;
    if (rep) rep->mismatched_scales = bestbad;
    return LOFP_OK;
}

lofp_status lofp_mxfp4_to_gguf(const uint8_t *codes, const uint8_t *e8m0, size_t rows, size_t k,
                               uint8_t *gguf)
{
    if (!codes || !e8m0 || !gguf || !rows || !k) return LOFP_ERR_INVALID_ARG;
    if (k % 32) return LOFP_ERR_SHAPE;
    const size_t nb = k / 32;
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < nb; b++) {
            uint8_t *o = gguf + (r * nb + b) * 17;
            o[0] = e8m0[r * nb + b];
            lofp_status st = lofp_fp4_repack(codes + r * (k / 2) + b * 16, o + 1, 1, 32, 32,
                                             LOFP_NIBBLE_STANDARD, LOFP_NIBBLE_GGUF);
            if (st != LOFP_OK) return st;
        }
    return LOFP_OK;
}

lofp_status lofp_gguf_to_mxfp4(const uint8_t *gguf, size_t rows, size_t k, uint8_t *codes,
                               uint8_t *e8m0)
{
    if (!codes || !e8m0 || !gguf || !rows || !k) return LOFP_ERR_INVALID_ARG;
    if (k % 32) return LOFP_ERR_SHAPE;
    const size_t nb = k / 32;
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < nb; b++) {
            const uint8_t *in = gguf + (r * nb + b) * 17;
            e8m0[r * nb + b] = in[0];
            lofp_status st = lofp_fp4_repack(in + 1, codes + r * (k / 2) + b * 16, 1, 32, 32,
                                             LOFP_NIBBLE_GGUF, LOFP_NIBBLE_STANDARD);
            if (st != LOFP_OK) return st;
        }
    return LOFP_OK;
}
