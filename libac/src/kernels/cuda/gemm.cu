/*
 * cuda/gemm.cu - libac's own SGEMM on the GPU (no cuBLAS), and the kernels of
 * matmul.c and linear.c on top of it.
 *
 * cuda_gemm: C = alpha op(A) op(B) + beta C (+ bias per column), row-major,
 * transpose flags as the CPU's gemm, so backward never copies a transposed
 * matrix. Tiles of 64 x 64 outputs per block of 256 threads, each thread 4 x 4
 * outputs from 16-deep panels of A and B staged in shared memory; the edges
 * are bounds-checked. beta == 0 never reads C. linear's bias is added in the
 * same pass (the epilogue), not in a second kernel.
 *
 * With ac_cuda_set_allow_tf32(1) (PyTorch's allow_tf32, off by default) the
 * products run on the tensor cores in TF32 (10-bit mantissa inputs, float32
 * sums): each warp of a 4-warp block makes a 16 x 16 tile of a 32 x 32 block
 * tile with WMMA m16n16k8, from 8-deep panels in shared memory; the epilogue
 * is the same.
 */
#include "kernels/cuda/cuda_kernels.h"

#include <mma.h>

#define TILE 64
#define DEPTH 16

__global__ void __launch_bounds__(256) sgemm_kernel(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                                                    const float *A, int64_t lda, const float *B, int64_t ldb,
                                                    float beta, float *C, int64_t ldc, const float *bias)
{
    __shared__ float As[DEPTH][TILE + 1];
    __shared__ float Bs[DEPTH][TILE + 1];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int64_t row0 = (int64_t)blockIdx.y * TILE, col0 = (int64_t)blockIdx.x * TILE;
    float acc[4][4] = {{0.0f}};
    for (int64_t k0 = 0; k0 < k; k0 += DEPTH) {
        for (int l = threadIdx.x; l < TILE * DEPTH; l += 256) {
            /* consecutive threads walk A's contiguous dim: k when A is not transposed */
            const int i = ta ? l % TILE : l / DEPTH, kk = ta ? l / TILE : l % DEPTH;
            const int64_t r = row0 + i, c = k0 + kk;
            As[kk][i] = r < m && c < k ? (ta ? A[c * lda + r] : A[r * lda + c]) : 0.0f;
        }
        for (int l = threadIdx.x; l < TILE * DEPTH; l += 256) {
            const int j = tb ? l / DEPTH : l % TILE, kk = tb ? l % DEPTH : l / TILE;
            const int64_t r = k0 + kk, c = col0 + j;
            Bs[kk][j] = r < k && c < n ? (tb ? B[c * ldb + r] : B[r * ldb + c]) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < DEPTH; kk++) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++) a[i] = As[kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < 4; j++) b[j] = Bs[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; i++) {
        const int64_t r = row0 + ty + 16 * i;
        if (r >= m) continue;
        for (int j = 0; j < 4; j++) {
            const int64_t c = col0 + tx + 16 * j;
            if (c >= n) continue;
            float v = alpha * acc[i][j];
            if (beta != 0.0f) v += beta * C[r * ldc + c];
            if (bias) v += bias[c];
            C[r * ldc + c] = v;
        }
    }
}

#define TC_TILE 32
#define TC_DEPTH 8

