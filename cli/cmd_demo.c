/* cmd_demo.c -- `lofp demo`: the main job on built-in data. Quantizes a deterministic
 * transformer-like layer under every preset, dequantizes, and prints bits per value, SNR, max
 * error and throughput. Writes nothing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "demo_data.h"

static void demo_usage(FILE *f)
{
    fprintf(f, "usage: lofp demo [--rounding rne|ties-to-zero|ties-away|stochastic] [--scheme S]\n\n"
               "Quantizes a built-in, deterministic set of tensors shaped like one transformer layer\n"
               "(weights with outlier channels, bf16-like activations, a KV block) under every preset\n"
               "and prints: scheme, bits/value, SNR (dB), max abs error, one-thread quantize throughput.\n"
               "UltraQuant errors are measured after undoing the Hadamard rotation. Writes nothing.\n");
}

/* Bits per value: element bits + scale bits / block (+ 32 / n for a per-tensor scale). */
static double bits_per_value(const lofp_scheme *s, size_t n)
{
    double b = lofp_elem_info_get(s->elem)->bits + 8.0 / s->block;
    if (s->id == LOFP_SCHEME_NVFP4 && s->two_level) b += 32.0 / (double)n;
    return b;
}

int lofp_cmd_demo(int argc, char **argv)
{
    lofp_rounding rounding = LOFP_RNE;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) { demo_usage(stdout); return 0; }
        if (strcmp(argv[i], "--rounding") == 0 && i + 1 < argc) {
            if (lofp_rounding_from_name(argv[++i], &rounding) != LOFP_OK)
                return cli_error("demo", "unknown rounding '%s'", argv[i]);
        } else if (strcmp(argv[i], "--scheme") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else {
            demo_usage(stderr);
            return cli_error("demo", "unknown option '%s'", argv[i]);
        }
    }
    demo_tensor t[DEMO_NTENSORS];
    if (!demo_make(t, 1)) return cli_error("demo", "out of memory");
    printf("lofp %s demo: %d built-in tensors, rounding %s\n\n", lofp_version(), DEMO_NTENSORS,
           lofp_rounding_name(rounding));
    printf("%-9s %-15s %6s %9s %11s %10s\n", "tensor", "scheme", "bits", "SNR dB", "max |err|", "MB/s");
    int rc = 0;
    for (int ti = 0; ti < DEMO_NTENSORS; ti++) {
        const demo_tensor *d = &t[ti];
        size_t n = d->rows * d->k;
        float *back = malloc(n * sizeof(float));
        for (int id = 1; id < LOFP_SCHEME_COUNT_; id++) {
            lofp_scheme s;
            lofp_scheme_init(&s, (lofp_scheme_id)id);
            if (only && strcmp(only, lofp_scheme_name(s.id)) != 0) continue;
            if (id != LOFP_SCHEME_ULTRAQUANT) s.rounding = rounding;
            size_t cb = lofp_codes_bytes(&s, d->rows, d->k), sb = lofp_scales_bytes(&s, d->rows, d->k);
            uint8_t *codes = malloc(cb), *scales = malloc(sb);
            float g = 1.0f;
            lofp_status st = LOFP_OK;
            double t0 = cli_now(), el;
            int reps = 0;
            do {
                st = lofp_quantize(&s, LOFP_DTYPE_F32, d->data, d->rows, d->k, codes, scales, &g, NULL);
                reps++;
                el = cli_now() - t0;
            } while (st == LOFP_OK && el < 0.05);
            if (st == LOFP_OK)
                st = lofp_dequantize(&s, codes, scales, g, d->rows, d->k, LOFP_DTYPE_F32, back);
            if (st != LOFP_OK) {
                rc = cli_error("demo", "%s under %s: %s", d->name, lofp_scheme_name(s.id), lofp_status_name(st));
                free(codes); free(scales);
                continue;
            }
            if (s.id == LOFP_SCHEME_ULTRAQUANT && s.rotate)
                for (size_t r = 0; r < d->rows; r++) lofp_hadamard_inplace(back + r * d->k, d->k, NULL);
            double sig = 0, noise = 0, maxe = 0;
            for (size_t i = 0; i < n; i++) {
                double e = (double)back[i] - (double)d->data[i];
                sig += (double)d->data[i] * d->data[i];
                noise += e * e;
                if (fabs(e) > maxe) maxe = fabs(e);
            }
            double snr = noise > 0 ? 10.0 * log10(sig / noise) : INFINITY;
            double mbs = (double)n * 4.0 * reps / el / 1e6;
            printf("%-9s %-15s %6.3f %9.2f %11.4g %10.1f\n", d->name, lofp_scheme_name(s.id),
                   bits_per_value(&s, n), snr, maxe, mbs);
            free(codes);
            free(scales);
        }
        free(back);
    }
    printf("\nbits = element bits + 8/block for the scale (+32/n for NVFP4's per-tensor scale).\n"
           "MB/s = fp32 input bytes quantized per second, one thread, by the kernel lofp_kernel_name()\n"
           "reports for this CPU (compare LOFP_DISABLE_CPU_FEATURES=all for the portable path).\n");
    demo_free(t);
    return rc;
}
