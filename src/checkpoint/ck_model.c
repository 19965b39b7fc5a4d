/* ck_model.c -- a Hugging Face model directory: config.json, hf_quant_config.json, one
 * safetensors file or shards named by model.safetensors.index.json, and the other files
 * (tokenizer, generation config, sub-folders) that a conversion copies. Every shard is opened
 * (mapped read-only, header validated) and every tensor the index names must be where it says. */
#include "ck_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int cmp_tref(const void *a, const void *b)
{
    return strcmp(((const ck_tref *)a)->name, ((const ck_tref *)b)->name);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

const ck_tref *lofp_ck_model_find(const ck_model *m, const char *name)
{
    ck_tref key = { name, 0, NULL };
    return bsearch(&key, m->t, m->n_t, sizeof *m->t, cmp_tref);
}

static lofp_status add_shard(ck_model *m, const char *name, lofp_io_error *err)
{
    ck_shard *ns = realloc(m->shards, (m->n_shards + 1) * sizeof *ns);
    if (!ns) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    m->shards = ns;
    ck_shard *s = &m->shards[m->n_shards];
    memset(s, 0, sizeof *s);
    s->name = lofp_ck_strdup(name);
    s->path = lofp_ck_path(m->dir, name);
    if (!s->name || !s->path) { free(s->name); free(s->path); return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); }
    m->n_shards++;
    struct stat st;
    if (stat(s->path, &st) != 0) {
        if (m->index_name)
            return lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: %s names shard '%s', which is missing (%s)", m->dir,
                           m->index_name, name, strerror(errno));
        return lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: %s", s->path, strerror(errno));
    }
    /* a shard reached through a link (the hub cache's blobs) is fine; a FIFO or a device is not */
    if (!S_ISREG(st.st_mode))
        return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: shard '%s' is not a regular file (lofp reads only regular files or "
                       "links to them)", m->dir, name);
    s->bytes = (size_t)st.st_size;
    lofp_io_error e2;
    lofp_status r = lofp_file_open(s->path, LOFP_FORMAT_SAFETENSORS, &s->f, &e2);
    if (r) return lofp_ck_fail(err, r, "%s", e2.message);
    return LOFP_OK;
}

static const char *json_type_name(const ckj *j)
{
    static const char *const n[] = { "null", "boolean", "number", "string", "array", "object" };
    return j && j->type >= CKJ_NULL && j->type <= CKJ_OBJ ? n[j->type] : "?";
}

/* A config file must be a JSON object, and the quantization section in it (config.json's
 * quantization_config, hf_quant_config.json's quantization) an object when present: anything else
 * would be read as "no config" and the format guessed from tensor names, so the file's claim
 * would be ignored silently. */
static lofp_status check_config_shape(const char *file, const ckj *j, const char *section, lofp_io_error *err)
{
    if (j->type != CKJ_OBJ)
        return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: holds a JSON %s, not an object (a config is an object of keys)",
                       file, json_type_name(j));
    const ckj *q = lofp_ckj_get(j, section);
    if (q && q->type != CKJ_OBJ)
        return lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: '%s' is a JSON %s, not an object (lofp reads the quantization "
                       "settings from its keys; remove it if the model is not quantized)", file, section, json_type_name(q));
    return LOFP_OK;
}

static int known_file(const char *n)
{
    return lofp_ck_ends_with(n, ".safetensors") || strcmp(n, "config.json") == 0 ||
           strcmp(n, "hf_quant_config.json") == 0 || lofp_ck_ends_with(n, ".safetensors.index.json") ||
           strstr(n, ".lofp-tmp-") != NULL;
}

