/* gemm_threads.c -- the GEMM kernels' fork/join, on the library's thread pool (threadpool.h).
 * The work is cut into a few parts per thread (claimed by whichever thread is free, so a worker
 * that starts late takes fewer). The partition is fixed by (t, nparts) alone and every output element is computed by the same
 * code whichever share holds it, so results never depend on how many threads really ran (the
 * pool runs a share on an existing thread when it cannot create one). */
#include "gemm_internal.h"
#include "runtime/threadpool.h"

typedef struct {
    void (*fn)(void *, unsigned, unsigned);
    void *ctx;
    unsigned nt;
} gemm_job;

static void gemm_task(void *v, size_t i)
{
    const gemm_job *j = v;
    j->fn(j->ctx, (unsigned)i, j->nt);
}

void lofp_gemm_parallel(unsigned nthreads, size_t units, void (*fn)(void *ctx, unsigned t, unsigned nt),
                        void *ctx)
{
    if (nthreads > LOFP_MAX_THREADS) nthreads = LOFP_MAX_THREADS;
    if (nthreads <= 1) { fn(ctx, 0, 1); return; }
    size_t parts = lofp_parallel_tasks(nthreads, units ? units : 1);
    gemm_job j = { fn, ctx, (unsigned)parts };
    lofp_parallel_run_tasks(parts, nthreads, gemm_task, &j);
}
