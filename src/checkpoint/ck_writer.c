/* ck_writer.c -- the shard writer of conversions and imports: io's streaming writer
 * (lofp_writer, include/lofp/io.h): the header is written first from the tensor descriptions,
 * each tensor's bytes go to their final offset as they are produced (in any order across
 * tensors), and finish fsyncs and renames. Only one converted tensor is in memory at a time,
 * whatever the shard's size, and the file is byte-identical to lofp_file_write()'s. */
#include "ck_internal.h"

#include <stdlib.h>

struct st_writer {
    lofp_writer *w;
};

lofp_status lofp_st_writer_open(const char *path, const lofp_tensor_desc *t, size_t n,
                           const lofp_metadata_entry *meta, size_t n_meta, st_writer **out,
                           lofp_io_error *err)
{
    *out = NULL;
    /* the descriptions carry shapes; lofp_writer wants each byte size too */
    lofp_tensor_desc *d = malloc((n ? n : 1) * sizeof *d);
    if (!d) return lofp_ck_fail(err, LOFP_ERR_NOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++) {
        d[i] = t[i];
        d[i].data = NULL;
        if (lofp_io_tensor_bytes(t[i].dtype, t[i].shape, t[i].ndim, &d[i].nbytes) != LOFP_OK) {
            free(d);
            return lofp_ck_fail(err, LOFP_ERR_INVALID_ARG, "%s: tensor '%s': bad shape", path, t[i].name);
        }
    }
    lofp_writer *w = NULL;
    lofp_status st = lofp_ck_open_writer(path, d, n, meta, n_meta, &w, err);
    free(d);
    if (st) return st;
    *out = (st_writer *)w;
    return LOFP_OK;
}

lofp_status lofp_st_writer_put_at(st_writer *w, size_t i, const void *data, size_t n, lofp_io_error *err)
{
    return lofp_writer_append((lofp_writer *)w, i, data, n, err);
}

lofp_status lofp_st_writer_finish(st_writer *w, lofp_io_error *err)
{
    return lofp_ck_finish_writer((lofp_writer *)w, err);
}

void lofp_st_writer_abort(st_writer *w)
{
    lofp_ck_abort_writer((lofp_writer *)w);
}
