// The state of an open acceptor (non-template, see src/cm/acceptor.cpp): its
// event channel and listening id, the protection domain and completion channel
// it makes for each device a connection request arrives on, and the accepts in
// flight, which cancel() and close() reach through their new ids.
//
// Why the accepts in flight are kept: an accept waits first on the listener (its
// request) and then on the request's own id (ESTABLISHED). The listener's
// cancel() reaches the first wait only, so the acceptor keeps the ids of the
// second. A count of cancel() calls closes the gap between the two: an accept
// compares the count at its launch with the count as it registers its id, and
// once more after its wait is in place, so a cancel() that came in between,
// from any thread, still ends it.
#pragma once

#include "rdma_asio/completion_channel.hpp"
#include "rdma_asio/connection.hpp"
#include "rdma_asio/detail/cm/cm_id_impl.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/protection_domain.hpp"

#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace rdma_asio::detail {

/// acceptor_options::screen.
using request_screen =
    std::function<bool(std::span<const std::uint8_t> request, std::vector<std::uint8_t>& reply)>;

class acceptor_impl {
public:
    using native_handle_type = rdma_cm_id*;
    static constexpr native_handle_type no_handle = nullptr;

    /// An event channel on `ex`'s reactor, an RC id on it bound to `address`
    /// (rdma_bind_addr) and listening (rdma_listen with `backlog`), whose
    /// requests `screen` (may be empty) admits or rejects. Null with
    /// `ec` set, naming nothing, when a step fails; `failed` names the call.
    static std::shared_ptr<acceptor_impl> open(const asio::any_io_executor& ex,
                                               const sockaddr* address, int backlog,
                                               const connection_options& options,
                                               request_screen screen, error_code& ec,
                                               const char*& failed);

    acceptor_impl(std::shared_ptr<cm_id_impl> listener, const asio::any_io_executor& ex,
                  const connection_options& options, request_screen screen) noexcept
        : listener_(std::move(listener)), ex_(ex), options_(options), screen_(std::move(screen)) {}

    /// The listening id; null once closed.
    native_handle_type native_handle() const noexcept;
    std::shared_ptr<cm_id_impl> listener() const noexcept;
    const connection_options& options() const noexcept { return options_; }
    /// Whether `request` (a CONNECT_REQUEST's id) is to be accepted, by the
    /// acceptor's screen; when not, it has been rejected.
    bool admits(cm_id_impl& request) const;
    /// The bound address (rdma_get_local_addr); false when closed.
    bool local_address(sockaddr_storage& out) const noexcept;

    /// The waits for a request end, and so do the accepts in flight.
    void cancel() noexcept;
    /// cancel(), then the listener goes (its requests nobody took are rejected),
    /// and so do the acceptor's shares of the protection domains and channels:
    /// the connections made keep theirs.
    void close() noexcept;

    /// The count of cancel() and close() calls so far, for an accept to record
    /// as it is launched.
    std::uint64_t cancellations() const noexcept;
    /// Keeps `id` (an accept's request) for cancel() to reach; false when
    /// cancel() or close() came since `launched`: the accept ends instead.
    bool add_accepting(std::uint64_t launched, const std::shared_ptr<cm_id_impl>& id);
    /// After the accept's wait on `id` is in place: cancels it when cancel()
    /// came since `launched` (between add_accepting and the wait).
    void confirm_accepting(std::uint64_t launched, const std::shared_ptr<cm_id_impl>& id) noexcept;
    /// The accept on `id` ended.
    void remove_accepting(const cm_id_impl* id) noexcept;

    /// Runs make(channel, pd) with the completion channel and protection domain
    /// of `verbs`, made on first use (on the acceptor's executor) and kept until
    /// close(). Under the acceptor's lock, so that close() cannot take them away
    /// meanwhile. Throws system_error naming the call that failed; EBADF once
    /// closed.
    template <class Make>
    void with_device(ibv_context* verbs, Make&& make) {
        std::lock_guard lock(mutex_);
        device_parts& parts = parts_for(verbs);
        make(static_cast<const completion_channel&>(parts.channel),
             static_cast<const protection_domain&>(parts.pd));
    }

private:
    struct device_parts {
        protection_domain pd;
        completion_channel channel;
    };
    // Under mutex_.
    device_parts& parts_for(ibv_context* verbs);

    mutable std::mutex mutex_;
    std::shared_ptr<cm_id_impl> listener_;
    asio::any_io_executor ex_;
    connection_options options_;
    request_screen screen_;
    std::map<ibv_context*, device_parts> devices_;
    std::uint64_t cancellations_ = 0;
    std::vector<std::weak_ptr<cm_id_impl>> accepting_;
    bool closed_ = false;
};

/// The what() of a failed acceptor::listen: the endpoint, the call (`failed`,
/// may be null) and the likely cause of `ec` where there is one.
std::string listen_failure(const asio::ip::tcp::endpoint& endpoint, const char* failed,
                           const error_code& ec);

} // namespace rdma_asio::detail
