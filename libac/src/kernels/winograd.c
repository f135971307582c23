/*
 * winograd.c - Winograd's F(2x2, 3x3) for 3x3 convolutions with stride 1 and
 * padding 1 (Lavin and Gray, "Fast Algorithms for Convolutional Neural
 * Networks", 2016): Y = A^T [ (G g G^T) . (B^T d B) ] A per 4x4 input tile d
 * (stride 2) and 2x2 output tile Y, the elementwise product summed over
 * channels as 16 GEMMs. The weight gradient follows from the same formula:
 * dg = G^T [ sum over tiles of (A dY A^T) . (B^T d B) ] G, 16 GEMMs over the
 * tiles. The transforms use only 1, -1 and 1/2, so the results stay within a
 * few float roundings of the direct sums.
 *
 * Not here: choosing when to use it and sharing images among threads
 * (ops/conv.c), the GEMM (gemm.c).
 */
#include "internal.h"
#include "winograd.h"

#include <string.h>

/*
 * The transforms run over CHUNK channels (filters) or CHUNK tiles along a
 * row at a time, in loops over contiguous (or stride-2) arrays that the
 * compiler vectorizes: first down the rows of a tile, then across.
 */
#define CHUNK 32

/* Those loops are compiled for AVX-512, AVX2 and plain x86-64, the CPU picking
   at load time; adds and halvings without contraction give the same bits on each.
   Not under ThreadSanitizer: the loader runs a program's own resolvers at
   start-up, before TSan has started, and those crash (the tsan tests link conv
   since the kernel table names it). */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define TRANSFORM_KERNEL __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TRANSFORM_KERNEL
#endif

int64_t winograd_tiles(int64_t h, int64_t w)
{
    return ((h + 1) / 2) * ((w + 1) / 2);
}

TRANSFORM_KERNEL void winograd_filters(const float *w, int64_t filters, int64_t channels,
                                       int adjoint, float *u)
{
    const int64_t plane = filters * channels;
    float g[9][CHUNK], gg[4][3][CHUNK];
    int64_t f, c0, c, count;
    int a, b;
    for (f = 0; f < filters; f++) {
        for (c0 = 0; c0 < channels; c0 += count) {
            count = channels - c0 < CHUNK ? channels - c0 : CHUNK;
            for (c = 0; c < count; c++)   /* the kernels of CHUNK channels, tap by tap */
                for (a = 0; a < 9; a++)
                    g[a][c] = adjoint ? w[((c0 + c) * filters + f) * 9 + 8 - a]
                                      : w[(f * channels + c0 + c) * 9 + a];
            for (b = 0; b < 3; b++) {     /* G g: G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1] */
                for (c = 0; c < count; c++) {
                    gg[0][b][c] = g[b][c];
                    gg[1][b][c] = 0.5f * (g[b][c] + g[3 + b][c] + g[6 + b][c]);
                    gg[2][b][c] = 0.5f * (g[b][c] - g[3 + b][c] + g[6 + b][c]);
                    gg[3][b][c] = g[6 + b][c];
                }
            }
            for (a = 0; a < 4; a++) {     /* (G g) G^T */
                float *row = u + (int64_t)a * 4 * plane + f * channels + c0;
                for (c = 0; c < count; c++) {
                    row[c] = gg[a][0][c];
                    row[plane + c] = 0.5f * (gg[a][0][c] + gg[a][1][c] + gg[a][2][c]);
                    row[2 * plane + c] = 0.5f * (gg[a][0][c] - gg[a][1][c] + gg[a][2][c]);
                    row[3 * plane + c] = gg[a][2][c];
                }
            }
        }
    }
}


/*
 * v[point][tile] (point stride `stride`) for tiles [t0, t0 + count) of tile
 * row ty of one plane: rows 2ty-1 .. 2ty+2 and columns 2t0-1 .. 2(t0+count),
 * zero outside the plane.
 */
TRANSFORM_KERNEL static void input_tiles(const float *plane, int64_t h, int64_t w, int64_t ty,
                                         int64_t t0, int64_t count, float *v, int64_t stride)
{
    static const float zeros[2 * CHUNK + 2];
    float t[4][2 * CHUNK + 2];
    const float *d[4];   /* d[a][j - lo]: row 2ty-1+a, column col0 + j */
    const int64_t width = 2 * count + 2, col0 = 2 * t0 - 1;
    const int64_t lo = col0 < 0 ? -col0 : 0, hi = col0 + width > w ? w - col0 : width;
    int64_t a, j, k;
    for (a = 0; a < 4; a++) {
        const int64_t y = 2 * ty - 1 + a;
        d[a] = y < 0 || y >= h ? zeros : plane + y * w + col0 + lo;
    }
    for (j = 0; j < lo; j++) t[0][j] = t[1][j] = t[2][j] = t[3][j] = 0.0f;
    for (j = lo; j < hi; j++) {   /* B^T d: B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1] */
        t[0][j] = d[0][j - lo] - d[2][j - lo];
        t[1][j] = d[1][j - lo] + d[2][j - lo];
        t[2][j] = d[2][j - lo] - d[1][j - lo];
        t[3][j] = d[1][j - lo] - d[3][j - lo];
    }
    for (j = hi; j < width; j++) t[0][j] = t[1][j] = t[2][j] = t[3][j] = 0.0f;
    for (a = 0; a < 4; a++) {       /* (B^T d) B, tile k reading columns 2k .. 2k+3 */
        float *o = v + a * 4 * stride;
        for (k = 0; k < count; k++) {
            const float c0 = t[a][2 * k], c1 = t[a][2 * k + 1];
            const float c2 = t[a][2 * k + 2], c3 = t[a][2 * k + 3];
            o[k] = c0 - c2;
            o[stride + k] = c1 + c2;
            o[2 * stride + k] = c2 - c1;
            o[3 * stride + k] = c1 - c3;
        }
    }
}

