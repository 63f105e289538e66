// Every helper shared by the core's sources, by concern; a source may
// include only the pieces it needs. Not installed.
#pragma once

#include "abi_tensor.h"
#include "host/boundary.h"
#include "host/plugin_files.h"
#include "named_dispatch.h"
#include "printing.h"
#include "runtime.h"

#ifndef BACKPLANE_VERSION
#define BACKPLANE_VERSION "0.0.0"
#endif
