/*
 * vecmath.c - exp, sigmoid, tanh, gelu and gelu's derivative over float
 * buffers, in AVX-512F, AVX2+FMA and portable C, one set picked at run time.
 *
 * Every set computes the same formulas with the same constants:
 * - exp: n = round(x / ln 2), r = x - n ln 2 in two parts (Cody-Waite), a
 *   degree-7 polynomial for exp(r) on |r| <= ln(2)/2 (Cephes' coefficients),
 *   then p 2^n rounded once, so subnormal results and overflow come out right.
 * - sigmoid: e = exp(-|x|), then 1 / (1 + e) or e / (1 + e): never overflows.
 * - tanh: x P(x^2) / Q(x^2), with x clamped to [-10, 10] (where the quotient
 *   passes 1) and the result to [-1, 1] (tanh rounds to 1 past 9.01).
 * - gelu: x Phi(x), Phi the normal CDF: Q = Phi(-|x|) = exp(-x^2 / 2) t S(t)
 *   with t = 1 / (1 + 0.4 |x|), and Phi = Q below 0, 1 - Q above. Working
 *   from Phi rather than 1 + erf keeps the relative error small where gelu is
 *   tiny (x < -3); x^2 is carried as z + lo exactly, so exp(-x^2 / 2) loses
 *   nothing to z's rounding. gelu' = Phi + x exp(-x^2 / 2) / sqrt(2 pi).
 * The tanh quotient and gelu's S are relative minimax fits made for this file.
 * AVX-512 and AVX2 run the same operations in the same order, so give the
 * same bits; the portable set rounds without FMA. The portable set is written as branch-free scalar functions that
 * the compiler vectorises in the loops; it relies on IEEE arithmetic (no
 * -ffast-math), as does the rounding trick in exp.
 *
 * Not here: the ops that use these (activation.c, elementwise.c, loss.c),
 * CPU detection (cpu.c).
 */
#include "vecmath.h"
#include "cpu.h"

#include <math.h>
#include <string.h>

#define GELU_CLAMP 16.0f     /* Phi(-16) < 1e-57: past this gelu is -0 or x, gelu' 0 or 1 */
#define INV_SQRT_2PI 0.398942280f
#define CDF_K 0.4f
#define CDF_S0 1.595754921e-01f
#define CDF_S1 1.596362144e-01f
#define CDF_S2 1.330587119e-01f
#define CDF_S3 9.175120294e-02f
#define CDF_S4 (-2.814692818e-02f)
#define CDF_S5 1.220907643e-01f
#define CDF_S6 (-3.773321509e-01f)
#define CDF_S7 3.848838508e-01f
#define CDF_S8 (-1.779443771e-01f)
#define CDF_S9 3.242724016e-02f

typedef void (*VecMapFn)(const float *x, float *y, int64_t n);

typedef struct {
    const char *name;   /* as AC_SIMD spells it */
    VecMapFn exp, sigmoid, tanh, gelu;
    float (*exp_sum)(const float *x, float shift, float *y, int64_t n);
    float (*max)(const float *x, int64_t n);
    void (*gelu_grad)(const float *g, const float *x, float *y, int64_t n);
} VecMathSet;

/* The sum of 16 partial sums, added as a tree: lane l and l + w for w = 8, 4, 2, 1. */
static float lanes_sum(float *lane)
{
    int width, l;
    for (width = 8; width >= 1; width /= 2)
        for (l = 0; l < width; l++) lane[l] += lane[l + width];
    return lane[0];
}

/* ---- portable C ---------------------------------------------------------- */

/* exp_scalar, sigmoid_scalar, tanh_scalar and select_float are in vecmath.h. */

/*
 * Phi(-|x|) = gauss * ratio for x in [-GELU_CLAMP, GELU_CLAMP]: returns the
 * ratio t S(t) and stores gauss = exp(-x^2 / 2). Callers multiply gauss in
 * last: it is the factor that can be subnormal.
 */
