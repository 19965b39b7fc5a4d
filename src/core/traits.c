/* traits.c -- static tables: element types and scheme presets. Adding a type or a scheme means
 * adding a row here (and its test rows); no switch elsewhere names a scheme. */
#include "traits.h"

#define MF(nm, al, bits_, e, m, b, emax_, mx, minsub, maxc, inf, nan, ovc, nanc, sbit, eb)     \
    { { nm, bits_, e, m, b, 1, emax_, mx, minsub, maxc, inf, nan }, al, LOFP_KIND_MINIFLOAT,   \
      sbit, eb, ovc, nanc, 1 }

const lofp_elem_traits_t lofp_elem_traits[LOFP_ELEM_COUNT_] = {
    [LOFP_ELEM_E2M1] = MF("e2m1", "fp4", 4, 2, 1, 1, 2, 6.0, 0.5, 0x7, 0, 0, 0, 0, 0x8, 2),
    [LOFP_ELEM_E2M3] = MF("e2m3", "fp6-e2m3", 6, 2, 3, 1, 2, 7.5, 0.125, 0x1F, 0, 0, 0, 0, 0x20, 2),
    [LOFP_ELEM_E3M2] = MF("e3m2", "fp6-e3m2", 6, 3, 2, 3, 4, 28.0, 0.0625, 0x1F, 0, 0, 0, 0, 0x20, 4),
    [LOFP_ELEM_E4M3] = MF("e4m3", "fp8-e4m3", 8, 4, 3, 7, 8, 448.0, 0x1p-9, 0x7E, 0, 1, 0x7F, 0x7F, 0x80, 8),
    [LOFP_ELEM_E5M2] = MF("e5m2", "fp8-e5m2", 8, 5, 2, 15, 15, 57344.0, 0x1p-16, 0x7B, 1, 1, 0x7C, 0x7E, 0x80, 15),
    [LOFP_ELEM_E8M0] = { { "e8m0", 8, 8, 0, 127, 0, 127, 0x1p127, 0x1p-127, 0xFE, 0, 1 }, "ue8m0",
                         LOFP_KIND_E8M0, 0, 127, 0xFF, 0xFF, 0 },
    [LOFP_ELEM_UE4M3] = { { "ue4m3", 8, 4, 3, 7, 0, 8, 448.0, 0x1p-9, 0x7E, 0, 1 }, NULL,
                          LOFP_KIND_UMINIFLOAT, 0x80, 8, 0, 0x7F, 0 },
    [LOFP_ELEM_MXINT8] = { { "mxint8", 8, 0, 6, 0, 1, 0, 127.0 / 64.0, 1.0 / 64.0, 0x7F, 0, 0 }, "int8",
                           LOFP_KIND_INT, 0x80, 0, 0, 0, 0 },
    [LOFP_ELEM_BF16] = MF("bf16", "bfloat16", 16, 8, 7, 127, 127, 0x1.FEp127, 0x1p-133, 0x7F7F, 1, 1, 0x7F80, 0x7FC0, 0x8000, 127),
    [LOFP_ELEM_FP16] = MF("fp16", "f16", 16, 5, 10, 15, 15, 65504.0, 0x1p-24, 0x7BFF, 1, 1, 0x7C00, 0x7E00, 0x8000, 15),
    [LOFP_ELEM_FP32] = { { "fp32", 32, 8, 23, 127, 1, 127, 0x1.FFFFFEp127, 0x1p-149, 0x7F7FFFFF, 1, 1 }, "f32",
                         LOFP_KIND_FP32, 0x80000000u, 127, 0x7F800000u, 0x7FC00000u, 1 },
};

#define SCHEME(id_, elem_, selem_, block_, rule_)                                               \
    { .id = id_, .elem = elem_, .scale_elem = selem_, .block = block_, .scale_rule = rule_,     \
      .rounding = LOFP_RNE, .two_level = 0, .pad = 0, .propagate_nonfinite = 0,                 \
      .amax_floor = 0.0f, .ceil_clamp = 0, .c = 0.156f, .rotate = 0,                             \
      .hadamard = LOFP_HADAMARD_BUTTERFLY, .seed = 0 }

