# Installs the library, its headers and a CMake package for find_package(rdma_asio).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS rdma_asio rdma_asio_testing EXPORT rdma_asio-targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/rdma_asio DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_BINARY_DIR}/include/rdma_asio/config.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/rdma_asio)

set(RDMA_ASIO_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/rdma_asio)
install(EXPORT rdma_asio-targets NAMESPACE rdma_asio:: DESTINATION ${RDMA_ASIO_CMAKE_DIR})
set(RDMA_ASIO_INSTALL_BINDIR ${CMAKE_INSTALL_BINDIR})
# The Asio this library is built with, for the package config to find again
# (RdmaAsioDependencies.cmake): Boost's version and package directory, or standalone
# Asio's version and include directory.
set(RDMA_ASIO_BUILT_BOOST_VERSION "")
set(RDMA_ASIO_BUILT_BOOST_DIR "")
set(RDMA_ASIO_BUILT_ASIO_VERSION "")
set(RDMA_ASIO_BUILT_ASIO_VERSION_TEXT "")
set(RDMA_ASIO_BUILT_ASIO_INCLUDE_DIR "")
if(RDMA_ASIO_ASIO STREQUAL "boost")
  set(RDMA_ASIO_BUILT_BOOST_VERSION "${Boost_VERSION}")
  set(RDMA_ASIO_BUILT_BOOST_DIR "${Boost_DIR}")
else()
  _rdma_asio_read_asio_version("${RDMA_ASIO_ASIO_INCLUDE_DIR}/asio/version.hpp" ASIO
    RDMA_ASIO_BUILT_ASIO_VERSION)
  set(RDMA_ASIO_BUILT_ASIO_INCLUDE_DIR "${RDMA_ASIO_ASIO_INCLUDE_DIR}")
endif()
configure_package_config_file(cmake/rdma_asioConfig.cmake.in
  ${PROJECT_BINARY_DIR}/rdma_asioConfig.cmake INSTALL_DESTINATION ${RDMA_ASIO_CMAKE_DIR}
  PATH_VARS RDMA_ASIO_INSTALL_BINDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/rdma_asioConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/rdma_asioConfig.cmake
  ${PROJECT_BINARY_DIR}/rdma_asioConfigVersion.cmake
  cmake/RdmaAsioDependencies.cmake
  cmake/RdmaAsioTesting.cmake
  DESTINATION ${RDMA_ASIO_CMAKE_DIR})

# The test VM as a command for users' tests (docs/testing-your-code.md).
install(PROGRAMS test/vm/rdma-asio-vm DESTINATION ${CMAKE_INSTALL_BINDIR})
install(PROGRAMS test/vm/build-guest.sh test/vm/run-in-guest.sh test/vm/guest-init.sh
  test/vm/guest-setup.sh test/vm/serve-then-run.sh
  DESTINATION ${CMAKE_INSTALL_DATADIR}/rdma_asio/vm)
# backports-apt.sh: sourced by build-guest.sh for a kernel of bookworm-backports
# (rdma-asio-vm --kernel).
install(FILES test/vm/modules.list test/vm/backports-apt.sh
  DESTINATION ${CMAKE_INSTALL_DATADIR}/rdma_asio/vm)

# rdma_asio.pc for pkg-config users, beside the CMake package. Relocatable: the
# prefix is found from the file's own place (${pcfiledir}), so an install with
# `cmake --install --prefix DIR` or DESTDIR works as it is.
set(RDMA_ASIO_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE ${RDMA_ASIO_PC_DIR})
  set(RDMA_ASIO_PC_PREFIX ${CMAKE_INSTALL_PREFIX})
else()
  file(RELATIVE_PATH RDMA_ASIO_PC_PREFIX /root/${RDMA_ASIO_PC_DIR} /root)
  set(RDMA_ASIO_PC_PREFIX "\${pcfiledir}/${RDMA_ASIO_PC_PREFIX}")
endif()
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE ${CMAKE_INSTALL_${dir}})
    set(RDMA_ASIO_PC_${dir} ${CMAKE_INSTALL_${dir}})
  else()
    set(RDMA_ASIO_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
# What the CMake target carries as usage requirements, in pkg-config's words.
set(RDMA_ASIO_PC_REQUIRES "")
set(RDMA_ASIO_PC_DEFINES "")
if(RDMA_ASIO_HAVE_MLX5DV)
  string(APPEND RDMA_ASIO_PC_REQUIRES " libmlx5")
  string(APPEND RDMA_ASIO_PC_DEFINES " -DRDMA_ASIO_HAVE_MLX5DV=1")
endif()
# The Asio the library was built with: header-only, so its include directory, where
# the compiler would not look by itself (Boost unpacked beside the system's).
if(RDMA_ASIO_ASIO STREQUAL "boost")
  set(RDMA_ASIO_PC_ASIO "Boost.Asio of Boost ${Boost_VERSION} (${Boost_INCLUDE_DIRS})")
  set(_rdma_asio_pc_asio_include "${Boost_INCLUDE_DIRS}")
else()
  set(RDMA_ASIO_PC_ASIO "standalone Asio ${RDMA_ASIO_BUILT_ASIO_VERSION_TEXT} (${RDMA_ASIO_ASIO_INCLUDE_DIR})")
  set(_rdma_asio_pc_asio_include "${RDMA_ASIO_ASIO_INCLUDE_DIR}")
  string(APPEND RDMA_ASIO_PC_DEFINES " -DASIO_STANDALONE")
endif()
if(NOT _rdma_asio_pc_asio_include IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
  string(APPEND RDMA_ASIO_PC_DEFINES " -I${_rdma_asio_pc_asio_include}")
endif()
if(RDMA_ASIO_IO_URING) # the macros' prefix is RdmaAsioDependencies.cmake's
  string(APPEND RDMA_ASIO_PC_REQUIRES " liburing")
  string(APPEND RDMA_ASIO_PC_DEFINES
    " -D${_rdma_asio_macro_prefix}_HAS_IO_URING -D${_rdma_asio_macro_prefix}_DISABLE_EPOLL")
endif()
configure_file(cmake/rdma_asio.pc.in ${PROJECT_BINARY_DIR}/rdma_asio.pc @ONLY)
configure_file(cmake/rdma_asio_testing.pc.in ${PROJECT_BINARY_DIR}/rdma_asio_testing.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/rdma_asio.pc ${PROJECT_BINARY_DIR}/rdma_asio_testing.pc
  DESTINATION ${RDMA_ASIO_PC_DIR})
