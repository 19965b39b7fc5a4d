/* profile.c -- the producer profiles (lofp.h lofp_profile): scalar reference code that computes,
 * bit for bit, what ModelOpt, compressed-tensors, torchao and ggml compute. Each function below
 * follows its producer's operations one by one, in fp32 with one rounding per operation (this file
 * is built with -ffp-contract=off like every other); the comments name the producer's step.
 * Speed is not a goal: a tensor is widened to fp32 once and walked block by block. The golden
 * fixtures in tests/quant/fixtures/ were written by the producers' own code
 * (scripts/fixtures/make_fixtures.py) and tests/quant/test_profiles.c compares every byte; ggml's
 * NVFP4 is compared with llama.cpp's own quantizer by `make test-engines` (tests/engines/). */
#include <math.h>
#include <stdlib.h>

#include "profile.h"

/* ---- small exact helpers ---- */

/* torch.clamp: NaN stays NaN. */
static float clampf(float v, float lo, float hi)
{
    if (v != v) return v;
    return v < lo ? lo : v > hi ? hi : v;
}

/* PyTorch's fp32 -> float8_e4m3fn cast (c10): RNE, |x| >= 464 and NaN give 0x7F with the sign. */
static uint8_t torch_e4m3(float v)
{
    uint32_t u = lofp_f32_bits(v), sign = (u >> 24) & 0x80u;
    if (v != v || fabsf(v) >= 464.0f) return (uint8_t)(0x7Fu | sign);
    return (uint8_t)lofp_encode(LOFP_ELEM_E4M3, v, LOFP_RNE, LOFP_SATURATE, 0);
}

/* PyTorch's float8_e4m3fn -> fp32 cast (c10): the value, and for the NaN bytes 0x7F / 0xFF the
 * byte's mantissa kept, 0x7FF00000 with the sign. The NaN's bits matter where torchao multiplies
 * by a NaN scale (a per-tensor scale of 0 makes every block scale 0/0): the product carries them,
 * and torchao's FP4 cast, which has no NaN, turns them into a code (0xFFF00000 gives 0xC). */
static float torch_e4m3_f32(uint8_t b)
{
    if ((b & 0x7Fu) == 0x7Fu) return lofp_bits_f32(((uint32_t)(b & 0x80u) << 24) | 0x7FF00000u);
    return lofp_decode(LOFP_ELEM_E4M3, b);
}

/* PyTorch's fp32 -> float8_e5m2 cast (c10): RNE with IEEE overflow; NaN gives 0x7F with the sign. */
static uint8_t torch_e5m2(float v)
{
    uint32_t u = lofp_f32_bits(v), sign = (u >> 24) & 0x80u;
    if (v != v) return (uint8_t)(0x7Fu | sign);
    return (uint8_t)lofp_encode(LOFP_ELEM_E5M2, v, LOFP_RNE, LOFP_IEEE, 0);
}

/* fp32 log2 as PyTorch/numpy give it: the correctly rounded value (the double result rounded once
 * more differs from a correctly rounded fp32 result only in cases no fixture or sweep has hit). */
static float log2_f32(float v) { return (float)log2((double)v); }

/* bf16 rounding of an fp32 value (what a bf16 tensor op stores). */
static float bf16r(float v) { return lofp_bf16_to_fp32(lofp_fp32_to_bf16(v)); }

/* torchao custom_fp_utils._f32_to_floatx_unpacked: RNE with saturation to the largest normal, the
 * sign bit kept (so -0 and negatives rounding to zero keep it); NaN goes through the normal-range
 * bit arithmetic. Returns the code in the low ebits + mbits + 1 bits. */
