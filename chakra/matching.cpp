#include "chakra/matching.hpp"

#include <map>
#include <tuple>

#include "common/errors.hpp"

namespace paradyse::chakra {
namespace {

std::string describe(const Op& op) {
  return "a " + std::string(to_string(op.kind)) + " of " +
         std::to_string(static_cast<int64_t>(op.size_bytes)) + " bytes";
}

}  // namespace

void check_collectives_match(const std::vector<RankTrace>& ranks, const std::vector<std::string>& sources) {
  // By group, the ops of each member over it, in program order.
  std::map<std::tuple<int, int, int>, std::map<int, std::vector<OpId>>> by_group;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const Program& program = ranks[r].program;
    for (OpId id = 0; id < program.ops.size(); ++id)
      if (const Op& op = program.ops[id]; is_communication(op.kind))
        by_group[{op.group_first, op.group_size, op.group_stride}][static_cast<int>(r)].push_back(id);
  }
  for (const auto& [key, members] : by_group) {
    const RankSet group{std::get<0>(key), std::get<1>(key), std::get<2>(key)};
    const auto op_of = [&](int member, std::size_t k) -> const Op& {
      return ranks[static_cast<std::size_t>(group.rank(member))]
          .program.ops[members.at(group.rank(member))[k]];
    };
    const auto fail = [&](int member, std::size_t k, const std::string& message) {
      const int r = group.rank(member);
      const RankTrace& trace = ranks[static_cast<std::size_t>(r)];
      throw InputError(sources[static_cast<std::size_t>(r)], 0,
                       node_field(trace.node_of_op[members.at(r)[k]]), message);
    };
    const int first = group.first;
    const auto count_of = [&](int r) {
      return members.count(r) == 0 ? std::size_t{0} : members.at(r).size();
    };
    const std::size_t count = count_of(first);
    for (int m = 1; m < group.size; ++m) {
      const std::size_t own = count_of(group.rank(m));
      if (own > count)
        fail(m, count,
             "expected each rank of " + to_string(group) + " to communicate over it as often as rank " +
                 std::to_string(first) + " does (" + std::to_string(count) + " times), got more");
      if (own < count)
        fail(0, own,
             "expected each rank of " + to_string(group) + " to communicate over it as often as rank " +
                 std::to_string(first) + " does, got rank " + std::to_string(group.rank(m)) +
                 " doing it only " + std::to_string(own) + " times, never reaching this one");
    }
    for (std::size_t k = 0; k < count; ++k) {
      const Op& reference = op_of(0, k);
      for (int m = 1; m < group.size; ++m)
        if (op_of(m, k).kind != reference.kind || op_of(m, k).size_bytes != reference.size_bytes)
          fail(m, k,
               "expected communication " + std::to_string(k + 1) + " over " + to_string(group) + " to be " +
                   describe(reference) + " as on rank " + std::to_string(first) + ", got " +
                   describe(op_of(m, k)));
      if (reference.kind != OpKind::send_recv) continue;
      for (int m = 0; m < group.size; ++m) {
        const Op& op = op_of(m, k);
        // Each side of an exchange names the other at the same place in its communication.
        const auto check_peer = [&](int peer, int16_t Op::*back, const char* does) {
          if (peer >= 0 && op_of(peer, k).*back != m)
            fail(m, k,
                 "expected rank " + std::to_string(group.rank(peer)) + " to " + does +
                     " this rank in the same exchange (the same place in its communication over " +
                     to_string(group) + "), got it not");
        };
        check_peer(op.send_to, &Op::recv_from, "receive from");
        check_peer(op.recv_from, &Op::send_to, "send to");
      }
    }
  }
}

}  // namespace paradyse::chakra
