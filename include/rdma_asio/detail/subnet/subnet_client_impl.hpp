// The moving parts of subnet_event_client: the umad port and its dispatcher, the
// SA state machine, its timer, and where results and events go.
#pragma once

#include "rdma_asio/async_event.hpp"
#include "rdma_asio/async_event_stream_ref.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/event_dispatcher.hpp"
#include "rdma_asio/detail/core/injected_source.hpp"
#include "rdma_asio/detail/subnet/sa_subscriber.hpp"
#include "rdma_asio/detail/subnet/umad_port.hpp"
#include "rdma_asio/detail/subnet/umad_source.hpp"
#include "rdma_asio/sm_event_mask.hpp"
#include "rdma_asio/subnet_event_client_counters.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <vector>

namespace rdma_asio::detail {

/// The outcome of one registration, unregistration or close.
struct sa_op_result {
    std::uint64_t op = 0;
    error_code ec;
};

struct match_op {
    std::uint64_t op;
    bool operator()(const sa_op_result& r) const noexcept { return r.op == op; }
};

enum class sa_request { add, remove, remove_all };

class subnet_client_impl : public std::enable_shared_from_this<subnet_client_impl> {
public:
    using executor_type = asio::any_io_executor;
    using native_handle_type = int;
    static constexpr native_handle_type no_handle = -1;
    using results_dispatcher = event_dispatcher<injected_source<sa_op_result>>;
    using events_dispatcher = event_dispatcher<injected_source<async_event>>;

    subnet_client_impl(const executor_type& ex, const sa_subscriber::config& cfg);
    subnet_client_impl(const subnet_client_impl&) = delete;
    subnet_client_impl& operator=(const subnet_client_impl&) = delete;
    ~subnet_client_impl() { close(); }

    /// Opens the umad port and registers it with the reactor, or else starts the
    /// reader thread. On failure sets `ec` and `what` (the call that failed, with
    /// the CA and port).
    void open(const std::string& ca_name, int port, error_code& ec, std::string& what);
    /// Events go to `stream` instead of events() (async_next then fails), and the
    /// stream's SM_CHANGE and CLIENT_REREGISTER of this port make the client
    /// subscribe again. Until the client closes.
    void attach(const async_event_stream_ref& stream);

    /// Starts a request; its sa_op_result reaches results(), never from within
    /// this call's own caller stack as a completion (the dispatcher posts).
    std::uint64_t start(sa_request kind, sm_event_mask mask, const std::vector<ibv_gid>& gids);
    /// Nobody will take the result of request `op` (its wait was aborted): drops
    /// it, now if it is queued in results(), else when the request ends.
    void forget(std::uint64_t op);
    void resubscribe();
    /// Port events seen by the attached stream's source (any thread, any lock held).
    void on_port_event(event_type type, int port_num);
    void cancel() noexcept;
    void close() noexcept;

    results_dispatcher& results() noexcept { return *results_; }
    events_dispatcher& events() noexcept { return *events_; }
    native_handle_type native_handle() const noexcept { return port_.fd(); }
    bool uses_reader_thread() const;
    subnet_event_client_counters counters() const;
    bool subscribed(std::uint16_t trap) const;

private:
    using clock = sa_subscriber::clock;
    struct pump_handler;
    struct timer_handler;

    void carry_out_locked(sa_subscriber::actions& actions);
    void keep_reading_locked();
    void schedule_timer_locked();
    void on_mad(const error_code& ec, const received_mad& mad);
    void on_timer(std::uint64_t generation);

    executor_type ex_;
    sa_subscriber::config cfg_;
    mutable std::mutex mutex_;
    umad_port port_;
    sa_subscriber fsm_;
    asio::steady_timer timer_;
    std::uint64_t timer_generation_ = 0;
    bool reading_ = false;
    bool closed_ = false;
    error_code read_error_;
    std::optional<async_event_stream_ref> stream_; // where events go, if attached
    event_subscription stream_ports_;
    std::set<std::uint64_t> unanswered_; // requests whose result is not out yet
    std::set<std::uint64_t> forgotten_;  // of those, the ones whose result is dropped
    std::shared_ptr<event_dispatcher<umad_source>> mads_;
    std::shared_ptr<results_dispatcher> results_;
    std::shared_ptr<events_dispatcher> events_;
};

/// async_register / async_unregister / async_close: start the request, then wait
/// for its result. The request is sent as it starts and is not withdrawn when
/// the wait is cancelled, so cancellation is terminal and partial, never total;
/// the result of a cancelled wait is forgotten, not left queued.
struct sa_request_op {
    std::shared_ptr<subnet_client_impl> impl;
    sa_request kind;
    sm_event_mask mask;
    std::vector<ibv_gid> gids;
    bool close_after = false;
    std::uint64_t op = 0;

    template <class Self>
    void operator()(Self& self) {
        self.reset_cancellation_state(asio::enable_partial_cancellation());
        op = impl->start(kind, mask, gids);
        impl->results().async_next(match_op{op}, std::move(self));
    }

    template <class Self>
    void operator()(Self& self, error_code ec, sa_op_result result) {
        if (ec == asio::error::operation_aborted)
            impl->forget(op); // cancelled or closed: nobody takes the result
        if (close_after)
            impl->close();
        self.complete(ec ? ec : result.ec);
    }
};

} // namespace rdma_asio::detail
