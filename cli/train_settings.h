// The settings of a `backplane train` run: parsed from the command line,
// kept in the checkpoint, and taken from it when a run is resumed.
#pragma once

#include <backplane/safetensors.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace bp::cli {

// A number with 17 significant digits, which reads back exactly.
std::string exact(double v);

struct TrainSettings {
  std::string model = "cnn", optimizer = "adam", schedule = "cosine", dtype = "float32";
  int64_t epochs = 15, batch_size = 32;
  uint64_t seed = 0;
  double lr = 0;  // 0 until resolved: then the default for the model and optimiser
  double weight_decay = 0, test_fraction = 0.2;

  // The settings' flags (without "--"), in the order they are checked.
  static const std::vector<std::string>& flags();
  // Sets the setting of `flag` from its text: empty when done, else why not
  // ("--epochs 'x' is not a whole number").
  std::string set(const std::string& flag, const std::string& text);
  // The setting's text (numbers with 17 significant digits).
  std::string get(const std::string& flag) const;
  // "train.<flag>" (dashes as underscores) -> get(flag), for the checkpoint.
  safetensors::Metadata metadata() const;
};

// Defaults, then the checkpoint's settings (`saved`, its metadata, when
// resuming), then the `given` ones (flag -> text): a given one that differs
// from the checkpoint's is refused, since the run would not go on from where
// it stopped, except --epochs, which may extend the run. Returns why not, or
// empty when `out` is complete.
std::string resolve_settings(const std::map<std::string, std::string>& given,
                             const safetensors::Metadata* saved, const std::string& saved_path,
                             TrainSettings& out);

}  // namespace bp::cli
