/* import_formats.h: the benchmark-client importers beside db_import.c's vLLM and Prometheus
 * parsers: genai-perf/aiperf profile exports, SGLang bench_serving JSONL, the current vLLM
 * `bench serve` result JSON and MLPerf LoadGen's mlperf_log_summary.txt. Internal to db/.
 *
 * Each stores kvplan's metric names in SI units and the benchmark's setting as `setting_*`
 * entries, so a stored run can be re-simulated: setting_concurrency (closed loop),
 * setting_request_rate_per_s (open loop), setting_offline (1: everything sent at once),
 * setting_prompts, setting_input_tokens_mean, setting_output_tokens_mean. */
#ifndef KVPLAN_DB_IMPORT_FORMATS_H
#define KVPLAN_DB_IMPORT_FORMATS_H

#include "db_import.h"

#include <jansson.h>

/* Appends one metric (ignored when not finite or the list is full). */
void db_import_put(db_import *o, const char *name, double v, sim_unit unit);

/* Tries the formats of this header on text; 1 when none of them recognises it (the caller
 * falls back to db_import.c's parsers), 0 on success, -1 with a located message in err. */
int db_import_detect_more(const char *text, const char *label, db_import *o, char *err, size_t n);

int db_import_genai(json_t *root, const char *label, db_import *o, char *err, size_t n);
int db_import_vllm_serve(json_t *root, const char *label, db_import *o, char *err, size_t n);
/* JSONL: one result object per line (bench_serving appends); the last record is imported. */
int db_import_sglang(const char *text, const char *label, db_import *o, char *err, size_t n);
int db_import_mlperf(const char *text, const char *label, db_import *o, char *err, size_t n);

/* Latency statistics stored as "<stat>_<src>_ms" keys (vLLM, SGLang): for each pair of q,
 * src and kvplan's name, the mean, median/p50, p90, p95 and p99 present, converted to seconds.
 * -1 when a present key is not a number >= 0. */
int db_import_ms_stats(json_t *root, const char *const q[][2], int nq, const char *label, db_import *o,
                       char *err, size_t n);

/* True for an SGLang bench_serving result object (its latency keys say so). */
int db_import_is_sglang(json_t *obj);

#endif
