/* vec_layout.c -- layout cases: linear scale bytes of ragged shapes (rows and columns that are
 * not multiples of the swizzle's 128 x 4 tile or the packed words' 4 columns) and the buffer each
 * scale layout holds for them, padding included. */
#include <stdio.h>
#include <stdlib.h>

#include "vec_internal.h"

static const size_t kRows[] = { 1, 3, 4, 127, 128, 129, 200, 257 };
static const size_t kCols[] = { 1, 3, 4, 5, 9 };
static const lofp_layout kLayouts[] = { LOFP_LAYOUT_SWIZZLE_128X4, LOFP_LAYOUT_PACKED_U32,
                                        LOFP_LAYOUT_PACKED_U32_DG };

lofp_status lofp_vec_layout(lofp_sbuf *b, size_t *count)
{
    size_t maxin = 257 * 9, maxout = 384 * 12 + 64;
    uint8_t *in = malloc(maxin), *out = malloc(maxout);
    if (!in || !out) { free(in); free(out); return LOFP_ERR_NOMEM; }
    lofp_status st = LOFP_OK;
    for (size_t li = 0; li < 3 && st == LOFP_OK; li++)
        for (size_t ri = 0; ri < sizeof kRows / sizeof kRows[0] && st == LOFP_OK; ri++)
            for (size_t ci = 0; ci < sizeof kCols / sizeof kCols[0]; ci++) {
                size_t rows = kRows[ri], cols = kCols[ci];
                /* Scale bytes 1..254 that differ between neighbours, never the pad bytes' 0 or
                 * 127 at a position a reader could confuse with padding. */
                uint64_t seed = 0x1a70u + rows * 31 + cols;
                for (size_t i = 0; i < rows * cols; i++) {
                    uint8_t v = (uint8_t)(1 + lofp_splitmix64(&seed) % 254);
                    in[i] = v == 127 ? 128 : v;
                }
                lofp_layout l = kLayouts[li];
                size_t need = lofp_layout_required_bytes(rows, cols, 1, l);
                if (need == 0 || need > maxout) { st = LOFP_ERR_SIZE_OVERFLOW; break; }
                st = lofp_layout_from_linear(in, rows, cols, l, -1, out);
                if (st != LOFP_OK) break;
                char dg[13];
                lofp_vec_digest12(in, rows * cols, dg);
                lofp_vec_printf(b, "{\"id\":\"%s/%zux%zu/%s\",\"layout\":\"%s\",\"rows\":%zu,"
                                    "\"cols\":%zu,\"pad_byte\":null,\"linear\":\"",
                                 lofp_layout_name(l), rows, cols, dg, lofp_layout_name(l), rows, cols);
                lofp_vec_hex(b, in, rows * cols);
                lofp_sbuf_puts(b, "\",\"buffer\":\"");
                lofp_vec_hex(b, out, need);
                lofp_sbuf_puts(b, "\"}\n");
                (*count)++;
            }
    free(in);
    free(out);
    if (st == LOFP_OK && b->failed) st = LOFP_ERR_NOMEM;
    return st;
}
