// The members every rdma_asio I/O object shares, and the completion of an
// operation started on an object that is not open.
#pragma once

#include "rdma_asio/detail/core/asio_flavour.hpp"
#include "rdma_asio/detail/core/handler_work.hpp"
#include "rdma_asio/detail/core/result_operation.hpp"
#include "rdma_asio/detail/core/throw_error.hpp"

#include <memory>
#include <system_error>
#include <type_traits>
#include <utility>

namespace rdma_asio::detail {

/// Completes an operation of an object that is not open (closed or moved-from)
/// as Asio does for a closed descriptor: with asio::error::bad_descriptor and
/// default values, posted to the handler's associated executor (by default the
/// object's). Only when there is no executor to run the handler on (a
/// default-constructed any_io_executor) does it throw system_error naming
/// the operation.
template <class Signature>
struct closed_initiation;

template <class... Values>
struct closed_initiation<void(error_code, Values...)> {
    template <class Handler, class Executor>
    void operator()(Handler&& handler, const Executor& io_ex, const char* what) const {
        post(std::forward<Handler>(handler), io_ex, what, asio::error::bad_descriptor,
             std::decay_t<Values>{}...);
    }
    /// Completes, posted, with `ec` and default values: an operation an open
    /// object refuses before it starts.
    template <class Handler, class Executor>
    static void fail(Handler&& handler, const Executor& io_ex, const char* what, error_code ec) {
        post(std::forward<Handler>(handler), io_ex, what, ec, std::decay_t<Values>{}...);
    }
    /// The same with the values to complete with (for a value that has no
    /// default, e.g. an I/O object typed on an executor that has none).
    template <class Handler, class Executor, class... Args>
    requires(sizeof...(Args) > 0 && sizeof...(Args) == sizeof...(Values)) void
    operator()(Handler&& handler, const Executor& io_ex, const char* what, Args&&... values) const {
        post(std::forward<Handler>(handler), io_ex, what, asio::error::bad_descriptor,
             std::forward<Args>(values)...);
    }

private:
    template <class Handler, class Executor, class... Args>
    static void post(Handler&& handler, const Executor& io_ex, const char* what, error_code ec,
                     Args&&... values) {
        if (!has_target(asio::get_associated_executor(handler, io_ex)))
            throw_error(ec, what);
        post_result(std::forward<Handler>(handler), io_ex, ec, std::forward<Args>(values)...);
    }
};

/// The initiation of every operation of the library: completes with
/// bad_descriptor (closed_initiation) when the object is not open, else hands the
/// handler to `Start{}(impl, io_ex, handler, args...)`. One initiation, so that
/// both cases have one return type for every token (deferred included), and
/// whatever an operation changes, Start changes it: as the operation is launched,
/// never when an operation made with asio::deferred is made.
///
/// A result type with no default value (an I/O object on an executor that has
/// none) comes from `Start::not_open(args...)` for the not-open case.
template <class Signature, class Impl, class Executor, class Start>
struct object_initiation {
    std::shared_ptr<Impl> impl; // null: the object is not open
    Executor io_ex;
    const char* what; // the operation, named in a throw without any executor
    using executor_type = Executor;
    executor_type get_executor() const noexcept { return io_ex; }

