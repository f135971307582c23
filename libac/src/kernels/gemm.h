/*
 * gemm.h - the contract between the SGEMM driver (gemm.c) and its kernels.
 *
 * The driver cuts C into blocks, packs slices of op(A) and op(B) into
 * panels, and hands pairs of panels to a register-tiled micro-kernel. Each
 * instruction set (generic C, AVX2+FMA, AVX-512F) supplies a micro-kernel
 * and a packing routine; gemm.c picks one set at run time.
 */
#ifndef AC_GEMM_H
#define AC_GEMM_H

#include <stddef.h>
#include <stdint.h>

/*
 * Pack the rows x depth matrix X into panels of `width` rows: panel q holds
 * rows [q*width, q*width + width), stored depth-major (panel[p*width + r]),
 * and the rows past `rows` in the last panel are zero. X(r, p) is
 * x[r*ld + p] when depth_contiguous, else x[p*ld + r].
 * op(A) is packed as X = op(A) with width mr; op(B) as X = op(B)^T with width nr.
 */
typedef void (*GemmPackFn)(const float *x, int64_t ld, int depth_contiguous,
                           int rows, int depth, int width, float *dst);

/*
 * One register tile: C[0:m, 0:n] = alpha * A * B + beta * C, with A of mr x kc
 * and B a packed panel of kc x nr (m <= mr and n <= nr say how much of the
 * tile lies inside C). A(i, p) is a[i*a_row + p*a_depth]: a packed panel
 * (a_row 1, a_depth mr) or mr full rows of op(A) read in place (a_depth 1).
 * When b_source is set (only for a full panel, n == nr), the kernel packs
 * the panel as it goes: row p of B is read at b_source + p*ldb and also
 * stored to the panel at b. When beta == 0, C is only written, never read
 * (it may hold NaN). C(i, j) is c[i*ldc + j], or c[j*ldc + i] when
 * c_transposed. When bias is set (then beta == 0 and C is not transposed),
 * C(i, j) = alpha * (A * B)(i, j) + bias[j]. When relu is set (then C is not
 * transposed; gemm.c sets it for the depth's last slice only), each element is
 * then stored as gemm_relu leaves it. When b_sums is set (only with
 * b_source), the kernel also adds the sum of each column of the panel over
 * its kc depth steps, summed in depth order, to b_sums[0:nr]. a_next is the
 * next A-panel when it is packed, else NULL; a kernel may fetch its depth
 * steps [next_from, next_to) into L2 (gemm_fetch_next_a).
 */
typedef struct {
    int kc, m, n;
    const float *a;
    int64_t a_row, a_depth;
    float *b;
    const float *b_source;
    int64_t ldb;
    float *c;
    int64_t ldc;
    int c_transposed;
    float alpha, beta;
    const float *bias;
    int relu;
    float *b_sums;
    const float *a_next;
    int next_from, next_to;
} GemmTile;

typedef void (*GemmKernelFn)(const GemmTile *tile);

/*
 * The kernel's share of the next packed A-panel, into L2 a cache line at a
 * time: the kernels for one A-panel each fetch a slice of the next one, so
 * that it comes from L2, not L3, when its turn comes (a packed block of A
 * outgrows L2 from n = 1024 on).
 */
static inline void gemm_fetch_next_a(const GemmTile *t, int mr)
{
    int64_t q;
    if (!t->a_next) return;
    for (q = (int64_t)t->next_from * mr; q < (int64_t)t->next_to * mr; q += 16)
        __builtin_prefetch(t->a_next + q, 0, 2);
}

/* b_sums[0:width] += the sums of the first `width` columns of a packed panel
   (`depth` steps of `stride` floats), each summed in depth order. */
static inline void gemm_sum_panel(float *b_sums, const float *panel, int depth, int stride,
                                  int width)
{
    float sum[64] = {0.0f};   /* width <= 64 */
    int p, j;
    for (p = 0; p < depth; p++)
        for (j = 0; j < width; j++) sum[j] += panel[p * stride + j];
    for (j = 0; j < width; j++) b_sums[j] += sum[j];
}

/*
 * A few rows of A times B with nothing packed, for when packing B would cost
 * more than the product (a Linear layer's forward on one or two samples):
 * C[0:m, j0:j1] = alpha * A * op(B) + beta * C, with A(i, p) = a[i*lda + p].
 * op(B)(p, j) is b[j*ldb + p] when b_by_rows (B's rows are the output
 * columns, as in x @ W^T: each output is the dot product of two contiguous
 * rows), else b[p*ldb + j]. m is at most GEMM_FEW_ROWS. Each element of C
 * is summed in an order that depends only on k, never on j0 or j1. When
 * beta == 0, C is only written; when bias is set (then beta == 0), bias[j]
 * is added to C(i, j) after the scaling; when relu is set, each element is
 * then stored as gemm_relu leaves it.
 * When panels is set, op(B) is read from gemm_pack_b's panels instead (b is
 * not read): slices of `slice` depth steps, each holding n_padded columns in
 * panels of nr, and j0 a multiple of nr. Each element is then summed and
 * finished as the set's kernel sums and finishes it on those panels, so the
 * rows have the bits the blocked product gives them (gemm_packed without B),
 * several panels at a time (one alone is bound by its additions' latency).
 */
#define GEMM_FEW_ROWS 4

