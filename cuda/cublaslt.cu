/* cublaslt.cu -- cuBLASLt opened at run time, per-device handle / zero / memory pool, the cached
 * heuristic and the one GEMM call both large-M routes use (cublaslt.h). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <atomic>
#include <mutex>

#include "cublaslt.h"
#include "lofp_cuda_internal.h"

using namespace lofpcu;

namespace {

constexpr int MAX_DEV = 64;

/* test hooks (lofp_cuda_large_test_config, lofp_cuda_large_test_algo) */
std::atomic<size_t> g_cap{LT_DEFAULT_CAP};
std::atomic<int> g_lt_off{0};
std::atomic<int> g_algo_pick{0};
std::atomic<bool> g_algo_hooked{false}; /* the hook was called: plans are described */
std::atomic<int> g_fast_accum{0};        /* lofp_cuda_large_test_fast_accum: FP8 plans only */
/* the heuristic's candidates a benchmark sweep may force (lofp_cuda_large_test_algo); the
 * production plan asks for one, the heuristic's first */
constexpr int LT_CAND = 8;
char g_algo_desc[160]; /* the last planned algorithm, described (under g_algo_mu) */

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
    decltype(&cublasLtMatmulAlgoConfigGetAttribute) cfg_get; /* optional: descriptions only */
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
    g_lt.cfg_get = (decltype(g_lt.cfg_get))dlsym(h, "cublasLtMatmulAlgoConfigGetAttribute");
    /* the library stays open for the life of the process (handles are never destroyed) */
    g_lt.ok = ok;
}

/* per-device state, created once under g_dev_mu */
struct DevSlot {
    int state; /* 0 not tried, 1 ready, 2 failed */
    LtDev d;
};
DevSlot g_dev[MAX_DEV];
std::mutex g_dev_mu;

const LtDev *dev_state(int dev)
{
    std::lock_guard<std::mutex> lk(g_dev_mu);
    DevSlot &s = g_dev[dev];
    if (s.state == 0) {
        s.state = 2;
        LtDev &d = s.d;
        d.dev = dev;
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
                uint64_t thr = LT_DEFAULT_CAP + LT_WS_BYTES;
                ok = cudaMemPoolSetAttribute(d.pool, cudaMemPoolAttrReleaseThreshold, &thr) == cudaSuccess;
            }
        }
        (void)cudaGetLastError();
        if (ok) s.state = 1;
    }
    return s.state == 1 ? &s.d : nullptr;
}

/* algorithm cache: a small table, replaced round-robin; an entry whose cublasLtMatmul refused
 * keeps refusing (the descriptor is the same on every call) */
struct AlgoKey {
    int dev, ab, outer, alpha_dev, out_bf16;
    size_t m, rows, k;
    unsigned align_a, align_d;
    bool operator==(const AlgoKey &o) const
    {
        return dev == o.dev && ab == o.ab && outer == o.outer && alpha_dev == o.alpha_dev && out_bf16 == o.out_bf16 &&
               m == o.m && rows == o.rows && k == o.k && align_a == o.align_a && align_d == o.align_d;
    }
};
constexpr int NALGO = 64;
struct AlgoEntry { bool used, refused; AlgoKey key; cublasLtMatmulAlgo_t algo; };
AlgoEntry g_algo[NALGO];
int g_algo_next;
std::mutex g_algo_mu;

unsigned ptr_align(const void *p)
{
    const uintptr_t a = (uintptr_t)p;
    unsigned al = 256;
    while (al > 1 && (a & (al - 1))) al >>= 1;
    return al;
}

/* 0 not cached, 1 cached (algo set), 2 cached as refused */
int algo_lookup(const AlgoKey &key, cublasLtMatmulAlgo_t *algo)
{
    std::lock_guard<std::mutex> lk(g_algo_mu);
    for (int i = 0; i < NALGO; i++)
        if (g_algo[i].used && g_algo[i].key == key) {
            if (g_algo[i].refused) return 2;
            *algo = g_algo[i].algo;
            return 1;
        }
    return 0;
}

void algo_store(const AlgoKey &key, const cublasLtMatmulAlgo_t *algo, bool refused)
{
    std::lock_guard<std::mutex> lk(g_algo_mu);
    for (int i = 0; i < NALGO; i++)
        if (g_algo[i].used && g_algo[i].key == key) {
            g_algo[i].refused = refused;
            return;
        }
    AlgoEntry &e = g_algo[g_algo_next];
    g_algo_next = (g_algo_next + 1) % NALGO;
    e.used = true;
    e.refused = refused;
    e.key = key;
    if (algo) e.algo = *algo;
}

