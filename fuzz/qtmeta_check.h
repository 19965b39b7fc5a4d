/* qtmeta_check.h -- the property the `lofp:` metadata fuzzer checks (fuzz/fuzz_qtmeta.c) and
 * tests/cli/test_qtmeta_corpus.c replays: random metadata on valid files never crashes the CLI's
 * interpreter (cli/qtensor.c) nor what runs after it.
 *
 * Input: byte 0 picks how the file's tensors are made, the rest (up to a NUL) is the value of the
 * "lofp:w" metadata entry.
 *   mode 0-3: fixed, valid tensors of a [4, 64] tensor quantized with nvfp4 / mxfp4 / mxfp8-e4m3 /
 *             ultraquant (linear scales);
 *   mode 4+:  when the metadata parses, tensors of exactly the dtypes, shapes and sizes it implies
 *             (layouts included; skipped when over 1 MiB), filled from the input bytes;
 * then qt_load, and when that succeeds: the format -> parse round trip gives the same tensor
 * description, and the tensor is dequantized (through its layout's linear scales). */
#ifndef LOFP_QTMETA_CHECK_H
#define LOFP_QTMETA_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lofp/io.h"
#include "qtensor.h"

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
    size_t shp[3][QT_MAX_DIMS];
    uint8_t *buf[3] = {NULL, NULL, NULL};
    size_t nt = 0;
    const char *bad = NULL;
    qtensor p;
    char msg[512];
    memset(&p, 0, sizeof p);
    if (mode < 4) {
        lofp_scheme s;
        lofp_scheme_preset(base_scheme[mode], &s);
        p.s = s;
        p.layout = LOFP_LAYOUT_LINEAR;
        p.ndim = 2;
        p.shape[0] = 4;
        p.shape[1] = 64;
        p.rows = 4;
        p.k = p.kp = 64;
    } else if (qt_meta_parse(value, &p, msg, sizeof msg) != LOFP_OK) {
        free(value);
        return NULL;
    }
    /* the tensors this description implies */
    size_t cb = lofp_codes_bytes(&p.s, p.rows, p.k);
    size_t sb = lofp_layout_required_bytes(p.rows, p.kp, p.s.block, p.layout);
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
    t[0] = (lofp_tensor_desc){"w.codes", qt_codes_dtype(&p.s), qt_codes_shape(&p, shp[0]), shp[0], buf[0], cb};
    t[1] = (lofp_tensor_desc){"w.scales", qt_scales_dtype(&p.s, p.layout), qt_scales_shape(&p, p.layout, shp[1]), shp[1], buf[1], sb};
    t[2] = (lofp_tensor_desc){"w.global_scale", LOFP_IO_F32, 0, shp[2], buf[2], 4};
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
    qtensor q;
    if (qt_load(f, "fuzz.safetensors", "w", &q, msg, sizeof msg) == LOFP_OK) {
        /* what the interpreter accepted formats and parses back to the same description */
        char *again = qt_meta_format(&q);
        qtensor r;
        memset(&r, 0, sizeof r);
        if (!again || qt_meta_parse(again, &r, msg, sizeof msg) != LOFP_OK) bad = "format -> parse failed";
        else if (r.ndim != q.ndim || memcmp(r.shape, q.shape, q.ndim * sizeof(size_t)) != 0 ||
                 r.kp != q.kp || r.layout != q.layout || r.s.block != q.s.block || r.s.id != q.s.id ||
                 r.s.rounding != q.s.rounding || r.s.scale_rule != q.s.scale_rule ||
                 r.s.two_level != q.s.two_level || r.s.rotate != q.s.rotate ||
                 r.s.hadamard != q.s.hadamard || r.s.seed != q.s.seed || r.pad_byte != q.pad_byte ||
                 r.src_dtype != q.src_dtype || r.s.profile != q.s.profile)
            bad = "format -> parse changed the description";
        free(again);
        if (!bad && q.rows * q.k <= (1u << 20)) {
            float *out = malloc(q.rows * q.k * sizeof(float));
            if (out) (void)qt_dequantize(&q, out);   /* may refuse odd pad bytes; must not crash */
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
