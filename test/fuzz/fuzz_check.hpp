// What the fuzz targets share: an invariant check that aborts (libFuzzer reports
// the input that broke it), and a reader that takes a fuzz input from the front
// as a script of small numbers and byte strings.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            std::fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #cond);    \
            std::abort();                                                                          \
        }                                                                                          \
    } while (0)

namespace rdma_asio::fuzz {

// Reads front to back (unlike libFuzzer's FuzzedDataProvider, which takes numbers
// from the back) so that seed inputs can be written as plain scripts. An exhausted
// input reads as zeros.
class script_reader {
public:
    explicit script_reader(std::span<const std::uint8_t> data) noexcept : data_(data) {}

    bool empty() const noexcept { return pos_ >= data_.size(); }
    std::uint8_t u8() noexcept { return empty() ? 0 : data_[pos_++]; }
    std::uint16_t u16() noexcept { return static_cast<std::uint16_t>(u8() << 8 | u8()); }
    std::uint32_t u32() noexcept { return std::uint32_t{u16()} << 16 | u16(); }
    std::uint64_t u64() noexcept { return std::uint64_t{u32()} << 32 | u32(); }
    /// Up to `n` bytes (fewer at the end of the input).
    std::vector<std::uint8_t> bytes(std::size_t n) {
        const std::size_t take = std::min(n, data_.size() - std::min(pos_, data_.size()));
        std::vector<std::uint8_t> out(data_.begin() + static_cast<std::ptrdiff_t>(pos_),
                                      data_.begin() + static_cast<std::ptrdiff_t>(pos_ + take));
        pos_ += take;
        return out;
    }

private:
    std::span<const std::uint8_t> data_;
    std::size_t pos_ = 0;
};

/// Writes what script_reader reads (for the seed generator).
class script_writer {
public:
    void u8(std::uint8_t v) { out_.push_back(v); }
    void u16(std::uint16_t v) {
        u8(static_cast<std::uint8_t>(v >> 8));
        u8(static_cast<std::uint8_t>(v));
    }
    void u32(std::uint32_t v) {
        u16(static_cast<std::uint16_t>(v >> 16));
        u16(static_cast<std::uint16_t>(v));
    }
    void u64(std::uint64_t v) {
        u32(static_cast<std::uint32_t>(v >> 32));
        u32(static_cast<std::uint32_t>(v));
    }
    void bytes(std::span<const std::uint8_t> b) { out_.insert(out_.end(), b.begin(), b.end()); }
    const std::vector<std::uint8_t>& data() const noexcept { return out_; }

private:
    std::vector<std::uint8_t> out_;
};

} // namespace rdma_asio::fuzz