/* g_algo_desc: the algorithm's configuration as cuBLASLt reports it (benchmark output) */
void describe(const cublasLtMatmulAlgo_t &algo, int pick, int nres, float waves)
{
    int32_t id = -1, splitk = 0;
    uint32_t tile = 0, stages = 0, swz = 0;
    uint16_t cluster = 0;
    size_t w;
    if (g_lt.cfg_get) {
        g_lt.cfg_get(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w);
        g_lt.cfg_get(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w);
        g_lt.cfg_get(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &w);
        g_lt.cfg_get(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &w);
        g_lt.cfg_get(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swz, sizeof swz, &w);
        g_lt.cfg_get(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster, &w);
    }
    std::lock_guard<std::mutex> lk(g_algo_mu);
    snprintf(g_algo_desc, sizeof g_algo_desc,
             "candidate %d of %d: algo %d tile %u stages %u splitk %d swizzle %u cluster %u waves %.2f", pick, nres,
             (int)id, tile, stages, (int)splitk, swz, (unsigned)cluster, waves);
}

} // namespace

bool lofpcu::lt_available(void)
{
    if (g_lt_off.load(std::memory_order_relaxed)) return false;
    std::call_once(g_lt_once, lt_load);
    return g_lt.ok;
}

size_t lofpcu::lt_chunk_rows(size_t n, size_t row_bytes)
{
    size_t cap = g_cap.load(std::memory_order_relaxed) / row_bytes / 16 * 16;
    if (cap < 16) cap = 16;
    if (cap >= n) return n;
    const size_t chunks = (n + cap - 1) / cap, rows = (n + chunks - 1) / chunks;
    return (rows + 15) / 16 * 16; /* <= cap: cap is a multiple of 16 and rows <= cap */
}

const LtDev *lofpcu::lt_begin(cudaStream_t st, LtWhy *why)
{
    *why = LT_NO_LIBRARY;
    if (!lt_available()) return nullptr;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= MAX_DEV) {
        (void)cudaGetLastError();
        return nullptr;
    }
    /* not inside a stream capture (CUDA graphs): an allocation from a non-default pool that the
     * capture refused would invalidate the caller's capture; the kernels capture fine. Checked
     * before the device state is created (its cudaMalloc would break a global-mode capture). */
    cudaStreamCaptureStatus cap_st = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(st, &cap_st) != cudaSuccess || cap_st != cudaStreamCaptureStatusNone) {
        (void)cudaGetLastError();
        *why = LT_CAPTURING;
        return nullptr;
    }
    const LtDev *ds = dev_state(dev);
    if (!ds) return nullptr;
    *why = LT_OK;
    return ds;
}

void *lofpcu::lt_alloc(const LtDev *ds, size_t bytes, cudaStream_t st)
{
    void *buf = nullptr;
    if (cudaMallocFromPoolAsync(&buf, bytes, ds->pool, st) != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: the caller falls back to its kernel */
        return nullptr;
    }
    return buf;
}

