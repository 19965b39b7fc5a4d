/* ck_profile.c -- `lofp convert --profile P`: which producer's numerics a quantizing convert uses
 * (lofp_ckpt_options.profile, docs/CHECKPOINTS.md "Profiles on convert"). A profile names the tool
 * whose output the file should equal, so it goes with the format that tool writes: ModelOpt's
 * with --to modelopt, llm-compressor's (compressed-tensors) with --to compressed-tensors, llama.cpp's
 * quantizer (ggml) with --to gguf. Mixing them would store one producer's per-tensor scale in the
 * other's direction, which neither tool writes, so such pairs are refused. */
#include "ck_internal.h"

#include <math.h>
#include <string.h>

static lofp_ckpt_format profile_format(lofp_profile p)
{
    switch (p) {
    case LOFP_PROFILE_MODELOPT: return LOFP_CKPT_MODELOPT;
    case LOFP_PROFILE_COMPRESSED_TENSORS: return LOFP_CKPT_COMPRESSED_TENSORS;
    case LOFP_PROFILE_GGML: return LOFP_CKPT_GGUF;
    default: return LOFP_CKPT_UNKNOWN;
    }
}

lofp_status lofp_ck_profile_scheme(const lofp_ckpt_options *o, lofp_ckpt_format to, lofp_scheme *s,
                                   lofp_io_error *err)
{
    const lofp_profile p = o->profile;
    if (p == LOFP_PROFILE_LOFP) return LOFP_OK;
    const char *pn = lofp_profile_name(p), *tn = lofp_ckpt_format_name(to);
    if (!pn) return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "convert: unknown profile %d", (int)p);
    if (!tn) tn = "?";
    if (p == LOFP_PROFILE_TORCHAO)
        return lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED,
                       "convert --profile torchao: torchao writes none of the checkpoint formats convert writes "
                       "(lofp quantize --profile torchao gives its tensors)");
    if (profile_format(p) != to)
        return lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED,
                       "convert --to %s --profile %s: the %s profile is the numerics of the tool that writes %s "
                       "checkpoints; use it with --to %s (or --profile lofp for --to %s)",
                       tn, pn, pn, lofp_ckpt_format_name(profile_format(p)), lofp_ckpt_format_name(profile_format(p)), tn);
    const char *sn = lofp_scheme_name(s->id);
    if (p == LOFP_PROFILE_COMPRESSED_TENSORS && s->id != LOFP_SCHEME_NVFP4)
        return lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED,
                       "convert --to compressed-tensors --profile compressed-tensors --scheme %s: lofp reproduces "
                       "compressed-tensors' NVFP4 only (preset NVFP4A16: strategy tensor_group, group_size 16, with "
                       "weight_global_scale); --profile lofp writes %s with lofp's rules",
                       sn ? sn : "?", sn ? sn : "?");
    if (p == LOFP_PROFILE_GGML && s->id == LOFP_SCHEME_NVFP4)
        s->two_level = 0; /* llama.cpp's quantizer writes NVFP4 with no per-tensor scale */
    s->profile = p;
    if (lofp_scheme_validate(s) != LOFP_OK)
        return lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "convert --to %s --profile %s: the %s profile has no scheme %s", tn, pn, pn,
                       sn ? sn : "?");
    return LOFP_OK;
}

float lofp_ck_amax(lofp_dtype dt, const void *x, size_t n, size_t *first_bad)
{
    float amax = 0.0f, buf[256];
    const size_t es = dt == LOFP_DTYPE_F32 ? 4 : 2;
    for (size_t i0 = 0; i0 < n; i0 += 256) {
        size_t m = n - i0 < 256 ? n - i0 : 256;
        lofp_dtype_to_f32(dt, (const unsigned char *)x + i0 * es, m, buf);
        for (size_t i = 0; i < m; i++) {
            if (!isfinite(buf[i])) {
                if (first_bad) *first_bad = i0 + i;
                return NAN;
            }
            if (fabsf(buf[i]) > amax) amax = fabsf(buf[i]);
        }
    }
    return amax;
}