static inline float normal_tail_generic(float x, float *gauss)
{
    float z = x * x, split, high, low, lo, e, t, s;
    /* x^2 - z exactly, from x split into two 12-bit halves (Veltkamp) */
    split = x * 4097.0f;
    high = split - (split - x);
    low = x - high;
    lo = ((high * high - z) + 2.0f * high * low) + low * low;
    e = exp_scalar(-0.5f * z);
    *gauss = e - (0.5f * e) * lo;
    t = 1.0f / (1.0f + CDF_K * fabsf(x));
    s = (((CDF_S9 * t + CDF_S8) * t + CDF_S7) * t + CDF_S6) * t + CDF_S5;
    s = ((((s * t + CDF_S4) * t + CDF_S3) * t + CDF_S2) * t + CDF_S1) * t + CDF_S0;
    return t * s;
}

/* x Phi(x): x (1 - gauss ratio) above 0, (x ratio) gauss below. */
static inline float gelu_generic(float x)
{
    float low = select_float(x < -GELU_CLAMP, -GELU_CLAMP, x), gauss, ratio;
    float clamped = select_float(low > GELU_CLAMP, GELU_CLAMP, low);
    ratio = normal_tail_generic(clamped, &gauss);
    return select_float(x > 0.0f, low * (1.0f - gauss * ratio), (low * ratio) * gauss);
}

/* g (Phi(x) + x gauss / sqrt(2 pi)), gauss factored out below 0. */
static inline float gelu_grad_generic(float g, float x)
{
    float clamped = select_float(x < -GELU_CLAMP, -GELU_CLAMP, x), gauss, ratio;
    clamped = select_float(clamped > GELU_CLAMP, GELU_CLAMP, clamped);
    ratio = normal_tail_generic(clamped, &gauss);
    return g * select_float(x > 0.0f, (1.0f - gauss * ratio) + clamped * (gauss * INV_SQRT_2PI),
                    gauss * (ratio + clamped * INV_SQRT_2PI));
}

static void generic_exp(const float *x, float *y, int64_t n)
{
    int64_t i;
    for (i = 0; i < n; i++) y[i] = exp_scalar(x[i]);
}

static void generic_sigmoid(const float *x, float *y, int64_t n)
{
    int64_t i;
    for (i = 0; i < n; i++) y[i] = sigmoid_scalar(x[i]);
}

static void generic_tanh(const float *x, float *y, int64_t n)
{
    int64_t i;
    for (i = 0; i < n; i++) y[i] = tanh_scalar(x[i]);
}

static void generic_gelu(const float *x, float *y, int64_t n)
{
    int64_t i;
    for (i = 0; i < n; i++) y[i] = gelu_generic(x[i]);
}

static void generic_gelu_grad(const float *g, const float *x, float *y, int64_t n)
{
    int64_t i;
    for (i = 0; i < n; i++) y[i] = gelu_grad_generic(g[i], x[i]);
}

static float generic_exp_sum(const float *x, float shift, float *y, int64_t n)
{
    float lane[16] = {0.0f}, e[16];
    int64_t i;
    int l;
    for (i = 0; i + 16 <= n; i += 16) {
        for (l = 0; l < 16; l++) e[l] = exp_scalar(x[i + l] - shift);
        if (y) memcpy(y + i, e, sizeof e);
        for (l = 0; l < 16; l++) lane[l] += e[l];
    }
    for (l = 0; i < n; i++, l++) {
        e[l] = exp_scalar(x[i] - shift);
        if (y) y[i] = e[l];
        lane[l] += e[l];
    }
    return lanes_sum(lane);
}

static float generic_max(const float *x, int64_t n)
{
    float lane[16], best;
    int64_t i;
    int l;
    for (l = 0; l < 16; l++) lane[l] = x[0];
    for (i = 0; i + 16 <= n; i += 16)
        for (l = 0; l < 16; l++) lane[l] = x[i + l] > lane[l] ? x[i + l] : lane[l];
    for (; i < n; i++) lane[0] = x[i] > lane[0] ? x[i] : lane[0];
    best = lane[0];
    for (l = 1; l < 16; l++) best = lane[l] > best ? lane[l] : best;
    return best;
}

static const VecMathSet generic_set = {
    "generic", generic_exp, generic_sigmoid, generic_tanh, generic_gelu,
    generic_exp_sum, generic_max, generic_gelu_grad
};

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

/* ---- AVX-512F ------------------------------------------------------------ */

