/*
 * linear.c - the fused linear layer y = x W^T + b (PyTorch's F.linear) and
 * its backward.
 *
 * x (..., in) is read as a (rows, in) matrix. Forward is one NT gemm into an
 * output that already holds the bias in every row (beta = 1), so the bias
 * costs no second pass. Backward is two gemm calls with transpose flags,
 * dx = g W (NN) and dW = g^T x (TN), plus column sums of g for db: no
 * transposed copies and no graph of small ops.
 *
 * Not here: the GEMM itself (kernels/gemm.c), layers as modules (Python).
 */
#include "graph.h"

#include <string.h>

#define LINEAR_GRAIN 16384   /* elements of g summed per parallel task, at least */

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
    int64_t shape[AC_MAX_DIMS], rows, in, out_features, r;
    AcTensor *out;
    if (linear_check(x, weight, bias)) return NULL;
    rows = linear_rows(x);
    in = weight->shape[1];
    out_features = weight->shape[0];
    memcpy(shape, x->shape, (size_t)x->ndim * sizeof(int64_t));
    shape[x->ndim - 1] = out_features;
    inputs[0] = x;
    inputs[1] = weight;
    inputs[2] = bias;
    out = op_output("linear", shape, x->ndim, inputs, bias ? 3 : 2, linear_backward, 0);
    if (!out || out->size == 0) return out;
    if (bias)
        for (r = 0; r < rows; r++)
            memcpy(out->data + r * out_features, bias->data, (size_t)out_features * sizeof(float));
    else if (in == 0)
        memset(out->data, 0, (size_t)out->size * sizeof(float));
    if (in > 0)
        gemm(0, 1, rows, out_features, in, 1.0f, x->data, in, weight->data, in,
             bias ? 1.0f : 0.0f, out->data, out_features);
    return out;
}

/* ---- backward ------------------------------------------------------------ */

typedef struct {
    const float *g;
    float *db;
    int64_t rows, cols;
} ColumnSumJob;

/* Each task owns a band of columns and adds the rows in order: the sums do
   not depend on how the columns were shared out. */
static void column_sum_task(void *ctx, int64_t begin, int64_t end)
{
    const ColumnSumJob *job = ctx;
    int64_t r, c;
    for (c = begin; c < end; c++) job->db[c] = 0.0f;
    for (r = 0; r < job->rows; r++) {
        const float *row = job->g + r * job->cols;
        for (c = begin; c < end; c++) job->db[c] += row[c];
    }
}

static AcTensor *bias_grad(const AcTensor *gout, const AcTensor *bias, int64_t rows)
{
    ColumnSumJob job;
    int64_t grain;
    AcTensor *db = tensor_alloc_like("linear", bias);
    if (!db || db->size == 0) return db;
    job.g = gout->data;
    job.db = db->data;
    job.rows = rows;
    job.cols = db->size;
    grain = rows >= LINEAR_GRAIN ? 1 : LINEAR_GRAIN / (rows > 0 ? rows : 1);
    parallel_for(job.cols, grain, column_sum_task, &job);
    return db;
}

static int linear_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const AcTensor *x = node->inputs[0], *weight = node->inputs[1];
    const int64_t rows = linear_rows(x), in = weight->shape[1], out_features = weight->shape[0];
    if (input_needs_grad(node, 0)) {
        gin[0] = tensor_alloc_like("linear", x);
        if (!gin[0]) return ac_last_error_code();
        if (out_features == 0)
            memset(gin[0]->data, 0, (size_t)gin[0]->size * sizeof(float));
        else if (gin[0]->size > 0)
            gemm(0, 0, rows, in, out_features, 1.0f, gout->data, out_features, weight->data, in,
                 0.0f, gin[0]->data, in);
    }
    if (input_needs_grad(node, 1)) {
        gin[1] = tensor_alloc_like("linear", weight);
        if (!gin[1]) return ac_last_error_code();
        if (rows == 0)
            memset(gin[1]->data, 0, (size_t)gin[1]->size * sizeof(float));
        else if (gin[1]->size > 0)
            gemm(1, 0, out_features, in, rows, 1.0f, gout->data, out_features, x->data, in, 0.0f,
                 gin[1]->data, in);
    }
    if (input_needs_grad(node, 2)) {
        gin[2] = bias_grad(gout, node->inputs[2], rows);
        if (!gin[2]) return ac_last_error_code();
    }
    return AC_OK;
}
