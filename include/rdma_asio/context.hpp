// An open RDMA device (RAII ibv_context) and its port queries.
#pragma once

#include <infiniband/verbs.h>

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace rdma_asio {

/// One entry of a port's GID table as ibv_query_gid_ex(3) reports it: the GID,
/// what it is for (an InfiniBand GID, or RoCE v1 or v2 on an Ethernet port) and
/// the network interface it belongs to. A RoCE GID names the netdev whose
/// address it carries; that and the type tell which GID index to give an
/// application (e.g. ibv_rc_pingpong -g) for RoCE v2 over a given interface.
struct gid_entry {
    ibv_gid gid{};
    std::uint32_t index = 0;
    ibv_gid_type type = IBV_GID_TYPE_IB;
    /// The netdev's interface index; 0 when the GID has none (InfiniBand).
    std::uint32_t ifindex = 0;
    /// The netdev's name (if_indextoname); empty when ifindex is 0 or the
    /// interface is gone by the time of the lookup.
    std::string netdev;
};

/// An open RDMA device: owns an ibv_context and closes it on destruction.
///
/// Move-only. Opening by name looks the name up in ibv_get_device_list(); an empty
/// name opens the first device. Every throwing member throws system_error whose
/// what() names the verbs call that failed; the overloads taking error_code&
/// report instead of throwing.
///
/// The event objects of rdma_asio (event streams, completion channels, DEVX
/// channels) made from a context share its ownership: closing or destroying the
/// context first is safe, and the device is closed (ibv_close_device) when the
/// last of them is gone.
class context {
public:
    /// A context that is not open.
    context() noexcept = default;
    /// Opens the device called `device_name`, or the first device when it is empty.
    explicit context(std::string_view device_name);
    /// Opens `device`.
    explicit context(ibv_device* device);

    context(context&& other) noexcept;
    context& operator=(context&& other) noexcept;
    context(const context&) = delete;
    context& operator=(const context&) = delete;
    ~context();

    /// Opens the device called `device_name` (the first device when empty).
    /// Errors: errc::no_kernel_support, errc::no_device, errc::device_not_found, or
    /// the errno of ibv_open_device / ibv_query_device.
    void open(std::string_view device_name, error_code& ec) noexcept;
    void open(ibv_device* device, error_code& ec) noexcept;
    bool is_open() const noexcept { return ctx_ != nullptr; }
    /// Lets go of the device: ibv_close_device now, or, while objects made from
    /// this context still use it, when the last of them is gone. A no-op when not
    /// open.
    void close() noexcept;

    /// The device's kernel name, e.g. "rxe0"; empty when not open.
    const std::string& device_name() const noexcept { return name_; }
    /// Number of physical ports (ibv_device_attr::phys_port_cnt).
    std::uint8_t port_count() const noexcept { return port_count_; }

    /// ibv_query_port. Ports are numbered from 1; others give errc::invalid_port.
    ibv_port_attr query_port(std::uint8_t port) const;
    ibv_port_attr query_port(std::uint8_t port, error_code& ec) const noexcept;

    /// ibv_query_gid for one entry of a port's GID table.
    ibv_gid query_gid(std::uint8_t port, int index) const;
    ibv_gid query_gid(std::uint8_t port, int index, error_code& ec) const noexcept;

    /// ibv_query_gid_ex for one entry of a port's GID table, with its type and
    /// netdev. Errors: EBADF when not open, errc::invalid_port, and the call's
    /// errno in Asio's system category: ENODATA for an unused entry inside the
    /// table (test with `ec == error_code(ENODATA,
    /// asio::error::get_system_category())`), EINVAL (or another errno the
    /// provider chooses) for an index past it, EOPNOTSUPP when the kernel cannot
    /// report GID types. The throwing overload's what() names ibv_query_gid_ex.
    gid_entry query_gid_entry(std::uint8_t port, std::uint32_t index) const;
    gid_entry query_gid_entry(std::uint8_t port, std::uint32_t index, error_code& ec) const;

    ibv_context* native_handle() const noexcept { return ctx_.get(); }
    /// Shares ownership of the device: it stays open while the result lives, even
    /// after this object is closed. Empty when not open.
    std::shared_ptr<ibv_context> share() const noexcept { return ctx_; }
    /// Gives up ownership: the caller must ibv_close_device() the result. nullptr
    /// when not open, or while something else shares the device (share()); the
    /// context then stays open.
    ibv_context* release() noexcept;

private:
    bool valid_port(std::uint8_t port, error_code& ec) const noexcept;

    // Closes the device unless ownership was released.
    struct closer {
        bool released = false;
        void operator()(ibv_context* c) const noexcept;
    };

    std::shared_ptr<ibv_context> ctx_;
    std::string name_;
    std::uint8_t port_count_ = 0;
};

/// "ACTIVE", "DOWN", ... for an ibv_port_state.
std::string_view port_state_name(ibv_port_state state) noexcept;
/// "InfiniBand", "Ethernet" or "unspecified" for ibv_port_attr::link_layer.
std::string_view link_layer_name(std::uint8_t link_layer) noexcept;
/// "IB", "RoCE v1" or "RoCE v2" (ibv_devinfo's words) for a GID type; "unknown"
/// for other values.
std::string_view gid_type_name(ibv_gid_type type) noexcept;
/// A GID in the usual notation: eight groups of four hex digits joined by ':'.
std::string to_string(const ibv_gid& gid);
/// Reads a GID in that notation (or any IPv6 notation, e.g. "ff12:401b::1").
/// EINVAL (Asio's system category) for text that is not one.
ibv_gid gid_from_string(std::string_view text, error_code& ec);

} // namespace rdma_asio