/* v[point][c][tile] = B^T d B for every tile of every image's channel c. */
static void transform_input(const float *x, int64_t images, int64_t channels, int64_t h,
                            int64_t w, float *v)
{
    const int64_t th = (h + 1) / 2, tw = (w + 1) / 2, tiles = images * th * tw;
    int64_t n, c, ty, t0;
    for (n = 0; n < images; n++)
        for (c = 0; c < channels; c++)
            for (ty = 0; ty < th; ty++)
                for (t0 = 0; t0 < tw; t0 += CHUNK)
                    input_tiles(x + (n * channels + c) * h * w, h, w, ty, t0,
                                tw - t0 < CHUNK ? tw - t0 : CHUNK,
                                v + c * tiles + (n * th + ty) * tw + t0, channels * tiles);
}

/*
 * Output rows 2ty and 2ty+1 (the second if inside the plane), columns
 * 2t0 .. 2(t0+count) clipped to w, from m[point][tile] (point stride
 * `stride`): A^T m A + bias, A^T = [1 1 1 0; 0 1 -1 -1].
 */
TRANSFORM_KERNEL static void output_tiles(const float *m, int64_t stride, int64_t h, int64_t w,
                                          int64_t ty, int64_t t0, int64_t count, float bias,
                                          float *plane)
{
    float s[2][4][CHUNK], y[2 * CHUNK];
    const int64_t cols = 2 * count < w - 2 * t0 ? 2 * count : w - 2 * t0;
    int64_t b, k, r;
    for (b = 0; b < 4; b++) {       /* A^T m */
        const float *m0 = m + b * stride, *m1 = m + (4 + b) * stride;
        const float *m2 = m + (8 + b) * stride, *m3 = m + (12 + b) * stride;
        for (k = 0; k < count; k++) {
            s[0][b][k] = m0[k] + m1[k] + m2[k];
            s[1][b][k] = m1[k] - m2[k] - m3[k];
        }
    }
    for (r = 0; r < 2 && 2 * ty + r < h; r++) {   /* (A^T m) A, into the plane unless clipped */
        float *row = plane + (2 * ty + r) * w + 2 * t0, *dst = cols == 2 * count ? row : y;
        for (k = 0; k < count; k++) {
            dst[2 * k] = s[r][0][k] + s[r][1][k] + s[r][2][k] + bias;
            dst[2 * k + 1] = s[r][1][k] - s[r][2][k] - s[r][3][k] + bias;
        }
        if (dst == y) memcpy(row, y, (size_t)cols * sizeof(float));
    }
}

/* out's 2x2 tiles = A^T m A (+ bias), clipped to the plane. */
static void transform_output(const float *m, int64_t images, int64_t filters, int64_t h,
                             int64_t w, const float *bias, float *out)
{
    const int64_t th = (h + 1) / 2, tw = (w + 1) / 2, tiles = images * th * tw;
    int64_t n, f, ty, t0;
    for (n = 0; n < images; n++)
        for (f = 0; f < filters; f++)
            for (ty = 0; ty < th; ty++)
                for (t0 = 0; t0 < tw; t0 += CHUNK)
                    output_tiles(m + f * tiles + (n * th + ty) * tw + t0, filters * tiles, h, w,
                                 ty, t0, tw - t0 < CHUNK ? tw - t0 : CHUNK,
                                 bias ? bias[f] : 0.0f, out + (n * filters + f) * h * w);
}

void winograd_conv(const float *x, int64_t images, int64_t channels, int64_t h, int64_t w,
                   const float *u, int64_t filters, const float *bias, float *v, float *m,
                   float *out)
{
    const int64_t tiles = images * winograd_tiles(h, w);
    int point;
    transform_input(x, images, channels, h, w, v);
    for (point = 0; point < WINOGRAD_POINTS; point++)
        gemm(0, 0, filters, tiles, channels, 1.0f, u + point * filters * channels, channels,
             v + point * channels * tiles, tiles, 0.0f, m + point * filters * tiles, tiles);
    transform_output(m, images, filters, h, w, bias, out);
}

