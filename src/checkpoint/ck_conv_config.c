/* ck_conv_config.c -- the files of a converted directory besides the shards: config.json with
 * the target's quantization_config (and hf_quant_config.json for ModelOpt), the exclusion list
 * those name, the copied files of the input directory and the shard index; the records of --shard
 * slices and the removal of temporaries that killed slices left. */
#include "ck_conv.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef NAME_MAX
#define NAME_MAX 255
#endif

static int cmp_cstr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Modules (weight names without ".weight") of 2-D+ floating weights left unquantized, with layer
 * numbers replaced by '*' where every layer's module is excluded. */
static ckj *exclusion_list(ck_conv *c)
{
    char **ex = calloc(c->n_it + 1, sizeof *ex);
    size_t n = 0;
    for (size_t i = 0; ex && i < c->n_it; i++) {
        ck_item *t = &c->it[i];
        const lofp_tensor_info *ti = t->src->ti;
        if (t->action != A_COPY || !lofp_dtype_is_float(ti->dtype) || ti->ndim < 2 || !lofp_ck_ends_with(ti->name, ".weight")) continue;
        char *m = lofp_ck_strdup(ti->name);
        m[strlen(m) - 7] = 0;
        /* generalise numbers */
        char pat[1024];
        size_t k = 0;
        for (const char *p = m; *p && k + 2 < sizeof pat;) {
            if ((p == m || p[-1] == '.') && *p >= '0' && *p <= '9') {
                const char *q = p;
                while (*q >= '0' && *q <= '9') q++;
                if (*q == '.' || *q == 0) { pat[k++] = '*'; p = q; continue; }
            }
            pat[k++] = *p++;
        }
        pat[k] = 0;
        int ok = strcmp(pat, m) != 0;
        for (size_t j = 0; ok && j < c->n_it; j++) {
            ck_item *u = &c->it[j];
            if (u->action == A_COPY || u->action == A_SKIP || !u->module) continue;
            if (lofp_ck_glob_match(pat, u->module)) ok = 0;
            for (size_t q = 0; ok && q < u->n_members; q++) {
                char mm[1024];
                snprintf(mm, sizeof mm, "%s", u->members[q]->name);
                mm[strlen(mm) - 7] = 0;
                if (lofp_ck_glob_match(pat, mm)) ok = 0;
            }
        }
        ex[n++] = ok ? lofp_ck_strdup(pat) : lofp_ck_strdup(m);
        free(m);
    }
    qsort(ex, n, sizeof *ex, cmp_cstr);
    ckj *a = lofp_ckj_new_arr();
    for (size_t i = 0; i < n; i++)
        if ((i == 0 || strcmp(ex[i], ex[i - 1]) != 0) && a) lofp_ckj_push(a, lofp_ckj_new_str(ex[i]));
    for (size_t i = 0; i < n; i++) free(ex[i]);
    free(ex);
    return a;
}

static ckj *ct_args(int nvfp4, int activations)
{
    ckj *w = lofp_ckj_new_obj();
    lofp_ckj_set(w, "num_bits", lofp_ckj_new_int(4));
    lofp_ckj_set(w, "type", lofp_ckj_new_str("float"));
    lofp_ckj_set(w, "symmetric", lofp_ckj_new_bool(1));
    lofp_ckj_set(w, "group_size", lofp_ckj_new_int(nvfp4 ? 16 : 32));
    lofp_ckj_set(w, "strategy", lofp_ckj_new_str(nvfp4 ? "tensor_group" : "group"));
    lofp_ckj_set(w, "block_structure", lofp_ckj_new_null());
    if (activations) lofp_ckj_set(w, "dynamic", lofp_ckj_new_str("local"));
    else lofp_ckj_set(w, "dynamic", lofp_ckj_new_bool(0));
    lofp_ckj_set(w, "actorder", lofp_ckj_new_null());
    lofp_ckj_set(w, "scale_dtype", lofp_ckj_new_str(nvfp4 ? "torch.float8_e4m3fn" : "torch.uint8"));
    lofp_ckj_set(w, "zp_dtype", lofp_ckj_new_null());
    lofp_ckj_set(w, "observer", lofp_ckj_new_str(activations ? "static_minmax" : "minmax"));
    lofp_ckj_set(w, "observer_kwargs", lofp_ckj_new_obj());
    return w;
}

