/*
 * qgemm_avx512.c - the AVX-512 VNNI int8 kernel: vpdpbusd multiplies unsigned
 * by signed bytes and adds groups of four into 32-bit sums, with no
 * intermediate that could saturate.
 *
 * x comes offset by 128 (unsigned, qgemm.h), so sum (x + 128) w = sum x w +
 * 128 sum w; the kernel sums w alongside (vpdpbusd with ones) and takes
 * 128 sum w off, exactly. The last piece of each row is read with a byte
 * mask (AVX-512BW), so nothing past k is touched.
 *
 * Register tiles: 4 rows of x by 4 of w for batches, 1 by 8 for a single row.
 * Every function carries its own target attribute; qgemm.c checks the CPU.
 */
#include "qgemm.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))
#define TILE_INLINE VNNI_TARGET static inline __attribute__((always_inline))

/* out for rows [i0, i0 + mr) of x and [j0, j0 + nr) of w; mr <= 4, nr <= 8 constants. */
TILE_INLINE void tile(const QDotJob *job, int64_t i0, int64_t j0, const int mr, const int nr)
{
    const __m512i ones = _mm512_set1_epi8(1);
    const int64_t k = job->k;
    const uint8_t *x = job->x + i0 * job->ld_x;
    const int8_t *w = job->w + j0 * k;
    __m512i acc[4][8], wsum[8], xv[4];
    int64_t p;
    int r, c;
    for (c = 0; c < nr; c++) {
        wsum[c] = _mm512_setzero_si512();
        for (r = 0; r < mr; r++) acc[r][c] = _mm512_setzero_si512();
    }
    for (p = 0; p < k; p += 64) {
        __mmask64 mask = k - p >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << (k - p)) - 1;
        for (r = 0; r < mr; r++) xv[r] = _mm512_loadu_si512((const void *)(x + r * job->ld_x + p));
        for (c = 0; c < nr; c++) {
            __m512i wv = _mm512_maskz_loadu_epi8(mask, w + c * k + p);
            wsum[c] = _mm512_dpbusd_epi32(wsum[c], ones, wv);
            for (r = 0; r < mr; r++) acc[r][c] = _mm512_dpbusd_epi32(acc[r][c], xv[r], wv);
        }
    }
    for (c = 0; c < nr; c++) {
        int32_t offset = 128 * _mm512_reduce_add_epi32(wsum[c]);
        for (r = 0; r < mr; r++)
            job->out[(i0 + r) * job->ld_out + j0 + c] = _mm512_reduce_add_epi32(acc[r][c]) - offset;
    }
}

VNNI_TARGET static void tile_4x4(const QDotJob *job, int64_t i, int64_t j) { tile(job, i, j, 4, 4); }
VNNI_TARGET static void tile_4x1(const QDotJob *job, int64_t i, int64_t j) { tile(job, i, j, 4, 1); }
VNNI_TARGET static void tile_1x8(const QDotJob *job, int64_t i, int64_t j) { tile(job, i, j, 1, 8); }
VNNI_TARGET static void tile_1x1(const QDotJob *job, int64_t i, int64_t j) { tile(job, i, j, 1, 1); }

static void dot_avx512_vnni(const QDotJob *job)
{
    int64_t i = 0, j;
    for (; i + 4 <= job->m; i += 4) {
        for (j = 0; j + 4 <= job->n; j += 4) tile_4x4(job, i, j);
        for (; j < job->n; j++) tile_4x1(job, i, j);
    }
    for (; i < job->m; i++) {
        for (j = 0; j + 8 <= job->n; j += 8) tile_1x8(job, i, j);
        for (; j < job->n; j++) tile_1x1(job, i, j);
    }
}

const QGemmKernels qgemm_avx512_vnni_kernels = {"avx512-vnni", 1, dot_avx512_vnni};

#endif
