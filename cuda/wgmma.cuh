/* wgmma.cuh -- pieces shared by the two sm_90a wgmma kernels (gemm_wgmma.cu: W4A16 with bf16
 * operands; gemm_w4a8.cu: W4A8 with E4M3 operands): the warpgroup fences, the 128-byte-swizzle
 * shared-memory descriptor, cp.async to a shared-window address, and the accumulator operand lists
 * of the register-A wgmma forms (the kernels keep their own instruction text, which differs in
 * shape, type and transpose operands). See the header comments of those two files. */
#ifndef LOFP_WGMMA_CUH
#define LOFP_WGMMA_CUH

#include <stdint.h>

namespace lofpcu {

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
/* waits until at most N committed wgmma groups of this warpgroup are still in flight */
template <int N> __device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }
/* keeps the compiler from moving accumulator reads or writes across a wgmma fence or wait */
__device__ __forceinline__ void reg_fence(float &x) { asm volatile("" : "+f"(x)::"memory"); }

/* cp.async of 16 bytes to a shared-memory address (src_bytes < 16: zero-filled) */
__device__ __forceinline__ void cp16s(uint32_t sa, const void *gmem, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(sa), "l"(gmem), "r"(src_bytes));
}

/* Shared-memory matrix descriptor, K-major, 128-byte swizzle: start address >> 4 (bits 0-13),
 * leading byte offset (unused for swizzled K-major; 1), stride byte offset 1024 >> 4 (8 rows of
 * 128 bytes; bits 32-45), base offset 0 (atoms 1024-aligned), layout type 1 = 128B (bits 62-63). */
__device__ __forceinline__ uint64_t sw128_desc(uint32_t saddr)
{
    return (uint64_t)((saddr & 0x3FFFFu) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
           ((uint64_t)1 << 62);
}

/* The kernel's dynamic shared memory rounded up to a 1024-byte boundary (128-byte-swizzle atoms
 * must be 1024-aligned; the launches ask for 1 KiB more than the stages need): returns the
 * generic pointer and sets s to the same place as a shared-window address. */
__device__ __forceinline__ uint8_t *smem_align1024(uint8_t *raw, uint32_t &s)
{
    const uint32_t raw_s = (uint32_t)__cvta_generic_to_shared(raw);
    uint8_t *p = raw + ((1024u - (raw_s & 1023u)) & 1023u);
    s = (uint32_t)__cvta_generic_to_shared(p);
    return p;
}

} // namespace lofpcu

/* The fp32 accumulator operands of an m64nN wgmma for N = 64 (32 registers per thread) and N = 128
 * (64): the register list of the instruction text and the matching "+f" constraints on d[]. The A
 * registers and the descriptor follow as %32.. / %64.. in the kernels' own text. */
#define LOFP_WG_D32                                                                             \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                   \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define LOFP_WG_D64                                                                             \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                   \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "         \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "         \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define LOFP_WG_OUT8(d, i)                                                                      \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
        "+f"(d[i + 6]), "+f"(d[i + 7])
#define LOFP_WG_OUT32(d) LOFP_WG_OUT8(d, 0), LOFP_WG_OUT8(d, 8), LOFP_WG_OUT8(d, 16), LOFP_WG_OUT8(d, 24)
#define LOFP_WG_OUT64(d) LOFP_WG_OUT32(d), LOFP_WG_OUT8(d, 32), LOFP_WG_OUT8(d, 40), LOFP_WG_OUT8(d, 48), LOFP_WG_OUT8(d, 56)

/* One specialisation NAME<N> of an m64nN wgmma with A in four registers and B behind a
 * shared-memory descriptor, with one function
 *   mma(d, a0..a3, desc, acc): d = A . B (acc = 0: a fresh accumulator) or d += A . B
 * NR accumulator registers (DLIST / DOUT their instruction text and "+f" constraints, %0..%NR-1),
 * then the operand numbers of the A registers, the descriptor and the scale-d predicate. INSN is
 * the instruction name (shape and types), TAIL the operands after the predicate (the A/B scales,
 * and for 16-bit types B's transpose flag). */
#define LOFP_WG_RS_SPEC(NAME, N, NR, INSN, TAIL, DLIST, DOUT, A0, A1, A2, A3, DS, PR)        \
    template <> struct NAME<N> {                                                             \
        static __device__ __forceinline__ void mma(float (&d)[NR], uint32_t a0, uint32_t a1, \
                                                   uint32_t a2, uint32_t a3, uint64_t desc, int acc) \
        {                                                                                    \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #PR ", 0;\n" INSN " {" DLIST   \
                         "}, {%" #A0 ", %" #A1 ", %" #A2 ", %" #A3 "}, %" #DS ", p, " TAIL ";\n}\n" \
                         : DOUT                                                              \
                         : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(acc));         \
        }                                                                                    \
    }

/* NAME<64> and NAME<128> (INSN64 / INSN128 their instruction names). */
#define LOFP_WG_RS(NAME, INSN64, INSN128, TAIL)                                              \
    template <int TN> struct NAME;                                                           \
    LOFP_WG_RS_SPEC(NAME, 64, 32, INSN64, TAIL, LOFP_WG_D32, LOFP_WG_OUT32(d), 32, 33, 34, 35, 36, 37); \
    LOFP_WG_RS_SPEC(NAME, 128, 64, INSN128, TAIL, LOFP_WG_D64, LOFP_WG_OUT64(d), 64, 65, 66, 67, 68, 69)

/* The m64n256 form (128 accumulator registers per thread), defined apart because only the bf16
 * kernel has a configuration that uses it: NAME<256>::mma as above, operands d = %0..%127, the A
 * registers %128..%131, the descriptor %132. Use after LOFP_WG_RS(NAME, ...). */
#define LOFP_WG_D128                                                                        \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "      \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "      \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "      \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "      \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "      \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "\
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define LOFP_WG_OUT128(d)                                                                       \
    LOFP_WG_OUT64(d), LOFP_WG_OUT8(d, 64), LOFP_WG_OUT8(d, 72), LOFP_WG_OUT8(d, 80), LOFP_WG_OUT8(d, 88), \
        LOFP_WG_OUT8(d, 96), LOFP_WG_OUT8(d, 104), LOFP_WG_OUT8(d, 112), LOFP_WG_OUT8(d, 120)
#define LOFP_WG_RS256(NAME, INSN256, TAIL)                                                   \
    LOFP_WG_RS_SPEC(NAME, 256, 128, INSN256, TAIL, LOFP_WG_D128, LOFP_WG_OUT128(d), 128, 129, 130, 131, 132, 133)

#endif
