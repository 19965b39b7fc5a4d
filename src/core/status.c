/* status.c -- version and status names. */
#include "core.h"

const char *lofp_version(void) { return LOFP_VERSION_STRING; }

const char *lofp_status_name(lofp_status s)
{
    static const char *const names[] = {
        [LOFP_OK] = "ok",
        [LOFP_ERR_INVALID_ARG] = "invalid argument",
        [LOFP_ERR_SHAPE] = "shape: last dimension is not a multiple of the block",
        [LOFP_ERR_NONFINITE] = "non-finite input",
        [LOFP_ERR_SIZE_OVERFLOW] = "size overflow",
        [LOFP_ERR_UNSUPPORTED] = "unsupported",
        [LOFP_ERR_BUFFER_TOO_SMALL] = "buffer too small",
        [LOFP_ERR_NOMEM] = "out of memory",
        [LOFP_ERR_IO] = "i/o error",
        [LOFP_ERR_FORMAT] = "malformed data",
        [LOFP_ERR_NOT_FOUND] = "not found",
        [LOFP_ERR_MISMATCH] = "mismatch",
        [LOFP_ERR_DEVICE] = "device runtime error",
    };
    if ((unsigned)s < sizeof names / sizeof names[0] && names[s]) return names[s];
    return "unknown status";
}
