/* verify.c -- lofp_verify_tensor: which producer, scale direction, scale layout, nibble order and
 * row offset reproduce a stored quantized tensor from its original (lofp/cast.h). Every candidate
 * is computed, never assumed: the original is re-quantized under each profile, and the stored
 * bytes are compared with the candidate under each way of storing it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/core.h"
#include "lofp/cast.h"

typedef struct {
    lofp_profile profile;
    lofp_scale_rule rule;
    uint8_t *codes, *scales;
    float global;
} candidate;

static uint8_t swap_nibbles(uint8_t b) { return (uint8_t)((b << 4) | (b >> 4)); }

/* The stored codes under a nibble hypothesis, as standard-order bytes (NULL on failure). */
static void codes_as_standard(const uint8_t *stored, size_t rows, size_t k, uint32_t block,
                              lofp_verify_nibbles nib, uint8_t *out)
{
    size_t n = rows * k / 2;
    if (nib == LOFP_VERIFY_NIBBLES_SWAPPED) {
        for (size_t i = 0; i < n; i++) out[i] = swap_nibbles(stored[i]);
    } else if (nib == LOFP_VERIFY_NIBBLES_GGUF) {
        if (lofp_fp4_repack(stored, out, rows, k, block, LOFP_NIBBLE_GGUF, LOFP_NIBBLE_STANDARD) != LOFP_OK)
            memcpy(out, stored, n);
    } else {
        memcpy(out, stored, n);
    }
}

static size_t diff_rows(const uint8_t *a, const uint8_t *b, size_t rows, size_t rb, long shift)
{
    /* stored row r against candidate row r + shift, over the rows both have */
    size_t d = 0;
    for (size_t r = 0; r < rows; r++) {
        long c = (long)r + shift;
        if (c < 0 || (size_t)c >= rows) continue;
        const uint8_t *x = a + r * rb, *y = b + (size_t)c * rb;
        for (size_t j = 0; j < rb; j++) d += x[j] != y[j];
    }
    return d;
}

