/* fuzz_gguf_ckpt.c -- libFuzzer harness one level above fuzz_gguf.c: the bytes are a GGUF file
 * opened as a checkpoint (lofp_ckpt_open on a temporary file, since checkpoints are opened by
 * path), then every logical tensor is fetched (lofp_ckpt_get), found by name (lofp_ckpt_find) and
 * dequantized to F32 and BF16 (lofp_ckpt_dequantize). Property: no crash, leak or undefined
 * behaviour; every failure returns a status with a NUL-terminated message naming the file; a
 * fetched tensor's codes and scales have the sizes its shape gives, and its logical shape has the
 * element count its rows x k say. Build and run: scripts/fuzz.sh 60 gguf_ckpt; the committed
 * corpus (fuzz/corpus/gguf_ckpt, and the parser's fuzz/corpus/gguf) is replayed by
 * tests/checkpoint/test_gguf_ckpt_corpus.c. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lofp/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Dequantizing is bounded so that an input declaring a large tensor in few bytes (a zero-element
 * or all-F16 file is small; GGUF has no compression) cannot make one run slow. */
#define FUZZ_MAX_ELEMS ((size_t)1 << 18)

static const char *check_tensor(lofp_ckpt *c, size_t i, const char *path)
{
    lofp_ckpt_tensor t;
    lofp_io_error err;
    lofp_status st = lofp_ckpt_get(c, i, &t, &err);
    if (st != LOFP_OK) {
        if (err.status != st) return "get: err.status differs from the return value";
        if (!memchr(err.message, 0, sizeof err.message)) return "get: message not terminated";
        if (!strstr(err.message, path)) return "get: message does not name the file";
        return NULL;
    }
    const char *bad = NULL;
    size_t idx = (size_t)-1;
    if (lofp_ckpt_find(c, t.name, &idx) != LOFP_OK) bad = "find: a listed tensor is not found by its name";
    else if (strcmp(t.name, "") == 0) bad = "empty tensor name";
    size_t n = 1;
    int ovf = 0;
    for (size_t d = 0; d < t.ndim; d++) ovf |= __builtin_mul_overflow(n, t.shape[d], &n);
    if (!bad && ovf) bad = "get: shape overflows size_t";
    if (!bad && t.quantized) {
        if (t.rows * t.k != n) bad = "get: rows x k differs from the shape's element count";
        else if (t.kp < t.k || (t.scheme.block && t.kp % t.scheme.block)) bad = "get: padded k inconsistent";
        else if (t.scheme.block && t.scales_bytes < t.rows * (t.kp / t.scheme.block)) bad = "get: fewer scale bytes than blocks";
        else if (t.codes_bytes < t.rows * t.kp / 2) bad = "get: fewer code bytes than values";
    }
    if (!bad && !t.quantized && t.nbytes < n) bad = "get: fewer data bytes than elements";
    if (!bad && n <= FUZZ_MAX_ELEMS) {
        float *f = malloc((n ? n : 1) * sizeof *f);
        uint16_t *h = malloc((n ? n : 1) * sizeof *h);
        if (f && h) {
            for (int k = 0; k < 2 && !bad; k++) {
                st = lofp_ckpt_dequantize(&t, k ? LOFP_DTYPE_BF16 : LOFP_DTYPE_F32, k ? (void *)h : (void *)f, &err);
                if (st != LOFP_OK && (err.status != st || !memchr(err.message, 0, sizeof err.message)))
                    bad = "dequantize: failure without a proper message";
            }
        }
        free(f);
        free(h);
    }
    lofp_ckpt_tensor_release(&t);
    return bad;
}

static char fuzz_dir[] = "/tmp/lofp-fuzz-gguf-ckpt-XXXXXX", fuzz_path[96];

static void fuzz_cleanup(void)
{
    unlink(fuzz_path);
    rmdir(fuzz_dir);
}

const char *lofp_fuzz_gguf_ckpt_check(const uint8_t *data, size_t size);
const char *lofp_fuzz_gguf_ckpt_check(const uint8_t *data, size_t size)
{
    /* one file in a private directory, rewritten per input: a non-GGUF input is opened as a
     * safetensors model, which looks at its directory's config files */
    static int fd = -1;
    if (fd < 0) {
        if (!mkdtemp(fuzz_dir)) return "cannot create the temporary directory";
        snprintf(fuzz_path, sizeof fuzz_path, "%s/model.gguf", fuzz_dir);
        fd = open(fuzz_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) return "cannot create the temporary file";
        atexit(fuzz_cleanup);
    }
    const char *path = fuzz_path;
    if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size)) return "cannot write the temporary file";
    lofp_ckpt *c = NULL;
    lofp_io_error err;
    lofp_status st = lofp_ckpt_open(path, &c, &err);
    if (st != LOFP_OK) {
        if (err.status != st) return "open: err.status differs from the return value";
        if (!memchr(err.message, 0, sizeof err.message)) return "open: message not terminated";
        if (!strstr(err.message, path)) return "open: message does not name the file";
        return NULL;
    }
    const char *bad = NULL;
    if (!lofp_ckpt_describe(c)[0]) bad = "open: empty description";
    for (size_t i = 0; i < lofp_ckpt_count(c) && !bad; i++) bad = check_tensor(c, i, path);
    size_t dummy;
    if (!bad && lofp_ckpt_find(c, "\x01no such tensor", &dummy) != LOFP_ERR_NOT_FOUND) bad = "find: found an absent name";
    lofp_ckpt_close(c);
    return bad;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *bad = lofp_fuzz_gguf_ckpt_check(data, size);
    if (bad) {
        fprintf(stderr, "fuzz_gguf_ckpt: property violated: %s\n", bad);
        abort();
    }
    return 0;
}
