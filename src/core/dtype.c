/* dtype.c -- the one question every component asks of a lofp_dtype before handing it to a
 * quantizer. The dtype names, widths and .npy descrs are the file layer's (src/io/io_util.c). */
#include "core.h"

int lofp_dtype_is_dense(lofp_dtype dt)
{
    return dt == LOFP_DTYPE_F32 || dt == LOFP_DTYPE_BF16 || dt == LOFP_DTYPE_F16;
}
