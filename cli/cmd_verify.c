/* cmd_verify.c -- `lofp verify A.safetensors B.safetensors C`: checks a GEMM result C[M,N]
 * produced by any program against the fp64 reference deq(A)·deq(B)^T on the same quantized
 * operands, and when the error is large, names the layout mistake that explains it (seed 000's
 * verify_nvfp4_gemm as a tool; SPEC §4). The check is the library's lofp_gemm_verify
 * (lofp/gemm.h); this file reads the three files and prints the report. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lofp/gemm.h"

#include "cli.h"
#include "qtensor.h"

static void verify_usage(FILE *f)
{
    fprintf(f,
        "usage: lofp verify A.safetensors B.safetensors C.(npy|safetensors) [--a NAME] [--b NAME]\n"
        "                   [--c NAME] [--tol X] [--threads N]\n\n"
        "A [M,K] and B [N,K] are quantized files written by lofp quantize (any scheme pair); C [M,N]\n"
        "is a GEMM result C = A·B^T from any program (f32, f16, bf16 or f64). Prints the relative\n"
        "Frobenius error of C against the fp64 reference on the same quantized operands. When it\n"
        "exceeds --tol (default 1e-2), tries the usual mistakes — scales read in another layout,\n"
        "packed words byte-reversed or row-major, MX scales written at 32 and read at 128, FP4\n"
        "nibbles in the other order, a per-tensor scale applied in the wrong direction or not at\n"
        "all — and names the one that reproduces C. --threads N runs the fp64 products on N threads\n"
        "(the report does not depend on it). Exit status: 0 within tolerance, 1 otherwise.\n");
}

static lofp_gemm_operand operand_of(const lofp_qtensor *q)
{
    lofp_gemm_operand o = {&q->scheme, q->rows, q->k, q->codes, q->scales, q->scales_bytes, q->layout, q->global};
    return o;
}

/* The first quantized tensor of f, or NULL (the error printed). */
static const char *first_qtensor(const lofp_file *f, const char *path)
{
    size_t nn = 0;
    const char **names = qt_list(f, &nn, NULL);
    const char *n = nn ? names[0] : NULL;
    free(names);
    if (!n) cli_error("verify", "%s: no quantized tensor", path);
    return n;
}

int lofp_cmd_verify(int argc, char **argv)
{
    const char *pos[3], *an = NULL, *bn = NULL, *cn = NULL;
    int npos = 0;
    lofp_gemm_verify_options opt;
    lofp_gemm_verify_options_init(&opt);
    long threads = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (cli_is_help(a)) { verify_usage(stdout); return 0; }
        else if (!strcmp(a, "--a") && more) an = argv[++i];
        else if (!strcmp(a, "--b") && more) bn = argv[++i];
        else if (!strcmp(a, "--c") && more) cn = argv[++i];
        else if (!strcmp(a, "--tol") && more) { if (cli_parse_float("verify", "--tol", argv[++i], 0, &opt.tol)) return 1; if (opt.tol < 0) return cli_error("verify", "--tol must not be negative"); }
        else if (!strcmp(a, "--threads") && more) { if (cli_parse_long("verify", "--threads", argv[++i], 1, 256, &threads)) return 1; }
        else if (a[0] == '-') { verify_usage(stderr); return cli_error("verify", "unknown option '%s'", a); }
        else if (npos < 3) pos[npos++] = a;
        else { verify_usage(stderr); return cli_error("verify", "unexpected argument '%s'", a); }
    }
    if (npos != 3) { verify_usage(stderr); return cli_error("verify", "need A, B and C"); }
    opt.threads = (unsigned)threads;
    lofp_io_error err;
    lofp_file *fa = NULL, *fb = NULL, *fc = NULL;
    int rc = 1;
    lofp_qtensor qa, qb;
    float *cf = NULL;
    lofp_gemm_verify_report *r = malloc(sizeof *r);
    if (!r) { cli_error("verify", "out of memory"); goto out; }
    if (lofp_file_open(pos[0], LOFP_FORMAT_AUTO, &fa, &err) || lofp_file_open(pos[1], LOFP_FORMAT_AUTO, &fb, &err) ||
        lofp_file_open(pos[2], LOFP_FORMAT_AUTO, &fc, &err)) { cli_error("verify", "%s", err.message); goto out; }
    if (!an && !(an = first_qtensor(fa, pos[0]))) goto out;
    if (lofp_qtensor_load(fa, pos[0], an, &qa, &err)) { cli_error("verify", "%s", err.message); goto out; }
    if (!bn && !(bn = first_qtensor(fb, pos[1]))) goto out;
    if (lofp_qtensor_load(fb, pos[1], bn, &qb, &err)) { cli_error("verify", "%s", err.message); goto out; }
    const lofp_tensor_info *tc = cn ? lofp_file_find(fc, cn) : lofp_file_tensor(fc, 0);
    if (!tc) { cli_error("verify", "%s: no tensor '%s'", pos[2], cn ? cn : ""); goto out; }
    size_t M = qa.rows, N = qb.rows, K = qa.k;
    if (qb.k != K) { cli_error("verify", "A has K=%zu but B has K=%zu", K, qb.k); goto out; }
    if (tc->numel != M * N) { cli_error("verify", "%s: '%s' has %zu elements, expected M*N = %zu*%zu", pos[2], tc->name, tc->numel, M, N); goto out; }
    if (!(cf = qt_tensor_to_f32(tc))) { cli_error("verify", "%s: '%s' is not floating point", pos[2], tc->name); goto out; }
    lofp_gemm_operand oa = operand_of(&qa), ob = operand_of(&qb);
    lofp_status st = lofp_gemm_verify(&oa, &ob, cf, &opt, r);
    if (st != LOFP_OK) { cli_error("verify", "cannot check the product: %s", lofp_status_name(st)); goto out; }
    printf("verify: C[%zu,%zu] = A·B^T, K=%zu; A %s (%s scales), B %s (%s scales)\n", M, N, K,
           lofp_scheme_name(qa.scheme.id), lofp_layout_name(qa.layout), lofp_scheme_name(qb.scheme.id), lofp_layout_name(qb.layout));
    printf("relative Frobenius error vs the fp64 reference: %.3e (tolerance %.1e)\n", r->error, opt.tol);
    if (r->ok) { printf("OK\n"); rc = 0; goto out; }
    printf("error is large; trying the usual mistakes:\n");
    for (size_t i = 0; i < r->ncandidates; i++) printf("  %-72s -> %.3e\n", r->candidates[i].desc, r->candidates[i].error);
    const char *best = r->closest >= 0 ? r->candidates[r->closest].desc : "none";
    double best_err = r->closest >= 0 ? r->candidates[r->closest].error : INFINITY;
    if (r->explained) printf("explained: %s (error %.3e)\n", best, best_err);
    else printf("no single known mistake explains it (closest: %s, %.3e)\n", best, best_err);
out:
    free(r); free(cf);
    lofp_file_close(fa); lofp_file_close(fb); lofp_file_close(fc);
    return rc;
}
