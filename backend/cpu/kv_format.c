/* kv_format.c: element conversions for the KV pool (see kv_format.h). */
#include "kv_format.h"

#include <math.h>
#include <string.h>

static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

uint16_t be_cpu_f32_to_f16(float f)
{
    uint32_t u = bits(f), sign = (u >> 16) & 0x8000;
    float a = fabsf(f);
    if (isnan(f)) return (uint16_t)(sign | 0x7e00);
    if (a >= 65520.0f) return (uint16_t)(sign | 0x7c00);           /* rounds to infinity */
    if (a < 6.103515625e-05f) {                                     /* subnormal half: steps of 2^-24 */
        return (uint16_t)(sign | (uint32_t)lrintf(a * 16777216.0f));
    }
    uint32_t au = u & 0x7fffffff;
    uint32_t exp = (au >> 23) - 127 + 15, mant = au & 0x7fffff;
    uint32_t h = (exp << 10) | (mant >> 13), rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;          /* nearest even; may carry into exp */
    return (uint16_t)(sign | h);
}

float be_cpu_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0) {
        float v = (float)mant / 16777216.0f;
        return sign ? -v : v;
    }
    if (exp == 31) return from_bits(sign | 0x7f800000 | (mant << 13));
    return from_bits(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t be_cpu_f32_to_bf16(float f)
{
    uint32_t u = bits(f);
    if (isnan(f)) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fff + ((u >> 16) & 1);                                  /* nearest even */
    return (uint16_t)(u >> 16);
}

float be_cpu_bf16_to_f32(uint16_t b) { return from_bits((uint32_t)b << 16); }

/* E4M3 (OCP FP8): 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; max 448;
 * smallest subnormal 2^-9. */
uint8_t be_cpu_f32_to_e4m3(float f)
{
    uint8_t sign = signbit(f) ? 0x80 : 0;
    float a = fabsf(f);
    if (isnan(f)) return 0x7f;
    if (a >= 448.0f) return (uint8_t)(sign | 0x7e);                 /* saturate */
    if (a < 0.015625f) {                                            /* subnormal: steps of 2^-9 */
        long m = lrintf(a * 512.0f);
        return (uint8_t)(sign | (uint8_t)m);                        /* m == 8 is the smallest normal */
    }
    int e;
    float m = frexpf(a, &e);                                        /* a = m 2^e, m in [0.5, 1) */
    long q = lrintf((m * 2.0f - 1.0f) * 8.0f);                      /* 3 mantissa bits, nearest even */
    int exp = e - 1 + 7;
    if (q == 8) { q = 0; exp++; }
    if (exp > 15 || (exp == 15 && q > 6)) return (uint8_t)(sign | 0x7e);
    return (uint8_t)(sign | (exp << 3) | (uint8_t)q);
}

float be_cpu_e4m3_to_f32(uint8_t v)
{
    int exp = (v >> 3) & 0xf, mant = v & 7;
    float a = exp == 0 ? mant / 512.0f : ldexpf(1.0f + mant / 8.0f, exp - 7);
    if ((v & 0x7f) == 0x7f) a = NAN;
    return (v & 0x80) ? -a : a;
}
