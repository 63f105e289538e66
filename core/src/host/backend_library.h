// The shared library behind a Backend (Boost.DLL); not installed.
#pragma once

#include <backplane/backend.h>

#include <boost/dll/shared_library.hpp>

namespace bp {

struct Backend::Library {
  boost::dll::shared_library lib;
};

}  // namespace bp
