# Installs the library, its headers and a CMake package for find_package(rdma_asio).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS rdma_asio EXPORT rdma_asio-targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/rdma_asio DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(RDMA_ASIO_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/rdma_asio)
install(EXPORT rdma_asio-targets NAMESPACE rdma_asio:: DESTINATION ${RDMA_ASIO_CMAKE_DIR})
configure_package_config_file(cmake/rdma_asioConfig.cmake.in
  ${PROJECT_BINARY_DIR}/rdma_asioConfig.cmake INSTALL_DESTINATION ${RDMA_ASIO_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/rdma_asioConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/rdma_asioConfig.cmake
  ${PROJECT_BINARY_DIR}/rdma_asioConfigVersion.cmake
  cmake/RdmaAsioDependencies.cmake
  DESTINATION ${RDMA_ASIO_CMAKE_DIR})
