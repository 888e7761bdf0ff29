# The NCCL communicator, built only where the CUDA toolkit and NCCL are installed: it is plain C++
# against the CUDA runtime and NCCL C APIs (no nvcc), so a machine without them still builds the rest
# of the real backend, which then runs on CPU with Gloo. Included from real_backend/CMakeLists.txt
# after find_package(Torch); sets PARADYSE_WITH_NCCL in the including scope and, when ON, defines the
# target paradyse_nccl_communicator. -DPARADYSE_NCCL=OFF skips it on a machine that has NCCL.
option(PARADYSE_NCCL "Build the NCCL communicator when CUDA and NCCL are found" ON)

set(PARADYSE_WITH_NCCL OFF)
if(NOT PARADYSE_NCCL)
  message(STATUS "paradyse: PARADYSE_NCCL=OFF: the NCCL communicator is not built; the real backend "
                 "runs on CPU with Gloo")
  return()
endif()

find_package(CUDAToolkit QUIET)
set(_paradyse_cuda_lib_hints "${CUDAToolkit_LIBRARY_DIR}" /usr/local/cuda/lib64 /usr/local/cuda/lib)
find_path(PARADYSE_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
find_library(PARADYSE_NCCL_LIBRARY nccl HINTS ${_paradyse_cuda_lib_hints})
unset(_paradyse_cuda_lib_hints)

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
  message(STATUS "paradyse: CUDA/NCCL not found (looked for the CUDA toolkit, nccl.h and libnccl, also "
                 "under /usr/local/cuda; missing ${_paradyse_nccl_missing}): the NCCL communicator is not "
                 "built; the real backend runs on CPU with Gloo")
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
