/* test_layout.c -- scale layouts, FP4 nibble orders and layout diagnosis (SPEC §3,
 * docs/LAYOUT.md). Ground truth: the nvmath-python offsets, an independent reshape/permute
 * re-derivation of the swizzle, the seeds' golden buffers, and hand-written byte expectations. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static const lofp_layout k_all[LOFP_LAYOUT_COUNT_] = {
    LOFP_LAYOUT_LINEAR, LOFP_LAYOUT_SWIZZLE_128X4, LOFP_LAYOUT_PACKED_U32, LOFP_LAYOUT_PACKED_U32_DG,
};

static size_t rup(size_t a, size_t m) { return (a + m - 1) / m * m; }
static size_t cdiv(size_t a, size_t b) { return (a + b - 1) / b; }

static uint8_t *xmalloc(size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "out of memory\n"); exit(2); }
    return p;
}

/* ------------------------------------------------------------------------------------------ */

static void test_names(void)
{
    for (int i = 0; i < LOFP_LAYOUT_COUNT_; i++) {
        const char *n = lofp_layout_name(k_all[i]);
        CHECK(n != NULL);
        lofp_layout l = LOFP_LAYOUT_COUNT_;
        CHECK_OK(lofp_layout_from_name(n, &l));
        CHECK_EQ_U(l, k_all[i]);
    }
    CHECK(strcmp(lofp_layout_name(LOFP_LAYOUT_LINEAR), "linear") == 0);
    CHECK(strcmp(lofp_layout_name(LOFP_LAYOUT_SWIZZLE_128X4), "swizzle-128x4") == 0);
    CHECK(strcmp(lofp_layout_name(LOFP_LAYOUT_PACKED_U32), "packed-u32") == 0);
    CHECK(strcmp(lofp_layout_name(LOFP_LAYOUT_PACKED_U32_DG), "packed-u32:deepgemm") == 0);
    CHECK(lofp_layout_name(LOFP_LAYOUT_COUNT_) == NULL);
    CHECK(lofp_layout_name((lofp_layout)-1) == NULL);
    lofp_layout l;
    CHECK(lofp_layout_from_name("packed-u32:tilelang", &l) == LOFP_OK && l == LOFP_LAYOUT_PACKED_U32);
    CHECK(lofp_layout_from_name("rowmajor", &l) == LOFP_ERR_NOT_FOUND);
    CHECK(lofp_layout_from_name(NULL, &l) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_layout_from_name("linear", NULL) == LOFP_ERR_INVALID_ARG);
}

/* ------------------------------------------------------------------------------------------ */
/* Swizzle                                                                                      */
/* ------------------------------------------------------------------------------------------ */

static void test_swizzle_offsets(void)
{
    /* nvmath-python get_block_scale_offset, NVFP4, M = K = 128 -> 8 scale columns. */
    CHECK_EQ_U(lofp_swizzle128x4_offset(5, 2, 8), 82);
    CHECK_EQ_U(lofp_swizzle128x4_offset(5, 5, 8), 593);
    CHECK_EQ_U(lofp_swizzle128x4_offset(0, 0, 8), 0);
    /* the 128 row-words of an atom are stored 0, 32, 64, 96, 1, 33, ... (te mxfp8.rst) */
    CHECK_EQ_U(lofp_swizzle128x4_offset(32, 0, 4), 4);
    CHECK_EQ_U(lofp_swizzle128x4_offset(1, 0, 4), 16);
    CHECK_EQ_U(lofp_swizzle128x4_offset(33, 0, 4), 20);
    /* second row tile comes after all K tiles of the first */
    CHECK_EQ_U(lofp_swizzle128x4_offset(128, 0, 8), 1024);
    CHECK_EQ_U(lofp_swizzle128x4_offset(128, 0, 5), 1024); /* Cp = 8 */

    /* and the conversion puts the bytes there */
    uint8_t in[128 * 8], out[128 * 8];
    for (size_t i = 0; i < sizeof in; i++) in[i] = (uint8_t)(i * 37 + 11);
    CHECK_OK(lofp_layout_from_linear(in, 128, 8, LOFP_LAYOUT_SWIZZLE_128X4, -1, out));
    CHECK_EQ_U(out[82], in[5 * 8 + 2]);
    CHECK_EQ_U(out[593], in[5 * 8 + 5]);
}

/* A generic reshape + permute, the way seed 000's swizzle_scales does it:
 *   pad.reshape(Mp/128, 4, 32, Sp/4, 4).permute(0, 3, 2, 1, 4).reshape(-1)
 * The source is viewed with dims src_dims (row-major); the output walks the permuted dims in
 * row-major order and reads the source by strides. Nothing here knows the offset formula. */
static void permute5(const uint8_t *src, const size_t src_dims[5], const int perm[5], uint8_t *dst)
{
    size_t stride[5];
    stride[4] = 1;
    for (int i = 3; i >= 0; i--) stride[i] = stride[i + 1] * src_dims[i + 1];
    size_t odims[5], ostride[5];
    for (int i = 0; i < 5; i++) { odims[i] = src_dims[perm[i]]; ostride[i] = stride[perm[i]]; }
    size_t idx[5] = {0, 0, 0, 0, 0}, total = 1, o = 0;
    for (int i = 0; i < 5; i++) total *= odims[i];
    for (o = 0; o < total; o++) {
        size_t s = 0;
        for (int i = 0; i < 5; i++) s += idx[i] * ostride[i];
        dst[o] = src[s];
        for (int i = 4; i >= 0; i--) {
            if (++idx[i] < odims[i]) break;
            idx[i] = 0;
        }
    }
}

