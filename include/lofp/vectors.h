/*
 * vectors.h -- the conformance suite: bit-exact test vectors for every element codec, block
 * scheme, producer profile and scale layout lofp implements (docs/CONFORMANCE.md).
 *
 * The suite is a directory of JSON-lines files, one per family (element.jsonl, block.jsonl,
 * layout.jsonl), and a manifest.json with the suite version, the library version, the number of
 * cases per file and each file's SHA-256. Every expected value is computed by the library's own
 * reference code (lofp_encode, lofp_quantize under each producer profile, lofp_layout_from_linear);
 * the cases are enumerated from the formats' definitions (every representable value, every
 * midpoint and its fp32 neighbours, every power-of-two edge, ...), never sampled at random, so two
 * runs of the same version write the same bytes. A case's id is derived from its parameters and
 * its input, not from its position, so it names the same case in every suite version.
 */
#ifndef LOFP_VECTORS_H
#define LOFP_VECTORS_H

#include <stddef.h>
#include <stdint.h>

#include "lofp/io.h"
#include "lofp/lofp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the suite's file format and case set; written to manifest.json. Bumped when a
 * field changes meaning or cases are removed (adding cases keeps the ids of the old ones). */
#define LOFP_VECTORS_SUITE_VERSION 1

/* What lofp_vectors_write() wrote. */
typedef struct lofp_vectors_summary {
    size_t element_cases; /* lines of element.jsonl */
    size_t block_cases;   /* lines of block.jsonl */
    size_t layout_cases;  /* lines of layout.jsonl */
    size_t bytes;         /* total bytes of the three case files */
} lofp_vectors_summary;

/* Writes the conformance suite into directory `dir` (created if missing, with its parents):
 * element.jsonl, block.jsonl, layout.jsonl and manifest.json, each replaced atomically (a
 * reader sees an old file or a new one, never a part). Existing other files in dir are left
 * alone. Fills *summary when it is non-NULL. Returns LOFP_OK, LOFP_ERR_IO (with a message naming
 * the path in err), LOFP_ERR_NOMEM or LOFP_ERR_INVALID_ARG (NULL dir). The output depends only
 * on the library version, not on the machine, the CPU's features or the thread count.
 * Re-entrant; two calls must not write the same directory at once. */
LOFP_API lofp_status lofp_vectors_write(const char *dir, lofp_vectors_summary *summary,
                                        lofp_io_error *err);

#ifdef __cplusplus
}
#endif
#endif /* LOFP_VECTORS_H */
