// Reads a completion queue for a consumer that is not an Asio operation (one that
// hands each completion on to whoever it concerns, say by qp_num). One read
// carries out the CQ's cq_poll_machine (poll; spin or arm, poll again, wait for
// the CQ's event; batched acks through the CQ's channel) straight from the
// channel dispatcher's wake-up, and hands what it found to its target. It is not
// an async_poll: no handler to wrap, no operation to start, move and complete per
// read, no claim on the CQ's one-operation-at-a-time slot (the CQ is claimed for
// the reader's target as a whole: cq_shared_state::user::reader). The path of a
// completion is then the dispatcher's wait, this reader, the target.
//
// Why a read never delivers inside start(): start() runs inside a queue pair's
// initiating function (the post that woke the demultiplexer); the target runs
// handlers, which must not run there. Completions found at once are handed over
// in a posted handler.
//
// One read at a time: the target starts the next one after it has handled the
// last (it decides who starts it; none starts while one is in progress).
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/event_dispatcher.hpp"
#include "rdma_asio/detail/core/operation.hpp"
#include "rdma_asio/detail/cq/completion_channel_source.hpp"
#include "rdma_asio/detail/cq/cq_poll_machine.hpp"
#include "rdma_asio/detail/cq/cq_read_target.hpp"
#include "rdma_asio/detail/cq/cq_wait_match.hpp"

#include <infiniband/verbs.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace rdma_asio::detail {

class completion_queue_impl;

class cq_reader {
public:
    static constexpr std::size_t batch = 32; // completions per read

    explicit cq_reader(std::shared_ptr<completion_queue_impl> cq) noexcept;
    cq_reader(const cq_reader&) = delete;
    cq_reader& operator=(const cq_reader&) = delete;

    /// Starts a read of the CQ for `target`, which it holds until read() has run.
    /// A closed CQ: read(bad_descriptor, 0), posted. Throws only bad_alloc (a
    /// reactor wait or the posted handler could not be allocated), having started
    /// nothing.
    void start(std::shared_ptr<cq_read_target> target);

    /// Where a read puts its completions; between reads, a scratch area for the
    /// reader's user.
    std::span<ibv_wc, batch> buffer() noexcept { return wcs_; }

private:
    using channel_wait = event_dispatcher<completion_channel_source>::member_wait<cq_poll_match>;

    // The read's wait for the CQ's event, kept here and started again for each
    // read that has to sleep: nothing is allocated for it, and when the channel's
    // wake-up ends it on the CQ's own thread, the read carries on in that call.
    struct wait final : channel_wait {
        wait(cq_reader& r, cq_poll_match m) : channel_wait(m), reader(r) {}
        void complete(delivery how) override;
        void destroy() noexcept override;

        cq_reader& reader;
        std::shared_ptr<cq_read_target> target; // while the wait is pending
    };
    struct wait_end_handler;
    struct resume_handler;
    struct found_handler;

    /// What the machine does after the wait ended with `ec` and `ev`.
    cq_poll_machine::step after_wait(const error_code& ec, const cq_event& ev);

    /// Carries out `s` and what follows it, until the read waits, yields or ends.
    /// `in_start`: inside start(), where an end is posted rather than handed over.
    void run(cq_poll_machine::step s, std::shared_ptr<cq_read_target>& target, bool in_start);
    /// After a yield, at the read's next step: the dispatcher may check for idleness.
    void settle_return() noexcept;

    std::shared_ptr<completion_queue_impl> cq_;
    std::uint64_t cancellations_at_start_ = 0; // the CQ's cancel() count, for a spinning read
    // The read yielded and told the channel's dispatcher it will wait again
    // (will_return): it says returned() at its next step that is not a yield.
    bool owes_return_ = false;
    std::array<ibv_wc, batch> wcs_{};
    wait wait_;
};

} // namespace rdma_asio::detail
