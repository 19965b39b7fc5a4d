/* gemm_internal.h -- what the GEMM driver (gemm.c), the packer (gemm_pack.c), the portable
 * kernels (gemm_generic.c) and the ISA kernels (x86/gemm_*_avx2.c) share.
 *
 * A call is turned into a gemm_plan: the weights resolved to one of a few "kinds", the
 * activations prepared once (converted to fp32, or quantized to int8 with per-16 scales and the
 * sums the unsigned-weight trick needs), the epilogue factor. Kernels then only read the plan
 * and write C for a rectangle of it. docs/GEMM.md describes every kernel's arithmetic. */
#ifndef LOFP_GEMM_INTERNAL_H
#define LOFP_GEMM_INTERNAL_H

#include "lofp/gemm.h"
#include "core/core.h"

/* Weight kinds with dedicated kernels. Everything else is GEMM_W_ANY: decoded through the
 * plan's lookup tables by the fp32 kernels. */
enum {
    GEMM_W_E2M1_E8M0 = 0,  /* MXFP4, any granularity 32*n */
    GEMM_W_E2M1_UE4M3 = 1, /* NVFP4 (block 16) */
    GEMM_W_E4M3_E8M0 = 2,  /* MXFP8-E4M3 (and tilelang-mxfp8), rows layout only */
    GEMM_W_ANY = 3,
    GEMM_W_KINDS_ = 4
};

/* How the activations reach the kernels. */
enum {
    GEMM_A_F32 = 0, /* fp32 [m][kq], zero beyond k */
    GEMM_A_I8 = 1   /* int8 values [m][kq] with per-16 fp32 scales (E2M1 weights only) */
};

/* From this m on, the kernels switch from GEMV loops to GEMM tiling (the fp32 path to its
 * blocked kernel, rows weights to the x8 tile through an on-the-fly repack). A property of the
 * whole call, never of a thread's share, so results do not depend on the thread count. */
#define GEMM_BIG_M 8

/* The x8 layout (docs/GEMM.md): a flags header, then one group of 8 rows after another. */
#define GEMM_X8_ROWS 8
#define GEMM_X8_SB_BYTES 128 /* codes of one 32-element superblock of 8 rows */
#define GEMM_X8_FLAG_SPECIAL 1u /* the group holds a NaN scale: kernels take the exact path */

typedef struct gemm_x8_geom {
    size_t kq;          /* K of the layout: padded_k rounded up to 32 */
    size_t sbs;         /* superblocks per row: kq / 32 */
    uint32_t sblock;    /* elements per scale: 16 (NVFP4) or the MX block */
    size_t nsc;         /* scales per row in the layout: kq / sblock */
    size_t groups;      /* ceil(n / 8) */
    size_t header;      /* flag bytes, rounded up to 64 */
    size_t group_bytes; /* codes (kq * 4) + scales (nsc * 8), rounded up to 64 */
} gemm_x8_geom;

/* Fills *g for an [n, k] matrix of E2M1 scheme s; returns 0 when s cannot use x8 or on
 * overflow. */
LOFP_INTERNAL int lofp_gemm_x8_geom(const lofp_scheme *s, size_t n, size_t k, gemm_x8_geom *g);

