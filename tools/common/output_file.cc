#include "tools/common/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace dynamo::tools {
namespace {

namespace fs = std::filesystem;

const char* KindOf(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// The file really is there, as written: what a caller's exit code 0 promises.
absl::Status CheckWritten(const std::string& path, size_t size) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) != size) {
    return absl::DataLossError(absl::StrCat("writing '", path, "': the file is not there as written"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckWritableDirectory(const std::string& output) {
  fs::path dir = fs::path(output).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("cannot write '", output, "': directory '",
                                            dir.string(), "' does not exist"));
  }
  if (access(dir.c_str(), W_OK) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write '", output, "': ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status CheckOutputPath(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::PermissionDeniedError(absl::StrCat("cannot write '", path, "': ", std::strerror(errno)));
  }
  if (S_ISREG(st.st_mode)) return absl::OkStatus();
  if (S_ISLNK(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot write '", path, "': it is a symbolic link (name the file it points to instead)"));
  }
  if (S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write '", path, "': it is a directory"));
  }
  return absl::InvalidArgumentError(absl::StrCat("cannot write '", path, "': it is ", KindOf(st.st_mode),
                                                 ", not a regular file"));
}

absl::Status WriteAtomically(const std::string& path, const std::string& data) {
  if (absl::Status s = CheckOutputPath(path); !s.ok()) return s;
  // A fresh, unguessable name beside the output (O_EXCL: never an existing
  // file or a link planted under a predictable name).
  fs::path target(path);
  std::string temp = (target.parent_path() / absl::StrCat(".", target.filename().string(), ".XXXXXX")).string();
  int fd = mkstemp(temp.data());
  if (fd < 0) return absl::PermissionDeniedError(absl::StrCat("cannot write '", path, "': ", std::strerror(errno)));
  mode_t mask = umask(0);
  umask(mask);
  auto fail = [&](absl::string_view what) {
    std::string error = std::strerror(errno);
    close(fd);
    unlink(temp.c_str());
    return absl::DataLossError(absl::StrCat(what, " '", path, "': ", error));
  };
  if (fchmod(fd, 0666 & ~mask) != 0) return fail("writing");
  size_t written = 0;
  while (written < data.size()) {
    ssize_t n = write(fd, data.data() + written, data.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("writing");
    }
    written += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) return fail("writing");
  if (close(fd) != 0) {
    fd = -1;
    std::string error = std::strerror(errno);
    unlink(temp.c_str());
    return absl::DataLossError(absl::StrCat("writing '", path, "': ", error));
  }
  // Checked again just before the rename, which would replace whatever is
  // there by then.
  if (absl::Status s = CheckOutputPath(path); !s.ok()) {
    unlink(temp.c_str());
    return s;
  }
  if (rename(temp.c_str(), path.c_str()) != 0) {
    std::string error = std::strerror(errno);
    unlink(temp.c_str());
    return absl::DataLossError(absl::StrCat("writing '", path, "': ", error));
  }
  return CheckWritten(path, data.size());
}

}  // namespace dynamo::tools
