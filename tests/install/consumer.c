/* consumer.c -- a program built against an installed lofp (tests/install/script_install.sh):
 * the version macros and function agree, and an MXFP4 quantize / dequantize round trip of values
 * that MXFP4 holds exactly gives them back. */
#include <stdio.h>
#include <string.h>

#include <lofp/lofp.h>

int main(void)
{
    if (strcmp(lofp_version(), LOFP_VERSION_STRING) != 0) {
        fprintf(stderr, "consumer: lofp_version() %s, header %s\n", lofp_version(), LOFP_VERSION_STRING);
        return 1;
    }

    /* 32 values MXFP4 holds exactly with the block scale 2^0: the round trip is the identity. */
    static const float vals[8] = { 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, -6.0f };
    float x[32], y[32];
    uint8_t codes[16], scales[1];
    for (int i = 0; i < 32; i++) x[i] = vals[i % 8];
    lofp_scheme s;
    if (lofp_scheme_init(&s, LOFP_SCHEME_MXFP4) != LOFP_OK ||
        lofp_quantize(&s, LOFP_DTYPE_F32, x, 1, 32, codes, scales, NULL, NULL) != LOFP_OK ||
        lofp_dequantize(&s, codes, scales, 1.0f, 1, 32, LOFP_DTYPE_F32, y) != LOFP_OK) {
        fprintf(stderr, "consumer: MXFP4 quantize/dequantize failed\n");
        return 1;
    }
    for (int i = 0; i < 32; i++)
        if (y[i] != x[i]) {
            fprintf(stderr, "consumer: element %d: %g -> %g\n", i, x[i], y[i]);
            return 1;
        }
    printf("consumer: lofp %s, MXFP4 round trip exact\n", lofp_version());
    return 0;
}
