/*
 * grad_norm.c - clip_grad_norm_'s two halves (torch.nn.utils.get_total_norm
 * and clip_grads_with_norm_): the norm of several tensors taken as one vector,
 * and their scaling in place by max_norm over it.
 *
 * One pass over each tensor in its device's kernels (norm_power_sum, scale;
 * kernels/cpu/optim.c): no temporaries; the sums in double, the tensors'
 * results combined in order, so the bits do not depend on the thread count.
 * A graph cannot replay either (the norm goes back to the caller, the scaling
 * writes gradients in place), so a recording fails and runs eagerly.
 */
#include "graph.h"
#include "kernels/kernels.h"

#include <math.h>

/* Each of the count tensors (NULL skipped) is float32, alive, and has the kernel. */
static int tensors_check(const char *op, const AcTensor *const *tensors, int count, int want_scale)
{
    int i;
    if (count < 0 || (count > 0 && !tensors))
        return error_set(AC_ERR_ARG, "%s: count %d is negative or tensors is NULL", op, count);
    for (i = 0; i < count; i++) {
        const AcKernels *k;
        if (!tensors[i]) continue;
        if (tensor_check(op, tensors[i], "tensor")) return ac_last_error_code();
        k = kernels_for(tensors[i]);
        if (want_scale ? !k->scale : !k->norm_power_sum) return kernel_missing(op, tensors[i]);
    }
    return AC_OK;
}

int ac_total_norm(const AcTensor *const *tensors, int count, double norm_type, double *norm)
{
    const char *op = "total_norm";
    double total = 0.0;
    int i;
    if (!norm) return error_set(AC_ERR_ARG, "%s: norm is NULL", op);
    if (tensors_check(op, tensors, count, 0)) return ac_last_error_code();
    if (!(norm_type > 0.0))   /* NaN fails it too */
        return error_set(AC_ERR_ARG, "%s: norm_type must be > 0, got %g", op, norm_type);
    if (graph_recording) graph_unsupported(op);
    for (i = 0; i < count; i++) {
        double part;
        int status;
        if (!tensors[i] || tensors[i]->size == 0) continue;
        status = kernels_for(tensors[i])->norm_power_sum(tensors[i]->data, tensors[i]->size,
                                                        norm_type, &part);
        if (status) return status;
        if (isinf(norm_type)) total = part != part || part > total ? part : total;
        else total += part;
    }
    *norm = isinf(norm_type) || norm_type == 1.0 ? total
          : norm_type == 2.0                   ? sqrt(total)
                                               : pow(total, 1.0 / norm_type);
    return AC_OK;
}

int ac_clip_grads_with_norm(AcTensor *const *tensors, int count, double max_norm, double total_norm)
{
    /* PyTorch's clamp(max_norm / (total_norm + 1e-6), max=1): NaN scales too */
    const double coef = max_norm / (total_norm + 1e-6);
    int i;
    if (tensors_check("clip_grads_with_norm", (const AcTensor *const *)tensors, count, 1))
        return ac_last_error_code();
    if (graph_recording) graph_unsupported("clip_grads_with_norm");
    if (coef >= 1.0) return AC_OK;   /* x * 1 is x */
    for (i = 0; i < count; i++) {
        int status;
        if (!tensors[i] || tensors[i]->size == 0) continue;
        status = kernels_for(tensors[i])->scale(tensors[i]->data, tensors[i]->size, (float)coef);
        if (status) return status;
    }
    return AC_OK;
}
