// The paper's function library: the five strategies, each defined in its own file.
#pragma once

#include "strategies/strategy.hpp"

namespace paradyse {

const Strategy& megatron_ts();  // Megatron-LM tensor + sequence parallel
const Strategy& megatron_cz();  // context parallel (ring attention, zig-zag when causal) + ZeRO-3
const Strategy& ulysses_z();    // DeepSpeed-Ulysses all-to-all to heads + ZeRO-3
const Strategy& colossal_z();   // Colossal-AI ring self-attention (materialised scores) + ZeRO-3
const Strategy& metp();         // memory-efficient tensor parallelism: weights move, activations stay

}  // namespace paradyse
