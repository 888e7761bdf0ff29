// Packed sequences (strategies/sequence_layout.hpp): documents laid end to end, each split over the
// ranks as a whole sequence is; attention masks by document; the tracer counts a variable-length
// kernel's pairs, Σ over documents, not the packed sequence's S².
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "common/errors.hpp"
#include "tests/strategies/trace_helpers.hpp"

namespace paradyse::testing {
namespace {

// Pairs of one document of s tokens: s(s+1)/2 causal, s² otherwise (trace_helpers.hpp).
double document_pairs(bool causal, const std::vector<int64_t>& documents) {
  double pairs = 0;
  for (const int64_t s : documents) pairs += attention_pairs(causal, as_double(s));
  return pairs;
}

// The pairs a mask computes, counted one position pair at a time; documents found by walking the ends.
double brute_force_pairs(const AttentionMask& mask, const DocumentEnds& ends) {
  auto document = [&](int64_t position) {
    return std::upper_bound(ends.begin(), ends.end(), position) - ends.begin();
  };
  double pairs = 0;
  for (const TokenRange& qs : mask.queries)
    for (int64_t q = qs.begin; q < qs.begin + qs.length; ++q)
      for (const TokenRange& ks : mask.keys)
        for (int64_t k = ks.begin; k < ks.begin + ks.length; ++k)
          pairs += (!mask.causal || k <= q) && document(q) == document(k) ? 1 : 0;
  return pairs;
}

TEST_CASE("packed layout: every document split over the ranks as one sequence is, in document order",
          "[strategies]") {
  // Documents of 16, 4 and 8 tokens on 2 ranks. Zig-zag: 2p = 4 chunks per document of 4, 1 and 2
  // tokens; rank 0 holds chunks 0 and 3 of each, rank 1 chunks 1 and 2.
  const SequenceLayout zigzag({16, 4, 8}, 2, true);
  CHECK(zigzag.tokens() == 28);
  CHECK(zigzag.local_tokens() == 14);
  const Positions rank0{{0, 4}, {12, 4}, {16, 1}, {19, 1}, {20, 2}, {26, 2}};
  const Positions rank1{{4, 4}, {8, 4}, {17, 1}, {18, 1}, {22, 2}, {24, 2}};
  auto same = [](const Positions& a, const Positions& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].begin != b[i].begin || a[i].length != b[i].length) return false;
    return true;
  };
  CHECK(same(zigzag.local(0), rank0));
  CHECK(same(zigzag.local(1), rank1));
  REQUIRE(zigzag.document_ends());
  CHECK(*zigzag.document_ends() == DocumentEnds{16, 20, 28});
  // Contiguous (bidirectional): p chunks per document.
  const SequenceLayout contiguous({16, 4, 8}, 2, false);
  CHECK(same(contiguous.local(1), Positions{{8, 8}, {18, 2}, {24, 4}}));
  // One document is today's layout, with nothing to mask between documents.
  const SequenceLayout one({16}, 2, true);
  CHECK(one.document_ends() == nullptr);
  CHECK(same(one.local(1), SequenceLayout(16, 2, true).local(1)));
}

TEST_CASE("merged layout: a member of m ranks holds their tokens in rank order, the whole sequence unchanged",
          "[strategies]") {
  // 16 tokens zig-zag on 4 ranks: chunks of 2, rank r holds chunks r and 7 − r. Members of 2 ranks
  // (a 2-D strategy's ring over Ulysses groups of 2): member 0 holds ranks 0 and 1, member 1 ranks 2 and 3.
  const SequenceLayout layout(16, 4, true);
  const SequenceLayout members = layout.merged(2);
  CHECK(members.degree() == 2);
  CHECK(members.local_tokens() == 8);
  for (int member = 0; member < 2; ++member) {
    Positions expected = layout.local(2 * member);
    const Positions second = layout.local(2 * member + 1);
    expected.insert(expected.end(), second.begin(), second.end());
    REQUIRE(members.local(member).size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      CHECK(members.local(member)[i].begin == expected[i].begin);
      CHECK(members.local(member)[i].length == expected[i].length);
    }
  }
  CHECK(members.local(1).front().begin == 4);  // rank 2's first chunk
  CHECK(members.gathered().size() == layout.gathered().size());
  CHECK(layout.merged(4).merged(1).degree() == 1);
  CHECK_THROWS(layout.merged(3));  // 3 does not divide 4
}

TEST_CASE("packed layout: each document padded on its own, empty and unpadded documents refused",
          "[strategies]") {
  CHECK(SequenceLayout::padded_lengths({1, 4, 5, 8}, 2, true) == std::vector<int64_t>{4, 4, 8, 8});
  CHECK(SequenceLayout::padded_lengths({1, 4, 5}, 2, false) == std::vector<int64_t>{2, 4, 6});
  CHECK_THROWS_WITH(SequenceLayout({8, 0, 8}, 2, true),
                    Catch::Contains("docs") && Catch::Contains("document 2") && Catch::Contains("got 0"));
  CHECK_THROWS_WITH(SequenceLayout({8, 6}, 2, true),
                    Catch::Contains("document 2") && Catch::Contains("multiple of 4"));
  CHECK_THROWS_WITH(SequenceLayout(std::vector<int64_t>{}, 2, true),
                    Catch::Contains("at least one document"));
}

