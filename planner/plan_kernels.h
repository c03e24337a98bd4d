/* plan_kernels.h: the kernel-level check of the cost model against GPU kernels we measured (a
 * folder such as validation/h200-2026-11-30/). Each cuBLAS GEMM (gemm.csv, gemm_map.csv, the
 * bf16 reference rows of int4.csv) and each GEMM of a prefill layer (prefill.csv) is compared
 * with kv_gemm_time; each tinygemm int4 GEMM (int4.csv) with kv_gemm_time at the model's W4A16
 * bytes and dtype; each grouped expert GEMM (moe.csv) with kv_gemm_time's terms for one expert
 * times the experts, in one kernel; each PyTorch SDPA attention kernel (attn.csv, prefill.csv's
 * attention part) with the attention op of kv_step_time for its shape and kernel family; each
 * decode step (step.csv, step_ctx.csv) and each whole prefill forward (prefill.csv) with
 * kv_step_time on a scenario built to match; all on the bundled, uncalibrated hardware profile
 * (h200) and the `bare` engine. Reads with located errors; nothing is fitted and nothing is
 * stored. docs/validation.md, "H200 measurements (2026-11-30)", says how each row is predicted
 * and what the results say. */
#ifndef KVPLAN_PLAN_KERNELS_H
#define KVPLAN_PLAN_KERNELS_H

#include "../loader/scn.h"

#include <stdbool.h>
#include <stddef.h>

/* The files a measurement folder holds, in the order they are read. */
typedef enum { KVAL_FILE_GEMM, KVAL_FILE_GEMM_MAP, KVAL_FILE_ATTN, KVAL_FILE_STEP, KVAL_FILE_PREFILL, KVAL_FILE_INT4,
               KVAL_FILE_MOE, KVAL_FILE_STEP_CTX, KVAL_FILE_COUNT } kval_file;
extern const char *const KVAL_FILE_NAMES[];   /* "gemm.csv", ... in enum order */
/* Files from KVAL_FILE_PREFILL on came from a later probe session: a folder without one (such as
 * validation/h200-2026-11-30/edges/) reads with no rows from it, and kval_table.absent says so. */
#define KVAL_FILE_FIRST_OPTIONAL KVAL_FILE_PREFILL

/* Classes the summary reports separately. cuDNN attention has no kernel family in the model:
 * its rows are priced as the FA3 class (the fastest family the model has on Hopper) and kept
 * apart from the FlashAttention-2 rows that match the `sdpa` family. A prefill layer's parts are
 * classes of their own (each part replayed alone over one weight copy, not the rotating copies
 * of gemm.csv); `rest` (unfused elementwise ops) is shown against the model's fused terms and
 * never counted. */
typedef enum { KVAL_GEMM_BF16, KVAL_GEMM_FP8, KVAL_ATTN_DECODE, KVAL_ATTN_PREFILL, KVAL_ATTN_DECODE_CUDNN,
               KVAL_ATTN_PREFILL_CUDNN, KVAL_STEP, KVAL_PREFILL_GEMM_BF16, KVAL_PREFILL_GEMM_FP8,
               KVAL_PREFILL_ATTN, KVAL_PREFILL_REST, KVAL_PREFILL_FORWARD, KVAL_INT4, KVAL_MOE, KVAL_STEP_CTX,
               KVAL_CLASS_COUNT } kval_class;
const char *kval_class_name(kval_class c);   /* index KVAL_CLASS_COUNT: "all" */

typedef enum {
    KVAL_COMPARED,   /* predicted and counted in the summary */
    KVAL_EXCLUDED,   /* predicted and shown, not counted: the measurement is not what the model
                      * prices (the note says why) */
    KVAL_SKIPPED     /* not predicted (no measurement, or nothing in the library to express it) */
} kval_status;
extern const char *const KVAL_STATUS_NAMES[];

