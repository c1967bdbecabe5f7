# SPDX-License-Identifier: Apache-2.0
# Installs r4c into a fresh prefix, builds tests/gen/consumer/project against it with
# find_package(r4c), runs it, then checks that rebuilding regenerates only what changed: nothing
# after no change, one header after touching it, and after touching a file only it includes.
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${R4C_BINARY_DIR} --prefix ${WORK_DIR}/prefix
                RESULT_VARIABLE failed OUTPUT_QUIET)
if(failed)
  message(FATAL_ERROR "cmake --install failed")
endif()
set(project ${WORK_DIR}/project)
set(config_flags)
if(BUILD_TYPE)
  string(TOUPPER "${BUILD_TYPE}" config)
  set(config_flags "-DCMAKE_CXX_FLAGS_${config}=${CONFIG_CXX_FLAGS}")
endif()
file(COPY ${R4C_SOURCE_DIR}/tests/gen/consumer/project/ DESTINATION ${project})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${project} -B ${WORK_DIR}/build
                        -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
                        "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" ${config_flags}
                RESULT_VARIABLE failed OUTPUT_QUIET)
if(failed)
  message(FATAL_ERROR "configuring the consumer project failed")
endif()

# Builds; `generated` gets the wrappers that were generated.
function(build generated)
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build
                  RESULT_VARIABLE failed OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(failed)
    message(FATAL_ERROR "building the consumer project failed:\n${out}")
  endif()
  string(REGEX MATCHALL "r4c-gen: generating [a-z_]+\\.resilient\\.hpp" lines "${out}")
  list(TRANSFORM lines REPLACE "r4c-gen: generating " "")
  list(SORT lines)
  list(REMOVE_DUPLICATES lines)
  set(${generated} "${lines}" PARENT_SCOPE)
endfunction()

function(expect what actual expected)
  if(NOT "${actual}" STREQUAL "${expected}")
    message(FATAL_ERROR "${what}: generated '${actual}', expected '${expected}'")
  endif()
endfunction()

build(generated)
expect("first build" "${generated}" "authors.resilient.hpp;books.resilient.hpp")
execute_process(COMMAND ${WORK_DIR}/build/gen_consumer RESULT_VARIABLE failed)
if(failed)
  message(FATAL_ERROR "the consumer failed: ${failed}")
endif()

build(generated)
expect("a build with no change" "${generated}" "")

# Touching moves the time stamp forward by at least a second, for file systems that keep
# seconds only.
function(touch file)
  execute_process(COMMAND ${CMAKE_COMMAND} -E sleep 1)
  file(TOUCH ${file})
endfunction()

touch(${project}/include/store/authors.hpp)
build(generated)
expect("after touching authors.hpp" "${generated}" "authors.resilient.hpp")

touch(${project}/include/store/common.hpp)
build(generated)
expect("after touching common.hpp (included by books.hpp)" "${generated}" "books.resilient.hpp")
message(STATUS "gen consumer: generated, ran, and regenerated only what changed")
