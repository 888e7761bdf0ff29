// libFuzzer target over every reader of a user's input file. The first byte of an input picks the
// reader (a letter of kReaders below; any other byte picks one by its value), the rest is the file's
// text. A reader may accept the text or refuse it with an InputError: either is correct. Anything else
// escaping a reader (InternalError, an exception of nlohmann, toml++ or the standard library), a crash, a
// sanitizer report, a timeout or running out of memory is a finding.
//
// The readers are called by path, as the program calls them, so that the bounded file reading and the
// choice of format by extension are fuzzed too: each input is written to a file of the reader's
// extension in a directory of this process's own.
#include <cxxabi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <typeinfo>

#include "common/errors.hpp"
#include "common/json_input.hpp"
#include "evaluation/published_runs.hpp"
#include "evaluation/sweep_spec.hpp"
#include "hw_models/cluster.hpp"
#include "hw_models/network.hpp"
#include "steps/learned_model.hpp"
#include "steps/profile.hpp"
#include "strategies/model.hpp"
#include "strategies/strategy.hpp"
#include "traces/trace.hpp"

namespace {

using namespace paradyse;

// A network block is read for nodes of this many GPUs (every bundled cluster's).
constexpr int kGpusPerNode = 8;

void read_network_block(const std::string& path) {
  const json_input::Json json = json_input::load_file(path);
  const std::shared_ptr<const hw::Network> network =
      hw::read_network(json_input::Object(json, path), kGpusPerNode);
  // Routes are computed on first use: ask for one across the whole graph.
  (void)network->route(0, network->num_gpus() - 1);
}

void read_learned_model(const std::string& path) {
  const steps::LearnedModel model = steps::LearnedModel::load(path);
  // A loaded model's forests and polynomials are used as they were read: predict inside, at the ends
  // of and beyond the profiled lengths, where the forest and then the polynomial answer.
  for (const Strategy* strategy : all_strategies())
    for (const std::string_view recompute : {"none", "selective", "full"}) {
      if (!model.has(strategy->name(), recompute)) continue;
      const auto [low, high] = model.profiled_range(strategy->name(), recompute);
      for (const int64_t seq : {low, (low + high) / 2, high, 2 * high})
        (void)model.predict(strategy->name(), recompute, seq);
    }
}

struct Reader {
  char tag;               // the first byte of an input for this reader
  std::string_view name;  // for reports
  std::string_view extension;
  void (*read)(const std::string& path);
};

constexpr Reader kReaders[] = {
    {'m', "model config", ".json", [](const std::string& p) { (void)load_model(p); }},
    {'c', "cluster", ".json", [](const std::string& p) { (void)hw::load_cluster(p); }},
    {'k', "framework", ".json", [](const std::string& p) { (void)hw::load_framework(p); }},
    {'n', "network graph", ".json", read_network_block},
    {'t', "plain trace", ".txt", [](const std::string& p) { (void)traces::load_trace(p); }},
    {'v', "CSV trace", ".csv", [](const std::string& p) { (void)traces::load_trace(p); }},
    {'j', "JSONL trace", ".jsonl", [](const std::string& p) { (void)traces::load_trace(p); }},
    {'b', "Protobuf trace", ".pb", [](const std::string& p) { (void)traces::load_trace(p); }},
    {'s', "sweep spec (TOML)", ".toml", [](const std::string& p) { (void)evaluation::load_sweep_spec(p); }},
    {'w', "sweep spec (JSON)", ".json", [](const std::string& p) { (void)evaluation::load_sweep_spec(p); }},
    {'u', "published table", ".json", [](const std::string& p) { (void)evaluation::load_published_runs(p); }},
    {'f', "profile", ".csv", [](const std::string& p) { (void)steps::read_profile(p); }},
    {'l', "learned cost model", ".json", read_learned_model},
};

const Reader& reader_for(uint8_t first) {
  for (const Reader& reader : kReaders)
    if (reader.tag == static_cast<char>(first)) return reader;
  return kReaders[first % std::size(kReaders)];
}

[[noreturn]] void system_error(const char* what) {
  std::fprintf(stderr, "parser_fuzzer: %s: %s\n", what, std::strerror(errno));
  std::abort();
}

// The input as a file of `extension`, in a folder of this process's own (libFuzzer's -jobs and -fork
// workers must not overwrite each other's inputs). File and folder exist only while the input is read:
// libFuzzer ends with _Exit, which runs no clean-up at exit.
class InputFile {
 public:
  InputFile(std::string_view extension, const uint8_t* data, size_t size) {
    if (mkdir(directory().c_str(), 0700) != 0) system_error("creating the input folder");
    path_ = directory() + "/input" + std::string(extension);
    std::ofstream out(path_, std::ios::binary);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) system_error("writing the input file");
  }
  ~InputFile() {
    std::remove(path_.c_str());
    rmdir(directory().c_str());
  }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  // A name no other process has: mkdtemp's, made once and freed for mkdir to take again per input.
  static const std::string& directory() {
    static const std::string name = [] {
      const char* tmp = std::getenv("TMPDIR");
      std::string pattern =
          std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/paradyse-fuzz-XXXXXX";
      if (mkdtemp(pattern.data()) == nullptr) system_error("mkdtemp");
      rmdir(pattern.c_str());
      return pattern;
    }();
    return name;
  }

  std::string path_;
};

// PARADYSE_FUZZ_SHOW_REFUSALS=1: say which reader refused each input and why (to check that a seed is
// accepted, or that a hostile case is refused where it should be).
bool show_refusals() {
  static const bool show = std::getenv("PARADYSE_FUZZ_SHOW_REFUSALS") != nullptr;
  return show;
}

// "nlohmann::json_abi_v3_11_2::detail::type_error" rather than its mangled name.
std::string type_name(const std::type_info& type) {
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> name(
      abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), &std::free);
  return std::string("an exception of type ") + (status == 0 ? name.get() : type.name());
}

[[noreturn]] void finding(const Reader& reader, const char* type, const char* what) {
  // what() may hold the input itself: the first 2000 bytes say enough.
  std::fprintf(stderr, "\nparser_fuzzer: the %.*s reader let %s escape: %.2000s\n",
               static_cast<int>(reader.name.size()), reader.name.data(), type, what);
  std::abort();  // libFuzzer saves the input as a crash
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Reader& reader = reader_for(data[0]);
  const InputFile input(reader.extension, data + 1, size - 1);
  try {
    reader.read(input.path());
  } catch (const InputError& e) {
    // Refused by name: what a bad file should get.
    if (show_refusals())
      std::fprintf(stderr, "parser_fuzzer: %.*s refused: %.2000s\n", static_cast<int>(reader.name.size()),
                   reader.name.data(), e.what());
    return 0;
  } catch (const InternalError& e) {
    finding(reader, "an InternalError", e.what());
  } catch (const std::exception& e) {
    finding(reader, type_name(typeid(e)).c_str(), e.what());
  } catch (...) {
    finding(reader, "an exception of unknown type", "");
  }
  if (show_refusals())
    std::fprintf(stderr, "parser_fuzzer: %.*s accepted\n", static_cast<int>(reader.name.size()),
                 reader.name.data());
  return 0;
}
