/* ck_json.c -- a mutable JSON tree for the model directory's config files (config.json, the shard
 * index, hf_quant_config.json, tokenizer.json): read with io's parser in its lenient mode
 * (io/json.h: fractions, exponents, NaN/Infinity, every number's source text kept, so a rewritten
 * config.json says 1e-05 where the original did), edited, and dumped. Objects keep their member
 * order. */
#include "ck_internal.h"
#include "io/json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ckj *jnew(int type)
{
    ckj *j = calloc(1, sizeof *j);
    if (j) j->type = type;
    return j;
}

void lofp_ckj_free(ckj *j)
{
    if (!j) return;
    for (size_t i = 0; i < j->n; i++) lofp_ckj_free(j->items[i]);
    free(j->items);
    free(j->s);
    free(j->key);
    free(j);
}

static int jpush(ckj *c, ckj *v)
{
    if (c->n == c->cap) {
        size_t nc = c->cap ? 2 * c->cap : 8;
        ckj **ni = realloc(c->items, nc * sizeof *ni);
        if (!ni) return 0;
        c->items = ni;
        c->cap = nc;
    }
    c->items[c->n++] = v;
    return 1;
}

static char *jdup(const char *s, size_t n)
{
    char *o = malloc(n + 1);
    if (o) { memcpy(o, s, n); o[n] = 0; }
    return o;
}

/* Builds the tree of node i of a parsed document (depth bounded by the parser's own limit). */
static ckj *from_doc(const lofp_json_doc *d, uint32_t i)
{
    const lofp_json_node *n = &d->nodes[i];
    ckj *j;
    switch (n->type) {
    case LOFP_JSON_NULL: return jnew(CKJ_NULL);
    case LOFP_JSON_TRUE:
    case LOFP_JSON_FALSE:
        j = jnew(CKJ_BOOL);
        if (j) j->b = n->type == LOFP_JSON_TRUE;
        return j;
    case LOFP_JSON_INT:
    case LOFP_JSON_NUMBER:
    case LOFP_JSON_STRING:
        j = jnew(n->type == LOFP_JSON_STRING ? CKJ_STR : CKJ_NUM);
        if (!j) return NULL;
        j->slen = n->count;
        j->d = n->dbl;
        if (!(j->s = jdup(d->strings + n->first, n->count))) { free(j); return NULL; }
        return j;
    default:
        j = jnew(n->type == LOFP_JSON_OBJECT ? CKJ_OBJ : CKJ_ARR);
        if (!j) return NULL;
        for (uint32_t c = n->first; c; c = d->nodes[c].next) {
            ckj *v = from_doc(d, c);
            if (v && j->type == CKJ_OBJ && !(v->key = jdup(d->strings + d->nodes[c].key, d->nodes[c].key_len))) {
                lofp_ckj_free(v);
                v = NULL;
            }
            if (!v || !jpush(j, v)) { lofp_ckj_free(v); lofp_ckj_free(j); return NULL; }
        }
        return j;
    }
}

ckj *lofp_ckj_parse(const char *text, size_t len, char *msg, size_t msg_cap)
{
    lofp_json_doc d;
    if (lofp_json_parse_ex(text, len, LOFP_JSON_LENIENT, &d, msg, msg_cap)) return NULL;
    ckj *j = from_doc(&d, 0);
    lofp_json_free(&d);
    if (!j && msg_cap) snprintf(msg, msg_cap, "out of memory building the JSON tree");
    return j;
}

ckj *lofp_ckj_get(const ckj *o, const char *key)
{
    if (!o || o->type != CKJ_OBJ) return NULL;
    for (size_t i = 0; i < o->n; i++)
        if (o->items[i]->key && strcmp(o->items[i]->key, key) == 0) return o->items[i];
    return NULL;
}

const char *lofp_ckj_str(const ckj *j) { return j && j->type == CKJ_STR ? j->s : NULL; }

int lofp_ckj_num(const ckj *j, double *out)
{
    if (!j || j->type != CKJ_NUM) return 0;
    *out = j->d;
    return 1;
}

