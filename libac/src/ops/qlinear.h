/*
 * qlinear.h - what the quantized recurrent layers (qrnn.c) use of the int8
 * Linear (qlinear.c).
 */
#ifndef AC_QLINEAR_H
#define AC_QLINEAR_H

#include "internal.h"
#include "kernels/qgemm.h"

struct AcQLinear {
    int32_t refs;
    int32_t has_bias;
    int64_t in, out;
    size_t bytes;            /* of the whole block, this header included */
    int8_t *weight;          /* (out, in), then QGEMM_SLACK zero bytes */
    float *scale;            /* (out) */
    float *bias;             /* (out), or NULL */
};

/* Check q (named what, for op): an error unless it is a layer. */
int qlinear_check(const char *op, const AcQLinear *q, const char *what);
/* y (m, out) = q applied to the m rows of x (m, in), both contiguous. */
int qlinear_rows(const AcQLinear *q, const float *x, int64_t m, float *y);

/* The kernel set that runs q's products. */
const QGemmKernels *qlinear_kernels(const AcQLinear *q);
/* Quantize the m rows of k floats of x to dst's rows of ld bytes (int8, or
   + 128 when plus_128, zero from k to ld), and their scales (ac.h). */
void qlinear_quantize_rows(const float *x, int64_t m, int64_t k, int64_t ld, int plus_128, uint8_t *dst,
                           float *scales);
/* sums (m, out) = the exact int32 products of the m quantized rows qx (ld_x
   bytes apart, quantized for kern) with q's weight, from panels (q's weight
   packed by qgemm_pack_panels) where kern has a panel kernel and panels is not
   NULL. Threads split the columns. */
void qlinear_sums(const AcQLinear *q, const QGemmKernels *kern, const QPanels *panels,
                  const uint8_t *qx, int64_t ld_x, int64_t m, int32_t *sums);

#endif /* AC_QLINEAR_H */
