/*
 * adaptive.c - one in-place step of Adadelta, RMSprop or Adagrad: the
 * optimizers that scale each element's step by a running average (or sum) of
 * its squared gradients. Each is computed as torch.optim's single-tensor form
 * computes it (maximize off), in the same order of float operations.
 *
 * The caller owns the state tensors (and, for Adagrad, counts the steps).
 * Nothing is allocated here.
 */
#include "optim.h"
#include "graph.h"
#include "kernels/kernels.h"
#include "kernels/vecmath.h"

#include <float.h>
#include <math.h>

/* Elements per task: below this, handing work to the pool costs more than it saves. */
#define ADAPTIVE_GRAIN 16384

/* A running average of a gradient that stays zero decays into subnormals, and
   x86 arithmetic on those is ~100x slower: flush them, as adam.c does. This
   departs from PyTorch only below FLT_MIN, where the update is zero anyway.
   select_float (vecmath.h) keeps the loops free of branches, so they vectorise. */
static float flush_tiny(float x)
{
    return select_float(fabsf(x) < FLT_MIN, 0.0f, x);
}

/* The NaN-proof range checks the three share; each returns AC_OK or the error. */
static int check_at_least_zero(const char *op, const char *what, float value)
{
    if (!(value >= 0.0f)) return error_set(AC_ERR_ARG, "%s: invalid %s value %g", op, what, value);
    return AC_OK;
}

/* ---- Adadelta --------------------------------------------------------------- */

typedef struct {
    float *param, *square_avg, *acc_delta;
    const float *grad;
    float neg_lr, rho, avg_weight;   /* avg_weight = 1 - rho */
    float eps, weight_decay;
} AdadeltaJob;

static void adadelta_chunk(void *ctx, int64_t begin, int64_t end)
{
    const AdadeltaJob *job = ctx;
    float *param = job->param, *sq = job->square_avg, *acc = job->acc_delta;
    const float *grad = job->grad;
    const float neg_lr = job->neg_lr, rho = job->rho, w = job->avg_weight;
    const float eps = job->eps, wd = job->weight_decay;
    int64_t i;
    for (i = begin; i < end; i++) {
        float g = grad[i], sq_i, std, delta;
        if (wd != 0.0f) g += wd * param[i];
        sq_i = flush_tiny(sq[i] * rho + w * g * g);
        std = sqrtf(sq_i + eps);
        delta = sqrtf(acc[i] + eps) / std * g;
        sq[i] = sq_i;
        acc[i] = flush_tiny(acc[i] * rho + w * delta * delta);
        param[i] += neg_lr * delta;
    }
}

int ac_adadelta_step(AcTensor *param, AcTensor *square_avg, AcTensor *acc_delta, float lr,
                     float rho, float eps, float weight_decay)
{
    const char *op = "adadelta_step";
    AdadeltaJob job;
    /* not recorded: a compiled step holding one runs eagerly instead of skipping it */
    if (graph_recording) graph_unsupported(op);
    if (optim_check_param_lr(op, param, lr)) return ac_last_error_code();
    if (!(rho >= 0.0f && rho <= 1.0f))
        return error_set(AC_ERR_ARG, "%s: invalid rho value %g (not in [0, 1])", op, rho);
    if (check_at_least_zero(op, "epsilon", eps) ||
        check_at_least_zero(op, "weight_decay", weight_decay))
        return ac_last_error_code();
    if (optim_check_state(op, param, square_avg, "square_avg") ||
        optim_check_state(op, param, acc_delta, "acc_delta"))
        return ac_last_error_code();
    if (square_avg->data == acc_delta->data)
        return error_set(AC_ERR_ARG, "%s: square_avg and acc_delta share memory", op);
    if (optim_check_grad(op, param) ||
        cpu_only(op, (const AcTensor *[]){param, param->grad, square_avg, acc_delta}, 4))
        return ac_last_error_code();
    if (!param->grad || param->size == 0) return AC_OK;

    job.param = param->data;
    job.square_avg = square_avg->data;
    job.acc_delta = acc_delta->data;
    job.grad = param->grad->data;
    job.neg_lr = -lr;
    job.rho = rho;
    job.avg_weight = (float)(1.0 - (double)rho);
    job.eps = eps;
    job.weight_decay = weight_decay;
    parallel_for(param->size, ADAPTIVE_GRAIN, adadelta_chunk, &job);
    return AC_OK;
}

