/*
 * activation.c - relu, sigmoid, tanh, gelu (exact, erf form), softmax and
 * log_softmax along one dim. Each forward has its backward right under it.
 *
 * softmax and log_softmax subtract the row's max before exp, so logits of any
 * finite size give finite results.
 *
 * Not here: the arithmetic ops (elementwise.c), the losses (loss.c).
 */
#include "internal.h"

#include <math.h>

#define ACT_GRAIN 16384
#define SQRT_HALF 0.70710678118654752440f        /* 1 / sqrt(2) */
#define INV_SQRT_2PI 0.39894228040143267794f     /* 1 / sqrt(2 pi) */

typedef enum {
    ACT_RELU, ACT_SIGMOID, ACT_TANH, ACT_GELU,
    /* backward: u is grad_out, v is the output (relu, sigmoid, tanh) or the input (gelu) */
    ACT_RELU_GRAD, ACT_SIGMOID_GRAD, ACT_TANH_GRAD, ACT_GELU_GRAD
} ActKind;

typedef struct {
    ActKind kind;
    const float *x, *y;   /* y only for the backward kinds */
    float *out;
} ActJob;

static float sigmoid(float u)
{
    float e = expf(-fabsf(u));   /* never overflows */
    return (u >= 0.0f ? 1.0f : e) / (1.0f + e);
}

static float gelu_grad(float g, float x)
{
    float cdf = 0.5f * (1.0f + erff(x * SQRT_HALF));
    return g * (cdf + x * INV_SQRT_2PI * expf(-0.5f * x * x));
}

#define ACT_RUN(EXPR)                                                            \
    do {                                                                         \
        for (i = begin; i < end; i++) { float u = x[i]; out[i] = (EXPR); }       \
    } while (0)
#define ACT_GRAD_RUN(EXPR)                                                       \
    do {                                                                         \
        for (i = begin; i < end; i++) { float u = x[i], v = y[i]; out[i] = (EXPR); } \
    } while (0)

static void act_chunk(void *ctx, int64_t begin, int64_t end)
{
    const ActJob *job = ctx;
    const float *restrict x = job->x, *restrict y = job->y;
    float *restrict out = job->out;
    int64_t i;
    switch (job->kind) {
    case ACT_RELU: ACT_RUN(u < 0.0f ? 0.0f : u); break;   /* NaN passes through */
    case ACT_SIGMOID: ACT_RUN(sigmoid(u)); break;
    case ACT_TANH: ACT_RUN(tanhf(u)); break;
    case ACT_GELU: ACT_RUN(0.5f * u * (1.0f + erff(u * SQRT_HALF))); break;
    case ACT_RELU_GRAD: ACT_GRAD_RUN(v <= 0.0f ? 0.0f : u); break;
    case ACT_SIGMOID_GRAD: ACT_GRAD_RUN(u * (1.0f - v) * v); break;
    case ACT_TANH_GRAD: ACT_GRAD_RUN(u * (1.0f - v * v)); break;
    case ACT_GELU_GRAD: ACT_GRAD_RUN(gelu_grad(u, v)); break;
    }
}

static void act_run(ActKind kind, const float *x, const float *y, float *out, int64_t n)
{
    ActJob job;
    job.kind = kind;
    job.x = x;
    job.y = y;
    job.out = out;
    if (n > 0) parallel_for(n, ACT_GRAIN, act_chunk, &job);
}

static AcTensor *activation(const char *op, ActKind kind, const AcTensor *a, AcBackwardFn backward)
{
    AcTensor *out;
    if (tensor_check(op, a, "a")) return NULL;
    out = op_output(op, a->shape, a->ndim, &a, 1, backward, 0);
    if (out) act_run(kind, a->data, NULL, out->data, a->size);
    return out;
}

/* gin[0] = kind(grad_out, saved), saved being the op's output or input. */
static int activation_grad(ActKind kind, const AcTensor *gout, const AcTensor *saved,
                           AcTensor **gin)
{
    gin[0] = tensor_alloc_like("backward", gout);
    if (!gin[0]) return ac_last_error_code();
    act_run(kind, gout->data, saved->data, gin[0]->data, gout->size);
    return AC_OK;
}

static int relu_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return activation_grad(ACT_RELU_GRAD, gout, node->output, gin);
}

AcTensor *ac_relu(const AcTensor *a) { return activation("relu", ACT_RELU, a, relu_backward); }

static int sigmoid_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return activation_grad(ACT_SIGMOID_GRAD, gout, node->output, gin);
}

AcTensor *ac_sigmoid(const AcTensor *a)
{
    return activation("sigmoid", ACT_SIGMOID, a, sigmoid_backward);
}

static int tanh_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return activation_grad(ACT_TANH_GRAD, gout, node->output, gin);
}

AcTensor *ac_tanh(const AcTensor *a) { return activation("tanh", ACT_TANH, a, tanh_backward); }

static int gelu_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return activation_grad(ACT_GELU_GRAD, gout, node->inputs[0], gin);
}

