// The command line of every sample, parsed as rdma-core's tools parse theirs
// (getopt_long: short and long options, "--opt=value" and "--opt value",
// options and operands in any order, "--" ends the options). Each sample declares
// its options once; the help text and the usage message come from that list, so
// they cannot forget an option.
//
// Conventions, as in ibv_devinfo and friends:
//   -h, --help      the help on stdout, exit status 0;
//   a bad option, a bad value or a wrong number of operands: the problem and the
//   usage on stderr, exit status 2 (never an uncaught exception).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace sample {

/// Thrown by an option's setter when the value is not acceptable; parse() turns
/// it into a usage message naming the option.
class bad_value : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Parses `text` as a whole decimal (or 0x hexadecimal) number in [low, high];
/// throws bad_value otherwise.
std::uint64_t parse_number(std::string_view text, std::uint64_t low, std::uint64_t high);

class command_line {
public:
    /// `program` as the user types it; `summary` one line saying what it does;
    /// `operands` the synopsis of the operands, e.g. "[HOST]" (empty: none).
    command_line(std::string program, std::string summary, std::string operands = {});

    /// An option without a value.
    command_line& flag(char short_name, std::string long_name, std::string help,
                       std::function<void()> set);
    command_line& flag(char short_name, std::string long_name, std::string help, bool& target);
    /// An option with a value named `value_name` in the help; `set` throws
    /// bad_value to reject it. A short_name of 0: long form only.
    command_line& option(char short_name, std::string long_name, std::string value_name,
                         std::string help, std::function<void(const char*)> set);
    command_line& option(char short_name, std::string long_name, std::string value_name,
                         std::string help, std::string& target);
    /// A numeric option in [low, high].
    template <typename Integer>
    command_line& number(char short_name, std::string long_name, std::string value_name,
                         std::string help, Integer& target,
                         Integer low = std::numeric_limits<Integer>::min(),
                         Integer high = std::numeric_limits<Integer>::max()) {
        static_assert(std::is_integral_v<Integer>);
        const auto lo = low < 0 ? 0 : static_cast<std::uint64_t>(low);
        return option(short_name, std::move(long_name), std::move(value_name), std::move(help),
                      [&target, lo, high](const char* v) {
                          target = static_cast<Integer>(
                              parse_number(v, lo, static_cast<std::uint64_t>(high)));
                      });
    }

    /// Parses argv. Returns the operands when there are between min_operands
    /// and max_operands of them. On -h/--help prints the help and exits with 0;
    /// on any error prints it with the usage and exits with 2.
    std::vector<std::string> parse(int argc, char** argv, std::size_t min_operands = 0,
                                   std::size_t max_operands = 0);

    /// Prints "PROGRAM: message" and the usage line to stderr and exits with 2:
    /// for checks that need more than one option (e.g. "--server is required").
    [[noreturn]] void usage_error(const std::string& message) const;

    std::string help() const;
    std::string usage() const;

private:
    struct entry {
        char short_name;
        std::string long_name;
        std::string value_name; // empty: a flag
        std::string help;
        std::function<void(const char*)> set;
    };
    std::string program_;
    std::string summary_;
    std::string operands_;
    std::vector<entry> entries_;
};

} // namespace sample
