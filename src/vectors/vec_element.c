/* vec_element.c -- element cases: for every element type, the fp32 inputs where a codec can go
 * wrong (every representable value, every midpoint between neighbours and the fp32 values one
 * ulp either side of it, zeros, max, the first value past max and the overflow midpoint, the
 * smallest subnormal's half, fp32 subnormals, NaN, Inf), encoded under each rounding mode and
 * overflow policy. Stochastic rounding is enumerated at the midpoints (the smallest subnormal's
 * half among them) and their neighbours only, with the two random words either side of the
 * half-way threshold 2^31, which pins the exact comparison rule. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "vec_internal.h"

typedef struct input {
    uint32_t bits;
    const char *cls; /* why the input is in the set: what the reader looks for when it fails */
} input;

typedef struct input_set {
    input v[4096];
    size_t n;
} input_set;

static void add(input_set *s, float x, const char *cls)
{
    uint32_t u = lofp_f32_bits(x);
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].bits == u) return; /* the first reason given is kept */
    if (s->n < sizeof s->v / sizeof s->v[0]) s->v[s->n++] = (input){ u, cls };
}

static void add_bits(input_set *s, uint32_t u, const char *cls) { add(s, lofp_bits_f32(u), cls); }

/* Adds x, and -x for a signed type. */
static void add_signed(input_set *s, float x, const char *cls, int is_signed)
{
    add(s, x, cls);
    if (is_signed) add(s, -x, cls);
}

static const lofp_elem kElems[] = { LOFP_ELEM_E2M1, LOFP_ELEM_E2M3, LOFP_ELEM_E3M2, LOFP_ELEM_E4M3,
                                    LOFP_ELEM_E5M2, LOFP_ELEM_E8M0, LOFP_ELEM_UE4M3, LOFP_ELEM_MXINT8 };

static void build_inputs(lofp_elem t, input_set *s)
{
    const lofp_elem_info *info = lofp_elem_info_get(t);
    int sg = info->is_signed;
    /* The non-negative representable values in increasing order: codes 0..max_code decode
     * monotonically for every type here (MXINT8's are the non-negative int8 values). */
    float vals[256];
    size_t nv = 0;
    for (uint32_t c = 0; c <= info->max_code && nv < 256; c++) {
        float v = lofp_decode(t, c);
        if (!isnan(v)) vals[nv++] = v;
    }
    s->n = 0;
    add(s, 0.0f, "zero");
    add(s, -0.0f, "zero");
    add_bits(s, 0x7f800000u, "inf");
    add_bits(s, 0xff800000u, "inf");
    add_bits(s, 0x7fc00000u, "nan");
    add_bits(s, 0xffc00000u, "nan");
    add_bits(s, 0x7f800001u, "nan");
    /* Before the midpoints, whose first one it also is: the class names the sharper reason. */
    float smin = vals[0] > 0.0f ? vals[0] : vals[1];
    add_signed(s, smin / 2.0f, "half-min-subnormal", sg);
    add_signed(s, nextafterf(smin / 2.0f, 0.0f), "below-half-min-subnormal", sg);
    add_signed(s, nextafterf(smin / 2.0f, INFINITY), "above-half-min-subnormal", sg);
    for (size_t i = 0; i < nv; i++) add_signed(s, vals[i], "value", sg);
    for (size_t i = 0; i + 1 < nv; i++) {
        /* The midpoint of two neighbours is exact in fp32 (their significands are short). */
        float m = (float)(((double)vals[i] + (double)vals[i + 1]) / 2.0);
        add_signed(s, m, "midpoint", sg);
        add_signed(s, nextafterf(m, 0.0f), "below-midpoint", sg);
        add_signed(s, nextafterf(m, INFINITY), "above-midpoint", sg);
    }
    float mx = vals[nv - 1], prev = vals[nv - 2];
    float om = (float)((double)mx + ((double)mx - (double)prev) / 2.0); /* overflow midpoint */
    add_signed(s, nextafterf(mx, INFINITY), "above-max", sg);
    add_signed(s, om, "overflow-midpoint", sg);
    add_signed(s, nextafterf(om, 0.0f), "below-overflow-midpoint", sg);
    add_signed(s, nextafterf(om, INFINITY), "above-overflow-midpoint", sg);
    if (t == LOFP_ELEM_E8M0) add(s, 1.5f * mx, "overflow-midpoint"); /* E8M0's spacing is geometric */
    add_signed(s, 2.0f * mx, "twice-max", sg);
    add_signed(s, FLT_MAX, "fp32-max", sg);
    add_signed(s, smin / 4.0f, "quarter-min-subnormal", sg);
    add_bits(s, 0x00000001u, "fp32-subnormal");
    add_bits(s, 0x80000001u, "fp32-subnormal");
    add_bits(s, 0x00400000u, "fp32-subnormal");
    add_bits(s, 0x00400001u, "fp32-subnormal");
    add_bits(s, 0x005fffffu, "fp32-subnormal");
    add_bits(s, 0x007fffffu, "fp32-subnormal");
    if (!sg) {
        add(s, -1.0f, "negative");
        add(s, -mx, "negative");
        add(s, -smin, "negative");
    }
}

