// device_info: lists the RDMA devices and the state of each port, like a small
// ibv_devinfo, through rdma_asio::device_list and rdma_asio::context.
//
//   device_info [DEVICE]
#include <rdma_asio/context.hpp>
#include <rdma_asio/device_list.hpp>

#include <cstdio>
#include <string_view>

namespace {

void print_device(rdma_asio::device dev) {
    // snippet-begin: open-and-query
    rdma_asio::context ctx(dev.native_handle());
    for (std::uint8_t port = 1; port <= ctx.port_count(); ++port) {
        ibv_port_attr attr = ctx.query_port(port);
        std::printf("%s port %u: %s, link layer %s, active MTU %d\n", ctx.device_name().c_str(),
                    port, rdma_asio::port_state_name(attr.state).data(),
                    rdma_asio::link_layer_name(attr.link_layer).data(), 128 << attr.active_mtu);
        // snippet-end
        for (int index = 0; index < attr.gid_tbl_len; ++index) {
            std::error_code ec;
            ibv_gid gid = ctx.query_gid(port, index, ec);
            ibv_gid zero{};
            if (ec || std::equal(std::begin(gid.raw), std::end(gid.raw), std::begin(zero.raw)))
                continue; // unused entries are all zero
            std::printf("  gid[%d] %s\n", index, rdma_asio::to_string(gid).c_str());
        }
    }
}

} // namespace

int main(int argc, char* argv[]) {
    const std::string_view only = argc > 1 ? argv[1] : "";
    try {
        rdma_asio::device_list devices;
        if (devices.empty()) {
            std::fprintf(stderr, "device_info: no RDMA device found\n");
            return 1;
        }
        bool found = false;
        for (rdma_asio::device dev : devices) {
            if (!only.empty() && dev.name() != only)
                continue;
            found = true;
            print_device(dev);
        }
        if (!found) {
            std::fprintf(stderr, "device_info: no RDMA device called %s\n", argv[1]);
            return 1;
        }
    } catch (const std::system_error& e) {
        std::fprintf(stderr, "device_info: %s\n", e.what());
        return 1;
    }
    return 0;
}
