/* test_gguf_corpus.c -- replays fuzz/corpus/gguf (seeds and the fuzzer's regression inputs)
 * through the GGUF reader's property (fuzz/fuzz_gguf.c), and checks a few hand-made files. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "../../fuzz/fuzz_gguf.c"

#define LOFP_FUZZ_CORPUS_DIR LOFP_GOLDEN_DIR "/../../fuzz/corpus"

static int replay(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) { fprintf(stderr, "test_gguf_corpus: cannot open %s\n", dir); return 1; }
    struct dirent *e;
    int n = 0, fails = 0;
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
        size_t got = fread(b, 1, (size_t)len, f);
        fclose(f);
        const char *bad = lofp_fuzz_gguf_check(b, got);
        if (bad) { fprintf(stderr, "%s: %s\n", p, bad); fails++; }
        free(b);
        n++;
    }
    closedir(d);
    printf("test_gguf_corpus: %d inputs replayed, %d failed\n", n, fails);
    return fails || n == 0;
}

int main(void)
{
    int rc = replay(LOFP_FUZZ_CORPUS_DIR "/gguf");
    /* unknown tensor type: named in the message */
    static const uint8_t head[] = { 'G', 'G', 'U', 'F', 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
    uint8_t buf[256];
    size_t k = 0;
    memcpy(buf, head, sizeof head);
    k = sizeof head;
    const char *nm = "w.weight";
    uint64_t nl = strlen(nm);
    memcpy(buf + k, &nl, 8); k += 8;
    memcpy(buf + k, nm, nl); k += nl;
    uint32_t nd = 2, ty = 99;
    uint64_t ne[2] = { 32, 2 }, off = 0;
    memcpy(buf + k, &nd, 4); k += 4;
    memcpy(buf + k, ne, 16); k += 16;
    memcpy(buf + k, &ty, 4); k += 4;
    memcpy(buf + k, &off, 8); k += 8;
    gg_file g;
    lofp_io_error err;
    lofp_status st = lofp_gg_parse(buf, k, "t.gguf", &g, &err);
    if (st != LOFP_ERR_UNSUPPORTED || !strstr(err.message, "w.weight") || !strstr(err.message, "99") || !strstr(err.message, "t.gguf")) {
        fprintf(stderr, "unknown type: status %d, message '%s'\n", st, err.message);
        rc = 1;
    }
    if (st == LOFP_OK) lofp_gg_close(&g);
    /* the same with a known type but no data: past the end */
    ty = 0;
    memcpy(buf + k - 12, &ty, 4);
    st = lofp_gg_parse(buf, k, "t.gguf", &g, &err);
    if (st != LOFP_ERR_FORMAT || !strstr(err.message, "w.weight")) { fprintf(stderr, "no data: %d '%s'\n", st, err.message); rc = 1; }
    if (st == LOFP_OK) lofp_gg_close(&g);
    printf(rc ? "test_gguf_corpus: FAILED\n" : "test_gguf_corpus: ok\n");
    return rc;
}
