/* cmd_vectors.c -- `lofp vectors DIR`: writes the conformance suite (lofp_vectors_write,
 * docs/CONFORMANCE.md) and prints what it wrote. */
#include <string.h>

#include "cli.h"
#include "lofp/vectors.h"

static void vectors_usage(FILE *f)
{
    fprintf(f,
        "usage: lofp vectors DIR\n\n"
        "Writes the conformance suite into DIR (created if missing): element.jsonl (every element\n"
        "type x rounding x overflow policy at its edge inputs), block.jsonl (every block scheme x\n"
        "scale rule x producer profile at the block quantizers' edges, with which producers agree),\n"
        "layout.jsonl (scale layouts of ragged shapes) and manifest.json (suite version, counts,\n"
        "SHA-256 per file). `python -m lofp.vectors check DIR --impl NAME` runs them against an\n"
        "implementation; docs/CONFORMANCE.md describes the format.\n");
}

int lofp_cmd_vectors(int argc, char **argv)
{
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) { vectors_usage(stdout); return 0; }
        if (argv[i][0] == '-') return cli_error("vectors", "unknown option '%s'", argv[i]);
        if (dir) return cli_error("vectors", "one directory only ('%s' and '%s')", dir, argv[i]);
        dir = argv[i];
    }
    if (!dir) { vectors_usage(stderr); return 2; }
    lofp_vectors_summary sum;
    lofp_io_error err;
    if (lofp_vectors_write(dir, &sum, &err) != LOFP_OK) return cli_error("vectors", "%s", err.message);
    printf("lofp vectors: suite version %d, lofp %s, in %s\n", LOFP_VECTORS_SUITE_VERSION,
           lofp_version(), dir);
    printf("  element.jsonl  %zu cases\n  block.jsonl    %zu cases\n  layout.jsonl   %zu cases\n"
           "  %zu bytes; manifest.json holds the SHA-256 of each file\n",
           sum.element_cases, sum.block_cases, sum.layout_cases, sum.bytes);
    return 0;
}
