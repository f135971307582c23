/*
 * gemm_avx2.c - the AVX2+FMA SGEMM kernel set: a 6x16 micro-kernel and its
 * packer.
 *
 * Every function carries its own target attribute, so this file builds
 * without -mavx2 and the code only runs after gemm.c has checked the CPU.
 */
#include "gemm.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define AVX2_MR 6
#define AVX2_NR 16
#define AVX2_TARGET __attribute__((target("avx2,fma")))
/* How far ahead the kernel that packs B fetches B's rows (often in other pages,
   and from L3 or memory): into L2 far enough ahead to hide L3's latency, then
   into L1 shortly before use (rows 4 KB apart share one L1 set, so fetching
   them into L1 early would evict them again). */
#define PREFETCH_ROWS_L2 32
#define PREFETCH_ROWS_L1 4
/* How far ahead the kernel fetches a packed B-panel streamed from L2. */
#define PREFETCH_STEPS 8

/* Lanes [0, count) set, for maskload/maskstore; count may be <= 0 or >= 8. */
AVX2_TARGET static __m256i lane_mask(int count)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(count),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

AVX2_TARGET static __m256 load_lanes(const float *src, int count)
{
    if (count >= 8) return _mm256_loadu_ps(src);
    if (count <= 0) return _mm256_setzero_ps();
    return _mm256_maskload_ps(src, lane_mask(count));
}

AVX2_TARGET static void store_lanes(float *dst, __m256 v, int count)
{
    if (count >= 8)
        _mm256_storeu_ps(dst, v);
    else
        _mm256_maskstore_ps(dst, lane_mask(count), v);
}

