#include "rdma_asio/cm_id.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

#include <arpa/inet.h>
#include <infiniband/ib.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <new>
#include <utility>
#include <vector>

namespace rdma_asio {
namespace detail {

error_code cm_address_length(const sockaddr* addr, socklen_t& length) noexcept {
    length = 0;
    if (addr == nullptr)
        return errno_code(EINVAL);
    switch (addr->sa_family) {
    case AF_INET:
        length = sizeof(sockaddr_in);
        return {};
    case AF_INET6:
        length = sizeof(sockaddr_in6);
        return {};
    case AF_IB:
        length = sizeof(sockaddr_ib);
        return {};
    default: // AF_UNSPEC included: not an address to bind to or resolve
        return errno_code(EAFNOSUPPORT);
    }
}

namespace {

// Copies an address whose length cm_address_length() checked.
error_code copy(sockaddr_storage& to, const sockaddr* from) noexcept {
    socklen_t length = 0;
    if (error_code ec = cm_address_length(from, length))
        return ec;
    std::memcpy(&to, from, length);
    return {};
}

} // namespace

cm_call cm_call::resolve_addr(const sockaddr* src, const sockaddr* dst,
                              std::chrono::milliseconds timeout) noexcept {
    cm_call c;
    c.kind_ = kind::resolve_addr;
    if (src != nullptr) {
        c.invalid_ = copy(c.src_, src);
        c.has_src_ = true;
    }
    if (!c.invalid_)
        c.invalid_ = copy(c.dst_, dst);
    c.timeout_ms_ = static_cast<int>(timeout.count());
    return c;
}

cm_call cm_call::resolve_route(std::chrono::milliseconds timeout) noexcept {
    cm_call c;
    c.kind_ = kind::resolve_route;
    c.timeout_ms_ = static_cast<int>(timeout.count());
    return c;
}

cm_call cm_call::with_param(kind k, const rdma_conn_param& param) noexcept {
    cm_call c;
    c.kind_ = k;
    c.param_ = param;
    if (param.private_data == nullptr && param.private_data_len > 0)
        c.invalid_ = errno_code(EINVAL);
    const std::size_t n = std::min<std::size_t>(param.private_data_len, c.private_data_.size());
    if (param.private_data != nullptr && n > 0)
        std::memcpy(c.private_data_.data(), param.private_data, n);
    c.param_.private_data_len = static_cast<std::uint8_t>(n);
    return c;
}

cm_call cm_call::connect(const rdma_conn_param& param) noexcept {
    return with_param(kind::connect, param);
}

cm_call cm_call::accept(const rdma_conn_param& param) noexcept {
    return with_param(kind::accept, param);
}

cm_call cm_call::connect_with_defaults() noexcept {
    cm_call c;
    c.kind_ = kind::connect;
    c.default_param_ = true;
    return c;
}

cm_call cm_call::accept_with_defaults(std::optional<rd_atomic_limits> request) noexcept {
    cm_call c;
    c.kind_ = kind::accept;
    c.default_param_ = true;
    c.request_ = request;
    return c;
}

error_code default_conn_param(rdma_cm_id* id, const std::optional<rd_atomic_limits>& request,
                              rdma_conn_param& param) noexcept {
    if (id == nullptr || id->verbs == nullptr)
        return errno_code(ENODEV);
    ibv_device_attr device{};
    if (int rc = ibv_query_device(id->verbs, &device); rc != 0)
        return errno_code(rc > 0 ? rc : errno);
    param = request ? accept_defaults(limits_of(device), *request)
                    : connect_defaults(limits_of(device));
    return {};
}

cm_call cm_call::disconnect() noexcept {
    return cm_call{};
}

namespace {

// An IPv4 or IPv6 address that is not a multicast group (224.0.0.0/4, ff00::/8).
// rdma_join_multicast(3) takes one on RoCE and "joins" it, and the endpoint it gives
// then names no group a queue pair can attach to.
bool unicast_ip(const sockaddr_storage& address) noexcept {
    if (address.ss_family == AF_INET)
        return !IN_MULTICAST(ntohl(reinterpret_cast<const sockaddr_in&>(address).sin_addr.s_addr));
    if (address.ss_family == AF_INET6)
        return !IN6_IS_ADDR_MULTICAST(&reinterpret_cast<const sockaddr_in6&>(address).sin6_addr);
    return false;
}

} // namespace

cm_call cm_call::join_multicast(const sockaddr* group) noexcept {
    cm_call c;
    c.kind_ = kind::join_multicast;
    c.invalid_ = copy(c.dst_, group);
    if (!c.invalid_ && unicast_ip(c.dst_))
        c.invalid_ = errno_code(EINVAL);
    return c;
}

datagram_endpoint multicast_group_of(const rdma_cm_event& joined) noexcept {
    const rdma_ud_param& ud = joined.param.ud;
    datagram_endpoint group;
    if (ud.ah_attr.is_global)
        std::memcpy(group.gid.data(), ud.ah_attr.grh.dgid.raw, group.gid.size());
    group.lid = ud.ah_attr.dlid;
    group.sl = ud.ah_attr.sl;
    group.qp_num = ud.qp_num;
    group.qkey = ud.qkey;
    return group;
}

error_code cm_call::operator()(rdma_cm_id* id) noexcept {
    if (invalid_)
        return invalid_;
    // librdmacm reads the id's device in these calls without checking that there
    // is one (it crashes on an id whose address is not resolved yet).
    if (kind_ != kind::resolve_addr && id->verbs == nullptr)
        return errno_code(ENODEV);
    if (default_param_)
        if (error_code ec = default_conn_param(id, request_, param_))
            return ec;
    // The copy's private data, wherever this object lives now.
    param_.private_data = param_.private_data_len > 0 ? private_data_.data() : nullptr;
    int result = -1;
    errno = 0;
    switch (kind_) {
    case kind::resolve_addr:
        result = rdma_resolve_addr(id, has_src_ ? reinterpret_cast<sockaddr*>(&src_) : nullptr,
                                   reinterpret_cast<sockaddr*>(&dst_), timeout_ms_);
        break;
    case kind::resolve_route:
        result = rdma_resolve_route(id, timeout_ms_);
        break;
    case kind::connect:
        result = rdma_connect(id, &param_);
        break;
    case kind::accept:
        result = rdma_accept(id, &param_);
        break;
    case kind::disconnect:
        result = rdma_disconnect(id);
        break;
    case kind::join_multicast:
        result = rdma_join_multicast(id, reinterpret_cast<sockaddr*>(&dst_), nullptr);
        break;
    }
    return result == 0 ? error_code{} : last_errno_code();
}

std::shared_ptr<cm_id_impl> open_cm_id(const std::shared_ptr<cm_channel_impl>& channel,
                                       rdma_port_space ps, error_code& ec) {
    if (!channel) {
        ec = errno_code(EBADF);
        return nullptr;
    }
    rdma_cm_id* id = nullptr;
    errno = 0;
    if (rdma_create_id(channel->channel, &id, nullptr, ps) != 0) {
        ec = last_errno_code();
        return nullptr;
    }
    try {
        return std::make_shared<cm_id_impl>(channel, id);
    } catch (const std::bad_alloc&) {
        rdma_destroy_id(id);
        ec = errno_code(ENOMEM);
        return nullptr;
    }
}

std::shared_ptr<cm_id_impl>
cm_id_impl::adopt_request(const std::shared_ptr<cm_channel_impl>& channel,
                          cm_event& request) noexcept {
    std::shared_ptr<cm_id_impl> adopted;
    try {
        adopted = std::make_shared<cm_id_impl>(channel, request.id());
    } catch (const std::bad_alloc&) {
        drop_connect_request(request);
        return nullptr;
    }
    const rdma_cm_event& raw = *request.native_handle();
    const bool ud = raw.id->ps == RDMA_PS_UDP || raw.id->ps == RDMA_PS_IPOIB;
    const void* data = ud ? raw.param.ud.private_data : raw.param.conn.private_data;
    const std::size_t length = data == nullptr ? 0
                               : ud            ? raw.param.ud.private_data_len
                                               : raw.param.conn.private_data_len;
    const std::size_t n = std::min(length, adopted->private_data_.size());
    if (n > 0)
        std::memcpy(adopted->private_data_.data(), data, n);
    adopted->private_data_length_ = n;
    if (!ud)
        adopted->request_limits_ =
            rd_atomic_limits{raw.param.conn.responder_resources, raw.param.conn.initiator_depth};
    return adopted;
}

error_code cm_id_impl::bind(const sockaddr* addr) noexcept {
    socklen_t length = 0;
    if (error_code ec = cm_address_length(addr, length))
        return ec;
    errno = 0;
    if (rdma_bind_addr(id_, const_cast<sockaddr*>(addr)) != 0)
        return last_errno_code();
    return {};
}

error_code cm_id_impl::listen(int backlog, int kept) noexcept {
    errno = 0;
    if (rdma_listen(id_, backlog) != 0)
        return last_errno_code();
    try {
        channel_->dispatcher->with_source(
            [&](cm_event_source& source) { source.listening(id_, kept); });
    } catch (const std::bad_alloc&) {
        return errno_code(ENOMEM); // listening, but its backlog not counted: refused
    }
    return {};
}

error_code cm_id_impl::reject(const void* private_data, std::uint8_t length) noexcept {
    if (private_data == nullptr && length > 0)
        return errno_code(EINVAL);
    errno = 0;
    if (rdma_reject(id_, private_data, length) != 0)
        return last_errno_code();
    return {};
}

std::uint16_t cm_id_impl::local_port() const noexcept {
    return id_ ? ntohs(rdma_get_src_port(id_)) : 0;
}

group_address::group_address(const sockaddr* joined) noexcept : copied(!copy(group, joined)) {}

void cm_id_impl::remember_group(const sockaddr* group) {
    sockaddr_storage copied{};
    if (!copy(copied, group))
        groups_.push_back(copied);
}

error_code cm_id_impl::leave_group(const sockaddr* group) noexcept {
    socklen_t length = 0;
    if (error_code ec = cm_address_length(group, length))
        return ec;
    std::erase_if(groups_,
                  [&](const sockaddr_storage& g) { return std::memcmp(&g, group, length) == 0; });
    errno = 0;
    if (rdma_leave_multicast(id_, const_cast<sockaddr*>(group)) != 0)
        return last_errno_code();
    return {};
}

void cm_id_impl::cancel() noexcept {
    if (id_)
        channel_->dispatcher->cancel(id_);
}

void cm_id_impl::close() noexcept {
    private_data_length_ = 0;
    if (!id_)
        return;
    auto& dispatcher = *channel_->dispatcher;
    // Its waits end, what was read for it is acked (its connection requests
    // rejected), events its operations took and have not delivered yet too, and
    // so is what is read from now on: rdma_destroy_id waits for the acks of every
    // event that was read.
    dispatcher.retire(id_);
    dispatcher.with_source([&](cm_event_source& source) { source.stopped_listening(id_); });
    // Memberships still held: a group not joined (the join failed or was never
    // made) answers an error, which changes nothing.
    for (sockaddr_storage& group : std::exchange(groups_, {}))
        rdma_leave_multicast(id_, reinterpret_cast<sockaddr*>(&group));
    if (auto close_queue_pair = std::exchange(close_queue_pair_, nullptr))
        close_queue_pair(); // destroys the QP itself (rdma_destroy_qp), if it still can
    if (id_->qp != nullptr)
        rdma_destroy_qp(id_);
    rdma_destroy_id(id_);
    dispatcher.end_retirement(id_);
    id_ = nullptr;
    channel_.reset();
}

} // namespace detail
} // namespace rdma_asio
