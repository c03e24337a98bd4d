/* test_errors.c: one test per class of bad input. Each checks the failure class, the exact
 * file:line:col and field path, that the message says what was expected, and that the output
 * struct was left untouched. Positions are counted by hand from the texts below (1-based). */
#include "tests.h"

#include <stdio.h>
#include <string.h>

#define HEAD "name: t\nmodel: llama-3-8b\nhardware: h100-sxm\n"   /* lines 1-3 */

static scn_scenario out;
static scn_error err;

/* Loads text and asserts the failure: status, line, col, path, message fragment. */
static void expect_fail(const char *text, const char *const *sets, int n_sets, scn_status st,
                        int line, int col, const char *path, const char *msg_has)
{
    memset(&out, 0xAB, sizeof out);
    scn_status got = t_load(text, sets, n_sets, &out, &err);
    char full[1500];
    scn_error_format(&err, full, sizeof full);
    ck_assert_msg(got == st, "status %d, want %d (%s)", got, st, full);
    ck_assert_int_eq(err.status, st);
    ck_assert_msg(err.line == line && err.col == col, "at %d:%d, want %d:%d (%s)", err.line, err.col, line, col, full);
    ck_assert_msg(!strcmp(err.path, path), "path '%s', want '%s' (%s)", err.path, path, full);
    ck_assert_msg(strstr(err.msg, msg_has), "message lacks '%s': %s", msg_has, full);
    unsigned char *p = (unsigned char *)&out;
    for (size_t i = 0; i < sizeof out; i++) ck_assert_msg(p[i] == 0xAB, "output written on failure at byte %zu", i);
}

START_TEST(mla_absorbed_value_is_checked)
{
    /* `mla: {absorbed: ...}` takes separate or materialized; a misspelling is located at its
     * value (line 4, column 41) with the nearest name. */
    expect_fail(HEAD "engine: {extends: vllm, mla: {absorbed: materialised}}\n"
                     "workload: {requests: 5, arrival: {process: poisson, rate: 1/s}, prompt_tokens: 10, output_tokens: 10}\n",
                NULL, 0, SCN_E_DATA, 4, 41, "engine.mla.absorbed", "did you mean 'materialized'?");
}
END_TEST

START_TEST(yaml_syntax_error)
{
    /* The flow sequence opened on line 2 is never closed; libyaml notices at the next key. */
    const char *y = "name: t\nmodel: [llama-3-8b\nhardware: h100-sxm\n";
    memset(&out, 0, sizeof out);
    ck_assert_int_eq(t_load(y, NULL, 0, &out, &err), SCN_E_DATA);
    ck_assert_msg(strstr(err.msg, "YAML syntax error"), "%s", err.msg);
    ck_assert_int_ge(err.line, 2);
    ck_assert_int_gt(err.col, 0);
    ck_assert_msg(strstr(err.file, "scenario.yaml"), "%s", err.file);
}
END_TEST

START_TEST(unknown_key_suggests_nearest)
{
    expect_fail(HEAD "workload:\n  requets: 10\n", NULL, 0, SCN_E_DATA, 5, 3, "workload.requets",
                "did you mean 'requests'?");
    expect_fail(HEAD "wrkload: {}\n", NULL, 0, SCN_E_DATA, 4, 1, "wrkload", "did you mean 'workload'?");
    /* Far from every known key: list them instead of guessing. */
    expect_fail(HEAD "zzzzzzzz: 1\n", NULL, 0, SCN_E_DATA, 4, 1, "zzzzzzzz", "expected one of: name,");
}
END_TEST

