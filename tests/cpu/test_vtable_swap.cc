/* _gh_vtable_swap (host/adapters_torch.cc), which gpuheap.torch.enable uses
 * to answer PyTorch's cacheInfo (cuDNN's benchmark mode) through the
 * pluggable allocator: on objects of a class of this test,
 *   - the entry named in one object's table is replaced: a call through
 *     that object reaches the replacement, another object of the class and
 *     the other entries keep theirs; a second swap is a no-op;
 *   - refused, nothing changed: a function not in the table, an object
 *     whose table is another class's, NULL arguments;
 * and, on the simulated manager, gh_torch_cache_info: the budget's free
 * bytes, 0 for another device; gh_torch_serve_cache_info without PyTorch
 * loaded: GH_ERR_UNSUPPORTED. */
#include <cstdint>
#include <cstdio>
#include <vector>

#include "gpuheap.h"
#include "../test_sim.h"
#include "../test_util.h"
#include "../../host/internal.h"

namespace {

struct Shape {
  virtual ~Shape() = default;
  virtual int sides() const { return 0; }
  virtual int scaled(int k) const { return k; }
};
struct Square : Shape {
  int sides() const override { return 4; }
  int scaled(int k) const override { return 4 * k; }
};
struct Circle : Shape {
  int sides() const override { return 1; }
};

/* What the replaced entry becomes: the object, then the arguments. */
int fake_scaled(const void* self, int k) {
  (void)self;
  return 1000 + k;
}

void* const* table_of(const void* obj) { return *static_cast<void* const* const*>(obj) - 2; }

}  // namespace

int main() {
  Shape* volatile a = new Square;  /* volatile: no call below is bound at compile time */
  Shape* volatile b = new Square;
  Shape* volatile c = new Circle;
  void* const* square = table_of(a);
  /* Two entries for the destructor, then sides and scaled. */
  const size_t entries = 6;
  void* scaled = square[5];
  CHECK(a->scaled(3) == 12 && b->scaled(3) == 12);

  CHECK(_gh_vtable_swap(a, square, entries, scaled, reinterpret_cast<const void*>(&fake_scaled)) == GH_OK);
  std::printf("after the swap: a->scaled(3) = %d, b->scaled(3) = %d\n", a->scaled(3), b->scaled(3));
  CHECK(a->scaled(3) == 1003);
  CHECK(a->sides() == 4);            /* the other entries kept */
  CHECK(b->scaled(3) == 12);         /* another object of the class kept its table */
  CHECK(table_of(b) == square);
  CHECK(_gh_vtable_swap(a, square, entries, scaled, reinterpret_cast<const void*>(&fake_scaled)) == GH_OK);
  CHECK(a->scaled(5) == 1005);

  /* Refused, nothing changed. */
  CHECK(_gh_vtable_swap(b, square, entries, reinterpret_cast<const void*>(&fake_scaled),
                        reinterpret_cast<const void*>(&fake_scaled)) == GH_ERR_UNSUPPORTED);
  CHECK(_gh_vtable_swap(c, square, entries, scaled, reinterpret_cast<const void*>(&fake_scaled)) ==
        GH_ERR_UNSUPPORTED);
  CHECK(c->scaled(3) == 3 && c->sides() == 1);
  CHECK(_gh_vtable_swap(nullptr, square, entries, scaled, reinterpret_cast<const void*>(&fake_scaled)) ==
        GH_ERR_INVAL);
  CHECK(_gh_vtable_swap(b, square, 2, scaled, reinterpret_cast<const void*>(&fake_scaled)) == GH_ERR_INVAL);
  CHECK(b->scaled(3) == 12);
  delete a;  /* the destructor entries were kept */
  delete b;
  delete c;

  /* PyTorch not loaded: nothing to serve. */
  CHECK(gh_torch_serve_cache_info() == GH_ERR_UNSUPPORTED);
  std::printf("without PyTorch: %s\n", gh_last_error_detail());

  /* The budget's free bytes. */
  const size_t MiB = (size_t)1 << 20;
  gh_tmgr_t* tm = gh_test_sim_tmgr(24 * MiB, 64 * MiB);
  CHECK(tm != nullptr);
  if (!tm) return gh_test_done("test_vtable_swap");
  CHECK(gh_tmgr_set_global(tm) == GH_OK);
  CHECK(gh_torch_cache_info(0) == 24 * MiB);
  void* p = gh_torch_alloc((ptrdiff_t)(4 * MiB), 0, nullptr);
  CHECK(p != nullptr);
  CHECK(gh_torch_cache_info(0) == 20 * MiB);
  std::vector<void*> more;
  for (int i = 0; i < 8; i++) more.push_back(gh_torch_alloc((ptrdiff_t)(4 * MiB), 0, nullptr));
  CHECK(gh_torch_cache_info(0) == 0);  /* the budget spent (tensors evicted past it) */
  CHECK(gh_torch_cache_info(3) == 0);  /* another device */
  for (void* q : more) gh_torch_free(q, 4 * MiB, 0, nullptr);
  gh_torch_free(p, 4 * MiB, 0, nullptr);
  CHECK(gh_tmgr_maintain(tm) == GH_OK);
  CHECK(gh_torch_cache_info(0) == 24 * MiB);
  CHECK(gh_tmgr_set_global(nullptr) == GH_OK);
  CHECK(gh_tmgr_destroy(tm) == GH_OK);
  return gh_test_done("test_vtable_swap");
}
