// The network device under a RoCE port (on rxe, the Ethernet device it was added
// on), and what a test does to it to make the RDMA device raise events: take its
// link down and up (PORT_ERR, PORT_ACTIVE) or give it an address (a new GID:
// GID_CHANGE). These need the CAP_NET_ADMIN capability, as `ip link` does: root
// in the test VM.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace rdma_asio::testing {

/// The name of the network device of a RoCE port's GID (by default the GID
/// connect_loopback uses). Throws system_error naming ibv_query_gid_ex when
/// the port has no such GID, or no network device (an InfiniBand port).
std::string netdev_of(ibv_context* ctx, std::uint8_t port = 1, int gid_index = -1);

/// Sets the link of network device `name` up or down (SIOCSIFFLAGS, as
/// `ip link set NAME up|down`). Throws system_error naming the call.
void set_link(std::string_view name, bool up);

/// Whether the link of `name` is administratively up. Throws system_error.
bool link_is_up(std::string_view name);

/// Adds an IPv4 or IPv6 address to a network device for its lifetime (as
/// `ip addr add ADDRESS/PREFIX dev NAME`, over rtnetlink), which gives each RoCE
/// port on that device a new GID; the destructor removes it again.
class scoped_address {
public:
    /// `address` as "10.0.0.9/24" or "fd00::9/64". Throws system_error
    /// naming the step that failed (invalid_argument for an address that does
    /// not parse; the kernel's error, EEXIST among them, for RTM_NEWADDR).
    scoped_address(std::string_view netdev, std::string_view address);
    ~scoped_address();
    scoped_address(const scoped_address&) = delete;
    scoped_address& operator=(const scoped_address&) = delete;

    /// Removes the address now (the destructor then does nothing).
    void remove();

private:
    std::string netdev_;
    std::string address_;
    bool added_ = false;
};

} // namespace rdma_asio::testing
