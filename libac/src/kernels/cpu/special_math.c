/*
 * cpu/special_math.c - the special functions of cpu/pointwise.c, one double
 * at a time: erfinv, digamma, trigamma, the Hurwitz zeta and polygamma, erfcx,
 * log_ndtr, ndtri, the modified Bessel functions I0 and I1, entr and sinc.
 *
 * Computed in double from float32 inputs, so the float32 results are right
 * to about an ulp where float32 formulas lose digits (near poles, in tails).
 * Pure math: no tensors, no threads (each call is independent).
 */
#include "kernels/cpu/special_math.h"

#include <math.h>

#define PI_D 3.14159265358979323846

/* erfinv: Giles' approximation, then two Newton steps on erf in double. */
double erfinv_double(double x)
{
    double w, p, y;
    int k;
    if (!(x > -1.0 && x < 1.0)) {
        if (x == 1.0) return INFINITY;
        if (x == -1.0) return -INFINITY;
        return NAN;
    }
    w = -log((1.0 - x) * (1.0 + x));
    if (w < 5.0) {
        w -= 2.5;
        p = 2.81022636e-08;
        p = 3.43273939e-07 + p * w;
        p = -3.5233877e-06 + p * w;
        p = -4.39150654e-06 + p * w;
        p = 0.00021858087 + p * w;
        p = -0.00125372503 + p * w;
        p = -0.00417768164 + p * w;
        p = 0.246640727 + p * w;
        p = 1.50140941 + p * w;
    } else {
        w = sqrt(w) - 3.0;
        p = -0.000200214257;
        p = 0.000100950558 + p * w;
        p = 0.00134934322 + p * w;
        p = -0.00367342844 + p * w;
        p = 0.00573950773 + p * w;
        p = -0.0076224613 + p * w;
        p = 0.00943887047 + p * w;
        p = 1.00167406 + p * w;
        p = 2.83297682 + p * w;
    }
    y = p * x;
    for (k = 0; k < 2; k++)   /* erf'(y) = 2/sqrt(pi) exp(-y^2) */
        y -= (erf(y) - x) / (1.1283791670955126 * exp(-y * y));
    return y;
}

/* digamma: reflection below 0, recurrence up to 6, then the asymptotic series. */
double digamma_double(double x)
{
    double result = 0.0, inv2;
    if (x == 0.0) return signbit(x) ? INFINITY : -INFINITY;
    if (x < 0.0) {
        if (x == floor(x)) return NAN;
        return digamma_double(1.0 - x) - PI_D / tan(PI_D * x);
    }
    while (x < 6.0) {
        result -= 1.0 / x;
        x += 1.0;
    }
    inv2 = 1.0 / (x * x);
    return result + log(x) - 0.5 / x -
           inv2 * (1.0 / 12 - inv2 * (1.0 / 120 - inv2 * (1.0 / 252 - inv2 * (1.0 / 240 - inv2 / 132))));
}

/* trigamma (digamma's derivative): reflection below 1/2, recurrence, series. */
double trigamma_double(double x)
{
    double result = 0.0, inv2, s;
    if (x == floor(x) && x <= 0.0) return INFINITY;
    if (x < 0.5) {
        s = sin(PI_D * x);
        return PI_D * PI_D / (s * s) - trigamma_double(1.0 - x);
    }
    while (x < 6.0) {
        result += 1.0 / (x * x);
        x += 1.0;
    }
    inv2 = 1.0 / (x * x);
    return result + 1.0 / x + 0.5 * inv2 +
           inv2 / x * (1.0 / 6 - inv2 * (1.0 / 30 - inv2 * (1.0 / 42 - inv2 / 30)));
}

/* Hurwitz zeta(x, q) = sum over k >= 0 of (q + k)^-x, by Euler-Maclaurin: at least
   ten terms summed (more for a negative q), the rest as an integral and eight
   Bernoulli corrections. */
