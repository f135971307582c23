/*
 * cuda/loss.cu - the CUDA kernels for loss.c: the elementwise losses (mse, l1,
 * smooth_l1, binary cross entropy, with logits) and cross entropy fused with its
 * softmax (log-sum-exp per row, label smoothing, the saved probabilities and
 * class ids), each with its backward, in the CPU kernels' formulas.
 *
 * One thread per element (row) computes its term; one block then sums the
 * terms in a fixed order (in double, as the CPU does), so the result is the
 * same from run to run. A target that is not a class index, or a binary cross
 * entropy input outside [0, 1], is flagged on the device and read back, which
 * waits for the device once per call: the error must name the position, as on
 * the CPU.
 */
#include "kernels/cuda/cuda_kernels.h"

__global__ void cross_entropy_rows(const float *logits, const void *target, int target_is_int, int64_t rows,
                                   int64_t classes, float smoothing, float *loss, int64_t *ids, float *probs,
                                   unsigned long long *first_bad)
{
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows; r += (int64_t)gridDim.x * blockDim.x) {
        const float *x = logits + r * classes;
        const double t = target_is_int ? (double)((const int64_t *)target)[r] : (double)((const float *)target)[r];
        float max = x[0], sum = 0.0f, log_sum, value, shifted_sum = 0.0f;
        int64_t c, id;
        if (!(t >= 0.0 && t < (double)classes && t == floor(t))) {
            atomicMin(first_bad, (unsigned long long)r);
            loss[r] = 0.0f;
            continue;
        }
        id = (int64_t)t;
        for (c = 1; c < classes; c++) max = fmaxf(max, x[c]);
        for (c = 0; c < classes; c++) sum += expf(x[c] - max);
        log_sum = logf(sum);
        value = (max - x[id]) + log_sum;
        if (smoothing > 0.0f) {
            for (c = 0; c < classes; c++) shifted_sum += x[c] - max;
            value = (1.0f - smoothing) * value + smoothing * (log_sum - shifted_sum / (float)classes);
        }
        if (probs)
            for (c = 0; c < classes; c++) probs[r * classes + c] = expf(x[c] - max) / sum;
        if (ids) ids[r] = id;
        loss[r] = value;
    }
}

/* out[0] = the rows' sum (times scale), in double, one block, a fixed order. */
__global__ void sum_rows(const float *loss, int64_t rows, double scale, float *out)
{
    __shared__ double part[CUDA_THREADS];
    double sum = 0.0;
    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) sum += loss[r];
    part[threadIdx.x] = sum;
    __syncthreads();
    for (int half = CUDA_THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[0] = (float)(part[0] * scale);
}

/* The first flagged position (~0: none), read back from the device. */
static int read_flag(const unsigned long long *flag, unsigned long long *bad, cudaStream_t s, const char *op)
{
    if (cudaMemcpyAsync(bad, flag, sizeof *bad, cudaMemcpyDeviceToHost, s) != cudaSuccess ||
        cudaStreamSynchronize(s) != cudaSuccess)
        return cuda_check_launch(op);
    return AC_OK;
}

/* ---- the elementwise losses ------------------------------------------------- */

enum { LOSS_MSE, LOSS_L1, LOSS_SMOOTH_L1, LOSS_BCE, LOSS_BCE_LOGITS };

template <int KIND>
__device__ static inline float loss_term(float x, float t, float beta)
{
    const float d = x - t;
    if (KIND == LOSS_MSE) return d * d;
    if (KIND == LOSS_L1) return fabsf(d);
    if (KIND == LOSS_SMOOTH_L1) return fabsf(d) < beta ? 0.5f * d * d / beta : fabsf(d) - 0.5f * beta;
    if (KIND == LOSS_BCE) {   /* PyTorch clamps each log at -100 */
        const float log_p = fmaxf(logf(x), -100.0f), log_q = fmaxf(log1pf(-x), -100.0f);
        return (t - 1.0f) * log_q - t * log_p;
    }
    return (x > 0.0f ? x : 0.0f) - x * t + log1pf(expf(-fabsf(x)));   /* with logits: never overflows */
}

template <int KIND>
__global__ void loss_terms(const float *x, const float *t, int64_t n, float beta, float *terms,
                           unsigned long long *first_bad)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        if (KIND == LOSS_BCE && !(x[i] >= 0.0f && x[i] <= 1.0f)) atomicMin(first_bad, (unsigned long long)i);
        terms[i] = loss_term<KIND>(x[i], t[i], beta);
    }
}

