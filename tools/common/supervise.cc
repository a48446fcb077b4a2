#include "tools/common/supervise.h"

#include <Python.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace dynamo::tools {
namespace {

// The result travels as one framed message; a child cut short sends an
// incomplete one, which the parent can tell from a result.
constexpr absl::string_view kMagic = "DYNAMO-RESULT-1\n";
constexpr absl::string_view kEnd = "\nEND\n";

void PutString(std::string& out, absl::string_view s) {
  uint64_t n = s.size();
  out.append(reinterpret_cast<const char*>(&n), sizeof(n));
  out.append(s.data(), s.size());
}

void PutNumber(std::string& out, uint64_t n) { out.append(reinterpret_cast<const char*>(&n), sizeof(n)); }

std::string Encode(const absl::StatusOr<std::vector<std::string>>& result) {
  std::string out(kMagic);
  const absl::Status& status = result.status();
  PutNumber(out, static_cast<uint64_t>(status.code()));
  PutString(out, status.message());
  std::vector<std::pair<std::string, std::string>> payloads;
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& value) {
    payloads.emplace_back(std::string(url), std::string(value));
  });
  PutNumber(out, payloads.size());
  for (const auto& [url, value] : payloads) {
    PutString(out, url);
    PutString(out, value);
  }
  PutNumber(out, result.ok() ? result->size() : 0);
  if (result.ok()) {
    for (const std::string& s : *result) PutString(out, s);
  }
  out.append(kEnd.data(), kEnd.size());
  return out;
}

class Reader {
 public:
  explicit Reader(absl::string_view data) : data_(data) {}
  bool Number(uint64_t& n) {
    if (data_.size() - pos_ < sizeof(n)) return false;
    std::memcpy(&n, data_.data() + pos_, sizeof(n));
    pos_ += sizeof(n);
    return true;
  }
  bool String(std::string& s) {
    uint64_t n = 0;
    if (!Number(n) || data_.size() - pos_ < n) return false;
    s.assign(data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool Literal(absl::string_view text) {
    if (data_.substr(pos_, text.size()) != text) return false;
    pos_ += text.size();
    return true;
  }
  bool AtEnd() const { return pos_ == data_.size(); }

 private:
  absl::string_view data_;
  size_t pos_ = 0;
};

// The child's result, or nullopt when the message is not complete.
std::optional<absl::StatusOr<std::vector<std::string>>> Decode(absl::string_view data) {
  Reader r(data);
  uint64_t code = 0, payloads = 0, outputs = 0;
  std::string message;
  if (!r.Literal(kMagic) || !r.Number(code) || !r.String(message) || !r.Number(payloads)) {
    return std::nullopt;
  }
  absl::Status status(static_cast<absl::StatusCode>(code), message);
  for (uint64_t i = 0; i < payloads; ++i) {
    std::string url, value;
    if (!r.String(url) || !r.String(value)) return std::nullopt;
    if (!status.ok()) status.SetPayload(url, absl::Cord(value));
  }
  std::vector<std::string> out;
  if (!r.Number(outputs)) return std::nullopt;
  for (uint64_t i = 0; i < outputs; ++i) {
    std::string s;
    if (!r.String(s)) return std::nullopt;
    out.push_back(std::move(s));
  }
  if (!r.Literal(kEnd) || !r.AtEnd()) return std::nullopt;
  if (!status.ok()) return absl::StatusOr<std::vector<std::string>>(status);
  return absl::StatusOr<std::vector<std::string>>(std::move(out));
}

void WriteAll(int fd, absl::string_view data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent is gone; nobody to tell
    done += static_cast<size_t>(n);
  }
}

// What the script printed is still in Python's own buffers: the child ends
// with _exit (no interpreter finalisation), so flush them first.
void FlushPython() {
  if (!Py_IsInitialized()) return;
  PyGILState_STATE gil = PyGILState_Ensure();
  PyRun_SimpleString(
      "import sys\n"
      "for _s in (sys.stdout, sys.stderr):\n"
      "    try:\n"
      "        _s.flush()\n"
      "    except Exception:\n"
      "        pass\n");
  PyGILState_Release(gil);
}

[[noreturn]] void RunChild(int fd, const ChildWork& work) {
  absl::StatusOr<std::vector<std::string>> result = [&]() -> absl::StatusOr<std::vector<std::string>> {
    try {
      return work();
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("internal error: ", e.what()));
    }
  }();
  FlushPython();
  std::fflush(nullptr);
  WriteAll(fd, Encode(result));
  close(fd);
  _exit(0);
}

std::string HowItEnded(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return absl::StrCat("the process was killed by signal ", sig, name ? absl::StrCat(" (", name, ")") : "");
  }
  if (WIFEXITED(status)) {
    return absl::StrCat("the process exited with status ", WEXITSTATUS(status),
                        " (the script called os._exit() or sys.exit(), or ended the interpreter)");
  }
  return absl::StrCat("the process ended (wait status ", status, ")");
}

}  // namespace

absl::StatusOr<std::vector<std::string>> RunSupervised(const ChildWork& work,
                                                       const SuperviseOptions& options) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("cannot make a pipe: ", std::strerror(errno)));
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError(absl::StrCat("cannot fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    close(fds[0]);
    RunChild(fds[1], work);
  }
  close(fds[1]);
  fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);

  using Clock = std::chrono::steady_clock;
  const bool limited = options.timeout_seconds > 0;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(limited ? options.timeout_seconds : 0));
  std::string data;
  int status = 0;
  bool reaped = false, eof = false;
  char buffer[1 << 16];
  auto drain = [&] {
    while (true) {
      ssize_t n = read(fds[0], buffer, sizeof(buffer));
      if (n > 0) {
        data.append(buffer, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) eof = true;
      if (n < 0 && errno == EINTR) continue;
      return;
    }
  };
  // Until the result is in and the child has ended. A process the script
  // started may hold the pipe open, so the child's end is watched too.
  while (!(eof && reaped)) {
    if (!reaped && waitpid(pid, &status, WNOHANG) == pid) reaped = true;
    if (!eof) {
      pollfd p{fds[0], POLLIN, 0};
      poll(&p, 1, 50);
      drain();
    }
    if (reaped && !eof) {
      drain();  // what the child wrote before it ended is all there will be
      eof = true;
    }
    if (eof && !reaped) {
      if (waitpid(pid, &status, WNOHANG) == pid) {
        reaped = true;
      } else {
        usleep(10000);
      }
    }
    if (limited && Clock::now() > deadline && !(eof && reaped)) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      close(fds[0]);
      return absl::DeadlineExceededError(absl::StrCat(options.what, " did not finish within ",
                                                      options.timeout_seconds,
                                                      " seconds (--timeout) and was stopped"));
    }
  }
  close(fds[0]);
  std::optional<absl::StatusOr<std::vector<std::string>>> result = Decode(data);
  if (!result) {
    return absl::AbortedError(absl::StrCat(options.what, " ended without a result: ", HowItEnded(status)));
  }
  return *std::move(result);
}

}  // namespace dynamo::tools