static lofp_status write_configs(ck_conv *c, const char *dir, lofp_io_error *err)
{
    if (c->to == LOFP_CKPT_LOFP) {
        /* lofp files say what they hold in their own metadata: config.json without a
         * quantization_config (another format's would make readers take the files for that format) */
        if (!c->m.config) return LOFP_OK;
        ckj *qc = lofp_ckj_get(c->m.config, "quantization_config");
        lofp_sbuf tmp = { 0 };
        if (qc) lofp_ckj_dump(&tmp, qc, -1);
        lofp_ckj_del(c->m.config, "quantization_config");
        char *p = lofp_ck_path(dir, "config.json");
        lofp_status st = lofp_ckj_write(p, c->m.config, err);
        free(p);
        if (tmp.p) {
            char msg[64];
            lofp_ckj_set(c->m.config, "quantization_config", lofp_ckj_parse(tmp.p, tmp.len, msg, sizeof msg));
        }
        lofp_sbuf_free(&tmp);
        return st;
    }
    const int act = c->act != NULL || c->have_act;
    ckj *cfg = c->m.config ? NULL : lofp_ckj_new_obj();
    ckj *base = c->m.config ? c->m.config : cfg;
    ckj *qc = lofp_ckj_new_obj();
    ckj *excl = exclusion_list(c);
    lofp_status st = LOFP_OK;
    char ver[64];
    snprintf(ver, sizeof ver, "lofp %s", lofp_version());
    if (c->to == LOFP_CKPT_MODELOPT) {
        const char *algo = c->mxfp8 ? "MXFP8" : act ? "NVFP4" : "W4A16_NVFP4";
        int gs = c->mxfp8 ? 32 : 16;
        ckj *hq = lofp_ckj_new_obj(), *prod = lofp_ckj_new_obj(), *q = lofp_ckj_new_obj();
        lofp_ckj_set(prod, "name", lofp_ckj_new_str("modelopt"));
        lofp_ckj_set(prod, "version", lofp_ckj_new_str(ver));
        lofp_ckj_set(hq, "producer", prod);
        lofp_ckj_set(q, "quant_algo", lofp_ckj_new_str(algo));
        lofp_ckj_set(q, "kv_cache_quant_algo", lofp_ckj_new_null());
        lofp_ckj_set(q, "group_size", lofp_ckj_new_int(gs));
        lofp_sbuf tmp = { 0 };
        lofp_ckj_dump(&tmp, excl, -1);
        char msg[64];
        lofp_ckj_set(q, "exclude_modules", lofp_ckj_parse(tmp.p, tmp.len, msg, sizeof msg));
        lofp_sbuf_free(&tmp);
        lofp_ckj_set(hq, "quantization", q);
        char *p = lofp_ck_path(dir, "hf_quant_config.json");
        st = lofp_ckj_write(p, hq, err);
        free(p);
        lofp_ckj_free(hq);
        /* config.json: the compressed-tensors-like form ModelOpt embeds */
        ckj *groups = lofp_ckj_new_obj(), *g0 = lofp_ckj_new_obj(), *wa = lofp_ckj_new_obj();
        lofp_ckj_set(wa, "dynamic", lofp_ckj_new_bool(0));
        lofp_ckj_set(wa, "num_bits", lofp_ckj_new_int(c->mxfp8 ? 8 : 4));
        lofp_ckj_set(wa, "type", lofp_ckj_new_str("float"));
        lofp_ckj_set(wa, "group_size", lofp_ckj_new_int(gs));
        if (act) {
            ckj *ia = lofp_ckj_new_obj();
            lofp_ckj_set(ia, "dynamic", lofp_ckj_new_bool(0));
            lofp_ckj_set(ia, "num_bits", lofp_ckj_new_int(4));
            lofp_ckj_set(ia, "type", lofp_ckj_new_str("float"));
            lofp_ckj_set(ia, "group_size", lofp_ckj_new_int(16));
            lofp_ckj_set(g0, "input_activations", ia);
        }
        lofp_ckj_set(g0, "weights", wa);
        const char *lin[] = { "Linear" };
        lofp_ckj_set(g0, "targets", lofp_ckj_str_array(lin, 1));
        lofp_ckj_set(groups, "group_0", g0);
        lofp_ckj_set(qc, "config_groups", groups);
        lofp_ckj_set(qc, "ignore", excl);
        excl = NULL;
        lofp_ckj_set(qc, "quant_algo", lofp_ckj_new_str(algo));
        lofp_ckj_set(qc, "kv_cache_scheme", lofp_ckj_new_null());
        ckj *prod2 = lofp_ckj_new_obj();
        lofp_ckj_set(prod2, "name", lofp_ckj_new_str("modelopt"));
        lofp_ckj_set(prod2, "version", lofp_ckj_new_str(ver));
        lofp_ckj_set(qc, "producer", prod2);
        lofp_ckj_set(qc, "quant_method", lofp_ckj_new_str("modelopt"));
    } else if (c->to == LOFP_CKPT_COMPRESSED_TENSORS) {
        const char *fmt = c->nvfp4 ? "nvfp4-pack-quantized" : "mxfp4-pack-quantized";
        ckj *groups = lofp_ckj_new_obj(), *g0 = lofp_ckj_new_obj();
        const char *lin[] = { "Linear" };
        lofp_ckj_set(g0, "targets", lofp_ckj_str_array(lin, 1));
        lofp_ckj_set(g0, "weights", ct_args(c->nvfp4, 0));
        lofp_ckj_set(g0, "input_activations", act ? ct_args(1, 1) : lofp_ckj_new_null());
        lofp_ckj_set(g0, "output_activations", lofp_ckj_new_null());
        lofp_ckj_set(g0, "format", lofp_ckj_new_str(fmt));
        lofp_ckj_set(groups, "config_group_0", g0);
        lofp_ckj_set(qc, "config_groups", groups);
        lofp_ckj_set(qc, "quant_method", lofp_ckj_new_str("compressed-tensors"));
        lofp_ckj_set(qc, "kv_cache_scheme", lofp_ckj_new_null());
        lofp_ckj_set(qc, "format", lofp_ckj_new_str(fmt));
        lofp_ckj_set(qc, "quantization_status", lofp_ckj_new_str("compressed"));
        lofp_ckj_set(qc, "global_compression_ratio", lofp_ckj_new_null());
        lofp_ckj_set(qc, "ignore", excl);
        excl = NULL;
    } else {
        lofp_ckj_set(qc, "quant_method", lofp_ckj_new_str("mxfp4"));
        lofp_ckj_set(qc, "modules_to_not_convert", excl);
        excl = NULL;
    }
    lofp_ckj_set(base, "quantization_config", qc);
    if (!st) {
        char *p = lofp_ck_path(dir, "config.json");
        st = lofp_ckj_write(p, base, err);
        free(p);
    }
    lofp_ckj_del(base, "quantization_config");
    lofp_ckj_free(cfg);
    lofp_ckj_free(excl);
    return st;
}

