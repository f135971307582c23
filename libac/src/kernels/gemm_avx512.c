/*
 * gemm_avx512.c - the AVX-512F SGEMM kernel set: a 12x32 micro-kernel.
 *
 * 24 accumulators of 16 floats; each depth step loads two vectors of B and
 * broadcasts 12 values of A. The packer, and the stores of a transposed C,
 * transpose 16x16 blocks in registers (transpose.h). Per-function target
 * attributes keep this file buildable without -mavx512f.
 */
#include "gemm.h"
#include "transpose.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#define AVX512_MR 12
#define AVX512_NR 32
#define AVX512_TARGET __attribute__((target("avx512f,fma")))
/* How far ahead the kernel that packs B fetches B's rows (often in other pages,
   and from L3 or memory): into L2 far enough ahead to hide L3's latency, then
   into L1 shortly before use. A wide Linear layer's dW (B's rows 40 KB apart)
   runs 3% faster than with L1 fetches 8 rows ahead alone; 32 rows ahead
   slows its dX (rows 800 B apart) by 2%. */
#define PREFETCH_ROWS_L2 16
#define PREFETCH_ROWS_L1 8
/* How far ahead the kernel fetches a packed B-panel streamed from L2. */
#define PREFETCH_STEPS 8

static __mmask16 first_lanes(int count)
{
    return (__mmask16)(count >= 16 ? 0xFFFF : count <= 0 ? 0 : (1u << count) - 1);
}

/* One panel when X's depth runs along memory: transpose 16x16 blocks into place. */
AVX512_TARGET static void pack_depth_along_memory(const float *x, int64_t ld, int rows,
                                                  int depth, int width, float *dst)
{
    int g, p, r, q;
    for (g = 0; g < width; g += 16) {
        const float *src = x + (int64_t)g * ld;
        __mmask16 store = first_lanes(width - g);
        for (p = 0; p < depth; p += 16) {
            int steps = depth - p < 16 ? depth - p : 16;
            __mmask16 load = first_lanes(steps);
            __m512 block[16];
            for (r = 0; r < 16; r++)
                block[r] = r < rows - g ? _mm512_maskz_loadu_ps(load, src + r * ld + p)
                                        : _mm512_setzero_ps();
            transpose16(block);
            for (q = 0; q < steps; q++)
                _mm512_mask_storeu_ps(dst + (int64_t)(p + q) * width + g, store, block[q]);
        }
    }
}

/* One panel when X's rows run along memory: a masked copy of `width` floats per depth step. */
AVX512_TARGET static void pack_rows_along_memory(const float *x, int64_t ld, int rows,
                                                 int depth, int width, float *dst)
{
    __mmask16 load[4], store[4];  /* width <= 64 */
    int p, g;
    for (g = 0; g < width; g += 16) {
        load[g / 16] = first_lanes(rows - g);
        store[g / 16] = first_lanes(width - g);
    }
    for (p = 0; p < depth; p++) {
        const float *src = x + (int64_t)p * ld;
        float *out = dst + (int64_t)p * width;
        for (g = 0; g < width; g += 16)
            _mm512_mask_storeu_ps(out + g, store[g / 16],
                                  _mm512_maskz_loadu_ps(load[g / 16], src + g));
    }
}

AVX512_TARGET static void avx512_pack(const float *x, int64_t ld, int depth_contiguous,
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
AVX512_TARGET static inline __m512 relu_lanes(__m512 v) { return _mm512_max_ps(_mm512_setzero_ps(), v); }

/* c[0:32] = alpha * (lo, hi) + bias[0:32] when there is a bias, else + beta *
   c[0:32], then ReLU when relu, touching only the lanes in the masks. */
AVX512_TARGET static inline void store_row(float *c, __m512 lo, __m512 hi, int wide,
                                           __m512 alpha, float beta, const float *bias, int relu,
                                           __mmask16 mask_lo, __mmask16 mask_hi)
{
    lo = _mm512_mul_ps(lo, alpha);
    if (bias)
        lo = _mm512_add_ps(lo, _mm512_maskz_loadu_ps(mask_lo, bias));
    else if (beta != 0.0f)
        lo = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(mask_lo, c), lo);
    _mm512_mask_storeu_ps(c, mask_lo, relu ? relu_lanes(lo) : lo);
    if (!wide) return;
    hi = _mm512_mul_ps(hi, alpha);
    if (bias)
        hi = _mm512_add_ps(hi, _mm512_maskz_loadu_ps(mask_hi, bias + 16));
    else if (beta != 0.0f)
        hi = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(mask_hi, c + 16), hi);
    _mm512_mask_storeu_ps(c + 16, mask_hi, relu ? relu_lanes(hi) : hi);
}

