# Sourced by the rxe test scripts: without rxe0 the test is skipped (exit 77, which
# ctest reports as skipped, with the reason), except in the test VM or with
# RDMA_ASIO_REQUIRE_DEVICE set, where a missing rxe0 is a failure.
if [ ! -e /sys/class/infiniband/rxe0 ]; then
    if [ -n "${RDMA_ASIO_IN_GUEST:-}${RDMA_ASIO_REQUIRE_DEVICE:-}" ]; then
        echo "FAILED: rxe0 not found"; exit 1
    fi
    echo "SKIPPED (not passed): rxe0 not found; run the rxe label in the test VM"
    exit 77
fi
