/* plan_mpi.c: `kvplan-mpi plan SCENARIO ...` (built with `make MPI=1`): the planner spread over
 * MPI ranks. Rank 0 hands out candidates one at a time to whichever rank asks and gathers their
 * metrics; then it ranks and prints exactly what `kvplan plan --no-db` prints. */
#include <mpi.h>

#include "../cli_run.h"
#include "../../sim/alloc_policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TAG_READY = 1, TAG_WORK = 2, TAG_RESULT = 3 };

/* A candidate's whole result (every seed and capacity search), less its kept per-seed runs,
 * which only storing needs and this planner does not store. */
typedef struct {
    int idx;
    plan_cand c;
} result_msg;

/* The commands table cli_common.c reads for usage text. */
const cli_command CLI_COMMANDS[] = {
    {"plan", NULL, "plan across MPI ranks",
     "usage: mpirun -n N kvplan-mpi plan SCENARIO [--no-rules] [--top K] [--seeds N] [--set PATH=VALUE]...\n"
     "                                             [--format table|json|csv]\n"
     "\n"
     "Rank 0 hands candidates to the other ranks and gathers their results, then prints what\n"
     "`kvplan plan --no-db` prints. With one rank it plans alone.\n"
     "\n"
     "  --seeds N   seeds per candidate, 1-32 (default 3), as `kvplan plan --seeds`\n"},
};
const int CLI_N_COMMANDS = 1;

static void coordinate(const scn_scenario *s, plan_result *r, int size)
{
    int next = 0, stopped = 0;
    while (stopped < size - 1) {
        result_msg msg;
        MPI_Status st;
        MPI_Recv(&msg, (int)sizeof msg, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        if (st.MPI_TAG == TAG_RESULT) {
            plan_cand *c = &r->c[msg.idx];
            free(c->seed_m);
            *c = msg.c;
            c->seed_m = NULL;
        }
        while (next < r->n && r->c[next].status != PLAN_PENDING) next++;
        int work = next < r->n ? next++ : -1;
        MPI_Send(&work, 1, MPI_INT, st.MPI_SOURCE, TAG_WORK, MPI_COMM_WORLD);
        if (work < 0) stopped++;
    }
    (void)s;
}

static int work(const scn_scenario *s, plan_result *r)
{
    result_msg msg;
    MPI_Send(&msg, 0, MPI_BYTE, 0, TAG_READY, MPI_COMM_WORLD);
    for (;;) {
        int idx;
        MPI_Recv(&idx, 1, MPI_INT, 0, TAG_WORK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (idx < 0) return 0;
        plan_cand *c = &r->c[idx];
        char err[512];
        if (plan_evaluate_one(s, c, err, sizeof err)) {
            fprintf(stderr, "kvplan-mpi: candidate %d: %s\n", idx, err);
            MPI_Abort(MPI_COMM_WORLD, CLI_EX_INTERNAL);
        }
        memset(&msg, 0, sizeof msg);
        msg.idx = idx;
        msg.c = *c;
        msg.c.seed_m = NULL;
        MPI_Send(&msg, (int)sizeof msg, MPI_BYTE, 0, TAG_RESULT, MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    sim_alloc_policy();   /* before MPI's and the planner's threads: as kvplan's main */
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    cli_common c = {.format = OUT_TABLE};
    int help = 0, no_rules = 0, rc = CLI_OK;
    long top = 0, seeds = PLAN_SEEDS_DEFAULT;
    if (argc < 2 || strcmp(argv[1], "plan")) {
        if (rank == 0) fputs(CLI_COMMANDS[0].usage, stderr);
        MPI_Finalize();
        return CLI_EX_USAGE;
    }
    for (int i = 2; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i, &help);
        const char *v;
        if (r < 0) { rc = CLI_EX_USAGE; break; }
        if (r) continue;
        if (!strcmp(argv[i], "--no-rules")) no_rules = 1;
        else if ((v = cli_flag_value(argc, argv, &i, "--top"))) { if (cli_flag_missing_value(v) || cli_parse_long("--top", v, 1, 100000, &top)) { rc = CLI_EX_USAGE; break; } }
        else if ((v = cli_flag_value(argc, argv, &i, "--seeds"))) { if (cli_flag_missing_value(v) || cli_parse_long("--seeds", v, 1, PLAN_SEEDS_MAX, &seeds)) { rc = CLI_EX_USAGE; break; } }
        else if (cli_is_flag(argv[i])) { if (rank == 0) cli_usage_error("plan", "unknown option '%s'", argv[i]); rc = CLI_EX_USAGE; break; }
        else c.scenario = argv[i];
    }
    if (rc || help || !c.scenario) {
        if (rank == 0 && (help || !c.scenario)) fputs(CLI_COMMANDS[0].usage, help ? stdout : stderr);
        MPI_Finalize();
        return rc ? rc : help ? CLI_OK : CLI_EX_USAGE;
    }
    /* Every rank loads the scenario and enumerates: the candidates are the same everywhere. */
    scn_scenario s;
    plan_result r;
    if ((rc = cli_load(&c, &s)) || plan_enumerate(&s, &r)) MPI_Abort(MPI_COMM_WORLD, rc ? rc : CLI_EX_DATA);
    plan_set_seeds(&r, (int)seeds);   /* on every rank, before any candidate is evaluated */
    if (size == 1) {
        char err[512];
        if (plan_evaluate(&s, &r, 1, 0, 1, NULL, NULL, err, sizeof err)) { fprintf(stderr, "kvplan-mpi: %s\n", err); MPI_Abort(MPI_COMM_WORLD, CLI_EX_INTERNAL); }
    } else if (rank == 0) {
        coordinate(&s, &r, size);
    } else {
        work(&s, &r);
    }
    if (rank == 0 && !(rc = cli_plan_none_ran(c.scenario, &r))) {
        out_doc *doc = out_doc_init();
        cli_plan_emit(doc, &s, &r, no_rules, top);
        rc = cli_emit(doc, c.format);
        out_doc_free(doc);
    }
    plan_result_free(&r);
    MPI_Finalize();
    return rc;
}
