#include "rdma_asio/detail/cm/acceptor_impl.hpp"
#include "rdma_asio/detail/cm/cm_channel_impl.hpp"
#include "rdma_asio/detail/cm/cm_steps.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/error.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace rdma_asio::detail {

namespace {
// 127.0.0.0/8, ::1, or ::ffff:127.x.y.z. rdma_cm has no loopback device: an id
// bound to such an address was seen listening on the RDMA devices' own
// addresses, serving requests from the network to a program that asked for this
// host only (Debian 12's 6.1, rxe). So the acceptor refuses the bind.
bool is_loopback(const sockaddr* address) noexcept {
    if (address->sa_family == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(address);
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (address->sa_family == AF_INET6) {
        const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(&a) || (IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127);
    }
    return false;
}
} // namespace

std::shared_ptr<acceptor_impl> acceptor_impl::open(const asio::any_io_executor& ex,
                                                   const sockaddr* address, int backlog,
                                                   const connection_options& options,
                                                   request_screen screen, error_code& ec,
                                                   const char*& failed) {
    if (is_loopback(address)) {
        failed = nullptr; // refused before any call
        ec = errno_code(EADDRNOTAVAIL);
        return nullptr;
    }
    failed = "rdma_create_event_channel";
    std::shared_ptr<cm_channel_impl> channel = open_cm_event_channel(ex, ec);
    if (!channel)
        return nullptr;
    failed = "rdma_create_id";
    std::shared_ptr<cm_id_impl> listener = open_cm_id(channel, RDMA_PS_TCP, ec);
    if (!listener)
        return nullptr;
    failed = "rdma_bind_addr";
    if ((ec = listener->bind(address)))
        return nullptr; // the id goes with `listener`, the channel with the id
    failed = "rdma_listen";
    // The kernel holds up to its maximum of the requests not read yet (so that
    // a burst read a little late is not dropped: a dropped request is retried
    // by the peer's CM for a minute or more); the acceptor keeps `backlog` of
    // those it read and rejects the rest, which the peer learns at once.
    if ((ec = listener->listen(0, backlog)))
        return nullptr;
    failed = nullptr;
    return std::make_shared<acceptor_impl>(std::move(listener), ex, options, std::move(screen));
}

bool acceptor_impl::admits(cm_id_impl& request) const {
    if (!screen_)
        return true;
    std::vector<std::uint8_t> reply;
    if (screen_(request.private_data(), reply))
        return true;
    // Refused arguments or a failed call leave the request to be rejected as its
    // id goes (rdma_destroy_id of an unanswered request rejects it).
    (void)request.reject(reply.data(),
                         static_cast<std::uint8_t>(std::min<std::size_t>(reply.size(), 255)));
    return false;
}

acceptor_impl::native_handle_type acceptor_impl::native_handle() const noexcept {
    std::lock_guard lock(mutex_);
    return listener_ ? listener_->native_handle() : nullptr;
}

std::shared_ptr<cm_id_impl> acceptor_impl::listener() const noexcept {
    std::lock_guard lock(mutex_);
    return listener_;
}

bool acceptor_impl::local_address(sockaddr_storage& out) const noexcept {
    std::shared_ptr<cm_id_impl> id = listener();
    if (!id || id->native_handle() == nullptr)
        return false;
    const sockaddr* addr = rdma_get_local_addr(id->native_handle());
    socklen_t length = 0;
    if (addr == nullptr || cm_address_length(addr, length))
        return false;
    out = {};
    std::memcpy(&out, addr, std::min<std::size_t>(length, sizeof out));
    return true;
}

void acceptor_impl::cancel() noexcept {
    std::shared_ptr<cm_id_impl> listener;
    std::vector<std::shared_ptr<cm_id_impl>> ids;
    {
        std::lock_guard lock(mutex_);
        ++cancellations_;
        listener = listener_;
        for (const auto& weak : accepting_)
            if (auto id = weak.lock())
                ids.push_back(std::move(id));
    }
    // Outside the lock: a wait that ends may run an accept's next step inline
    // (a handler on an executor that runs it at once), which takes the lock.
    if (listener)
        listener->cancel();
    for (const auto& id : ids)
        id->cancel();
}

void acceptor_impl::close() noexcept {
    cancel();
    std::shared_ptr<cm_id_impl> listener;
    std::map<ibv_context*, device_parts> devices;
    {
        std::lock_guard lock(mutex_);
        closed_ = true;
        listener = std::move(listener_);
        devices.swap(devices_);
    }
    if (listener)
        listener->close();
    // `devices` goes here: the connections made keep their shares.
}

std::uint64_t acceptor_impl::cancellations() const noexcept {
    std::lock_guard lock(mutex_);
    return cancellations_;
}

bool acceptor_impl::add_accepting(std::uint64_t launched, const std::shared_ptr<cm_id_impl>& id) {
    std::lock_guard lock(mutex_);
    if (closed_ || cancellations_ != launched)
        return false;
    // Drop the entries of accepts that ended without saying so (an id closed).
    std::erase_if(accepting_, [](const auto& weak) { return weak.expired(); });
    accepting_.push_back(id);
    return true;
}

void acceptor_impl::confirm_accepting(std::uint64_t launched,
                                      const std::shared_ptr<cm_id_impl>& id) noexcept {
    if (cancellations() != launched)
        id->cancel();
}

void acceptor_impl::remove_accepting(const cm_id_impl* id) noexcept {
    std::lock_guard lock(mutex_);
    std::erase_if(accepting_, [id](const auto& weak) {
        auto held = weak.lock();
        return !held || held.get() == id;
    });
}

acceptor_impl::device_parts& acceptor_impl::parts_for(ibv_context* verbs) {
    if (closed_)
        throw_error(errno_code(EBADF), "rdma_asio::acceptor: closed");
    auto it = devices_.find(verbs);
    if (it != devices_.end())
        return it->second;
    protection_domain pd(verbs);
    completion_channel channel(ex_, verbs);
    return devices_.emplace(verbs, device_parts{std::move(pd), std::move(channel)}).first->second;
}

std::string listen_failure(const asio::ip::tcp::endpoint& endpoint, const char* failed,
                           const error_code& ec) {
    std::string what = "rdma_asio::acceptor::listen on " + endpoint.address().to_string() +
                       " port " + std::to_string(endpoint.port());
    if (failed != nullptr)
        what += std::string(": ") + failed;
    if (failed == nullptr && is_loopback(endpoint.data()))
        what += ": a loopback address (RDMA devices have no loopback: rdma_cm would listen "
                "on the devices' own addresses, for the network, not for this host only); "
                "listen on the device's address to serve its network, or on the unspecified "
                "address to serve every RDMA address";
    else if (ec == asio::error::address_in_use)
        what += " (the port is taken: by another listener, or an rdma_cm id not yet destroyed)";
    else if (ec == errno_code(EADDRNOTAVAIL))
        what += " (no RDMA device has this address: `rdma link` lists the devices and their "
                "network interfaces; the unspecified address listens on all of them)";
    return what;
}

} // namespace rdma_asio::detail
