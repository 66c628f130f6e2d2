// The command line of every longhaul tool, on CLI11: one help layout (groups of options, each
// with its value's name, its meaning and its default, taken from the variable it sets), one way
// to refuse bad input (one line on stderr, exit status 2), and validators that word their
// complaints the same way in every tool.
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace longhaul::cli {

// Sets up `app` (made as CLI::App{description, name}) for a longhaul tool: the help layout, the
// footer printed after the options, the usage line ("" : "NAME [OPTIONS]"), and that an option
// given twice keeps its last value (a script appends an override to the defaults it passes).
void configure(CLI::App& app, const std::string& footer, const std::string& usage = "");

// Parses the command line. Returns the exit status when the program must stop now: 0 after
// printing --help on stdout, 2 after printing one line "NAME: what is wrong (see --help)" on
// stderr (an unknown option, a bad value, a missing one). nullopt: go on. -h/--help is added here,
// as the last option of the last group.
std::optional<int> parse(CLI::App& app, int argc, char** argv);

// The one line of a usage error found after parse() (flags that contradict each other); returns 2.
int usage_error(const CLI::App& app, const std::string& what);

// Transformers (use them with ->transform(), not ->check()): a decimal whole number in [min, max],
// digits only, no sign, no 0x prefix; a finite decimal number in [min, max] ("2.5", "1e3"). Each
// rewrites the text to its canonical decimal form, so CLI11's own conversion, which would read
// "010" as octal, gets the number the user meant.
CLI::Validator whole_number(uint64_t min, uint64_t max);
CLI::Validator real_number(double min, double max);
// Exactly one of `names`.
CLI::Validator one_of(const std::vector<std::string>& names);

// An option setting a whole number in [min, max] (value name N).
template <std::integral T>
CLI::Option* add_number(CLI::App& app, const std::string& flag, T& target, uint64_t min,
                        uint64_t max, const std::string& description) {
  return app.add_option(flag, target, description)
      ->type_name("N")
      ->transform(whole_number(min, max));
}
// An option setting any finite number in [min, max] (value name X).
template <std::floating_point T>
CLI::Option* add_number(CLI::App& app, const std::string& flag, T& target, double min, double max,
                        const std::string& description) {
  return app.add_option(flag, target, description)
      ->type_name("X")
      ->transform(real_number(min, max));
}

// An option whose value is one of a few names, each standing for a T (an enum, usually); the
// default shown is the name of target's value when it is added.
template <class T>
CLI::Option* add_choice(CLI::App& app, const std::string& flag, T& target,
                        std::vector<std::pair<std::string, T>> choices,
                        const std::string& description) {
  std::vector<std::string> names;
  std::string current;
  for (const auto& [name, value] : choices) {
    names.push_back(name);
    if (value == target) current = name;
  }
  auto store = [&target, choices](const std::string& text) {
    for (const auto& [name, value] : choices)
      if (name == text) target = value;
  };
  return app.add_option_function<std::string>(flag, store, description)
      ->check(one_of(names))
      ->default_str(current);
}

// An option with a format of its own: parse(text, &target) reads it, false when the text is not
// that format; `need` says what is expected ("a duration like 60, 90s or 2h"). The default shown
// is `shown`, written by the caller from target's value.
template <class T, class Parse>
CLI::Option* add_parsed(CLI::App& app, const std::string& flag, T& target, Parse parse,
                        const std::string& need, const std::string& description,
                        const std::string& shown = "") {
  auto check = [parse, need](std::string& text) -> std::string {
    T scratch{};
    return parse(text, &scratch) ? "" : "needs " + need + ", got '" + text + "'";
  };
  auto store = [&target, parse](const std::string& text) { parse(text, &target); };
  return app.add_option_function<std::string>(flag, store, description)
      ->check(CLI::Validator(check, ""))
      ->default_str(shown);
}

}  // namespace longhaul::cli
