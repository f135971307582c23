/*
 * cpu/special_math.h - special functions in double (cpu/special_math.c), for
 * the pointwise kernels.
 */
#ifndef AC_CPU_SPECIAL_MATH_H
#define AC_CPU_SPECIAL_MATH_H

double erfinv_double(double x);            /* +-inf at +-1, NaN outside */
double digamma_double(double x);           /* -inf at +0, +inf at -0, NaN at negative integers */
double trigamma_double(double x);          /* digamma's derivative */
double zeta_double(double x, double q);    /* Hurwitz zeta, PyTorch's domain rules */
double polygamma_double(int n, double x);  /* n >= 0 */
double erfcx_double(double x);             /* exp(x^2) erfc(x) */
double log_ndtr_double(double x);          /* log Phi(x) */
double ndtri_double(double p);             /* Phi^-1(p) */
double bessel_i(int nu, double x, int scaled);   /* I_0 or I_1, times exp(-|x|) when scaled */
double entr_double(double x);              /* -x log x */
double sinc_double(double x);              /* sin(pi x) / (pi x), 1 at 0 */

#endif /* AC_CPU_SPECIAL_MATH_H */
