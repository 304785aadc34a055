#include "rdma_asio/context.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/device_list.hpp"
#include "rdma_asio/error.hpp"

#include <arpa/inet.h>
#include <net/if.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <utility>

namespace rdma_asio {

namespace {
// What a user needs to fix a wrong name: the name asked for and the devices there.
std::string no_such_device(std::string_view asked) {
    std::string what = "rdma_asio::context: opening the RDMA device '";
    what += asked;
    what += "' (devices present:";
    error_code ec;
    const device_list devices(ec);
    for (std::size_t i = 0; !ec && i < devices.size(); ++i) {
        what += ' ';
        what += devices[i].name();
    }
    what += ')';
    return what;
}
} // namespace

context::context(std::string_view device_name) {
    error_code ec;
    open(device_name, ec);
    if (ec == errc::device_not_found)
        detail::throw_error(ec, no_such_device(device_name).c_str());
    detail::throw_if_error(ec, "rdma_asio::context: opening an RDMA device");
}

context::context(ibv_device* device) {
    error_code ec;
    open(device, ec);
    detail::throw_if_error(ec, "rdma_asio::context: ibv_open_device");
}

context::context(context&& other) noexcept
    : ctx_(std::move(other.ctx_)), name_(std::move(other.name_)),
      port_count_(std::exchange(other.port_count_, 0)) {
    other.name_.clear();
}

context& context::operator=(context&& other) noexcept {
    if (this != &other) {
        close();
        ctx_ = std::move(other.ctx_);
        name_ = std::move(other.name_);
        other.name_.clear();
        port_count_ = std::exchange(other.port_count_, 0);
    }
    return *this;
}

context::~context() {
    close();
}

void context::open(std::string_view device_name, error_code& ec) noexcept {
    device_list devices(ec);
    if (ec)
        return;
    if (devices.empty()) {
        ec = errc::no_device;
        return;
    }
    ibv_device* dev = device_name.empty() ? devices[0].native_handle() : devices.find(device_name);
    if (dev == nullptr) {
        ec = errc::device_not_found;
        return;
    }
    // The device list may be freed once the device is open.
    open(dev, ec);
}

void context::open(ibv_device* device, error_code& ec) noexcept {
    close();
    if (device == nullptr) {
        ec = errc::no_device;
        return;
    }
    ibv_context* c = ibv_open_device(device);
    if (c == nullptr) {
        ec = detail::last_errno_code();
        return;
    }
    ibv_device_attr attr{};
    if (int rc = ibv_query_device(c, &attr); rc != 0) {
        ec = detail::errno_code(rc > 0 ? rc : errno);
        ibv_close_device(c);
        return;
    }
    try {
        ctx_ = std::shared_ptr<ibv_context>(c, closer{});
    } catch (...) {
        // The deleter ran: the device is closed again.
        ec = detail::errno_code(ENOMEM);
        return;
    }
    try {
        name_ = ibv_get_device_name(device);
    } catch (...) {
        name_.clear();
    }
    port_count_ = attr.phys_port_cnt;
    ec.clear();
}

void context::closer::operator()(ibv_context* c) const noexcept {
    if (!released)
        ibv_close_device(c);
}

void context::close() noexcept {
    ctx_.reset();
    name_.clear();
    port_count_ = 0;
}

ibv_context* context::release() noexcept {
    if (!ctx_ || ctx_.use_count() != 1)
        return nullptr;
    std::get_deleter<closer>(ctx_)->released = true;
    ibv_context* c = ctx_.get();
    close();
    return c;
}

bool context::valid_port(std::uint8_t port, error_code& ec) const noexcept {
    if (!ctx_) {
        ec = detail::errno_code(EBADF);
        return false;
    }
    if (port < 1 || port > port_count_) {
        ec = errc::invalid_port;
        return false;
    }
    return true;
}

ibv_port_attr context::query_port(std::uint8_t port, error_code& ec) const noexcept {
    ibv_port_attr attr{};
    if (!valid_port(port, ec))
        return attr;
    // ibv_query_port returns the errno value itself.
    int rc = ibv_query_port(ctx_.get(), port, &attr);
    ec = rc == 0 ? error_code() : detail::errno_code(rc > 0 ? rc : errno);
    return attr;
}

ibv_port_attr context::query_port(std::uint8_t port) const {
    error_code ec;
    ibv_port_attr attr = query_port(port, ec);
    detail::throw_if_error(ec, "ibv_query_port");
    return attr;
}

ibv_gid context::query_gid(std::uint8_t port, int index, error_code& ec) const noexcept {
    ibv_gid gid{};
    if (!valid_port(port, ec))
        return gid;
    errno = 0;
    ec = ibv_query_gid(ctx_.get(), port, index, &gid) == 0 ? error_code()
                                                           : detail::last_errno_code();
    return gid;
}

ibv_gid context::query_gid(std::uint8_t port, int index) const {
    error_code ec;
    ibv_gid gid = query_gid(port, index, ec);
    detail::throw_if_error(ec, "ibv_query_gid");
    return gid;
}

gid_entry context::query_gid_entry(std::uint8_t port, std::uint32_t index, error_code& ec) const {
    gid_entry result;
    if (!valid_port(port, ec))
        return result;
    ibv_gid_entry entry{};
    errno = 0;
    // Returns the errno value itself (ibv_query_gid_ex(3)).
    const int rc = ibv_query_gid_ex(ctx_.get(), port, index, &entry, 0);
    if (rc != 0) {
        ec = detail::errno_code(rc > 0 ? rc : (errno != 0 ? errno : EIO));
        return result;
    }
    ec.clear();
    result.gid = entry.gid;
    result.index = entry.gid_index;
    result.type = static_cast<ibv_gid_type>(entry.gid_type);
    result.ifindex = entry.ndev_ifindex;
    char name[IF_NAMESIZE] = {};
    // A netdev deleted since the query has no name any more: leave it empty.
    if (entry.ndev_ifindex != 0 && ::if_indextoname(entry.ndev_ifindex, name) != nullptr)
        result.netdev = name;
    return result;
}

gid_entry context::query_gid_entry(std::uint8_t port, std::uint32_t index) const {
    error_code ec;
    gid_entry entry = query_gid_entry(port, index, ec);
    detail::throw_if_error(ec, "ibv_query_gid_ex");
    return entry;
}

std::string_view gid_type_name(ibv_gid_type type) noexcept {
    switch (type) {
    case IBV_GID_TYPE_IB:
        return "IB";
    case IBV_GID_TYPE_ROCE_V1:
        return "RoCE v1";
    case IBV_GID_TYPE_ROCE_V2:
        return "RoCE v2";
    }
    return "unknown";
}

std::string_view port_state_name(ibv_port_state state) noexcept {
    switch (state) {
    case IBV_PORT_NOP:
        return "NOP";
    case IBV_PORT_DOWN:
        return "DOWN";
    case IBV_PORT_INIT:
        return "INIT";
    case IBV_PORT_ARMED:
        return "ARMED";
    case IBV_PORT_ACTIVE:
        return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER:
        return "ACTIVE_DEFER";
    }
    return "unknown";
}

std::string_view link_layer_name(std::uint8_t link_layer) noexcept {
    switch (link_layer) {
    case IBV_LINK_LAYER_INFINIBAND:
        return "InfiniBand";
    case IBV_LINK_LAYER_ETHERNET:
        return "Ethernet";
    default:
        return "unspecified";
    }
}

std::string to_string(const ibv_gid& gid) {
    char text[40];
    const std::uint8_t* b = gid.raw;
    std::snprintf(text, sizeof text,
                  "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", b[0],
                  b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                  b[14], b[15]);
    return text;
}

ibv_gid gid_from_string(std::string_view text, error_code& ec) {
    ibv_gid gid{};
    const std::string copy(text);
    if (::inet_pton(AF_INET6, copy.c_str(), gid.raw) != 1) {
        ec = detail::errno_code(EINVAL);
        return ibv_gid{};
    }
    ec.clear();
    return gid;
}

} // namespace rdma_asio