TEST_CASE("packed masks: computed pairs and the longest document's keys, against a count by position",
          "[strategies]") {
  std::mt19937 random(11);
  for (int trial = 0; trial < 40; ++trial) {
    const int p = trial % 2 == 0 ? 2 : 4;
    const bool causal = trial % 3 != 0;
    std::vector<int64_t> lengths;
    for (int d = 0, n = 1 + static_cast<int>(random() % 5); d < n; ++d)
      lengths.push_back(1 + static_cast<int64_t>(random() % 40));
    const SequenceLayout layout(SequenceLayout::padded_lengths(lengths, p, causal), p, causal);
    const DocumentEnds ends =
        layout.document_ends() ? *layout.document_ends() : DocumentEnds{layout.tokens()};
    INFO("trial " << trial);
    for (int rank = 0; rank < p; ++rank)
      for (int owner = 0; owner < p; ++owner) {
        const AttentionMask block{causal, layout.local(rank), layout.local(owner), layout.document_ends()};
        CHECK(block.computed_pairs() == brute_force_pairs(block, ends));
      }
    const AttentionMask row{causal, layout.local(p - 1), layout.gathered(), layout.document_ends()};
    CHECK(row.computed_pairs() == brute_force_pairs(row, ends));
    // The whole packed sequence: Σ over documents, and the longest document's keys.
    const AttentionMask whole{causal, layout.gathered(), layout.gathered(), layout.document_ends()};
    std::vector<int64_t> padded = SequenceLayout::padded_lengths(lengths, p, causal);
    CHECK(whole.computed_pairs() == document_pairs(causal, padded));
    CHECK(whole.longest_document_keys() == *std::max_element(padded.begin(), padded.end()));
  }
}

TEST_CASE("packed masks: ranges in any order, empty or continuing one another, counted as by position",
          "[strategies]") {
  const DocumentEnds ends{5, 8, 20, 21, 32};
  const auto document_keys = [&](const Positions& keys) {
    std::vector<int64_t> per_document(ends.size(), 0);
    for (const TokenRange& range : keys)
      for (int64_t k = range.begin; k < range.begin + range.length; ++k)
        ++per_document[static_cast<std::size_t>(std::upper_bound(ends.begin(), ends.end(), k) -
                                                ends.begin())];
    return *std::max_element(per_document.begin(), per_document.end());
  };
  std::mt19937 random(5);
  for (int trial = 0; trial < 60; ++trial) {
    // The 32 positions cut into ranges at random points (some empty), some dropped, then shuffled.
    Positions queries, keys;
    for (Positions* ranges : {&queries, &keys}) {
      for (int64_t begin = 0; begin < 32;) {
        const int64_t length = std::min<int64_t>(32 - begin, static_cast<int64_t>(random() % 7));
        if (random() % 4 != 0) ranges->push_back({begin, length});
        begin += std::max<int64_t>(length, 1);
      }
      std::shuffle(ranges->begin(), ranges->end(), random);
    }
    const bool causal = trial % 2 == 0;
    INFO("trial " << trial);
    const AttentionMask mask{causal, queries, keys, std::make_shared<const DocumentEnds>(ends)};
    CHECK(mask.computed_pairs() == brute_force_pairs(mask, ends));
    CHECK(mask.longest_document_keys() == document_keys(keys));
  }
}

TEST_CASE("attention pairs: a mask of the same ranges over other documents, or unmasked, is counted anew",
          "[strategies]") {
  // Counts are remembered per thread, so these follow one another on purpose.
  const Positions ranges = {{0, 6}, {10, 6}};
  for (const DocumentEnds& ends : {DocumentEnds{8, 16}, DocumentEnds{4, 16}, DocumentEnds{2, 4, 12, 16}})
    for (const bool causal : {true, false}) {
      INFO("ends " << ends.front() << ", causal " << causal);
      const AttentionMask mask{causal, ranges, ranges, std::make_shared<const DocumentEnds>(ends)};
      CHECK(mask.computed_pairs() == brute_force_pairs(mask, ends));
      // The same documents in another object, the same count.
      const AttentionMask again{causal, ranges, ranges, std::make_shared<const DocumentEnds>(ends)};
      CHECK(again.computed_pairs() == mask.computed_pairs());
    }
}

// Forward attention FLOPs of one traced layer, summed over the ranks: the flash kernel's, or the unfused
// score GEMMs' (QKᵀ and P·V).
double attention_flops(const Strategy& strategy, const ModelSpec& model, int p,
                       const std::vector<int64_t>& docs) {
  StepSpec spec;
  spec.model = &model;
  spec.documents = docs;
  for (const int64_t d : docs) spec.tokens += d;
  spec.plan = uniform_plan(strategy, 1);
  double flops = 0;
  for (int rank = 0; rank < p; ++rank)
    for (const Op& op : trace_training_step(spec, rank, p).ops)
      if (op.phase == Phase::layer_forward &&
          (op.kind == OpKind::attention_forward || op.kernel == Kernel::scores ||
           op.kernel == Kernel::scores_times))
        flops += op.flops;
  return flops;
}

TEST_CASE("tracer: a packed layer's attention FLOPs are Σ over its documents, unfused scores cover S²",
          "[strategies]") {
  const std::vector<int64_t> docs{8, 40, 8, 24};  // each a multiple of 2p for p = 2 and 4
  const double total = 80;
  for (const Strategy* strategy : all_strategies())
    for (int p : {2, 4})
      for (bool causal : {true, false}) {
        const ModelSpec model = small_model(causal);
        INFO(strategy->name() << " p " << p << " causal " << causal);
        if (strategy->unsupported(model, p)) continue;
        const double per_pair = 4 * as_double(model.hidden);  // q·kᵀ and p·v, 2 FLOPs per multiply-add
        const bool unfused = strategy->name() == "colossal_z";
        const double expected = per_pair * (unfused ? total * total : document_pairs(causal, docs));
        CHECK(attention_flops(*strategy, model, p, docs) == Approx(expected).epsilon(1e-12));
      }
}

}  // namespace
}  // namespace paradyse::testing