typedef struct gemm_plan {
    /* --- weights --- */
    int wkind;
    lofp_weight_layout layout;
    const lofp_scheme *ws;
    size_t n;
    size_t kp;              /* padded K of B's scheme */
    size_t kq;              /* K the activations are prepared to: round_up(max(kp_a, kp), 32) */
    uint32_t wblock;        /* elements per weight scale (16 NVFP4, block otherwise) */
    const uint8_t *wcodes;  /* rows layout */
    const uint8_t *wscales; /* rows layout */
    size_t wrow_bytes;      /* rows layout: code bytes per row */
    size_t wnsc;            /* rows layout: scales per row */
    const uint8_t *wpacked; /* x8 layout: the buffer */
    gemm_x8_geom x8;
    float elut[256];        /* element code -> value (E2M1: the 16 nibbles) */
    float slut[256];        /* scale byte -> value (UltraQuant byte 0 -> 0) */

    /* --- activations --- */
    int amode;
    size_t m;
    const float *af;        /* GEMM_A_F32: [m][lda_f], elements >= k are zero up to kq */
    size_t lda_f;
    const int8_t *aq;       /* GEMM_A_I8: [m][kq] values (E2M1 as 2x, MXINT8 codes) */
    const float *as16;      /* [m][kq/16]: scale of each 16 (for doubled E2M1 weights: / 2) */
    const int32_t *acorr16; /* [m][kq/16]: 12 * sum of the 16 values of aq; when halves is 1,
                               entry 2b holds the whole 32's and entry 2b+1 is 0 (one load) */
    int halves;             /* 1: one scale per 32 on both sides (one term per superblock) */

    /* --- output --- */
    float *c;
    size_t ldc;
    double epi;             /* 1 / (NVFP4 globals); exactly 1.0 when there is none */
} gemm_plan;

/* Kernels write C[i][j] for i in [i0, i1), j in [j0, j1) (row and group boundaries are
 * multiples of 8 except at n). One table per ISA, pre-filled from the generic one; a NULL entry
 * for a weight kind means "use the generic kernel". */
typedef void (*gemm_kernel_fn)(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1);

typedef struct gemm_kernels {
    const char *isa;
    gemm_kernel_fn i8_x8[GEMM_W_KINDS_];   /* integer dots on x8 weights, any m */
    gemm_kernel_fn i8_rows[GEMM_W_KINDS_]; /* integer dots on rows weights, any m */
    gemm_kernel_fn f32_x8[GEMM_W_KINDS_];  /* fp32 dots on x8 weights, small m (GEMV) */
    gemm_kernel_fn f32_rows[GEMM_W_KINDS_];/* fp32 dots on rows weights, small m (GEMV) */
    gemm_kernel_fn f32_gemm;               /* fp32 blocked GEMM for large m, any weights */
    /* The fp32 GEMM's panel decoder (panel[kk * 16 + r] = weight row js + r, element k0 + kk,
     * times its scale; exact): set by the AVX2 table, used by the 512-bit GEMM on top of it. */
    void (*f32_decode_panel)(const gemm_plan *p, size_t js, unsigned nr, size_t k0, size_t kc, float *panel);
    /* Quantizes rows [0, m) of dense A to MXINT8 (block 32*n, FLOOR, RNE) as lofp_quantize
     * would, writing the int8 plan arrays directly; returns 0, or the flat index + 1 of the
     * first non-finite input. */
    size_t (*quant_mxint8)(lofp_dtype dt, const void *a, size_t lda, size_t m, size_t k,
                           size_t kq, uint32_t block, int halves, int8_t *q, float *s16,
                           int32_t *corr16);
} gemm_kernels;

LOFP_INTERNAL void lofp_gemm_kernels_generic(gemm_kernels *k);
LOFP_INTERNAL void lofp_gemm_kernels_avx2_i8(gemm_kernels *k);  /* x86/gemm_i8_avx2.c */
LOFP_INTERNAL void lofp_gemm_kernels_avx2_f32(gemm_kernels *k); /* x86/gemm_f32_avx2.c */
LOFP_INTERNAL void lofp_gemm_kernels_avx512_i8(gemm_kernels *k); /* x86/gemm_i8_avx512.c (on top of avx2) */
LOFP_INTERNAL void lofp_gemm_kernels_avx512_f32(gemm_kernels *k); /* x86/gemm_f32_avx512.c (on top of avx2) */

/* Which kernel table lofp_gemm uses. AUTO resolves once from lofp_cpu_features(). Tests and the
 * benchmark run the other tables side by side through lofp_gemm_isa(). */
