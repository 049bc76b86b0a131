/* int4 weights times int8-quantized activations with integer dot products (the AVX-512 VNNI
 * instruction vpdpbusd: 64 products of an unsigned and a signed byte summed into 16 int32 lanes);
 * built by kernels/cpu/native.py with the machine's C compiler, called from numba's threads.
 *
 * Weights, one matrix [N, K] in blocks of 16 rows ("int4v", made at load by native.py):
 *   data  uint8 [N/16, K/8, 16, 4]: for columns 8c..8c+7 of a block, 4 bytes per row; byte p of
 *         row i holds column 8c+p in its low nibble and 8c+4+p in its high one, so one 64-byte
 *         load is 16 rows x 8 columns and each 32-bit lane is one row's 4 adjacent columns;
 *   sm    [N/16, K/G, 2, 16]: scale s and minimum m of each row and group of G columns,
 *         w = q * s + m (bf16 bits, or float32 when sm_f32).
 * Activations, one row per token: xq int8 [M, K] and dx float [M, K/32] (x ~ dx * xq, a scale per
 * 32 columns, as llama.cpp's Q8_0), xs float [M, K/G] the exact sums of x per group (the minimum's
 * term). A row's product is then sum_g s_g * sum_b dx_b * sum_k q_k xq_k + m_g * xs_g, where the
 * inner sum is exact in int32; only the activations' rounding differs from the float product.
 *
 * Without AVX-512 VNNI the same arithmetic runs in plain C (clover_int4_simd() says which), and
 * native.py then prefers the float kernels of int4.py.
 */
#include <stdint.h>
#include <math.h>
#include <string.h>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#include <immintrin.h>
#define CLOVER_VNNI 1
#endif

#define XBLOCK 32
#define ROWS 16
#define MTILE 4

int clover_int4_simd(void) {
#ifdef CLOVER_VNNI
    return 512;
#else
    return 0;
#endif
}

static inline float bf16_to_f32(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* x [M, K] float32 (or bf16 bits when x_bf16) -> xq, dx (per 32 columns), xs (per group of G). */
void clover_quantize_rows(const void *x, int x_bf16, int64_t m_rows, int64_t k, int64_t g, int8_t *xq,
                          float *dx, float *xs) {
    float v[XBLOCK];
    for (int64_t m = 0; m < m_rows; m++) {
        float group_sum = 0.0f;
        for (int64_t b = 0; b < k / XBLOCK; b++) {
            const int64_t at = m * k + b * XBLOCK;
            for (int i = 0; i < XBLOCK; i++)
                v[i] = x_bf16 ? bf16_to_f32(((const uint16_t *)x)[at + i]) : ((const float *)x)[at + i];
            float amax = 0.0f, sum = 0.0f;
            for (int i = 0; i < XBLOCK; i++) {
                amax = fmaxf(amax, fabsf(v[i]));
                sum += v[i];
            }
            group_sum += sum;
            if (((b + 1) * XBLOCK) % g == 0) {
                xs[m * (k / g) + (b + 1) * XBLOCK / g - 1] = group_sum;
                group_sum = 0.0f;
            }
            float d = amax / 127.0f;
            float inv = d > 0.0f ? 1.0f / d : 0.0f;
            dx[m * (k / XBLOCK) + b] = d;
            for (int i = 0; i < XBLOCK; i++) xq[at + i] = (int8_t)lrintf(v[i] * inv);
        }
    }
}

#ifdef CLOVER_VNNI
static inline __m512 load_sm(const void *sm, int sm_f32, int64_t at) {
    if (sm_f32) return _mm512_loadu_ps((const float *)sm + at);
    __m256i bits = _mm256_loadu_si256((const __m256i *)((const uint16_t *)sm + at));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

/* MT rows of x (a constant after inlining, so the accumulators stay in registers) times one block of
 * 16 weight rows -> out[m, 16]. Each row keeps two integer accumulators (even and odd chunks of 8
 * columns) so that the dot products' latency does not bound it. */
static inline __attribute__((always_inline)) void block_tile_n(const uint8_t *data, const void *sm,
                                                               int sm_f32, int64_t k, int64_t g,
                                                               const int8_t *xq, const float *dx,
                                                               const float *xs, float *out, int64_t ldo,
                                                               const int MT) {
    const __m512i low = _mm512_set1_epi8(0x0F);
    const int64_t groups = k / g, per_group = g / XBLOCK;
    __m512 accf[MTILE];
    for (int m = 0; m < MT; m++) accf[m] = _mm512_setzero_ps();
    for (int64_t gi = 0; gi < groups; gi++) {
        const __m512 s = load_sm(sm, sm_f32, gi * 2 * ROWS);
        const __m512 mn = load_sm(sm, sm_f32, gi * 2 * ROWS + ROWS);
        for (int64_t bi = 0; bi < per_group; bi++) {
            const int64_t b = gi * per_group + bi;
            __m512i acc[MTILE], odd[MTILE];
            for (int m = 0; m < MT; m++) acc[m] = odd[m] = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int c = 0; c < XBLOCK / 8; c++) {
                const int64_t col = b * XBLOCK + c * 8;
                const __m512i w = _mm512_loadu_si512((const void *)(data + col * 8));
                const __m512i lo = _mm512_and_si512(w, low);
                const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), low);
                for (int m = 0; m < MT; m++) {
                    int32_t x0, x1;
                    memcpy(&x0, xq + m * k + col, 4);
                    memcpy(&x1, xq + m * k + col + 4, 4);
                    if (c & 1) {
                        odd[m] = _mm512_dpbusd_epi32(odd[m], lo, _mm512_set1_epi32(x0));
                        odd[m] = _mm512_dpbusd_epi32(odd[m], hi, _mm512_set1_epi32(x1));
                    } else {
                        acc[m] = _mm512_dpbusd_epi32(acc[m], lo, _mm512_set1_epi32(x0));
                        acc[m] = _mm512_dpbusd_epi32(acc[m], hi, _mm512_set1_epi32(x1));
                    }
                }
            }
            for (int m = 0; m < MT; m++) {
                const __m512i sum = _mm512_add_epi32(acc[m], odd[m]);
                const __m512 scale = _mm512_mul_ps(s, _mm512_set1_ps(dx[m * (k / XBLOCK) + b]));
                accf[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), scale, accf[m]);
            }
        }
        for (int m = 0; m < MT; m++) accf[m] = _mm512_fmadd_ps(mn, _mm512_set1_ps(xs[m * groups + gi]), accf[m]);
    }
    for (int m = 0; m < MT; m++) _mm512_storeu_ps(out + m * ldo, accf[m]);
}