lofp_status lofp_conv_finalize(ck_conv *c, const char *dir, lofp_io_error *err)
{
    lofp_status st = write_configs(c, dir, err);
    for (size_t i = 0; !st && i < c->m.n_others; i++) {
        char *a = lofp_ck_path(c->m.dir, c->m.others[i]), *b = lofp_ck_path(dir, c->m.others[i]);
        st = lofp_ck_copy_other(a, b, err);
        free(a);
        free(b);
    }
    if (!st && c->m.index_name) {
        const char **names = calloc(c->m.n_shards, sizeof *names);
        char **paths = calloc(c->m.n_shards, sizeof *paths);
        for (size_t s = 0; names && paths && s < c->m.n_shards; s++) {
            names[s] = c->m.shards[s].name;
            paths[s] = lofp_ck_path(dir, c->m.shards[s].name);
            if (!lofp_ck_exists(paths[s]) && !st)
                st = lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: shard '%s' has not been converted yet (run its --shard slice first)", dir,
                             c->m.shards[s].name);
        }
        char *ip = lofp_ck_path(dir, c->m.index_name);
        if (!st) st = lofp_ck_write_index(ip, names, (const char *const *)paths, c->m.n_shards, err);
        free(ip);
        for (size_t s = 0; paths && s < c->m.n_shards; s++) free(paths[s]);
        free(names);
        free(paths);
    } else if (!st && c->o->merge_index) {
        char *p = lofp_ck_path(dir, c->m.shards[0].name);
        if (!lofp_ck_exists(p)) st = lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: '%s' has not been converted yet", dir, c->m.shards[0].name);
        free(p);
    }
    return st;
}

/* ---- slices of a --shard conversion ----------------------------------------------------------
 * Each --shard I/N run leaves a record OUT/.lofp-slice-I-of-N.json: the target, the scheme, the
 * other options that shape the output and the shards it wrote. --merge-index reads every record
 * before it writes anything and refuses slices of another conversion: another --to, --scheme or
 * option, another N, or a shard no record lists. The records go once the merge is done; the shard
 * files themselves carry nothing extra, so merged slices equal a whole conversion byte for byte. */

