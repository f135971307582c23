/*
 * ac.h - the public C API of libac, the core of aicraft.
 *
 * Conventions, everywhere below:
 *  - Every function validates its arguments. It never aborts, prints or exits.
 *  - A function returning a pointer returns NULL on failure; one returning int
 *    returns AC_OK (0) or a negative AcStatus. Either way the calling thread's
 *    error is set: ac_last_error_code(), ac_last_error() ("op: what went wrong").
 *  - Tensors are contiguous, row-major, ndim <= AC_MAX_DIMS, with data aligned
 *    to 64 bytes (external memory: to its element size). Dtypes follow
 *    PyTorch's: binary ops promote as torch.result_type (ac_result_type),
 *    integers compute as integers (exact, wrapping), bool add/mul are logic,
 *    and float math of integer inputs gives float32 (ac_exp of int64). An op
 *    that has no integer form (conv, softmax, losses...) takes float32 and
 *    fails with AC_ERR_DTYPE for others.
 *  - Ownership: a tensor made while a scope (ac_mem_checkpoint) is open lives in
 *    that scope and dies when it is restored at the latest. ac_tensor_free on it
 *    says the caller is done with it: if nothing else refers to it (a graph
 *    node, a view, ac_tensor_retain) and its scope is the thread's innermost,
 *    its memory is reused by the scope's later allocations; otherwise nothing
 *    happens, though one that only graph nodes held goes back when backward
 *    frees those nodes. A tensor made at root (no scope open) is reference counted: the
 *    caller owns one reference and drops it with ac_tensor_free.
 *  - Binary ops broadcast their operands by NumPy's rules.
 *  - Ops record a graph node when grad mode is on and an input requires grad.
 *
 * The block between the AC_CDEF markers is read as-is by build_ffi.py as the
 * CFFI cdef: keep it free of preprocessor lines other than integer #defines.
 */
#ifndef AC_H
#define AC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* AC_CDEF_BEGIN */

#define AC_MAX_DIMS 8
#define AC_MAX_INPUTS 8

/* ---- Errors -------------------------------------------------------------- */

typedef enum {
    AC_OK = 0,
    AC_ERR_ARG = -1,      /* a bad argument: NULL, out of range, wrong value   */
    AC_ERR_SHAPE = -2,    /* shapes that do not fit the op                     */
    AC_ERR_MEMORY = -3,   /* allocation failed or the memory limit was hit     */
    AC_ERR_SCOPE = -4,    /* a checkpoint that is not open on this thread      */
    AC_ERR_INDEX = -5,    /* an index (class id, position) out of range        */
    AC_ERR_STATE = -6,    /* the call does not fit the object's state          */
    AC_ERR_IO = -7,       /* a file could not be opened, read or written       */
    AC_ERR_FORMAT = -8,   /* a file's content is corrupt or unsupported        */
    AC_ERR_GRADCHECK = -9, /* ac_gradient_check found a mismatch               */
    AC_ERR_DTYPE = -10,    /* a tensor of a dtype the op does not take          */
    AC_ERR_DEVICE = -11    /* tensors on different devices, or no kernel there  */
} AcStatus;

int ac_last_error_code(void);            /* the calling thread's last error; AC_OK if none */
const char *ac_last_error(void);         /* its message; "" if none; valid until the next error */
void ac_clear_error(void);

/* ---- Memory: scopes over arenas ----------------------------------------- */

typedef struct {
    int32_t depth;     /* scope depth this checkpoint opened; -1 on failure */
    uint32_t serial;   /* tells a live checkpoint from a stale one          */
} AcCheckpoint;

typedef struct {
    int64_t bytes_in_use;    /* tensor, node and scratch bytes not yet freed     */
    int64_t peak_bytes;      /* the highest bytes_in_use seen                    */
    int64_t live_tensors;    /* tensors not yet freed (root and scoped)          */
    int64_t live_nodes;      /* graph nodes not yet freed                        */
    int64_t arena_reserved;  /* bytes held by arena blocks, in use or cached     */
    int64_t memory_limit;    /* 0 when there is none                             */
    int64_t heap_allocations;  /* mallocs libac has made since the process began */
    int64_t spare_grad_bytes;  /* dropped grads kept for their parameter's next
                                  backward; not in bytes_in_use, like cached blocks */
    int64_t root_cached_bytes; /* freed root allocations each thread keeps for the next
                                  of the same size; not in bytes_in_use */
    int64_t cuda_mallocs;        /* cudaMalloc calls libac has made (flat once warm) */
    int64_t device_bytes_in_use; /* CUDA tensors' data, all devices; not in bytes_in_use */
    int64_t device_peak_bytes;   /* the highest device_bytes_in_use seen */
    int64_t device_reserved;     /* device bytes held from cudaMalloc, in use or cached */
} AcMemStats;

AcCheckpoint ac_mem_checkpoint(void);    /* open a scope on this thread */
int ac_mem_restore(AcCheckpoint cp);     /* free all allocated since cp, ending inner scopes too */
int ac_mem_depth(void);                  /* scopes open on this thread; 0 at root */
int ac_set_memory_limit(int64_t bytes);  /* allocations past it fail with AC_ERR_MEMORY; 0 lifts it */
int ac_memory_stats(AcMemStats *out);    /* process-wide counters */

/* ---- Tensors ------------------------------------------------------------- */

typedef struct AcTensor AcTensor;
typedef struct AcGradNode AcGradNode;

/* Element types: float32; int64 (exact integer arithmetic, indices, counts);
   bool (one byte, 0 or 1: masks, comparison results, logic); uint8 (bytes,
   wrapping modulo 256: image pixels); int8 (quantized weights, see INT8
   inference). */
typedef enum { AC_FLOAT32 = 0, AC_INT64 = 1, AC_BOOL = 2, AC_UINT8 = 3, AC_INT8 = 4 } AcDtype;

/* Where a tensor's data lives: the CPU, or CUDA device number device_index
   (builds with the CUDA backend). An op's inputs must all be on one device. */
typedef enum { AC_CPU = 0, AC_CUDA = 1 } AcDevice;
typedef int (*AcBackwardFn)(AcGradNode *node, const AcTensor *grad_out, AcTensor **grad_in);

/* Fields are for reading; change a tensor only through the functions below. */
struct AcTensor {
    float *data;             /* the elements; int64, bool and uint8 tensors: cast
                                to int64_t * or uint8_t * (see dtype) */
    int64_t shape[AC_MAX_DIMS];
    int64_t size;            /* number of elements */
    int32_t ndim;
    int32_t requires_grad;
    AcTensor *grad;          /* leaf gradient, owned by the tensor; NULL until backward */
    int (*grad_hook)(AcTensor *leaf, void *user);   /* see ac_tensor_set_grad_hook */
    void *grad_hook_user;
    int64_t grad_hook_uses;  /* used inside ac_backward only */
    AcGradNode *node;        /* the op that produced it; NULL for a leaf */
    AcTensor *base;          /* a view's owner of data (reshape, detach); else NULL */
    int32_t refcount;        /* root tensors only; 0 for scoped ones */
    int32_t scope_depth;     /* 0 at root */
    int32_t dtype;           /* AcDtype */
    int32_t device;          /* AcDevice */
    int32_t device_index;    /* which CUDA device; 0 on the CPU */
};

/* A graph node: made by an op, freed with its output tensor. */
struct AcGradNode {
    const char *op;                    /* "add", "matmul", ... */
    AcTensor *output;
    AcTensor *inputs[AC_MAX_INPUTS];
    int32_t n_inputs;
    AcBackwardFn backward;             /* fills grad_in[i] for inputs that need it; NULL
                                          once backward freed the node's graph */
    void *context;                     /* what forward saved for backward */
    AcTensor *pending_grad;            /* used inside ac_backward only */
    uint32_t visit;                    /* used inside ac_backward only */
};

AcTensor *ac_tensor_new(const int64_t *shape, int ndim);            /* zero-filled */
AcTensor *ac_tensor_from_data(const float *data, const int64_t *shape, int ndim); /* copies */
/* The same for any dtype: data holds float, int64_t or uint8_t elements (bool: 0 or 1). */
AcTensor *ac_tensor_new_typed(const int64_t *shape, int ndim, int dtype);
AcTensor *ac_tensor_from_typed(const void *data, const int64_t *shape, int ndim, int dtype);
int64_t ac_dtype_size(int dtype);        /* bytes per element; < 0 for an unknown dtype */
const char *ac_dtype_name(int dtype);    /* "float32", "int64", "bool", "uint8", "int8"; else "unknown" */
/* a converted to dtype: to int64 and uint8 truncates toward zero (uint8 then wraps
   modulo 256, as C's cast from int64), to bool is != 0. float32 to float32 is a
   differentiable copy; other casts record no graph. */
AcTensor *ac_to_dtype(const AcTensor *a, int dtype);
AcTensor *ac_full(const int64_t *shape, int ndim, float value);
AcTensor *ac_arange(double start, double stop, double step);
AcTensor *ac_eye(int64_t n, int64_t m);
AcTensor *ac_rand(const int64_t *shape, int ndim);                 /* uniform [0, 1) */
AcTensor *ac_randn(const int64_t *shape, int ndim);                /* standard normal */
int ac_manual_seed(uint64_t seed);                                 /* this thread's generator */
/* ---- scripts helper: generator state, permutations and sampling ---- */
/* This thread's generator state, whole (4 xoshiro words, a spare-normal flag and its
   float bits): a caller saves it, runs draws from another state, and restores it. */
