#pragma once

namespace paradyse {

// FlashAttention's FLOPs as its benchmark counts them (Dao-AILab/flash-attention,
// benchmarks/benchmark_flash_attention.py), the convention of every attention curve paradyse reads
// and writes: the forward 4·d per head and computed (query, key) pair, the backward, which recomputes
// the scores, 2.5× the forward.
inline constexpr double kAttentionForwardFlopsPerPairDim = 4.0;
inline constexpr double kAttentionBackwardFlopsPerForward = 2.5;

}  // namespace paradyse
