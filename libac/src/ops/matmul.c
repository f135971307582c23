/*
 * matmul.c - PyTorch's matmul (dot, matrix-vector, matrix-matrix, and batched
 * with broadcast batch dims) and its backward, both on top of gemm.
 *
 * Backward never copies a transposed matrix: dA = dC B^T and dB = A^T dC are
 * gemm calls with a transpose flag. Where an operand's matrix served several
 * output batches (broadcasting), its gradient sums them in batch order.
 *
 * Not here: the GEMM kernels themselves (kernels/).
 */
#include "graph.h"

#include <string.h>

#define MATMUL_GRAIN 65536   /* multiply-adds per parallel task, at least */

/* The product as a batch of (n x k) @ (k x m); 1-D operands are (1 x k) or (k x 1). */
typedef struct {
    int64_t n, k, m;
    int a_vector, b_vector;
    int batch_ndim;
    int64_t batch_shape[AC_MAX_DIMS];
    int64_t a_stride[AC_MAX_DIMS];   /* in matrices; 0 where a is broadcast */
    int64_t b_stride[AC_MAX_DIMS];
    int64_t batches, a_matrices, b_matrices;
    int64_t out_shape[AC_MAX_DIMS];
    int out_ndim;
} MatmulPlan;

/* Strides, in matrices, of an operand with `nd` batch dims, seen from the batch shape. */
static int64_t batch_strides(const int64_t *shape, int nd, const MatmulPlan *plan,
                             int64_t *strides)
{
    int64_t stride = 1;
    int i;
    for (i = plan->batch_ndim - 1; i >= 0; i--) {
        int own = i - (plan->batch_ndim - nd);
        int64_t d = own >= 0 ? shape[own] : 1;
        strides[i] = own < 0 || (d == 1 && plan->batch_shape[i] != 1) ? 0 : stride;
        stride *= d;
    }
    return stride;
}

static int matmul_plan(const AcTensor *a, const AcTensor *b, MatmulPlan *plan)
{
    int a_batch = a->ndim > 2 ? a->ndim - 2 : 0, b_batch = b->ndim > 2 ? b->ndim - 2 : 0;
    int64_t kb;
    int i;
    if (a->ndim == 0 || b->ndim == 0)
        return error_set(AC_ERR_SHAPE, "matmul: both operands need at least 1 dim, got shapes %s and %s",
                         tensor_shape_str(a), tensor_shape_str(b));
    plan->a_vector = a->ndim == 1;
    plan->b_vector = b->ndim == 1;
    plan->n = plan->a_vector ? 1 : a->shape[a->ndim - 2];
    plan->k = a->shape[a->ndim - 1];
    kb = plan->b_vector ? b->shape[0] : b->shape[b->ndim - 2];
    plan->m = plan->b_vector ? 1 : b->shape[b->ndim - 1];
    if (plan->k != kb)
        return error_set(AC_ERR_SHAPE, "matmul: shapes %s and %s are not aligned (%lld != %lld)",
                         tensor_shape_str(a), tensor_shape_str(b), (long long)plan->k,
                         (long long)kb);
    plan->batch_ndim = a_batch > b_batch ? a_batch : b_batch;
    plan->batches = 1;
    for (i = 0; i < plan->batch_ndim; i++) {
        int ia = i - (plan->batch_ndim - a_batch), ib = i - (plan->batch_ndim - b_batch);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return error_set(AC_ERR_SHAPE,
                             "matmul: batch dims of shapes %s and %s cannot be broadcast (%lld vs %lld)",
                             tensor_shape_str(a), tensor_shape_str(b), (long long)da, (long long)db);
        plan->batch_shape[i] = da == 1 ? db : da;
        plan->batches *= plan->batch_shape[i];
    }
    plan->a_matrices = batch_strides(a->shape, a_batch, plan, plan->a_stride);
    plan->b_matrices = batch_strides(b->shape, b_batch, plan, plan->b_stride);
    memcpy(plan->out_shape, plan->batch_shape, sizeof plan->batch_shape);
    plan->out_ndim = plan->batch_ndim;
    if (!plan->a_vector) plan->out_shape[plan->out_ndim++] = plan->n;
    if (!plan->b_vector) plan->out_shape[plan->out_ndim++] = plan->m;
    return AC_OK;
}

/* Which of the operand's matrices output batch t uses. */
static int64_t batch_matrix(const MatmulPlan *plan, const int64_t *strides, int64_t t)
{
    int64_t index = 0;
    int i;
    for (i = plan->batch_ndim - 1; i >= 0; i--) {
        index += (t % plan->batch_shape[i]) * strides[i];
        t /= plan->batch_shape[i];
    }
    return index;
}

/* Every output batch uses its own matrix of a and one shared matrix of b:
   the batch folds into the rows of one big product. */
static int folds_into_rows(const MatmulPlan *plan)
{
    return plan->b_matrices == 1 && plan->a_matrices == plan->batches;
}

static int64_t tasks_grain(const MatmulPlan *plan)
{
    int64_t work = plan->n * plan->k * plan->m;
    return work >= MATMUL_GRAIN ? 1 : MATMUL_GRAIN / (work > 0 ? work : 1);
}

/* ---- forward ------------------------------------------------------------- */

typedef struct {
    const MatmulPlan *plan;
    const float *a, *b;
    float *c;
} MatmulJob;

