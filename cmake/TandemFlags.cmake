# Warning, numerics and sanitizer flags shared by every Tandem target.
#
# Numerics (docs/numerics.md): no implicit FMA contraction and no fast-math anywhere;
# CUDA keeps IEEE division and square root and denormals (--fmad=false, no -ftz).
# Warnings are errors with the reference toolchain (Debian 12: GCC 12, nvcc); other
# compilers (e.g. GCC 13 on a GPU host) may raise new false positives, so offline builds
# there pass -DTANDEM_WERROR=OFF.
option(TANDEM_WERROR "Treat warnings as errors" ON)
add_library(tandem_flags INTERFACE)
target_compile_options(tandem_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -ffp-contract=off -fno-fast-math>
  $<$<COMPILE_LANGUAGE:CUDA>:--fmad=false -prec-div=true -prec-sqrt=true -ftz=false
                             -Xcompiler=-Wall,-Wextra,-ffp-contract=off>)
if(TANDEM_WERROR)
  target_compile_options(tandem_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Werror>)
endif()
# TANDEM_HAS_CUDA (1 or 0, TandemCuda.cmake): whether this build has the GPU code.
target_compile_definitions(tandem_flags INTERFACE TANDEM_HAS_CUDA=${TANDEM_HAS_CUDA})
# aarch64: GCC notes every by-value std::pair of floats whose passing changed in GCC 10
# (-Wpsabi); an ABI note about other compilers' objects, not a warning about this code.
if(TANDEM_ARCH STREQUAL "aarch64")
  target_compile_options(tandem_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-psabi>)
endif()
target_include_directories(tandem_flags INTERFACE
  ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR})

if(TANDEM_SANITIZE)
  set(_san -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  # -O1 -g1 (line tables only) instead of the build type's -O2 -g: the per-ISA kernel
  # files compile 2.2x faster under the sanitizers (643 s -> 288 s for kernel_avx512.cc
  # on the CI's 2 cores), and reports keep file:line. Comes after the build type's flags,
  # so it wins.
  target_compile_options(tandem_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:${_san} -O1 -g1>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-fsanitize=address,-fsanitize=undefined,-fno-omit-frame-pointer>)
  target_link_options(tandem_flags INTERFACE ${_san})
endif()
