// One object of a type per execution context, made on its first use and kept until
// the context goes: the Asio service that holds it, written once. The object's
// shutdown() runs at the context's shutdown (asio::execution_context::service).
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"

namespace rdma_asio::detail {

template <class T>
class context_held_service : public asio::execution_context::service {
public:
    using key_type = context_held_service;
    static inline asio::execution_context::id id;

    explicit context_held_service(asio::execution_context& ctx)
        : asio::execution_context::service(ctx) {}

    T held;

private:
    void shutdown() override { held.shutdown(); }
};

/// The T of `ctx` (default-constructed on first use).
template <class T>
T& held_by(asio::execution_context& ctx) {
    return asio::use_service<context_held_service<T>>(ctx).held;
}

} // namespace rdma_asio::detail