static uint32_t ao_f32_to_fx(float x, int ebits, int mbits)
{
    const int32_t exp_bias = (1 << (ebits - 1)) - 1;
    const uint32_t max_int = (1u << (ebits + mbits)) - 1u, sign_mask = 1u << (ebits + mbits);
    const int32_t magic = (1 << (23 - mbits - 1)) - 1;
    const float max_normal = ldexpf((float)((1 << (mbits + 1)) - 1) / (float)(1 << mbits),
                                    ((1 << ebits) - 1) - exp_bias);
    const float min_normal = ldexpf(1.0f, 1 - exp_bias);
    const uint32_t denorm_mask_int = (uint32_t)((127 - exp_bias) + (23 - mbits) + 1) << 23;
    uint32_t u = lofp_f32_bits(x), sign = u & 0x80000000u;
    u ^= sign;
    float xa = lofp_bits_f32(u);
    uint32_t code;
    if (xa >= max_normal) {
        code = max_int;
    } else if (xa < min_normal) {
        float d = xa + lofp_bits_f32(denorm_mask_int);
        code = (uint8_t)(lofp_f32_bits(d) - denorm_mask_int);
    } else {
        int32_t n = (int32_t)u;
        int32_t odd = (n >> (23 - mbits)) & 1;
        n += (int32_t)((uint32_t)(exp_bias - 127) << 23) + magic;
        n += odd;
        code = (uint8_t)(n >> (23 - mbits));
    }
    return (code | (sign ? sign_mask : 0u)) & 0xFFu;
}

static int elem_bits(lofp_elem e, int *ebits, int *mbits)
{
    switch (e) {
    case LOFP_ELEM_E2M1: *ebits = 2; *mbits = 1; return 1;
    case LOFP_ELEM_E2M3: *ebits = 2; *mbits = 3; return 1;
    case LOFP_ELEM_E3M2: *ebits = 3; *mbits = 2; return 1;
    default: return 0;
    }
}

static void put(const lofp_scheme *s, uint8_t *codes, size_t i, uint32_t c) { lofp_put_code(s, codes, i, c); }

/* ---- torchao MX: mx_tensor.to_mx (FLOOR, CEIL, EVEN) and _to_mx_rceil ---- */

static void torchao_mx_block(const lofp_scheme *s, const float *v, uint32_t B, uint8_t *codes,
                             size_t base, uint8_t *scale)
{
    const lofp_elem_info *ei = lofp_elem_info_get(s->elem);
    const float max_pos = (float)ei->max;
    float amax = 0.0f;
    int nan = 0;
    for (uint32_t i = 0; i < B; i++) { /* torch.amax: NaN wins */
        float a = fabsf(v[i]);
        if (a != a) nan = 1;
        else if (a > amax) amax = a;
    }
    if (nan) amax = NAN;
    int ebits = 0, mbits = 0;
    int fx = elem_bits(s->elem, &ebits, &mbits);
    uint8_t byte;
    if (s->scale_rule == LOFP_SCALE_RCEIL) {
        float descale = amax / max_pos;
        if (descale != descale) byte = 255;
        else if (isinf(descale)) byte = 254;
        else {
            float e = ceilf(log2_f32(descale)); /* log2(0) = -inf, clamped below */
            e = e < -127.0f ? -127.0f : e > 127.0f ? 127.0f : e;
            byte = (uint8_t)(int)(e + 127.0f);
        }
        float rcp = byte == 255 ? descale : byte == 254 ? 0x1p-127f : byte == 0 ? 1.0f
                                                                          : ldexpf(1.0f, 127 - byte);
        *scale = byte;
        for (uint32_t i = 0; i < B; i++) {
            float d = clampf(v[i] * rcp, -max_pos, max_pos);
            uint32_t c = fx ? ao_f32_to_fx(d, ebits, mbits)
                            : s->elem == LOFP_ELEM_E4M3 ? torch_e4m3(d) : torch_e5m2(d);
            put(s, codes, base + i, c);
        }
        return;
    }
    uint32_t u = lofp_f32_bits(amax);
    if (s->scale_rule == LOFP_SCALE_EVEN && !nan) {
        u = (u + (1u << (23 - ei->mbits - 1))) & 0xFF800000u;
    }
    int pow2 = (int)((u >> 23) & 0xFFu) - 127;
    if (s->scale_rule == LOFP_SCALE_CEIL) pow2 += (u & 0x7FFFFFu) > 0;
    int e = pow2 - ei->emax;
    e = e < -127 ? -127 : e > 128 ? 128 : e;
    byte = nan ? 255 : (uint8_t)(e + 127);
    *scale = byte;
    float sc = lofp_bits_f32((uint32_t)byte << 23);
    if (sc < 0x1p-126f) sc = 0x1p-126f; /* F32_MIN_NORMAL: byte 0 divides by 2^-126 */
    for (uint32_t i = 0; i < B; i++) {
        float d = v[i] / sc;
        uint32_t c;
        if (fx) {
            c = ao_f32_to_fx(d, ebits, mbits);
        } else {
            d = clampf(d, -max_pos, max_pos);
            c = s->elem == LOFP_ELEM_E4M3 ? torch_e4m3(d) : torch_e5m2(d);
        }
        put(s, codes, base + i, c);
    }
}

