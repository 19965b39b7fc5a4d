/* ck_gguf_llama.c -- `lofp convert --to gguf MODEL_DIR OUT.gguf` for the llama architecture: the
 * llama.* hyperparameters from config.json, a gpt2-style BPE tokenizer from tokenizer.json, the
 * tensors under llama.cpp's names (q/k rows permuted from Hugging Face's half-split RoPE layout to
 * ggml's interleaved pairs, as llama.cpp's converter does), linear weights quantized to MXFP4 or
 * NVFP4 (+ .scale), norms in F32, embeddings and output as they are. Other architectures get a
 * message pointing at llama.cpp's converter. */
#include "ck_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const ck_tref *src;
    char name[80];
    int kind;          /* 0 copy, 1 quantize, 2 F32, 3 .scale of the previous */
    int permute_heads; /* q: n_head, k: n_head_kv, 0: none */
    float G;
} lplan;

static int map_name(const char *hf, char *out, size_t cap, int *perm_q, int *perm_k)
{
    static const char *const m[][2] = {
        { "self_attn.q_proj.weight", "attn_q.weight" }, { "self_attn.k_proj.weight", "attn_k.weight" },
        { "self_attn.v_proj.weight", "attn_v.weight" }, { "self_attn.o_proj.weight", "attn_output.weight" },
        { "input_layernorm.weight", "attn_norm.weight" }, { "post_attention_layernorm.weight", "ffn_norm.weight" },
        { "mlp.gate_proj.weight", "ffn_gate.weight" }, { "mlp.up_proj.weight", "ffn_up.weight" },
        { "mlp.down_proj.weight", "ffn_down.weight" },
    };
    *perm_q = *perm_k = 0;
    if (!strcmp(hf, "model.embed_tokens.weight")) { snprintf(out, cap, "token_embd.weight"); return 1; }
    if (!strcmp(hf, "model.norm.weight")) { snprintf(out, cap, "output_norm.weight"); return 1; }
    if (!strcmp(hf, "lm_head.weight")) { snprintf(out, cap, "output.weight"); return 1; }
    unsigned layer;
    int n = 0;
    if (sscanf(hf, "model.layers.%u.%n", &layer, &n) == 1 && n > 0)
        for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
            if (!strcmp(hf + n, m[i][0])) {
                snprintf(out, cap, "blk.%u.%s", layer, m[i][1]);
                *perm_q = i == 0;
                *perm_k = i == 1;
                return 1;
            }
    return 0;
}

static long long cfg_int(const ckj *c, const char *k, long long def)
{
    long long v;
    return ckj_int(ckj_get(c, k), &v) ? v : def;
}

static double cfg_num(const ckj *c, const char *k, double def)
{
    double v;
    return ckj_num(ckj_get(c, k), &v) ? v : def;
}

