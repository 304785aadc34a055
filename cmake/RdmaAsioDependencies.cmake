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

# The Asio flavour: standalone Asio (the default) or Boost.Asio, chosen by
# RDMA_ASIO_ASIO; Asio's io_uring backend instead of epoll with RDMA_ASIO_IO_URING.
# The installed package config sets both to what the library was built with, and
# names the Asio it was built with (_rdma_asio_built_*): a consumer then finds that
# one first, and no other version of it (its types are in the library's interface).
if(NOT DEFINED RDMA_ASIO_ASIO)
  set(RDMA_ASIO_ASIO standalone)
endif()
if(NOT RDMA_ASIO_ASIO MATCHES "^(standalone|boost)$")
  message(FATAL_ERROR "RDMA_ASIO_ASIO is '${RDMA_ASIO_ASIO}': choose standalone or boost")
endif()
if(RDMA_ASIO_ASIO STREQUAL "boost")
  set(_rdma_asio_macro_prefix BOOST_ASIO)
else()
  set(_rdma_asio_macro_prefix ASIO)
endif()

# The number in "#define ASIO_VERSION 102201 // 1.22.1" of `header` (prefix ASIO or
# BOOST_ASIO) into `out`, and the same as "1.22.1" into `out`_TEXT.
function(_rdma_asio_read_asio_version header prefix out)
  file(STRINGS "${header}" line REGEX "^#define ${prefix}_VERSION [0-9]+")
  string(REGEX MATCH "_VERSION ([0-9]+)" _ "${line}")
  set(version "${CMAKE_MATCH_1}")
  if(NOT version)
    message(FATAL_ERROR "no ${prefix}_VERSION in ${header}")
  endif()
  math(EXPR major "${version} / 100000")
  math(EXPR minor "${version} / 100 % 1000")
  math(EXPR patch "${version} % 100")
  set(${out} "${version}" PARENT_SCOPE)
  set(${out}_TEXT "${major}.${minor}.${patch}" PARENT_SCOPE)
endfunction()

