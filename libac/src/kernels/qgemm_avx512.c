/*
 * qgemm_avx512.c - the AVX-512 VNNI int8 kernel: vpdpbusd multiplies unsigned
 * by signed bytes and adds groups of four into 32-bit sums, with no
 * intermediate that could saturate.
 *
 * x comes offset by 128 (unsigned, qgemm.h), so sum (x + 128) w = sum x w +
 * 128 sum w; the kernel sums each group of four rows of w once (vpdpbusd
 * with ones) and takes 128 sum w off every product with them, exactly. The last piece of each row is read with a byte
 * mask (AVX-512BW), so nothing past k is touched.
 *
 * Register tiles: 4 rows of x by 4 of w for batches, 1 by 4 for a single row,
 * walking all of x for each group of four rows of w (which stays in L1). From
 * panels (qgemm.h): 4 rows of x by 4 panels of 16 columns, a broadcast of 4
 * bytes of x against each panel's 64 bytes, sums in the columns' lanes.
 * Every function carries its own target attribute; qgemm.c checks the CPU.
 */
#include "qgemm.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <string.h>

#define VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))
#define TILE_INLINE VNNI_TARGET static inline __attribute__((always_inline))

/* The four sums of a, b, c and d's lanes, in that order: one tree for all four. */
TILE_INLINE __m128i sum_lanes_4(__m512i a, __m512i b, __m512i c, __m512i d)
{
    __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
    __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
    __m512i abcd = _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
    __m256i half = _mm256_add_epi32(_mm512_castsi512_si256(abcd), _mm512_extracti64x4_epi64(abcd, 1));
    return _mm_add_epi32(_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1));
}

/* The mask of the bytes [p, k) of a 64-byte piece. */
TILE_INLINE __mmask64 piece_mask(int64_t k, int64_t p)
{
    return k - p >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << (k - p)) - 1;
}

/* out[i][j0 .. j0 + 4) = sums - offset. */
TILE_INLINE void store_row(const QDotJob *job, int64_t i, int64_t j0, __m128i sums, __m128i offset)
{
    _mm_storeu_si128((__m128i *)(void *)(job->out + i * job->ld_out + j0), _mm_sub_epi32(sums, offset));
}

/* The tiles at the edges, mr <= 4 rows of x by nr <= 4 of w, both constants:
   out for rows [i0, i0 + mr) and columns [j0, j0 + nr). */
TILE_INLINE void tile(const QDotJob *job, int64_t i0, int64_t j0, const int mr, const int nr)
{
    const __m512i ones = _mm512_set1_epi8(1);
    const int64_t k = job->k;
    const uint8_t *x = job->x + i0 * job->ld_x;
    const int8_t *w = job->w + j0 * k;
    __m512i acc[4][4], wsum[4], xv[4];
    int64_t p;
    int r, c;
    #pragma GCC unroll 4
    for (c = 0; c < nr; c++) {
        wsum[c] = _mm512_setzero_si512();
        #pragma GCC unroll 4
        for (r = 0; r < mr; r++) acc[r][c] = _mm512_setzero_si512();
    }
    for (p = 0; p < k; p += 64) {
        __mmask64 mask = piece_mask(k, p);
        #pragma GCC unroll 4
        for (r = 0; r < mr; r++) xv[r] = _mm512_loadu_si512((const void *)(x + r * job->ld_x + p));
        #pragma GCC unroll 4
        for (c = 0; c < nr; c++) {
            __m512i wv = _mm512_maskz_loadu_epi8(mask, w + c * k + p);
            wsum[c] = _mm512_dpbusd_epi32(wsum[c], ones, wv);
            #pragma GCC unroll 4
            for (r = 0; r < mr; r++) acc[r][c] = _mm512_dpbusd_epi32(acc[r][c], xv[r], wv);
        }
    }
    #pragma GCC unroll 4
    for (c = 0; c < nr; c++) {
        int32_t offset = 128 * _mm512_reduce_add_epi32(wsum[c]);
        #pragma GCC unroll 4
        for (r = 0; r < mr; r++)
            job->out[(i0 + r) * job->ld_out + j0 + c] = _mm512_reduce_add_epi32(acc[r][c]) - offset;
    }
}

/* 128 * the sums of w's rows [j0, j0 + 4): what x's offset added to each of their dot products. */
VNNI_TARGET static __m128i column_offsets(const QDotJob *job, int64_t j0)
{
    const __m512i ones = _mm512_set1_epi8(1), zero = _mm512_setzero_si512();
    const int64_t k = job->k;
    const int8_t *w = job->w + j0 * k;
    __m512i s0 = zero, s1 = zero, s2 = zero, s3 = zero;
    int64_t p;
    for (p = 0; p < k; p += 64) {
        __mmask64 mask = piece_mask(k, p);
        s0 = _mm512_dpbusd_epi32(s0, ones, _mm512_maskz_loadu_epi8(mask, w + p));
        s1 = _mm512_dpbusd_epi32(s1, ones, _mm512_maskz_loadu_epi8(mask, w + k + p));
        s2 = _mm512_dpbusd_epi32(s2, ones, _mm512_maskz_loadu_epi8(mask, w + 2 * k + p));
        s3 = _mm512_dpbusd_epi32(s3, ones, _mm512_maskz_loadu_epi8(mask, w + 3 * k + p));
    }
    return _mm_slli_epi32(sum_lanes_4(s0, s1, s2, s3), 7);
}

