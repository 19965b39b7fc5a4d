/* fuzz_qtmeta.c -- libFuzzer harness for the library's `lofp:` metadata interpreter (lofp/qfile.h:
 * lofp_qtensor_meta_parse, _load, _meta_format, _dequantize): random metadata on valid
 * files, the property in qtmeta_check.h. Build and run: scripts/fuzz.sh SECONDS qtmeta. */
#include <stdio.h>
#include <stdlib.h>

#include "qtmeta_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *bad = lofp_qtmeta_check(data, size);
    if (bad) {
        fprintf(stderr, "fuzz_qtmeta: property violated: %s\n", bad);
        abort();
    }
    return 0;
}
