# Cross build for 64-bit Arm Linux (aarch64) from an x86-64 Debian 12 host:
#   cmake -S . -B build-aarch64 -G Ninja \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DTANDEM_CUDA=OFF
# Needs Debian's g++-aarch64-linux-gnu, the arm64 -dev packages through multiarch, ISA-L
# unpacked into TANDEM_AARCH64_PREFIX and qemu-user for the tests
# (scripts/install-deps-aarch64.sh installs all of it; docs/building.md, "Arm (aarch64)").
# ctest runs every test binary under qemu-aarch64 (CMAKE_CROSSCOMPILING_EMULATOR); the
# CPU it emulates is QEMU_CPU's (scripts/test-aarch64.sh sets it).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# Debian's libisal-dev cannot be installed for two architectures at once, so its arm64
# package is unpacked here instead (scripts/install-deps-aarch64.sh).
set(TANDEM_AARCH64_PREFIX /opt/tandem-aarch64 CACHE PATH
    "Where the arm64 packages that multiarch cannot install are unpacked")
list(APPEND CMAKE_PREFIX_PATH ${TANDEM_AARCH64_PREFIX}/usr)

# pkg-config must read the arm64 .pc files, never the build machine's.
set(ENV{PKG_CONFIG_LIBDIR}
    "${TANDEM_AARCH64_PREFIX}/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# The Python extension (TANDEM_BUILD_PYTHON, python/CMakeLists.txt) is built against
# Debian's arm64 Python 3.11, unpacked into the same prefix: installing
# libpython3.11-dev:arm64 through multiarch would move the build machine's own Python
# packages to that version. The headers, the include root that pyconfig.h's per-
# architecture dispatch needs, and the suffix the arm64 interpreter imports.
set(TANDEM_CROSS_PYTHON_INCLUDE_DIRS
    ${TANDEM_AARCH64_PREFIX}/usr/include/python3.11 ${TANDEM_AARCH64_PREFIX}/usr/include)
set(TANDEM_CROSS_PYTHON_EXT_SUFFIX .cpython-311-aarch64-linux-gnu.so)

find_program(TANDEM_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(TANDEM_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${TANDEM_QEMU_AARCH64})
endif()
# The GoogleTest cases are listed when ctest runs, under that run's QEMU_CPU: which SVE
# vector lengths the parity tests cover depends on the emulated CPU.
set(CMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE PRE_TEST)
