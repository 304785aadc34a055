// device_info: the RDMA devices and their ports, like a small ibv_devinfo, through
// rdma_asio::device_list and rdma_asio::context. For each device: node GUID and
// firmware; for each port: state, MTUs, LID and SM LID (InfiniBand), and every
// GID with its type (IB, RoCE v1, RoCE v2) and netdev, which is how to find the
// GID index a RoCE application needs (e.g. rc_pingpong -g).
//
//   device_info [-d DEV] [-i PORT] [-l] [-v]
#include "common/command_line.hpp"
#include "common/rdma_support.hpp"

#include <rdma_asio/context.hpp>
#include <rdma_asio/device_list.hpp>
#include <rdma_asio/error.hpp>

#include "asio_alias.hpp"

#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <system_error>

namespace {

struct options {
    std::string only;  // -d: one device
    unsigned port = 0; // -i: one port (0: all)
    bool list = false;
    bool verbose = false;
};

int mtu_bytes(ibv_mtu mtu) {
    return 128 << mtu; // IBV_MTU_256 is 1
}

std::string guid_text(__be64 guid) {
    const std::uint64_t g = be64toh(guid);
    char text[24];
    std::snprintf(text, sizeof text, "%04x:%04x:%04x:%04x", static_cast<unsigned>(g >> 48),
                  static_cast<unsigned>(g >> 32) & 0xffff, static_cast<unsigned>(g >> 16) & 0xffff,
                  static_cast<unsigned>(g) & 0xffff);
    return text;
}

// snippet-begin: gid-table
void print_gids(const rdma_asio::context& ctx, std::uint8_t port, int table_length) {
    const rdma_asio::error_code unused_entry(ENODATA, asio::error::get_system_category());
    for (int index = 0; index < table_length; ++index) {
        rdma_asio::error_code ec;
        const rdma_asio::gid_entry entry =
            ctx.query_gid_entry(port, static_cast<std::uint32_t>(index), ec);
        if (ec == unused_entry)
            continue;
        if (ec) {
            std::printf("\t\t\tGID[%3d]:\t\t(ibv_query_gid_ex: %s)\n", index, ec.message().c_str());
            return; // e.g. a kernel that cannot report GID types: the same for every entry
        }
        const auto& raw = entry.gid.raw;
        if (std::all_of(std::begin(raw), std::end(raw), [](auto b) { return b == 0; }))
            continue;
        std::printf("\t\t\tGID[%3d]:\t\t%s, %s%s%s\n", index,
                    rdma_asio::to_string(entry.gid).c_str(),
                    rdma_asio::gid_type_name(entry.type).data(), entry.netdev.empty() ? "" : ", ",
                    entry.netdev.c_str());
    }
}
// snippet-end

void print_port(const rdma_asio::context& ctx, std::uint8_t port, bool verbose) {
    const ibv_port_attr attr = ctx.query_port(port);
    std::printf("\t\tport:\t%u\n", port);
    std::printf("\t\t\tstate:\t\t\t%s (%d)\n", rdma_asio::port_state_name(attr.state).data(),
                attr.state);
    std::printf("\t\t\tmax_mtu:\t\t%d (%d)\n", mtu_bytes(attr.max_mtu), attr.max_mtu);
    std::printf("\t\t\tactive_mtu:\t\t%d (%d)\n", mtu_bytes(attr.active_mtu), attr.active_mtu);
    // LIDs mean something on InfiniBand only; RoCE addresses by GID.
    if (attr.link_layer != IBV_LINK_LAYER_ETHERNET) {
        std::printf("\t\t\tsm_lid:\t\t\t%u\n", attr.sm_lid);
        std::printf("\t\t\tport_lid:\t\t%u\n", attr.lid);
    }
    std::printf("\t\t\tlink_layer:\t\t%s\n", rdma_asio::link_layer_name(attr.link_layer).data());
    if (verbose) {
        std::printf("\t\t\tmax_msg_sz:\t\t0x%x\n", attr.max_msg_sz);
        std::printf("\t\t\tgid_tbl_len:\t\t%d\n", attr.gid_tbl_len);
        std::printf("\t\t\tpkey_tbl_len:\t\t%u\n", attr.pkey_tbl_len);
        std::printf("\t\t\tactive_width:\t\t%u\n", attr.active_width);
        std::printf("\t\t\tactive_speed:\t\t%u\n", attr.active_speed);
    }
    print_gids(ctx, port, attr.gid_tbl_len);
}

void print_attributes(const rdma_asio::context& ctx, bool verbose) {
    ibv_device_attr attr{};
    // ibv_query_device returns the errno value itself.
    if (int e = ibv_query_device(ctx.native_handle(), &attr))
        throw rdma_asio::system_error(e, asio::error::get_system_category(), "ibv_query_device");
    std::printf("\tfw_ver:\t\t\t\t%s\n", attr.fw_ver[0] ? attr.fw_ver : "(none)");
    std::printf("\tnode_guid:\t\t\t%s\n", guid_text(attr.node_guid).c_str());
    if (!verbose)
        return;
    std::printf("\tsys_image_guid:\t\t\t%s\n", guid_text(attr.sys_image_guid).c_str());
    std::printf("\tvendor_id:\t\t\t0x%04x\n", attr.vendor_id);
    std::printf("\tvendor_part_id:\t\t\t%u\n", attr.vendor_part_id);
    std::printf("\thw_ver:\t\t\t\t0x%x\n", attr.hw_ver);
    std::printf("\tmax_qp:\t\t\t\t%d\n", attr.max_qp);
    std::printf("\tmax_qp_wr:\t\t\t%d\n", attr.max_qp_wr);
    std::printf("\tmax_sge:\t\t\t%d\n", attr.max_sge);
    std::printf("\tmax_cq:\t\t\t\t%d\n", attr.max_cq);
    std::printf("\tmax_cqe:\t\t\t%d\n", attr.max_cqe);
    std::printf("\tmax_mr:\t\t\t\t%d\n", attr.max_mr);
    std::printf("\tmax_pd:\t\t\t\t%d\n", attr.max_pd);
}

// snippet-begin: open-and-query
void print_device(rdma_asio::device dev, const options& opt) {
    rdma_asio::context ctx(dev.native_handle()); // throws rdma_asio::system_error on failure
    if (opt.port > ctx.port_count())
        throw rdma_asio::system_error(rdma_asio::errc::invalid_port, ctx.device_name() +
                                                                         " has no port " +
                                                                         std::to_string(opt.port));
    std::printf("hca_id:\t%s\n", ctx.device_name().c_str());
    print_attributes(ctx, opt.verbose); // ibv_query_device: firmware, GUIDs, limits
    std::printf("\tphys_port_cnt:\t\t\t%u\n", ctx.port_count());
    for (std::uint8_t port = 1; port <= ctx.port_count(); ++port) {
        if (opt.port == 0 || port == opt.port)
            print_port(ctx, port, opt.verbose); // query_port, then print_gids
    }
}
// snippet-end

} // namespace

