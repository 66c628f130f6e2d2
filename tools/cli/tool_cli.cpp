#include "tool_cli.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "common/parse_number.hpp"

namespace longhaul::cli {
namespace {

constexpr size_t kLeftColumn = 30, kLineWidth = 100;
constexpr char kKeepTogether = '\x1f';  // a space that wrap() does not break at

// `text` with line breaks between words so that no line is longer than `width` (a longer word
// stays whole on its own line); the breaks already in it are kept.
std::string wrap(const std::string& text, size_t width) {
  std::string out, line, word;
  const auto flush_word = [&] {
    if (word.empty()) return;
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    word.clear();
  };
  for (char ch : text + "\n") {
    if (ch == ' ' || ch == '\n') flush_word();
    if (ch == '\n') {
      out += line + "\n";
      line.clear();
    } else if (ch != ' ') {
      word += ch;
    }
  }
  out.pop_back();  // the '\n' appended above
  return out;
}

// CLI11's layout, tightened: one blank line between groups, "--flag VALUE" in the left column and
// the meaning, wrapped to the line width, with "(default X)" or "(required)" in the right one.
class Formatter : public CLI::Formatter {
 public:
  explicit Formatter(std::string usage) : usage_(std::move(usage)) { column_width(kLeftColumn); }

  std::string make_group(std::string group, bool is_positional,
                         std::vector<const CLI::Option*> opts) const override {
    std::string out = group + ":\n";
    for (const CLI::Option* opt : opts) out += make_option(opt, is_positional);
    return out;
  }

  std::string make_usage(const CLI::App* app, std::string name) const override {
    if (!usage_.empty()) return "Usage: " + usage_ + "\n\n";
    return CLI::Formatter::make_usage(app, std::move(name)) + "\n";
  }

  std::string make_positionals(const CLI::App* app) const override {
    const std::string group = CLI::Formatter::make_positionals(app);
    return group.empty() ? group : group + "\n";
  }

  std::string make_option_opts(const CLI::Option* opt) const override {
    // A switch takes no value, and a positional's name says what it is.
    if (opt->get_type_size() == 0 || opt->get_positional()) return "";
    return " " + opt->get_type_name();
  }

  std::string make_option_desc(const CLI::Option* opt) const override {
    std::string note;
    if (opt->get_required())
      note = "(required)";
    else if (opt->get_type_size() != 0 && !opt->get_default_str().empty())
      note = "(default " + opt->get_default_str() + ")";
    // The note stays on one line: its spaces do not break until the text is wrapped.
    std::replace(note.begin(), note.end(), ' ', kKeepTogether);
    std::string text =
        wrap(opt->get_description() + (note.empty() ? "" : " " + note), kLineWidth - kLeftColumn);
    std::replace(text.begin(), text.end(), kKeepTogether, ' ');
    return text;
  }

 private:
  std::string usage_;
};

}  // namespace

void configure(CLI::App& app, const std::string& footer, const std::string& usage) {
  app.formatter(std::make_shared<Formatter>(usage));
  app.footer(footer);
  app.set_help_flag();  // added back by parse(), after every other option
  app.allow_extras();   // so parse() can name the first unknown option itself
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.option_defaults()->always_capture_default();
}

int usage_error(const CLI::App& app, const std::string& what) {
  std::string line = what;
  std::replace(line.begin(), line.end(), '\n', ' ');
  std::fprintf(stderr, "%s: %s (see --help)\n", app.get_name().c_str(), line.c_str());
  return 2;
}

std::optional<int> parse(CLI::App& app, int argc, char** argv) {
  const std::vector<std::string> groups = app.get_groups();
  app.set_help_flag("-h,--help", "show this text")
      ->group(groups.empty() ? "Options" : groups.back());
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    return usage_error(app, e.what());
  }
  if (const std::vector<std::string> extra = app.remaining(); !extra.empty()) {
    const std::string& first = extra.front();
    if (first.starts_with("-"))
      return usage_error(app, "unknown option '" + first.substr(0, first.find('=')) + "'");
    return usage_error(app, "unexpected argument '" + first + "'");
  }
  return std::nullopt;
}

CLI::Validator whole_number(uint64_t min, uint64_t max) {
  auto check = [min, max](std::string& text) -> std::string {
    uint64_t n = 0;
    if (!parse_u64(text, min, max, &n))
      return fmt::format("needs a whole number in {}..{}, got '{}'", min, max, text);
    text = std::to_string(n);
    return "";
  };
  return CLI::Validator(check, "");
}

CLI::Validator real_number(double min, double max) {
  auto check = [min, max](std::string& text) -> std::string {
    double x = 0;
    if (!parse_double(text, min, max, &x)) {
      if (min == -HUGE_VAL && max == HUGE_VAL)
        return fmt::format("needs a finite number, got '{}'", text);
      return fmt::format("needs a number in {}..{}, got '{}'", min, max, text);
    }
    text = fmt::format("{}", x);  // the shortest text that reads back as exactly x
    return "";
  };
  return CLI::Validator(check, "");
}

CLI::Validator one_of(const std::vector<std::string>& names) {
  auto check = [names](std::string& text) -> std::string {
    if (std::find(names.begin(), names.end(), text) != names.end()) return "";
    std::string list;
    for (size_t i = 0; i < names.size(); ++i)
      list += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
    return "must be " + list + ", got '" + text + "'";
  };
  return CLI::Validator(check, "");
}

}  // namespace longhaul::cli
