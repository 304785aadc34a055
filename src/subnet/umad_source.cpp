#include "rdma_asio/detail/subnet/umad_source.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>

namespace rdma_asio::detail {
namespace {

// How often the reader thread looks at its stop flag.
constexpr int reader_poll_ms = 50;
// Consecutive umad_recv failures after which the reader gives up.
constexpr int max_failures = 20;

} // namespace

void umad_source::start_reader_thread(error_code& ec) noexcept {
    if (reader_.joinable())
        return;
    eventfd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (eventfd_ < 0) {
        ec = last_errno_code();
        return;
    }
    try {
        stop_ = false;
        reader_ = std::thread([this] { read_loop(); });
    } catch (const system_error& e) {
        ec = e.code();
        ::close(eventfd_);
        eventfd_ = -1;
        return;
    }
    ec.clear();
}

void umad_source::read_loop() noexcept {
    int failures = 0;
    while (!stop_.load(std::memory_order_relaxed)) {
        received_mad mad;
        error_code ec;
        const auto r = port_->recv(mad, reader_poll_ms, ec);
        if (r == umad_port::recv_result::none || r == umad_port::recv_result::skip)
            continue;
        // umad2sim's poll fails now and then on a spurious wake-up, which
        // umad_recv reports as EIO; only a run of failures is an error.
        if (r == umad_port::recv_result::error && ++failures < max_failures) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            continue;
        }
        if (r == umad_port::recv_result::mad)
            failures = 0;
        {
            std::lock_guard lock(handoff_mutex_);
            if (r == umad_port::recv_result::mad)
                handoff_.push_back(mad);
            else
                reader_error_ = ec;
        }
        const std::uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(eventfd_, &one, sizeof one);
        if (r == umad_port::recv_result::error)
            return;
    }
}

void umad_source::clear_eventfd() noexcept {
    std::uint64_t count = 0;
    [[maybe_unused]] ssize_t n = ::read(eventfd_, &count, sizeof count);
}

void umad_source::close() noexcept {
    if (reader_.joinable()) {
        stop_ = true;
        reader_.join();
    }
    if (eventfd_ >= 0) {
        ::close(eventfd_);
        eventfd_ = -1;
    }
}

} // namespace rdma_asio::detail
