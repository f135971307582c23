/*
 * activation.c - relu, sigmoid, tanh, gelu (exact, erf form), softmax and
 * log_softmax along one dim. Each forward has its backward right under it.
 *
 * softmax and log_softmax subtract the row's max before exp, so logits of any
 * finite size give finite results. The transcendental work runs in the
 * vectorised kernels (kernels/vecmath.c); softmax writes the exps into its
 * output row and sums them there, in an order fixed by the row length.
 *
 * Not here: the arithmetic ops (elementwise.c), the losses (loss.c).
 */
#include "graph.h"
#include "kernels/vecmath.h"

#include <math.h>

#define ACT_GRAIN 16384
/* Lanes of a softmax over a dim that is not the last, handled together so that
   each step along the dim is a contiguous run of values. */
#define SOFTMAX_LANES 256

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
    case ACT_SIGMOID: vec_sigmoid(x + begin, out + begin, end - begin); break;
    case ACT_TANH: vec_tanh(x + begin, out + begin, end - begin); break;
    case ACT_GELU: vec_gelu(x + begin, out + begin, end - begin); break;
    case ACT_RELU_GRAD: ACT_GRAD_RUN(v <= 0.0f ? 0.0f : u); break;
    case ACT_SIGMOID_GRAD: ACT_GRAD_RUN(u * (1.0f - v) * v); break;
    case ACT_TANH_GRAD: ACT_GRAD_RUN(u * (1.0f - v * v)); break;
    case ACT_GELU_GRAD: vec_gelu_grad(x + begin, y + begin, out + begin, end - begin); break;
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

int relu_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_relu(t[0]));
}

AcTensor *ac_relu(const AcTensor *a)
{
    if (ops_observed) return graph_op("relu", relu_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    return activation("relu", ACT_RELU, a, relu_backward);
}

static int sigmoid_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return activation_grad(ACT_SIGMOID_GRAD, gout, node->output, gin);
}

int sigmoid_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_sigmoid(t[0]));
}

AcTensor *ac_sigmoid(const AcTensor *a)
{
    if (ops_observed) return graph_op("sigmoid", sigmoid_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    return activation("sigmoid", ACT_SIGMOID, a, sigmoid_backward);
}

static int tanh_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return activation_grad(ACT_TANH_GRAD, gout, node->output, gin);
}

int tanh_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_tanh(t[0]));
}

AcTensor *ac_tanh(const AcTensor *a)
{
    if (ops_observed) return graph_op("tanh", tanh_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    return activation("tanh", ACT_TANH, a, tanh_backward);
}

static int gelu_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return activation_grad(ACT_GELU_GRAD, gout, node->inputs[0], gin);
}

int gelu_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_gelu(t[0]));
}

