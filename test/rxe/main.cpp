// Runner of the rxe integration tests. They need the RDMA device named by
// RDMA_ASIO_TEST_DEVICE (default rxe0). Without it the process reports "skipped"
// (exit 77), except in the test VM or with RDMA_ASIO_REQUIRE_DEVICE set, where a
// missing device is a failure.
#include "catch_session.hpp"
#include "rdma_asio/device_list.hpp"
#include "test_device.hpp"

#include <cstdio>
#include <string>

int main(int argc, char* argv[]) {
    return rdma_asio::test::run_catch_session(argc, argv, [] {
        const std::string name = rdma_asio::test::test_device_name();
        rdma_asio::error_code ec;
        rdma_asio::device_list devices(ec);
        if (!ec && devices.find(name) != nullptr)
            return 0;
        std::string why = "RDMA device '" + name + "' not found" +
                          (ec ? " (" + ec.message() + ")" : std::string()) +
                          "; run the rxe label in the test VM (docs/testing.md)";
        if (rdma_asio::test::device_required()) {
            std::fprintf(stderr, "FAILED: %s\n", why.c_str());
            return 1;
        }
        rdma_asio::test::skip_process(why);
    });
}
