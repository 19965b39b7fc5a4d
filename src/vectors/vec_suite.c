/* vec_suite.c -- lofp_vectors_write: renders the three families, checksums them and writes the
 * files and the manifest, each replaced atomically (io/atomic.h). The manifest is written last,
 * so a directory whose manifest is new has new case files too. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "io/atomic.h"
#include "vec_internal.h"

static lofp_status fail(lofp_io_error *err, lofp_status st, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->status = st;
    }
    return st;
}

/* mkdir -p: every missing component of dir. */
static lofp_status make_dirs(const char *dir, lofp_io_error *err)
{
    size_t n = strlen(dir);
    char *p = malloc(n + 1);
    if (!p) return fail(err, LOFP_ERR_NOMEM, "out of memory");
    memcpy(p, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != 0) continue;
        char c = p[i];
        p[i] = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            lofp_status st = fail(err, LOFP_ERR_IO, "%s: cannot create directory: %s", p, strerror(errno));
            free(p);
            return st;
        }
        p[i] = c;
    }
    free(p);
    return LOFP_OK;
}

static lofp_status write_file(const char *dir, const char *name, const lofp_sbuf *b,
                              lofp_io_error *err)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *path = malloc(n);
    if (!path) return fail(err, LOFP_ERR_NOMEM, "out of memory");
    snprintf(path, n, "%s/%s", dir, name);
    lofp_status st = lofp_write_bytes_atomic(path, b->p ? b->p : "", b->len, err);
    free(path);
    return st;
}

typedef lofp_status (*family_fn)(lofp_sbuf *, size_t *);

lofp_status lofp_vectors_write(const char *dir, lofp_vectors_summary *summary, lofp_io_error *err)
{
    if (err) { err->status = LOFP_OK; err->message[0] = 0; }
    if (!dir || !*dir) return fail(err, LOFP_ERR_INVALID_ARG, "no output directory");
    static const struct { const char *file; family_fn fn; } fam[3] = {
        { "element.jsonl", lofp_vec_element },
        { "block.jsonl", lofp_vec_block },
        { "layout.jsonl", lofp_vec_layout },
    };
    lofp_status st = make_dirs(dir, err);
    if (st != LOFP_OK) return st;
    lofp_vectors_summary sum = { 0 };
    size_t counts[3] = { 0 };
    lofp_sbuf man = { 0 };
    lofp_vec_printf(&man, "{\n  \"suite\": \"lofp-conformance\",\n  \"suite_version\": %d,\n"
                           "  \"lofp_version\": \"%s\",\n  \"checksum\": \"sha256\",\n  \"files\": [\n",
                     LOFP_VECTORS_SUITE_VERSION, lofp_version());
    for (int f = 0; f < 3 && st == LOFP_OK; f++) {
        lofp_sbuf b = { 0 };
        st = fam[f].fn(&b, &counts[f]);
        if (st == LOFP_OK && b.failed) st = LOFP_ERR_NOMEM;
        if (st != LOFP_OK) {
            fail(err, st, "%s: cannot build the cases: %s", fam[f].file, lofp_status_name(st));
        } else {
            uint8_t d[32];
            lofp_vec_sha256(b.p ? b.p : "", b.len, d);
            lofp_vec_printf(&man, "    {\"name\": \"%s\", \"cases\": %zu, \"bytes\": %zu, \"sha256\": \"",
                             fam[f].file, counts[f], b.len);
            lofp_vec_hex(&man, d, 32);
            lofp_vec_printf(&man, "\"}%s\n", f < 2 ? "," : "");
            sum.bytes += b.len;
            st = write_file(dir, fam[f].file, &b, err);
        }
        lofp_sbuf_free(&b);
    }
    lofp_sbuf_puts(&man, "  ]\n}\n");
    if (st == LOFP_OK && man.failed) st = fail(err, LOFP_ERR_NOMEM, "out of memory");
    if (st == LOFP_OK) st = write_file(dir, "manifest.json", &man, err);
    lofp_sbuf_free(&man);
    if (st != LOFP_OK) return st;
    sum.element_cases = counts[0];
    sum.block_cases = counts[1];
    sum.layout_cases = counts[2];
    if (summary) *summary = sum;
    return LOFP_OK;
}