#define AC_RNG_STATE_WORDS 6
int ac_rng_get_state(uint32_t state[AC_RNG_STATE_WORDS]);
int ac_rng_set_state(const uint32_t state[AC_RNG_STATE_WORDS]);
/* int64 (n,): a uniformly random permutation of 0..n-1 (Fisher-Yates). */
AcTensor *ac_randperm(int64_t n);
/* int64 indices drawn from the categories of probs (float32 (C,) or (R, C), rows of
   non-negative finite weights, not all zero): (num_samples,) or (R, num_samples).
   Without replacement each row's draws are distinct and num_samples may not exceed
   the row's non-zero weights. */
AcTensor *ac_multinomial(const AcTensor *probs, int64_t num_samples, int replacement);
/* ---- end scripts helper ---- */
int ac_tensor_free(AcTensor *t);         /* drop a reference; a scoped tensor may be reused (above) */
int ac_tensor_retain(AcTensor *t);       /* add a reference; a scoped tensor then lives to its scope's end */
AcTensor *ac_tensor_clone(const AcTensor *t);   /* a differentiable copy */
AcTensor *ac_tensor_detach(const AcTensor *t);  /* shares data, no graph */
AcTensor *ac_tensor_keep(const AcTensor *t);    /* a detached copy made at root, whatever scope is open */
int ac_tensor_set_requires_grad(AcTensor *t, int requires_grad); /* leaves only */
int ac_tensor_zero_grad(AcTensor *t);    /* drops t->grad; kept for t's next grad if unshared */
int ac_tensor_copy_(AcTensor *dst, const AcTensor *src); /* dst.data = src.data converted to dst's
                                                            dtype, same size, no graph */
int ac_tensor_fill_(AcTensor *t, double value);           /* in place, no graph; any dtype */
int ac_tensor_uniform_(AcTensor *t, float lo, float hi);  /* in place from this thread's generator */
int ac_tensor_normal_(AcTensor *t, float mean, float std);

/* ---- Elementwise ops ----------------------------------------------------- */

AcTensor *ac_add(const AcTensor *a, const AcTensor *b);
AcTensor *ac_sub(const AcTensor *a, const AcTensor *b);
AcTensor *ac_mul(const AcTensor *a, const AcTensor *b);
AcTensor *ac_div(const AcTensor *a, const AcTensor *b);
AcTensor *ac_pow(const AcTensor *a, const AcTensor *b);
AcTensor *ac_add_scalar(const AcTensor *a, float s);       /* a + s */
AcTensor *ac_mul_scalar(const AcTensor *a, float s);       /* a * s */
AcTensor *ac_rsub_scalar(const AcTensor *a, float s);      /* s - a */
AcTensor *ac_div_scalar(const AcTensor *a, float s);       /* a / s */
AcTensor *ac_rdiv_scalar(const AcTensor *a, float s);      /* s / a */
AcTensor *ac_pow_scalar(const AcTensor *a, float p);       /* a ** p */
AcTensor *ac_neg(const AcTensor *a);
AcTensor *ac_exp(const AcTensor *a);
AcTensor *ac_log(const AcTensor *a);
AcTensor *ac_log1p(const AcTensor *a);                    /* log(1 + a), exact for small a */
AcTensor *ac_sqrt(const AcTensor *a);
AcTensor *ac_abs(const AcTensor *a);
AcTensor *ac_sin(const AcTensor *a);
AcTensor *ac_cos(const AcTensor *a);
AcTensor *ac_clamp(const AcTensor *a, float lo, float hi); /* -INFINITY / INFINITY for no bound */
/* In place, recording no graph (PyTorch's add_, sub_, mul_, div_): a = a <op> b, b
   broadcast to a's shape (b may be a, or share its memory), or a = a <op> s. */
int ac_add_(AcTensor *a, const AcTensor *b);
int ac_sub_(AcTensor *a, const AcTensor *b);
int ac_mul_(AcTensor *a, const AcTensor *b);
int ac_div_(AcTensor *a, const AcTensor *b);
int ac_add_scalar_(AcTensor *a, float s);
int ac_mul_scalar_(AcTensor *a, float s);
int ac_div_scalar_(AcTensor *a, float s);

/* ---- dtypes: type promotion and integer arithmetic ------------------------ */
/* PyTorch's type promotion (torch.result_type). Each operand is a dtype and a
   kind: AC_KIND_TENSOR (a tensor with dims), AC_KIND_ZERO_DIM (a 0-d tensor) or
   AC_KIND_SCALAR (a Python number: dtype AC_BOOL, AC_INT64 or AC_FLOAT32 for a
   bool, int or float). Categories bool < integer < float: a higher category
   wins whatever its kind; within the highest category, tensors with dims decide
   over 0-d tensors, and those over scalars. Returns the dtype, or AC_ERR_DTYPE
   (error set) when there is none (uint8 with int8: torch's int16). */
typedef enum { AC_KIND_TENSOR = 0, AC_KIND_ZERO_DIM = 1, AC_KIND_SCALAR = 2 } AcOperandKind;
int ac_result_type(int dtype_a, int kind_a, int dtype_b, int kind_b);

/* Binary ops of any dtypes, by PyTorch's rules: the result has ac_result_type's
   dtype (div: float32 for integer operands), integers compute as integers
   (exact over int64, wrapping on overflow; uint8 wraps modulo 256), bool add
   and mul are logical or and and. floor_divide and remainder follow Python's
   sign rules (integer division by zero fails with AC_ERR_ARG); pow of integers
   is an integer (a negative scalar exponent fails, as torch); bitwise ops and
   shifts take integers and bool only. flags: AC_SCALAR_A / AC_SCALAR_B mark an
   operand (0-d) that stands for a Python number. Float results are
   differentiable where the float op is (add, sub, mul, div, pow). */
typedef enum {
    AC_OP_ADD = 0, AC_OP_SUB, AC_OP_MUL, AC_OP_DIV, AC_OP_POW, AC_OP_FLOOR_DIVIDE,
    AC_OP_REMAINDER, AC_OP_BITWISE_AND, AC_OP_BITWISE_OR, AC_OP_BITWISE_XOR,
    AC_OP_LSHIFT, AC_OP_RSHIFT, AC_OP_MAXIMUM, AC_OP_MINIMUM
} AcBinaryOp;
#define AC_SCALAR_A 1
#define AC_SCALAR_B 2
AcTensor *ac_binary(int op, const AcTensor *a, const AcTensor *b, int flags);
/* ~a: bitwise not of an integer tensor, logical not of a bool one. */
AcTensor *ac_bitwise_not(const AcTensor *a);

/* ---- Comparisons and selection --------------------------------------------- */
/* Elementwise tests with broadcasting, giving bool tensors; operands of any dtype
   (compared as numbers; nonzero is true for the logical ops). No graph. */

typedef enum { AC_EQ = 0, AC_NE = 1, AC_LT = 2, AC_LE = 3, AC_GT = 4, AC_GE = 5 } AcCompare;
typedef enum { AC_AND = 0, AC_OR = 1, AC_XOR = 2 } AcLogical;

AcTensor *ac_compare(const AcTensor *a, const AcTensor *b, int op);        /* a <op> b */
/* a <op> b compared in their promoted dtype (exact for integers), flags as ac_binary's */
AcTensor *ac_compare_typed(const AcTensor *a, const AcTensor *b, int op, int flags);
AcTensor *ac_compare_scalar(const AcTensor *a, double s, int op);          /* a <op> s */
AcTensor *ac_logical(const AcTensor *a, const AcTensor *b, int op);
AcTensor *ac_logical_not(const AcTensor *a);
/* cond ? a : b, broadcast over all three; cond of any dtype (nonzero is true),
   a and b float32, differentiable in a and b. */
AcTensor *ac_where(const AcTensor *cond, const AcTensor *a, const AcTensor *b);
/* where of any dtypes: the result has a's and b's promoted dtype (flags as
   ac_binary's), differentiable in a and b when it is float32. */
AcTensor *ac_where_typed(const AcTensor *cond, const AcTensor *a, const AcTensor *b, int flags);

/* ---- Activations --------------------------------------------------------- */

AcTensor *ac_relu(const AcTensor *a);
AcTensor *ac_sigmoid(const AcTensor *a);
AcTensor *ac_tanh(const AcTensor *a);
AcTensor *ac_gelu(const AcTensor *a);                      /* exact, erf form */
AcTensor *ac_softmax(const AcTensor *a, int dim);
AcTensor *ac_log_softmax(const AcTensor *a, int dim);

/* ---- Pointwise math and activations (pointwise.c) ------------------------ */
/* One op code picks the math. float32 inputs give float32, differentiable; the
   tests (isnan .. signbit) give bool, no graph, for any dtype. Integer inputs
   (int64, uint8, bool) are taken only where PyTorch keeps integers, computed
   exactly: sign, square (bool gives int64), floor, ceil, round (decimals 0),
   trunc, and, not on bool, hardtanh (bounds truncated to integers) and
   threshold (threshold and value truncated); other ops fail with AC_ERR_DTYPE (convert to
   float32 first).
   p0, p1, p2 are the op's scalars, named after the op; unused ones are ignored. */

