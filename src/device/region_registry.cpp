#include "rdma_asio/detail/device/region_registry.hpp"

#include <algorithm>

namespace rdma_asio::detail {

namespace {

constexpr auto by_lkey = [](const auto& r, std::uint32_t lkey) { return r.lkey < lkey; };

} // namespace

void region_registry::add(std::uint32_t lkey, const void* addr, std::size_t length) {
    std::lock_guard lock(mutex_);
    auto at = std::lower_bound(regions_.begin(), regions_.end(), lkey, by_lkey);
    const region r{lkey, reinterpret_cast<std::uintptr_t>(addr), length};
    // A device gives a live region's lkey to no other region; one held under
    // the same lkey is a region already deregistered behind our back.
    if (at != regions_.end() && at->lkey == lkey) {
        generation_.fetch_add(1, std::memory_order_release);
        *at = r;
    } else {
        regions_.insert(at, r);
    }
}

void region_registry::remove(std::uint32_t lkey) noexcept {
    std::lock_guard lock(mutex_);
    auto at = std::lower_bound(regions_.begin(), regions_.end(), lkey, by_lkey);
    if (at != regions_.end() && at->lkey == lkey) {
        generation_.fetch_add(1, std::memory_order_release);
        regions_.erase(at);
    }
}

const region_registry::region* region_registry::find_locked(std::uint32_t lkey) const noexcept {
    auto at = std::lower_bound(regions_.begin(), regions_.end(), lkey, by_lkey);
    return at != regions_.end() && at->lkey == lkey ? &*at : nullptr;
}

bool region_registry::covers_locked(std::span<const ibv_sge> sges) const noexcept {
    for (const ibv_sge& sge : sges) {
        const region* r = find_locked(sge.lkey);
        if (r == nullptr || !within(sge, r->begin, r->length))
            return false;
    }
    return true;
}

bool region_registry::covers_and_remember(std::span<const ibv_sge> sges,
                                          last_region& last) const noexcept {
    std::lock_guard lock(mutex_);
    if (!covers_locked(sges))
        return false;
    if (!sges.empty()) {
        const region& r = *find_locked(sges[0].lkey);
        last = {r.lkey, r.begin, r.length, generation_.load(std::memory_order_relaxed)};
    }
    return true;
}

std::size_t region_registry::size() const noexcept {
    std::lock_guard lock(mutex_);
    return regions_.size();
}

} // namespace rdma_asio::detail