/* In-register transpose of the 8x8 block r[0..7]. */
AVX2_TARGET static void transpose8(__m256 r[8])
{
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* One panel when X's rows run along memory: copy `width` floats per depth step. */
AVX2_TARGET static void pack_rows_along_memory(const float *x, int64_t ld, int rows,
                                               int depth, int width, float *dst)
{
    int p, g;
    if (rows == width && width % 8 == 0) {
        for (p = 0; p < depth; p++)
            for (g = 0; g < width; g += 8)
                _mm256_storeu_ps(dst + (int64_t)p * width + g,
                                 _mm256_loadu_ps(x + (int64_t)p * ld + g));
        return;
    }
    if (rows == AVX2_MR && width == AVX2_MR) {   /* op(A) transposed: masked moves cost 5x */
        for (p = 0; p < depth; p++) {
            const float *src = x + (int64_t)p * ld;
            float *out = dst + (int64_t)p * AVX2_MR;
            _mm_storeu_ps(out, _mm_loadu_ps(src));
            _mm_storel_pi((__m64 *)(out + 4), _mm_loadl_pi(_mm_setzero_ps(), (const __m64 *)(src + 4)));
        }
        return;
    }
    for (p = 0; p < depth; p++) {
        const float *src = x + (int64_t)p * ld;
        float *out = dst + (int64_t)p * width;
        for (g = 0; g < width; g += 8)
            store_lanes(out + g, load_lanes(src + g, rows - g), width - g);
    }
}

/* One panel when X's depth runs along memory: transpose 8x8 blocks into place. */
AVX2_TARGET static void pack_depth_along_memory(const float *x, int64_t ld, int rows,
                                                int depth, int width, float *dst)
{
    int g, p, r, q;
    for (g = 0; g < width; g += 8) {
        int group_rows = rows - g, lanes = width - g < 8 ? width - g : 8;
        const float *src = x + (int64_t)g * ld;
        for (p = 0; p < depth; p += 8) {
            int steps = depth - p < 8 ? depth - p : 8;
            __m256 block[8];
            if (group_rows >= 8 && steps == 8) {
                for (r = 0; r < 8; r++) block[r] = _mm256_loadu_ps(src + r * ld + p);
            } else {
                for (r = 0; r < 8; r++)
                    block[r] = r < group_rows ? load_lanes(src + r * ld + p, steps)
                                              : _mm256_setzero_ps();
            }
            transpose8(block);
            if (lanes == 8 && steps == 8) {
                for (q = 0; q < 8; q++)
                    _mm256_storeu_ps(dst + (int64_t)(p + q) * width + g, block[q]);
            } else if (lanes == 6) {   /* an A-panel: masked stores cost 5x */
                for (q = 0; q < steps; q++) {
                    float *out = dst + (int64_t)(p + q) * width + g;
                    _mm_storeu_ps(out, _mm256_castps256_ps128(block[q]));
                    _mm_storel_pi((__m64 *)(out + 4), _mm256_extractf128_ps(block[q], 1));
                }
            } else {
                for (q = 0; q < steps; q++)
                    store_lanes(dst + (int64_t)(p + q) * width + g, block[q], lanes);
            }
        }
    }
}

AVX2_TARGET static void avx2_pack(const float *x, int64_t ld, int depth_contiguous,
                                int rows, int depth, int width, float *dst)
{
    int r0;
    for (r0 = 0; r0 < rows; r0 += width) {
        int valid = rows - r0 < width ? rows - r0 : width;
        if (depth_contiguous)
            pack_depth_along_memory(x + (int64_t)r0 * ld, ld, valid, depth, width, dst);
        else
            pack_rows_along_memory(x + r0, ld, valid, depth, width, dst);
        dst += (int64_t)depth * width;
    }
}

/* gemm_relu on every lane: max(0, v) keeps v where v is NaN or -0, as the
   second operand is kept where the comparison fails. */
AVX2_TARGET static inline __m256 relu_lanes(__m256 v) { return _mm256_max_ps(_mm256_setzero_ps(), v); }

/* c[0:16] = alpha * (lo, hi) + bias[0:16] when there is a bias, else + beta *
   c[0:16], then ReLU when relu, touching only the first n lanes. */
AVX2_TARGET static inline void store_row(float *c, __m256 lo, __m256 hi, int wide,
                                         __m256 alpha, float beta, const float *bias, int relu,
                                         int n)
{
    lo = _mm256_mul_ps(lo, alpha);
    if (bias)
        lo = _mm256_add_ps(lo, load_lanes(bias, n));
    else if (beta != 0.0f)
        lo = _mm256_fmadd_ps(_mm256_set1_ps(beta), load_lanes(c, n), lo);
    store_lanes(c, relu ? relu_lanes(lo) : lo, n);
    if (!wide) return;
    hi = _mm256_mul_ps(hi, alpha);
    if (bias)
        hi = _mm256_add_ps(hi, load_lanes(bias + 8, n - 8));
    else if (beta != 0.0f)
        hi = _mm256_fmadd_ps(_mm256_set1_ps(beta), load_lanes(c + 8, n - 8), hi);
    store_lanes(c + 8, relu ? relu_lanes(hi) : hi, n - 8);
}

/*
 * One half of a tile (`half` 0: columns 0-7, 1: 8-15) stored transposed,
 * C(i, j) at c[j*ldc + i]: the rows of the half, one vector each, are
 * transposed in registers, and each column of C becomes a store of its m
 * values. Each element is finished as store_row would finish it.
 */
AVX2_TARGET static inline void store_half_transposed(const GemmTile *t, __m256 block[8],
                                                     int half, __m256 alpha)
{
    int q, cols = t->n - 8 * half < 8 ? t->n - 8 * half : 8;
    transpose8(block);
    for (q = 0; q < cols; q++) {
        int64_t j = 8 * half + q;
        float *c = t->c + j * t->ldc;
        __m256 v = _mm256_mul_ps(block[q], alpha);
        if (t->beta != 0.0f)
            v = _mm256_fmadd_ps(_mm256_set1_ps(t->beta), load_lanes(c, t->m), v);
        store_lanes(c, v, t->m);
    }
}

#define ROW_FMA(i)                                                             \
    if (rows > i) {                                                            \
        __m256 a = _mm256_broadcast_ss(by_rows ? ap + i * a_step : ap + i);    \
        c##i##0 = _mm256_fmadd_ps(a, b0, c##i##0);                             \
        if (wide) c##i##1 = _mm256_fmadd_ps(a, b1, c##i##1);                   \
    }

/* C's rows are read or written only at the end; start fetching them now. */
#define ROW_PREFETCH(i)                                                        \
    if (rows > i && t->m > i) {                                                \
        _mm_prefetch((const char *)(t->c + i * t->ldc), _MM_HINT_T0);          \
        if (wide) _mm_prefetch((const char *)(t->c + i * t->ldc + 8), _MM_HINT_T0); \
    }

#define ROW_STORE(i)                                                           \
    if (rows > i && t->m > i)                                                  \
        store_row(c + i * ldc, c##i##0, c##i##1, wide, va, t->beta, t->bias, t->relu, t->n);

/*
 * The micro-kernel, specialised below for the rows of A it multiplies (6, 4
 * or 2); B of one vector, two, or two packed on the way (copy_b); and A read
 * by rows or by depth. Every lane of C sees the same FMAs in every
 * specialisation.
 */
AVX2_TARGET static inline __attribute__((always_inline)) void
avx2_tile(const GemmTile *t, const int rows, const int wide, const int copy_b,
          const int by_rows)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00;
    __m256 c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    __m256 c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    const float *ap = t->a, *src = t->b_source;
    float *bp = t->b, *c = t->c;
    int64_t a_step = by_rows ? t->a_row : t->a_depth, ldb = t->ldb, ldc = t->ldc;
    __m256 va = _mm256_set1_ps(t->alpha);
    int p, kc = t->kc;
    if (t->c_transposed) {
        for (p = 0; p < t->n; p++) {
            _mm_prefetch((const char *)(c + p * ldc), _MM_HINT_T0);
            _mm_prefetch((const char *)(c + p * ldc + t->m - 1), _MM_HINT_T0);
        }
    } else {
        ROW_PREFETCH(0) ROW_PREFETCH(1) ROW_PREFETCH(2) ROW_PREFETCH(3) ROW_PREFETCH(4)
        ROW_PREFETCH(5)
    }
    /* n = 2048 runs 1.02-1.03x faster; AVX-512's 12-row panels gain nothing */
    gemm_fetch_next_a(t, AVX2_MR);
    for (p = 0; p < kc; p++) {
        __m256 b0, b1;
        if (copy_b) {
            /* a row's 16 floats may straddle two lines: fetch both */
            _mm_prefetch((const char *)(src + PREFETCH_ROWS_L2 * ldb), _MM_HINT_T1);
            _mm_prefetch((const char *)(src + PREFETCH_ROWS_L2 * ldb + 15), _MM_HINT_T1);
            _mm_prefetch((const char *)(src + PREFETCH_ROWS_L1 * ldb), _MM_HINT_T0);
            _mm_prefetch((const char *)(src + PREFETCH_ROWS_L1 * ldb + 15), _MM_HINT_T0);
            b0 = _mm256_loadu_ps(src);
            b1 = _mm256_loadu_ps(src + 8);
            _mm256_storeu_ps(bp, b0);
            _mm256_storeu_ps(bp + 8, b1);
            src += ldb;
        } else {
            _mm_prefetch((const char *)(bp + PREFETCH_STEPS * AVX2_NR), _MM_HINT_T0);
            b0 = _mm256_loadu_ps(bp);
            b1 = wide ? _mm256_loadu_ps(bp + 8) : b0;
        }
        ROW_FMA(0) ROW_FMA(1) ROW_FMA(2) ROW_FMA(3) ROW_FMA(4) ROW_FMA(5)
        ap += by_rows ? 1 : a_step;
        bp += AVX2_NR;
    }
    if (copy_b && t->b_sums) gemm_sum_panel(t->b_sums, t->b, kc, AVX2_NR, AVX2_NR);
    if (t->c_transposed) {   /* rows past m hold zeros, and are not stored */
        __m256 z = _mm256_setzero_ps();
        __m256 left[8] = {c00, c10, c20, c30, c40, c50, z, z};
        __m256 right[8] = {c01, c11, c21, c31, c41, c51, z, z};
        store_half_transposed(t, left, 0, va);
        if (wide) store_half_transposed(t, right, 1, va);
        return;
    }
    ROW_STORE(0) ROW_STORE(1) ROW_STORE(2) ROW_STORE(3) ROW_STORE(4) ROW_STORE(5)
}

/* tile_ROWS_B_A: B 0 = one vector, 1 = two, 2 = two packed on the way; A 1 = by rows */
#define TILE_VARIANT(rows, b, by_rows)                                         \
    AVX2_TARGET static void tile_##rows##_##b##_##by_rows(const GemmTile *t)   \
    {                                                                          \
        avx2_tile(t, rows, b > 0, b == 2, by_rows);                            \
    }
#define TILE_VARIANTS(b, by_rows) \
    TILE_VARIANT(6, b, by_rows) TILE_VARIANT(4, b, by_rows) TILE_VARIANT(2, b, by_rows)
TILE_VARIANTS(0, 0) TILE_VARIANTS(1, 0) TILE_VARIANTS(2, 0)
TILE_VARIANTS(0, 1) TILE_VARIANTS(1, 1) TILE_VARIANTS(2, 1)

#define TILE_ROW(b, by_rows) \
    {tile_6_##b##_##by_rows, tile_4_##b##_##by_rows, tile_2_##b##_##by_rows}
static const GemmKernelFn tile_variants[2][3][3] = {
    {TILE_ROW(0, 0), TILE_ROW(1, 0), TILE_ROW(2, 0)},
    {TILE_ROW(0, 1), TILE_ROW(1, 1), TILE_ROW(2, 1)},
};

static void avx2_kernel(const GemmTile *t)
{
    int b = t->b_source ? 2 : t->n > 8;
    tile_variants[t->a_depth == 1][b][t->m > 4 ? 0 : t->m > 2 ? 1 : 2](t);
}

/* ---- a few rows, nothing packed (gemm.h: GemmFewRows) ------------------- */

/* The sum of v's lanes, always added in the same order. */
AVX2_TARGET static float sum_lanes(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}

/*
 * C(i, j..j+1) for `rows` rows of A and two rows of B (the last one repeated
 * when one is left): dot products along the depth, 8 lanes at a time. Two
 * rows of B, not four as with AVX-512: AVX2 has 16 registers, not 32.
 */
AVX2_TARGET static inline __attribute__((always_inline)) void
dots_2(const GemmFewRows *f, int64_t j, const int rows)
{
    const float *b0 = f->b + j * f->ldb, *b1 = f->j1 - j > 1 ? b0 + f->ldb : b0;
    __m256 acc[4][2];
    int64_t p;
    int r;
    for (r = 0; r < rows; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (p = 0; p < f->k; p += 8) {
        int lanes = (int)(f->k - p < 8 ? f->k - p : 8);
        __m256 x0 = load_lanes(b0 + p, lanes), x1 = load_lanes(b1 + p, lanes);
        for (r = 0; r < rows; r++) {
            __m256 x = load_lanes(f->a + r * f->lda + p, lanes);
            acc[r][0] = _mm256_fmadd_ps(x, x0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(x, x1, acc[r][1]);
        }
    }
    for (r = 0; r < rows; r++) {
        float *c = f->c + r * f->ldc + j;
        const float *bias = f->bias ? f->bias + j : NULL;
        c[0] = gemm_scaled(sum_lanes(acc[r][0]), f->alpha, f->beta, c, bias, f->relu);
        if (f->j1 - j > 1)
            c[1] = gemm_scaled(sum_lanes(acc[r][1]), f->alpha, f->beta, c + 1,
                               bias ? bias + 1 : NULL, f->relu);
    }
}

/* C(i, j..j+15) for `rows` rows of A: rows of B scaled by A(i, p) and summed. */
AVX2_TARGET static inline __attribute__((always_inline)) void
axpys_16(const GemmFewRows *f, int64_t j, const int rows)
{
    __m256 acc[4][2], va = _mm256_set1_ps(f->alpha), vb = _mm256_set1_ps(f->beta);
    int64_t p;
    int r, v, width = f->j1 - j < 16 ? (int)(f->j1 - j) : 16;
    for (r = 0; r < rows; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (p = 0; p < f->k; p++) {
        const float *row = f->b + p * f->ldb + j;
        __m256 x0 = load_lanes(row, width), x1 = load_lanes(row + 8, width - 8);
        for (r = 0; r < rows; r++) {
            __m256 x = _mm256_set1_ps(f->a[r * f->lda + p]);
            acc[r][0] = _mm256_fmadd_ps(x, x0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(x, x1, acc[r][1]);
        }
    }
    for (r = 0; r < rows; r++) {
        float *c = f->c + r * f->ldc + j;
        for (v = 0; v < 2; v++) {
            __m256 out = _mm256_mul_ps(va, acc[r][v]);
            if (f->bias)
                out = _mm256_add_ps(out, load_lanes(f->bias + j + 8 * v, width - 8 * v));
            else if (f->beta != 0.0f)
                out = _mm256_fmadd_ps(vb, load_lanes(c + 8 * v, width - 8 * v), out);
            if (f->relu) out = relu_lanes(out);
            if (width > 8 * v) store_lanes(c + 8 * v, out, width - 8 * v);
        }
    }
}

/*
 * C(i, j..j+31) for `rows` rows of A from the two packed panels of those
 * columns (GemmFewRows.panels), slice by slice as gemm_block runs the tiles:
 * each lane's FMAs in the tile's order, finished as store_row finishes them
 * (the bias on the first slice, then beta 1; ReLU on the last).
 */
AVX2_TARGET static inline __attribute__((always_inline)) void
panels_32(const GemmFewRows *f, int64_t j, const int rows)
{
    __m256 acc[4][4], va = _mm256_set1_ps(f->alpha);
    int width = f->j1 - j < 32 ? (int)(f->j1 - j) : 32, two = width > AVX2_NR, r, v;
    int64_t pc, p, s;
    for (pc = 0, s = 0; pc < f->k; pc += f->slice, s++) {
        int64_t kc = f->k - pc < f->slice ? f->k - pc : f->slice;
        const float *b = f->panels + s * f->slice * f->n_padded + j * kc;   /* then the next panel */
        const float *bias = pc == 0 && f->bias ? f->bias + j : NULL;
        float beta = pc == 0 ? f->beta : 1.0f;
        int relu = f->relu && pc + kc == f->k;
        for (r = 0; r < rows; r++)
            for (v = 0; v < 4; v++) acc[r][v] = _mm256_setzero_ps();
        for (p = 0; p < kc; p++) {
            const float *row = b + p * AVX2_NR;
            __m256 b0 = _mm256_loadu_ps(row), b1 = _mm256_loadu_ps(row + 8);
            __m256 b2 = two ? _mm256_loadu_ps(row + AVX2_NR * kc) : _mm256_setzero_ps();
            __m256 b3 = two ? _mm256_loadu_ps(row + AVX2_NR * kc + 8) : _mm256_setzero_ps();
            for (r = 0; r < rows; r++) {
                __m256 x = _mm256_set1_ps(f->a[r * f->lda + pc + p]);
                acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
                acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
                acc[r][2] = _mm256_fmadd_ps(x, b2, acc[r][2]);
                acc[r][3] = _mm256_fmadd_ps(x, b3, acc[r][3]);
            }
        }
        for (r = 0; r < rows; r++) {
            float *c = f->c + r * f->ldc + j;
            for (v = 0; v < 4 && width > 8 * v; v++) {
                __m256 out = _mm256_mul_ps(acc[r][v], va);
                if (bias)
                    out = _mm256_add_ps(out, load_lanes(bias + 8 * v, width - 8 * v));
                else if (beta != 0.0f)
                    out = _mm256_fmadd_ps(_mm256_set1_ps(beta), load_lanes(c + 8 * v, width - 8 * v), out);
                store_lanes(c + 8 * v, relu ? relu_lanes(out) : out, width - 8 * v);
            }
        }
    }
}

AVX2_TARGET static inline __attribute__((always_inline)) void
few_rows(const GemmFewRows *f, const int rows)
{
    int64_t j;
    if (f->panels)
        for (j = f->j0; j < f->j1; j += 32) panels_32(f, j, rows);
    else if (f->b_by_rows)
        for (j = f->j0; j < f->j1; j += 2) dots_2(f, j, rows);
    else
        for (j = f->j0; j < f->j1; j += 16) axpys_16(f, j, rows);
}

GEMM_FEW_ROWS_ENTRY(avx2_few_rows, AVX2_TARGET)

const GemmKernels gemm_avx2_kernels = {
    "avx2", AVX2_MR, AVX2_NR, avx2_pack, avx2_kernel, avx2_few_rows, 0
};

#endif /* x86 */
