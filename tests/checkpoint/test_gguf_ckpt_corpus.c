/* test_gguf_ckpt_corpus.c -- replays the checkpoint-level GGUF fuzzer's corpus (fuzz/corpus/gguf_ckpt:
 * seeds and kept findings) and the parser's (fuzz/corpus/gguf) through its property
 * (fuzz/fuzz_gguf_ckpt.c: lofp_ckpt_open + get + find + dequantize of every tensor). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "../../fuzz/fuzz_gguf_ckpt.c"

#define LOFP_FUZZ_CORPUS_DIR LOFP_GOLDEN_DIR "/../../fuzz/corpus"

static int replay(const char *dir, int *count)
{
    DIR *d = opendir(dir);
    if (!d) { fprintf(stderr, "test_gguf_ckpt_corpus: cannot open %s\n", dir); return 1; }
    struct dirent *e;
    int fails = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        FILE *f = fopen(p, "rb");
        if (!f) continue;
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *b = malloc((size_t)len + 1);
        size_t got = b ? fread(b, 1, (size_t)len, f) : 0;
        fclose(f);
        const char *bad = b ? lofp_fuzz_gguf_ckpt_check(b, got) : "out of memory";
        if (bad) { fprintf(stderr, "%s: %s\n", p, bad); fails++; }
        free(b);
        (*count)++;
    }
    closedir(d);
    return fails;
}

int main(void)
{
    int n = 0, fails = replay(LOFP_FUZZ_CORPUS_DIR "/gguf_ckpt", &n);
    int seeds = n;
    fails += replay(LOFP_FUZZ_CORPUS_DIR "/gguf", &n);
    printf("test_gguf_ckpt_corpus: %d inputs replayed (%d of gguf_ckpt), %d failed\n", n, seeds, fails);
    return fails || seeds == 0;
}
