/* plan_trace.c: where a plan's simulations go. With KVPLAN_PLAN_TRACE=FILE every simulation
 * the planner runs (offered-load runs and capacity trials) appends one tab-separated line to
 * FILE: the candidate, the seed, the phase that asked for it, the rate, the requests, whether it
 * kept up, whether it stopped early, and the thread CPU seconds it took (docs/planner.md,
 * "Where the simulations go"). Without the variable nothing is written and nothing is timed. */
#include "plan.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;

static _Thread_local int cur_cand = -1, cur_seed = -1;
static _Thread_local const char *cur_phase = "other";

static void open_trace(void)
{
    const char *p = getenv("KVPLAN_PLAN_TRACE");
    if (!p || !*p) return;
    out = fopen(p, "a");
    /* A trace asked for and not written must not pass silently; the plan itself goes on. */
    if (!out) fprintf(stderr, "kvplan: KVPLAN_PLAN_TRACE=%s: %s (no trace written)\n", p, strerror(errno));
}

bool plan_trace_on(void)
{
    pthread_once(&once, open_trace);
    return out != NULL;
}

void plan_trace_context(int cand, int seed, const char *phase)
{
    if (cand >= 0) cur_cand = cand;
    cur_seed = seed;
    cur_phase = phase ? phase : "other";
}

void plan_trace_note(int cand, const char *what)
{
    if (!plan_trace_on()) return;
    pthread_mutex_lock(&lock);
    fprintf(out, "%d\t-\tend\t%s\n", cand, what);
    fflush(out);
    pthread_mutex_unlock(&lock);
}

double plan_trace_clock(void)
{
    if (!plan_trace_on()) return 0;
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void plan_trace_sim(double rate, long requests, int verdict, bool stopped, double t0)
{
    if (!plan_trace_on()) return;
    double cpu = plan_trace_clock() - t0;
    pthread_mutex_lock(&lock);
    fprintf(out, "%d\t%d\t%s\t%.6g\t%ld\t%d\t%d\t%.4f\n", cur_cand, cur_seed, cur_phase, rate, requests, verdict,
            stopped ? 1 : 0, cpu);
    fflush(out);
    pthread_mutex_unlock(&lock);
}
