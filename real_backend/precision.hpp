// The element types a real run computes in: fp32 throughout, or mixed (bf16 weights and activations,
// fp32 master weights and optimizer state).
#pragma once

namespace paradyse::real {

enum class Precision { fp32, mixed };

}  // namespace paradyse::real