double zeta_double(double x, double q)
{
    static const double b2j[8] = {1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66,
                                  -691.0 / 2730, 7.0 / 6, -3617.0 / 510};
    double sum = 0.0, a, term, fact = 1.0, rising;
    int k, j;
    if (x == 1.0) return INFINITY;
    if (x < 1.0 || isnan(x) || isnan(q)) return NAN;
    if (q <= 0.0) {
        if (q == floor(q)) return INFINITY;
        if (x != floor(x)) return NAN;   /* q^-x of a negative q */
    }
    /* Sum directly until the tail starts past 9: the corrections diverge near
       q + k = 0, so a negative q is first carried up to positive terms. */
    for (k = 0; k < 10 || q + k <= 9.0; k++) sum += pow(q + k, -x);
    a = q + k;
    sum += pow(a, 1.0 - x) / (x - 1.0) + 0.5 * pow(a, -x);
    rising = x;                          /* x (x + 1) ... (x + 2j - 2) */
    term = pow(a, -x - 1.0);
    for (j = 1; j <= 8; j++) {
        fact *= (2.0 * j - 1.0) * (2.0 * j);   /* (2j)! */
        sum += b2j[j - 1] / fact * rising * term;
        rising *= (x + 2.0 * j - 1.0) * (x + 2.0 * j);
        term /= a * a;
    }
    return sum;
}

/* polygamma(n, x): digamma, trigamma, then (-1)^(n+1) n! zeta(n + 1, x). */
double polygamma_double(int n, double x)
{
    double fact = 1.0;
    int k;
    if (n == 0) return digamma_double(x);
    if (n == 1) return trigamma_double(x);
    for (k = 2; k <= n; k++) fact *= k;
    return (n % 2 ? 1.0 : -1.0) * fact * zeta_double(n + 1.0, x);
}

/* exp(x^2) erfc(x): directly below 26, the asymptotic series above. */
double erfcx_double(double x)
{
    double r;
    if (isnan(x)) return x;
    if (x < 26.0) return exp(x * x) * erfc(x);
    r = 1.0 / (x * x);
    return (1.0 / (x * 1.7724538509055160)) * (1.0 - 0.5 * r * (1.0 - 1.5 * r * (1.0 - 2.5 * r)));
}

/* log Phi(x): log1p of the upper tail above 0, erfcx below (no underflow). */
double log_ndtr_double(double x)
{
    double t = -x / 1.4142135623730951;
    if (x > 0.0) return log1p(-0.5 * erfc(x / 1.4142135623730951));
    return log(0.5 * erfcx_double(t)) - t * t;
}

/* Phi^-1(p): Acklam's rational approximation, then two Halley steps on
   0.5 erfc(-x / sqrt 2), exact in the tails. */
double ndtri_double(double p)
{
    static const double a[6] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                                1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[5] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                6.680131188771972e+01, -1.328068155288572e+01};
    static const double c[6] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00};
    static const double d[4] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                3.754408661907416e+00};
    double q, r, x, e, u;
    int k;
    if (!(p >= 0.0 && p <= 1.0)) return NAN;
    if (p == 0.0) return -INFINITY;
    if (p == 1.0) return INFINITY;
    if (p > 0.5) return -ndtri_double(1.0 - p);
    if (p < 0.02425) {
        q = sqrt(-2.0 * log(p));
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
    } else {
        q = p - 0.5;
        r = q * q;
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
    }
    for (k = 0; k < 2; k++) {
        e = 0.5 * erfc(-x / 1.4142135623730951) - p;
        u = e * 2.5066282746310002 * exp(0.5 * x * x);
        x -= u / (1.0 + 0.5 * x * u);
    }
    return x;
}

/* Modified Bessel I_nu (nu 0 or 1), times exp(-|x|) when scaled: the power
   series up to |x| = 30 (all terms positive), the asymptotic series above. */
double bessel_i(int nu, double x, int scaled)
{
    double ax = fabs(x), sum, term, y, mu;
    int k;
    if (isnan(x)) return x;
    if (ax <= 30.0) {
        term = nu ? 0.5 * ax : 1.0;
        sum = term;
        for (k = 1; k < 200 && term > sum * 1e-17; k++) {
            term *= (0.25 * ax * ax) / ((double)k * (k + nu));
            sum += term;
        }
        if (scaled) sum *= exp(-ax);
    } else {
        mu = 4.0 * nu * nu;
        term = 1.0;
        sum = 1.0;
        for (k = 1; k < 12; k++) {
            term *= -(mu - (2.0 * k - 1) * (2.0 * k - 1)) / (k * 8.0 * ax);
            sum += term;
        }
        sum /= sqrt(2.0 * PI_D * ax);
        if (!scaled) sum *= exp(ax);   /* overflows to inf past ~710, as it should */
    }
    y = sum;
    return (nu && x < 0.0) ? -y : y;
}

double entr_double(double x)
{
    if (isnan(x)) return x;
    if (x > 0.0) return -x * log(x);
    return x == 0.0 ? 0.0 : -INFINITY;
}

double sinc_double(double x)
{
    if (x == 0.0) return 1.0;
    return sin(PI_D * x) / (PI_D * x);
}
