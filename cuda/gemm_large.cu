/* gemm_large.cu -- W4A16 for large M (m >= LARGE_M_MIN): dequantize the prepared weights to bf16
 * in a transient buffer, then one cuBLASLt bf16 GEMM (fp32 compute).
 *
 * Why: at large M the GEMM is tensor-core bound and the weight format matters only once per call;
 * dequantizing N x K to bf16 costs about one HBM pass over 2.5 bytes per weight (~50 us at 8192^2),
 * while cuBLAS's bf16 GEMM is faster than the wgmma kernel of gemm_wgmma.cu by more than that at
 * M >= 768 (H200, NVFP4 8192^2: M = 1024 221 us against the warp-specialised kernel's
 * 238, M = 4096 730 against 1154; cuBLAS bf16 173 and 682).
 *
 * Numerics: the dequantize kernel produces, with the same device helpers (fp4pair, bf16x2_mul,
 * nv_scale2, mx_scale1), the very bf16 values the GEMV and wgmma kernels feed the tensor cores
 * (e2m1 * UE4M3 * 2^-7 for NVFP4, e2m1 * 2^(e - emax_tensor) for MXFP4, exact in bf16). cuBLASLt
 * multiplies them exactly, accumulates in fp32 (CUBLAS_COMPUTE_32F) in its own order, and scales
 * by alpha = params[0] read from device memory: the other kernels' numerics class.
 *
 * Layout: C[m, n] = A[m, k] . W[n, k]^T row-major is, column-major, C^T (n x m, ld n) =
 * W^T^T . A^T: cuBLAS's A is the bf16 weights (k x n column-major, ld k, op T), its B the
 * activations (k x m, ld k, op N), its D the output (n x m, ld n). Weights larger than the cap go
 * in chunks of rows of W, each chunk writing its own output columns through ldd = n.
 *
 * cuBLASLt is opened with dlopen at first use and never linked: without it (or when it fails)
 * this path returns LOFP_ERR_UNSUPPORTED having enqueued nothing, and the caller runs the wgmma
 * kernel. One cuBLASLt handle per device (a handle belongs to the device current at its
 * creation; cuBLAS(Lt) functions may be called from several threads with one handle, and
 * cublasLtMatmul takes its stream and workspace per call, so nothing else of the handle changes).
 * The heuristic's algorithm is cached per (device, m, rows, k, output type, alignments).
 *
 * Memory: the bf16 chunk and the cuBLASLt workspace are one stream-ordered allocation
 * (cudaMallocFromPoolAsync / cudaFreeAsync on the caller's stream) from a per-device pool that
 * keeps up to one chunk + workspace reserved between calls (release threshold), so repeated
 * calls do not map fresh memory after every synchronisation. Allocation failure -> unsupported
 * -> the wgmma kernel. So is a stream being captured into a CUDA graph.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <atomic>
#include <mutex>

#include <cublasLt.h>

#include "gemm_common.cuh"
#include "lofp_cuda_device.cuh"
#include "lofp_cuda_internal.h"

using namespace lofpcu;

namespace {

constexpr size_t DEFAULT_CAP = (size_t)256 << 20; /* bf16 weight bytes per chunk */
constexpr size_t WS_BYTES = (size_t)32 << 20;     /* cuBLASLt workspace (Hopper's recommended size) */
constexpr int MAX_DEV = 64;

/* test hooks (lofp_cuda_large_test_config) */
std::atomic<size_t> g_cap{DEFAULT_CAP};
std::atomic<int> g_lt_off{0};

/* ---- dequantize: one thread per prepared 32-bit word (8 weights -> one 16-byte store) ---- */
/* Prepared word j (tile-major, gemm_common.cuh: 256 words per 16-row x 128-element block, row r16
 * of the block at words 16 r16 .. 16 r16 + 15) holds elements 8 (j % 16)..+7 of chunk ch of row
 * 16 t + r16 (block j / 256 = t nch + ch); its scale byte is byte j / 2 (NVFP4) or j / 4 (MXFP4)
 * of the tile-major scales (16 x 8 or 16 x 4 bytes per block, the same order). */
