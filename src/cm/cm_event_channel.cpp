#include "rdma_asio/cm_event_channel.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

#include <cstdio>

namespace rdma_asio::detail {

std::shared_ptr<cm_channel_impl> open_cm_event_channel(const asio::any_io_executor& ex,
                                                       error_code& ec) {
    errno = 0;
    rdma_event_channel* channel = rdma_create_event_channel();
    if (channel == nullptr) {
        ec = last_errno_code();
        return nullptr;
    }
    std::shared_ptr<cm_channel_impl> impl;
    try {
        impl = std::make_shared<cm_channel_impl>(ex, channel);
    } catch (...) {
        rdma_destroy_event_channel(channel);
        throw;
    }
    impl->dispatcher->open(ec);
    if (ec)
        return nullptr; // the destructor destroys the channel
    return impl;
}

cm_channel_impl::cm_channel_impl(const asio::any_io_executor& ex, rdma_event_channel* ch)
    : channel(ch), dispatcher(std::make_shared<event_dispatcher<cm_event_source>>(ex, ch)) {}

cm_channel_impl::~cm_channel_impl() {
    // Unregister (and restore) the fd before librdmacm closes it. The events the
    // dispatcher still has, queued or held for handlers that never ran, are
    // acked as it drops them, and connection requests among them rejected.
    dispatcher->close();
    rdma_destroy_event_channel(channel);
}

namespace {

// net.rdma_ucm.max_backlog: the kernel's cap on rdma_listen's backlog, and what it
// takes for 0 or a negative one (1024 unless the administrator changed it).
std::size_t max_backlog() noexcept {
    std::size_t most = 1024;
    if (std::FILE* f = std::fopen("/proc/sys/net/rdma_ucm/max_backlog", "r")) {
        unsigned long read = 0;
        if (std::fscanf(f, "%lu", &read) == 1 && read > 0)
            most = read;
        std::fclose(f);
    }
    return most;
}

} // namespace

void cm_event_source::listening(const rdma_cm_id* listener, int backlog) {
    const std::size_t most = max_backlog();
    const std::size_t n = backlog <= 0 || static_cast<std::size_t>(backlog) > most
                              ? most
                              : static_cast<std::size_t>(backlog);
    stopped_listening(listener);
    backlogs_.emplace_back(listener, n);
}

void drop_connect_request(cm_event& ev) noexcept {
    rdma_cm_id* id = ev && ev.type() == RDMA_CM_EVENT_CONNECT_REQUEST ? ev.id() : nullptr;
    if (id != nullptr)
        rdma_reject(id, nullptr, 0);
    ev.ack();
    if (id != nullptr)
        rdma_destroy_id(id);
}

} // namespace rdma_asio::detail