/* ---- torchao NVFP4: nvfp4_tensor.nvfp4_quantize ---- */

static void torchao_nvfp4_block(const float *v, float pts, int two_level, const lofp_scheme *s,
                                uint8_t *codes, size_t base, uint8_t *scale)
{
    float max_abs = 0.0f;
    for (int i = 0; i < 16; i++) {
        float a = fabsf(v[i]);
        if (a > max_abs || a != a) max_abs = a;
    }
    float block_scale = max_abs / 6.0f, mult;
    uint8_t sb;
    if (!two_level) {
        sb = torch_e4m3(clampf(block_scale, 0x1p-6f, 448.0f));
        float s32 = torch_e4m3_f32(sb);
        mult = 1.0f / s32;
    } else {
        float scaled = block_scale / pts;
        sb = torch_e4m3(clampf(scaled, 0x1p-6f, 448.0f));
        float s32 = torch_e4m3_f32(sb);
        mult = (1.0f / pts) / s32;
    }
    *scale = sb;
    for (int i = 0; i < 16; i++) {
        float d = clampf(v[i] * mult, -6.0f, 6.0f);
        put(s, codes, base + i, ao_f32_to_fx(d, 2, 1));
    }
}

/* ---- compressed-tensors NVFP4: generate_gparam, calculate_qparams, _quantize, cast_to_fp4,
 * pack_fp4_to_uint8 ---- */

/* cast_to_fp4 magnitude (RNE: 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4,
 * 5 -> 4) after the clamp to [-6, 6]; the stored sign is signbit(|q| * sign(x)): set for x < 0,
 * clear for x = -0. */
static uint32_t ct_fp4(float x)
{
    float a = fabsf(x);
    uint32_t m;
    if (a <= 0.25f) m = 0;
    else if (a < 0.75f) m = 1;
    else if (a <= 1.25f) m = 2;
    else if (a < 1.75f) m = 3;
    else if (a <= 2.5f) m = 4;
    else if (a < 3.5f) m = 5;
    else if (a <= 5.0f) m = 6;
    else m = 7;
    return m | (x < 0.0f ? 8u : 0u);
}

float lofp_profile_ct_global(lofp_dtype dt, float amax)
{
    if (dt == LOFP_DTYPE_BF16) {
        /* the bf16 tensor's max, clamped at finfo(bf16).tiny, then 2688 / t as
         * t.reciprocal() * 2688, each op rounded to bf16 */
        if (amax < 0x1p-126f) amax = 0x1p-126f;
        float r = bf16r(1.0f / amax);
        float g = bf16r(r * 2688.0f);
        return isfinite(g) ? g : 1.0f;
    }
    if (amax < 0x1p-126f) amax = 0x1p-126f;
    volatile float r = 1.0f / amax;
    float g = r * 2688.0f;
    return isfinite(g) ? g : 1.0f; /* nan_to_num(nan=1, posinf=1) */
}