static void reference_swizzle(const uint8_t *sf, size_t m, size_t s, uint8_t *out)
{
    size_t mp = rup(m, 128), sp = rup(s, 4);
    uint8_t *pad = xmalloc(mp * sp);
    memset(pad, 0, mp * sp);
    for (size_t r = 0; r < m; r++) memcpy(pad + r * sp, sf + r * s, s);
    const size_t dims[5] = {mp / 128, 4, 32, sp / 4, 4};
    const int perm[5] = {0, 3, 2, 1, 4};
    permute5(pad, dims, perm, out);
    free(pad);
}

static void test_swizzle_reference(void)
{
    tu_rng rng = {0x5157a11eu};
    for (int it = 0; it < 60; it++) {
        size_t rows = 1 + (size_t)(tu_next(&rng) % 400);
        size_t cols = 1 + (size_t)(tu_next(&rng) % 14);
        if (it == 0) { rows = 128; cols = 8; }
        if (it == 1) { rows = 129; cols = 5; }
        size_t n = rup(rows, 128) * rup(cols, 4);
        CHECK_EQ_U(lofp_layout_required_bytes(rows, cols * 16, 16, LOFP_LAYOUT_SWIZZLE_128X4), n);
        uint8_t *in = xmalloc(rows * cols), *want = xmalloc(n), *got = xmalloc(n);
        for (size_t i = 0; i < rows * cols; i++) in[i] = (uint8_t)(1 + tu_next(&rng) % 254);
        reference_swizzle(in, rows, cols, want);
        memset(got, 0xA5, n);
        CHECK_OK(lofp_layout_from_linear(in, rows, cols, LOFP_LAYOUT_SWIZZLE_128X4, -1, got));
        CHECKF(memcmp(want, got, n) == 0, "swizzle differs from reshape/permute at %zux%zu", rows, cols);
        /* and the offset function agrees element by element */
        size_t bad = 0;
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c++)
                bad += want[lofp_swizzle128x4_offset(r, c, cols)] != in[r * cols + c];
        CHECK_EQ_U(bad, 0);
        free(in); free(want); free(got);
    }
}