#define AVX512 __attribute__((target("avx512f")))
#define SET16 _mm512_set1_ps

AVX512 static __m512 exp_avx512(__m512 x)
{
    __m512 n, r, p;
    /* min and max return their second operand when one is NaN: NaN passes */
    x = _mm512_min_ps(SET16(EXP_HI), _mm512_max_ps(SET16(EXP_LO), x));
    n = _mm512_roundscale_ps(_mm512_mul_ps(x, SET16(LOG2E)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm512_fnmadd_ps(n, SET16(LN2_HI), x);
    r = _mm512_fnmadd_ps(n, SET16(LN2_LO), r);
    p = _mm512_fmadd_ps(SET16(EXP_P0), r, SET16(EXP_P1));
    p = _mm512_fmadd_ps(p, r, SET16(EXP_P2));
    p = _mm512_fmadd_ps(p, r, SET16(EXP_P3));
    p = _mm512_fmadd_ps(p, r, SET16(EXP_P4));
    p = _mm512_fmadd_ps(p, r, SET16(EXP_P5));
    p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), SET16(1.0f));
    return _mm512_scalef_ps(p, n);   /* p 2^n, rounded once */
}

AVX512 static __m512 sigmoid_avx512(__m512 x)
{
    __m512 e = exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(x)));
    __mmask16 negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    return _mm512_div_ps(_mm512_mask_blend_ps(negative, SET16(1.0f), e),
                         _mm512_add_ps(SET16(1.0f), e));
}

AVX512 static __m512 tanh_avx512(__m512 x)
{
    __m512 z, p, q;
    x = _mm512_min_ps(SET16(TANH_CLAMP), _mm512_max_ps(SET16(-TANH_CLAMP), x));
    z = _mm512_mul_ps(x, x);
    p = _mm512_fmadd_ps(SET16(TANH_P4), z, SET16(TANH_P3));
    p = _mm512_fmadd_ps(p, z, SET16(TANH_P2));
    p = _mm512_fmadd_ps(p, z, SET16(TANH_P1));
    p = _mm512_fmadd_ps(p, z, SET16(1.0f));
    q = _mm512_fmadd_ps(SET16(TANH_Q4), z, SET16(TANH_Q3));
    q = _mm512_fmadd_ps(q, z, SET16(TANH_Q2));
    q = _mm512_fmadd_ps(q, z, SET16(TANH_Q1));
    q = _mm512_fmadd_ps(q, z, SET16(1.0f));
    p = _mm512_div_ps(_mm512_mul_ps(x, p), q);
    return _mm512_min_ps(SET16(1.0f), _mm512_max_ps(SET16(-1.0f), p));
}

/* As normal_tail_generic. */
AVX512 static __m512 normal_tail_avx512(__m512 x, __m512 *gauss)
{
    __m512 z = _mm512_mul_ps(x, x), e, t, s;
    e = exp_avx512(_mm512_mul_ps(z, SET16(-0.5f)));
    /* e (1 - lo / 2), lo = x^2 - z exactly */
    *gauss = _mm512_fnmadd_ps(_mm512_mul_ps(e, SET16(0.5f)), _mm512_fmsub_ps(x, x, z), e);
    t = _mm512_div_ps(SET16(1.0f), _mm512_fmadd_ps(_mm512_abs_ps(x), SET16(CDF_K), SET16(1.0f)));
    s = _mm512_fmadd_ps(SET16(CDF_S9), t, SET16(CDF_S8));
    s = _mm512_fmadd_ps(s, t, SET16(CDF_S7));
    s = _mm512_fmadd_ps(s, t, SET16(CDF_S6));
    s = _mm512_fmadd_ps(s, t, SET16(CDF_S5));
    s = _mm512_fmadd_ps(s, t, SET16(CDF_S4));
    s = _mm512_fmadd_ps(s, t, SET16(CDF_S3));
    s = _mm512_fmadd_ps(s, t, SET16(CDF_S2));
    s = _mm512_fmadd_ps(s, t, SET16(CDF_S1));
    s = _mm512_fmadd_ps(s, t, SET16(CDF_S0));
    return _mm512_mul_ps(t, s);
}