static void ct_nvfp4_block(const float *v, lofp_dtype dt, float G, const lofp_scheme *s,
                           uint8_t *codes, size_t base, uint8_t *scale)
{
    float bmax = 0.0f;
    for (int i = 0; i < 16; i++) {
        float a = fabsf(v[i]);
        if (a > bmax) bmax = a;
    }
    float local = dt == LOFP_DTYPE_BF16 ? bf16r(bmax / 6.0f) : bmax / 6.0f;
    float sc = G * local;
    uint8_t sb = torch_e4m3(clampf(sc, -448.0f, 448.0f));
    float s32 = lofp_decode(LOFP_ELEM_E4M3, sb);
    if (s32 == 0.0f) { sb = 0x20; s32 = 0.125f; } /* _get_dtype_eps(float8_e4m3fn) */
    *scale = sb;
    float div = s32 / G;
    for (int i = 0; i < 16; i++) {
        float d = clampf(v[i] / div, -6.0f, 6.0f);
        put(s, codes, base + i, ct_fp4(d));
    }
}

/* ---- ModelOpt (modelopt/torch/quantization/qtensor/{nvfp4,mxfp4,mxfp8}_tensor.py) as PyTorch
 * runs it on a CUDA device: `t / c` for a Python constant c is t * fl(1/c) there. ---- */

float lofp_profile_modelopt_scale2(float amax)
{
    volatile float inv = 1.0f / 2688.0f;
    return amax * inv;
}

static const float e2m1_bounds[7] = { 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f };

static void modelopt_nvfp4_block(const float *v, float s2, const lofp_scheme *s, uint8_t *codes,
                                 size_t base, uint8_t *scale)
{
    float bmax = 0.0f;
    for (int i = 0; i < 16; i++) {
        float a = fabsf(v[i]);
        if (a > bmax) bmax = a;
    }
    float d6 = 6.0f * s2;
    float sc = bmax / d6;
    if (sc == 0.0f) sc = 1.0f;                  /* zero blocks get 1.0 */
    if (sc < 0x1p-9f) sc = 0x1p-9f;            /* clamp_(min=2**-9); NaN stays */
    uint8_t sb = torch_e4m3(sc);
    *scale = sb;
    float div = lofp_decode(LOFP_ELEM_E4M3, sb) * s2;
    for (int i = 0; i < 16; i++) {
        float x = v[i] / div;
        float a = fabsf(x);
        uint32_t ord = 0; /* searchsorted(bounds, a, right=False): bounds strictly below a */
        for (int j = 0; j < 7; j++) ord += e2m1_bounds[j] < a;
        ord += a == 0.75f || a == 1.75f || a == 3.5f;
        put(s, codes, base + i, ((x < 0.0f) ? 8u : 0u) + ord);
    }
}

static void modelopt_mxfp4_block(const float *v, const lofp_scheme *s, uint8_t *codes, size_t base,
                                 uint8_t *scale)
{
    float amax = 0.0f;
    for (int i = 0; i < 32; i++) {
        float a = fabsf(v[i]);
        if (a > amax) amax = a;
    }
    volatile float inv6 = 1.0f / 6.0f;
    float descale = amax * inv6;
    float l = log2_f32(descale);
    if (!(l >= -127.0f)) l = -127.0f; /* torch.maximum(log2, -127): -inf -> -127 */
    float e = ceilf(l);
    /* torch.exp2 on a CUDA device returns 2^-127 one ulp low (0x003FFFFF, measured on an H200
     * with torch 2.11); every other exponent here is exact */
    float p = e == -127.0f ? lofp_bits_f32(0x003FFFFFu) : ldexpf(1.0f, (int)e);
    *scale = (uint8_t)(int)(e + 127.0f);
    for (int i = 0; i < 32; i++) {
        float y = v[i] / p;
        float a = fabsf(y);
        uint32_t ord = 0; /* sum(|y| - bound > 0): ties go toward zero */
        for (int j = 0; j < 7; j++) ord += (a - e2m1_bounds[j]) > 0.0f;
        uint32_t sbit = y > 0.0f ? 0u : 1u; /* (2 - sign(y)) // 2: zeros get the sign bit */
        put(s, codes, base + i, sbit * 8u + ord);
    }
}

