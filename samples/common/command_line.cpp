#include "command_line.hpp"

#include <getopt.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace sample {
namespace {

// getopt_long's `val` for an option without a short form: beyond any char.
constexpr int long_only_base = 256;

} // namespace

std::uint64_t parse_number(std::string_view text, std::uint64_t low, std::uint64_t high) {
    int base = 10;
    if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
        text.remove_prefix(2);
        base = 16;
    }
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || value < low ||
        value > high)
        throw bad_value("expected a number from " + std::to_string(low) + " to " +
                        std::to_string(high));
    return value;
}

command_line::command_line(std::string program, std::string summary, std::string operands)
    : program_(std::move(program)), summary_(std::move(summary)), operands_(std::move(operands)) {
    flag('h', "help", "print this help and exit", [this] {
        std::fputs(help().c_str(), stdout);
        std::exit(0);
    });
}

command_line& command_line::flag(char short_name, std::string long_name, std::string help,
                                 std::function<void()> set) {
    entries_.push_back({short_name,
                        std::move(long_name),
                        {},
                        std::move(help),
                        [set = std::move(set)](const char*) { set(); }});
    return *this;
}

command_line& command_line::flag(char short_name, std::string long_name, std::string help,
                                 bool& target) {
    return flag(short_name, std::move(long_name), std::move(help), [&target] { target = true; });
}

command_line& command_line::option(char short_name, std::string long_name, std::string value_name,
                                   std::string help, std::function<void(const char*)> set) {
    entries_.push_back(
        {short_name, std::move(long_name), std::move(value_name), std::move(help), std::move(set)});
    return *this;
}

command_line& command_line::option(char short_name, std::string long_name, std::string value_name,
                                   std::string help, std::string& target) {
    return option(short_name, std::move(long_name), std::move(value_name), std::move(help),
                  [&target](const char* v) { target = v; });
}

std::string command_line::usage() const {
    std::string text = "Usage: " + program_ + " [OPTION]...";
    if (!operands_.empty())
        text += " " + operands_;
    return text + "\n";
}

std::string command_line::help() const {
    std::string text = usage() + summary_ + "\n\nOptions:\n";
    for (const entry& e : entries_) {
        std::string left = e.short_name ? std::string("  -") + e.short_name + ", " : "      ";
        left += "--" + e.long_name;
        if (!e.value_name.empty())
            left += "=" + e.value_name;
        if (left.size() < 28)
            left.resize(28, ' ');
        else
            left += "\n" + std::string(28, ' ');
        text += left + e.help + "\n";
    }
    return text;
}

void command_line::usage_error(const std::string& message) const {
    std::fprintf(stderr, "%s: %s\n%sTry '%s --help' for more information.\n", program_.c_str(),
                 message.c_str(), usage().c_str(), program_.c_str());
    std::exit(2);
}

std::vector<std::string> command_line::parse(int argc, char** argv, std::size_t min_operands,
                                             std::size_t max_operands) {
    // ':' first: a missing value is reported as ':' rather than '?'.
    std::string short_options = ":";
    std::vector<::option> long_options;
    for (std::size_t i = 0; i < entries_.size(); ++i) {
        const entry& e = entries_[i];
        const int has_arg = e.value_name.empty() ? no_argument : required_argument;
        const int val = e.short_name ? e.short_name : long_only_base + static_cast<int>(i);
        long_options.push_back({e.long_name.c_str(), has_arg, nullptr, val});
        if (e.short_name) {
            short_options += e.short_name;
            if (has_arg == required_argument)
                short_options += ':';
        }
    }
    long_options.push_back({nullptr, 0, nullptr, 0});

    auto find = [&](int val) -> const entry* {
        for (std::size_t i = 0; i < entries_.size(); ++i)
            if (entries_[i].short_name ? entries_[i].short_name == val
                                       : long_only_base + static_cast<int>(i) == val)
                return &entries_[i];
        return nullptr;
    };
    auto spelled = [](const entry& e) {
        return e.short_name ? std::string("-") + e.short_name + "/--" + e.long_name
                            : "--" + e.long_name;
    };

    opterr = 0; // the messages below name the option and end with the usage
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, short_options.c_str(), long_options.data(),
                                 nullptr)) != -1;) {
        if (c == '?') {
            usage_error(optopt ? std::string("unknown option -") + static_cast<char>(optopt)
                               : std::string("unknown option ") + argv[optind - 1]);
        }
        if (c == ':') {
            const entry* e = find(optopt);
            usage_error("option " + (e ? spelled(*e) : std::string(argv[optind - 1])) +
                        " needs a value");
        }
        const entry* e = find(c);
        try {
            e->set(optarg);
        } catch (const bad_value& bad) {
            usage_error("invalid value '" + std::string(optarg ? optarg : "") + "' for " +
                        spelled(*e) + ": " + bad.what());
        }
    }
    std::vector<std::string> operands(argv + optind, argv + argc);
    if (operands.size() < min_operands)
        usage_error(operands_.empty() ? "missing operand" : "missing " + operands_);
    if (operands.size() > max_operands)
        usage_error("unexpected argument '" + operands[max_operands] + "'");
    return operands;
}

} // namespace sample
