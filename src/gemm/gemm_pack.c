/* gemm_pack.c -- the CPU weight layouts: "rows" (what lofp_quantize writes) and "x8", 8 rows
 * interleaved per 32-element superblock so that one 256-bit register holds 4 codes-bytes of each
 * of 8 rows and an integer dot product lands one row per 32-bit lane (llama.cpp's repacked
 * mxfp4 GEMV has the same idea; docs/GEMM.md draws the bytes).
 *
 * x8 buffer = flags[round_up(groups, 64)] then `groups` groups of group_bytes each:
 *   codes: superblock sb (32 elements), chunk c (0..3), row r (0..7), byte i (0..3) at
 *          sb*128 + c*32 + r*4 + i holds element 32sb+4c+i in the low nibble and
 *          32sb+16+4c+i in the high nibble;
 *   scales: after the kq*4 code bytes, scale j of row r at j*8 + r (NVFP4: one per 16, MX one
 *          per block);
 *   rows past n, elements past padded K and scales past them are zero; the group is padded with
 *   zeros to a multiple of 64 bytes.
 * flags[g] bit 0: the group holds a scale the SIMD kernels do not decode (E8M0 0xFF, UE4M3
 * 0x7F/0xFF, both NaN); such groups run the exact portable kernel. */
#include <string.h>

#include "gemm_internal.h"

static const char *const k_wl_names[LOFP_WEIGHT_LAYOUT_COUNT_] = { "rows", "x8" };

const char *lofp_weight_layout_name(lofp_weight_layout l)
{
    if ((int)l < 0 || (int)l >= LOFP_WEIGHT_LAYOUT_COUNT_) return NULL;
    return k_wl_names[l];
}

lofp_status lofp_weight_layout_from_name(const char *name, lofp_weight_layout *out)
{
    if (!name || !out) return LOFP_ERR_INVALID_ARG;
    for (int i = 0; i < LOFP_WEIGHT_LAYOUT_COUNT_; i++) {
        if (strcmp(name, k_wl_names[i]) == 0) { *out = (lofp_weight_layout)i; return LOFP_OK; }
    }
    return LOFP_ERR_NOT_FOUND;
}

static int round_up(size_t a, size_t m, size_t *out)
{
    size_t t;
    if (!lofp_add_size(a, m - 1, &t)) return 0;
    *out = t / m * m;
    return 1;
}

int lofp_gemm_x8_geom(const lofp_scheme *s, size_t n, size_t k, gemm_x8_geom *g)
{
    if (!s || lofp_scheme_validate(s) != LOFP_OK || n == 0) return 0;
    if (s->id != LOFP_SCHEME_NVFP4 && s->id != LOFP_SCHEME_MXFP4) return 0;
    size_t kp = lofp_padded_k(s, k), cb, t;
    if (!kp || !round_up(kp, 32, &g->kq)) return 0;
    g->sbs = g->kq / 32;
    g->sblock = s->id == LOFP_SCHEME_NVFP4 ? 16u : s->block;
    g->nsc = g->kq / g->sblock;
    g->groups = lofp_ceil_div(n, GEMM_X8_ROWS);
    if (!round_up(g->groups, 64, &g->header)) return 0;
    if (!lofp_mul_size(g->kq, 4, &cb) || !lofp_mul_size(g->nsc, 8, &t) || !lofp_add_size(cb, t, &t) ||
        !round_up(t, 64, &g->group_bytes))
        return 0;
    if (!lofp_mul_size(g->groups, g->group_bytes, &t) || !lofp_add_size(t, g->header, &t)) return 0;
    return 1;
}

size_t lofp_weight_packed_bytes(const lofp_scheme *s, size_t n, size_t k, lofp_weight_layout l)
{
    if (!s || lofp_scheme_validate(s) != LOFP_OK || n == 0 || k == 0) return 0;
    if (l == LOFP_WEIGHT_ROWS) return lofp_codes_bytes(s, n, k);
    if (l != LOFP_WEIGHT_X8) return 0;
    gemm_x8_geom g;
    if (!lofp_gemm_x8_geom(s, n, k, &g)) return 0;
    return g.header + g.groups * g.group_bytes;
}

/* A scale byte the SIMD kernels cannot decode with their shortcuts (both are NaN). */
static int special_scale(const lofp_scheme *s, uint8_t b)
{
    return s->id == LOFP_SCHEME_NVFP4 ? (b & 0x7F) == 0x7F : b == 0xFF;
}

