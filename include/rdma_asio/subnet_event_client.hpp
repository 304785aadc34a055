// Subnet-manager events (Oracle Solaris' ibv_register_sm_events) on Linux,
// through an InformInfo subscription with the Subnet Administrator over libibumad.
#pragma once

#include "rdma_asio/async_event.hpp"
#include "rdma_asio/async_event_stream.hpp"
#include "rdma_asio/async_event_stream_ref.hpp"
#include "rdma_asio/context.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/io_object.hpp"
#include "rdma_asio/detail/core/start_composed.hpp"
#include "rdma_asio/detail/subnet/subnet_client_impl.hpp"
#include "rdma_asio/sm_event_mask.hpp"
#include "rdma_asio/subnet_event_client_counters.hpp"

#include <infiniband/verbs.h>

#include <chrono>
#include <concepts>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

namespace rdma_asio {

template <class Executor = asio::any_io_executor>
class basic_subnet_event_client;

/// How MADs get from the umad port to the io_context.
enum class umad_delivery {
    /// The umad fd is registered with the reactor (a kernel umad device).
    reactor,
    /// The fd cannot be registered with epoll (ibsim's umad2sim): a reader thread
    /// moves MADs to the io_context through an eventfd.
    reader_thread,
};

/// Which port a subnet_event_client opens and how it talks to the SA
/// (subnet_event_client::options).
struct subnet_event_client_options {
    /// The umad CA (the verbs device name, e.g. ctx.device_name() of an open
    /// context); empty: the first CA.
    std::string ca_name;
    /// The port of that CA.
    int port = 1;
    /// How long to wait for each answer of the SA before asking again.
    std::chrono::milliseconds timeout{500};
    /// How many times to ask again before failing with ETIMEDOUT.
    int retries = 3;
    /// RespTimeValue of the subscriptions (4.096 us * 2^value).
    std::uint8_t resp_time_value = 18;
};

namespace detail {
/// Opens a client on `opts`' CA and port; with `stream`, its events go there.
/// Null with `ec` and `what` (the failing call, with the CA and port) set on
/// failure.
std::shared_ptr<subnet_client_impl>
open_subnet_event_client(const asio::any_io_executor& ex, const subnet_event_client_options& opts,
                         const async_event_stream_ref* stream, error_code& ec, std::string& what);
} // namespace detail

/// ibv_register_sm_events / ibv_unregister_sm_events for one port, on Linux.
///
/// The client opens the port's umad device, registers an agent for the SA class
/// and subscribes with InformInfo (any source, one subscription per trap: 64 GID
/// in service, 65 GID out of service, 66 multicast group created, 67 multicast
/// group deleted) to what the registrations need. Per-GID registrations are a
/// local filter over those subscriptions: the SA matches only the issuer, which
/// for these traps is the SM itself. Every Report gets its ReportResp, duplicate
/// Reports (SA retries, same TID) are answered and dropped, requests are timed
/// out and sent again by the client itself.
///
/// Events are async_event values of type gid_avail, gid_unavail, mcg_created or
/// mcg_deleted carrying the GID (port GID or MGID) and this client's port
/// number. They need no acknowledgement. They arrive on the async_event_stream
/// the client was attached to (through its async_event_stream_ref), next to the
/// device's own events, or through async_next() for a client opened without a
/// stream.
///
/// With a stream, SM_CHANGE and CLIENT_REREGISTER of the client's port make it
/// subscribe again (the SM forgets subscriptions); without one, call
/// resubscribe() on those events.
///
/// While it holds subscriptions or waits for the SA, the client keeps work on
/// the executor (it must answer Reports): io_context::run() returns after
/// async_close(), close() or destruction.
///
/// RoCE ports have no SM: opening a client for one fails with
/// errc::no_subnet_manager; so do registrations while the port knows no SM LID.
///
/// An operation on a client that is not open (closed, moved from, or never
/// opened) completes with asio::error::bad_descriptor; queries and resubscribe()
/// throw system_error with it.
///
/// `Executor` is the type of the executor handlers run on by default;
/// subnet_event_client uses asio::any_io_executor, and rebind_executor (or
/// asio::as_default_on) gives the same client with another executor type or a
/// default completion token.
///
/// Thread safety: every member may be called from any thread.
template <class Executor>
class basic_subnet_event_client
    : public detail::io_object<basic_subnet_event_client, Executor, detail::subnet_client_impl> {
    using base = detail::io_object<basic_subnet_event_client, Executor, detail::subnet_client_impl>;
    using impl_type = detail::subnet_client_impl;

public:
    using typename base::executor_type;
    /// The umad port's fd (owned by libibumad through this client).
    using typename base::native_handle_type;
    using options = subnet_event_client_options;

    /// A client that is not open yet (see open()).
    /// `ex`: an executor, or an execution context such as an io_context, as for
    /// Asio's own I/O objects.
    explicit basic_subnet_event_client(const detail::executor_or_context<Executor>& ex)
        : base(ex) {}

    /// Opens a client on `opts`' port without a stream (see open(opts));
    /// throws system_error.
    basic_subnet_event_client(const detail::executor_or_context<Executor>& ex, const options& opts)
        : base(ex) {
        open(opts);
    }

    /// Opens a client on `opts`' port whose events arrive on `stream`, on the
    /// stream's executor (see open(stream, opts)); throws system_error.
    template <class StreamExecutor>
    requires std::is_convertible_v<const StreamExecutor&, Executor>
    basic_subnet_event_client(basic_async_event_stream<StreamExecutor>& stream, const options& opts)
        : base(stream.get_executor()) {
        open(stream, opts);
    }

    // Moves, also from an object of another executor type whose executor converts
    // to this one's, and rebind_executor, come from the base. The destructor
    // calls close().
    using base::base;
    using base::operator=;

    /// Opens the client on port `opts.port` of the umad CA `opts.ca_name`
    /// (empty: the first CA), without a stream: events arrive through
    /// async_next(). For a port with no verbs context too, e.g. a simulated
    /// fabric.
    ///
    /// Errors: asio::error::already_open; errc::no_subnet_manager for a RoCE
    /// port; errc::device_not_found (no CA of that name), errc::invalid_port (the
    /// CA has no such port) or errc::no_device (no CA at all), all of which
    /// libibumad reports as EIO; the error of umad_get_port, umad_open_port,
    /// umad_register or of registering the umad fd.
    void open(const options& opts, error_code& ec) {
        std::string what;
        open_impl(opts, nullptr, ec, what);
    }
    /// The same; throws system_error naming the call that failed, the CA
    /// and the port.
    void open(const options& opts = {}) {
        error_code ec;
        std::string what;
        open_impl(opts, nullptr, ec, what);
        detail::throw_if_error(ec, what.c_str());
    }

    /// Opens the client on `opts`' port; its events arrive on `stream` (which
    /// must be open, on the same device: set opts.ca_name to the device's name),
    /// next to the device's own. The client uses only a reference to the stream's
    /// state (ref()), so moving the stream afterwards is fine. Errors: those of
    /// open(opts, ec), and bad_descriptor when `stream` is not open.
    template <class StreamExecutor>
    void open(basic_async_event_stream<StreamExecutor>& stream, const options& opts,
              error_code& ec) {
        std::string what;
        open_on_stream(stream, opts, ec, what);
    }
    /// The same; throws system_error naming the call that failed.
    template <class StreamExecutor>
    void open(basic_async_event_stream<StreamExecutor>& stream, const options& opts = {}) {
        error_code ec;
        std::string what;
        open_on_stream(stream, opts, ec, what);
        detail::throw_if_error(ec, what.c_str());
    }

    /// How MADs reach the io_context; chosen when the client opened. Throws
    /// system_error (bad_descriptor) when the client is not open, as do the
    /// other queries below.
    umad_delivery delivery() const {
        return checked().uses_reader_thread() ? umad_delivery::reader_thread
                                              : umad_delivery::reactor;
    }
    /// What the client did so far.
    subnet_event_client_counters counters() const { return checked().counters(); }
    /// Whether the SA confirmed the subscription to `trap` (64-67).
    bool subscribed(std::uint16_t trap) const { return checked().subscribed(trap); }

    /// ibv_register_sm_events: registers `events` for `gids` (see sm_event_mask).
    ///
    /// Signature: void(error_code). Errors: EINVAL (Asio's system category)
    /// for an invalid mask or GID list; errc::no_subnet_manager; ETIMEDOUT when
    /// the SA did not answer (after options::retries); errc::sa_request_refused;
    /// operation_aborted (cancelled or closed meanwhile); bad_descriptor (the
    /// client is not open). A failed registration changes no registration.
    /// Registrations and unregistrations run one at a time, in the order they
    /// were started. The GIDs are copied before this returns.
    ///
    /// Per-operation cancellation: terminal and partial, not total (a total-only
    /// signal is ignored). The request is sent as the operation starts, and
    /// cancelling stops the wait, not the request: the SA still gets it, the
    /// registration takes effect if the SA accepts it (see subscribed()), and
    /// its result, which nobody waits for any more, is dropped.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_register(sm_event_mask events, std::span<const ibv_gid> gids,
                   CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return request(detail::sa_request::add, events, gids, std::forward<CompletionToken>(token),
                       "rdma_asio::subnet_event_client::async_register");
    }
    /// ibv_register_sm_events with no GIDs (mgid_all, ugid_all, all).
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_register(sm_event_mask events,
                   CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return async_register(events, {}, std::forward<CompletionToken>(token));
    }

