#include "fake_devx_channel.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace rdma_asio::test {
namespace {

ssize_t imitation_get_event(mlx5dv_devx_event_channel* channel, mlx5dv_devx_async_event_hdr* event,
                            size_t len) {
    auto* s = reinterpret_cast<fake_devx_channel::state*>(channel);
    if (s->overflow.exchange(false)) {
        errno = EOVERFLOW;
        return -1;
    }
    // The size of the next event without taking it, like the kernel's check.
    ssize_t size = ::recv(channel->fd, nullptr, 0, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
    if (size < 0)
        return -1; // EAGAIN
    if (size == 0) {
        errno = EIO; // the peer is gone: destroyed
        return -1;
    }
    if (static_cast<size_t>(size) > len) {
        errno = EINVAL;
        return -1;
    }
    ssize_t n = ::recv(channel->fd, event, len, MSG_DONTWAIT);
    if (n < 0)
        return -1;
    if (s->omit_data) {
        std::lock_guard lock(s->mutex);
        s->unread.erase(event->cookie);
    }
    ++s->reads;
    return n;
}

} // namespace

fake_devx_channel::fake_devx_channel(bool omit_data) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
        throw std::runtime_error("socketpair failed");
    state_.channel.fd = fds[0];
    state_.write_fd = fds[1];
    state_.omit_data = omit_data;
}

fake_devx_channel::~fake_devx_channel() {
    ::close(state_.channel.fd);
    if (state_.write_fd >= 0)
        ::close(state_.write_fd);
}

detail::devx_event_source::options fake_devx_channel::options() const {
    detail::devx_event_source::options opts;
    opts.get_event = &imitation_get_event;
    return opts;
}

void fake_devx_channel::raise(std::uint64_t cookie, const eqe& data) {
    std::vector<std::byte> record(sizeof cookie);
    std::memcpy(record.data(), &cookie, sizeof cookie);
    if (state_.omit_data) {
        std::lock_guard lock(state_.mutex);
        if (!state_.unread.insert(cookie).second)
            return; // merged with the unread one
    } else {
        record.insert(record.end(), data.begin(), data.end());
    }
    if (::send(state_.write_fd, record.data(), record.size(), 0) !=
        static_cast<ssize_t>(record.size()))
        throw std::runtime_error("fake_devx_channel: send failed");
}

void fake_devx_channel::destroy() {
    ::close(state_.write_fd);
    state_.write_fd = -1;
}

fake_devx_channel::eqe fake_devx_channel::eqe_for(std::uint64_t cookie) {
    eqe e;
    for (std::size_t i = 0; i < e.size(); ++i)
        e[i] = static_cast<std::byte>(cookie + i);
    return e;
}

} // namespace rdma_asio::test
