// The event source behind subnet_event_client: MADs received on a umad port.
//
// On a kernel umad device the port's fd goes to the reactor like every other
// source. Where the fd cannot be registered with epoll (ibsim's umad2sim hands
// out descriptors that are not kernel fds), a reader thread blocks in umad_recv
// and moves each MAD to the io_context through an eventfd, which the reactor
// watches instead. The dispatcher sees one fd either way.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/read_loop.hpp"
#include "rdma_asio/detail/subnet/umad_port.hpp"

#include <atomic>
#include <cstddef>
#include <deque>
#include <mutex>
#include <thread>

namespace rdma_asio::detail {

class umad_source {
public:
    using value_type = received_mad;

    explicit umad_source(umad_port& port) noexcept : port_(&port) {}
    umad_source(const umad_source&) = delete;
    umad_source& operator=(const umad_source&) = delete;
    ~umad_source() { close(); }

    std::size_t fd_count() const noexcept { return 1; }
    int native_handle(std::size_t) const noexcept {
        return reader_.joinable() ? eventfd_ : port_->fd();
    }

    /// Switches to the reader thread (see above); ec names what failed.
    void start_reader_thread(error_code& ec) noexcept;
    bool uses_reader_thread() const noexcept { return reader_.joinable(); }

    template <class Sink>
    void drain(std::size_t, Sink& sink) noexcept {
        if (reader_.joinable())
            return drain_handoff(sink);
        read_until_would_block<received_mad>(sink, [this](received_mad& mad) noexcept {
            error_code ec;
            switch (port_->recv(mad, 0, ec)) {
            case umad_port::recv_result::none:
                return read_result::would_block();
            case umad_port::recv_result::skip:
                return read_result::skip();
            case umad_port::recv_result::mad:
                return read_result::event();
            case umad_port::recv_result::error:
                return read_result::failed(ec);
            }
            return read_result::would_block(); // a result umad_port does not make
        });
    }

    void close() noexcept;

private:
    template <class Sink>
    void drain_handoff(Sink& sink) noexcept {
        clear_eventfd();
        std::deque<received_mad> mads;
        error_code ec;
        {
            std::lock_guard lock(handoff_mutex_);
            mads.swap(handoff_);
            ec = reader_error_;
        }
        for (received_mad& mad : mads)
            sink.push(std::move(mad));
        if (ec)
            sink.fail(ec);
    }
    void clear_eventfd() noexcept;
    void read_loop() noexcept;

    umad_port* port_;
    int eventfd_ = -1;
    std::thread reader_;
    std::atomic<bool> stop_{false};
    std::mutex handoff_mutex_;
    std::deque<received_mad> handoff_;
    error_code reader_error_;
};

} // namespace rdma_asio::detail
