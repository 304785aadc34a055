// DEVX event parsing: what mlx5dv_devx_get_event() returns (any number of bytes up
// to the buffer size, or -1 with any errno) through devx_event_source::drain into
// events, and each event through async_next's matcher and finish_read into a
// caller's buffer of any size. Checked: one event per successful read or EOVERFLOW,
// the cookie and data as read, EINTR retried, EAGAIN ends the drain quietly, other
// errors and reads shorter than the cookie fail it once, a buffer too small is
// refused with message_size and the exact size, nothing written past a buffer.
#include "fuzz_check.hpp"

#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/devx/devx_event_source.hpp"
#include "rdma_asio/detail/devx/devx_read_op.hpp"
#include "rdma_asio/error.hpp"

#include "asio_alias.hpp"

#include <deque>
#include <memory>
#include <optional>

using rdma_asio::detail::devx_event;
using rdma_asio::detail::devx_event_source;
using rdma_asio::detail::errno_code;
using rdma_asio::fuzz::script_reader;

namespace {

// What one call of the imitated mlx5dv_devx_get_event returns.
struct read_result {
    ssize_t n = -1;
    int error = 0; // errno when n < 0 (0: -1 without errno)
    std::vector<std::uint8_t> bytes;
};

// The kernel side, scripted by the fuzz input: one read_result per call.
std::deque<read_result>* script_reads = nullptr;
std::size_t calls = 0;

ssize_t scripted_get_event(mlx5dv_devx_event_channel*, mlx5dv_devx_async_event_hdr* hdr,
                           size_t len) {
    ++calls;
    FUZZ_CHECK(len >= devx_event_source::read_size);
    if (script_reads->empty()) {
        errno = EAGAIN;
        return -1;
    }
    read_result r = std::move(script_reads->front());
    script_reads->pop_front();
    if (r.n < 0) {
        errno = r.error;
        return -1;
    }
    if (!r.bytes.empty())
        std::memcpy(hdr, r.bytes.data(), r.bytes.size());
    return r.n;
}

struct sink {
    std::size_t budget;
    std::vector<devx_event> events;
    std::optional<rdma_asio::error_code> failed;
    bool more() const noexcept { return events.size() < budget && !failed; }
    void push(devx_event&& ev) {
        FUZZ_CHECK(!failed);
        events.push_back(std::move(ev));
    }
    void fail(const rdma_asio::error_code& ec) {
        FUZZ_CHECK(!failed); // once
        failed = ec;
    }
};

constexpr int errnos[] = {EAGAIN, EINTR, EOVERFLOW, EIO, EINVAL, ENOMEM, 0};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    script_reader in({data, size});
    const std::size_t budget = 1 + in.u8() % 16;
    std::deque<read_result> reads;
    for (int i = 0, count = in.u8() % 24; i < count && !in.empty(); ++i) {
        read_result r;
        if (in.u8() % 4 == 0) {
            r.error = errnos[in.u8() % std::size(errnos)];
        } else {
            // The kernel never returns more than the buffer holds.
            const std::size_t n = in.u16() % (devx_event_source::read_size + 1);
            r.bytes = in.bytes(n);
            r.bytes.resize(n); // an input cut short reads as zeros
            r.n = static_cast<ssize_t>(n);
        }
        reads.push_back(std::move(r));
    }
    const std::deque<read_result> script = reads;
    script_reads = &reads;
    calls = 0;

    mlx5dv_devx_event_channel channel{};
    channel.fd = -1;
    devx_event_source::options opts;
    opts.get_event = &scripted_get_event;
    devx_event_source source(&channel, opts);
    sink s{budget, {}, {}};
    source.drain(0, s);

    // Replay the script: what the drain must have made of it.
    std::size_t next = 0;
    std::size_t ok_reads = 0;
    for (std::size_t consumed = 0; consumed < calls; ++consumed) {
        if (consumed == script.size()) {
            FUZZ_CHECK(consumed + 1 == calls && !s.failed); // EAGAIN: nothing more
            break;
        }
        const read_result& r = script[consumed];
        if (r.n >= 0 && static_cast<std::size_t>(r.n) >= sizeof(std::uint64_t)) {
            FUZZ_CHECK(next < s.events.size());
            const devx_event& ev = s.events[next++];
            std::uint64_t cookie;
            std::memcpy(&cookie, r.bytes.data(), sizeof cookie);
            FUZZ_CHECK(!ev.lost && ev.cookie == cookie);
            FUZZ_CHECK(ev.size == r.bytes.size() - sizeof cookie && ev.data.size() == ev.size);
            FUZZ_CHECK(ev.size == 0 ||
                       std::memcmp(ev.data.data(), r.bytes.data() + sizeof cookie, ev.size) == 0);
            ++ok_reads;
        } else if (r.n >= 0) {
            // Shorter than the cookie: the kernel never does that; final.
            FUZZ_CHECK(consumed + 1 == calls && s.failed == errno_code(EIO));
        } else if (r.error == EOVERFLOW) {
            FUZZ_CHECK(next < s.events.size());
            FUZZ_CHECK(s.events[next++].lost);
        } else if (r.error == EINTR) {
            // read again
        } else if (r.error == EAGAIN) {
            FUZZ_CHECK(consumed + 1 == calls && !s.failed);
        } else {
            FUZZ_CHECK(consumed + 1 == calls && s.failed);
            FUZZ_CHECK(*s.failed == errno_code(r.error != 0 ? r.error : EIO));
        }
    }
    FUZZ_CHECK(next == s.events.size());
    FUZZ_CHECK(source.events_read() == ok_reads);
    // The drain stopped for a reason: the sink was full, an error, or EAGAIN.
    FUZZ_CHECK(!s.more() || calls == 0 || calls > script.size() ||
               script.at(calls - 1).error == EAGAIN);

    // Each event into a caller's buffer of a fuzzer-chosen size.
    for (const devx_event& ev : s.events) {
        const std::size_t capacity = in.u16() % 200;
        const auto buffer = std::make_unique<std::byte[]>(capacity + 1); // +1: never 0 bytes
        const rdma_asio::detail::devx_read_matcher matcher{capacity};
        devx_event refused;
        if (const rdma_asio::error_code ec = matcher.refuse(ev, refused)) {
            FUZZ_CHECK(ec == asio::error::message_size);
            FUZZ_CHECK(!ev.lost && ev.size > capacity);
            FUZZ_CHECK(refused.size == ev.size && refused.cookie == ev.cookie);
            continue;
        }
        FUZZ_CHECK(ev.lost || ev.size <= capacity);
        rdma_asio::error_code ec;
        const auto info =
            rdma_asio::detail::finish_read(ec, ev, asio::mutable_buffer(buffer.get(), capacity));
        if (ev.lost) {
            FUZZ_CHECK(ec == rdma_asio::errc::events_lost);
            continue;
        }
        FUZZ_CHECK(!ec && info.cookie == ev.cookie && info.size == ev.size);
        FUZZ_CHECK(ev.size == 0 || std::memcmp(buffer.get(), ev.data.data(), ev.size) == 0);
    }
    return 0;
}
