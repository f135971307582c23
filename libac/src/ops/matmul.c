/*
 * matmul.c - PyTorch's matmul (dot, matrix-vector, matrix-matrix, and batched
 * with broadcast batch dims) and its backward: the shapes, the broadcast of
 * the batch dims, and the wiring; the products run in the device's kernels
 * (kernels/cpu/matmul.c on the CPU).
 *
 * Not here: the GEMM kernels themselves (kernels/).
 */
#include "graph.h"
#include "op_table.h"
#include "kernels/kernels.h"

#include <string.h>

/* The product as a batch of (n x k) @ (k x m); 1-D operands are (1 x k) or (k x 1). */
typedef struct {
    MatmulShape s;
    int a_vector, b_vector;
    int64_t out_shape[AC_MAX_DIMS];
    int out_ndim;
} MatmulPlan;

/* Strides, in matrices, of an operand with `nd` batch dims, seen from the batch shape. */
static int64_t batch_strides(const int64_t *shape, int nd, const MatmulShape *s,
                             int64_t *strides)
{
    int64_t stride = 1;
    int i;
    for (i = s->batch_ndim - 1; i >= 0; i--) {
        int own = i - (s->batch_ndim - nd);
        int64_t d = own >= 0 ? shape[own] : 1;
        strides[i] = own < 0 || (d == 1 && s->batch_shape[i] != 1) ? 0 : stride;
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
    plan->s.n = plan->a_vector ? 1 : a->shape[a->ndim - 2];
    plan->s.k = a->shape[a->ndim - 1];
    kb = plan->b_vector ? b->shape[0] : b->shape[b->ndim - 2];
    plan->s.m = plan->b_vector ? 1 : b->shape[b->ndim - 1];
    if (plan->s.k != kb)
        return error_set(AC_ERR_SHAPE, "matmul: shapes %s and %s are not aligned (%lld != %lld)",
                         tensor_shape_str(a), tensor_shape_str(b), (long long)plan->s.k,
                         (long long)kb);
    plan->s.batch_ndim = a_batch > b_batch ? a_batch : b_batch;
    plan->s.batches = 1;
    for (i = 0; i < plan->s.batch_ndim; i++) {
        int ia = i - (plan->s.batch_ndim - a_batch), ib = i - (plan->s.batch_ndim - b_batch);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return error_set(AC_ERR_SHAPE,
                             "matmul: batch dims of shapes %s and %s cannot be broadcast (%lld vs %lld)",
                             tensor_shape_str(a), tensor_shape_str(b), (long long)da, (long long)db);
        plan->s.batch_shape[i] = da == 1 ? db : da;
        plan->s.batches *= plan->s.batch_shape[i];
    }
    plan->s.a_matrices = batch_strides(a->shape, a_batch, &plan->s, plan->s.a_stride);
    plan->s.b_matrices = batch_strides(b->shape, b_batch, &plan->s, plan->s.b_stride);
    memcpy(plan->out_shape, plan->s.batch_shape, sizeof plan->s.batch_shape);
    plan->out_ndim = plan->s.batch_ndim;
    if (!plan->a_vector) plan->out_shape[plan->out_ndim++] = plan->s.n;
    if (!plan->b_vector) plan->out_shape[plan->out_ndim++] = plan->s.m;
    return AC_OK;
}

/* ---- forward ------------------------------------------------------------- */

/* a @ b of two int64 (or two uint8) tensors, exact and wrapping, as torch; no
   graph. Mixed dtypes fail, as torch's matmul does. */
static AcTensor *int_matmul(const AcTensor *a, const AcTensor *b)
{
    const AcTensor *inputs[2];
    const AcKernels *k;
    MatmulPlan plan;
    AcTensor *out;
    if (tensor_check_any("matmul", a, "a") || tensor_check_any("matmul", b, "b")) return NULL;
    if (a->dtype != b->dtype)
        return error_null(AC_ERR_DTYPE, "matmul: operands must have one dtype, got %s and %s",
                          ac_dtype_name(a->dtype), ac_dtype_name(b->dtype));
    if (a->dtype != AC_INT64 && a->dtype != AC_UINT8)
        return error_null(AC_ERR_DTYPE, "matmul: %s operands are not supported", ac_dtype_name(a->dtype));
    if (matmul_plan(a, b, &plan)) return NULL;
    k = kernels_for(a);
    if (!k->int_matmul) {
        kernel_missing("matmul", a);
        return NULL;
    }
    inputs[0] = a;
    inputs[1] = b;
    out = op_output_as("matmul", a->dtype, plan.out_shape, plan.out_ndim, inputs, 2, NULL, 0);
    if (out && k->int_matmul(&plan.s, a, b, out)) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
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
    const AcKernels *k;
    MatmulPlan plan;
    AcTensor *out;
    if (a && b && (a->dtype != AC_FLOAT32 || b->dtype != AC_FLOAT32)) return int_matmul(a, b);
    if (tensor_check("matmul", a, "a") || tensor_check("matmul", b, "b")) return NULL;
    if (matmul_plan(a, b, &plan)) return NULL;
    k = kernels_for(a);
    if (!k->matmul) {
        kernel_missing("matmul", a);
        return NULL;
    }
    inputs[0] = a;
    inputs[1] = b;
    out = op_output("matmul", plan.out_shape, plan.out_ndim, inputs, 2, matmul_backward, 0);
    if (out && k->matmul(&plan.s, a->data, b->data, out->data)) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

/* ---- backward ------------------------------------------------------------ */

static int matmul_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const AcTensor *a = node->inputs[0], *b = node->inputs[1];
    const AcKernels *k = kernels_for(gout);
    MatmulPlan plan;
    int i, status;
    if (!k->matmul_grad) return kernel_missing("matmul", gout);
    if (matmul_plan(a, b, &plan)) return ac_last_error_code();
    for (i = 0; i < 2; i++) {
        if (!input_needs_grad(node, i)) continue;
        gin[i] = tensor_alloc_like("matmul", node->inputs[i]);
        if (!gin[i]) return ac_last_error_code();
        status = k->matmul_grad(&plan.s, a->data, b->data, gout->data, gin[i]->data, i);
        if (status) return status;
    }
    return AC_OK;
}
