// The handshake, without a lock on the posting side, that decides whether a CQ's
// demultiplexer (cq_demux) must start a poll. No I/O: the demultiplexer carries
// out what it decides; test/unit/cq_poll_handshake_test.cpp races it.
//
// Why it is right:
// - A queue pair that posts a work request first stores its count of outstanding
//   requests, then asks must_poll(). While a poll is in progress it gets false and
//   takes no lock: the poll's end will see the count.
// - The end of a poll, under the demultiplexer's lock, first marks no poll in
//   progress (end_locked), then reads every queue pair's count, and starts the
//   next poll if one is outstanding.
// - Those four accesses are sequentially consistent, so they have one order: either
//   the count was stored before the poll's end read it (and the end polls again),
//   or end_locked came before must_poll() read the flag (and the queue pair takes
//   the lock and starts the poll itself, unless someone did first: start_locked
//   says who). No request is left outstanding without a poll. (With release and
//   acquire alone, both sides could read the old values: the store-load pattern of
//   Dekker's algorithm.)
#pragma once

#include <atomic>

namespace rdma_asio::detail {

class cq_poll_handshake {
public:
    /// From a queue pair that has just stored its count: whether it must take the
    /// demultiplexer's lock and start a poll (start_locked decides there).
    bool must_poll() const noexcept { return !polling_.load(); }
    /// Under the demultiplexer's lock: marks a poll in progress; false when one is
    /// already (nothing to start).
    bool start_locked() noexcept {
        if (polling_.load())
            return false;
        polling_.store(true);
        return true;
    }
    /// Under the lock: the poll in progress ended, or could not start. At a poll's
    /// end, before the counts are read.
    void end_locked() noexcept { polling_.store(false); }
    /// Whether a poll is in progress (under the lock: exactly).
    bool in_progress() const noexcept { return polling_.load(); }

private:
    std::atomic<bool> polling_{false};
};

} // namespace rdma_asio::detail
