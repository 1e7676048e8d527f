// Expecting a refusal in tests: `fn` must throw tandem::Error(kInvalidArgument) whose
// message contains `needle` (the argument, tensor or group it names).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tandem/error.h"

namespace tandem::testing {

template <typename Fn>
void ExpectInvalid(Fn fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace tandem::testing
