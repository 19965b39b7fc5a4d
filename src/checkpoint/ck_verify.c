/* ck_verify.c -- lofp_ckpt_verify: the check behind `lofp verify-checkpoint ORIGINAL QUANTIZED`
 * and lofp.verify_checkpoint, kept in the library so both front ends give the same lines. Each
 * quantized tensor of QUANTIZED is re-quantized from the dense tensor of the same name in
 * ORIGINAL by lofp_verify_tensor (every producer profile, every storage variant). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lofp/cast.h"
#include "lofp/checkpoint.h"

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Appends one line; -1 only when out of memory. */
static int add_line(lofp_ckpt_verify_report *r, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **nl = realloc(r->lines, (r->n_lines + 1) * sizeof *nl);
    if (!nl) return -1;
    r->lines = nl;
    if (!(r->lines[r->n_lines] = dup_str(buf))) return -1;
    r->n_lines++;
    return 0;
}

void lofp_ckpt_verify_report_release(lofp_ckpt_verify_report *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->n_lines; i++) free(r->lines[i]);
    free(r->lines);
    free(r->description);
    memset(r, 0, sizeof *r);
}

lofp_status lofp_ckpt_verify(const char *original, const char *quantized, int quiet, lofp_ckpt_verify_report *r,
                             lofp_io_error *err)
{
    memset(r, 0, sizeof *r);
    lofp_ckpt *orig = NULL, *q = NULL;
    lofp_status st = lofp_ckpt_open(original, &orig, err);
    if (st != LOFP_OK) return st;
    if ((st = lofp_ckpt_open(quantized, &q, err)) != LOFP_OK) { lofp_ckpt_close(orig); return st; }
    lofp_status ret = LOFP_OK;
    if (!(r->description = dup_str(lofp_ckpt_describe(q)))) { ret = LOFP_ERR_NOMEM; goto out; }
    for (size_t i = 0; i < lofp_ckpt_count(q); i++) {
        lofp_ckpt_tensor t;
        lofp_io_error e2;
        if (lofp_ckpt_get(q, i, &t, &e2) != LOFP_OK) {
            /* the reader's own checks (missing scales, an inverted per-tensor scale) */
            r->n_bad++;
            if (add_line(r, "FAIL %s", e2.message)) { ret = LOFP_ERR_NOMEM; goto out; }
            continue;
        }
        if (!t.quantized) { lofp_ckpt_tensor_release(&t); continue; }
        r->n_quantized++;
        lofp_ckpt_tensor o;
        int found = 0;
        for (size_t j = 0; j < lofp_ckpt_count(orig) && !found; j++) {
            if (lofp_ckpt_get(orig, j, &o, &e2) != LOFP_OK) continue;
            if (!o.quantized && !strcmp(o.name, t.name)) found = 1;
            else lofp_ckpt_tensor_release(&o);
        }
        int bad_line = 0;
        if (!found) {
            r->n_bad++;
            bad_line = add_line(r, "FAIL %s: no tensor of that name in %s", t.name, original);
            lofp_ckpt_tensor_release(&t);
            if (bad_line) { ret = LOFP_ERR_NOMEM; goto out; }
            continue;
        }
        lofp_dtype dt = o.dtype;
        int ok = lofp_dtype_is_dense(dt);
        size_t es = dt == LOFP_DTYPE_F32 ? 4 : 2, numel = t.rows * t.k;
        if (!ok || o.nbytes != numel * es || t.kp != t.k) {
            r->n_bad++;
            bad_line = add_line(r, "FAIL %s: original is %s with %zu bytes, the quantized tensor needs %zu values%s",
                                t.name, lofp_dtype_name(o.dtype), o.nbytes, numel,
                                t.kp != t.k ? " (padded K is not checked)" : "");
            lofp_ckpt_tensor_release(&o);
            lofp_ckpt_tensor_release(&t);
            if (bad_line) { ret = LOFP_ERR_NOMEM; goto out; }
            continue;
        }
        uint8_t *x = malloc(numel * es);
        if (!x) { lofp_ckpt_tensor_release(&o); lofp_ckpt_tensor_release(&t); ret = LOFP_ERR_NOMEM; goto out; }
        if (t.transposed && t.ndim == 3) {
            /* gpt-oss: the dense tensor is [E, K, N], the quantized one [E, N, K] */
            size_t E = t.shape[0], N = t.shape[1], K = t.shape[2];
            const uint8_t *src = o.data;
            for (size_t e = 0; e < E; e++)
                for (size_t a = 0; a < K; a++)
                    for (size_t b = 0; b < N; b++)
                        memcpy(x + ((e * N + b) * K + a) * es, src + ((e * K + a) * N + b) * es, es);
        } else {
            memcpy(x, o.data, numel * es);
        }
        const float *gp = t.direction == LOFP_CKPT_SCALE_NONE ? NULL : &t.stored_scale;
        lofp_verify_result v;
        lofp_status vs = lofp_verify_tensor(t.scheme.id, t.scheme.block, dt, x, t.rows, t.k, t.codes, t.scales, gp,
                                            t.direction == LOFP_CKPT_SCALE_DECODE, &v);
        int clean = vs == LOFP_OK && v.nibbles == LOFP_VERIFY_NIBBLES_STANDARD &&
                    v.scale_layout == LOFP_LAYOUT_LINEAR && !v.global_inverted && v.row_shift == 0;
        if (vs != LOFP_OK && vs != LOFP_ERR_MISMATCH)
            bad_line = add_line(r, "FAIL %s: %s", t.name, lofp_status_name(vs));
        else if (!clean || !quiet)
            bad_line = add_line(r, "%s %s (%s): %s", clean ? "ok  " : "FAIL", t.name, lofp_scheme_name(t.scheme.id),
                                v.summary);
        if (clean) r->n_ok++;
        else r->n_bad++;
        free(x);
        lofp_ckpt_tensor_release(&o);
        lofp_ckpt_tensor_release(&t);
        if (bad_line) { ret = LOFP_ERR_NOMEM; goto out; }
    }
out:
    lofp_ckpt_close(q);
    lofp_ckpt_close(orig);
    if (ret != LOFP_OK) {
        lofp_ckpt_verify_report_release(r);
        snprintf(err->message, sizeof err->message, "verify-checkpoint: out of memory");
    }
    return ret;
}
