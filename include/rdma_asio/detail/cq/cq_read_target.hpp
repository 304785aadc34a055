// The consumer of a cq_reader's reads, as the reader and the CQ (which names the
// one attached to it) know it.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <cstddef>

namespace rdma_asio::detail {

/// What a reader hands its reads to.
class cq_read_target {
public:
    /// The read ended: `n` completions are in the reader's buffer(), or the CQ
    /// failed with `ec` (operation_aborted: the CQ's cancel(), or its close). Runs
    /// on the CQ's executor, never inside cq_reader::start(); it may throw (a
    /// handler it ran did), which goes out of io_context::run().
    virtual void read(error_code ec, std::size_t n) = 0;

protected:
    ~cq_read_target() = default;
};

} // namespace rdma_asio::detail