AcTensor *ac_gelu(const AcTensor *a) { return activation("gelu", ACT_GELU, a, gelu_backward); }

/* ---- softmax and log_softmax --------------------------------------------- */

/* The tensor seen as (outer, n, inner) around the softmax dim: each of the
   outer * inner lanes is n values, inner apart. */
typedef struct {
    int64_t n, inner;
} SoftmaxCtx;

typedef struct {
    SoftmaxCtx layout;
    int is_log;
    const float *x, *g;    /* forward: x is the input; backward: x is the output, g grad_out */
    float *out;
} SoftmaxJob;

static void softmax_rows(void *ctx, int64_t begin, int64_t end)
{
    const SoftmaxJob *job = ctx;
    const int64_t n = job->layout.n, inner = job->layout.inner;
    int64_t row, lane, k;
    for (row = begin; row < end; row++) {
        for (lane = 0; lane < inner; lane++) {
            const float *x = job->x + row * n * inner + lane;
            float *out = job->out + row * n * inner + lane;
            float max = x[0], sum = 0.0f;
            for (k = 1; k < n; k++)
                if (x[k * inner] > max) max = x[k * inner];
            if (job->is_log) {
                float log_sum;
                for (k = 0; k < n; k++) sum += expf(x[k * inner] - max);
                log_sum = logf(sum);
                /* (x - max) - log_sum: adding log_sum to a large max first would round it away */
                for (k = 0; k < n; k++) out[k * inner] = (x[k * inner] - max) - log_sum;
            } else {
                for (k = 0; k < n; k++) {
                    out[k * inner] = expf(x[k * inner] - max);
                    sum += out[k * inner];
                }
                for (k = 0; k < n; k++) out[k * inner] /= sum;
            }
        }
    }
}

/* softmax: gin = y (g - sum(g y)); log_softmax: gin = g - exp(y) sum(g). */
static void softmax_grad_rows(void *ctx, int64_t begin, int64_t end)
{
    const SoftmaxJob *job = ctx;
    const int64_t n = job->layout.n, inner = job->layout.inner;
    int64_t row, lane, k;
    for (row = begin; row < end; row++) {
        for (lane = 0; lane < inner; lane++) {
            const float *y = job->x + row * n * inner + lane, *g = job->g + row * n * inner + lane;
            float *out = job->out + row * n * inner + lane;
            float sum = 0.0f;
            if (job->is_log) {
                for (k = 0; k < n; k++) sum += g[k * inner];
                for (k = 0; k < n; k++) out[k * inner] = g[k * inner] - expf(y[k * inner]) * sum;
            } else {
                for (k = 0; k < n; k++) sum += g[k * inner] * y[k * inner];
                for (k = 0; k < n; k++) out[k * inner] = y[k * inner] * (g[k * inner] - sum);
            }
        }
    }
}

static void softmax_run(ParallelFn fn, const SoftmaxCtx *layout, int is_log, const float *x,
                        const float *g, float *out, int64_t size)
{
    SoftmaxJob job;
    int64_t row_size = layout->n * layout->inner, grain;
    if (size == 0) return;
    job.layout = *layout;
    job.is_log = is_log;
    job.x = x;
    job.g = g;
    job.out = out;
    grain = row_size >= ACT_GRAIN ? 1 : ACT_GRAIN / row_size;
    parallel_for(size / row_size, grain, fn, &job);
}

static int softmax_backward_common(AcGradNode *node, const AcTensor *gout, AcTensor **gin,
                                   int is_log)
{
    gin[0] = tensor_alloc_like("backward", gout);
    if (!gin[0]) return ac_last_error_code();
    softmax_run(softmax_grad_rows, node->context, is_log, node->output->data, gout->data,
                gin[0]->data, gout->size);
    return AC_OK;
}

static int softmax_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return softmax_backward_common(node, gout, gin, 0);
}

static int log_softmax_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return softmax_backward_common(node, gout, gin, 1);
}

static AcTensor *softmax_common(const char *op, const AcTensor *a, int dim, int is_log)
{
    SoftmaxCtx layout, *ctx;
    AcTensor *out;
    int d;
    if (tensor_check(op, a, "a")) return NULL;
    if ((dim = dim_normalize(op, dim, a->ndim)) < 0) return NULL;
    layout.n = a->ndim > 0 ? a->shape[dim] : 1;
    layout.inner = 1;
    for (d = dim + 1; d < a->ndim; d++) layout.inner *= a->shape[d];
    out = op_output(op, a->shape, a->ndim, &a, 1,
                    is_log ? log_softmax_backward : softmax_backward, sizeof(SoftmaxCtx));
    if (!out) return NULL;
    if ((ctx = op_context(out))) *ctx = layout;
    softmax_run(softmax_rows, &layout, is_log, a->data, NULL, out->data, a->size);
    return out;
}

AcTensor *ac_softmax(const AcTensor *a, int dim) { return softmax_common("softmax", a, dim, 0); }

AcTensor *ac_log_softmax(const AcTensor *a, int dim)
{
    return softmax_common("log_softmax", a, dim, 1);
}
