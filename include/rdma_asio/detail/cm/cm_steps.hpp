// The operations of cm_id and cm_event_channel: which librdmacm call a step makes
// (copied, so deferred operations own their arguments), the composed operation
// that makes the call and waits for the answering event, and the completion of
// an operation on an object that is not open.
#pragma once

#include "rdma_asio/cm_event.hpp"
#include "rdma_asio/datagram_endpoint.hpp"
#include "rdma_asio/detail/cm/cm_channel_impl.hpp"
#include "rdma_asio/detail/cm/cm_event_source.hpp"
#include "rdma_asio/detail/cm/cm_id_impl.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/io_object.hpp"
#include "rdma_asio/detail/core/start_composed.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <system_error>
#include <type_traits>

namespace rdma_asio::detail {

/// The length of the address `addr` points to, for the families rdma_cm knows
/// (AF_INET, AF_INET6, AF_IB); EINVAL for a null address, EAFNOSUPPORT for any
/// other family (AF_UNSPEC included): nothing beyond the family is read then.
error_code cm_address_length(const sockaddr* addr, socklen_t& length) noexcept;

/// The parameters rdma_asio chooses for rdma_connect on `id`, or for rdma_accept
/// of a request that asked for `request` (conn_param_defaults.hpp), from the
/// device's limits: ENODEV for an id without a device yet, or the errno of
/// ibv_query_device.
error_code default_conn_param(rdma_cm_id* id, const std::optional<rd_atomic_limits>& request,
                              rdma_conn_param& param) noexcept;

/// The endpoint of the group a MULTICAST_JOIN event joined (its rdma_ud_param).
datagram_endpoint multicast_group_of(const rdma_cm_event& joined) noexcept;

class cm_call {
public:
    /// A bad address is reported when the call is made.
    static cm_call resolve_addr(const sockaddr* src, const sockaddr* dst,
                                std::chrono::milliseconds timeout) noexcept;
    static cm_call resolve_route(std::chrono::milliseconds timeout) noexcept;
    /// Private data: a null pointer with a non-zero length is reported when the
    /// call is made.
    static cm_call connect(const rdma_conn_param& param) noexcept;
    static cm_call accept(const rdma_conn_param& param) noexcept;
    /// rdma_connect, or rdma_accept of a request that asked for `request`, with
    /// the parameters conn_param_defaults.hpp chooses for the id's device,
    /// queried when the call is made.
    static cm_call connect_with_defaults() noexcept;
    static cm_call accept_with_defaults(std::optional<rd_atomic_limits> request) noexcept;
    static cm_call disconnect() noexcept;
    /// rdma_join_multicast of `group`; a bad address is reported when the call
    /// is made.
    static cm_call join_multicast(const sockaddr* group) noexcept;

    /// Makes the call: an empty error, or why it failed (its errno; ENODEV for
    /// a step that needs the id's device before the id has one).
    error_code operator()(rdma_cm_id* id) noexcept;

private:
    enum class kind { resolve_addr, resolve_route, connect, accept, disconnect, join_multicast };
    static cm_call with_param(kind k, const rdma_conn_param& param) noexcept;

    kind kind_ = kind::disconnect;
    sockaddr_storage src_{};
    sockaddr_storage dst_{};
    bool has_src_ = false;
    int timeout_ms_ = 0;
    rdma_conn_param param_{};
    bool default_param_ = false;
    std::optional<rd_atomic_limits> request_; // accept_with_defaults
    std::array<std::uint8_t, 256> private_data_{};
    error_code invalid_; // bad arguments, reported when the call is made
};

/// The outcome of one wait: an error, or an event.
struct cm_outcome {
    error_code ec;
    cm_event ev;
};

/// One rdma_cm operation: optionally make a call, wait for the next event that
/// `Kind::matcher` accepts, and turn it into the operation's result. The
/// dispatcher keeps the event from the moment the wait takes it until this op
/// runs again on the user's executor (cm_event_source::hold_taken_events): closing
/// the id meanwhile acks it, and a cancellation that comes meanwhile gives it
/// back for the next wait. `Kind::cancellation` is the filter of the
/// cancellation types the operation honours; types outside it are ignored.
///
/// The op refers to the channel weakly: a pending wait must not keep the channel
/// (which owns the wait) alive once its objects are gone; the channel then aborts
/// the wait as it is destroyed.
template <class Kind, class IoExecutor>
struct cm_op {
    cm_op(const std::shared_ptr<cm_channel_impl>& ch, IoExecutor ex, Kind k)
        : channel(ch), io_ex(std::move(ex)), kind(std::move(k)) {}

