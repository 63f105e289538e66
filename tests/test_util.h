// Helpers shared by the unit tests.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>

namespace bp::testing {

// The message of the exception `f` throws, checked to be of type E.
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type, message: " << e.what();
    return {};
  }
  ADD_FAILURE() << "no exception thrown";
  return {};
}

}  // namespace bp::testing