/*
 * One half of a tile (`half` 0: columns 0-15, 1: 16-31) stored transposed,
 * C(i, j) at c[j*ldc + i]: the rows of the half, one vector each, are
 * transposed in registers, and each column of C becomes a masked store of
 * its m values. Each element is finished as store_row would finish it.
 */
AVX512_TARGET static inline void store_half_transposed(const GemmTile *t, __m512 block[16],
                                                       int half, __m512 alpha)
{
    __mmask16 rows = first_lanes(t->m);
    int q, cols = t->n - 16 * half < 16 ? t->n - 16 * half : 16;
    transpose16(block);
    for (q = 0; q < cols; q++) {
        int64_t j = 16 * half + q;
        float *c = t->c + j * t->ldc;
        __m512 v = _mm512_mul_ps(block[q], alpha);
        if (t->beta != 0.0f)
            v = _mm512_fmadd_ps(_mm512_set1_ps(t->beta), _mm512_maskz_loadu_ps(rows, c), v);
        _mm512_mask_storeu_ps(c, rows, v);
    }
}

/*
 * Row i of the tile times B at one depth step. B is `lanes` wide: 32 as two
 * vectors (b0, b1); 24 as a vector and a half (b0, y1); 16 as one (b0). A
 * 256-bit FMA does half the work of a 512-bit one at half the cost on cores
 * that split 512-bit operations in two (AMD Zen 4), so a panel of 17-24
 * columns at the edge of C pays for 24, not 32. (A panel of 8 as a half
 * vector runs no faster than as a whole one: its loads of A bound it.)
 */
#define ROW_FMA(i)                                                             \
    if (rows > i) {                                                            \
        __m512 a = _mm512_set1_ps(by_rows ? ap[i * a_step] : ap[i]);           \
        c##i##a = _mm512_fmadd_ps(a, b0, c##i##a);                             \
        if (lanes == 24)                                                       \
            c##i##y = _mm256_fmadd_ps(_mm512_castps512_ps256(a), y1, c##i##y); \
        if (lanes == 32) c##i##b = _mm512_fmadd_ps(a, b1, c##i##b);            \
    }

/* The half-vector accumulator into its place among the full ones, for the stores. */
#define ROW_WIDEN(i) \
    if (lanes == 24) c##i##b = _mm512_zextps256_ps512(c##i##y);

/* C's rows are read or written only at the end; start fetching them now. */
#define ROW_PREFETCH(i)                                                        \
    if (rows > i && t->m > i) {                                                \
        _mm_prefetch((const char *)(t->c + i * t->ldc), _MM_HINT_T0);          \
        if (wide) _mm_prefetch((const char *)(t->c + i * t->ldc + 16), _MM_HINT_T0); \
    }