    /// ibv_unregister_sm_events: the events stop at once; the subscriptions no
    /// registration needs any more are cancelled with the SA. Same signature,
    /// errors and cancellation as async_register; an error means the SA did not
    /// confirm the unsubscription (its Reports are still answered and dropped).
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_unregister(sm_event_mask events, std::span<const ibv_gid> gids,
                     CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return request(detail::sa_request::remove, events, gids,
                       std::forward<CompletionToken>(token),
                       "rdma_asio::subnet_event_client::async_unregister");
    }
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_unregister(sm_event_mask events,
                     CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return async_unregister(events, {}, std::forward<CompletionToken>(token));
    }

    /// Waits for the next subnet event of a client opened without a stream.
    ///
    /// Signature: void(error_code, rdma_asio::async_event). Errors:
    /// operation_aborted (cancelled or closed meanwhile); operation_not_supported
    /// on a client whose events go to a stream; bad_descriptor (the client is
    /// not open).
    ///
    /// Per-operation cancellation: terminal, partial and total. A cancelled wait
    /// takes no event: it stays for the next wait, also when the wait had already
    /// taken it (its handler queued but not run).
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_next(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return this->template initiate<void(error_code, async_event), start_next>(
            "rdma_asio::subnet_event_client::async_next", std::forward<CompletionToken>(token));
    }

