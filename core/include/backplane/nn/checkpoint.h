// Training checkpoints: a module's state_dict and an optimiser's state in one
// safetensors file, so a run can stop and go on exactly where it was.
//
// The file is a plain safetensors file (Python's safetensors reads it):
//   tensors   "model.<name>"                 the module's state_dict
//             "optimizer.state.<i>.<name>"   the optimiser's state tensors
//                                            (i numbers parameters over groups)
//   metadata  "optimizer"                    the optimiser's name ("Adam")
//             "optimizer.param_groups"       the number of groups
//             "optimizer.param_groups.<g>.<option>"  each option ("0.001")
//             "optimizer.param_groups.<g>.params"    "0,1,2"
//             "optimizer.state.<i>.<name>"   the numbers of the state ("step")
//   and the caller's own metadata under any other key.
//
// Numbers are written with 17 significant digits, so they read back exactly.
#pragma once

#include <backplane/nn/module.h>
#include <backplane/optim/optimizer.h>
#include <backplane/safetensors.h>

#include <optional>
#include <string>

namespace bp::nn {

struct Checkpoint {
  NamedTensors model;                              // a state_dict
  std::optional<optim::OptimizerState> optimizer;  // absent when none was saved
  std::string optimizer_name;                      // "SGD", "Adam", "AdamW"
  safetensors::Metadata metadata;                  // the caller's own entries
};

// Writes atomically (as safetensors::save_file). The caller's metadata may not
// use the keys "optimizer" or "optimizer.*" (a ValueError names the key).
void save_checkpoint(const std::string& path, const Module& model,
                     const optim::Optimizer* optimizer = nullptr,
                     const safetensors::Metadata& metadata = {});

// Reads a checkpoint onto `device` (the default device when not given),
// its CRC32C sums verified (safetensors.h; `checksums` Optional accepts a
// file without them). A file whose optimiser entries are malformed or out
// of range (a number that is not finite, a negative "lr", a
// "step" that is not a whole number from 0) is a ValueError naming the
// entry and its value.
Checkpoint read_checkpoint(const std::string& path, std::optional<Device> device = std::nullopt,
                           safetensors::Checksums checksums = safetensors::Checksums::Required);

// Reads `path` into `model` and, when given, `optimizer`, and returns the
// caller's metadata. Everything is checked before anything changes: a
// state_dict that does not fit the module (strictly), an optimiser of
// another kind, or optimiser state that does not fit leaves both as they
// were. A file saved without optimiser state is refused when `optimizer` is
// given.
safetensors::Metadata load_checkpoint(
    const std::string& path, Module& model, optim::Optimizer* optimizer = nullptr,
    safetensors::Checksums checksums = safetensors::Checksums::Required);

}  // namespace bp::nn
