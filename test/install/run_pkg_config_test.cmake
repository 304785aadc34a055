# Installs rdma_asio from BUILD_DIR into a private prefix, then builds programs the
# way a Makefile user does, with nothing but `pkg-config --cflags --libs rdma_asio`
# and the C++ compiler: the install test's consumer, the README's quick start
# (samples/quick_start.cpp with the samples' parser) and docs/work-requests.md's
# first program (with `pkg-config --cflags --libs rdma_asio_testing`); with mlx5
# direct verbs, a DEVX header without -DRDMA_ASIO_HAVE_MLX5DV=1. Runs the consumer
# and `quick_start --help`, which need no RDMA device.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc TIMEOUT 300)
  if(NOT rc EQUAL 0)
    string(JOIN " " cmd ${ARGN})
    message(FATAL_ERROR "failed (${rc}): ${cmd}")
  endif()
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
set(pc_dir ${prefix}/${LIBDIR}/pkgconfig)
if(NOT EXISTS ${pc_dir}/rdma_asio.pc)
  message(FATAL_ERROR "no rdma_asio.pc installed in ${pc_dir}")
endif()

# Only the install tree: no path of the build or source tree may leak into it.
set(ENV{PKG_CONFIG_PATH} ${pc_dir})
execute_process(COMMAND pkg-config --cflags --libs rdma_asio
  RESULT_VARIABLE rc OUTPUT_VARIABLE flags ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE
  TIMEOUT 60)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config --cflags --libs rdma_asio failed (${rc}): ${err}")
endif()
message(STATUS "pkg-config --cflags --libs rdma_asio: ${flags}")
string(REPLACE "${prefix}/" "" outside_prefix "${flags}")
foreach(tree ${BUILD_DIR} ${SOURCE_DIR})
  string(FIND "${outside_prefix}" "${tree}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "the flags name ${tree}, not the install tree")
  endif()
endforeach()
separate_arguments(flags UNIX_COMMAND "${flags}")
# The build tree's sanitizer flags, if any: its library is instrumented.
separate_arguments(sanitizer UNIX_COMMAND "${FLAGS}")
list(PREPEND flags ${sanitizer})

# As documented: the compiler, -std=c++20, the sources, then the flags (libraries
# after the objects that need them).
set(std -std=c++20)
if(CXX_ID STREQUAL "Clang")
  list(APPEND std -DASIO_HAS_CO_AWAIT=1) # see the comment in rdma_asio.pc
endif()
run(${CXX} ${std} -Wall -Wextra -Werror -o ${WORK_DIR}/consumer
  ${SOURCE_DIR}/test/install/consumer/main.cpp ${flags})
# What the library was built with is in rdma_asio/config.hpp too: with mlx5 direct
# verbs, a file that includes a DEVX header compiles without the
# -DRDMA_ASIO_HAVE_MLX5DV=1 of the flags (a Makefile that adds only the include
# path, or copies the flags of an older pkg-config file).
execute_process(COMMAND pkg-config --cflags rdma_asio
  RESULT_VARIABLE rc OUTPUT_VARIABLE cflags OUTPUT_STRIP_TRAILING_WHITESPACE TIMEOUT 60)
separate_arguments(cflags UNIX_COMMAND "${cflags}")
list(FIND cflags -DRDMA_ASIO_HAVE_MLX5DV=1 at) # (a script has no IN_LIST: policy CMP0057)
if(NOT at EQUAL -1)
  list(REMOVE_ITEM cflags -DRDMA_ASIO_HAVE_MLX5DV=1)
  file(WRITE ${WORK_DIR}/devx_without_define.cpp "#include <rdma_asio/devx_eventfd.hpp>\n")
  run(${CXX} ${std} -Wall -Wextra -Werror -fsyntax-only ${WORK_DIR}/devx_without_define.cpp ${cflags})
endif()
run(${CXX} ${std} -Wall -Wextra -Werror -I${SOURCE_DIR}/samples -o ${WORK_DIR}/quick_start
  ${SOURCE_DIR}/samples/quick_start.cpp ${SOURCE_DIR}/samples/common/command_line.cpp
  ${SOURCE_DIR}/samples/common/rdma_support.cpp ${flags})
# The library is shared unless it was built static: a program built this way takes
# it (the linker prefers the .so), and finds it at run time where the README says a
# program whose library is installed outside the loader's path does, in
# LD_LIBRARY_PATH.
if(EXISTS ${prefix}/${LIBDIR}/librdma_asio.so)
  execute_process(COMMAND readelf -d ${WORK_DIR}/consumer OUTPUT_VARIABLE dynamic TIMEOUT 60)
  if(NOT dynamic MATCHES "NEEDED[^\n]*librdma_asio\\.so")
    message(FATAL_ERROR "the consumer is not linked against librdma_asio.so:\n${dynamic}")
  endif()
endif()
set(ENV{LD_LIBRARY_PATH} ${prefix}/${LIBDIR})
run(${WORK_DIR}/consumer)
# The test helpers, with their own pkg-config file.
execute_process(COMMAND pkg-config --cflags --libs rdma_asio_testing
  RESULT_VARIABLE rc OUTPUT_VARIABLE testing_flags ERROR_VARIABLE err
  OUTPUT_STRIP_TRAILING_WHITESPACE TIMEOUT 60)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config --cflags --libs rdma_asio_testing failed (${rc}): ${err}")
endif()
separate_arguments(testing_flags UNIX_COMMAND "${testing_flags}")
list(PREPEND testing_flags ${sanitizer})
run(${CXX} ${std} -Wall -Wextra -Werror -o ${WORK_DIR}/consumer_test
  ${SOURCE_DIR}/test/install/consumer/app_test.cpp ${testing_flags})
run(${WORK_DIR}/consumer_test)
# docs/work-requests.md's first program, built as that page says (it runs on a
# device: rxe.sample.first_work_request runs it).
run(${CXX} ${std} -Wall -Wextra -Werror -o ${WORK_DIR}/first_work_request
  ${SOURCE_DIR}/samples/first_work_request.cpp ${testing_flags})
execute_process(COMMAND ${WORK_DIR}/quick_start --help RESULT_VARIABLE rc OUTPUT_VARIABLE help
  TIMEOUT 30)
if(NOT rc EQUAL 0 OR NOT help MATCHES "^Usage: quick_start")
  message(FATAL_ERROR "quick_start --help: exit status ${rc}, output:\n${help}")
endif()
