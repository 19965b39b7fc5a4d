/* test_cuda_helpers.cu -- device-side checks used by cuda_test.c that need their own kernels:
 *   - Markstein's division (the NVFP4 kernel's g / bq) against __fdiv_rn for every UE4M3 divisor
 *     and every fp32 mantissa in the binades whose quotients reach an E2M1 midpoint;
 *   - bf16x2 fma with a subnormal operand (the W4A16 and attention dequantization rely on it);
 *   - fp16 mma.sync with a subnormal operand (the attention QK relies on it). */
#include <stdint.h>
#include <stdio.h>

#include "lofp_cuda_device.cuh"

using namespace lofpcu;

__global__ void div_check_kernel(unsigned long long *bad, unsigned long long *first)
{
    const uint32_t sb = blockIdx.y; /* 0 stands for the 2^-9 divisor */
    const float b = sb ? decode_mf(T_UE4M3, sb) : 0x1p-9f;
    const float r = frcp(b);
    const int e0 = (int)blockIdx.z - 3; /* quotient binades [2^e0, 2^(e0+1)), e0 = -3..3 */
    unsigned long long nbad = 0;
    for (uint32_t m = blockIdx.x * blockDim.x + threadIdx.x; m < 0x800000u; m += gridDim.x * blockDim.x) {
        /* a = b * (1 + m/2^23) * 2^e0 rounded, then neighbours */
        const float q = u2f(((uint32_t)(127 + e0) << 23) | m);
        const float a0 = fmul(q, b);
        for (int d = -1; d <= 1; d++) {
            const float a = u2f(f2u(a0) + d);
            const float want = __fdiv_rn(a, b), got = div_markstein(a, b, r);
            if (f2u(want) != f2u(got)) {
                nbad++;
                atomicMin(first, ((unsigned long long)sb << 32) | f2u(a));
            }
        }
    }
    if (nbad) atomicAdd(bad, nbad);
}

__global__ void subnormal_kernel(uint32_t *out)
{
    uint32_t d;
    /* bf16 2^-127 (0x0040) * 2^126 (0x7E80) must be 0.5 (0x3F00) */
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(0x00400040u), "r"(0x7E807E80u), "r"(0x80008000u));
    out[0] = d;
    /* fp16 mma: A = 2^-15 (0x0200, subnormal) at (0,0), B = 1.0 at (0,0): C[0][0] = 2^-15 */
    const int lane = threadIdx.x;
    uint32_t a0 = lane == 0 ? 0x00000200u : 0u, a1 = 0, a2 = 0, a3 = 0;
    uint32_t b0 = lane == 0 ? 0x00003C00u : 0u, b1 = 0;
    float c[4] = {0, 0, 0, 0};
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    if (lane == 0) out[1] = f2u(c[0]);
    /* bf16 mma with a subnormal A: 2^-127 * 1.0 */
    a0 = lane == 0 ? 0x00000040u : 0u;
    b0 = lane == 0 ? 0x00003F80u : 0u;
    c[0] = c[1] = c[2] = c[3] = 0;
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    if (lane == 0) out[2] = f2u(c[0]);
}

extern "C" int lofp_test_division(unsigned long long *nbad, unsigned long long *first)
{
    unsigned long long *d;
    if (cudaMalloc(&d, 16) != cudaSuccess) return 1;
    unsigned long long init[2] = {0, ~0ull};
    cudaMemcpy(d, init, 16, cudaMemcpyHostToDevice);
    div_check_kernel<<<dim3(256, 127, 7), 256>>>(d, d + 1);
    cudaError_t e = cudaDeviceSynchronize();
    cudaMemcpy(init, d, 16, cudaMemcpyDeviceToHost);
    cudaFree(d);
    *nbad = init[0];
    *first = init[1];
    return e != cudaSuccess;
}

extern "C" int lofp_test_subnormals(uint32_t out[3])
{
    uint32_t *d;
    if (cudaMalloc(&d, 16) != cudaSuccess) return 1;
    subnormal_kernel<<<1, 32>>>(d);
    cudaError_t e = cudaDeviceSynchronize();
    cudaMemcpy(out, d, 12, cudaMemcpyDeviceToHost);
    cudaFree(d);
    return e != cudaSuccess;
}
