/* workload.h: the stream of requests a scenario describes, generated lazily so memory does not
 * grow with the number of requests: arrivals (poisson, gamma, constant, a trace CSV, a closed
 * loop of clients that each wait for their reply, or offline with everything at t = 0),
 * prompt and output lengths, shared prefixes with Zipf popularity, and conversations whose
 * every turn carries the conversation so far. Deterministic in the seed. */
#ifndef KVPLAN_SIM_WORKLOAD_H
#define KVPLAN_SIM_WORKLOAD_H

#include "../loader/scn.h"
#include "rng.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    long id;                /* 0, 1, 2, ... in creation order */
    double arrival;         /* s */
    int prompt;             /* tokens, shared prefix included */
    int output;             /* tokens to generate */
    int prefix_group;       /* -1: none */
    int prefix_len;         /* tokens of the shared prefix at the start of the prompt */
    uint64_t prefix_seed;   /* token stream of the prefix group */
    uint64_t body_seed;     /* token stream of the rest (the conversation's, across turns) */
    long conversation;      /* -1 for single-turn requests */
    int turn;               /* 0-based */
    int turns_left;         /* further turns this conversation will send */
    bool measured;          /* inside the steady-state window (workload.measure) */
    bool too_long;          /* the prompt leaves no room for one output token within max_model_len:
                             * engines reject it, and so does the simulator (sim/engine.c) */
} sim_req_spec;

typedef struct sim_workload sim_workload;

/* NULL with a message (file:line for CSV problems) on failure; *noinput is set when a file
 * could not be opened (as opposed to holding bad data). */
sim_workload *sim_workload_init(const scn_scenario *s, uint64_t seed, int *noinput, char *err, size_t n);
void sim_workload_free(sim_workload *w);
/* The next request from the arrival process: 0 with *out filled, 1 when exhausted, -1 on a bad
 * trace line (message in err). Arrival times never decrease. */
int sim_workload_next(sim_workload *w, sim_req_spec *out, char *err, size_t n);
/* What the client of prev (completed at `now`) sends next: the next turn of its conversation,
 * `think_time` after now, whose prompt is the previous prompt, the previous reply and a new
 * user message; or, in a closed loop, once the conversation is over (or would outgrow
 * max_model_len), a new conversation `client_think_time` after now. 1 when nothing follows. */
int sim_workload_next_turn(sim_workload *w, const sim_req_spec *prev, double now, sim_req_spec *out);
/* What the client of r sends after r was rejected at `now`, because its prompt is too long
 * (r->too_long) or the waiting queue was full: in a closed loop, a new conversation
 * `client_think_time` after now, as a benchmark client sends its next request when one fails;
 * r's further turns are not sent (each would carry r's prompt), and the total shrinks by them.
 * 1 when nothing follows. */
int sim_workload_next_rejected(sim_workload *w, const sim_req_spec *r, double now, sim_req_spec *out);
/* True when r falls inside the scenario's steady-state window (workload.measure), judged with
 * the request total known now; the generator stores it in r->measured as it creates r. The
 * summary metrics count only these; every request still runs and reaches the per-request sink.
 * A window cut by time (measure.by: time) marks every request: sim/metrics.c cuts it at the end. */
bool sim_workload_measured(const sim_workload *w, const sim_req_spec *r);
/* Requests the workload will produce in all (turns included); -1 if unknown (a trace). */
long sim_workload_total(const sim_workload *w);
/* Conversation turns the workload will never send (requests - the total now): their conversation
 * outgrew max_model_len or a turn of it was rejected. 0 for a trace. */
long sim_workload_unsent(const sim_workload *w);
/* Draws one length from a distribution (exposed for tests). */
int sim_workload_draw(sim_workload *w, const scn_dist *d, int which);

#endif
