// What the work requests of a UD queue pair need beyond an RC one's: an address
// handle for each destination, and room for the Global Routing Header at the
// front of each receive. The queue pair's state (queue_pair_impl) owns one when
// its QP is UD and calls it under its lock.
//
// Why it is shaped this way:
// - On UD the device writes every message 40 bytes into the receive's memory:
//   those 40 bytes take the GRH when the message has one, and stay reserved
//   when it has none (ibv_post_recv(3)). So that the user's buffers hold the
//   message alone, each receive is posted with one more scatter/gather entry in
//   front, a 40-byte slot of a registered ring this object owns, and its length
//   is reported without the 40 bytes.
// - A receive queue completes its work requests in the order they were posted,
//   flushes included, and never holds more than its depth; the n-th receive
//   posted takes slot n mod depth, which is then free again. The count moves only
//   when a post succeeds, so a failed post leaves no hole.
// - The sender's GID is in its slot's GRH. The slot is read when the completion
//   is polled, before the queue pair posts the next receive (which may take the
//   slot again), and kept in the operation.
// - A send names its destination by an address handle (ibv_create_ah(3)), which
//   on some devices (rxe) is a kernel object: too dear to make per datagram. One
//   is made per address on first use and kept until the QP is destroyed; then
//   the handles and the ring are released, before the protection domain can be.
//   Making one may block for a second on RoCE (the kernel resolves the
//   neighbour), so it is made off the initiator's thread (address_wait.hpp) and
//   adopted here; a send is posted only with a handle already made.
#pragma once

#include "rdma_asio/datagram_endpoint.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"

#include <infiniband/verbs.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <system_error>
#include <tuple>
#include <vector>

namespace rdma_asio::detail {

class datagram_support {
public:
    /// The room a receive keeps for the GRH (ibv_post_recv(3)).
    static constexpr std::uint32_t grh_size = 40;

    /// For the UD QP `qp` on `port`, whose address handles take the source GID
    /// at `gid_index`, and whose receive queue holds `receive_depth` work
    /// requests. Null with `ec` set on failure (the errno of ibv_query_port,
    /// ibv_query_gid or ibv_reg_mr).
    static std::unique_ptr<datagram_support> create(ibv_qp* qp, std::uint8_t port,
                                                    std::uint8_t gid_index,
                                                    std::uint32_t receive_depth, error_code& ec);

    datagram_support(const datagram_support&) = delete;
    datagram_support& operator=(const datagram_support&) = delete;
    ~datagram_support();

    /// This queue pair's own address (its port's GID and LID, its number, its Q_Key).
    const datagram_endpoint& local() const noexcept { return local_; }

    /// The scatter/gather list of the next receive posted: its GRH slot, then
    /// `sges`. `out` holds at least sges.size() + 1 entries; returns the count,
    /// and the slot in `slot`.
    std::uint32_t receive_list(std::span<const ibv_sge> sges, ibv_sge* out,
                               std::uint32_t& slot) const noexcept;
    /// The receive receive_list() was made for was posted: the next takes the
    /// next slot.
    void receive_posted() noexcept { ++posted_; }
    /// The successful completion `wc` of the receive posted with `slot`: the
    /// sender, from `wc` and the GRH in the slot (the GID stays zero without
    /// one; the Q_Key is this queue pair's, which the sender's datagram carried),
    /// and the message's length without the 40 bytes.
    void received(const ibv_wc& wc, std::uint32_t slot, datagram_endpoint& source,
                  std::uint32_t& length) const noexcept;