template <int KIND>
static int elementwise_loss(const AcTensor *input, const AcTensor *target, AcTensor *out, int reduction, float beta,
                            const char *op)
{
    cudaStream_t s = current_stream();
    const int64_t n = input->size;
    const int none = reduction == AC_REDUCTION_NONE;
    unsigned long long *flag, bad = ~0ull;
    float *terms;
    char *scratch;
    if (!s) return AC_ERR_DEVICE;
    if (n == 0) return none ? AC_OK : cuda_fill(out, reduction == AC_REDUCTION_MEAN ? NAN : 0.0);
    if (!(scratch = (char *)cuda_scratch(sizeof bad + (none ? 0 : (size_t)n * sizeof(float)))))
        return ac_last_error_code();
    flag = (unsigned long long *)(void *)scratch;
    terms = none ? out->data : (float *)(void *)(scratch + sizeof bad);
    if (KIND == LOSS_BCE) cudaMemcpyAsync(flag, &bad, sizeof bad, cudaMemcpyHostToDevice, s);
    loss_terms<KIND><<<cuda_blocks(n), CUDA_THREADS, 0, s>>>(input->data, target->data, n, beta, terms, flag);
    if (!none)
        sum_rows<<<1, CUDA_THREADS, 0, s>>>(terms, n, reduction == AC_REDUCTION_MEAN ? 1.0 / (double)n : 1.0, out->data);
    if (KIND == LOSS_BCE) {
        if (read_flag(flag, &bad, s, op)) return ac_last_error_code();
        if (bad != ~0ull) {
            float v = 0.0f;
            cudaMemcpy(&v, input->data + bad, sizeof v, cudaMemcpyDeviceToHost);
            return error_set(AC_ERR_ARG, "%s: input %g at position %llu of %s is not a probability in [0, 1]", op,
                             (double)v, bad, tensor_shape_str(input));
        }
    }
    return cuda_check_launch(op);
}

/* d loss / d x and d loss / d t of one element, as the CPU's loss_grad. */
template <int KIND>
__global__ void loss_grads(const float *x, const float *t, const float *gout, int64_t g_step, float scale, int64_t n,
                           float beta, float *gx, float *gt)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float g = gout[i * g_step] * scale, xi = x[i], ti = t[i], d = xi - ti;
        float dx, dt;
        if (KIND == LOSS_MSE) {
            dx = 2.0f * d * g;
            dt = -dx;
        } else if (KIND == LOSS_L1) {
            dx = d > 0.0f ? g : d < 0.0f ? -g : 0.0f;
            dt = -dx;
        } else if (KIND == LOSS_SMOOTH_L1) {
            dx = fabsf(d) < beta ? g * d / beta : d > 0.0f ? g : d < 0.0f ? -g : 0.0f;
            dt = -dx;
        } else if (KIND == LOSS_BCE) {
            const float denom = (1.0f - xi) * xi;
            dx = g * (xi - ti) / (denom > 1e-12f ? denom : 1e-12f);
            dt = -g * (logf(xi) - log1pf(-xi));
        } else {
            const float e = expf(-fabsf(xi)), sig = (xi >= 0.0f ? 1.0f : e) / (1.0f + e);
            dx = g * (sig - ti);
            dt = -g * xi;
        }
        if (gx) gx[i] = dx;
        if (gt) gt[i] = dt;
    }
}

template <int KIND>
static int elementwise_loss_backward(const AcTensor *input, const AcTensor *target, const AcTensor *gout,
                                     AcTensor *gx, AcTensor *gt, int reduction, float beta, const char *op)
{
    cudaStream_t s = current_stream();
    const int64_t n = input->size;
    if (!s) return AC_ERR_DEVICE;
    if (n == 0) return AC_OK;
    loss_grads<KIND><<<cuda_blocks(n), CUDA_THREADS, 0, s>>>(
        input->data, target->data, gout->data, reduction == AC_REDUCTION_NONE ? 1 : 0,
        reduction == AC_REDUCTION_MEAN ? 1.0f / (float)n : 1.0f, n, beta, gx ? gx->data : NULL, gt ? gt->data : NULL);
    return cuda_check_launch(op);
}