/* An exponential length law needs its mean strictly inside [min, max] (line 6 below). */
START_TEST(exponential_mean_outside_bounds)
{
#define EXPW HEAD "workload:\n  arrival: {process: poisson, rate: 1/s}\n  output_tokens: 10\n"
    expect_fail(EXPW "  prompt_tokens: {dist: exponential, mean: 4, min: 4, max: 10}\n", NULL, 0, SCN_E_DATA, 7, 44,
                "workload.prompt_tokens.mean", "strictly between min (4) and max (10)");
    expect_fail(EXPW "  prompt_tokens: {dist: exponential, mean: 12, min: 4, max: 10}\n", NULL, 0, SCN_E_DATA, 7, 44,
                "workload.prompt_tokens.mean", "strictly between min (4) and max (10)");
    expect_fail(EXPW "  prompt_tokens: {dist: exponential, mean: 5, min: 4, max: 4}\n", NULL, 0, SCN_E_DATA, 7, 60,
                "workload.prompt_tokens.max", "must be above min");
    expect_fail(EXPW "  prompt_tokens: {dist: exponential, min: 4}\n", NULL, 0, SCN_E_DATA, 7, 18,
                "workload.prompt_tokens.mean", "missing required field");
#undef EXPW
}
END_TEST

START_TEST(missing_required_field)
{
    /* workload's mapping starts at line 5, col 3 (its first key). */
    expect_fail(HEAD "workload:\n  arrival: {process: poisson, rate: 1/s}\n  output_tokens: 10\n", NULL, 0,
                SCN_E_DATA, 5, 3, "workload.prompt_tokens", "missing required field");
    expect_fail("name: t\nmodel: llama-3-8b\n", NULL, 0, SCN_E_DATA, 1, 1, "hardware", "missing required field");
}
END_TEST

#define WORK "workload:\n  arrival:\n    process: poisson\n"   /* lines 4-6 */
#define OK_WORK WORK "    rate: 1/s\n  prompt_tokens: 5\n  output_tokens: 5\n"   /* lines 4-9 */

START_TEST(missing_unit)
{
    /* "    rate: 2": the value starts at col 11 of line 7. */
    expect_fail(HEAD WORK "    rate: 2\n  prompt_tokens: 5\n  output_tokens: 5\n", NULL, 0, SCN_E_DATA, 7, 11,
                "workload.arrival.rate", "has no unit");
}
END_TEST

START_TEST(wrong_unit)
{
    expect_fail(HEAD WORK "    rate: 2 GiB\n  prompt_tokens: 5\n  output_tokens: 5\n", NULL, 0, SCN_E_DATA, 7, 11,
                "workload.arrival.rate", "is a byte size, but this field is a rate");
    expect_fail(HEAD WORK "    rate: 2/s\n  prompt_tokens: 5\n  output_tokens: 5\nslo:\n  ttft_p99: 1 GiB\n", NULL, 0,
                SCN_E_DATA, 11, 13, "slo.ttft_p99", "is a byte size, but this field is a duration");
}
END_TEST

START_TEST(zero_and_negative_sizes)
{
    /* Inline hardware: "  memory: 0 GiB" on line 4, value at col 11. */
    expect_fail("model: llama-3-8b\nhardware:\n  name: x\n  memory: 0 GiB\n  memory_bandwidth: 1 TB/s\n"
                "  compute: {bf16: 1 TFLOPS}\n" WORK,
                NULL, 0, SCN_E_DATA, 4, 11, "hardware.memory", "must be greater than zero");
    expect_fail(HEAD "workload:\n  requests: -5\n", NULL, 0, SCN_E_DATA, 5, 13, "workload.requests", "must be at least 1");
    expect_fail(HEAD "deployment: {tensor_parallel: 0}\n", NULL, 0, SCN_E_DATA, 4, 31, "deployment.tensor_parallel",
                "must be at least 1");
}
END_TEST

/* efficiency.compute_scale (a ratio to compute per GEMM dtype): inline hardware whose line 9 is
 * "    compute_scale: X", X at col 20, a flow mapping's first key at col 21 and its value at 26. */
#define SCALE_HW(x) "model: llama-3-8b\nhardware:\n  name: x\n  memory: 80 GiB\n  memory_bandwidth: 1 TB/s\n" \
                    "  compute: {bf16: 1 TFLOPS, fp8: 2 TFLOPS}\n  efficiency:\n    compute: 0.8\n" \
                    "    compute_scale: " x "\n" OK_WORK
