// Placement meets the fraction to within one group, cuts only at group boundaries and
// follows each policy's order.
#include "tandem/placement.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tandem/error.h"
#include "tandem/types.h"

namespace tandem {
namespace {

const std::vector<uint64_t> kSizes = {4096 + 17, 64, 1000, 3, 0, 2048, 33, 70000, 5};

TEST(Placement, FractionMetWithinOneGroupAndCutsOnGroupBoundaries) {
  for (PlacementPolicy pol : {PlacementPolicy::kBackwardOrder, PlacementPolicy::kForwardOrder,
                              PlacementPolicy::kLargestFirst}) {
    for (double f = 0.0; f <= 1.0; f += 1.0 / 64) {
      const Placement p = ComputePlacement(kSizes, f, pol);
      EXPECT_LT(std::llabs(int64_t(p.offloaded) - int64_t(p.target)), kQuantGroup)
          << Name(pol) << " f=" << f;
      int partial = 0;
      for (const TensorPlacement& t : p.tensors) {
        EXPECT_LE(t.device_count, t.numel);
        if (t.device_count != 0 && t.device_count != t.numel) {
          ++partial;
          EXPECT_EQ(t.device_count % kQuantGroup, 0u);
        }
      }
      EXPECT_LE(partial, 1);
    }
    EXPECT_EQ(ComputePlacement(kSizes, 0.0, pol).offloaded, 0u);
    const Placement all = ComputePlacement(kSizes, 1.0, pol);
    EXPECT_EQ(all.offloaded, all.total);
  }
}

TEST(Placement, PolicyOrder) {
  // 5% of the elements: backward order takes the last tensors, forward the first (cut
  // inside it), largest-first the 70000-element tensor.
  const Placement b = ComputePlacement(kSizes, 0.05, PlacementPolicy::kBackwardOrder);
  EXPECT_EQ(b.tensors.back().device_count, 0u);
  EXPECT_EQ(b.tensors.front().device_count, b.tensors.front().numel);
  const Placement f = ComputePlacement(kSizes, 0.05, PlacementPolicy::kForwardOrder);
  EXPECT_GT(f.tensors.front().host_count(), 3000u);
  EXPECT_EQ(f.tensors.back().device_count, f.tensors.back().numel);
  const Placement l = ComputePlacement(kSizes, 0.5, PlacementPolicy::kLargestFirst);
  EXPECT_GT(l.tensors[7].host_count(), 0u);
  EXPECT_EQ(l.tensors[0].host_count(), 0u);
}

TEST(Placement, RejectsBadFractionAndPolicy) {
  for (double f : {-0.1, 1.01, std::nan("")}) {
    try {
      ComputePlacement(kSizes, f, PlacementPolicy::kBackwardOrder);
      FAIL();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("offload_fraction"), std::string::npos);
    }
  }
  EXPECT_THROW(ParsePlacementPolicy("random"), Error);
  EXPECT_EQ(ParsePlacementPolicy("largest_first"), PlacementPolicy::kLargestFirst);
}

}  // namespace
}  // namespace tandem
