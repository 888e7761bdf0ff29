// Seeded mutations of a valid input file, the damage real files get: a byte changed, a piece cut or
// doubled, a number swapped for an extreme one, a stray byte-order mark, a truncation. The parser
// fuzz tests feed them to every reader, which must accept or refuse them by name, never crash.
#pragma once

#include <random>
#include <string>
#include <vector>

namespace paradyse::testing {

inline std::string mutate(std::string text, std::mt19937_64& random) {
  static const std::vector<std::string> tokens = {"0",
                                                  "-1",
                                                  "9223372036854775807",
                                                  "18446744073709551616",
                                                  "1e999",
                                                  "-1e999",
                                                  "1e-999",
                                                  "1073741825",
                                                  "4294967296",
                                                  "2.5",
                                                  "NaN",
                                                  "null",
                                                  "true",
                                                  "\"\"",
                                                  "\"x\"",
                                                  "[]",
                                                  "{}",
                                                  ",",
                                                  ":",
                                                  "\"",
                                                  "{",
                                                  "}",
                                                  "[",
                                                  "]",
                                                  "\n",
                                                  "\r\n",
                                                  "#",
                                                  "=",
                                                  "\xEF\xBB\xBF",
                                                  std::string(1, '\0'),
                                                  "\xFF",
                                                  "K",
                                                  "16K",
                                                  " ",
                                                  "gpt2",
                                                  "\"model_type\": \"gptj\", "};
  const auto below = [&](std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(random() % n); };
  const int edits = 1 + static_cast<int>(random() % 3);
  for (int e = 0; e < edits; ++e) {
    const std::size_t at = below(text.size() + 1);
    switch (random() % 6) {
      case 0:  // one byte changed
        if (at < text.size()) text[at] = static_cast<char>(random() % 256);
        break;
      case 1:  // a piece cut
        text.erase(at, 1 + below(16));
        break;
      case 2:  // a token inserted
        text.insert(at, tokens[below(tokens.size())]);
        break;
      case 3: {  // the number at or after `at` replaced by a token
        const std::size_t first = text.find_first_of("0123456789", at);
        if (first == std::string::npos) break;
        const std::size_t last = text.find_first_not_of("0123456789.e+", first);
        text.replace(first, (last == std::string::npos ? text.size() : last) - first,
                     tokens[below(tokens.size())]);
        break;
      }
      case 4: {  // the line at `at` doubled
        const std::size_t begin = text.rfind('\n', at == 0 ? 0 : at - 1);
        const std::size_t start = begin == std::string::npos ? 0 : begin + 1;
        const std::size_t end = text.find('\n', start);
        const std::string line =
            text.substr(start, end == std::string::npos ? std::string::npos : end - start + 1);
        text.insert(start, line);
        break;
      }
      default:  // truncated
        text.resize(at);
        break;
    }
  }
  return text;
}

}  // namespace paradyse::testing
