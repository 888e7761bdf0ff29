#include "real_backend/activation_offload.hpp"

#include <algorithm>
#include <unordered_map>

#include "common/errors.hpp"

namespace paradyse::real {

namespace {

// A storage as one byte tensor over all of it.
at::Tensor storage_bytes(const at::Tensor& t) {
  const auto bytes = static_cast<int64_t>(t.storage().nbytes());
  return at::empty({0}, t.options().dtype(at::kByte)).set_(t.storage(), 0, {bytes}, {1});
}

// A handle's view, as it was, over a copy of its storage.
at::Tensor view_over(const at::Tensor& bytes, at::ScalarType type, const std::vector<int64_t>& sizes,
                     const std::vector<int64_t>& strides, int64_t offset) {
  return at::empty({0}, bytes.options().dtype(type)).set_(bytes.storage(), offset, sizes, strides);
}

}  // namespace

ActivationOffload::ActivationOffload(const at::Device& device, std::shared_ptr<HeldBytes> held)
    : device_(device), held_(std::move(held)), copies_(device) {}
ActivationOffload::~ActivationOffload() = default;

void ActivationOffload::made(const std::shared_ptr<TorchTensor>& handle) {
  if (open_marks_ > 0) made_.push_back({handle, held_->references(handle->storage()) == 1});
}

int64_t ActivationOffload::mark() {
  if (open_marks_++ == 0) {
    made_before_ += static_cast<int64_t>(made_.size());
    made_.clear();
  }
  return made_before_ + static_cast<int64_t>(made_.size());
}

int64_t ActivationOffload::start(int64_t mark, const std::vector<std::shared_ptr<TorchTensor>>& also,
                                 const std::vector<std::shared_ptr<TorchTensor>>& keep) {
  PARADYSE_CHECK(
      open_marks_ > 0 && mark >= made_before_ && mark <= made_before_ + static_cast<int64_t>(made_.size()),
      "offload_start without its offload_mark");
  std::vector<const void*> kept, moving;
  for (const auto& k : keep)
    if (k) kept.push_back(k->storage());
  // The storages that move: those new since the mark, and `also`'s.
  for (auto it = made_.begin() + (mark - made_before_); it != made_.end(); ++it)
    if (const auto h = it->handle.lock(); h && it->new_storage) moving.push_back(h->storage());
  for (const auto& h : also)
    if (h) moving.push_back(h->storage());
  Set moved;
  std::unordered_map<const void*, std::size_t> index;  // by storage
  std::vector<const TorchTensor*> seen;
  const auto add = [&](const std::shared_ptr<TorchTensor>& h) {
    if (!h || h->bytes() == 0 || std::find(seen.begin(), seen.end(), h.get()) != seen.end()) return;
    seen.push_back(h.get());
    const void* storage = h->storage();
    if (std::find(kept.begin(), kept.end(), storage) != kept.end() ||
        std::find(moving.begin(), moving.end(), storage) == moving.end())
      return;
    if (h->offloaded()) return;  // in host memory already, an earlier set's
    auto [it, inserted] = index.try_emplace(storage, moved.size());
    if (inserted) {
      Storage& s = moved.emplace_back();
      s.bytes = h->bytes();
      s.device = storage_bytes(h->t);
    }
    moved[it->second].handles.push_back(
        {h, h->t.scalar_type(), h->t.sizes().vec(), h->t.strides().vec(), h->t.storage_offset()});
  };
  for (auto it = made_.begin() + (mark - made_before_); it != made_.end(); ++it) add(it->handle.lock());
  for (const auto& h : also) add(h);
  if (--open_marks_ == 0) {
    made_before_ += static_cast<int64_t>(made_.size());
    made_.clear();
  }
  for (Storage& s : moved) {
    s.host = copies_.host_bytes(s.bytes);
    copies_.copy(s.host, s.device);
    host_bytes_ += s.bytes;
  }
  sets_.push_back(std::move(moved));
  ++outstanding_;
  return static_cast<int64_t>(sets_.size()) - 1;
}

ActivationOffload::Set& ActivationOffload::set(int64_t offloaded) {
  PARADYSE_CHECK(offloaded >= 0 && offloaded < static_cast<int64_t>(sets_.size()),
                 "an offload handle never given");
  return sets_[static_cast<std::size_t>(offloaded)];
}

void ActivationOffload::finish(int64_t offloaded) {
  copies_.wait();
  for (Storage& s : set(offloaded)) {
    for (const Handle& h : s.handles)
      if (const auto handle = h.handle.lock())
        handle->move_to(view_over(s.host, h.type, h.sizes, h.strides, h.offset), false);
    s.device = at::Tensor();
  }
}

void ActivationOffload::reload_start(int64_t offloaded) {
  for (Storage& s : set(offloaded)) {
    const bool held =
        std::any_of(s.handles.begin(), s.handles.end(), [](const Handle& h) { return !h.handle.expired(); });
    if (!held) continue;
    s.device = at::empty({s.bytes}, at::TensorOptions().dtype(at::kByte).device(device_));
    held_->hold(s.device.storage().unsafeGetStorageImpl(), s.bytes);
    copies_.copy(s.device, s.host);
  }
}

void ActivationOffload::reload_finish(int64_t offloaded) {
  copies_.wait();
  for (Storage& s : set(offloaded)) {
    if (s.device.defined()) {
      for (const Handle& h : s.handles)
        if (const auto handle = h.handle.lock())
          handle->move_to(view_over(s.device, h.type, h.sizes, h.strides, h.offset), true);
      held_->release(s.device.storage().unsafeGetStorageImpl(), s.bytes);
    }
    host_bytes_ -= s.bytes;
  }
  set(offloaded).clear();
  if (--outstanding_ == 0) sets_.clear();  // every set given back: their handles start again at 0
}

}  // namespace paradyse::real