static lofp_status check(const lofp_scheme *s, const void *a, const void *b, size_t n, size_t k,
                         lofp_weight_layout l, int need_b)
{
    if (!s || !a || (need_b && !b) || n == 0 || k == 0) return LOFP_ERR_INVALID_ARG;
    if (lofp_scheme_validate(s) != LOFP_OK) return LOFP_ERR_INVALID_ARG;
    if ((int)l < 0 || l >= LOFP_WEIGHT_LAYOUT_COUNT_) return LOFP_ERR_INVALID_ARG;
    if (k % s->block != 0 && !s->pad) return LOFP_ERR_SHAPE;
    if (l == LOFP_WEIGHT_X8 && s->id != LOFP_SCHEME_NVFP4 && s->id != LOFP_SCHEME_MXFP4)
        return LOFP_ERR_UNSUPPORTED;
    if (!lofp_weight_packed_bytes(s, n, k, l) || !lofp_scales_bytes(s, n, k)) return LOFP_ERR_SIZE_OVERFLOW;
    return LOFP_OK;
}

lofp_status lofp_weight_pack(const lofp_scheme *s, const uint8_t *codes, const uint8_t *scales,
                             size_t n, size_t k, lofp_weight_layout l, uint8_t *out)
{
    lofp_status st = check(s, codes, out, n, k, l, 1);
    if (st != LOFP_OK) return st;
    if (l == LOFP_WEIGHT_ROWS) {
        memcpy(out, codes, lofp_codes_bytes(s, n, k));
        return LOFP_OK;
    }
    if (!scales) return LOFP_ERR_INVALID_ARG;
    gemm_x8_geom g;
    lofp_gemm_x8_geom(s, n, k, &g);
    size_t kp = lofp_padded_k(s, k), rb = kp / 2, nsr = kp / s->block; /* per row: code bytes, scales */
    memset(out, 0, g.header + g.groups * g.group_bytes);
    for (size_t grp = 0; grp < g.groups; grp++) {
        uint8_t *gb = out + g.header + grp * g.group_bytes, flag = 0;
        for (unsigned r = 0; r < GEMM_X8_ROWS; r++) {
            size_t row = grp * GEMM_X8_ROWS + r;
            if (row >= n) break;
            const uint8_t *rc = codes + row * rb;
            for (size_t e = 0; e < kp; e++) {
                unsigned code = (rc[e >> 1] >> ((e & 1) * 4)) & 15u;
                size_t sb = e >> 5, w = e & 31, c = (w & 15) >> 2, i = w & 3;
                gb[sb * GEMM_X8_SB_BYTES + c * 32 + r * 4 + i] |= (uint8_t)(w < 16 ? code : code << 4);
            }
            for (size_t j = 0; j < nsr; j++) {
                uint8_t b = scales[row * nsr + j];
                gb[g.kq * 4 + j * GEMM_X8_ROWS + r] = b;
                if (special_scale(s, b)) flag = GEMM_X8_FLAG_SPECIAL;
            }
        }
        out[grp] = flag;
    }
    return LOFP_OK;
}

lofp_status lofp_weight_unpack(const lofp_scheme *s, const uint8_t *packed, size_t n, size_t k,
                               lofp_weight_layout l, uint8_t *codes, uint8_t *scales)
{
    lofp_status st = check(s, packed, codes, n, k, l, 1);
    if (st != LOFP_OK) return st;
    if (l == LOFP_WEIGHT_ROWS) {
        memcpy(codes, packed, lofp_codes_bytes(s, n, k));
        return LOFP_OK;
    }
    if (!scales) return LOFP_ERR_INVALID_ARG;
    gemm_x8_geom g;
    lofp_gemm_x8_geom(s, n, k, &g);
    size_t kp = lofp_padded_k(s, k), rb = kp / 2, nsr = kp / s->block;
    for (size_t row = 0; row < n; row++) {
        size_t grp = row / GEMM_X8_ROWS;
        unsigned r = (unsigned)(row % GEMM_X8_ROWS);
        uint8_t *rc = codes + row * rb;
        for (size_t e = 0; e < kp; e += 2) {
            unsigned lo = lofp_x8_code(&g, packed, grp, r, e), hi = lofp_x8_code(&g, packed, grp, r, e + 1);
            rc[e >> 1] = (uint8_t)(lo | hi << 4);
        }
        for (size_t j = 0; j < nsr; j++) scales[row * nsr + j] = lofp_x8_scale(&g, packed, grp, r, j);
    }
    return LOFP_OK;
}
