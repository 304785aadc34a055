#include "rdma_asio/detail/async_event/async_event_source.hpp"
#include "rdma_asio/detail/cq/device_failure.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rdma_asio::detail {

async_event_source::async_event_source(ibv_context* ctx, options opts)
    : ctx_(ctx), opts_(std::move(opts)) {
    for (int p = 1; p <= opts_.port_count; ++p) {
        ports_.push_back(port_state{});
        ports_.back().port_num = p;
        refresh_port(p, true);
    }
    removal_watch_ = device_removal_watch(opts_.device_dir, opts_.node_name);
}

void async_event_source::announce_failure() noexcept {
    if (opts_.failures)
        opts_.failures->announce(ctx_, make_error_code(errc::device_removed));
}

void async_event_source::close() noexcept {
    removal_watch_.close();
}

read_result async_event_source::read_async_fd(async_event& ev) noexcept {
    if (removed_)
        return read_result::would_block();
    ibv_async_event raw{};
    // libibverbs returns -1 on a short read without setting errno.
    errno = 0;
    if (opts_.get_event(ctx_, &raw) != 0) {
        const int e = errno;
        if (e == EAGAIN || e == EWOULDBLOCK)
            return read_result::would_block();
        if (e == EINTR)
            return read_result::skip();
        // EIO and friends: the kernel closed the event queue (device disassociated).
        return removal(ev, event_type::device_removed);
    }
    ++events_read_;
    ev = async_event(raw);
    if (ev.type() == event_type::device_fatal) {
        removed_ = true;
        announce_failure();
        return read_result::last_event(make_error_code(errc::device_removed));
    }
    if (ev.element() == event_element::port && ev.port_num() >= 1 &&
        ev.port_num() <= static_cast<int>(ports_.size())) {
        ++ports_[ev.port_num() - 1].events;
        refresh_port(ev.port_num(),
                     ev.type() == event_type::gid_change || ev.type() == event_type::port_active);
    }
    notify(ev);
    return read_result::event();
}

void async_event_source::notify(const async_event& ev) noexcept {
    const bool port_event = ev.element() == event_element::port;
    const void* object = port_event ? nullptr : ev.object();
    if (!port_event && object == nullptr)
        return;
    for (const observer_entry& o : observers_) {
        try {
            if (port_event && o.object == nullptr)
                o.on_port(ev.type(), ev.port_num());
            else if (!port_event && o.object == object)
                o.on_object(ev.type());
        } catch (...) {
            // Out of memory while posting: the event itself still goes out.
        }
    }
}

read_result async_event_source::read_inotify(async_event& ev) noexcept {
    if (removal_watch_.node_deleted() && !removed_)
        return removal(ev, event_type::device_removed);
    return read_result::would_block();
}

read_result async_event_source::removal(async_event& ev, event_type type) noexcept {
    if (removed_)
        return read_result::would_block();
    removed_ = true;
    announce_failure();
    ev = async_event(type, 0, ibv_gid{});
    return read_result::last_event(make_error_code(errc::device_removed));
}

void async_event_source::refresh_port(int port_num, bool with_gids) noexcept {
    if (port_num < 1 || port_num > static_cast<int>(ports_.size()))
        return;
    port_state& ps = ports_[port_num - 1];
    ibv_port_attr attr{};
    if (ibv_query_port(ctx_, static_cast<std::uint8_t>(port_num), &attr) != 0)
        return; // keep what was known; the device may be going away
    ps.state = attr.state;
    ps.link_layer = attr.link_layer;
    ps.lid = attr.lid;
    ps.sm_lid = attr.sm_lid;
    if (!with_gids && !ps.gids.empty())
        return;
    try {
        std::vector<ibv_gid_entry> table(static_cast<std::size_t>(attr.gid_tbl_len) *
                                         ports_.size());
        ssize_t n = ibv_query_gid_table(ctx_, table.data(), table.size(), 0);
        if (n < 0)
            return;
        table.resize(static_cast<std::size_t>(n));
        std::erase_if(table, [&](const ibv_gid_entry& e) {
            return static_cast<int>(e.port_num) != port_num;
        });
        ps.gids = std::move(table);
    } catch (...) {
        // Out of memory: keep the old GIDs.
    }
}

const port_state* async_event_source::port(int port_num) const noexcept {
    if (port_num < 1 || port_num > static_cast<int>(ports_.size()))
        return nullptr;
    return &ports_[port_num - 1];
}

std::uint64_t async_event_source::add_port_observer(port_observer observer) {
    observers_.push_back({next_observer_, nullptr, std::move(observer), {}});
    return next_observer_++;
}

std::uint64_t async_event_source::add_object_observer(const void* object,
                                                      object_observer observer) {
    observers_.push_back({next_observer_, object, {}, std::move(observer)});
    return next_observer_++;
}

void async_event_source::remove_observer(std::uint64_t id) noexcept {
    std::erase_if(observers_, [&](const observer_entry& entry) { return entry.id == id; });
}

} // namespace rdma_asio::detail
