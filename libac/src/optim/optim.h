/*
 * optim.h - the argument checks that every optimizer step (sgd.c, adam.c,
 * adaptive.c) makes, in the order they make them: the parameter, the learning
 * rate and the step first, then each state tensor, then the gradient.
 */
#ifndef AC_OPTIM_H
#define AC_OPTIM_H

#include "internal.h"

/* param is a float32 leaf, lr is a number >= 0 (for updates that do not count steps). */
static inline int optim_check_param_lr(const char *op, const AcTensor *param, float lr)
{
    if (tensor_check(op, param, "param")) return ac_last_error_code();
    if (param->node) return error_set(AC_ERR_ARG, "%s: param %s is not a leaf tensor", op,
                                      tensor_shape_str(param));
    /* Written so that NaN fails it too. */
    if (!(lr >= 0.0f)) return error_set(AC_ERR_ARG, "%s: invalid learning rate %g", op, lr);
    return AC_OK;
}

/* As optim_check_param_lr, and step counts from 1. */
static inline int optim_check_param(const char *op, const AcTensor *param, int64_t step, float lr)
{
    if (optim_check_param_lr(op, param, lr)) return ac_last_error_code();
    if (step < 1) return error_set(AC_ERR_ARG, "%s: step %lld is not >= 1", op, (long long)step);
    return AC_OK;
}

/* A state tensor must be float32, of param's shape, with memory of its own. */
static inline int optim_check_state(const char *op, const AcTensor *param, const AcTensor *state,
                                    const char *what)
{
    if (tensor_check(op, state, what)) return ac_last_error_code();
    if (!same_shape(state, param))
        return error_set(AC_ERR_SHAPE, "%s: %s has shape %s but param has shape %s", op, what,
                         tensor_shape_str(state), tensor_shape_str(param));
    if (state->data == param->data || (param->grad && state->data == param->grad->data))
        return error_set(AC_ERR_ARG, "%s: %s shares memory with param or its grad", op, what);
    return AC_OK;
}

/* param's gradient, when it has one, has param's shape. */
static inline int optim_check_grad(const char *op, const AcTensor *param)
{
    if (param->grad && !same_shape(param->grad, param))
        return error_set(AC_ERR_SHAPE, "%s: grad has shape %s but param has shape %s", op,
                         tensor_shape_str(param->grad), tensor_shape_str(param));
    return AC_OK;
}

#endif /* AC_OPTIM_H */