typedef enum {
    AC_PW_RSQRT, AC_PW_SQUARE, AC_PW_RECIPROCAL, AC_PW_ERF, AC_PW_ERFC, AC_PW_ERFINV,
    AC_PW_EXPM1, AC_PW_EXP2, AC_PW_LOG2, AC_PW_LOG10, AC_PW_SIGN, AC_PW_FLOOR, AC_PW_CEIL,
    AC_PW_ROUND,        /* p0: decimals (half to even, through x * 10^decimals) */
    AC_PW_TRUNC, AC_PW_FRAC, AC_PW_TAN, AC_PW_ASIN, AC_PW_ACOS, AC_PW_ATAN, AC_PW_SINH,
    AC_PW_COSH, AC_PW_ASINH, AC_PW_ACOSH, AC_PW_ATANH,
    AC_PW_LOGIT,        /* p0: eps clamping x to [eps, 1 - eps]; < 0 for none */
    AC_PW_SINC, AC_PW_LGAMMA, AC_PW_DIGAMMA,
    AC_PW_NAN_TO_NUM,   /* p0 for NaN, p1 for inf, p2 for -inf */
    AC_PW_SILU,
    AC_PW_LEAKY_RELU,   /* p0: negative slope */
    AC_PW_SOFTPLUS,     /* p0: beta (not 0), p1: threshold (linear above it) */
    AC_PW_ELU,          /* p0 alpha, p1 scale, p2 input scale: elu, celu and selu */
    AC_PW_GELU_TANH,    /* gelu's tanh approximation */
    AC_PW_HARDTANH,     /* p0 min, p1 max (relu6: 0, 6) */
    AC_PW_MISH, AC_PW_HARDSWISH, AC_PW_HARDSIGMOID,
    AC_PW_HARDSHRINK,   /* p0: lambda */
    AC_PW_SOFTSHRINK,   /* p0: lambda */
    AC_PW_TANHSHRINK, AC_PW_SOFTSIGN, AC_PW_LOGSIGMOID,
    AC_PW_THRESHOLD,    /* p0 threshold, p1 the value at or below it */
    AC_PW_ISNAN, AC_PW_ISINF, AC_PW_ISPOSINF, AC_PW_ISNEGINF, AC_PW_ISFINITE, AC_PW_SIGNBIT,
    AC_PW_ANGLE,        /* of a real number: pi below 0, else 0 (NaN stays) */
    AC_PW_ENTR,         /* -x log x (torch.special.entr) */
    AC_PW_ERFCX,        /* exp(x^2) erfc(x) */
    AC_PW_NDTRI,        /* the standard normal's quantile */
    AC_PW_LOG_NDTR,     /* log of the standard normal's CDF */
    AC_PW_I0, AC_PW_I0E, AC_PW_I1, AC_PW_I1E,   /* modified Bessel; e: times exp(-|x|) */
    AC_PW_POLYGAMMA,    /* p0: n >= 0, the derivative of digamma's order */
    AC_PW_COUNT
} AcPointwise;

/* Binary, broadcast. Both float32: float32, differentiable (heaviside and
   nextafter and zeta are not: AC_ERR_STATE when an input requires grad in grad
   mode).
   Both integer: maximum .. clamp_max, fmod (AC_ERR_ARG on a zero divisor),
   heaviside, gcd and lcm give the promoted integer dtype (bool < uint8 < int64),
   exactly (gcd and lcm take only integers);
   mixed or other ops fail with AC_ERR_DTYPE. maximum/minimum propagate NaN and
   split the gradient of a tie; fmax/fmin ignore NaN; clamp_min/clamp_max are
   clamp with a tensor bound (NaN propagates, the bound gets the gradient where
   it wins). */
typedef enum {
    AC_PW2_ATAN2, AC_PW2_HYPOT, AC_PW2_FMOD, AC_PW2_COPYSIGN, AC_PW2_XLOGY, AC_PW2_LOGADDEXP,
    AC_PW2_LOGADDEXP2, AC_PW2_MAXIMUM, AC_PW2_MINIMUM, AC_PW2_FMAX, AC_PW2_FMIN,
    AC_PW2_CLAMP_MIN, AC_PW2_CLAMP_MAX, AC_PW2_HEAVISIDE, AC_PW2_NEXTAFTER,
    AC_PW2_XLOG1PY,     /* input * log1p(other), 0 where input is 0 */
    AC_PW2_ZETA,        /* Hurwitz zeta(input, other); not differentiable */
    AC_PW2_GCD, AC_PW2_LCM,   /* integers only */
    AC_PW2_COUNT
} AcPointwise2;

AcTensor *ac_pointwise(const AcTensor *a, int op, float p0, float p1, float p2);
AcTensor *ac_pointwise2(const AcTensor *a, const AcTensor *b, int op);

/* ---- Reductions ---------------------------------------------------------- */
/* dims: n_dims axes (negative counts from the end); dims == NULL reduces all.
   ac_sum of an int64 or bool tensor gives int64 (no graph); the others take float32. */

AcTensor *ac_sum(const AcTensor *a, const int *dims, int n_dims, int keepdim);
AcTensor *ac_mean(const AcTensor *a, const int *dims, int n_dims, int keepdim);
AcTensor *ac_max(const AcTensor *a, const int *dims, int n_dims, int keepdim);
AcTensor *ac_min(const AcTensor *a, const int *dims, int n_dims, int keepdim);
AcTensor *ac_var(const AcTensor *a, const int *dims, int n_dims, int correction, int keepdim);
AcTensor *ac_std(const AcTensor *a, const int *dims, int n_dims, int correction, int keepdim);
/* max/min along one dim with the index of the first extreme (int64) in *indices */
AcTensor *ac_max_dim(const AcTensor *a, int dim, int keepdim, AcTensor **indices);
AcTensor *ac_min_dim(const AcTensor *a, int dim, int keepdim, AcTensor **indices);
AcTensor *ac_argmax(const AcTensor *a, int dim, int keepdim);  /* int64 indices, no graph */

/* ---- Linear algebra ------------------------------------------------------ */

/* PyTorch's matmul: 1-D and 2-D operands, and batched with broadcast batch dims */
AcTensor *ac_matmul(const AcTensor *a, const AcTensor *b);

/* C = alpha * op(A) * op(B) + beta * C, row-major; op is A or A^T per trans_a/trans_b.
   op(A) is m x k, op(B) is k x n, C is m x n. */
int ac_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
             float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
             float beta, float *c, int64_t ldc);

/* ---- Shape ops ----------------------------------------------------------- */

typedef struct {
    int64_t start, stop, step;   /* Python's meaning; negative start/stop count from the end */
    int32_t has_start, has_stop; /* 0 means the slice left it out */
    int32_t is_index;            /* 1: pick start alone and drop the dim */
} AcSlice;

AcTensor *ac_reshape(const AcTensor *a, const int64_t *shape, int ndim); /* one -1 allowed; shares data */
AcTensor *ac_flatten(const AcTensor *a, int start_dim, int end_dim);
AcTensor *ac_transpose(const AcTensor *a, int dim0, int dim1);
AcTensor *ac_permute(const AcTensor *a, const int *perm, int ndim);
AcTensor *ac_squeeze(const AcTensor *a, const int *dims, int n_dims);   /* dims == NULL: all size-1 dims */
AcTensor *ac_unsqueeze(const AcTensor *a, int dim);
AcTensor *ac_slice(const AcTensor *a, const AcSlice *slices, int n_slices); /* leading dims; rest kept */
AcTensor *ac_cat(AcTensor *const *tensors, int n, int dim);
AcTensor *ac_stack(AcTensor *const *tensors, int n, int dim);

/* ---- Indexing ------------------------------------------------------------ */
/* Picks and writes of any dtype; index tensors are int64 (negative counts from the
   end where said), masks bool. Out-of-range indices fail with AC_ERR_INDEX. The
   picks are differentiable: their gradient scatter-adds into the input's shape.
   The writes (suffix _) work in place and record no graph. */

/* PyTorch's a[..., index] at dim: int64 index (any shape, negative from the end)
   replaces dim by index's dims; a bool mask covering dims dim .. dim + mask->ndim - 1
   (same sizes) replaces them by one dim of its true elements, in row-major order. */
AcTensor *ac_index(const AcTensor *a, int dim, const AcTensor *index);
/* a[..., index] = values (broadcast to ac_index's result, converted to a's dtype). */
int ac_index_put_(AcTensor *a, int dim, const AcTensor *index, const AcTensor *values);
/* The window ac_slice picks, set to values (broadcast, converted to a's dtype). */
int ac_slice_put_(AcTensor *a, const AcSlice *slices, int n_slices, const AcTensor *values);
/* Entries of a along dim at index (int64, 0-d or 1-d, in [0, size)); dim keeps its place. */
AcTensor *ac_index_select(const AcTensor *a, int dim, const AcTensor *index);
/* out[i][j][k] = a[index[i][j][k]][j][k] for dim 0, and so on (PyTorch's gather):
   index int64 with a's ndim, no larger than a outside dim; out has index's shape. */
AcTensor *ac_gather(const AcTensor *a, int dim, const AcTensor *index);
/* a broadcast to shape (more leading dims allowed; -1 keeps a dim), a copy. */
AcTensor *ac_expand(const AcTensor *a, const int64_t *shape, int ndim);
/* Sorted along dim, stable (ties keep their order, NaN is largest), with the
   int64 positions in *indices; the values are differentiable. float32, int64,
   uint8, int8 and bool (integers by their exact values). */
AcTensor *ac_sort(const AcTensor *a, int dim, int descending, AcTensor **indices);
/* The k largest (smallest unless largest) along dim, in sorted order, as ac_sort. */
AcTensor *ac_topk(const AcTensor *a, int64_t k, int dim, int largest, AcTensor **indices);
AcTensor *ac_cumsum(const AcTensor *a, int dim);          /* cumulative sum along dim; int64 for
                                                             integer and bool a, exact */

/* ---- Layout and scatter (layout.c, scatter.c) ------------------------------ */
/* Byte-exact moves for every dtype; differentiable in their float32 inputs. */

