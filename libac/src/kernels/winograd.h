/*
 * winograd.h - 3x3 convolutions with stride 1 and padding 1 by Winograd's
 * F(2x2, 3x3): each 2x2 tile of output from a 4x4 tile of input with 16
 * multiplications per channel pair instead of 36. The products over channels
 * are 16 GEMMs, one per point of the transformed tile; the weight gradient's
 * products over tiles likewise.
 */
#ifndef AC_WINOGRAD_H
#define AC_WINOGRAD_H

#include <stdint.h>

/* Points of a transformed tile: the 16 GEMMs. */
#define WINOGRAD_POINTS 16

/* Tiles of 2x2 output pixels over an h x w plane. */
int64_t winograd_tiles(int64_t h, int64_t w);

/*
 * u (16 x channels x filters): the filters transformed, G g G^T, each point's
 * matrix laid out as the right operand of its GEMM (v times u; u^T v on
 * wide maps). The weight w is (filters, channels, 3, 3); or, when adjoint,
 * (channels, filters, 3, 3) read rotated by 180 degrees: the filters of dx = conv_transpose(dy, w).
 */
void winograd_filters(const float *w, int64_t filters, int64_t channels, int adjoint, float *u);

/* Floats of scratch that winograd_conv and winograd_weight_grad need for these sizes. */
int64_t winograd_scratch(int64_t images, int64_t channels, int64_t filters, int64_t h, int64_t w);

/*
 * out (images x filters x h x w) = the correlation of x (images x channels x
 * h x w, zero-padded by 1) with the filters transformed into u, plus
 * bias[f] when bias is not NULL; scratch holds winograd_scratch() floats.
 */
void winograd_conv(const float *x, int64_t images, int64_t channels, int64_t h, int64_t w,
                   const float *u, int64_t filters, const float *bias, float *scratch,
                   float *out);

/*
 * The weight gradient's Winograd form: du (16 x filters x channels) = the sum
 * over the tiles of (A dy A^T) . (B^T x B), for dy (images x filters x h x w)
 * the gradient of winograd_conv's output and x its input; added to du when
 * accumulate, else written. scratch as for winograd_conv.
 */
void winograd_weight_grad(const float *x, const float *dy, int64_t images, int64_t channels,
                          int64_t filters, int64_t h, int64_t w, float *scratch, float *du,
                          int accumulate);

/* dw (filters, channels, 3, 3) = G^T du G: du's sum taken back to the kernels. */
void winograd_filters_grad(const float *du, int64_t filters, int64_t channels, float *dw);

#endif /* AC_WINOGRAD_H */
