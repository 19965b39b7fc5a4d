/* fuzz_npy.c -- libFuzzer harness for the npy reader (lofp_file_open_memory, the entry point the
 * mmap reader uses too), plus a re-encode / re-parse round trip. Build and run: scripts/fuzz.sh. */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *bad = lofp_fuzz_check(data, size, LOFP_FORMAT_NPY, "fuzz.npy");
    if (bad) {
        fprintf(stderr, "fuzz_npy: property violated: %s\n", bad);
        abort();
    }
    /* the format detection path too */
    bad = lofp_fuzz_check(data, size, LOFP_FORMAT_AUTO, "fuzz");
    if (bad) {
        fprintf(stderr, "fuzz_npy (auto): property violated: %s\n", bad);
        abort();
    }
    return 0;
}
