# The rxe test VM as build-tree tools:
#   target guest_image  builds (once, cached) BUILD/vm/guest from Debian packages;
#   BUILD/vm/run [--timeout S] [--shell] [--] CMD...
#                       boots it and runs CMD in the current directory, with the
#                       source and build trees visible at the same paths.
set(RDMA_ASIO_VM_DIR ${PROJECT_BINARY_DIR}/vm)
# The kernel of the newer_kernel label's guest (test/CMakeLists.txt): rxe of a kernel
# newer than Debian 12's 6.1, from bookworm-backports (build/vm/run --kernel PKG).
set(RDMA_ASIO_VM_NEWER_KERNEL linux-image-6.12.95+deb12-amd64 CACHE STRING
  "Kernel package (bookworm-backports) the newer_kernel tests boot the test VM with")
add_custom_target(guest_image
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/build-guest.sh ${RDMA_ASIO_VM_DIR}/guest
  COMMENT "Building the rxe test guest (Debian kernel + initramfs)"
  USES_TERMINAL)
configure_file(${CMAKE_CURRENT_LIST_DIR}/run.in ${RDMA_ASIO_VM_DIR}/run
  @ONLY FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
  WORLD_READ WORLD_EXECUTE)

# rdma-asio-vm where it runs commands directly: status, output, timeout, usage.
add_test(NAME unit.vm.rdma_asio_vm_direct
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/rdma_asio_vm_test.sh ${CMAKE_CURRENT_LIST_DIR}/rdma-asio-vm)
set_tests_properties(unit.vm.rdma_asio_vm_direct PROPERTIES LABELS unit TIMEOUT 120)

# run-in-guest.sh with a stand-in for qemu: live output, the boot line, Ctrl-C.
add_test(NAME unit.vm.run_in_guest_output_and_ctrl_c
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/run_in_guest_test.sh ${CMAKE_CURRENT_LIST_DIR}/run-in-guest.sh
    ${RDMA_ASIO_VM_DIR}/run_in_guest_test)
set_tests_properties(unit.vm.run_in_guest_output_and_ctrl_c PROPERTIES LABELS unit TIMEOUT 120)

# build/vm/run --shell on a pseudo-terminal: Ctrl-C reaches the guest's program, not
# qemu. Boots the test VM on the host (label vm).
find_program(RDMA_ASIO_PYTHON3 python3 HINTS /usr/bin)
if(RDMA_ASIO_PYTHON3)
  add_test(NAME vm.shell_ctrl_c_reaches_the_guest
    COMMAND ${RDMA_ASIO_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/shell_ctrl_c_test.py ${RDMA_ASIO_VM_DIR}/run)
  set_tests_properties(vm.shell_ctrl_c_reaches_the_guest PROPERTIES LABELS vm TIMEOUT 900)
endif()

# A user's project (examples/rxe-ci) against the installed package: its tests,
# registered with rdma_asio_add_rxe_tests, run in the test VM that the installed
# rdma-asio-vm boots (label vm: it boots the VM from the host).
if(NOT RDMA_ASIO_SANITIZE)
  add_test(NAME vm.example.rxe_ci
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/rxe_ci_example_test.sh ${PROJECT_BINARY_DIR}
      ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/rxe-ci-example)
  set_tests_properties(vm.example.rxe_ci PROPERTIES LABELS vm TIMEOUT 1800)
endif()
