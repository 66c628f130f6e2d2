# Installs the build into a fresh prefix, builds examples/ against it with find_package(longhaul),
# and runs both example programs. Run with cmake -P and -DBUILD_DIR, -DSOURCE_DIR, -DWORK_DIR,
# -DGENERATOR, -DC_COMPILER, -DCXX_COMPILER.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f include/longhaul/longhaul.h include/longhaul/longhaul.hpp bin/longhaul-master)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "${f} was not installed")
  endif()
endforeach()
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
foreach(example hello_c hello_cpp)
  run(${WORK_DIR}/build/${example})
  if(NOT last_output MATCHES "world size 1 in epoch 1")
    message(FATAL_ERROR "${example} printed: ${last_output}")
  endif()
  message(STATUS "${example}: ${last_output}")
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
