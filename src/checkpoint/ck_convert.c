/* ck_convert.c -- lofp_ckpt_convert for the safetensors formats (ModelOpt, compressed-tensors,
 * gpt-oss, lofp): checks the options, detects the input's format, picks the target's scheme, then
 * runs the plan (ck_conv_plan.c, or ck_conv_cast.c for an already-quantized input), the shards
 * (ck_conv_write.c) and the config files (ck_conv_config.c) into a staging directory renamed over
 * OUT (ck_stage.c). GGUF targets go to ck_gguf_conv.c. docs/CHECKPOINTS.md describes the result. */
#include "ck_conv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lofp_status lofp_ckpt_convert(const char *in, const char *out, const lofp_ckpt_options *o, lofp_io_error *err)
{
    if (!in || !out || !o) return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "convert: NULL argument");
    { lofp_status pf = lofp_ck_preflight(in, out, o, 0, err); if (pf) return pf; }
    if (o->shard_count && o->shard_index >= o->shard_count)
        return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "--shard %u/%u: the slice must be 1..%u", o->shard_index + 1, o->shard_count, o->shard_count);
    const int in_gguf = lofp_ckpt_is_gguf(in);
    if (o->to == LOFP_CKPT_GGUF && in_gguf) return lofp_ck_convert_gguf(in, out, o, err);
    if (in_gguf)
        return lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED,
                       "%s is a GGUF: lofp convert writes %s from safetensors model directories; GGUF -> %s has no exact "
                       "path here (GGUF names and keys do not map back to a Hugging Face directory). Dequantize first: "
                       "lofp import %s DENSE_DIR, then lofp convert --to %s DENSE_DIR OUT",
                       in, lofp_ckpt_format_name(o->to) ? lofp_ckpt_format_name(o->to) : "?", lofp_ckpt_format_name(o->to) ? lofp_ckpt_format_name(o->to) : "?",
                       in, lofp_ckpt_format_name(o->to) ? lofp_ckpt_format_name(o->to) : "?");
    ck_conv c;
    memset(&c, 0, sizeof c);
    c.o = o;
    c.to = o->to;
    if (o->to != LOFP_CKPT_MODELOPT && o->to != LOFP_CKPT_COMPRESSED_TENSORS && o->to != LOFP_CKPT_GPT_OSS &&
        o->to != LOFP_CKPT_LOFP && o->to != LOFP_CKPT_GGUF)
        return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "convert: the target must be modelopt, compressed-tensors, gpt-oss, lofp or gguf");
    lofp_status st = lofp_ck_model_open(in, &c.m, err);
    if (st) return st;
    if ((st = lofp_ck_model_checks(&c.m, o, 0, err)) != LOFP_OK) goto done;
    char why[256];
    c.from = lofp_ck_detect(&c.m, why, sizeof why);
    const char *sch = o->scheme;
    if (c.from == LOFP_CKPT_DENSE && o->to == LOFP_CKPT_GGUF) {
        lofp_ck_model_close(&c.m);
        return lofp_ck_convert_gguf(in, out, o, err);
    }
    if (c.from != LOFP_CKPT_DENSE) {
        /* an already-quantized input: exact casts only (docs/CHECKPOINTS.md "Exact casts") */
        if (o->to == LOFP_CKPT_GGUF) {
            st = lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED,
                         "%s is already a %s checkpoint (%s): %s -> gguf has no exact path in lofp (lofp writes GGUF from a "
                         "dense llama directory or by requantizing a GGUF). Dequantize first: lofp import %s DENSE_DIR, then "
                         "lofp convert --to gguf DENSE_DIR OUT.gguf",
                         in, lofp_ckpt_format_name(c.from), why, lofp_ckpt_format_name(c.from), in);
            goto done;
        }
        if (o->input_scales || o->pad || o->n_include || o->method != LOFP_METHOD_RTN || o->calibration) {
            st = lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "%s is already a %s checkpoint: %s applies to quantizing a dense model, not to a cast",
                         in, lofp_ckpt_format_name(c.from), o->input_scales ? "--input-scales" : o->pad ? "--pad" : o->n_include ? "--include"
                         : o->method != LOFP_METHOD_RTN ? "--method" : "--calibration");
            goto done;
        }
        st = lofp_ckpt_open(in, &c.rd, err);
        if (st) goto done;
        lofp_scheme_id in_id = LOFP_SCHEME_NVFP4;
        int found = 0;
        for (size_t i = 0; !st && !found && i < lofp_ckpt_count(c.rd); i++) {
            lofp_ckpt_tensor q;
            st = lofp_ckpt_get(c.rd, i, &q, err);
            if (!st && q.quantized) { in_id = q.scheme.id; found = 1; }
            lofp_ckpt_tensor_release(&q);
        }
        if (st) goto done;
        if (!sch) {
            if (lofp_conv_format_holds(o->to, in_id)) sch = lofp_scheme_name(in_id);
            else if (in_id == LOFP_SCHEME_MXFP4 && lofp_conv_format_holds(o->to, LOFP_SCHEME_NVFP4)) sch = "nvfp4";
            else {
                st = lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED,
                             "%s is a %s %s checkpoint; %s holds no %s and %s -> %s has no exact path. Dequantize first: "
                             "lofp import %s DENSE_DIR, then lofp convert --to %s DENSE_DIR OUT",
                             in, lofp_ckpt_format_name(c.from), lofp_scheme_name(in_id), lofp_ckpt_format_name(o->to),
                             lofp_scheme_name(in_id), lofp_scheme_name(in_id),
                             o->to == LOFP_CKPT_GPT_OSS ? "mxfp4" : "nvfp4", in, lofp_ckpt_format_name(o->to));
                goto done;
            }
        }
    } else if (o->to == LOFP_CKPT_LOFP) {
        st = lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "convert --to lofp takes an already-quantized checkpoint; %s is dense (%s): "
                     "lofp quantize writes lofp files from dense tensors", in, why);
        goto done;
    }
    switch (o->to) {
    case LOFP_CKPT_MODELOPT: if (!sch) sch = "nvfp4"; if (strcmp(sch, "nvfp4") && strcmp(sch, "mxfp8") && strcmp(sch, "mxfp8-e4m3")) goto bad_scheme; break;
    case LOFP_CKPT_COMPRESSED_TENSORS: if (!sch) sch = "nvfp4"; if (strcmp(sch, "nvfp4") && strcmp(sch, "mxfp4")) goto bad_scheme; break;
    case LOFP_CKPT_GPT_OSS: if (!sch) sch = "mxfp4"; if (strcmp(sch, "mxfp4")) goto bad_scheme; break;
    default: if (strcmp(sch, "nvfp4") && strcmp(sch, "mxfp4") && strcmp(sch, "mxfp8") && strcmp(sch, "mxfp8-e4m3")) goto bad_scheme; break;
    }
    if (!strcmp(sch, "mxfp8")) sch = "mxfp8-e4m3";
    c.scheme_name = sch;
    lofp_scheme_preset(sch, &c.s);
    c.s.pad = o->pad;
    c.s.threads = o->threads;
    c.nvfp4 = c.s.id == LOFP_SCHEME_NVFP4;
    c.mxfp8 = c.s.id == LOFP_SCHEME_MXFP8_E4M3;
    if (!c.rd) {
        st = lofp_ck_profile_scheme(o, o->to, &c.s, err);
        if (!st) st = lofp_ck_method_open(&c.meth, o->method, o->calibration, o->damp, o->act_order, o->mse_scales, c.s.profile, o->threads, err);
        if (st) goto done;
    } else if (o->profile != LOFP_PROFILE_LOFP && o->note) {
        char line[256];
        snprintf(line, sizeof line, "--profile %s: %s is already quantized and is cast exactly (a profile applies when quantizing)",
                 lofp_profile_name(o->profile) ? lofp_profile_name(o->profile) : "?", in);
        o->note(o->ctx, line);
    }
    if (o->input_scales && !c.nvfp4) {
        st = lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "--input-scales: activation scales belong to NVFP4 only");
        goto done;
    }
    if (o->input_scales) {
        c.act = lofp_ckj_read(o->input_scales, err);
        if (!c.act) { st = err ? err->status : LOFP_ERR_FORMAT; goto done; }
        if (c.act->type != CKJ_OBJ) { st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: not a JSON object {module: amax}", o->input_scales); goto done; }
    }
    st = c.rd ? lofp_conv_plan_cast(&c, in, err) : lofp_conv_plan(&c, err);
    size_t nq = 0, n_exact = 0, n_mx2nv = 0, n_mismatch = 0;
    for (size_t i = 0; i < c.n_it; i++) {
        nq += c.it[i].action != A_COPY && c.it[i].action != A_SKIP;
        n_exact += c.it[i].action == A_CAST_COPY;
        n_mx2nv += c.it[i].action == A_CAST_MX2NV;
    }
    /* before anything is written: a method other than RTN has no statistics for MoE experts */
    for (size_t i = 0; !st && o->method != LOFP_METHOD_RTN && i < c.n_it; i++)
        if (c.it[i].action == A_MOE_SPLIT || c.it[i].action == A_MOE_FUSED)
            st = lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "'%s': --method %s is not available for MoE expert tensors (their "
                              "statistics are per expert); they are rounded to nearest only", c.it[i].module ? c.it[i].module : "?",
                              lofp_method_name(o->method));
    if (!st && nq == 0)
        st = lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: no tensor to quantize for %s (the defaults leave embeddings, norms, lm_head, routers and 1-D tensors; gpt-oss takes MoE experts only)",
                     in, lofp_ckpt_format_name(o->to));
    if (st) goto done;
    char *stage = NULL;
    if (o->merge_index) {
        /* every check before the first byte goes into OUT */
        st = lofp_conv_check_slices(&c, out, err);
        if (!st) lofp_conv_drop_stale_temps(&c, out);
        if (!st) st = lofp_conv_finalize(&c, out, err);
        if (!st) lofp_conv_drop_slice_records(out);
        goto done;
    }
    if (o->shard_count) {
        st = lofp_ck_mkdirs(out, err);
        if (st) goto done;
        lofp_conv_drop_stale_temps(&c, out);
        c.out_dir = lofp_ck_strdup(out);
    } else {
        st = lofp_ck_stage_dir(out, &stage, err);
        if (st) goto done;
        c.out_dir = stage;
    }
    st = c.rd ? LOFP_OK : lofp_conv_group_scales(&c, err);
    if (!st && c.rd) st = lofp_conv_cast_scales(&c, in, err);
    if (!st) st = lofp_conv_run_shards(&c, err);
    if (!st && o->shard_count) st = lofp_conv_record_slice(&c, c.out_dir, err);
    if (!st && !o->shard_count) st = lofp_conv_finalize(&c, c.out_dir, err);
    if (!o->shard_count) {
        if (!st) st = lofp_ck_stage_commit(stage, out, err);
        else lofp_ck_rmtree(stage);
        c.out_dir = NULL;
        free(stage);
    }
    if (!st && o->note) {
        char line[512];
        if (c.rd)
        {
            for (size_t i = 0; i < c.n_it; i++) n_mismatch += c.it[i].mismatched != 0;
            snprintf(line, sizeof line, "%s -> %s (%s): %zu tensors carried over with codes and block scales unchanged (%zu of them "
                     "with block-scale values decoding one rounding apart, named above), %zu cast MXFP4 -> NVFP4 by the closed "
                     "form, %zu shard(s)", lofp_ckpt_format_name(c.from), lofp_ckpt_format_name(o->to), sch,
                     n_exact, n_mismatch, n_mx2nv, o->shard_count ? c.n_shard_list : c.m.n_shards);
        }
        else
            snprintf(line, sizeof line, "%zu tensors quantized to %s (%s), %zu shard(s)", nq, lofp_ckpt_format_name(o->to), sch,
                     o->shard_count ? c.n_shard_list : c.m.n_shards);
        o->note(o->ctx, line);
    }
