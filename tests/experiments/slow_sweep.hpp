// A sweep with enough work per point (a sample of the bundled trace, every policy) to be stopped in
// the middle, for the tests of what happens to a sweep that is killed.
#pragma once

namespace paradyse::testing {

inline constexpr const char* kSlowSweepSpec = R"([base]
trace = "github-code-like"
engine = "analytic"
order = "sorted"
sample = 0.1

[axes]
cluster = ["dgx-a100", "dgx-h100"]
nvlink_scale = [1.0, 0.5]
)";
inline constexpr int kSlowSweepPoints = 4;  // the axes' product

}  // namespace paradyse::testing
