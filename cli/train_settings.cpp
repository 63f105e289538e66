// The settings of `backplane train` (train_settings.h).
#include "train_settings.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace bp::cli {

namespace {

std::string key_of(const std::string& flag) {
  std::string k = "train." + flag;
  for (char& c : k)
    if (c == '-') c = '_';
  return k;
}

template <class T>
bool parse(const std::string& text, T& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

std::string choice(const std::string& flag, const std::string& text, std::string& out,
                   std::initializer_list<const char*> choices) {
  std::string list;
  for (const char* c : choices) {
    if (text == c) {
      out = text;
      return {};
    }
    if (!list.empty()) list += ", ";
    list += c;
  }
  return "--" + flag + " '" + text + "': one of " + list;
}

}  // namespace

std::string exact(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

const std::vector<std::string>& TrainSettings::flags() {
  static const std::vector<std::string> f = {
      "model",      "optimizer", "dtype",    "seed", "test-fraction",
      "batch-size", "epochs",    "schedule", "lr",   "weight-decay"};
  return f;
}

std::string TrainSettings::set(const std::string& flag, const std::string& text) {
  if (flag == "model") return choice(flag, text, model, {"cnn", "mlp"});
  if (flag == "optimizer") return choice(flag, text, optimizer, {"adam", "adamw", "sgd"});
  if (flag == "schedule") return choice(flag, text, schedule, {"cosine", "none"});
  if (flag == "dtype") return choice(flag, text, dtype, {"float32", "float64"});
  const std::string what = "--" + flag + " '" + text + "'";
  if (flag == "epochs" || flag == "batch-size") {
    int64_t v = 0;
    if (!parse(text, v) || v < 1) return what + ": a whole number, at least 1";
    (flag == "epochs" ? epochs : batch_size) = v;
    return {};
  }
  if (flag == "seed") return parse(text, seed) ? "" : what + ": a whole number from 0 to 2^64-1";
  double v = 0;
  if (!parse(text, v)) return what + " is not a number";
  if (!std::isfinite(v)) return what + ": not a finite number";
  if (flag == "lr") {
    if (!(v > 0 && v <= 1000)) return what + ": the learning rate must be positive, at most 1000";
    lr = v;
  } else if (flag == "weight-decay") {
    if (!(v >= 0)) return what + ": must not be negative";
    weight_decay = v;
  } else if (flag == "test-fraction") {
    if (!(v > 0 && v < 1)) return what + ": the share held out, between 0 and 1 (exclusive)";
    test_fraction = v;
  } else {
    return "--" + flag + " is not a setting";
  }
  return {};
}

std::string TrainSettings::get(const std::string& flag) const {
  if (flag == "model") return model;
  if (flag == "optimizer") return optimizer;
  if (flag == "schedule") return schedule;
  if (flag == "dtype") return dtype;
  if (flag == "epochs") return std::to_string(epochs);
  if (flag == "batch-size") return std::to_string(batch_size);
  if (flag == "seed") return std::to_string(seed);
  if (flag == "lr") return exact(lr);
  if (flag == "weight-decay") return exact(weight_decay);
  return exact(test_fraction);
}

safetensors::Metadata TrainSettings::metadata() const {
  safetensors::Metadata m;
  for (const std::string& f : flags()) m[key_of(f)] = get(f);
  return m;
}

std::string resolve_settings(const std::map<std::string, std::string>& given,
                             const safetensors::Metadata* saved, const std::string& saved_path,
                             TrainSettings& out) {
  out = TrainSettings{};
  for (const std::string& flag : TrainSettings::flags()) {
    if (!saved) continue;
    const auto it = saved->find(key_of(flag));
    if (it == saved->end())
      return "--resume: '" + saved_path + "' has no '" + key_of(flag) +
             "'; it was not written by backplane train";
    if (std::string why = out.set(flag, it->second); !why.empty())
      return "--resume: '" + saved_path + "' has a bad '" + key_of(flag) + "': " + why;
  }
  for (const std::string& flag : TrainSettings::flags()) {
    const auto it = given.find(flag);
    if (it == given.end()) continue;
    TrainSettings probe = out;
    if (std::string why = probe.set(flag, it->second); !why.empty()) return why;
    // --epochs may grow a resumed run (the run checks it against the
    // checkpoint's epoch); any other setting must be the checkpoint's.
    if (saved && flag != "epochs" && probe.get(flag) != out.get(flag))
      return "--resume: '" + saved_path + "' was trained with --" + flag + " " + out.get(flag) +
             ", not " + it->second + "; leave --" + flag + " out to go on with the checkpoint's";
    out = probe;
  }
  if (out.lr == 0) out.lr = out.optimizer == "sgd" ? 0.05 : out.model == "mlp" ? 1e-2 : 1e-3;
  return {};
}

}  // namespace bp::cli
