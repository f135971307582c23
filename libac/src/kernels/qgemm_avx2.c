/*
 * qgemm_avx2.c - the AVX2 int8 kernel: vpmaddubsw multiplies unsigned by
 * signed bytes and adds pairs into 16 bits, vpmaddwd adds those into 32.
 *
 * The unsigned operand is |w| and the signed one x with w's sign (vpsignb), so
 * |x| <= 127 and |w| <= 128 keep each 16-bit pair sum within 2 * 128 * 127 =
 * 32512: nothing saturates and the sums are exact. Rows are read 32 bytes at a
 * time over k rounded up: x is zero there, so w's bytes past its row (the next
 * row, or the block's slack after the last) add nothing.
 *
 * Register tiles: 2 rows of x by 4 of w for batches, 1 by 4 for a single row.
 * Every function carries its own target attribute; qgemm.c checks the CPU.
 */
#include "qgemm.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define AVX2_TARGET __attribute__((target("avx2")))
#define TILE_INLINE AVX2_TARGET static inline __attribute__((always_inline))

TILE_INLINE int32_t sum_lanes(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* The four sums of a, b, c and d's lanes, in that order: one tree for all four. */
TILE_INLINE __m128i sum_lanes_4(__m256i a, __m256i b, __m256i c, __m256i d)
{
    __m256i abcd = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
    return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
}

/* out for rows [i0, i0 + mr) of x and [j0, j0 + nr) of w; mr <= 4, nr <= 4 constants. */
TILE_INLINE void tile(const QDotJob *job, int64_t i0, int64_t j0, const int mr, const int nr)
{
    const __m256i ones = _mm256_set1_epi16(1);
    const int64_t k = job->k, depth = (k + 31) & ~(int64_t)31;
    const uint8_t *x = job->x + i0 * job->ld_x;
    const int8_t *w = job->w + j0 * k;
    __m256i acc[4][4], xv[4];
    int64_t p;
    int r, c;
    #pragma GCC unroll 4
    for (r = 0; r < mr; r++)
        #pragma GCC unroll 4
        for (c = 0; c < nr; c++) acc[r][c] = _mm256_setzero_si256();
    for (p = 0; p < depth; p += 32) {
        #pragma GCC unroll 4
        for (r = 0; r < mr; r++)
            xv[r] = _mm256_loadu_si256((const __m256i *)(const void *)(x + r * job->ld_x + p));
        #pragma GCC unroll 4
        for (c = 0; c < nr; c++) {
            __m256i wv = _mm256_loadu_si256((const __m256i *)(const void *)(w + c * k + p));
            __m256i wabs = _mm256_abs_epi8(wv);
            #pragma GCC unroll 4
            for (r = 0; r < mr; r++) {
                __m256i pairs = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(xv[r], wv));
                acc[r][c] = _mm256_add_epi32(acc[r][c], _mm256_madd_epi16(pairs, ones));
            }
        }
    }
    #pragma GCC unroll 4
    for (r = 0; r < mr; r++) {
        int32_t *out = job->out + (i0 + r) * job->ld_out + j0;
        if (nr == 4) {
            _mm_storeu_si128((__m128i *)(void *)out, sum_lanes_4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]));
            continue;
        }
        #pragma GCC unroll 4
        for (c = 0; c < nr; c++) out[c] = sum_lanes(acc[r][c]);
    }
}

AVX2_TARGET static void tile_2x4(const QDotJob *job, int64_t i, int64_t j) { tile(job, i, j, 2, 4); }
AVX2_TARGET static void tile_2x1(const QDotJob *job, int64_t i, int64_t j) { tile(job, i, j, 2, 1); }
AVX2_TARGET static void tile_1x4(const QDotJob *job, int64_t i, int64_t j) { tile(job, i, j, 1, 4); }
AVX2_TARGET static void tile_1x1(const QDotJob *job, int64_t i, int64_t j) { tile(job, i, j, 1, 1); }

static void dot_avx2(const QDotJob *job)
{
    int64_t i = 0, j;
    for (; i + 2 <= job->m; i += 2) {
        for (j = 0; j + 4 <= job->n; j += 4) tile_2x4(job, i, j);
        for (; j < job->n; j++) tile_2x1(job, i, j);
    }
    for (; i < job->m; i++) {
        for (j = 0; j + 4 <= job->n; j += 4) tile_1x4(job, i, j);
        for (; j < job->n; j++) tile_1x1(job, i, j);
    }
}

const QGemmKernels qgemm_avx2_kernels = {"avx2", 0, dot_avx2};

#endif
