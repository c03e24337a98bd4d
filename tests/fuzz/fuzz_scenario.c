/* fuzz_scenario.c: the scenario loader end to end. An input is up to ten parts separated by a
 * line "%%%": the scenario file, a second file (written as base.yaml and base.json, so the first
 * can `extends: base.yaml` or name `{hf_config: base.json}`), then --set overrides, one per part.
 * A scenario that loads is also taken through the capacity and weight formulas, so a value the
 * loader lets through cannot overflow there (UBSan's float-cast-overflow checks that). */
#include "fuzz_common.h"
#include "../../loader/scn.h"
#include "../../model/kv_model.h"

#include <math.h>

#define MAX_PARTS 10

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    char *parts[MAX_PARTS];
    size_t lens[MAX_PARTS];
    int n = 0;
    char *p = text, *end = text + size;
    while (n < MAX_PARTS) {
        char *sep = n + 1 < MAX_PARTS ? strstr(p, "\n%%%\n") : NULL;
        /* strstr stops at a NUL byte: a part then ends there, which is what a file would hold
         * up to that byte anyway. */
        parts[n] = p;
        lens[n] = sep ? (size_t)(sep - p) : (size_t)(end - p);
        n++;
        if (!sep) break;
        *sep = 0;
        p = sep + 5;
    }
    const char *path = fuzz_file(0, "scenario.yaml", (const uint8_t *)parts[0], lens[0]);
    const uint8_t *base = n > 1 ? (const uint8_t *)parts[1] : (const uint8_t *)"";
    size_t blen = n > 1 ? lens[1] : 0;
    fuzz_file(1, "base.yaml", base, blen);
    fuzz_file(2, "base.json", base, blen);
    const char *sets[MAX_PARTS];
    int n_sets = 0;
    for (int i = 2; i < n; i++) sets[n_sets++] = parts[i];
    scn_scenario *s = malloc(sizeof *s);
    if (!s) abort();
    scn_error err;
    scn_status st = scn_scenario_load(path, sets, n_sets, s, &err);
    if (st == SCN_OK) {
        int tp = s->deployment.tensor_parallel;
        kv_weights w = kv_weights_compute(&s->model, tp);
        kv_cache_cfg c = kv_cache_cfg_make(s, s->options.kv_dtype[0], s->options.sink[0], s->options.window[0]);
        kv_capacity k = kv_capacity_compute(s, &c, s->options.block_size[0], 0);
        if (k.capacity_tokens < 0 || k.max_seqs_paged < 0 || k.max_seqs_contiguous < 0 || isnan(w.bytes_per_rank))
            abort();
    } else {
        /* Every failure says what went wrong. */
        if (!err.msg[0]) abort();
    }
    free(s);
    free(text);
    return 0;
}
