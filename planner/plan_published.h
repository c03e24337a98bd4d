/* plan_published.h: the validation harness over published measurements (validation/
 * published.tsv): reads the table with located errors, predicts each row with the bundled,
 * uncalibrated library (simulation for served loads, the cost model for static batches and KV
 * capacity) and summarises the errors per metric class. It is a test set: nothing here fits
 * anything to it. docs/validation.md describes the procedure and the file's columns. */
#ifndef KVPLAN_PLAN_PUBLISHED_H
#define KVPLAN_PLAN_PUBLISHED_H

#include <stdbool.h>
#include <stddef.h>

typedef enum { PUB_MODE_CLOSED, PUB_MODE_POISSON, PUB_MODE_OFFLINE, PUB_MODE_BATCH, PUB_MODE_CAPACITY } pub_mode;
extern const char *const PUB_MODE_NAMES[];   /* in enum order, NULL-terminated: the table's mode column */
/* Metric classes the summary reports separately. */
typedef enum { PUB_CLASS_TTFT, PUB_CLASS_TPOT, PUB_CLASS_THROUGHPUT, PUB_CLASS_CAPACITY, PUB_CLASS_E2E,
               PUB_CLASS_COUNT } pub_class;
const char *pub_class_name(pub_class c);

/* Outcomes of predicting a row. */
typedef enum {
    PUB_PREDICTED,   /* predicted and compared */
    PUB_SKIPPED,     /* the library lacks what the row needs (model, hardware, dataset, dtype) */
    PUB_FAILED       /* the row is expressible but the prediction could not be made (e.g. the
                      * model says it does not fit): counted against the share within bounds */
} pub_status;

typedef struct {
    long line;                   /* in the file */
    char id[64], gpu[64], model[64], engine[32], engine_version[128], weight_dtype[32], kv_dtype[32];
    char metric[24], unit[32], source[1024], notes[2048];
    char input[32], output[32];  /* whole token counts or a dataset name */
    int gpus, tp;                /* tp 0: not stated by the source */
    int scheduler_steps;         /* the `engine_args` column's --num-scheduler-steps (1: not given) */
    /* The parallel layout and batch limits the `engine_args` column states (0 / false: not given):
     * --ep N, --attention-dp, --max-batch-size N, --max-num-tokens N, --kv-fraction F. */
    int expert_parallel, max_batch_size, max_num_tokens;
    int max_model_len;           /* tokens (--max-model-len); 0 = the model's own */
    bool attention_dp;           /* attention data-parallel over the tp GPUs (attention TP 1) */
    double kv_fraction;          /* the KV cache's memory fraction (the engine's own rule) */
    bool via_server;             /* offline prompts sent to a server at once (--via-server) */
    int num_prompts;             /* requests a closed or Poisson run sent, all measured (--num-prompts);
                                  * 0: not stated, the harness's own steady-state run */
    bool bench_build;            /* engine built by trtllm-bench's heuristic (--trtllm-bench-build) */
    bool intra_node_comm;        /* gpt-fast with PyTorch's intra-node all-reduce, ENABLE_INTRA_NODE_COMM=1
                                  * (--intra-node-comm): the bare-intranode profile */
    bool chat_endpoint;          /* each prompt sent as one user message to a chat endpoint
                                  * (--chat-endpoint): the server wraps it in the model's chat
                                  * format (docs/cost-model.md, "Chat endpoints") */
    int chat_prefix, chat_suffix;/* that format's tokens before and after the message, from the
                                  * model (0: not derived, nothing added) */
    int chat_bos;                /* of the prefix, the BOS the client's own count already holds */
    bool chat_cached;            /* the engine caches the format's shared prefix by default */
    double uniform_lengths;      /* --uniform-lengths R: each whole-number length L is drawn uniform in
                                  * whole tokens over [floor(R L), L] (the client's random dataset);
                                  * 0: fixed lengths */
    pub_mode mode;
    double load;                 /* concurrency, req/s, prompts, batch size, or (capacity) the memory
                                  * fraction the engine was given (0: not stated) */
    double value;                /* measured, in `unit` */
    pub_class cls;
    /* prediction */
    pub_status status;
    double predicted;            /* in `unit` */
    double error;                /* (predicted - measured) / measured */
    char why[640];               /* skip or failure reason; the engine profile used otherwise */
} pub_row;

typedef struct {
    int n;
    pub_row *rows;
} pub_table;

/* Reads a published-measurements file. 0 on success; -1 for malformed data and -2 for an
 * unreadable file, with "file:line:col: field: message" (or "file: message") in err. */
int pub_table_read(const char *path, pub_table *t, char *err, size_t n);
void pub_table_free(pub_table *t);

/* Predicts one row, setting status, predicted, error and why. A length given as a dataset name
 * (sharegpt, ...) is looked up as NAME.yaml in `datasets` (may be NULL), then in the library's
 * datasets/ folder: a file with one-line `prompt_tokens:` and `output_tokens:` entries in the
 * scenario format, each with its source in a comment. Returns -1 only on an internal failure
 * (out of memory, no temporary directory), with the reason in err. */
int pub_row_predict(pub_row *r, const char *datasets, char *err, size_t n);

typedef struct {
    int rows;          /* predicted + failed */
    int predicted, failed, skipped;
    int within10, within20;
    double median_abs; /* median |error| over predicted rows; NAN when none */
} pub_summary;

/* Per class and, at index PUB_CLASS_COUNT, over every row. */
void pub_table_summarise(const pub_table *t, pub_summary out[PUB_CLASS_COUNT + 1]);

/* The library engine profile for a published row's engine and version, written to out (n
 * bytes) and returned (docs/cost-model.md, "Engine profiles", "Engine versions"): gpt-fast is the single-process
 * `bare` class; vLLM before 0.6 (the first MAJOR.MINOR in the version text) ran the V0 engine
 * whose CPU loop blocked the GPU, `vllm-v0`; SGLang before 0.4 scheduled without its overlap
 * scheduler, `sglang-v0.3`; TensorRT-LLM before 1.0 ran the TensorRT engine backend without
 * the PyTorch backend's overlap scheduler, `trtllm-v0`, and 0.5 and 0.6 decoded with the masked
 * MHA kernel and built their engines with the legacy per-model scripts, whose all-reduce was
 * NCCL unless --use_custom_all_reduce was given, `trtllm-v0.6`; anything else, an unstated version
 * included, is the engine's current profile. */
const char *pub_engine_profile(const char *engine, const char *version, char *out, size_t n);

#endif
