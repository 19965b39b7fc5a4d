/* sbuf.h -- the growable byte buffer the file layer's writers and the checkpoint layer's config,
 * index and GGUF writers share (src/io/io_util.c). An interface header of io: components allowed
 * to use io may include it (tests/arch/layering.py).
 *
 * A zeroed lofp_sbuf is empty. Appends grow it; an allocation failure sets `failed` and drops
 * everything appended afterwards, so a writer checks `failed` once at the end. p is always
 * NUL-terminated once anything was appended. Not thread-safe (one buffer, one thread). */
#ifndef LOFP_IO_SBUF_H
#define LOFP_IO_SBUF_H

#include <stddef.h>

#include "core/core.h"

typedef struct lofp_sbuf {
    char *p;
    size_t len, cap;
    int failed;         /* an allocation failed; everything after is dropped */
} lofp_sbuf;

/* Appends n bytes at s. */
LOFP_INTERNAL void lofp_sbuf_put(lofp_sbuf *b, const void *s, size_t n);
/* Appends one byte. */
LOFP_INTERNAL void lofp_sbuf_putc(lofp_sbuf *b, char c);
/* Appends the NUL-terminated string s (without its NUL). */
LOFP_INTERNAL void lofp_sbuf_puts(lofp_sbuf *b, const char *s);
/* Appends printf-formatted text. */
LOFP_INTERNAL void lofp_sbuf_printf(lofp_sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends s[0..len) as a JSON string literal, escaped exactly as serde_json does (", \, \b, \f,
 * \n, \r, \t, other controls as \u00xx; everything else verbatim). */
LOFP_INTERNAL void lofp_sbuf_json_string(lofp_sbuf *b, const char *s, size_t len);
/* Frees the buffer and leaves it empty (reusable). */
LOFP_INTERNAL void lofp_sbuf_free(lofp_sbuf *b);

#endif
