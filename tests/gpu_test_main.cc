// main() of every GoogleTest binary that needs a CUDA device (cuda_tests,
// offload_gpu_tests). ctest runs each such binary as one test. Without a usable device it
// prints one line and exits with kSkipReturnCode, which tests/CMakeLists.txt declares as
// the test's SKIP_RETURN_CODE: the summary shows one "Skipped" per suite instead of one
// skipped line per case. With a device every case runs, as with gtest_main.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

namespace {
constexpr int kSkipReturnCode = 77;  // SKIP_RETURN_CODE in tests/CMakeLists.txt
}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (GTEST_FLAG_GET(list_tests)) return RUN_ALL_TESTS();
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    const char* why = err != cudaSuccess ? cudaGetErrorString(err) : "no device";
    const char* slash = std::strrchr(argv[0], '/');
    std::printf("SKIPPED: %s: no usable CUDA device (%s); its %d tests need a GPU\n",
                slash != nullptr ? slash + 1 : argv[0], why,
                ::testing::UnitTest::GetInstance()->total_test_count());
    return kSkipReturnCode;
  }
  return RUN_ALL_TESTS();
}
