// Typed errors raised at kiln's API edge. Messages name the argument, what was expected and what
// was given. Python maps them to kiln.ShapeError (ValueError), kiln.DTypeError (TypeError), ...
#pragma once

#include <stdexcept>
#include <string>

namespace kiln {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class ShapeError : public Error {
 public:
  using Error::Error;
};
class DTypeError : public Error {
 public:
  using Error::Error;
};
class CompileError : public Error {
 public:
  using Error::Error;
};
class DeviceError : public Error {
 public:
  using Error::Error;
};

}  // namespace kiln