static void matmul_task(void *ctx, int64_t begin, int64_t end)
{
    const MatmulJob *job = ctx;
    const MatmulPlan *p = job->plan;
    int64_t t;
    for (t = begin; t < end; t++) {
        const float *a = job->a + batch_matrix(p, p->a_stride, t) * p->n * p->k;
        const float *b = job->b + batch_matrix(p, p->b_stride, t) * p->k * p->m;
        gemm(0, 0, p->n, p->m, p->k, 1.0f, a, p->k, b, p->m, 0.0f, job->c + t * p->n * p->m,
             p->m);
    }
}

/* dA = dC B^T and dB = A^T dC, per output batch, summed over broadcasting. */
static int matmul_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin);

int matmul_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[2] = ac_matmul(t[0], t[1]));
}

AcTensor *ac_matmul(const AcTensor *a, const AcTensor *b)
{
    if (ops_observed) return graph_op("matmul", matmul_replay, 2, (const AcTensor *[]){a, b}, NULL, 0);
    const AcTensor *inputs[2];
    MatmulPlan plan;
    MatmulJob job;
    AcTensor *out;
    if (tensor_check("matmul", a, "a") || tensor_check("matmul", b, "b")) return NULL;
    if (matmul_plan(a, b, &plan)) return NULL;
    inputs[0] = a;
    inputs[1] = b;
    out = op_output("matmul", plan.out_shape, plan.out_ndim, inputs, 2, matmul_backward, 0);
    if (!out || out->size == 0) return out;
    if (plan.k == 0) {
        memset(out->data, 0, (size_t)out->size * sizeof(float));
    } else if (folds_into_rows(&plan)) {
        gemm(0, 0, plan.batches * plan.n, plan.m, plan.k, 1.0f, a->data, plan.k, b->data,
             plan.m, 0.0f, out->data, plan.m);
    } else {
        job.plan = &plan;
        job.a = a->data;
        job.b = b->data;
        job.c = out->data;
        parallel_for(plan.batches, tasks_grain(&plan), matmul_task, &job);
    }
    return out;
}

/* ---- backward ------------------------------------------------------------ */

typedef struct {
    const MatmulPlan *plan;
    const float *a, *b, *gout;
    float *grad;
    int of_b;        /* 0: the gradient of a, 1: of b */
    int shared;      /* the operand's matrices serve several output batches */
} MatmulGradJob;

/* Add output batch t's contribution to the operand's gradient matrix. */
static void grad_contribution(const MatmulGradJob *job, int64_t t, float beta)
{
    const MatmulPlan *p = job->plan;
    int64_t ia = batch_matrix(p, p->a_stride, t), ib = batch_matrix(p, p->b_stride, t);
    const float *g = job->gout + t * p->n * p->m;
    if (job->of_b)
        gemm(1, 0, p->k, p->m, p->n, 1.0f, job->a + ia * p->n * p->k, p->k, g, p->m, beta,
             job->grad + ib * p->k * p->m, p->m);
    else
        gemm(0, 1, p->n, p->k, p->m, 1.0f, g, p->m, job->b + ib * p->k * p->m, p->m, beta,
             job->grad + ia * p->n * p->k, p->k);
}

/* Tasks are output batches (each operand matrix used once) or operand
   matrices (each sums, in batch order, the batches that used it). */
static void matmul_grad_task(void *ctx, int64_t begin, int64_t end)
{
    const MatmulGradJob *job = ctx;
    const MatmulPlan *p = job->plan;
    const int64_t *strides = job->of_b ? p->b_stride : p->a_stride;
    int64_t j, t;
    for (j = begin; j < end; j++) {
        if (!job->shared) {
            grad_contribution(job, j, 0.0f);
            continue;
        }
        for (t = 0; t < p->batches; t++)
            if (batch_matrix(p, strides, t) == j) grad_contribution(job, t, 1.0f);
    }
}

static AcTensor *operand_grad(const MatmulPlan *p, const AcTensor *a, const AcTensor *b,
                              const AcTensor *gout, int of_b)
{
    const AcTensor *like = of_b ? b : a;
    AcTensor *grad = tensor_alloc("matmul", like->shape, like->ndim);
    MatmulGradJob job;
    int64_t matrices = of_b ? p->b_matrices : p->a_matrices;
    if (!grad || grad->size == 0) return grad;
    job.plan = p;
    job.a = a->data;
    job.b = b->data;
    job.gout = gout->data;
    job.grad = grad->data;
    job.of_b = of_b;
    job.shared = matrices != p->batches;
    /* accumulating, or nothing to accumulate (an empty output): start from zero */
    if (job.shared || p->n * p->m == 0)
        memset(grad->data, 0, (size_t)grad->size * sizeof(float));
    if (p->n * p->m == 0 || p->batches == 0) return grad;
    if (folds_into_rows(p) && !of_b)
        gemm(0, 1, p->batches * p->n, p->k, p->m, 1.0f, gout->data, p->m, b->data, p->m, 0.0f,
             grad->data, p->k);
    else if (folds_into_rows(p))
        gemm(1, 0, p->k, p->m, p->batches * p->n, 1.0f, a->data, p->k, gout->data, p->m, 0.0f,
             grad->data, p->m);
    else
        parallel_for(job.shared ? matrices : p->batches, tasks_grain(p), matmul_grad_task, &job);
    return grad;
}

static int matmul_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const AcTensor *a = node->inputs[0], *b = node->inputs[1];
    MatmulPlan plan;
    int i;
    if (matmul_plan(a, b, &plan)) return ac_last_error_code();
    for (i = 0; i < 2; i++) {
        if (!input_needs_grad(node, i)) continue;
        gin[i] = operand_grad(&plan, a, b, gout, i);
        if (!gin[i]) return ac_last_error_code();
    }
    return AC_OK;
}
