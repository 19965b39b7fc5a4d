/* qtmeta_check.h -- the property the `lofp:` metadata fuzzer checks (fuzz/fuzz_qtmeta.c) and
 * tests/cli/test_qtmeta_corpus.c replays: random metadata on valid files never crashes the
 * library's interpreter of lofp tensor files (include/lofp/qfile.h, src/checkpoint/qfile.c) nor
 * what runs after it.
 *
 * Input: byte 0 picks how the file's tensors are made, the rest (up to a NUL) is the value of the
 * "lofp:w" metadata entry.
 *   mode 0-3: fixed, valid tensors of a [4, 64] tensor quantized with nvfp4 / mxfp4 / mxfp8-e4m3 /
 *             ultraquant (linear scales);
 *   mode 4+:  when the metadata parses, tensors of exactly the dtypes, shapes and sizes it implies
 *             (layouts included; skipped when over 1 MiB), filled from the input bytes;
 * then lofp_qtensor_load, and when that succeeds: the format -> parse round trip gives the same tensor
 * description, and the tensor is dequantized (through its layout's linear scales). */
#ifndef LOFP_QTMETA_CHECK_H
#define LOFP_QTMETA_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lofp/io.h"
#include "lofp/qfile.h"

/* Returns NULL when the property holds, else what failed. */
static const char *lofp_qtmeta_check(const uint8_t *data, size_t size)
{
    if (size < 1) return NULL;
    unsigned mode = data[0];
    size_t vlen = 0;
    while (1 + vlen < size && data[1 + vlen]) vlen++;
    char *value = malloc(vlen + 1);
    if (!value) return NULL;
    memcpy(value, data + 1, vlen);
    value[vlen] = 0;
    const uint8_t *fill = data + 1 + vlen;
    size_t fill_len = size - 1 - vlen;

    static const char *const base_scheme[4] = {"nvfp4", "mxfp4", "mxfp8-e4m3", "ultraquant"};
    lofp_tensor_desc t[3];
    size_t shp[3][LOFP_MAX_NDIM];
    uint8_t *buf[3] = {NULL, NULL, NULL};
    size_t nt = 0;
    const char *bad = NULL;
    lofp_qtensor p;
    memset(&p, 0, sizeof p);
    if (mode < 4) {
        lofp_scheme s;
        lofp_scheme_preset(base_scheme[mode], &s);
        p.scheme = s;
        p.layout = LOFP_LAYOUT_LINEAR;
        p.ndim = 2;
        p.shape[0] = 4;
        p.shape[1] = 64;
        p.rows = 4;
        p.k = p.kp = 64;
    } else if (lofp_qtensor_meta_parse(value, &p, NULL) != LOFP_OK) {
        free(value);
        return NULL;
    }
    /* the tensors this description implies */
    size_t cb = lofp_codes_bytes(&p.scheme, p.rows, p.k);
    size_t sb = lofp_layout_required_bytes(p.rows, p.kp, p.scheme.block, p.layout);
    if (cb == 0 || sb == 0 || cb > (1u << 20) || sb > (1u << 20)) { free(value); return NULL; }
    size_t sizes[3] = {cb, sb, 4};
    for (int i = 0; i < 3; i++) {
        buf[i] = malloc(sizes[i]);
        if (!buf[i]) goto out;
        for (size_t j = 0; j < sizes[i]; j++)
            buf[i][j] = fill_len ? fill[(j * 7 + (size_t)i) % fill_len] : (uint8_t)(j * 37 + (size_t)i);
    }
    float g = 448.0f;
    memcpy(buf[2], &g, 4);
    t[0] = (lofp_tensor_desc){"w.codes", lofp_qtensor_codes_dtype(&p.scheme), lofp_qtensor_codes_shape(&p, shp[0]), shp[0], buf[0], cb};
    t[1] = (lofp_tensor_desc){"w.scales", lofp_qtensor_scales_dtype(&p.scheme, p.layout), lofp_qtensor_scales_shape(&p, p.layout, shp[1]), shp[1], buf[1], sb};
    t[2] = (lofp_tensor_desc){"w.global_scale", LOFP_DTYPE_F32, 0, shp[2], buf[2], 4};
    nt = 3;
    lofp_metadata_entry meta = {"lofp:w", value};
    size_t len = 0;
    if (lofp_file_encode(LOFP_FORMAT_SAFETENSORS, t, nt, &meta, 1, NULL, 0, &len, NULL) != LOFP_OK) goto out;
    uint8_t *file = malloc(len);
    if (!file) goto out;
    lofp_file *f = NULL;
    if (lofp_file_encode(LOFP_FORMAT_SAFETENSORS, t, nt, &meta, 1, file, len, &len, NULL) != LOFP_OK ||
        lofp_file_open_memory(file, len, LOFP_FORMAT_SAFETENSORS, "fuzz.safetensors", &f, NULL) != LOFP_OK) {
        bad = "a valid file did not encode or open";
        free(file);
        goto out;
    }
    lofp_qtensor q;
    if (lofp_qtensor_load(f, "fuzz.safetensors", "w", &q, NULL) == LOFP_OK) {
        /* what the interpreter accepted formats and parses back to the same description */
        size_t alen = lofp_qtensor_meta_format(&q, NULL, 0);
        char *again = alen ? malloc(alen + 1) : NULL;
        lofp_qtensor r;
        memset(&r, 0, sizeof r);
        if (!again || lofp_qtensor_meta_format(&q, again, alen + 1) != alen || lofp_qtensor_meta_parse(again, &r, NULL) != LOFP_OK)
            bad = "format -> parse failed";
        else if (r.ndim != q.ndim || memcmp(r.shape, q.shape, q.ndim * sizeof(size_t)) != 0 ||
                 r.kp != q.kp || r.layout != q.layout || r.scheme.block != q.scheme.block || r.scheme.id != q.scheme.id ||
                 r.scheme.rounding != q.scheme.rounding || r.scheme.scale_rule != q.scheme.scale_rule ||
                 r.scheme.two_level != q.scheme.two_level || r.scheme.rotate != q.scheme.rotate ||
                 r.scheme.hadamard != q.scheme.hadamard || r.scheme.seed != q.scheme.seed || r.pad_byte != q.pad_byte ||
                 r.src_dtype != q.src_dtype || r.scheme.profile != q.scheme.profile)
            bad = "format -> parse changed the description";
        free(again);
        if (!bad && q.rows * q.k <= (1u << 20)) {
            float *out = malloc(q.rows * q.k * sizeof(float));
            if (out) (void)lofp_qtensor_dequantize(&q, out);   /* may refuse odd pad bytes; must not crash */
            free(out);
        }
    }
    lofp_file_close(f);
    free(file);
out:
    for (int i = 0; i < 3; i++) free(buf[i]);
    free(value);
    return bad;
}

#endif
