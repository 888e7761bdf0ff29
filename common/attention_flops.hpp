#pragma once

namespace paradyse {

// FlashAttention's FLOPs as its benchmark counts them (Dao-AILab/flash-attention,
// benchmarks/benchmark_flash_attention.py), the convention of every attention curve paradyse reads
// and writes: the forward 4·d per head and computed (query, key) pair, the backward, which recomputes
// the scores, 2.5× the forward.
inline constexpr double kAttentionForwardFlopsPerPairDim = 4.0;
inline constexpr double kAttentionBackwardFlopsPerForward = 2.5;

// The backward's fraction of peak where the forward is timed apart from the pair: the pair's time
// less the forward's, per FLOP of the forward, over the backward's FLOPs. Not positive where the
// forward takes the whole pair's time.
inline double attention_backward_efficiency(double pair_efficiency, double forward_efficiency) {
  constexpr double k = kAttentionBackwardFlopsPerForward;
  const double left = (1 + k) / pair_efficiency - 1 / forward_efficiency;
  return left > 0 ? k / left : 0;
}

}  // namespace paradyse
