// The command line against seeded mutations of the bundled input files: every run exits 0 or 2 (never
// 3, never a signal), and a refused run leaves no output folder. The readers' own half, with thousands
// of cases in one process, is tests/evaluation/parser_fuzz_test.
#include <catch2/catch.hpp>

#include <filesystem>
#include <random>

#include "tests/experiments/run_paradyse.hpp"
#include "tests/fuzz_mutations.hpp"
#include "tests/temp_dir.hpp"

using namespace paradyse::testing;
namespace fs = std::filesystem;

TEST_CASE("parser fuzz: paradyse exits 0 or 2 on mutated inputs and leaves nothing on an error",
          "[experiments]") {
  TempDir dir;
  const std::string tiny_trace = dir.write("tiny.txt", "100\n2000\n");
  struct Command {
    std::string original;  // the file mutated, or "" for the sweep spec below
    std::string extension;
    std::string arguments;  // {} is the mutated file; output goes to dir/out
    int cases;
  };
  const std::string sweep_spec = "[base]\nmodel = \"gpt-8l\"\ntrace = \"" + tiny_trace +
                                 "\"\nengine = \"analytic\"\nmode = \"plan\"\nplan_lengths = [4096]\n"
                                 "[axes]\ndegree = [4, 8]\n";
  const std::vector<Command> commands = {
      {"tests/traces/data/crafted.txt", ".txt", "trace stats {}", 40},
      {"tests/traces/data/crafted.txt", ".txt",
       "compare --engine analytic --policy static:megatron_ts,paradyse --limit 4 --trace {} --out OUT", 25},
      {"strategies/models/gpt-8l.json", ".json", "estimate --seq 4K --json --model {}", 40},
      {"hw_models/presets/dgx-a100.json", ".json", "estimate --seq 4K --json --cluster {}", 40},
      {"", ".toml", "sweep --jobs 1 --spec {} --out OUT", 15},
  };
  std::mt19937_64 random(20261123);
  for (const Command& command : commands) {
    const std::string original = command.original.empty() ? sweep_spec : read_text(command.original);
    REQUIRE(!original.empty());
    int refused = 0;
    for (int i = 0; i < command.cases; ++i) {
      const std::string text = mutate(original, random);
      const std::string input = dir.write("case" + command.extension, text);
      const std::string out = dir.file("out");
      fs::remove_all(out);
      std::string arguments = command.arguments;
      arguments.replace(arguments.find("{}"), 2, "'" + input + "'");
      if (const std::size_t at = arguments.find("OUT"); at != std::string::npos)
        arguments.replace(at, 3, out);
      const RunResult r = run_paradyse(arguments);
      INFO(arguments << "\n--- input ---\n" << text << "\n--- stderr ---\n" << r.err);
      REQUIRE((r.exit_code == 0 || r.exit_code == 2));
      if (r.exit_code == 0) continue;
      ++refused;
      CHECK_THAT(r.err, Catch::StartsWith("paradyse: error: "));
      CHECK_FALSE(fs::exists(out));
      CHECK_FALSE(fs::exists(out + ".partial"));
    }
    INFO(command.arguments);
    CHECK(refused > 0);
  }
}
