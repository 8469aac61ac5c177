# One CMake library per folder of src/, and the include boundaries the folders promise.
#
# `#include "store/embedded/engine_impl.h"` must compile only in code that links the embedded
# store, so src/ is not an include path. Instead each library gets an include root of its own in
# the build tree, holding one symbolic link named like its folder (build/include-roots/
# delayq_store_embedded/store/embedded -> src/store/embedded), as a PUBLIC include directory: a
# library reaches the headers of exactly the libraries it links, and the build fails otherwise.
function(delayq_include_root target folder)
  set(root ${PROJECT_BINARY_DIR}/include-roots/${target})
  get_filename_component(parent ${root}/${folder} DIRECTORY)
  file(MAKE_DIRECTORY ${parent})
  if(NOT EXISTS ${root}/${folder})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${folder} ${root}/${folder} SYMBOLIC)
  endif()
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${root}>)
endfunction()

# delayq_library(NAME FOLDER sources...): a static library of src/FOLDER with its include root.
function(delayq_library name folder)
  add_library(${name} STATIC ${ARGN})
  delayq_include_root(${name} ${folder})
  delayq_unity(${name})
endfunction()

# With DELAYQ_UNITY, a target's sources compile as a few files of 8 each: the headers (Asio, Beast,
# fmt) are read and their templates instantiated once per 8 files instead of once per file, which
# takes the build from clean to about a third of the time under the sanitizers (a file that
# cannot share, such as one whose class holds types of an anonymous namespace, says
# SKIP_UNITY_BUILD_INCLUSION). The tests stay one file each: each has helpers of its own names.
function(delayq_unity target)
  if(DELAYQ_UNITY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
endfunction()
