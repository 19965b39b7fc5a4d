/* test_ckpt_dir_corpus.c -- replays fuzz/corpus/ckpt_dir (the seeds of fuzz/make_ckpt_dir_corpus.py
 * and the fuzzer's regression inputs) through the model-directory fuzzer's check
 * (fuzz/fuzz_ckpt_dir.c: each input becomes a model directory that is opened, read, dequantized,
 * imported and converted). Inputs named known-* are open findings: reported, not failed.
 * LOFP_FUZZ_VERBOSE=1 prints each call's status. */
#define _DEFAULT_SOURCE /* the harness's syscall() */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "../../fuzz/fuzz_ckpt_dir.c"

#define LOFP_FUZZ_CORPUS_DIR LOFP_GOLDEN_DIR "/../../fuzz/corpus"

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : LOFP_FUZZ_CORPUS_DIR "/ckpt_dir";
    DIR *d = opendir(dir);
    if (!d) { fprintf(stderr, "test_ckpt_dir_corpus: cannot open %s\n", dir); return 1; }
    char **names = NULL;
    size_t nn = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char **nx = realloc(names, (nn + 1) * sizeof *nx);
        if (!nx) break;
        names = nx;
        names[nn] = malloc(strlen(e->d_name) + 1);
        if (names[nn]) strcpy(names[nn++], e->d_name);
    }
    closedir(d);
    if (nn) qsort(names, nn, sizeof *names, cmp_name);
    int fails = 0;
    for (size_t i = 0; i < nn; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        FILE *f = fopen(p, "rb");
        if (!f) { fprintf(stderr, "%s: cannot open\n", p); fails++; continue; }
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *b = malloc(len > 0 ? (size_t)len : 1);
        size_t got = b && len > 0 ? fread(b, 1, (size_t)len, f) : 0;
        fclose(f);
        if (fz_verbose()) fprintf(stderr, "%s\n", names[i]);
        const char *bad = lofp_fuzz_ckpt_dir_check(b, got);
        /* known-*: an open finding the fuzzer made (listed in tests/checkpoint/hostile_dirs_test.py's
         * XFAIL); replayed so that it stays free of crashes, reported until its fix makes it pass
         * (then rename it regress-*) */
        if (bad && !strncmp(names[i], "known-", 6)) fprintf(stderr, "KNOWN %s: %s\n", p, bad);
        else if (bad) { fprintf(stderr, "%s: %s\n", p, bad); fails++; }
        else if (!strncmp(names[i], "known-", 6)) fprintf(stderr, "FIXED %s: rename it regress-*\n", p);
        free(b);
    }
    for (size_t i = 0; i < nn; i++) free(names[i]);
    free(names);
    printf("test_ckpt_dir_corpus: %zu inputs replayed, %d failed\n", nn, fails);
    return fails || nn == 0;
}