/*
 * m[point][tile] (point stride `stride`) = A dy A^T for tiles [t0, t0 + count)
 * of tile row ty of one plane of dy: the adjoint of output_tiles, reading the
 * 2x2 tiles (zero past the plane's edges). A = [1 0; 1 1; 1 -1; 0 -1].
 */
TRANSFORM_KERNEL static void grad_tiles(const float *plane, int64_t h, int64_t w, int64_t ty,
                                        int64_t t0, int64_t count, float *m, int64_t stride)
{
    float y[2][2 * CHUNK], e[2][4][CHUNK];
    const int64_t cols = 2 * count < w - 2 * t0 ? 2 * count : w - 2 * t0;
    int64_t r, k, j;
    for (r = 0; r < 2; r++) {
        if (2 * ty + r < h)
            memcpy(y[r], plane + (2 * ty + r) * w + 2 * t0, (size_t)cols * sizeof(float));
        for (j = 2 * ty + r < h ? cols : 0; j < 2 * count; j++) y[r][j] = 0.0f;
        for (k = 0; k < count; k++) {   /* dy A^T, row r */
            const float y0 = y[r][2 * k], y1 = y[r][2 * k + 1];
            e[r][0][k] = y0;
            e[r][1][k] = y0 + y1;
            e[r][2][k] = y0 - y1;
            e[r][3][k] = -y1;
        }
    }
    for (j = 0; j < 4; j++) {           /* A (dy A^T) */
        for (k = 0; k < count; k++) {
            m[j * stride + k] = e[0][j][k];
            m[(4 + j) * stride + k] = e[0][j][k] + e[1][j][k];
            m[(8 + j) * stride + k] = e[0][j][k] - e[1][j][k];
            m[(12 + j) * stride + k] = -e[1][j][k];
        }
    }
}

void winograd_weight_grad(const float *x, const float *dy, int64_t images, int64_t channels,
                          int64_t filters, int64_t h, int64_t w, float *v, float *m, float *du,
                          int accumulate)
{
    const int64_t th = (h + 1) / 2, tw = (w + 1) / 2, tiles = images * th * tw;
    int64_t n, f, ty, t0;
    int point;
    transform_input(x, images, channels, h, w, v);
    for (n = 0; n < images; n++)
        for (f = 0; f < filters; f++)
            for (ty = 0; ty < th; ty++)
                for (t0 = 0; t0 < tw; t0 += CHUNK)
                    grad_tiles(dy + (n * filters + f) * h * w, h, w, ty, t0,
                               tw - t0 < CHUNK ? tw - t0 : CHUNK,
                               m + f * tiles + (n * th + ty) * tw + t0, filters * tiles);
    for (point = 0; point < WINOGRAD_POINTS; point++)
        gemm(0, 1, filters, channels, tiles, 1.0f, m + point * filters * tiles, tiles,
             v + point * channels * tiles, tiles, accumulate ? 1.0f : 0.0f,
             du + point * filters * channels, channels);
}

TRANSFORM_KERNEL void winograd_filters_grad(const float *du, int64_t filters, int64_t channels,
                                            float *dw)
{
    const int64_t plane = filters * channels;
    float z[4][3][CHUNK], g[3][3][CHUNK];
    int64_t f, c0, c, count;
    int i, a, b;
    for (f = 0; f < filters; f++) {
        for (c0 = 0; c0 < channels; c0 += count) {
            count = channels - c0 < CHUNK ? channels - c0 : CHUNK;
            for (i = 0; i < 4; i++) {   /* Z = X G, X row i the points (i, 0..3) */
                const float *x0 = du + (int64_t)i * 4 * plane + f * channels + c0;
                for (c = 0; c < count; c++) {
                    const float p0 = x0[c], p1 = x0[plane + c], p2 = x0[2 * plane + c];
                    const float p3 = x0[3 * plane + c];
                    z[i][0][c] = p0 + 0.5f * (p1 + p2);
                    z[i][1][c] = 0.5f * (p1 - p2);
                    z[i][2][c] = 0.5f * (p1 + p2) + p3;
                }
            }
            for (b = 0; b < 3; b++) {   /* G^T Z */
                for (c = 0; c < count; c++) {
                    g[0][b][c] = z[0][b][c] + 0.5f * (z[1][b][c] + z[2][b][c]);
                    g[1][b][c] = 0.5f * (z[1][b][c] - z[2][b][c]);
                    g[2][b][c] = 0.5f * (z[1][b][c] + z[2][b][c]) + z[3][b][c];
                }
            }
            for (c = 0; c < count; c++)
                for (a = 0; a < 3; a++)
                    for (b = 0; b < 3; b++)
                        dw[(f * channels + c0 + c) * 9 + a * 3 + b] = g[a][b][c];
        }
    }
}
