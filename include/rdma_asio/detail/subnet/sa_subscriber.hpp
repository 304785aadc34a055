// The SA side of ibv_register_sm_events, as a state machine with no I/O: it turns
// registrations into InformInfo subscriptions, matches the SA's answers, times
// out and retries its own requests, answers and filters Reports. The client that
// owns it moves MADs and time in and carries out the actions it returns.
#pragma once

#include "rdma_asio/async_event.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/subnet/sa_mad.hpp"
#include "rdma_asio/sm_event_mask.hpp"
#include "rdma_asio/subnet_event_client_counters.hpp"

#include <infiniband/verbs.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

namespace rdma_asio::detail {

/// Which subnet events of which GIDs are registered.
class sm_registrations {
public:
    /// EINVAL (Asio's system category) for a mask with no or unknown flags, GIDs
    /// without mgid/ugid, mgid/ugid without a GID of their kind, or a GID whose
    /// kind (multicast: first byte 0xff) has no flag in the mask.
    static error_code validate(sm_event_mask mask, std::span<const ibv_gid> gids);
    void add(sm_event_mask mask, std::span<const ibv_gid> gids);
    void remove(sm_event_mask mask, std::span<const ibv_gid> gids);

    /// Whether a subnet event about `gid` is registered.
    bool wants(event_type type, const ibv_gid& gid) const noexcept;
    /// Whether any registration needs trap `trap` (64-67).
    bool wants_trap(std::uint16_t trap) const noexcept;

private:
    bool ugid_all_ = false;
    bool mgid_all_ = false;
    std::vector<ibv_gid> ugids_;
    std::vector<ibv_gid> mgids_;
};

class sa_subscriber {
public:
    using clock = std::chrono::steady_clock;

    struct config {
        /// How long to wait for the SA's answer before sending the request again.
        clock::duration timeout = std::chrono::milliseconds(500);
        /// How many times to send a request again before failing with ETIMEDOUT.
        int retries = 3;
        /// RespTimeValue of every subscription (4.096 us * 2^value); unsubscribes
        /// repeat it, as the SA requires.
        std::uint8_t resp_time_value = 18;
    };

    struct delivery {
        event_type type;
        ibv_gid gid;
    };
    struct completion {
        std::uint64_t op;
        error_code ec;
    };
    /// What the caller must do after each call: send these MADs to the SM (in
    /// order), deliver these events, complete these operations.
    struct actions {
        std::vector<sa::mad_buffer> sends;
        std::vector<delivery> events;
        std::vector<completion> completions;
    };

    sa_subscriber(const config& cfg, std::uint32_t first_tid);

    /// Starts a registration or unregistration; returns its id (never 0). Its
    /// result arrives in actions::completions, possibly from this very call.
    /// Operations run one at a time, in the order they were started. A failed
    /// registration leaves the registrations as they were; an unregistration
    /// takes effect locally even when the SA does not confirm it.
    std::uint64_t start_register(sm_event_mask mask, std::span<const ibv_gid> gids,
                                 clock::time_point now, actions& out);
    std::uint64_t start_unregister(sm_event_mask mask, std::span<const ibv_gid> gids,
                                   clock::time_point now, actions& out);
    /// An operation that fails with `ec` before it starts (e.g. no SM to ask).
    std::uint64_t reject(error_code ec, actions& out);
    /// Unregisters everything and unsubscribes every trap (orderly shutdown).
    std::uint64_t start_unregister_all(clock::time_point now, actions& out);
    /// The SM changed or asked clients to re-register: subscribe again to every
    /// trap the registrations need. Reports no completion.
    void resubscribe(clock::time_point now, actions& out);

    /// A MAD received on the SA agent.
    void on_mad(std::span<const std::uint8_t> mad, clock::time_point now, actions& out);
    /// Time passed: retries and timeouts of requests due by `now`.
    void on_timer(clock::time_point now, actions& out);
    /// When on_timer must run next; nullopt when nothing waits for an answer.
    std::optional<clock::time_point> next_deadline() const;

    /// True while MADs must be read: requests in flight or subscriptions that
    /// will bring Reports.
    bool active() const noexcept;
    /// Whether the SA confirmed a subscription to `trap` and nothing about it timed
    /// out since (after a timeout its state is unknown: false here).
    bool subscribed(std::uint16_t trap) const noexcept;
    /// Shutdown without waiting: unsubscribe MADs for every subscription, to be
    /// sent once; pending operations are dropped (their waiters are the caller's
    /// to abort).
    std::vector<sa::mad_buffer> abandon();

    const subnet_event_client_counters& counters() const noexcept { return counters_; }

private:
    static constexpr std::uint16_t first_trap = sa::trap::gid_in_service;
    static constexpr std::size_t trap_count = 4;
    static constexpr std::size_t remembered_reports = 256;

    struct transaction {
        std::uint32_t tid;
        std::uint16_t trap;
        bool subscribe;
        int retries_left;
        clock::time_point deadline;
        sa::mad_buffer mad;
    };
    enum class op_kind { add, remove, remove_all, resubscribe };
    struct operation {
        std::uint64_t id = 0;
        op_kind kind = op_kind::add;
        sm_event_mask mask{};
        std::vector<ibv_gid> gids;
        bool started = false;
        error_code ec;
        sm_registrations before;
        std::vector<transaction> pending;
    };

    static operation make_op(std::uint64_t id, op_kind kind, sm_event_mask mask,
                             std::span<const ibv_gid> gids);
    std::uint64_t enqueue(operation op, clock::time_point now, actions& out);
    void run(clock::time_point now, actions& out);
    bool start(operation& op, clock::time_point now, actions& out);
    transaction& send_set(operation& op, std::uint16_t trap, bool subscribe, clock::time_point now,
                          actions& out);
    void finish_if_done(clock::time_point now, actions& out);
    void on_inform_info_response(std::span<const std::uint8_t> mad, const sa::mad_header& h,
                                 clock::time_point now, actions& out);
    void on_report(std::span<const std::uint8_t> mad, const sa::mad_header& h, actions& out);
    bool seen_before(std::uint64_t tid);

    std::size_t slot(std::uint16_t trap) const noexcept { return trap - first_trap; }

    config cfg_;
    std::uint32_t next_tid_;
    std::uint64_t next_op_ = 1;
    sm_registrations regs_;
    std::array<bool, trap_count> subscribed_{};
    // Unknown: a request about the trap timed out (it may or may not have reached
    // the SA), or the client gave up waiting. Such a trap is subscribed again when
    // needed and unsubscribed when not, and the SA's refusal of that unsubscribe
    // is not an error.
    std::array<bool, trap_count> uncertain_{};
    std::deque<operation> ops_;
    std::deque<std::uint64_t> recent_reports_;
    subnet_event_client_counters counters_;
};

/// The timeout to give the kernel's MAD layer for each sending of a request that
/// sa_subscriber sends again after `resend_after`: an eighth less, at least 1 ms.
/// The kernel refuses to send a request whose TID it still holds (EINVAL, as a
/// duplicate), so it must have given up on one sending before the next goes out.
/// An answer that comes after the kernel gave up is dropped; the next sending's
/// answer counts instead.
std::chrono::milliseconds kernel_send_timeout(sa_subscriber::clock::duration resend_after) noexcept;

} // namespace rdma_asio::detail
