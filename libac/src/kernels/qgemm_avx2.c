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
 * Register tiles: 2 rows of x by 4 of w for batches, 1 by 4 for a single row;
 * from panels (qgemm.h), 4 rows of x by one panel (two vectors of 8 columns).
 * Every function carries its own target attribute; qgemm.c checks the CPU.
 */
#include "qgemm.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <string.h>

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

/* acc + the exact products of 32 bytes of x and w, in eight 32-bit sums. */
TILE_INLINE __m256i dot32(__m256i acc, __m256i x, __m256i w, __m256i w_abs, __m256i ones)
{
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(x, w)), ones));
}

TILE_INLINE __m256i load32(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* The tiles at the edges, mr <= 4 rows of x by nr <= 4 of w, both constants:
   out for rows [i0, i0 + mr) and columns [j0, j0 + nr). */
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
            for (r = 0; r < mr; r++) acc[r][c] = dot32(acc[r][c], xv[r], wv, wabs, ones);
        }
    }
    #pragma GCC unroll 4
    for (r = 0; r < mr; r++)
        #pragma GCC unroll 4
        for (c = 0; c < nr; c++) job->out[(i0 + r) * job->ld_out + j0 + c] = sum_lanes(acc[r][c]);
}

/* out[i][j0 .. j0 + 4) = sums. */
TILE_INLINE void store_row(const QDotJob *job, int64_t i, int64_t j0, __m128i sums)
{
    _mm_storeu_si128((__m128i *)(void *)(job->out + i * job->ld_out + j0), sums);
}

/* The hot tiles spell their accumulators out: kept in arrays (as in tile), GCC
   stores them to the stack on every step. */
AVX2_TARGET static void tile_2x4(const QDotJob *job, int64_t i0, int64_t j0)
{
    const __m256i ones = _mm256_set1_epi16(1), zero = _mm256_setzero_si256();
    const int64_t k = job->k, depth = (k + 31) & ~(int64_t)31, ld = job->ld_x;
    const uint8_t *x = job->x + i0 * ld;
    const int8_t *w = job->w + j0 * k;
    __m256i a00 = zero, a01 = zero, a02 = zero, a03 = zero, a10 = zero, a11 = zero, a12 = zero,
            a13 = zero;
    int64_t p;
    for (p = 0; p < depth; p += 32) {
        __m256i x0 = load32(x + p), x1 = load32(x + ld + p);
        __m256i wv = load32(w + p), wabs = _mm256_abs_epi8(wv);
        a00 = dot32(a00, x0, wv, wabs, ones);
        a10 = dot32(a10, x1, wv, wabs, ones);
        wv = load32(w + k + p);
        wabs = _mm256_abs_epi8(wv);
        a01 = dot32(a01, x0, wv, wabs, ones);
        a11 = dot32(a11, x1, wv, wabs, ones);
        wv = load32(w + 2 * k + p);
        wabs = _mm256_abs_epi8(wv);
        a02 = dot32(a02, x0, wv, wabs, ones);
        a12 = dot32(a12, x1, wv, wabs, ones);
        wv = load32(w + 3 * k + p);
        wabs = _mm256_abs_epi8(wv);
        a03 = dot32(a03, x0, wv, wabs, ones);
        a13 = dot32(a13, x1, wv, wabs, ones);
    }
    store_row(job, i0, j0, sum_lanes_4(a00, a01, a02, a03));
    store_row(job, i0 + 1, j0, sum_lanes_4(a10, a11, a12, a13));
}

AVX2_TARGET static void tile_1x4(const QDotJob *job, int64_t i0, int64_t j0)
{
    const __m256i ones = _mm256_set1_epi16(1), zero = _mm256_setzero_si256();
    const int64_t k = job->k, depth = (k + 31) & ~(int64_t)31;
    const uint8_t *x = job->x + i0 * job->ld_x;
    const int8_t *w = job->w + j0 * k;
    __m256i a0 = zero, a1 = zero, a2 = zero, a3 = zero;
    int64_t p;
    for (p = 0; p < depth; p += 32) {
        __m256i xv = load32(x + p);
        __m256i w0 = load32(w + p), w1 = load32(w + k + p), w2 = load32(w + 2 * k + p);
        __m256i w3 = load32(w + 3 * k + p);
        a0 = dot32(a0, xv, w0, _mm256_abs_epi8(w0), ones);
        a1 = dot32(a1, xv, w1, _mm256_abs_epi8(w1), ones);
        a2 = dot32(a2, xv, w2, _mm256_abs_epi8(w2), ones);
        a3 = dot32(a3, xv, w3, _mm256_abs_epi8(w3), ones);
    }
    store_row(job, i0, j0, sum_lanes_4(a0, a1, a2, a3));
}

