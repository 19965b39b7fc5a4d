/* tool_codec_dump.c -- lofp_codec_dump: a helper executable (not a ctest) for the third-party
 * comparison scripts (tests/core/mldtypes_compare.py). It runs the scalar element codecs over a file.
 *
 *   lofp_codec_dump encode TYPE IN.f32 OUT.u32 [ROUNDING [OVERFLOW]]
 *       reads little-endian fp32 values, writes one little-endian uint32 code per value
 *       (lofp_encode; ROUNDING rne|ties-to-zero|ties-away, default rne; OVERFLOW ieee|saturate,
 *       default ieee; stochastic rounding is not offered here)
 *   lofp_codec_dump decode TYPE IN.u32 OUT.f32
 *       reads little-endian uint32 codes, writes lofp_decode of each as fp32
 *
 * TYPE is any name lofp_elem_from_name accepts (e2m1, e2m3, e3m2, e4m3, e5m2, e8m0, ue4m3,
 * mxint8, bf16, fp16). Exit status 0 on success, 2 on bad usage or I/O errors.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lofp/lofp.h"

static void *read_all(const char *path, size_t *n_bytes)
{
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); return NULL; }
    size_t cap = 1 << 20, n = 0;
    unsigned char *buf = malloc(cap);
    for (;;) {
        if (!buf) { fclose(f); fprintf(stderr, "out of memory\n"); return NULL; }
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        cap *= 2;
        unsigned char *nb = realloc(buf, cap);
        if (!nb) free(buf);
        buf = nb;
    }
    int err = ferror(f);
    fclose(f);
    if (err) { perror(path); free(buf); return NULL; }
    *n_bytes = n;
    return buf;
}

static int write_all(const char *path, const void *data, size_t n_bytes)
{
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); return 0; }
    size_t w = fwrite(data, 1, n_bytes, f);
    int ok = (w == n_bytes) && fclose(f) == 0;
    if (w != n_bytes) fclose(f);
    if (!ok) perror(path);
    return ok;
}

/* Host is assumed little-endian (x86-64 / aarch64), as everywhere else in the test suite. */
static int usage(void)
{
    fprintf(stderr, "usage: lofp_codec_dump encode TYPE IN.f32 OUT.u32 [ROUNDING [OVERFLOW]]\n"
                    "       lofp_codec_dump decode TYPE IN.u32 OUT.f32\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 5) return usage();
    const int enc = strcmp(argv[1], "encode") == 0;
    if (!enc && strcmp(argv[1], "decode") != 0) return usage();
    lofp_elem t;
    if (lofp_elem_from_name(argv[2], &t) != LOFP_OK) {
        fprintf(stderr, "unknown element type '%s'\n", argv[2]);
        return 2;
    }
    lofp_rounding mode = LOFP_RNE;
    lofp_overflow ovf = LOFP_IEEE;
    if (enc && argc > 5) {
        if (lofp_rounding_from_name(argv[5], &mode) != LOFP_OK || mode == LOFP_STOCHASTIC) {
            fprintf(stderr, "bad rounding '%s'\n", argv[5]);
            return 2;
        }
    }
    if (enc && argc > 6) {
        if (strcmp(argv[6], "ieee") == 0) ovf = LOFP_IEEE;
        else if (strcmp(argv[6], "saturate") == 0) ovf = LOFP_SATURATE;
        else { fprintf(stderr, "bad overflow policy '%s'\n", argv[6]); return 2; }
    }
    size_t nb = 0;
    unsigned char *in = read_all(argv[3], &nb);
    if (!in) return 2;
    if (nb % 4) { fprintf(stderr, "%s: size not a multiple of 4\n", argv[3]); free(in); return 2; }
    size_t n = nb / 4;
    uint32_t *out = malloc(n ? n * 4 : 4);
    if (!out) { free(in); fprintf(stderr, "out of memory\n"); return 2; }
    for (size_t i = 0; i < n; i++) {
        uint32_t w;
        memcpy(&w, in + 4 * i, 4);
        if (enc) {
            float x;
            memcpy(&x, &w, 4);
            out[i] = lofp_encode(t, x, mode, ovf, 0);
        } else {
            float y = lofp_decode(t, w);
            memcpy(&out[i], &y, 4);
        }
    }
    int ok = write_all(argv[4], out, n * 4);
    free(in);
    free(out);
    return ok ? 0 : 2;
}
