# Each sample's command line: --help and bad arguments (label unit; no device
# needed). rdma_asio_sample_cli_test(TARGET [BAD_ARGS]...): each BAD_ARGS is one
# invocation that must be a usage error (exit 2). Every sample program the build
# makes (samples/CMakeLists.txt's rdma_asio_sample_program) gets this test, with
# --help and an unknown option, whether or not it is named below: a new sample is
# checked without being added to a list.
function(rdma_asio_sample_cli_test target)
  if(TARGET ${target})
    add_test(NAME unit.sample.${target}.command_line
      COMMAND ${CMAKE_CURRENT_LIST_DIR}/check_cli.sh $<TARGET_FILE:${target}> ${ARGN})
    set_tests_properties(unit.sample.${target}.command_line PROPERTIES LABELS unit TIMEOUT 60)
    set_property(GLOBAL APPEND PROPERTY RDMA_ASIO_SAMPLES_CLI_TESTED ${target})
  endif()
endfunction()

rdma_asio_sample_cli_test(async_watch "-d" "extra-operand")
rdma_asio_sample_cli_test(sm_watch "--port 0" "-P x" "--port 256" "--ugid nonsense" "--mgid ff12::1:2:3:4:5:6:7:8:9" "--ca" "-C ibsim0 extra-operand")
rdma_asio_sample_cli_test(devx_events "-d" "extra-operand" "-d rxe0 extra-operand")
foreach(pingpong rc_pingpong rc_pingpong_callbacks rc_pingpong_ops)
  rdma_asio_sample_cli_test(${pingpong} "-m 1000" "-m x" "-p x" "-p 70000" "-i 0" "-n 0" "-s 0"
    "-l 16" "-g 256" "--spin x" "-d" "host1 host2" "--spin=10" "--adaptive-spin=10 host1"
    "-e --adaptive-spin=x")
endforeach()
rdma_asio_sample_cli_test(quick_start "-d" "extra-operand")
rdma_asio_sample_cli_test(first_work_request "rxe0 extra-operand")
rdma_asio_sample_cli_test(device_info "-d" "-i" "-i 0" "-i 256" "-i port" "extra-operand")
rdma_asio_sample_cli_test(echo_server "--port 65536" "-p x" "--address 10.0.0" "-s 0" "--size"
  "extra-operand")
rdma_asio_sample_cli_test(echo_client "--port 18700" "--server 10.0.0.1 -c 0" "-a not-an-address"
  "-a 10.0.0.1 -n -1" "-a 10.0.0.1 --size 0" "-a 10.0.0.1 --abort-after x" "-a 10.0.0.1 extra")
rdma_asio_sample_cli_test(kv_server "--port 65536" "-a 10.0.0" "--slots 0" "--slot-size 80"
  "extra-operand")
rdma_asio_sample_cli_test(kv_client "get k" "-a 10.0.0.1" "-a 10.0.0.1 get" "-a 10.0.0.1 put k"
  "-a 10.0.0.1 fetch k" "-a 10.0.0.1 --repeat 0 get k" "-a not-an-address get k")
rdma_asio_sample_cli_test(rpc_server "--port 65536" "-a 10.0.0" "--depth 0" "--depth 65537"
  "--threads 0" "--threads 65"
  "extra-operand")
rdma_asio_sample_cli_test(rpc_client "--port 18730" "-a 10.0.0.1 -c 0" "-a not-an-address"
  "-a 10.0.0.1 -n -1" "-a 10.0.0.1 --window 0" "-a 10.0.0.1 --deadline 0" "-a 10.0.0.1 extra")
# The samples not named above: --help and an unknown option.
get_property(sample_programs GLOBAL PROPERTY RDMA_ASIO_SAMPLE_PROGRAMS)
get_property(samples_cli_tested GLOBAL PROPERTY RDMA_ASIO_SAMPLES_CLI_TESTED)
foreach(program ${sample_programs})
  if(NOT program IN_LIST samples_cli_tested)
    rdma_asio_sample_cli_test(${program})
  endif()
