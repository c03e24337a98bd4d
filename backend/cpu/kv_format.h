/* kv_format.h: how the CPU reference stores KV elements: fp32, IEEE fp16, bf16, fp8 (OCP E4M3)
 * and int8 (symmetric, one fp32 scale per head vector). fp8 uses one scale per tensor, as
 * vLLM's default does. Plain C conversions, round to nearest even. */
#ifndef KVPLAN_KV_FORMAT_H
#define KVPLAN_KV_FORMAT_H

#include <stdint.h>

uint16_t be_cpu_f32_to_f16(float f);
float be_cpu_f16_to_f32(uint16_t h);
uint16_t be_cpu_f32_to_bf16(float f);
float be_cpu_bf16_to_f32(uint16_t b);
uint8_t be_cpu_f32_to_e4m3(float f);    /* saturates at +-448 */
float be_cpu_e4m3_to_f32(uint8_t v);

/* Largest relative rounding error of each format for normal values (unit roundoff). */
#define BE_CPU_F16_EPS 4.8828125e-4    /* 2^-11 */
#define BE_CPU_BF16_EPS 3.90625e-3     /* 2^-8 */
#define BE_CPU_E4M3_EPS 6.25e-2        /* 2^-4 */

#endif