#define LOSS_ENTRIES(name, kind)                                                                                    \
    int cuda_##name(const AcTensor *input, const AcTensor *target, AcTensor *out, int reduction, float beta)       \
    {                                                                                                               \
        return elementwise_loss<kind>(input, target, out, reduction, beta, #name);                                 \
    }                                                                                                               \
    int cuda_##name##_backward(const AcTensor *input, const AcTensor *target, const AcTensor *gout, AcTensor *gx,  \
                               AcTensor *gt, int reduction, float beta)                                            \
    {                                                                                                               \
        return elementwise_loss_backward<kind>(input, target, gout, gx, gt, reduction, beta, #name "_backward");   \
    }

LOSS_ENTRIES(mse_loss, LOSS_MSE)
LOSS_ENTRIES(l1_loss, LOSS_L1)
LOSS_ENTRIES(smooth_l1_loss, LOSS_SMOOTH_L1)
LOSS_ENTRIES(binary_cross_entropy, LOSS_BCE)
LOSS_ENTRIES(bce_with_logits, LOSS_BCE_LOGITS)

/* ---- cross entropy ------------------------------------------------------------ */

int cuda_cross_entropy(const AcTensor *logits, const AcTensor *target, AcTensor *out, int reduction, float smoothing,
                       int64_t *ids, float *probs)
{
    cudaStream_t s = current_stream();
    const int64_t rows = logits->ndim == 2 ? logits->shape[0] : 1, classes = logits->shape[logits->ndim - 1];
    const int none = reduction == AC_REDUCTION_NONE;
    unsigned long long *flag, bad = ~0ull;
    float *loss;
    char *scratch;
    if (!s) return AC_ERR_DEVICE;
    if (rows == 0) {   /* an empty batch: mean is NaN, sum 0, as the CPU's */
        if (none) return AC_OK;
        return cuda_fill(out, reduction == AC_REDUCTION_MEAN ? NAN : 0.0);
    }
    if (!(scratch = (char *)cuda_scratch(sizeof bad + (none ? 0 : (size_t)rows * sizeof(float)))))
        return ac_last_error_code();
    flag = (unsigned long long *)(void *)scratch;
    loss = none ? out->data : (float *)(void *)(scratch + sizeof bad);
    cudaMemcpyAsync(flag, &bad, sizeof bad, cudaMemcpyHostToDevice, s);
    cross_entropy_rows<<<cuda_blocks(rows), CUDA_THREADS, 0, s>>>(logits->data, target->data, target->dtype == AC_INT64,
                                                                  rows, classes, smoothing, loss, ids, probs, flag);
    if (!none)
        sum_rows<<<1, CUDA_THREADS, 0, s>>>(loss, rows, reduction == AC_REDUCTION_MEAN ? 1.0 / (double)rows : 1.0,
                                            out->data);
    if (read_flag(flag, &bad, s, "cross_entropy")) return ac_last_error_code();
    if (bad != ~0ull) {
        double t = 0.0;
        if (target->dtype == AC_INT64) {
            int64_t v;
            cudaMemcpy(&v, (const int64_t *)(const void *)target->data + bad, sizeof v, cudaMemcpyDeviceToHost);
            t = (double)v;
        } else {
            float v;
            cudaMemcpy(&v, target->data + bad, sizeof v, cudaMemcpyDeviceToHost);
            t = (double)v;
        }
        return error_set(AC_ERR_INDEX, "cross_entropy: target %g at position %llu is not a class index in [0, %lld)",
                         t, bad, (long long)classes);
    }
    return cuda_check_launch("cross_entropy");
}

/* gin = (p - e / C) g, less (1 - e) g at the target's class; g is grad_out's
   value for the row (reduction none) or its one value, times 1/N for mean. */
__global__ void cross_entropy_grad(const int64_t *ids, const float *probs, const float *gout, int64_t g_step,
                                   float scale, int64_t rows, int64_t classes, float smoothing, float *gin)
{
    const float spread = smoothing / (float)classes;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * classes;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / classes, c = i % classes;
        const float g = gout[r * g_step] * scale;
        float v = (probs[i] - spread) * g;
        if (c == ids[r]) v -= (1.0f - smoothing) * g;
        gin[i] = v;
    }
}

int cuda_cross_entropy_backward(const AcTensor *, const int64_t *ids, const float *probs, const AcTensor *gout,
                                AcTensor *gin, int reduction, float smoothing)
{
    cudaStream_t s = current_stream();
    const int64_t rows = gin->ndim == 2 ? gin->shape[0] : 1, classes = gin->shape[gin->ndim - 1];
    if (!s) return AC_ERR_DEVICE;
    if (rows * classes == 0) return AC_OK;
    cross_entropy_grad<<<cuda_blocks(rows * classes), CUDA_THREADS, 0, s>>>(
        ids, probs, gout->data, reduction == AC_REDUCTION_NONE ? 1 : 0,
        reduction == AC_REDUCTION_MEAN ? 1.0f / (float)rows : 1.0f, rows, classes, smoothing, gin->data);
    return cuda_check_launch("cross_entropy_backward");
}