AVX512 static __m512 gelu_avx512(__m512 x)
{
    __m512 low = _mm512_max_ps(SET16(-GELU_CLAMP), x), gauss, ratio;
    __mmask16 positive = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ);
    ratio = normal_tail_avx512(_mm512_min_ps(SET16(GELU_CLAMP), low), &gauss);
    return _mm512_mask_mul_ps(_mm512_mul_ps(_mm512_mul_ps(low, ratio), gauss), positive, low,
                              _mm512_fnmadd_ps(gauss, ratio, SET16(1.0f)));
}

AVX512 static __m512 gelu_grad_avx512(__m512 g, __m512 x)
{
    __m512 clamped = _mm512_min_ps(SET16(GELU_CLAMP), _mm512_max_ps(SET16(-GELU_CLAMP), x));
    __m512 gauss, ratio, grad;
    __mmask16 positive = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ);
    ratio = normal_tail_avx512(clamped, &gauss);
    grad = _mm512_mask_blend_ps(
        positive, _mm512_mul_ps(gauss, _mm512_fmadd_ps(clamped, SET16(INV_SQRT_2PI), ratio)),
        _mm512_fmadd_ps(clamped, _mm512_mul_ps(gauss, SET16(INV_SQRT_2PI)),
                        _mm512_fnmadd_ps(gauss, ratio, SET16(1.0f))));
    return _mm512_mul_ps(g, grad);
}

/* The first `left` lanes, left in [1, 16]. */
AVX512 static __mmask16 lanes_avx512(int64_t left)
{
    return (__mmask16)(left >= 16 ? 0xFFFF : (1u << left) - 1);
}

/* Defines name(x, y, n): y = f(x), 16 floats a step, the last few through a mask. */
#define AVX512_MAP(name, f)                                                         \
    AVX512 static void name(const float *x, float *y, int64_t n)                    \
    {                                                                               \
        int64_t i;                                                                  \
        __mmask16 m;                                                                \
        for (i = 0; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f(_mm512_loadu_ps(x + i))); \
        if (i == n) return;                                                         \
        m = lanes_avx512(n - i);                                                    \
        _mm512_mask_storeu_ps(y + i, m, f(_mm512_maskz_loadu_ps(m, x + i)));        \
    }

AVX512_MAP(avx512_exp, exp_avx512)
AVX512_MAP(avx512_sigmoid, sigmoid_avx512)
AVX512_MAP(avx512_tanh, tanh_avx512)
AVX512_MAP(avx512_gelu, gelu_avx512)

AVX512 static void avx512_gelu_grad(const float *g, const float *x, float *y, int64_t n)
{
    int64_t i;
    __mmask16 m;
    for (i = 0; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, gelu_grad_avx512(_mm512_loadu_ps(g + i), _mm512_loadu_ps(x + i)));
    if (i == n) return;
    m = lanes_avx512(n - i);
    _mm512_mask_storeu_ps(y + i, m, gelu_grad_avx512(_mm512_maskz_loadu_ps(m, g + i),
                                                     _mm512_maskz_loadu_ps(m, x + i)));
}

AVX512 static float avx512_exp_sum(const float *x, float shift, float *y, int64_t n)
{
    __m512 s = SET16(shift), sum = _mm512_setzero_ps(), e;
    float lane[16];
    int64_t i;
    __mmask16 m;
    for (i = 0; i + 16 <= n; i += 16) {
        e = exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(x + i), s));
        if (y) _mm512_storeu_ps(y + i, e);
        sum = _mm512_add_ps(sum, e);
    }
    if (i < n) {
        m = lanes_avx512(n - i);
        e = exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), s));
        if (y) _mm512_mask_storeu_ps(y + i, m, e);
        sum = _mm512_mask_add_ps(sum, m, sum, e);
    }
    _mm512_storeu_ps(lane, sum);
    return lanes_sum(lane);
}

