/* A bf16 matrix times a few bf16 rows of x (lm_head at widths 2-8: 1 GB a forward), each weight row
 * read once and multiplied with every row of x by AVX-512 BF16 dot products (vdpbf16ps: 32 products
 * a instruction, float32 sums). Built with int4_dot.c by kernels/cpu/native.py. torch's bf16 `mm`
 * reads such a matrix at ~13 GB/s on one core here at any width from 2 rows, numba's float loop at
 * 7-10 (benchmarks/cpu_kernels.py); this one is bound by reading the matrix up to ~8 rows.
 *
 * w bf16 bits [N, K] row-major (the model's own tensor, no repacking), x bf16 bits [M, K], K % 32 == 0,
 * M <= 8; out float32 [M, N] (ldo floats per row), rows n0..n1 of it. */
#include <stdint.h>

#if defined(__AVX512F__) && defined(__AVX512BF16__)
#include <immintrin.h>
#define CLOVER_BF16 1
#endif

#define MAX_M 8

int clover_bf16_simd(void) {
#ifdef CLOVER_BF16
    return 512;
#else
    return 0;
#endif
}

#ifdef CLOVER_BF16
/* From 5 rows of x, two weight rows at a time, so each 64-byte piece of x loaded from L1 serves
 * both; up to 4 one row at a time is faster (two rows 4 KB apart contend in L1: measured 2x slower
 * at one row of x). */
static inline __attribute__((always_inline)) void rows_n(const uint16_t *w, int64_t k, const uint16_t *x,
                                                         float *out, int64_t ldo, int64_t n0, int64_t n1,
                                                         const int M) {
    int64_t n = n0;
    for (; M > 4 && n + 1 < n1; n += 2) {
        const uint16_t *r0 = w + n * k, *r1 = r0 + k;
        __m512 a0[MAX_M], a1[MAX_M];
        for (int m = 0; m < M; m++) a0[m] = a1[m] = _mm512_setzero_ps();
        for (int64_t c = 0; c < k; c += 32) {
            const __m512bh w0 = (__m512bh)_mm512_loadu_si512((const void *)(r0 + c));
            const __m512bh w1 = (__m512bh)_mm512_loadu_si512((const void *)(r1 + c));
            for (int m = 0; m < M; m++) {
                const __m512bh xv = (__m512bh)_mm512_loadu_si512((const void *)(x + m * k + c));
                a0[m] = _mm512_dpbf16_ps(a0[m], w0, xv);
                a1[m] = _mm512_dpbf16_ps(a1[m], w1, xv);
            }
        }
        for (int m = 0; m < M; m++) {
            out[m * ldo + n] = _mm512_reduce_add_ps(a0[m]);
            out[m * ldo + n + 1] = _mm512_reduce_add_ps(a1[m]);
        }
    }
    for (; n < n1; n++) {
        const uint16_t *row = w + n * k;
        __m512 acc[MAX_M];
        for (int m = 0; m < M; m++) acc[m] = _mm512_setzero_ps();
        for (int64_t c = 0; c < k; c += 32) {
            const __m512bh wv = (__m512bh)_mm512_loadu_si512((const void *)(row + c));
            for (int m = 0; m < M; m++) {
                const __m512bh xv = (__m512bh)_mm512_loadu_si512((const void *)(x + m * k + c));
                acc[m] = _mm512_dpbf16_ps(acc[m], wv, xv);
            }
        }
        for (int m = 0; m < M; m++) out[m * ldo + n] = _mm512_reduce_add_ps(acc[m]);
    }
}
#endif

void clover_bf16_rows(const uint16_t *w, int64_t k, const uint16_t *x, int64_t m_rows, float *out,
                      int64_t ldo, int64_t n0, int64_t n1) {
#ifdef CLOVER_BF16
    switch (m_rows) {
    case 1: rows_n(w, k, x, out, ldo, n0, n1, 1); break;
    case 2: rows_n(w, k, x, out, ldo, n0, n1, 2); break;
    case 3: rows_n(w, k, x, out, ldo, n0, n1, 3); break;
    case 4: rows_n(w, k, x, out, ldo, n0, n1, 4); break;
    case 5: rows_n(w, k, x, out, ldo, n0, n1, 5); break;
    case 6: rows_n(w, k, x, out, ldo, n0, n1, 6); break;
    case 7: rows_n(w, k, x, out, ldo, n0, n1, 7); break;
    default: rows_n(w, k, x, out, ldo, n0, n1, 8); break;
    }
#else
    (void)w, (void)k, (void)x, (void)m_rows, (void)out, (void)ldo, (void)n0, (void)n1;
#endif
}
