/* gpuheap tests: a tiny check harness. CHECK records a failure and goes on;
 * the test's exit status is the number of failures (capped), so ctest fails
 * on any. GH_TEST_SKIP (77) tells ctest the test could not run here. */
#ifndef GPUHEAP_TEST_UTIL_H
#define GPUHEAP_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#define GH_TEST_SKIP 77

static int gh_test_failures = 0;

#define CHECK(cond)                                                         \
  do {                                                                      \
    if (!(cond)) {                                                          \
      gh_test_failures++;                                                   \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                       \
  } while (0)

#define CHECK_MSG(cond, ...)                                                \
  do {                                                                      \
    if (!(cond)) {                                                          \
      gh_test_failures++;                                                   \
      fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                         \
      fputc('\n', stderr);                                                  \
    }                                                                       \
  } while (0)

#define CHECK_EQ_U64(a, b)                                                                         \
  do {                                                                                             \
    const unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b);           \
    if (a_ != b_) {                                                                                \
      gh_test_failures++;                                                                          \
      fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%llu != %llu)\n", __FILE__, __LINE__, #a, #b, a_, b_); \
    }                                                                                              \
  } while (0)

static int gh_test_done(const char* name) {
  if (gh_test_failures)
    fprintf(stderr, "%s: %d check(s) failed\n", name, gh_test_failures);
  else
    printf("%s: all checks passed\n", name);
  return gh_test_failures > 100 ? 100 : gh_test_failures;
}

/* A scale factor for long tests: GH_TEST_SCALE in the environment (e.g. 0.1
 * under sanitizers, 10 for soak runs). */
static double gh_test_scale(void) {
  const char* s = getenv("GH_TEST_SCALE");
  const double v = s ? atof(s) : 1.0;
  return v > 0 ? v : 1.0;
}

#endif /* GPUHEAP_TEST_UTIL_H */
