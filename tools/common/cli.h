// What the tools' main()s share around CLI11: one-line usage errors and the
// checks on numeric options.
//
//   app.add_option("--timeout", seconds, "...")->check(dynamo::tools::Seconds());
//   try { app.parse(argc, argv); }
//   catch (const CLI::ParseError& e) { return dynamo::tools::ParseError(app, e, "dynamo-export"); }
#pragma once

#include <cmath>
#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"

namespace dynamo::tools {

// A usage error is one line, "<tool>: error: <what>", exit code 2 (as for
// any other bad input); --help prints as CLI11 prints it.
inline int ParseError(const CLI::App& app, const CLI::ParseError& e, const char* tool) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
  std::cerr << tool << ": error: " << e.what() << "\n";
  return 2;
}

// A positive, finite number of seconds (at most a week): "0", "-1", "nan" and
// "inf" are refused rather than read as "no limit".
inline CLI::Validator Seconds() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double v = 0;
        if (!absl::SimpleAtod(text, &v) || !std::isfinite(v) || v <= 0 || v > 7 * 24 * 3600) {
          return "expected a number of seconds above 0 (at most 604800), got '" + text + "'";
        }
        return "";
      },
      "SECONDS");
}

}  // namespace dynamo::tools
