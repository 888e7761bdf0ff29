// The plots of the reports (compare, sweep), drawn by gnuplot as PNG files. A script is made of plots,
// each its settings and its series; the data of every series goes into the script itself (a gnuplot
// datablock), so the only paths in a script are the PNG files, and they, like every title, are
// quoted here, whatever characters the user's folder or trace names hold.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace paradyse::evaluation::gnuplot {

// `text` as a gnuplot string constant that reads back as exactly `text`: double-quoted, with
// backslash escapes for backslashes, double quotes, line breaks and backquotes. Not single-quoted:
// gnuplot 5.4 misreads a single-quoted string that starts with a doubled quote or holds two doubled
// quotes in a row, and cannot hold a line break in one.
std::string quoted(std::string_view text);

// One curve or set of bars: rows of whitespace-separated numbers, the `using` columns, the style.
struct Series {
  std::string data;     // "x y\n" rows; empty draws nothing
  std::string columns;  // "1:2", "3"
  std::string style;    // "with lines dt 2 lw 2"; "" for the style the settings chose
  std::string title;    // in the key
};

// One PNG: its settings (gnuplot commands, written as given, so strings in them go through quoted()),
// then one plot command of its series. Settings carry over to the plots after it, as in one session.
struct Plot {
  std::filesystem::path png;
  int width_px = 1100;
  int height_px = 700;
  std::vector<std::string> settings{};
  std::vector<Series> series{};
};

// The whole script that draws `plots` in order.
std::string script(const std::vector<Plot>& plots);

// Runs gnuplot on `script`, written to work_dir/plots.gp (work_dir is created) with gnuplot's
// messages in work_dir/gnuplot.log. work_dir is removed when gnuplot succeeds; otherwise it stays,
// and the InputError names the log and quotes its end. Missing gnuplot is an InputError that says
// how to install it.
void run(const std::string& script, const std::filesystem::path& work_dir);

// run(script(plots), work_dir).
void draw(const std::vector<Plot>& plots, const std::filesystem::path& work_dir);

}  // namespace paradyse::evaluation::gnuplot
