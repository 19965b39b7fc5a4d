/* cmd_attention.c -- `lofp attention`: decode attention over a paged KV cache built from .npy
 * files, with the shapes of vLLM's reference_ultraquant_attention (Q [B, Hq, D], K and V
 * [B, N, Hk, D]); writes the fp32 output [B, Hq, D]. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lofp/io.h"
#include "lofp/kvcache.h"
#include "qtensor.h"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: lofp attention --q Q.npy --k K.npy --v V.npy [--sinks S.npy] [--scale X|X.npy]\n"
        "                      [--kv ultraquant|fp32|bf16] [options] OUT.npy\n\n"
        "Stores K and V ([B, N, Hk, D]) into a paged cache (UltraQuant: K Hadamard-rotated, both\n"
        "encoded to FP4 with E8M0 scales), then runs one decode step for the queries Q ([B, Hq, D])\n"
        "and writes the fp32 output [B, Hq, D] to OUT.npy. Inputs may be f32, f16 or f64 .npy.\n"
        "UltraQuant follows vLLM's reference_ultraquant_attention (Q rotated, cast through E4M3;\n"
        "E4M3 saturates at 448 where torch gives NaN past 464); fp32/bf16 caches compute plain\n"
        "attention. docs/KV.md has the details.\n\n"
        "options:\n"
        "  --scale X           softmax scale, a number or a .npy holding one (default 1/sqrt(D))\n"
        "  --sinks S.npy       per-head sink logits [Hq] (added to the softmax denominator)\n"
        "  --kv K              cache type: ultraquant (default), fp32, bf16\n"
        "  --hadamard H        K rotation at store: butterfly (default, vLLM's store kernel) or\n"
        "                      dense (the reference's matmul)\n"
        "  --block-size N      tokens per cache block (default 64)\n"
        "  --path P            auto (default), reference, scalar, avx2\n"
        "  --threads N         worker threads (default 1)\n"
        "  --split N           split-K partition in tokens (default: automatic)\n"
        "  --seq-lens a,b,...  attend to only the first a, b, ... tokens of each sequence\n"
        "  --expect R.npy      compare the output with R: print max|out-R| / max|R|; the exit\n"
        "                      status is 3 when it exceeds --tol (default 1e-4)\n");
}

typedef struct {
    lofp_file *f;
    const lofp_tensor_info *t;
    float *data; /* owned fp32 copy */
} npy_in;

static int load_f32(const char *path, const char *what, npy_in *in)
{
    lofp_io_error err;
    memset(in, 0, sizeof *in);
    if (lofp_file_open(path, LOFP_FORMAT_AUTO, &in->f, &err) != LOFP_OK)
        return cli_error("attention", "%s: %s", what, err.message);
    in->t = lofp_file_tensor(in->f, 0);
    if (!in->t) return cli_error("attention", "%s: %s holds no tensor", what, path);
    if (!lofp_dtype_is_float(in->t->dtype))
        return cli_error("attention", "%s: %s has dtype %s; f32, f16, bf16 or f64 expected", what, path,
                         lofp_dtype_name(in->t->dtype));
    if (!(in->data = qt_tensor_to_f32(in->t))) return cli_error("attention", "out of memory");
    return 0;
}

static void npy_free(npy_in *in)
{
    free(in->data);
    lofp_file_close(in->f);
    memset(in, 0, sizeof *in);
}