static void modelopt_mxfp8_block(const float *v, const lofp_scheme *s, uint8_t *codes, size_t base,
                                 uint8_t *scale)
{
    float amax = 0.0f;
    for (int i = 0; i < 32; i++) {
        float a = fabsf(v[i]);
        if (a > amax) amax = a;
    }
    volatile float inv = 1.0f / 448.0f;
    float descale = amax * inv;
    float l = descale > 0.0f ? log2_f32(descale) : -127.0f;
    float e = ceilf(l);
    e = e < -127.0f ? -127.0f : e > 127.0f ? 127.0f : e;
    uint8_t b = (uint8_t)(int)(e + 127.0f);
    *scale = b;
    float sf = ldexpf(1.0f, 127 - (int)b);
    for (int i = 0; i < 32; i++) put(s, codes, base + i, torch_e4m3(clampf(v[i] * sf, -448.0f, 448.0f)));
}

/* ---- ggml / gguf-py MXFP4 (gguf.quants.MXFP4.quantize_blocks, ggml quantize_row_mxfp4_ref) ---- */

static void ggml_mxfp4_block(const float *v, const lofp_scheme *s, uint8_t *codes, size_t base,
                             uint8_t *scale)
{
    static const float kvalues[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };
    float d = 0.0f;
    int nan = 0;
    for (int i = 0; i < 32; i++) { /* numpy max: NaN wins */
        float a = fabsf(v[i]);
        if (a != a) nan = 1;
        else if (a > d) d = a;
    }
    uint8_t e = 0;
    if (!nan && d > 0.0f) {
        /* floor(log2(d)) - 2 + 127 in fp32, then the uint8 cast: negative values wrap, +inf gives 0 */
        float f = floorf(log2_f32(d)) - 2.0f + 127.0f;
        int32_t iv = isinf(f) ? INT32_MIN : (int32_t)f;
        e = (uint8_t)(uint32_t)iv;
    }
    *scale = e;
    /* e8m0_to_fp32_half: 2^(e - 128), as bits */
    float dh = e < 2 ? lofp_bits_f32(0x00200000u << e) : lofp_bits_f32((uint32_t)(e - 1) << 23);
    for (int i = 0; i < 32; i++) {
        /* argmin_j |d * kvalues[j] - x| in fp32, the first minimum (NaN compares as the minimum) */
        int best = 0;
        float be = fabsf(dh * kvalues[0] - v[i]);
        if (be == be) {
            for (int j = 1; j < 16; j++) {
                float err = fabsf(dh * kvalues[j] - v[i]);
                if (err != err) { best = j; break; }
                if (err < be) { be = err; best = j; }
            }
        }
        put(s, codes, base + i, (uint32_t)best);
    }
}

/* ---- ggml NVFP4 (ggml-quants.c quantize_row_nvfp4_ref, one level: llama.cpp stores no
 * per-tensor scale when it quantizes itself) ---- */

/* ggml_fp32_to_ue4m3: the block scale amax/6 to UE4M3 by its own rounding. Not RNE: the mantissa
 * keeps fp32's top three bits plus the next bit (ties and everything above them round up), every
 * value whose exponent would reach 15 becomes 0x7E (448; so [240, 448] all give 0x7E), and
 * subnormals are (int)(x * 512 + 0.5) clamped to 7, 0 below one step. */
static uint8_t ggml_ue4m3(float x)
{
    if (!(x > 0.0f)) return 0;
    if (x > 448.0f) x = 448.0f;
    const uint32_t u = lofp_f32_bits(x);
    int e = (int)((u >> 23) & 0xFFu) - 127 + 7;
    if (e <= 0) {
        float t = x * 512.0f + 0.5f;
        int m = (int)t;
        if (m > 7) m = 7;
        return m < 1 ? 0 : (uint8_t)m;
    }
    if (e >= 15) return 0x7E;
    int m = (int)((u >> 20) & 7u) + (int)((u >> 19) & 1u);
    if (m > 7) {
        m = 0;
        if (++e >= 15) return 0x7E;
    }
    return (uint8_t)((e << 3) | m);
}