AVX512 static float avx512_max(const float *x, int64_t n)
{
    __m512 best = SET16(x[0]);
    float lane[16], result;
    int64_t i;
    int l;
    for (i = 0; i + 16 <= n; i += 16) best = _mm512_max_ps(best, _mm512_loadu_ps(x + i));
    if (i < n) {
        __mmask16 m = lanes_avx512(n - i);
        best = _mm512_mask_max_ps(best, m, best, _mm512_maskz_loadu_ps(m, x + i));
    }
    _mm512_storeu_ps(lane, best);
    result = lane[0];
    for (l = 1; l < 16; l++) result = lane[l] > result ? lane[l] : result;
    return result;
}

static const VecMathSet avx512_set = {
    "avx512", avx512_exp, avx512_sigmoid, avx512_tanh, avx512_gelu,
    avx512_exp_sum, avx512_max, avx512_gelu_grad
};

/* ---- AVX2 + FMA ---------------------------------------------------------- */

#define AVX2 __attribute__((target("avx2,fma")))
#define SET8 _mm256_set1_ps

AVX2 static __m256 pow2_avx2(__m256i k)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
}

AVX2 static __m256 exp_avx2(__m256 x)
{
    __m256 n, r, p;
    __m256i k, half;
    x = _mm256_min_ps(SET8(EXP_HI), _mm256_max_ps(SET8(EXP_LO), x));   /* NaN passes */
    n = _mm256_round_ps(_mm256_mul_ps(x, SET8(LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm256_fnmadd_ps(n, SET8(LN2_HI), x);
    r = _mm256_fnmadd_ps(n, SET8(LN2_LO), r);
    p = _mm256_fmadd_ps(SET8(EXP_P0), r, SET8(EXP_P1));
    p = _mm256_fmadd_ps(p, r, SET8(EXP_P2));
    p = _mm256_fmadd_ps(p, r, SET8(EXP_P3));
    p = _mm256_fmadd_ps(p, r, SET8(EXP_P4));
    p = _mm256_fmadd_ps(p, r, SET8(EXP_P5));
    p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), SET8(1.0f));
    /* 2^n as two normal halves: p * 2^half is exact, the second product rounds once */
    k = _mm256_cvtps_epi32(n);
    half = _mm256_srai_epi32(k, 1);
    return _mm256_mul_ps(_mm256_mul_ps(p, pow2_avx2(half)), pow2_avx2(_mm256_sub_epi32(k, half)));
}

AVX2 static __m256 abs_avx2(__m256 x)
{
    return _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF)));
}

AVX2 static __m256 sigmoid_avx2(__m256 x)
{
    __m256 e = exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), abs_avx2(x)));
    __m256 negative = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    return _mm256_div_ps(_mm256_blendv_ps(SET8(1.0f), e, negative), _mm256_add_ps(SET8(1.0f), e));
}

AVX2 static __m256 tanh_avx2(__m256 x)
{
    __m256 z, p, q;
    x = _mm256_min_ps(SET8(TANH_CLAMP), _mm256_max_ps(SET8(-TANH_CLAMP), x));
    z = _mm256_mul_ps(x, x);
    p = _mm256_fmadd_ps(SET8(TANH_P4), z, SET8(TANH_P3));
    p = _mm256_fmadd_ps(p, z, SET8(TANH_P2));
    p = _mm256_fmadd_ps(p, z, SET8(TANH_P1));
    p = _mm256_fmadd_ps(p, z, SET8(1.0f));
    q = _mm256_fmadd_ps(SET8(TANH_Q4), z, SET8(TANH_Q3));
    q = _mm256_fmadd_ps(q, z, SET8(TANH_Q2));
    q = _mm256_fmadd_ps(q, z, SET8(TANH_Q1));
    q = _mm256_fmadd_ps(q, z, SET8(1.0f));
    p = _mm256_div_ps(_mm256_mul_ps(x, p), q);
    return _mm256_min_ps(SET8(1.0f), _mm256_max_ps(SET8(-1.0f), p));
}

