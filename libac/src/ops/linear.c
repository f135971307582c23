/*
 * linear.c - the fused linear layer y = x W^T + b (PyTorch's F.linear) and
 * its backward: one node instead of a graph of small ops.
 *
 * x (..., in) is read as a (rows, in) matrix. The math, the bias fused into
 * the product, runs in the device's kernels (kernels/cpu/linear.c on the CPU).
 *
 * Not here: the GEMM itself (kernels/gemm.c), layers as modules (Python).
 */
#include "graph.h"
#include "op_table.h"
#include "kernels/kernels.h"

#include <string.h>

/* The rows of x seen as a matrix: the product of every dim but the last. */
static int64_t linear_rows(const AcTensor *x)
{
    int64_t rows = 1;
    int i;
    for (i = 0; i < x->ndim - 1; i++) rows *= x->shape[i];
    return rows;
}

static int linear_check(const AcTensor *x, const AcTensor *weight, const AcTensor *bias)
{
    const char *op = "linear";
    if (tensor_check(op, x, "input") || tensor_check(op, weight, "weight")) return -1;
    if (weight->ndim != 2)
        return error_set(AC_ERR_SHAPE, "%s: weight %s must be (out_features, in_features)", op,
                         tensor_shape_str(weight));
    if (x->ndim < 1)
        return error_set(AC_ERR_SHAPE, "%s: input %s must have at least 1 dim (..., in_features)",
                         op, tensor_shape_str(x));
    if (x->shape[x->ndim - 1] != weight->shape[1])
        return error_set(AC_ERR_SHAPE, "%s: input %s has %lld features, weight %s expects %lld", op,
                         tensor_shape_str(x), (long long)x->shape[x->ndim - 1],
                         tensor_shape_str(weight), (long long)weight->shape[1]);
    if (bias && (bias->ndim != 1 || bias->shape[0] != weight->shape[0]))
        return error_set(AC_ERR_SHAPE, "%s: bias %s does not fit weight %s (expected (%lld,))", op,
                         tensor_shape_str(bias), tensor_shape_str(weight),
                         (long long)weight->shape[0]);
    return AC_OK;
}

/* ---- forward ------------------------------------------------------------- */

static int linear_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin);

int linear_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[3] = ac_linear(t[0], t[1], t[2]));
}

AcTensor *ac_linear(const AcTensor *x, const AcTensor *weight, const AcTensor *bias)
{
    if (ops_observed) return graph_op("linear", linear_replay, 3, (const AcTensor *[]){x, weight, bias}, NULL, 0);
    const AcTensor *inputs[3];
    const AcKernels *k;
    int64_t shape[AC_MAX_DIMS];
    AcTensor *out;
    if (linear_check(x, weight, bias)) return NULL;
    k = kernels_for(x);
    if (!k->linear) {
        kernel_missing("linear", x);
        return NULL;
    }
    memcpy(shape, x->shape, (size_t)x->ndim * sizeof(int64_t));
    shape[x->ndim - 1] = weight->shape[0];
    inputs[0] = x;
    inputs[1] = weight;
    inputs[2] = bias;
    out = op_output("linear", shape, x->ndim, inputs, bias ? 3 : 2, linear_backward, 0);
    if (out && k->linear(linear_rows(x), weight->shape[1], weight->shape[0], x->data, weight->data,
                         bias ? bias->data : NULL, out->data)) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

/* ---- backward ------------------------------------------------------------ */

static int linear_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const AcTensor *x = node->inputs[0], *weight = node->inputs[1];
    const AcKernels *k = kernels_for(gout);
    int status = k->linear_backward ? AC_OK : kernel_missing("linear", gout);
    float *dx = input_grad_data(node, 0, gin, &status), *dw = input_grad_data(node, 1, gin, &status);
    float *db = input_grad_data(node, 2, gin, &status);
    if (status) return status;
    return k->linear_backward(linear_rows(x), weight->shape[1], weight->shape[0], x->data,
                              weight->data, gout->data, dx, dw, db);
}
