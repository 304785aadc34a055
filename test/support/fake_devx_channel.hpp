// An imitation of the kernel side of a DEVX event channel, for unit tests on hosts
// without an mlx5 device. It behaves as the kernel's devx_async_event_read does:
// each read returns one event (a SOCK_SEQPACKET record), the 8-byte cookie only in
// omit-data mode (repeated events of one subscription merge until read) or the
// cookie and 64 bytes of EQE otherwise; a read into a buffer smaller than the event
// fails with EINVAL and leaves it queued; EOVERFLOW once after a loss, before the
// queued events; EAGAIN when empty (O_NONBLOCK); EIO once the channel is destroyed.
#pragma once

#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/devx/devx_event_source.hpp"
#include "rdma_asio/devx_event_channel.hpp"

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <system_error>

namespace rdma_asio::test {

class fake_devx_channel {
public:
    /// The size of an EQE, the data of every event in with-data mode.
    static constexpr std::size_t eqe_size = 64;
    using eqe = std::array<std::byte, eqe_size>;

    explicit fake_devx_channel(bool omit_data);
    ~fake_devx_channel();
    fake_devx_channel(const fake_devx_channel&) = delete;
    fake_devx_channel& operator=(const fake_devx_channel&) = delete;

    mlx5dv_devx_event_channel* channel() noexcept { return &state_.channel; }
    detail::devx_event_source::options options() const;
    devx_event_data mode() const noexcept {
        return state_.omit_data ? devx_event_data::omit_data : devx_event_data::with_data;
    }

    /// A channel opened on this imitation (through the library's test access), in
    /// this imitation's mode; the imitation stays this object's and must outlive
    /// it. Throws rdma_asio::system_error as devx_event_channel::open does.
    template <class Channel = devx_event_channel>
    Channel open_channel(const typename Channel::executor_type& ex) {
        Channel c(ex);
        rdma_asio::error_code ec;
        auto impl = detail::devx_event_channel_impl::open(ex, channel(), false, mode(), options(),
                                                          nullptr, ec);
        detail::throw_if_error(ec,
                               "rdma_asio::devx_event_channel::open: registering the channel fd");
        detail::io_object_access::adopt(c, std::move(impl));
        return c;
    }

    /// Queues one event of the subscription `cookie`, as the kernel would; in
    /// omit-data mode nothing is queued while that cookie is still unread.
    void raise(std::uint64_t cookie, const eqe& data);
    void raise(std::uint64_t cookie) { raise(cookie, eqe_for(cookie)); }
    /// The kernel failed to allocate an event: the next read reports EOVERFLOW.
    void lose_events() noexcept { state_.overflow = true; }
    /// The channel is being destroyed: reads fail with EIO.
    void destroy();
    /// Successful reads so far (EOVERFLOW, EINVAL and EAGAIN not counted).
    std::size_t reads() const noexcept { return state_.reads; }

    /// A recognisable EQE for `cookie`: byte i is cookie + i.
    static eqe eqe_for(std::uint64_t cookie);

    // What the imitation of mlx5dv_devx_get_event reaches from the channel pointer,
    // as rdma-core reaches its own state from the public struct.
    struct state {
        mlx5dv_devx_event_channel channel{}; // first: the channel pointer is the state's
        bool omit_data = false;
        std::atomic<bool> overflow{false};
        std::atomic<std::size_t> reads{0};
        std::mutex mutex;
        std::set<std::uint64_t> unread; // omit-data mode: merged subscriptions
        int write_fd = -1;
    };

private:
    state state_;
};

} // namespace rdma_asio::test