START_TEST(compute_scale_errors)
{
    const char *p8 = "hardware.efficiency.compute_scale.fp8";
    /* 0.8 x 1.5 = 1.2 of the peak. */
    expect_fail(SCALE_HW("{fp8: 1.5}"), NULL, 0, SCN_E_DATA, 9, 26, p8, "a share of the peak must be at most 1");
    expect_fail(SCALE_HW("{fp8: 126 %}"), NULL, 0, SCN_E_DATA, 9, 26, p8, "= 1.008: a share of the peak");
    expect_fail(SCALE_HW("{fp8: -0.5}"), NULL, 0, SCN_E_DATA, 9, 26, p8, "must be greater than zero");
    expect_fail(SCALE_HW("{fp8: 0}"), NULL, 0, SCN_E_DATA, 9, 26, p8, "must be greater than zero");
    expect_fail(SCALE_HW("{fp8: 5 GB}"), NULL, 0, SCN_E_DATA, 9, 26, p8, "is a byte size, but this field is a fraction");
    expect_fail(SCALE_HW("{fp8: fast}"), NULL, 0, SCN_E_DATA, 9, 26, p8, "fast");
    /* A dtype the profile has no tensor rate for, and one that is not a dtype. */
    expect_fail(SCALE_HW("{fp4: 0.5}"), NULL, 0, SCN_E_DATA, 9, 26, "hardware.efficiency.compute_scale.fp4",
                "the profile has no fp4 tensor rate (compute.fp4) to scale");
    expect_fail(SCALE_HW("{fp9: 0.5}"), NULL, 0, SCN_E_DATA, 9, 21, "hardware.efficiency.compute_scale.fp9",
                "did you mean 'fp8'?");
    /* A number where the per-dtype mapping belongs. */
    expect_fail(SCALE_HW("0.9"), NULL, 0, SCN_E_DATA, 9, 20, "hardware.efficiency.compute_scale", "expected a mapping");
    /* Through --set on a library profile (h100-sxm: compute 0.75): the value's column in the
     * override text "hardware.efficiency.compute_scale.fp8=2" is 39. */
    const char *sets[] = {"hardware.efficiency.compute_scale.fp8=2"};
    expect_fail(HEAD OK_WORK, sets, 1, SCN_E_DATA, 1, 39, p8, "compute x compute_scale.fp8 = 1.5");
}
END_TEST

/* Measured NCCL figures describe one node: inline hardware whose line 12 is
 * "    nccl_latency_gpus: G" (value at col 24) and line 13 "    nccl_bandwidth: B" (col 21). */
#define NCCL_HW(g, b) "model: llama-3-8b\nhardware:\n  name: x\n  memory: 80 GiB\n  memory_bandwidth: 1 TB/s\n" \
                      "  compute: {bf16: 1 TFLOPS}\n  interconnect:\n    kind: nvlink\n    bandwidth: 450 GB/s\n" \
                      "    gpus_per_node: 8\n    nccl_latency: 20 us\n    nccl_latency_gpus: " g "\n" \
                      "    nccl_bandwidth: " b "\n" OK_WORK
#define NCCL_HW_LAT(g, b) "model: llama-3-8b\nhardware:\n  name: x\n  memory: 80 GiB\n  memory_bandwidth: 1 TB/s\n" \
                          "  compute: {bf16: 1 TFLOPS}\n  interconnect:\n    kind: nvlink\n    bandwidth: 450 GB/s\n" \
                          "    latency: 2 us\n    gpus_per_node: 8\n    nccl_latency: 20 us\n    nccl_latency_gpus: " g "\n" \
                          "    nccl_bandwidth: " b "\n" OK_WORK