__global__ void __launch_bounds__(128) tf32_gemm_kernel(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                                                        const float *A, int64_t lda, const float *B, int64_t ldb,
                                                        float beta, float *C, int64_t ldc, const float *bias)
{
    using namespace nvcuda;
    __shared__ __align__(32) float As[TC_TILE][TC_DEPTH];     /* row-major 32 x 8 */
    __shared__ __align__(32) float Bs[TC_DEPTH][TC_TILE];     /* row-major 8 x 32 */
    __shared__ __align__(32) float Cs[TC_TILE][TC_TILE];
    const int warp = threadIdx.x / 32, wr = (warp / 2) * 16, wc = (warp % 2) * 16;
    const int64_t row0 = (int64_t)blockIdx.y * TC_TILE, col0 = (int64_t)blockIdx.x * TC_TILE;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int64_t k0 = 0; k0 < k; k0 += TC_DEPTH) {
        for (int l = threadIdx.x; l < TC_TILE * TC_DEPTH; l += 128) {
            const int i = l / TC_DEPTH, kk = l % TC_DEPTH;
            const int64_t r = row0 + i, c = k0 + kk;
            As[i][kk] = wmma::__float_to_tf32(r < m && c < k ? (ta ? A[c * lda + r] : A[r * lda + c]) : 0.0f);
            const int kb = l / TC_TILE, j = l % TC_TILE;
            const int64_t rb = k0 + kb, cb = col0 + j;
            Bs[kb][j] = wmma::__float_to_tf32(rb < k && cb < n ? (tb ? B[cb * ldb + rb] : B[rb * ldb + cb]) : 0.0f);
        }
        __syncthreads();
        wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b;
        wmma::load_matrix_sync(a, &As[wr][0], TC_DEPTH);
        wmma::load_matrix_sync(b, &Bs[0][wc], TC_TILE);
        wmma::mma_sync(acc, a, b, acc);
        __syncthreads();
    }
    wmma::store_matrix_sync(&Cs[wr][wc], acc, TC_TILE, wmma::mem_row_major);
    __syncthreads();
    for (int l = threadIdx.x; l < TC_TILE * TC_TILE; l += 128) {
        const int64_t r = row0 + l / TC_TILE, c = col0 + l % TC_TILE;
        if (r >= m || c >= n) continue;
        float v = alpha * Cs[l / TC_TILE][l % TC_TILE];
        if (beta != 0.0f) v += beta * C[r * ldc + c];
        if (bias) v += bias[c];
        C[r * ldc + c] = v;
    }
}

static int gemm_run(cudaStream_t s, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                    int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc,
                    const float *bias)
{
    const int tf32 = ac_cuda_allow_tf32();
    const int64_t tile = tf32 ? TC_TILE : TILE;
    dim3 grid((unsigned)((n + tile - 1) / tile), (unsigned)((m + tile - 1) / tile));
    if (m == 0 || n == 0) return AC_OK;
    if ((m + tile - 1) / tile > 65535)
        return error_set(AC_ERR_SHAPE, "gemm: %lld rows are more than the CUDA kernel takes", (long long)m);
    if (tf32)
        tf32_gemm_kernel<<<grid, 128, 0, s>>>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias);
    else
        sgemm_kernel<<<grid, 256, 0, s>>>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias);
    return cuda_check_launch("gemm");
}

/* ---- matmul.c --------------------------------------------------------------- */

/* Every output batch uses its own matrix of a and one shared matrix of b. */
static int folds_into_rows(const MatmulShape *s) { return s->b_matrices == 1 && s->a_matrices == s->batches; }

int cuda_matmul(const MatmulShape *s, const float *a, const float *b, float *out)
{
    cudaStream_t st = current_stream();
    int rc = AC_OK;
    if (!st) return AC_ERR_DEVICE;
    if (s->batches * s->n * s->m == 0) return AC_OK;
    if (folds_into_rows(s))
        return gemm_run(st, 0, 0, s->batches * s->n, s->m, s->k, 1.0f, a, s->k, b, s->m, 0.0f, out, s->m, NULL);
    for (int64_t t = 0; t < s->batches && !rc; t++)
        rc = gemm_run(st, 0, 0, s->n, s->m, s->k, 1.0f, a + matmul_batch_matrix(s, s->a_stride, t) * s->n * s->k,
                      s->k, b + matmul_batch_matrix(s, s->b_stride, t) * s->k * s->m, s->m, 0.0f,
                      out + t * s->n * s->m, s->m, NULL);
    return rc;
}

