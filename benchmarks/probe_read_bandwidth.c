/* The machine's memory read bandwidth: the floor of a decoding step, which streams every weight.

   Sums a float32 array far larger than the caches (1 GiB by default) with AVX-512 loads into
   four vector accumulators per thread (no horizontal sum in the loop), OpenMP over the threads;
   prints the best of REPS passes in GB/s. A batch-1 decoding step reads W bytes of weights, so
   no implementation decodes a token faster than W / bandwidth on this machine.

   gcc -O3 -march=native -fopenmp benchmarks/probe_read_bandwidth.c -o /tmp/read_bw
   OMP_NUM_THREADS=1 /tmp/read_bw [BYTES [REPS]]; OMP_NUM_THREADS=2 /tmp/read_bw

   Needs AVX-512F (-march=native on a CPU without it fails to compile: use a machine that has
   it, or replace the intrinsics with a plain loop, which gcc vectorizes at -O3). */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    size_t n = (size_t)(argc > 1 ? atol(argv[1]) : 1073741824L) / 4 / 64 * 64;  /* floats */
    int reps = argc > 2 ? atoi(argv[2]) : 15;
    float *a = aligned_alloc(64, n * 4);
    if (a == NULL || n == 0) {
        fprintf(stderr, "cannot allocate %zu bytes\n", n * 4);
        return 1;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) a[i] = (float)(i & 1023) * 1e-3f;  /* touched by its reader */
    double best = 1e9;
    float sink = 0;
    for (int r = 0; r < reps; r++) {
        double t = omp_get_wtime();
        float total = 0;
#pragma omp parallel reduction(+ : total)
        {
            __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
#pragma omp for schedule(static)
            for (size_t i = 0; i < n; i += 64) {
                s0 = _mm512_add_ps(s0, _mm512_load_ps(a + i));
                s1 = _mm512_add_ps(s1, _mm512_load_ps(a + i + 16));
                s2 = _mm512_add_ps(s2, _mm512_load_ps(a + i + 32));
                s3 = _mm512_add_ps(s3, _mm512_load_ps(a + i + 48));
            }
            total += _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
        }
        t = omp_get_wtime() - t;
        if (t < best) best = t;
        sink += total;
    }
    printf("threads %d, %zu bytes, best of %d: %.4f s, read %.1f GB/s (checksum %g)\n",
           omp_get_max_threads(), n * 4, reps, best, n * 4 / best / 1e9, sink);
    free(a);
    return 0;
}
