/* json_string.h -- the JSON string decoder of io's parser (io_json.c, src/io/json_string.c), kept
 * apart so that the string rules are read in one place. Internal to io: other components parse
 * JSON through io/json.h. */
#ifndef LOFP_IO_JSON_STRING_H
#define LOFP_IO_JSON_STRING_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

/* Finds the end of the JSON string whose opening quote is at s[pos]: returns the index of its
 * closing quote (escapes skipped, nothing validated), or len when the text ends first. The bytes
 * strictly between the quotes bound the decoded length, so a buffer of (closing - pos) bytes
 * holds the decoded string and its NUL. Pure; thread-safe. */
LOFP_INTERNAL size_t lofp_json_string_end(const uint8_t *s, size_t len, size_t pos);

/* Decodes the JSON string whose opening quote is at s[*pos] into out, NUL-terminated: the escapes
 * of RFC 8259 (\u pairs joined into one code point, lone surrogates refused), raw bytes checked to
 * be UTF-8 without overlongs or surrogates, control characters refused. out must hold as many
 * bytes as the source between the quotes plus one (see lofp_json_string_end; the decoded form is
 * never longer). Returns 1 with *pos just past the closing quote and *out_len the decoded length;
 * 0 with *err a static message and *pos at the offending byte. Pure; thread-safe. */
LOFP_INTERNAL int lofp_json_string_decode(const uint8_t *s, size_t len, size_t *pos, char *out,
                                          size_t *out_len, const char **err);

#endif
