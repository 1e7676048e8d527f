# Whether this build has GPU support (TANDEM_CUDA: AUTO, ON or OFF) and, with it, the CUDA
# language, its standard and architectures, and the CUDA toolkit. Sets TANDEM_HAS_CUDA to 1
# or 0; tandem_flags (TandemFlags.cmake) passes it to every target as a definition. Prints
# one status line saying which, and why (docs/building.md).
set(TANDEM_CUDA AUTO CACHE STRING
    "GPU support: AUTO (when a CUDA compiler is found), ON (required) or OFF (never)")
set_property(CACHE TANDEM_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${TANDEM_CUDA}" _tandem_cuda_mode)
if(NOT _tandem_cuda_mode STREQUAL "AUTO")
  if(TANDEM_CUDA)
    set(_tandem_cuda_mode ON)
  else()
    set(_tandem_cuda_mode OFF)
  endif()
endif()

set(TANDEM_HAS_CUDA 0)
if(_tandem_cuda_mode STREQUAL "OFF")
  set(_tandem_cuda_why "TANDEM_CUDA=OFF")
elseif(CMAKE_CUDA_COMPILER AND NOT EXISTS "${CMAKE_CUDA_COMPILER}")
  # check_language() trusts a given compiler path without looking at it.
  set(_tandem_cuda_why "CMAKE_CUDA_COMPILER=${CMAKE_CUDA_COMPILER} does not exist")
else()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(TANDEM_HAS_CUDA 1)
  else()
    # (cached: after installing CUDA, configure a new build dir or pass
    # -UCMAKE_CUDA_COMPILER)
    find_program(_tandem_nvcc nvcc NO_CACHE)
    if(_tandem_nvcc OR NOT "$ENV{CUDACXX}" STREQUAL "")
      string(CONCAT _tandem_cuda_why "the CUDA compiler found ($ENV{CUDACXX}${_tandem_nvcc}) "
             "failed CMake's test compile (CMakeFiles/CMakeError.log says why)")
    else()
      set(_tandem_cuda_why "no working CUDA compiler was found (no nvcc on PATH, CUDACXX unset)")
    endif()
  endif()
endif()

if(NOT TANDEM_HAS_CUDA)
  if(_tandem_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "TANDEM_CUDA=ON but ${_tandem_cuda_why}: put nvcc on PATH "
            "(e.g. /usr/local/cuda/bin), or pass -DCMAKE_CUDA_COMPILER=/path/to/nvcc, or "
            "build without GPU support with -DTANDEM_CUDA=AUTO or OFF")
  endif()
  message(STATUS "Tandem: GPU support OFF because ${_tandem_cuda_why}: host mode only; "
          "cuda/, the GPU tests and the GPU benchmarks are not built")
  return()
endif()

# The data-centre GPUs users train on: A100 (80), A10/A40 (86), L4/L40 (89), H100/H200 (90)
# and B200 (100) where this nvcc knows it. Only when the caller chose none; must be set
# before CUDA is enabled.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND "$ENV{CUDAARCHS}" STREQUAL "")
  execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --list-gpu-arch
                  OUTPUT_VARIABLE _tandem_nvcc_archs RESULT_VARIABLE _tandem_nvcc_rc
                  ERROR_QUIET)
  set(_tandem_archs)
  foreach(arch 80 86 89 90 100)
    if(NOT _tandem_nvcc_rc EQUAL 0 AND NOT arch STREQUAL "100")
      list(APPEND _tandem_archs ${arch})  # an nvcc without --list-gpu-arch: no Blackwell
    elseif(_tandem_nvcc_archs MATCHES "compute_${arch}([^0-9]|$)")
      list(APPEND _tandem_archs ${arch})
    endif()
  endforeach()
  set(CMAKE_CUDA_ARCHITECTURES "${_tandem_archs}" CACHE STRING
      "CUDA architectures to build for (docs/building.md)")
endif()

enable_language(CUDA)
# CMake 3.25 knows no C++20 flag for nvcc: every CUDA target asks for 17, mapped here to
# nvcc's -std=c++20 (the public headers need C++20).
set(CMAKE_CUDA17_STANDARD_COMPILE_OPTION "-std=c++20")
set(CMAKE_CUDA17_EXTENSION_COMPILE_OPTION "-std=c++20")
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
find_package(CUDAToolkit REQUIRED)
message(STATUS "Tandem: GPU support ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
        "architectures ${CMAKE_CUDA_ARCHITECTURES})")
