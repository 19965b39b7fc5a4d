/* cuda_check.h -- fail-fast status checks for the CUDA test and benchmark programs (not the
 * library, which returns statuses): CU() for CUDA runtime calls, LC() for lofp calls. Each prints
 * the file, line, call and error, and exits with status 1. */
#ifndef LOFP_CUDA_CHECK_H
#define LOFP_CUDA_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

#include "lofp/lofp_cuda.h"

#define CU(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)
#define LC(x)                                                                                  \
    do {                                                                                       \
        lofp_status s_ = (x);                                                                  \
        if (s_ != LOFP_OK) {                                                                   \
            fprintf(stderr, "%s:%d: %s -> %s (%s)\n", __FILE__, __LINE__, #x,                  \
                    lofp_cuda_status_name(s_), lofp_cuda_last_error());                        \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

#endif