/* ---- RMSprop ---------------------------------------------------------------- */

typedef struct {
    float *param, *square_avg;
    float *momentum_buffer;   /* NULL when momentum is 0 */
    float *grad_avg;          /* NULL unless centered */
    const float *grad;
    float neg_lr, alpha, avg_weight;   /* avg_weight = 1 - alpha */
    float eps, weight_decay, momentum;
} RmspropJob;

/* PyTorch's lerp: grad_avg.lerp_(grad, 1 - alpha), whose formula depends on the
   weight. Both are computed and one picked, without a branch, as above. */
static float lerp(float start, float end, float weight)
{
    float diff = end - start;
    return select_float(weight < 0.5f, start + weight * diff, end - diff * (1.0f - weight));
}

/* centered and with_momentum are constants at each call below, so every variant
   gets a loop of its own without branches, which the compiler vectorises. The
   buffers are distinct (ac_rmsprop_step checks): restrict spares it checking
   the five for overlap, which it gives up on. */
static inline void rmsprop_loop(const RmspropJob *job, int64_t begin, int64_t end, int centered,
                                int with_momentum)
{
    float *restrict param = job->param, *restrict sq = job->square_avg;
    float *restrict buf = job->momentum_buffer, *restrict grad_avg = job->grad_avg;
    const float *restrict grad = job->grad;
    const float neg_lr = job->neg_lr, alpha = job->alpha, w = job->avg_weight;
    const float eps = job->eps, wd = job->weight_decay, momentum = job->momentum;
    int64_t i;
    for (i = begin; i < end; i++) {
        float g = select_float(wd != 0.0f, grad[i] + wd * param[i], grad[i]), sq_i, avg;
        sq_i = flush_tiny(sq[i] * alpha + w * g * g);
        sq[i] = sq_i;
        if (centered) {
            float ga = flush_tiny(lerp(grad_avg[i], g, w));
            grad_avg[i] = ga;
            avg = sqrtf(sq_i + -ga * ga);   /* may be NaN by rounding, as in PyTorch */
        } else {
            avg = sqrtf(sq_i);
        }
        avg += eps;
        if (with_momentum) {
            float b = flush_tiny(buf[i] * momentum + g / avg);
            buf[i] = b;
            param[i] += neg_lr * b;
        } else {
            param[i] += neg_lr * g / avg;
        }
    }
}

static void rmsprop_chunk(void *ctx, int64_t begin, int64_t end)
{
    const RmspropJob *job = ctx;
    if (job->grad_avg && job->momentum_buffer) rmsprop_loop(job, begin, end, 1, 1);
    else if (job->grad_avg) rmsprop_loop(job, begin, end, 1, 0);
    else if (job->momentum_buffer) rmsprop_loop(job, begin, end, 0, 1);
    else rmsprop_loop(job, begin, end, 0, 0);
}

