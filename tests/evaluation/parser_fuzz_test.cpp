// Every reader of user files against thousands of seeded mutations of the bundled files: each either
// loads or throws an InputError (exit 2 at the command line), never another exception (exit 3) or a
// crash. The command-line half (exit codes, no output left behind) is tests/experiments/parser_fuzz_test.
#include <catch2/catch.hpp>

#include <functional>
#include <random>

#include "common/errors.hpp"
#include "evaluation/sweep_spec.hpp"
#include "hw_models/cluster.hpp"
#include "strategies/model.hpp"
#include "tests/experiments/run_paradyse.hpp"
#include "tests/fuzz_mutations.hpp"
#include "tests/temp_dir.hpp"
#include "traces/trace.hpp"

using namespace paradyse;

namespace {

struct Reader {
  std::string name;
  std::string original;   // a bundled file the mutations start from
  std::string extension;  // the mutated copy's, which picks the reader
  std::function<void(const std::string&)> read;
};

}  // namespace

TEST_CASE("parser fuzz: mutated files load or are InputErrors, never anything else", "[evaluation]") {
  testing::TempDir dir;
  const std::string tiny_trace = dir.write("tiny.txt", "100\n2000\n");
  const std::vector<Reader> readers = {
      {"plain trace", "tests/traces/data/crafted.txt", ".txt",
       [](const std::string& p) { traces::load_trace(p); }},
      {"CSV trace", "tests/traces/data/lengths.csv", ".csv",
       [](const std::string& p) { traces::load_trace(p, {.column = "tokens"}); }},
      {"JSONL trace", "tests/traces/data/lengths.jsonl", ".jsonl",
       [](const std::string& p) { traces::load_trace(p); }},
      {"model config", "strategies/models/llama3-8b.json", ".json",
       [](const std::string& p) { load_model(p); }},
      {"GPT-2 model config", "strategies/models/gpt-8l.json", ".json",
       [](const std::string& p) { load_model(p); }},
      {"cluster file", "hw_models/presets/dgx-a100.json", ".json",
       [](const std::string& p) { hw::load_cluster(p, 2); }},
      {"sweep spec", "", ".toml", [](const std::string& p) { evaluation::load_sweep_spec(p); }},
  };
  const std::string sweep_spec =
      "[base]\nmodel = \"gpt-8l\"\ntrace = \"" + tiny_trace +
      "\"\nengine = \"analytic\"\nmode = \"plan\"\nplan_lengths = [4096, \"16K\"]\n"
      "[axes]\ncluster = [\"dgx-a100\", \"dgx-h100\"]\ndegree = [4, 8]\n";
  std::mt19937_64 random(20261123);
  for (const Reader& reader : readers) {
    const std::string original = reader.original.empty() ? sweep_spec : testing::read_text(reader.original);
    REQUIRE(!original.empty());
    int refused = 0;
    for (int i = 0; i < 600; ++i) {
      const std::string text = testing::mutate(original, random);
      const std::string path = dir.write("case" + reader.extension, text);
      try {
        reader.read(path);
      } catch (const InputError&) {
        ++refused;
      } catch (const std::exception& e) {
        FAIL(reader.name << " case " << i << ": " << e.what() << "\n--- input ---\n" << text);
      }
    }
    INFO(reader.name);
    CHECK(refused > 0);  // the mutations do damage
  }
}
