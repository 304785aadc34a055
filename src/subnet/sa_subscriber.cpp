#include "rdma_asio/detail/subnet/sa_subscriber.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/error.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rdma_asio::detail {
namespace {

bool is_multicast(const ibv_gid& gid) noexcept {
    return gid.raw[0] == 0xff;
}

bool same_gid(const ibv_gid& a, const ibv_gid& b) noexcept {
    return std::memcmp(a.raw, b.raw, sizeof a.raw) == 0;
}

bool contains(const std::vector<ibv_gid>& set, const ibv_gid& gid) noexcept {
    return std::any_of(set.begin(), set.end(), [&](const ibv_gid& g) { return same_gid(g, gid); });
}

void insert(std::vector<ibv_gid>& set, const ibv_gid& gid) {
    if (!contains(set, gid))
        set.push_back(gid);
}

void erase(std::vector<ibv_gid>& set, const ibv_gid& gid) {
    std::erase_if(set, [&](const ibv_gid& g) { return same_gid(g, gid); });
}

constexpr unsigned all_flags =
    static_cast<unsigned>(sm_event_mask::mgid | sm_event_mask::ugid | sm_event_mask::ugid_all |
                          sm_event_mask::mgid_all | sm_event_mask::all);

std::optional<event_type> event_of_trap(std::uint16_t trap) noexcept {
    switch (trap) {
    case sa::trap::gid_in_service:
        return event_type::gid_avail;
    case sa::trap::gid_out_of_service:
        return event_type::gid_unavail;
    case sa::trap::mcg_created:
        return event_type::mcg_created;
    case sa::trap::mcg_deleted:
        return event_type::mcg_deleted;
    }
    return std::nullopt;
}

} // namespace

error_code sm_registrations::validate(sm_event_mask mask, std::span<const ibv_gid> gids) {
    const unsigned bits = static_cast<unsigned>(mask);
    const error_code invalid = errno_code(EINVAL);
    if (bits == 0 || (bits & ~all_flags) != 0)
        return invalid;
    const bool per_mgid = has_any(mask, sm_event_mask::mgid);
    const bool per_ugid = has_any(mask, sm_event_mask::ugid);
    if (!gids.empty() && !per_mgid && !per_ugid)
        return invalid;
    bool any_multicast = false;
    bool any_unicast = false;
    for (const ibv_gid& gid : gids) {
        const bool multicast = is_multicast(gid);
        if ((multicast && !per_mgid) || (!multicast && !per_ugid))
            return invalid;
        (multicast ? any_multicast : any_unicast) = true;
    }
    if ((per_mgid && !any_multicast) || (per_ugid && !any_unicast))
        return invalid;
    return {};
}

void sm_registrations::add(sm_event_mask mask, std::span<const ibv_gid> gids) {
    if (has_any(mask, sm_event_mask::ugid_all | sm_event_mask::all))
        ugid_all_ = true;
    if (has_any(mask, sm_event_mask::mgid_all | sm_event_mask::all))
        mgid_all_ = true;
    for (const ibv_gid& gid : gids)
        insert(is_multicast(gid) ? mgids_ : ugids_, gid);
}

void sm_registrations::remove(sm_event_mask mask, std::span<const ibv_gid> gids) {
    if (has_any(mask, sm_event_mask::ugid_all | sm_event_mask::all))
        ugid_all_ = false;
    if (has_any(mask, sm_event_mask::mgid_all | sm_event_mask::all))
        mgid_all_ = false;
    if (has_any(mask, sm_event_mask::all)) {
        ugids_.clear();
        mgids_.clear();
    }
    for (const ibv_gid& gid : gids)
        erase(is_multicast(gid) ? mgids_ : ugids_, gid);
}

bool sm_registrations::wants(event_type type, const ibv_gid& gid) const noexcept {
    switch (type) {
    case event_type::gid_avail:
    case event_type::gid_unavail:
        return ugid_all_ || contains(ugids_, gid);
    case event_type::mcg_created:
    case event_type::mcg_deleted:
        return mgid_all_ || contains(mgids_, gid);
    default:
        return false;
    }
}

