/* scheme.c -- scheme presets, names, validation and size helpers. */
#include "traits.h"

lofp_status lofp_scheme_init(lofp_scheme *s, lofp_scheme_id id)
{
    if (!s || (int)id <= 0 || id >= LOFP_SCHEME_COUNT_) return LOFP_ERR_INVALID_ARG;
    *s = lofp_scheme_traits[id].defaults;
    return LOFP_OK;
}

lofp_status lofp_scheme_preset(const char *name, lofp_scheme *s)
{
    if (!name || !s) return LOFP_ERR_INVALID_ARG;
    for (int id = 1; id < LOFP_SCHEME_COUNT_; id++)
        if (strcmp(name, lofp_scheme_traits[id].name) == 0) return lofp_scheme_init(s, (lofp_scheme_id)id);
    return LOFP_ERR_NOT_FOUND;
}

const char *lofp_scheme_name(lofp_scheme_id id)
{
    if ((int)id <= 0 || id >= LOFP_SCHEME_COUNT_) return NULL;
    return lofp_scheme_traits[id].name;
}

static const char *const rounding_names[] = { "rne", "ties-to-zero", "ties-away", "stochastic" };
static const char *const rule_names[] = { "floor", "ceil", "even", "rceil", "ue4m3", "uq-round" };

#define NAME_OF(tab, v) ((unsigned)(v) < sizeof tab / sizeof tab[0] ? tab[v] : NULL)

static lofp_status index_of(const char *const *tab, size_t n, const char *name, int *out)
{
    if (!name || !out) return LOFP_ERR_INVALID_ARG;
    for (size_t i = 0; i < n; i++)
        if (strcmp(tab[i], name) == 0) { *out = (int)i; return LOFP_OK; }
    return LOFP_ERR_NOT_FOUND;
}

const char *lofp_rounding_name(lofp_rounding r) { return NAME_OF(rounding_names, r); }
const char *lofp_scale_rule_name(lofp_scale_rule r) { return NAME_OF(rule_names, r); }

lofp_status lofp_rounding_from_name(const char *name, lofp_rounding *out)
{
    int i = 0;
    lofp_status st = index_of(rounding_names, 4, name, &i);
    if (st == LOFP_OK) *out = (lofp_rounding)i;
    return st;
}

lofp_status lofp_scale_rule_from_name(const char *name, lofp_scale_rule *out)
{
    int i = 0;
    lofp_status st = index_of(rule_names, 6, name, &i);
    if (st == LOFP_OK) *out = (lofp_scale_rule)i;
    return st;
}

static const char *const profile_names[] = { "lofp", "modelopt", "compressed-tensors", "torchao", "ggml" };

const char *lofp_profile_name(lofp_profile p) { return NAME_OF(profile_names, p); }

lofp_status lofp_profile_from_name(const char *name, lofp_profile *out)
{
    int i = 0;
    if (name && out && strcmp(name, "ct") == 0) name = "compressed-tensors";
    if (name && out && strcmp(name, "gguf") == 0) name = "ggml";
    lofp_status st = index_of(profile_names, LOFP_PROFILE_COUNT_, name, &i);
    if (st == LOFP_OK) *out = (lofp_profile)i;
    return st;
}

int lofp_profile_decode_direction(lofp_profile p)
{
    return p == LOFP_PROFILE_MODELOPT || p == LOFP_PROFILE_TORCHAO;
}

/* Which schemes each producer writes (docs/CHECKPOINTS.md, profiles). */
static int profile_supports(const lofp_scheme *s)
{
    switch (s->profile) {
    case LOFP_PROFILE_LOFP:
        return 1;
    case LOFP_PROFILE_MODELOPT:
        return (s->id == LOFP_SCHEME_NVFP4 && s->two_level) ||
               ((s->id == LOFP_SCHEME_MXFP4 || s->id == LOFP_SCHEME_MXFP8_E4M3) && s->block == 32);
    case LOFP_PROFILE_COMPRESSED_TENSORS:
        return s->id == LOFP_SCHEME_NVFP4 && s->two_level;
    case LOFP_PROFILE_TORCHAO:
        return s->id == LOFP_SCHEME_NVFP4 || s->id == LOFP_SCHEME_MXFP4 ||
               s->id == LOFP_SCHEME_MXFP6_E2M3 || s->id == LOFP_SCHEME_MXFP6_E3M2 ||
               s->id == LOFP_SCHEME_MXFP8_E4M3 || s->id == LOFP_SCHEME_MXFP8_E5M2;
    case LOFP_PROFILE_GGML:
        return (s->id == LOFP_SCHEME_MXFP4 && s->block == 32) ||
               (s->id == LOFP_SCHEME_NVFP4 && !s->two_level); /* llama.cpp's own NVFP4 */
    default:
        return 0;
    }
}

lofp_status lofp_scheme_validate(const lofp_scheme *s)
{
    if (!s || (int)s->id <= 0 || s->id >= LOFP_SCHEME_COUNT_) return LOFP_ERR_INVALID_ARG;
    const lofp_scheme_traits_t *st = &lofp_scheme_traits[s->id];
    const lofp_scheme *d = &st->defaults;
    if (s->elem != d->elem || s->scale_elem != d->scale_elem) return LOFP_ERR_INVALID_ARG;
    if ((unsigned)s->rounding > LOFP_STOCHASTIC) return LOFP_ERR_INVALID_ARG;
    if (s->block == 0 || s->block % st->native_block != 0) return LOFP_ERR_INVALID_ARG;
    if (st->is_mx) {
        if ((unsigned)s->scale_rule > LOFP_SCALE_RCEIL) return LOFP_ERR_INVALID_ARG;
    } else if (s->scale_rule != d->scale_rule || s->block != d->block) {
        return LOFP_ERR_INVALID_ARG; /* NVFP4 is 16/UE4M3, UltraQuant 32/its snap */
    }
    if (s->id == LOFP_SCHEME_ULTRAQUANT && !(s->c > 0.0f && s->c < 1e30f)) return LOFP_ERR_INVALID_ARG;
    if (!(s->amax_floor >= 0.0f && s->amax_floor < 1e30f)) return LOFP_ERR_INVALID_ARG;
    if ((unsigned)s->hadamard > LOFP_HADAMARD_DENSE) return LOFP_ERR_INVALID_ARG;
    if (!profile_supports(s)) return LOFP_ERR_INVALID_ARG;
    return LOFP_OK;
}

size_t lofp_padded_k(const lofp_scheme *s, size_t k)
{
    if (k == 0 || lofp_scheme_validate(s) != LOFP_OK) return 0;
    size_t r = k % s->block;
    if (r == 0) return k;
    if (!s->pad) return 0;
    size_t p;
    return lofp_add_size(k, s->block - r, &p) ? p : 0;
}

size_t lofp_codes_bytes(const lofp_scheme *s, size_t rows, size_t k)
{
    size_t kp = lofp_padded_k(s, k), n;
    if (!kp || !lofp_mul_size(rows, kp, &n)) return 0;
    return s->elem == LOFP_ELEM_E2M1 ? n / 2 : n; /* blocks are even, so n is even for FP4 */
}

size_t lofp_scales_bytes(const lofp_scheme *s, size_t rows, size_t k)
{
    size_t kp = lofp_padded_k(s, k), n;
    if (!kp || !lofp_mul_size(rows, kp / s->block, &n)) return 0;
    return n;
}
