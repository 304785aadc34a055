#include "rdma_asio/protection_domain.hpp"
#include "rdma_asio/context.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/device/region_registry.hpp"

#include <cerrno>
#include <new>
#include <utility>

namespace rdma_asio {

namespace {

// Deallocates the ibv_pd when the last owner goes, unless close(ec) already did,
// and keeps the device open until then. Every owner of the ibv_pd holds this
// deleter, so it also carries what the domain's objects share: the regions
// registered in it (region_registry), which its queue pairs read before posting
// inline.
struct pd_deallocator {
    std::shared_ptr<ibv_context> device;
    std::shared_ptr<detail::region_registry> regions;
    bool deallocated = false;

    void operator()(ibv_pd* pd) const noexcept {
        // An error here (EBUSY: something made on the PD outlives it) has nobody
        // to go to; close(ec) is the way to see it.
        if (!deallocated)
            ibv_dealloc_pd(pd);
    }
};

} // namespace

protection_domain::protection_domain(const context& device) {
    error_code ec;
    open(device, ec);
    detail::throw_if_error(ec, "rdma_asio::protection_domain: ibv_alloc_pd");
}

protection_domain::protection_domain(ibv_context* device) {
    error_code ec;
    open(device, ec);
    detail::throw_if_error(ec, "rdma_asio::protection_domain: ibv_alloc_pd");
}

protection_domain& protection_domain::operator=(protection_domain&& other) noexcept {
    if (this != &other) {
        close();
        pd_ = std::move(other.pd_);
    }
    return *this;
}

protection_domain::~protection_domain() {
    close();
}

void protection_domain::open(const context& device, error_code& ec) noexcept {
    std::shared_ptr<ibv_context> shared = device.share();
    if (!shared && !is_open()) {
        ec = asio::error::bad_descriptor;
        return;
    }
    ibv_context* raw = shared.get();
    allocate(raw, std::move(shared), ec);
}

void protection_domain::open(ibv_context* device, error_code& ec) noexcept {
    if (device == nullptr && !is_open()) {
        ec = asio::error::invalid_argument;
        return;
    }
    allocate(device, nullptr, ec);
}

void protection_domain::allocate(ibv_context* device, std::shared_ptr<ibv_context> keep_open,
                                 error_code& ec) noexcept {
    if (is_open()) {
        ec = asio::error::already_open;
        return;
    }
    std::shared_ptr<detail::region_registry> regions;
    try {
        regions = std::make_shared<detail::region_registry>();
    } catch (const std::bad_alloc&) {
        ec = detail::errno_code(ENOMEM);
        return;
    }
    ibv_pd* pd = ibv_alloc_pd(device);
    if (pd == nullptr) {
        ec = detail::last_errno_code();
        return;
    }
    try {
        pd_ = std::shared_ptr<ibv_pd>(pd, pd_deallocator{std::move(keep_open), std::move(regions)});
    } catch (...) {
        // The deleter ran: the PD is deallocated again.
        ec = detail::errno_code(ENOMEM);
        return;
    }
    ec.clear();
}

void protection_domain::close() noexcept {
    pd_.reset();
}

void protection_domain::close(error_code& ec) noexcept {
    ec.clear();
    if (!pd_)
        return;
    // Shared with memory regions: the last of them deallocates it.
    if (pd_.use_count() == 1) {
        if (int rc = ibv_dealloc_pd(pd_.get()); rc != 0) {
            // ibv_dealloc_pd returns the errno value (some providers -1 and errno).
            ec = detail::errno_code(rc > 0 ? rc : errno);
            return;
        }
        std::get_deleter<pd_deallocator>(pd_)->deallocated = true;
    }
    pd_.reset();
}

std::shared_ptr<detail::region_registry>
detail::regions_of(const std::shared_ptr<ibv_pd>& pd) noexcept {
    const pd_deallocator* d = std::get_deleter<pd_deallocator>(pd);
    return d ? d->regions : nullptr;
}

} // namespace rdma_asio