bool sm_registrations::wants_trap(std::uint16_t trap) const noexcept {
    switch (trap) {
    case sa::trap::gid_in_service:
    case sa::trap::gid_out_of_service:
        return ugid_all_ || !ugids_.empty();
    case sa::trap::mcg_created:
    case sa::trap::mcg_deleted:
        return mgid_all_ || !mgids_.empty();
    }
    return false;
}

sa_subscriber::sa_subscriber(const config& cfg, std::uint32_t first_tid)
    : cfg_(cfg), next_tid_(first_tid) {}

std::uint64_t sa_subscriber::start_register(sm_event_mask mask, std::span<const ibv_gid> gids,
                                            clock::time_point now, actions& out) {
    return enqueue(make_op(next_op_++, op_kind::add, mask, gids), now, out);
}

std::uint64_t sa_subscriber::start_unregister(sm_event_mask mask, std::span<const ibv_gid> gids,
                                              clock::time_point now, actions& out) {
    return enqueue(make_op(next_op_++, op_kind::remove, mask, gids), now, out);
}

std::uint64_t sa_subscriber::start_unregister_all(clock::time_point now, actions& out) {
    return enqueue(make_op(next_op_++, op_kind::remove_all, sm_event_mask::all, {}), now, out);
}

std::uint64_t sa_subscriber::reject(error_code ec, actions& out) {
    const std::uint64_t id = next_op_++;
    out.completions.push_back({id, ec});
    return id;
}

void sa_subscriber::resubscribe(clock::time_point now, actions& out) {
    ++counters_.resubscriptions;
    enqueue(make_op(0, op_kind::resubscribe, {}, {}), now, out);
}

sa_subscriber::operation sa_subscriber::make_op(std::uint64_t id, op_kind kind, sm_event_mask mask,
                                                std::span<const ibv_gid> gids) {
    operation op;
    op.id = id;
    op.kind = kind;
    op.mask = mask;
    op.gids.assign(gids.begin(), gids.end());
    return op;
}

std::uint64_t sa_subscriber::enqueue(operation op, clock::time_point now, actions& out) {
    const std::uint64_t id = op.id;
    ops_.push_back(std::move(op));
    if (ops_.size() == 1)
        run(now, out);
    return id;
}

// Starts operations until one has to wait for the SA.
void sa_subscriber::run(clock::time_point now, actions& out) {
    while (!ops_.empty()) {
        operation& op = ops_.front();
        if (op.started || !start(op, now, out))
            return;
        // Nothing to ask the SA (or invalid arguments): done at once.
        if (op.id != 0)
            out.completions.push_back({op.id, op.ec});
        ops_.pop_front();
    }
}

// Applies the operation to the registrations and sends the Sets that bring the
// subscriptions in line with them. Returns true when no answer is awaited.
bool sa_subscriber::start(operation& op, clock::time_point now, actions& out) {
    op.started = true;
    switch (op.kind) {
    case op_kind::add:
        op.ec = sm_registrations::validate(op.mask, op.gids);
        if (op.ec)
            return true;
        op.before = regs_;
        regs_.add(op.mask, op.gids);
        break;
    case op_kind::remove:
        op.ec = sm_registrations::validate(op.mask, op.gids);
        if (op.ec)
            return true;
        regs_.remove(op.mask, op.gids);
        break;
    case op_kind::remove_all:
        regs_.remove(sm_event_mask::all, {});
        break;
    case op_kind::resubscribe:
        // The SM may or may not have kept the subscriptions: they are unknown, so
        // those needed are made again and the others unsubscribed.
        for (std::size_t i = 0; i < trap_count; ++i) {
            uncertain_[i] = uncertain_[i] || subscribed_[i];
            subscribed_[i] = false;
        }
        break;
    }
    for (std::uint16_t trap = first_trap; trap < first_trap + trap_count; ++trap) {
        const bool want = regs_.wants_trap(trap);
        const std::size_t i = slot(trap);
        if (want && !subscribed_[i])
            send_set(op, trap, true, now, out);
        else if (!want && (subscribed_[i] || uncertain_[i]))
            send_set(op, trap, false, now, out);
    }
    return op.pending.empty();
}