/* a reversed along each of dims (n_dims of them, each once; negative from the end). */
AcTensor *ac_flip(const AcTensor *a, const int *dims, int n_dims);
/* The lower (tril) or upper (triu) triangle of each matrix in a's last two dims,
   from the diagonal offset `diagonal` (positive above the main one); the rest zero. */
AcTensor *ac_tril(const AcTensor *a, int64_t diagonal);
AcTensor *ac_triu(const AcTensor *a, int64_t diagonal);
/* The diagonal of a between dim1 and dim2 (offset above the main one, below when
   negative), as a last dim after the other dims; a copy. */
AcTensor *ac_diagonal(const AcTensor *a, int64_t offset, int dim1, int dim2);
/* a's last dim laid on the diagonal (offset, dim1, dim2 of the result) of zeros:
   the result has one more dim, of size a's last + |offset| at dim1 and dim2. */
AcTensor *ac_diag_embed(const AcTensor *a, int64_t offset, int dim1, int dim2);
/* The windows of size elements, step apart, along dim (PyTorch's Tensor.unfold): dim
   becomes the window count (size - 1 elements may be left over) and a new last dim
   of size holds each window; a copy. */
AcTensor *ac_unfold(const AcTensor *a, int dim, int64_t size, int64_t step);
/* The coordinates in a tensor of shape (shape, ndim) of each flat int64 index, as a
   last dim of ndim (PyTorch's unravel_index: indices past the ends wrap around). */
AcTensor *ac_unravel_index(const AcTensor *indices, const int64_t *shape, int ndim);
/* a tiled repeats[d] times along each of n dims (n >= a's ndim: leading dims are
   added; PyTorch's Tensor.repeat); the gradient sums over the tiles. */
AcTensor *ac_repeat(const AcTensor *a, const int64_t *repeats, int n);
/* The int64 coordinates (n, a's ndim) of a's non-zero elements, row-major; not
   differentiable. */
AcTensor *ac_nonzero(const AcTensor *a);
/* How ac_scatter combines src with the values already at a target. */
typedef enum {
    AC_SCATTER_NONE = 0,   /* write (the last write to a target wins) */
    AC_SCATTER_SUM = 1, AC_SCATTER_PROD = 2, AC_SCATTER_MEAN = 3, AC_SCATTER_AMAX = 4,
    AC_SCATTER_AMIN = 5
} AcScatterReduce;
/* A copy of a with out[..., index[i][j][k], ...] (index at dim) combined with
   src[i][j][k] (PyTorch's scatter, scatter_add, scatter_reduce): index int64 in
   [0, size of dim), a's ndim, no larger than src, nor than a outside dim; src of
   a's dtype. include_self = 0: a target's old value is left out of the reduction.
   Integer mean is floor division; int64 sums wrap; on bool, sum is or, prod and. */
AcTensor *ac_scatter(const AcTensor *a, int dim, const AcTensor *index, const AcTensor *src,
                     int reduce, int include_self);
/* 0, 1, ... each repeated repeats[i] times (int64, 1-d, non-negative). */
AcTensor *ac_repeat_index(const AcTensor *repeats);
/* Where k int64 index tensors of one shape point among the first k dims of a
   tensor of shape (shape, ndim), as row-major positions in those k dims flattened
   (negative indices from the end; out of range: AC_ERR_INDEX). */
AcTensor *ac_ravel_index(AcTensor *const *indices, int k, const int64_t *shape, int ndim);
/* int64 index (any shape, values in [0, num_classes)) as int64 one-hot vectors
   along a new last dim; num_classes = -1 takes the largest value + 1. */
AcTensor *ac_one_hot(const AcTensor *index, int64_t num_classes);

/* ---- Order statistics, scans and products (ops/order.c, ops/scan.c) ---- */
/* Any dtype is ordered exactly (int64 as int64; NaN above every number). The
   picks along a dim give the values (ac_gather of the input: differentiable for
   float32) and their int64 positions in *indices; dim's size must be > 0. */

/* The k-th smallest (k from 1) along dim. */
AcTensor *ac_kthvalue(const AcTensor *a, int64_t k, int dim, int keepdim, AcTensor **indices);
/* The lower median along dim; NaN if the row has one, unless ignore_nan (nanmedian:
   the median of the rest; NaN when all are). */
AcTensor *ac_median_dim(const AcTensor *a, int dim, int keepdim, int ignore_nan, AcTensor **indices);
/* The most frequent value along dim (the smallest of equally frequent ones), at its last position. */
AcTensor *ac_mode(const AcTensor *a, int dim, int keepdim, AcTensor **indices);
/* Running max (largest 1) or min along dim, a's shape; a later equal value or a NaN takes over. */
AcTensor *ac_cummax(const AcTensor *a, int dim, int largest, AcTensor **indices);
/* The distinct values of flattened a, sorted (consecutive 0) or runs of equal neighbours
   (consecutive 1), a's dtype; *inverse (a's shape) and *counts when not NULL (int64). No graph. */
AcTensor *ac_unique(const AcTensor *a, int consecutive, AcTensor **inverse, AcTensor **counts);
/* The same for the slices of a along dim, compared as rows in lexicographic order: the
   distinct slices stacked along dim; *inverse has dim's size. */
AcTensor *ac_unique_dim(const AcTensor *a, int dim, int consecutive, AcTensor **inverse, AcTensor **counts);
/* Insertion positions of values in the rows of sorted (its last dim; same dtype as values;
   1-d for all values, else leading dims as values'): first >= value, or > value if right. */
AcTensor *ac_searchsorted(const AcTensor *sorted, const AcTensor *values, int right);
/* Counts of each value of a (1-d, integer, >= 0) in max(minlength, max + 1) bins: int64,
   or float32 sums of weights (float32, a's length) when weights is not NULL. */
AcTensor *ac_bincount(const AcTensor *a, const AcTensor *weights, int64_t minlength);
/* Histogram of float32 a in bins equal bins over [min, max] (min == max: the data's range). */
AcTensor *ac_histc(const AcTensor *a, int64_t bins, double min, double max);
/* Product along dim; float32 differentiable (exact with zeros), integers and bool give int64. */
AcTensor *ac_prod(const AcTensor *a, int dim, int keepdim);
AcTensor *ac_cumprod(const AcTensor *a, int dim);         /* running product, as ac_prod */
AcTensor *ac_logcumsumexp(const AcTensor *a, int dim);    /* log(cumsum(exp(a))), float32, stable */
/* Square float32 matrices a (..., n, n), by LU with partial pivoting in double (ops/linalg.c),
   differentiable: the determinants (...), and the inverses (AC_ERR_ARG for a singular one). */
AcTensor *ac_det(const AcTensor *a);
AcTensor *ac_inv(const AcTensor *a);
/* Matrix norms of a (..., m, n) from its singular values (one-sided Jacobi, in double):
   kind 0 their sum (nuclear), 1 the largest (ord 2), 2 the smallest (ord -2); differentiable. */
AcTensor *ac_svd_norm(const AcTensor *a, int kind);
/* The singular values of a (..., m, n), largest first: (..., min(m, n)); differentiable. */
AcTensor *ac_svdvals(const AcTensor *a);
/* The lower Cholesky factor L (A = L L^T) of symmetric positive-definite matrices (..., n, n),
   read from their lower triangles; AC_ERR_ARG for one that is not positive-definite. */
AcTensor *ac_cholesky(const AcTensor *a);
/* The eigenvalues, ascending, of symmetric matrices (..., n, n) read from their lower
   triangles (cyclic Jacobi, in double): (..., n); differentiable. */
AcTensor *ac_eigvalsh(const AcTensor *a);
/* exp of square matrices (..., n, n): scaling and squaring around a Taylor polynomial, in
   double; differentiable (the gradient from the exponential of a 2n x 2n block matrix). */
AcTensor *ac_matrix_exp(const AcTensor *a);

/* ---- Losses -------------------------------------------------------------- */

typedef enum { AC_REDUCTION_NONE = 0, AC_REDUCTION_MEAN = 1, AC_REDUCTION_SUM = 2 } AcReduction;

AcTensor *ac_mse_loss(const AcTensor *input, const AcTensor *target, int reduction);
AcTensor *ac_l1_loss(const AcTensor *input, const AcTensor *target, int reduction);
/* PyTorch's: 0.5 (x - t)^2 / beta where |x - t| < beta, else |x - t| - 0.5 beta; beta >= 0 */
AcTensor *ac_smooth_l1_loss(const AcTensor *input, const AcTensor *target, int reduction,
                            float beta);
/* logits (N, C) or (C); target holds class indices (int64, or whole float32 values),
   shape (N) or () */
AcTensor *ac_cross_entropy(const AcTensor *logits, const AcTensor *target, int reduction,
                           float label_smoothing);
AcTensor *ac_binary_cross_entropy(const AcTensor *probs, const AcTensor *target, int reduction);
AcTensor *ac_bce_with_logits(const AcTensor *logits, const AcTensor *target, int reduction);

/* ---- Autograd ------------------------------------------------------------ */

/* Backward frees the graph behind its output as it walks, as PyTorch does: the
   tensors only the graph held are freed, the output keeps its values, and a
   second backward through a freed node fails with AC_ERR_STATE. */
int ac_backward(AcTensor *loss);                          /* loss must have one element */
int ac_backward_with(AcTensor *out, const AcTensor *grad); /* grad has out's shape */
/* Either of the above (grad NULL: ones, for a one-element out); retain_graph 1
   keeps the graph for another backward. */
