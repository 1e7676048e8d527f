// The state-array table (engine/state_arrays.h) is the one source of the arrays' names,
// entry sizes and checkpoint section ids, and the one encoder of the initial state
// (engine/initial_state.h) gives what the codecs give element by element.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/fp_bits.h"
#include "engine/initial_state.h"
#include "engine/master_codec.h"
#include "engine/q8_codec.h"
#include "engine/state_arrays.h"
#include "engine/tensor_state.h"
#include "tandem/snapshot.h"

namespace tandem {
namespace {

TEST(StateArrayTable, EntrySizesAreTheSnapshotsVectorsAndIdsAreConsecutive) {
  TensorSnapshot ts;
  int seen = 0;
  std::set<std::string> names;
  ForEachStateVector(ts, [&](StateArray a, auto& v) {
    const StateArrayInfo& info = Info(a);
    EXPECT_EQ(info.entry_bytes, sizeof(v[0])) << info.name;
    EXPECT_EQ(info.section_id, static_cast<uint32_t>(a) + 1) << info.name;
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    ++seen;
  });
  EXPECT_EQ(seen, kStateArrayCount);
  // The names the snapshots, checkpoints and the binding have always used.
  EXPECT_STREQ(Info(StateArray::kMasterBf16).name, "master_bf16");
  EXPECT_STREQ(Info(StateArray::kVScales).name, "v_scales");
  EXPECT_TRUE(PerGroup(StateArray::kMScales) && !PerGroup(StateArray::kMCodes));
  EXPECT_TRUE(IsMasterArray(StateArray::kEcc16) && !IsMasterArray(StateArray::kVF32));
}

TEST(StateArrayTable, SizesFollowTheFormats) {
  HyperParams plain;  // SGD without momentum keeps no momentum buffer
  HyperParams heavy;
  heavy.momentum = 0.9;
  const StateFormats q{MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8};
  EXPECT_EQ(ArrayEntries(StateArray::kMasterBf16, Algorithm::kAdamW, {}, q, 100), 100u);
  EXPECT_EQ(ArrayEntries(StateArray::kMasterF32, Algorithm::kAdamW, {}, q, 100), 0u);
  EXPECT_EQ(ArrayEntries(StateArray::kEcc8, Algorithm::kAdamW, {}, q, 100), 100u);
  EXPECT_EQ(ArrayEntries(StateArray::kMScales, Algorithm::kAdamW, {}, q, 100), 4u);  // 100/32
  EXPECT_EQ(ArrayEntries(StateArray::kVCodes, Algorithm::kLion, {}, q, 100), 0u);
  EXPECT_EQ(ArrayEntries(StateArray::kMCodes, Algorithm::kSGD, plain, q, 100), 0u);
  EXPECT_EQ(ArrayEntries(StateArray::kMCodes, Algorithm::kSGD, heavy, q, 100), 100u);
}

// Every master format and moment format, an odd size: the encoder writes the codecs'
// values, zero moments and the scale of zero; an aliased bf16 array is left alone.
TEST(InitialState, EncodesWhatTheCodecsGive) {
  const size_t n = 77;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  std::vector<float> w(n);
  for (float& x : w) x = nd(rng);
  const MasterFormat masters[] = {MasterFormat::kF32, MasterFormat::kBF16, MasterFormat::kBF16Ecc8,
                                  MasterFormat::kBF16Ecc16};
  for (MasterFormat mf : masters)
    for (MomentFormat f : {MomentFormat::kF32, MomentFormat::kQ8}) {
      const StateFormats formats{mf, f, f};
      TensorSnapshot ts;
      SizeStateVectors(ts, Algorithm::kAdamW, {}, formats, n);
      TensorState state(Algorithm::kAdamW, {}, formats, w.data(), n);  // same encoder
      StepSpan span = state.Span(0, n, nullptr, DType::kF32);
      for (size_t i = 0; i < n; ++i) {
        switch (mf) {
          case MasterFormat::kF32:
            EXPECT_EQ(num::BitsOf(state.master_f32[i]), num::BitsOf(w[i]));
            break;
          case MasterFormat::kBF16:
            EXPECT_EQ(state.master_bf16[i], num::F32ToBf16(w[i]));
            break;
          case MasterFormat::kBF16Ecc8: {
            uint16_t b;
            int8_t e;
            num::EncodeEcc8(w[i], &b, &e);
            EXPECT_EQ(state.master_bf16[i], b);
            EXPECT_EQ(state.ecc8[i], e);
            break;
          }
          case MasterFormat::kBF16Ecc16: {
            uint16_t b;
            int16_t e;
            num::EncodeEcc16(w[i], &b, &e);
            EXPECT_EQ(state.master_bf16[i], b);
            EXPECT_EQ(state.ecc16[i], e);
            break;
          }
        }
      }
      if (f == MomentFormat::kQ8) {
        for (uint16_t s : state.m_scales) EXPECT_EQ(s, num::GroupScaleBits(0.0f));
        for (uint8_t c : state.v_codes) EXPECT_EQ(c, 0);
      } else {
        for (float m : state.m_f32) EXPECT_EQ(num::BitsOf(m), 0u);
      }
      // An aliased master (its bf16 array is the parameter): only the correction is
      // written, the parameter's bits stay.
      if (mf == MasterFormat::kBF16Ecc8) {
        std::vector<int8_t> ecc(n, 99);
        StepSpan aliased = span;
        aliased.master.bf16 = nullptr;
        aliased.master.ecc8 = ecc.data();
        EncodeInitialState(w.data(), DType::kF32, aliased);
        EXPECT_TRUE(std::memcmp(ecc.data(), state.ecc8.data(), n) == 0);
      }
    }
}

// Every state array of a span at element offset 0 of its own byte buffer, `skew` entries
// into it (so that the arrays start at every alignment), the rest of the buffer guard
// bytes.
struct SpanBuffers {
  std::vector<std::vector<uint8_t>> bytes;
  StepSpan span;
  SpanBuffers(uint64_t n, uint64_t skew, uint8_t fill, std::mt19937* rng) {
    span.n = n;
    ForEachStateArray(span, [&](StateArray a, auto*& p) {
      using T = std::remove_reference_t<decltype(*p)>;
      const uint64_t entries = ArrayEntries(a, n);
      std::vector<uint8_t>& b = bytes.emplace_back((entries + skew + 64) * sizeof(T), fill);
      if (rng != nullptr)
        for (uint64_t i = 0; i < entries * sizeof(T); ++i)
          b[skew * sizeof(T) + i] = static_cast<uint8_t>((*rng)());
      p = reinterpret_cast<T*>(b.data()) + skew;
    });
  }
};

TEST(CopyStateArrays, StreamingCopiesEveryArrayExactlyAndNothingElse) {
  std::mt19937 rng(7);
  for (uint64_t n : {1ull, 31ull, 32ull, 33ull, 100ull, 4097ull, 65536ull + 17})
    for (uint64_t src_skew : {0ull, 1ull, 3ull})
      for (uint64_t dst_skew : {0ull, 2ull, 5ull}) {
        SpanBuffers src(n, src_skew, 0xA5, &rng);
        SpanBuffers streamed(n, dst_skew, 0x5A, nullptr), copied(n, dst_skew, 0x5A, nullptr);
        CopyStateArraysStreaming(streamed.span, src.span);
        CopyStateArrays(copied.span, src.span);
        for (size_t k = 0; k < streamed.bytes.size(); ++k)
          ASSERT_EQ(streamed.bytes[k], copied.bytes[k])
              << "array " << k << ", n " << n << ", skews " << src_skew << "/" << dst_skew;
        // And the copy is the source: the arrays' bytes moved, the guards stayed.
        int k = 0;
        ForEachStateArray(src.span, [&](StateArray a, auto* p) {
          const size_t len = ArrayEntries(a, n) * sizeof(*p);
          const uint8_t* got = copied.bytes[k].data() + dst_skew * sizeof(*p);
          EXPECT_EQ(std::memcmp(got, p, len), 0) << Info(a).name << ", n " << n;
          EXPECT_EQ(got[len], 0x5A) << Info(a).name << ": written past the end";
          ++k;
        });
      }
}

}  // namespace
}  // namespace tandem