START_TEST(nccl_figures_within_the_node)
{
    /* 16 GPUs measured in a node of 8; 5000 TB/s of bus bandwidth over a 450 GB/s link. */
    expect_fail(NCCL_HW("16", "370 GB/s"), NULL, 0, SCN_E_DATA, 12, 24, "hardware.interconnect.nccl_latency_gpus",
                "16 GPUs, but the node (gpus_per_node) has 8");
    expect_fail(NCCL_HW("8", "5000 TB/s"), NULL, 0, SCN_E_DATA, 13, 21, "hardware.interconnect.nccl_bandwidth",
                "5e+06 GB/s exceeds the link's 450 GB/s");
    expect_fail(NCCL_HW("8", "451 GB/s"), NULL, 0, SCN_E_DATA, 13, 21, "hardware.interconnect.nccl_bandwidth",
                "exceeds the link's 450 GB/s");
    /* With a per-step link latency, 16 GPUs would also make the ring's 2 x 15 x 2 us = 60 us
     * exceed the measured 20 us; the count outside the node is the cause, and is named (line 13
     * with the latency line added). */
    expect_fail(NCCL_HW_LAT("16", "370 GB/s"), NULL, 0, SCN_E_DATA, 13, 24, "hardware.interconnect.nccl_latency_gpus",
                "16 GPUs, but the node (gpus_per_node) has 8");
    /* The bounds themselves are allowed: the whole node, the link's whole rate. */
    static scn_scenario ok;
    ck_assert_int_eq(t_load(NCCL_HW("8", "450 GB/s"), NULL, 0, &ok, &err), SCN_OK);
    ck_assert_int_eq(ok.hardware.nccl_latency_gpus, 8);
    ck_assert(ok.hardware.nccl_bandwidth == 450e9);
    /* Below: a measured rate is not zero or negative, and not under what NCCL's LL protocol
     * moves on the same links in this profile, half of bandwidth x efficiency.interconnect
     * (0.5 x 450 x 0.70 = 157.5 GB/s): NCCL would run LL instead, and so would the model,
     * ignoring the figure (a unit slip, MB/s for GB/s, lands there). */
    expect_fail(NCCL_HW("8", "0 GB/s"), NULL, 0, SCN_E_DATA, 13, 21, "hardware.interconnect.nccl_bandwidth",
                "greater than zero");
    expect_fail(NCCL_HW("8", "-370 GB/s"), NULL, 0, SCN_E_DATA, 13, 21, "hardware.interconnect.nccl_bandwidth", "");
    expect_fail(NCCL_HW("8", "370 MB/s"), NULL, 0, SCN_E_DATA, 13, 21, "hardware.interconnect.nccl_bandwidth",
                "0.37 GB/s is below 157.5 GB/s");
    expect_fail(NCCL_HW("8", "157 GB/s"), NULL, 0, SCN_E_DATA, 13, 21, "hardware.interconnect.nccl_bandwidth",
                "below 157.5 GB/s");
    ck_assert_int_eq(t_load(NCCL_HW("8", "158 GB/s"), NULL, 0, &ok, &err), SCN_OK);
    /* The floor follows the profile's own efficiency (0.5 x 450 x 0.9 = 202.5 GB/s). */
    const char *eff[] = {"hardware.efficiency.interconnect=0.9"};
    expect_fail(NCCL_HW("8", "200 GB/s"), eff, 1, SCN_E_DATA, 13, 21, "hardware.interconnect.nccl_bandwidth",
                "below 202.5 GB/s");
}
END_TEST

START_TEST(non_integer_counts)
{
    expect_fail(HEAD "workload:\n  requests: 2.5\n", NULL, 0, SCN_E_DATA, 5, 13, "workload.requests",
                "expected a whole number, found '2.5'");
    expect_fail(HEAD WORK "    rate: 1/s\n  prompt_tokens: {dist: fixed, value: 1e3}\n", NULL, 0, SCN_E_DATA, 8, 39,
                "workload.prompt_tokens.value", "expected a whole number");
}
END_TEST

START_TEST(unknown_library_names)
{
    expect_fail("model: llama-3-9b\nhardware: h100-sxm\n", NULL, 0, SCN_E_DATA, 1, 8, "model",
                "unknown model 'llama-3-9b'; did you mean 'llama-3-8b'?");
    expect_fail("model: llama-3-8b\nhardware: h100-smx\n", NULL, 0, SCN_E_DATA, 2, 11, "hardware",
                "did you mean 'h100-sxm'?");
    expect_fail("model: gpt-17\nhardware: h100-sxm\n", NULL, 0, SCN_E_DATA, 1, 8, "model", "unknown model 'gpt-17'");
}
END_TEST

