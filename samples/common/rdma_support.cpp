#include "rdma_support.hpp"

#include <rdma_asio/device_list.hpp>
#include <rdma_asio/error.hpp>

#include <cstdio>

namespace sample {

bool kernel_has_rdma() {
    // The same test as device_info's: libibverbs refuses to list devices (ENOSYS)
    // when sysfs has no uverbs ABI. Any other answer, no device included, means
    // the kernel has RDMA and the sample's own calls say what else is wrong.
    rdma_asio::error_code ec;
    rdma_asio::device_list devices(ec);
    return ec != rdma_asio::errc::no_kernel_support;
}

std::string no_rdma_message(std::string_view program) {
    return std::string(program) +
           ": this kernel has no RDMA support (no /sys/class/infiniband_verbs): load the "
           "ib_uverbs module and a device's driver, or make a soft-RoCE device (modprobe "
           "rdma_rxe; rdma link add, see rdma-link(8)); scripts/run-sample runs the samples "
           "in a test VM that has one";
}

bool require_rdma(std::string_view program) {
    if (kernel_has_rdma())
        return true;
    std::fprintf(stderr, "%s\n", no_rdma_message(program).c_str());
    return false;
}

} // namespace sample