static lofp_status tokenizer_kvs(const ck_model *m, lofp_sbuf *kv, uint64_t *nkv, lofp_io_error *err)
{
    char *p = ck_path(m->dir, "tokenizer.json");
    ckj *tj = p ? ckj_read(p, err) : NULL;
    free(p);
    if (!tj) return ck_fail(err, err ? err->status : LOFP_ERR_NOT_FOUND, "%s: a GGUF model needs tokenizer.json (%s)", m->dir, err ? err->message : "");
    const ckj *model = ckj_get(tj, "model");
    const char *type = ckj_str(ckj_get(model, "type"));
    const ckj *vocab = ckj_get(model, "vocab"), *merges = ckj_get(model, "merges");
    const ckj *bf = ckj_get(model, "byte_fallback");
    lofp_status st = LOFP_OK;
    if (!type || strcmp(type, "BPE") || !vocab || vocab->type != CKJ_OBJ || (bf && bf->type == CKJ_BOOL && bf->b)) {
        st = ck_fail(err, LOFP_ERR_UNSUPPORTED,
                     "%s/tokenizer.json: lofp writes GGUF tokenizers of the byte-level BPE kind (gpt2) only; this one is %s%s. "
                     "Convert with llama.cpp's convert_hf_to_gguf.py, then requantize: lofp convert --to gguf MODEL.gguf OUT.gguf",
                     m->dir, type ? type : "of no type", bf && bf->b ? " with byte_fallback (SentencePiece style)" : "");
        ckj_free(tj);
        return st;
    }
    /* tokens by id: the vocab plus added tokens */
    size_t n = 0;
    const ckj *added = ckj_get(tj, "added_tokens");
    long long maxid = -1;
    for (size_t i = 0; i < vocab->n; i++) { long long id; if (ckj_int(vocab->items[i], &id) && id > maxid) maxid = id; }
    for (size_t i = 0; added && i < added->n; i++) { long long id; if (ckj_int(ckj_get(added->items[i], "id"), &id) && id > maxid) maxid = id; }
    long long vs = cfg_int(m->config, "vocab_size", maxid + 1);
    if (vs < maxid + 1) vs = maxid + 1;
    n = (size_t)vs;
    const char **tok = calloc(n, sizeof *tok);
    int32_t *tt = calloc(n, sizeof *tt);
    if (!tok || !tt) { free(tok); free(tt); ckj_free(tj); return ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); }
    for (size_t i = 0; i < vocab->n; i++) {
        long long id;
        if (ckj_int(vocab->items[i], &id) && id >= 0 && (size_t)id < n) { tok[id] = vocab->items[i]->key; tt[id] = 1; }
    }
    for (size_t i = 0; added && i < added->n; i++) {
        long long id;
        const char *c = ckj_str(ckj_get(added->items[i], "content"));
        const ckj *sp = ckj_get(added->items[i], "special");
        if (c && ckj_int(ckj_get(added->items[i], "id"), &id) && id >= 0 && (size_t)id < n) {
            tok[id] = c;
            tt[id] = sp && sp->b ? 3 : 4; /* control / user-defined */
        }
    }
    char pad[32];
    gg_put_kv_str(kv, "tokenizer.ggml.model", "gpt2");
    gg_put_kv_str(kv, "tokenizer.ggml.pre", "default");
    *nkv += 2;
    /* tokens */
    gg_put_string(kv, "tokenizer.ggml.tokens", strlen("tokenizer.ggml.tokens"));
    uint32_t t9 = GGV_ARRAY, t8 = GGV_STRING, t5 = GGV_I32;
    lofp_sbuf_put(kv, &t9, 4);
    lofp_sbuf_put(kv, &t8, 4);
    uint64_t nn = n;
    lofp_sbuf_put(kv, &nn, 8);
    for (size_t i = 0; i < n; i++) {
        if (!tok[i]) { snprintf(pad, sizeof pad, "[PAD%zu]", i); gg_put_string(kv, pad, strlen(pad)); tt[i] = 5; }
        else gg_put_string(kv, tok[i], strlen(tok[i]));
    }
    gg_put_string(kv, "tokenizer.ggml.token_type", strlen("tokenizer.ggml.token_type"));
    lofp_sbuf_put(kv, &t9, 4);
    lofp_sbuf_put(kv, &t5, 4);
    lofp_sbuf_put(kv, &nn, 8);
    lofp_sbuf_put(kv, tt, 4 * n);
    *nkv += 2;
    if (merges && merges->type == CKJ_ARR) {
        gg_put_string(kv, "tokenizer.ggml.merges", strlen("tokenizer.ggml.merges"));
        lofp_sbuf_put(kv, &t9, 4);
        lofp_sbuf_put(kv, &t8, 4);
        uint64_t nm = merges->n;
        lofp_sbuf_put(kv, &nm, 8);
        for (size_t i = 0; i < merges->n; i++) {
            const ckj *e = merges->items[i];
            if (e->type == CKJ_STR) gg_put_string(kv, e->s, e->slen);
            else if (e->type == CKJ_ARR && e->n == 2 && ckj_str(e->items[0]) && ckj_str(e->items[1])) {
                lofp_sbuf b = { 0 };
                lofp_sbuf_printf(&b, "%s %s", e->items[0]->s, e->items[1]->s);
                gg_put_string(kv, b.p, b.len);
                lofp_sbuf_free(&b);
            } else {
                st = ck_fail(err, LOFP_ERR_FORMAT, "%s/tokenizer.json: merge %zu is neither \"a b\" nor [a, b]", m->dir, i);
                break;
            }
        }
        *nkv += 1;
    }
    long long bos = cfg_int(m->config, "bos_token_id", -1), eos = cfg_int(m->config, "eos_token_id", -1);
    if (bos >= 0) { gg_put_kv_u32(kv, "tokenizer.ggml.bos_token_id", (uint32_t)bos); (*nkv)++; }
    if (eos >= 0) { gg_put_kv_u32(kv, "tokenizer.ggml.eos_token_id", (uint32_t)eos); (*nkv)++; }
    free(tok);
    free(tt);
    ckj_free(tj);
    return st;
}

