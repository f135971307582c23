/*
 * sgd.c - one in-place step of stochastic gradient descent, exactly as
 * torch.optim.SGD computes it (single-tensor form, maximize off): L2 weight
 * decay, momentum with dampening, Nesterov momentum.
 *
 * The caller owns the momentum buffer and counts the steps (aicraft.optim.SGD
 * does both; a C training loop does it by hand). Nothing is allocated here.
 * The update runs in the device's kernel (kernels/cpu/optim.c on the CPU).
 */
#include "optim.h"
#include "graph.h"
#include "kernels/kernels.h"

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
    const AcKernels *k;
    SgdArgs args;
    const float *grad;
    float *buf;
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
    if (same_device(op, param, param->grad) ||
        (momentum != 0.0f && same_device(op, param, momentum_buffer)))
        return AC_ERR_DEVICE;
    k = kernels_for(param);
    if (!k->sgd_step) return kernel_missing(op, param);
    if (!param->grad || param->size == 0) return AC_OK;

    args.lr = lr;
    args.momentum = momentum;
    args.dampening = dampening;
    args.weight_decay = weight_decay;
    args.nesterov = nesterov ? 1 : 0;
    args.first_step = step == 1;
    grad = param->grad->data;
    buf = momentum != 0.0f ? momentum_buffer->data : NULL;
    return k->sgd_step(&args, 1, &param->data, &grad, &buf, &param->size);
}