int lofp_ckj_int(const ckj *j, long long *out)
{
    if (!j || j->type != CKJ_NUM) return 0;
    if (strpbrk(j->s, ".eENI")) {
        /* 1.0 or 1e3 still name an integer; a fraction, NaN or Infinity do not */
        double d = j->d;
        if (d != d || d >= 9.2e18 || d <= -9.2e18 || (double)(long long)d != d) return 0;
        *out = (long long)d;
        return 1;
    }
    /* an integer's own text: exact past 2^53, where the double is not */
    errno = 0;
    char *e;
    long long v = strtoll(j->s, &e, 10);
    if (errno || *e) return 0;
    *out = v;
    return 1;
}

ckj *lofp_ckj_new_obj(void) { return jnew(CKJ_OBJ); }
ckj *lofp_ckj_new_arr(void) { return jnew(CKJ_ARR); }
ckj *lofp_ckj_new_null(void) { return jnew(CKJ_NULL); }
ckj *lofp_ckj_new_bool(int b) { ckj *j = jnew(CKJ_BOOL); if (j) j->b = !!b; return j; }

ckj *lofp_ckj_new_str(const char *s)
{
    ckj *j = jnew(CKJ_STR);
    if (!j) return NULL;
    j->slen = strlen(s);
    j->s = malloc(j->slen + 1);
    if (!j->s) { free(j); return NULL; }
    memcpy(j->s, s, j->slen + 1);
    return j;
}

ckj *lofp_ckj_new_raw_num(const char *text)
{
    ckj *j = lofp_ckj_new_str(text);
    if (!j) return NULL;
    j->type = CKJ_NUM;
    if (strcmp(text, "NaN") == 0) j->d = NAN;
    else if (strcmp(text, "Infinity") == 0) j->d = INFINITY;
    else if (strcmp(text, "-Infinity") == 0) j->d = -INFINITY;
    else j->d = strtod(text, NULL);
    return j;
}

ckj *lofp_ckj_new_int(long long v)
{
    char b[32];
    snprintf(b, sizeof b, "%lld", v);
    return lofp_ckj_new_raw_num(b);
}

ckj *lofp_ckj_new_f32(float v)
{
    /* the shortest text that reads back as the same float */
    char b[48];
    /* Python's json writes the non-finite values as these words; %g would write nan/inf */
    if (v != v) return lofp_ckj_new_raw_num("NaN");
    if (v == INFINITY || v == -INFINITY) return lofp_ckj_new_raw_num(v > 0 ? "Infinity" : "-Infinity");
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(b, sizeof b, "%.*g", prec, (double)v);
        if ((float)strtod(b, NULL) == v) break;
    }
    if (!strpbrk(b, ".eEn")) strcat(b, ".0");
    return lofp_ckj_new_raw_num(b);
}

int lofp_ckj_push(ckj *arr, ckj *v)
{
    if (!arr || !v) { lofp_ckj_free(v); return 0; }
    if (!jpush(arr, v)) { lofp_ckj_free(v); return 0; }
    return 1;
}

int lofp_ckj_set(ckj *obj, const char *key, ckj *v)
{
    if (!obj || !v || obj->type != CKJ_OBJ) { lofp_ckj_free(v); return 0; }
    char *k = malloc(strlen(key) + 1);
    if (!k) { lofp_ckj_free(v); return 0; }
    strcpy(k, key);
    free(v->key);
    v->key = k;
    for (size_t i = 0; i < obj->n; i++)
        if (strcmp(obj->items[i]->key, key) == 0) {
            lofp_ckj_free(obj->items[i]);
            obj->items[i] = v;
            return 1;
        }
    if (!jpush(obj, v)) { lofp_ckj_free(v); return 0; }
    return 1;
}

int lofp_ckj_append(ckj *obj, const char *key, ckj *v)
{
    if (!obj || !v || obj->type != CKJ_OBJ) { lofp_ckj_free(v); return 0; }
    free(v->key);
    v->key = lofp_ck_strdup(key);
    if (!v->key || !jpush(obj, v)) { lofp_ckj_free(v); return 0; }
    return 1;
}