AcTensor *ac_gelu(const AcTensor *a)
{
    if (ops_observed) return graph_op("gelu", gelu_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    return activation("gelu", ACT_GELU, a, gelu_backward);
}

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

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* One contiguous row of n values (the softmax dim is the last). */
static void softmax_row(const float *x, float *out, int64_t n, int is_log)
{
    float max = vec_max(x, n), log_sum, scale;
    int64_t k;
    if (is_log) {
        log_sum = logf(vec_exp_sum(x, max, NULL, n));
        /* (x - max) - log_sum: adding log_sum to a large max first would round it away */
        for (k = 0; k < n; k++) out[k] = (x[k] - max) - log_sum;
    } else {
        scale = 1.0f / vec_exp_sum(x, max, out, n);
        for (k = 0; k < n; k++) out[k] *= scale;
    }
}

/* One row of n steps along the softmax dim, each step `inner` lanes apart;
   every lane sums its exps in step order. */
static void softmax_lanes(const float *x, float *out, int64_t n, int64_t inner, int is_log)
{
    float max[SOFTMAX_LANES], sum[SOFTMAX_LANES];
    int64_t first, width, k, l;
    for (first = 0; first < inner; first += width) {
        width = min64(SOFTMAX_LANES, inner - first);
        for (l = 0; l < width; l++) {
            max[l] = x[first + l];
            sum[l] = 0.0f;
        }
        for (k = 1; k < n; k++) {
            const float *xk = x + k * inner + first;
            for (l = 0; l < width; l++) max[l] = xk[l] > max[l] ? xk[l] : max[l];
        }
        for (k = 0; k < n; k++) {
            const float *xk = x + k * inner + first;
            float *ok = out + k * inner + first;
            for (l = 0; l < width; l++) ok[l] = xk[l] - max[l];
            vec_exp(ok, ok, width);
            for (l = 0; l < width; l++) sum[l] += ok[l];
        }
        for (l = 0; l < width; l++) sum[l] = is_log ? logf(sum[l]) : 1.0f / sum[l];
        for (k = 0; k < n; k++) {
            const float *xk = x + k * inner + first;
            float *ok = out + k * inner + first;
            if (is_log)
                for (l = 0; l < width; l++) ok[l] = (xk[l] - max[l]) - sum[l];
            else
                for (l = 0; l < width; l++) ok[l] *= sum[l];
        }
    }
}

static void softmax_rows(void *ctx, int64_t begin, int64_t end)
{
    const SoftmaxJob *job = ctx;
    const int64_t n = job->layout.n, inner = job->layout.inner;
    int64_t row;
    for (row = begin; row < end; row++) {
        const float *x = job->x + row * n * inner;
        float *out = job->out + row * n * inner;
        if (inner == 1)
            softmax_row(x, out, n, job->is_log);
        else
            softmax_lanes(x, out, n, inner, job->is_log);
    }
}

/* softmax: gin = y (g - sum(g y)); log_softmax: gin = g - exp(y) sum(g), over
   one contiguous row; y is the forward's output. */
static void softmax_grad_row(const float *y, const float *g, float *out, int64_t n, int is_log)
{
    float sum = 0.0f;
    int64_t k;
    if (is_log) {
        for (k = 0; k < n; k++) sum += g[k];
        vec_exp(y, out, n);
        for (k = 0; k < n; k++) out[k] = g[k] - out[k] * sum;
    } else {
        for (k = 0; k < n; k++) sum += g[k] * y[k];
        for (k = 0; k < n; k++) out[k] = y[k] * (g[k] - sum);
    }
}

/* As softmax_grad_row, for a row whose steps are `inner` lanes apart; each
   lane sums in step order. */
static void softmax_grad_lanes(const float *y, const float *g, float *out, int64_t n,
                               int64_t inner, int is_log)
{
    float sum[SOFTMAX_LANES];
    int64_t first, width, k, l;
    if (is_log) vec_exp(y, out, n * inner);
    for (first = 0; first < inner; first += width) {
        width = min64(SOFTMAX_LANES, inner - first);
        for (l = 0; l < width; l++) sum[l] = 0.0f;
        for (k = 0; k < n; k++) {
            const float *yk = y + k * inner + first, *gk = g + k * inner + first;
            if (is_log)
                for (l = 0; l < width; l++) sum[l] += gk[l];
            else
                for (l = 0; l < width; l++) sum[l] += gk[l] * yk[l];
        }
        for (k = 0; k < n; k++) {
            const float *yk = y + k * inner + first, *gk = g + k * inner + first;
            float *ok = out + k * inner + first;
            if (is_log)
                for (l = 0; l < width; l++) ok[l] = gk[l] - ok[l] * sum[l];
            else
                for (l = 0; l < width; l++) ok[l] = yk[l] * (gk[l] - sum[l]);
        }
    }
}

static void softmax_grad_rows(void *ctx, int64_t begin, int64_t end)
{
    const SoftmaxJob *job = ctx;
    const int64_t n = job->layout.n, inner = job->layout.inner;
    int64_t row;
    for (row = begin; row < end; row++) {
        const int64_t at = row * n * inner;
        if (inner == 1)
            softmax_grad_row(job->x + at, job->g + at, job->out + at, n, job->is_log);
        else
            softmax_grad_lanes(job->x + at, job->g + at, job->out + at, n, inner, job->is_log);
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

int softmax_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_softmax(t[0], (int)attr[0]));
}

AcTensor *ac_softmax(const AcTensor *a, int dim)
{
    if (ops_observed) return graph_op("softmax", softmax_replay, 1, (const AcTensor *[]){a}, (double[]){dim}, 1);
    return softmax_common("softmax", a, dim, 0);
}

int log_softmax_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_log_softmax(t[0], (int)attr[0]));
}

AcTensor *ac_log_softmax(const AcTensor *a, int dim)
{
    if (ops_observed) return graph_op("log_softmax", log_softmax_replay, 1, (const AcTensor *[]){a}, (double[]){dim}, 1);
    return softmax_common("log_softmax", a, dim, 1);
}
