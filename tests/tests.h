/* tests.h: the Check suites and the helpers they share. */
#ifndef KVPLAN_TESTS_H
#define KVPLAN_TESTS_H

#include <check.h>
#include "../loader/scn.h"
#include "../sim/sim.h"

Suite *suite_units(void);
Suite *suite_loader(void);
Suite *suite_errors(void);
Suite *suite_kv_bytes(void);
Suite *suite_weights(void);
Suite *suite_model_library(void);
Suite *suite_capacity(void);
Suite *suite_roofline(void);
Suite *suite_moe_grouped(void);
Suite *suite_cli(void);
Suite *suite_sim_core(void);
Suite *suite_kv_manager(void);
Suite *suite_engine(void);
Suite *suite_db(void);
Suite *suite_cli_sim(void);
Suite *suite_cpu_backend(void);
Suite *suite_pool(void);
Suite *suite_fastfwd(void);
Suite *suite_multistep(void);
Suite *suite_output_lag(void);
Suite *suite_admission(void);
Suite *suite_reserve(void);
Suite *suite_step_shape(void);
Suite *suite_bounded(void);
Suite *suite_accounting(void);
Suite *suite_hybrid_kv(void);
Suite *suite_frag(void);
Suite *suite_verify(void);
Suite *suite_planner(void);
Suite *suite_capsearch(void);
Suite *suite_bound(void);
Suite *suite_report(void);
Suite *suite_vf(void);
Suite *suite_workload(void);
Suite *suite_published(void);
Suite *suite_kernels(void);
Suite *suite_import(void);
Suite *suite_collective(void);
Suite *suite_model_terms(void);
Suite *suite_cuda_plugin(void);
Suite *suite_spec(void);
Suite *suite_moe_parallel(void);
Suite *suite_disagg(void);
Suite *suite_harden(void);
Suite *suite_offload(void);
Suite *suite_frontend(void);
Suite *suite_eager_host(void);
Suite *suite_attn_kernels(void);
Suite *suite_mixing(void);
Suite *suite_tiles(void);
Suite *suite_speed_paths(void);
Suite *suite_weight_only(void);
Suite *suite_block_fp8(void);
Suite *suite_twin(void);
Suite *suite_mem_rule(void);
Suite *suite_marlin_moe(void);

/* Writes text to a fresh file named `name` in a per-process temp dir; returns its path
 * (static storage, valid until the next call with the same name slot). */
const char *t_write(const char *name, const char *text);
/* Loads a scenario from text (written to a temp file) with optional --set overrides. */
scn_status t_load(const char *text, const char *const *sets, int n_sets, scn_scenario *s, scn_error *e);
/* Loads a library scenario (path relative to KVPLAN_LIBRARY) with --set overrides; asserts it loads. */
void t_library_file(const char *file, const char *const *sets, int n_sets, scn_scenario *s);
/* Loads the bundled chat scenario with a library model and hardware swapped in. */
void t_library(const char *model, const char *hardware, scn_scenario *s);
/* The same with the engine profile chosen too (NULL keeps chat.yaml's). */
void t_library_engine(const char *model, const char *hardware, const char *engine, scn_scenario *s);
/* An executor whose every step takes one second with 1000 KV blocks per replica (hand-derived timings). */
sim_executor t_one_second_executor(void);
/* Runs the kvplan binary with args through /bin/sh; captures stdout and stderr. Returns exit code. */
int t_run(const char *args, char *out, size_t nout, char *err, size_t nerr);

#define KIB 1024.0
#define MIB (1024.0 * 1024.0)
#define GIB (1024.0 * 1024.0 * 1024.0)

#endif
