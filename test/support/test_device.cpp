#include "test_device.hpp"

#include <cstdio>
#include <cstdlib>

namespace rdma_asio::test {

std::string test_device_name() {
    const char* name = std::getenv("RDMA_ASIO_TEST_DEVICE");
    return name != nullptr && *name != '\0' ? name : "rxe0";
}

bool device_required() {
    return std::getenv("RDMA_ASIO_IN_GUEST") != nullptr ||
           std::getenv("RDMA_ASIO_REQUIRE_DEVICE") != nullptr;
}

std::string fake_sysfs_kind() {
    const char* kind = std::getenv("RDMA_ASIO_FAKE_SYSFS");
    return kind != nullptr ? kind : "";
}

void skip_process(const std::string& reason) {
    std::fprintf(stderr, "SKIPPED (not passed): %s\n", reason.c_str());
    std::fflush(stderr);
    std::exit(skip_exit_code);
}

} // namespace rdma_asio::test
