# SPDX-License-Identifier: Apache-2.0
# r4c_generate_resilient(<target> HEADERS <header>... [OUTPUT_DIR <dir>] [DEPENDS <target or file>...])
#
# Runs r4c-gen over each header (a path relative to the current source folder, or absolute)
# with <target>'s own include paths and compile definitions, and adds the generated
# `<name>.resilient.hpp` files to <target>, whose include path gets their folder
# (default: ${CMAKE_CURRENT_BINARY_DIR}/r4c_generated/<target>). r4c-gen writes a depfile, so a
# header is regenerated when it or anything it includes changes, and only then. DEPENDS names
# what must be built before r4c-gen reads the headers: the target that generates a header they
# include (a gRPC service's .grpc.pb.h from protoc).
#
# Works in r4c's own tree, after add_subdirectory(r4c), and after find_package(r4c) (which
# imports r4c::r4c-gen). With clang, whose warnings have no per-namespace switch for unknown
# attributes, it turns off -Wunknown-attributes for <target> only. See docs/declarative.md.
include_guard(GLOBAL)

function(r4c_generate_resilient target)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "OUTPUT_DIR" "HEADERS;DEPENDS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "r4c_generate_resilient(${target}): unexpected arguments "
                        "'${ARG_UNPARSED_ARGUMENTS}'; usage: r4c_generate_resilient(<target> "
                        "HEADERS <header>... [OUTPUT_DIR <dir>] [DEPENDS <target or file>...])")
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "r4c_generate_resilient: '${target}' is not a target")
  endif()
  if(NOT ARG_HEADERS)
    message(FATAL_ERROR "r4c_generate_resilient(${target}): no HEADERS given")
  endif()
  if(TARGET r4c-gen)
    set(generator r4c-gen)
  elseif(TARGET r4c::r4c-gen)
    set(generator r4c::r4c-gen)
  else()
    message(FATAL_ERROR "r4c_generate_resilient(${target}): r4c-gen was not built. It needs "
                        "libclang (Debian: libclang-14-dev) and R4C_BUILD_GEN=ON.")
  endif()
  set(dir "${ARG_OUTPUT_DIR}")
  if(NOT dir)
    set(dir "${CMAKE_CURRENT_BINARY_DIR}/r4c_generated/${target}")
  endif()

  # The target's include paths and definitions, usage requirements of what it links included,
  # one argument per line; rewritten only when they change, which then regenerates.
  set(args_file "${dir}/r4c-gen-$<CONFIG>.args")
  set(includes "$<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>")
  set(defines "$<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>")
  # The compiler's own folders (/usr/include, ...) may come back through imported targets;
  # given to clang with -I they would come before its C++ headers, so r4c-gen leaves them out.
  set(system_dirs)
  foreach(system_dir IN LISTS CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
    string(APPEND system_dirs "--system-include\n${system_dir}\n")
  endforeach()
  file(GENERATE OUTPUT "${args_file}" CONTENT
    "${system_dirs}$<$<BOOL:${includes}>:-I$<JOIN:${includes},\n-I>\n>$<$<BOOL:${defines}>:-D$<JOIN:${defines},\n-D>\n>")

  set(outputs)
  set(stems)
  foreach(header IN LISTS ARG_HEADERS)
    get_filename_component(path "${header}" ABSOLUTE)
    get_filename_component(stem "${header}" NAME_WLE)
    if(stem IN_LIST stems)
      message(FATAL_ERROR "r4c_generate_resilient(${target}): two headers named '${stem}'; "
                          "their wrappers would both be ${stem}.resilient.hpp (use two calls "
                          "with different OUTPUT_DIR)")
    endif()
    list(APPEND stems "${stem}")
    set(output "${dir}/${stem}.resilient.hpp")
    add_custom_command(OUTPUT "${output}"
      COMMAND ${generator} "${path}" -o "${output}" --depfile "${output}.d" "@${args_file}"
      DEPENDS "${path}" ${generator} "${args_file}" ${ARG_DEPENDS}
      DEPFILE "${output}.d"
      COMMENT "r4c-gen: generating ${stem}.resilient.hpp"
      VERBATIM)
    list(APPEND outputs "${output}")
  endforeach()
  target_sources(${target} PRIVATE ${outputs})
  target_include_directories(${target} PUBLIC "$<BUILD_INTERFACE:${dir}>")
  target_compile_options(${target} PRIVATE
    "$<$<COMPILE_LANG_AND_ID:CXX,Clang,AppleClang>:-Wno-unknown-attributes>")
endfunction()
