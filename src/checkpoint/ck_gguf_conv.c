/* ck_gguf_conv.c -- `lofp convert --to gguf IN.gguf OUT.gguf`: requantize an existing GGUF model to
 * MXFP4 (ggml type 39) or NVFP4 (type 40, with a <name>.scale F32 tensor holding the decode-direction
 * per-tensor scale, as llama.cpp's converter writes it), keeping every key-value pair (general.file_type
 * updated) and every tensor it does not quantize byte for byte. Tensors already in the target type
 * are kept byte for byte (with their .scale); MXFP4 tensors go to NVFP4 by the exact cast
 * (lofp_cast_mxfp4_to_nvfp4), never through their decoded values unless --requantize-unfit lets the
 * blocks that do not fit be requantized. */
#include "ck_internal.h"
#include "ck_method.h"
#include "lofp/cast.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const gguf_default_exclude[] = {
    "token_embd*", "output.weight", "*norm*", "*ffn_gate_inp*", "pos_embd*", "token_types*", "*rope*",
    "*.scale", "*.input_scale",
};

typedef struct {
    const gg_tensor *src;
    int quant;           /* 1: requantize; 2: the new .scale of the previous tensor */
    const gg_tensor *src_scale; /* NVFP4 source: its old .scale */
    int cast;            /* MXFP4 -> NVFP4 by the exact cast */
    char name[80];
    float scale_value;
} gplan;

lofp_status lofp_ck_convert_llama_dir(const char *in, const char *out, const lofp_ckpt_options *o, lofp_io_error *err);

/* The name of the .scale tensor of NVFP4 tensor `name`, as the reader (ck_read.c) looks it up:
 * "<name minus .weight>.scale", or "<name>.scale" for a tensor not named *.weight. 0 when it
 * would pass GGUF's 63 bytes. */
static int gguf_excluded(const char *name)
{
    return lofp_ck_globs_match(gguf_default_exclude, sizeof gguf_default_exclude / sizeof gguf_default_exclude[0], name);
}

/* The per-tensor scale tensor of NVFP4 tensor `name`: "<m>.scale" for "<m>.weight", else
 * "<name>.scale" -- the rule the GGUF reader (ck_read.c) looks it up by, for any tensor name.
 * Returns 0 when that name does not fit GGUF's 63 bytes (or cap). */
static int scale_name_of(const char *name, char *out, size_t cap)
{
    size_t n = strlen(name);
    if (lofp_ck_ends_with(name, ".weight")) n -= 7;
    int k = snprintf(out, cap, "%.*s.scale", (int)n, name);
    return k > 0 && (size_t)k < cap && k <= 63;
}

/* Whether the options ask for tensor t to be requantized (before the type and block checks). */
static int wanted(const gg_tensor *t, const lofp_ckpt_options *o)
{
    int want = lofp_ck_ends_with(t->name, ".weight") && t->n_dims >= 2 && !gguf_excluded(t->name);
    if (lofp_ck_globs_match(o->include, o->n_include, t->name) && t->n_dims >= 2) want = 1;
    /* a tensor of no elements has nothing to quantize: kept as it is */
    if (!t->ne[0] || !t->ne[1] || !t->ne[2] || !t->ne[3]) want = 0;
    return want && !lofp_ck_globs_match(o->exclude, o->n_exclude, t->name);
}

static int cmp_out_name(const void *a, const void *b)
{
    return strcmp((*(const gg_out_tensor *const *)a)->name, (*(const gg_out_tensor *const *)b)->name);
}