static const char *ovf_name(lofp_overflow o) { return o == LOFP_SATURATE ? "saturate" : "ieee"; }

/* One line per input and overflow policy: the code under each deterministic rounding mode and,
 * at midpoints and their neighbours, under stochastic rounding with each random word. */
lofp_status lofp_vec_element(lofp_sbuf *b, size_t *count)
{
    static const lofp_rounding rnd[] = { LOFP_RNE, LOFP_TIES_TO_ZERO, LOFP_TIES_AWAY };
    static const lofp_overflow ovf[] = { LOFP_SATURATE, LOFP_IEEE };
    static const uint32_t srbits[] = { 0x7fffffffu, 0x80000000u };
    input_set *s = malloc(sizeof *s);
    if (!s) return LOFP_ERR_NOMEM;
    for (size_t e = 0; e < sizeof kElems / sizeof kElems[0]; e++) {
        lofp_elem t = kElems[e];
        const lofp_elem_info *info = lofp_elem_info_get(t);
        build_inputs(t, s);
        for (size_t o = 0; o < 2; o++)
            for (size_t i = 0; i < s->n; i++) {
                const input *in = &s->v[i];
                float x = lofp_bits_f32(in->bits);
                lofp_vec_printf(b, "{\"id\":\"%s/%s/%08x\",\"elem\":\"%s\",\"overflow\":\"%s\","
                                   "\"x\":\"0x%08x\",\"class\":\"%s\",\"codes\":{",
                                info->name, ovf_name(ovf[o]), in->bits, info->name, ovf_name(ovf[o]),
                                in->bits, in->cls);
                for (size_t r = 0; r < 3; r++)
                    lofp_vec_printf(b, "%s\"%s\":\"0x%02x\"", r ? "," : "", lofp_rounding_name(rnd[r]),
                                    lofp_encode(t, x, rnd[r], ovf[o], 0));
                lofp_sbuf_putc(b, '}');
                if (strstr(in->cls, "midpoint") != NULL || strstr(in->cls, "half-min") != NULL) {
                    lofp_sbuf_puts(b, ",\"stochastic\":{");
                    for (size_t k = 0; k < 2; k++)
                        lofp_vec_printf(b, "%s\"0x%08x\":\"0x%02x\"", k ? "," : "", srbits[k],
                                        lofp_encode(t, x, LOFP_STOCHASTIC, ovf[o], srbits[k]));
                    lofp_sbuf_putc(b, '}');
                }
                lofp_sbuf_puts(b, "}\n");
                (*count)++;
            }
    }
    free(s);
    return b->failed ? LOFP_ERR_NOMEM : LOFP_OK;
}
