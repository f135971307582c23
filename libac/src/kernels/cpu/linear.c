/*
 * cpu/linear.c - the CPU's kernels for linear.c: y = x W^T + b and its
 * backward, on top of gemm.
 *
 * Forward is one NT gemm into an output that already holds the bias in every
 * row (beta = 1), so the bias costs no second pass. Backward is two gemm
 * calls with transpose flags, dx = g W (NN) and dW = g^T x (TN), plus column
 * sums of g for db. A layer with more outputs than inputs (a vocabulary
 * projection) takes dW^T = [x | 1]^T g instead: the GEMM runs faster with the
 * long side as its columns, and the row of ones gives db in the same product;
 * dW is then transposed out of it.
 */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/transpose.h"

#include <string.h>

#define LINEAR_GRAIN 16384   /* elements of g summed per parallel task, at least */

int cpu_linear(int64_t rows, int64_t in, int64_t out, const float *x, const float *w,
               const float *bias, float *y)
{
    int64_t r;
    if (rows * out == 0) return AC_OK;
    if (bias)
        for (r = 0; r < rows; r++) memcpy(y + r * out, bias, (size_t)out * sizeof(float));
    else if (in == 0)
        memset(y, 0, (size_t)(rows * out) * sizeof(float));
    if (in > 0) gemm(0, 1, rows, out, in, 1.0f, x, in, w, in, bias ? 1.0f : 0.0f, y, out);
    return AC_OK;
}

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

static void bias_grad(const float *gy, int64_t rows, int64_t cols, float *db)
{
    ColumnSumJob job;
    int64_t grain;
    if (cols == 0) return;
    job.g = gy;
    job.db = db;
    job.rows = rows;
    job.cols = cols;
    grain = rows >= LINEAR_GRAIN ? 1 : LINEAR_GRAIN / (rows > 0 ? rows : 1);
    parallel_for(cols, grain, column_sum_task, &job);
}

/*
 * dW (and db, when not NULL) of a layer with out > in: [dW^T; db] = [x | 1]^T g
 * into scratch, then dW transposed out of it. Fails only for want of memory.
 */
static int wide_weight_grad(int64_t rows, int64_t in, int64_t out, const float *x,
                            const float *gy, float *dw, float *db)
{
    const int64_t cols = in + (db != NULL);
    const size_t xe_bytes = (size_t)(rows * cols) * sizeof(float);
    const size_t dwt_bytes = (size_t)(cols * out) * sizeof(float);
    float *xe = scratch_alloc(xe_bytes), *dwt = xe ? scratch_alloc(dwt_bytes) : NULL;
    int64_t r;
    if (!dwt) {
        if (xe) scratch_free(xe, xe_bytes);
        return AC_ERR_MEMORY;
    }
    for (r = 0; r < rows; r++) {
        memcpy(xe + r * cols, x + r * in, (size_t)in * sizeof(float));
        if (db) xe[r * cols + in] = 1.0f;
    }
    gemm(1, 0, cols, out, rows, 1.0f, xe, cols, gy, out, 0.0f, dwt, out);
    matrix_transpose(dw, in, dwt, out, in, out, 0);
    if (db) memcpy(db, dwt + in * out, (size_t)out * sizeof(float));
    scratch_free(dwt, dwt_bytes);
    scratch_free(xe, xe_bytes);
    return AC_OK;
}

int cpu_linear_backward(int64_t rows, int64_t in, int64_t out, const float *x, const float *w,
                        const float *gy, float *dx, float *dw, float *db)
{
    if (dx && out == 0)
        memset(dx, 0, (size_t)(rows * in) * sizeof(float));
    else if (dx && rows * in > 0)
        gemm(0, 0, rows, in, out, 1.0f, gy, out, w, in, 0.0f, dx, in);
    if (dw && rows > 0 && in > 0 && out > in)
        return wide_weight_grad(rows, in, out, x, gy, dw, db);
    if (dw && rows == 0)
        memset(dw, 0, (size_t)(out * in) * sizeof(float));
    else if (dw && out * in > 0)
        gemm(1, 0, out, in, rows, 1.0f, gy, out, x, in, 0.0f, dw, in);
    if (db) bias_grad(gy, rows, out, db);
    return AC_OK;
}
