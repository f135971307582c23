/*
 * lbfgs.c - the vector work of L-BFGS (aicraft.optim.LBFGS, which keeps the
 * history and runs the iterations and line search in Python): copying the
 * parameters or their gradients into one flat vector and back, moving the
 * parameters along a flat direction, and the two-loop recursion that turns the
 * gradient into the next direction. DistributedDataParallel uses the flat
 * gradients too: its buckets go to MPI as flat vectors and come back summed
 * over ranks (ac_grads_from_flat), or, between ranks that share memory, are
 * averaged straight from every rank's bucket (ac_grads_mean_of_flats).
 *
 * Nothing is allocated here; the caller owns every vector.
 */
#include "optim.h"
#include "graph.h"
#include "kernels/kernels.h"

#include <string.h>

/* params[0..n_params) are tensors whose sizes add up to flat's; writable
   ones (the parameters are written) must be leaves. */
static int check_flat(const char *op, AcTensor *const *params, int n_params, const AcTensor *flat,
                      int writable)
{
    int64_t total = 0;
    int i;
    if (graph_recording) graph_unsupported(op);   /* not recorded: the step runs eagerly */
    if (!params) return error_set(AC_ERR_ARG, "%s: params is NULL", op);
    if (n_params < 1) return error_set(AC_ERR_ARG, "%s: n_params %d is not >= 1", op, n_params);
    if (tensor_check(op, flat, "flat") || cpu_only(op, &flat, 1)) return ac_last_error_code();
    for (i = 0; i < n_params; i++) {
        if (!params[i]) return error_set(AC_ERR_ARG, "%s: params[%d] is NULL", op, i);
        if (tensor_check(op, params[i], "a param") ||
            cpu_only(op, (const AcTensor *[]){params[i], params[i]->grad}, 2))
            return ac_last_error_code();
        if (writable && params[i]->node)
            return error_set(AC_ERR_ARG, "%s: params[%d] %s is not a leaf tensor", op, i,
                             tensor_shape_str(params[i]));
        total += params[i]->size;
    }
    if (total != flat->size)
        return error_set(AC_ERR_SHAPE, "%s: flat %s has %lld elements but the params have %lld", op,
                         tensor_shape_str(flat), (long long)flat->size, (long long)total);
    return AC_OK;
}

int ac_params_to_flat(AcTensor *const *params, int n_params, AcTensor *flat)
{
    int64_t offset = 0;
    int i;
    if (check_flat("params_to_flat", params, n_params, flat, 0)) return ac_last_error_code();
    for (i = 0; i < n_params; i++) {
        const AcTensor *p = params[i];
        if (p->size) memcpy(flat->data + offset, p->data, (size_t)p->size * sizeof(float));
        offset += p->size;
    }
    return AC_OK;
}

int ac_grads_to_flat(AcTensor *const *params, int n_params, AcTensor *flat)
{
    int64_t offset = 0;
    int i;
    if (check_flat("grads_to_flat", params, n_params, flat, 0)) return ac_last_error_code();
    for (i = 0; i < n_params; i++) {
        const AcTensor *grad = params[i]->grad;
        if (grad && grad->size != params[i]->size)
            return error_set(AC_ERR_SHAPE, "grads_to_flat: params[%d] %s has a grad of shape %s", i,
                             tensor_shape_str(params[i]), tensor_shape_str(grad));
    }
    for (i = 0; i < n_params; i++) {
        const AcTensor *p = params[i];
        size_t bytes = (size_t)p->size * sizeof(float);
        if (bytes) {
            if (!p->grad) memset(flat->data + offset, 0, bytes);
            else if (p->grad->data != flat->data + offset)   /* else a view of flat: there already */
                memcpy(flat->data + offset, p->grad->data, bytes);
        }
        offset += p->size;
    }
    return AC_OK;
}

