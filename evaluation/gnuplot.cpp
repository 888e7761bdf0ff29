#include "evaluation/gnuplot.hpp"

#include <fcntl.h>
#include <fmt/core.h>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/errors.hpp"

extern char** environ;

namespace paradyse::evaluation::gnuplot {

namespace fs = std::filesystem;

std::string quoted(std::string_view text) {
  std::string escaped = "\"";
  for (char c : text) {
    switch (c) {
      case '\\':
        escaped += "\\\\";
        break;
      case '"':
        escaped += "\\\"";
        break;
      case '\n':
        escaped += "\\n";
        break;
      case '\r':
        escaped += "\\r";
        break;
      // gnuplot runs `...` as a shell command anywhere outside single quotes; escapes are read after.
      case '`':
        escaped += "\\140";
        break;
      default:
        escaped += c;
    }
  }
  return escaped + "\"";
}

std::string script(const std::vector<Plot>& plots) {
  std::string text;
  for (std::size_t p = 0; p < plots.size(); ++p) {
    const Plot& plot = plots[p];
    std::string command;
    for (std::size_t s = 0; s < plot.series.size(); ++s) {
      const Series& series = plot.series[s];
      const std::string block = fmt::format("$series_{}_{}", p, s);
      // A datablock ends at a line "EOD"; rows of numbers never are one.
      text += block + " << EOD\n" + series.data + (series.data.ends_with('\n') ? "" : "\n") + "EOD\n";
      command += fmt::format("{}{} using {}{}{} title {}", s == 0 ? "plot " : ", ", block, series.columns,
                             series.style.empty() ? "" : " ", series.style, gnuplot::quoted(series.title));
    }
    // noenhanced: titles are names and paths, whose '_' and '^' must not become sub- and superscripts.
    text += fmt::format("set terminal pngcairo size {},{} noenhanced font 'sans,11'\n", plot.width_px,
                        plot.height_px);
    for (const std::string& setting : plot.settings) text += setting + "\n";
    text += "set output " + gnuplot::quoted(plot.png.string()) + "\n";
    const bool nothing = std::all_of(plot.series.begin(), plot.series.end(),
                                     [](const Series& series) { return series.data.empty(); });
    if (!nothing) {
      text += command + "\n";
      continue;
    }
    // Gnuplot cannot autoscale an axis with no point on it ("x range is invalid"): an empty frame
    // that says so, its fixed ranges undone for the plots after it.
    text += "set xrange [1:2]\nset yrange [1:2]\n";
    text += "set label 1 \"no point to draw\" at graph 0.5, 0.5 center\n";
    text += "plot NaN notitle\nunset label 1\nset autoscale xy\n";
  }
  return text + "unset output\n";
}

namespace {

// The last lines of gnuplot's log, for the error message.
std::string log_end(const fs::path& log) {
  constexpr std::size_t shown_chars = 1500;
  std::ifstream in(log);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  return text.size() <= shown_chars ? text : "..." + text.substr(text.size() - shown_chars);
}

// Runs gnuplot on `script_file`, its output and messages going to `log`: 0 with its wait status in
// `status`, or the errno that kept it from starting. Spawned directly rather than through a shell, so
// that no path needs shell quoting.
int run_gnuplot(const fs::path& script_file, const fs::path& log, int& status) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  const std::string program = "gnuplot", script_path = script_file.string();
  char* argv[] = {const_cast<char*>(program.c_str()), const_cast<char*>(script_path.c_str()), nullptr};
  pid_t pid = 0;
  const int error = posix_spawnp(&pid, program.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) return error;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return errno;
  return 0;
}

}  // namespace

void run(const std::string& script, const fs::path& work_dir) {
  fs::create_directories(work_dir);
  const fs::path script_file = work_dir / "plots.gp", log = work_dir / "gnuplot.log";
  {
    std::ofstream out(script_file);
    out << script;
    if (!out.flush()) throw InputError(script_file.string(), 0, "", "cannot write the gnuplot script");
  }
  int status = 0;
  const int error = run_gnuplot(script_file, log, status);
  if (error == ENOENT)
    throw InputError(
        "gnuplot", 0, "",
        "expected gnuplot on the PATH to draw the plots, got none (apt-get install gnuplot-nox)");
  if (error != 0)
    throw InputError("gnuplot", 0, "", std::string("could not be started: ") + std::strerror(error));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw InputError(log.string(), 0, "",
                     "gnuplot failed on " + script_file.string() + "; the end of its log:\n" + log_end(log));
  fs::remove_all(work_dir);
}

void draw(const std::vector<Plot>& plots, const fs::path& work_dir) {
  run(script(plots), work_dir);
}

}  // namespace paradyse::evaluation::gnuplot