lofp_status lofp_verify_tensor(lofp_scheme_id id, uint32_t block, lofp_dtype dt, const void *x,
                               size_t rows, size_t k, const uint8_t *codes, const uint8_t *scales,
                               const float *global, int global_decode, lofp_verify_result *res)
{
    if (!res || !x || !codes || !scales || !rows || !k) return LOFP_ERR_INVALID_ARG;
    memset(res, 0, sizeof *res);
    res->code_diff = res->scale_diff = (size_t)-1;
    lofp_scheme base;
    if (lofp_scheme_init(&base, id) != LOFP_OK) return LOFP_ERR_INVALID_ARG;
    if (block) base.block = block;
    const int nvfp4 = id == LOFP_SCHEME_NVFP4;
    if (nvfp4) base.two_level = global != NULL;
    size_t cb = lofp_codes_bytes(&base, rows, k), sb = lofp_scales_bytes(&base, rows, k);
    if (!cb || !sb) return LOFP_ERR_INVALID_ARG;
    const int fp4 = base.elem == LOFP_ELEM_E2M1;
    const size_t crb = cb / rows, srb = sb / rows, scols = srb;
    uint8_t *cand_c = malloc(cb), *cand_s = malloc(sb), *stc = malloc(cb);
    size_t swz_bytes = lofp_layout_required_bytes(rows, scols, 1, LOFP_LAYOUT_SWIZZLE_128X4);
    uint8_t *swz = malloc(swz_bytes ? swz_bytes : 1);
    if (!cand_c || !cand_s || !stc || !swz) { free(cand_c); free(cand_s); free(stc); free(swz); return LOFP_ERR_NOMEM; }
    size_t best_score = (size_t)-1;
    lofp_status last = LOFP_OK;
    for (int p = 0; p < LOFP_PROFILE_COUNT_; p++) {
        for (int rule = LOFP_SCALE_FLOOR; rule <= LOFP_SCALE_RCEIL; rule++) {
            lofp_scheme s = base;
            s.profile = (lofp_profile)p;
            int rule_matters = !nvfp4 && (p == LOFP_PROFILE_LOFP || p == LOFP_PROFILE_TORCHAO);
            if (rule_matters) s.scale_rule = (lofp_scale_rule)rule;
            else if (rule != LOFP_SCALE_FLOOR) continue;
            if (lofp_scheme_validate(&s) != LOFP_OK) continue;
            for (int gv = 0; gv < (nvfp4 && global ? 6 : 1); gv++) {
            /* gv >= 1: the stored per-tensor scale instead of this tensor's own (a fused group
             * shares one: q/k/v, gate/up, experts). Stored in the other direction it was written
             * as fl(1/g): every g within 2 ulps of fl(1/stored) whose reciprocal rounds to the
             * stored value is a candidate. */
            float g = 1.0f;
            lofp_status st;
            if (gv == 0) {
                st = lofp_quantize(&s, dt, x, rows, k, cand_c, cand_s, &g, NULL);
            } else {
                volatile float one = 1.0f;
                const int same = lofp_profile_decode_direction(s.profile) == global_decode;
                static const int off[5] = { 0, -1, 1, -2, 2 };
                if (same && gv > 1) continue;
                g = same ? *global : one / *global;
                if (gv > 1) {
                    g = lofp_bits_f32(lofp_f32_bits(g) + (uint32_t)off[gv - 1]);
                    float back = one / g;
                    if (lofp_f32_bits(back) != lofp_f32_bits(*global)) continue;
                }
                st = lofp_quantize_with_global(&s, dt, x, rows, k, g, cand_c, cand_s, NULL);
            }
            if (st != LOFP_OK) { last = st; continue; }
            for (int nib = 0; nib < (fp4 ? 3 : 1); nib++) {
                if (nib == LOFP_VERIFY_NIBBLES_GGUF && (k % base.block)) continue;
                if (fp4) codes_as_standard(codes, rows, k, base.block, (lofp_verify_nibbles)nib, stc);
                else memcpy(stc, codes, cb);
                for (int lay = 0; lay < 2; lay++) {
                    const uint8_t *ss = scales;
                    if (lay == 1) {
                        /* a buffer that holds the swizzled scales under a linear name: read its
                         * first rows * cols bytes back through the swizzle */
                        if (swz_bytes > sb) continue;
                        if (lofp_layout_to_linear(scales, rows, scols, LOFP_LAYOUT_SWIZZLE_128X4, swz) != LOFP_OK) continue;
                        ss = swz;
                    }
                    /* row shift: try 0 first, then the shift that aligns the first stored scale row */
                    long shifts[3] = { 0, 0, 0 };
                    int nsh = 1;
                    for (size_t r = 1; r < rows && nsh < 3; r++) {
                        if (memcmp(ss, cand_s + r * srb, srb) == 0 && memcmp(stc, cand_c + r * crb, crb) == 0) { shifts[nsh++] = (long)r; break; }
                    }
                    for (size_t r = 1; r < rows && nsh < 3; r++) {
                        if (memcmp(ss + r * srb, cand_s, srb) == 0 && memcmp(stc + r * crb, cand_c, crb) == 0) { shifts[nsh++] = -(long)r; break; }
                    }
                    for (int si = 0; si < nsh; si++) {
                        long sh = shifts[si];
                        size_t dc = diff_rows(stc, cand_c, rows, crb, sh);
                        size_t ds = diff_rows(ss, cand_s, rows, srb, sh);
                        int inverted = 0, gdiff = 0;
                        if (nvfp4 && global && gv == 0) {
                            /* the producer's value in the file's direction (an exporter writes
                             * fl(1/g) when the two differ: lofp's ModelOpt export) */
                            volatile float one = 1.0f;
                            float gi = one / g;
                            float want = lofp_profile_decode_direction(s.profile) == global_decode ? g : gi;
                            float other = lofp_profile_decode_direction(s.profile) == global_decode ? gi : g;
                            if (lofp_f32_bits(want) != lofp_f32_bits(*global)) {
                                float ratio = *global / other;
                                if (lofp_f32_bits(other) == lofp_f32_bits(*global) || (ratio > 0.999999f && ratio < 1.000001f)) inverted = 1;
                                else gdiff = 1;
                            }
                        }
                        /* score: differing bytes, then layout/nibble/shift/direction mistakes */
                        size_t score = ((dc + ds + (size_t)gdiff * 64) * 16 + (size_t)nib + (size_t)lay +
                                        (sh != 0) + (size_t)inverted + (size_t)(gv != 0)) * 65536 +
                                       (size_t)(sh < 0 ? -sh : sh);
                        if (dc == 0 && ds == 0 && !gdiff && nib == 0 && lay == 0 && sh == 0 && !inverted && gv == 0) {
                            /* every producer (and torchao rule) that writes exactly these bytes */
                            char one[48];
                            snprintf(one, sizeof one, "%s%s%s", lofp_profile_name(s.profile), rule_matters ? " " : "",
                                     rule_matters ? lofp_scale_rule_name(s.scale_rule) : "");
                            if (!strstr(res->producers, one) && strlen(res->producers) + strlen(one) + 3 < sizeof res->producers)
                                snprintf(res->producers + strlen(res->producers), sizeof res->producers - strlen(res->producers), "%s%s", res->producers[0] ? ", " : "", one);
                        }
                        if (score < best_score) {
                            best_score = score;
                            res->profile = s.profile;
                            res->rule = s.scale_rule;
                            res->nibbles = (lofp_verify_nibbles)nib;
                            res->scale_layout = lay ? LOFP_LAYOUT_SWIZZLE_128X4 : LOFP_LAYOUT_LINEAR;
                            res->global_inverted = inverted;
                            res->row_shift = sh;
                            res->code_diff = dc;
                            res->scale_diff = ds;
                            res->global_diff = gdiff;
                            res->global_as_stored = gv != 0;
                        }
                    }
                }
            }
            }
        }
    }
    free(cand_c); free(cand_s); free(stc); free(swz);
    if (best_score == (size_t)-1) return last != LOFP_OK ? last : LOFP_ERR_INVALID_ARG;
    res->matched = res->code_diff == 0 && res->scale_diff == 0 && !res->global_diff;
    const int clean = res->matched && res->nibbles == LOFP_VERIFY_NIBBLES_STANDARD &&
                      res->scale_layout == LOFP_LAYOUT_LINEAR && !res->global_inverted &&
                      res->row_shift == 0;
    char what[256] = "";
    size_t o = 0;
    if (res->nibbles == LOFP_VERIFY_NIBBLES_SWAPPED) o += (size_t)snprintf(what + o, sizeof what - o, "; nibbles swapped (element 2i in the high nibble)");
    if (res->nibbles == LOFP_VERIFY_NIBBLES_GGUF) o += (size_t)snprintf(what + o, sizeof what - o, "; codes in GGUF's split nibble order");
    if (res->scale_layout == LOFP_LAYOUT_SWIZZLE_128X4) o += (size_t)snprintf(what + o, sizeof what - o, "; scales are swizzle-128x4 stored as linear");
    if (res->global_inverted) o += (size_t)snprintf(what + o, sizeof what - o, "; per-tensor scale inverted (the %s value stored where the format reads the %s one)", global_decode ? "encode" : "decode", global_decode ? "decode" : "encode");
    if (res->row_shift) o += (size_t)snprintf(what + o, sizeof what - o, "; rows shifted by %ld (a shard or a fused part put at the wrong offset)", res->row_shift);
    const char *rule = !nvfp4 && (res->profile == LOFP_PROFILE_TORCHAO || res->profile == LOFP_PROFILE_LOFP) ? lofp_scale_rule_name(res->rule) : NULL;
    if (clean)
        snprintf(res->summary, sizeof res->summary, "reproduced bit for bit by: %s%s",
                 res->producers[0] ? res->producers : lofp_profile_name(res->profile),
                 res->global_as_stored ? " (with the stored per-tensor scale: shared by a fused group, not this tensor's own amax)" : "");
    else if (res->matched)
        snprintf(res->summary, sizeof res->summary, "%s%s%s numerics, but%s", lofp_profile_name(res->profile), rule ? " " : "", rule ? rule : "", what + 1);
    else
        snprintf(res->summary, sizeof res->summary, "no producer reproduces it (not round-to-nearest: a calibrated method such as GPTQ or MSE "
                 "writes such tensors, and so does a corrupted one); closest %s%s%s: %zu code bytes, %zu scale bytes%s differ%s",
                 lofp_profile_name(res->profile), rule ? " " : "", rule ? rule : "", res->code_diff, res->scale_diff,
                 res->global_diff ? " and the per-tensor scale" : "", what);
    return res->matched ? LOFP_OK : LOFP_ERR_MISMATCH;
}
