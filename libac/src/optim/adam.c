/*
 * adam.c - one in-place step of Adam, or AdamW with decoupled weight decay,
 * exactly as torch.optim.Adam / AdamW compute it (single-tensor form, amsgrad
 * and maximize off), down to the order of the floating-point operations.
 *
 * The caller owns the two moment tensors and counts the steps. Nothing is
 * allocated here. The update runs in the device's kernel (kernels/cpu/optim.c
 * on the CPU).
 */
#include "optim.h"
#include "graph.h"
#include "kernels/kernels.h"

#include <math.h>

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
    const AcKernels *k;
    AdamArgs args;
    const float *grad;
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
    if (same_device(op, param, param->grad) || same_device(op, param, exp_avg) ||
        same_device(op, param, exp_avg_sq))
        return AC_ERR_DEVICE;
    k = kernels_for(param);
    if (!k->adam_step) return kernel_missing(op, param);
    if (!param->grad || param->size == 0) return AC_OK;

    args.lr = lr;
    args.beta1 = beta1;
    args.beta2 = beta2;
    args.eps = eps;
    args.weight_decay = weight_decay;
    args.decoupled = decoupled ? 1 : 0;
    /* Scalars in double, as PyTorch computes them in Python before the tensor ops. */
    args.bias_correction1 = 1.0 - pow((double)beta1, (double)step);
    args.bias_correction2 = 1.0 - pow((double)beta2, (double)step);
    grad = param->grad->data;
    return k->adam_step(&args, 1, &param->data, &grad, &exp_avg->data, &exp_avg_sq->data,
                        &param->size);
}