typedef enum {
    LOFP_GEMM_ISA_AUTO = 0,
    LOFP_GEMM_ISA_GENERIC = 1,
    LOFP_GEMM_ISA_AVX2 = 2,
    LOFP_GEMM_ISA_AVX512 = 3 /* the AVX2 table with the integer kernels at 512 bits (VNNI) */
} lofp_gemm_isa_t;

/* 1 when the table of `isa` can run on this CPU (after LOFP_DISABLE_CPU_FEATURES). */
LOFP_INTERNAL int lofp_gemm_isa_available(lofp_gemm_isa_t isa);
/* lofp_gemm with an explicit table; LOFP_ERR_UNSUPPORTED when it cannot run here. */
LOFP_INTERNAL lofp_status lofp_gemm_isa(const lofp_gemm_args *args, lofp_gemm_isa_t isa);
/* lofp_gemm_kernel_name for an explicit table. */
LOFP_INTERNAL const char *lofp_gemm_isa_kernel_name(const lofp_gemm_args *args, lofp_gemm_isa_t isa);

/* Portable kernels the ISA kernels fall back to for groups or rows with special scales. */
LOFP_INTERNAL void lofp_gemm_generic_i8_x8(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1);
LOFP_INTERNAL void lofp_gemm_generic_i8_rows(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1);
LOFP_INTERNAL void lofp_gemm_generic_f32_x8(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1);
LOFP_INTERNAL void lofp_gemm_generic_f32_rows(const gemm_plan *p, size_t i0, size_t i1, size_t j0, size_t j1);

/* Checks everything lofp_gemm and lofp_gemm_ref check (sizes, pointers, schemes, shapes,
 * globals); LOFP_OK or the error lofp_gemm returns. */
LOFP_INTERNAL lofp_status lofp_gemm_validate(const lofp_gemm_args *args);

/* Decode tables of a scheme: elut[code] (E2M1: 16 nibbles, else 256 bytes) and slut[byte]
 * (UltraQuant byte 0 = 0). code * scale is exact in fp32 for every scheme lofp knows. */
LOFP_INTERNAL void lofp_gemm_luts(const lofp_scheme *s, float elut[256], float slut[256]);

/* Writes one result: C = acc, or acc * epi rounded once to fp32 when there is an NVFP4 global. */
static inline void lofp_gemm_store(const gemm_plan *p, size_t i, size_t j, float acc)
{
    p->c[i * p->ldc + j] = p->epi == 1.0 ? acc : (float)((double)acc * p->epi);
}

/* Value of E2M1 code c doubled (an integer in [-12, 12]): the integer kernels' weight table. */
static inline int lofp_e2m1_x2(unsigned c)
{
    static const int8_t t[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };
    return t[c & 15];
}

/* Code of element e of row r of group g in an x8 buffer (the layout's one definition). */
static inline unsigned lofp_x8_code(const gemm_x8_geom *x, const uint8_t *buf, size_t g,
                                    unsigned r, size_t e)
{
    size_t sb = e >> 5, w = e & 31, c = (w & 15) >> 2, i = w & 3;
    uint8_t b = buf[x->header + g * x->group_bytes + sb * GEMM_X8_SB_BYTES + c * 32 + r * 4 + i];
    return w < 16 ? (b & 15u) : (unsigned)(b >> 4);
}

/* Scale byte j of row r of group g in an x8 buffer. */
static inline uint8_t lofp_x8_scale(const gemm_x8_geom *x, const uint8_t *buf, size_t g,
                                    unsigned r, size_t j)
{
    return buf[x->header + g * x->group_bytes + x->kq * 4 + j * GEMM_X8_ROWS + r];
}

/* Fork/join: cuts the work into nparts = lofp_parallel_tasks(nthreads, units) parts and runs
 * fn(ctx, t, nparts) for every t in [0, nparts) on up to nthreads threads (the caller taking
 * part). Every part runs exactly once, so the result never depends on how many threads really
 * ran. */
LOFP_INTERNAL void lofp_gemm_parallel(unsigned nthreads, size_t units,
                                      void (*fn)(void *ctx, unsigned t, unsigned nt), void *ctx);

#endif
