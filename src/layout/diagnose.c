/* diagnose.c -- name the layout, byte order and granularity a scale buffer was written in
 * (SPEC §3 "Layout diagnosis"; docs/LAYOUT.md describes the procedure and its ambiguities).
 *
 * The procedure renders the expected linear scales in every candidate encoding and compares each
 * rendering with the buffer byte for byte:
 *   granularities  `block` (the caller's scales), `alt_block` (the caller's alternative scales),
 *                  and 32 and 128 when they are coarser multiples of a granularity we have scales
 *                  for (derived: the scale byte of a coarse block is the max of the bytes of the
 *                  fine blocks it covers, which holds for every scale rule that is a monotone
 *                  function of the block amax and every scale type whose byte order is the order
 *                  of its values: E8M0, UE4M3, UltraQuant's E8M0-with-zero);
 *   layouts        linear, swizzle-128x4, packed-u32 TileLang and DeepGEMM, the packed ones in
 *                  both byte orders (LSB-first = correct, MSB-first = reversed) and both word
 *                  orders (group-major g*Ma+m = correct, row-major m*G+g).
 * Each candidate lands in a tier:
 *   0 exact       same size, every byte equal (padding = the layout's default pad byte);
 *   1 data-exact  same size, every scale byte equal, padding holds other values;
 *   2 prefix      every compared byte equal but the sizes differ (a truncated buffer, e.g. the
 *                 first G128*M words of a granularity-32 packing, or trailing extra bytes);
 *   3 mismatch    ranked by differing bytes + size difference.
 * Tiers 0-2 count as a match. Ties are broken towards the canonical reading: fewest failure
 * flags (reversed bytes, row-major words), then the caller's block, then alt_block, then derived
 * granularities, then layout order (linear, swizzle, TileLang, DeepGEMM). Every other candidate
 * in the winning tier with the same score is reported as an ambiguity.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

#define MAX_GRANS 4
#define MAX_CANDS (MAX_GRANS * 10)

typedef struct {
    uint32_t gran;
    size_t cols;
    const uint8_t *exp;  /* linear [rows, cols] */
    uint8_t *owned;      /* non-NULL when derived */
    int prio;            /* 0 block, 1 alt_block, 2 derived */
    uint32_t from_gran;  /* derived: the granularity it was derived from */
} gran_cand;

typedef struct {
    lofp_layout layout;
    int reversed, row_major;
    int gi;              /* index into the granularity table */
    size_t bytes;        /* size of this candidate's rendering */
    size_t unit;         /* 4 for packed layouts (words), 1 otherwise */
    size_t data_mis, pad_mis, pad_count, cmp;
    size_t units_total, units_match;
    int pad_uniform;     /* all padding bytes in the compared region hold one value */
    uint8_t pad_value;   /* that value (when pad_count > 0) */
    uint8_t pad_default;
    int tier;
    size_t score;
} cand;

/* ------------------------------------------------------------------------------------------ */

static size_t absdiff(size_t a, size_t b) { return a > b ? a - b : b - a; }

static int is_packed(lofp_layout l)
{
    return l == LOFP_LAYOUT_PACKED_U32 || l == LOFP_LAYOUT_PACKED_U32_DG;
}

/* Rendered size of a layout (0 with *ok = 0 on overflow). */
static int cand_size(size_t rows, size_t cols, lofp_layout l, size_t *out)
{
    *out = lofp_layout_required_bytes(rows, cols, 1, l);
    return *out != 0 || rows == 0 || cols == 0;
}

/* Renders expected scales [rows, cols] in layout l (with the failure flags) into val[], marking
 * padding bytes in pad[] (1 = padding). val/pad hold `bytes` bytes. */
