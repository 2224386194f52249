/* gpuheap: a thin C interface over Google Benchmark, so the benchmarks are
 * written in C against the same C API users call. Each benchmark times its
 * own iterations (CUDA events) and reports them as manual time. */
#ifndef GPUHEAP_GBENCH_SHIM_H
#define GPUHEAP_GBENCH_SHIM_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gh_bench_state_s gh_bench_state_t;
typedef void (*gh_bench_fn)(gh_bench_state_t* st, const void* arg);

/* Register `fn(st, arg)` as benchmark `name`: `repetitions` runs of
 * `iterations` iterations each, with mean, median and spread reported. */
void gh_bench_register(const char* name, gh_bench_fn fn, const void* arg, int iterations, int repetitions);
bool gh_bench_keep_running(gh_bench_state_t* st);
void gh_bench_set_iteration_time(gh_bench_state_t* st, double seconds);
/* A counter averaged over the iterations of a run. */
void gh_bench_counter(gh_bench_state_t* st, const char* name, double value);
void gh_bench_error(gh_bench_state_t* st, const char* message);
/* A key/value written into the report's context (GPU, revision, ...). */
void gh_bench_context(const char* key, const char* value);
/* Parse benchmark flags, run what was registered, return 0 on success. */
int gh_bench_main(int argc, char** argv);

#ifdef __cplusplus
}
#endif

#endif /* GPUHEAP_GBENCH_SHIM_H */