lofp_status lofp_ck_model_open(const char *path, ck_model *m, lofp_io_error *err)
{
    memset(m, 0, sizeof *m);
    lofp_status st = LOFP_OK;
    m->path = lofp_ck_strdup(path);
    if (!m->path) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
    struct stat sb;
    if (stat(path, &sb) != 0) {
        st = lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: %s", path, strerror(errno));
        goto fail;
    }
    m->is_dir = S_ISDIR(sb.st_mode);
    if (!m->is_dir && !S_ISREG(sb.st_mode)) {
        st = lofp_ck_check_input(path, err);
        goto fail;
    }
    if (!m->is_dir) {
        const char *slash = strrchr(path, '/');
        m->dir = slash ? lofp_ck_strdup(path) : lofp_ck_strdup(".");
        if (slash && m->dir) m->dir[slash - path + (slash == path)] = 0;
        if (!m->dir) { st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); goto fail; }
        ck_shard *s = calloc(1, sizeof *s);
        if (!s) { st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); goto fail; }
        m->shards = s;
        m->n_shards = 1;
        s->name = lofp_ck_strdup(slash ? slash + 1 : path);
        s->path = lofp_ck_strdup(path);
        s->bytes = (size_t)sb.st_size;
        lofp_io_error e2;
        st = lofp_file_open(path, LOFP_FORMAT_SAFETENSORS, &s->f, &e2);
        if (st) { lofp_ck_fail(err, st, "%s", e2.message); goto fail; }
    } else {
        m->dir = lofp_ck_strdup(path);
        char *cp = lofp_ck_path(path, "config.json"), *qp = lofp_ck_path(path, "hf_quant_config.json");
        if (cp && lofp_ck_exists(cp)) {
            m->config = lofp_ckj_read(cp, err);
            if (!m->config) { free(cp); free(qp); st = err ? err->status : LOFP_ERR_FORMAT; goto fail; }
            if ((st = check_config_shape(cp, m->config, "quantization_config", err)) != LOFP_OK) { free(cp); free(qp); goto fail; }
        }
        if (qp && lofp_ck_exists(qp)) {
            m->hf_quant = lofp_ckj_read(qp, err);
            if (!m->hf_quant) { free(cp); free(qp); st = err ? err->status : LOFP_ERR_FORMAT; goto fail; }
            if ((st = check_config_shape(qp, m->hf_quant, "quantization", err)) != LOFP_OK) { free(cp); free(qp); goto fail; }
        }
        free(cp);
        free(qp);
        /* list the directory */
        DIR *d = opendir(path);
        if (!d) { st = lofp_ck_fail(err, LOFP_ERR_IO, "%s: %s", path, strerror(errno)); goto fail; }
        char **names = NULL;
        size_t nn = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.' ) continue;
            /* out of memory is an error: a file left out of the listing would be dropped silently */
            char **nx = realloc(names, (nn + 1) * sizeof *nx);
            if (nx) names = nx;
            if (!nx || !(names[nn] = lofp_ck_strdup(e->d_name))) { st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); break; }
            nn++;
        }
        closedir(d);
        if (nn) qsort(names, nn, sizeof *names, cmp_str); /* names is NULL in an empty directory */
        const char *index = NULL;
        size_t n_st = 0;
        for (size_t i = 0; !st && i < nn; i++) {
            if (lofp_ck_ends_with(names[i], ".safetensors.index.json")) {
                if (index) {
                    st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: two shard indexes (%s, %s)", path, index, names[i]);
                    break;
                }
                index = names[i];
            } else if (lofp_ck_ends_with(names[i], ".safetensors"))
                n_st++;
            else if (!known_file(names[i])) {
                char **no = realloc(m->others, (m->n_others + 1) * sizeof *no);
                if (no) m->others = no;
                if (!no || !(m->others[m->n_others] = lofp_ck_strdup(names[i]))) {
                    st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory");
                    break;
                }
                m->n_others++;
            }
        }
        if (!st && index) {
            m->index_name = lofp_ck_strdup(index);
            char *ip = lofp_ck_path(path, index);
            m->index = ip ? lofp_ckj_read(ip, err) : NULL;
            free(ip);
            if (!m->index) st = err ? err->status : LOFP_ERR_FORMAT;
            const ckj *wm = m->index ? lofp_ckj_get(m->index, "weight_map") : NULL;
            if (!st && (!wm || wm->type != CKJ_OBJ)) st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s/%s: no \"weight_map\" object", path, index);
            /* an index that lists nothing describes no model (the shards beside it would otherwise be
               carried over as unlisted files and the model read as empty) */
            if (!st && wm->n == 0) st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s/%s: its \"weight_map\" lists no tensor", path, index);
            /* shards in order of first appearance */
            for (size_t i = 0; !st && i < wm->n; i++) {
                const char *sn = lofp_ckj_str(wm->items[i]);
                if (!sn) { st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s/%s: weight_map[\"%s\"] is not a file name", path, index, wm->items[i]->key); break; }
                if (!*sn || strchr(sn, '/') || strcmp(sn, "..") == 0 || strcmp(sn, ".") == 0) { st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s/%s: shard name '%s' is not a plain file name", path, index, sn); break; }
                size_t k;
                for (k = 0; k < m->n_shards; k++) if (strcmp(m->shards[k].name, sn) == 0) break;
                if (k == m->n_shards) st = add_shard(m, sn, err);
            }
            /* a .safetensors beside the shards that the index does not name: loaders never read it,
             * so it is carried over as an ordinary file and named in a warning (lofp_ck_model_checks) */
            for (size_t i = 0; !st && i < nn; i++) {
                if (!lofp_ck_ends_with(names[i], ".safetensors") || strstr(names[i], ".lofp-tmp-")) continue;
                size_t k;
                for (k = 0; k < m->n_shards; k++) if (strcmp(m->shards[k].name, names[i]) == 0) break;
                if (k < m->n_shards) continue;
                char **no = realloc(m->others, (m->n_others + 1) * sizeof *no);
                if (no) m->others = no;
                char **nu = realloc(m->unlisted, (m->n_unlisted + 1) * sizeof *nu);
                if (nu) m->unlisted = nu;
                char *a = lofp_ck_strdup(names[i]), *b = lofp_ck_strdup(names[i]);
                if (!no || !nu || !a || !b) { free(a); free(b); st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); break; }
                m->others[m->n_others++] = a;
                m->unlisted[m->n_unlisted++] = b;
            }
        } else if (!st) {
            if (n_st == 0) st = lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "%s: no .safetensors file", path);
            else if (n_st > 1) st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: %zu .safetensors files but no model.safetensors.index.json", path, n_st);
            else
                for (size_t i = 0; i < nn; i++)
                    if (lofp_ck_ends_with(names[i], ".safetensors")) { st = add_shard(m, names[i], err); break; }
        }
        for (size_t i = 0; i < nn; i++) free(names[i]);
        free(names);
        if (st) goto fail;
    }
    /* shards in name order: --shard I/N slices the same list whatever the index's order */
    for (size_t a = 1; a < m->n_shards; a++)
        for (size_t b = a; b > 0 && strcmp(m->shards[b - 1].name, m->shards[b].name) > 0; b--) {
            ck_shard tmp = m->shards[b];
            m->shards[b] = m->shards[b - 1];
            m->shards[b - 1] = tmp;
        }
    /* the tensor table */
    size_t total = 0;
    for (size_t s = 0; s < m->n_shards; s++) total += lofp_file_count(m->shards[s].f);
    m->t = calloc(total ? total : 1, sizeof *m->t);
    if (!m->t) { st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); goto fail; }
    for (size_t s = 0; s < m->n_shards; s++)
        for (size_t i = 0; i < lofp_file_count(m->shards[s].f); i++) {
            const lofp_tensor_info *ti = lofp_file_tensor(m->shards[s].f, i);
            m->t[m->n_t++] = (ck_tref){ ti->name, s, ti };
        }
    qsort(m->t, m->n_t, sizeof *m->t, cmp_tref);
    for (size_t i = 1; i < m->n_t; i++)
        if (strcmp(m->t[i - 1].name, m->t[i].name) == 0) {
            st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: tensor '%s' is in both %s and %s", m->dir, m->t[i].name,
                         m->shards[m->t[i - 1].shard].name, m->shards[m->t[i].shard].name);
            goto fail;
        }
    if (m->index) {
        const ckj *wm = lofp_ckj_get(m->index, "weight_map");
        for (size_t i = 0; i < wm->n; i++) {
            const ck_tref *r = lofp_ck_model_find(m, wm->items[i]->key);
            const char *sn = lofp_ckj_str(wm->items[i]);
            if (!r) {
                st = lofp_ck_fail(err, LOFP_ERR_NOT_FOUND, "%s/%s: tensor '%s' is listed in shard '%s' but no shard holds it",
                             m->dir, m->index_name, wm->items[i]->key, sn);
                goto fail;
            }
            if (strcmp(m->shards[r->shard].name, sn) != 0) {
                st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s/%s: tensor '%s' is listed in shard '%s' but is in '%s'", m->dir,
                             m->index_name, wm->items[i]->key, sn, m->shards[r->shard].name);
                goto fail;
            }
        }
        if (wm->n != m->n_t) {
            for (size_t i = 0; i < m->n_t; i++)
                if (!lofp_ckj_get(wm, m->t[i].name)) {
                    st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s/%s: tensor '%s' of shard '%s' is not in the index", m->dir,
                                 m->index_name, m->t[i].name, m->shards[m->t[i].shard].name);
                    goto fail;
                }
        }
    }
    lofp_ck_ok(err);
    return LOFP_OK;