static void render(const uint8_t *e, size_t rows, size_t cols, lofp_layout l, int reversed,
                   int row_major, uint8_t pad_default, uint8_t *val, uint8_t *pad, size_t bytes)
{
    if (l == LOFP_LAYOUT_LINEAR) {
        memcpy(val, e, bytes);
        memset(pad, 0, bytes);
        return;
    }
    if (l == LOFP_LAYOUT_SWIZZLE_128X4) {
        memset(val, 0, bytes);
        memset(pad, 1, bytes);
        for (size_t r = 0; r < rows; r++) {
            for (size_t c = 0; c < cols; c++) {
                size_t o = lofp_swizzle128x4_offset(r, c, cols);
                val[o] = e[r * cols + c];
                pad[o] = 0;
            }
        }
        return;
    }
    const size_t ma = (l == LOFP_LAYOUT_PACKED_U32_DG) ? (rows + 3) / 4 * 4 : rows;
    const size_t groups = lofp_ceil_div(cols, 4);
    for (size_t m = 0; m < ma; m++) {
        for (size_t g = 0; g < groups; g++) {
            size_t w = row_major ? m * groups + g : g * ma + m;
            for (size_t i = 0; i < 4; i++) {
                size_t c = 4 * g + i;
                size_t o = w * 4 + (reversed ? 3 - i : i);
                int is_pad = !(m < rows && c < cols);
                val[o] = is_pad ? pad_default : e[m * cols + c];
                pad[o] = (uint8_t)is_pad;
            }
        }
    }
}

static void compare(const uint8_t *buf, size_t buf_bytes, const uint8_t *val, const uint8_t *pad,
                    cand *cd)
{
    size_t n = cd->bytes < buf_bytes ? cd->bytes : buf_bytes;
    cd->cmp = n;
    cd->data_mis = cd->pad_mis = cd->pad_count = cd->units_match = 0;
    cd->pad_uniform = 1;
    cd->units_total = cd->bytes / cd->unit;
    int have_pad = 0;
    for (size_t u = 0; u + cd->unit <= n; u += cd->unit) {
        int ok = 1;
        for (size_t i = u; i < u + cd->unit; i++) {
            if (pad[i]) {
                cd->pad_count++;
                if (!have_pad) { cd->pad_value = buf[i]; have_pad = 1; }
                else if (buf[i] != cd->pad_value) cd->pad_uniform = 0;
                if (buf[i] != val[i]) { cd->pad_mis++; ok = 0; }
            } else if (buf[i] != val[i]) {
                cd->data_mis++;
                ok = 0;
            }
        }
        cd->units_match += (size_t)ok;
    }
    /* A trailing partial unit (buffer size not a multiple of 4) counts as data mismatch. */
    size_t tail = n % cd->unit;
    cd->data_mis += tail;

    size_t sz = absdiff(cd->bytes, buf_bytes);
    if (sz == 0 && cd->data_mis == 0 && cd->pad_mis == 0) cd->tier = 0;
    else if (sz == 0 && cd->data_mis == 0) cd->tier = 1;
    else if (cd->data_mis == 0 && n > 0) cd->tier = 2;
    else cd->tier = 3;
    cd->score = cd->data_mis + cd->pad_mis + sz;
}

static int flags_of(const cand *c) { return c->reversed + c->row_major; }

/* Ranking: returns <0 when a is better than b. */
static int cand_cmp(const cand *a, const cand *b, const gran_cand *gr)
{
    if (a->tier != b->tier) return a->tier < b->tier ? -1 : 1;
    if (a->tier >= 2 && a->score != b->score) return a->score < b->score ? -1 : 1;
    if (a->tier == 1 && a->pad_mis != b->pad_mis) return a->pad_mis < b->pad_mis ? -1 : 1;
    if (flags_of(a) != flags_of(b)) return flags_of(a) - flags_of(b);
    if (gr[a->gi].prio != gr[b->gi].prio) return gr[a->gi].prio - gr[b->gi].prio;
    if (a->gi != b->gi) return a->gi - b->gi;
    if (a->layout != b->layout) return (int)a->layout - (int)b->layout;
    if (a->reversed != b->reversed) return a->reversed - b->reversed;
    return a->row_major - b->row_major;
}

/* Two candidates are "tied" when nothing but the canonical preference separates them. */
static int cand_tied(const cand *a, const cand *b)
{
    if (a->tier != b->tier) return 0;
    if (a->tier == 3) return a->score == b->score;
    if (a->tier == 2) return a->score == b->score;
    return 1;
}

/* ------------------------------------------------------------------------------------------ */
/* Evidence text                                                                               */
/* ------------------------------------------------------------------------------------------ */

