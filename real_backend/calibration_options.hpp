// What `paradyse calibrate` measures and how (calibration.hpp): free of LibTorch's headers, so that the
// command line can fill it in.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "real_backend/precision.hpp"

namespace paradyse::real {

struct CalibrationOptions {
  Precision precision = Precision::mixed;  // the element type GEMMs and attention are timed in
  int repeats = 5;                         // timed repetitions per point; the median is kept
  int64_t max_attention_tokens = 2048;     // attention is timed at 128, 256, ... up to this length
  // Collectives are timed at 1 KiB, 4 KiB, ... up to this size (at least 1 KiB); larger ones are
  // priced at the last size's bandwidth.
  int64_t max_collective_bytes = int64_t{64} << 20;
  std::string description;  // the JSON's "description"; empty: one naming the host
  // Each figure is the median of `passes` samples taken at the machine's own speed. The speed
  // reference (machine_speed.hpp) is timed before, between and after the groups of figures of each
  // pass; a group's sample is at speed when the references around it are within steady_spread of the
  // machine's own speed (passes_at_speed). Passes go on, up to 3 × passes, until
  // every group has `passes` samples at speed; `note` says when the speed moved.
  int passes = 3;
  double steady_spread = 0.10;
  bool any_speed = false;  // every pass counts, whatever its speed: exactly `passes` passes
  std::function<void(const std::string&)> note;  // rank 0: how much the machine's speed moved
};

}  // namespace paradyse::real