int main(int argc, char* argv[]) {
    options opt;
    sample::command_line cli("device_info",
                             "Print the RDMA devices, their ports and GIDs (like ibv_devinfo).");
    cli.option('d', "ib-dev", "DEV", "only device DEV (default: every device)", opt.only);
    cli.number('i', "ib-port", "PORT", "only port PORT (default: every port)", opt.port, 1u, 255u);
    cli.flag('l', "list", "print only the device names", opt.list);
    cli.flag('v', "verbose", "print the device's and ports' limits too", opt.verbose);
    cli.parse(argc, argv);
    if (!sample::require_rdma("device_info"))
        return 1;
    try {
        // snippet-begin: enumerate
        rdma_asio::device_list devices; // errc::no_kernel_support without RDMA
        if (devices.empty()) {
            std::fprintf(stderr, "device_info: no RDMA device found\n");
            return 1;
        }
        if (!opt.only.empty() && devices.find(opt.only) == nullptr) {
            std::fprintf(stderr, "device_info: no RDMA device called %s\n", opt.only.c_str());
            return 1;
        }
        if (opt.list) {
            std::printf("%zu HCA%s found:\n", devices.size(), devices.size() == 1 ? "" : "s");
            for (rdma_asio::device dev : devices)
                std::printf("\t%s\n", std::string(dev.name()).c_str());
            return 0;
        }
        for (rdma_asio::device dev : devices) {
            if (opt.only.empty() || dev.name() == opt.only)
                print_device(dev, opt);
        }
        // snippet-end
    } catch (const rdma_asio::system_error& e) {
        std::fprintf(stderr, "device_info: %s\n", e.what()); // names the call and the error
        return 1;
    }
    return 0;
}