int ac_backward_ex(AcTensor *out, const AcTensor *grad, int retain_graph);
int ac_set_grad_enabled(int enabled);                     /* per thread; returns the previous mode */
int ac_is_grad_enabled(void);
/* Write the graph behind t as indented text (ac_graph_text) or Graphviz DOT (ac_graph_dot)
   into buf (cap bytes, always terminated). Return the full length, or < 0 on error. */
int64_t ac_graph_text(const AcTensor *t, char *buf, int64_t cap);
int64_t ac_graph_dot(const AcTensor *t, char *buf, int64_t cap);
int ac_print_graph(const AcTensor *t, FILE *out);

/* Compare the gradients of sum(fn(inputs) * w), for a fixed random w, with central
   differences of step eps. Inputs that require grad are checked. Returns AC_OK, or
   AC_ERR_GRADCHECK naming the worst element; *max_err gets the largest error seen. */
typedef AcTensor *(*AcGradcheckFn)(AcTensor *const *inputs, int n_inputs, void *user);
int ac_gradient_check(AcGradcheckFn fn, AcTensor *const *inputs, int n_inputs, void *user,
                      float eps, float atol, float rtol, float *max_err);

/* ---- Convolutional layers ---- */
/* Images are NCHW: (N, C, H, W), or (C, H, W) for one image. */

/* PyTorch's F.conv2d: weight (C_out, C/groups, kH, kW), bias (C_out) or NULL */
AcTensor *ac_conv2d(const AcTensor *x, const AcTensor *weight, const AcTensor *bias,
                    int stride_h, int stride_w, int pad_h, int pad_w, int dil_h, int dil_w,
                    int groups);
/* PyTorch's F.conv_transpose2d without bias (add it after): x (N, C_in, H, W) or (C_in, H, W),
   weight (C_in, C_out/groups, kH, kW); the gradient of conv2d with respect to its input */
AcTensor *ac_conv_transpose2d(const AcTensor *x, const AcTensor *weight, int stride_h, int stride_w,
                              int pad_h, int pad_w, int out_pad_h, int out_pad_w, int dil_h,
                              int dil_w, int groups);
/* x with dim rebuilt to out_size positions: position j is the sum over t < taps of
   weight[j*taps + t] * x[.., index[j*taps + t], ..], or fill where that index is -1
   (weight NULL: 1). F.pad's and F.interpolate's engine. One tap without weight copies any
   dtype; otherwise float32. Not recordable into a graph. */
AcTensor *ac_resample(const AcTensor *x, int dim, int64_t out_size, int taps, const int64_t *index,
                      const float *weight, double fill);
/* max over kernel windows, padding -inf (at most half the kernel); gradient to the first max */
AcTensor *ac_max_pool2d(const AcTensor *x, int kernel_h, int kernel_w, int stride_h, int stride_w,
                        int pad_h, int pad_w);
/* max_pool2d with dilation and ceil_mode (torch's output size rule); *indices (indices not
   NULL) gets each output's argmax in its H*W plane, int64. Options other than max_pool2d's
   and indices are the CPU's only; not recordable into a graph. */
AcTensor *ac_max_pool2d_ex(const AcTensor *x, int kernel_h, int kernel_w, int stride_h,
                           int stride_w, int pad_h, int pad_w, int dil_h, int dil_w, int ceil_mode,
                           AcTensor **indices);
/* max over PyTorch's adaptive windows (CPU); *indices as ac_max_pool2d_ex's */
AcTensor *ac_adaptive_max_pool2d(const AcTensor *x, int out_h, int out_w, AcTensor **indices);
/* mean over kernel windows, padding counted as zeros (count_include_pad=True) */
AcTensor *ac_avg_pool2d(const AcTensor *x, int kernel_h, int kernel_w, int stride_h, int stride_w,
                        int pad_h, int pad_w);
/* avg_pool2d with ceil_mode (CPU): a last partial window's sum is still divided by
   kernel_h * kernel_w (callers rescale to the divisor they want) */
AcTensor *ac_avg_pool2d_ex(const AcTensor *x, int kernel_h, int kernel_w, int stride_h,
                           int stride_w, int pad_h, int pad_w, int ceil_mode);
/* mean over PyTorch's adaptive windows, giving out_h x out_w (1 x 1: global average) */
AcTensor *ac_adaptive_avg_pool2d(const AcTensor *x, int out_h, int out_w);
/* x (N, C, ...), weight/bias (C) or NULL: batch statistics when training, updating the root
   tensors running_mean/var (C, or both NULL) in place as PyTorch does; else the running ones */
AcTensor *ac_batch_norm(const AcTensor *x, const AcTensor *weight, const AcTensor *bias,
                        AcTensor *running_mean, AcTensor *running_var, int training,
                        float momentum, float eps);
/* PyTorch's F.layer_norm: x (..., *normalized_shape) normalised over its last normalized_ndim
   dims (mean and biased variance per row); weight and bias (normalized_shape) or NULL */
AcTensor *ac_layer_norm(const AcTensor *x, const int64_t *normalized_shape, int normalized_ndim,
                        const AcTensor *weight, const AcTensor *bias, float eps);
/* zero each element with probability p, scale the rest by 1/(1-p); a view of x in eval or p == 0 */
AcTensor *ac_dropout(const AcTensor *x, float p, int training);
/* dropout of whole features: x (N, C, ...) keeps or zeroes each (n, c) block as one (F.dropout2d) */
AcTensor *ac_feature_dropout(const AcTensor *x, float p, int training);

/* ---- Sequence layers ------------------------------------------------------ */

/* Rows of weight (num, dim) picked by indices (int64, or whole float32 values; any shape):
   out (..., dim). An id that is not an integer in [0, num) fails with AC_ERR_INDEX.
   padding_idx: a row that gets no gradient, or -1 for none. */
AcTensor *ac_embedding(const AcTensor *indices, const AcTensor *weight, int64_t padding_idx);

/* One recurrent layer in one direction, with PyTorch's equations and gate order
   (stack layers by feeding one's output to the next). x is (T, B, I), or (B, T, I)
   when batch_first; h0, c0 are (B, H), or NULL for zeros; w_ih is (G*H, I), w_hh
   (G*H, H), b_ih and b_hh (G*H) or NULL. Returns the output (T, B, H) or (B, T, H);
   *h_n and *c_n, when not NULL, get the final states (B, H), each with its own
   graph. reverse runs the sequence from its end (a bidirectional layer's second
   direction, whose final state is then at position 0). */

/* LSTM: G = 4 gates, i, f, g, o; c' = f*c + i*g, h' = o*tanh(c') */
AcTensor *ac_lstm(const AcTensor *x, const AcTensor *h0, const AcTensor *c0, const AcTensor *w_ih,
                  const AcTensor *w_hh, const AcTensor *b_ih, const AcTensor *b_hh, int batch_first,
                  int reverse, AcTensor **h_n, AcTensor **c_n);
/* GRU: G = 3 gates, r, z, n = tanh(W_in x + b_in + r*(W_hn h + b_hn)); h' = (1-z)*n + z*h */
AcTensor *ac_gru(const AcTensor *x, const AcTensor *h0, const AcTensor *w_ih, const AcTensor *w_hh,
                 const AcTensor *b_ih, const AcTensor *b_hh, int batch_first, int reverse,
                 AcTensor **h_n);
/* Plain (Elman) RNN: G = 1, h' = tanh (or relu) of W_ih x + b_ih + W_hh h + b_hh */
AcTensor *ac_rnn_tanh(const AcTensor *x, const AcTensor *h0, const AcTensor *w_ih,
                      const AcTensor *w_hh, const AcTensor *b_ih, const AcTensor *b_hh,
                      int batch_first, int reverse, AcTensor **h_n);
AcTensor *ac_rnn_relu(const AcTensor *x, const AcTensor *h0, const AcTensor *w_ih,
                      const AcTensor *w_hh, const AcTensor *b_ih, const AcTensor *b_hh,
                      int batch_first, int reverse, AcTensor **h_n);

/* ---- Layers -------------------------------------------------------------- */

/* y = x @ weight^T + bias (PyTorch's F.linear): x (..., in), weight (out, in),
   bias (out) or NULL. One GEMM forward, no transposed copies backward. */
AcTensor *ac_linear(const AcTensor *x, const AcTensor *weight, const AcTensor *bias);

/* ---- Optimizers ------------------------------------------------------------ */
/* One in-place update of param from param->grad (skipped when grad is NULL).
   State tensors have param's shape, are owned by the caller and live at root.
   step counts from 1; it tells the first momentum step and Adam's bias correction. */

int ac_sgd_step(AcTensor *param, AcTensor *momentum_buffer, int64_t step, float lr,
                float momentum, float dampening, int nesterov, float weight_decay);
/* decoupled = 0: Adam (L2 weight decay added to the gradient); 1: AdamW. */
int ac_adam_step(AcTensor *param, AcTensor *exp_avg, AcTensor *exp_avg_sq, int64_t step,
                 float lr, float beta1, float beta2, float eps, float weight_decay, int decoupled);
/* Adadelta: square_avg and acc_delta start at zero; rho in [0, 1]. */
int ac_adadelta_step(AcTensor *param, AcTensor *square_avg, AcTensor *acc_delta, float lr,
                     float rho, float eps, float weight_decay);
/* RMSprop: momentum_buffer is used only when momentum > 0 and grad_avg only when
   centered (either may be NULL otherwise); all start at zero. */
int ac_rmsprop_step(AcTensor *param, AcTensor *square_avg, AcTensor *momentum_buffer,
                    AcTensor *grad_avg, float lr, float alpha, float eps, float weight_decay,
                    float momentum, int centered);
