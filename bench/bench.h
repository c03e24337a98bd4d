/* bench.h: the benchmark groups `make bench` runs. */
#ifndef KVPLAN_BENCH_H
#define KVPLAN_BENCH_H

double bench_now(void);     /* monotonic seconds */
void bench_model(void);     /* bench_model.c: loader and cost-model calls per second */

#endif
