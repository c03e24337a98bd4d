/* test_main.c: runs every Check suite in one runner, so `make check` prints one summary. */
#include "tests.h"

#include <stdlib.h>

int main(void)
{
    SRunner *sr = srunner_create(suite_units());
    srunner_add_suite(sr, suite_loader());
    srunner_add_suite(sr, suite_errors());
    srunner_add_suite(sr, suite_kv_bytes());
    srunner_add_suite(sr, suite_weights());
    srunner_add_suite(sr, suite_model_library());
    srunner_add_suite(sr, suite_capacity());
    srunner_add_suite(sr, suite_roofline());
    srunner_add_suite(sr, suite_moe_grouped());
    srunner_add_suite(sr, suite_collective());
    srunner_add_suite(sr, suite_model_terms());
    srunner_add_suite(sr, suite_sim_core());
    srunner_add_suite(sr, suite_kv_manager());
    srunner_add_suite(sr, suite_engine());
    srunner_add_suite(sr, suite_spec());
    srunner_add_suite(sr, suite_moe_parallel());
    srunner_add_suite(sr, suite_disagg());
    srunner_add_suite(sr, suite_workload());
    srunner_add_suite(sr, suite_published());
    srunner_add_suite(sr, suite_kernels());
    srunner_add_suite(sr, suite_import());
    srunner_add_suite(sr, suite_db());
    srunner_add_suite(sr, suite_cpu_backend());
    srunner_add_suite(sr, suite_pool());
    srunner_add_suite(sr, suite_fastfwd());
    srunner_add_suite(sr, suite_multistep());
    srunner_add_suite(sr, suite_output_lag());
    srunner_add_suite(sr, suite_admission());
    srunner_add_suite(sr, suite_reserve());
    srunner_add_suite(sr, suite_step_shape());
    srunner_add_suite(sr, suite_bounded());
    srunner_add_suite(sr, suite_accounting());
    srunner_add_suite(sr, suite_hybrid_kv());
    srunner_add_suite(sr, suite_frag());
    srunner_add_suite(sr, suite_verify());
    srunner_add_suite(sr, suite_vf());
    srunner_add_suite(sr, suite_planner());
    srunner_add_suite(sr, suite_capsearch());
    srunner_add_suite(sr, suite_bound());
    srunner_add_suite(sr, suite_report());
    srunner_add_suite(sr, suite_cli());
    srunner_add_suite(sr, suite_cli_sim());
    srunner_add_suite(sr, suite_cuda_plugin());
    srunner_add_suite(sr, suite_harden());
    srunner_add_suite(sr, suite_offload());
    srunner_add_suite(sr, suite_frontend());
    srunner_add_suite(sr, suite_eager_host());
    srunner_add_suite(sr, suite_attn_kernels());
    srunner_add_suite(sr, suite_mixing());
    srunner_add_suite(sr, suite_tiles());
    srunner_add_suite(sr, suite_speed_paths());
    srunner_add_suite(sr, suite_weight_only());
    srunner_add_suite(sr, suite_block_fp8());
    srunner_add_suite(sr, suite_twin());
    srunner_add_suite(sr, suite_mem_rule());
    srunner_add_suite(sr, suite_marlin_moe());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
