/* test_ck_json.c -- the config-file JSON tree (checkpoint/ck_json.c built from io's parser in its
 * lenient mode, io/json.h): escapes and surrogate pairs decode to the UTF-8 RFC 8259 and Unicode
 * define (expected bytes written from the standards, not from our output), every malformed string
 * is refused with its reason and byte offset, as the safetensors-header parser refuses it
 * (tests/io/test_io.c); the lenient numbers (fractions, exponents, NaN/Infinity as Python's json
 * writes them, integers past 64 bits) keep their source text through a dump, and the strict mode
 * still refuses all of them. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/json.h"

#include "checkpoint/ck_internal.h"
#include "test_util.h"

static void check_decodes(const char *json, const char *want, size_t want_len)
{
    char msg[160] = "";
    ckj *j = lofp_ckj_parse(json, strlen(json), msg, sizeof msg);
    CHECKF(j != NULL, "%s: refused: %s", json, msg);
    if (!j) return;
    const ckj *v = lofp_ckj_get(j, "k");
    const char *s = lofp_ckj_str(v);
    CHECKF(s && v->slen == want_len && memcmp(s, want, want_len) == 0, "%s: wrong decoded bytes", json);
    lofp_ckj_free(j);
}

static void check_refused(const char *json, size_t len, const char *why, const char *at)
{
    char msg[160] = "";
    ckj *j = lofp_ckj_parse(json, len, msg, sizeof msg);
    CHECKF(j == NULL, "accepted malformed %s", json);
    CHECKF(strstr(msg, why) != NULL, "%s: message '%s' lacks '%s'", json, msg, why);
    CHECKF(strstr(msg, at) != NULL, "%s: message '%s' lacks '%s'", json, msg, at);
    lofp_ckj_free(j);
}

int main(void)
{
    /* escapes (RFC 8259 section 7) */
    check_decodes("{\"k\":\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"}", "a\"b\\c/d\b\f\n\r\t", 12);
    /* U+00E9 is C3 A9, U+20AC is E2 82 AC, U+1F600 (the pair D83D DE00) is F0 9F 98 80 */
    check_decodes("{\"k\":\"\\u00e9\\u20AC\\ud83d\\ude00\"}", "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9);
    check_decodes("{\"k\":\"\\u0000x\"}", "\0x", 2);                    /* NUL inside, length kept */
    check_decodes("{\"k\":\"\xc3\xa9\xf0\x9f\x98\x80\"}", "\xc3\xa9\xf0\x9f\x98\x80", 6); /* raw UTF-8 */
    check_decodes("{\"k\":\"\"}", "", 0);

    /* malformed strings: the reason, and the byte the parser stopped at */
    check_refused("{\"k\":\"\\q\"}", 10, "invalid escape", "byte 7");
    check_refused("{\"k\":\"\\ud800\"}", 14, "lone high surrogate", "byte 12");
    check_refused("{\"k\":\"\\udc00\"}", 14, "lone low surrogate", "byte 12");
    check_refused("{\"k\":\"\\ud800\\u0041\"}", 20, "high surrogate not followed by a low one", "byte 18");
    check_refused("{\"k\":\"\\u12g4\"}", 14, "invalid hex digit", "byte 8");
    check_refused("{\"k\":\"a\x01\"}", 10, "control character", "byte 7");
    check_refused("{\"k\":\"\xff\"}", 9, "invalid UTF-8", "byte 6");
    check_refused("{\"k\":\"\xc0\x80\"}", 10, "invalid UTF-8", "byte 6");        /* overlong NUL */
    check_refused("{\"k\":\"\xed\xa0\x80\"}", 11, "invalid UTF-8", "byte 6");    /* encoded surrogate */
    check_refused("{\"k\":\"abc", 9, "unterminated string", "byte");

    /* lenient numbers: the value as Python's float() reads it, the source text kept for the dump */
    {
        static const struct { const char *text; double v; } nums[] = {
            {"1e-05", 1e-05}, {"0.02", 0.02}, {"-2.5E+3", -2500.0}, {"10000.0", 10000.0},
            {"18446744073709551616", 18446744073709551616.0}, {"-0", -0.0}, {"1E400", INFINITY},
        };
        for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
            char json[64], msg[160] = "";
            snprintf(json, sizeof json, "{\"k\": %s}", nums[i].text);
            ckj *j = lofp_ckj_parse(json, strlen(json), msg, sizeof msg);
            CHECKF(j != NULL, "%s refused: %s", json, msg);
            if (!j) continue;
            double d = 0;
            const ckj *v = lofp_ckj_get(j, "k");
            CHECKF(lofp_ckj_num(v, &d) && d == nums[i].v && signbit(d) == signbit(nums[i].v), "%s: value %g", json, d);
            lofp_sbuf b = {0};
            CHECK(lofp_ckj_dump(&b, j, -1));
            CHECKF(b.p && strcmp(b.p, json) == 0, "%s dumped as %s", json, b.p ? b.p : "");
            lofp_sbuf_free(&b);
            lofp_ckj_free(j);
        }
        /* NaN / Infinity / -Infinity, the words Python's json.dumps writes for non-finite floats */
        const char *nan_json = "[NaN, Infinity, -Infinity, 7]";
        char msg[160] = "";
        ckj *j = lofp_ckj_parse(nan_json, strlen(nan_json), msg, sizeof msg);
        CHECKF(j && j->n == 4, "non-finite words refused: %s", msg);
        if (j && j->n == 4) {
            double a, b2, c, d;
            long long k = 0;
            CHECK(lofp_ckj_num(j->items[0], &a) && a != a);
            CHECK(lofp_ckj_num(j->items[1], &b2) && b2 == INFINITY);
            CHECK(lofp_ckj_num(j->items[2], &c) && c == -INFINITY);
            CHECK(lofp_ckj_num(j->items[3], &d) && d == 7.0);
            CHECK(!lofp_ckj_int(j->items[0], &k) && !lofp_ckj_int(j->items[1], &k) && lofp_ckj_int(j->items[3], &k) && k == 7);
            lofp_sbuf b = {0};
            CHECK(lofp_ckj_dump(&b, j, -1) && b.p && strcmp(b.p, nan_json) == 0);
            lofp_sbuf_free(&b);
        }
        lofp_ckj_free(j);
        /* an integer past 2^53 is read exactly from its text */
        const char *big = "{\"k\": 9007199254740993}";
        j = lofp_ckj_parse(big, strlen(big), msg, sizeof msg);
        long long k = 0;
        CHECK(j && lofp_ckj_int(lofp_ckj_get(j, "k"), &k) && k == 9007199254740993LL);
        lofp_ckj_free(j);
        /* a non-finite float written back as Python writes it, never as nan/inf */
        ckj *f = lofp_ckj_new_f32(NAN);
        CHECK(f && strcmp(f->s, "NaN") == 0);
        lofp_ckj_free(f);
        f = lofp_ckj_new_f32(-INFINITY);
        CHECK(f && strcmp(f->s, "-Infinity") == 0);
        lofp_ckj_free(f);
    }
    /* lenient is not anything-goes: RFC 8259's number grammar, no other words, duplicates refused */
    check_refused("{\"k\": 1.}", 9, "invalid number", "byte 8");
    check_refused("{\"k\": .5}", 9, "unexpected character", "byte 6");
    check_refused("{\"k\": 01}", 9, "leading zero", "byte");
    check_refused("{\"k\": 1e}", 9, "exponent", "byte 8");
    check_refused("{\"k\": -NaN}", 11, "invalid number", "byte");
    check_refused("{\"k\": nan}", 10, "invalid literal", "byte");
    check_refused("{\"k\": +1}", 9, "unexpected character", "byte 6");
    check_refused("{\"k\": Inf}", 10, "invalid number", "byte 6");
    check_refused("{\"a\": 1, \"a\": 2}", 16, "duplicate key 'a'", "byte 0");
    check_refused("{\"k\": 1} x", 10, "trailing characters", "byte");
    /* depth: values LOFP_JSON_MAX_DEPTH_LENIENT levels below the root are a config file's
     * business, one more is refused */
    {
        static char deep[2 * 600 + 1];
        char msg[160];
        const int ok_depth = LOFP_JSON_MAX_DEPTH_LENIENT + 1;   /* containers, the root's included */
        for (int depth = ok_depth; depth <= ok_depth + 1; depth++) {
            memset(deep, '[', (size_t)depth);
            memset(deep + depth, ']', (size_t)depth);
            ckj *j = lofp_ckj_parse(deep, 2 * (size_t)depth, msg, sizeof msg);
            CHECKF((j != NULL) == (depth == ok_depth), "depth %d: %s", depth, msg);
            lofp_ckj_free(j);
        }
    }
    /* the strict mode (safetensors headers) still refuses every lenient extension */
    {
        const char *lenient_only[] = {"1.5", "1e5", "NaN", "Infinity", "-Infinity", "18446744073709551616"};
        for (size_t i = 0; i < sizeof lenient_only / sizeof lenient_only[0]; i++) {
            lofp_json_doc d;
            char msg[160];
            CHECKF(lofp_json_parse(lenient_only[i], strlen(lenient_only[i]), &d, msg, sizeof msg) == LOFP_ERR_FORMAT,
                   "strict mode accepted %s", lenient_only[i]);
            CHECKF(lofp_json_parse_ex(lenient_only[i], strlen(lenient_only[i]), LOFP_JSON_LENIENT, &d, msg, sizeof msg) == LOFP_OK,
                   "lenient mode refused %s: %s", lenient_only[i], msg);
            lofp_json_free(&d);
        }
    }
    return tu_finish("test_ck_json");
}
