// The only exception the host code of the core throws; the bindings turn it into a Python
// RuntimeError. Host-only (not included by device code).
#pragma once
#include <stdexcept>
#include <string>

namespace sinkops {

struct Error : std::runtime_error {
  explicit Error(const std::string& what) : std::runtime_error("sinkops: " + what) {}
};

}  // namespace sinkops