    std::weak_ptr<cm_channel_impl> channel;
    IoExecutor io_ex;
    Kind kind;
    error_code failure; // of the call, reported once posted

    template <class Self>
    void operator()(Self& self) {
        if (failure)
            return kind.finish(self, nullptr, cm_outcome{failure, {}});
        // A step's librdmacm call is made before anything can be cancelled and is
        // never undone, so cancelling it cannot be total (see Kind::cancellation).
        self.reset_cancellation_state(typename Kind::cancellation{});
        if (error_code ec = kind.call()) {
            failure = ec;
            return asio::post(std::move(self)); // never inside the initiating call
        }
        auto ch = channel.lock(); // alive: the initiating object holds it
        auto matcher = kind.matcher();
        ch->dispatcher->async_next(io_ex, std::move(matcher), std::move(self));
    }

    // The wait's outcome; operation_aborted when cancelled, closed or dropped.
    template <class Self>
    void operator()(Self& self, error_code ec, cm_event ev) {
        kind.finish(self, channel.lock(), cm_outcome{ec, std::move(ev)});
    }
};

/// How every cm operation starts (the Start of io_object's initiation, on the
/// channel's state): the composed operation `kind` on `channel`, with `io_ex`
/// (the I/O object's executor, of its own type) as the handler's default
/// executor. For an object that is not open, the operation's result is
/// Kind::not_open() where it has no default (cm_request's id).
template <class Signature>
struct cm_start {
    template <class Kind>
    requires requires(const Kind& kind) { kind.not_open(); }
    static auto not_open(const Kind& kind) { return kind.not_open(); }

    template <class IoExecutor, class Handler, class Kind>
    void operator()(const std::shared_ptr<cm_channel_impl>& channel, const IoExecutor& io_ex,
                    Handler&& handler, Kind kind) const {
        start_composed<Signature>(cm_op<Kind, IoExecutor>{channel, io_ex, std::move(kind)},
                                  std::forward<Handler>(handler), io_ex);
    }
};

/// The id an operation acts on, held by its state, so that an operation made
/// (say with deferred) and launched after its id object was closed or moved never
/// touches a destroyed rdma_cm_id: it ends with bad_descriptor at launch.
struct cm_id_ref {
    std::shared_ptr<cm_id_impl> impl;

    /// The id now; null once it is closed.
    rdma_cm_id* get() const noexcept { return impl ? impl->native_handle() : nullptr; }
    /// bad_descriptor once the id is closed, else nothing.
    error_code check() const noexcept {
        return get() == nullptr ? error_code(asio::error::bad_descriptor) : error_code();
    }
    /// The waits of the id, only after check() found it open.
    cm_id_match match() const noexcept { return {get()}; }
};

/// Reads a joined group's endpoint from its MULTICAST_JOIN event, for cm_step.
struct read_multicast_group {
    datagram_endpoint operator()(const cm_event& joined) const noexcept {
        return multicast_group_of(*joined.native_handle());
    }
};

/// What a step changes of its object as it is launched: nothing.
struct no_launch_change {
    void operator()(cm_id_impl&) const noexcept {}
};

/// The group a join adds to those its id leaves when closed (cm_id_impl::
/// remember_group), as the join is launched.
struct remember_group {
    group_address group;
    void operator()(cm_id_impl& id) const {
        if (group.copied)
            id.remember_group(group.get());
    }
};

/// A connection step: the librdmacm call, then the id's next event compared
/// with `expected`. The call stays made when the wait is cancelled (its event
/// goes to the id's next wait): terminal and partial cancellation, not total.
/// `Read` (void: none) reads the step's result from its event: joining a
/// multicast group is such a step, whose result is the group's endpoint.
/// `OnLaunch` is what the operation changes of its object (or of the object the
/// id belongs to) just before the call, on an open id: as it is launched, never
/// when an operation made with asio::deferred is made.
template <class Read = void, class OnLaunch = no_launch_change>
struct cm_step {
    using cancellation = asio::enable_partial_cancellation;
    cm_id_ref id;
    cm_call call_;
    rdma_cm_event_type expected;
    [[no_unique_address]] OnLaunch on_launch;