template <int NV>
__device__ __forceinline__ uint4 w4_word_bf16(uint32_t q, uint32_t sbyte, int sbias)
{
    uint32_t s;
    if (NV) {
        uint32_t s1;
        nv_scale2(sbyte, s, s1);
    } else {
        s = mx_scale1(sbyte, sbias);
    }
    uint4 v;
    v.x = bf16x2_mul(fp4pair(q, 0), s);
    v.y = bf16x2_mul(fp4pair(q, 1), s);
    v.z = bf16x2_mul(fp4pair(q, 2), s);
    v.w = bf16x2_mul(fp4pair(q, 3), s);
    return v;
}

/* Each thread takes U prepared words a grid-stride apart per step (all loads issued before the
 * stores: U 4-byte code loads in flight per thread; a warp reads 128 contiguous bytes of codes and
 * writes two runs of 256 bytes of the row-major bf16 [rows, k] output per instruction). */
template <int NV>
__global__ void __launch_bounds__(256) w4_to_bf16(const uint32_t *__restrict__ codes,
                                                  const uint8_t *__restrict__ scales,
                                                  const float *__restrict__ params,
                                                  uint4 *__restrict__ out, size_t words, uint32_t nch)
{
    const size_t kw = (size_t)nch * 16; /* words per row */
    constexpr int U = 4;
    const int sbias = NV ? 0 : (int)params[1];
    const size_t T = (size_t)gridDim.x * blockDim.x;
    for (size_t i0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i0 < words; i0 += U * T) {
        uint32_t q[U], sb[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const size_t i = i0 + u * T;
            q[u] = i < words ? __ldg(codes + i) : 0u;
            sb[u] = i < words ? __ldg(scales + (NV ? i >> 1 : i >> 2)) : 0u;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const size_t i = i0 + u * T;
            if (i < words) {
                const uint32_t b = (uint32_t)(i >> 8), t = b / nch, ch = b - t * nch, r16 = ((uint32_t)i >> 4) & 15;
                out[((size_t)t * 16 + r16) * kw + (size_t)ch * 16 + (i & 15)] = w4_word_bf16<NV>(q[u], sb[u], sbias);
            }
        }
    }
}

/* ---- cuBLASLt, opened at run time ---- */
struct LtApi {
    decltype(&cublasLtCreate) create;
    decltype(&cublasLtMatmulDescCreate) desc_create;
    decltype(&cublasLtMatmulDescSetAttribute) desc_set;
    decltype(&cublasLtMatmulDescDestroy) desc_destroy;
    decltype(&cublasLtMatrixLayoutCreate) layout_create;
    decltype(&cublasLtMatrixLayoutDestroy) layout_destroy;
    decltype(&cublasLtMatmulPreferenceCreate) pref_create;
    decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set;
    decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy;
    decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic;
    decltype(&cublasLtMatmul) matmul;
    bool ok;
};

LtApi g_lt;
std::once_flag g_lt_once;