/* The hot tiles spell their accumulators out: kept in arrays (as in tile), GCC
   stores them to the stack on every step. offset: column_offsets(job, j0). */
VNNI_TARGET static void tile_4x4(const QDotJob *job, int64_t i0, int64_t j0, __m128i offset)
{
    const __m512i zero = _mm512_setzero_si512();
    const int64_t k = job->k, ld = job->ld_x;
    const uint8_t *x = job->x + i0 * ld;
    const int8_t *w = job->w + j0 * k;
    __m512i a00 = zero, a01 = zero, a02 = zero, a03 = zero, a10 = zero, a11 = zero, a12 = zero,
            a13 = zero, a20 = zero, a21 = zero, a22 = zero, a23 = zero, a30 = zero, a31 = zero,
            a32 = zero, a33 = zero;
    int64_t p;
    for (p = 0; p < k; p += 64) {
        __mmask64 mask = piece_mask(k, p);
        __m512i x0 = _mm512_loadu_si512((const void *)(x + p));
        __m512i x1 = _mm512_loadu_si512((const void *)(x + ld + p));
        __m512i x2 = _mm512_loadu_si512((const void *)(x + 2 * ld + p));
        __m512i x3 = _mm512_loadu_si512((const void *)(x + 3 * ld + p));
        __m512i wv = _mm512_maskz_loadu_epi8(mask, w + p);
        a00 = _mm512_dpbusd_epi32(a00, x0, wv);
        a10 = _mm512_dpbusd_epi32(a10, x1, wv);
        a20 = _mm512_dpbusd_epi32(a20, x2, wv);
        a30 = _mm512_dpbusd_epi32(a30, x3, wv);
        wv = _mm512_maskz_loadu_epi8(mask, w + k + p);
        a01 = _mm512_dpbusd_epi32(a01, x0, wv);
        a11 = _mm512_dpbusd_epi32(a11, x1, wv);
        a21 = _mm512_dpbusd_epi32(a21, x2, wv);
        a31 = _mm512_dpbusd_epi32(a31, x3, wv);
        wv = _mm512_maskz_loadu_epi8(mask, w + 2 * k + p);
        a02 = _mm512_dpbusd_epi32(a02, x0, wv);
        a12 = _mm512_dpbusd_epi32(a12, x1, wv);
        a22 = _mm512_dpbusd_epi32(a22, x2, wv);
        a32 = _mm512_dpbusd_epi32(a32, x3, wv);
        wv = _mm512_maskz_loadu_epi8(mask, w + 3 * k + p);
        a03 = _mm512_dpbusd_epi32(a03, x0, wv);
        a13 = _mm512_dpbusd_epi32(a13, x1, wv);
        a23 = _mm512_dpbusd_epi32(a23, x2, wv);
        a33 = _mm512_dpbusd_epi32(a33, x3, wv);
    }
    store_row(job, i0, j0, sum_lanes_4(a00, a01, a02, a03), offset);
    store_row(job, i0 + 1, j0, sum_lanes_4(a10, a11, a12, a13), offset);
    store_row(job, i0 + 2, j0, sum_lanes_4(a20, a21, a22, a23), offset);
    store_row(job, i0 + 3, j0, sum_lanes_4(a30, a31, a32, a33), offset);
}

/* A single row (batch 1) sums w as it goes: one pass over w, which comes from L2. */
VNNI_TARGET static void tile_1x4(const QDotJob *job, int64_t i0, int64_t j0)
{
    const __m512i ones = _mm512_set1_epi8(1), zero = _mm512_setzero_si512();
    const int64_t k = job->k;
    const uint8_t *x = job->x + i0 * job->ld_x;
    const int8_t *w = job->w + j0 * k;
    __m512i a0 = zero, a1 = zero, a2 = zero, a3 = zero, s0 = zero, s1 = zero, s2 = zero, s3 = zero;
    int64_t p;
    for (p = 0; p < k; p += 64) {
        __mmask64 mask = piece_mask(k, p);
        __m512i xv = _mm512_loadu_si512((const void *)(x + p));
        __m512i w0 = _mm512_maskz_loadu_epi8(mask, w + p);
        __m512i w1 = _mm512_maskz_loadu_epi8(mask, w + k + p);
        __m512i w2 = _mm512_maskz_loadu_epi8(mask, w + 2 * k + p);
        __m512i w3 = _mm512_maskz_loadu_epi8(mask, w + 3 * k + p);
        a0 = _mm512_dpbusd_epi32(a0, xv, w0);
        a1 = _mm512_dpbusd_epi32(a1, xv, w1);
        a2 = _mm512_dpbusd_epi32(a2, xv, w2);
        a3 = _mm512_dpbusd_epi32(a3, xv, w3);
        s0 = _mm512_dpbusd_epi32(s0, ones, w0);
        s1 = _mm512_dpbusd_epi32(s1, ones, w1);
        s2 = _mm512_dpbusd_epi32(s2, ones, w2);
        s3 = _mm512_dpbusd_epi32(s3, ones, w3);
    }
    store_row(job, i0, j0, sum_lanes_4(a0, a1, a2, a3), _mm_slli_epi32(sum_lanes_4(s0, s1, s2, s3), 7));
}

