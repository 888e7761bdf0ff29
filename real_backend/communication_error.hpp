// The error of a real run whose communication failed: a peer died, a transport broke or the group
// timed out. Kept apart from communicator.hpp so that code without LibTorch can catch it.
#pragma once

#include <stdexcept>

namespace paradyse::real {

// The exit status of a run whose ranks lost each other: a rank's communication failed, or the
// launcher saw a rank killed.
inline constexpr int kLostRankStatus = 4;

class CommunicationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace paradyse::real