static void test_golden_nvfp4_swizzle(void)
{
    static const char *const cases[] = {"normal_32x128", "rows200_x48", "ties_8x64", "zero_and_tiny_6x32"};
    static const char *const levels[] = {"two_level", "one_level"};
    for (int c = 0; c < 4; c++) {
        for (int lv = 0; lv < 2; lv++) {
            char p1[256], p2[256];
            snprintf(p1, sizeof p1, "nvfp4_seed000_ties_to_zero/%s/%s/scales.npy", cases[c], levels[lv]);
            snprintf(p2, sizeof p2, "nvfp4_seed000_ties_to_zero/%s/%s/scales_swizzle128x4.npy", cases[c], levels[lv]);
            tu_npy s = tu_load_golden(p1), w = tu_load_golden(p2);
            CHECK(s.ndim == 2 && s.itemsize == 1 && w.itemsize == 1);
            size_t rows = s.shape[0], cols = s.shape[1];
            size_t n = lofp_layout_required_bytes(rows, cols * 16, 16, LOFP_LAYOUT_SWIZZLE_128X4);
            CHECKF(n == w.count, "%s: required %zu, golden %zu", p2, n, w.count);
            uint8_t *got = xmalloc(n), *back = xmalloc(rows * cols);
            memset(got, 0xEE, n);
            CHECK_OK(lofp_layout_from_linear(s.data, rows, cols, LOFP_LAYOUT_SWIZZLE_128X4, -1, got));
            CHECKF(n == w.count && memcmp(got, w.data, n) == 0, "%s differs", p2);
            CHECK_OK(lofp_layout_to_linear(w.data, rows, cols, LOFP_LAYOUT_SWIZZLE_128X4, back));
            CHECKF(memcmp(back, s.data, rows * cols) == 0, "%s: inverse differs", p2);
            /* the diagnosis names it */
            lofp_layout_diagnosis d;
            lofp_status st = lofp_layout_diagnose(w.data, w.count, rows, cols * 16, 16, s.data, 0, NULL, &d);
            CHECKF(st == LOFP_OK && d.matches && d.layout == LOFP_LAYOUT_SWIZZLE_128X4 && d.block == 16,
                   "%s: diagnosed %d layout %d block %u\n%s", p2, (int)st, (int)d.layout, d.block, d.evidence);
            free(got); free(back);
            tu_npy_free(&s); tu_npy_free(&w);
        }
    }
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void test_golden_mxfp8_packed(void)
{
    static const char *const cases[] = {"m3_n5_k96_gran32", "m4_n8_k512_gran128"};
    static const char *const ops[] = {"a", "b"};
    for (int c = 0; c < 2; c++) {
        const char *kp = strstr(cases[c], "_k"), *gp = strstr(cases[c], "gran");
        size_t k = (size_t)atol(kp + 2);
        uint32_t gran = (uint32_t)atol(gp + 4);
        CHECK(k > 0 && (gran == 32 || gran == 128));
        for (int o = 0; o < 2; o++) {
            char p1[256], p2[256];
            snprintf(p1, sizeof p1, "mxfp8_seed004_ties_to_zero/%s/%s_scales.npy", cases[c], ops[o]);
            snprintf(p2, sizeof p2, "mxfp8_seed004_ties_to_zero/%s/%s_scales_packed_u32.npy", cases[c], ops[o]);
            tu_npy s = tu_load_golden(p1), w = tu_load_golden(p2);
            CHECK(strcmp(w.descr, "<u4") == 0 && w.itemsize == 4);
            size_t rows = s.shape[0], cols = s.shape[1];
            CHECK_EQ_U(cols, cdiv(k, gran));
            size_t n = lofp_layout_required_bytes(rows, k, gran, LOFP_LAYOUT_PACKED_U32);
            CHECKF(n == w.count * 4, "%s: required %zu, golden %zu words", p2, n, w.count);
            uint8_t *got = xmalloc(n), *back = xmalloc(rows * cols);
            CHECK_OK(lofp_layout_from_linear(s.data, rows, cols, LOFP_LAYOUT_PACKED_U32, -1, got));
            const uint8_t *wb = w.data;
            size_t bad = 0;
            for (size_t i = 0; i < w.count && i * 4 < n; i++) bad += le32(got + 4 * i) != le32(wb + 4 * i);
            CHECKF(bad == 0, "%s: %zu words differ", p2, bad);
            CHECK_OK(lofp_layout_to_linear(w.data, rows, cols, LOFP_LAYOUT_PACKED_U32, back));
            CHECKF(memcmp(back, s.data, rows * cols) == 0, "%s: inverse differs", p2);
            /* diagnosis: TileLang, correct order; a single K-group word makes row/group-major
             * indistinguishable, which must be said and resolved to group-major */
            lofp_layout_diagnosis d;
            lofp_status st = lofp_layout_diagnose(w.data, n, rows, k, gran, s.data, 0, NULL, &d);
            /* With cols % 4 == 0 (m4_n8_k512_gran128: 4 scales per row) the one word per row is
             * also the linear layout byte for byte; the canonical answer is then linear and the
             * packed reading must be listed as an equal alternative. */
            lofp_layout want = cols % 4 == 0 ? LOFP_LAYOUT_LINEAR : LOFP_LAYOUT_PACKED_U32;
            CHECKF(st == LOFP_OK && d.matches && d.layout == want && !d.reversed_bytes &&
                   !d.row_major_words && d.block == gran && d.mismatched_bytes == 0,
                   "%s: %s", p2, d.evidence);
            CHECKF(strstr(d.evidence, "ambiguous") != NULL, "%s: no ambiguity noted: %s", p2, d.evidence);
            if (want == LOFP_LAYOUT_LINEAR)
                CHECKF(strstr(d.evidence, "packed-u32 LSB group-major g") != NULL, "%s", d.evidence);
            else
                CHECKF(strstr(d.evidence, "single K-group") != NULL, "%s", d.evidence);
            free(got); free(back);
            tu_npy_free(&s); tu_npy_free(&w);
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Packed words: hand-written bytes, round trips, padding                                       */
/* ------------------------------------------------------------------------------------------ */

static void test_packed_by_hand(void)
{
    const uint8_t s[2 * 5] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    uint8_t out[64];
    static const uint8_t tl[16] = {1, 2, 3, 4, 6, 7, 8, 9, 5, 127, 127, 127, 10, 127, 127, 127};
    static const uint8_t dg[32] = {1, 2, 3, 4, 6, 7, 8, 9, 0, 0, 0, 0, 0, 0, 0, 0,
                                   5, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    CHECK_EQ_U(lofp_layout_required_bytes(2, 5, 1, LOFP_LAYOUT_PACKED_U32), 16);
    CHECK_EQ_U(lofp_layout_required_bytes(2, 5, 1, LOFP_LAYOUT_PACKED_U32_DG), 32);
    memset(out, 0xCC, sizeof out);
    CHECK_OK(lofp_layout_from_linear(s, 2, 5, LOFP_LAYOUT_PACKED_U32, -1, out));
    CHECK(memcmp(out, tl, 16) == 0 && out[16] == 0xCC);
    /* word value, whatever the host: byte 0 is the least significant */
    CHECK_EQ_U(le32(out), 0x04030201u);
    memset(out, 0xCC, sizeof out);
    CHECK_OK(lofp_layout_from_linear(s, 2, 5, LOFP_LAYOUT_PACKED_U32_DG, -1, out));
    CHECK(memcmp(out, dg, 32) == 0 && out[32] == 0xCC);
    /* explicit pad byte */
    CHECK_OK(lofp_layout_from_linear(s, 2, 5, LOFP_LAYOUT_PACKED_U32, 0x42, out));
    CHECK(out[9] == 0x42 && out[15] == 0x42 && out[8] == 5);
    CHECK_OK(lofp_layout_from_linear(s, 2, 5, LOFP_LAYOUT_PACKED_U32_DG, 127, out));
    CHECK(out[8] == 127 && out[17] == 127 && out[16] == 5);
    /* 0xFF and out-of-range pad bytes are refused */
    CHECK(lofp_layout_from_linear(s, 2, 5, LOFP_LAYOUT_PACKED_U32, 0xFF, out) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_layout_from_linear(s, 2, 5, LOFP_LAYOUT_PACKED_U32_DG, 0xFF, out) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_layout_from_linear(s, 2, 5, LOFP_LAYOUT_PACKED_U32, 256, out) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_layout_from_linear(s, 2, 5, LOFP_LAYOUT_PACKED_U32, -2, out) == LOFP_ERR_INVALID_ARG);
    /* bad arguments */
    CHECK(lofp_layout_from_linear(NULL, 2, 5, LOFP_LAYOUT_LINEAR, -1, out) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_layout_from_linear(s, 2, 5, LOFP_LAYOUT_LINEAR, -1, NULL) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_layout_from_linear(s, 2, 5, LOFP_LAYOUT_COUNT_, -1, out) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_layout_to_linear(s, 2, 5, (lofp_layout)9, out) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_layout_from_linear(out, 2, 5, LOFP_LAYOUT_PACKED_U32, -1, out + 8) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_layout_to_linear(out, 2, 5, LOFP_LAYOUT_PACKED_U32, out + 4) == LOFP_ERR_INVALID_ARG);
    uint8_t dummy[4];
    CHECK(lofp_layout_from_linear(dummy, SIZE_MAX / 2, 64, LOFP_LAYOUT_LINEAR, -1, dummy) == LOFP_ERR_SIZE_OVERFLOW);
    CHECK(lofp_layout_from_linear(dummy, SIZE_MAX - 5, 1, LOFP_LAYOUT_SWIZZLE_128X4, -1, dummy) == LOFP_ERR_SIZE_OVERFLOW);
    CHECK(lofp_layout_to_linear(dummy, SIZE_MAX - 1, 1, LOFP_LAYOUT_PACKED_U32_DG, dummy) == LOFP_ERR_SIZE_OVERFLOW);
    /* empty shapes are fine and touch nothing */
    CHECK_OK(lofp_layout_from_linear(NULL, 0, 5, LOFP_LAYOUT_PACKED_U32_DG, -1, NULL));
    CHECK_OK(lofp_layout_to_linear(NULL, 3, 0, LOFP_LAYOUT_SWIZZLE_128X4, NULL));
}

/* Is byte `o` of layout l a data position? Derived from each layout's definition, per position. */
static int is_data_pos(lofp_layout l, size_t rows, size_t cols, size_t o)
{
    if (l == LOFP_LAYOUT_LINEAR) return 1;
    if (l == LOFP_LAYOUT_SWIZZLE_128X4) {
        /* invert the atom: atom index, then row-in-atom and col-in-atom */
        size_t kt = rup(cols, 4) / 4, atom = o / 512, in = o % 512;
        size_t r = (atom / kt) * 128 + ((in % 16) / 4) * 32 + in / 16;
        size_t c = (atom % kt) * 4 + in % 4;
        return r < rows && c < cols;
    }
    size_t ma = l == LOFP_LAYOUT_PACKED_U32_DG ? rup(rows, 4) : rows;
    size_t w = o / 4, g = w / ma, m = w % ma, c = 4 * g + o % 4;
    return m < rows && c < cols;
}

static void test_round_trips(void)
{
    tu_rng rng = {0xabcdef12u};
    for (int it = 0; it < 200; it++) {
        size_t rows = 1 + (size_t)(tu_next(&rng) % 300);
        size_t cols = 1 + (size_t)(tu_next(&rng) % 23);
        if (it < 4) { rows = (size_t[]){1, 3, 127, 130}[it]; cols = (size_t[]){1, 6, 4, 9}[it]; }
        uint8_t *in = xmalloc(rows * cols), *back = xmalloc(rows * cols);
        for (size_t i = 0; i < rows * cols; i++) in[i] = (uint8_t)(tu_next(&rng) % 255);
        for (int li = 0; li < LOFP_LAYOUT_COUNT_; li++) {
            lofp_layout l = k_all[li];
            size_t n = lofp_layout_required_bytes(rows, cols * 32, 32, l);
            CHECK(n >= rows * cols);
            uint8_t *buf = xmalloc(n + 8);
            memset(buf, 0xFF, n + 8);
            int pad = (it % 3 == 0) ? -1 : (int)(tu_next(&rng) % 255);
            CHECK_OK(lofp_layout_from_linear(in, rows, cols, l, pad, buf));
            for (int i = 0; i < 8; i++) CHECK(buf[n + i] == 0xFF); /* nothing past n */
            uint8_t want_pad = l == LOFP_LAYOUT_PACKED_U32 ? (pad < 0 ? 127 : (uint8_t)pad)
                             : l == LOFP_LAYOUT_PACKED_U32_DG ? (pad < 0 ? 0 : (uint8_t)pad) : 0;
            size_t bad_pad = 0, npad = 0;
            for (size_t o = 0; o < n; o++)
                if (!is_data_pos(l, rows, cols, o)) { npad++; bad_pad += buf[o] != want_pad; }
            CHECKF(bad_pad == 0, "layout %d %zux%zu: %zu of %zu pad bytes wrong", (int)l, rows, cols, bad_pad, npad);
            CHECK_EQ_U(n - npad, rows * cols);
            memset(back, 0, rows * cols);
            CHECK_OK(lofp_layout_to_linear(buf, rows, cols, l, back));
            CHECKF(memcmp(back, in, rows * cols) == 0, "layout %d %zux%zu: round trip differs", (int)l, rows, cols);
            free(buf);
        }
        free(in); free(back);
    }
}

static void test_required_bytes(void)
{
    /* PyTorch's numel rule: round_up(rows,128) * round_up(ceil(K/block),4) */
    CHECK_EQ_U(lofp_layout_required_bytes(200, 48, 16, LOFP_LAYOUT_SWIZZLE_128X4), 256 * 4);
    CHECK_EQ_U(lofp_layout_required_bytes(32, 128, 16, LOFP_LAYOUT_SWIZZLE_128X4), 128 * 8);
    CHECK_EQ_U(lofp_layout_required_bytes(1, 1, 32, LOFP_LAYOUT_SWIZZLE_128X4), 512);
    CHECK_EQ_U(lofp_layout_required_bytes(128, 4096, 32, LOFP_LAYOUT_SWIZZLE_128X4), 128 * 128);
    CHECK_EQ_U(lofp_layout_required_bytes(129, 4128, 32, LOFP_LAYOUT_SWIZZLE_128X4), 256 * 132);
    CHECK_EQ_U(lofp_layout_required_bytes(200, 48, 16, LOFP_LAYOUT_LINEAR), 600);
    CHECK_EQ_U(lofp_layout_required_bytes(5, 100, 32, LOFP_LAYOUT_LINEAR), 20); /* ceil(100/32) = 4 */
    CHECK_EQ_U(lofp_layout_required_bytes(3, 96, 32, LOFP_LAYOUT_PACKED_U32), 12);
    CHECK_EQ_U(lofp_layout_required_bytes(3, 96, 32, LOFP_LAYOUT_PACKED_U32_DG), 16);
    CHECK_EQ_U(lofp_layout_required_bytes(4, 512, 128, LOFP_LAYOUT_PACKED_U32), 16);
    CHECK_EQ_U(lofp_layout_required_bytes(6, 1408, 128, LOFP_LAYOUT_PACKED_U32), 4 * 3 * 6);
    CHECK_EQ_U(lofp_layout_required_bytes(6, 1408, 128, LOFP_LAYOUT_PACKED_U32_DG), 4 * 3 * 8);
    /* invalid */
    CHECK_EQ_U(lofp_layout_required_bytes(4, 64, 0, LOFP_LAYOUT_LINEAR), 0);
    CHECK_EQ_U(lofp_layout_required_bytes(4, 64, 32, LOFP_LAYOUT_COUNT_), 0);
    CHECK_EQ_U(lofp_layout_required_bytes(4, 64, 32, (lofp_layout)-3), 0);
    /* overflow -> 0 */
    CHECK_EQ_U(lofp_layout_required_bytes(SIZE_MAX / 2, 64 * 16, 16, LOFP_LAYOUT_LINEAR), 0);
    CHECK_EQ_U(lofp_layout_required_bytes(SIZE_MAX - 5, 16, 16, LOFP_LAYOUT_SWIZZLE_128X4), 0);
    CHECK_EQ_U(lofp_layout_required_bytes(3, SIZE_MAX, 1, LOFP_LAYOUT_SWIZZLE_128X4), 0);
    CHECK_EQ_U(lofp_layout_required_bytes(SIZE_MAX / 2, 64, 32, LOFP_LAYOUT_SWIZZLE_128X4), 0);
    CHECK_EQ_U(lofp_layout_required_bytes(SIZE_MAX / 8, 64, 32, LOFP_LAYOUT_SWIZZLE_128X4), (SIZE_MAX / 8 + 1) * 4);
    CHECK_EQ_U(lofp_layout_required_bytes(SIZE_MAX - 1, 32, 32, LOFP_LAYOUT_PACKED_U32_DG), 0);
    CHECK_EQ_U(lofp_layout_required_bytes(SIZE_MAX / 4 + 1, 32, 32, LOFP_LAYOUT_PACKED_U32), 0);
    CHECK_EQ_U(lofp_layout_required_bytes(SIZE_MAX / 4, 32, 32, LOFP_LAYOUT_PACKED_U32), SIZE_MAX / 4 * 4);
    CHECK_EQ_U(lofp_layout_required_bytes(SIZE_MAX, 1, 1, LOFP_LAYOUT_LINEAR), SIZE_MAX);
}

/* ------------------------------------------------------------------------------------------ */
/* GGUF nibble order                                                                            */
/* ------------------------------------------------------------------------------------------ */

static void test_gguf_repack(void)
{
    /* elements e_i = i for i < 16, 31 - i for i >= 16 (one row of 32) */
    static const uint8_t std_bytes[16] = {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE,
                                          0xEF, 0xCD, 0xAB, 0x89, 0x67, 0x45, 0x23, 0x01};
    /* MXFP4 block 32: byte j = e_j | e_{j+16} << 4 */
    static const uint8_t gg32[16] = {0xF0, 0xE1, 0xD2, 0xC3, 0xB4, 0xA5, 0x96, 0x87,
                                     0x78, 0x69, 0x5A, 0x4B, 0x3C, 0x2D, 0x1E, 0x0F};
    /* NVFP4 16-element sub-blocks: byte j = e_j | e_{j+8} << 4 within each */
    static const uint8_t gg16[16] = {0x80, 0x91, 0xA2, 0xB3, 0xC4, 0xD5, 0xE6, 0xF7,
                                     0x7F, 0x6E, 0x5D, 0x4C, 0x3B, 0x2A, 0x19, 0x08};
    uint8_t out[16], back[16];
    CHECK_OK(lofp_fp4_repack(std_bytes, out, 1, 32, 32, LOFP_NIBBLE_STANDARD, LOFP_NIBBLE_GGUF));
    CHECK(memcmp(out, gg32, 16) == 0);
    CHECK_OK(lofp_fp4_repack(gg32, back, 1, 32, 32, LOFP_NIBBLE_GGUF, LOFP_NIBBLE_STANDARD));
    CHECK(memcmp(back, std_bytes, 16) == 0);
    CHECK_OK(lofp_fp4_repack(std_bytes, out, 1, 32, 16, LOFP_NIBBLE_STANDARD, LOFP_NIBBLE_GGUF));
    CHECK(memcmp(out, gg16, 16) == 0);
    CHECK_OK(lofp_fp4_repack(gg16, back, 1, 32, 16, LOFP_NIBBLE_GGUF, LOFP_NIBBLE_STANDARD));
    CHECK(memcmp(back, std_bytes, 16) == 0);
    /* two rows of 16 at block 16 is the same bytes as one row of 32 */
    CHECK_OK(lofp_fp4_repack(std_bytes, out, 2, 16, 16, LOFP_NIBBLE_STANDARD, LOFP_NIBBLE_GGUF));
    CHECK(memcmp(out, gg16, 16) == 0);
    /* identity */
    CHECK_OK(lofp_fp4_repack(std_bytes, out, 1, 32, 32, LOFP_NIBBLE_STANDARD, LOFP_NIBBLE_STANDARD));
    CHECK(memcmp(out, std_bytes, 16) == 0);

    /* random round trips, several rows */
    tu_rng rng = {77};
    for (int it = 0; it < 50; it++) {
        uint32_t block = (it & 1) ? 16 : 32;
        size_t rows = 1 + (size_t)(tu_next(&rng) % 7), k = block * (1 + (size_t)(tu_next(&rng) % 9));
        size_t n = rows * k / 2;
        uint8_t *a = xmalloc(n), *b = xmalloc(n), *c = xmalloc(n);
        for (size_t i = 0; i < n; i++) a[i] = (uint8_t)tu_next(&rng);
        CHECK_OK(lofp_fp4_repack(a, b, rows, k, block, LOFP_NIBBLE_STANDARD, LOFP_NIBBLE_GGUF));
        /* every element lands where the split order says */
        size_t bad = 0;
        for (size_t r = 0; r < rows; r++)
            for (size_t e = 0; e < k; e++) {
                size_t flat = r * k + e;
                uint8_t se = (a[flat / 2] >> (4 * (flat & 1))) & 0xF;
                size_t blk = flat / block, j = flat % block, h = block / 2;
                uint8_t ge = (b[blk * h + j % h] >> (j < h ? 0 : 4)) & 0xF;
                bad += se != ge;
            }
        CHECK_EQ_U(bad, 0);
        CHECK_OK(lofp_fp4_repack(b, c, rows, k, block, LOFP_NIBBLE_GGUF, LOFP_NIBBLE_STANDARD));
        CHECK(memcmp(a, c, n) == 0);
        free(a); free(b); free(c);
    }
    /* errors */
    CHECK(lofp_fp4_repack(std_bytes, out, 1, 31, 32, LOFP_NIBBLE_STANDARD, LOFP_NIBBLE_GGUF) == LOFP_ERR_SHAPE);
    CHECK(lofp_fp4_repack(std_bytes, out, 1, 24, 16, LOFP_NIBBLE_STANDARD, LOFP_NIBBLE_GGUF) == LOFP_ERR_SHAPE);
    CHECK(lofp_fp4_repack(std_bytes, out, 1, 32, 0, LOFP_NIBBLE_STANDARD, LOFP_NIBBLE_GGUF) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_fp4_repack(std_bytes, out, 1, 32, 32, LOFP_NIBBLE_STANDARD, (lofp_nibble_order)2) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_fp4_repack(NULL, out, 1, 32, 32, LOFP_NIBBLE_STANDARD, LOFP_NIBBLE_GGUF) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_fp4_repack(out, out, 1, 32, 32, LOFP_NIBBLE_STANDARD, LOFP_NIBBLE_GGUF) == LOFP_ERR_INVALID_ARG);
    CHECK(lofp_fp4_repack(std_bytes, out, SIZE_MAX, 4, 32, LOFP_NIBBLE_STANDARD, LOFP_NIBBLE_STANDARD) == LOFP_ERR_SIZE_OVERFLOW);
}

/* ------------------------------------------------------------------------------------------ */
/* Diagnosis                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* A realistic E8M0 scale matrix at granularity 32: per-row gain and per-K-block gain (as seed 004
 * builds its inputs) plus noise, so bytes vary across rows and K groups. */
static void make_scales32(size_t rows, size_t cols, uint64_t seed, uint8_t *s)
{
    tu_rng rng = {seed};
    int kgain[256];
    for (size_t c = 0; c < cols; c++) kgain[c] = (int)(tu_normal(&rng) * 1.5);
    for (size_t r = 0; r < rows; r++) {
        int rg = (int)(tu_normal(&rng) * 3.0);
        for (size_t c = 0; c < cols; c++) {
            int v = 120 + rg + kgain[c] + (int)(tu_next(&rng) % 3);
            s[r * cols + c] = (uint8_t)(v < 1 ? 1 : v > 254 ? 254 : v);
        }
    }
}

/* Coarser scales: one per `ratio` fine blocks, the max byte (what a monotone scale rule gives). */
static void coarsen(const uint8_t *s, size_t rows, size_t cols, size_t ratio, uint8_t *out)
{
    size_t oc = cdiv(cols, ratio);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < oc; c++) {
            uint8_t m = 0;
            for (size_t j = c * ratio; j < cols && j < (c + 1) * ratio; j++)
                if (s[r * cols + j] > m) m = s[r * cols + j];
            out[r * oc + c] = m;
        }
}

/* Packs by hand with the failure flags (the writer's bug), independent of the library. */
static size_t pack_buggy(const uint8_t *s, size_t rows, size_t cols, int dg, int reversed,
                         int row_major, uint8_t pad, uint8_t *out)
{
    size_t ma = dg ? rup(rows, 4) : rows, groups = cdiv(cols, 4);
    for (size_t m = 0; m < ma; m++)
        for (size_t g = 0; g < groups; g++) {
            uint32_t word = 0;
            for (size_t i = 0; i < 4; i++) {
                size_t c = 4 * g + i;
                uint32_t b = (m < rows && c < cols) ? s[m * cols + c] : pad;
                word |= b << (8 * i);
            }
            size_t w = row_major ? m * groups + g : g * ma + m;
            for (size_t i = 0; i < 4; i++) /* store little-endian, or big-endian when reversed */
                out[4 * w + i] = (uint8_t)(word >> (8 * (reversed ? 3 - i : i)));
        }
    return ma * groups * 4;
}

#define DIAG(buf, n, rows, k, blk, exp, ab, ea, d) lofp_layout_diagnose(buf, n, rows, k, blk, exp, ab, ea, d)

static void expect_diag(const char *what, lofp_status st, const lofp_layout_diagnosis *d,
                        lofp_status want_st, lofp_layout l, int rev, int rm, uint32_t block)
{
    CHECKF(st == want_st && d->matches == (want_st == LOFP_OK) && d->layout == l &&
               d->reversed_bytes == rev && d->row_major_words == rm && d->block == block,
           "%s: got st=%s matches=%d layout=%s rev=%d rm=%d block=%u\n%s", what, lofp_status_name(st),
           d->matches, lofp_layout_name(d->layout), d->reversed_bytes, d->row_major_words, d->block,
           d->evidence);
    if (getenv("LOFP_TEST_VERBOSE")) printf("--- %s\n%s", what, d->evidence);
}

static void test_diagnose(void)
{
    const size_t rows = 6, k = 1408;            /* 44 blocks of 32, 11 of 128: 3 words per row */
    const size_t c32 = cdiv(k, 32), c128 = cdiv(k, 128);
    uint8_t s32[6 * 44], s128[6 * 11];
    make_scales32(rows, c32, 1234, s32);
    coarsen(s32, rows, c32, 4, s128);
    /* sanity: the matrix really varies along K and across rows */
    CHECK(s128[0] != s128[1] || s128[1] != s128[2]);
    CHECK(s128[0] != s128[c128]);

    uint8_t buf[4096], buf2[4096];
    lofp_layout_diagnosis d;
    lofp_status st;
    size_t n;

    /* correct TileLang packing */
    n = pack_buggy(s128, rows, c128, 0, 0, 0, 127, buf);
    st = DIAG(buf, n, rows, k, 128, s128, 0, NULL, &d);
    expect_diag("tilelang", st, &d, LOFP_OK, LOFP_LAYOUT_PACKED_U32, 0, 0, 128);
    CHECK_EQ_U(d.mismatched_bytes, 0);
    CHECKF(strstr(d.evidence, "packed-u32 (TileLang), LSB-first, group-major, granularity 128: 18/18 words match"),
           "%s", d.evidence);
    CHECK(strstr(d.evidence, "ambiguous") == NULL);
    /* the library's own packing is the same bytes */
    CHECK_OK(lofp_layout_from_linear(s128, rows, c128, LOFP_LAYOUT_PACKED_U32, -1, buf2));
    CHECK(memcmp(buf, buf2, n) == 0);

    /* DeepGEMM (Ma = 8, zero pad) */
    n = pack_buggy(s128, rows, c128, 1, 0, 0, 0, buf);
    st = DIAG(buf, n, rows, k, 128, s128, 0, NULL, &d);
    expect_diag("deepgemm", st, &d, LOFP_OK, LOFP_LAYOUT_PACKED_U32_DG, 0, 0, 128);

    /* reversed bytes */
    n = pack_buggy(s128, rows, c128, 0, 1, 0, 127, buf);
    st = DIAG(buf, n, rows, k, 128, s128, 0, NULL, &d);
    expect_diag("reversed", st, &d, LOFP_OK, LOFP_LAYOUT_PACKED_U32, 1, 0, 128);
    CHECK(strstr(d.evidence, "MSB-first") != NULL);

    /* row-major words */
    n = pack_buggy(s128, rows, c128, 0, 0, 1, 127, buf);
    st = DIAG(buf, n, rows, k, 128, s128, 0, NULL, &d);
    expect_diag("row-major", st, &d, LOFP_OK, LOFP_LAYOUT_PACKED_U32, 0, 1, 128);
    CHECK(strstr(d.evidence, "row-major") != NULL);

    /* both bugs, DeepGEMM */
    n = pack_buggy(s128, rows, c128, 1, 1, 1, 0, buf);
    st = DIAG(buf, n, rows, k, 128, s128, 0, NULL, &d);
    expect_diag("deepgemm reversed row-major", st, &d, LOFP_OK, LOFP_LAYOUT_PACKED_U32_DG, 1, 1, 128);

    /* written at 32, read at 128: the whole producer buffer */
    n = pack_buggy(s32, rows, c32, 0, 0, 0, 127, buf);
    st = DIAG(buf, n, rows, k, 128, s128, 32, s32, &d);
    expect_diag("32 written / 128 read", st, &d, LOFP_OK, LOFP_LAYOUT_PACKED_U32, 0, 0, 32);
    CHECK(strstr(d.evidence, "not the expected 128") != NULL);
    /* ... and the prefix a 128-sized reader takes (seed 004's consumer_words) */
    size_t n128 = lofp_layout_required_bytes(rows, k, 128, LOFP_LAYOUT_PACKED_U32);
    st = DIAG(buf, n128, rows, k, 128, s128, 32, s32, &d);
    expect_diag("32 written / 128 read, truncated", st, &d, LOFP_OK, LOFP_LAYOUT_PACKED_U32, 0, 0, 32);
    CHECK(strstr(d.evidence, "first 72 of its 264 bytes") != NULL);
    /* without the alternative scales, granularity 32 cannot be derived from 128: no match */
    st = DIAG(buf, n, rows, k, 128, s128, 0, NULL, &d);
    CHECK(st == LOFP_ERR_MISMATCH && !d.matches && d.mismatched_bytes > 0);
    /* written at 128 but expected at 32: 128 is derived from the 32 scales */
    n = pack_buggy(s128, rows, c128, 0, 0, 0, 127, buf);
    st = DIAG(buf, n, rows, k, 32, s32, 0, NULL, &d);
    expect_diag("128 written, 32 expected (derived)", st, &d, LOFP_OK, LOFP_LAYOUT_PACKED_U32, 0, 0, 128);
    CHECK(strstr(d.evidence, "derived") != NULL);

    /* swizzle */
    n = lofp_layout_required_bytes(rows, k, 128, LOFP_LAYOUT_SWIZZLE_128X4);
    reference_swizzle(s128, rows, c128, buf);
    st = DIAG(buf, n, rows, k, 128, s128, 0, NULL, &d);
    expect_diag("swizzle", st, &d, LOFP_OK, LOFP_LAYOUT_SWIZZLE_128X4, 0, 0, 128);
    /* swizzle with dirty (0xFF) padding: still the swizzle, padding reported */
    for (size_t o = 0; o < n; o++) if (!is_data_pos(LOFP_LAYOUT_SWIZZLE_128X4, rows, c128, o)) buf[o] = 0xFF;
    st = DIAG(buf, n, rows, k, 128, s128, 0, NULL, &d);
    expect_diag("swizzle dirty pad", st, &d, LOFP_OK, LOFP_LAYOUT_SWIZZLE_128X4, 0, 0, 128);
    CHECK(strstr(d.evidence, "0xFF") != NULL && d.mismatched_bytes > 0);

    /* linear (11 columns: not confusable with row-major words) */
    st = DIAG(s128, rows * c128, rows, k, 128, s128, 0, NULL, &d);
    expect_diag("linear", st, &d, LOFP_OK, LOFP_LAYOUT_LINEAR, 0, 0, 128);
    CHECK(strstr(d.evidence, "ambiguous") == NULL);
    /* linear at 32 (44 columns): byte-identical to row-major LSB-first TileLang words */
    st = DIAG(s32, rows * c32, rows, k, 32, s32, 0, NULL, &d);
    expect_diag("linear, cols % 4 == 0", st, &d, LOFP_OK, LOFP_LAYOUT_LINEAR, 0, 0, 32);
    CHECK(strstr(d.evidence, "ambiguous") != NULL);

    /* a random buffer of the TileLang size matches nothing */
    tu_rng rng = {99};
    n = lofp_layout_required_bytes(rows, k, 128, LOFP_LAYOUT_PACKED_U32);
    for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)tu_next(&rng);
    st = DIAG(buf, n, rows, k, 128, s128, 32, s32, &d);
    CHECKF(st == LOFP_ERR_MISMATCH && !d.matches && d.mismatched_bytes > 0, "%s", d.evidence);
    CHECK(strstr(d.evidence, "no candidate") != NULL);

    /* one corrupted scale byte: no match, closest is the right layout, 1 byte off */
    n = pack_buggy(s128, rows, c128, 0, 1, 0, 127, buf);
    buf[5] ^= 0x10;
    st = DIAG(buf, n, rows, k, 128, s128, 0, NULL, &d);
    expect_diag("reversed, one byte corrupted", st, &d, LOFP_ERR_MISMATCH, LOFP_LAYOUT_PACKED_U32, 1, 0, 128);
    CHECK_EQ_U(d.mismatched_bytes, 1);

    /* TileLang packing with a non-default pad byte (0): data match, padding reported */
    n = pack_buggy(s128, rows, c128, 0, 0, 0, 0, buf);
    st = DIAG(buf, n, rows, k, 128, s128, 0, NULL, &d);
    expect_diag("tilelang pad 0", st, &d, LOFP_OK, LOFP_LAYOUT_PACKED_U32, 0, 0, 128);
    CHECK(strstr(d.evidence, "padding bytes are 0x00") != NULL);

    /* rows % 4 == 0: TileLang and DeepGEMM have one size; the pad byte tells them apart */
    {
        const size_t r8 = 8;
        uint8_t t32[8 * 44], t128[8 * 11];
        make_scales32(r8, c32, 555, t32);
        coarsen(t32, r8, c32, 4, t128);
        n = pack_buggy(t128, r8, c128, 1, 0, 0, 0, buf);
        st = DIAG(buf, n, r8, k, 128, t128, 0, NULL, &d);
        expect_diag("deepgemm rows 8", st, &d, LOFP_OK, LOFP_LAYOUT_PACKED_U32_DG, 0, 0, 128);
        n = pack_buggy(t128, r8, c128, 0, 0, 0, 127, buf);
        st = DIAG(buf, n, r8, k, 128, t128, 0, NULL, &d);
        expect_diag("tilelang rows 8", st, &d, LOFP_OK, LOFP_LAYOUT_PACKED_U32, 0, 0, 128);
        /* K = 1024: no pad columns, the two are the same bytes: ambiguous, TileLang preferred */
        n = pack_buggy(t32, r8, 32, 1, 0, 0, 0, buf);
        st = DIAG(buf, n, r8, 1024, 32, t32, 0, NULL, &d);
        expect_diag("deepgemm == tilelang", st, &d, LOFP_OK, LOFP_LAYOUT_PACKED_U32, 0, 0, 32);
        CHECK(strstr(d.evidence, "ambiguous") != NULL && strstr(d.evidence, "deepgemm") != NULL);
    }

    /* a single K-group (K = 384 at 128: 3 scales, one word per row): row-major == group-major */
    {
        uint8_t one[6 * 3];
        coarsen(s32, rows, 12, 4, one);
        n = pack_buggy(one, rows, 3, 0, 0, 1, 127, buf); /* written row-major */
        st = DIAG(buf, n, rows, 384, 128, one, 0, NULL, &d);
        expect_diag("single group", st, &d, LOFP_OK, LOFP_LAYOUT_PACKED_U32, 0, 0, 128);
        CHECK(strstr(d.evidence, "ambiguous") != NULL && strstr(d.evidence, "single K-group") != NULL);
    }

    /* all scale bytes equal: every byte order fits */
    {
        uint8_t eq[6 * 11];
        memset(eq, 127, sizeof eq);
        n = pack_buggy(eq, rows, c128, 0, 1, 1, 127, buf);
        st = DIAG(buf, n, rows, k, 128, eq, 0, NULL, &d);
        expect_diag("all equal", st, &d, LOFP_OK, LOFP_LAYOUT_PACKED_U32, 0, 0, 128);
        CHECK(strstr(d.evidence, "all scale bytes are equal") != NULL);
    }

    /* argument errors */
    CHECK(DIAG(NULL, 4, rows, k, 128, s128, 0, NULL, &d) == LOFP_ERR_INVALID_ARG);
    CHECK(DIAG(buf, 4, rows, k, 0, s128, 0, NULL, &d) == LOFP_ERR_INVALID_ARG);
    CHECK(DIAG(buf, 4, rows, k, 128, NULL, 0, NULL, &d) == LOFP_ERR_INVALID_ARG);
    CHECK(DIAG(buf, 4, rows, k, 128, s128, 32, NULL, &d) == LOFP_ERR_INVALID_ARG);
    CHECK(DIAG(buf, 4, rows, k, 128, s128, 0, NULL, NULL) == LOFP_ERR_INVALID_ARG);
}

int main(void)
{
    test_names();
    test_swizzle_offsets();
    test_swizzle_reference();
    test_golden_nvfp4_swizzle();
    test_golden_mxfp8_packed();
    test_packed_by_hand();
    test_round_trips();
    test_required_bytes();
    test_gguf_repack();
    test_diagnose();
    return tu_finish("test_layout");
}
