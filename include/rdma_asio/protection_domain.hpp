// A protection domain (RAII ibv_pd).
#pragma once

#include <infiniband/verbs.h>

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include <memory>

namespace rdma_asio {

class context;
template <class Executor>
class basic_connection;

/// A protection domain: owns an ibv_pd (ibv_alloc_pd(3)).
///
/// Move-only. Memory regions registered in it, queue_pairs made with it and
/// connections made with it share its ownership, so destroying or closing the
/// protection_domain before them is safe: the ibv_pd is deallocated when the last
/// of them is gone (a queue_pair's once its QP is destroyed). A protection
/// domain made from a context keeps that device open likewise (the context may be
/// closed first).
///
/// Queue pairs, address handles or memory windows made on native_handle() by other
/// means are not tracked: destroy them first. ibv_dealloc_pd(3) refuses a
/// protection domain still in use (EBUSY); close(ec) reports that and keeps the
/// domain open, while the destructor and close() cannot report it, and the ibv_pd
/// then stays allocated until the process ends.
///
/// Distinct objects may be used from different threads; one object may not be used
/// from several threads at once (as Asio's I/O objects).
class protection_domain {
public:
    /// A protection domain that is not open.
    protection_domain() noexcept = default;
    /// ibv_alloc_pd on `device`; throws system_error naming ibv_alloc_pd.
    explicit protection_domain(const context& device);
    /// The same on a device this library did not open (e.g. an rdma_cm id's
    /// `verbs`): that device must stay open until the ibv_pd is deallocated.
    explicit protection_domain(ibv_context* device);

    protection_domain(protection_domain&& other) noexcept = default;
    protection_domain& operator=(protection_domain&& other) noexcept;
    protection_domain(const protection_domain&) = delete;
    protection_domain& operator=(const protection_domain&) = delete;
    /// close().
    ~protection_domain();

    /// ibv_alloc_pd on `device`. Errors: bad_descriptor for a closed context;
    /// asio::error::already_open; the errno of ibv_alloc_pd.
    void open(const context& device, error_code& ec) noexcept;
    /// The same on a device this library did not open; invalid_argument for null.
    void open(ibv_context* device, error_code& ec) noexcept;
    bool is_open() const noexcept { return pd_ != nullptr; }

    /// Lets go of the ibv_pd: deallocates it now, or, while memory regions still
    /// share it, when the last of them is gone. A no-op when not open.
    void close() noexcept;
    /// The same, reporting the error of ibv_dealloc_pd (EBUSY while a queue pair
    /// or another object made on native_handle() still uses it); after an error
    /// the protection domain is still open.
    void close(error_code& ec) noexcept;

    ibv_pd* native_handle() const noexcept { return pd_.get(); }
    /// Shares ownership: the ibv_pd stays allocated while the result lives. Empty
    /// when not open.
    std::shared_ptr<ibv_pd> share() const noexcept { return pd_; }

private:
    // A share of an ibv_pd a connection keeps (basic_connection::pd()).
    template <class>
    friend class basic_connection;
    explicit protection_domain(std::shared_ptr<ibv_pd> shared) noexcept : pd_(std::move(shared)) {}

    // ibv_alloc_pd on `device`; `keep_open` (may be empty) stays with the ibv_pd.
    void allocate(ibv_context* device, std::shared_ptr<ibv_context> keep_open,
                  error_code& ec) noexcept;

    std::shared_ptr<ibv_pd> pd_;
};

} // namespace rdma_asio
