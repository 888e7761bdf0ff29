// The rules every hardware and framework file shares: each figure of a block says where it came from
// in the block's `source` object, and strings that name something are not empty.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "common/json_input.hpp"

namespace paradyse::hw {

// ", got <the value as written>", for an error message about `key`.
std::string got(const json_input::Object& block, std::string_view key);
// The block's `source` object must name a source, not empty, for each of these figures and for each
// of `optional` that the block has; it may name no other.
void require_sources(const json_input::Object& block, std::initializer_list<std::string_view> figures,
                     std::initializer_list<std::string_view> optional = {});
// `sources` (a block's `source` object) names a non-empty source for `figure`.
void require_source(const json_input::Object& sources, std::string_view figure);
std::string non_empty_string(const json_input::Object& block, std::string_view key);

}  // namespace paradyse::hw
