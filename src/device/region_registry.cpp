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
    if (at != regions_.end() && at->lkey == lkey)
        *at = r;
    else
        regions_.insert(at, r);
}

void region_registry::remove(std::uint32_t lkey) noexcept {
    std::lock_guard lock(mutex_);
    auto at = std::lower_bound(regions_.begin(), regions_.end(), lkey, by_lkey);
    if (at != regions_.end() && at->lkey == lkey)
        regions_.erase(at);
}

const region_registry::region* region_registry::find_locked(std::uint32_t lkey) const noexcept {
    auto at = std::lower_bound(regions_.begin(), regions_.end(), lkey, by_lkey);
    return at != regions_.end() && at->lkey == lkey ? &*at : nullptr;
}

bool region_registry::covers(std::span<const ibv_sge> sges) const noexcept {
    std::lock_guard lock(mutex_);
    for (const ibv_sge& sge : sges) {
        const region* r = find_locked(sge.lkey);
        // Written so that no sum can wrap: addr - begin is the offset in the region.
        if (r == nullptr || sge.addr < r->begin || sge.addr - r->begin > r->length ||
            sge.length > r->length - (sge.addr - r->begin))
            return false;
    }
    return true;
}

std::size_t region_registry::size() const noexcept {
    std::lock_guard lock(mutex_);
    return regions_.size();
}

} // namespace rdma_asio::detail