/* Adagrad: sum starts at initial_accumulator_value; lr decays to lr / (1 + (step-1) lr_decay). */
int ac_adagrad_step(AcTensor *param, AcTensor *sum, int64_t step, float lr, float lr_decay,
                    float weight_decay, float eps);

/* L-BFGS sees its parameters as one flat vector, their elements in order: flat
   has as many elements as the params together (any shape). */
int ac_params_to_flat(AcTensor *const *params, int n_params, AcTensor *flat);
int ac_grads_to_flat(AcTensor *const *params, int n_params, AcTensor *flat); /* zeros where no grad; a
                                                        grad that is flat's slice is there already */
int ac_params_from_flat(AcTensor *const *params, int n_params, const AcTensor *flat);
int ac_params_add_flat(AcTensor *const *params, int n_params, float alpha, const AcTensor *flat);
/* direction = -H grad, H the L-BFGS inverse Hessian from the n_old pairs (y_i, s_i),
   oldest first, by the two-loop recursion; ro[i] = 1 / (y_i . s_i); h_diag scales
   the initial Hessian; al holds n_old floats of scratch. n_old = 0 gives -h_diag grad. */
int ac_lbfgs_direction(const AcTensor *grad, AcTensor *const *old_dirs, AcTensor *const *old_stps,
                       const float *ro, int n_old, float h_diag, float *al, AcTensor *direction);

/* ---- Files ----------------------------------------------------------------- */

/* Named root tensors, as read from or written to a safetensors file. */
typedef struct AcStateDict AcStateDict;

AcStateDict *ac_state_dict_new(void);
int ac_state_dict_set(AcStateDict *dict, const char *name, AcTensor *tensor); /* holds a root copy or reference */
int ac_state_dict_size(const AcStateDict *dict);
const char *ac_state_dict_name(const AcStateDict *dict, int index);
AcTensor *ac_state_dict_tensor(const AcStateDict *dict, int index);    /* borrowed */
AcTensor *ac_state_dict_get(const AcStateDict *dict, const char *name); /* borrowed; NULL if absent */
int ac_state_dict_free(AcStateDict *dict);

int ac_save_safetensors(const AcStateDict *dict, const char *path);   /* F32, I64, BOOL, U8, I8 */
AcStateDict *ac_load_safetensors(const char *path);                   /* the same, at root */

/* An IDX file (the MNIST format, not gzipped) as a float tensor of its values
   (uint8 images stay 0..255). */
AcTensor *ac_read_idx(const char *path);

/* ---- INT8 inference ------------------------------------------------------- */
/* A Linear layer for inference with int8 weights: weight(j, :) ~ scale[j] * q(j, :),
   q in [-127, 127] (symmetric, one float32 scale per output row, scale = max|row| / 127),
   and a float32 bias. Forward quantizes each input row the same way at run time
   (qx = rint(x * (127 / max|x|)), sx = max|x| / 127) and multiplies in exact int32:
       y[i, j] = (float)(sum_p qx[i, p] q[j, p]) * (sx[i] * scale[j]) + bias[j]
   in float32 steps, so every kernel set (AC_SIMD: AVX-512 VNNI, AVX2, portable C)
   gives the same bits. A row holding inf or NaN gives NaN outputs. No graph: x must
   not require grad while grad mode is on (AC_ERR_STATE).
   An AcQLinear lives at root, whatever scope is open, in one block of its own; the
   caller owns one reference (ac_qlinear_free drops it), and each tensor that
   ac_qlinear_weight / _scale / _bias returns holds another: those are root tensors
   sharing the block (int8 (out, in), float32 (out), float32 (out)), so writing
   them (ac_tensor_copy_, loading a state dict) changes the layer. */

typedef struct AcQLinear AcQLinear;

/* Quantize weight (out, in), float32, in <= 65536 (so int32 sums cannot overflow);
   bias (out) or NULL. */
AcQLinear *ac_qlinear_pack(const AcTensor *weight, const AcTensor *bias);
/* From quantized values: qweight int8 (out, in), scale float32 (out), bias (out) or NULL. */
AcQLinear *ac_qlinear_new(const AcTensor *qweight, const AcTensor *scale, const AcTensor *bias);
int ac_qlinear_free(AcQLinear *q);
int64_t ac_qlinear_in_features(const AcQLinear *q);
int64_t ac_qlinear_out_features(const AcQLinear *q);
int ac_qlinear_has_bias(const AcQLinear *q);          /* 1 or 0; < 0 for NULL */
int64_t ac_qlinear_nbytes(const AcQLinear *q);        /* the bytes of its block */
AcTensor *ac_qlinear_weight(AcQLinear *q);
AcTensor *ac_qlinear_scale(AcQLinear *q);
AcTensor *ac_qlinear_bias(AcQLinear *q);              /* AC_ERR_STATE when it has none */
/* x (..., in) float32 -> (..., out), in the current scope. */
AcTensor *ac_qlinear_forward(const AcQLinear *q, const AcTensor *x);
/* The int8 kernel set in use: "avx512-vnni", "avx2" or "generic". */
const char *ac_qlinear_kernels(void);

/* One quantized LSTM or GRU layer in one direction, as ac_lstm / ac_gru (same
   shapes, equations and gate order) with ih = the packed (w_ih, b_ih) and hh =
   the packed (w_hh, b_hh): each step quantizes its input rows and h as above.
   No graph. */
AcTensor *ac_qlstm(const AcTensor *x, const AcTensor *h0, const AcTensor *c0, const AcQLinear *ih,
                   const AcQLinear *hh, int batch_first, int reverse, AcTensor **h_n,
                   AcTensor **c_n);
AcTensor *ac_qgru(const AcTensor *x, const AcTensor *h0, const AcQLinear *ih, const AcQLinear *hh,
                  int batch_first, int reverse, AcTensor **h_n);

/* ---- Linear layers packed for inference ----------------------------------- */
/* A float32 Linear layer for inference whose weight is packed once for the CPU's
   GEMM, instead of on every forward as ac_linear packs it (at 32 rows, packing a
   128x784 weight is a fifth of ac_linear's time). Every batch size sums each
   output in the same order, so a row's output has the same bits whatever rows
   come with it (a service joining requests into batches answers each as it
   would alone); from
   ac_linear's it differs by rounding only for batches of four rows or fewer,
   which ac_linear sums in another order. An AcPackedLinear is a copy: it lives at
   root, whatever scope is open, in one block of its own (the weight's panels, a
   little more than the weight, and the bias); a later change to the weight and
   bias it was made from does not reach it (make a new one). The caller owns it
   (ac_packed_linear_free). CPU tensors only. No autograd graph: x must not
   require grad while grad mode is on (AC_ERR_STATE). A recorded graph (Graphs,
   below) records its forward and holds its block, so the layer lives while such
   a graph does; a program cannot hold it. A layer made with AC_ACTIVATION_RELU
   applies ReLU as the GEMM stores its output, where the bias is added (a Linear
   layer followed by ReLU, with no pass of its own): the bits of the layer made
   with AC_ACTIVATION_NONE and then ac_relu. */

typedef struct AcPackedLinear AcPackedLinear;
typedef enum { AC_ACTIVATION_NONE = 0, AC_ACTIVATION_RELU = 1 } AcActivation;

/* weight (out, in) float32, bias (out) or NULL, activation an AcActivation
   (another value: AC_ERR_ARG). */
AcPackedLinear *ac_packed_linear_new(const AcTensor *weight, const AcTensor *bias, int activation);
int ac_packed_linear_free(AcPackedLinear *p);
int64_t ac_packed_linear_in_features(const AcPackedLinear *p);
int64_t ac_packed_linear_out_features(const AcPackedLinear *p);
int ac_packed_linear_has_bias(const AcPackedLinear *p);    /* 1 or 0; < 0 for NULL */
int64_t ac_packed_linear_nbytes(const AcPackedLinear *p);  /* the bytes of its block */
/* x (..., in) float32 -> (..., out) = x W^T + b, then the layer's activation, in
   the current scope. */
AcTensor *ac_packed_linear_forward(const AcPackedLinear *p, const AcTensor *x);

/* ---- Programs: graphs saved for C programs -------------------------------- */
/* A program is a recorded forward graph (see Graphs below) saved in one file with
   its parameters and state, which a C program loads and runs with libac alone.
   It holds the ops listed under Graphs, except backward, zero_grad and the
   optimizer steps (a program is for inference); dropout and batch_norm must be
   recorded in eval mode, and grad mode switched only off. The loader is as strict as the
   safetensors reader: a truncated, corrupt or inconsistent file fails with
   AC_ERR_FORMAT naming what is wrong, never a crash; it runs the program once on
   zeros to check each op's output against the shape the file records, and fails
   with AC_ERR_MEMORY first when that run would need more than the memory limit
   (or the machine's memory) leaves. Runs give the bits eager calls give. One run
   at a time per program. */

typedef struct AcProgram AcProgram;
struct AcGraph;   /* typedef'd as AcGraph below */

/* Write g (ended, recorded on the ops a program holds) and the current values
   of its parameters and state to path. */
int ac_program_save(const struct AcGraph *g, const char *path);
AcProgram *ac_program_load(const char *path);   /* NULL on error (AC_ERR_FORMAT, AC_ERR_IO, ...) */
/* Run on inputs (the recorded dtypes and shapes); outputs[i] gets a new tensor in
   the caller's current scope (or at root, owned by the caller). */
int ac_program_run(AcProgram *p, AcTensor *const *inputs, int n_inputs, AcTensor **outputs,
                   int n_outputs);
