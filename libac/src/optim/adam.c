/*
 * adam.c - one in-place step of Adam, or AdamW with decoupled weight decay,
 * exactly as torch.optim.Adam / AdamW compute it (single-tensor form, amsgrad
 * and maximize off), down to the order of the floating-point operations.
 *
 * The caller owns the two moment tensors and counts the steps. Nothing is
 * allocated here.
 */
#include "optim.h"
#include "graph.h"

#include <float.h>
#include <math.h>

/* Elements per task: below this, handing work to the pool costs more than it saves. */
#define ADAM_GRAIN 16384

typedef struct {
    float *param, *exp_avg, *exp_avg_sq;
    const float *grad;
    float avg_weight;        /* 1 - beta1: exp_avg moves this far towards the gradient */
    float beta2, sq_weight;  /* sq_weight = 1 - beta2 */
    float neg_step_size;     /* -lr / (1 - beta1^step) */
    float bc2_sqrt;          /* sqrt(1 - beta2^step) */
    float eps, weight_decay;
    float decay_factor;      /* AdamW: param *= 1 - lr * weight_decay */
    int decoupled;
} AdamJob;

/* PyTorch's lerp: exp_avg.lerp_(grad, 1 - beta1), whose formula depends on the weight. */
static float lerp(float start, float end, float weight)
{
    return weight < 0.5f ? start + weight * (end - start)
                         : end - (end - start) * (1.0f - weight);
}

/* One fused pass over the tensor; the branches test values fixed for the call. */
static void adam_chunk(void *ctx, int64_t begin, int64_t end)
{
    const AdamJob *job = ctx;
    float *param = job->param, *m = job->exp_avg, *v = job->exp_avg_sq;
    const float *grad = job->grad;
    const float w1 = job->avg_weight, beta2 = job->beta2, w2 = job->sq_weight;
    const float neg_step_size = job->neg_step_size, bc2_sqrt = job->bc2_sqrt, eps = job->eps;
    const float wd = job->weight_decay, decay_factor = job->decay_factor;
    const int decoupled = job->decoupled;
    int64_t i;
    for (i = begin; i < end; i++) {
        float p = param[i], g = grad[i], mi, vi, denom;
        if (wd != 0.0f) {
            if (decoupled) p *= decay_factor;
            else g += wd * p;
        }
        mi = lerp(m[i], g, w1);
        vi = v[i] * beta2 + w2 * g * g;
        /* A unit whose gradient stays zero decays its moments into subnormals, and
           x86 arithmetic on those is ~100x slower: flush them. This departs from
           PyTorch only below FLT_MIN (1.2e-38), where the update is zero anyway. */
        if (fabsf(mi) < FLT_MIN) mi = 0.0f;
        if (vi < FLT_MIN) vi = 0.0f;
        m[i] = mi;
        v[i] = vi;
        denom = sqrtf(vi) / bc2_sqrt + eps;
        param[i] = p + neg_step_size * mi / denom;
    }
}

static int adam_step_replay(AcTensor **t, const double *attr)
{
    return ac_adam_step(t[0], t[1], t[2], (int64_t)attr[0], (float)attr[1], (float)attr[2], (float)attr[3],
                        (float)attr[4], (float)attr[5], (int)attr[6]);
}

int ac_adam_step(AcTensor *param, AcTensor *exp_avg, AcTensor *exp_avg_sq, int64_t step,
                 float lr, float beta1, float beta2, float eps, float weight_decay, int decoupled)
{
    if (ops_observed) return graph_call("adam_step", adam_step_replay, 3, 0, (AcTensor *[]){param, exp_avg, exp_avg_sq}, (double[]){(double)step, lr, beta1, beta2, eps, weight_decay, decoupled}, 7);
    const char *op = decoupled ? "adamw_step" : "adam_step";
    AdamJob job;
    double bias_correction1, bias_correction2;
    if (optim_check_param(op, param, step, lr)) return ac_last_error_code();
    /* The comparisons are written so that NaN fails them too. */
    if (!(eps >= 0.0f)) return error_set(AC_ERR_ARG, "%s: invalid epsilon value %g", op, eps);
    if (!(beta1 >= 0.0f && beta1 < 1.0f))
        return error_set(AC_ERR_ARG, "%s: invalid beta parameter at index 0: %g", op, beta1);
    if (!(beta2 >= 0.0f && beta2 < 1.0f))
        return error_set(AC_ERR_ARG, "%s: invalid beta parameter at index 1: %g", op, beta2);
    if (!(weight_decay >= 0.0f))
        return error_set(AC_ERR_ARG, "%s: invalid weight_decay value %g", op, weight_decay);
    if (optim_check_state(op, param, exp_avg, "exp_avg") ||
        optim_check_state(op, param, exp_avg_sq, "exp_avg_sq"))
        return ac_last_error_code();
    if (exp_avg->data == exp_avg_sq->data)
        return error_set(AC_ERR_ARG, "%s: exp_avg and exp_avg_sq share memory", op);
    if (optim_check_grad(op, param)) return ac_last_error_code();
    if (!param->grad || param->size == 0) return AC_OK;

    /* Scalars in double, as PyTorch computes them in Python before the tensor ops. */
    bias_correction1 = 1.0 - pow((double)beta1, (double)step);
    bias_correction2 = 1.0 - pow((double)beta2, (double)step);
    job.param = param->data;
    job.exp_avg = exp_avg->data;
    job.exp_avg_sq = exp_avg_sq->data;
    job.grad = param->grad->data;
    job.avg_weight = (float)(1.0 - (double)beta1);
    job.beta2 = beta2;
    job.sq_weight = (float)(1.0 - (double)beta2);
    job.neg_step_size = (float)(-(double)lr / bias_correction1);
    job.bc2_sqrt = (float)sqrt(bias_correction2);
    job.eps = eps;
    job.weight_decay = weight_decay;
    job.decay_factor = (float)(1.0 - (double)lr * (double)weight_decay);
    job.decoupled = decoupled ? 1 : 0;
    parallel_for(param->size, ADAM_GRAIN, adam_chunk, &job);
    return AC_OK;
}