/* Every param has a grad of its own size, to be written. */
static int check_grads(const char *op, AcTensor *const *params, int n_params)
{
    int i;
    for (i = 0; i < n_params; i++) {
        const AcTensor *grad = params[i]->grad;
        if (!grad)
            return error_set(AC_ERR_ARG, "%s: params[%d] %s has no grad", op, i, tensor_shape_str(params[i]));
        if (grad->size != params[i]->size)
            return error_set(AC_ERR_SHAPE, "%s: params[%d] %s has a grad of shape %s", op, i,
                             tensor_shape_str(params[i]), tensor_shape_str(grad));
    }
    return AC_OK;
}

int ac_grads_from_flat(AcTensor *const *params, int n_params, float scale, const AcTensor *flat)
{
    int64_t offset = 0, j;
    int i;
    if (check_flat("grads_from_flat", params, n_params, flat, 0)) return ac_last_error_code();
    if (check_grads("grads_from_flat", params, n_params)) return ac_last_error_code();
    for (i = 0; i < n_params; i++) {
        float *g = params[i]->grad->data;
        const float *d = flat->data + offset;
        for (j = 0; j < params[i]->size; j++) g[j] = scale * d[j];
        offset += params[i]->size;
    }
    return AC_OK;
}

enum { MEAN_CHUNK = 2048 };   /* floats: 8 KB */

int ac_grads_mean_of_flats(AcTensor *const *params, int n_params, float scale, AcTensor *const *flats,
                           int n_flats)
{
    int64_t offset = 0, j;
    int i, k;
    if (!flats) return error_set(AC_ERR_ARG, "grads_mean_of_flats: flats is NULL");
    if (n_flats < 1) return error_set(AC_ERR_ARG, "grads_mean_of_flats: n_flats %d is not >= 1", n_flats);
    for (k = 0; k < n_flats; k++)
        if (check_flat("grads_mean_of_flats", params, n_params, flats[k], 0)) return ac_last_error_code();
    if (check_grads("grads_mean_of_flats", params, n_params)) return ac_last_error_code();
    for (i = 0; i < n_params; i++) {   /* a grad is written while every flat is read */
        const AcTensor *g = params[i]->grad;
        for (k = 0; k < n_flats; k++)
            if (g->data < flats[k]->data + flats[k]->size && flats[k]->data < g->data + g->size)
                return error_set(AC_ERR_ARG, "grads_mean_of_flats: params[%d] %s has a grad in flats[%d]",
                                 i, tensor_shape_str(params[i]), k);
    }
    for (i = 0; i < n_params; i++) {
        float *g = params[i]->grad->data;
        int64_t start, end, n = params[i]->size;
        /* In chunks that stay in L1 while every rank's part is added, in rank order
           (every rank gets the same bits). */
        for (start = 0; start < n; start = end) {
            end = start + MEAN_CHUNK < n ? start + MEAN_CHUNK : n;
            memcpy(g + start, flats[0]->data + offset + start, (size_t)(end - start) * sizeof(float));
            for (k = 1; k < n_flats; k++) {
                const float *d = flats[k]->data + offset;
                for (j = start; j < end; j++) g[j] += d[j];
            }
            for (j = start; j < end; j++) g[j] *= scale;
        }
        offset += n;
    }
    return AC_OK;
}

int ac_params_from_flat(AcTensor *const *params, int n_params, const AcTensor *flat)
{
    int64_t offset = 0;
    int i;
    if (check_flat("params_from_flat", params, n_params, flat, 1)) return ac_last_error_code();
    for (i = 0; i < n_params; i++) {
        AcTensor *p = params[i];
        if (p->size) memcpy(p->data, flat->data + offset, (size_t)p->size * sizeof(float));
        offset += p->size;
    }
    return AC_OK;
}

