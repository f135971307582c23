/*
 * cpu/linear.c - the CPU's kernels for linear.c: y = x W^T + b and its
 * backward, on top of gemm.
 *
 * Forward is one NT gemm that adds the bias as it stores each tile, so the
 * bias costs no pass of its own. Backward is two gemm calls with transpose
 * flags, dx = g W (NN) and dW = g^T x (TN), plus column sums of g for db. A
 * layer with more outputs than inputs (a vocabulary projection) takes
 * dW^T = x^T g instead, stored transposed straight into dW: the GEMM runs
 * faster with the long side as its columns, and it sums g's columns (db)
 * as it packs them.
 */
#include "kernels/cpu/cpu_kernels.h"

#include <string.h>

#define LINEAR_GRAIN 16384   /* elements of g summed per parallel task, at least */

int cpu_linear(int64_t rows, int64_t in, int64_t out, const float *x, const float *w,
               const float *bias, float *y)
{
    gemm_bias(0, 1, rows, out, in, 1.0f, x, in, w, in, bias, y, out);
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

int cpu_linear_backward(int64_t rows, int64_t in, int64_t out, const float *x, const float *w,
                        const float *gy, float *dx, float *dw, float *db)
{
    const int wide = dw && out > in;   /* dW^T = x^T g, and db from the pass that packs g */
    if (dx && out == 0)
        memset(dx, 0, (size_t)(rows * in) * sizeof(float));
    else if (dx && rows * in > 0)
        gemm(0, 0, rows, in, out, 1.0f, gy, out, w, in, 0.0f, dx, in);
    if (wide)
        gemm_transposed_c(1, 0, in, out, rows, 1.0f, x, in, gy, out, 0.0f, dw, in, db);
    else if (dw && rows == 0)
        memset(dw, 0, (size_t)(out * in) * sizeof(float));
    else if (dw && out * in > 0)
        gemm(1, 0, out, in, rows, 1.0f, gy, out, x, in, 0.0f, dw, in);
    if (db && !wide) bias_grad(gy, rows, out, db);
    return AC_OK;
}
