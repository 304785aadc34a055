// The loop every fd-backed event source drains with: read one event at a time
// until the fd would block, or until the dispatcher's sink wants no more.
//
// A source only says what one read gave (a read_result); the loop decides what
// follows, so that EINTR, EAGAIN and a final failure mean the same in every
// source, and so that it can be tested without an fd.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

#include <cerrno>
#include <utility>

namespace rdma_asio::detail {

/// What one read of an event fd gave.
class read_result {
public:
    enum class kind {
        event,       // the read filled the value: hand it on, read again
        skip,        // nothing to hand on (EINTR, a MAD for nobody): read again
        would_block, // EAGAIN: the fd is empty, stop until the next wake-up
        failed,      // the fd failed for good: fail the waiters with error(), stop
        last_event,  // the value, then the fd failed for good with error(): both, stop
    };

    static read_result event() noexcept { return read_result(kind::event); }
    static read_result skip() noexcept { return read_result(kind::skip); }
    static read_result would_block() noexcept { return read_result(kind::would_block); }
    static read_result failed(const error_code& ec) noexcept {
        return read_result(kind::failed, ec);
    }
    /// An event that is the fd's last word (a device removal): delivered once, as an
    /// event, and then every other wait fails with `ec`.
    static read_result last_event(const error_code& ec) noexcept {
        return read_result(kind::last_event, ec);
    }
    /// The usual reading of a failed read's errno: EAGAIN/EWOULDBLOCK would block,
    /// EINTR reads again, anything else is final (a read that failed once would fail
    /// again); 0, from a library that failed without setting errno, is EIO.
    static read_result from_errno(int e) noexcept {
        if (e == EAGAIN || e == EWOULDBLOCK)
            return would_block();
        if (e == EINTR)
            return skip();
        return failed(errno_code(e != 0 ? e : EIO));
    }

    kind what() const noexcept { return kind_; }
    /// Why the fd failed (failed, last_event); empty otherwise.
    error_code error() const noexcept {
        return category_ != nullptr ? error_code(value_, *category_) : error_code();
    }

private:
    // The error as its two parts, not as an error_code: a default error_code calls
    // std::system_category(), out of line, and a drain makes two results per event.
    explicit read_result(kind k) noexcept : kind_(k) {}
    read_result(kind k, const error_code& ec) noexcept
        : kind_(k), value_(ec.value()), category_(&ec.category()) {}

    kind kind_;
    int value_ = 0;
    const error_category* category_ = nullptr;
};

/// Reads with `read_one(Value&) -> read_result` until the fd would block, failed,
/// or `sink.more()` is false (asked before every read). Each event goes to
/// sink.push(Value&&), a final failure to sink.fail(error_code), once. This is the
/// drain loop of the Source contract in event_dispatcher.hpp.
template <class Value, class Sink, class ReadOne>
void read_until_would_block(Sink& sink, ReadOne&& read_one) noexcept {
    while (sink.more()) {
        Value value{};
        const read_result r = read_one(value);
        switch (r.what()) {
        case read_result::kind::event:
            sink.push(std::move(value));
            continue;
        case read_result::kind::skip:
            continue;
        case read_result::kind::would_block:
            return;
        case read_result::kind::failed:
            sink.fail(r.error());
            return;
        case read_result::kind::last_event:
            sink.push(std::move(value));
            sink.fail(r.error());
            return;
        }
        return; // a kind this loop does not know: stop rather than spin
    }
}

} // namespace rdma_asio::detail
