// The keys of a JSON object, for tests that pin the keys an output has always had.
#pragma once

#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace paradyse::testing {

inline std::set<std::string> json_keys(const nlohmann::json& object) {
  std::set<std::string> names;
  for (const auto& item : object.items()) names.insert(item.key());
  return names;
}

}  // namespace paradyse::testing
