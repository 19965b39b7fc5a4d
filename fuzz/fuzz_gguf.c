/* fuzz_gguf.c -- libFuzzer harness for the GGUF reader of the checkpoint component (lofp_gg_parse, the
 * entry point lofp_gg_open uses on its mapping). Property: any bytes parse or fail cleanly with a
 * NUL-terminated message; on success every tensor lies inside the buffer with the size its type
 * and shape give, and decoding every tensor of a type lofp decodes stays in bounds. Build and run:
 * scripts/fuzz.sh 60 gguf. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/ck_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

const char *lofp_fuzz_gguf_check(const uint8_t *data, size_t size);
const char *lofp_fuzz_gguf_check(const uint8_t *data, size_t size)
{
    gg_file g;
    lofp_io_error err;
    lofp_status st = lofp_gg_parse(data, size, "fuzz.gguf", &g, &err);
    if (st != LOFP_OK) {
        if (err.status != st) return "err.status differs from the return value";
        if (!memchr(err.message, 0, sizeof err.message)) return "message not terminated";
        return NULL;
    }
    const char *bad = NULL;
    for (size_t i = 0; i < g.n_t && !bad; i++) {
        const gg_tensor *t = &g.t[i];
        if (t->data < data || t->data + t->nbytes > data + size) bad = "tensor outside the buffer";
        uint32_t blck, bytes;
        if (!bad && !lofp_gg_type_info(t->type, &blck, &bytes)) bad = "unknown type accepted";
        if (!bad && lofp_gg_can_decode(t->type) && t->nbytes / bytes * blck <= (1u << 20)) {
            float *out = malloc((t->nbytes / bytes * blck + 1) * sizeof *out);
            if (out && lofp_gg_decode(t, out) != LOFP_OK) bad = "decode of a decodable type failed";
            free(out);
        }
    }
    for (size_t i = 0; i < g.n_kv && !bad; i++)
        if (g.kv[i].raw < data || g.kv[i].raw + g.kv[i].raw_len > data + size) bad = "value outside the buffer";
    lofp_gg_close(&g);
    return bad;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *bad = lofp_fuzz_gguf_check(data, size);
    if (bad) {
        fprintf(stderr, "fuzz_gguf: property violated: %s\n", bad);
        abort();
    }
    return 0;
}
