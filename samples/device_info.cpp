// device_info: lists the RDMA devices and the state of each port, like a small
// ibv_devinfo, through rdma_asio::device_list and rdma_asio::context.
//
//   device_info [DEVICE]
#include <rdma_asio/context.hpp>
#include <rdma_asio/device_list.hpp>

#include <algorithm>
#include <cstdio>
#include <string_view>

namespace {

void print_gids(const rdma_asio::context& ctx, std::uint8_t port, int table_length) {
    for (int index = 0; index < table_length; ++index) {
        std::error_code ec;
        ibv_gid gid = ctx.query_gid(port, index, ec);
        // Unused entries are all zero.
        if (ec ||
            std::all_of(std::begin(gid.raw), std::end(gid.raw), [](auto b) { return b == 0; }))
            continue;
        std::printf("  gid[%d] %s\n", index, rdma_asio::to_string(gid).c_str());
    }
}

// snippet-begin: open-and-query
void print_device(rdma_asio::device dev) {
    rdma_asio::context ctx(dev.native_handle()); // throws std::system_error on failure
    for (std::uint8_t port = 1; port <= ctx.port_count(); ++port) {
        ibv_port_attr attr = ctx.query_port(port);
        std::printf("%s port %u: %s, link layer %s, active MTU %d\n", ctx.device_name().c_str(),
                    port, rdma_asio::port_state_name(attr.state).data(),
                    rdma_asio::link_layer_name(attr.link_layer).data(), 128 << attr.active_mtu);
        print_gids(ctx, port, attr.gid_tbl_len);
    }
}
// snippet-end

} // namespace

int main(int argc, char* argv[]) {
    const std::string_view only = argc > 1 ? argv[1] : "";
    try {
        // snippet-begin: enumerate
        rdma_asio::device_list devices; // errc::no_kernel_support without RDMA
        if (devices.empty()) {
            std::fprintf(stderr, "device_info: no RDMA device found\n");
            return 1;
        }
        for (rdma_asio::device dev : devices) {
            if (only.empty() || dev.name() == only)
                print_device(dev);
        }
        // snippet-end
        if (!only.empty() && devices.find(only) == nullptr) {
            std::fprintf(stderr, "device_info: no RDMA device called %s\n", argv[1]);
            return 1;
        }
    } catch (const std::system_error& e) {
        std::fprintf(stderr, "device_info: %s\n", e.what()); // names the call and the error
        return 1;
    }
    return 0;
}
