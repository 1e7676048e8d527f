// libFuzzer target for ImportSafetensorsMasters: any input either imports or throws
// tandem::Error, with no sanitizer report.
#include <cstdint>

#include "tandem/checkpoint.h"
#include "tandem/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto env = tandem::NewMemEnv();
  {
    auto f = env->NewWritableFile("in");
    f->Append(data, size);
    f->Close();
  }
  try {
    (void)tandem::ImportSafetensorsMasters("in", env.get());
  } catch (const tandem::Error&) {
  }
  return 0;
}
