// The paper's function library: its five strategies, and Megatron-LM's tensor parallelism without
// sequence parallelism, the baseline the paper's set is defined against.
#pragma once

#include "strategies/strategy.hpp"

namespace paradyse {

const Strategy& megatron_ts();  // Megatron-LM tensor + sequence parallel
const Strategy& megatron_tp();  // Megatron-LM tensor parallel, tokens replicated
const Strategy& megatron_cz();  // context parallel (ring attention, zig-zag when causal) + ZeRO-3
const Strategy& ulysses_z();    // DeepSpeed-Ulysses all-to-all to heads + ZeRO-3
const Strategy& colossal_z();   // Colossal-AI ring self-attention (materialised scores) + ZeRO-3
const Strategy& metp();         // memory-efficient tensor parallelism: weights move, activations stay

}  // namespace paradyse
