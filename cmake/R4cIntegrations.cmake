# SPDX-License-Identifier: Apache-2.0
# r4c's integrations, each a library of its own beside r4c (docs/integrations.md):
#   r4c::http  <r4c/http.hpp>  with cpp-httplib (Debian: libcpp-httplib-dev)
#   r4c::grpc  <r4c/grpc.hpp>  with gRPC C++ (Debian: libgrpc++-dev, protobuf-compiler-grpc)
# Each is built when its dependency is found and skipped, saying so, when it is not: r4c itself
# never needs either. Each has its own export set, so that find_package(r4c) looks for a
# component's dependencies only when the component is installed.

find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  # Debian's cpp-httplib is a compiled library; its pkg-config file carries the defines (OpenSSL,
  # zlib, brotli) the header must be read with to match it.
  pkg_check_modules(R4C_HTTPLIB QUIET IMPORTED_TARGET GLOBAL cpp-httplib)
endif()
if(TARGET PkgConfig::R4C_HTTPLIB)
  add_library(r4c_http src/http/http.cpp)
  add_library(r4c::http ALIAS r4c_http)
  target_link_libraries(r4c_http PUBLIC r4c PkgConfig::R4C_HTTPLIB)
  target_compile_options(r4c_http PRIVATE $<TARGET_PROPERTY:r4c_warnings,INTERFACE_COMPILE_OPTIONS>)
  set_target_properties(r4c_http PROPERTIES EXPORT_NAME http CXX_EXTENSIONS OFF
                                            POSITION_INDEPENDENT_CODE ON)
  set(R4C_HTTP_BUILT ON)
else()
  message(STATUS "r4c: cpp-httplib not found (Debian: libcpp-httplib-dev); r4c::http is skipped")
  set(R4C_HTTP_BUILT OFF)
endif()

# gRPC's package config finds Protobuf, c-ares, RE2 and Abseil itself.
find_package(gRPC 1.51 CONFIG QUIET)
find_package(Protobuf QUIET)
if(gRPC_FOUND AND Protobuf_FOUND AND TARGET gRPC::grpc_cpp_plugin AND Protobuf_PROTOC_EXECUTABLE)
  add_library(r4c_grpc src/grpc/grpc.cpp)
  add_library(r4c::grpc ALIAS r4c_grpc)
  target_link_libraries(r4c_grpc PUBLIC r4c gRPC::grpc++)
  target_compile_options(r4c_grpc PRIVATE $<TARGET_PROPERTY:r4c_warnings,INTERFACE_COMPILE_OPTIONS>)
  set_target_properties(r4c_grpc PROPERTIES EXPORT_NAME grpc CXX_EXTENSIONS OFF
                                            POSITION_INDEPENDENT_CODE ON)
  set(R4C_GRPC_BUILT ON)

  # r4c_grpc_protos(target PROTOS files... ): compiles .proto files (relative to proto/) with
  # protoc and grpc_cpp_plugin at build time into a static library `target`.
  function(r4c_grpc_protos target)
    cmake_parse_arguments(ARG "" "" "PROTOS" ${ARGN})
    set(out ${PROJECT_BINARY_DIR}/proto)
    set(sources)
    foreach(proto ${ARG_PROTOS})
      string(REGEX REPLACE "\\.proto$" "" stem ${proto})
      set(generated ${out}/${stem}.pb.cc ${out}/${stem}.pb.h ${out}/${stem}.grpc.pb.cc
                    ${out}/${stem}.grpc.pb.h)
      add_custom_command(
        OUTPUT ${generated}
        COMMAND ${CMAKE_COMMAND} -E make_directory ${out}
        COMMAND ${Protobuf_PROTOC_EXECUTABLE} --proto_path=${PROJECT_SOURCE_DIR}/proto
                --cpp_out=${out} --grpc_out=${out}
                --plugin=protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin>
                ${PROJECT_SOURCE_DIR}/proto/${proto}
        DEPENDS ${PROJECT_SOURCE_DIR}/proto/${proto}
        COMMENT "protoc ${proto}" VERBATIM)
      list(APPEND sources ${out}/${stem}.pb.cc ${out}/${stem}.grpc.pb.cc)
    endforeach()
    add_library(${target} STATIC ${sources})
    target_include_directories(${target} PUBLIC ${out})
    target_link_libraries(${target} PUBLIC gRPC::grpc++ protobuf::libprotobuf)
    set_target_properties(${target} PROPERTIES CXX_EXTENSIONS OFF POSITION_INDEPENDENT_CODE ON)
  endfunction()
  # The echo service of r4c's own tests, examples, benchmarks and r4c-sim (not installed).
  if(R4C_BUILD_TESTS OR R4C_BUILD_EXAMPLES OR R4C_BUILD_BENCHMARKS OR R4C_BUILD_TOOLS)
    r4c_grpc_protos(r4c_echo_proto PROTOS r4c/testing/echo.proto)
  endif()
else()
  message(STATUS "r4c: gRPC not found (Debian: libgrpc++-dev protobuf-compiler-grpc); "
                 "r4c::grpc, its tests, examples and benchmarks are skipped")
  set(R4C_GRPC_BUILT OFF)
endif()

if(R4C_INSTALL)
  foreach(component http grpc)
    string(TOUPPER ${component} upper)
    if(R4C_${upper}_BUILT)
      install(TARGETS r4c_${component} EXPORT r4c_${component}Targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
      install(EXPORT r4c_${component}Targets NAMESPACE r4c::
              DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/r4c)
      export(EXPORT r4c_${component}Targets NAMESPACE r4c::
             FILE ${PROJECT_BINARY_DIR}/r4c_${component}Targets.cmake)
    endif()
  endforeach()
endif()
