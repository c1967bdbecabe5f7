# SPDX-License-Identifier: Apache-2.0
# Finds libclang's C API for r4c-gen (Debian: libclang-14-dev). Sets R4C_LIBCLANG_FOUND and,
# when found, the imported target r4c_libclang.
include_guard(GLOBAL)

set(_r4c_llvm_hints)
foreach(version 19 18 17 16 15 14)
  list(APPEND _r4c_llvm_hints /usr/lib/llvm-${version})
endforeach()
find_path(R4C_LIBCLANG_INCLUDE_DIR clang-c/Index.h
  HINTS ${_r4c_llvm_hints} PATH_SUFFIXES include
  DOC "Folder holding clang-c/Index.h (libclang's C API)")
find_library(R4C_LIBCLANG_LIBRARY NAMES clang libclang
  HINTS ${_r4c_llvm_hints} PATH_SUFFIXES lib
  DOC "libclang, for r4c-gen")
unset(_r4c_llvm_hints)

if(R4C_LIBCLANG_INCLUDE_DIR AND R4C_LIBCLANG_LIBRARY)
  set(R4C_LIBCLANG_FOUND TRUE)
  if(NOT TARGET r4c_libclang)
    add_library(r4c_libclang UNKNOWN IMPORTED)
    set_target_properties(r4c_libclang PROPERTIES
      IMPORTED_LOCATION "${R4C_LIBCLANG_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${R4C_LIBCLANG_INCLUDE_DIR}")
  endif()
else()
  set(R4C_LIBCLANG_FOUND FALSE)
endif()
