/* json.h -- the library's one JSON parser (src/io/io_json.c). An interface header of io:
 * components allowed to use io may include it (tests/arch/layering.py).
 *
 * Two modes over one grammar implementation:
 *   strict (lofp_json_parse): what a safetensors header may hold -- RFC 8259 with integers only
 *     (magnitude < 2^64), nesting at most LOFP_JSON_MAX_DEPTH.
 *   lenient (LOFP_JSON_LENIENT, for the config files of a model directory): numbers with
 *     fractions and exponents, integers past 64 bits, and the words NaN, Infinity and -Infinity
 *     that Python's json module writes; each becomes a LOFP_JSON_NUMBER node holding its source
 *     text and its value as a double. Nesting at most LOFP_JSON_MAX_DEPTH_LENIENT.
 * Both modes refuse duplicate keys within an object: Python's json keeps the last value and some
 * readers the first, so a file with two values for one key means different things to different
 * tools, and a converter should not pick one. Both refuse trailing characters, control
 * characters and invalid UTF-8 in strings and lone surrogates (json_string.c decodes strings).
 *
 * The parse result is a flat node array; callers walk it (first/next/count) and build what they
 * need. Not thread-safe per document; separate documents are independent. */
#ifndef LOFP_IO_JSON_H
#define LOFP_IO_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "lofp/lofp.h"

/* Deepest nesting the strict mode accepts (a safetensors header needs 3). */
#define LOFP_JSON_MAX_DEPTH 64
/* Deepest nesting the lenient mode accepts: far beyond any real config file, and shallow enough
 * that the recursive parser and the tree built from it stay well inside a thread's stack. */
#define LOFP_JSON_MAX_DEPTH_LENIENT 512

/* lofp_json_parse_ex flags */
#define LOFP_JSON_LENIENT 1u

enum {
    LOFP_JSON_NULL = 0,
    LOFP_JSON_FALSE = 1,
    LOFP_JSON_TRUE = 2,
    LOFP_JSON_INT = 3,    /* an integer whose magnitude fits 64 bits */
    LOFP_JSON_STRING = 4,
    LOFP_JSON_ARRAY = 5,
    LOFP_JSON_OBJECT = 6,
    LOFP_JSON_NUMBER = 7  /* lenient mode only: any other number, NaN, Infinity, -Infinity */
};

/* One value. Node 0 is the root; index 0 as a link means "none". Strings (values and member keys)
 * live NUL-terminated in the document's string buffer and may contain NUL bytes themselves
 * (from \u0000): compare with their length. A number's source text lives there too. */
typedef struct lofp_json_node {
    uint8_t type;
    uint8_t negative;   /* INT: a leading minus sign was present */
    uint32_t key;       /* object member: offset of its key in strings; else UINT32_MAX */
    uint32_t key_len;
    uint32_t next;      /* next sibling (member or element) */
    uint32_t first;     /* ARRAY/OBJECT: first child; STRING, INT, NUMBER: offset in strings
                           of the decoded string or the number's source text */
    uint32_t count;     /* ARRAY/OBJECT: children; STRING, INT, NUMBER: byte length */
    uint64_t num;       /* INT: magnitude */
    double dbl;         /* INT, NUMBER: the value (strtod of the text; NaN/Infinity as named) */
} lofp_json_node;

typedef struct lofp_json_doc {
    lofp_json_node *nodes;
    uint32_t n_nodes;
    uint32_t cap_nodes;
    char *strings;
    size_t strings_len;
} lofp_json_doc;

/* Parses exactly one JSON value from text[0..len), allowing whitespace around it, in the strict
 * mode (see the top of this header). On error returns LOFP_ERR_FORMAT (or LOFP_ERR_NOMEM), leaves
 * doc empty and writes a message "JSON error at byte N: ..." to msg. On success the caller owns
 * doc and frees it with lofp_json_free. Re-entrant. */
LOFP_INTERNAL lofp_status lofp_json_parse(const char *text, size_t len, lofp_json_doc *doc,
                                          char *msg, size_t msg_cap);
/* lofp_json_parse with flags: LOFP_JSON_LENIENT selects the lenient mode. */
LOFP_INTERNAL lofp_status lofp_json_parse_ex(const char *text, size_t len, unsigned flags,
                                             lofp_json_doc *doc, char *msg, size_t msg_cap);
/* Frees what a successful parse allocated and leaves doc empty. */
LOFP_INTERNAL void lofp_json_free(lofp_json_doc *doc);
/* Member `key` of object node obj, or 0 when absent (or obj is not an object). */
LOFP_INTERNAL uint32_t lofp_json_get(const lofp_json_doc *doc, uint32_t obj, const char *key);

#endif
