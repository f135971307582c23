/*
 * qlinear.h - what the quantized recurrent layers (qrnn.c) use of the int8
 * Linear (qlinear.c).
 */
#ifndef AC_QLINEAR_H
#define AC_QLINEAR_H

#include "internal.h"

/* Check q (named what, for op): an error unless it is a layer. */
int qlinear_check(const char *op, const AcQLinear *q, const char *what);
/* y (m, out) = q applied to the m rows of x (m, in), both contiguous. */
int qlinear_rows(const AcQLinear *q, const float *x, int64_t m, float *y);

#endif /* AC_QLINEAR_H */
