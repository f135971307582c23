/*
 * cuda/elementwise.cu - the CUDA kernels for elementwise.c: one broadcast-index
 * kernel over an AcMap (kernels.h), and one small functor per op.
 *
 * Each thread takes output elements i (grid-stride), unravels i over the map's
 * merged dims and reads each operand at its strides (0 where broadcast), so one
 * kernel serves same-shape, scalar and broadcast operands alike. A functor gets
 * the operands' values v[0..N) and the op's scalars p0, p1.
 */
#include "kernels/cuda/cuda_kernels.h"

template <int N, class F>
__global__ void map_kernel(AcMap m, F f)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < m.size;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t rest = i, offset[N];
        float v[N];
        for (int k = 0; k < N; k++) offset[k] = 0;
        for (int d = m.ndim - 1; d >= 0; d--) {
            const int64_t index = rest % m.shape[d];
            rest /= m.shape[d];
            for (int k = 0; k < N; k++) offset[k] += index * m.strides[k][d];
        }
        for (int k = 0; k < N; k++) v[k] = m.in[k][offset[k]];
        m.out[i] = f(v, m.p0, m.p1);
    }
}

template <int N, class F>
static int map_run(const AcMap *m, const char *op)
{
    cudaStream_t s = current_stream();
    if (!s) return AC_ERR_DEVICE;
    map_kernel<N, F><<<cuda_blocks(m->size), CUDA_THREADS, 0, s>>>(*m, F());
    return cuda_check_launch(op);
}

#define MAP_KERNEL(name, n, expr)                                                              \
    struct name##_f {                                                                           \
        __device__ float operator()(const float *v, float p0, float p1) const                  \
        {                                                                                       \
            (void)p0;                                                                           \
            (void)p1;                                                                           \
            return expr;                                                                        \
        }                                                                                       \
    };                                                                                          \
    int cuda_##name(const AcMap *m) { return map_run<n, name##_f>(m, #name); }

/* binary ops */
MAP_KERNEL(add, 2, v[0] + v[1])
MAP_KERNEL(sub, 2, v[0] - v[1])
MAP_KERNEL(mul, 2, v[0] * v[1])
MAP_KERNEL(div, 2, v[0] / v[1])
MAP_KERNEL(pow, 2, powf(v[0], v[1]))
/* binary backward: v[0] is grad_out */
MAP_KERNEL(div_backward_b, 3, -(v[0] * v[1]) / v[2])
MAP_KERNEL(pow_backward_base, 3, v[0] * (v[2] == 0.0f ? 0.0f : v[2] * powf(v[1], v[2] - 1.0f)))
/* PyTorch's rule: a zero base with a non-negative exponent has no slope in b. */
MAP_KERNEL(pow_backward_exp, 4, v[0] * (v[2] == 0.0f && v[3] >= 0.0f ? 0.0f : v[1] * logf(v[2])))
/* unary ops and scalar forms */
MAP_KERNEL(add_scalar, 1, v[0] + p0)
MAP_KERNEL(mul_scalar, 1, v[0] * p0)
MAP_KERNEL(rsub_scalar, 1, p0 - v[0])
MAP_KERNEL(div_scalar, 1, v[0] / p0)
MAP_KERNEL(rdiv_scalar, 1, p0 / v[0])
MAP_KERNEL(pow_scalar, 1, powf(v[0], p0))
/* NaN passes through and lo > hi gives hi, as PyTorch */
MAP_KERNEL(clamp, 1, (v[0] < p0 ? p0 : v[0]) > p1 ? p1 : (v[0] < p0 ? p0 : v[0]))
MAP_KERNEL(neg, 1, -v[0])
MAP_KERNEL(exp, 1, expf(v[0]))
MAP_KERNEL(log, 1, logf(v[0]))
MAP_KERNEL(log1p, 1, log1pf(v[0]))
MAP_KERNEL(sqrt, 1, sqrtf(v[0]))
MAP_KERNEL(abs, 1, fabsf(v[0]))
MAP_KERNEL(sin, 1, sinf(v[0]))
MAP_KERNEL(cos, 1, cosf(v[0]))
/* unary backward: v[0] is grad_out, v[1] the saved input or output */
MAP_KERNEL(rdiv_scalar_backward, 2, -v[0] * p0 / (v[1] * v[1]))
MAP_KERNEL(pow_scalar_backward, 2, v[0] * (p0 * powf(v[1], p0 - 1.0f)))
MAP_KERNEL(clamp_backward, 2, v[1] >= p0 && v[1] <= p1 ? v[0] : 0.0f)
MAP_KERNEL(log1p_backward, 2, v[0] / (1.0f + v[1]))
MAP_KERNEL(sqrt_backward, 2, v[0] / (2.0f * v[1]))
MAP_KERNEL(abs_backward, 2, v[0] * (v[1] > 0.0f ? 1.0f : (v[1] < 0.0f ? -1.0f : 0.0f)))
MAP_KERNEL(sin_backward, 2, v[0] * cosf(v[1]))
MAP_KERNEL(cos_backward, 2, -v[0] * sinf(v[1]))