START_TEST(reference_cycles)
{
    t_write("cyc-a.yaml", "extends: cyc-b.yaml\nname: a\n");
    t_write("cyc-b.yaml", "extends: cyc-a.yaml\nname: b\n");
    /* scenario.yaml extends cyc-a, which extends cyc-b, which extends cyc-a again: reported
     * at cyc-b.yaml's `extends` value, line 1 col 10. */
    expect_fail("extends: cyc-a.yaml\n", NULL, 0, SCN_E_DATA, 1, 10, "extends", "reference cycle");
    ck_assert_msg(strstr(err.file, "cyc-b.yaml"), "cycle reported in %s", err.file);
    /* A model file that extends itself. */
    t_write("self.yaml", "extends: self.yaml\nlayers: 1\n");
    expect_fail("model: ./self.yaml\nhardware: h100-sxm\n", NULL, 0, SCN_E_DATA, 1, 10, "model.extends", "reference cycle");
}
END_TEST

START_TEST(unreadable_files)
{
    memset(&out, 0, sizeof out);
    ck_assert_int_eq(scn_scenario_load("/nonexistent/kvplan.yaml", NULL, 0, &out, &err), SCN_E_NOINPUT);
    ck_assert_str_eq(err.file, "/nonexistent/kvplan.yaml");
    ck_assert_msg(strstr(err.msg, "No such file"), "%s", err.msg);
    ck_assert_int_eq(scn_scenario_load("/tmp", NULL, 0, &out, &err), SCN_E_NOINPUT);
    ck_assert_msg(strstr(err.msg, "is a directory"), "%s", err.msg);
    /* A referenced file that is missing is reported where it is referenced. */
    expect_fail("model: ./no-such-model.yaml\nhardware: h100-sxm\n", NULL, 0, SCN_E_NOINPUT, 1, 8, "model",
                "cannot read");
}
END_TEST

START_TEST(wrong_shapes_and_values)
{
    expect_fail("model: [a, b]\nhardware: h100-sxm\n", NULL, 0, SCN_E_DATA, 1, 8, "model",
                "expected a library name, a file path or a mapping");
    expect_fail(HEAD OK_WORK "options: {kv_layout: [paged, pagd]}\n", NULL, 0, SCN_E_DATA, 10, 30, "options.kv_layout[1]",
                "did you mean 'paged'?");
    expect_fail(HEAD "workload:\n  requests: 1\n  requests: 2\n", NULL, 0, SCN_E_DATA, 6, 3, "requests",
                "duplicate key");
    expect_fail(HEAD "deployment: {gpu_memory_utilization: 1.5}\n", NULL, 0, SCN_E_DATA, 4, 38,
                "deployment.gpu_memory_utilization", "fraction");
    expect_fail(HEAD "deployment: {tensor_parallel: 3}\n", NULL, 0, SCN_E_DATA, 4, 31, "deployment.tensor_parallel",
                "divide evenly");
}
END_TEST

START_TEST(bad_overrides)
{
    const char *ok = HEAD OK_WORK;
    const char *no_eq[] = {"workload.requests"};
    expect_fail(ok, no_eq, 1, SCN_E_USAGE, 0, 0, "", "expected PATH=VALUE");
    ck_assert_str_eq(err.file, "--set");
    /* A key an override adds takes its value's position. The value of "workload.requests=abc" starts at col 19 of the --set argument. */
    const char *bad_val[] = {"workload.requests=abc"};
    expect_fail(ok, bad_val, 1, SCN_E_DATA, 1, 19, "workload.requests", "expected a whole number");
    ck_assert_str_eq(err.file, "--set");
    const char *bad_unit[] = {"workload.arrival.rate=5"};
    expect_fail(ok, bad_unit, 1, SCN_E_DATA, 1, 23, "workload.arrival.rate", "has no unit");
    const char *typo[] = {"deployment.tensor_paralel=2"};
    expect_fail(ok, typo, 1, SCN_E_DATA, 1, 27, "deployment.tensor_paralel", "did you mean 'tensor_parallel'?");
}
END_TEST

