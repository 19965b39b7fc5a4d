/* test_qtmeta_corpus.c -- replays fuzz/corpus/qtmeta/ (seeds and fuzzer findings) through the
 * `lofp:` metadata fuzzer's property (fuzz/qtmeta_check.h), each input in an allocation of exactly
 * its size; the regress-* inputs (malformed metadata: bad rotate, hadamard, two_level,
 * shapes, block, padded_k, duplicate keys) must also be refused by
 * the library's interpreter (lofp_qtensor_meta_parse). */
#include "test_util.h"

#include "qtmeta_check.h"

#include <dirent.h>
#include <stdio.h>

#ifndef LOFP_CORPUS_DIR
#define LOFP_CORPUS_DIR LOFP_GOLDEN_DIR "/../../fuzz/corpus"
#endif

int main(void)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/qtmeta", LOFP_CORPUS_DIR);
    DIR *d = opendir(dir);
    CHECKF(d != NULL, "cannot open corpus directory %s", dir);
    int n = 0, refused = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) { CHECKF(0, "cannot read %s", path); continue; }
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *buf = malloc(len > 0 ? (size_t)len : 1);
        size_t got = len > 0 ? fread(buf, 1, (size_t)len, f) : 0;
        fclose(f);
        const char *bad = lofp_qtmeta_check(buf, got);
        CHECKF(bad == NULL, "%s: %s", path, bad);
        if (!strncmp(e->d_name, "regress-", 8) && got > 0) {
            char *v = malloc(got);
            memcpy(v, buf + 1, got - 1);
            v[got - 1] = 0;
            lofp_qtensor q;
            memset(&q, 0, sizeof q);
            int ok = lofp_qtensor_meta_parse(v, &q, NULL) == LOFP_OK;
            CHECKF(!ok, "%s: malformed metadata accepted", e->d_name);
            if (!ok) refused++;
            free(v);
        }
        free(buf);
        n++;
    }
    if (d) closedir(d);
    printf("qtmeta: %d inputs replayed, %d regressions refused\n", n, refused);
    CHECK(n > 0);
    return tu_finish("test_qtmeta_corpus");
}
