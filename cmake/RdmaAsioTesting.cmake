# rdma_asio_add_rxe_tests(<target> [NAME <test-name>] [TIMEOUT <seconds>]
#                         [LABELS <label>...] [ARGS <arg>...])
#
# Registers the test program <target> with ctest (label rxe, plus LABELS) so that it
# runs where an RDMA device exists: through rdma-asio-vm, which runs it directly on
# a machine with a device (and inside the test VM) and otherwise boots the test VM
# once for the whole program and runs it there. So `ctest -L rxe` works on any
# machine, and `rdma-asio-vm -- ctest -L rxe` runs every such test in one boot.
# TIMEOUT (default 1800) bounds the program; ctest's own limit is a little longer,
# for the boot. Exit status 77 is reported as skipped.
function(rdma_asio_add_rxe_tests target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "NAME;TIMEOUT" "LABELS;ARGS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "rdma_asio_add_rxe_tests: unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "rdma_asio_add_rxe_tests: ${target} is not a target")
  endif()
  if(NOT RDMA_ASIO_VM_COMMAND OR NOT EXISTS "${RDMA_ASIO_VM_COMMAND}")
    message(FATAL_ERROR "rdma_asio_add_rxe_tests: rdma-asio-vm not found (${RDMA_ASIO_VM_COMMAND})")
  endif()
  if(NOT arg_NAME)
    set(arg_NAME ${target})
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 1800)
  endif()
  math(EXPR ctest_timeout "${arg_TIMEOUT} + 600")
  set(labels rxe ${arg_LABELS})
  add_test(NAME ${arg_NAME}
    COMMAND ${RDMA_ASIO_VM_COMMAND} --timeout ${arg_TIMEOUT} -- $<TARGET_FILE:${target}> ${arg_ARGS})
  set_tests_properties(${arg_NAME} PROPERTIES
    LABELS "${labels}" TIMEOUT ${ctest_timeout} SKIP_RETURN_CODE 77)
endfunction()