typedef struct { char *s; size_t cap, len; } ebuf;

static void eb_printf(ebuf *e, const char *fmt, ...)
{
    if (e->len + 1 >= e->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(e->s + e->len, e->cap - e->len, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    e->len += (size_t)n;
    if (e->len >= e->cap) {
        e->len = e->cap - 1;
        /* mark the cut so a reader knows the text was truncated */
        if (e->cap >= 4) memcpy(e->s + e->cap - 4, "...", 4);
    }
}

static const char *layout_long(lofp_layout l)
{
    switch (l) {
    case LOFP_LAYOUT_LINEAR: return "linear";
    case LOFP_LAYOUT_SWIZZLE_128X4: return "swizzle-128x4";
    case LOFP_LAYOUT_PACKED_U32: return "packed-u32 (TileLang)";
    case LOFP_LAYOUT_PACKED_U32_DG: return "packed-u32 (DeepGEMM)";
    default: return "?";
    }
}

static void describe(ebuf *e, const cand *c, const gran_cand *gr)
{
    eb_printf(e, "%s", layout_long(c->layout));
    if (is_packed(c->layout))
        eb_printf(e, ", %s, %s", c->reversed ? "MSB-first" : "LSB-first",
                  c->row_major ? "row-major" : "group-major");
    eb_printf(e, ", granularity %u", (unsigned)gr[c->gi].gran);
    if (gr[c->gi].prio == 2)
        eb_printf(e, " (derived from %u by max)", (unsigned)gr[c->gi].from_gran);
}

static void describe_short(ebuf *e, const cand *c, const gran_cand *gr)
{
    static const char *const sh[] = {"linear", "swizzle", "packed-u32", "packed-u32:deepgemm"};
    eb_printf(e, "%s", sh[c->layout]);
    if (is_packed(c->layout))
        eb_printf(e, " %s %s", c->reversed ? "MSB" : "LSB", c->row_major ? "row-major" : "group-major");
    eb_printf(e, " g%u", (unsigned)gr[c->gi].gran);
}

static void describe_score(ebuf *e, const cand *c, size_t buf_bytes)
{
    const char *unit = c->unit == 4 ? "words" : "bytes";
    if (c->bytes == buf_bytes) {
        eb_printf(e, ": %zu/%zu %s match", c->units_match, c->units_total, unit);
    } else if (c->bytes > buf_bytes) {
        eb_printf(e, ": buffer holds only the first %zu of its %zu bytes; %zu/%zu %s compared match",
                  buf_bytes, c->bytes, c->units_match, c->cmp / c->unit, unit);
    } else {
        eb_printf(e, ": %zu/%zu %s match, then %zu trailing bytes it does not explain",
                  c->units_match, c->units_total, unit, buf_bytes - c->bytes);
    }
}

/* Why two candidates give the same bytes on this data (best effort, first reason that fits). */
static const char *tie_reason(const cand *a, const cand *b, const gran_cand *gr, size_t rows)
{
    const gran_cand *ga = &gr[a->gi];
    size_t n = rows * ga->cols;
    int uniform = 1;
    for (size_t i = 1; i < n && uniform; i++) uniform = ga->exp[i] == ga->exp[0];
    if (uniform) return "all scale bytes are equal";
    if (a->gi != b->gi) return "the scales are the same at both granularities";
    if (is_packed(a->layout) && is_packed(b->layout)) {
        if (a->row_major != b->row_major && a->reversed == b->reversed && a->layout == b->layout) {
            if (lofp_ceil_div(ga->cols, 4) == 1) return "a single K-group word per row makes row-major and group-major identical";
            if (rows == 1) return "a single row makes row-major and group-major identical";
        }
        if (a->layout != b->layout && a->row_major == b->row_major && a->reversed == b->reversed) {
            if (ga->cols % 4 == 0) return "rows % 4 == 0 and no pad columns: TileLang and DeepGEMM packings are the same bytes";
            return "rows % 4 == 0: TileLang and DeepGEMM packings differ only in pad bytes";
        }
        if (a->reversed != b->reversed) return "each word's bytes are palindromic";
    }
    if ((a->layout == LOFP_LAYOUT_LINEAR) != (b->layout == LOFP_LAYOUT_LINEAR)) {
        const cand *p = a->layout == LOFP_LAYOUT_LINEAR ? b : a;
        if (is_packed(p->layout) && !p->reversed && (p->row_major || rows == 1))
            return "with cols % 4 == 0, LSB-first words in row order are the linear layout";
        if (is_packed(p->layout) && !p->reversed && lofp_ceil_div(ga->cols, 4) == 1)
            return "one K-group word per row and cols % 4 == 0: the packed words are the linear bytes";
    }
    return "the data do not tell them apart";
}

/* ------------------------------------------------------------------------------------------ */

static uint8_t *derive_coarser(const uint8_t *src, size_t rows, size_t src_cols, uint32_t ratio,
                               size_t dst_cols)
{
    size_t n;
    if (!lofp_mul_size(rows, dst_cols, &n)) return NULL;
    uint8_t *dst = malloc(n ? n : 1);
    if (!dst) return NULL;
    for (size_t r = 0; r < rows; r++) {
        for (size_t c = 0; c < dst_cols; c++) {
            size_t j0 = c * ratio, j1 = j0 + ratio;
            if (j1 > src_cols) j1 = src_cols;
            uint8_t m = 0;
            for (size_t j = j0; j < j1; j++)
                if (src[r * src_cols + j] > m) m = src[r * src_cols + j];
            dst[r * dst_cols + c] = m;
        }
    }
    return dst;
}

static int have_gran(const gran_cand *gr, int n, uint32_t g)
{
    for (int i = 0; i < n; i++) if (gr[i].gran == g) return 1;
    return 0;
}

lofp_status lofp_layout_diagnose(const uint8_t *buf, size_t buf_bytes, size_t rows, size_t k,
                                 uint32_t block, const uint8_t *expected, uint32_t alt_block,
                                 const uint8_t *expected_alt, lofp_layout_diagnosis *d)
{
    if (!d) return LOFP_ERR_INVALID_ARG;
    memset(d, 0, sizeof *d);
    if (!buf || buf_bytes == 0 || !expected || block == 0 || rows == 0 || k == 0)
        return LOFP_ERR_INVALID_ARG;
    if (alt_block != 0 && !expected_alt) return LOFP_ERR_INVALID_ARG;

    gran_cand gr[MAX_GRANS];
    int ng = 0;
    lofp_status st = LOFP_OK;
    gr[ng++] = (gran_cand){block, lofp_ceil_div(k, block), expected, NULL, 0, 0};
    if (alt_block != 0 && alt_block != block)
        gr[ng++] = (gran_cand){alt_block, lofp_ceil_div(k, alt_block), expected_alt, NULL, 1, 0};
    static const uint32_t targets[2] = {32, 128};
    for (int t = 0; t < 2; t++) {
        uint32_t g = targets[t];
        if (have_gran(gr, ng, g)) continue;
        /* derive from the finest source it is a coarser multiple of */
        int src = -1;
        for (int i = 0; i < ng; i++)
            if (gr[i].prio < 2 && g > gr[i].gran && g % gr[i].gran == 0 &&
                (src < 0 || gr[i].gran > gr[src].gran))
                src = i;
        if (src < 0) continue;
        size_t cols = lofp_ceil_div(k, g);
        uint8_t *e = derive_coarser(gr[src].exp, rows, gr[src].cols, g / gr[src].gran, cols);
        if (!e) { st = LOFP_ERR_NOMEM; goto out; }
        gr[ng++] = (gran_cand){g, cols, e, e, 2, gr[src].gran};
    }

    cand cands[MAX_CANDS];
    int nc = 0;
    for (int gi = 0; gi < ng; gi++) {
        for (int l = 0; l < LOFP_LAYOUT_COUNT_; l++) {
            int variants = is_packed((lofp_layout)l) ? 4 : 1;
            for (int v = 0; v < variants; v++) {
                cand c;
                memset(&c, 0, sizeof c);
                c.layout = (lofp_layout)l;
                c.reversed = v & 1;
                c.row_major = (v >> 1) & 1;
                c.gi = gi;
                c.unit = is_packed(c.layout) ? 4 : 1;
                c.pad_default = (uint8_t)(c.layout == LOFP_LAYOUT_PACKED_U32 ? 127 : 0);
                if (!cand_size(rows, gr[gi].cols, c.layout, &c.bytes) || c.bytes == 0) continue;
                uint8_t *val = malloc(c.bytes), *pad = malloc(c.bytes);
                if (!val || !pad) { free(val); free(pad); st = LOFP_ERR_NOMEM; goto out; }
                render(gr[gi].exp, rows, gr[gi].cols, c.layout, c.reversed, c.row_major,
                       c.pad_default, val, pad, c.bytes);
                compare(buf, buf_bytes, val, pad, &c);
                free(val);
                free(pad);
                cands[nc++] = c;
            }
        }
    }
    if (nc == 0) { st = LOFP_ERR_SIZE_OVERFLOW; goto out; }

    int best = 0;
    for (int i = 1; i < nc; i++)
        if (cand_cmp(&cands[i], &cands[best], gr) < 0) best = i;
    const cand *b = &cands[best];

    d->layout = b->layout;
    d->reversed_bytes = b->reversed;
    d->row_major_words = b->row_major;
    d->block = gr[b->gi].gran;
    d->matches = b->tier <= 2;
    d->mismatched_bytes = b->score;

    ebuf e = {d->evidence, sizeof d->evidence, 0};
    if (!d->matches) eb_printf(&e, "no candidate matches; closest: ");
    describe(&e, b, gr);
    describe_score(&e, b, buf_bytes);
    eb_printf(&e, "\n");

    if (b->tier == 1 || (b->tier == 2 && b->pad_mis)) {
        if (b->pad_uniform)
            eb_printf(&e, "padding bytes are 0x%02X, not the default 0x%02X%s\n", b->pad_value,
                      b->pad_default, b->pad_value == 0xFF ? " (0xFF reads as NaN)" : "");
        else
            eb_printf(&e, "%zu of %zu padding bytes differ from the default 0x%02X\n", b->pad_mis,
                      b->pad_count, b->pad_default);
    }
    if (d->matches && gr[b->gi].gran != block)
        eb_printf(&e, "written at granularity %u, not the expected %u%s\n", (unsigned)gr[b->gi].gran,
                  (unsigned)block,
                  b->tier == 2 && b->bytes > buf_bytes ? " (a reader sized for the expected one sees a prefix)" : "");
    if (d->matches && (b->reversed || b->row_major))
        eb_printf(&e, "failure mode:%s%s%s\n", b->reversed ? " bytes reversed (MSB-first words)" : "",
                  b->reversed && b->row_major ? ";" : "",
                  b->row_major ? " words row-major (m*G+g) instead of group-major (g*Ma+m)" : "");

    /* Ambiguity: every other candidate tied with the best. */
    int ties = 0;
    for (int i = 0; i < nc; i++)
        if (i != best && cand_tied(&cands[i], b)) ties++;
    if (ties && d->matches) {
        eb_printf(&e, "ambiguous: %d other candidate(s) fit equally well (", ties);
        int first = -1;
        for (int i = 0; i < nc; i++)
            if (i != best && cand_tied(&cands[i], b)) { first = i; break; }
        eb_printf(&e, "%s); chose the canonical one. Also: ", tie_reason(b, &cands[first], gr, rows));
        int shown = 0;
        for (int i = 0; i < nc; i++) {
            if (i == best || !cand_tied(&cands[i], b)) continue;
            if (shown++) eb_printf(&e, "; ");
            describe_short(&e, &cands[i], gr);
        }
        eb_printf(&e, "\n");
    } else if (!d->matches) {
        int second = -1;
        for (int i = 0; i < nc; i++)
            if (i != best && (second < 0 || cand_cmp(&cands[i], &cands[second], gr) < 0)) second = i;
        if (second >= 0) {
            eb_printf(&e, "next: ");
            describe(&e, &cands[second], gr);
            describe_score(&e, &cands[second], buf_bytes);
            eb_printf(&e, "\n");
        }
    }
    st = d->matches ? LOFP_OK : LOFP_ERR_MISMATCH;

out:
    for (int i = 0; i < ng; i++) free(gr[i].owned);
    return st;
}