if(NOT TARGET rdma_asio::asio)
  add_library(rdma_asio::asio INTERFACE IMPORTED)
  if(RDMA_ASIO_ASIO STREQUAL "boost")
    if(_rdma_asio_built_boost_version)
      # The installed package: the Boost it was built with, found where it was
      # (unless this project points Boost_DIR or Boost_ROOT elsewhere), and no other
      # version.
      find_package(Boost ${_rdma_asio_built_boost_version} EXACT CONFIG
        HINTS "${_rdma_asio_built_boost_dir}")
      if(NOT Boost_FOUND)
        message(FATAL_ERROR "rdma_asio was built with Boost ${_rdma_asio_built_boost_version} "
          "(${_rdma_asio_built_boost_dir}), which this project does not find: point Boost_DIR "
          "or CMAKE_PREFIX_PATH at that Boost, or build rdma_asio with the Boost you use")
      endif()
    else()
      # Boost.Asio 1.81 (Debian 12's libboost1.81-dev) or later: 1.74, libboost-dev,
      # lacks per-operation cancellation, bind_allocator and associator. Boost 1.83
      # (Asio 1.28.2, for the io_uring backend): bookworm-backports' libboost1.83-dev,
      # or scripts/fetch-boost, which unpacks it beside the system's Boost.
      find_package(Boost 1.81 CONFIG)
      if(NOT Boost_FOUND)
        message(FATAL_ERROR "RDMA_ASIO_ASIO=boost needs Boost 1.81 or later (Boost.Asio and "
          "Boost.System, header-only): install libboost1.81-dev")
      endif()
    endif()
    target_link_libraries(rdma_asio::asio INTERFACE Boost::headers)
  else()
    # Standalone Asio is header-only and Debian ships no CMake config for it. The
    # installed package looks where the library's Asio was first, and accepts only
    # that version.
    find_path(RDMA_ASIO_ASIO_INCLUDE_DIR asio.hpp HINTS ${_rdma_asio_built_asio_include_dir})
    if(NOT RDMA_ASIO_ASIO_INCLUDE_DIR)
      message(FATAL_ERROR "standalone Asio (asio.hpp) not found: install libasio-dev")
    endif()
    if(_rdma_asio_built_asio_version)
      _rdma_asio_read_asio_version("${RDMA_ASIO_ASIO_INCLUDE_DIR}/asio/version.hpp" ASIO
        _rdma_asio_found_version)
      if(NOT _rdma_asio_found_version EQUAL _rdma_asio_built_asio_version)
        message(FATAL_ERROR "rdma_asio was built with standalone Asio "
          "${_rdma_asio_built_asio_version_text} (${_rdma_asio_built_asio_include_dir}), but "
          "this project finds Asio ${_rdma_asio_found_version_TEXT} in "
          "${RDMA_ASIO_ASIO_INCLUDE_DIR}: set RDMA_ASIO_ASIO_INCLUDE_DIR to the first one, or "
          "build rdma_asio with the Asio you use")
      endif()
    endif()
    target_include_directories(rdma_asio::asio INTERFACE "${RDMA_ASIO_ASIO_INCLUDE_DIR}")
    # Asio 1.22 recognises clang's coroutines only under the Coroutines TS
    # (__cpp_coroutines), which clang no longer defines in C++20 mode; it does have
    # the standard ones (__cpp_impl_coroutine, <coroutine>), which Asio then uses.
    target_compile_definitions(rdma_asio::asio INTERFACE ASIO_STANDALONE
      $<$<COMPILE_LANG_AND_ID:CXX,Clang>:ASIO_HAS_CO_AWAIT=1>)
  endif()
  if(RDMA_ASIO_IO_URING)
    # Asio's io_uring backend before Asio 1.28.1 (Boost 1.83) loses track of its
    # own requests: cancel requests go out with the user data of an earlier
    # request (fixed in Asio 1.27), a descriptor released with a wait pending is
    # reused while the kernel still holds that wait (1.28.0), and run_for()'s
    # timeouts are not cleaned up (1.28.1). rdma_asio cancels its waits whenever
    # nobody waits, so it hits all three: crashes, hangs and spurious completions
    # in the rxe tests with Debian 12's Asio 1.22.1 and Boost 1.81 (Asio 1.26).
    if(RDMA_ASIO_ASIO STREQUAL "boost")
      set(_rdma_asio_version_header "${Boost_INCLUDE_DIRS}/boost/asio/version.hpp")
    else()
      set(_rdma_asio_version_header "${RDMA_ASIO_ASIO_INCLUDE_DIR}/asio/version.hpp")
    endif()
    _rdma_asio_read_asio_version("${_rdma_asio_version_header}" ${_rdma_asio_macro_prefix}
      _rdma_asio_version)
    if(_rdma_asio_version LESS 102801)
      message(FATAL_ERROR "RDMA_ASIO_IO_URING=ON needs Asio 1.28.1 or later (Boost 1.83 for "
        "RDMA_ASIO_ASIO=boost: Debian 12's bookworm-backports has libboost1.83-dev, and "
        "scripts/fetch-boost unpacks it beside the system's Boost); this is Asio "
        "${_rdma_asio_version_TEXT} (${_rdma_asio_version_header}), whose io_uring backend "
        "sends cancel requests with stale user data and reuses descriptors that still have "
        "a wait in the kernel. Build with RDMA_ASIO_IO_URING=OFF (Asio's epoll backend), or "
        "with a newer Asio.")
    endif()
    # Every file of a program must see the same two macros: they change what an
    # io_context is made of. liburing 2.3 (liburing-dev) or later.
    pkg_check_modules(URING REQUIRED IMPORTED_TARGET liburing)
    target_compile_definitions(rdma_asio::asio INTERFACE
      ${_rdma_asio_macro_prefix}_HAS_IO_URING ${_rdma_asio_macro_prefix}_DISABLE_EPOLL)
    target_link_libraries(rdma_asio::asio INTERFACE PkgConfig::URING)
  endif()
endif()
