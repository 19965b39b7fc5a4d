/* layout.c -- FP4 nibble orders and the scale-factor layouts of SPEC §3 (docs/LAYOUT.md).
 *
 * Layouts of a linear scale matrix S[rows, cols] (one byte per scale):
 *   linear          S[r, c] at r*cols + c.
 *   swizzle-128x4   rows padded to Rp = round_up(rows,128), cols to Cp = round_up(cols,4), with
 *                   zeros; S[r, c] at ((r/128)*(Cp/4) + c/4)*512 + (r%32)*16 + ((r%128)/32)*4 + c%4.
 *   packed-u32      G = ceil(cols/4) words per row; word (g, m) at g*Ma + m (group-major), byte i
 *                   of a word (lowest address = least significant byte) = S[m, 4g+i]. TileLang:
 *                   Ma = rows, pad byte 127. DeepGEMM: Ma = round_up(rows, 4), pad byte 0, rows
 *                   m >= rows are all pad.
 * Every byte is written explicitly, so results do not depend on the host's endianness.
 */
#include <string.h>

#include "core/core.h"

/* ------------------------------------------------------------------------------------------ */
/* Names                                                                                        */
/* ------------------------------------------------------------------------------------------ */

static const char *const k_layout_names[LOFP_LAYOUT_COUNT_] = {
    "linear", "swizzle-128x4", "packed-u32", "packed-u32:deepgemm",
};

const char *lofp_layout_name(lofp_layout l)
{
    if ((int)l < 0 || (int)l >= LOFP_LAYOUT_COUNT_) return NULL;
    return k_layout_names[l];
}

lofp_status lofp_layout_from_name(const char *name, lofp_layout *out)
{
    static const struct { const char *name; lofp_layout l; } aliases[] = {
        {"swizzle", LOFP_LAYOUT_SWIZZLE_128X4},
        {"swizzle-32-4-4", LOFP_LAYOUT_SWIZZLE_128X4},
        {"packed-u32:tilelang", LOFP_LAYOUT_PACKED_U32},
    };
    if (!name || !out) return LOFP_ERR_INVALID_ARG;
    for (int i = 0; i < LOFP_LAYOUT_COUNT_; i++) {
        if (strcmp(name, k_layout_names[i]) == 0) { *out = (lofp_layout)i; return LOFP_OK; }
    }
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        if (strcmp(name, aliases[i].name) == 0) { *out = aliases[i].l; return LOFP_OK; }
    }
    return LOFP_ERR_NOT_FOUND;
}

/* ------------------------------------------------------------------------------------------ */
/* Sizes                                                                                        */
/* ------------------------------------------------------------------------------------------ */

/* round_up(a, m) into *out; 0 on overflow. */
static int round_up_size(size_t a, size_t m, size_t *out)
{
    size_t t;
    if (!lofp_add_size(a, m - 1, &t)) return 0;
    *out = t / m * m;
    return 1;
}

/* Bytes of layout l for a [rows, cols] scale matrix. Returns LOFP_ERR_INVALID_ARG for an unknown
 * layout and LOFP_ERR_SIZE_OVERFLOW on overflow. */
static lofp_status layout_bytes(size_t rows, size_t cols, lofp_layout l, size_t *out)
{
    size_t a, b;
    switch (l) {
    case LOFP_LAYOUT_LINEAR:
        return lofp_mul_size(rows, cols, out) ? LOFP_OK : LOFP_ERR_SIZE_OVERFLOW;
    case LOFP_LAYOUT_SWIZZLE_128X4:
        if (!round_up_size(rows, 128, &a) || !round_up_size(cols, 4, &b)) return LOFP_ERR_SIZE_OVERFLOW;
        return lofp_mul_size(a, b, out) ? LOFP_OK : LOFP_ERR_SIZE_OVERFLOW;
    case LOFP_LAYOUT_PACKED_U32:
    case LOFP_LAYOUT_PACKED_U32_DG:
        a = rows;
        if (l == LOFP_LAYOUT_PACKED_U32_DG && !round_up_size(rows, 4, &a)) return LOFP_ERR_SIZE_OVERFLOW;
        b = lofp_ceil_div(cols, 4);
        if (!lofp_mul_size(a, b, &a) || !lofp_mul_size(a, 4, out)) return LOFP_ERR_SIZE_OVERFLOW;
        return LOFP_OK;
    default:
        return LOFP_ERR_INVALID_ARG;
    }
}