int ac_program_free(AcProgram *p);
int ac_program_num_inputs(const AcProgram *p);
int ac_program_num_outputs(const AcProgram *p);
/* Input (output) i's dtype, and its shape into shape[AC_MAX_DIMS]; returns its ndim. */
int ac_program_input_info(const AcProgram *p, int i, int *dtype, int64_t *shape);
int ac_program_output_info(const AcProgram *p, int i, int *dtype, int64_t *shape);

/* ---- Native segments (the mlir backend) ------------------------------------ */
/* What a code generator needs to read a recorded graph (see Graphs below), and how
   it hands back native code: a segment replaces a run of nodes by one function.
   Node buffers are inputs then outputs, -1 where an op's tensor was NULL. */

struct AcGraph;

#define AC_GRAPH_MAX_TENSORS 16   /* a node's input and output buffers, at most */
#define AC_GRAPH_MAX_ATTRS 33     /* a node's scalar arguments, at most (1 + 4 * AC_MAX_DIMS) */

/* buffers[AC_GRAPH_MAX_TENSORS], attrs[AC_GRAPH_MAX_ATTRS]; AC_OK or < 0 */
int ac_graph_node_info(const struct AcGraph *g, int node, int *n_in, int *n_out, int *buffers,
                       int *n_attr, double *attrs);
int ac_graph_buffer_shape(const struct AcGraph *g, int buffer, int64_t *shape); /* shape[8]; ndim or < 0 */
int ac_graph_buffer_dtype(const struct AcGraph *g, int buffer);   /* an AcDtype, or < 0 */
int ac_graph_num_inputs(const struct AcGraph *g);
int ac_graph_num_outputs(const struct AcGraph *g);
int ac_graph_input_buffer(const struct AcGraph *g, int i);   /* the buffer id of input i, or < 0 */
int ac_graph_output_buffer(const struct AcGraph *g, int i);  /* the buffer id of output i, or < 0 */

/* A segment's code: data[i] is the data of the segment's buffer i (buffers as
   given to ac_graph_add_native), data[n_buffers] its scratch memory (64-byte
   aligned); attrs[j] the scalar arguments of its node first + j, as replay
   holds them (a scheduler's lr); kernels a table of libac's kernels:
   {gemm, uniform}: gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
   ldc) row-major SGEMM, C = alpha op(A) op(B) + beta C; uniform(out, n) n draws in
   [0, 1) from the thread's generator, as dropout draws them. Returns 0, or 1 + the
   node whose input holds an out-of-range class index (replay: AC_ERR_INDEX). */
typedef int (*AcNativeFn)(void *const *data, const double *const *attrs, const void *kernels);
/* Replace nodes [first, first + n_nodes) of a ready graph by fn: replay calls fn
   on buffers (buffer ids, or -2 - id for the .grad of buffer id, made zero where
   the tensor has none) instead of running those nodes. Replay makes the tensors of
   the buffers the segment writes first in the call's scope (a graph output: the
   tensor the caller gets); the scratch_bytes of scratch are the segment's own.
   Segments do not overlap; fn does all that its nodes did (a zero_grad among
   them zeroes the grad, which stays allocated). */
int ac_graph_add_native(struct AcGraph *g, int first, int n_nodes, AcNativeFn fn, const int *buffers,
                        int n_buffers, int64_t scratch_bytes);

/* ---- Data-parallel training -------------------------------------------- */

/* The way back from ac_grads_to_flat once flat holds the gradients summed over
   ranks: each param's grad = scale * its slice of flat (scale = 1 / ranks gives
   the mean). Every param must have a grad already, which may be flat's own
   slice (ac_tensor_view_flat); nothing is allocated. */
int ac_grads_from_flat(AcTensor *const *params, int n_params, float scale, const AcTensor *flat);
/* The same between ranks that share memory (an MPI shared-memory window), with no
   all-reduce: flats[0..n_flats) are every rank's bucket (ac_grads_to_flat), and each
   param's grad = scale * (flats[0] + flats[1] + ...) over its slice, summed in that
   order, so every rank gets the same bits. Every param must have a grad, outside
   every flat (it is written while they are read). */
int ac_grads_mean_of_flats(AcTensor *const *params, int n_params, float scale, AcTensor *const *flats,
                           int n_flats);

/* ---- Compiled calls -------------------------------------------------------- */
/* ac_graph_replay for a caller that keeps several graphs of one function (one per
   input signature, as ac.compile does) and calls the last one used first: 1 after
   replaying g on inputs, 0 when the call is not g's to run (grad mode is not the
   recorded one, a graph is recording on this thread, g is not ready, or an input's
   dtype or shape differs; nothing ran, no error is set), < 0 on an error (a NULL
   input: in Python, a tensor whose scope ended). One C call does all of a compiled
   call's checks and its run. */
struct AcGraph;
int ac_graph_call(struct AcGraph *g, AcTensor *const *inputs, int n_inputs, AcTensor **outputs,
                  int n_outputs);

/* ---- Gradient hooks --------------------------------------------------------- */

/* Called by ac_backward once a leaf's gradient for this backward is final: every
   node that uses the leaf has run, so leaf->grad holds all it will get (NULL when
   no gradient reached it). The hooks run as the walk goes, the leaves nearest the
   loss first, so a data-parallel trainer can start reducing those gradients while
   backward computes the rest (as PyTorch's post-accumulate-grad hooks). A negative
   return stops the backward with that status. */
typedef int (*AcGradHook)(AcTensor *leaf, void *user);

/* Set leaf's hook (a leaf that requires grad; one hook a tensor: this one replaces
   any earlier); hook NULL removes it. user is passed to the hook as it is. */
int ac_tensor_set_grad_hook(AcTensor *leaf, AcGradHook hook, void *user);

/* ---- CUDA -------------------------------------------------------------------- */
/* A build with CUDA (nvcc found at build time, not AC_CUDA=0) links cudart
   statically and initialises it on the first call below that needs a device,
   never when libac is loaded. Without a driver or device those calls fail with
   AC_ERR_DEVICE and cudart's reason ("CUDA driver version is insufficient ...");
   a build without CUDA says so. One stream per device: work runs in issue order,
   and reading a CUDA tensor's data back waits for it. */

int ac_cuda_is_built(void);              /* 1 when this build has the CUDA backend, else 0 */
int ac_cuda_is_available(void);          /* 1 when a device can be used, else 0; never an error */
int ac_cuda_device_count(void);          /* >= 1, or < 0 (AC_ERR_DEVICE, the reason) */
int ac_cuda_is_initialized(void);        /* 1 once a call has initialised cudart, else 0 */
int ac_cuda_synchronize(int device);     /* wait for device's stream; -1: every device */
/* Let CUDA matmul, linear and the like run on the tensor cores in TF32 (inputs
   rounded to a 10-bit mantissa, sums in float32): faster, less exact. Off by
   default; the setting is process-wide. allow is 0 or 1. */
int ac_cuda_set_allow_tf32(int allow);
int ac_cuda_allow_tf32(void);            /* the setting: 0 or 1 */
/* t copied to device (AC_CPU, or AC_CUDA number device_index), in the current
   scope: differentiable (backward copies the gradient back), even to t's own
   device. A copy to the CPU waits until the data is there. */
AcTensor *ac_tensor_to(const AcTensor *t, int device, int device_index);

/* ---- Compiled calls: scalars read from memory ------------------------------ */
/* Scalar argument attr of node (as for ac_graph_set_scalar) is *source at every
   later replay or call of g: read in C when the run starts, so a caller that
   writes a learning rate to source when it changes pays nothing per call. source
   must stay valid while g lives; binding an attr again replaces its source. */
int ac_graph_bind_scalar(struct AcGraph *g, int node, int attr, const double *source);

/* ---- Gradients in a caller's buffer --------------------------------------- */
/* For data-parallel training with the gradients in the reduction's buffers
   (PyTorch's gradient_as_bucket_view): each parameter's grad is a view into its
   bucket, so nothing is copied between the two. */

/* leaf->grad := grad, and grad becomes the home of leaf's gradient: backward adds
   into its memory in place; ac_tensor_zero_grad drops leaf->grad as usual, and
   the next backward writes into the home again (no allocation, no copy), until
   another call; grad NULL drops the grad and the home. leaf: a leaf made at root
   that requires grad; grad: a float32 tensor made at root, of leaf's shape and
   device, not requiring grad, not sharing leaf's memory. Holds references of grad. */
int ac_tensor_set_grad(AcTensor *leaf, AcTensor *grad);
/* A tensor of shape over flat's elements [offset, offset + its size): it shares
   flat's memory and keeps flat alive (a parameter's part of a fusion buffer).
   flat: a float32 CPU tensor made at root. */
AcTensor *ac_tensor_view_flat(AcTensor *flat, int64_t offset, const int64_t *shape, int ndim);

/* ---- Gradient norms ------------------------------------------------------- */
/* *norm := the norm of order norm_type (> 0, or INFINITY for the largest |x|) of
   the count tensors taken together as one vector (torch.nn.utils.get_total_norm),
   summed in double, the same bits for any thread count. NULL entries are skipped;
   a NaN anywhere gives NaN. clip_grad_norm_ passes the gradients. */
int ac_total_norm(const AcTensor *const *tensors, int count, double norm_type, double *norm);
/* Scale each of the count tensors in place by max_norm / (total_norm + 1e-6)
   when that is below 1 or NaN (torch.nn.utils.clip_grads_with_norm_); NULL
   entries are skipped. clip_grad_norm_ passes the gradients and their total_norm. */
int ac_clip_grads_with_norm(AcTensor *const *tensors, int count, double max_norm, double total_norm);

