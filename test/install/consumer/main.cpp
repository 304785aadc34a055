// Uses the installed headers and library: enumerates devices (whatever this host
// has) and checks that the error category comes from the library.
#include <rdma_asio/context.hpp>
#include <rdma_asio/device_list.hpp>
#include <rdma_asio/error.hpp>

#include <cstdio>
#include <string_view>

int main() {
    rdma_asio::error_code ec;
    rdma_asio::device_list devices(ec);
    std::printf("consumer: %zu RDMA device(s)%s%s\n", devices.size(), ec ? ": " : "",
                ec ? ec.message().c_str() : "");
    if (ec && ec != rdma_asio::errc::no_kernel_support)
        return 1;
    const rdma_asio::error_code own = rdma_asio::errc::no_device;
    return std::string_view(own.category().name()) == "rdma_asio" ? 0 : 1;
}