static void ggml_nvfp4_block(const float *v, const lofp_scheme *s, uint8_t *codes, size_t base,
                             uint8_t *scale)
{
    static const float kvalues[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };
    float amax = 0.0f;
    for (int i = 0; i < 16; i++) /* `amax < fabsf(v)`: NaN never wins */
        if (amax < fabsf(v[i])) amax = fabsf(v[i]);
    const uint8_t ue = ggml_ue4m3(amax / 6.0f);
    *scale = ue;
    /* ggml_ue4m3_to_fp32 halves the value (its kvalues are E2M1 doubled); 0x00 decodes to 0 */
    const float d = lofp_decode(LOFP_ELEM_UE4M3, ue) * 0.5f;
    for (int i = 0; i < 16; i++) {
        /* best_index_mxfp4: argmin |kvalues[j]*d - x| in fp32, the first minimum */
        int best = 0;
        float be = fabsf(kvalues[0] * d - v[i]);
        for (int j = 1; j < 16; j++) {
            float err = fabsf(kvalues[j] * d - v[i]);
            if (err < be) { be = err; best = j; }
        }
        put(s, codes, base + (size_t)i, (uint32_t)best);
    }
}

float lofp_profile_nvfp4_global(const lofp_scheme *s, lofp_dtype dt, float amax)
{
    if (!s || !(amax >= 0.0f) || isinf(amax)) return NAN;
    switch (s->profile) {
    case LOFP_PROFILE_LOFP: return lofp_nvfp4_global_scale(LOFP_DTYPE_F32, &amax, 1);
    case LOFP_PROFILE_MODELOPT: return lofp_profile_modelopt_scale2(amax);
    case LOFP_PROFILE_COMPRESSED_TENSORS: return lofp_profile_ct_global(dt, amax);
    case LOFP_PROFILE_TORCHAO: return amax / 2688.0f;
    default: return 1.0f; /* ggml: one level */
    }
}

/* ---- the driver ---- */

lofp_status lofp_profile_quantize(const lofp_scheme *s, lofp_dtype dt, const void *x, size_t rows,
                                  size_t k, size_t kp, int compute_global, float global_in,
                                  uint8_t *codes, uint8_t *scales, float *global_out,
                                  lofp_quant_report *rep)
{
    const size_t n = rows * k;
    const int mx_prop = s->propagate_nonfinite &&
                        ((s->profile == LOFP_PROFILE_TORCHAO && s->id != LOFP_SCHEME_NVFP4) ||
                         s->profile == LOFP_PROFILE_GGML);
    float amax = 0.0f;
    size_t first_bad = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        float v = lofp_load_f32(dt, x, i);
        if (!isfinite(v)) {
            if (!bad) first_bad = i;
            bad = 1;
        } else if (fabsf(v) > amax) {
            amax = fabsf(v);
        }
    }
    if (bad) {
        if (rep) rep->first_bad_index = first_bad;
        if (!mx_prop) return LOFP_ERR_NONFINITE;
    }
    const int nvfp4 = s->id == LOFP_SCHEME_NVFP4;
    float g = 1.0f;
    if (nvfp4 && s->two_level) {
        if (compute_global) {
            switch (s->profile) {
            case LOFP_PROFILE_MODELOPT: g = lofp_profile_modelopt_scale2(amax); break;
            case LOFP_PROFILE_COMPRESSED_TENSORS: g = lofp_profile_ct_global(dt, amax); break;
            default: g = amax / 2688.0f; break; /* torchao per_tensor_amax_to_scale */
            }
        } else {
            g = global_in;
            if (!(g == g)) return LOFP_ERR_INVALID_ARG;
        }
    }
    if (global_out && compute_global) *global_out = g;

    const uint32_t B = s->block;
    float *row = malloc(kp * sizeof(float));
    if (!row) return LOFP_ERR_NOMEM;
    const size_t crb = s->elem == LOFP_ELEM_E2M1 ? kp / 2 : kp, nb = kp / B;
    size_t bad_blocks = 0;
    for (size_t r = 0; r < rows; r++) {
        for (size_t j = 0; j < k; j++) row[j] = lofp_load_f32(dt, x, r * k + j);
        for (size_t j = k; j < kp; j++) row[j] = 0.0f;
        uint8_t *cr = codes + r * crb, *sr = scales + r * nb;
        memset(cr, 0, crb);
        for (size_t b = 0; b < nb; b++) {
            const float *v = row + b * B;
            for (uint32_t i = 0; i < B; i++)
                if (!isfinite(v[i])) { bad_blocks++; break; }
            switch (s->profile) {
            case LOFP_PROFILE_TORCHAO:
                if (nvfp4) torchao_nvfp4_block(v, g, s->two_level, s, cr, b * B, sr + b);
                else torchao_mx_block(s, v, B, cr, b * B, sr + b);
                break;
            case LOFP_PROFILE_COMPRESSED_TENSORS:
                ct_nvfp4_block(v, dt, g, s, cr, b * B, sr + b);
                break;
            case LOFP_PROFILE_MODELOPT:
                if (nvfp4) modelopt_nvfp4_block(v, g, s, cr, b * B, sr + b);
                else if (s->id == LOFP_SCHEME_MXFP4) modelopt_mxfp4_block(v, s, cr, b * B, sr + b);
                else modelopt_mxfp8_block(v, s, cr, b * B, sr + b);
                break;
            case LOFP_PROFILE_GGML:
                if (nvfp4) ggml_nvfp4_block(v, s, cr, b * B, sr + b);
                else ggml_mxfp4_block(v, s, cr, b * B, sr + b);
                break;
            default:
                free(row);
                return LOFP_ERR_INVALID_ARG;
            }
        }
    }
    free(row);
    if (rep) rep->nonfinite_blocks = bad ? bad_blocks : 0;
    return LOFP_OK;
}