lofp_status ck_convert_llama_dir(const char *in, const char *out, const lofp_ckpt_options *o, lofp_io_error *err);
lofp_status ck_convert_llama_dir(const char *in, const char *out, const lofp_ckpt_options *o, lofp_io_error *err)
{
    const char *sch = o->scheme ? o->scheme : "mxfp4";
    lofp_scheme s;
    if ((strcmp(sch, "mxfp4") && strcmp(sch, "nvfp4")) || lofp_scheme_preset(sch, &s))
        return ck_fail(err, LOFP_ERR_UNSUPPORTED, "convert --to gguf: scheme '%s' (GGUF holds mxfp4 = type 39 and nvfp4 = type 40)", sch);
    int nv = s.id == LOFP_SCHEME_NVFP4;
    s.threads = o->threads;
    uint32_t gblk = nv ? 64 : 32, gtype = nv ? GG_NVFP4 : GG_MXFP4, gbytes = nv ? 36 : 17;
    lofp_status st = lofp_ck_profile_scheme(o, LOFP_CKPT_GGUF, &s, err);
    if (st) return st;
    const int two = nv && s.two_level; /* --profile ggml: one level, no .scale (llama.cpp's quantizer) */
    ck_model m;
    st = ck_model_open(in, &m, err);
    if (st) return st;
    const char *mt = ckj_str(ckj_get(m.config, "model_type"));
    lplan *p = NULL;
    gg_out_tensor *ot = NULL;
    lofp_sbuf kv = { 0 };
    if (!m.config || !mt || strcmp(mt, "llama")) {
        st = ck_fail(err, LOFP_ERR_UNSUPPORTED,
                     "%s: model_type '%s': lofp writes GGUF from a model directory for the llama architecture only; convert "
                     "this one with llama.cpp's convert_hf_to_gguf.py (e.g. --outtype bf16), then requantize that file: "
                     "lofp convert --to gguf MODEL.gguf OUT.gguf", in, mt ? mt : "(none)");
        goto done;
    }
    long long H = cfg_int(m.config, "hidden_size", 0), nh = cfg_int(m.config, "num_attention_heads", 0);
    long long nkvh = cfg_int(m.config, "num_key_value_heads", nh), L = cfg_int(m.config, "num_hidden_layers", 0);
    long long hd = cfg_int(m.config, "head_dim", nh ? H / nh : 0);
    if (H <= 0 || nh <= 0 || L <= 0 || hd <= 0 || hd % 2) {
        st = ck_fail(err, LOFP_ERR_FORMAT, "%s/config.json: hidden_size, num_attention_heads and num_hidden_layers are needed", in);
        goto done;
    }
    p = calloc(2 * m.n_t + 1, sizeof *p);
    ot = calloc(2 * m.n_t + 1, sizeof *ot);
    if (!p || !ot) { st = ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); goto done; }
    size_t np = 0, nq = 0;
    for (size_t i = 0; i < m.n_t; i++) {
        const ck_tref *r = &m.t[i];
        const lofp_tensor_info *ti = r->ti;
        if (ck_ends_with(r->name, "rotary_emb.inv_freq")) continue;
        int pq, pk;
        lplan *q = &p[np];
        if (!map_name(r->name, q->name, sizeof q->name, &pq, &pk)) {
            st = ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s: tensor '%s' has no name in llama.cpp's llama architecture (lofp maps embed, "
                         "norms, q/k/v/o and gate/up/down); convert with llama.cpp's convert_hf_to_gguf.py, then requantize", m.shards[r->shard].name, r->name);
            goto done;
        }
        if (!ck_is_float(ti->dtype)) { st = ck_fail(err, LOFP_ERR_UNSUPPORTED, "%s: tensor '%s' is %s", m.shards[r->shard].name, r->name, lofp_io_dtype_name(ti->dtype)); goto done; }
        q->src = r;
        q->permute_heads = pq ? (int)nh : pk ? (int)nkvh : 0;
        int want = ti->ndim == 2 && !ck_globs_match((const char *const[]){ "token_embd*", "output.weight", "*norm*" }, 3, q->name);
        if (ck_globs_match(o->include, o->n_include, r->name) && ti->ndim == 2) want = 1;
        if (ck_globs_match(o->exclude, o->n_exclude, r->name)) want = 0;
        if (want && ti->shape[1] % gblk) {
            st = ck_fail(err, LOFP_ERR_SHAPE, "%s: tensor '%s' [%zu, %zu]: rows of %zu values are not whole GGUF %s blocks of %u; GGUF "
                         "cannot pad; keep it unquantized with --exclude '%s'", m.shards[r->shard].name, r->name, ti->shape[0], ti->shape[1],
                         ti->shape[1], sch, gblk, r->name);
            goto done;
        }
        if (q->permute_heads && ti->shape[0] != (size_t)(q->permute_heads * hd)) {
            st = ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s' has %zu rows, not heads x head_dim = %lld", m.shards[r->shard].name, r->name,
                         ti->shape[0], (long long)q->permute_heads * hd);
            goto done;
        }
        gg_out_tensor *u = &ot[np];
        u->name = q->name;
        u->n_dims = (uint32_t)ti->ndim;
        for (size_t d = 0; d < 4; d++) u->ne[d] = d < ti->ndim ? ti->shape[ti->ndim - 1 - d] : 1;
        size_t numel = ti->numel;
        if (want) {
            q->kind = 1;
            u->type = gtype;
            u->nbytes = numel / gblk * gbytes;
            nq++;
        } else if (ti->ndim == 1 || ti->dtype == LOFP_IO_F64 || q->permute_heads) {
            q->kind = 2;
            u->type = GG_F32;
            u->nbytes = numel * 4;
        } else {
            q->kind = 0;
            u->type = ti->dtype == LOFP_IO_F32 ? GG_F32 : ti->dtype == LOFP_IO_F16 ? GG_F16 : GG_BF16;
            u->nbytes = ti->nbytes;
        }
        np++;
        if (want && two) {
            lplan *sc = &p[np];
            sc->kind = 3;
            char base[80];
            memcpy(base, q->name, sizeof base);
            snprintf(sc->name, sizeof sc->name, "%.*s.scale", (int)(strlen(base) - 7), base);
            gg_out_tensor *v = &ot[np];
            v->name = sc->name;
            v->n_dims = 1;
            v->ne[0] = v->ne[1] = v->ne[2] = v->ne[3] = 1;
            v->type = GG_F32;
            v->nbytes = 4;
            np++;
        }
    }
    uint64_t nkv = 0;
    const char *slash = strrchr(m.dir, '/');
    gg_put_kv_str(&kv, "general.architecture", "llama");
    gg_put_kv_str(&kv, "general.name", slash && slash[1] ? slash + 1 : m.dir);
    gg_put_kv_u32(&kv, "general.file_type", nv ? 39u : 38u);
    gg_put_kv_u32(&kv, "general.quantization_version", 2);
    nkv += 4;
    gg_put_kv_u32(&kv, "llama.block_count", (uint32_t)L);
    gg_put_kv_u32(&kv, "llama.context_length", (uint32_t)cfg_int(m.config, "max_position_embeddings", 2048));
    gg_put_kv_u32(&kv, "llama.embedding_length", (uint32_t)H);
    gg_put_kv_u32(&kv, "llama.feed_forward_length", (uint32_t)cfg_int(m.config, "intermediate_size", 4 * H));
    gg_put_kv_u32(&kv, "llama.attention.head_count", (uint32_t)nh);
    gg_put_kv_u32(&kv, "llama.attention.head_count_kv", (uint32_t)nkvh);
    gg_put_kv_f32(&kv, "llama.rope.freq_base", (float)cfg_num(m.config, "rope_theta", 10000.0));
    gg_put_kv_f32(&kv, "llama.attention.layer_norm_rms_epsilon", (float)cfg_num(m.config, "rms_norm_eps", 1e-5));
    gg_put_kv_u32(&kv, "llama.rope.dimension_count", (uint32_t)hd);
    gg_put_kv_u32(&kv, "llama.vocab_size", (uint32_t)cfg_int(m.config, "vocab_size", 0));
    nkv += 10;
    st = tokenizer_kvs(&m, &kv, &nkv, err);
    if (st) goto done;
    if (kv.failed) { st = ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); goto done; }
    gg_writer *w = NULL;
    st = gg_writer_open(out, 32, kv.p, kv.len, nkv, ot, np, &w, err);
    float G = 1.0f;
    for (size_t i = 0; !st && i < np; i++) {
        lplan *q = &p[i];
        if (q->kind == 3) {
            float d = lofp_nvfp4_decode_from_encode(G);
            st = gg_writer_put(w, &d, 4, err);
        } else if (q->kind == 0) st = gg_writer_put(w, q->src->ti->data, q->src->ti->nbytes, err);
        else {
            const lofp_tensor_info *ti = q->src->ti;
            size_t n = ti->numel, K = ti->shape[ti->ndim - 1], rows = n / K;
            float *x = malloc(n * sizeof *x);
            if (!x) { st = ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); break; }
            if (q->permute_heads) {
                /* HF rows h*hd + t*hd/2 + j  ->  GGUF rows h*hd + 2j + t */
                size_t half = (size_t)hd / 2;
                for (size_t h = 0; h < (size_t)q->permute_heads; h++)
                    for (size_t t = 0; t < 2; t++)
                        for (size_t j = 0; j < half; j++) {
                            size_t src = h * (size_t)hd + t * half + j, dst = h * (size_t)hd + 2 * j + t;
                            for (size_t c = 0; c < K; c++) x[dst * K + c] = ck_load(ti->dtype, ti->data, src * K + c);
                        }
            } else
                for (size_t j = 0; j < n; j++) x[j] = ck_load(ti->dtype, ti->data, j);
            if (q->kind == 2) st = gg_writer_put(w, x, n * 4, err);
            else {
                size_t cb = n / 2, sb = n / s.block;
                uint8_t *codes = malloc(cb), *split = malloc(cb), *scales = malloc(sb), *blk = malloc(n / gblk * gbytes);
                lofp_quant_report rep;
                if (!codes || !split || !scales || !blk) st = ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
                else {
                    lofp_status qs = lofp_quantize(&s, LOFP_DTYPE_F32, x, rows, K, codes, scales, &G, &rep);
                    if (qs) st = ck_fail(err, qs, "%s: tensor '%s': quantize failed (%s, flat index %zu)", m.shards[q->src->shard].name,
                                         q->src->name, lofp_status_name(qs), rep.first_bad_index);
                }
                if (!st) lofp_fp4_repack(codes, split, rows, K, nv ? 16 : 32, LOFP_NIBBLE_STANDARD, LOFP_NIBBLE_GGUF);
                for (size_t b = 0; !st && b < n / gblk; b++) {
                    uint8_t *o2 = blk + b * gbytes;
                    if (nv) { memcpy(o2, scales + 4 * b, 4); memcpy(o2 + 4, split + 32 * b, 32); }
                    else { o2[0] = scales[b]; memcpy(o2 + 1, split + 16 * b, 16); }
                }
                if (!st) st = gg_writer_put(w, blk, n / gblk * gbytes, err);
                free(codes); free(split); free(scales); free(blk);
            }
            free(x);
        }
        if (!st) st = gg_writer_end_tensor(w, err);
        if (!st && o->progress) o->progress(o->ctx, out, 0, 1, i + 1, np);
    }
    if (w) { if (!st) st = gg_writer_finish(w, err); else gg_writer_abort(w); }
    if (!st && o->note) {
        char line[200];
        snprintf(line, sizeof line, "llama: %zu tensors quantized to %s (GGUF type %u), %zu tensors, %llu key-value pairs", nq, sch, gtype, np,
                 (unsigned long long)nkv);
        o->note(o->ctx, line);
    }
done:
    lofp_sbuf_free(&kv);
    free(p);
    free(ot);
    ck_model_close(&m);
    if (!st) ck_ok(err);
    return st;
}
