/*
 * sgd.c - one in-place step of stochastic gradient descent, exactly as
 * torch.optim.SGD computes it (single-tensor form, maximize off): L2 weight
 * decay, momentum with dampening, Nesterov momentum.
 *
 * The caller owns the momentum buffer and counts the steps (aicraft.optim.SGD
 * does both; a C training loop does it by hand). Nothing is allocated here.
 */
#include "optim.h"
#include "graph.h"

/* Elements per task: below this, handing work to the pool costs more than it saves. */
#define SGD_GRAIN 16384

typedef struct {
    float *param;
    const float *grad;
    float *buf;            /* the momentum buffer; NULL when momentum is 0 */
    float lr, momentum, weight_decay;
    float grad_scale;      /* 1 - dampening */
    int nesterov, first_step;
} SgdJob;

/* One fused pass: every element is read and written once. The branches test
   values fixed for the whole call, so the compiler lifts them out of the loop. */
static void sgd_chunk(void *ctx, int64_t begin, int64_t end)
{
    const SgdJob *job = ctx;
    float *p = job->param, *buf = job->buf;
    const float *g = job->grad;
    const float lr = job->lr, mu = job->momentum, wd = job->weight_decay, scale = job->grad_scale;
    const int nesterov = job->nesterov, first_step = job->first_step;
    int64_t i;
    for (i = begin; i < end; i++) {
        float d = g[i];
        if (wd != 0.0f) d += wd * p[i];
        if (buf) {
            /* PyTorch starts the buffer as a plain copy of the first gradient, undamped. */
            float b = first_step ? d : mu * buf[i] + scale * d;
            buf[i] = b;
            d = nesterov ? d + mu * b : b;
        }
        p[i] -= lr * d;
    }
}

static int sgd_step_replay(AcTensor **t, const double *attr)
{
    return ac_sgd_step(t[0], t[1], (int64_t)attr[0], (float)attr[1], (float)attr[2], (float)attr[3],
                       (int)attr[4], (float)attr[5]);
}

int ac_sgd_step(AcTensor *param, AcTensor *momentum_buffer, int64_t step, float lr,
                float momentum, float dampening, int nesterov, float weight_decay)
{
    if (ops_observed) return graph_call("sgd_step", sgd_step_replay, 2, 0, (AcTensor *[]){param, momentum_buffer}, (double[]){(double)step, lr, momentum, dampening, nesterov, weight_decay}, 6);
    const char *op = "sgd_step";
    SgdJob job;
    if (optim_check_param(op, param, step, lr)) return ac_last_error_code();
    /* The comparisons are written so that NaN fails them too. */
    if (!(momentum >= 0.0f)) return error_set(AC_ERR_ARG, "%s: invalid momentum %g", op, momentum);
    if (!(weight_decay >= 0.0f))
        return error_set(AC_ERR_ARG, "%s: invalid weight_decay %g", op, weight_decay);
    if (nesterov && (momentum <= 0.0f || dampening != 0.0f))
        return error_set(AC_ERR_ARG, "%s: Nesterov momentum requires a momentum and zero dampening "
                         "(momentum %g, dampening %g)", op, momentum, dampening);
    if (momentum != 0.0f && optim_check_state(op, param, momentum_buffer, "momentum_buffer"))
        return ac_last_error_code();
    if (optim_check_grad(op, param)) return ac_last_error_code();
    if (!param->grad || param->size == 0) return AC_OK;

    job.param = param->data;
    job.grad = param->grad->data;
    job.buf = momentum != 0.0f ? momentum_buffer->data : NULL;
    job.lr = lr;
    job.momentum = momentum;
    job.weight_decay = weight_decay;
    job.grad_scale = 1.0f - dampening;
    job.nesterov = nesterov ? 1 : 0;
    job.first_step = step == 1;
    parallel_for(param->size, SGD_GRAIN, sgd_chunk, &job);
    return AC_OK;
}
