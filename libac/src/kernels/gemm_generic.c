/*
 * gemm_generic.c - the portable SGEMM kernel set: plain C for any CPU.
 *
 * Used where no SIMD set applies (other architectures, old x86) and by the
 * tests as the third path. The loops are written so a compiler can
 * vectorise them with whatever the baseline instruction set offers.
 */
#include "gemm.h"

#define GENERIC_MR 4
#define GENERIC_NR 16

static void generic_pack(const float *x, int64_t ld, int depth_contiguous,
                         int rows, int depth, int width, float *dst)
{
    int r0, r, p;
    for (r0 = 0; r0 < rows; r0 += width) {
        int valid = rows - r0 < width ? rows - r0 : width;
        for (p = 0; p < depth; p++) {
            float *out = dst + (int64_t)p * width;
            for (r = 0; r < valid; r++)
                out[r] = depth_contiguous ? x[(int64_t)(r0 + r) * ld + p]
                                          : x[(int64_t)p * ld + r0 + r];
            for (; r < width; r++)
                out[r] = 0.0f;
        }
        dst += (int64_t)depth * width;
    }
}

/*
 * acc[0:NR] += A(row, p) * B(p, 0:NR) over the depth. The NR-wide update is
 * what vectorises well; GCC at -O3 would rather vectorise the depth loop (a
 * reduction through a strided gather), which runs ten times slower, so that
 * transformation is switched off here.
 */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-loop-vectorize")))
#endif
static void row_times_panel(float *restrict acc, const float *restrict a, int64_t a_depth,
                            const float *restrict b, int kc)
{
    int p, j;
    for (p = 0; p < kc; p++) {
        float x = a[p * a_depth];
        for (j = 0; j < GENERIC_NR; j++) acc[j] += x * b[p * GENERIC_NR + j];
    }
}

static void generic_kernel(const GemmTile *t)
{
    float acc[GENERIC_MR * GENERIC_NR] = {0.0f};
    int p, i, j;
    if (t->b_source)
        for (p = 0; p < t->kc; p++)
            for (j = 0; j < GENERIC_NR; j++) t->b[p * GENERIC_NR + j] = t->b_source[p * t->ldb + j];
    if (t->b_sums) gemm_sum_panel(t->b_sums, t->b, t->kc, GENERIC_NR, GENERIC_NR);
    for (i = 0; i < GENERIC_MR; i++)
        row_times_panel(acc + i * GENERIC_NR, t->a + i * t->a_row, t->a_depth, t->b, t->kc);
    for (i = 0; i < t->m; i++) {
        for (j = 0; j < t->n; j++) {
            float value = t->alpha * acc[i * GENERIC_NR + j];
            float *out = t->c_transposed ? t->c + j * t->ldc + i : t->c + i * t->ldc + j;
            if (t->bias)
                value += t->bias[j];
            else if (t->beta != 0.0f)
                value = t->beta * *out + value;
            *out = t->relu ? gemm_relu(value) : value;
        }
    }
}

/* A few rows from B's packed panels (GemmFewRows.panels): each row times each
   panel, slice by slice, summed and finished as generic_kernel does it. */
static void generic_few_rows_panels(const GemmFewRows *f)
{
    int64_t i, j, pc, s;
    int q, width;
    for (i = 0; i < f->m; i++) {
        float *c = f->c + i * f->ldc;
        for (j = f->j0; j < f->j1; j += GENERIC_NR) {
            width = f->j1 - j < GENERIC_NR ? (int)(f->j1 - j) : GENERIC_NR;
            for (pc = 0, s = 0; pc < f->k; pc += f->slice, s++) {
                int kc = (int)(f->k - pc < f->slice ? f->k - pc : f->slice);
                float acc[GENERIC_NR] = {0.0f}, beta = pc == 0 ? f->beta : 1.0f;
                int relu = f->relu && pc + kc == f->k;
                row_times_panel(acc, f->a + i * f->lda + pc, 1,
                                f->panels + s * f->slice * f->n_padded + j * kc, kc);
                for (q = 0; q < width; q++) {
                    float value = f->alpha * acc[q];
                    if (pc == 0 && f->bias)
                        value += f->bias[j + q];
                    else if (beta != 0.0f)
                        value = beta * c[j + q] + value;
                    c[j + q] = relu ? gemm_relu(value) : value;
                }
            }
        }
    }
}

/* A few rows, nothing packed (gemm.h: GemmFewRows), in blocks of GENERIC_NR columns. */
static void generic_few_rows(const GemmFewRows *f)
{
    int64_t i, j, p;
    int q, width;
    if (f->panels) {
        generic_few_rows_panels(f);
        return;
    }
    for (i = 0; i < f->m; i++) {
        const float *a = f->a + i * f->lda;
        float *c = f->c + i * f->ldc;
        for (j = f->j0; j < f->j1; j += GENERIC_NR) {
            float acc[GENERIC_NR] = {0.0f};
            width = f->j1 - j < GENERIC_NR ? (int)(f->j1 - j) : GENERIC_NR;
            for (p = 0; p < f->k; p++)
                for (q = 0; q < width; q++)
                    acc[q] += a[p] * (f->b_by_rows ? f->b[(j + q) * f->ldb + p]
                                                   : f->b[p * f->ldb + j + q]);
            for (q = 0; q < width; q++)
                c[j + q] = gemm_scaled(acc[q], f->alpha, f->beta, c + j + q,
                                       f->bias ? f->bias + j + q : NULL, f->relu);
        }
    }
}

const GemmKernels gemm_generic_kernels = {
    "generic", GENERIC_MR, GENERIC_NR, generic_pack, generic_kernel, generic_few_rows, 0
};
