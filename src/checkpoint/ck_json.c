/* ck_json.c -- a JSON tree for the model directory's config files (config.json, the shard index,
 * hf_quant_config.json, tokenizer.json). Unlike the file layer's strict safetensors-header parser
 * it accepts fractions and exponents (config files are full of them) and keeps every number's
 * source text, so a rewritten config.json says 1e-05 where the original did. Objects keep their
 * member order. */
#include "ck_internal.h"
#include "io/json_string.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *s;
    size_t len, pos;
    char *msg;
    size_t msg_cap;
    int failed;
} jparser;

static void jfail(jparser *p, const char *what)
{
    if (!p->failed) snprintf(p->msg, p->msg_cap, "JSON error at byte %zu: %s", p->pos, what);
    p->failed = 1;
}

static void jws(jparser *p)
{
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' ||
                               p->s[p->pos] == '\r'))
        p->pos++;
}

static ckj *jnew(int type)
{
    ckj *j = calloc(1, sizeof *j);
    if (j) j->type = type;
    return j;
}

void ckj_free(ckj *j)
{
    if (!j) return;
    for (size_t i = 0; i < j->n; i++) ckj_free(j->items[i]);
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

/* Parses a string starting at the opening quote (io's shared decoder: escapes, surrogate pairs,
 * UTF-8 checked); returns a malloc'ed NUL-terminated copy. */
static char *jstring(jparser *p, size_t *out_len)
{
    const uint8_t *s = (const uint8_t *)p->s;
    size_t end = lofp_json_string_end(s, p->len, p->pos), n;
    if (end >= p->len) { jfail(p, "unterminated string"); return NULL; }
    char *o = malloc(end - p->pos); /* the bytes between the quotes, plus the NUL */
    if (!o) { jfail(p, "out of memory"); return NULL; }
    const char *err;
    if (!lofp_json_string_decode(s, p->len, &p->pos, o, &n, &err)) { free(o); jfail(p, err); return NULL; }
    if (out_len) *out_len = n;
    return o;
}

static ckj *jvalue(jparser *p, int depth)
{
    if (depth > 200) { jfail(p, "nesting too deep"); return NULL; }
    jws(p);
    if (p->pos >= p->len) { jfail(p, "unexpected end"); return NULL; }
    char c = p->s[p->pos];
    if (c == '{' || c == '[') {
        int obj = c == '{';
        ckj *j = jnew(obj ? CKJ_OBJ : CKJ_ARR);
        if (!j) { jfail(p, "out of memory"); return NULL; }
        p->pos++;
        jws(p);
        if (p->pos < p->len && p->s[p->pos] == (obj ? '}' : ']')) { p->pos++; return j; }
        for (;;) {
            char *key = NULL;
            if (obj) {
                jws(p);
                if (p->pos >= p->len || p->s[p->pos] != '"') { jfail(p, "expected a key"); ckj_free(j); return NULL; }
                key = jstring(p, NULL);
                if (!key) { ckj_free(j); return NULL; }
                jws(p);
                if (p->pos >= p->len || p->s[p->pos] != ':') { free(key); jfail(p, "expected ':'"); ckj_free(j); return NULL; }
                p->pos++;
            }
            ckj *v = jvalue(p, depth + 1);
            if (!v) { free(key); ckj_free(j); return NULL; }
            v->key = key;
            if (!jpush(j, v)) { ckj_free(v); ckj_free(j); jfail(p, "out of memory"); return NULL; }
            jws(p);
            if (p->pos < p->len && p->s[p->pos] == ',') { p->pos++; continue; }
            if (p->pos < p->len && p->s[p->pos] == (obj ? '}' : ']')) { p->pos++; return j; }
            jfail(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
            ckj_free(j);
            return NULL;
        }
    }
    if (c == '"') {
        ckj *j = jnew(CKJ_STR);
        if (!j) { jfail(p, "out of memory"); return NULL; }
        j->s = jstring(p, &j->slen);
        if (!j->s) { ckj_free(j); return NULL; }
        return j;
    }
    if (c == 't' || c == 'f' || c == 'n') {
        const char *w = c == 't' ? "true" : c == 'f' ? "false" : "null";
        size_t wl = strlen(w);
        if (p->pos + wl > p->len || memcmp(p->s + p->pos, w, wl) != 0) { jfail(p, "bad literal"); return NULL; }
        p->pos += wl;
        ckj *j = jnew(c == 'n' ? CKJ_NULL : CKJ_BOOL);
        if (!j) { jfail(p, "out of memory"); return NULL; }
        j->b = c == 't';
        return j;
    }
    if (c == '-' || (c >= '0' && c <= '9') || c == 'N' || c == 'I') {
        size_t st = p->pos;
        /* Python's json writes NaN / Infinity / -Infinity: accept them as numbers */
        if (p->len - p->pos >= 3 && memcmp(p->s + p->pos, "NaN", 3) == 0) p->pos += 3;
        else {
            if (p->s[p->pos] == '-') p->pos++;
            if (p->len - p->pos >= 8 && memcmp(p->s + p->pos, "Infinity", 8) == 0) p->pos += 8;
            else {
                size_t d0 = p->pos;
                while (p->pos < p->len && strchr("0123456789.eE+-", p->s[p->pos])) p->pos++;
                if (p->pos == d0) { jfail(p, "bad number"); return NULL; }
            }
        }
        ckj *j = jnew(CKJ_NUM);
        if (!j) { jfail(p, "out of memory"); return NULL; }
        j->slen = p->pos - st;
        j->s = malloc(j->slen + 1);
        if (!j->s) { ckj_free(j); jfail(p, "out of memory"); return NULL; }
        memcpy(j->s, p->s + st, j->slen);
        j->s[j->slen] = 0;
        char *e;
        (void)strtod(j->s, &e);
        if (*e && strcmp(j->s, "NaN") && strcmp(j->s, "Infinity") && strcmp(j->s, "-Infinity")) {
            ckj_free(j);
            p->pos = st;
            jfail(p, "bad number");
            return NULL;
        }
        return j;
    }
    jfail(p, "unexpected character");
    return NULL;
}

ckj *ckj_parse(const char *text, size_t len, char *msg, size_t msg_cap)
{
    jparser p = { text, len, 0, msg, msg_cap, 0 };
    if (msg_cap) msg[0] = 0;
    ckj *j = jvalue(&p, 0);
    if (!j) return NULL;
    jws(&p);
    if (p.pos != len) { jfail(&p, "trailing characters"); ckj_free(j); return NULL; }
    return j;
}

ckj *ckj_get(const ckj *o, const char *key)
{
    if (!o || o->type != CKJ_OBJ) return NULL;
    for (size_t i = 0; i < o->n; i++)
        if (o->items[i]->key && strcmp(o->items[i]->key, key) == 0) return o->items[i];
    return NULL;
}

const char *ckj_str(const ckj *j) { return j && j->type == CKJ_STR ? j->s : NULL; }

int ckj_num(const ckj *j, double *out)
{
    if (!j || j->type != CKJ_NUM) return 0;
    if (strcmp(j->s, "NaN") == 0) *out = 0.0 / 0.0;
    else if (strcmp(j->s, "Infinity") == 0) *out = 1.0 / 0.0;
    else if (strcmp(j->s, "-Infinity") == 0) *out = -1.0 / 0.0;
    else *out = strtod(j->s, NULL);
    return 1;
}

int ckj_int(const ckj *j, long long *out)
{
    double d;
    if (!ckj_num(j, &d) || d != d || d > 9e18 || d < -9e18 || (double)(long long)d != d) return 0;
    *out = (long long)d;
    return 1;
}

ckj *ckj_new_obj(void) { return jnew(CKJ_OBJ); }
ckj *ckj_new_arr(void) { return jnew(CKJ_ARR); }
ckj *ckj_new_null(void) { return jnew(CKJ_NULL); }
ckj *ckj_new_bool(int b) { ckj *j = jnew(CKJ_BOOL); if (j) j->b = !!b; return j; }

ckj *ckj_new_str(const char *s)
{
    ckj *j = jnew(CKJ_STR);
    if (!j) return NULL;
    j->slen = strlen(s);
    j->s = malloc(j->slen + 1);
    if (!j->s) { free(j); return NULL; }
    memcpy(j->s, s, j->slen + 1);
    return j;
}

ckj *ckj_new_raw_num(const char *text)
{
    ckj *j = ckj_new_str(text);
    if (j) j->type = CKJ_NUM;
    return j;
}

ckj *ckj_new_int(long long v)
{
    char b[32];
    snprintf(b, sizeof b, "%lld", v);
    return ckj_new_raw_num(b);
}

ckj *ckj_new_f32(float v)
{
    /* the shortest text that reads back as the same float */
    char b[48];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(b, sizeof b, "%.*g", prec, (double)v);
        if ((float)strtod(b, NULL) == v) break;
    }
    if (!strpbrk(b, ".eEn")) strcat(b, ".0");
    return ckj_new_raw_num(b);
}

int ckj_push(ckj *arr, ckj *v)
{
    if (!arr || !v) { ckj_free(v); return 0; }
    if (!jpush(arr, v)) { ckj_free(v); return 0; }
    return 1;
}

int ckj_set(ckj *obj, const char *key, ckj *v)
{
    if (!obj || !v || obj->type != CKJ_OBJ) { ckj_free(v); return 0; }
    char *k = malloc(strlen(key) + 1);
    if (!k) { ckj_free(v); return 0; }
    strcpy(k, key);
    free(v->key);
    v->key = k;
    for (size_t i = 0; i < obj->n; i++)
        if (strcmp(obj->items[i]->key, key) == 0) {
            ckj_free(obj->items[i]);
            obj->items[i] = v;
            return 1;
        }
    if (!jpush(obj, v)) { ckj_free(v); return 0; }
    return 1;
}

int ckj_append(ckj *obj, const char *key, ckj *v)
{
    if (!obj || !v || obj->type != CKJ_OBJ) { ckj_free(v); return 0; }
    free(v->key);
    v->key = ck_strdup(key);
    if (!v->key || !jpush(obj, v)) { ckj_free(v); return 0; }
    return 1;
}

void ckj_del(ckj *obj, const char *key)
{
    if (!obj || obj->type != CKJ_OBJ) return;
    for (size_t i = 0; i < obj->n; i++)
        if (strcmp(obj->items[i]->key, key) == 0) {
            ckj_free(obj->items[i]);
            memmove(obj->items + i, obj->items + i + 1, (obj->n - i - 1) * sizeof *obj->items);
            obj->n--;
            return;
        }
}

ckj *ckj_str_array(const char *const *s, size_t n)
{
    ckj *a = ckj_new_arr();
    for (size_t i = 0; a && i < n; i++)
        if (!ckj_push(a, ckj_new_str(s[i]))) { ckj_free(a); return NULL; }
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

int ckj_dump(lofp_sbuf *b, const ckj *j, int indent)
{
    dump(b, j, indent, 0);
    return !b->failed;
}
