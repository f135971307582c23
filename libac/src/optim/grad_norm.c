/*
 * grad_norm.c - the norm of several tensors taken as one vector, what
 * clip_grad_norm_ scales the gradients by (torch.nn.utils.get_total_norm).
 *
 * One read pass over each tensor in its device's kernel (norm_power_sum,
 * kernels/cpu/optim.c): no temporaries, sums in double, the tensors' results
 * combined in order. Not here: the scaling (mul_, from Python).
 */
#include "kernels/kernels.h"

#include <math.h>

int ac_total_norm(const AcTensor *const *tensors, int count, double norm_type, double *norm)
{
    const char *op = "total_norm";
    double total = 0.0;
    int i;
    if (!norm) return error_set(AC_ERR_ARG, "%s: norm is NULL", op);
    if (count < 0 || (count > 0 && !tensors))
        return error_set(AC_ERR_ARG, "%s: count %d is negative or tensors is NULL", op, count);
    if (!(norm_type > 0.0))   /* NaN fails it too */
        return error_set(AC_ERR_ARG, "%s: norm_type must be > 0, got %g", op, norm_type);
    for (i = 0; i < count; i++) {
        const AcKernels *k;
        if (!tensors[i]) continue;
        if (tensor_check(op, tensors[i], "tensor")) return ac_last_error_code();
        k = kernels_for(tensors[i]);
        if (!k->norm_power_sum) return kernel_missing(op, tensors[i]);
    }
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
