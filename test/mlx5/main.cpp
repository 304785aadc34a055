// Runner of the mlx5 hardware tests. They need a ConnectX (mlx5) device with DEVX;
// without one the process says "no mlx5 device" and exits 77 (ctest: Skipped).
#include "catch_session.hpp"
#include "mlx5_device.hpp"
#include "test_device.hpp"

int main(int argc, char* argv[]) {
    return rdma_asio::test::run_catch_session(argc, argv, [] {
        if (rdma_asio::test::first_mlx5_device().empty())
            rdma_asio::test::skip_process("no mlx5 device on this host (the mlx5 label needs a "
                                          "ConnectX NIC; see docs/devx-events.md)");
        return 0;
    });
}
