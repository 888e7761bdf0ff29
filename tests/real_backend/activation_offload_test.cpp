// Activation offload on real tensors: what a layer made and still holds leaves device memory (the
// backend's held bytes) with its values, views staying views of one storage, and comes back the same;
// what the layer keeps, views of storages made before it (a weight's) and what nothing holds stay out
// of it.
#include <ATen/ATen.h>

#include "tests/real_backend/rank_group.hpp"
#include "tests/real_backend/real_helpers.hpp"

#include "tests/real_backend/catch_after_torch.hpp"  // last: after LibTorch

namespace paradyse::testing {
namespace {

// What the rank saw, checked on the test's thread.
struct Observed {
  int64_t storage_bytes = 0, at_start = 0, offloaded = 0, reloaded = 0, host_after = 0, dropped_reload = 0;
  bool kept_in_place = false, old_view_in_place = false, whole_on_host = false, view_shares_offloaded = false,
       view_shares_reloaded = false, values_offloaded = false, values_reloaded = false,
       on_device_again = false;
};

TEST_CASE("offload: a layer's held tensors leave device memory with their values and views, and come back",
          "[real][numerics]") {
  real::TorchBackendOptions options;
  options.device = test_device();
  const auto same_storage = [](const at::Tensor& a, const at::Tensor& b) {
    return a.storage().unsafeGetStorageImpl() == b.storage().unsafeGetStorageImpl();
  };
  const auto observed = run_ranks<Observed>(
      1, tiny_model(false, true),
      [&](real::TorchBackend& be) {
        Observed o;
        real::HeldBytes& held = be.held_bytes();
        const at::Tensor values = at::arange(4096, at::kFloat).reshape({64, 64});
        Tensor before = be.wrap(values * 3, DType::fp32);  // made before the mark, offloaded as `also`
        Tensor weight = be.wrap(values * 5, DType::fp32);  // made before the mark, not offloaded
        const int64_t mark = be.offload_mark();
        Tensor weight_rows = be.slice(weight, 0, 0, 8);  // a view made since the mark, of an old storage
        Tensor whole = be.wrap(values, DType::fp32);
        Tensor rows = be.slice(whole, 0, 8, 16);  // a view of whole's storage
        Tensor dropped = be.wrap(values + 1, DType::fp32);
        Tensor kept = be.wrap(values - 1, DType::fp32);  // the layer's output
        Tensor kept_view = be.slice(kept, 1, 0, 32);
        dropped = Tensor();  // made since the mark, held by nothing: not copied
        o.storage_bytes = 64 * 64 * 4;
        o.at_start = held.current();
        const void* kept_data = real::TorchBackend::unwrap(kept).data_ptr();
        const void* weight_rows_data = real::TorchBackend::unwrap(weight_rows).data_ptr();

        const int64_t set = be.offload_start(mark, {before}, {kept});
        be.offload_finish(set);
        o.offloaded = held.current();
        o.kept_in_place = real::TorchBackend::unwrap(kept).data_ptr() == kept_data &&
                          real::TorchBackend::unwrap(kept_view).device() == options.device;
        const at::Tensor whole_t = real::TorchBackend::unwrap(whole);
        const at::Tensor rows_t = real::TorchBackend::unwrap(rows);
        o.old_view_in_place = real::TorchBackend::unwrap(weight_rows).data_ptr() == weight_rows_data;
        o.whole_on_host = whole_t.device().is_cpu();
        o.view_shares_offloaded = same_storage(rows_t, whole_t);
        o.values_offloaded = at::equal(whole_t, values) && at::equal(rows_t, values.narrow(0, 8, 16)) &&
                             at::equal(real::TorchBackend::unwrap(before), values * 3);

        be.reload_start(set);
        be.reload_finish(set);
        o.reloaded = held.current();
        const at::Tensor back = real::TorchBackend::unwrap(whole);
        const at::Tensor back_rows = real::TorchBackend::unwrap(rows);
        o.on_device_again = back.device() == options.device && back_rows.device() == options.device;
        o.view_shares_reloaded = same_storage(back_rows, back);
        o.values_reloaded = at::equal(back.cpu(), values) &&
                            at::equal(back_rows.cpu(), values.narrow(0, 8, 16)) &&
                            at::equal(real::TorchBackend::unwrap(before).cpu(), values * 3);

        // A tensor let go while offloaded is not brought back.
        const int64_t again = be.offload_mark();
        Tensor brief = be.wrap(values, DType::fp32);
        const int64_t second = be.offload_start(again, {}, {});
        be.offload_finish(second);
        const int64_t without = held.current();
        brief = Tensor();
        be.reload_start(second);
        be.reload_finish(second);
        o.dropped_reload = held.current() - without;
        return o;
      },
      options);
  const Observed& o = observed.at(0);
  // whole (with its view) and `before` left the device; kept and its view did not.
  CHECK(o.offloaded == o.at_start - 2 * o.storage_bytes);
  CHECK(o.kept_in_place);
  CHECK(o.old_view_in_place);
  CHECK(o.whole_on_host);
  CHECK(o.view_shares_offloaded);
  CHECK(o.values_offloaded);
  CHECK(o.reloaded == o.at_start);
  CHECK(o.on_device_again);
  CHECK(o.view_shares_reloaded);
  CHECK(o.values_reloaded);
  CHECK(o.dropped_reload == 0);
}

}  // namespace
}  // namespace paradyse::testing
