/* generic_tables.c -- decode tables for the generic dequantizers: entry c of the table of type t
 * is lofp_decode(t, c), so a lookup is the reference decode by construction. Built once. */
#include <pthread.h>

#include "generic_kernels.h"

static float tables[LOFP_ELEM_COUNT_][256];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void build_tables(void)
{
    for (int t = 1; t < LOFP_ELEM_COUNT_; t++) {
        if (t == LOFP_ELEM_BF16 || t == LOFP_ELEM_FP16 || t == LOFP_ELEM_FP32) continue;
        for (uint32_t c = 0; c < 256; c++) tables[t][c] = lofp_decode((lofp_elem)t, c);
    }
}

const float *lofp_decode_table(lofp_elem t)
{
    pthread_once(&tables_once, build_tables);
    return tables[t];
}
