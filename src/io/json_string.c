/* json_string.c -- JSON string decoding for io_json.c (both its modes): one strict implementation
 * of the escapes, surrogate pairs and UTF-8 checks (json_string.h). */
#include "json_string.h"

#include "io_internal.h"

size_t lofp_json_string_end(const uint8_t *s, size_t len, size_t pos)
{
    size_t e = pos + 1;
    while (e < len && s[e] != '"') e += s[e] == '\\' ? 2 : 1;
    return e < len ? e : len;
}

/* Reads four hex digits at s[*pos]; 0 (and *pos unchanged) when they are not there. */
static int hex4(const uint8_t *s, size_t len, size_t *pos, uint32_t *out)
{
    if (len - *pos < 4) return 0;
    uint32_t v = 0;
    for (size_t k = 0; k < 4; k++) {
        uint8_t c = s[*pos + k];
        uint32_t d;
        if (c >= '0' && c <= '9') d = (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') d = (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') d = (uint32_t)(c - 'A' + 10);
        else return 0;
        v = v << 4 | d;
    }
    *pos += 4;
    *out = v;
    return 1;
}

static void put_utf8(char *o, size_t *k, uint32_t cp)
{
    if (cp < 0x80) {
        o[(*k)++] = (char)cp;
    } else if (cp < 0x800) {
        o[(*k)++] = (char)(0xC0 | cp >> 6);
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        o[(*k)++] = (char)(0xE0 | cp >> 12);
        o[(*k)++] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        o[(*k)++] = (char)(0xF0 | cp >> 18);
        o[(*k)++] = (char)(0x80 | (cp >> 12 & 0x3F));
        o[(*k)++] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[(*k)++] = (char)(0x80 | (cp & 0x3F));
    }
}

#define FAIL(msg) do { *err = (msg); *pos = p; return 0; } while (0)

int lofp_json_string_decode(const uint8_t *s, size_t len, size_t *pos, char *out, size_t *out_len,
                            const char **err)
{
    size_t p = *pos + 1, k = 0; /* past the opening quote */
    for (;;) {
        if (p >= len) FAIL("unterminated string");
        uint8_t c = s[p];
        if (c == '"') { p++; break; }
        if (c < 0x20) FAIL("control character in string");
        if (c == '\\') {
            if (len - p < 2) FAIL("unterminated string");
            uint8_t e = s[p + 1];
            switch (e) {
            case '"': out[k++] = '"'; break;
            case '\\': out[k++] = '\\'; break;
            case '/': out[k++] = '/'; break;
            case 'b': out[k++] = '\b'; break;
            case 'f': out[k++] = '\f'; break;
            case 'n': out[k++] = '\n'; break;
            case 'r': out[k++] = '\r'; break;
            case 't': out[k++] = '\t'; break;
            case 'u': {
                uint32_t cp;
                p += 2;
                if (!hex4(s, len, &p, &cp)) FAIL(len - p < 4 ? "truncated \\u escape" : "invalid hex digit in \\u escape");
                if (cp >= 0xDC00 && cp <= 0xDFFF) FAIL("lone low surrogate in \\u escape");
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    uint32_t lo;
                    if (len - p < 2 || s[p] != '\\' || s[p + 1] != 'u') FAIL("lone high surrogate in \\u escape");
                    p += 2;
                    if (!hex4(s, len, &p, &lo)) FAIL(len - p < 4 ? "truncated \\u escape" : "invalid hex digit in \\u escape");
                    if (lo < 0xDC00 || lo > 0xDFFF) FAIL("high surrogate not followed by a low one");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                put_utf8(out, &k, cp); /* <= 4 bytes from >= 6 source bytes */
                continue;
            }
            default:
                p++;
                FAIL("invalid escape in string");
            }
            p += 2;
            continue;
        }
        if (c < 0x80) { out[k++] = (char)c; p++; continue; }
        /* a multi-byte UTF-8 sequence: validate it, then copy it */
        size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        if (len - p < n || !lofp_io_utf8_valid(s + p, n)) FAIL("invalid UTF-8 in string");
        for (size_t i = 0; i < n; i++) out[k++] = (char)s[p + i];
        p += n;
    }
    out[k] = '\0';
    *out_len = k;
    *pos = p;
    return 1;
}
