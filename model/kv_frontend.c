/* kv_frontend.c: what a serving engine's front end adds to a request's time to first token:
 * tokenising the prompt and the fixed per-request work between the client's send and the first
 * streamed token (docs/cost-model.md, "Engine profiles", "Front end"). */
#include "kv_model.h"

double kv_frontend_seconds(const scn_scenario *s, double prompt_tokens)
{
    /* An offline run (vLLM's LLM.generate, trtllm-bench, a static-batch benchmark) hands the
     * engine its prompts in-process, often as token ids: no server sits on the path, unless the
     * prompts are sent to the server all at once (workload.arrival.via: server). */
    if (s->workload.arrival == SCN_ARRIVAL_OFFLINE && !s->workload.via_server) return 0;
    const scn_engine *e = &s->engine;
    return e->frontend_request + e->frontend_token * (prompt_tokens > 0 ? prompt_tokens : 0);
}