const lofp_scheme_traits_t lofp_scheme_traits[LOFP_SCHEME_COUNT_] = {
    [LOFP_SCHEME_NVFP4] = { "nvfp4", { .id = LOFP_SCHEME_NVFP4, .elem = LOFP_ELEM_E2M1,
        .scale_elem = LOFP_ELEM_UE4M3, .block = 16, .scale_rule = LOFP_SCALE_UE4M3,
        .rounding = LOFP_RNE, .two_level = 1, .amax_floor = 1e-12f, .c = 0.156f }, 16, 0, LOFP_KFAM_NVFP4 },
    [LOFP_SCHEME_MXFP4] = { "mxfp4",
        SCHEME(LOFP_SCHEME_MXFP4, LOFP_ELEM_E2M1, LOFP_ELEM_E8M0, 32, LOFP_SCALE_FLOOR), 32, 1, LOFP_KFAM_MX },
    [LOFP_SCHEME_MXFP6_E2M3] = { "mxfp6-e2m3",
        SCHEME(LOFP_SCHEME_MXFP6_E2M3, LOFP_ELEM_E2M3, LOFP_ELEM_E8M0, 32, LOFP_SCALE_FLOOR), 32, 1, LOFP_KFAM_MX },
    [LOFP_SCHEME_MXFP6_E3M2] = { "mxfp6-e3m2",
        SCHEME(LOFP_SCHEME_MXFP6_E3M2, LOFP_ELEM_E3M2, LOFP_ELEM_E8M0, 32, LOFP_SCALE_FLOOR), 32, 1, LOFP_KFAM_MX },
    [LOFP_SCHEME_MXFP8_E4M3] = { "mxfp8-e4m3",
        SCHEME(LOFP_SCHEME_MXFP8_E4M3, LOFP_ELEM_E4M3, LOFP_ELEM_E8M0, 32, LOFP_SCALE_FLOOR), 32, 1, LOFP_KFAM_MX },
    [LOFP_SCHEME_MXFP8_E5M2] = { "mxfp8-e5m2",
        SCHEME(LOFP_SCHEME_MXFP8_E5M2, LOFP_ELEM_E5M2, LOFP_ELEM_E8M0, 32, LOFP_SCALE_FLOOR), 32, 1, LOFP_KFAM_MX },
    [LOFP_SCHEME_MXINT8] = { "mxint8",
        SCHEME(LOFP_SCHEME_MXINT8, LOFP_ELEM_MXINT8, LOFP_ELEM_E8M0, 32, LOFP_SCALE_FLOOR), 32, 1, LOFP_KFAM_MX },
    [LOFP_SCHEME_TILELANG_MXFP8] = { "tilelang-mxfp8", { .id = LOFP_SCHEME_TILELANG_MXFP8,
        .elem = LOFP_ELEM_E4M3, .scale_elem = LOFP_ELEM_E8M0, .block = 128,
        .scale_rule = LOFP_SCALE_RCEIL, .rounding = LOFP_RNE, .amax_floor = 1e-4f,
        .ceil_clamp = 1, .c = 0.156f }, 32, 1, LOFP_KFAM_MX },
    [LOFP_SCHEME_ULTRAQUANT] = { "ultraquant", { .id = LOFP_SCHEME_ULTRAQUANT,
        .elem = LOFP_ELEM_E2M1, .scale_elem = LOFP_ELEM_E8M0, .block = 32,
        .scale_rule = LOFP_SCALE_UQ_ROUND, .rounding = LOFP_TIES_TO_ZERO, .c = 0.156f,
        .rotate = 1, .hadamard = LOFP_HADAMARD_BUTTERFLY }, 32, 0, LOFP_KFAM_UQ },
};
