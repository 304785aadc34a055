// Runner of the mlx5 hardware tests. They need a ConnectX (mlx5) device with DEVX;
// without one the process says "no mlx5 device" and exits 77 (ctest: Skipped).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "mlx5_device.hpp"
#include "test_device.hpp"

int main(int argc, char* argv[]) {
    Catch::Session session;
    if (int rc = session.applyCommandLine(argc, argv); rc != 0)
        return rc;
    const auto& cfg = session.configData();
    const bool listing =
        cfg.listTests || cfg.listTestNamesOnly || cfg.listTags || cfg.listReporters || cfg.showHelp;
    if (!listing && rdma_asio::test::first_mlx5_device().empty())
        rdma_asio::test::skip_process("no mlx5 device on this host (the mlx5 label needs a "
                                      "ConnectX NIC; see docs/devx-events.md)");
    return session.run();
}
