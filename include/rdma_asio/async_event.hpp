// Asynchronous events of an RDMA device (ibv_get_async_event) as owning values.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace rdma_asio {

/// Every event type of ibv_get_async_event(3), with the same values as
/// ibv_event_type, plus the subnet events of ibv_register_sm_events (Solaris) and
/// rdma_asio's own removal event.
enum class event_type : int {
    // QP events
    qp_fatal = IBV_EVENT_QP_FATAL,
    qp_req_err = IBV_EVENT_QP_REQ_ERR,
    qp_access_err = IBV_EVENT_QP_ACCESS_ERR,
    comm_est = IBV_EVENT_COMM_EST,
    sq_drained = IBV_EVENT_SQ_DRAINED,
    path_mig = IBV_EVENT_PATH_MIG,
    path_mig_err = IBV_EVENT_PATH_MIG_ERR,
    qp_last_wqe_reached = IBV_EVENT_QP_LAST_WQE_REACHED,
    // CQ events
    cq_err = IBV_EVENT_CQ_ERR,
    // SRQ events
    srq_err = IBV_EVENT_SRQ_ERR,
    srq_limit_reached = IBV_EVENT_SRQ_LIMIT_REACHED,
    // WQ events
    wq_fatal = IBV_EVENT_WQ_FATAL,
    // port events
    port_active = IBV_EVENT_PORT_ACTIVE,
    port_err = IBV_EVENT_PORT_ERR,
    lid_change = IBV_EVENT_LID_CHANGE,
    pkey_change = IBV_EVENT_PKEY_CHANGE,
    sm_change = IBV_EVENT_SM_CHANGE,
    client_reregister = IBV_EVENT_CLIENT_REREGISTER,
    gid_change = IBV_EVENT_GID_CHANGE,
    // CA events
    device_fatal = IBV_EVENT_DEVICE_FATAL,
    // subnet events (ibv_register_sm_events), carrying a GID
    mcg_created = 0x100,
    mcg_deleted,
    gid_avail,
    gid_unavail,
    // rdma_asio: the device went away without a DEVICE_FATAL (uverbs node deleted,
    // or the async fd failed)
    device_removed = 0x200,
};

/// What an event is about, i.e. which member of ibv_async_event::element is valid.
enum class event_element { cq, qp, srq, wq, port, device, gid };

/// The element kind of an event type.
event_element element_of(event_type type) noexcept;
/// The name the seeds use, e.g. "IBV_EVENT_PORT_ACTIVE", "IBV_SM_EVENT_GID_AVAIL";
/// "RDMA_ASIO_EVENT_DEVICE_REMOVED"; "unknown" for a value outside the enum.
std::string_view to_string(event_type type) noexcept;
/// True for the events that end a device: device_fatal and device_removed.
constexpr bool is_removal(event_type type) noexcept {
    return type == event_type::device_fatal || type == event_type::device_removed;
}

/// One asynchronous event. It owns the acknowledgement that libibverbs requires
/// for every event ibv_get_async_event() returned: it acks exactly once, when
/// destroyed or assigned over, or earlier through ack().
///
/// Ack before destroying the event's object: ibv_destroy_qp/cq/srq/wq wait until
/// every event of that object is acked, so an unacked event in the destroying
/// thread's own scope blocks it for ever.
///
/// Move-only. A default-constructed or moved-from event is empty (no type, no ack).
class async_event {
public:
    async_event() noexcept = default;
    /// Takes over the acknowledgement of an event from ibv_get_async_event().
    explicit async_event(const ibv_async_event& raw) noexcept;
    /// An event that needs no acknowledgement (subnet and removal events).
    async_event(event_type type, int port_num, const ibv_gid& gid) noexcept;

    async_event(async_event&& other) noexcept;
    async_event& operator=(async_event&& other) noexcept;
    async_event(const async_event&) = delete;
    async_event& operator=(const async_event&) = delete;
    ~async_event() { ack(); }

    explicit operator bool() const noexcept { return valid_; }
    event_type type() const noexcept { return type_; }
    std::string_view name() const noexcept { return to_string(type_); }
    event_element element() const noexcept { return element_of(type_); }

    /// The affected object, or nullptr/0 when the event is about something else.
    ibv_cq* cq() const noexcept;
    ibv_qp* qp() const noexcept;
    ibv_srq* srq() const noexcept;
    ibv_wq* wq() const noexcept;
    /// Port number of a port or subnet event, else 0.
    int port_num() const noexcept;
    /// The GID of a subnet event (port GID or MGID), else all zero.
    const ibv_gid& gid() const noexcept { return gid_; }
    /// The object pointer of a CQ/QP/SRQ/WQ event, else nullptr.
    const void* object() const noexcept;

    /// True while the acknowledgement is still owed.
    bool needs_ack() const noexcept { return owns_ack_; }
    /// Acknowledges now (ibv_ack_async_event); later calls do nothing.
    void ack() noexcept;
    /// Gives up the acknowledgement: the caller must ibv_ack_async_event() the result.
    ibv_async_event release() noexcept;
    const ibv_async_event& native() const noexcept { return raw_; }

private:
    ibv_async_event raw_{};
    ibv_gid gid_{};
    event_type type_{};
    bool valid_ = false;
    bool owns_ack_ = false;
};

/// A predicate for async_event_stream::async_next: accepts events of one type,
/// optionally about one object or one port.
class event_match {
public:
    explicit event_match(event_type type) noexcept : type_(type) {}
    event_match(event_type type, const ibv_cq* cq) noexcept : type_(type), object_(cq) {}
    event_match(event_type type, const ibv_qp* qp) noexcept : type_(type), object_(qp) {}
    event_match(event_type type, const ibv_srq* srq) noexcept : type_(type), object_(srq) {}
    event_match(event_type type, const ibv_wq* wq) noexcept : type_(type), object_(wq) {}
    /// Port events (and subnet events) of one port.
    static event_match port(event_type type, int port_num) noexcept {
        event_match m(type);
        m.port_ = port_num;
        return m;
    }

    bool operator()(const async_event& ev) const noexcept {
        return ev.type() == type_ && (object_ == nullptr || ev.object() == object_) &&
               (port_ == 0 || ev.port_num() == port_);
    }

private:
    event_type type_;
    const void* object_ = nullptr;
    int port_ = 0;
};

/// What rdma_asio last learnt about a port: queried when the event stream opened
/// and again after each port event (GID_CHANGE refreshes the GIDs).
struct port_state {
    int port_num = 0;
    ibv_port_state state = IBV_PORT_NOP;
    std::uint8_t link_layer = IBV_LINK_LAYER_UNSPECIFIED;
    std::uint16_t lid = 0;
    std::uint16_t sm_lid = 0;
    /// The valid entries of the port's GID table (ibv_query_gid_table).
    std::vector<ibv_gid_entry> gids;
    /// Port events seen for this port since the stream opened.
    std::uint64_t events = 0;
};

} // namespace rdma_asio