size_t lofp_layout_required_bytes(size_t rows, size_t k, uint32_t block, lofp_layout l)
{
    size_t n = 0;
    if (block == 0) return 0;
    if (layout_bytes(rows, lofp_ceil_div(k, block), l, &n) != LOFP_OK) return 0;
    return n;
}

size_t lofp_swizzle128x4_offset(size_t r, size_t c, size_t cols)
{
    size_t ktiles = lofp_ceil_div(cols, 4); /* Cp / 4 */
    return ((r / 128) * ktiles + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}

/* ------------------------------------------------------------------------------------------ */
/* Conversions                                                                                  */
/* ------------------------------------------------------------------------------------------ */

static int overlaps(const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
    if (na == 0 || nb == 0) return 0;
    uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    return pa < pb + nb && pb < pa + na;
}

/* Common argument checks of from_linear / to_linear; sets the two byte counts. */
static lofp_status check_conv(const uint8_t *in, size_t rows, size_t cols, lofp_layout l,
                              const uint8_t *out, int to_layout, size_t *lin_bytes,
                              size_t *lay_bytes)
{
    if ((int)l < 0 || (int)l >= LOFP_LAYOUT_COUNT_) return LOFP_ERR_INVALID_ARG;
    lofp_status st = layout_bytes(rows, cols, l, lay_bytes);
    if (st != LOFP_OK) return st;
    if (!lofp_mul_size(rows, cols, lin_bytes)) return LOFP_ERR_SIZE_OVERFLOW;
    size_t in_bytes = to_layout ? *lin_bytes : *lay_bytes;
    size_t out_bytes = to_layout ? *lay_bytes : *lin_bytes;
    if ((in_bytes && !in) || (out_bytes && !out)) return LOFP_ERR_INVALID_ARG;
    if (overlaps(in, in_bytes, out, out_bytes)) return LOFP_ERR_INVALID_ARG;
    return LOFP_OK;
}

lofp_status lofp_layout_from_linear(const uint8_t *in, size_t rows, size_t cols, lofp_layout l,
                                    int pad_byte, uint8_t *out)
{
    size_t lin_bytes, lay_bytes;
    if (pad_byte < -1 || pad_byte > 0xFE) return LOFP_ERR_INVALID_ARG; /* 0xFF reads as NaN */
    lofp_status st = check_conv(in, rows, cols, l, out, 1, &lin_bytes, &lay_bytes);
    if (st != LOFP_OK) return st;
    if (lay_bytes == 0) return LOFP_OK;

    switch (l) {
    case LOFP_LAYOUT_LINEAR:
        memcpy(out, in, lin_bytes);
        return LOFP_OK;
    case LOFP_LAYOUT_SWIZZLE_128X4:
        memset(out, 0, lay_bytes);
        for (size_t r = 0; r < rows; r++) {
            const uint8_t *src = in + r * cols;
            for (size_t c = 0; c < cols; c++) out[lofp_swizzle128x4_offset(r, c, cols)] = src[c];
        }
        return LOFP_OK;
    default: {
        const int dg = (l == LOFP_LAYOUT_PACKED_U32_DG);
        const uint8_t pad = (uint8_t)(pad_byte >= 0 ? pad_byte : (dg ? 0 : 127));
        const size_t ma = dg ? (rows + 3) / 4 * 4 : rows; /* no overflow: layout_bytes passed */
        const size_t groups = lofp_ceil_div(cols, 4);
        for (size_t g = 0; g < groups; g++) {
            for (size_t m = 0; m < ma; m++) {
                uint8_t *w = out + (g * ma + m) * 4;
                for (size_t i = 0; i < 4; i++) {
                    size_t c = 4 * g + i;
                    w[i] = (m < rows && c < cols) ? in[m * cols + c] : pad;
                }
            }
        }
        return LOFP_OK;
    }
    }
}

lofp_status lofp_layout_to_linear(const uint8_t *in, size_t rows, size_t cols, lofp_layout l,
                                  uint8_t *out)
{
    size_t lin_bytes, lay_bytes;
    lofp_status st = check_conv(in, rows, cols, l, out, 0, &lin_bytes, &lay_bytes);
    if (st != LOFP_OK) return st;
    if (lin_bytes == 0) return LOFP_OK;

    switch (l) {
    case LOFP_LAYOUT_LINEAR:
        memcpy(out, in, lin_bytes);
        return LOFP_OK;
    case LOFP_LAYOUT_SWIZZLE_128X4:
        for (size_t r = 0; r < rows; r++) {
            uint8_t *dst = out + r * cols;
            for (size_t c = 0; c < cols; c++) dst[c] = in[lofp_swizzle128x4_offset(r, c, cols)];
        }
        return LOFP_OK;
    default: {
        const size_t ma = (l == LOFP_LAYOUT_PACKED_U32_DG) ? (rows + 3) / 4 * 4 : rows;
        for (size_t m = 0; m < rows; m++)
            for (size_t c = 0; c < cols; c++)
                out[m * cols + c] = in[((c / 4) * ma + m) * 4 + c % 4];
        return LOFP_OK;
    }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* FP4 nibble orders                                                                            */
/* ------------------------------------------------------------------------------------------ */

lofp_status lofp_fp4_repack(const uint8_t *in, uint8_t *out, size_t rows, size_t k,
                            uint32_t block, lofp_nibble_order from, lofp_nibble_order to)
{
    if ((from != LOFP_NIBBLE_STANDARD && from != LOFP_NIBBLE_GGUF) ||
        (to != LOFP_NIBBLE_STANDARD && to != LOFP_NIBBLE_GGUF))
        return LOFP_ERR_INVALID_ARG;
    const int gguf = (from == LOFP_NIBBLE_GGUF || to == LOFP_NIBBLE_GGUF);
    if (gguf && (block == 0 || block % 2 != 0)) return LOFP_ERR_INVALID_ARG;
    if (k % 2 != 0) return LOFP_ERR_SHAPE;
    if (gguf && k % block != 0) return LOFP_ERR_SHAPE;
    size_t bytes;
    if (!lofp_mul_size(rows, k / 2, &bytes)) return LOFP_ERR_SIZE_OVERFLOW;
    if (bytes == 0) return LOFP_OK;
    if (!in || !out) return LOFP_ERR_INVALID_ARG;
    if (overlaps(in, bytes, out, bytes)) return LOFP_ERR_INVALID_ARG;
    if (from == to) {
        memcpy(out, in, bytes);
        return LOFP_OK;
    }

    /* Both directions work block by block: a block of `block` elements is block/2 bytes in
     * either order. Standard byte p holds elements 2p (low) and 2p+1 (high); GGUF byte j holds
     * elements j (low) and j + half (high). */
    const size_t half = block / 2, nblocks = bytes / half;
    for (size_t b = 0; b < nblocks; b++) {
        const uint8_t *src = in + b * half;
        uint8_t *dst = out + b * half;
        if (to == LOFP_NIBBLE_GGUF) {
            for (size_t j = 0; j < half; j++) {
                size_t e_lo = j, e_hi = j + half;
                uint8_t lo = (uint8_t)((src[e_lo / 2] >> (4 * (e_lo & 1))) & 0xF);
                uint8_t hi = (uint8_t)((src[e_hi / 2] >> (4 * (e_hi & 1))) & 0xF);
                dst[j] = (uint8_t)(lo | (hi << 4));
            }
        } else {
            for (size_t p = 0; p < half; p++) {
                size_t e0 = 2 * p, e1 = 2 * p + 1; /* element e lives in byte e % half */
                uint8_t lo = (uint8_t)((src[e0 % half] >> (e0 < half ? 0 : 4)) & 0xF);
                uint8_t hi = (uint8_t)((src[e1 % half] >> (e1 < half ? 0 : 4)) & 0xF);
                dst[p] = (uint8_t)(lo | (hi << 4));
            }
        }
    }
    return LOFP_OK;
}
