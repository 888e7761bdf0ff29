# The CUDA half of the real backend: the NCCL communicator and the device helpers that use LibTorch's
# CUDA API (streams, events, the caching allocator's figures, CUDA generators). Built only against a
# LibTorch with CUDA (PARADYSE_TORCH_CUDA, set by the top level): with a CPU-only LibTorch nothing can
# run on a GPU, whatever NCCL is installed. NCCL is looked for first where pip puts it beside the
# LibTorch of a `torch` wheel (site-packages/nvidia/nccl, whose library is libnccl.so.2 with no
# unversioned link), so that the process loads the one NCCL its LibTorch was built with, then in the
# CUDA toolkit. Included from real_backend/CMakeLists.txt; sets PARADYSE_WITH_NCCL in the including
# scope. -DPARADYSE_NCCL=OFF skips NCCL on a machine that has it.
option(PARADYSE_NCCL "Build the NCCL communicator when LibTorch has CUDA and NCCL is found" ON)

set(PARADYSE_WITH_NCCL OFF)
if(NOT PARADYSE_TORCH_CUDA)
  return()
endif()
if(NOT PARADYSE_NCCL)
  message(STATUS "paradyse: PARADYSE_NCCL=OFF: the NCCL communicator is not built; GPUs run one rank "
                 "each, or several through Gloo (--gloo-on-device)")
  return()
endif()

find_package(CUDAToolkit QUIET)
# <site-packages>/torch/share/cmake/Torch → <site-packages>/nvidia/nccl
get_filename_component(_paradyse_site_packages "${Torch_DIR}/../../../.." ABSOLUTE)
set(_paradyse_pip_nccl "${_paradyse_site_packages}/nvidia/nccl")
# pip's NCCL first, on its own (LibTorch's configuration puts the toolkit on the search path).
find_path(PARADYSE_NCCL_INCLUDE_DIR nccl.h PATHS "${_paradyse_pip_nccl}/include" NO_DEFAULT_PATH)
find_library(PARADYSE_NCCL_LIBRARY NAMES nccl libnccl.so.2 PATHS "${_paradyse_pip_nccl}/lib" NO_DEFAULT_PATH)
find_path(PARADYSE_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
find_library(PARADYSE_NCCL_LIBRARY NAMES nccl libnccl.so.2
             HINTS "${CUDAToolkit_LIBRARY_DIR}" /usr/local/cuda/lib64 /usr/local/cuda/lib)
unset(_paradyse_site_packages)
unset(_paradyse_pip_nccl)

set(_paradyse_nccl_missing)
if(NOT CUDAToolkit_FOUND)
  list(APPEND _paradyse_nccl_missing "the CUDA toolkit (set CUDAToolkit_ROOT)")
endif()
if(NOT PARADYSE_NCCL_INCLUDE_DIR)
  list(APPEND _paradyse_nccl_missing "nccl.h (set PARADYSE_NCCL_INCLUDE_DIR)")
endif()
if(NOT PARADYSE_NCCL_LIBRARY)
  list(APPEND _paradyse_nccl_missing "libnccl (set PARADYSE_NCCL_LIBRARY)")
endif()
if(_paradyse_nccl_missing)
  list(JOIN _paradyse_nccl_missing ", " _paradyse_nccl_missing)
  message(STATUS "paradyse: NCCL not found (looked beside LibTorch's pip package and in the CUDA toolkit; "
                 "missing ${_paradyse_nccl_missing}): the NCCL communicator is not built; GPUs run one "
                 "rank each, or several through Gloo (--gloo-on-device)")
  unset(_paradyse_nccl_missing)
  return()
endif()
unset(_paradyse_nccl_missing)

add_library(paradyse_nccl_communicator STATIC ${CMAKE_CURRENT_LIST_DIR}/nccl_communicator.cpp)
target_include_directories(paradyse_nccl_communicator PUBLIC ${PROJECT_SOURCE_DIR})
# SYSTEM: warnings from NCCL's header are not ours to fix.
target_include_directories(paradyse_nccl_communicator SYSTEM PRIVATE ${PARADYSE_NCCL_INCLUDE_DIR})
target_link_libraries(paradyse_nccl_communicator PUBLIC ${TORCH_LIBRARIES} CUDA::cudart ${PARADYSE_NCCL_LIBRARY})
target_compile_definitions(paradyse_nccl_communicator PUBLIC PARADYSE_WITH_NCCL=1)
set(PARADYSE_WITH_NCCL ON)
message(STATUS "paradyse: NCCL communicator built against ${PARADYSE_NCCL_LIBRARY}")