int cuda_matmul_grad(const MatmulShape *s, const float *a, const float *b, const float *gout, float *grad,
                     int of_b)
{
    cudaStream_t st = current_stream();
    const int64_t matrices = of_b ? s->b_matrices : s->a_matrices;
    const int64_t size = matrices * (of_b ? s->k * s->m : s->n * s->k);
    const int shared = matrices != s->batches;
    int rc = AC_OK;
    if (!st) return AC_ERR_DEVICE;
    if (size == 0) return AC_OK;
    /* accumulating, or nothing to accumulate (an empty output): start from zero */
    if ((shared || s->n * s->m == 0) && cudaMemsetAsync(grad, 0, (size_t)size * sizeof(float), st) != cudaSuccess)
        return cuda_check_launch("matmul_backward");
    if (s->n * s->m == 0 || s->batches == 0) return AC_OK;
    if (folds_into_rows(s) && !of_b)
        return gemm_run(st, 0, 1, s->batches * s->n, s->k, s->m, 1.0f, gout, s->m, b, s->m, 0.0f, grad, s->k, NULL);
    if (folds_into_rows(s))
        return gemm_run(st, 1, 0, s->k, s->m, s->batches * s->n, 1.0f, a, s->k, gout, s->m, 0.0f, grad, s->m, NULL);
    /* batch order: a shared matrix sums its batches as the CPU does */
    for (int64_t t = 0; t < s->batches && !rc; t++) {
        const int64_t ia = matmul_batch_matrix(s, s->a_stride, t), ib = matmul_batch_matrix(s, s->b_stride, t);
        const float *g = gout + t * s->n * s->m, beta = shared ? 1.0f : 0.0f;
        if (of_b)
            rc = gemm_run(st, 1, 0, s->k, s->m, s->n, 1.0f, a + ia * s->n * s->k, s->k, g, s->m, beta,
                          grad + ib * s->k * s->m, s->m, NULL);
        else
            rc = gemm_run(st, 0, 1, s->n, s->k, s->m, 1.0f, g, s->m, b + ib * s->k * s->m, s->m, beta,
                          grad + ia * s->n * s->k, s->k, NULL);
    }
    return rc;
}

/* ---- linear.c --------------------------------------------------------------- */

int cuda_linear(int64_t rows, int64_t in, int64_t out, const float *x, const float *w, const float *bias, float *y)
{
    cudaStream_t s = current_stream();
    if (!s) return AC_ERR_DEVICE;
    return gemm_run(s, 0, 1, rows, out, in, 1.0f, x, in, w, in, 0.0f, y, out, bias);
}

/* db[c] = the sum of g's column c over rows, in row order (one thread a column). */
__global__ void column_sum_kernel(const float *g, int64_t rows, int64_t cols, float *db)
{
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < cols; c += (int64_t)gridDim.x * blockDim.x) {
        float sum = 0.0f;
        for (int64_t r = 0; r < rows; r++) sum += g[r * cols + c];
        db[c] = sum;
    }
}

int cuda_linear_backward(int64_t rows, int64_t in, int64_t out, const float *x, const float *w, const float *gy,
                         float *dx, float *dw, float *db)
{
    cudaStream_t s = current_stream();
    int rc = AC_OK;
    if (!s) return AC_ERR_DEVICE;
    if (dx) rc = gemm_run(s, 0, 0, rows, in, out, 1.0f, gy, out, w, in, 0.0f, dx, in, NULL);
    if (dw && !rc) rc = gemm_run(s, 1, 0, out, in, rows, 1.0f, gy, out, x, in, 0.0f, dw, in, NULL);
    if (db && !rc && out > 0) {
        column_sum_kernel<<<cuda_blocks(out), CUDA_THREADS, 0, s>>>(gy, rows, out, db);
        rc = cuda_check_launch("linear_backward");
    }
    return rc;
}
