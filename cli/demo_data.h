/* demo_data.h -- the deterministic built-in tensors `lofp demo` (and the benchmarks) use. */
#ifndef LOFP_DEMO_DATA_H
#define LOFP_DEMO_DATA_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name;
    const char *what;
    size_t rows, k;
    float *data; /* malloc'ed, rows * k */
} demo_tensor;

/* Fills t[0..n) with the built-in layer (n = DEMO_NTENSORS); returns 0 on allocation failure.
 * `scale` multiplies every row count (1 = the default sizes). */
#define DEMO_NTENSORS 4
int demo_make(demo_tensor *t, size_t scale);
void demo_free(demo_tensor *t);

#endif
