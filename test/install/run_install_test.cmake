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

# A project that expects the other Asio flavour is refused by find_package, with a
# message that names both and the way out.
if(ASIO STREQUAL "boost")
  set(other standalone)
else()
  set(other boost)
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/mismatch
  -G ${GENERATOR} ${compiler} -DCMAKE_PREFIX_PATH=${prefix} -DRDMA_ASIO_ASIO=${other}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(expected "was built for RDMA_ASIO_ASIO=${ASIO} .*asks for ${other}: build and install rdma_asio with -DRDMA_ASIO_ASIO=${other}")
string(REGEX REPLACE "[ \n]+" " " err_flat "${err}")
if(rc EQUAL 0 OR NOT err_flat MATCHES "${expected}")
  message(FATAL_ERROR "a consumer asking for ${other} Asio: exit status ${rc}, expected a "
    "failure matching '${expected}'; stderr:\n${err}")
endif()
message(STATUS "a consumer asking for ${other} Asio is refused: ${err_flat}")

# The same project expecting this flavour, as it says with RDMA_ASIO_ASIO.
run(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/build -G ${GENERATOR} ${compiler}
  -DCMAKE_PREFIX_PATH=${prefix} -DRDMA_ASIO_ASIO=${ASIO})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/app)
run(${WORK_DIR}/build/app_test)

# Every public header on its own (test/install/headers), two compilations at a time.
run(${CMAKE_COMMAND} -S ${HEADERS_DIR} -B ${WORK_DIR}/headers -G ${GENERATOR} ${compiler}
  -DCMAKE_PREFIX_PATH=${prefix})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/headers --parallel 2)
