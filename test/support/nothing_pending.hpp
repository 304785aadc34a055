// Whether an io_context has anything left to do: no reactor wait, no queued
// handler, no work guard. For fixture teardowns, where a test that ends with
// work pending has left an operation behind (or says why it did so on purpose).
#pragma once

#include "asio_alias.hpp"

namespace rdma_asio::test {

/// Runs the handlers that are ready, then reports whether the context ran out of
/// work (poll() stops a context that has none left). Never blocks.
inline bool nothing_pending(asio::io_context& ioc) {
    ioc.restart();
    ioc.poll();
    return ioc.stopped();
}

} // namespace rdma_asio::test
