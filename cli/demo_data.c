/* demo_data.c -- a small transformer layer, generated from fixed seeds:
 *   attn.wq   weights, N(0, 0.02) with a few outlier input channels (x25), as LLM weights have
 *   mlp.up    weights, N(0, 0.02), one heavy row
 *   act       activations rounded to bf16, Student-t-like tails and two hot channels
 *   kv.k      one KV block of keys [tokens, head_dim 128] with per-channel offsets (what the
 *             UltraQuant rotation exists for) */
#include "demo_data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t sm(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double unif(uint64_t *s) { return ((double)(sm(s) >> 11) + 0.5) * 0x1.0p-53; }
static double gauss(uint64_t *s) { return sqrt(-2.0 * log(unif(s))) * cos(6.283185307179586 * unif(s)); }

static float to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7FFFu + ((u >> 16) & 1);
    u &= 0xFFFF0000u;
    memcpy(&f, &u, 4);
    return f;
}

int demo_make(demo_tensor *t, size_t scale)
{
    static const struct { const char *name, *what; size_t rows, k; } shapes[DEMO_NTENSORS] = {
        { "attn.wq", "weight, outlier input channels", 512, 1024 },
        { "mlp.up", "weight, one heavy row", 1024, 512 },
        { "act", "bf16 activations, heavy tails", 64, 1024 },
        { "kv.k", "KV block: keys, D=128", 256, 128 },
    };
    memset(t, 0, DEMO_NTENSORS * sizeof *t);
    for (int i = 0; i < DEMO_NTENSORS; i++) {
        t[i].name = shapes[i].name;
        t[i].what = shapes[i].what;
        t[i].rows = shapes[i].rows * (scale ? scale : 1);
        t[i].k = shapes[i].k;
        t[i].data = malloc(t[i].rows * t[i].k * sizeof(float));
        if (!t[i].data) { demo_free(t); return 0; }
        uint64_t s = 0x10F0 + (uint64_t)i;
        size_t R = t[i].rows, K = t[i].k;
        for (size_t r = 0; r < R; r++)
            for (size_t j = 0; j < K; j++) {
                double v = gauss(&s);
                float *p = &t[i].data[r * K + j];
                switch (i) {
                case 0: *p = (float)(0.02 * v * ((j % 197) == 3 ? 25.0 : 1.0)); break;
                case 1: *p = (float)(0.02 * v * (r == 17 ? 8.0 : 1.0)); break;
                case 2: {
                    double g1 = gauss(&s), g2 = gauss(&s);
                    double chi = 0.5 * (g1 * g1 + g2 * g2) + 0.25;
                    double hot = (j == 7 || j == 500) ? 30.0 : 1.0;
                    *p = to_bf16((float)(v / sqrt(chi) * hot));
                    break;
                }
                default: *p = (float)(v + ((j % 16) == 5 ? 6.0 : 0.0) + 0.3 * (double)(j % 7)); break;
                }
            }
    }
    return 1;
}

void demo_free(demo_tensor *t)
{
    for (int i = 0; i < DEMO_NTENSORS; i++) { free(t[i].data); t[i].data = NULL; }
}