void lofp_ckj_del(ckj *obj, const char *key)
{
    if (!obj || obj->type != CKJ_OBJ) return;
    for (size_t i = 0; i < obj->n; i++)
        if (strcmp(obj->items[i]->key, key) == 0) {
            lofp_ckj_free(obj->items[i]);
            memmove(obj->items + i, obj->items + i + 1, (obj->n - i - 1) * sizeof *obj->items);
            obj->n--;
            return;
        }
}

ckj *lofp_ckj_str_array(const char *const *s, size_t n)
{
    ckj *a = lofp_ckj_new_arr();
    for (size_t i = 0; a && i < n; i++)
        if (!lofp_ckj_push(a, lofp_ckj_new_str(s[i]))) { lofp_ckj_free(a); return NULL; }
    return a;
}

static void dump_str(lofp_sbuf *b, const char *s, size_t n)
{
    lofp_sbuf_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': lofp_sbuf_puts(b, "\\\""); break;
        case '\\': lofp_sbuf_puts(b, "\\\\"); break;
        case '\n': lofp_sbuf_puts(b, "\\n"); break;
        case '\r': lofp_sbuf_puts(b, "\\r"); break;
        case '\t': lofp_sbuf_puts(b, "\\t"); break;
        case '\b': lofp_sbuf_puts(b, "\\b"); break;
        case '\f': lofp_sbuf_puts(b, "\\f"); break;
        default:
            if (c < 0x20) lofp_sbuf_printf(b, "\\u%04x", c);
            else lofp_sbuf_putc(b, (char)c);
        }
    }
    lofp_sbuf_putc(b, '"');
}

static void indent_to(lofp_sbuf *b, int indent, int level)
{
    if (indent < 0) return;
    lofp_sbuf_putc(b, '\n');
    for (int i = 0; i < indent * level; i++) lofp_sbuf_putc(b, ' ');
}

static void dump(lofp_sbuf *b, const ckj *j, int indent, int level)
{
    switch (j->type) {
    case CKJ_NULL: lofp_sbuf_puts(b, "null"); break;
    case CKJ_BOOL: lofp_sbuf_puts(b, j->b ? "true" : "false"); break;
    case CKJ_NUM: lofp_sbuf_puts(b, j->s); break;
    case CKJ_STR: dump_str(b, j->s, j->slen); break;
    default: {
        int obj = j->type == CKJ_OBJ;
        lofp_sbuf_putc(b, obj ? '{' : '[');
        if (j->n == 0) { lofp_sbuf_putc(b, obj ? '}' : ']'); break; }
        for (size_t i = 0; i < j->n; i++) {
            if (i) lofp_sbuf_putc(b, ',');
            if (indent >= 0) indent_to(b, indent, level + 1);
            else if (i) lofp_sbuf_putc(b, ' ');
            if (obj) {
                dump_str(b, j->items[i]->key, strlen(j->items[i]->key));
                lofp_sbuf_puts(b, ": ");
            }
            dump(b, j->items[i], indent, level + 1);
        }
        if (indent >= 0) indent_to(b, indent, level);
        lofp_sbuf_putc(b, obj ? '}' : ']');
    }
    }
}

int lofp_ckj_dump(lofp_sbuf *b, const ckj *j, int indent)
{
    dump(b, j, indent, 0);
    return !b->failed;
}

ckj *lofp_ckj_read(const char *path, lofp_io_error *err)
{
    char *text;
    size_t len;
    if (lofp_ck_read_file(path, &text, &len, err)) return NULL;
    char msg[200];
    ckj *j = lofp_ckj_parse(text, len, msg, sizeof msg);
    free(text);
    if (!j) lofp_ck_fail(err, LOFP_ERR_FORMAT, "%s: %s", path, msg);
    return j;
}

lofp_status lofp_ckj_write(const char *path, const ckj *j, lofp_io_error *err)
{
    lofp_sbuf b = { 0 };
    lofp_ckj_dump(&b, j, 2);
    lofp_sbuf_putc(&b, '\n');
    if (b.failed) { lofp_sbuf_free(&b); return lofp_ck_fail(err, LOFP_ERR_NOMEM, "%s: out of memory", path); }
    lofp_status s = lofp_write_bytes_atomic(path, b.p, b.len, err);
    lofp_sbuf_free(&b);
    return s;
}
