// Registered memory (RAII ibv_mr) and the buffers work requests name.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/protection_domain.hpp"

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <system_error>

namespace rdma_asio {

/// Part of a memory region as a local work request names it: where it is, how
/// long, and the region's lkey. Made by memory_region::at(); plain data, so it may
/// be copied and stored freely, but it does not keep the region registered. One
/// made by hand is checked like any other: the device refuses a key of no region
/// or bytes outside it, and the library posts inline only a buffer that lies
/// within a memory_region of the queue pair's protection domain, under its lkey.
struct registered_buffer {
    void* data = nullptr;
    std::size_t size = 0;
    std::uint32_t lkey = 0;

    asio::mutable_buffer buffer() const noexcept { return {data, size}; }
    /// The scatter/gather entry of a work request for this buffer. A length
    /// beyond 2^32 - 1 cannot be sent in one entry; memory_region::at() never
    /// makes one.
    ibv_sge sge() const noexcept {
        return {reinterpret_cast<std::uintptr_t>(data), static_cast<std::uint32_t>(size), lkey};
    }
    /// Skips the first `n` bytes (all of them when n > size), as for
    /// asio::mutable_buffer.
    registered_buffer& operator+=(std::size_t n) noexcept {
        std::size_t skip = n < size ? n : size;
        data = static_cast<std::byte*>(data) + skip;
        size -= skip;
        return *this;
    }
};

inline registered_buffer operator+(registered_buffer b, std::size_t n) noexcept {
    return b += n;
}

/// Part of a peer's memory region as a one-sided operation (RDMA read or write)
/// names it: the address in the peer's address space, a length and the region's
/// rkey. Made by the owner with memory_region::remote_at() and sent to the peer
/// (for example in rdma_cm private data).
struct remote_buffer {
    std::uint64_t address = 0;
    std::uint32_t size = 0;
    std::uint32_t rkey = 0;
};

/// A registered memory region: owns an ibv_mr (ibv_reg_mr(3)) over memory the
/// caller owns, and deregisters it (ibv_dereg_mr) on close or destruction.
///
/// Move-only. The region shares ownership of its protection domain, which stays
/// allocated while the region is registered. The memory itself is the caller's:
/// it must outlive the registration and every work request posted on it.
///
/// Distinct objects may be used from different threads; one object may not be used
/// from several threads at once.
class memory_region {
public:
    /// A memory region that is not registered.
    memory_region() noexcept = default;
    /// ibv_reg_mr of `memory` in `pd` with `access` (IBV_ACCESS_* flags; 0 allows
    /// local reads only). Throws system_error naming ibv_reg_mr.
    memory_region(const protection_domain& pd, asio::mutable_buffer memory, int access);

    memory_region(memory_region&& other) noexcept;
    memory_region& operator=(memory_region&& other) noexcept;
    memory_region(const memory_region&) = delete;
    memory_region& operator=(const memory_region&) = delete;
    /// close().
    ~memory_region();

    /// ibv_reg_mr. Errors: bad_descriptor for a closed protection domain;
    /// asio::error::already_open; the errno of ibv_reg_mr (EINVAL for access flags
    /// the verbs refuse, such as remote write without local write, or an empty
    /// buffer on most devices; EFAULT for memory that is not mapped; ENOMEM beyond
    /// the locked-memory limit).
    void open(const protection_domain& pd, asio::mutable_buffer memory, int access,
              error_code& ec) noexcept;
    bool is_open() const noexcept { return mr_ != nullptr; }

    /// ibv_dereg_mr; a no-op when not registered. Should it fail (EBUSY: memory
    /// windows still bound to the region), the region is forgotten and stays
    /// registered until the process ends; close(ec) reports instead.
    void close() noexcept;
    /// The same, reporting the error of ibv_dereg_mr (EBUSY while memory windows
    /// are bound to the region); after an error the region is still registered.
    void close(error_code& ec) noexcept;

    /// The registered memory (empty when not registered).
    asio::mutable_buffer buffer() const noexcept;
    std::uint32_t lkey() const noexcept;
    std::uint32_t rkey() const noexcept;
    /// The access flags the region was registered with.
    int access() const noexcept { return access_; }

    /// The `size` bytes at `offset` for a local work request. Errors:
    /// bad_descriptor when not registered; invalid_argument for a range outside
    /// the region or longer than one scatter/gather entry takes (2^32 - 1 bytes).
    registered_buffer at(std::size_t offset, std::size_t size, error_code& ec) const noexcept;
    /// The same; throws system_error naming memory_region::at.
    registered_buffer at(std::size_t offset, std::size_t size) const;
    /// The whole region (as at(0, buffer().size())).
    registered_buffer whole() const { return at(0, buffer().size()); }

    /// The `size` bytes at `offset` as a peer names them for an RDMA read or write
    /// (meaningful only when registered with remote access). Errors as at()'s.
    remote_buffer remote_at(std::size_t offset, std::size_t size, error_code& ec) const noexcept;
    remote_buffer remote_at(std::size_t offset, std::size_t size) const;

    ibv_mr* native_handle() const noexcept { return mr_; }

private:
    bool check_range(std::size_t offset, std::size_t size, error_code& ec) const noexcept;
    // Adds the region to its protection domain's registry of regions, or takes it
    // out (detail/device/region_registry.hpp).
    void hold(bool held) const noexcept;

    ibv_mr* mr_ = nullptr;
    std::shared_ptr<ibv_pd> pd_;
    int access_ = 0;
};

} // namespace rdma_asio
