/*
 * transpose.c - a strided block transposed in memory, on 16x16 AVX-512 tiles
 * where the kernels use AVX-512. rnn.c moves states and gates between
 * batch-major and feature-major with it.
 */
#include "transpose.h"
#include "cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#define HAVE_TILE16 1

__attribute__((target("avx512f"))) static void transpose_tile16(float *dst, int64_t dst_ld,
                                                                const float *src, int64_t src_ld,
                                                                int add)
{
    __m512 r[16];
    int k;
    for (k = 0; k < 16; k++) r[k] = _mm512_loadu_ps(src + k * src_ld);
    transpose16(r);
    for (k = 0; k < 16; k++) {
        __m512 v = add ? _mm512_add_ps(r[k], _mm512_loadu_ps(dst + k * dst_ld)) : r[k];
        _mm512_storeu_ps(dst + k * dst_ld, v);
    }
}

#endif

/* dst[c][r] = src[r][c] (or +=, when add) for r in [r0, r1), c in [c0, c1). */
static void transpose_plain(float *dst, int64_t dst_ld, const float *src, int64_t src_ld,
                            int64_t r0, int64_t r1, int64_t c0, int64_t c1, int add)
{
    int64_t r, c;
    for (c = c0; c < c1; c++) {
        float *out = dst + c * dst_ld;
        if (add)
            for (r = r0; r < r1; r++) out[r] += src[r * src_ld + c];
        else
            for (r = r0; r < r1; r++) out[r] = src[r * src_ld + c];
    }
}

void matrix_transpose(float *dst, int64_t dst_ld, const float *src, int64_t src_ld, int64_t rows,
                      int64_t cols, int add)
{
    int64_t tiled_rows = 0, tiled_cols = 0;
#ifdef HAVE_TILE16
    if (cpu_uses_avx512()) {
        int64_t r, c;
        tiled_rows = rows / 16 * 16;
        tiled_cols = cols / 16 * 16;
        for (r = 0; r < tiled_rows; r += 16)
            for (c = 0; c < tiled_cols; c += 16)
                transpose_tile16(dst + c * dst_ld + r, dst_ld, src + r * src_ld + c, src_ld, add);
    }
#endif
    transpose_plain(dst, dst_ld, src, src_ld, 0, tiled_rows, tiled_cols, cols, add);
    transpose_plain(dst, dst_ld, src, src_ld, tiled_rows, rows, 0, cols, add);
}