endforeach()

# Every sample that needs a device, on a kernel without RDMA: the one message of
# samples/common/rdma_support.cpp and exit status 1 (label unit). libibverbs is
# pointed at an empty sysfs (SYSFS_PATH), as a kernel without RDMA shows it, so
# that this runs on a host with RDMA too.
set(rdma_asio_sysfs_without_rdma ${CMAKE_CURRENT_BINARY_DIR}/sysfs_without_rdma)
file(MAKE_DIRECTORY ${rdma_asio_sysfs_without_rdma})
function(rdma_asio_sample_without_rdma_test target)
  if(TARGET ${target})
    add_test(NAME unit.sample.${target}.without_rdma
      COMMAND ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../strict/expect_exit.sh 1
        "${target}: this kernel has no RDMA support (no /sys/class/infiniband_verbs)"
        -- $<TARGET_FILE:${target}> ${ARGN})
    set_tests_properties(unit.sample.${target}.without_rdma PROPERTIES LABELS unit TIMEOUT 60
      ENVIRONMENT SYSFS_PATH=${rdma_asio_sysfs_without_rdma})
  endif()
endfunction()

foreach(sample quick_start device_info async_watch devx_events echo_server kv_server rpc_server
    rc_pingpong rc_pingpong_callbacks rc_pingpong_ops)
  rdma_asio_sample_without_rdma_test(${sample})
endforeach()
rdma_asio_sample_without_rdma_test(echo_client --server 10.0.0.1)
rdma_asio_sample_without_rdma_test(kv_client --server 10.0.0.1 get key)
rdma_asio_sample_without_rdma_test(rpc_client --server 10.0.0.1)

# docs/from-tcp.md: each RDMA form changes at most 5 lines of its TCP program, and
# the TCP program works (on the host's loopback; the RDMA form's test is rxe's).
foreach(pair coro_echo_server http_server_async websocket_server_async)
  add_test(NAME unit.sample.from_tcp.${pair}.changed_lines
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/from_tcp_diff.sh --max 5
      samples/from_tcp/${pair}_tcp.cpp samples/from_tcp/${pair}.cpp
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(unit.sample.from_tcp.${pair}.changed_lines PROPERTIES LABELS unit
    TIMEOUT 60)
endforeach()
if(TARGET coro_echo_server_tcp AND RDMA_ASIO_PYTHON3)
  add_test(NAME unit.sample.coro_echo_server_tcp.echoes
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/coro_echo_tcp_test.sh
      ${PROJECT_SOURCE_DIR}/test/vm/serve-then-run.sh $<TARGET_FILE:coro_echo_server_tcp> 18903)
  set_tests_properties(unit.sample.coro_echo_server_tcp.echoes PROPERTIES LABELS unit
    TIMEOUT 150)
endif()
if(TARGET http_server_async_tcp AND RDMA_ASIO_PYTHON3)
  add_test(NAME unit.sample.http_server_async_tcp.answers
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/http_tcp_test.sh
      ${PROJECT_SOURCE_DIR}/test/vm/serve-then-run.sh $<TARGET_FILE:http_server_async_tcp> 18905)
  set_tests_properties(unit.sample.http_server_async_tcp.answers PROPERTIES LABELS unit
    TIMEOUT 150)
endif()
if(TARGET websocket_server_async_tcp AND TARGET beast_sample_client)
  add_test(NAME unit.sample.websocket_server_async_tcp.echoes
    COMMAND ${PROJECT_SOURCE_DIR}/test/vm/serve-then-run.sh listening
      "$<TARGET_FILE:websocket_server_async_tcp> -a 127.0.0.1 -p 18906"
      $<TARGET_FILE:beast_sample_client> --tcp ws 127.0.0.1 18906 one "two words")
  set_tests_properties(unit.sample.websocket_server_async_tcp.echoes PROPERTIES LABELS unit
    TIMEOUT 150 PASS_REGULAR_EXPRESSION "^one\ntwo words\n")
endif()