/* The options besides --to and --scheme that change what a conversion writes. */
static void slice_options(const ck_conv *c, lofp_sbuf *b)
{
    const lofp_ckpt_options *o = c->o;
    lofp_sbuf_printf(b, "profile=%d;no_fuse_scales=%d;pad=%d;requantize_unfit=%d;input_scales=", (int)o->profile,
                     o->no_fuse_scales != 0, o->pad != 0, o->requantize_unfit != 0);
    if (o->input_scales) lofp_sbuf_puts(b, o->input_scales);
    lofp_sbuf_puts(b, ";include=");
    for (size_t i = 0; i < o->n_include; i++) { if (i) lofp_sbuf_putc(b, ','); lofp_sbuf_puts(b, o->include[i]); }
    lofp_sbuf_puts(b, ";exclude=");
    for (size_t i = 0; i < o->n_exclude; i++) { if (i) lofp_sbuf_putc(b, ','); lofp_sbuf_puts(b, o->exclude[i]); }
}

static char *record_name(unsigned i, unsigned n)
{
    char b[64];
    snprintf(b, sizeof b, ".lofp-slice-%u-of-%u.json", i, n);
    return lofp_ck_strdup(b);
}

lofp_status lofp_conv_record_slice(ck_conv *c, const char *dir, lofp_io_error *err)
{
    lofp_sbuf opts = { 0 };
    slice_options(c, &opts);
    ckj *r = lofp_ckj_new_obj(), *shards = lofp_ckj_new_arr();
    lofp_ckj_set(r, "to", lofp_ckj_new_str(lofp_ckpt_format_name(c->to)));
    lofp_ckj_set(r, "scheme", lofp_ckj_new_str(c->scheme_name));
    lofp_ckj_set(r, "slice", lofp_ckj_new_int((long long)c->o->shard_index + 1));
    lofp_ckj_set(r, "of", lofp_ckj_new_int((long long)c->o->shard_count));
    lofp_ckj_set(r, "options", lofp_ckj_new_str(opts.p ? opts.p : ""));
    for (size_t k = 0; k < c->n_shard_list; k++) lofp_ckj_push(shards, lofp_ckj_new_str(c->m.shards[c->shard_list[k]].name));
    lofp_ckj_set(r, "shards", shards);
    char *name = record_name(c->o->shard_index + 1, c->o->shard_count), *p = name ? lofp_ck_path(dir, name) : NULL;
    lofp_status st = p && r && !opts.failed ? lofp_ckj_write(p, r, err) : lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    free(p);
    free(name);
    lofp_ckj_free(r);
    lofp_sbuf_free(&opts);
    return st;
}

static int is_record(const char *n, unsigned *i, unsigned *of)
{
    char tail[8];
    return sscanf(n, ".lofp-slice-%u-of-%u.jso%1s", i, of, tail) == 3 && lofp_ck_ends_with(n, ".json");
}

