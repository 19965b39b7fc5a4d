/* test_io_corpus.c -- replays every file of fuzz/corpus/{npy,safetensors}/ (seeds and fuzzer
 * findings kept as regressions) through the in-memory parsers, with the property the fuzzers
 * check (fuzz/fuzz_check.h): no crash, clean errors, and a parse / encode / parse round trip.
 * Each input is copied into an allocation of exactly its size, so sanitizer builds catch any
 * read past the end. */
#include "test_util.h"

#include "../fuzz/fuzz_check.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#ifndef LOFP_CORPUS_DIR
#define LOFP_CORPUS_DIR LOFP_GOLDEN_DIR "/../../fuzz/corpus"
#endif

static uint8_t *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    if (b && n > 0 && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    fclose(f);
    *len = n > 0 ? (size_t)n : 0;
    return b;
}

static int replay(const char *kind, lofp_file_format fmt, const char *name)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", LOFP_CORPUS_DIR, kind);
    DIR *d = opendir(dir);
    CHECKF(d != NULL, "cannot open corpus directory %s", dir);
    if (!d) return 0;
    int n = 0, ok = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len = 0;
        uint8_t *buf = read_all(path, &len);
        CHECKF(buf != NULL, "cannot read %s", path);
        if (!buf) continue;
        const char *bad = lofp_fuzz_check(buf, len, fmt, name);
        CHECKF(bad == NULL, "%s: %s", path, bad);
        bad = lofp_fuzz_check(buf, len, LOFP_FORMAT_AUTO, "corpus");
        CHECKF(bad == NULL, "%s (auto): %s", path, bad);
        lofp_file *f = NULL;
        if (lofp_file_open_memory(buf, len, fmt, name, &f, NULL) == LOFP_OK) ok++;
        lofp_file_close(f);
        free(buf);
        n++;
    }
    closedir(d);
    printf("%s: %d inputs replayed, %d valid\n", kind, n, ok);
    CHECKF(n > 0, "empty corpus %s", dir);
    return n;
}

int main(void)
{
    replay("npy", LOFP_FORMAT_NPY, "corpus.npy");
    replay("safetensors", LOFP_FORMAT_SAFETENSORS, "corpus.safetensors");
    return tu_finish("test_io_corpus");
}
