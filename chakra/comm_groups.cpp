#include "chakra/comm_groups.hpp"

#include <charconv>
#include <limits>

#include "common/errors.hpp"
#include "common/json_input.hpp"

namespace paradyse::chakra {
namespace {

bool same(const RankSet& a, const RankSet& b) {
  // One rank is the same group whatever its stride.
  return a.first == b.first && a.size == b.size && (a.size == 1 || a.stride == b.stride);
}

// The group id a JSON key names: a whole number written plainly (ASTRA-sim reads it with stoi); 0
// for "0", which ASTRA-sim takes for every rank whatever the file lists.
int parse_id(const std::string& key, const std::string& path) {
  if (key == "0") return 0;
  int id = 0;
  const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), id);
  if (error != std::errc() || end != key.data() + key.size() || id < 1 || key.front() == '0')
    throw InputError(path, 0, key, "expected a group id, a whole number, got '" + key + "'");
  return id;
}

}  // namespace

int CommGroups::id_of(const RankSet& ranks) const {
  for (const auto& [id, group] : by_id)
    if (same(group, ranks)) return id;
  return 0;
}

CommGroups comm_groups_of(const std::vector<Program>& programs) {
  CommGroups groups;
  int next = 1;
  for (const Program& program : programs)
    for (const Op& op : program.ops)
      if (is_communication(op.kind) && groups.id_of(op.ranks()) == 0) groups.by_id[next++] = op.ranks();
  return groups;
}

std::string comm_groups_json(const CommGroups& groups) {
  std::string text = "{";
  for (auto it = groups.by_id.begin(); it != groups.by_id.end(); ++it) {
    text += it == groups.by_id.begin() ? "\n" : ",\n";
    text += "  \"" + std::to_string(it->first) + "\": [";
    for (int i = 0; i < it->second.size; ++i)
      text += (i > 0 ? ", " : "") + std::to_string(it->second.rank(i));
    text += "]";
  }
  return text + "\n}\n";
}

CommGroups read_comm_groups(const std::string& path, int ranks) {
  const json_input::Json json = json_input::load_file(path);
  if (!json.is_object())
    throw InputError(path, 0, "", "expected a JSON object of group ids to lists of ranks");
  CommGroups groups;
  for (const auto& [key, value] : json.items()) {
    const int id = parse_id(key, path);
    if (id == 0) continue;  // every rank, as no pg_name
    if (!value.is_array() || value.empty())
      throw InputError(path, 0, key, "expected a non-empty list of ranks");
    std::vector<int> members;
    for (const json_input::Json& rank : value) {
      if (!rank.is_number_integer() || rank.get<int64_t>() < 0 || rank.get<int64_t>() >= ranks)
        throw InputError(path, 0, key,
                         "expected ranks of the job's " + std::to_string(ranks) + " (0 to " +
                             std::to_string(ranks - 1) + "), got " + rank.dump());
      members.push_back(rank.get<int>());
    }
    RankSet group{members.front(), static_cast<int>(members.size()), 1};
    if (members.size() > 1) group.stride = members[1] - members[0];
    for (std::size_t i = 0; i < members.size(); ++i)
      if (group.stride < 1 || members[i] != group.rank(static_cast<int>(i)))
        throw InputError(path, 0, key,
                         "expected distinct ranks in increasing order, evenly spaced (first + stride·i: the "
                         "groups paradyse simulates), got " +
                             value.dump());
    groups.by_id[id] = group;
  }
  return groups;
}

}  // namespace paradyse::chakra