int ac_params_add_flat(AcTensor *const *params, int n_params, float alpha, const AcTensor *flat)
{
    int64_t offset = 0, j;
    int i;
    if (check_flat("params_add_flat", params, n_params, flat, 1)) return ac_last_error_code();
    for (i = 0; i < n_params; i++) {
        float *p = params[i]->data;
        const float *d = flat->data + offset;
        for (j = 0; j < params[i]->size; j++) p[j] += alpha * d[j];
        offset += params[i]->size;
    }
    return AC_OK;
}

/* ---- the two-loop recursion ------------------------------------------------- */

/* Accumulated in double, so the result does not hang on the summation order. */
static float dot(const float *a, const float *b, int64_t n)
{
    double total = 0.0;
    int64_t i;
    for (i = 0; i < n; i++) total += (double)a[i] * (double)b[i];
    return (float)total;
}

static void axpy(float *y, float alpha, const float *x, int64_t n)
{
    int64_t i;
    for (i = 0; i < n; i++) y[i] += alpha * x[i];
}

/* A history vector is there, has the gradient's size, and is not the output. */
static int check_history(const char *op, AcTensor *const *vectors, const char *what, int i,
                         const AcTensor *grad, const AcTensor *direction)
{
    const AcTensor *v = vectors[i];
    if (!v) return error_set(AC_ERR_ARG, "%s: %s[%d] is NULL", op, what, i);
    if (tensor_check(op, v, what) || cpu_only(op, &v, 1)) return ac_last_error_code();
    if (v->size != grad->size)
        return error_set(AC_ERR_SHAPE, "%s: %s[%d] has %lld elements but grad has %lld", op, what, i,
                         (long long)v->size, (long long)grad->size);
    if (v->data == direction->data)
        return error_set(AC_ERR_ARG, "%s: direction shares memory with %s[%d]", op, what, i);
    return AC_OK;
}

int ac_lbfgs_direction(const AcTensor *grad, AcTensor *const *old_dirs, AcTensor *const *old_stps,
                       const float *ro, int n_old, float h_diag, float *al, AcTensor *direction)
{
    const char *op = "lbfgs_direction";
    float *q;
    int64_t n, j;
    int i;
    if (graph_recording) graph_unsupported(op);
    if (tensor_check(op, grad, "grad") || tensor_check(op, direction, "direction") ||
        cpu_only(op, (const AcTensor *[]){grad, direction}, 2))
        return ac_last_error_code();
    if (direction->size != grad->size)
        return error_set(AC_ERR_SHAPE, "%s: direction has %lld elements but grad has %lld", op,
                         (long long)direction->size, (long long)grad->size);
    if (direction->data == grad->data)
        return error_set(AC_ERR_ARG, "%s: direction shares memory with grad", op);
    if (n_old < 0) return error_set(AC_ERR_ARG, "%s: n_old %d is negative", op, n_old);
    if (n_old > 0 && (!old_dirs || !old_stps || !ro || !al))
        return error_set(AC_ERR_ARG, "%s: old_dirs, old_stps, ro and al must not be NULL", op);
    for (i = 0; i < n_old; i++)
        if (check_history(op, old_dirs, "old_dirs", i, grad, direction) ||
            check_history(op, old_stps, "old_stps", i, grad, direction))
            return ac_last_error_code();

    /* As torch.optim.LBFGS: q = -grad, newest pair first; then r = h_diag q, oldest first. */
    n = grad->size;
    q = direction->data;
    for (j = 0; j < n; j++) q[j] = -grad->data[j];
    for (i = n_old - 1; i >= 0; i--) {
        al[i] = dot(old_stps[i]->data, q, n) * ro[i];
        axpy(q, -al[i], old_dirs[i]->data, n);
    }
    for (j = 0; j < n; j++) q[j] *= h_diag;
    for (i = 0; i < n_old; i++) {
        float be = dot(old_dirs[i]->data, q, n) * ro[i];
        axpy(q, al[i] - be, old_stps[i]->data, n);
    }
    return AC_OK;
}