    /// The address handle made for `to`, or null when there is none yet.
    ibv_ah* find(const datagram_endpoint& to) const noexcept;
    /// What ibv_create_ah needs to make the handle for `to`, in pd().
    ibv_ah_attr attributes_for(const datagram_endpoint& to) const noexcept;
    ibv_pd* pd() const noexcept { return pd_; }
    /// A send waiting for the handle of its destination: called once with the
    /// outcome of the making (or operation_aborted when the QP ends the wait).
    using address_waiter = std::function<void(error_code)>;
    /// Adds `w` to the sends waiting for `to`'s handle, after those already
    /// waiting; true when it is the first and no making's outcome is being
    /// handed out (its caller has the handle made).
    bool add_waiter(const datagram_endpoint& to, address_waiter w);
    /// Whether the outcome of making `to`'s handle is being handed to the sends
    /// that waited for it (next_waiters): a send started meanwhile waits behind
    /// them (add_waiter), even though the handle is made, since their ends are
    /// not all posted yet.
    bool handing_out(const datagram_endpoint& to) const noexcept;
    /// Sends to `to` that waited for its handle and have not started yet: while
    /// there are any, a later send to `to` waits behind them, so that sends to
    /// one destination start in the order they were started.
    std::size_t unstarted(const datagram_endpoint& to) const noexcept;
    /// Whether a send to `to` may be posted now: its handle is made, and no send
    /// to `to` that waited for it is still to start.
    bool ready_for(const datagram_endpoint& to) const noexcept {
        return find(to) != nullptr && unstarted(to) == 0;
    }
    /// One more such send (it is about to wait), or one fewer (it started or
    /// ended). The count is kept only while it is not zero.
    void waiting_send_added(const datagram_endpoint& to);
    void waiting_send_done(const datagram_endpoint& to) noexcept;
    /// The sends waiting for `to`'s handle, in the order they started, no longer
    /// kept here.
    std::vector<address_waiter> take_waiters(const datagram_endpoint& to) noexcept;
    /// For the making of `to`'s handle, once it has an outcome: the sends that
    /// waited for it and are not handed it yet, in the order they started.
    /// handing_out(to) holds from the first call until one returns none; the
    /// maker calls until then, each batch's waiters outside the lock.
    std::vector<address_waiter> next_waiters(const datagram_endpoint& to) noexcept;
    /// Every waiting send, by destination, no longer kept here.
    /// What tells destinations apart for an address handle: GID, LID, SL.
    using address_key = std::tuple<std::array<std::uint8_t, 16>, std::uint16_t, std::uint8_t>;
    static address_key key_of(const datagram_endpoint& to) noexcept {
        return {to.gid, to.lid, to.sl};
    }
    struct pending_handle {
        std::vector<address_waiter> waiting; // in the order they started
        bool handing_out = false;            // see handing_out()
    };
    using waiting_sends = std::map<address_key, pending_handle>;
    waiting_sends take_all_waiters() noexcept;
    /// Keeps `ah`, made for `to`, until release(); one made meanwhile by another
    /// call stays and `ah` is destroyed. no_memory (and `ah` destroyed) when it
    /// cannot be kept.
    error_code adopt(const datagram_endpoint& to, ibv_ah* ah) noexcept;

    /// ibv_attach_mcast or ibv_detach_mcast of `group` on `qp`, kept in mind:
    /// an errno, or no_memory.
    error_code multicast(ibv_qp* qp, const datagram_endpoint& group, bool attach) noexcept;
    /// Detaches `qp` from every group it is still attached to: before
    /// ibv_destroy_qp, which refuses (EBUSY) while the QP is attached to one.
    void detach_all(ibv_qp* qp) noexcept;

    /// Destroys the address handles and deregisters the ring: only once the QP
    /// is destroyed (the device touches neither any more). Idempotent.
    void release() noexcept;

private:
    datagram_support() = default;

    ibv_pd* pd_ = nullptr;
    std::uint8_t port_ = 1;
    std::uint8_t gid_index_ = 0;
    datagram_endpoint local_;
    std::uint32_t depth_ = 0;
    std::uint64_t posted_ = 0;    // receives posted so far
    std::vector<std::byte> ring_; // depth_ slots of grh_size bytes
    ibv_mr* ring_mr_ = nullptr;
    std::map<address_key, ibv_ah*> handles_;
    waiting_sends pending_;                        // for the handles being made
    std::map<address_key, std::size_t> unstarted_; // see unstarted()
    std::vector<datagram_endpoint> groups_;        // attached to
};

} // namespace rdma_asio::detail
