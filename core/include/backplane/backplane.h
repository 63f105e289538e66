// Everything a program built on Backplane needs.
#pragma once

#include <backplane/autograd.h>
#include <backplane/backend.h>
#include <backplane/device.h>
#include <backplane/dispatcher.h>
#include <backplane/dlpack.h>
#include <backplane/dtype.h>
#include <backplane/error.h>
#include <backplane/fallback.h>
#include <backplane/named_ops.h>
#include <backplane/nn.h>
#include <backplane/nn_ops.h>
#include <backplane/ops.h>
#include <backplane/options.h>
#include <backplane/shape.h>
#include <backplane/sparse/coo.h>
#include <backplane/stream.h>
#include <backplane/tensor.h>

namespace bp {
// The core's version, "MAJOR.MINOR.PATCH".
const char* version();
}  // namespace bp