static const char *shape_str(const lofp_tensor_info *t, char *buf, size_t cap)
{
    size_t o = 0;
    o += (size_t)snprintf(buf + o, cap - o, "[");
    for (size_t i = 0; i < t->ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%zu", i ? ", " : "", t->shape[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
    return buf;
}

int lofp_cmd_attention(int argc, char **argv)
{
    const char *qp = NULL, *kp = NULL, *vp = NULL, *sp = NULL, *scale_arg = NULL, *outp = NULL;
    const char *expect = NULL, *seq_arg = NULL;
    lofp_kv_format kv = LOFP_KV_ULTRAQUANT;
    lofp_hadamard_kind had = LOFP_HADAMARD_BUTTERFLY;
    lofp_attn_path path = LOFP_ATTN_AUTO;
    long block = 64, threads = 1, split = 0;
    double tol = 1e-4;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (cli_is_help(a)) { usage(stdout); return 0; }
        if (!strcmp(a, "--q") && more) qp = argv[++i];
        else if (!strcmp(a, "--k") && more) kp = argv[++i];
        else if (!strcmp(a, "--v") && more) vp = argv[++i];
        else if (!strcmp(a, "--sinks") && more) sp = argv[++i];
        else if (!strcmp(a, "--scale") && more) scale_arg = argv[++i];
        else if (!strcmp(a, "--expect") && more) expect = argv[++i];
        else if (!strcmp(a, "--tol") && more) { if (cli_parse_float("attention", "--tol", argv[++i], 0, &tol)) return 1; if (tol < 0) return cli_error("attention", "--tol must not be negative"); }
        else if (!strcmp(a, "--seq-lens") && more) seq_arg = argv[++i];
        else if (!strcmp(a, "--block-size") && more) { if (cli_parse_long("attention", "--block-size", argv[++i], 1, 1L << 20, &block)) return 1; }
        else if (!strcmp(a, "--threads") && more) { if (cli_parse_long("attention", "--threads", argv[++i], 1, 256, &threads)) return 1; }
        else if (!strcmp(a, "--split") && more) { if (cli_parse_long("attention", "--split", argv[++i], 0, 1L << 30, &split)) return 1; }
        else if (!strcmp(a, "--kv") && more) {
            const char *k = argv[++i];
            if (lofp_kv_format_from_name(k, &kv) != LOFP_OK)
                return cli_error("attention", "--kv must be ultraquant, fp32 or bf16 (got '%s')", k);
        } else if (!strcmp(a, "--hadamard") && more) {
            const char *h = argv[++i];
            if (!strcmp(h, "butterfly")) had = LOFP_HADAMARD_BUTTERFLY;
            else if (!strcmp(h, "dense")) had = LOFP_HADAMARD_DENSE;
            else return cli_error("attention", "--hadamard must be butterfly or dense (got '%s')", h);
        } else if (!strcmp(a, "--path") && more) {
            const char *p = argv[++i];
            int found = 0;
            for (int k = 0; k <= (int)LOFP_ATTN_AVX2; k++)
                if (!strcmp(p, lofp_attn_path_name((lofp_attn_path)k))) { path = (lofp_attn_path)k; found = 1; }
            if (!found) return cli_error("attention", "--path must be auto, reference, scalar or avx2 (got '%s')", p);
        } else if (a[0] == '-' && a[1]) {
            usage(stderr);
            return cli_error("attention", "unknown or incomplete option '%s'", a);
        } else if (!outp) outp = a;
        else return cli_error("attention", "more than one output file given ('%s', '%s')", outp, a);
    }
    if (!qp || !kp || !vp || !outp) {
        usage(stderr);
        return cli_error("attention", "--q, --k, --v and an output file are required");
    }
    {
        size_t ol = strlen(outp);
        if (ol < 4 || strcmp(outp + ol - 4, ".npy") != 0)
            return cli_error("attention", "the output must be a .npy file: %s", outp);
        const char *ins[] = {qp, kp, vp, sp, expect};
        if (cli_refuse_same("attention", outp, ins, 5)) return 1;
    }
    if (block < 1 || block > 1 << 20) return cli_error("attention", "--block-size must be 1..1048576");
    if (threads < 1 || threads > 256) return cli_error("attention", "--threads must be 1..256");
    if (split < 0 || split > 1 << 30) return cli_error("attention", "--split must be >= 0");

    int rc = 1;
    npy_in Q, K, V, S, E, SC;
    memset(&S, 0, sizeof S);
    memset(&E, 0, sizeof E);
    memset(&SC, 0, sizeof SC);
    memset(&K, 0, sizeof K);
    memset(&V, 0, sizeof V);
    uint8_t *cache = NULL;
    int32_t *bt = NULL, *lens = NULL;
    int64_t *slots = NULL;
    float *out = NULL;
    char s1[128], s2[128];
    if (load_f32(qp, "--q", &Q)) goto done;
    if (load_f32(kp, "--k", &K) || load_f32(vp, "--v", &V)) goto done;
    if (Q.t->ndim != 3 || K.t->ndim != 4) {
        cli_error("attention", "Q must be [B, Hq, D] and K, V [B, N, Hk, D]; got Q %s, K %s",
                  shape_str(Q.t, s1, sizeof s1), shape_str(K.t, s2, sizeof s2));
        goto done;
    }
    if (V.t->ndim != 4 || memcmp(V.t->shape, K.t->shape, 4 * sizeof(size_t)) != 0) {
        cli_error("attention", "V %s must have the shape of K %s", shape_str(V.t, s1, sizeof s1),
                  shape_str(K.t, s2, sizeof s2));
        goto done;
    }
    const size_t B = Q.t->shape[0], Hq = Q.t->shape[1], D = Q.t->shape[2];
    const size_t N = K.t->shape[1], Hk = K.t->shape[2];
    if (K.t->shape[0] != B || K.t->shape[3] != D) {
        cli_error("attention", "Q %s and K %s disagree on B or D", shape_str(Q.t, s1, sizeof s1),
                  shape_str(K.t, s2, sizeof s2));
        goto done;
    }
    if (B == 0 || N == 0 || Hq == 0 || Hk == 0 || B > INT32_MAX || N > INT32_MAX || Hq > UINT32_MAX) {
        cli_error("attention", "empty or oversized shape: B=%zu N=%zu Hq=%zu Hk=%zu", B, N, Hq, Hk);
        goto done;
    }
    float scale = 1.0f / sqrtf((float)D);
    if (scale_arg) {
        size_t l = strlen(scale_arg);
        if (l > 4 && !strcmp(scale_arg + l - 4, ".npy")) {
            if (load_f32(scale_arg, "--scale", &SC)) goto done;
            if (SC.t->numel != 1) { cli_error("attention", "--scale %s must hold one number", scale_arg); goto done; }
            scale = SC.data[0];
        } else {
            char *end;
            scale = strtof(scale_arg, &end);
            if (*end || end == scale_arg || !isfinite(scale)) { cli_error("attention", "--scale: '%s' is not a finite number", scale_arg); goto done; }
        }
    }
    if (sp) {
        if (load_f32(sp, "--sinks", &S)) goto done;
        if (S.t->numel != Hq) { cli_error("attention", "--sinks must hold Hq = %zu values, not %zu", Hq, S.t->numel); goto done; }
    }
    lens = malloc(B * sizeof(int32_t));
    if (!lens) { cli_error("attention", "out of memory"); goto done; }
    for (size_t b = 0; b < B; b++) lens[b] = (int32_t)N;
    if (seq_arg) {
        const char *p = seq_arg;
        for (size_t b = 0; b < B; b++) {
            char *end;
            long v = *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : (end = (char *)p, 0);
            if (end == p || v < 1 || (size_t)v > N) { cli_error("attention", "--seq-lens '%s': needs B = %zu numbers in 1..%zu", seq_arg, B, N); goto done; }
            lens[b] = (int32_t)v;
            p = end;
            if (*p == ',' && b + 1 < B) p++;
            else if (b + 1 < B || *p) { cli_error("attention", "--seq-lens '%s': needs exactly B = %zu comma-separated numbers", seq_arg, B); goto done; }
        }
    }

    /* the cache: each sequence gets ceil(N / block) blocks, in order */
    lofp_kv_cache_desc d;
    const size_t per = (N + (size_t)block - 1) / (size_t)block;
    lofp_status st = lofp_kv_desc_init(&d, kv, (uint32_t)D, (uint32_t)Hk, (uint32_t)block, B * per);
    if (st == LOFP_ERR_SHAPE) {
        cli_error("attention", "head dim D = %zu: must be a power of two in [32, 512]", D);
        goto done;
    }
    if (st != LOFP_OK) { cli_error("attention", "cache: %s", lofp_status_name(st)); goto done; }
    d.hadamard = had;
    cache = malloc(lofp_kv_cache_bytes(&d));
    bt = malloc(B * per * sizeof(int32_t));
    slots = malloc(N * sizeof(int64_t));
    out = malloc(B * Hq * D * sizeof(float));
    if (!cache || !bt || !slots || !out) { cli_error("attention", "out of memory (cache %zu bytes)", lofp_kv_cache_bytes(&d)); goto done; }
    for (size_t i = 0; i < B * per; i++) bt[i] = (int32_t)i;
    for (size_t b = 0; b < B; b++) {
        for (size_t t = 0; t < N; t++) slots[t] = (int64_t)(b * per * (size_t)block + t);
        lofp_kv_store_report rep;
        st = lofp_kv_store(&d, cache, LOFP_DTYPE_F32, K.data + b * N * Hk * D, V.data + b * N * Hk * D, N, slots, 0, &rep);
        if (st == LOFP_ERR_NONFINITE) {
            size_t i = rep.first_bad_index;
            float bv = (rep.first_bad_in_v ? V.data : K.data)[b * N * Hk * D + i];
            if (isfinite(bv))
                cli_error("attention", "K[%zu, %zu, %zu, :]: the Hadamard rotation overflows fp32 (finite input up to |K| = %g at [%zu, %zu, %zu, %zu])",
                          b, i / (Hk * D), i / D % Hk, fabs((double)bv), b, i / (Hk * D), i / D % Hk, i % D);
            else
                cli_error("attention", "%s[%zu, %zu, %zu, %zu] is not finite", rep.first_bad_in_v ? "V" : "K", b,
                          i / (Hk * D), i / D % Hk, i % D);
            goto done;
        }
        if (st != LOFP_OK) { cli_error("attention", "store: %s", lofp_status_name(st)); goto done; }
    }

    lofp_attn_params p;
    lofp_attn_params_init(&p, (uint32_t)Hq, scale, per);
    p.sinks = sp ? S.data : NULL;
    p.path = path;
    p.threads = (unsigned)threads;
    p.split_tokens = (uint32_t)split;
    lofp_attn_report rep;
    double t0 = cli_now();
    st = lofp_attention_decode(&d, &p, cache, B, LOFP_DTYPE_F32, Q.data, bt, lens, out, &rep);
    double el = cli_now() - t0;
    if (st == LOFP_ERR_SHAPE && Hq % Hk) { cli_error("attention", "Hq = %zu is not a multiple of Hk = %zu", Hq, Hk); goto done; }
    if (st == LOFP_ERR_NONFINITE) {
        size_t i = rep.first_bad_index;
        cli_error("attention", "Q[%zu, %zu, %zu] is not finite", i / (Hq * D), i / D % Hq, i % D);
        goto done;
    }
    if (st != LOFP_OK) { cli_error("attention", "%s", lofp_status_name(st)); goto done; }

    size_t shape[3] = { B, Hq, D };
    lofp_tensor_desc td = { NULL, LOFP_DTYPE_F32, 3, shape, out, B * Hq * D * sizeof(float) };
    lofp_io_error err;
    if (cli_write_file(outp, LOFP_FORMAT_NPY, &td, 1, NULL, 0, &err) != LOFP_OK) {
        cli_error("attention", "%s", err.message);
        goto done;
    }
    fprintf(stderr, "attention: B=%zu Hq=%zu Hk=%zu D=%zu N=%zu kv=%s path=%s threads=%ld scale=%g%s: %.3f ms, %zu partitions%s\n",
            B, Hq, Hk, D, N, lofp_kv_format_name(kv),
            lofp_attn_path_name(rep.path), threads, (double)scale, sp ? " sinks" : "", el * 1e3, rep.partitions,
            rep.saturated_q ? " (some rotated Q values past 464 saturated to 448)" : "");
    rc = 0;
    if (expect) {
        if (load_f32(expect, "--expect", &E)) { rc = 1; goto done; }
        if (E.t->numel != B * Hq * D) { cli_error("attention", "--expect holds %zu values, the output %zu", E.t->numel, B * Hq * D); rc = 1; goto done; }
        lofp_error_stats es;
        lofp_error_stats_compute(E.data, out, B * Hq * D, &es);
        double r = es.x_max_abs > 0 ? es.max_abs / es.x_max_abs : es.max_abs;
        printf("max|out - expect| / max|expect| = %.3g (tolerance %.3g): %s\n", r, tol, r <= tol ? "ok" : "EXCEEDED");
        if (!(r <= tol)) rc = 3;
    }
done:
    npy_free(&Q); npy_free(&K); npy_free(&V); npy_free(&S); npy_free(&E); npy_free(&SC);
    free(cache); free(bt); free(slots); free(out); free(lens);
    return rc;
}