/* Dequantization as each producer writes it. NVFP4: ModelOpt code * (float(s) * s2); torchao
 * code * (s2 * float(s)); compressed-tensors code * (float(s) / G). MX: code * 2^(e - 127) for
 * ModelOpt and torchao (0xFF: NaN), ggml kvalue * 2^(e - 128) (no NaN byte). */
lofp_status lofp_profile_dequantize(const lofp_scheme *s, const uint8_t *codes,
                                    const uint8_t *scales, float global, size_t rows, size_t k,
                                    size_t kp, lofp_dtype out_dt, void *out)
{
    const uint32_t B = s->block;
    const size_t crb = s->elem == LOFP_ELEM_E2M1 ? kp / 2 : kp, nb = kp / B;
    const int nvfp4 = s->id == LOFP_SCHEME_NVFP4;
    for (size_t r = 0; r < rows; r++) {
        const uint8_t *cr = codes + r * crb, *sr = scales + r * nb;
        for (size_t j = 0; j < k; j++) {
            uint32_t c = lofp_get_code(s, cr, j);
            uint8_t sb = sr[j / B];
            float v = lofp_decode(s->elem, c), y;
            if (nvfp4) {
                float sc = lofp_decode(LOFP_ELEM_E4M3, sb);
                if (!s->two_level) y = v * sc;
                else if (s->profile == LOFP_PROFILE_MODELOPT) y = v * (sc * global);
                else if (s->profile == LOFP_PROFILE_TORCHAO) y = v * (global * sc);
                else y = v * (sc / global);
            } else if (s->profile == LOFP_PROFILE_GGML) {
                float dh = sb < 2 ? lofp_bits_f32(0x00200000u << sb) : lofp_bits_f32((uint32_t)(sb - 1) << 23);
                y = (v * 2.0f) * dh;
            } else {
                y = sb == 0xFF ? lofp_bits_f32(0x7FC00000u) : v * lofp_decode(LOFP_ELEM_E8M0, sb);
            }
            lofp_store_f32(out_dt, out, r * k + j, y);
        }
    }
    return LOFP_OK;
}
