# Fails when PROGRAM (tandem-plan) holds a symbol of the optimizer (tandem_offload) or of
# the CUDA runtime: the planner decides placements through tandem::ResolvePlacement in
# tandem_engine and must link neither.
execute_process(COMMAND nm -C ${PROGRAM} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm ${PROGRAM} failed (${rc}): ${err}")
endif()
foreach(pattern "HybridOptimizer" "tandem::offload::" "cudaMalloc" "cudaStream" "tandem::gpu::StepPlan")
  string(FIND "${out}" "${pattern}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "${PROGRAM} holds '${pattern}': the planner links the optimizer or CUDA")
  endif()
endforeach()
execute_process(COMMAND ldd ${PROGRAM} OUTPUT_VARIABLE libs ERROR_QUIET)
if(libs MATCHES "cudart")
  message(FATAL_ERROR "${PROGRAM} loads the CUDA runtime:\n${libs}")
endif()
