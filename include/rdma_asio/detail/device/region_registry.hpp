// The memory regions registered through memory_region in one protection domain:
// what a queue pair of that domain consults before it posts a send inline.
//
// Why it exists: a work request posted with IBV_SEND_INLINE carries its bytes in
// the request itself (ibv_post_send(3)); the device then reads no memory for it and
// checks no lkey. The protection domain and a region's bounds are security
// boundaries of RDMA: a send from a buffer outside every region of the QP's domain
// (past a region's end, in another domain's region, under a made-up lkey, in memory
// never registered) must end with the device's protection error, not leave with
// whatever bytes lie at that address. So a queue pair posts inline only a request
// whose every entry lies within one region held here under the entry's own lkey,
// and anything else for the device to check. Regions registered by other means
// (ibv_reg_mr on native_handle()) are not held, so their sends are never inline.
//
// Entries leave before ibv_dereg_mr (memory_region::close), so the registry never
// vouches for a region that is gone; a failed deregistration puts its entry back.
// Every memory_region of the domain and every queue pair may use it from its own
// thread: one mutex, held for a lookup in a vector sorted by lkey. A queue pair
// keeps the last region that answered (last_region), and asks the lock only when
// its entry lies elsewhere or a region has left since: the check costs a send one
// atomic load then, not a lock round trip.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace rdma_asio::detail {

class region_registry {
public:
    /// A caller's copy of the last region that covered its entries, and of the
    /// generation it was read in; empty at first. Used by one thread at a time.
    struct last_region {
        std::uint32_t lkey = 0;
        std::uintptr_t begin = 0;
        std::size_t length = 0;
        std::uint64_t generation = 0; // never a registry's: empty
    };

    /// Holds the region `lkey` over [`addr`, `addr` + `length`). Throws
    /// std::bad_alloc; the region is then simply never posted inline.
    void add(std::uint32_t lkey, const void* addr, std::size_t length);
    /// Forgets the region `lkey`; a no-op for one not held.
    void remove(std::uint32_t lkey) noexcept;
    /// Whether every entry of `sges` lies within the region its lkey names:
    /// answered from `last` when every entry lies in that region and no region
    /// has left since it was read, else under the lock; `last` then names the
    /// region of the first entry.
    /// (Inline: a queue pair asks it for every small send.)
    bool covers(std::span<const ibv_sge> sges, last_region& last) const noexcept {
        if (last.generation == generation_.load(std::memory_order_acquire)) {
            bool all = true;
            for (const ibv_sge& sge : sges)
                all = all && sge.lkey == last.lkey && within(sge, last.begin, last.length);
            if (all)
                return true;
        }
        return covers_and_remember(sges, last);
    }
    /// Whether `sge` lies within [begin, begin + length), written so that no sum
    /// can wrap: addr - begin is the offset in the region.
    static bool within(const ibv_sge& sge, std::uintptr_t begin, std::size_t length) noexcept {
        return sge.addr >= begin && sge.addr - begin <= length &&
               sge.length <= length - (sge.addr - begin);
    }
    /// The regions held (for tests).
    std::size_t size() const noexcept;

private:
    struct region {
        std::uint32_t lkey;
        std::uintptr_t begin;
        std::size_t length;
    };
    const region* find_locked(std::uint32_t lkey) const noexcept;
    bool covers_locked(std::span<const ibv_sge> sges) const noexcept;
    // covers(sges, last) under the lock, `last` then naming the first entry's region.
    bool covers_and_remember(std::span<const ibv_sge> sges, last_region& last) const noexcept;

    mutable std::mutex mutex_;
    std::vector<region> regions_; // sorted by lkey
    // Raised (under the lock, before the region goes) whenever a region leaves or
    // is replaced: a last_region of an older generation is not trusted.
    std::atomic<std::uint64_t> generation_{1};
};

/// The registry of the protection domain `pd` (one made by protection_domain), or
/// null for one this library did not allocate.
std::shared_ptr<region_registry> regions_of(const std::shared_ptr<ibv_pd>& pd) noexcept;

} // namespace rdma_asio::detail
