// A list of objects that carry their own links. An operation moves between the
// lists of whoever holds it (waiting, posted, ready to complete) without
// allocating, and leaves any of them in constant time, e.g. when it is cancelled.
#pragma once

#include <cstddef>

namespace rdma_asio::detail {

/// Objects of type T linked through two of their members, `Prev` and `Next`
/// (pointers to members of T, or of a base of T, that point to T or that base). An
/// object is in at most one list per pair of links; a type with two pairs can be
/// in two lists at once (a dispatcher's waiter: every waiter, and its object's).
template <class T, auto Prev, auto Next>
class intrusive_list {
public:
    intrusive_list() noexcept = default;
    intrusive_list(const intrusive_list&) = delete;
    intrusive_list& operator=(const intrusive_list&) = delete;

    bool empty() const noexcept { return head_ == nullptr; }
    /// Exactly one object.
    bool single() const noexcept { return head_ != nullptr && head_ == tail_; }
    T* front() const noexcept { return head_; }
    /// The object after `x` in its list, or null.
    static T* next(const T& x) noexcept { return static_cast<T*>(x.*Next); }

    void push_back(T& x) noexcept {
        x.*Next = nullptr;
        x.*Prev = tail_;
        if (tail_ != nullptr)
            tail_->*Next = &x;
        else
            head_ = &x;
        tail_ = &x;
    }

    T* pop_front() noexcept {
        T* x = head_;
        if (x != nullptr)
            erase(*x);
        return x;
    }

    /// Unlinks `x`, which is in this list.
    void erase(T& x) noexcept {
        T* prev = static_cast<T*>(x.*Prev);
        T* next = static_cast<T*>(x.*Next);
        if (prev != nullptr)
            prev->*Next = next;
        else
            head_ = next;
        if (next != nullptr)
            next->*Prev = prev;
        else
            tail_ = prev;
        x.*Prev = nullptr;
        x.*Next = nullptr;
    }

    /// Moves every object of `other` to the end of this list, in order.
    void splice_back(intrusive_list& other) noexcept {
        if (other.head_ == nullptr)
            return;
        other.head_->*Prev = tail_;
        if (tail_ != nullptr)
            tail_->*Next = other.head_;
        else
            head_ = other.head_;
        tail_ = other.tail_;
        other.head_ = other.tail_ = nullptr;
    }

    std::size_t size() const noexcept {
        std::size_t n = 0;
        for (T* x = head_; x != nullptr; x = next(*x))
            ++n;
        return n;
    }

private:
    T* head_ = nullptr;
    T* tail_ = nullptr;
};

} // namespace rdma_asio::detail
