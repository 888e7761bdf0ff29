// The normalisation a Transformer layer runs, an argument of the backend's norm calls.
#pragma once

namespace paradyse {

enum class NormKind { layer_norm, rms_norm };

}  // namespace paradyse
