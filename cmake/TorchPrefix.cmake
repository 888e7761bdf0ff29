# LibTorch's CMake configuration finds its libraries with find_library(<name> PATHS <its prefix>/lib),
# which looks in the system's folders first: on a machine that also has Debian's LibTorch (/usr/lib),
# a pip LibTorch named by CMAKE_PREFIX_PATH or Torch_DIR would link Debian's libtorch and libc10 beside
# its own, and the program would abort at start. So the libraries of the LibTorch that will be found
# are looked up in its own prefix first, into the cache variables its configuration then reuses.
set(_paradyse_torch_dir "${Torch_DIR}")
if(NOT _paradyse_torch_dir)
  find_path(PARADYSE_TORCH_CMAKE_DIR TorchConfig.cmake HINTS ${CMAKE_PREFIX_PATH}
            PATH_SUFFIXES Torch share/cmake/Torch NO_DEFAULT_PATH)
  set(_paradyse_torch_dir "${PARADYSE_TORCH_CMAKE_DIR}")
endif()
if(_paradyse_torch_dir)
  get_filename_component(_paradyse_torch_prefix "${_paradyse_torch_dir}/../../.." ABSOLUTE)
  find_library(TORCH_LIBRARY torch PATHS "${_paradyse_torch_prefix}/lib" NO_DEFAULT_PATH)
  find_library(C10_CUDA_LIBRARY c10_cuda PATHS "${_paradyse_torch_prefix}/lib" NO_DEFAULT_PATH)
  foreach(_paradyse_lib c10 torch_cpu torch_cuda c10_cuda)
    find_library(${_paradyse_lib}_LIBRARY ${_paradyse_lib} PATHS "${_paradyse_torch_prefix}/lib" NO_DEFAULT_PATH)
  endforeach()
  unset(_paradyse_lib)
  unset(_paradyse_torch_prefix)
endif()
unset(_paradyse_torch_dir)
