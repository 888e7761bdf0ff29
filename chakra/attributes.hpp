// The attributes of Chakra nodes and metadata that paradyse writes and reads, and typed access to
// them. Private to chakra/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "et_def.pb.h"
#include "program/op_table.hpp"

namespace paradyse::chakra {

// The schema version paradyse's files declare: Chakra's converters' at the time of writing.
inline constexpr std::string_view kSchemaVersion = "0.0.4";

// Chakra's attributes (ASTRA-sim reads them by these names).
namespace attr {
inline constexpr std::string_view is_cpu_op = "is_cpu_op";
inline constexpr std::string_view num_ops = "num_ops";          // a compute node's FLOPs
inline constexpr std::string_view tensor_size = "tensor_size";  // a compute node's bytes read and written
inline constexpr std::string_view comm_type = "comm_type";      // CollectiveCommType
inline constexpr std::string_view comm_size = "comm_size";      // bytes each rank puts in
inline constexpr std::string_view pg_name = "pg_name";          // the communicator group's id
inline constexpr std::string_view comm_src = "comm_src";
inline constexpr std::string_view comm_dst = "comm_dst";
inline constexpr std::string_view comm_tag = "comm_tag";

// paradyse's own, for what its simulator needs beyond them; other tools pass them over.
inline constexpr std::string_view duration_s = "paradyse.duration_s";  // duration_micros unrounded
inline constexpr std::string_view kind = "paradyse.kind";              // OpKind
inline constexpr std::string_view kernel = "paradyse.kernel";          // Kernel: the backend call
inline constexpr std::string_view dims = "paradyse.dims";              // Op::dims
inline constexpr std::string_view phase = "paradyse.phase";
inline constexpr std::string_view layer = "paradyse.layer";
inline constexpr std::string_view host_waits = "paradyse.host_waits";
inline constexpr std::string_view partially_masked = "paradyse.partially_masked";
inline constexpr std::string_view drops_out = "paradyse.drops_out";
inline constexpr std::string_view root = "paradyse.root";  // broadcast and reduce, within the group
// Bytes allocated (> 0) and freed (< 0), in order, just before the node is issued.
inline constexpr std::string_view memory_events = "paradyse.memory_events";
// The same in host memory: offloaded activations.
inline constexpr std::string_view host_memory_events = "paradyse.host_memory_events";

// The metadata's.
inline constexpr std::string_view rank = "paradyse.rank";
inline constexpr std::string_view ranks = "paradyse.ranks";
inline constexpr std::string_view static_bytes = "paradyse.static_bytes";  // held from the start
inline constexpr std::string_view description = "paradyse.description";
inline constexpr std::string_view memory_events_at_end = "paradyse.memory_events_at_end";
inline constexpr std::string_view host_memory_events_at_end = "paradyse.host_memory_events_at_end";
}  // namespace attr

using Attributes = google::protobuf::RepeatedPtrField<pb::AttributeProto>;

void add_int(Attributes& attrs, std::string_view name, int64_t value);
void add_double(Attributes& attrs, std::string_view name, double value);
void add_bool(Attributes& attrs, std::string_view name, bool value);
void add_string(Attributes& attrs, std::string_view name, std::string_view value);
void add_ints(Attributes& attrs, std::string_view name, const std::vector<int64_t>& values);

// Reads the attributes of one message. A value of a type the name does not take is an InputError
// naming the file and "<where>.<name>" (where: "node[12]", "metadata"). Integers of any width and
// signedness are read alike, as ASTRA-sim reads them.
class AttributeReader {
 public:
  AttributeReader(const Attributes& attrs, const std::string& source, std::string where);

  bool has(std::string_view name) const { return find(name) != nullptr; }
  std::optional<int64_t> integer(std::string_view name) const;
  std::optional<double> number(std::string_view name) const;  // finite; integers too
  std::optional<bool> flag(std::string_view name) const;
  std::optional<std::string> text(std::string_view name) const;
  std::vector<int64_t> integers(std::string_view name) const;  // a list; empty when absent

  [[noreturn]] void fail(std::string_view name, const std::string& expected_but_got) const;

 private:
  const pb::AttributeProto* find(std::string_view name) const;
  const Attributes& attrs_;
  const std::string& source_;
  std::string where_;
};

// The collectives both sides name, each once: paradyse's kind and Chakra's CollectiveCommType.
inline constexpr std::pair<OpKind, pb::CollectiveCommType> kCollectives[] = {
    {OpKind::all_reduce, pb::ALL_REDUCE}, {OpKind::reduce, pb::REDUCE},
    {OpKind::all_gather, pb::ALL_GATHER}, {OpKind::broadcast, pb::BROADCAST},
    {OpKind::all_to_all, pb::ALL_TO_ALL}, {OpKind::reduce_scatter, pb::REDUCE_SCATTER}};

}  // namespace paradyse::chakra