LtWhy lofpcu::lt_matmul(const LtDev *ds, const LtGemm &g, cudaStream_t st, bool plan_only)
{
    const LtApi &L = g_lt;
    const AlgoKey key = {ds->dev, (int)g.ab, g.w_scale != nullptr, g.alpha_dev != nullptr, g.out_bf16,
                         g.m, g.rows, g.k, ptr_align(g.a), ptr_align(g.d)};
    cublasLtMatmulAlgo_t algo;
    const int cached = algo_lookup(key, &algo);
    if (cached == 2) return LT_REFUSED;
    if (cached == 1 && plan_only) return LT_OK; /* no descriptors needed to know that */
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    bool ok = L.desc_create(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS;
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const cudaDataType_t dt = g.out_bf16 ? CUDA_R_16BF : CUDA_R_32F;
    ok = ok && L.desc_set(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) == CUBLAS_STATUS_SUCCESS;
    ok = ok && L.desc_set(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) == CUBLAS_STATUS_SUCCESS;
    if (g.alpha_dev) {
        const cublasLtPointerMode_t pm = CUBLASLT_POINTER_MODE_DEVICE;
        ok = ok && L.desc_set(op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm) == CUBLAS_STATUS_SUCCESS;
    }
    if (g.w_scale) {
        /* per-row scale of cuBLAS's A (our weight rows, `rows` floats) and per-column of its B
         * (our tokens, m floats): D_ij = alpha * sa_i * sb_j * sum_l A_il B_lj (cublasLt.h,
         * cublasLtMatmulMatrixScale_t; the attributes are int32_t and const void *) */
        const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
        const void *sa = g.w_scale, *sb = g.a_scale;
        ok = ok && L.desc_set(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode) == CUBLAS_STATUS_SUCCESS;
        ok = ok && L.desc_set(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode) == CUBLAS_STATUS_SUCCESS;
        ok = ok && L.desc_set(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa) == CUBLAS_STATUS_SUCCESS;
        ok = ok && L.desc_set(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb) == CUBLAS_STATUS_SUCCESS;
    }
    if (g.ab == CUDA_R_8F_E4M3 && g_fast_accum.load(std::memory_order_relaxed)) {
        const int8_t fa = 1; /* a measurement of what the periodic fp32 promotion costs */
        ok = ok && L.desc_set(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fa, sizeof fa) == CUBLAS_STATUS_SUCCESS;
    }
    ok = ok && L.layout_create(&la, g.ab, g.k, g.rows, (int64_t)g.k) == CUBLAS_STATUS_SUCCESS;
    ok = ok && L.layout_create(&lb, g.ab, g.k, g.m, (int64_t)g.k) == CUBLAS_STATUS_SUCCESS;
    ok = ok && L.layout_create(&ld, dt, g.rows, g.m, (int64_t)g.ldd) == CUBLAS_STATUS_SUCCESS;
    if (ok && !cached) {
        /* the weight buffer comes from the pool (256-byte aligned); a and d as they are */
        const uint64_t wsb = g.ws_bytes;
        const uint32_t aw = 256, ab = key.align_a, ad = key.align_d;
        ok = L.pref_create(&pref) == CUBLAS_STATUS_SUCCESS;
        ok = ok && L.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb) == CUBLAS_STATUS_SUCCESS;
        ok = ok && L.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aw, sizeof aw) == CUBLAS_STATUS_SUCCESS;
        ok = ok && L.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab, sizeof ab) == CUBLAS_STATUS_SUCCESS;
        ok = ok && L.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ad, sizeof ad) == CUBLAS_STATUS_SUCCESS;
        ok = ok && L.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ad, sizeof ad) == CUBLAS_STATUS_SUCCESS;
        cublasLtMatmulHeuristicResult_t res[LT_CAND];
        int nres = 0;
        memset(res, 0, sizeof res);
        /* production asks for the heuristic's first candidate only; the hook asks for all */
        const int pick = g_algo_pick.load(std::memory_order_relaxed);
        ok = ok && L.heuristic(ds->handle, op, la, lb, ld, ld, pref, pick ? LT_CAND : 1, res, &nres) == CUBLAS_STATUS_SUCCESS;
        ok = ok && pick < nres && res[pick].state == CUBLAS_STATUS_SUCCESS;
        if (ok) {
            algo = res[pick].algo;
            algo_store(key, &algo, false);
            if (g_algo_hooked.load(std::memory_order_relaxed)) describe(algo, pick, nres, res[pick].wavesCount);
        }
    }
    LtWhy why = ok ? LT_OK : LT_NO_ALGO;
    if (ok && !plan_only) {
        static const float one = 1.0f, zero = 0.0f;
        const void *alpha = g.alpha_dev ? (const void *)g.alpha_dev : (const void *)&one;
        const void *beta = g.alpha_dev ? (const void *)ds->d_zero : (const void *)&zero;
        if (L.matmul(ds->handle, op, alpha, g.w, la, g.a, lb, beta, g.d, ld, g.d, ld, &algo, g.ws, g.ws_bytes, st) !=
            CUBLAS_STATUS_SUCCESS) {
            /* refused with this description: remembered, so that later calls refuse at planning
             * time, before their callers enqueue anything */
            algo_store(key, nullptr, true);
            why = LT_REFUSED;
        }
    }
    if (why != LT_OK) (void)cudaGetLastError(); /* not sticky: the caller falls back */
    if (pref) L.pref_destroy(pref);
    if (ld) L.layout_destroy(ld);
    if (lb) L.layout_destroy(lb);
    if (la) L.layout_destroy(la);
    if (op) L.desc_destroy(op);
    return why;
}

extern "C" void lofp_cuda_large_test_config(size_t cap_bytes, int lt_off)
{
    g_cap.store(cap_bytes ? cap_bytes : LT_DEFAULT_CAP);
    g_lt_off.store(lt_off ? 1 : 0);
}

extern "C" void lofp_cuda_large_test_algo(int index)
{
    std::lock_guard<std::mutex> lk(g_algo_mu);
    g_algo_pick.store(index > 0 && index < LT_CAND ? index : 0);
    g_algo_hooked.store(true);
    memset(g_algo, 0, sizeof g_algo); /* plan every GEMM again with the new pick */
    g_algo_next = 0;
    g_algo_desc[0] = 0;
}

extern "C" void lofp_cuda_large_test_fast_accum(int on)
{
    std::lock_guard<std::mutex> lk(g_algo_mu);
    g_fast_accum.store(on ? 1 : 0);
    memset(g_algo, 0, sizeof g_algo); /* the plans were made for the other accumulation */
    g_algo_next = 0;
}

extern "C" const char *lofp_cuda_large_algo_desc(void) { return g_algo_desc; }

extern "C" int lofp_cuda_large_available(void) { return lt_available() ? 1 : 0; }
