/* test_qfile.c -- lofp/qfile.h, the one owner of lofp tensor files: the metadata bytes (pinned
 * against the value lofp has always written), the strict parse and its round trip, load refusing
 * stored tensors that disagree with the metadata (shape=[4096,64] over 128 code
 * bytes), and the streaming pipelines end to end -- quantize then dequantize equals
 * lofp_quantize + lofp_dequantize bit for bit, the writer hooks see open and finish (abort on a
 * failure, with no output left), progress and notes are reported, the output is never the input. */
#include "test_util.h"

#include "lofp/qfile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

static void path_of(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

static void test_meta_bytes(void)
{
    lofp_qtensor q;
    memset(&q, 0, sizeof q);
    lofp_scheme_preset("nvfp4", &q.scheme);
    q.layout = LOFP_LAYOUT_SWIZZLE_128X4;
    q.pad_byte = 0;
    q.ndim = 3;
    q.shape[0] = 2; q.shape[1] = 3; q.shape[2] = 64;
    q.kp = 64;
    q.src_dtype = LOFP_DTYPE_BF16;
    char want[512];
    snprintf(want, sizeof want,
             "scheme=nvfp4;rounding=rne;scale_rule=ue4m3;block=16;layout=swizzle-128x4;pad_byte=0;shape=[2,3,64];"
             "padded_k=64;two_level=1;c=0.156000003;rotate=0;hadamard=butterfly;seed=0;source_dtype=BF16;lofp_version=%s",
             lofp_version());
    size_t n = lofp_qtensor_meta_format(&q, NULL, 0);
    CHECK_EQ_U(n, strlen(want));
    char buf[512];
    CHECK(lofp_qtensor_meta_format(&q, buf, n) == n && buf[0] != 's');   /* too small: nothing written */
    memset(buf, 'x', sizeof buf);
    buf[0] = 0;
    CHECK(lofp_qtensor_meta_format(&q, buf, sizeof buf) == n);
    CHECKF(strcmp(buf, want) == 0, "meta value\n  got  %s\n  want %s", buf, want);
    q.scheme.profile = LOFP_PROFILE_MODELOPT;
    n = lofp_qtensor_meta_format(&q, buf, sizeof buf);
    CHECK(n > 0 && strstr(buf, ";profile=modelopt") && strlen(buf) == n);
    /* round trip */
    lofp_qtensor r;
    memset(&r, 0, sizeof r);
    CHECK_OK(lofp_qtensor_meta_parse(buf, &r, NULL));
    CHECK(r.ndim == 3 && r.rows == 6 && r.k == 64 && r.kp == 64 && r.layout == LOFP_LAYOUT_SWIZZLE_128X4 &&
          r.scheme.profile == LOFP_PROFILE_MODELOPT && r.src_dtype == LOFP_DTYPE_BF16 && r.scheme.block == 16);
    /* no dimensions, more than 64: not describable */
    q.ndim = 0;
    CHECK(lofp_qtensor_meta_format(&q, buf, sizeof buf) == 0);
    q.ndim = LOFP_MAX_NDIM + 1;
    CHECK(lofp_qtensor_meta_format(&q, buf, sizeof buf) == 0);
    lofp_io_error e;
    CHECK(lofp_qtensor_meta_parse("scheme=nvfp4", &r, &e) == LOFP_ERR_FORMAT && strstr(e.message, "lacks"));
}

/* A file holding w.codes / w.scales of the given shapes and the given metadata value. */
static lofp_file *lying_file(const char *value, size_t crows, void **mem)
{
    static uint8_t codes[4096 * 32], scales[4096 * 2];
    memset(scales, 127, sizeof scales);
    size_t cs[2] = {crows, 32}, ss[2] = {crows, 2};
    lofp_tensor_desc t[2] = {{"w.codes", LOFP_DTYPE_U8, 2, cs, codes, crows * 32},
                             {"w.scales", LOFP_DTYPE_F8_E8M0, 2, ss, scales, crows * 2}};
    lofp_metadata_entry m = {"lofp:w", value};
    size_t len = 0;
    lofp_file_encode(LOFP_FORMAT_SAFETENSORS, t, 2, &m, 1, NULL, 0, &len, NULL);
    *mem = malloc(len);
    lofp_file *f = NULL;
    if (lofp_file_encode(LOFP_FORMAT_SAFETENSORS, t, 2, &m, 1, *mem, len, &len, NULL) != LOFP_OK ||
        lofp_file_open_memory(*mem, len, LOFP_FORMAT_SAFETENSORS, "lie.safetensors", &f, NULL) != LOFP_OK)
        return NULL;
    return f;
}

static void test_load_refuses_lies(void)
{
    char v[512];
    const char *shapes[] = {"[4,64]", "[4096,64]", "[4,4,64]", "[18446744073709551615,64]"};
    for (int i = 0; i < 4; i++) {
        snprintf(v, sizeof v, "scheme=mxfp4;rounding=rne;scale_rule=floor;block=32;layout=linear;pad_byte=0;shape=%s;"
                 "padded_k=64;two_level=0;c=0.156;rotate=0;hadamard=butterfly;seed=0;source_dtype=F32;lofp_version=0", shapes[i]);
        void *mem = NULL;
        lofp_file *f = lying_file(v, 4, &mem);
        CHECK(f != NULL);
        lofp_qtensor q;
        lofp_io_error e;
        lofp_status st = f ? lofp_qtensor_load(f, "lie.safetensors", "w", &q, &e) : LOFP_ERR_IO;
        if (i == 0) {
            CHECKF(st == LOFP_OK, "consistent file refused: %s", e.message);
            if (st == LOFP_OK) {
                float out[256];
                CHECK_OK(lofp_qtensor_dequantize(&q, out));
                CHECK(q.codes_bytes == 128 && q.scales_bytes == 8 && q.global == 1.0f);
            }
        } else {
            CHECKF(st == LOFP_ERR_FORMAT && strstr(e.message, "lie.safetensors") && strstr(e.message, "'w"),
                   "shape %s: status %d, %s", shapes[i], (int)st, e.message);
            CHECK(q.codes == NULL && q.scales == NULL);
            CHECK(lofp_qtensor_dequantize(&q, (float *)v) == LOFP_ERR_INVALID_ARG);
        }
        lofp_file_close(f);
        free(mem);
    }
}

/* ---- the pipelines ---- */

typedef struct { int opened, finished, aborted, progress, notes; } hooks_seen;

static lofp_status h_open(void *ctx, const char *path, lofp_file_format fmt, const lofp_tensor_desc *t, size_t n,
                          const lofp_metadata_entry *meta, size_t nm, unsigned flags, lofp_writer **out, lofp_io_error *err)
{
    ((hooks_seen *)ctx)->opened++;
    return lofp_writer_open(path, fmt, t, n, meta, nm, flags, out, err);
}
static lofp_status h_finish(void *ctx, lofp_writer *w, lofp_io_error *err)
{
    ((hooks_seen *)ctx)->finished++;
    return lofp_writer_finish(w, err);
}
static void h_abort(void *ctx, lofp_writer *w)
{
    ((hooks_seen *)ctx)->aborted++;
    lofp_writer_abort(w);
}
static void h_progress(void *ctx, const char *t, size_t i, size_t n) { ((hooks_seen *)ctx)->progress++; }
static void h_note(void *ctx, const char *line) { ((hooks_seen *)ctx)->notes++; }

static void test_pipelines(void)
{
    enum { R = 37, K = 96 };
    static float x[R * K];
    tu_rng rng = {7};
    for (size_t i = 0; i < R * K; i++) x[i] = (float)tu_normal(&rng);
    int32_t ids[3] = {1, 2, 3};
    size_t xs[2] = {R, K}, is[1] = {3};
    lofp_tensor_desc in[2] = {{"layer.w", LOFP_DTYPE_F32, 2, xs, x, sizeof x}, {"ids", LOFP_DTYPE_I32, 1, is, ids, sizeof ids}};
    char pin[300], pq[300], pd[300];
    path_of(pin, sizeof pin, "in.safetensors");
    path_of(pq, sizeof pq, "q.safetensors");
    path_of(pd, sizeof pd, "d.safetensors");
    CHECK_OK(lofp_file_write(pin, LOFP_FORMAT_AUTO, in, 2, NULL, 0, NULL));

    const char *schemes[] = {"nvfp4", "mxfp4", "mxfp8-e4m3"};
    const lofp_layout layouts[] = {LOFP_LAYOUT_LINEAR, LOFP_LAYOUT_SWIZZLE_128X4, LOFP_LAYOUT_PACKED_U32};
    for (int si = 0; si < 3; si++) {
        hooks_seen seen = {0};
        lofp_qfile_writer_ops ops = {h_open, h_finish, h_abort, &seen};
        lofp_qfile_quantize_options o;
        lofp_qfile_quantize_options_init(&o);
        lofp_scheme_preset(schemes[si], &o.scheme);
        o.layout = layouts[si];
        o.chunk_bytes = 1000;                 /* several chunks */
        o.write_flags = LOFP_WRITE_NO_SYNC;
        o.writer = &ops;
        o.progress = h_progress;
        o.note = h_note;
        o.ctx = &seen;
        lofp_io_error e;
        CHECKF(lofp_qfile_quantize(pin, pq, &o, &e) == LOFP_OK, "%s: %s", schemes[si], e.message);
        CHECK(seen.opened == 1 && seen.finished == 1 && seen.aborted == 0 && seen.progress == 2);
        /* the reference: the whole tensor at once */
        lofp_scheme s = o.scheme;
        size_t cb = lofp_codes_bytes(&s, R, K), sb = lofp_scales_bytes(&s, R, K);
        uint8_t *codes = malloc(cb), *sc = malloc(sb);
        float g = 1.0f, *ref = malloc(sizeof x), *got = malloc(sizeof x);
        CHECK_OK(lofp_quantize(&s, LOFP_DTYPE_F32, x, R, K, codes, sc, &g, NULL));
        CHECK_OK(lofp_dequantize(&s, codes, sc, g, R, K, LOFP_DTYPE_F32, ref));
        lofp_file *f = NULL;
        CHECK_OK(lofp_file_open(pq, LOFP_FORMAT_AUTO, &f, NULL));
        lofp_qtensor q;
        CHECK(f && lofp_qtensor_load(f, pq, "layer.w", &q, &e) == LOFP_OK);
        if (f && q.codes) {
            CHECK(q.codes_bytes == cb && memcmp(q.codes, codes, cb) == 0 && q.global == g && q.layout == layouts[si]);
            CHECK_OK(lofp_qtensor_dequantize(&q, got));
            CHECK(memcmp(got, ref, sizeof x) == 0);
            CHECK(lofp_file_find(f, "ids") && lofp_qfile_name_at(f, 0) && !strcmp(lofp_qfile_name_at(f, 0), "layer.w"));
        }
        lofp_file_close(f);
        lofp_qfile_dequantize_options d;
        lofp_qfile_dequantize_options_init(&d);
        d.chunk_bytes = 1000;
        d.write_flags = LOFP_WRITE_NO_SYNC;
        CHECKF(lofp_qfile_dequantize(pq, pd, &d, &e) == LOFP_OK, "%s", e.message);
        CHECK_OK(lofp_file_open(pd, LOFP_FORMAT_AUTO, &f, NULL));
        const lofp_tensor_info *t = f ? lofp_file_find(f, "layer.w") : NULL;
        CHECK(t && t->nbytes == sizeof x && memcmp(t->data, ref, sizeof x) == 0);
        CHECK(f && lofp_file_count(f) == 2 && lofp_file_find(f, "ids"));
        lofp_file_close(f);
        free(codes); free(sc); free(ref); free(got);
    }

    /* a failure after the writer opened: aborted through the hook, nothing left, the old file kept */
    x[5 * K + 7] = NAN;
    CHECK_OK(lofp_file_write(pin, LOFP_FORMAT_AUTO, in, 2, NULL, 0, NULL));
    hooks_seen seen = {0};
    lofp_qfile_writer_ops ops = {h_open, h_finish, h_abort, &seen};
    lofp_qfile_quantize_options o;
    lofp_qfile_quantize_options_init(&o);
    o.writer = &ops;
    lofp_io_error e;
    long before = -1;
    FILE *fp = fopen(pq, "rb");
    if (fp) { fseek(fp, 0, SEEK_END); before = ftell(fp); fclose(fp); }
    CHECK(lofp_qfile_quantize(pin, pq, &o, &e) == LOFP_ERR_NONFINITE);
    CHECKF(strstr(e.message, "layer.w") && strstr(e.message, "flat index 487"), "%s", e.message);
    CHECK(seen.opened == 1 && seen.aborted == 1 && seen.finished == 0);
    fp = fopen(pq, "rb");
    long after = -1;
    if (fp) { fseek(fp, 0, SEEK_END); after = ftell(fp); fclose(fp); }
    CHECK(before > 0 && after == before);
    /* the output is never the input; a non-safetensors output is refused before anything */
    seen.opened = 0;
    CHECK(lofp_qfile_quantize(pin, pin, &o, &e) == LOFP_ERR_INVALID_ARG && strstr(e.message, "same file"));
    CHECK(lofp_qfile_dequantize(pq, pq, &(lofp_qfile_dequantize_options){LOFP_DTYPE_F32, 1, 0, 0, NULL, NULL, NULL}, &e) ==
          LOFP_ERR_INVALID_ARG);
    char pn[300];
    path_of(pn, sizeof pn, "q.npy");
    CHECK(lofp_qfile_quantize(pin, pn, &o, &e) == LOFP_ERR_INVALID_ARG && access(pn, F_OK) != 0);
    /* dequantize of a file without lofp tensors */
    CHECK(lofp_qfile_dequantize(pin, pd, &(lofp_qfile_dequantize_options){LOFP_DTYPE_F32, 1, 0, 0, NULL, NULL, NULL}, &e) ==
          LOFP_ERR_NOT_FOUND);
    CHECK(seen.opened == 0);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/lofp_test_qfile.XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    test_meta_bytes();
    test_load_refuses_lies();
    test_pipelines();
    char p[300];
    const char *names[] = {"in.safetensors", "q.safetensors", "d.safetensors"};
    for (int i = 0; i < 3; i++) { path_of(p, sizeof p, names[i]); unlink(p); }
    rmdir(dir);
    return tu_finish("test_qfile");
}
