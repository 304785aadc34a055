// The bookkeeping of work requests, without a device: credits, FIFO order, wr_id
// routing, and how operations end on errors, cancellation and device loss.
#include "rdma_asio/detail/qp/work_request_machine.hpp"
#include "rdma_asio/error.hpp"
#include "rdma_asio/wc_error.hpp"

#include <catch2/catch.hpp>

#include "asio_alias.hpp"

#include <deque>
#include <set>
#include <vector>

namespace work_request_machine_test {

using rdma_asio::wc_errc;
using rdma_asio::detail::op_list;
using rdma_asio::detail::work_queue;
using rdma_asio::detail::work_request_machine;
using rdma_asio::detail::wr_actions;
using rdma_asio::detail::wr_owner;
using op = rdma_asio::detail::work_request_op;

namespace {

std::vector<op*> drain(op_list& list) {
    std::vector<op*> out;
    while (op* o = list.pop_front())
        out.push_back(o);
    return out;
}

ibv_wc completion_of(const op& o, ibv_wc_status status = IBV_WC_SUCCESS) {
    ibv_wc wc{};
    wc.wr_id = o.wr_id;
    wc.status = status;
    return wc;
}

// Ops that stay put in memory (the machine links them by address).
std::deque<op> make_ops(std::size_t n, work_queue q) {
    std::deque<op> ops;
    for (std::size_t i = 0; i < n; ++i)
        ops.emplace_back(q);
    return ops;
}

} // namespace

TEST_CASE("operations beyond a queue's depth wait and are posted in the order started",
          "[work_request_machine]") {
    work_request_machine m(4, 2);
    auto sends = make_ops(16, work_queue::send);
    wr_actions a;
    for (op& o : sends)
        m.start(o, a);
    std::vector<op*> posted = drain(a.to_post);
    REQUIRE(posted.size() == 4);
    for (std::size_t i = 0; i < 4; ++i)
        CHECK(posted[i] == &sends[i]);
    CHECK(m.credits(work_queue::send) == 0);
    CHECK(m.waiting(work_queue::send) == 12);
    CHECK(m.outstanding() == 4);
    CHECK(a.to_complete.empty());
    // The receive queue has room of its own.
    CHECK(m.credits(work_queue::receive) == 2);

    // Completions in posting order (RC): each one admits the next waiting, in order.
    std::vector<op*> completed;
    std::deque<op*> in_flight(posted.begin(), posted.end());
    while (!in_flight.empty()) {
        op* first = in_flight.front();
        in_flight.pop_front();
        wr_actions b;
        REQUIRE(m.completed(completion_of(*first), b));
        for (op* o : drain(b.to_complete)) {
            CHECK_FALSE(o->result);
            CHECK(o->st == op::state::done);
            completed.push_back(o);
        }
        for (op* o : drain(b.to_post))
            in_flight.push_back(o);
        CHECK(m.outstanding() == in_flight.size());
    }
    REQUIRE(completed.size() == 16);
    for (std::size_t i = 0; i < 16; ++i)
        CHECK(completed[i] == &sends[i]);
    CHECK(m.credits(work_queue::send) == 4);
    CHECK(m.ignored_completions() == 0);
}

TEST_CASE("each completion reaches the operation its wr_id names", "[work_request_machine]") {
    work_request_machine m(8, 8);
    auto sends = make_ops(8, work_queue::send);
    auto recvs = make_ops(8, work_queue::receive);
    wr_actions a;
    for (std::size_t i = 0; i < 8; ++i) {
        m.start(sends[i], a);
        m.start(recvs[i], a);
    }
    std::set<std::uint64_t> ids;
    for (op* o : drain(a.to_post))
        ids.insert(o->wr_id);
    CHECK(ids.size() == 16);

    // Out of order, as completions of two queues interleave.
    wr_actions b;
    ibv_wc wc = completion_of(recvs[5]);
    wc.byte_len = 55;
    REQUIRE(m.completed(wc, b));
    std::vector<op*> done = drain(b.to_complete);
    REQUIRE(done.size() == 1);
    CHECK(done[0] == &recvs[5]);
    CHECK(done[0]->wc.byte_len == 55);
    CHECK(m.credits(work_queue::receive) == 1);
    CHECK(m.credits(work_queue::send) == 0);

    // The same wr_id again, or one never handed out, is ignored.
    CHECK_FALSE(m.completed(wc, b));
    ibv_wc unknown{};
    unknown.wr_id = 0xdeadbeef00000042u;
    CHECK_FALSE(m.completed(unknown, b));
    CHECK(b.to_complete.empty());
    CHECK(m.ignored_completions() == 2);
}

TEST_CASE("an error completion ends its operation with its status and the others with flushed",
          "[work_request_machine]") {
    work_request_machine m(2, 2);
    auto sends = make_ops(4, work_queue::send);
    wr_actions a;
    for (op& o : sends)
        m.start(o, a);
    drain(a.to_post); // sends 0 and 1 posted, 2 and 3 wait

    wr_actions b;
    REQUIRE(m.completed(completion_of(sends[0], IBV_WC_REM_ACCESS_ERR), b));
    CHECK(m.in_error());
    CHECK_FALSE(b.move_qp_to_error); // the device did it already
    std::vector<op*> done = drain(b.to_complete);
    REQUIRE(done.size() == 3);
    CHECK(done[0] == &sends[0]);
    CHECK(sends[0].result == wc_errc::remote_access_error);
    CHECK(sends[0].wc.status == IBV_WC_REM_ACCESS_ERR);
    // The waiting ones end at once, never posted.
    CHECK(done[1] == &sends[2]);
    CHECK(done[2] == &sends[3]);
    CHECK(sends[2].result == wc_errc::flushed);
    CHECK(sends[3].result == wc_errc::flushed);
    CHECK(b.to_post.empty());

    // The posted one ends with its flush completion, not before.
    CHECK(sends[1].st == op::state::posted);
    wr_actions c;
    REQUIRE(m.completed(completion_of(sends[1], IBV_WC_WR_FLUSH_ERR), c));
    CHECK(drain(c.to_complete) == std::vector<op*>{&sends[1]});
    CHECK(sends[1].result == wc_errc::flushed);

    // Later operations end at once.
    op later(work_queue::receive);
    wr_actions d;
    m.start(later, d);
    CHECK(d.to_post.empty());
    CHECK(drain(d.to_complete) == std::vector<op*>{&later});
    CHECK(later.result == wc_errc::flushed);
    CHECK(m.outstanding() == 0);
}

TEST_CASE("set_error ends waiting operations with the reason and flushed ones likewise",
          "[work_request_machine]") {
    work_request_machine m(1, 1);
    auto recvs = make_ops(3, work_queue::receive);
    wr_actions a;
    for (op& o : recvs)
        m.start(o, a);
    drain(a.to_post);

    const rdma_asio::error_code disconnected = asio::error::eof;
    wr_actions b;
    m.set_error(disconnected, b);
    CHECK(b.move_qp_to_error);
    CHECK(drain(b.to_complete) == std::vector<op*>{&recvs[1], &recvs[2]});
    CHECK(recvs[1].result == disconnected);

    wr_actions c;
    m.set_error(asio::error::connection_reset, c); // the first reason stays
    CHECK_FALSE(c.move_qp_to_error);
    CHECK(m.error() == disconnected);
    REQUIRE(m.completed(completion_of(recvs[0], IBV_WC_WR_FLUSH_ERR), c));
    CHECK(drain(c.to_complete) == std::vector<op*>{&recvs[0]});
    CHECK(recvs[0].result == disconnected);
}

TEST_CASE("partial cancellation ends only an operation that was never posted",
          "[work_request_machine]") {
    work_request_machine m(1, 1);
    op posted(work_queue::send), waiting(work_queue::send), behind(work_queue::send);
    wr_actions a;
    m.start(posted, a);
    m.start(waiting, a);
    m.start(behind, a);
    drain(a.to_post);

    wr_actions b;
    CHECK_FALSE(m.cancel_waiting(posted, b));
    CHECK(posted.st == op::state::posted);
    CHECK(m.cancel_waiting(waiting, b));
    CHECK(drain(b.to_complete) == std::vector<op*>{&waiting});
    CHECK(waiting.result == asio::error::operation_aborted);
    CHECK_FALSE(m.in_error());

    // Its room goes to the one behind it.
    wr_actions c;
    REQUIRE(m.completed(completion_of(posted), c));
    CHECK(drain(c.to_post) == std::vector<op*>{&behind});
}

TEST_CASE("terminal cancellation of a posted operation ends it by its flush",
          "[work_request_machine]") {
    work_request_machine m(4, 4);
    op target(work_queue::receive), other(work_queue::receive), done_first(work_queue::send);
    wr_actions a;
    m.start(target, a);
    m.start(other, a);
    m.start(done_first, a);
    drain(a.to_post);

    wr_actions b;
    m.cancel(done_first, b);
    m.cancel(target, b);
    CHECK(b.move_qp_to_error);
    CHECK(b.to_complete.empty()); // nothing ends before the device lets go
    CHECK(m.in_error());

    // A cancelled operation that completed before the flush reports its success.
    wr_actions c;
    REQUIRE(m.completed(completion_of(done_first), c));
    REQUIRE(m.completed(completion_of(target, IBV_WC_WR_FLUSH_ERR), c));
    REQUIRE(m.completed(completion_of(other, IBV_WC_WR_FLUSH_ERR), c));
    CHECK(drain(c.to_complete) == std::vector<op*>{&done_first, &target, &other});
    CHECK_FALSE(done_first.result);
    CHECK(target.result == asio::error::operation_aborted);
    CHECK(other.result == wc_errc::flushed);
}

TEST_CASE("fail_all ends every operation now and ignores their completions later",
          "[work_request_machine]") {
    work_request_machine m(1, 2);
    op s0(work_queue::send), s1(work_queue::send), r0(work_queue::receive);
    wr_actions a;
    m.start(s0, a);
    m.start(s1, a);
    m.start(r0, a);
    drain(a.to_post);
    const ibv_wc late = completion_of(s0, IBV_WC_WR_FLUSH_ERR);

    const rdma_asio::error_code removed = asio::error::no_such_device;
    wr_actions b;
    m.fail_all(removed, b);
    std::vector<op*> done = drain(b.to_complete);
    CHECK(done.size() == 3);
    for (op* o : done) {
        CHECK(o->result == removed);
        CHECK(o->st == op::state::done);
    }
    CHECK(m.outstanding() == 0);

    // A completion that still arrives for an ended operation is ignored, and
    // nothing more is posted on the QP.
    wr_actions c;
    CHECK_FALSE(m.completed(late, c));
    op after(work_queue::send);
    m.start(after, c);
    CHECK(c.to_post.empty());
    CHECK(drain(c.to_complete) == std::vector<op*>{&after});
    CHECK(after.result == removed);
}

TEST_CASE("a reused slot does not take the completion of its earlier operation",
          "[work_request_machine]") {
    work_request_machine m(1, 1);
    op first(work_queue::send), second(work_queue::send);
    wr_actions a;
    m.start(first, a);
    drain(a.to_post);
    const ibv_wc first_done = completion_of(first);
    REQUIRE(m.completed(first_done, a));
    drain(a.to_complete);
    m.start(second, a);
    drain(a.to_post);
    CHECK(second.wr_id != first.wr_id);
    CHECK(static_cast<std::uint32_t>(second.wr_id) == static_cast<std::uint32_t>(first.wr_id));
    CHECK_FALSE(m.completed(first_done, a)); // a duplicate of the earlier one
    CHECK(second.st == op::state::posted);
}

TEST_CASE("a post that failed ends its operation and gives its room to the next",
          "[work_request_machine]") {
    work_request_machine m(1, 1);
    op bad(work_queue::send), next(work_queue::send);
    wr_actions a;
    m.start(bad, a);
    m.start(next, a);
    drain(a.to_post);
    wr_actions b;
    m.post_failed(bad, asio::error::invalid_argument, b);
    CHECK(drain(b.to_complete) == std::vector<op*>{&bad});
    CHECK(bad.result == asio::error::invalid_argument);
    CHECK(drain(b.to_post) == std::vector<op*>{&next});
    CHECK(m.outstanding() == 1);
}

TEST_CASE("a queue of depth 0 refuses its operations", "[work_request_machine]") {
    work_request_machine m(4, 0);
    op recv(work_queue::receive);
    wr_actions a;
    m.start(recv, a);
    CHECK(drain(a.to_complete) == std::vector<op*>{&recv});
    CHECK(recv.result == asio::error::operation_not_supported);
    CHECK_FALSE(m.in_error());

    // A queue pair on a shared receive queue says where its receives go.
    work_request_machine on_srq(4, 0);
    on_srq.set_no_queue_error(rdma_asio::errc::receive_on_shared_queue);
    op srq_recv(work_queue::receive);
    wr_actions b;
    on_srq.start(srq_recv, b);
    CHECK(drain(b.to_complete) == std::vector<op*>{&srq_recv});
    CHECK(srq_recv.result == rdma_asio::errc::receive_on_shared_queue);
}

TEST_CASE("cancel_all ends waiting operations now and posted ones by their flush",
          "[work_request_machine]") {
    work_request_machine m(1, 1);
    op posted(work_queue::send), waiting(work_queue::send), recv(work_queue::receive);
    wr_actions a;
    m.start(posted, a);
    m.start(waiting, a);
    m.start(recv, a);
    drain(a.to_post);
    CHECK(m.posted(work_queue::send) == 1);
    CHECK(m.posted(work_queue::receive) == 1);

    wr_actions b;
    m.cancel_all(b);
    CHECK(b.move_qp_to_error);
    CHECK(drain(b.to_complete) == std::vector<op*>{&waiting});
    CHECK(waiting.result == asio::error::operation_aborted);

    wr_actions c;
    REQUIRE(m.completed(completion_of(recv, IBV_WC_WR_FLUSH_ERR), c));
    REQUIRE(m.completed(completion_of(posted, IBV_WC_WR_FLUSH_ERR), c));
    CHECK(drain(c.to_complete) == std::vector<op*>{&recv, &posted});
    CHECK(recv.result == asio::error::operation_aborted);
    CHECK(posted.result == asio::error::operation_aborted);
    CHECK(m.posted(work_queue::send) == 0);

    // Nothing posted, nothing to move: cancel_all on an idle QP leaves it usable.
    work_request_machine idle(1, 1);
    wr_actions d;
    idle.cancel_all(d);
    CHECK_FALSE(d.move_qp_to_error);
    CHECK_FALSE(idle.in_error());
}

TEST_CASE("a shared receive queue's error completion ends that receive only",
          "[work_request_machine]") {
    work_request_machine m(0, 2, wr_owner::shared_receive_queue);
    auto receives = make_ops(3, work_queue::receive);
    wr_actions a;
    for (op& o : receives)
        m.start(o, a);
    REQUIRE(drain(a.to_post).size() == 2); // the third waits for room

    // The queue pair that took receive 0 failed: its flush ends receive 0, and
    // the room it frees goes to the waiting one. Nothing else ends.
    wr_actions b;
    REQUIRE(m.completed(completion_of(receives[0], IBV_WC_WR_FLUSH_ERR), b));
    CHECK_FALSE(m.in_error());
    CHECK_FALSE(b.move_qp_to_error);
    CHECK(drain(b.to_complete) == std::vector<op*>{&receives[0]});
    CHECK(receives[0].result == wc_errc::flushed);
    CHECK(drain(b.to_post) == std::vector<op*>{&receives[2]});
    CHECK(receives[1].st == op::state::posted);

    // An error of another kind likewise.
    wr_actions c;
    REQUIRE(m.completed(completion_of(receives[1], IBV_WC_LOC_LEN_ERR), c));
    CHECK(receives[1].result == wc_errc::local_length_error);
    CHECK_FALSE(m.in_error());
    op later(work_queue::receive);
    wr_actions d;
    m.start(later, d);
    CHECK(drain(d.to_post) == std::vector<op*>{&later});
}

TEST_CASE("a shared receive queue's wr_ids and a queue pair's never take each other's "
          "completions",
          "[work_request_machine]") {
    work_request_machine qp(0, 1);
    work_request_machine srq(0, 1, wr_owner::shared_receive_queue);
    op on_qp(work_queue::receive);
    op on_srq(work_queue::receive);
    wr_actions a;
    qp.start(on_qp, a);
    srq.start(on_srq, a);
    drain(a.to_post);
    // Both machines gave slot 0, generation 0: only the tag tells them apart.
    CHECK(work_request_machine::is_shared_receive(on_srq.wr_id));
    CHECK_FALSE(work_request_machine::is_shared_receive(on_qp.wr_id));
    CHECK((on_srq.wr_id & ~work_request_machine::shared_receive_tag) == on_qp.wr_id);

    wr_actions b;
    CHECK_FALSE(qp.completed(completion_of(on_srq), b));
    CHECK_FALSE(srq.completed(completion_of(on_qp), b));
    CHECK(b.to_complete.empty());
    CHECK(qp.ignored_completions() == 1);
    CHECK(srq.completed(completion_of(on_srq), b));
    CHECK(qp.completed(completion_of(on_qp), b));
    CHECK(drain(b.to_complete) == std::vector<op*>{&on_srq, &on_qp});
}

TEST_CASE("a shared receive queue's posted receives stay posted through cancellation",
          "[work_request_machine]") {
    work_request_machine m(0, 1, wr_owner::shared_receive_queue);
    auto receives = make_ops(2, work_queue::receive);
    wr_actions a;
    for (op& o : receives)
        m.start(o, a);
    drain(a.to_post);

    wr_actions b;
    m.cancel(receives[0], b); // posted: nothing can flush it
    CHECK(b.to_complete.empty());
    CHECK_FALSE(b.move_qp_to_error);
    CHECK(receives[0].st == op::state::posted);

    m.cancel_all(b); // the waiting one ends; the posted one stays
    CHECK(drain(b.to_complete) == std::vector<op*>{&receives[1]});
    CHECK(receives[1].result == asio::error::operation_aborted);
    CHECK_FALSE(b.move_qp_to_error);
    CHECK_FALSE(m.in_error());
    CHECK(receives[0].st == op::state::posted);

    // It ends by its message, with success.
    wr_actions c;
    REQUIRE(m.completed(completion_of(receives[0]), c));
    CHECK(drain(c.to_complete) == std::vector<op*>{&receives[0]});
    CHECK_FALSE(receives[0].result);
}

TEST_CASE("after refuse_new every operation started ends at once with its reason",
          "[work_request_machine]") {
    work_request_machine m(1, 1);
    op posted(work_queue::send);
    wr_actions a;
    m.start(posted, a);
    drain(a.to_post);
    m.refuse_new(asio::error::bad_descriptor);
    op later(work_queue::receive);
    wr_actions b;
    m.start(later, b);
    CHECK(b.to_post.empty());
    CHECK(drain(b.to_complete) == std::vector<op*>{&later});
    CHECK(later.result == asio::error::bad_descriptor);
    // The one started before is untouched, and ends by its completion.
    CHECK(posted.st == op::state::posted);
    wr_actions c;
    REQUIRE(m.completed(completion_of(posted), c));
    CHECK(drain(c.to_complete) == std::vector<op*>{&posted});
    CHECK_FALSE(posted.result);
}

TEST_CASE("splice_back moves a list's operations to the end of another, in order",
          "[work_request_machine]") {
    auto ops = make_ops(5, work_queue::send);
    op_list first, second, empty;
    first.push_back(ops[0]);
    first.push_back(ops[1]);
    second.push_back(ops[2]);
    second.push_back(ops[3]);
    second.push_back(ops[4]);
    first.splice_back(empty);
    CHECK(first.size() == 2);
    first.splice_back(second);
    CHECK(second.empty());
    CHECK(drain(first) == std::vector<op*>{&ops[0], &ops[1], &ops[2], &ops[3], &ops[4]});
    // Into an empty list, and the list stays usable at its new tail.
    empty.push_back(ops[0]);
    op_list into;
    into.splice_back(empty);
    into.push_back(ops[1]);
    CHECK(drain(into) == std::vector<op*>{&ops[0], &ops[1]});
}

} // namespace work_request_machine_test