sa_subscriber::transaction& sa_subscriber::send_set(operation& op, std::uint16_t trap,
                                                    bool subscribe, clock::time_point now,
                                                    actions& out) {
    const std::uint32_t tid = next_tid_++;
    transaction t{tid,
                  trap,
                  subscribe,
                  cfg_.retries,
                  now + cfg_.timeout,
                  sa::encode_inform_info_set(
                      tid, sa::wildcard_subscription(trap, subscribe, cfg_.resp_time_value))};
    out.sends.push_back(t.mad);
    ++counters_.requests;
    return op.pending.emplace_back(t);
}

void sa_subscriber::finish_if_done(clock::time_point now, actions& out) {
    if (ops_.empty() || !ops_.front().pending.empty())
        return;
    operation& op = ops_.front();
    if (op.ec && op.kind == op_kind::add)
        regs_ = op.before;
    if (op.id != 0)
        out.completions.push_back({op.id, op.ec});
    ops_.pop_front();
    run(now, out);
}

void sa_subscriber::on_mad(std::span<const std::uint8_t> mad, clock::time_point now, actions& out) {
    sa::mad_header h;
    if (sa::decode_header(mad, h)) {
        ++counters_.malformed;
        return;
    }
    if (h.method == sa::method::report && h.attr_id == sa::attr::notice)
        on_report(mad, h, out);
    else if (h.method == sa::method::get_resp && h.attr_id == sa::attr::inform_info)
        on_inform_info_response(mad, h, now, out);
    // Anything else is not ours to answer.
}

void sa_subscriber::on_inform_info_response(std::span<const std::uint8_t> mad,
                                            const sa::mad_header& h, clock::time_point now,
                                            actions& out) {
    if (ops_.empty())
        return;
    sa::inform_info echoed;
    if (sa::decode_inform_info(mad, echoed)) {
        ++counters_.malformed;
        return;
    }
    // The kernel puts its agent id in the high 32 bits of the TID of every request.
    const auto tid = static_cast<std::uint32_t>(h.tid);
    operation& op = ops_.front();
    auto it = std::find_if(op.pending.begin(), op.pending.end(),
                           [&](const transaction& t) { return t.tid == tid; });
    if (it == op.pending.end())
        return; // a late answer to a request given up, or a duplicate
    const std::size_t i = slot(it->trap);
    if (h.status == 0) {
        subscribed_[i] = it->subscribe;
        uncertain_[i] = false;
    } else {
        ++counters_.refusals;
        // A refused subscribe changes nothing, so an unknown state stays so; the SA
        // accepts a repeated subscribe, so its refusal is an answer to the request.
        bool harmless = false;
        if (!it->subscribe) {
            // The SA refuses an unsubscribe when it holds no such subscription. That
            // is no error for a subscription of unknown state, nor for an unsubscribe
            // sent more than once: an earlier copy may have removed the subscription
            // and its answer been lost (the kernel drops an answer that comes after
            // its send timed out).
            const bool sent_again = it->retries_left < cfg_.retries;
            harmless = (uncertain_[i] && !subscribed_[i]) || sent_again;
            uncertain_[i] = false;
            if (sent_again)
                subscribed_[i] = false;
        }
        if (!harmless && !op.ec)
            op.ec = make_error_code(errc::sa_request_refused);
    }
    op.pending.erase(it);
    finish_if_done(now, out);
}