lofp_status lofp_ck_convert_gguf(const char *in, const char *out, const lofp_ckpt_options *o, lofp_io_error *err)
{
    if (lofp_ck_is_dir(in)) return lofp_ck_convert_llama_dir(in, out, o, err);
    gg_target tg;
    lofp_status st = lofp_gg_target(o, &tg, err);
    if (st) return st;
    lofp_scheme s = tg.s;
    const int nv = tg.nv, two = tg.two;
    const uint32_t gblk = tg.blk, gtype = tg.type, gbytes = tg.bytes;
    const char *const sch = nv ? "nvfp4" : "mxfp4";
    ck_method cm;
    st = lofp_ck_method_open(&cm, o->method, o->calibration, o->damp, o->act_order, o->mse_scales, s.profile, o->threads, err);
    if (st) return st;
    gg_file g;
    st = lofp_gg_open(in, &g, err);
    if (st) { lofp_ck_method_close(&cm); return st; }
    gplan *p = calloc(2 * g.n_t + 1, sizeof *p);
    gg_out_tensor *ot = calloc(2 * g.n_t + 1, sizeof *ot);
    size_t np = 0, nq = 0, nkeep_k = 0, nkeep_type = 0, nsame = 0, ncast = 0, unfit_total = 0;
    if (!p || !ot) { st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); goto done; }
    for (size_t i = 0; i < g.n_t; i++) {
        const gg_tensor *t = &g.t[i];
        int want = wanted(t, o);
        /* a .scale / .input_scale of an NVFP4 weight that is requantized is replaced: the weight is
         * "<m>.weight" or (a .scale only, see scale_name_of) "<m>" itself */
        if (lofp_ck_ends_with(t->name, ".scale") || lofp_ck_ends_with(t->name, ".input_scale")) {
            char base[96];
            int cut = (int)(strrchr(t->name, '.') - t->name), replaced = 0;
            for (int form = 0; form < 2 && !replaced; form++) {
                if (form == 1 && !lofp_ck_ends_with(t->name, ".scale")) break;
                snprintf(base, sizeof base, form ? "%.*s" : "%.*s.weight", cut, t->name);
                const gg_tensor *w = lofp_gg_find_tensor(&g, base);
                replaced = w && wanted(w, o) && lofp_gg_can_decode(w->type) && w->ne[0] % gblk == 0 && w->type != gtype;
            }
            if (replaced) continue;
        }
        if (want && !lofp_gg_can_decode(t->type)) {
            if (o->note) {
                char line[200];
                snprintf(line, sizeof line, "%s: left as %s (lofp does not decode that type)", t->name, lofp_gg_type_name(t->type));
                o->note(o->ctx, line);
            }
            nkeep_type++;
            want = 0;
        }
        if (want && t->ne[0] % gblk) {
            if (o->note) {
                char line[200];
                snprintf(line, sizeof line, "%s: left as %s (its rows of %llu values are not whole %s blocks of %u)", t->name,
                         lofp_gg_type_name(t->type), (unsigned long long)t->ne[0], sch, gblk);
                o->note(o->ctx, line);
            }
            nkeep_k++;
            want = 0;
        }
        if (want && t->type == gtype) {
            /* already the target type: kept byte for byte (an NVFP4 weight keeps its .scale) */
            nsame++;
            want = 0;
        }
        gplan *q = &p[np];
        q->src = t;
        q->quant = want;
        /* the exact cast needs a per-tensor scale: one-level NVFP4 requantizes the decoded values,
         * as llama.cpp's quantizer does */
        q->cast = want && two && t->type == GG_MXFP4;
        snprintf(q->name, sizeof q->name, "%s", t->name);
        gg_out_tensor *u = &ot[np];
        u->name = q->name;
        u->n_dims = t->n_dims;
        memcpy(u->ne, t->ne, sizeof u->ne);
        if (want) {
            u->type = gtype;
            size_t rows = (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
            u->nbytes = rows * (size_t)(t->ne[0] / gblk) * gbytes;
            if (t->type == GG_NVFP4) {
                char sn[96];
                q->src_scale = scale_name_of(t->name, sn, sizeof sn) ? lofp_gg_find_tensor(&g, sn) : NULL;
            }
            nq++;
        } else {
            u->type = t->type;
            u->nbytes = t->nbytes;
        }
        np++;
        if (want && two) {
            gplan *sc = &p[np];
            sc->quant = 2;
            if (!scale_name_of(t->name, sc->name, sizeof sc->name)) {
                st = lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s: tensor '%s': the name of its .scale tensor would pass GGUF's 63 bytes", in, t->name);
                goto done;
            }
            gg_out_tensor *v = &ot[np];
            v->name = sc->name;
            v->n_dims = 1;
            v->ne[0] = 1;
            v->ne[1] = v->ne[2] = v->ne[3] = 1;
            v->type = GG_F32;
            v->nbytes = 4;
            np++;
        }
    }
    /* two outputs of one name (an input "<m>.scale" kept beside a new one, or the new scales of
     * "<m>.weight" and "<m>"): refused before anything is written, naming where each comes from */
    if (np > 1) {
        const gg_out_tensor **by = malloc(np * sizeof *by);
        if (!by) { st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); goto done; }
        for (size_t i = 0; i < np; i++) by[i] = &ot[i];
        qsort(by, np, sizeof *by, cmp_out_name);
        for (size_t i = 1; i < np && !st; i++) {
            if (strcmp(by[i - 1]->name, by[i]->name)) continue;
            size_t a = (size_t)(by[i - 1] - ot), b = (size_t)(by[i] - ot);
            const char *from_a = p[a].quant == 2 ? p[a - 1].src->name : p[a].src->name;
            const char *from_b = p[b].quant == 2 ? p[b - 1].src->name : p[b].src->name;
            st = lofp_ck_fail(err, LOFP_ERR_INVALID_ARG,
                         "%s: two output tensors would be named '%s': %s of '%s' and %s of '%s' (the per-tensor scale of "
                         "an NVFP4 tensor '<m>.weight' or '<m>' is '<m>.scale'); leave one out with --exclude",
                         in, by[i]->name, p[a].quant == 2 ? "the scale" : "the tensor", from_a,
                         p[b].quant == 2 ? "the scale" : "the tensor", from_b);
        }
        free((void *)by);
        if (st) goto done;
    }
    /* MXFP4 -> NVFP4: the blocks that do not fit the exact cast, before anything is written */
    for (size_t i = 0; !st && i < np; i++) {
        gplan *q = &p[i];
        if (!q->cast) continue;
        ncast++;
        const gg_tensor *t = q->src;
        size_t K = (size_t)t->ne[0], rows = (size_t)(t->ne[1] * t->ne[2] * t->ne[3]), n = K * rows;
        uint8_t *codes = malloc(n / 2), *e8 = malloc(n / 32), *nc = malloc(n / 2), *ns = malloc(n / 16);
        lofp_cast_report rep;
        float G;
        if (!codes || !e8 || !nc || !ns) st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
        if (!st && lofp_gguf_to_mxfp4(t->data, rows, K, codes, e8)) st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s': bad MXFP4 blocks", in, t->name);
        if (!st && lofp_cast_mxfp4_to_nvfp4(codes, e8, rows, K, nc, ns, &G, &rep)) st = lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "%s: tensor '%s': cast failed", in, t->name);
        if (!st && rep.unfit_blocks) {
            int xmax = 0;
            lofp_cast_mxfp4_max_exponent(codes, e8, rows, K, &xmax);
            unfit_total += rep.unfit_blocks;
            char line[1024];
            size_t o2 = (size_t)snprintf(line, sizeof line, "%s: %zu of %zu blocks do not fit NVFP4 under per-tensor scale 2^%d:", t->name,
                                         rep.unfit_blocks, rep.blocks, ilogbf(G));
            for (size_t j = 0; j < rep.n_first && o2 < sizeof line - 160; j++) {
                size_t bi = rep.first_unfit[j];
                uint8_t e = e8[bi];
                if (e == 0xFF) o2 += (size_t)snprintf(line + o2, sizeof line - o2, "%s block %zu: its scale is 0xFF (NaN)", j ? ";" : "", bi);
                else o2 += (size_t)snprintf(line + o2, sizeof line - o2, "%s block %zu: its scale 2^%d is %d binades below the tensor's largest 2^%d (UE4M3 spans 17)",
                                            j ? ";" : "", bi, (int)e - 127, xmax - ((int)e - 127), xmax);
            }
            if (o->note) o->note(o->ctx, line);
            if (!o->requantize_unfit)
                st = lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s: tensor '%s': %zu MXFP4 block(s) do not fit NVFP4 exactly (first: block %zu). "
                             "Nothing written. --requantize-unfit requantizes those blocks alone from their decoded values",
                             in, t->name, rep.unfit_blocks, rep.first_unfit[0]);
        }
        free(codes); free(e8); free(nc); free(ns);
    }
    if (st) goto done;
    if (nq == 0 && nsame == 0) {
        st = lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: no tensor to requantize to %s (2-D+ .weight tensors other than token_embd, output and norms, rows a multiple of %u)",
                     in, sch, gblk);
        goto done;
    }
    {
        /* key-value pairs: all of them, general.file_type set, general.quantization_version added */
        lofp_sbuf kv = { 0 };
        uint64_t nkv = 0;
        int have_qv = 0;
        for (size_t i = 0; i < g.n_kv; i++) {
            if (!strcmp(g.kv[i].key, "general.file_type")) { lofp_gg_put_kv_u32(&kv, "general.file_type", nv ? 39u : 38u); nkv++; continue; }
            if (!strcmp(g.kv[i].key, "general.quantization_version")) have_qv = 1;
            lofp_gg_put_kv_raw(&kv, &g.kv[i]);
            nkv++;
        }
        if (!have_qv) { lofp_gg_put_kv_u32(&kv, "general.quantization_version", 2); nkv++; }
        if (kv.failed) { lofp_sbuf_free(&kv); st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); goto done; }
        gg_writer *w = NULL;
        st = lofp_gg_writer_open(out, g.alignment, kv.p, kv.len, nkv, ot, np, &w, err);
        lofp_sbuf_free(&kv);
        if (st) goto done;
        float G = 1.0f;
        for (size_t i = 0; !st && i < np; i++) {
            gplan *q = &p[i];
            if (q->quant == 0) st = lofp_gg_writer_put(w, q->src->data, q->src->nbytes, err);
            else if (q->quant == 2) {
                float dscale = lofp_nvfp4_decode_from_encode(G);
                st = lofp_gg_writer_put(w, &dscale, 4, err);
            } else {
                const gg_tensor *t = q->src;
                size_t K = (size_t)t->ne[0], rows = (size_t)(t->ne[1] * t->ne[2] * t->ne[3]), n = K * rows;
                float *x = malloc(n * sizeof *x);
                size_t cb = n / 2, sb = n / s.block;
                uint8_t *codes = malloc(cb), *split = malloc(cb), *scales = malloc(sb), *blk = malloc(rows * (K / gblk) * gbytes);
                if (!x || !codes || !split || !scales || !blk) st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
                if (!st && q->cast) {
                    /* exact: codes copied, scales 2^(x+g) (lofp/cast.h) */
                    uint8_t *e8 = malloc(n / 32);
                    if (!e8) st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
                    if (!st && lofp_gguf_to_mxfp4(t->data, rows, K, codes, e8)) st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s': bad MXFP4 blocks", in, t->name);
                    if (!st && lofp_cast_mxfp4_to_nvfp4(codes, e8, rows, K, codes, scales, &G, NULL))
                        st = lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "%s: tensor '%s': cast failed", in, t->name);
                    free(e8);
                }
                if (!st && !q->cast) st = lofp_gg_decode(t, x) ? lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s: tensor '%s': cannot decode", in, t->name) : LOFP_OK;
                if (!st && !q->cast && q->src_scale && q->src_scale->type == GG_F32) {
                    float f;
                    memcpy(&f, q->src_scale->data, 4);
                    for (size_t j = 0; j < n; j++) x[j] *= f;
                }
                lofp_quant_report rep;
                ck_plan plan;
                memset(&plan, 0, sizeof plan);
                if (!st && !q->cast) st = lofp_ck_method_plan(&cm, t->name, K, &plan, err);
                if (!st && !q->cast) {
                    lofp_status qs = lofp_ck_quantize_whole(&s, &plan.p, x, rows, K, codes, scales, &G, &rep);
                    if (qs == LOFP_ERR_NONFINITE)
                        st = lofp_ck_fail(err, qs, "%s: tensor '%s': NaN or Inf at flat index %zu (row %zu, column %zu)", in, t->name,
                                     rep.first_bad_index, rep.first_bad_index / K, rep.first_bad_index % K);
                    else if (qs) st = lofp_ck_fail(err, qs, "%s: tensor '%s': quantize failed (%s)", in, t->name, lofp_status_name(qs));
                }
                lofp_ck_plan_release(&plan);
                if (!st) st = lofp_fp4_repack(codes, split, rows, K, nv ? 16 : 32, LOFP_NIBBLE_STANDARD, LOFP_NIBBLE_GGUF)
                                  ? lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "%s: repack failed", t->name) : LOFP_OK;
                if (!st) {
                    size_t nb = n / gblk;
                    for (size_t b = 0; b < nb; b++) {
                        uint8_t *o2 = blk + b * gbytes;
                        if (nv) {
                            memcpy(o2, scales + 4 * b, 4);
                            memcpy(o2 + 4, split + 32 * b, 32);
                        } else {
                            o2[0] = scales[b];
                            memcpy(o2 + 1, split + 16 * b, 16);
                        }
                    }
                    st = lofp_gg_writer_put(w, blk, nb * gbytes, err);
                }
                free(x); free(codes); free(split); free(scales); free(blk);
            }
            if (!st) st = lofp_gg_writer_end_tensor(w, err);
            if (!st && o->progress) o->progress(o->ctx, out, 0, 1, i + 1, np);
        }
        if (!st) st = lofp_gg_writer_finish(w, err);
        else lofp_gg_writer_abort(w);
    }
    if (!st && o->note) {
        char line[400], cast_part[120] = "", same_part[80] = "";
        if (ncast)
            snprintf(cast_part, sizeof cast_part, ", %zu MXFP4 tensors cast to it exactly (%zu blocks requantized)", ncast, unfit_total);
        if (nsame) snprintf(same_part, sizeof same_part, "; %zu already %s kept byte for byte", nsame, sch);
        snprintf(line, sizeof line, "%zu tensors requantized to %s (GGUF type %u)%s%s; %zu kept for their shape, %zu for their type; %zu key-value pairs kept",
                 nq - ncast, sch, gtype, cast_part, same_part, nkeep_k, nkeep_type, g.n_kv);
        o->note(o->ctx, line);
    }
done:
    free(p);
    free(ot);
    lofp_gg_close(&g);
    lofp_ck_method_close(&cm);
    if (!st) lofp_ck_ok(err);
    return st;
}
