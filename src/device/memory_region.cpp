#include "rdma_asio/memory_region.hpp"
#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"
#include "rdma_asio/detail/device/region_registry.hpp"

#include <cerrno>
#include <cstdint>
#include <limits>
#include <new>
#include <string>
#include <utility>

namespace rdma_asio {
namespace {

// What the exception says before the errno's own words: the likely cause of
// ibv_reg_mr's failure where the arguments show it (ibv_reg_mr(3)). The
// error_code is the errno either way.
std::string registration_failure(const asio::mutable_buffer& memory, int access,
                                 const error_code& ec) {
    std::string what =
        "rdma_asio::memory_region: ibv_reg_mr of " + std::to_string(memory.size()) + " bytes";
    const int remote = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
    if (ec == asio::error::invalid_argument && (access & remote) != 0 &&
        (access & IBV_ACCESS_LOCAL_WRITE) == 0)
        what += " (IBV_ACCESS_REMOTE_WRITE and IBV_ACCESS_REMOTE_ATOMIC need "
                "IBV_ACCESS_LOCAL_WRITE too)";
    else if (ec == asio::error::invalid_argument && memory.size() == 0)
        what += " (an empty buffer)";
    else if (ec == asio::error::no_memory)
        what += " (more memory than the locked-memory limit allows: ulimit -l)";
    else if (ec == asio::error::fault)
        what += " (memory that is not mapped)";
    return what;
}

// The same for a range outside the region.
std::string range_failure(const char* call, std::size_t offset, std::size_t size,
                          std::size_t length) {
    return std::string(call) + ": " + std::to_string(size) + " bytes at offset " +
           std::to_string(offset) + " do not fit in the region's " + std::to_string(length) +
           " bytes";
}

// What at() and remote_at() throw for `ec`, which is set: for a range outside
// the region, the range and the region's `length`. Out of line and called only
// on failure, because at() runs for every message a stream writes: comparing
// an error_code with an enumerator calls into the category even when it is
// clear (about 130 instructions of a 64-byte round trip's, before this).
[[noreturn, gnu::cold, gnu::noinline]] void throw_out_of_range(error_code ec, const char* call,
                                                               std::size_t offset, std::size_t size,
                                                               std::size_t length) {
    if (ec == asio::error::invalid_argument)
        detail::throw_error(ec, range_failure(call, offset, size, length).c_str());
    detail::throw_error(ec, call);
}

} // namespace

memory_region::memory_region(const protection_domain& pd, asio::mutable_buffer memory, int access) {
    error_code ec;
    open(pd, memory, access, ec);
    if (ec)
        detail::throw_error(ec, registration_failure(memory, access, ec).c_str());
}

memory_region::memory_region(memory_region&& other) noexcept
    : mr_(std::exchange(other.mr_, nullptr)), pd_(std::move(other.pd_)),
      access_(std::exchange(other.access_, 0)) {}

memory_region& memory_region::operator=(memory_region&& other) noexcept {
    if (this != &other) {
        close();
        mr_ = std::exchange(other.mr_, nullptr);
        pd_ = std::move(other.pd_);
        access_ = std::exchange(other.access_, 0);
    }
    return *this;
}

memory_region::~memory_region() {
    close();
}

void memory_region::open(const protection_domain& pd, asio::mutable_buffer memory, int access,
                         error_code& ec) noexcept {
    if (is_open()) {
        ec = asio::error::already_open;
        return;
    }
    std::shared_ptr<ibv_pd> shared = pd.share();
    if (!shared) {
        ec = asio::error::bad_descriptor;
        return;
    }
    // verbs.h defines ibv_reg_mr as a macro that ANDs `access` with a flag of
    // another enum type; an int keeps that well-formed.
    ibv_mr* mr = ibv_reg_mr(shared.get(), memory.data(), memory.size(), access);
    if (mr == nullptr) {
        ec = detail::last_errno_code();
        return;
    }
    mr_ = mr;
    pd_ = std::move(shared);
    access_ = access;
    hold(true);
    ec.clear();
}

void memory_region::hold(bool held) const noexcept {
    // The domain's queue pairs post inline only from regions held there
    // (region_registry.hpp explains why).
    std::shared_ptr<detail::region_registry> regions = detail::regions_of(pd_);
    if (!regions)
        return;
    if (!held) {
        regions->remove(mr_->lkey);
        return;
    }
    try {
        regions->add(mr_->lkey, mr_->addr, mr_->length);
    } catch (const std::bad_alloc&) {
        // Not held: its sends are posted for the device to check, never inline.
    }
}

void memory_region::close() noexcept {
    error_code ignored;
    close(ignored);
    if (ignored) {
        // Nobody to tell: forget the region rather than leave a destructor that
        // retries forever. The registration stays until the process ends.
        hold(false);
        mr_ = nullptr;
        pd_.reset();
        access_ = 0;
    }
}

void memory_region::close(error_code& ec) noexcept {
    ec.clear();
    if (mr_ == nullptr)
        return;
    // Out of the domain's registry first, so that no queue pair posts inline
    // from it once ibv_dereg_mr has begun.
    hold(false);
    if (int rc = ibv_dereg_mr(mr_); rc != 0) {
        ec = detail::errno_code(rc > 0 ? rc : errno);
        hold(true); // still registered
        return;
    }
    mr_ = nullptr;
    // The protection domain may be deallocated now, if this was its last user.
    pd_.reset();
    access_ = 0;
}

asio::mutable_buffer memory_region::buffer() const noexcept {
    return mr_ ? asio::mutable_buffer(mr_->addr, mr_->length) : asio::mutable_buffer();
}

std::uint32_t memory_region::lkey() const noexcept {
    return mr_ ? mr_->lkey : 0;
}

std::uint32_t memory_region::rkey() const noexcept {
    return mr_ ? mr_->rkey : 0;
}

bool memory_region::check_range(std::size_t offset, std::size_t size,
                                error_code& ec) const noexcept {
    if (mr_ == nullptr) {
        ec = asio::error::bad_descriptor;
        return false;
    }
    if (offset > mr_->length || size > mr_->length - offset ||
        size > std::numeric_limits<std::uint32_t>::max()) {
        ec = asio::error::invalid_argument;
        return false;
    }
    ec.clear();
    return true;
}

registered_buffer memory_region::at(std::size_t offset, std::size_t size,
                                    error_code& ec) const noexcept {
    if (!check_range(offset, size, ec))
        return {};
    return {static_cast<std::byte*>(mr_->addr) + offset, size, mr_->lkey};
}

registered_buffer memory_region::at(std::size_t offset, std::size_t size) const {
    error_code ec;
    registered_buffer b = at(offset, size, ec);
    if (ec)
        throw_out_of_range(ec, "rdma_asio::memory_region::at", offset, size, buffer().size());
    return b;
}

remote_buffer memory_region::remote_at(std::size_t offset, std::size_t size,
                                       error_code& ec) const noexcept {
    if (!check_range(offset, size, ec))
        return {};
    return {reinterpret_cast<std::uintptr_t>(mr_->addr) + offset, static_cast<std::uint32_t>(size),
            mr_->rkey};
}

remote_buffer memory_region::remote_at(std::size_t offset, std::size_t size) const {
    error_code ec;
    remote_buffer b = remote_at(offset, size, ec);
    if (ec)
        throw_out_of_range(ec, "rdma_asio::memory_region::remote_at", offset, size,
                           buffer().size());
    return b;
}

} // namespace rdma_asio