static void block_tile(const uint8_t *data, const void *sm, int sm_f32, int64_t k, int64_t g,
                       const int8_t *xq, const float *dx, const float *xs, int mt, float *out, int64_t ldo) {
    switch (mt) {
    case 1: block_tile_n(data, sm, sm_f32, k, g, xq, dx, xs, out, ldo, 1); break;
    case 2: block_tile_n(data, sm, sm_f32, k, g, xq, dx, xs, out, ldo, 2); break;
    case 3: block_tile_n(data, sm, sm_f32, k, g, xq, dx, xs, out, ldo, 3); break;
    default: block_tile_n(data, sm, sm_f32, k, g, xq, dx, xs, out, ldo, 4); break;
    }
}
#else
static void block_tile(const uint8_t *data, const void *sm, int sm_f32, int64_t k, int64_t g,
                       const int8_t *xq, const float *dx, const float *xs, int mt, float *out, int64_t ldo) {
    const int64_t groups = k / g, per_group = g / XBLOCK;
    for (int m = 0; m < mt; m++) {
        for (int r = 0; r < ROWS; r++) {
            float accf = 0.0f;
            for (int64_t gi = 0; gi < groups; gi++) {
                int64_t at = gi * 2 * ROWS + r;
                float s = sm_f32 ? ((const float *)sm)[at] : bf16_to_f32(((const uint16_t *)sm)[at]);
                float mn = sm_f32 ? ((const float *)sm)[at + ROWS]
                                  : bf16_to_f32(((const uint16_t *)sm)[at + ROWS]);
                for (int64_t bi = 0; bi < per_group; bi++) {
                    const int64_t b = gi * per_group + bi;
                    int32_t acc = 0;
                    for (int c = 0; c < XBLOCK / 8; c++) {
                        const int64_t col = b * XBLOCK + c * 8;
                        const uint8_t *w = data + col * 8 + r * 4;
                        for (int p = 0; p < 4; p++) {
                            acc += (w[p] & 15) * xq[m * k + col + p];
                            acc += (w[p] >> 4) * xq[m * k + col + 4 + p];
                        }
                    }
                    accf += (float)acc * s * dx[m * (k / XBLOCK) + b];
                }
                accf += mn * xs[m * groups + gi];
            }
            out[m * ldo + r] = accf;
        }
    }
}
#endif

/* out[m, 16 b .. 16 b1) for row blocks b0 <= b < b1 of one matrix and every row m < m_rows of x;
 * out's rows are ldo floats apart and start at the matrix's row 0. */
void clover_int4_rows(const uint8_t *data, const void *sm, int sm_f32, int64_t k, int64_t g,
                      const int8_t *xq, const float *dx, const float *xs, int64_t m_rows, float *out,
                      int64_t ldo, int64_t b0, int64_t b1) {
    const int64_t block_bytes = ROWS * k / 2, sm_items = 2 * ROWS * (k / g), elt = sm_f32 ? 4 : 2;
    /* a tile of x rows stays in L2 while every weight block of this range passes over it */
    const int64_t m_chunk = 256;
    for (int64_t m0 = 0; m0 < m_rows; m0 += m_chunk) {
        const int64_t m1 = m0 + m_chunk < m_rows ? m0 + m_chunk : m_rows;
        for (int64_t b = b0; b < b1; b++) {
            const uint8_t *d = data + b * block_bytes;
            const void *s = (const char *)sm + b * sm_items * elt;
            for (int64_t m = m0; m < m1; m += MTILE) {
                int mt = (int)(m1 - m < MTILE ? m1 - m : MTILE);
                block_tile(d, s, sm_f32, k, g, xq + m * k, dx + m * (k / XBLOCK), xs + m * (k / g), mt,
                           out + m * ldo + b * ROWS, ldo);
            }
        }
    }
}
