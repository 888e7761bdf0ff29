// Draws from std::mt19937_64 that give the same values on every platform: they use only the engine's
// raw output, whose sequence the standard fixes, not std::*_distribution, whose algorithms it leaves
// open.
#pragma once

#include <cstdint>
#include <random>

namespace paradyse::traces {

// Uniform in [0, 1) from the top 53 bits of one draw.
inline double uniform_unit(std::mt19937_64& engine) {
  return static_cast<double>(engine() >> 11) * 0x1.0p-53;
}

// Uniform in [0, bound): draws below 2^64 mod bound are rejected, so that every value is equally likely.
inline uint64_t uniform_below(std::mt19937_64& engine, uint64_t bound) {
  const uint64_t rejected = (0 - bound) % bound;
  uint64_t draw = engine();
  while (draw < rejected) draw = engine();
  return draw % bound;
}

}  // namespace paradyse::traces