    template <class Handler, class... Args>
    void operator()(Handler&& handler, Args&&... args) const {
        if (!impl) {
            if constexpr (requires { Start::not_open(args...); })
                return closed_initiation<Signature>{}(std::forward<Handler>(handler), io_ex, what,
                                                      Start::not_open(args...));
            else
                return closed_initiation<Signature>{}(std::forward<Handler>(handler), io_ex, what);
        }
        Start{}(impl, io_ex, std::forward<Handler>(handler), std::forward<Args>(args)...);
    }
};

/// Initiates, with `token`, the operation `Start` of signature `Signature` on
/// `state` (null: not open), its handler's default executor `io_ex` (see
/// object_initiation). Every operation of the library starts here: through
/// io_object's initiate() and initiate_on(), or, for an object made of others
/// (a connection), directly.
template <class Signature, class Start, class State, class Executor, class CompletionToken,
          class... Args>
auto initiate_operation(std::shared_ptr<State> state, const Executor& io_ex, const char* what,
                        CompletionToken&& token, Args&&... args) {
    return asio::async_initiate<CompletionToken, Signature>(
        object_initiation<Signature, State, Executor, Start>{std::move(state), io_ex, what}, token,
        std::forward<Args>(args)...);
}

struct io_object_access;

/// Where an I/O object's handlers run by default, given as Asio's own I/O objects
/// accept it: an executor that converts to the object's executor type, or an
/// execution context (an io_context, a thread_pool), whose executor is taken. One
/// parameter of this type stands for the pair of constructors Asio declares.
template <class Executor>
class executor_or_context {
public:
    template <class Executor1>
    requires std::is_convertible_v<const Executor1&, Executor>
    executor_or_context(const Executor1& ex) : ex_(ex) {}
    template <class ExecutionContext>
    requires(!std::is_convertible_v<ExecutionContext&, Executor> &&
             std::is_convertible_v<ExecutionContext&, asio::execution_context&>)
        executor_or_context(ExecutionContext& context)
        : ex_(context.get_executor()) {}

    const Executor& executor() const noexcept { return ex_; }

private:
    Executor ex_;
};

/// The shared part of basic_async_event_stream, basic_completion_queue, ...: the
/// executor, the non-template state in src/ (`Impl`, shared with operations in
/// flight), and the members Asio's own I/O objects have. `Object` is the I/O
/// object's own template (basic_async_event_stream, ...), for rebind_executor and
/// the moves between executor types. Move-only; a moved-from object is closed and
/// keeps its executor, as in Asio.
///
/// Impl provides `using native_handle_type`, `static constexpr native_handle_type
/// no_handle`, and noexcept `native_handle()`, `cancel()` and `close()`.
///
/// An object inherits the converting move (`using base::base; using
/// base::operator=;`) and declares its own constructors and operations.
template <template <class> class Object, class Executor, class Impl>
class io_object {
public:
    using executor_type = Executor;
    using native_handle_type = typename Impl::native_handle_type;

    /// The same object type on another executor type (what asio::as_default_on
    /// uses).
    template <class Executor1>
    struct rebind_executor {
        using other = Object<Executor1>;
    };

    /// Moves an object of another executor type whose executor converts to ours.
    template <class Executor1>
    requires(!std::is_same_v<Executor1, Executor> &&
             std::is_convertible_v<const Executor1&, Executor>) io_object(Object<Executor1>&& other)
    noexcept : ex_(other.get_executor()), impl_(std::move(as_base(other).impl_)) {}
    template <class Executor1>
    requires(!std::is_same_v<Executor1, Executor> &&
             std::is_convertible_v<const Executor1&, Executor>) Object<Executor>
    &operator=(Object<Executor1>&& other) noexcept {
        close();
        ex_ = other.get_executor();
        impl_ = std::move(as_base(other).impl_);
        return static_cast<Object<Executor>&>(*this);
    }

    executor_type get_executor() const noexcept { return ex_; }

    /// The wrapped handle, still owned by the library that made it (libibverbs,
    /// librdmacm, ...); the "no handle" value when not open.
    native_handle_type native_handle() const noexcept {
        return impl_ ? impl_->native_handle() : Impl::no_handle;
    }

    /// False after close(), after a move, and before a successful open. A state
    /// that can close while its object still holds it (a queue pair's, once its
    /// async_close has been launched) says so with released().
    bool is_open() const noexcept {
        if constexpr (requires(const Impl& impl) { impl.released(); })
            return impl_ != nullptr && !impl_->released();
        else
            return impl_ != nullptr;
    }

    /// Completes this object's pending operations with
    /// asio::error::operation_aborted. Does nothing when not open.
    void cancel() noexcept {
        if (impl_)
            impl_->cancel();
    }

    /// Cancels this object's operations and releases it (see each object). Later
    /// operations complete with asio::error::bad_descriptor. Idempotent.
    void close() noexcept {
        if (std::shared_ptr<Impl> impl = std::move(impl_))
            impl->close();
    }

protected:
    // By the same parameter type as the objects' own constructors, so that where
    // both would do, the object's own is chosen over this one, which `using
    // base::base` makes a candidate too.
    explicit io_object(const executor_or_context<Executor>& ex) noexcept : ex_(ex.executor()) {}
    io_object(io_object&& other) noexcept : ex_(other.ex_), impl_(std::move(other.impl_)) {}
    io_object& operator=(io_object&& other) noexcept {
        if (this != &other) {
            close();
            ex_ = other.ex_;
            impl_ = std::move(other.impl_);
        }
        return *this;
    }
    ~io_object() { close(); }

