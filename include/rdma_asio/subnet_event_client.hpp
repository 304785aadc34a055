// Subnet-manager events (Oracle Solaris' ibv_register_sm_events) on Linux,
// through an InformInfo subscription with the Subnet Administrator over libibumad.
#pragma once

#include "rdma_asio/async_event.hpp"
#include "rdma_asio/async_event_stream.hpp"
#include "rdma_asio/context.hpp"
#include "rdma_asio/detail/subnet_client_impl.hpp"
#include "rdma_asio/sm_event.hpp"

#include <asio/any_io_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/compose.hpp>
#include <asio/execution_context.hpp>

#include <infiniband/verbs.h>

#include <chrono>
#include <concepts>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace rdma_asio {

/// How MADs get from the umad port to the io_context.
enum class umad_delivery {
    /// The umad fd is registered with the reactor (a kernel umad device).
    reactor,
    /// The fd cannot be registered with epoll (ibsim's umad2sim): a reader thread
    /// moves MADs to the io_context through an eventfd.
    reader_thread,
};

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
/// the client was attached to, next to the device's own events, or through
/// async_next() for a client made without a stream.
///
/// With a stream, SM_CHANGE and CLIENT_REREGISTER of the client's port make it
/// subscribe again (the SM forgets subscriptions); without one, call
/// resubscribe() on those events.
///
/// While it holds subscriptions or waits for the SA, the client keeps work on
/// the executor (it must answer Reports): io_context::run() returns after
/// async_close(), close() or destruction.
///
/// RoCE ports have no SM: constructing a client for one fails with
/// errc::no_subnet_manager; so do registrations while the port knows no SM LID.
///
/// Thread safety: every member may be called from any thread.
class subnet_event_client {
public:
    using executor_type = asio::any_io_executor;

    struct options {
        /// How long to wait for each answer of the SA before asking again.
        std::chrono::milliseconds timeout{500};
        /// How many times to ask again before failing with ETIMEDOUT.
        int retries = 3;
        /// RespTimeValue of the subscriptions (4.096 us * 2^value).
        std::uint8_t resp_time_value = 18;
    };

    /// Subnet events of port `port` of `ctx` arrive on `stream` (opened on `ctx`).
    /// Throws std::system_error naming the call that failed (umad_get_port,
    /// umad_open_port, umad_register) with the CA and port, or
    /// errc::no_subnet_manager for a RoCE port. libibumad's EIO for a CA or port
    /// that does not exist becomes errc::device_not_found (no CA of that name),
    /// errc::invalid_port (the CA has no such port) or errc::no_device (no CA).
    subnet_event_client(async_event_stream& stream, const context& ctx, int port,
                        const options& opts);
    subnet_event_client(async_event_stream& stream, const context& ctx, int port)
        : subnet_event_client(stream, ctx, port, options{}) {}
    /// The same with the umad CA named `ca_name` (the verbs device name).
    subnet_event_client(async_event_stream& stream, std::string_view ca_name, int port,
                        const options& opts);
    subnet_event_client(async_event_stream& stream, std::string_view ca_name, int port)
        : subnet_event_client(stream, ca_name, port, options{}) {}
    /// Without a stream: events arrive through async_next(). For a port with no
    /// verbs context, e.g. a simulated fabric.
    subnet_event_client(const executor_type& ex, std::string_view ca_name, int port,
                        const options& opts);
    subnet_event_client(const executor_type& ex, std::string_view ca_name, int port)
        : subnet_event_client(ex, ca_name, port, options{}) {}
    // Overloads rather than `const options& = {}`: a default argument may not use the
    // default member initialisers of a class nested in the one being defined (clang
    // rejects it; options{} in a member function body is fine).
    template <class ExecutionContext>
    requires std::convertible_to<ExecutionContext&, asio::execution_context&>
    subnet_event_client(ExecutionContext& ioc, std::string_view ca_name, int port,
                        const options& opts)
        : subnet_event_client(ioc.get_executor(), ca_name, port, opts) {}
    template <class ExecutionContext>
    requires std::convertible_to<ExecutionContext&, asio::execution_context&>
    subnet_event_client(ExecutionContext& ioc, std::string_view ca_name, int port)
        : subnet_event_client(ioc.get_executor(), ca_name, port, options{}) {}

    subnet_event_client(subnet_event_client&& other) noexcept;
    subnet_event_client& operator=(subnet_event_client&& other) noexcept;
    subnet_event_client(const subnet_event_client&) = delete;
    subnet_event_client& operator=(const subnet_event_client&) = delete;
    /// close().
    ~subnet_event_client();