/* What a prefill.csv row times: the whole forward or one part of a layer. */
typedef enum { KVAL_PART_FORWARD, KVAL_PART_QKV, KVAL_PART_O, KVAL_PART_GATE_UP, KVAL_PART_DOWN, KVAL_PART_ATTENTION,
               KVAL_PART_REST, KVAL_PART_COUNT } kval_part;
extern const char *const KVAL_PART_NAMES[];   /* "forward", "layer_qkv", ... as the file spells them */

typedef struct {
    kval_file file;
    long line;                 /* in the file */
    kval_class cls;
    char label[64];            /* gemm, int4, moe: the label column; attn: the backend; step, prefill: the model */
    /* gemm, int4, moe (M: rows per expert), prefill (M: the prompt's tokens; N, K: set by
     * kval_table_predict from the model for a GEMM part) */
    long M, N, K;              /* rows (tokens), output columns, inner dimension */
    scn_dtype dtype;           /* the GEMM's operand dtype (bf16 or fp8); prefill: the weights' */
    long group;                /* int4: elements per scale and zero (0: the cuBLAS bf16 reference) */
    bool int4;                 /* int4: a tinygemm row, else the cuBLAS bf16 reference */
    long experts;              /* moe: experts in the grouped GEMM */
    kval_part part;            /* prefill */
    /* attn and step */
    bool decode;               /* attn: a decode row (one query row per sequence) */
    bool cudnn;                /* attn: the cuDNN backend, else FlashAttention-2 */
    long batch, q_len, kv_len, q_heads, kv_heads, head_dim;
    long context;              /* step: tokens each sequence attends */
    bool graph;                /* step, prefill: replayed from a CUDA graph, else eager */
    double measured;           /* s; NAN when the probe recorded none */
    /* prediction */
    kval_status status;
    double reference;          /* s: what the prediction is compared with: `measured`, except for a
                                * prefill forward, whose unfused elementwise ops are replaced by the
                                * model's fused ones (the note gives both) */
    double predicted;          /* s */
    double error;              /* predicted / reference - 1 */
    const char *bound;         /* what binds the prediction (kv_bound_name); "" when none */
    char shape[160];           /* the row's shape in words, for the report */
    char note[400];
} kval_row;

typedef struct {
    int n, cap;
    kval_row *rows;
    bool absent[KVAL_FILE_COUNT];   /* an optional file the folder does not have */
} kval_table;

/* Reads DIR's gemm.csv, gemm_map.csv, attn.csv, step.csv, prefill.csv, int4.csv, moe.csv and
 * step_ctx.csv (columns in docs/validation.md); the last four may be absent.
 * 0 on success; -1 for malformed data ("file:line:col: field: message" in err), -2 when a file
 * cannot be opened or read ("file: message"), -3 when out of memory. */
int kval_table_read(const char *dir, kval_table *t, char *err, size_t n);
void kval_table_free(kval_table *t);

/* Predicts every row with hardware profile `hardware` (a library name; NULL: h200) and the
 * `bare` engine, setting status, predicted, error, bound and note. 0 on success; -1 when the
 * library cannot build the scenarios (message in err). */
int kval_table_predict(kval_table *t, const char *hardware, char *err, size_t n);

typedef struct {
    int compared, excluded, skipped;
    int within10, within20;    /* compared rows with |error| <= 10 % and <= 20 % */
    double median_abs;         /* median |error| over compared rows; NAN when none */
    double median;             /* median signed error: the class's bias; NAN when none */
} kval_summary;

/* Per class and, at index KVAL_CLASS_COUNT, over every row. */
void kval_table_summarise(const kval_table *t, kval_summary out[KVAL_CLASS_COUNT + 1]);

/* The indices of class c's compared rows with the largest |error|, largest first (c ==
 * KVAL_CLASS_COUNT: over every class); returns how many were written (at most max). */
int kval_table_largest(const kval_table *t, kval_class c, int *idx, int max);

#endif
