// Whether this test program is built with AddressSanitizer or ThreadSanitizer: the
// tests that move the most data do less of it there (the same paths, fewer rounds),
// within the bounds they keep.
#pragma once

namespace rdma_asio::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool sanitized_build = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool sanitized_build = true;
#else
inline constexpr bool sanitized_build = false;
#endif
#else
inline constexpr bool sanitized_build = false;
#endif

} // namespace rdma_asio::test
