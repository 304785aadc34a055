# label mlx5: needs a ConnectX (mlx5) device with DEVX. Without one the executable
# says "no mlx5 device" and exits 77, which ctest reports as Skipped. Not part of
# scripts/run-tests; run it with: ctest --test-dir build -L mlx5 --output-on-failure
add_executable(mlx5_tests mlx5/main.cpp mlx5/devx_event_channel_mlx5_test.cpp)
target_link_libraries(mlx5_tests PRIVATE rdma_asio_test_support)
catch_discover_tests(mlx5_tests TEST_PREFIX "mlx5." EXTRA_ARGS -w NoTests PROPERTIES LABELS mlx5
  SKIP_RETURN_CODE ${RDMA_ASIO_SKIP_CODE} TIMEOUT 120)

if(TARGET devx_events)
  add_test(NAME unit.sample.devx_events_without_mlx5
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/mlx5/sample_without_device.sh $<TARGET_FILE:devx_events>)
  set_tests_properties(unit.sample.devx_events_without_mlx5 PROPERTIES LABELS unit TIMEOUT 60
    SKIP_RETURN_CODE ${RDMA_ASIO_SKIP_CODE})
  # The same in the test guest, where rxe0 exists: "rxe0 is not an mlx5 device".
  add_test(NAME rxe.sample.devx_events_on_rxe
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/mlx5/sample_without_device.sh $<TARGET_FILE:devx_events> rxe0)
  set_tests_properties(rxe.sample.devx_events_on_rxe PROPERTIES LABELS rxe TIMEOUT 180
    SKIP_RETURN_CODE ${RDMA_ASIO_SKIP_CODE})
endif()