void lt_load(void)
{
    memset(&g_lt, 0, sizeof g_lt);
    void *h = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libcublasLt.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("/usr/local/cuda/lib64/libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL); /* toolkit not on the loader path */
    if (!h) return;
    bool ok = true;
#define LT_SYM(field, name)                                                                    \
    do {                                                                                       \
        g_lt.field = (decltype(g_lt.field))dlsym(h, name);                                     \
        ok = ok && g_lt.field != nullptr;                                                      \
    } while (0)
    LT_SYM(create, "cublasLtCreate");
    LT_SYM(desc_create, "cublasLtMatmulDescCreate");
    LT_SYM(desc_set, "cublasLtMatmulDescSetAttribute");
    LT_SYM(desc_destroy, "cublasLtMatmulDescDestroy");
    LT_SYM(layout_create, "cublasLtMatrixLayoutCreate");
    LT_SYM(layout_destroy, "cublasLtMatrixLayoutDestroy");
    LT_SYM(pref_create, "cublasLtMatmulPreferenceCreate");
    LT_SYM(pref_set, "cublasLtMatmulPreferenceSetAttribute");
    LT_SYM(pref_destroy, "cublasLtMatmulPreferenceDestroy");
    LT_SYM(heuristic, "cublasLtMatmulAlgoGetHeuristic");
    LT_SYM(matmul, "cublasLtMatmul");
#undef LT_SYM
    /* the library stays open for the life of the process (handles are never destroyed) */
    g_lt.ok = ok;
}

/* Per-device state, created once under g_dev_mu: the handle, a device zero for beta (pointer
 * mode device reads alpha and beta from device memory) and the memory pool. */
struct DevState {
    int state; /* 0 not tried, 1 ready, 2 failed */
    cublasLtHandle_t handle;
    float *d_zero;
    cudaMemPool_t pool;
};
DevState g_dev[MAX_DEV];
std::mutex g_dev_mu;

/* algorithm cache: a small table, replaced round-robin */
struct AlgoKey {
    int dev, out_bf16;
    size_t m, rows, k;
    unsigned align_b, align_d;
    bool operator==(const AlgoKey &o) const
    {
        return dev == o.dev && out_bf16 == o.out_bf16 && m == o.m && rows == o.rows && k == o.k &&
               align_b == o.align_b && align_d == o.align_d;
    }
};
constexpr int NALGO = 64;
struct AlgoEntry { bool used; AlgoKey key; cublasLtMatmulAlgo_t algo; };
AlgoEntry g_algo[NALGO];
int g_algo_next;
std::mutex g_algo_mu;

const DevState *dev_state(int dev)
{
    std::lock_guard<std::mutex> lk(g_dev_mu);
    DevState &d = g_dev[dev];
    if (d.state == 0) {
        d.state = 2;
        bool ok = g_lt.create(&d.handle) == CUBLAS_STATUS_SUCCESS;
        if (ok) ok = cudaMalloc((void **)&d.d_zero, sizeof(float)) == cudaSuccess;
        if (ok) ok = cudaMemset(d.d_zero, 0, sizeof(float)) == cudaSuccess;
        if (ok) {
            cudaMemPoolProps pp;
            memset(&pp, 0, sizeof pp);
            pp.allocType = cudaMemAllocationTypePinned;
            pp.handleTypes = cudaMemHandleTypeNone;
            pp.location.type = cudaMemLocationTypeDevice;
            pp.location.id = dev;
            ok = cudaMemPoolCreate(&d.pool, &pp) == cudaSuccess;
            if (ok) {
                /* keep one chunk + workspace mapped between calls (the default threshold 0
                 * would unmap it at every synchronisation and map it again on the next call) */
                uint64_t thr = DEFAULT_CAP + WS_BYTES;
                ok = cudaMemPoolSetAttribute(d.pool, cudaMemPoolAttrReleaseThreshold, &thr) == cudaSuccess;
            }
        }
        (void)cudaGetLastError();
        if (ok) d.state = 1;
    }
    return d.state == 1 ? &d : nullptr;
}

unsigned ptr_align(const void *p)
{
    const uintptr_t a = (uintptr_t)p;
    unsigned al = 256;
    while (al > 1 && (a & (al - 1))) al >>= 1;
    return al;
}

/* One cuBLASLt GEMM: D[rows, m] (column-major, ld ldd) = alpha * Wbf^T . A^T. Returns false
 * (nothing enqueued) when cuBLASLt refuses. */
bool lt_gemm(const DevState *ds, int dev, const uint16_t *wbf, const void *a, void *d, size_t m,
             size_t rows, size_t k, size_t ldd, int out_bf16, const float *alpha, void *ws,
             size_t ws_bytes, cudaStream_t st)
{
    const LtApi &L = g_lt;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    bool ok = L.desc_create(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS;
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const cublasLtPointerMode_t pm = CUBLASLT_POINTER_MODE_DEVICE;
    const cudaDataType_t dt = out_bf16 ? CUDA_R_16BF : CUDA_R_32F;
    ok = ok && L.desc_set(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) == CUBLAS_STATUS_SUCCESS;
    ok = ok && L.desc_set(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) == CUBLAS_STATUS_SUCCESS;
    ok = ok && L.desc_set(op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm) == CUBLAS_STATUS_SUCCESS;
    ok = ok && L.layout_create(&la, CUDA_R_16BF, k, rows, (int64_t)k) == CUBLAS_STATUS_SUCCESS;
    ok = ok && L.layout_create(&lb, CUDA_R_16BF, k, m, (int64_t)k) == CUBLAS_STATUS_SUCCESS;
    ok = ok && L.layout_create(&ld, dt, rows, m, (int64_t)ldd) == CUBLAS_STATUS_SUCCESS;
    const AlgoKey key = {dev, out_bf16, m, rows, k, ptr_align(a), ptr_align(d)};
    cublasLtMatmulAlgo_t algo;
    bool have = false;
    if (ok) {
        std::lock_guard<std::mutex> lk(g_algo_mu);
        for (int i = 0; i < NALGO; i++)
            if (g_algo[i].used && g_algo[i].key == key) {
                algo = g_algo[i].algo;
                have = true;
                break;
            }
    }
    if (ok && !have) {
        /* the bf16 buffer comes from the pool (256-byte aligned); a and d as they are */
        const uint64_t wsb = ws_bytes;
        const uint32_t aw = 256, ab = key.align_b, ad = key.align_d;
        ok = L.pref_create(&pref) == CUBLAS_STATUS_SUCCESS;
        ok = ok && L.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb) == CUBLAS_STATUS_SUCCESS;
        ok = ok && L.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aw, sizeof aw) == CUBLAS_STATUS_SUCCESS;
        ok = ok && L.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab, sizeof ab) == CUBLAS_STATUS_SUCCESS;
        ok = ok && L.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ad, sizeof ad) == CUBLAS_STATUS_SUCCESS;
        ok = ok && L.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ad, sizeof ad) == CUBLAS_STATUS_SUCCESS;
        cublasLtMatmulHeuristicResult_t res;
        int nres = 0;
        memset(&res, 0, sizeof res);
        ok = ok && L.heuristic(ds->handle, op, la, lb, ld, ld, pref, 1, &res, &nres) == CUBLAS_STATUS_SUCCESS;
        ok = ok && nres > 0 && res.state == CUBLAS_STATUS_SUCCESS;
        if (ok) {
            algo = res.algo;
            have = true;
            std::lock_guard<std::mutex> lk(g_algo_mu);
            AlgoEntry &e = g_algo[g_algo_next];
            g_algo_next = (g_algo_next + 1) % NALGO;
            e.used = true;
            e.key = key;
            e.algo = algo;
        }
    }
    ok = ok && have &&
         L.matmul(ds->handle, op, alpha, wbf, la, a, lb, ds->d_zero, d, ld, d, ld, &algo, ws, ws_bytes, st) ==
             CUBLAS_STATUS_SUCCESS;
    if (pref) L.pref_destroy(pref);
    if (ld) L.layout_destroy(ld);
    if (lb) L.layout_destroy(lb);
    if (la) L.layout_destroy(la);
    if (op) L.desc_destroy(op);
    return ok;
}

} // namespace