    executor_type get_executor() const noexcept { return ex_; }
    /// The umad port's fd (owned by libibumad through this client).
    int native_handle() const noexcept;
    bool is_open() const noexcept { return impl_ != nullptr; }
    /// How MADs reach the io_context; chosen when the client opened.
    umad_delivery delivery() const;
    sm_event_counters counters() const;
    /// Whether the SA confirmed the subscription to `trap` (64-67).
    bool subscribed(std::uint16_t trap) const;

    /// ibv_register_sm_events: registers `events` for `gids` (see sm_event).
    ///
    /// Signature: void(std::error_code). Errors: EINVAL (Asio's system category)
    /// for an invalid mask or GID list; errc::no_subnet_manager; ETIMEDOUT when
    /// the SA did not answer (after options::retries); errc::sa_request_refused;
    /// operation_aborted (cancelled or closed). A failed registration changes no
    /// registration. Registrations and unregistrations run one at a time, in the
    /// order they were started. The GIDs are copied before this returns.
    ///
    /// Per-operation cancellation: terminal and partial, not total (a total-only
    /// signal is ignored). The request is sent as the operation starts, and
    /// cancelling stops the wait, not the request: the SA still gets it, the
    /// registration takes effect if the SA accepts it (see subscribed()), and
    /// its result, which nobody waits for any more, is dropped.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_register(sm_event events, std::span<const ibv_gid> gids,
                   CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return request(detail::sa_request::add, events, gids, std::forward<CompletionToken>(token));
    }
    /// ibv_register_sm_events with no GIDs (mgid_all, ugid_all, all).
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_register(sm_event events,
                   CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return async_register(events, {}, std::forward<CompletionToken>(token));
    }

    /// ibv_unregister_sm_events: the events stop at once; the subscriptions no
    /// registration needs any more are cancelled with the SA. Same signature,
    /// errors and cancellation as async_register; an error means the SA did not
    /// confirm the unsubscription (its Reports are still answered and dropped).
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_unregister(sm_event events, std::span<const ibv_gid> gids,
                     CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return request(detail::sa_request::remove, events, gids,
                       std::forward<CompletionToken>(token));
    }
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto
    async_unregister(sm_event events,
                     CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return async_unregister(events, {}, std::forward<CompletionToken>(token));
    }

    /// Waits for the next subnet event of a client made without a stream.
    ///
    /// Signature: void(std::error_code, rdma_asio::async_event). Errors:
    /// operation_aborted (cancelled or closed); operation_not_supported on a
    /// client whose events go to a stream.
    ///
    /// Per-operation cancellation: terminal, partial and total. A cancelled wait
    /// takes no event: it stays for the next wait, also when the wait had already
    /// taken it (its handler queued but not run).
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_next(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return checked_impl()->events().async_next(detail::match_any{},
                                                   std::forward<CompletionToken>(token));
    }

    /// Unregisters everything, waits for the SA to confirm the unsubscriptions,
    /// then closes. Signature: void(std::error_code), the unsubscription's error.
    /// Per-operation cancellation: terminal and partial, not total (the
    /// unsubscriptions are sent as the operation starts): the client then closes
    /// without waiting, as close() does.
    template <class CompletionToken = asio::default_completion_token_t<executor_type>>
    auto async_close(CompletionToken&& token = asio::default_completion_token_t<executor_type>()) {
        return asio::async_compose<CompletionToken, void(std::error_code)>(
            detail::sa_request_op{checked_impl(), detail::sa_request::remove_all, {}, {}, true},
            token, ex_);
    }

    /// The SM changed or asked clients to re-register: subscribe again to every
    /// trap the registrations need (automatic for a client with a stream).
    void resubscribe();
    /// Completes every pending wait (registrations, async_next) with
    /// operation_aborted. Requests already sent still run to their end.
    void cancel();
    /// Sends one unsubscription per subscription (not waiting for the SA), aborts
    /// every pending wait and closes the umad port. Idempotent.
    void close() noexcept;

private:
    using impl_ptr = std::shared_ptr<detail::subnet_client_impl>;
    const impl_ptr& checked_impl() const;

    template <class CompletionToken>
    auto request(detail::sa_request kind, sm_event events, std::span<const ibv_gid> gids,
                 CompletionToken&& token) {
        return asio::async_compose<CompletionToken, void(std::error_code)>(
            detail::sa_request_op{checked_impl(), kind, events, {gids.begin(), gids.end()}}, token,
            ex_);
    }

    executor_type ex_;
    impl_ptr impl_;
};

} // namespace rdma_asio