    error_code call() {
        if (error_code ec = id.check())
            return ec;
        on_launch(*id.impl);
        return call_(id.get());
    }
    cm_id_match matcher() const noexcept { return id.match(); }
    template <class Self>
    void finish(Self& self, const std::shared_ptr<cm_channel_impl>&, cm_outcome held) {
        error_code ec = held.ec;
        if (!ec)
            ec = error_of(held.ev, expected);
        if constexpr (std::is_void_v<Read>) {
            held.ev.ack();
            self.complete(ec);
        } else {
            // Read before the ack frees the event.
            auto result = ec ? decltype(Read{}(held.ev)){} : Read{}(held.ev);
            held.ev.ack();
            self.complete(ec, std::move(result));
        }
    }
};

/// The next CONNECT_REQUEST of a listening id, as the state of its new id, which
/// `Adopt` (the id type's own) turns into the operation's result: adopt(nullptr)
/// for an id that is not open. It makes no call, and a cancelled wait hands back
/// any request it took: total cancellation.
template <class Adopt>
struct cm_request {
    using cancellation = asio::enable_total_cancellation;
    cm_id_ref listener;
    Adopt adopt;

    error_code call() noexcept { return listener.check(); }
    cm_id_match matcher() const noexcept { return listener.match(); }
    // The result of a wait on a listener that is not open.
    auto not_open() const { return adopt(nullptr); }
    template <class Self>
    void finish(Self& self, const std::shared_ptr<cm_channel_impl>& channel, cm_outcome held) {
        error_code ec = held.ec;
        if (!ec)
            ec = error_of(held.ev, RDMA_CM_EVENT_CONNECT_REQUEST);
        if (ec) {
            held.ev.ack(); // not a request (e.g. DEVICE_REMOVAL), if any
            return self.complete(ec, adopt(nullptr));
        }
        // The private data lives in the event: copy it before the ack frees it.
        auto request = adopt(cm_id_impl::adopt_request(channel, held.ev));
        held.ev.ack();
        self.complete(ec, std::move(request));
    }
};

/// The next event that Matcher accepts, as it is. Like cm_request: total.
template <class Matcher>
struct cm_next {
    using cancellation = asio::enable_total_cancellation;
    Matcher match;

    error_code call() noexcept { return {}; }
    Matcher matcher() const { return match; }
    template <class Self>
    void finish(Self& self, const std::shared_ptr<cm_channel_impl>&, cm_outcome held) {
        self.complete(held.ec, std::move(held.ev));
    }
};

/// The next event of an id: cm_next, keyed by the id as it is at launch.
struct cm_id_next {
    using cancellation = asio::enable_total_cancellation;
    cm_id_ref id;

    error_code call() noexcept { return id.check(); }
    cm_id_match matcher() const noexcept { return id.match(); }
    template <class Self>
    void finish(Self& self, const std::shared_ptr<cm_channel_impl>&, cm_outcome held) {
        self.complete(held.ec, std::move(held.ev));
    }
};

/// The waits of a channel object: every event, keyed by the channel, so that
/// closing the channel object ends them and nothing else.
struct cm_channel_match {
    const void* channel;
    bool operator()(const cm_event&) const noexcept { return true; }
    const void* key() const noexcept { return channel; }
};

} // namespace rdma_asio::detail