int ac_rmsprop_step(AcTensor *param, AcTensor *square_avg, AcTensor *momentum_buffer,
                    AcTensor *grad_avg, float lr, float alpha, float eps, float weight_decay,
                    float momentum, int centered)
{
    const char *op = "rmsprop_step";
    RmspropJob job;
    /* not recorded: a compiled step holding one runs eagerly instead of skipping it */
    if (graph_recording) graph_unsupported(op);
    if (optim_check_param_lr(op, param, lr)) return ac_last_error_code();
    if (check_at_least_zero(op, "epsilon", eps) || check_at_least_zero(op, "momentum", momentum) ||
        check_at_least_zero(op, "weight_decay", weight_decay) ||
        check_at_least_zero(op, "alpha", alpha))
        return ac_last_error_code();
    if (optim_check_state(op, param, square_avg, "square_avg")) return ac_last_error_code();
    if (momentum > 0.0f) {
        if (optim_check_state(op, param, momentum_buffer, "momentum_buffer"))
            return ac_last_error_code();
        if (momentum_buffer->data == square_avg->data)
            return error_set(AC_ERR_ARG, "%s: momentum_buffer and square_avg share memory", op);
    }
    if (centered) {
        if (optim_check_state(op, param, grad_avg, "grad_avg")) return ac_last_error_code();
        if (grad_avg->data == square_avg->data ||
            (momentum > 0.0f && grad_avg->data == momentum_buffer->data))
            return error_set(AC_ERR_ARG, "%s: grad_avg shares memory with another state", op);
    }
    if (optim_check_grad(op, param) ||
        cpu_only(op, (const AcTensor *[]){param, param->grad, square_avg,
                                          momentum > 0.0f ? momentum_buffer : NULL,
                                          centered ? grad_avg : NULL}, 5))
        return ac_last_error_code();
    if (!param->grad || param->size == 0) return AC_OK;

    job.param = param->data;
    job.square_avg = square_avg->data;
    job.momentum_buffer = momentum > 0.0f ? momentum_buffer->data : NULL;
    job.grad_avg = centered ? grad_avg->data : NULL;
    job.grad = param->grad->data;
    job.neg_lr = -lr;
    job.alpha = alpha;
    job.avg_weight = (float)(1.0 - (double)alpha);
    job.eps = eps;
    job.weight_decay = weight_decay;
    job.momentum = momentum;
    parallel_for(param->size, ADAPTIVE_GRAIN, rmsprop_chunk, &job);
    return AC_OK;
}

/* ---- Adagrad ---------------------------------------------------------------- */

typedef struct {
    float *param, *sum;
    const float *grad;
    float neg_clr;   /* -lr / (1 + (step - 1) * lr_decay) */
    float eps, weight_decay;
} AdagradJob;

static void adagrad_chunk(void *ctx, int64_t begin, int64_t end)
{
    const AdagradJob *job = ctx;
    float *param = job->param, *sum = job->sum;
    const float *grad = job->grad;
    const float neg_clr = job->neg_clr, eps = job->eps, wd = job->weight_decay;
    int64_t i;
    for (i = begin; i < end; i++) {
        float g = grad[i], s;
        if (wd != 0.0f) g += wd * param[i];
        s = sum[i] + g * g;
        sum[i] = s;
        param[i] += neg_clr * g / (sqrtf(s) + eps);
    }
}

int ac_adagrad_step(AcTensor *param, AcTensor *sum, int64_t step, float lr, float lr_decay,
                    float weight_decay, float eps)
{
    const char *op = "adagrad_step";
    AdagradJob job;
    /* not recorded: a compiled step holding one runs eagerly instead of skipping it */
    if (graph_recording) graph_unsupported(op);
    if (optim_check_param(op, param, step, lr)) return ac_last_error_code();
    if (check_at_least_zero(op, "lr_decay", lr_decay) ||
        check_at_least_zero(op, "weight_decay", weight_decay) ||
        check_at_least_zero(op, "epsilon", eps))
        return ac_last_error_code();
    if (optim_check_state(op, param, sum, "sum")) return ac_last_error_code();
    if (optim_check_grad(op, param) || cpu_only(op, (const AcTensor *[]){param, param->grad, sum}, 3))
        return ac_last_error_code();
    if (!param->grad || param->size == 0) return AC_OK;

    job.param = param->data;
    job.sum = sum->data;
    job.grad = param->grad->data;
    /* In double, as PyTorch computes it in Python. */
    job.neg_clr = (float)(-(double)lr / (1.0 + (double)(step - 1) * (double)lr_decay));
    job.eps = eps;
    job.weight_decay = weight_decay;
    parallel_for(param->size, ADAPTIVE_GRAIN, adagrad_chunk, &job);
    return AC_OK;
}