AVX2_TARGET static void tile_2x1(const QDotJob *job, int64_t i, int64_t j) { tile(job, i, j, 2, 1); }
AVX2_TARGET static void tile_1x1(const QDotJob *job, int64_t i, int64_t j) { tile(job, i, j, 1, 1); }

/* ---- from panels (qgemm.h): each lane one output column ---------------------- */

/* Rows [i0, i0 + mr) (mr <= 4, a constant) by panel g: two vectors of eight
   columns, each 4 bytes of depth one broadcast of x per row and dot32's steps
   per vector; the columns past n are not stored. */
TILE_INLINE void panel_tile(const QDotJob *job, int64_t i0, int64_t g, const int mr)
{
    const __m256i ones = _mm256_set1_epi16(1);
    const int64_t depth = job->depth, ld = job->ld_x, j = g * QGEMM_PANEL_COLS;
    const int8_t *w = job->panels + g * depth * QGEMM_PANEL_COLS;
    const uint8_t *x = job->x + i0 * ld;
    __m256i lo[4], hi[4];
    int64_t p;
    int r;
    #pragma GCC unroll 4
    for (r = 0; r < mr; r++) lo[r] = hi[r] = _mm256_setzero_si256();
    for (p = 0; p < depth; p += 4) {
        const __m256i w_lo = load32(w + p * QGEMM_PANEL_COLS), w_hi = load32(w + p * QGEMM_PANEL_COLS + 32);
        const __m256i abs_lo = _mm256_abs_epi8(w_lo), abs_hi = _mm256_abs_epi8(w_hi);
        #pragma GCC unroll 4
        for (r = 0; r < mr; r++) {
            int32_t four;
            __m256i xb;
            memcpy(&four, x + r * ld + p, 4);
            xb = _mm256_set1_epi32(four);
            lo[r] = dot32(lo[r], xb, w_lo, abs_lo, ones);
            hi[r] = dot32(hi[r], xb, w_hi, abs_hi, ones);
        }
    }
    if (job->n - j >= QGEMM_PANEL_COLS) {
        #pragma GCC unroll 4
        for (r = 0; r < mr; r++) {
            int32_t *out = job->out + (i0 + r) * job->ld_out + j;
            _mm256_storeu_si256((__m256i *)(void *)out, lo[r]);
            _mm256_storeu_si256((__m256i *)(void *)(out + 8), hi[r]);
        }
    } else {
        int32_t sums[QGEMM_PANEL_COLS];
        #pragma GCC unroll 4
        for (r = 0; r < mr; r++) {
            _mm256_storeu_si256((__m256i *)(void *)sums, lo[r]);
            _mm256_storeu_si256((__m256i *)(void *)(sums + 8), hi[r]);
            memcpy(job->out + (i0 + r) * job->ld_out + j, sums, (size_t)(job->n - j) * sizeof(int32_t));
        }
    }
}

AVX2_TARGET static void dot_panels_avx2(const QDotJob *job)
{
    const int64_t panels = (job->n + QGEMM_PANEL_COLS - 1) / QGEMM_PANEL_COLS;
    int64_t g, i;
    for (g = 0; g < panels; g++) {
        for (i = 0; i + 4 <= job->m; i += 4) panel_tile(job, i, g, 4);
        switch (job->m - i) {
        case 3: panel_tile(job, i, g, 3); break;
        case 2: panel_tile(job, i, g, 2); break;
        case 1: panel_tile(job, i, g, 1); break;
        default: break;
        }
    }
}

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

const QGemmKernels qgemm_avx2_kernels = {"avx2", 0, dot_avx2, dot_panels_avx2};

#endif