bool lofpcu::gemm_large_available(void)
{
    if (g_lt_off.load(std::memory_order_relaxed)) return false;
    std::call_once(g_lt_once, lt_load);
    return g_lt.ok;
}

lofp_status lofpcu::gemm_large_launch(const lofp_cuda_w4 *w, const void *d_a, size_t m, int out_bf16,
                                      void *d_c, cudaStream_t st)
{
    if (!gemm_large_available()) return LOFP_ERR_UNSUPPORTED;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= MAX_DEV) {
        (void)cudaGetLastError();
        return LOFP_ERR_UNSUPPORTED;
    }
    const DevState *ds = dev_state(dev);
    if (!ds) return LOFP_ERR_UNSUPPORTED;
    /* not inside a stream capture (CUDA graphs): an allocation from a non-default pool that the
     * capture refused would invalidate the caller's capture; the kernels capture fine */
    cudaStreamCaptureStatus cap_st = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(st, &cap_st) != cudaSuccess || cap_st != cudaStreamCaptureStatusNone) {
        (void)cudaGetLastError();
        return LOFP_ERR_UNSUPPORTED;
    }
    const size_t n = w->n, k = w->k;
    const bool nv = w->id == LOFP_SCHEME_NVFP4;
    /* rows per chunk: a multiple of 16 (keeps every chunk's output columns 32-byte aligned) */
    const size_t cap = g_cap.load(std::memory_order_relaxed);
    size_t rows = cap / (k * 2) / 16 * 16;
    if (rows < 16) rows = 16;
    if (rows > n) rows = n;
    const size_t wbytes = round_up_sz(rows * k * 2, 256);
    void *buf = nullptr;
    if (cudaMallocFromPoolAsync(&buf, wbytes + WS_BYTES, ds->pool, st) != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: the wgmma kernel runs instead */
        return LOFP_ERR_UNSUPPORTED;
    }
    uint16_t *wbf = (uint16_t *)buf;
    void *ws = (uint8_t *)buf + wbytes;
    const size_t esz = out_bf16 ? 2 : 4;
    const int sms = sm_count();
    lofp_status rc = LOFP_OK;
    for (size_t n0 = 0; n0 < n; n0 += rows) {
        const size_t nr = n - n0 < rows ? n - n0 : rows;
        const size_t words = nr * k / 8;
        /* n0 % 16 == 0: the chunk's rows are whole tiles, contiguous in the tile-major layout */
        const uint32_t *codes = (const uint32_t *)(w->d_codes + w4_code_off(n0, 0, 0, k / 128));
        const uint8_t *scales = w->d_scales + w4_scale_off(n0, 0, nv ? 8 : 4, k / 128);
        /* 8 CTAs of 256 per SM (full occupancy), a few waves' worth of steps each */
        size_t blocks = (words + 1023) / 1024;
        if (blocks > (size_t)sms * 32) blocks = (size_t)sms * 32;
        if (nv) w4_to_bf16<1><<<(unsigned)blocks, 256, 0, st>>>(codes, scales, w->d_params, (uint4 *)wbf, words, (uint32_t)(k / 128));
        else w4_to_bf16<0><<<(unsigned)blocks, 256, 0, st>>>(codes, scales, w->d_params, (uint4 *)wbf, words, (uint32_t)(k / 128));
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) {
            record_cuda_error(e, "w4_to_bf16", __FILE__, __LINE__);
            rc = LOFP_CUDA_ERR_RUNTIME;
            break;
        }
        if (!lt_gemm(ds, dev, wbf, d_a, (uint8_t *)d_c + n0 * esz, m, nr, k, n, out_bf16, w->d_params, ws,
                     WS_BYTES, st)) {
            /* cuBLASLt refused (possible only for the first chunk's shape or the last's): the
             * caller recomputes everything with the wgmma kernel */
            (void)cudaGetLastError();
            rc = LOFP_ERR_UNSUPPORTED;
            break;
        }
    }
    if (cudaFreeAsync(buf, st) != cudaSuccess && rc == LOFP_OK) {
        record_cuda_error(cudaGetLastError(), "cudaFreeAsync", __FILE__, __LINE__);
        rc = LOFP_CUDA_ERR_RUNTIME;
    }
    return rc;
}

extern "C" void lofp_cuda_large_test_config(size_t cap_bytes, int lt_off)
{
    g_cap.store(cap_bytes ? cap_bytes : DEFAULT_CAP);
    g_lt_off.store(lt_off ? 1 : 0);
}

extern "C" int lofp_cuda_large_available(void) { return gemm_large_available() ? 1 : 0; }
