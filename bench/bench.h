/* bench.h: the benchmark groups `make bench` runs. */
#ifndef KVPLAN_BENCH_H
#define KVPLAN_BENCH_H

double bench_now(void);     /* monotonic seconds */
void bench_model(void);     /* bench_model.c: loader and cost-model calls per second */
void bench_sim(void);       /* bench_sim.c: simulated requests and events per second, peak RSS */

#endif