    /// Unregisters everything, waits for the SA to confirm the unsubscriptions,
    /// then closes. Signature: void(error_code), the unsubscription's error,
    /// or bad_descriptor when the client is not open.
    /// Per-operation cancellation: terminal and partial, not total (the
    /// unsubscriptions are sent as the operation starts): the client then closes
    /// without waiting, as close() does.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_close(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return this->template initiate<void(error_code), start_request>(
            "rdma_asio::subnet_event_client::async_close", std::forward<CompletionToken>(token),
            detail::sa_request::remove_all, sm_event_mask{}, std::vector<ibv_gid>{});
    }

    /// The SM changed or asked clients to re-register: subscribe again to every
    /// trap the registrations need (automatic for a client with a stream).
    void resubscribe() { checked().resubscribe(); }

    // cancel(): completes every pending wait (registrations, async_next) with
    // operation_aborted; requests already sent still run to their end.
    // close(): sends one unsubscription per subscription (not waiting for the
    // SA), aborts every pending wait and closes the umad port. Idempotent.

private:
    struct start_request {
        template <class Handler>
        void operator()(const std::shared_ptr<impl_type>& impl, const Executor& io_ex,
                        Handler&& handler, detail::sa_request kind, sm_event_mask mask,
                        std::vector<ibv_gid> gids) const {
            detail::start_composed<void(error_code)>(
                detail::sa_request_op{impl, kind, mask, std::move(gids),
                                      kind == detail::sa_request::remove_all},
                std::forward<Handler>(handler), io_ex);
        }
    };

    struct start_next {
        template <class Handler>
        void operator()(const std::shared_ptr<impl_type>& impl, const Executor& io_ex,
                        Handler&& handler) const {
            impl->events().async_next(io_ex, detail::match_any{}, std::forward<Handler>(handler));
        }
    };

    template <class CompletionToken>
    auto request(detail::sa_request kind, sm_event_mask events, std::span<const ibv_gid> gids,
                 CompletionToken&& token, const char* what) {
        // The GIDs are copied here, before this returns, also for a deferred operation.
        return this->template initiate<void(error_code), start_request>(
            what, std::forward<CompletionToken>(token), kind, events,
            std::vector<ibv_gid>(gids.begin(), gids.end()));
    }

    void open_impl(const options& opts, const async_event_stream_ref* stream, error_code& ec,
                   std::string& what) {
        if (this->is_open()) {
            ec = asio::error::already_open;
            what = "rdma_asio::subnet_event_client::open";
            return;
        }
        this->adopt(detail::open_subnet_event_client(this->ex_, opts, stream, ec, what));
    }

    template <class StreamExecutor>
    void open_on_stream(basic_async_event_stream<StreamExecutor>& stream, const options& opts,
                        error_code& ec, std::string& what) {
        if (!stream.is_open()) {
            ec = asio::error::bad_descriptor;
            what = "rdma_asio::subnet_event_client::open: the stream is not open";
            return;
        }
        const async_event_stream_ref ref = stream.ref();
        open_impl(opts, &ref, ec, what);
    }

    impl_type& checked() const { return base::checked("rdma_asio::subnet_event_client"); }
};

/// A client on any I/O executor.
using subnet_event_client = basic_subnet_event_client<>;

} // namespace rdma_asio
