// Whether an io_context has anything left to do: no reactor wait, no queued
// handler, no work guard. For fixture teardowns, where a test that ends with
// work pending has left an operation behind (or says why it did so on purpose).
//
// On epoll a cancelled wait is finished when cancel() returns: its handler is
// queued, and one poll() runs it. On io_uring a cancelled wait is a cancel request
// to the kernel, and the kernel completes the cancelled poll on the thread that
// submitted it. When that thread has exited since (a test that ran the context
// on a helper thread for a while), the kernel hands the completion to a worker of
// its own, and it arrives a clock tick or more later: measured on Linux 6.18, a
// wait armed on a thread that had exited and then cancelled was still pending
// after one poll() in 200 of 200 tries, and finished within the next run_for().
// So on io_uring the check waits, bounded, for completions already under way.
#pragma once

#include "asio_alias.hpp"

#include <chrono>

namespace rdma_asio::test {

/// Runs the handlers that are ready, then reports whether the context ran out of
/// work (poll() stops a context that has none left). Never blocks on epoll; on
/// io_uring waits at most `in_flight` for cancellations the kernel has not
/// completed yet.
inline bool nothing_pending(asio::io_context& ioc,
                            std::chrono::milliseconds in_flight = std::chrono::seconds(2)) {
    ioc.restart();
    ioc.poll();
#if RDMA_ASIO_DETAIL_COMPILED_FOR_IO_URING
    if (!ioc.stopped()) {
        ioc.restart();
        ioc.run_for(in_flight); // returns as soon as the context runs out of work
    }
#else
    (void)in_flight;
#endif
    return ioc.stopped();
}

} // namespace rdma_asio::test