/* As normal_tail_generic. */
AVX2 static __m256 normal_tail_avx2(__m256 x, __m256 *gauss)
{
    __m256 z = _mm256_mul_ps(x, x), e, t, s;
    e = exp_avx2(_mm256_mul_ps(z, SET8(-0.5f)));
    /* e (1 - lo / 2), lo = x^2 - z exactly */
    *gauss = _mm256_fnmadd_ps(_mm256_mul_ps(e, SET8(0.5f)), _mm256_fmsub_ps(x, x, z), e);
    t = _mm256_div_ps(SET8(1.0f), _mm256_fmadd_ps(abs_avx2(x), SET8(CDF_K), SET8(1.0f)));
    s = _mm256_fmadd_ps(SET8(CDF_S9), t, SET8(CDF_S8));
    s = _mm256_fmadd_ps(s, t, SET8(CDF_S7));
    s = _mm256_fmadd_ps(s, t, SET8(CDF_S6));
    s = _mm256_fmadd_ps(s, t, SET8(CDF_S5));
    s = _mm256_fmadd_ps(s, t, SET8(CDF_S4));
    s = _mm256_fmadd_ps(s, t, SET8(CDF_S3));
    s = _mm256_fmadd_ps(s, t, SET8(CDF_S2));
    s = _mm256_fmadd_ps(s, t, SET8(CDF_S1));
    s = _mm256_fmadd_ps(s, t, SET8(CDF_S0));
    return _mm256_mul_ps(t, s);
}

AVX2 static __m256 gelu_avx2(__m256 x)
{
    __m256 low = _mm256_max_ps(SET8(-GELU_CLAMP), x), gauss, ratio;
    ratio = normal_tail_avx2(_mm256_min_ps(SET8(GELU_CLAMP), low), &gauss);
    return _mm256_blendv_ps(_mm256_mul_ps(_mm256_mul_ps(low, ratio), gauss),
                            _mm256_mul_ps(low, _mm256_fnmadd_ps(gauss, ratio, SET8(1.0f))),
                            _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ));
}

AVX2 static __m256 gelu_grad_avx2(__m256 g, __m256 x)
{
    __m256 clamped = _mm256_min_ps(SET8(GELU_CLAMP), _mm256_max_ps(SET8(-GELU_CLAMP), x));
    __m256 gauss, ratio, grad;
    ratio = normal_tail_avx2(clamped, &gauss);
    grad = _mm256_blendv_ps(
        _mm256_mul_ps(gauss, _mm256_fmadd_ps(clamped, SET8(INV_SQRT_2PI), ratio)),
        _mm256_fmadd_ps(clamped, _mm256_mul_ps(gauss, SET8(INV_SQRT_2PI)),
                        _mm256_fnmadd_ps(gauss, ratio, SET8(1.0f))),
        _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ));
    return _mm256_mul_ps(g, grad);
}

/* All ones in the first `left` lanes (any left >= 1; 8 or more is every lane). */
AVX2 static __m256i lanes_avx2(int64_t left)
{
    __m256i count = _mm256_set1_epi32(left >= 8 ? 8 : (int)left);
    return _mm256_cmpgt_epi32(count, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Defines name(x, y, n): y = f(x), 8 floats a step, the last few through a mask. */
#define AVX2_MAP(name, f)                                                           \
    AVX2 static void name(const float *x, float *y, int64_t n)                      \
    {                                                                               \
        int64_t i;                                                                  \
        __m256i m;                                                                  \
        for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(x + i))); \
        if (i == n) return;                                                         \
        m = lanes_avx2(n - i);                                                      \
        _mm256_maskstore_ps(y + i, m, f(_mm256_maskload_ps(x + i, m)));             \
    }

AVX2_MAP(avx2_exp, exp_avx2)
AVX2_MAP(avx2_sigmoid, sigmoid_avx2)
AVX2_MAP(avx2_tanh, tanh_avx2)
AVX2_MAP(avx2_gelu, gelu_avx2)

AVX2 static void avx2_gelu_grad(const float *g, const float *x, float *y, int64_t n)
{
    int64_t i;
    __m256i m;
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, gelu_grad_avx2(_mm256_loadu_ps(g + i), _mm256_loadu_ps(x + i)));
    if (i == n) return;
    m = lanes_avx2(n - i);
    _mm256_maskstore_ps(y + i, m, gelu_grad_avx2(_mm256_maskload_ps(g + i, m),
                                                 _mm256_maskload_ps(x + i, m)));
}

/* exp(x - shift) for the first min(left, 8) of 8 floats, stored to y (unless
   NULL); returns them with 0 in the lanes past left. */
