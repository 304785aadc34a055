# Installs rdma_asio from BUILD_DIR into a private prefix, then configures, builds and
# runs a separate project that finds it with find_package(rdma_asio). ASIO is the
# flavour the build tree was configured with (standalone or boost); CXX its compiler
# and FLAGS (may be empty) its sanitizer flags, which the projects are built with.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(JOIN " " cmd ${ARGN})
    message(FATAL_ERROR "failed (${rc}): ${cmd}")
  endif()
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
set(compiler -DCMAKE_CXX_COMPILER=${CXX} "-DCMAKE_CXX_FLAGS=${FLAGS}"
  "-DCMAKE_EXE_LINKER_FLAGS=${FLAGS}")

# expect_refusal(WHAT PATTERN ARGS...): configuring the consumer with ARGS fails, and
# its error output (whitespace runs joined) matches PATTERN.
function(expect_refusal what pattern)
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -G ${GENERATOR} ${compiler}
    ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REGEX REPLACE "[ \n]+" " " err_flat "${err}")
  if(rc EQUAL 0 OR NOT err_flat MATCHES "${pattern}")
    message(FATAL_ERROR "${what}: exit status ${rc}, expected a failure matching "
      "'${pattern}'; stderr:\n${err}")
  endif()
  message(STATUS "${what} is refused: ${err_flat}")
endfunction()

# A project that expects the other Asio flavour is refused by find_package, with a
# message that names both and the way out.
if(ASIO STREQUAL "boost")
  set(other standalone)
else()
  set(other boost)
endif()
expect_refusal("a consumer asking for ${other} Asio"
  "was built for RDMA_ASIO_ASIO=${ASIO} .*asks for ${other}: build and install rdma_asio with -DRDMA_ASIO_ASIO=${other}"
  -B ${WORK_DIR}/mismatch -DCMAKE_PREFIX_PATH=${prefix} -DRDMA_ASIO_ASIO=${other})

# The package accepts only the Asio version it was built with (the library's
# interface has Asio's types): a copy of the install that records another version
# is refused, with a message naming it.
file(COPY ${prefix}/ DESTINATION ${WORK_DIR}/prefix-other)
file(GLOB_RECURSE other_config ${WORK_DIR}/prefix-other/*/rdma_asioConfig.cmake)
file(READ "${other_config}" text)
if(ASIO STREQUAL "boost")
  string(REGEX REPLACE "_rdma_asio_built_boost_version \"[^\"]*\"" "_rdma_asio_built_boost_version \"9.99.0\"" text "${text}")
  set(expected "rdma_asio was built with Boost 9.99.0 .* which this project does not find")
else()
  string(REGEX REPLACE "_rdma_asio_built_asio_version \"[^\"]*\"" "_rdma_asio_built_asio_version \"999999\"" text "${text}")
  set(expected "rdma_asio was built with standalone Asio .* but this project finds Asio")
endif()
file(WRITE "${other_config}" "${text}")
expect_refusal("a package recording another Asio version" "${expected}"
  -B ${WORK_DIR}/other-version -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix-other)

# The same project expecting this flavour, as it says with RDMA_ASIO_ASIO.
run(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/build -G ${GENERATOR} ${compiler}
  -DCMAKE_PREFIX_PATH=${prefix} -DRDMA_ASIO_ASIO=${ASIO})
# ... and it found the Asio the library was built with, not another one on the
# default paths (Boost 1.83 unpacked beside Debian's 1.81, for one).
file(STRINGS ${WORK_DIR}/build/CMakeCache.txt found REGEX "^(Boost_DIR|RDMA_ASIO_ASIO_INCLUDE_DIR):")
if(ASIO STREQUAL "boost")
  set(want "Boost_DIR:PATH=${BUILT_ASIO}")
else()
  set(want "RDMA_ASIO_ASIO_INCLUDE_DIR:PATH=${BUILT_ASIO}")
endif()
list(FIND found "${want}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the consumer found ${found}, expected ${want}")
endif()
message(STATUS "the consumer found the library's Asio: ${want}")
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/app)
run(${WORK_DIR}/build/app_test)

# Every public header on its own (test/install/headers), two compilations at a time;
# not in a sanitized tree (CHECK_HEADERS, test/CMakeLists.txt).
if(CHECK_HEADERS)
  run(${CMAKE_COMMAND} -S ${HEADERS_DIR} -B ${WORK_DIR}/headers -G ${GENERATOR} ${compiler}
    -DCMAKE_PREFIX_PATH=${prefix})
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/headers --parallel 2)
else()
  message(STATUS "each public header on its own: checked in the unsanitized trees")
endif()
