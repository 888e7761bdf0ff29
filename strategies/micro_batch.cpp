#include "strategies/micro_batch.hpp"

#include <algorithm>
#include <functional>
#include <numeric>

#include "strategies/sequence_layout.hpp"

namespace paradyse {

int64_t MicroBatch::tokens() const {
  return std::accumulate(documents.begin(), documents.end(), int64_t{0});
}

std::vector<int64_t> MicroBatch::padded_documents(int degree, bool zigzag) const {
  return SequenceLayout::padded_lengths(documents, degree, zigzag);
}

int64_t MicroBatch::padded_tokens(int degree, bool zigzag) const {
  const std::vector<int64_t> padded = padded_documents(degree, zigzag);
  return std::accumulate(padded.begin(), padded.end(), int64_t{0});
}

std::vector<int64_t> MicroBatch::cost_key(int degree, bool zigzag) const {
  std::vector<int64_t> key = padded_documents(degree, zigzag);
  std::sort(key.begin(), key.end(), std::greater<>());
  return key;
}

std::string MicroBatch::describe() const {
  if (!packed()) return std::to_string(tokens());
  return std::to_string(documents.size()) + " documents, " + std::to_string(tokens()) + " tokens";
}

}  // namespace paradyse
