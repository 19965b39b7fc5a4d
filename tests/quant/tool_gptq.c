/* tool_gptq.c -- lofp_gptq_tool: a helper executable (not a ctest) for the numpy GPTQ oracle
 * (tests/quant/gptq_oracle.py). It runs lofp_gptq_prepare and lofp_gptq_quantize_rows on raw
 * little-endian files and writes what they computed.
 *
 *   lofp_gptq_tool SCHEME ROWS K ACT_ORDER LAZY DAMP W.f32 H.f32 OUT
 *       W: ROWS*K fp32, H: K*K fp32. Writes OUT.codes, OUT.scales (linear), OUT.u (K*K fp32,
 *       the factor), OUT.perm (K uint32) and OUT.global (one fp32: the NVFP4 multiplier of W,
 *       lofp_nvfp4_global_scale; 1 for other schemes). Runs on 2 threads.
 * Exit status 0 on success, 1 when a library call fails (its status is printed), 2 on bad usage
 * or I/O errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lofp/method.h"

static int read_exact(const char *path, void *buf, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); return 0; }
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    if (got != n) { fprintf(stderr, "%s: expected %zu bytes\n", path, n); return 0; }
    return 1;
}

static int write_file(const char *prefix, const char *ext, const void *buf, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s.%s", prefix, ext);
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); return 0; }
    int ok = fwrite(buf, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

int main(int argc, char **argv)
{
    if (argc != 10) {
        fprintf(stderr, "usage: lofp_gptq_tool SCHEME ROWS K ACT_ORDER LAZY DAMP W.f32 H.f32 OUT\n");
        return 2;
    }
    lofp_scheme s;
    if (lofp_scheme_preset(argv[1], &s) != LOFP_OK) { fprintf(stderr, "unknown scheme\n"); return 2; }
    s.threads = 2;
    size_t rows = strtoull(argv[2], NULL, 10), k = strtoull(argv[3], NULL, 10);
    lofp_gptq_options o;
    lofp_gptq_options_init(&o);
    o.act_order = atoi(argv[4]);
    o.lazy_block = (uint32_t)strtoul(argv[5], NULL, 10);
    o.damp = strtod(argv[6], NULL);
    o.threads = 2;
    float *w = malloc(rows * k * sizeof(float)), *h = malloc(k * k * sizeof(float));
    lofp_gptq_factor f = { k, malloc(k * k * sizeof(float)), malloc(k * sizeof(uint32_t)),
                           malloc(k), malloc(k * sizeof(float)) };
    size_t cb = lofp_codes_bytes(&s, rows, k), sb = lofp_scales_bytes(&s, rows, k);
    uint8_t *codes = malloc(cb ? cb : 1), *scales = malloc(sb ? sb : 1);
    if (!w || !h || !f.u || !f.perm || !f.dead || !f.hdiag || !codes || !scales) return 2;
    if (!read_exact(argv[7], w, rows * k * sizeof(float)) || !read_exact(argv[8], h, k * k * sizeof(float)))
        return 2;
    float g = s.id == LOFP_SCHEME_NVFP4 ? lofp_nvfp4_global_scale(LOFP_DTYPE_F32, w, rows * k) : 1.0f;
    lofp_status st = lofp_gptq_prepare(h, k, &o, &f);
    if (st == LOFP_OK) st = lofp_gptq_quantize_rows(&s, LOFP_DTYPE_F32, w, 0, rows, k, g, &f, &o, codes, scales, NULL);
    int rc = 0;
    if (st != LOFP_OK) {
        printf("status %s\n", lofp_status_name(st));
        rc = 1;
    } else if (!write_file(argv[9], "codes", codes, cb) || !write_file(argv[9], "scales", scales, sb) ||
               !write_file(argv[9], "u", f.u, k * k * sizeof(float)) ||
               !write_file(argv[9], "perm", f.perm, k * sizeof(uint32_t)) ||
               !write_file(argv[9], "global", &g, sizeof g)) {
        rc = 2;
    }
    free(w); free(h); free(f.u); free(f.perm); free(f.dead); free(f.hdiag); free(codes); free(scales);
    return rc;
}
