#include "rdma_asio/detail/qp/datagram_support.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

namespace rdma_asio::detail {

namespace {

// The sender's GID in the 40 bytes before a UD message (ibv_create_ah_from_wc(3)
// reads them the same way): an InfiniBand or RoCE v1 GRH, or RoCE v2 over IPv6,
// starts with IP version 6 and holds the source GID at bytes 8-23; RoCE v2 over
// IPv4 puts the 20-byte IPv4 header in the last 20 bytes, whose source address
// is the IPv4-mapped GID ::ffff:a.b.c.d.
// An endpoint's GID as the verbs take it.
ibv_gid gid_of(const datagram_endpoint& endpoint) noexcept {
    ibv_gid gid{};
    std::memcpy(gid.raw, endpoint.gid.data(), endpoint.gid.size());
    return gid;
}

std::array<std::uint8_t, 16> source_gid(const std::byte* grh) noexcept {
    std::array<std::uint8_t, 16> gid{};
    const auto byte = [grh](std::size_t i) { return std::to_integer<std::uint8_t>(grh[i]); };
    constexpr std::size_t ipv4_header = 20;
    if ((byte(0) >> 4) == 6) {
        std::memcpy(gid.data(), grh + 8, gid.size());
    } else if (byte(ipv4_header) == 0x45) { // version 4, a 20-byte header
        gid[10] = 0xff;
        gid[11] = 0xff;
        std::memcpy(gid.data() + 12, grh + ipv4_header + 12, 4);
    }
    return gid;
}

} // namespace

std::unique_ptr<datagram_support> datagram_support::create(ibv_qp* qp, std::uint8_t port,
                                                           std::uint8_t gid_index,
                                                           std::uint32_t receive_depth,
                                                           error_code& ec) {
    std::unique_ptr<datagram_support> d(new datagram_support);
    d->pd_ = qp->pd;
    d->port_ = port;
    d->gid_index_ = gid_index;
    ibv_port_attr port_attr{};
    if (int rc = ibv_query_port(qp->context, port, &port_attr); rc != 0) {
        ec = errno_code(rc > 0 ? rc : errno);
        return nullptr;
    }
    ibv_gid gid{};
    if (ibv_query_gid(qp->context, port, gid_index, &gid) != 0) {
        ec = last_errno_code();
        return nullptr;
    }
    std::memcpy(d->local_.gid.data(), gid.raw, d->local_.gid.size());
    d->local_.lid = port_attr.lid;
    d->local_.qp_num = qp->qp_num;
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    if (int rc = ibv_query_qp(qp, &attr, IBV_QP_QKEY, &init); rc != 0) {
        ec = errno_code(rc > 0 ? rc : errno);
        return nullptr;
    }
    d->local_.qkey = attr.qkey;
    d->depth_ = receive_depth;
    if (receive_depth != 0) {
        d->ring_.resize(std::size_t{receive_depth} * grh_size);
        // As an int: the macro ibv_reg_mr ORs it with an enumerator of another type.
        const int access = IBV_ACCESS_LOCAL_WRITE;
        d->ring_mr_ = ibv_reg_mr(d->pd_, d->ring_.data(), d->ring_.size(), access);
        if (d->ring_mr_ == nullptr) {
            ec = last_errno_code();
            return nullptr;
        }
    }
    ec.clear();
    return d;
}

datagram_support::~datagram_support() {
    release();
}

std::uint32_t datagram_support::receive_list(std::span<const ibv_sge> sges, ibv_sge* out,
                                             std::uint32_t& slot) const noexcept {
    slot = static_cast<std::uint32_t>(posted_ % depth_);
    out[0].addr = reinterpret_cast<std::uintptr_t>(ring_.data() + std::size_t{slot} * grh_size);
    out[0].length = grh_size;
    out[0].lkey = ring_mr_->lkey;
    for (std::size_t i = 0; i < sges.size(); ++i)
        out[i + 1] = sges[i];
    return static_cast<std::uint32_t>(sges.size() + 1);
}

void datagram_support::received(const ibv_wc& wc, std::uint32_t slot, datagram_endpoint& source,
                                std::uint32_t& length) const noexcept {
    source = datagram_endpoint{};
    if ((wc.wc_flags & IBV_WC_GRH) != 0)
        source.gid = source_gid(ring_.data() + std::size_t{slot} * grh_size);
    source.lid = wc.slid;
    source.sl = wc.sl;
    source.qp_num = wc.src_qp;
    source.qkey = local_.qkey;
    length = wc.byte_len >= grh_size ? wc.byte_len - grh_size : 0;
}

ibv_ah* datagram_support::find(const datagram_endpoint& to) const noexcept {
    auto it = handles_.find(key_of(to));
    return it == handles_.end() ? nullptr : it->second;
}

ibv_ah_attr datagram_support::attributes_for(const datagram_endpoint& to) const noexcept {
    ibv_ah_attr attr{};
    attr.port_num = port_;
    attr.dlid = to.lid;
    attr.sl = to.sl;
    if (to.is_global()) {
        attr.is_global = 1;
        attr.grh.dgid = gid_of(to);
        attr.grh.sgid_index = gid_index_;
        attr.grh.hop_limit = 64;
    }
    return attr;
}

error_code datagram_support::adopt(const datagram_endpoint& to, ibv_ah* ah) noexcept {
    try {
        if (!handles_.emplace(key_of(to), ah).second)
            ibv_destroy_ah(ah); // another send's handle for the same address came first
        return {};
    } catch (const std::bad_alloc&) {
        ibv_destroy_ah(ah);
        return asio::error::no_memory;
    }
}

bool datagram_support::add_waiter(const datagram_endpoint& to, address_waiter w) {
    pending_handle& p = pending_[key_of(to)];
    p.waiting.push_back(std::move(w));
    return p.waiting.size() == 1 && !p.handing_out;
}

bool datagram_support::handing_out(const datagram_endpoint& to) const noexcept {
    auto it = pending_.find(key_of(to));
    return it != pending_.end() && it->second.handing_out;
}

std::vector<datagram_support::address_waiter>
datagram_support::take_waiters(const datagram_endpoint& to) noexcept {
    auto it = pending_.find(key_of(to));
    if (it == pending_.end())
        return {};
    std::vector<address_waiter> waiting = std::move(it->second.waiting);
    pending_.erase(it);
    return waiting;
}

std::vector<datagram_support::address_waiter>
datagram_support::next_waiters(const datagram_endpoint& to) noexcept {
    auto it = pending_.find(key_of(to));
    if (it == pending_.end()) // none waited, or close() or cancel() ended them
        return {};
    if (it->second.waiting.empty()) {
        pending_.erase(it); // all handed out: later sends see the handle alone
        return {};
    }
    it->second.handing_out = true;
    return std::exchange(it->second.waiting, {});
}

std::size_t datagram_support::unstarted(const datagram_endpoint& to) const noexcept {
    auto it = unstarted_.find(key_of(to));
    return it == unstarted_.end() ? 0 : it->second;
}

void datagram_support::waiting_send_added(const datagram_endpoint& to) {
    ++unstarted_[key_of(to)];
}

void datagram_support::waiting_send_done(const datagram_endpoint& to) noexcept {
    auto it = unstarted_.find(key_of(to));
    if (it != unstarted_.end() && --it->second == 0)
        unstarted_.erase(it);
}

datagram_support::waiting_sends datagram_support::take_all_waiters() noexcept {
    return std::exchange(pending_, {});
}

error_code datagram_support::multicast(ibv_qp* qp, const datagram_endpoint& group,
                                       bool attach) noexcept {
    const ibv_gid gid = gid_of(group);
    if (!attach) {
        if (int rc = ibv_detach_mcast(qp, &gid, group.lid); rc != 0)
            return errno_code(rc > 0 ? rc : errno);
        std::erase(groups_, group);
        return {};
    }
    try {
        groups_.reserve(groups_.size() + 1); // before attaching: nothing to undo
    } catch (const std::bad_alloc&) {
        return asio::error::no_memory;
    }
    if (int rc = ibv_attach_mcast(qp, &gid, group.lid); rc != 0)
        return errno_code(rc > 0 ? rc : errno);
    groups_.push_back(group);
    return {};
}

void datagram_support::detach_all(ibv_qp* qp) noexcept {
    for (const datagram_endpoint& group : std::exchange(groups_, {})) {
        const ibv_gid gid = gid_of(group);
        ibv_detach_mcast(qp, &gid, group.lid);
    }
}

void datagram_support::release() noexcept {
    for (auto& [key, ah] : handles_)
        ibv_destroy_ah(ah);
    handles_.clear();
    if (ring_mr_ != nullptr)
        ibv_dereg_mr(ring_mr_);
    ring_mr_ = nullptr;
}

} // namespace rdma_asio::detail