    /// Starts an operation with signature `Signature` on this object (see
    /// object_initiation); `what` names it ("rdma_asio::X::async_y").
    template <class Signature, class Start, class CompletionToken, class... Args>
    auto initiate(const char* what, CompletionToken&& token, Args&&... args) const {
        return initiate_on<Signature, Start>(impl_, what, std::forward<CompletionToken>(token),
                                             std::forward<Args>(args)...);
    }
    /// The same on state other than this object's own: that of the object it
    /// is made on (an rdma_cm id waits on its channel's); null when that
    /// object, or this one, is not open.
    template <class Signature, class Start, class State, class CompletionToken, class... Args>
    auto initiate_on(std::shared_ptr<State> state, const char* what, CompletionToken&& token,
                     Args&&... args) const {
        return initiate_operation<Signature, Start>(std::move(state), ex_, what,
                                                    std::forward<CompletionToken>(token),
                                                    std::forward<Args>(args)...);
    }

    /// Every open(..., ec): asio::error::already_open when open, else the state
    /// `make(executor, ec)` returns (null, with `ec` set, when it failed). A state
    /// made on another object's (a CQ on its channel's, an id on its channel's)
    /// needs no executor: `make(ec)`.
    template <class Make>
    void open_with(error_code& ec, Make&& make) {
        if (is_open()) {
            ec = asio::error::already_open;
            return;
        }
        ec.clear();
        if constexpr (std::is_invocable_v<Make&&, error_code&>)
            adopt(std::forward<Make>(make)(ec));
        else
            adopt(std::forward<Make>(make)(ex_, ec));
    }

    /// Every throwing open(args...): the object's open(args..., ec), then
    /// system_error naming `what` when it failed.
    template <class... Args>
    void open_or_throw(const char* what, Args&&... args) {
        error_code ec;
        static_cast<Object<Executor>&>(*this).open(std::forward<Args>(args)..., ec);
        throw_if_error(ec, what);
    }

    /// The state, for members that need an open object; throws system_error
    /// (bad_descriptor) naming `what` when it is not open.
    Impl& checked(const char* what) const {
        if (!impl_)
            throw_error(asio::error::bad_descriptor, what);
        return *impl_;
    }

    /// Replaces the state (closing the old one); an empty pointer leaves the
    /// object closed.
    void adopt(std::shared_ptr<Impl> impl) noexcept {
        close();
        impl_ = std::move(impl);
    }

    /// The state of the object this one is made on (an rdma_cm id on its event
    /// channel, a CQ on its completion channel), to share it; null when that
    /// object is not open.
    template <template <class> class OtherObject, class OtherExecutor, class OtherImpl>
    static const std::shared_ptr<OtherImpl>&
    state_of(const io_object<OtherObject, OtherExecutor, OtherImpl>& other) noexcept {
        return other.impl_;
    }

    executor_type ex_;
    std::shared_ptr<Impl> impl_;

private:
    template <template <class> class, class, class>
    friend class io_object;
    friend struct io_object_access;

    template <class Executor1>
    static io_object<Object, Executor1, Impl>& as_base(Object<Executor1>& other) noexcept {
        return other;
    }
};

/// For the library's own tests (opens an I/O object on state made by hand, e.g. a
/// source imitating the kernel's side) and for non-template classes of the
/// library that hold an I/O object (connection).
struct io_object_access {
    template <template <class> class Object, class Executor, class Impl>
    static const std::shared_ptr<Impl>&
    state(const io_object<Object, Executor, Impl>& object) noexcept {
        return object.impl_;
    }
    template <template <class> class Object, class Executor, class Impl>
    static void adopt(io_object<Object, Executor, Impl>& object,
                      std::shared_ptr<Impl> impl) noexcept {
        object.adopt(std::move(impl));
    }
};

} // namespace rdma_asio::detail