lofp_status lofp_conv_check_slices(ck_conv *c, const char *dir, lofp_io_error *err)
{
    if (!lofp_ck_is_dir(dir))
        return lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: no slices to merge (run lofp convert --shard I/N into it first)", dir);
    char *seen = calloc(c->m.n_shards + 1, 1);
    lofp_sbuf opts = { 0 };
    slice_options(c, &opts);
    lofp_status st = seen && !opts.failed ? LOFP_OK : lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    DIR *d = st ? NULL : opendir(dir);
    if (!st && !d) st = lofp_ck_fail(err, LOFP_ERR_IO, "%s: %s", dir, strerror(errno));
    unsigned first_of = 0, first_i = 0;
    struct dirent *e;
    while (!st && (e = readdir(d))) {
        unsigned i, of;
        if (!is_record(e->d_name, &i, &of)) continue;
        char *p = lofp_ck_path(dir, e->d_name);
        ckj *r = p ? lofp_ckj_read(p, err) : NULL;
        if (!r) { st = p ? (err ? err->status : LOFP_ERR_FORMAT) : lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); free(p); break; }
        const char *to = lofp_ckj_str(lofp_ckj_get(r, "to")), *sch = lofp_ckj_str(lofp_ckj_get(r, "scheme")), *op = lofp_ckj_str(lofp_ckj_get(r, "options"));
        const ckj *sh = lofp_ckj_get(r, "shards");
        char names[256] = "";
        for (size_t k = 0, o2 = 0; sh && sh->type == CKJ_ARR && k < sh->n && o2 < sizeof names - 1; k++)
            if (lofp_ckj_str(sh->items[k]))
                o2 += (size_t)snprintf(names + o2, sizeof names - o2, "%s%s", k ? ", " : "", lofp_ckj_str(sh->items[k]));
        if (!to || !sch || !op || !sh || sh->type != CKJ_ARR)
            st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: not a slice record lofp wrote", p);
        else if (strcmp(to, lofp_ckpt_format_name(c->to)) || strcmp(sch, c->scheme_name))
            st = lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: slice %u/%u (%s) was made with --to %s --scheme %s; this merge is --to %s --scheme %s "
                         "(merge with the options the slices were made with, or convert the slices again)",
                         dir, i, of, names, to, sch, lofp_ckpt_format_name(c->to), c->scheme_name);
        else if (strcmp(op, opts.p ? opts.p : ""))
            st = lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: slice %u/%u (%s) was made with other options (%s) than this merge (%s)", dir, i, of,
                         names, op, opts.p ? opts.p : "");
        else if (first_of && of != first_of)
            st = lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: slices of two different splits are here: %u/%u and %u/%u (remove the "
                         "directory and convert every slice with one N)", dir, first_i, first_of, i, of);
        if (!first_of) { first_of = of; first_i = i; }
        for (size_t k = 0; !st && k < sh->n; k++) {
            const char *sn = lofp_ckj_str(sh->items[k]);
            for (size_t s = 0; sn && s < c->m.n_shards; s++)
                if (!strcmp(sn, c->m.shards[s].name)) seen[s] = 1;
        }
        lofp_ckj_free(r);
        free(p);
    }
    if (d) closedir(d);
    for (size_t s = 0; !st && s < c->m.n_shards; s++) {
        char *p = lofp_ck_path(dir, c->m.shards[s].name);
        if (!p) { st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); break; }
        if (!lofp_ck_exists(p))
            st = lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: shard '%s' has not been converted yet (run its --shard slice first); "
                         "nothing written", dir, c->m.shards[s].name);
        else if (!seen[s])
            st = lofp_ck_fail(err, LOFP_ERR_MISMATCH, "%s: shard '%s' is there but no slice record of this directory lists it (it "
                         "was not written by a --shard run into this directory); nothing written", dir, c->m.shards[s].name);
        free(p);
    }
    free(seen);
    lofp_sbuf_free(&opts);
    return st;
}

void lofp_conv_drop_slice_records(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        unsigned i, of;
        if (!is_record(e->d_name, &i, &of)) continue;
        char *p = lofp_ck_path(dir, e->d_name);
        if (p) unlink(p);
        free(p);
    }
    closedir(d);
}

/* ---- temporaries of killed runs ----------------------------------------------------------------
 * Every file goes into OUT under a temporary name (".NAME.tmp-" and 12 hex digits, io's atomic.h)
 * and is renamed when complete. A run killed without a chance to clean up (SIGKILL, the OOM
 * killer, a node that went down: a job array's usual failures) leaves that temporary behind; the
 * run that replaces it removes it, so that a re-run slice and merge leave OUT as a whole
 * conversion would. A second run of the same slice still going at that moment loses its temporary
 * and fails at the rename; the run that removed it writes the shard. */

/* 1 when name is a temporary of target (target NULL: of any file). io cuts the base so that the
 * name fits NAME_MAX; such a name is accepted for a target it starts. */
static int is_temp_of(const char *name, const char *target)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = strlen(name);
    if (name[0] != '.' || n < 1 + 1 + 5 + 12) return 0;
    const char *suf = name + n - 17;
    if (memcmp(suf, ".tmp-", 5) != 0) return 0;
    for (size_t k = 5; k < 17; k++)
        if (!suf[k] || !strchr(hex, suf[k])) return 0;
    size_t b = (size_t)(suf - name) - 1, t = target ? strlen(target) : b;
    if (!target) return b > 0;
    return memcmp(name + 1, target, b < t ? b : t) == 0 && (b == t || (b < t && n >= NAME_MAX));
}

/* Removes the temporaries in dir of the files this run writes: a slice's shards and record, or,
 * for the merge (every slice done), all of them. */
void lofp_conv_drop_stale_temps(ck_conv *c, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    char *rec = c->o->merge_index ? NULL : record_name(c->o->shard_index + 1, c->o->shard_count);
    struct dirent *e;
    while ((e = readdir(d))) {
        int stale = c->o->merge_index ? is_temp_of(e->d_name, NULL) : rec && is_temp_of(e->d_name, rec);
        for (size_t s = 0; !stale && !c->o->merge_index && s < c->m.n_shards; s++)
            stale = lofp_conv_shard_in_slice(c, s) && is_temp_of(e->d_name, c->m.shards[s].name);
        if (stale) (void)unlinkat(dirfd(d), e->d_name, 0);
    }
    free(rec);
    closedir(d);
}