#define ROW_STORE(i)                                                           \
    if (rows > i && t->m > i)                                                  \
        store_row(c + i * ldc, c##i##a, c##i##b, wide, va, t->beta, t->bias, t->relu, lo, hi);

#define ACCUMULATORS(i) __m512 c##i##a = zero, c##i##b = zero; __m256 c##i##y = half_zero;

/*
 * The micro-kernel, specialised below for each combination of: rows of A it
 * multiplies (12, 8 or 4, so a short last panel does not pay for 12); B of
 * 16, 24 or 32 lanes, or 32 packed on the way (copy_b 1), and also summed by
 * column on the way (copy_b 2: in registers, in depth order as
 * gemm_sum_panel sums, which as a pass of its own cost a wide Linear layer's
 * backward 6%); and A read by rows (a_depth == 1) or by depth. Every lane of
 * C sees the same sequence of FMAs in every specialisation.
 */
AVX512_TARGET static inline __attribute__((always_inline)) void
avx512_tile(const GemmTile *t, const int rows, const int lanes, const int copy_b,
            const int by_rows)
{
    const __m512 zero = _mm512_setzero_ps();
    const __m256 half_zero = _mm256_setzero_ps();
    ACCUMULATORS(0) ACCUMULATORS(1) ACCUMULATORS(2) ACCUMULATORS(3) ACCUMULATORS(4)
    ACCUMULATORS(5) ACCUMULATORS(6) ACCUMULATORS(7) ACCUMULATORS(8) ACCUMULATORS(9)
    ACCUMULATORS(10) ACCUMULATORS(11)
    __m512 sum_lo = zero, sum_hi = zero;   /* copy_b 2: B's column sums */
    const float *ap = t->a, *src = t->b_source;
    float *bp = t->b, *c = t->c;
    int64_t a_step = by_rows ? t->a_row : t->a_depth, ldb = t->ldb, ldc = t->ldc;
    int n = t->n, p, kc = t->kc, wide = lanes > 16;
    __m512 va = _mm512_set1_ps(t->alpha);
    __mmask16 lo = (__mmask16)(n >= 16 ? 0xFFFF : (1u << n) - 1);
    __mmask16 hi = (__mmask16)(n >= 32 ? 0xFFFF : n <= 16 ? 0 : (1u << (n - 16)) - 1);
    if (t->c_transposed) {
        for (p = 0; p < n; p++) {
            _mm_prefetch((const char *)(c + p * ldc), _MM_HINT_T0);
            _mm_prefetch((const char *)(c + p * ldc + t->m - 1), _MM_HINT_T0);
        }
    } else {
        ROW_PREFETCH(0) ROW_PREFETCH(1) ROW_PREFETCH(2) ROW_PREFETCH(3) ROW_PREFETCH(4)
        ROW_PREFETCH(5) ROW_PREFETCH(6) ROW_PREFETCH(7) ROW_PREFETCH(8) ROW_PREFETCH(9)
        ROW_PREFETCH(10) ROW_PREFETCH(11)
    }
    for (p = 0; p < kc; p++) {
        __m512 b0, b1 = zero;
        __m256 y1 = half_zero;
        if (copy_b) {
            _mm_prefetch((const char *)(src + PREFETCH_ROWS_L2 * ldb), _MM_HINT_T1);
            _mm_prefetch((const char *)(src + PREFETCH_ROWS_L2 * ldb + 16), _MM_HINT_T1);
            _mm_prefetch((const char *)(src + PREFETCH_ROWS_L1 * ldb), _MM_HINT_T0);
            _mm_prefetch((const char *)(src + PREFETCH_ROWS_L1 * ldb + 16), _MM_HINT_T0);
            b0 = _mm512_loadu_ps(src);
            b1 = _mm512_loadu_ps(src + 16);
            _mm512_storeu_ps(bp, b0);
            _mm512_storeu_ps(bp + 16, b1);
            if (copy_b == 2) {
                sum_lo = _mm512_add_ps(sum_lo, b0);
                sum_hi = _mm512_add_ps(sum_hi, b1);
            }
            src += ldb;
        } else {
            _mm_prefetch((const char *)(bp + PREFETCH_STEPS * AVX512_NR), _MM_HINT_T0);
            if (wide)
                _mm_prefetch((const char *)(bp + PREFETCH_STEPS * AVX512_NR + 16), _MM_HINT_T0);
            b0 = _mm512_loadu_ps(bp);
            if (lanes == 24) y1 = _mm256_loadu_ps(bp + 16);
            if (lanes == 32) b1 = _mm512_loadu_ps(bp + 16);
        }
        ROW_FMA(0) ROW_FMA(1) ROW_FMA(2) ROW_FMA(3) ROW_FMA(4) ROW_FMA(5)
        ROW_FMA(6) ROW_FMA(7) ROW_FMA(8) ROW_FMA(9) ROW_FMA(10) ROW_FMA(11)
        ap += by_rows ? 1 : a_step;
        bp += AVX512_NR;
    }
    if (copy_b == 2) {
        _mm512_storeu_ps(t->b_sums, _mm512_add_ps(_mm512_loadu_ps(t->b_sums), sum_lo));
        _mm512_storeu_ps(t->b_sums + 16, _mm512_add_ps(_mm512_loadu_ps(t->b_sums + 16), sum_hi));
    }
    ROW_WIDEN(0) ROW_WIDEN(1) ROW_WIDEN(2) ROW_WIDEN(3) ROW_WIDEN(4) ROW_WIDEN(5)
    ROW_WIDEN(6) ROW_WIDEN(7) ROW_WIDEN(8) ROW_WIDEN(9) ROW_WIDEN(10) ROW_WIDEN(11)
    if (t->c_transposed) {   /* rows past m hold zeros, and are not stored */
        __m512 left[16] = {c0a, c1a, c2a, c3a, c4a, c5a, c6a, c7a, c8a, c9a, c10a, c11a,
                           zero, zero, zero, zero};
        __m512 right[16] = {c0b, c1b, c2b, c3b, c4b, c5b, c6b, c7b, c8b, c9b, c10b, c11b,
                            zero, zero, zero, zero};
        store_half_transposed(t, left, 0, va);
        if (wide) store_half_transposed(t, right, 1, va);
        return;
    }
    ROW_STORE(0) ROW_STORE(1) ROW_STORE(2) ROW_STORE(3) ROW_STORE(4) ROW_STORE(5)
    ROW_STORE(6) ROW_STORE(7) ROW_STORE(8) ROW_STORE(9) ROW_STORE(10) ROW_STORE(11)
}

/* tile_ROWS_B_A: B 0-2 = 16, 24, 32 lanes, 3 = 32 packed on the way, 4 = also
   summed; A 1 = by rows */
#define TILE_VARIANT(rows, b, by_rows)                                         \
    AVX512_TARGET static void tile_##rows##_##b##_##by_rows(const GemmTile *t) \
    {                                                                          \
        avx512_tile(t, rows, b >= 3 ? 32 : 16 + 8 * b, b >= 3 ? b - 2 : 0, by_rows); \
    }
#define TILE_VARIANTS(b, by_rows) \
    TILE_VARIANT(12, b, by_rows) TILE_VARIANT(8, b, by_rows) TILE_VARIANT(4, b, by_rows)
TILE_VARIANTS(0, 0) TILE_VARIANTS(1, 0) TILE_VARIANTS(2, 0) TILE_VARIANTS(3, 0) TILE_VARIANTS(4, 0)
TILE_VARIANTS(0, 1) TILE_VARIANTS(1, 1) TILE_VARIANTS(2, 1) TILE_VARIANTS(3, 1) TILE_VARIANTS(4, 1)

#define TILE_ROW(b, by_rows) \
    {tile_12_##b##_##by_rows, tile_8_##b##_##by_rows, tile_4_##b##_##by_rows}
static const GemmKernelFn tile_variants[2][5][3] = {
    {TILE_ROW(0, 0), TILE_ROW(1, 0), TILE_ROW(2, 0), TILE_ROW(3, 0), TILE_ROW(4, 0)},
    {TILE_ROW(0, 1), TILE_ROW(1, 1), TILE_ROW(2, 1), TILE_ROW(3, 1), TILE_ROW(4, 1)},
};

static void avx512_kernel(const GemmTile *t)
{
    int b = t->b_source ? (t->b_sums ? 4 : 3) : t->n <= 16 ? 0 : t->n <= 24 ? 1 : 2;
    tile_variants[t->a_depth == 1][b][t->m > 8 ? 0 : t->m > 4 ? 1 : 2](t);
}

/* ---- a few rows, nothing packed (gemm.h: GemmFewRows) ------------------- */

/* Named accumulators, as in avx512_tile: arrays of vectors end up on the stack. */
#define FOUR_ACCUMULATORS(r) \
    __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = c##r##0, c##r##2 = c##r##0, c##r##3 = c##r##0;
#define FMA_FOUR(r, x)                                                         \
    c##r##0 = _mm512_fmadd_ps(x, b0, c##r##0);                                 \
    c##r##1 = _mm512_fmadd_ps(x, b1, c##r##1);                                 \
    c##r##2 = _mm512_fmadd_ps(x, b2, c##r##2);                                 \
    c##r##3 = _mm512_fmadd_ps(x, b3, c##r##3);

/* Row r of A along the depth times the four rows of B. */
#define DOT_ROW(r)                                                             \
    if (rows > r) {                                                            \
        __m512 x = _mm512_maskz_loadu_ps(mask, f->a + r * f->lda + p);         \
        FMA_FOUR(r, x)                                                         \
    }

#define DOT_STORE(r)                                                           \
    if (rows > r) {                                                            \
        float *c = f->c + r * f->ldc + j;                                      \
        float sum[4];                                                          \
        sum[0] = _mm512_reduce_add_ps(c##r##0);                                \
        sum[1] = _mm512_reduce_add_ps(c##r##1);                                \
        sum[2] = _mm512_reduce_add_ps(c##r##2);                                \
        sum[3] = _mm512_reduce_add_ps(c##r##3);                                \
        for (q = 0; q < cols; q++)                                             \
            c[q] = gemm_scaled(sum[q], f->alpha, f->beta, c + q,                \
                               f->bias ? f->bias + j + q : NULL, f->relu);      \
    }

/*
 * C(i, j..j+3) for `rows` rows of A and four rows of B (the last one repeated
 * where fewer are left): dot products along the depth, 16 lanes at a time.
 */
AVX512_TARGET static inline __attribute__((always_inline)) void
dots_4(const GemmFewRows *f, int64_t j, const int rows)
{
    const float *b[4];
    int64_t p;
    int q, cols = f->j1 - j < 4 ? (int)(f->j1 - j) : 4;
    FOUR_ACCUMULATORS(0) FOUR_ACCUMULATORS(1) FOUR_ACCUMULATORS(2) FOUR_ACCUMULATORS(3)
    for (q = 0; q < 4; q++) b[q] = f->b + (j + (q < cols ? q : cols - 1)) * f->ldb;
    for (p = 0; p < f->k; p += 16) {
        __mmask16 mask = first_lanes((int)(f->k - p < 16 ? f->k - p : 16));
        __m512 b0 = _mm512_maskz_loadu_ps(mask, b[0] + p), b1 = _mm512_maskz_loadu_ps(mask, b[1] + p);
        __m512 b2 = _mm512_maskz_loadu_ps(mask, b[2] + p), b3 = _mm512_maskz_loadu_ps(mask, b[3] + p);
        DOT_ROW(0) DOT_ROW(1) DOT_ROW(2) DOT_ROW(3)
    }
    DOT_STORE(0) DOT_STORE(1) DOT_STORE(2) DOT_STORE(3)
}

/* Row r of A (at a, one value per depth step p) times four vectors of B. */
#define AXPY_ROW(r)                                                            \
    if (rows > r) {                                                            \
        __m512 x = _mm512_set1_ps(a[r * f->lda + p]);                          \
        FMA_FOUR(r, x)                                                         \
    }

/* Vector v of row r finished as store_row finishes a tile's: times alpha (va),
   plus bias when there is one, else plus beta * C; then ReLU when relu. */
#define AXPY_STORE_ONE(r, v)                                                   \
    if (width > 16 * v) {                                                      \
        out = _mm512_mul_ps(c##r##v, va);                                      \
        if (bias)                                                              \
            out = _mm512_add_ps(out, _mm512_maskz_loadu_ps(mask[v], bias + 16 * v)); \
        else if (beta != 0.0f)                                                 \
            out = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(mask[v], c + 16 * v), out); \
        _mm512_mask_storeu_ps(c + 16 * v, mask[v], relu ? relu_lanes(out) : out); \
    }

#define AXPY_STORE(r)                                                          \
    if (rows > r) {                                                            \
        float *c = f->c + r * f->ldc + j;                                      \
        __m512 out;                                                            \
        AXPY_STORE_ONE(r, 0) AXPY_STORE_ONE(r, 1) AXPY_STORE_ONE(r, 2) AXPY_STORE_ONE(r, 3) \
    }

/* C(i, j..j+63) for `rows` rows of A: rows of B scaled by A(i, p) and summed. */
AVX512_TARGET static inline __attribute__((always_inline)) void
axpys_64(const GemmFewRows *f, int64_t j, const int rows)
{
    __m512 va = _mm512_set1_ps(f->alpha);
    __mmask16 mask[4];
    const float *a = f->a, *bias = f->bias ? f->bias + j : NULL;
    float beta = f->beta;
    int64_t p;
    int v, relu = f->relu, width = f->j1 - j < 64 ? (int)(f->j1 - j) : 64;
    FOUR_ACCUMULATORS(0) FOUR_ACCUMULATORS(1) FOUR_ACCUMULATORS(2) FOUR_ACCUMULATORS(3)
    for (v = 0; v < 4; v++) mask[v] = first_lanes(width - 16 * v);
    for (p = 0; p < f->k; p++) {
        const float *row = f->b + p * f->ldb + j;
        __m512 b0 = _mm512_maskz_loadu_ps(mask[0], row), b1 = _mm512_maskz_loadu_ps(mask[1], row + 16);
        __m512 b2 = _mm512_maskz_loadu_ps(mask[2], row + 32), b3 = _mm512_maskz_loadu_ps(mask[3], row + 48);
        AXPY_ROW(0) AXPY_ROW(1) AXPY_ROW(2) AXPY_ROW(3)
    }
    AXPY_STORE(0) AXPY_STORE(1) AXPY_STORE(2) AXPY_STORE(3)
}

/*
 * C(i, j..j+63) for `rows` rows of A from the two packed panels of those
 * columns (GemmFewRows.panels), slice by slice as gemm_block runs the tiles:
 * each lane's FMAs in avx512_tile's order, finished as store_row finishes
 * them (the bias on the first slice, then beta 1; ReLU on the last). Two
 * panels give each row four chains of FMAs where a tile of one panel gives
 * it two.
 */
AVX512_TARGET static inline __attribute__((always_inline)) void
panels_64(const GemmFewRows *f, int64_t j, const int rows)
{
    const __m512 zero = _mm512_setzero_ps(), va = _mm512_set1_ps(f->alpha);
    int width = f->j1 - j < 64 ? (int)(f->j1 - j) : 64, two = width > AVX512_NR, v;
    __mmask16 mask[4];
    int64_t pc, p, s;
    for (v = 0; v < 4; v++) mask[v] = first_lanes(width - 16 * v);
    for (pc = 0, s = 0; pc < f->k; pc += f->slice, s++) {
        int64_t kc = f->k - pc < f->slice ? f->k - pc : f->slice;
        const float *b = f->panels + s * f->slice * f->n_padded + j * kc;   /* then the next panel */
        const float *a = f->a + pc, *bias = pc == 0 && f->bias ? f->bias + j : NULL;
        float beta = pc == 0 ? f->beta : 1.0f;
        int relu = f->relu && pc + kc == f->k;
        FOUR_ACCUMULATORS(0) FOUR_ACCUMULATORS(1) FOUR_ACCUMULATORS(2) FOUR_ACCUMULATORS(3)
        for (p = 0; p < kc; p++) {
            const float *row = b + p * AVX512_NR;
            __m512 b0 = _mm512_loadu_ps(row), b1 = _mm512_loadu_ps(row + 16), b2 = zero, b3 = zero;
            if (two) {
                b2 = _mm512_loadu_ps(row + AVX512_NR * kc);
                b3 = _mm512_loadu_ps(row + AVX512_NR * kc + 16);
            }
            AXPY_ROW(0) AXPY_ROW(1) AXPY_ROW(2) AXPY_ROW(3)
        }
        AXPY_STORE(0) AXPY_STORE(1) AXPY_STORE(2) AXPY_STORE(3)
    }
}

AVX512_TARGET static inline __attribute__((always_inline)) void
few_rows(const GemmFewRows *f, const int rows)
{
    int64_t j;
    if (f->panels)
        for (j = f->j0; j < f->j1; j += 64) panels_64(f, j, rows);
    else if (f->b_by_rows)
        for (j = f->j0; j < f->j1; j += 4) dots_4(f, j, rows);
    else
        for (j = f->j0; j < f->j1; j += 64) axpys_64(f, j, rows);
}

GEMM_FEW_ROWS_ENTRY(avx512_few_rows, AVX512_TARGET)

const GemmKernels gemm_avx512_kernels = {
    "avx512", AVX512_MR, AVX512_NR, avx512_pack, avx512_kernel, avx512_few_rows, 1
};

#endif /* x86 */
