// Runner of the subnet tests: they need the simulated fabric of fabric.sh, and
// report "skipped" (exit 77) when started without it, or fail when
// RDMA_ASIO_REQUIRE_FABRIC is set (as the test command sets it).
#include "catch_session.hpp"
#include "test_device.hpp"

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
    if (!std::getenv("RDMA_ASIO_FABRIC_CTL") || !std::getenv("RDMA_ASIO_MCAST_MEMBER")) {
        const char* why = "subnet tests run inside test/subnet/fabric.sh (ibsim + opensm); see "
                          "test/subnet/README.md";
        if (std::getenv("RDMA_ASIO_REQUIRE_FABRIC") != nullptr) {
            std::fprintf(stderr, "FAILED: no fabric: %s\n", why);
            return 1;
        }
        rdma_asio::test::skip_process(why);
    }
    return rdma_asio::test::run_catch_session(argc, argv);
}
