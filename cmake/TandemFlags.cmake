# Warning, numerics and sanitizer flags shared by every Tandem target.
#
# Numerics (docs/numerics.md): no implicit FMA contraction and no fast-math anywhere;
# CUDA keeps IEEE division and square root and denormals (--fmad=false, no -ftz).
add_library(tandem_flags INTERFACE)
target_compile_options(tandem_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror -ffp-contract=off -fno-fast-math>
  $<$<COMPILE_LANGUAGE:CUDA>:--fmad=false -prec-div=true -prec-sqrt=true -ftz=false
                             -Werror=all-warnings
                             -Xcompiler=-Wall,-Wextra,-Werror,-ffp-contract=off>)
target_include_directories(tandem_flags INTERFACE
  ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR})

if(TANDEM_SANITIZE)
  set(_san -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  target_compile_options(tandem_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:${_san}>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-fsanitize=address,-fsanitize=undefined,-fno-omit-frame-pointer>)
  target_link_options(tandem_flags INTERFACE ${_san})
endif()
