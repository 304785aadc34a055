// Fault injection into libibverbs' event calls: verbs_faults.cpp defines
// ibv_get_async_event, ibv_ack_async_event, ibv_get_cq_event and ibv_ack_cq_events
// in the test program itself, which exports them (-Wl,--export-dynamic-symbol), so
// that the loader binds the library's calls to them before libibverbs' own, whether
// the library is shared or linked in statically (as a preloaded library's functions
// replace a shared library's). They find libibverbs' own with
// dlvsym(RTLD_NEXT, ...) and pass everything through to them on the real fds except what a test
// injects: events the device cannot produce (DEVICE_FATAL, QP_FATAL, CQ_ERR in
// bursts) and read errors (EIO). Injected events are returned before anything the
// kernel has queued, the next time the library reads; the real fd's readiness still
// drives Asio's reactor, so a test makes a real event to wake it.
//
// Acks are counted: an ack of an injected event is recorded and swallowed (the real
// object never saw that event, and acking it would make its destroy wait for ever),
// an ack of a real event goes to the real call, and an ack nobody owes is recorded
// as excess and swallowed.
#pragma once

#include "verbs_resources.hpp"

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rdma_asio::test::faults {

/// An async event to inject: `type` and its element (QP, CQ, SRQ or a port number).
ibv_async_event qp_event(ibv_event_type type, ibv_qp* qp);
ibv_async_event cq_event(ibv_cq* cq); // IBV_EVENT_CQ_ERR
ibv_async_event device_fatal();

/// A real async event to wake the reactor reading `ctx`'s async_fd (which then
/// reads the injected events first): an SQ_DRAINED, 5-15 ms from now, on a fresh
/// connected pair of RC QPs on `pd` and `cq`, kept in `keep` until the test ends.
void raise_sq_drained(ibv_context* ctx, ibv_pd* pd, ibv_cq* cq, std::vector<qp_ptr>& keep);

/// Queues `burst` on `ctx`'s async_fd: the next ibv_get_async_event calls return
/// these, in order, before anything real.
void inject_async(ibv_context* ctx, const std::vector<ibv_async_event>& burst);
/// Once the injected events of `ctx` are taken, ibv_get_async_event fails with
/// `err` (0: stops failing).
void fail_async(ibv_context* ctx, int err);
/// Injected async events of `ctx` not read yet.
std::size_t pending_async(ibv_context* ctx);

/// Queues completion events for `cqs` (each with its real cq_context) on `channel`.
void inject_cq_events(ibv_comp_channel* channel, const std::vector<ibv_cq*>& cqs);
/// Once the injected events of `channel` are taken, ibv_get_cq_event fails with
/// `err` (0: stops failing).
void fail_channel(ibv_comp_channel* channel, int err);

/// The ack books, for all contexts and channels together.
struct async_books {
    std::uint64_t injected_read = 0;  // injected events handed to the library
    std::uint64_t injected_acked = 0; // acks of those
    std::uint64_t real_read = 0;
    std::uint64_t real_acked = 0;  // acks passed to the real call
    std::uint64_t excess_acks = 0; // acks of events nobody had read (or acked twice)
};
async_books async_counts();

struct cq_books {
    std::uint64_t injected_read = 0;
    std::uint64_t real_read = 0;
    std::uint64_t acked = 0;       // sum of the counts acked for this CQ
    std::uint64_t excess_acks = 0; // acked beyond what was read
};
cq_books cq_counts(const ibv_cq* cq);

/// Forgets every injection, failure and count.
void reset();

} // namespace rdma_asio::test::faults
