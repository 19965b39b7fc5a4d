/* fuzz_calib.c -- libFuzzer harness of the calibration-file reader (lofp/calib.h): the bytes are
 * opened with lofp_calib_open_memory (a GGUF importance matrix or lofp's safetensors file, by the
 * magic) and every listed weight is looked up at several input widths k, with and without the
 * Hessian. Property: no crash, leak or undefined behaviour; every failure returns a status with a
 * NUL-terminated message naming the file; a success hands out means that are finite and not
 * negative on the diagonal, a positive token count, and a diagonal equal bit for bit to the
 * Hessian's. Build and run: scripts/fuzz.sh 60 calib; the committed corpus (fuzz/corpus/calib,
 * written by fuzz/make_corpus_calib.py) is replayed by tests/checkpoint/test_calib.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lofp/calib.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CALIB_NAME "fuzz.calib"

static const char *failed_well(lofp_status st, const lofp_io_error *err)
{
    if (err->status != st) return "err.status differs from the return value";
    if (!memchr(err->message, 0, sizeof err->message)) return "message not terminated";
    if (!strstr(err->message, FUZZ_CALIB_NAME)) return "message does not name the file";
    return NULL;
}

static const char *check_weight(const lofp_calib *c, const char *name)
{
    static const size_t ks[] = {1, 2, 3, 4, 8, 16, 32, 64};
    static float diag[64], hess[64 * 64];
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        size_t k = ks[i];
        for (int want_h = 0; want_h < 2; want_h++) {
            lofp_io_error err;
            uint64_t tokens = 0;
            lofp_status st = lofp_calib_find(c, name, k, diag, want_h ? hess : NULL, &tokens, &err);
            if (st != LOFP_OK) {
                const char *bad = failed_well(st, &err);
                if (bad) return bad;
                continue;
            }
            if (want_h && lofp_calib_kind(c) != LOFP_CALIB_HESSIAN) return "a Hessian from a diagonal file";
            if (tokens == 0) return "a token count of 0 accepted";
            for (size_t j = 0; j < k; j++) {
                if (!isfinite(diag[j]) || diag[j] < 0) return "a diagonal entry not finite or negative";
                if (want_h && memcmp(&diag[j], &hess[j * k + j], 4) != 0) return "diagonal differs from the Hessian's";
            }
            if (want_h)
                for (size_t j = 0; j < k * k; j++)
                    if (!isfinite(hess[j])) return "a Hessian entry not finite";
        }
    }
    return NULL;
}

const char *lofp_fuzz_calib_check(const uint8_t *data, size_t size);
const char *lofp_fuzz_calib_check(const uint8_t *data, size_t size)
{
    lofp_calib *c = NULL;
    lofp_io_error err;
    lofp_status st = lofp_calib_open_memory(data, size, FUZZ_CALIB_NAME, &c, &err);
    if (st != LOFP_OK) return c ? "open: a handle with a failure" : failed_well(st, &err);
    const char *bad = NULL;
    for (size_t i = 0; i < lofp_calib_count(c) && !bad; i++) {
        const char *name = lofp_calib_name(c, i);
        if (!name) bad = "a listed weight without a name";
        else bad = check_weight(c, name);
    }
    lofp_io_error e2;
    if (!bad && lofp_calib_find(c, "\x01no such weight", 4, NULL, NULL, NULL, &e2) != LOFP_ERR_NOT_FOUND)
        bad = "find: found an absent weight";
    lofp_calib_close(c);
    return bad;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *bad = lofp_fuzz_calib_check(data, size);
    if (bad) {
        fprintf(stderr, "fuzz_calib: property violated: %s\n", bad);
        abort();
    }
    return 0;
}