void sa_subscriber::on_report(std::span<const std::uint8_t> mad, const sa::mad_header& h,
                              actions& out) {
    sa::notice n;
    if (sa::decode_report(mad, n)) {
        ++counters_.malformed;
        return;
    }
    // Every Report gets its ReportResp, duplicates too: the SA resends until one
    // of them arrives.
    out.sends.push_back(sa::encode_report_response(mad));
    if (seen_before(h.tid)) {
        ++counters_.duplicate_reports;
        return;
    }
    ++counters_.reports;
    const auto type = n.is_generic ? event_of_trap(n.trap_number) : std::nullopt;
    const ibv_gid gid = n.subject_gid();
    if (type && regs_.wants(*type, gid)) {
        out.events.push_back({*type, gid});
        ++counters_.events;
    } else {
        ++counters_.filtered;
    }
}

bool sa_subscriber::seen_before(std::uint64_t tid) {
    if (std::find(recent_reports_.begin(), recent_reports_.end(), tid) != recent_reports_.end())
        return true;
    recent_reports_.push_back(tid);
    if (recent_reports_.size() > remembered_reports)
        recent_reports_.pop_front();
    return false;
}

void sa_subscriber::on_timer(clock::time_point now, actions& out) {
    if (ops_.empty())
        return;
    operation& op = ops_.front();
    for (auto it = op.pending.begin(); it != op.pending.end();) {
        if (it->deadline > now) {
            ++it;
        } else if (it->retries_left > 0) {
            --it->retries_left;
            it->deadline = now + cfg_.timeout;
            out.sends.push_back(it->mad);
            ++counters_.retries;
            ++it;
        } else {
            ++counters_.timeouts;
            // Subscribe or unsubscribe, the SA may or may not have carried it out:
            // the subscription is now unknown. The next registration that needs
            // the trap subscribes again, and one that does not unsubscribes.
            subscribed_[slot(it->trap)] = false;
            uncertain_[slot(it->trap)] = true;
            if (!op.ec)
                op.ec = errno_code(ETIMEDOUT);
            it = op.pending.erase(it);
        }
    }
    finish_if_done(now, out);
}

std::optional<sa_subscriber::clock::time_point> sa_subscriber::next_deadline() const {
    if (ops_.empty() || ops_.front().pending.empty())
        return std::nullopt;
    const auto& pending = ops_.front().pending;
    return std::min_element(
               pending.begin(), pending.end(),
               [](const transaction& a, const transaction& b) { return a.deadline < b.deadline; })
        ->deadline;
}

bool sa_subscriber::active() const noexcept {
    auto any = [](const std::array<bool, trap_count>& a) {
        return std::find(a.begin(), a.end(), true) != a.end();
    };
    return !ops_.empty() || any(subscribed_) || any(uncertain_);
}

bool sa_subscriber::subscribed(std::uint16_t trap) const noexcept {
    return trap >= first_trap && trap < first_trap + trap_count && subscribed_[slot(trap)];
}

std::vector<sa::mad_buffer> sa_subscriber::abandon() {
    std::vector<sa::mad_buffer> mads;
    if (!ops_.empty())
        for (const transaction& t : ops_.front().pending)
            if (t.subscribe)
                uncertain_[slot(t.trap)] = true;
    for (std::uint16_t trap = first_trap; trap < first_trap + trap_count; ++trap) {
        const std::size_t i = slot(trap);
        if (subscribed_[i] || uncertain_[i]) {
            mads.push_back(sa::encode_inform_info_set(
                next_tid_++, sa::wildcard_subscription(trap, false, cfg_.resp_time_value)));
            ++counters_.requests;
        }
        subscribed_[i] = uncertain_[i] = false;
    }
    ops_.clear();
    regs_.remove(sm_event_mask::all, {});
    return mads;
}

std::chrono::milliseconds
kernel_send_timeout(sa_subscriber::clock::duration resend_after) noexcept {
    using std::chrono::milliseconds;
    const auto whole = std::chrono::duration_cast<milliseconds>(resend_after);
    const auto margin = std::max(whole / 8, milliseconds(1));
    return std::max(whole - margin, milliseconds(1));
}

} // namespace rdma_asio::detail
