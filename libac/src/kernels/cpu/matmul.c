/*
 * cpu/matmul.c - the CPU's kernels for matmul.c: batches of products on top
 * of gemm, forward and the operands' gradients.
 *
 * Backward never copies a transposed matrix: dA = dC B^T and dB = A^T dC are
 * gemm calls with a transpose flag. Where an operand's matrix served several
 * output batches (broadcasting), its gradient sums them in batch order.
 */
#include "kernels/cpu/cpu_kernels.h"

#include <string.h>

#define MATMUL_GRAIN 65536   /* multiply-adds per parallel task, at least */

/* Every output batch uses its own matrix of a and one shared matrix of b:
   the batch folds into the rows of one big product. */
static int folds_into_rows(const MatmulShape *s)
{
    return s->b_matrices == 1 && s->a_matrices == s->batches;
}

static int64_t tasks_grain(const MatmulShape *s)
{
    int64_t work = s->n * s->k * s->m;
    return work >= MATMUL_GRAIN ? 1 : MATMUL_GRAIN / (work > 0 ? work : 1);
}

/* ---- forward ------------------------------------------------------------- */

typedef struct {
    const MatmulShape *s;
    const float *a, *b;
    float *c;
} MatmulJob;

static void matmul_task(void *ctx, int64_t begin, int64_t end)
{
    const MatmulJob *job = ctx;
    const MatmulShape *s = job->s;
    int64_t t;
    for (t = begin; t < end; t++) {
        const float *a = job->a + matmul_batch_matrix(s, s->a_stride, t) * s->n * s->k;
        const float *b = job->b + matmul_batch_matrix(s, s->b_stride, t) * s->k * s->m;
        gemm(0, 0, s->n, s->m, s->k, 1.0f, a, s->k, b, s->m, 0.0f, job->c + t * s->n * s->m,
             s->m);
    }
}

int cpu_matmul(const MatmulShape *s, const float *a, const float *b, float *out)
{
    MatmulJob job;
    if (s->batches * s->n * s->m == 0) return AC_OK;
    if (s->k == 0) {
        memset(out, 0, (size_t)(s->batches * s->n * s->m) * sizeof(float));
    } else if (folds_into_rows(s)) {
        gemm(0, 0, s->batches * s->n, s->m, s->k, 1.0f, a, s->k, b, s->m, 0.0f, out, s->m);
    } else {
        job.s = s;
        job.a = a;
        job.b = b;
        job.c = out;
        parallel_for(s->batches, tasks_grain(s), matmul_task, &job);
    }
    return AC_OK;
}

/* ---- backward ------------------------------------------------------------ */

typedef struct {
    const MatmulShape *s;
    const float *a, *b, *gout;
    float *grad;
    int of_b;        /* 0: the gradient of a, 1: of b */
    int shared;      /* the operand's matrices serve several output batches */
} MatmulGradJob;

/* Add output batch t's contribution to the operand's gradient matrix. */
static void grad_contribution(const MatmulGradJob *job, int64_t t, float beta)
{
    const MatmulShape *s = job->s;
    int64_t ia = matmul_batch_matrix(s, s->a_stride, t), ib = matmul_batch_matrix(s, s->b_stride, t);
    const float *g = job->gout + t * s->n * s->m;
    if (job->of_b)
        gemm(1, 0, s->k, s->m, s->n, 1.0f, job->a + ia * s->n * s->k, s->k, g, s->m, beta,
             job->grad + ib * s->k * s->m, s->m);
    else
        gemm(0, 1, s->n, s->k, s->m, 1.0f, g, s->m, job->b + ib * s->k * s->m, s->m, beta,
             job->grad + ia * s->n * s->k, s->k);
}

/* Tasks are output batches (each operand matrix used once) or operand
   matrices (each sums, in batch order, the batches that used it). */
static void matmul_grad_task(void *ctx, int64_t begin, int64_t end)
{
    const MatmulGradJob *job = ctx;
    const MatmulShape *s = job->s;
    const int64_t *strides = job->of_b ? s->b_stride : s->a_stride;
    int64_t j, t;
    for (j = begin; j < end; j++) {
        if (!job->shared) {
            grad_contribution(job, j, 0.0f);
            continue;
        }
        for (t = 0; t < s->batches; t++)
            if (matmul_batch_matrix(s, strides, t) == j) grad_contribution(job, t, 1.0f);
    }
}

int cpu_matmul_grad(const MatmulShape *s, const float *a, const float *b, const float *gout,
                    float *grad, int of_b)
{
    MatmulGradJob job;
    const int64_t matrices = of_b ? s->b_matrices : s->a_matrices;
    const int64_t size = matrices * (of_b ? s->k * s->m : s->n * s->k);
    if (size == 0) return AC_OK;
    job.s = s;
    job.a = a;
    job.b = b;
    job.gout = gout;
    job.grad = grad;
    job.of_b = of_b;
    job.shared = matrices != s->batches;
    /* accumulating, or nothing to accumulate (an empty output): start from zero */
    if (job.shared || s->n * s->m == 0) memset(grad, 0, (size_t)size * sizeof(float));
    if (s->n * s->m == 0 || s->batches == 0) return AC_OK;
    if (folds_into_rows(s) && !of_b)
        gemm(0, 1, s->batches * s->n, s->k, s->m, 1.0f, gout, s->m, b, s->m, 0.0f, grad, s->k);
    else if (folds_into_rows(s))
        gemm(1, 0, s->k, s->m, s->batches * s->n, 1.0f, a, s->k, gout, s->m, 0.0f, grad, s->m);
    else
        parallel_for(job.shared ? matrices : s->batches, tasks_grain(s), matmul_grad_task, &job);
    return AC_OK;
}