START_TEST(bad_value_inside_hf_config)
{
    /* Line 3 of the JSON, col 24: "num_hidden_layers": "x" */
    t_write("bad-config.json", "{\n  \"hidden_size\": 64,\n  \"num_hidden_layers\": \"x\",\n"
                               "  \"num_attention_heads\": 4, \"intermediate_size\": 128,\n"
                               "  \"vocab_size\": 100, \"max_position_embeddings\": 512\n}\n");
    expect_fail("model: {hf_config: bad-config.json}\nhardware: h100-sxm\n" WORK, NULL, 0, SCN_E_DATA, 3, 24,
                "model.layers", "expected a whole number");
    ck_assert_msg(strstr(err.file, "bad-config.json"), "%s", err.file);
}
END_TEST

/* ---- issue 12: inputs that once crashed, hung or were taken as nonsense ---- */

START_TEST(nesting_is_bounded)
{
    /* "x: " then 100 '['. The root mapping is level 1, so the 64th '[' (col 3 + 64 = 67) would
     * open level 65. */
    char y[200] = "x: ";
    memset(y + 3, '[', 100);
    y[103] = 0;
    expect_fail(y, NULL, 0, SCN_E_DATA, 1, 67, "", "nest deeper than 64 levels");
    /* In a --set value ("workload=" is 9 characters, so the value starts at col 10) the first
     * '[' is level 1 and the 65th, at col 10 + 64 = 74, would be level 65. */
    char set[200] = "workload=";
    memset(set + 9, '[', 100);
    set[109] = 0;
    const char *sets[] = {set};
    expect_fail(HEAD OK_WORK, sets, 1, SCN_E_USAGE, 1, 74, "workload", "nest deeper than 64 levels");
}
END_TEST

START_TEST(recursive_alias_refused)
{
    /* "x: &x {y: *x}": the alias at col 11 names the mapping that holds it. */
    expect_fail("x: &x {y: *x}\n", NULL, 0, SCN_E_DATA, 1, 11, "", "refers to a node that contains it");
    /* The same in a file that is extended (this once overflowed the stack while merging). */
    t_write("rec-base.yaml", "x: &x {y: *x}\n");
    expect_fail("extends: rec-base.yaml\nx: 1\n", NULL, 0, SCN_E_DATA, 1, 11, "", "refers to a node that contains it");
    ck_assert_msg(strstr(err.file, "rec-base.yaml"), "%s", err.file);
    /* A later definition of an anchor name wins, and an earlier complete one is not recursive. */
    memset(&out, 0, sizeof out);
    ck_assert_int_eq(t_load(HEAD "workload: &w\n  requests: 3\n  arrival: {process: poisson, rate: 1/s}\n"
                            "  prompt_tokens: 5\n  output_tokens: 5\nslo: {ttft_p99: &w 2 s, tpot_p99: *w}\n",
                            NULL, 0, &out, &err), SCN_OK);
    ck_assert_double_eq(out.slo.terms[1].limit, 2.0);
}
END_TEST

START_TEST(alias_expansion_is_bounded)
{
    /* Line n+1 is "ln: &ln [*l(n-1), *l(n-1)]" (l0 is "[a, b]"). Counting every key, value and
     * container once, with aliases at their expanded size: w(l0) = 3 and w(ln) = 1 + 2 w(l(n-1)),
     * so w(ln) = 2^(n+2) - 1, and the document holds T(n) = 2^(n+3) - 3 nodes after line n+1.
     * Line 18 (n = 17) reaches T(16) + 2 + 2 w(l16) = 2^19 - 1 + 2^19 - 2 + ... : its first alias
     * brings the count to 3 * 2^18 - 2 = 786430 and its second, at col 18, to 1048573, past
     * 1000000. Without the bound, merging depth 40 through `extends` took days. */
    char y[4000];
    size_t used = (size_t)snprintf(y, sizeof y, "l0: &l0 [a, b]\n");
    for (int i = 1; i <= 40; i++)
        used += (size_t)snprintf(y + used, sizeof y - used, "l%d: &l%d [*l%d, *l%d]\n", i, i, i - 1, i - 1);
    expect_fail(y, NULL, 0, SCN_E_DATA, 18, 18, "", "expands to more than 1000000 nodes");
    t_write("laughs.yaml", y);
    expect_fail("extends: laughs.yaml\n", NULL, 0, SCN_E_DATA, 18, 18, "", "expands to more than 1000000 nodes");
}
END_TEST