namespace work_request_machine_test {

namespace {

// Posts `ops` as one batch the way the queue pair does: all but the last send
// unsignaled.
std::vector<op*> post_batch(work_request_machine& m, std::deque<op>& ops, wr_actions& a) {
    for (op& o : ops)
        m.start(o, a);
    std::vector<op*> posted = drain(a.to_post);
    for (std::size_t i = 0; i + 1 < posted.size(); ++i)
        m.posted_unsignaled(*posted[i]);
    return posted;
}

} // namespace

TEST_CASE("a send's completion ends the unsignaled sends posted before it, successfully and once",
          "[work_request_machine][unsignaled]") {
    work_request_machine m(8, 0);
    auto sends = make_ops(5, work_queue::send);
    wr_actions a;
    std::vector<op*> posted = post_batch(m, sends, a);
    REQUIRE(posted.size() == 5);
    CHECK(m.unsignaled() == 4);
    CHECK(m.outstanding() == 5);
    CHECK(m.credits(work_queue::send) == 3);

    wr_actions b;
    REQUIRE(m.completed(completion_of(*posted[4]), b));
    std::vector<op*> ended = drain(b.to_complete);
    REQUIRE(ended.size() == 5);
    for (std::size_t i = 0; i < 5; ++i) {
        CHECK(ended[i] == &sends[i]); // in the order posted
        CHECK_FALSE(ended[i]->result);
        CHECK(ended[i]->wc.status == IBV_WC_SUCCESS);
    }
    CHECK(m.unsignaled() == 0);
    CHECK(m.outstanding() == 0);
    CHECK(m.credits(work_queue::send) == 8);
    // A late completion of an unsignaled one (a QP made with sq_sig_all) is stale.
    CHECK_FALSE(m.completed(completion_of(*posted[1]), b));
}

TEST_CASE("an unsignaled send that fails ends with its own error, the ones before it succeeded",
          "[work_request_machine][unsignaled]") {
    work_request_machine m(8, 0);
    auto sends = make_ops(4, work_queue::send);
    wr_actions a;
    std::vector<op*> posted = post_batch(m, sends, a);
    // The device fails the third (unsignaled): its completion comes, then the
    // last's flush.
    wr_actions b;
    REQUIRE(m.completed(completion_of(*posted[2], IBV_WC_REM_ACCESS_ERR), b));
    std::vector<op*> ended = drain(b.to_complete);
    REQUIRE(ended.size() == 3);
    CHECK_FALSE(ended[0]->result);
    CHECK_FALSE(ended[1]->result);
    CHECK(ended[2] == &sends[2]);
    CHECK(ended[2]->result == wc_errc::remote_access_error);
    CHECK(m.in_error());
    REQUIRE(m.completed(completion_of(*posted[3], IBV_WC_WR_FLUSH_ERR), b));
    ended = drain(b.to_complete);
    REQUIRE(ended.size() == 1);
    CHECK(ended[0]->result == wc_errc::flushed);
    CHECK(m.unsignaled() == 0);
    CHECK(m.outstanding() == 0);
}

TEST_CASE("a fence's completion ends the unsignaled sends before it and gives its room back",
          "[work_request_machine][unsignaled]") {
    work_request_machine m(4, 0);
    auto sends = make_ops(2, work_queue::send);
    wr_actions a;
    for (op& o : sends)
        m.start(o, a);
    std::vector<op*> posted = drain(a.to_post);
    // The first went unsignaled; the second's post failed.
    m.posted_unsignaled(*posted[0]);
    m.post_failed(*posted[1], asio::error::invalid_argument, a);
    std::vector<op*> ended = drain(a.to_complete);
    REQUIRE(ended.size() == 1);
    CHECK(ended[0]->result == asio::error::invalid_argument);
    CHECK(sends[0].st == op::state::posted);

    const std::uint64_t fence = m.reserve_fence();
    REQUIRE(fence != 0);
    CHECK((fence & work_request_machine::fence_tag) != 0);
    CHECK(m.credits(work_queue::send) == 2);
    CHECK(m.outstanding() == 2);
    ibv_wc wc{};
    wc.wr_id = fence;
    wc.status = IBV_WC_SUCCESS;
    wr_actions b;
    REQUIRE(m.completed(wc, b));
    ended = drain(b.to_complete);
    REQUIRE(ended.size() == 1);
    CHECK(ended[0] == &sends[0]);
    CHECK_FALSE(ended[0]->result);
    CHECK(m.credits(work_queue::send) == 4);
    CHECK(m.outstanding() == 0);
    // Once more: not a fence any more, nor an operation.
    CHECK_FALSE(m.completed(wc, b));

    // A fence that could not be posted gives its room back at once.
    const std::uint64_t unposted = m.reserve_fence();
    REQUIRE(unposted != 0);
    m.release_fence();
    CHECK(m.credits(work_queue::send) == 4);
    CHECK(m.outstanding() == 0);
}

// The error state flushes only what the device has not completed: an unsignaled
// send that had succeeded makes no completion then, and only a fence posted after
// it (flushed) can end it. The fence's room may have to wait for a flush.
TEST_CASE("in the error state a fence still gets room once there is some, and its flush ends "
          "the unsignaled send that had succeeded",
          "[work_request_machine][unsignaled]") {
    work_request_machine m(2, 0);
    auto sends = make_ops(2, work_queue::send);
    wr_actions a;
    m.start(sends[0], a);
    m.start(sends[1], a);
    std::vector<op*> posted = drain(a.to_post);
    REQUIRE(posted.size() == 2);
    // The first is signaled and still with the device; the second went unsignaled
    // and succeeded, which tells nobody. Then the peer disconnects.
    m.posted_unsignaled(*posted[1]);
    m.set_error(rdma_asio::errc::disconnected, a);
    CHECK(m.in_error());
    CHECK(drain(a.to_complete).empty());
    // Full: no room for a fence yet.
    CHECK(m.reserve_fence() == 0);
    // The first one's flush gives its room back (and, signaled, ends only itself).
    wr_actions b;
    REQUIRE(m.completed(completion_of(*posted[0], IBV_WC_WR_FLUSH_ERR), b));
    std::vector<op*> ended = drain(b.to_complete);
    REQUIRE(ended.size() == 1);
    CHECK(ended[0] == &sends[0]);
    CHECK(ended[0]->result == rdma_asio::errc::disconnected);
    CHECK(m.unsignaled() == 1);
    CHECK(m.outstanding() == 1);
    // Now the fence: posted to the QP in error, it is flushed, and its flush ends
    // the unsignaled send with the success it had.
    const std::uint64_t fence = m.reserve_fence();
    REQUIRE(fence != 0);
    ibv_wc wc{};
    wc.wr_id = fence;
    wc.status = IBV_WC_WR_FLUSH_ERR;
    REQUIRE(m.completed(wc, b));
    ended = drain(b.to_complete);
    REQUIRE(ended.size() == 1);
    CHECK(ended[0] == &sends[1]);
    CHECK_FALSE(ended[0]->result);
    CHECK(m.unsignaled() == 0);
    CHECK(m.outstanding() == 0);
    CHECK(m.credits(work_queue::send) == 2);
}

TEST_CASE("fail_all ends the unsignaled sends with the rest, and a fence's room comes back",
          "[work_request_machine][unsignaled]") {
    work_request_machine m(4, 0);
    auto sends = make_ops(3, work_queue::send);
    wr_actions a;
    std::vector<op*> posted = post_batch(m, sends, a);
    REQUIRE(m.reserve_fence() != 0);
    m.fail_all(asio::error::operation_aborted, a);
    std::vector<op*> ended = drain(a.to_complete);
    REQUIRE(ended.size() == 3);
    for (op* o : ended)
        CHECK(o->result == asio::error::operation_aborted);
    CHECK(m.unsignaled() == 0);
    CHECK(m.outstanding() == 0);
    CHECK(m.credits(work_queue::send) == 4);
}

TEST_CASE("unsignaled sends keep their record within the send depth however they come and go",
          "[work_request_machine][unsignaled]") {
    // Batches of 3 on a queue of 4, each ended by its last one's completion,
    // many times over: the record is reused, never grown.
    work_request_machine m(4, 0);
    for (int round = 0; round < 50; ++round) {
        auto sends = make_ops(3, work_queue::send);
        wr_actions a;
        std::vector<op*> posted = post_batch(m, sends, a);
        REQUIRE(posted.size() == 3);
        wr_actions b;
        REQUIRE(m.completed(completion_of(*posted[2]), b));
        REQUIRE(drain(b.to_complete).size() == 3);
        REQUIRE(m.outstanding() == 0);
    }
    CHECK(m.unsignaled() == 0);
}

// An operation waiting for the QP to leave service (async_wait_error): it never
// posts, holds no room, and ends with the reason when the QP enters the error
// state.
TEST_CASE("an error watch waits without a work request and ends with the reason of the error "
          "state",
          "[work_request_machine][error_watch]") {
    work_request_machine m(1, 1);
    auto watches = make_ops(2, work_queue::error_watch);
    op send(work_queue::send);
    op queued(work_queue::send); // waits for room behind `send`
    wr_actions a;
    m.start(watches[0], a);
    m.start(send, a);
    m.start(watches[1], a);
    m.start(queued, a);
    CHECK(drain(a.to_post) == std::vector<op*>{&send}); // the watches post nothing
    CHECK(a.to_complete.empty());
    CHECK(watches[0].st == op::state::waiting);
    CHECK(m.waiting(work_queue::error_watch) == 2);
    CHECK(m.waiting(work_queue::send) == 1);
    CHECK(m.credits(work_queue::send) == 0); // the send's room only
    CHECK(m.credits(work_queue::receive) == 1);
    CHECK(m.outstanding() == 1);
    CHECK(m.posted(work_queue::error_watch) == 0);

    // A successful completion leaves them waiting, and admits the queued send.
    wr_actions b;
    REQUIRE(m.completed(completion_of(send), b));
    CHECK(drain(b.to_complete) == std::vector<op*>{&send});
    CHECK(drain(b.to_post) == std::vector<op*>{&queued});
    CHECK(m.waiting(work_queue::error_watch) == 2);

    // The error state: each watch ends with the reason, in the order started.
    wr_actions c;
    m.set_error(rdma_asio::errc::disconnected, c);
    CHECK(c.move_qp_to_error);
    CHECK(drain(c.to_complete) == std::vector<op*>{&watches[0], &watches[1]});
    CHECK(watches[0].result == rdma_asio::errc::disconnected);
    CHECK(watches[1].result == rdma_asio::errc::disconnected);
    CHECK(m.waiting(work_queue::error_watch) == 0);

    // Started later: at once, with the same reason.
    op late(work_queue::error_watch);
    wr_actions d;
    m.start(late, d);
    CHECK(drain(d.to_complete) == std::vector<op*>{&late});
    CHECK(late.result == rdma_asio::errc::disconnected);
}

TEST_CASE("an error watch ends with flushed when a failed work request breaks the QP, and "
          "with the reason of fail_all",
          "[work_request_machine][error_watch]") {
    SECTION("a failed completion") {
        work_request_machine m(1, 1);
        op watch(work_queue::error_watch);
        op send(work_queue::send);
        wr_actions a;
        m.start(watch, a);
        m.start(send, a);
        drain(a.to_post);
        wr_actions b;
        REQUIRE(m.completed(completion_of(send, IBV_WC_REM_ACCESS_ERR), b));
        CHECK(drain(b.to_complete) == std::vector<op*>{&send, &watch});
        CHECK(send.result == wc_errc::remote_access_error);
        CHECK(watch.result == wc_errc::flushed);
    }
    SECTION("fail_all (the device is gone, or the QP destroyed)") {
        work_request_machine m(1, 1);
        op watch(work_queue::error_watch);
        wr_actions a;
        m.start(watch, a);
        m.fail_all(rdma_asio::errc::device_removed, a);
        CHECK(drain(a.to_complete) == std::vector<op*>{&watch});
        CHECK(watch.result == rdma_asio::errc::device_removed);
    }
}

// A queue pair on a shared receive queue posts no receive of its own, so a receive it
// took from the SRQ is the only way it learns that a failed one (a message longer
// than the buffer) broke it. Before, that completion was handed to the SRQ unread,
// and the QP's async_wait_error never ended.
TEST_CASE("a failed receive of the shared receive queue, taken by this QP, ends its error watch "
          "and its waiting operations",
          "[work_request_machine][error_watch][srq]") {
    work_request_machine m(1, 0); // on an SRQ: no receive queue of its own
    op watch(work_queue::error_watch);
    op send(work_queue::send);
    op queued(work_queue::send);
    wr_actions a;
    m.start(watch, a);
    m.start(send, a);
    m.start(queued, a);
    CHECK(drain(a.to_post) == std::vector<op*>{&send});
    ibv_wc received{};
    received.wr_id = work_request_machine::shared_receive_tag | 5;
    received.status = IBV_WC_SUCCESS;
    wr_actions b;
    m.shared_receive_completed(received, b); // a good one changes nothing
    CHECK(b.to_complete.empty());
    CHECK_FALSE(m.in_error());
    received.status = IBV_WC_LOC_LEN_ERR;
    wr_actions c;
    m.shared_receive_completed(received, c);
    CHECK(m.in_error());
    CHECK_FALSE(c.move_qp_to_error); // the device did that
    CHECK(drain(c.to_complete) == std::vector<op*>{&queued, &watch});
    CHECK(queued.result == wc_errc::flushed);
    CHECK(watch.result == wc_errc::flushed);
    CHECK(m.outstanding() == 1); // the posted send ends by its flush
    wr_actions d;
    REQUIRE(m.completed(completion_of(send, IBV_WC_WR_FLUSH_ERR), d));
    CHECK(drain(d.to_complete) == std::vector<op*>{&send});
    CHECK(send.result == wc_errc::flushed);
}

TEST_CASE("an error watch is cancelled alone, and by cancel_all, without touching the QP",
          "[work_request_machine][error_watch]") {
    work_request_machine m(1, 1);
    auto watches = make_ops(3, work_queue::error_watch);
    wr_actions a;
    for (op& w : watches)
        m.start(w, a);
    // Partial (or total) cancellation of one: only that one ends.
    wr_actions b;
    CHECK(m.cancel_waiting(watches[1], b));
    CHECK(drain(b.to_complete) == std::vector<op*>{&watches[1]});
    CHECK(watches[1].result == asio::error::operation_aborted);
    // Terminal cancellation of a watch does not move the QP to the error state.
    wr_actions c;
    m.cancel(watches[0], c);
    CHECK(drain(c.to_complete) == std::vector<op*>{&watches[0]});
    CHECK(watches[0].result == asio::error::operation_aborted);
    CHECK_FALSE(c.move_qp_to_error);
    CHECK_FALSE(m.in_error());
    // cancel_all with nothing posted: the last watch ends, the QP stays in service.
    wr_actions d;
    m.cancel_all(d);
    CHECK(drain(d.to_complete) == std::vector<op*>{&watches[2]});
    CHECK(watches[2].result == asio::error::operation_aborted);
    CHECK_FALSE(d.move_qp_to_error);
    CHECK_FALSE(m.in_error());
    // After refuse_new (the object closed), a new watch ends with the refusal.
    m.refuse_new(asio::error::bad_descriptor);
    op late(work_queue::error_watch);
    wr_actions e;
    m.start(late, e);
    CHECK(late.result == asio::error::bad_descriptor);
}

TEST_CASE("a send that needs no completion goes unsignaled while fewer than a quarter of the "
          "send queue, less one, are",
          "[work_request_machine][unsignaled]") {
    // Depth 16: three at a time, the fourth signaled, whose completion ends them.
    work_request_machine m(16, 0);
    auto sends = make_ops(4, work_queue::send);
    std::vector<bool> left_unsignaled;
    for (op& o : sends) {
        wr_actions a;
        m.start(o, a); // posted at once: the queue has room
        REQUIRE(a.to_post.pop_front() == &o);
        left_unsignaled.push_back(m.may_leave_unsignaled());
        if (left_unsignaled.back())
            m.posted_unsignaled(o);
    }
    CHECK(left_unsignaled == std::vector<bool>{true, true, true, false});
    CHECK(m.unsignaled() == 3);

    wr_actions b;
    REQUIRE(m.completed(completion_of(sends[3]), b));
    CHECK(drain(b.to_complete).size() == 4);
    CHECK(m.may_leave_unsignaled());

    // A queue of fewer than eight entries signals every send.
    work_request_machine small(7, 0);
    CHECK_FALSE(small.may_leave_unsignaled());
}

TEST_CASE("posts_at_once says whether a start would post now: not when the queue is full, "
          "an operation waits, the queue has no depth, or the QP is in error or closed",
          "[work_request_machine]") {
    work_request_machine m(2, 0);
    auto sends = make_ops(3, work_queue::send);
    wr_actions a;
    CHECK(m.posts_at_once(work_queue::send));
    CHECK_FALSE(m.posts_at_once(work_queue::receive)); // no receive queue of its own
    CHECK_FALSE(m.posts_at_once(work_queue::error_watch));
    m.start(sends[0], a);
    CHECK(m.posts_at_once(work_queue::send));
    m.start(sends[1], a);
    CHECK_FALSE(m.posts_at_once(work_queue::send)); // full
    m.start(sends[2], a);                           // waits
    REQUIRE(drain(a.to_post).size() == 2);
    // The first one's completion lets the waiting one in: full again.
    wr_actions b;
    REQUIRE(m.completed(completion_of(sends[0]), b));
    REQUIRE(drain(b.to_post).size() == 1);
    CHECK_FALSE(m.posts_at_once(work_queue::send));
    wr_actions c;
    REQUIRE(m.completed(completion_of(sends[1]), c));
    CHECK(m.posts_at_once(work_queue::send)); // room, and nothing waits

    work_request_machine in_error(4, 4);
    wr_actions d;
    in_error.set_error(asio::error::connection_reset, d);
    CHECK_FALSE(in_error.posts_at_once(work_queue::send));
    work_request_machine closed(4, 4);
    closed.refuse_new(asio::error::bad_descriptor);
    CHECK_FALSE(closed.posts_at_once(work_queue::receive));
}

} // namespace work_request_machine_test
