#include "hw_models/figure_sources.hpp"

namespace paradyse::hw {

using json_input::Object;

std::string got(const Object& block, std::string_view key) {
  return ", got " + block.json().at(std::string(key)).dump();
}

void require_source(const Object& sources, std::string_view figure) {
  if (!sources.has(figure)) sources.fail(figure, "missing required field");
  if (sources.string(figure).empty())
    sources.fail(figure, "expected where this figure came from (or 'assumed: why'), got \"\"");
}

void require_sources(const Object& block, std::initializer_list<std::string_view> figures,
                     std::initializer_list<std::string_view> optional) {
  const Object sources = block.object("source");
  sources.require_keys(figures, optional);
  for (std::string_view figure : figures) require_source(sources, figure);
  for (std::string_view figure : optional)
    if (block.has(figure)) require_source(sources, figure);
}

std::string non_empty_string(const Object& block, std::string_view key) {
  std::string text = block.string(key);
  if (text.empty()) block.fail(key, "expected a non-empty string, got \"\"");
  return text;
}

}  // namespace paradyse::hw
