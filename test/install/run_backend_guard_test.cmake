# Checks the guards against a wrong Asio backend, in both places a program meets
# them (cmake -P):
#  - configuring rdma_asio with RDMA_ASIO_IO_URING=ON and an Asio older than 1.28.1
#    fails with a message naming the version it needs and the one it found (and
#    succeeds past that check with a newer Asio);
#  - a file compiled without the library's CMake package or rdma_asio.pc meets the
#    header's #error when its backend macros differ from the library's, or ask for
#    io_uring on an Asio that is too old.
#
#   -D SOURCE_DIR=  the checkout      -D WORK_DIR=  scratch directory
#   -D ASIO=standalone|boost          -D CXX=  the compiler
#   -D ASIO_INCLUDE_DIR=  where asio.hpp is (standalone)
#   -D BOOST_INCLUDE_DIR=  where boost/asio.hpp is (boost)
#   -D BOOST_DIR=  the build's Boost package directory (boost)
# The nested configure and the hand compiles use the build's Asio, wherever it is
# (Boost 1.83 unpacked beside the system's 1.81, for one).
cmake_minimum_required(VERSION 3.20)
foreach(var SOURCE_DIR WORK_DIR ASIO CXX)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_backend_guard_test: ${var} not set")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

if(ASIO STREQUAL "boost")
  set(prefix BOOST_ASIO)
  set(version_header "${BOOST_INCLUDE_DIR}/boost/asio/version.hpp")
  set(boost 1)
  set(asio_include "${BOOST_INCLUDE_DIR}")
  set(find_asio -DBoost_DIR=${BOOST_DIR})
else()
  set(prefix ASIO)
  set(version_header "${ASIO_INCLUDE_DIR}/asio/version.hpp")
  set(boost 0)
  set(asio_include "${ASIO_INCLUDE_DIR}")
  set(find_asio -DRDMA_ASIO_ASIO_INCLUDE_DIR=${ASIO_INCLUDE_DIR})
endif()
file(STRINGS "${version_header}" line REGEX "^#define ${prefix}_VERSION [0-9]+")
string(REGEX MATCH "_VERSION ([0-9]+)" _ "${line}")
set(version "${CMAKE_MATCH_1}")
if(NOT version)
  message(FATAL_ERROR "no ${prefix}_VERSION in ${version_header}")
endif()
math(EXPR major "${version} / 100000")
math(EXPR minor "${version} / 100 % 1000")
math(EXPR patch "${version} % 100")
set(found "${major}.${minor}.${patch}")
if(version LESS 102801)
  set(too_old TRUE)
else()
  set(too_old FALSE)
endif()
message(STATUS "Asio ${found} (${version_header})")

# 1. Configuring the library.
execute_process(
  COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/configure"
    -DRDMA_ASIO_ASIO=${ASIO} -DRDMA_ASIO_IO_URING=ON ${find_asio}
    -DRDMA_ASIO_BUILD_TESTS=OFF -DRDMA_ASIO_BUILD_SAMPLES=OFF -DRDMA_ASIO_BUILD_BENCH=OFF
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX REPLACE "[ \n]+" " " said "${out}${err}")
if(too_old)
  if(rc EQUAL 0)
    message(FATAL_ERROR "RDMA_ASIO_IO_URING=ON was accepted with Asio ${found}")
  endif()
  foreach(expected "needs Asio 1.28.1 or later" "this is Asio ${found}" "RDMA_ASIO_IO_URING=OFF")
    string(FIND "${said}" "${expected}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "the refusal does not say '${expected}':\n${out}${err}")
    endif()
  endforeach()
  message(STATUS "configure refused io_uring with Asio ${found}, as it should")
elseif(NOT rc EQUAL 0)
  message(FATAL_ERROR "RDMA_ASIO_IO_URING=ON failed with Asio ${found}:\n${out}${err}")
endif()

# 2. The header's guards, for a file built by hand. config.hpp as the library
# would have installed it, for each backend.
function(try_header name library_io_uring macros expected)
  set(dir "${WORK_DIR}/${name}")
  set(RDMA_ASIO_CONFIG_BOOST ${boost})
  set(RDMA_ASIO_CONFIG_IO_URING ${library_io_uring})
  configure_file("${SOURCE_DIR}/cmake/config.hpp.in" "${dir}/include/rdma_asio/config.hpp" @ONLY)
  file(WRITE "${dir}/main.cpp" "#include <rdma_asio/detail/core/asio_flavour.hpp>\nint main() {}\n")
  set(defines)
  if(NOT boost)
    list(APPEND defines -DASIO_STANDALONE)
  endif()
  foreach(m ${macros})
    list(APPEND defines -D${prefix}_${m})
  endforeach()
  execute_process(
    COMMAND ${CXX} -std=c++20 -fsyntax-only ${defines} -I${dir}/include
      -I${SOURCE_DIR}/include -I${asio_include} ${dir}/main.cpp
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(expected STREQUAL "")
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${name}: did not compile:\n${out}${err}")
    endif()
  else()
    string(FIND "${out}${err}" "${expected}" at)
    if(rc EQUAL 0 OR at EQUAL -1)
      message(FATAL_ERROR "${name}: expected an error saying '${expected}', got (status ${rc}):\n${out}${err}")
    endif()
  endif()
  message(STATUS "${name}: as expected")
endfunction()

try_header(epoll_library_epoll_file 0 "" "")
try_header(epoll_library_io_uring_file 0 "HAS_IO_URING;DISABLE_EPOLL"
  "rdma_asio was built for Asio's epoll backend")
try_header(io_uring_library_epoll_file 1 ""
  "rdma_asio was built for Asio's io_uring backend")
if(too_old)
  try_header(io_uring_on_old_asio 1 "HAS_IO_URING;DISABLE_EPOLL" "needs Asio 1.28.1 or later")
else()
  try_header(io_uring_on_new_asio 1 "HAS_IO_URING;DISABLE_EPOLL" "")
endif()
