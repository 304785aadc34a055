// An RC connection made with rdma_cm: its id, QP and CQs, torn down in the
// order verbs requires.
#pragma once

#include "rdma_asio/cm_id.hpp"
#include "rdma_asio/completion_channel.hpp"
#include "rdma_asio/completion_queue.hpp"

#include <infiniband/verbs.h>

#include <cstdint>

namespace rdma_asio {

struct connection_options {
    std::uint32_t send_depth = 64;
    std::uint32_t recv_depth = 64;
    std::uint32_t max_inline = 64;
    cq_options cq{};
};

/// A cm_id with an RC QP (rdma_create_qp) whose send and receive CQs are
/// completion_queue objects on a shared completion_channel (one per device is
/// enough for any number of connections).
///
/// Destruction order: the id first (its QP with it, then the id, acking its
/// events), then the CQs (flushing their acks), so nothing is destroyed while
/// something created on it lives. The channel and the PD belong to the caller and
/// must outlive the connection. Move-only.
///
/// Not a template: it takes a cm_id (on any_io_executor), into which an id of
/// another executor type (basic_cm_id<E>) moves; id() is that cm_id.
class connection {
public:
    /// Creates the CQs on `channel` and the QP on `id` with `pd`; the id must know
    /// its device (after address resolution, or a connection request). Throws
    /// std::system_error naming the call that failed, before creating anything:
    /// EBADF for an id that is not open, ENODEV for an id without a device yet,
    /// EEXIST for an id that has a QP, EINVAL for a null PD, a closed channel, or
    /// a PD or channel on another device than the id's.
    connection(cm_id id, completion_channel& channel, ibv_pd* pd,
               const connection_options& options);
    connection(cm_id id, completion_channel& channel, ibv_pd* pd)
        : connection(std::move(id), channel, pd, connection_options{}) {}

    connection(connection&&) noexcept = default;
    /// Tears this connection down (id first) before taking `other`'s.
    connection& operator=(connection&& other) noexcept {
        id_ = std::move(other.id_);
        recv_cq_ = std::move(other.recv_cq_);
        send_cq_ = std::move(other.send_cq_);
        return *this;
    }

    cm_id& id() noexcept { return id_; }
    ibv_qp* qp() const noexcept { return id_.native_handle() ? id_.native_handle()->qp : nullptr; }
    completion_queue& send_cq() noexcept { return send_cq_; }
    completion_queue& recv_cq() noexcept { return recv_cq_; }

private:
    struct checked_tag {};
    connection(cm_id id, completion_channel& channel, ibv_pd* pd, const connection_options& options,
               checked_tag);

    // Declared so that they are destroyed id first, then the CQs.
    completion_queue send_cq_;
    completion_queue recv_cq_;
    cm_id id_;
};

} // namespace rdma_asio
