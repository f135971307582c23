/*
 * transpose.h - matrix transposes: the 16x16 in-register transpose that the
 * AVX-512 kernels share (gemm's packer, transpose.c's tiles), and a whole
 * strided block transposed in memory.
 */
#ifndef AC_TRANSPOSE_H
#define AC_TRANSPOSE_H

#include <stdint.h>

/*
 * dst (cols x rows) = src^T, or += src^T when add; src is rows x cols, and
 * each has its own leading dimension. 16x16 tiles go through AVX-512
 * registers when the kernels' instruction set (cpu.h: the CPU's best, or
 * AC_SIMD's) is AVX-512 (5x the plain loop), the plain loop doing the edges.
 * The result is the same on every set: nothing is rounded.
 */
void matrix_transpose(float *dst, int64_t dst_ld, const float *src, int64_t src_ld, int64_t rows,
                      int64_t cols, int add);

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* In-register transpose of the 16x16 block r[0..15]. */
__attribute__((target("avx512f"))) static inline void transpose16(__m512 r[16])
{
    __m512 t[16], u[16];
    int k, c;
    for (k = 0; k < 8; k++) {
        t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    /* u[4k + c], 128-bit lane L: column 4L + c of rows 4k..4k+3 */
    for (k = 0; k < 4; k++) {
        u[4 * k] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0x44);
        u[4 * k + 1] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0xEE);
        u[4 * k + 2] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
        u[4 * k + 3] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xEE);
    }
    for (c = 0; c < 4; c++) {
        __m512 even01 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
        __m512 odd01 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
        __m512 even23 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
        __m512 odd23 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
        r[c] = _mm512_shuffle_f32x4(even01, even23, 0x88);
        r[4 + c] = _mm512_shuffle_f32x4(odd01, odd23, 0x88);
        r[8 + c] = _mm512_shuffle_f32x4(even01, even23, 0xDD);
        r[12 + c] = _mm512_shuffle_f32x4(odd01, odd23, 0xDD);
    }
}
#endif /* x86 */

#endif /* AC_TRANSPOSE_H */
