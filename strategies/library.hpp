// The paper's function library: its five strategies, Megatron-LM's tensor parallelism without
// sequence parallelism, the baseline the paper's set is defined against, and the 2-D strategies of
// long-context training beyond one node.
#pragma once

#include "strategies/strategy.hpp"

namespace paradyse {

const Strategy& megatron_ts();  // Megatron-LM tensor + sequence parallel
const Strategy& megatron_tp();  // Megatron-LM tensor parallel, tokens replicated
const Strategy& megatron_cz();  // context parallel (ring attention, zig-zag when causal) + ZeRO-3
const Strategy& ulysses_z();    // DeepSpeed-Ulysses all-to-all to heads + ZeRO-3
const Strategy& colossal_z();   // Colossal-AI ring self-attention (materialised scores) + ZeRO-3
const Strategy& metp();         // memory-efficient tensor parallelism: weights move, activations stay
// Ulysses inside groups of u ranks × ring attention across them, + ZeRO-3: usp_u2, usp_u4, usp_u8.
const std::vector<const Strategy*>& usp_strategies();
// Megatron TP + SP inside groups of t ranks × ring attention across them: tp_cp_t2, tp_cp_t4, tp_cp_t8.
const std::vector<const Strategy*>& tp_cp_strategies();

}  // namespace paradyse
