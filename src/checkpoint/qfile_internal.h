/* qfile_internal.h -- what the lofp tensor-file pipelines (qfile_stream.c, qfile_relayout.c) share:
 * the output writer through the caller's hooks and the chunked copy of an unchanged tensor. Not
 * installed. */
#ifndef LOFP_QFILE_INTERNAL_H
#define LOFP_QFILE_INTERNAL_H

#include "core/core.h"
#include "lofp/io.h"
#include "lofp/qfile.h"

/* lofp_writer_open / _finish / _abort, or the caller's replacements in ops (may be NULL). */
LOFP_INTERNAL lofp_status lofp_qfile_w_open(const lofp_qfile_writer_ops *ops, const char *path, lofp_file_format fmt,
                                            const lofp_tensor_desc *t, size_t n, const lofp_metadata_entry *meta,
                                            size_t nm, unsigned flags, lofp_writer **out, lofp_io_error *err);
LOFP_INTERNAL lofp_status lofp_qfile_w_finish(const lofp_qfile_writer_ops *ops, lofp_writer *w, lofp_io_error *err);
LOFP_INTERNAL void lofp_qfile_w_abort(const lofp_qfile_writer_ops *ops, lofp_writer *w);

/* Tensor t of f appended unchanged to output i of w in chunks of about chunk_bytes. */
LOFP_INTERNAL lofp_status lofp_qfile_copy_tensor(const lofp_file *f, const lofp_tensor_info *t, lofp_writer *w,
                                                 size_t i, size_t chunk_bytes, lofp_io_error *err);

#endif
