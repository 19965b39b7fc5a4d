/* io_json.c -- the library's JSON parser (json.h): strict for safetensors headers (RFC 8259 minus
 * fractions and exponents, which a safetensors header never holds), lenient for config files.
 * Builds a flat node array; strings and numbers' source text go into one buffer. Never reads
 * outside text[0..len). */
#include "io_internal.h"
#include "json_string.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const uint8_t *s;
    size_t len;
    size_t pos;
    lofp_json_doc *doc;
    char *msg;
    size_t msg_cap;
    lofp_status st;
    int lenient;
    int max_depth;
    /* scratch for the duplicate-key check */
    struct keyref { const char *p; uint32_t len; } *keys;
    size_t keys_cap;
} parser;

static int fail(parser *p, lofp_status st, const char *what)
{
    if (p->st == LOFP_OK) {
        p->st = st;
        if (st == LOFP_ERR_NOMEM) snprintf(p->msg, p->msg_cap, "out of memory parsing JSON");
        else snprintf(p->msg, p->msg_cap, "JSON error at byte %zu: %s", p->pos, what);
    }
    return 0;
}

static void skip_ws(parser *p)
{
    while (p->pos < p->len) {
        uint8_t c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static uint32_t new_node(parser *p, uint8_t type)
{
    lofp_json_doc *d = p->doc;
    if (d->n_nodes == d->cap_nodes) {
        if (d->cap_nodes >= UINT32_MAX / 2) { fail(p, LOFP_ERR_FORMAT, "too many values"); return 0; }
        uint32_t cap = d->cap_nodes ? d->cap_nodes * 2 : 64;
        lofp_json_node *n = realloc(d->nodes, (size_t)cap * sizeof *n);
        if (!n) { fail(p, LOFP_ERR_NOMEM, ""); return 0; }
        d->nodes = n;
        d->cap_nodes = cap;
    }
    uint32_t i = d->n_nodes++;
    lofp_json_node *n = &d->nodes[i];
    memset(n, 0, sizeof *n);
    n->type = type;
    n->key = UINT32_MAX;
    return i;
}

/* Parses a string at p->pos (the opening quote) into the string buffer (json_string.c decodes
 * it). The decoded form is never longer than the source, and the two quotes pay for the NUL, so
 * the buffer (len + 1 bytes) cannot overflow. */
static int parse_string(parser *p, uint32_t *off, uint32_t *slen)
{
    lofp_json_doc *d = p->doc;
    size_t start = d->strings_len, n;
    const char *err;
    if (!lofp_json_string_decode(p->s, p->len, &p->pos, d->strings + start, &n, &err))
        return fail(p, LOFP_ERR_FORMAT, err);
    if (n > UINT32_MAX - 1) return fail(p, LOFP_ERR_FORMAT, "string too long");
    d->strings_len = start + n + 1;
    *off = (uint32_t)start;
    *slen = (uint32_t)n;
    return 1;
}

/* Copies the number text s[start..p->pos) into the string buffer. The buffer (len + 1 bytes) has
 * room: every number is followed by a byte no other value stores (a separator, a bracket or
 * whitespace) or by the end of the text, whose extra byte pays for the NUL. */
static void keep_text(parser *p, uint32_t node, size_t start)
{
    lofp_json_doc *d = p->doc;
    size_t n = p->pos - start;
    lofp_json_node *nd = &d->nodes[node];
    memcpy(d->strings + d->strings_len, p->s + start, n);
    d->strings[d->strings_len + n] = '\0';
    nd->first = (uint32_t)d->strings_len;
    nd->count = (uint32_t)n;
    d->strings_len += n + 1;
}

static int is_digit(const parser *p)
{
    return p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9';
}

/* Numbers follow RFC 8259's grammar in both modes: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?.
 * The strict mode takes integers below 2^64 only; the lenient mode makes everything else a
 * NUMBER node, plus the words NaN, Infinity and -Infinity (Python's json writes them). */
static int parse_number(parser *p, uint32_t node)
{
    size_t start = p->pos;
    int neg = 0, overflow = 0;
    if (p->s[p->pos] == '-') { neg = 1; p->pos++; }
    if (p->lenient) {
        static const char nan_w[] = "NaN", inf_w[] = "Infinity";
        const char *w = NULL;
        double v = 0.0;
        if (!neg && p->len - p->pos >= 3 && memcmp(p->s + p->pos, nan_w, 3) == 0) { w = nan_w; v = NAN; }
        else if (p->len - p->pos >= 8 && memcmp(p->s + p->pos, inf_w, 8) == 0) { w = inf_w; v = neg ? -INFINITY : INFINITY; }
        if (w) {
            p->pos += strlen(w);
            p->doc->nodes[node].type = LOFP_JSON_NUMBER;
            p->doc->nodes[node].dbl = v;
            keep_text(p, node, start);
            return 1;
        }
    }
    if (!is_digit(p)) return fail(p, LOFP_ERR_FORMAT, "invalid number");
    uint64_t v = 0;
    if (p->s[p->pos] == '0') {
        p->pos++;
        if (is_digit(p)) return fail(p, LOFP_ERR_FORMAT, "number with a leading zero");
    } else {
        while (is_digit(p)) {
            uint64_t dgt = (uint64_t)(p->s[p->pos] - '0');
            if (overflow || v > (UINT64_MAX - dgt) / 10) {
                if (!p->lenient) return fail(p, LOFP_ERR_FORMAT, "number overflows 64 bits");
                overflow = 1;
            } else {
                v = v * 10 + dgt;
            }
            p->pos++;
        }
    }
    int is_int = !overflow;
    if (p->pos < p->len && p->s[p->pos] == '.') {
        if (!p->lenient) return fail(p, LOFP_ERR_FORMAT, "non-integer number (only integers are allowed)");
        p->pos++;
        if (!is_digit(p)) return fail(p, LOFP_ERR_FORMAT, "invalid number (no digit after '.')");
        while (is_digit(p)) p->pos++;
        is_int = 0;
    }
    if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        if (!p->lenient) return fail(p, LOFP_ERR_FORMAT, "non-integer number (only integers are allowed)");
        p->pos++;
        if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
        if (!is_digit(p)) return fail(p, LOFP_ERR_FORMAT, "invalid number (no digit in the exponent)");
        while (is_digit(p)) p->pos++;
        is_int = 0;
    }
    lofp_json_node *n = &p->doc->nodes[node];
    keep_text(p, node, start);
    if (is_int) {
        n->negative = (uint8_t)neg;
        n->num = v;
        n->dbl = neg ? -(double)v : (double)v;
    } else {
        /* the grammar above is a subset of what strtod reads, so it consumes the whole text */
        n->type = LOFP_JSON_NUMBER;
        n->dbl = strtod(p->doc->strings + n->first, NULL);
    }
    return 1;
}

static int key_cmp(const void *a, const void *b)
{
    const struct keyref *x = a, *y = b;
    uint32_t m = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->p, y->p, m);
    if (c) return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

/* Rejects an object with two members of the same key. */
static int check_duplicates(parser *p, uint32_t obj, size_t obj_pos)
{
    lofp_json_doc *d = p->doc;
    uint32_t count = d->nodes[obj].count;
    if (count < 2) return 1;
    if (count > p->keys_cap) {
        struct keyref *k = realloc(p->keys, (size_t)count * sizeof *k);
        if (!k) return fail(p, LOFP_ERR_NOMEM, "");
        p->keys = k;
        p->keys_cap = count;
    }
    uint32_t i = 0;
    for (uint32_t c = d->nodes[obj].first; c; c = d->nodes[c].next, i++) {
        p->keys[i].p = d->strings + d->nodes[c].key;
        p->keys[i].len = d->nodes[c].key_len;
    }
    qsort(p->keys, count, sizeof *p->keys, key_cmp);
    for (i = 1; i < count; i++) {
        if (key_cmp(&p->keys[i - 1], &p->keys[i]) == 0) {
            char q[128], what[192];
            lofp_io_quote(q, sizeof q, p->keys[i].p, p->keys[i].len);
            snprintf(what, sizeof what, "duplicate key %s in the object starting here", q);
            p->pos = obj_pos;
            return fail(p, LOFP_ERR_FORMAT, what);
        }
    }
    return 1;
}

static int parse_value(parser *p, uint32_t *out, int depth);

static int parse_container(parser *p, uint32_t node, int is_obj, int depth)
{
    size_t start = p->pos;
    p->pos++;                                      /* [ or { */
    skip_ws(p);
    uint8_t close = is_obj ? '}' : ']';
    uint32_t last = 0, count = 0;
    if (p->pos < p->len && p->s[p->pos] == close) { p->pos++; return 1; }
    for (;;) {
        uint32_t koff = 0, klen = 0, child;
        skip_ws(p);
        if (is_obj) {
            if (p->pos >= p->len) return fail(p, LOFP_ERR_FORMAT, "unterminated object");
            if (p->s[p->pos] != '"') return fail(p, LOFP_ERR_FORMAT, "expected a string key");
            if (!parse_string(p, &koff, &klen)) return 0;
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':')
                return fail(p, LOFP_ERR_FORMAT, "expected ':' after a key");
            p->pos++;
        }
        if (!parse_value(p, &child, depth + 1)) return 0;
        lofp_json_node *c = &p->doc->nodes[child];
        if (is_obj) { c->key = koff; c->key_len = klen; }
        if (last) p->doc->nodes[last].next = child;
        else p->doc->nodes[node].first = child;
        last = child;
        count++;
        skip_ws(p);
        if (p->pos >= p->len)
            return fail(p, LOFP_ERR_FORMAT, is_obj ? "unterminated object" : "unterminated array");
        uint8_t c2 = p->s[p->pos];
        if (c2 == ',') { p->pos++; continue; }
        if (c2 == close) { p->pos++; break; }
        return fail(p, LOFP_ERR_FORMAT, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    p->doc->nodes[node].count = count;
    return is_obj ? check_duplicates(p, node, start) : 1;
}

static int literal(parser *p, const char *word)
{
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
        return fail(p, LOFP_ERR_FORMAT, "invalid literal");
    p->pos += n;
    return 1;
}

static int parse_value(parser *p, uint32_t *out, int depth)
{
    skip_ws(p);
    if (p->pos >= p->len) return fail(p, LOFP_ERR_FORMAT, "unexpected end of input");
    if (depth > p->max_depth) return fail(p, LOFP_ERR_FORMAT, "nesting too deep");
    uint8_t c = p->s[p->pos];
    uint32_t n;
    switch (c) {
    case '{':
    case '[':
        n = new_node(p, c == '{' ? LOFP_JSON_OBJECT : LOFP_JSON_ARRAY);
        if (p->st) return 0;
        *out = n;
        return parse_container(p, n, c == '{', depth);
    case '"': {
        uint32_t off, len;
        n = new_node(p, LOFP_JSON_STRING);
        if (p->st) return 0;
        if (!parse_string(p, &off, &len)) return 0;
        p->doc->nodes[n].first = off;
        p->doc->nodes[n].count = len;
        *out = n;
        return 1;
    }
    case 't': n = new_node(p, LOFP_JSON_TRUE); *out = n; return !p->st && literal(p, "true");
    case 'f': n = new_node(p, LOFP_JSON_FALSE); *out = n; return !p->st && literal(p, "false");
    case 'n': n = new_node(p, LOFP_JSON_NULL); *out = n; return !p->st && literal(p, "null");
    default:
        if (c == '-' || (c >= '0' && c <= '9') || (p->lenient && (c == 'N' || c == 'I'))) {
            n = new_node(p, LOFP_JSON_INT);
            if (p->st) return 0;
            *out = n;
            return parse_number(p, n);
        }
        return fail(p, LOFP_ERR_FORMAT, "unexpected character");
    }
}

lofp_status lofp_json_parse(const char *text, size_t len, lofp_json_doc *doc, char *msg,
                            size_t msg_cap)
{
    return lofp_json_parse_ex(text, len, 0, doc, msg, msg_cap);
}

lofp_status lofp_json_parse_ex(const char *text, size_t len, unsigned flags, lofp_json_doc *doc,
                               char *msg, size_t msg_cap)
{
    memset(doc, 0, sizeof *doc);
    if (msg_cap) msg[0] = '\0';
    int lenient = (flags & LOFP_JSON_LENIENT) != 0;
    parser p = {(const uint8_t *)text, len, 0, doc, msg, msg_cap, LOFP_OK, lenient,
                lenient ? LOFP_JSON_MAX_DEPTH_LENIENT : LOFP_JSON_MAX_DEPTH, NULL, 0};
    if (len > (size_t)UINT32_MAX - 2) { fail(&p, LOFP_ERR_FORMAT, "document too long"); return p.st; }
    doc->strings = malloc(len + 1);
    if (!doc->strings) { fail(&p, LOFP_ERR_NOMEM, ""); return p.st; }
    uint32_t root;
    if (parse_value(&p, &root, 0)) {
        skip_ws(&p);
        if (p.pos != len) fail(&p, LOFP_ERR_FORMAT, "trailing characters after the JSON value");
    }
    free(p.keys);
    if (p.st) lofp_json_free(doc);
    return p.st;
}

void lofp_json_free(lofp_json_doc *doc)
{
    free(doc->nodes);
    free(doc->strings);
    memset(doc, 0, sizeof *doc);
}

uint32_t lofp_json_get(const lofp_json_doc *doc, uint32_t obj, const char *key)
{
    if (obj >= doc->n_nodes || doc->nodes[obj].type != LOFP_JSON_OBJECT) return 0;
    size_t kl = strlen(key);
    for (uint32_t c = doc->nodes[obj].first; c; c = doc->nodes[c].next) {
        const lofp_json_node *n = &doc->nodes[c];
        if (n->key_len == kl && memcmp(doc->strings + n->key, key, kl) == 0) return c;
    }
    return 0;
}