typedef struct {
    int64_t m, k, j0, j1;
    const float *a;
    int64_t lda;
    const float *b;
    int64_t ldb;
    int b_by_rows;
    float *c;
    int64_t ldc;
    float alpha, beta;
    const float *bias;
    int relu;
    const float *panels;
    int64_t slice, n_padded;
} GemmFewRows;

typedef void (*GemmFewRowsFn)(const GemmFewRows *job);

/*
 * Defines `name`, a kernel set's few_rows entry, from the set's inline
 * few_rows(f, rows): one copy per row count, so that rows is a constant in
 * its loops, picked by f->m. TARGET is the set's target attribute.
 */
#define GEMM_FEW_ROWS_ENTRY(name, TARGET)                                       \
    TARGET static void name##_1(const GemmFewRows *f) { few_rows(f, 1); }      \
    TARGET static void name##_2(const GemmFewRows *f) { few_rows(f, 2); }      \
    TARGET static void name##_3(const GemmFewRows *f) { few_rows(f, 3); }      \
    TARGET static void name##_4(const GemmFewRows *f) { few_rows(f, 4); }      \
    static void name(const GemmFewRows *f)                                      \
    {                                                                           \
        static const GemmFewRowsFn by_rows[GEMM_FEW_ROWS] = {name##_1, name##_2, \
                                                             name##_3, name##_4}; \
        by_rows[f->m - 1](f);                                                   \
    }

/* ReLU as ac_relu computes it: a negative value becomes 0, NaN and -0 stay.
   (A SIMD set's max(0, v), with 0 as the first operand, gives the same bits.) */
static inline float gemm_relu(float v) { return v < 0.0f ? 0.0f : v; }

/* One finished element of C: alpha * sum, plus *bias when there is one, else
   plus beta * c, reading c only when beta != 0; then gemm_relu when relu. */
static inline float gemm_scaled(float sum, float alpha, float beta, const float *c,
                                const float *bias, int relu)
{
    float v;
    if (bias)
        v = alpha * sum + *bias;
    else
        v = beta == 0.0f ? alpha * sum : alpha * sum + beta * *c;
    return relu ? gemm_relu(v) : v;
}

typedef struct {
    const char *name;   /* "avx512", "avx2" or "generic", as AC_SIMD spells it */
    int mr, nr;         /* the register tile */
    GemmPackFn pack;
    GemmKernelFn kernel;
    GemmFewRowsFn few_rows;
    /* Nonzero when a tile of B 3/4 of nr wide costs 3/4 of a full one: a block
       whose last panel would hold at most nr/4 columns then ends in panels of
       nr + r - nr/2 and nr/2 columns (gemm.c: panel_start). */
    int tail_split;
} GemmKernels;

extern const GemmKernels gemm_generic_kernels;
#if defined(__x86_64__) || defined(__i386__)
extern const GemmKernels gemm_avx2_kernels;
extern const GemmKernels gemm_avx512_kernels;
#endif

/*
 * op(B), k x n, packed once for many products with it on the right (a
 * recurrent layer's W_hh: once per call instead of once per time step).
 * gemm_pack_b packs it, for the kernel set in use, into `panels` of
 * gemm_packed_b_floats(k, n) floats; op(B)(p, j) is b[j*ldb + p] when
 * trans_b, else b[p*ldb + j], and b must stay as it is while the packed copy
 * is used (gemm_packed reads it for GEMM_FEW_ROWS rows or fewer, and when it
 * has no pack buffer). gemm_packed(m, alpha, a, lda, packed, beta, c, ldc) is
 * then gemm(0, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc), bit
 * for bit, split over threads as gemm splits it.
 * A caller that keeps no B sets the packed copy's b to NULL: gemm_packed then
 * reads the panels for any m (a few rows too: GemmFewRows), so that each row of
 * C has the same bits however many rows come with it (not gemm's bits for a
 * few rows).
 */
typedef struct {
    const GemmKernels *kern;
    int trans_b;
    int64_t k, n;
    const float *b;
    int64_t ldb;
    float *panels;
} GemmPackedB;

size_t gemm_packed_b_floats(int64_t k, int64_t n);
GemmPackedB gemm_pack_b(int trans_b, int64_t k, int64_t n, const float *b, int64_t ldb,
                        float *panels);
void gemm_packed(int64_t m, float alpha, const float *a, int64_t lda, const GemmPackedB *b,
                 float beta, float *c, int64_t ldc);
/* The same with bias (or NULL) added to each row of C, as gemm_bias (when b is
   kept, bit for bit); with relu, each element of C is then stored as gemm_relu
   leaves it, as the tiles store it, with no pass of its own (a Linear layer
   followed by ReLU: the bits of the product and then ac_relu). */
void gemm_packed_bias(int64_t m, const float *a, int64_t lda, const GemmPackedB *b,
                      const float *bias, int relu, float *c, int64_t ldc);

/*
 * Make every later gemm() use the named kernel set ("avx512", "avx2",
 * "generic"), or, for NULL, the one AC_SIMD or the CPU picks. Returns 1, or 0
 * (changing nothing) when this CPU cannot run the named set. For tests.
 */
int gemm_use_kernels(const char *name);
/* The name of the kernel set gemm() uses now. */
const char *gemm_kernels_name(void);

#endif /* AC_GEMM_H */
