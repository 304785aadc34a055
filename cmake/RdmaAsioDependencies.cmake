# Finds what rdma_asio builds against. Also used by the installed package config,
# so a consumer's find_package(rdma_asio) finds the same things the same way.
include_guard(GLOBAL)

find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
pkg_check_modules(IBVERBS REQUIRED IMPORTED_TARGET libibverbs)
pkg_check_modules(RDMACM REQUIRED IMPORTED_TARGET librdmacm)
pkg_check_modules(IBUMAD REQUIRED IMPORTED_TARGET libibumad)

# mlx5 direct verbs (DEVX) are optional: only where libmlx5 and its header exist.
pkg_check_modules(MLX5 QUIET IMPORTED_TARGET libmlx5)
find_path(RDMA_ASIO_MLX5DV_INCLUDE_DIR infiniband/mlx5dv.h HINTS ${MLX5_INCLUDE_DIRS})
if(MLX5_FOUND AND RDMA_ASIO_MLX5DV_INCLUDE_DIR)
  set(RDMA_ASIO_HAVE_MLX5DV ON)
else()
  set(RDMA_ASIO_HAVE_MLX5DV OFF)
endif()

# Standalone Asio is header-only and Debian ships no CMake config for it.
if(NOT TARGET rdma_asio::asio)
  find_path(RDMA_ASIO_ASIO_INCLUDE_DIR asio.hpp)
  if(NOT RDMA_ASIO_ASIO_INCLUDE_DIR)
    message(FATAL_ERROR "standalone Asio (asio.hpp) not found: install libasio-dev")
  endif()
  add_library(rdma_asio::asio INTERFACE IMPORTED)
  set_target_properties(rdma_asio::asio PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${RDMA_ASIO_ASIO_INCLUDE_DIR}"
    # Asio 1.22 recognises clang's coroutines only under the Coroutines TS
    # (__cpp_coroutines), which clang no longer defines in C++20 mode; it does have
    # the standard ones (__cpp_impl_coroutine, <coroutine>), which Asio then uses.
    INTERFACE_COMPILE_DEFINITIONS "ASIO_STANDALONE;$<$<COMPILE_LANG_AND_ID:CXX,Clang>:ASIO_HAS_CO_AWAIT=1>")
endif()
