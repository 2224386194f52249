// gpuheap: the C shim over Google Benchmark (see gbench_shim.h).
#include "gbench_shim.h"

#include <benchmark/benchmark.h>

#include <map>
#include <string>

struct gh_bench_state_s {
  benchmark::State* state;
  std::map<std::string, double> sums;
};

void gh_bench_register(const char* name, gh_bench_fn fn, const void* arg, int iterations, int repetitions) {
  benchmark::RegisterBenchmark(name,
                               [fn, arg](benchmark::State& state) {
                                 gh_bench_state_s s{&state, {}};
                                 fn(&s, arg);
                                 const double n = state.iterations() ? (double)state.iterations() : 1.0;
                                 for (const auto& kv : s.sums) state.counters[kv.first] = kv.second / n;
                               })
      ->UseManualTime()
      ->Iterations(iterations)
      ->Repetitions(repetitions)
      ->Unit(benchmark::kMillisecond);
}

bool gh_bench_keep_running(gh_bench_state_t* st) { return st->state->KeepRunning(); }
void gh_bench_set_iteration_time(gh_bench_state_t* st, double seconds) { st->state->SetIterationTime(seconds); }
void gh_bench_counter(gh_bench_state_t* st, const char* name, double value) { st->sums[name] += value; }
void gh_bench_error(gh_bench_state_t* st, const char* message) { st->state->SkipWithError(message); }
void gh_bench_context(const char* key, const char* value) { benchmark::AddCustomContext(key, value); }

int gh_bench_main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