/* ---- Graphs ---------------------------------------------------------------- */
/* Between ac_graph_begin and ac_graph_end, the calls this thread makes to the ops
   below are recorded into an AcGraph while they run (they still give their real
   results): linear, the packed Linear layer's forward (whose block is then state:
   a program cannot hold it), matmul, the elementwise ops and activations, softmax and
   log_softmax, the reductions, reshape / flatten / transpose / permute / squeeze /
   unsqueeze, ac_slice, cat and stack (of up to AC_GRAPH_MAX_TENSORS - 1 tensors),
   detach and clone, dropout, conv2d, the 2-D poolings, batch_norm, the losses,
   ac_lstm, ac_backward_ex (and its two shorthands), ac_tensor_zero_grad,
   ac_set_grad_enabled, and the SGD and Adam steps; so a whole training step is
   one graph. A node is an op with its input and output buffers and its scalar
   arguments; a buffer is a parameter (a leaf that requires grad), an input, a
   state (another tensor the graph reads: optimizer moments, running statistics,
   constants), a temporary or an output.
   Anything else that makes or writes a tensor the graph would read (ac_index,
   rand, in-place writes of a recorded tensor, a tensor made inside an op such as
   a gradient) marks the graph failed: ac_graph_end then returns AC_ERR_STATE
   naming the op. Tensors made at root by the creation functions (full, keep,
   from data) are state; scoped ones the graph reads must be declared inputs.
   Replay runs the nodes again from C in one call, on buffers in a scope of its
   own that it opens and restores (no malloc once its arena blocks are cached),
   giving the same bits as the recorded run. Dropout draws from the thread's
   generator per call; parameters and state are updated in place. Recording
   costs ops one branch when no graph is open. */

typedef struct AcGraph AcGraph;

typedef enum {
    AC_BUFFER_PARAMETER = 0, AC_BUFFER_INPUT = 1, AC_BUFFER_STATE = 2,
    AC_BUFFER_TEMPORARY = 3, AC_BUFFER_OUTPUT = 4
} AcBufferKind;

AcGraph *ac_graph_begin(void);            /* start recording on this thread (one graph at a time) */
int ac_graph_input(AcGraph *g, AcTensor *t); /* declare the next input; before the ops read it */
/* Stop recording; outputs are the recorded tensors replay returns. AC_ERR_STATE
   (naming the op) when something could not be recorded; the graph is then only
   good for ac_graph_free. */
int ac_graph_end(AcGraph *g, AcTensor *const *outputs, int n_outputs);
int ac_graph_free(AcGraph *g);            /* also drops its references to parameters and state */
int ac_graph_num_nodes(const AcGraph *g);
int ac_graph_num_buffers(const AcGraph *g);
const char *ac_graph_node_op(const AcGraph *g, int node);  /* "linear", ...; NULL if out of range */
int ac_graph_buffer_kind(const AcGraph *g, int buffer);   /* an AcBufferKind, or < 0 */
/* Set scalar argument attr of node for later replays (a scheduler's lr, Adam's
   step): attributes are the op's scalar arguments in order, e.g. 0 = step and
   1 = lr for ac_sgd_step and ac_adam_step. */
int ac_graph_set_scalar(AcGraph *g, int node, int attr, double value);
/* Run the graph on inputs (the recorded shapes and dtypes); outputs[i] gets a new
   tensor in the caller's current scope (or at root, owned by the caller). */
int ac_graph_replay(AcGraph *g, AcTensor *const *inputs, int n_inputs, AcTensor **outputs,
                    int n_outputs);
/* 1 when inputs have the recorded dtypes and shapes (replay would take them),
   0 when one differs (ac_last_error names it), < 0 for bad arguments. */
int ac_graph_accepts(const AcGraph *g, AcTensor *const *inputs, int n_inputs);

/* ---- External memory and DLPack ------------------------------------------ */

/* Called once when the last reference to an external tensor (and its views) is dropped. */
typedef void (*AcReleaseFn)(void *ctx);

/* A root tensor over memory libac does not own, whatever scope is open: data holds
   shape's elements of dtype, row-major and contiguous, aligned to the element size.
   libac never frees data; it calls release(ctx) (NULL: nothing) when the tensor dies.
   On failure release is not called and the caller still owns data. */
AcTensor *ac_tensor_from_external(void *data, const int64_t *shape, int ndim, int dtype,
                                  AcReleaseFn release, void *ctx);
/* DLPack, zero copy: managed is a DLManagedTensorVersioned * (dlpack.h, DLPack 1.x) when
   versioned is 1, else the older DLManagedTensor *. ac_to_dlpack returns one sharing root
   tensor t's data and holding a reference to t until the consumer calls its deleter; a
   scoped tensor fails with AC_ERR_SCOPE (its memory ends with its scope: ac_tensor_keep
   it first). ac_from_dlpack takes one over (CPU; float32, int64 or bool; row-major
   contiguous; writable) as an external tensor whose release calls its deleter; on
   failure the caller still owns it. ac_dlpack_delete calls its deleter, for one that
   nobody took over. */
void *ac_to_dlpack(AcTensor *t, int versioned);
AcTensor *ac_from_dlpack(void *managed, int versioned);
int ac_dlpack_delete(void *managed, int versioned);

/* ---- Custom autograd functions (scripts helper) ---------------------------- */
/* The caller's backward of a custom function: given the output's gradient, set
   grad_in[i] (n_inputs of them, NULL for none) to borrowed tensors of the inputs'
   shapes; libac copies them before it returns. Negative to stop backward. */
typedef int (*AcFunctionBackward)(void *user, const AcTensor *grad_out, AcTensor **grad_in, int n_inputs);
/* A float32 tensor holding values' elements whose node (when grad mode is on and an
   input requires grad) records inputs (at most AC_MAX_INPUTS - 1) and runs backward.
   release(user) is called once when nothing can call backward any more (at once when
   no node was made); on failure it has been called too. */
AcTensor *ac_function_apply(const char *name, const AcTensor *values, AcTensor *const *inputs, int n_inputs,
                            AcFunctionBackward backward, AcReleaseFn release, void *user);

/* ---- Shared memory (scripts helper) ------------------------------------------ */
/* Tensors over POSIX shared memory that several processes map (Hogwild training).
   ac_tensor_share: a new root tensor holding a copy of CPU tensor t in a new shared
   object, unmapped (and, in the creating process, unlinked) when its last reference
   goes; a forked child shares the mapping. ac_tensor_open_shared: a root tensor over
   the object `name` (from ac_tensor_shared_name in another process), its elements
   from byte offset; checked against the object's size. ac_tensor_shared_name: 1 and
   the object's name and t's byte offset in it when t's data is in one of this
   process's shared objects, else 0. */
#define AC_SHARED_NAME_MAX 64
AcTensor *ac_tensor_share(const AcTensor *t);
AcTensor *ac_tensor_open_shared(const char *name, int64_t offset, const int64_t *shape, int ndim, int dtype);
int ac_tensor_shared_name(const AcTensor *t, char *name, size_t name_size, int64_t *offset);

/* ---- Profiler ------------------------------------------------------------ */
/* Per-op timing on the thread that starts it: each op call (those ac_graph_begin
   records, above), each node's backward, each chunk of work the thread pool runs
   (on the thread that runs it) and each range is an event. Off, it costs ops the
   branch they already take for graphs. Events are read after ac_profiler_stop,
   until the next start. AC_PROFILE=path in the environment profiles the thread
   that loads libac from then to exit, and writes the trace to path at exit. */

typedef enum {
    AC_EVENT_OP = 0, AC_EVENT_BACKWARD = 1, AC_EVENT_TASK = 2, AC_EVENT_RANGE = 3
} AcEventKind;

typedef struct {
    const char *name;      /* "linear", "linear_backward", "linear [task]", a range's name */
    const char *scope;     /* the innermost range it ran in; "" outside any */
    const char *shapes;    /* its inputs' shapes, "[[64, 784], [128, 784], [128]]", when
                              recorded; else "" */
    int32_t kind;          /* AcEventKind */
    int32_t thread;        /* 0: the profiled thread; pool threads in order of first event */
    int32_t depth;         /* how many events of its thread enclose it */
    int64_t start_ns;      /* since ac_profiler_start */
    int64_t duration_ns, self_ns;   /* self: less the events nested in it */
    int64_t bytes, self_bytes;      /* allocated by its thread meanwhile */
    int64_t flops;         /* matmul, linear, conv2d and their backward; else 0 */
} AcProfileEvent;

/* Start a session on this thread (forgetting the last one); record_shapes 0 or 1.
   AC_ERR_STATE if one is running. */
int ac_profiler_start(int record_shapes);
int ac_profiler_stop(void);               /* AC_ERR_STATE unless this thread profiles */
/* Open a range (a scope) named name on this thread: 1, or 0 (nothing opened) when
   the thread is not profiled. ac_profiler_pop closes the innermost one; it does
   nothing when the thread is not profiled, and stop closes ranges left open. */
int ac_profiler_push(const char *name);
int ac_profiler_pop(void);
int64_t ac_profiler_num_events(void);     /* of the last session */
/* Event i, in thread order, then start order; its strings live until the next start. */
int ac_profiler_event(int64_t i, AcProfileEvent *out);
/* The last session as Chrome trace-event JSON (Perfetto, chrome://tracing). */
int ac_profiler_dump(FILE *out);

/* ---- Threads ------------------------------------------------------------- */

int ac_set_num_threads(int n);           /* 1..256; the pool resizes on next use */
int ac_get_num_threads(void);            /* AC_NUM_THREADS, else the cores the CPU affinity allows */

/* AC_CDEF_END */

#ifdef __cplusplus
}
#endif

#endif /* AC_H */