AVX2 static __m256 exp_step_avx2(const float *x, __m256 shift, float *y, int64_t left)
{
    __m256 e;
    __m256i m;
    if (left >= 8) {
        e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x), shift));
        if (y) _mm256_storeu_ps(y, e);
        return e;
    }
    m = lanes_avx2(left);
    e = _mm256_and_ps(exp_avx2(_mm256_sub_ps(_mm256_maskload_ps(x, m), shift)),
                      _mm256_castsi256_ps(m));
    if (y) _mm256_maskstore_ps(y, m, e);
    return e;
}

/* Partial sums 0-7 in `low`, 8-15 in `high`: value i goes to partial sum i % 16. */
AVX2 static float avx2_exp_sum(const float *x, float shift, float *y, int64_t n)
{
    __m256 s = SET8(shift), low = _mm256_setzero_ps(), high = _mm256_setzero_ps();
    float lane[16];
    int64_t i;
    for (i = 0; i < n; i += 16) {
        low = _mm256_add_ps(low, exp_step_avx2(x + i, s, y ? y + i : NULL, n - i));
        if (i + 8 < n)
            high = _mm256_add_ps(high, exp_step_avx2(x + i + 8, s, y ? y + i + 8 : NULL, n - i - 8));
    }
    _mm256_storeu_ps(lane, low);
    _mm256_storeu_ps(lane + 8, high);
    return lanes_sum(lane);
}

AVX2 static float avx2_max(const float *x, int64_t n)
{
    __m256 best = SET8(x[0]);
    float lane[8], result;
    int64_t i;
    int l;
    for (i = 0; i + 8 <= n; i += 8) best = _mm256_max_ps(best, _mm256_loadu_ps(x + i));
    if (i < n) {
        __m256i m = lanes_avx2(n - i);
        best = _mm256_blendv_ps(best, _mm256_max_ps(best, _mm256_maskload_ps(x + i, m)),
                                _mm256_castsi256_ps(m));
    }
    _mm256_storeu_ps(lane, best);
    result = lane[0];
    for (l = 1; l < 8; l++) result = lane[l] > result ? lane[l] : result;
    return result;
}

static const VecMathSet avx2_set = {
    "avx2", avx2_exp, avx2_sigmoid, avx2_tanh, avx2_gelu,
    avx2_exp_sum, avx2_max, avx2_gelu_grad
};

#endif /* x86 */

/* ---- choice of set and the entry points ---------------------------------- */

static const VecMathSet *set_named(const char *name)
{
    if (!cpu_can_run(name)) return NULL;
#if defined(__x86_64__) || defined(__i386__)
    if (strcmp(name, "avx512") == 0) return &avx512_set;
    if (strcmp(name, "avx2") == 0) return &avx2_set;
#endif
    return &generic_set;
}

static const VecMathSet *active_set;

static const VecMathSet *current_set(void)
{
    const VecMathSet *set = __atomic_load_n(&active_set, __ATOMIC_ACQUIRE);
    if (!set) {
        set = set_named(cpu_simd_default());
        __atomic_store_n(&active_set, set, __ATOMIC_RELEASE);
    }
    return set;
}

int vecmath_use(const char *name)
{
    const VecMathSet *set = set_named(name ? name : cpu_simd_default());
    if (!set) return 0;
    __atomic_store_n(&active_set, set, __ATOMIC_RELEASE);
    return 1;
}

const char *vecmath_name(void) { return current_set()->name; }

void vec_exp(const float *x, float *y, int64_t n) { current_set()->exp(x, y, n); }

float vec_exp_sum(const float *x, float shift, float *y, int64_t n)
{
    return current_set()->exp_sum(x, shift, y, n);
}

float vec_max(const float *x, int64_t n) { return current_set()->max(x, n); }

void vec_sigmoid(const float *x, float *y, int64_t n) { current_set()->sigmoid(x, y, n); }

void vec_tanh(const float *x, float *y, int64_t n) { current_set()->tanh(x, y, n); }

void vec_gelu(const float *x, float *y, int64_t n) { current_set()->gelu(x, y, n); }

void vec_gelu_grad(const float *g, const float *x, float *y, int64_t n)
{
    current_set()->gelu_grad(g, x, y, n);
}
