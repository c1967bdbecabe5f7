# SPDX-License-Identifier: Apache-2.0
# Configures, builds and runs tests/consumer/project against r4c in MODE find_package (after
# installing r4c into a fresh prefix), build_tree (find_package on r4c's build folder, nothing
# installed) or add_subdirectory.
file(REMOVE_RECURSE ${WORK_DIR})
set(args -DR4C_SOURCE_DIR=${R4C_SOURCE_DIR} -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
         "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DR4C_COMPONENTS=${COMPONENTS}")
if(BUILD_TYPE)
  string(TOUPPER "${BUILD_TYPE}" config)
  list(APPEND args "-DCMAKE_CXX_FLAGS_${config}=${CONFIG_CXX_FLAGS}")
endif()
# The add_subdirectory mode compiles r4c (and its components) again: through the same ccache as
# the build under test, on every core, so that packaging does not dominate the test time.
if(LAUNCHER)
  list(APPEND args -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
cmake_host_system_information(RESULT cores QUERY NUMBER_OF_LOGICAL_CORES)
if(MODE STREQUAL "find_package")
  execute_process(COMMAND ${CMAKE_COMMAND} --install ${R4C_BINARY_DIR} --prefix ${WORK_DIR}/prefix
                  RESULT_VARIABLE failed)
  if(failed)
    message(FATAL_ERROR "cmake --install failed")
  endif()
  list(APPEND args -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DR4C_CONSUMER_MODE=find_package)
elseif(MODE STREQUAL "build_tree")
  # r4c_DIR alone, no prefix path: the package can only come from the build tree.
  list(APPEND args -Dr4c_DIR=${R4C_BINARY_DIR} -DR4C_CONSUMER_MODE=find_package)
else()
  list(APPEND args -DR4C_CONSUMER_MODE=add_subdirectory)
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${R4C_SOURCE_DIR}/tests/consumer/project
                        -B ${WORK_DIR}/build ${args} RESULT_VARIABLE failed)
if(failed)
  message(FATAL_ERROR "configuring the consumer project failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build --parallel ${cores}
                RESULT_VARIABLE failed)
if(failed)
  message(FATAL_ERROR "building the consumer project failed")
endif()
execute_process(COMMAND ${WORK_DIR}/build/consumer_quickstart RESULT_VARIABLE failed)
if(failed)
  message(FATAL_ERROR "the consumer's quickstart failed: ${failed}")
endif()
# The components' programs, when the consumer built them.
string(REPLACE "," ";" components "${COMPONENTS}")
foreach(component ${components})
  execute_process(COMMAND ${WORK_DIR}/build/consumer_${component} RESULT_VARIABLE failed)
  if(failed)
    message(FATAL_ERROR "the consumer's ${component} program failed: ${failed}")
  endif()
endforeach()