fail:
    lofp_ck_model_close(m);
    return st ? st : LOFP_ERR_FORMAT;
}

void lofp_ck_model_close(ck_model *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->n_shards; i++) {
        lofp_file_close(m->shards[i].f);
        free(m->shards[i].name);
        free(m->shards[i].path);
    }
    for (size_t i = 0; i < m->n_others; i++) free(m->others[i]);
    free(m->others);
    for (size_t i = 0; i < m->n_unlisted; i++) free(m->unlisted[i]);
    free(m->unlisted);
    free(m->shards);
    free(m->t);
    lofp_ckj_free(m->config);
    lofp_ckj_free(m->hf_quant);
    lofp_ckj_free(m->index);
    free(m->index_name);
    free(m->path);
    free(m->dir);
    memset(m, 0, sizeof *m);
}

lofp_status lofp_ck_write_index(const char *path, const char *const *shard_names, const char *const *shard_paths,
                           size_t n, lofp_io_error *err)
{
    ckj *root = lofp_ckj_new_obj(), *meta = lofp_ckj_new_obj(), *wm = lofp_ckj_new_obj();
    size_t total = 0;
    lofp_status st = LOFP_OK;
    if (!root || !meta || !wm) { lofp_ckj_free(root); lofp_ckj_free(meta); lofp_ckj_free(wm); return lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); }
    /* weight_map sorted by tensor name, as transformers writes it */
    typedef struct { const char *name; size_t shard; } ent;
    ent *e = NULL;
    size_t ne = 0;
    lofp_file **fs = calloc(n ? n : 1, sizeof *fs);
    for (size_t s = 0; !st && s < n; s++) {
        lofp_io_error e2;
        st = lofp_file_open(shard_paths[s], LOFP_FORMAT_SAFETENSORS, &fs[s], &e2);
        if (st) { lofp_ck_fail(err, st, "%s", e2.message); break; }
        size_t c = lofp_file_count(fs[s]);
        ent *nx = realloc(e, (ne + c + 1) * sizeof *e);
        if (!nx) { st = lofp_ck_fail(err, LOFP_ERR_NOMEM, "out of memory"); break; }
        e = nx;
        for (size_t i = 0; i < c; i++) {
            const lofp_tensor_info *ti = lofp_file_tensor(fs[s], i);
            e[ne++] = (ent){ ti->name, s };
            total += ti->nbytes;
        }
    }
    if (!st) {
        int (*cmp)(const void *, const void *) = cmp_str; /* ent starts with the name pointer */
        if (ne) qsort(e, ne, sizeof *e, cmp);
        for (size_t i = 0; i < ne; i++) {
            if (i && strcmp(e[i - 1].name, e[i].name) == 0) {
                st = lofp_ck_fail(err, LOFP_ERR_FORMAT, "tensor '%s' is in two shards (%s, %s)", e[i].name,
                             shard_names[e[i - 1].shard], shard_names[e[i].shard]);
                break;
            }
            lofp_ckj_append(wm, e[i].name, lofp_ckj_new_str(shard_names[e[i].shard]));
        }
        lofp_ckj_set(meta, "total_size", lofp_ckj_new_int((long long)total));
        lofp_ckj_set(root, "metadata", meta);
        meta = NULL;
        lofp_ckj_set(root, "weight_map", wm);
        wm = NULL;
        if (!st) st = lofp_ckj_write(path, root, err);
    }
    for (size_t s = 0; s < n; s++) lofp_file_close(fs ? fs[s] : NULL);
    free(fs);
    free(e);
    lofp_ckj_free(meta);
    lofp_ckj_free(wm);
    lofp_ckj_free(root);
    return st;
}