VNNI_TARGET static void tile_4x1(const QDotJob *job, int64_t i, int64_t j) { tile(job, i, j, 4, 1); }
VNNI_TARGET static void tile_1x1(const QDotJob *job, int64_t i, int64_t j) { tile(job, i, j, 1, 1); }

/* ---- from panels (qgemm.h): each lane one output column ---------------------- */

/* Rows [i0, i0 + mr) by panels [g0, g0 + nr) (mr, nr <= 4, constants): for each
   4 bytes of depth, one broadcast of each row's x and one vpdpbusd per panel
   and row; the columns past n are not stored. */
TILE_INLINE void panel_tile(const QDotJob *job, int64_t i0, int64_t g0, const int mr, const int nr)
{
    const int64_t depth = job->depth, ld = job->ld_x, stride = depth * QGEMM_PANEL_COLS;
    const int8_t *w = job->panels + g0 * stride;
    const uint8_t *x = job->x + i0 * ld;
    __m512i acc[4][4], wv[4];
    int64_t p;
    int r, c;
    #pragma GCC unroll 4
    for (r = 0; r < mr; r++)
        #pragma GCC unroll 4
        for (c = 0; c < nr; c++) acc[r][c] = _mm512_setzero_si512();
    for (p = 0; p < depth; p += 4) {
        #pragma GCC unroll 4
        for (c = 0; c < nr; c++)
            wv[c] = _mm512_loadu_si512((const void *)(w + c * stride + p * QGEMM_PANEL_COLS));
        #pragma GCC unroll 4
        for (r = 0; r < mr; r++) {
            int32_t four;
            __m512i xb;
            memcpy(&four, x + r * ld + p, 4);
            xb = _mm512_set1_epi32(four);
            #pragma GCC unroll 4
            for (c = 0; c < nr; c++) acc[r][c] = _mm512_dpbusd_epi32(acc[r][c], xb, wv[c]);
        }
    }
    #pragma GCC unroll 4
    for (c = 0; c < nr; c++) {
        const int64_t j = (g0 + c) * QGEMM_PANEL_COLS, left = job->n - j;
        const __mmask16 mask = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
        const __m512i offset = _mm512_slli_epi32(_mm512_loadu_si512((const void *)(job->sums + j)), 7);
        #pragma GCC unroll 4
        for (r = 0; r < mr; r++)
            _mm512_mask_storeu_epi32(job->out + (i0 + r) * job->ld_out + j, mask,
                                     _mm512_sub_epi32(acc[r][c], offset));
    }
}

/* Panels [g0, g0 + nr) for all rows, four at a time. */
TILE_INLINE void panel_columns(const QDotJob *job, int64_t g0, const int nr)
{
    int64_t i;
    for (i = 0; i + 4 <= job->m; i += 4) panel_tile(job, i, g0, 4, nr);
    switch (job->m - i) {
    case 3: panel_tile(job, i, g0, 3, nr); break;
    case 2: panel_tile(job, i, g0, 2, nr); break;
    case 1: panel_tile(job, i, g0, 1, nr); break;
    default: break;
    }
}

VNNI_TARGET static void dot_panels_avx512_vnni(const QDotJob *job)
{
    const int64_t panels = (job->n + QGEMM_PANEL_COLS - 1) / QGEMM_PANEL_COLS;
    int64_t g;
    for (g = 0; g + 4 <= panels; g += 4) panel_columns(job, g, 4);
    switch (panels - g) {
    case 3: panel_columns(job, g, 3); break;
    case 2: panel_columns(job, g, 2); break;
    case 1: panel_columns(job, g, 1); break;
    default: break;
    }
}

static void dot_avx512_vnni(const QDotJob *job)
{
    int64_t i, j;
    for (j = 0; j + 4 <= job->n; j += 4) {
        __m128i offset = job->m >= 4 ? column_offsets(job, j) : _mm_setzero_si128();
        for (i = 0; i + 4 <= job->m; i += 4) tile_4x4(job, i, j, offset);
        for (; i < job->m; i++) tile_1x4(job, i, j);
    }
    for (; j < job->n; j++) {
        for (i = 0; i + 4 <= job->m; i += 4) tile_4x1(job, i, j);
        for (; i < job->m; i++) tile_1x1(job, i, j);
    }
}

const QGemmKernels qgemm_avx512_vnni_kernels = {"avx512-vnni", 1, dot_avx512_vnni, dot_panels_avx512_vnni};

#endif
