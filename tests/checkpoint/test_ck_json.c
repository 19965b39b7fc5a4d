/* test_ck_json.c -- the config-file JSON parser's strings (checkpoint/ck_json.c over io's shared
 * decoder, io/json_string.c): escapes and surrogate pairs decode to the UTF-8 RFC 8259 and Unicode
 * define (expected bytes written from the standards, not from our output), and every malformed
 * string is refused with its reason and byte offset, as the safetensors-header parser refuses it
 * (tests/io/test_io.c). */
#include <stdio.h>
#include <string.h>

#include "checkpoint/ck_internal.h"
#include "test_util.h"

static void check_decodes(const char *json, const char *want, size_t want_len)
{
    char msg[160] = "";
    ckj *j = ckj_parse(json, strlen(json), msg, sizeof msg);
    CHECKF(j != NULL, "%s: refused: %s", json, msg);
    if (!j) return;
    const ckj *v = ckj_get(j, "k");
    const char *s = ckj_str(v);
    CHECKF(s && v->slen == want_len && memcmp(s, want, want_len) == 0, "%s: wrong decoded bytes", json);
    ckj_free(j);
}

static void check_refused(const char *json, size_t len, const char *why, const char *at)
{
    char msg[160] = "";
    ckj *j = ckj_parse(json, len, msg, sizeof msg);
    CHECKF(j == NULL, "accepted malformed %s", json);
    CHECKF(strstr(msg, why) != NULL, "%s: message '%s' lacks '%s'", json, msg, why);
    CHECKF(strstr(msg, at) != NULL, "%s: message '%s' lacks '%s'", json, msg, at);
    ckj_free(j);
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
    return tu_finish("test_ck_json");
}