START_TEST(quantities_must_be_finite)
{
    /* "hardware.memory=" is 16 characters: the value starts at col 17. 1e308 TiB overflows a double. */
    const char *big[] = {"hardware.memory=1e308 TiB"};
    expect_fail(HEAD OK_WORK, big, 1, SCN_E_DATA, 1, 17, "hardware.memory", "out of range");
    const char *tiny[] = {"slo.ttft_p99=1e-400 s"};
    expect_fail(HEAD OK_WORK, tiny, 1, SCN_E_DATA, 1, 14, "slo.ttft_p99", "out of range");
    /* A number longer than any buffer is read whole, not cut (0.000...01 was cut to 0): 300
     * zeros after the point, then 1, is 1e-301 s. */
    char many[400] = "slo.ttft_p99=0.";
    memset(many + 15, '0', 300);
    snprintf(many + 315, sizeof many - 315, "1 s");
    const char *m[] = {many};
    memset(&out, 0, sizeof out);
    ck_assert_int_eq(t_load(HEAD OK_WORK, m, 1, &out, &err), SCN_OK);
    ck_assert_double_eq(out.slo.terms[0].limit, 1e-301);
}
END_TEST

START_TEST(nonsense_values_refused)
{
    /* slo on line 10: "slo: {ttft_pnan: 1 s}", the key at col 7. */
    expect_fail(HEAD OK_WORK "slo: {ttft_pnan: 1 s}\n", NULL, 0, SCN_E_DATA, 10, 7, "slo.ttft_pnan", "unknown SLO");
    /* "price: {usd_per_gpu_hour: inf}": the value at col 27. */
    expect_fail(HEAD OK_WORK "price: {usd_per_gpu_hour: inf}\n", NULL, 0, SCN_E_DATA, 10, 27, "price.usd_per_gpu_hour",
                "expected a price");
    /* "  shared_prefix: {groups: 2, tokens: 10, share: 0.5, popularity: zipf inf}": value at col 66. */
    expect_fail(HEAD OK_WORK "  shared_prefix: {groups: 2, tokens: 10, share: 0.5, popularity: zipf inf}\n", NULL, 0,
                SCN_E_DATA, 10, 66, "workload.shared_prefix.popularity", "zipf S");
    const char *dots[] = {"....=1"};
    expect_fail(HEAD OK_WORK, dots, 1, SCN_E_USAGE, 0, 0, "", "empty field name");
    const char *mid[] = {"workload..requests=1"};
    expect_fail(HEAD OK_WORK, mid, 1, SCN_E_USAGE, 0, 0, "", "empty field name");
    ck_assert_str_eq(err.file, "--set");
}
END_TEST

Suite *suite_errors(void)
{
    Suite *s = suite_create("errors");
    TCase *tc = tcase_create("classes");
    tcase_add_test(tc, yaml_syntax_error);
    tcase_add_test(tc, unknown_key_suggests_nearest);
    tcase_add_test(tc, missing_required_field);
    tcase_add_test(tc, exponential_mean_outside_bounds);
    tcase_add_test(tc, missing_unit);
    tcase_add_test(tc, wrong_unit);
    tcase_add_test(tc, zero_and_negative_sizes);
    tcase_add_test(tc, compute_scale_errors);
    tcase_add_test(tc, non_integer_counts);
    tcase_add_test(tc, unknown_library_names);
    tcase_add_test(tc, reference_cycles);
    tcase_add_test(tc, unreadable_files);
    tcase_add_test(tc, wrong_shapes_and_values);
    tcase_add_test(tc, bad_overrides);
    tcase_add_test(tc, bad_value_inside_hf_config);
    tcase_add_test(tc, nesting_is_bounded);
    tcase_add_test(tc, recursive_alias_refused);
    tcase_add_test(tc, alias_expansion_is_bounded);
    tcase_add_test(tc, quantities_must_be_finite);
    tcase_add_test(tc, nonsense_values_refused);
    tcase_add_test(tc, mla_absorbed_value_is_checked);
    tcase_add_test(tc, nccl_figures_within_the_node);
    suite_add_tcase(s, tc);
    return s;
}
