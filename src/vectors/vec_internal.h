/* vec_internal.h -- the conformance suite's families (vec_element.c, vec_block.c, vec_layout.c),
 * the writer that assembles them (vec_suite.c) and the SHA-256 the manifest records
 * and the helpers (vec_util.c). Each family appends its JSON lines to a buffer and counts them. */
#ifndef LOFP_VECTORS_INTERNAL_H
#define LOFP_VECTORS_INTERNAL_H

#include "core/core.h"
#include "io/sbuf.h"
#include "lofp/vectors.h"

/* Each appends one JSON object per line to *b and adds the number of lines to *count. Returns
 * LOFP_OK or LOFP_ERR_NOMEM (the buffer failed) or the status of an unexpected library error. */
LOFP_INTERNAL lofp_status lofp_vec_element(lofp_sbuf *b, size_t *count);
LOFP_INTERNAL lofp_status lofp_vec_block(lofp_sbuf *b, size_t *count);
LOFP_INTERNAL lofp_status lofp_vec_layout(lofp_sbuf *b, size_t *count);

/* SHA-256 (FIPS 180-4) of n bytes at data into out[32]. Written here because the manifest
 * needs one and libc has none; the runner checks it against Python's hashlib. */
LOFP_INTERNAL void lofp_vec_sha256(const void *data, size_t n, uint8_t out[32]);

/* Appends printf-formatted text of up to 1023 bytes (longer sets b->failed). */
LOFP_INTERNAL void lofp_vec_printf(lofp_sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Appends the n bytes at p as lowercase hex (two digits a byte, no separator). */
LOFP_INTERNAL void lofp_vec_hex(lofp_sbuf *b, const uint8_t *p, size_t n);

/* The first 12 hex digits of the SHA-256 of s[0..n): the content part of a case id. */
LOFP_INTERNAL void lofp_vec_digest12(const void *s, size_t n, char out[13]);

#endif
