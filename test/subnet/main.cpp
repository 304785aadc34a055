// Runner of the subnet tests: they need the simulated fabric of fabric.sh, and
// report "skipped" (exit 77) when started without it.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "test_device.hpp"

#include <cstdlib>

int main(int argc, char** argv) {
    if (!std::getenv("RDMA_ASIO_FABRIC_CTL") || !std::getenv("RDMA_ASIO_MCAST_MEMBER"))
        rdma_asio::test::skip_process("subnet tests run inside test/subnet/fabric.sh (ibsim + "
                                      "opensm); see test/subnet/README.md");
    return Catch::Session().run(argc, argv);
}