done:
    for (size_t i = 0; i < c.n_it; i++) {
        ck_item *t = &c.it[i];
        free(t->module);
        for (size_t j = 0; j < 4; j++) free(t->out_name[j]);
        if (t->action != A_SKIP) free(t->members);
        free(t->lofp_key);
        free(t->lofp_meta);
        free(t->lname);
    }
    free(c.it);
    free(c.out_dir);
    free(c.shard_list);
    lofp_ckj_free(c.act);
    lofp_ck_model_close(&c.m);
    lofp_ckpt_close(c.rd);
    lofp_ck_method_close(&c.meth);
    if (!st) lofp_ck_ok(err);
    return st;
bad_scheme:
    lofp_ck_model_close(&c.m);
    lofp_ckpt_close(c.rd);
    return lofp_ck_fail(err, LOFP_ERR_UNSUPPORTED, "convert --to %s: scheme '%s' is not one this format holds (%s)",
                   lofp_ckpt_format_name(o->to), sch,
                   o->to == LOFP_CKPT_MODELOPT ? "nvfp4, mxfp8" : o->to == LOFP_CKPT_COMPRESSED_TENSORS ? "nvfp4, mxfp4"
                   : o->to == LOFP_CKPT_LOFP ? "nvfp4, mxfp4, mxfp8" : "mxfp4");
}
