// Checkpoints (backplane/nn/checkpoint.h): a module's state_dict and an
// optimiser's state in one safetensors file.
#include <backplane/error.h>
#include <backplane/nn/checkpoint.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string_view>
#include <vector>

namespace bp::nn {

namespace {

constexpr std::string_view kModel = "model.";
constexpr std::string_view kState = "optimizer.state.";
constexpr std::string_view kGroups = "optimizer.param_groups";

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::string number_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw ValueError("[checkpoint] '" + path + "': " + what);
}

double parse_number(const std::string& path, const std::string& key, const std::string& text) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    bad(path, "metadata '" + key + "' is '" + text + "', not a number");
  if (!std::isfinite(v)) bad(path, "metadata '" + key + "' is '" + text + "', not a finite number");
  return v;
}

// The ranges an optimiser's numbers can take: a learning rate is not
// negative (a schedule may end at 0), a step count a whole number from 0 to
// 2^53.
void check_option(const std::string& path, const std::string& key, const std::string& name,
                  double v, const std::string& text) {
  if (name == "lr" && !(v >= 0))
    bad(path, "metadata '" + key + "' is '" + text + "'; a learning rate is not negative");
  if (name == "step" && !(v >= 0 && v <= 9007199254740992.0 && v == std::floor(v)))
    bad(path, "metadata '" + key + "' is '" + text + "'; a step count is a whole number from 0");
}

int64_t parse_index(const std::string& path, const std::string& key, std::string_view text) {
  int64_t v = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0)
    bad(path, "'" + key + "': '" + std::string(text) + "' is not an index");
  return v;
}

// "<i>.<name>" after a prefix: the index and the name.
std::pair<int64_t, std::string> index_and_name(const std::string& path, const std::string& key,
                                               std::string_view rest) {
  const auto dot = rest.find('.');
  if (dot == std::string_view::npos || dot + 1 == rest.size())
    bad(path, "'" + key + "' has no <index>.<name>");
  return {parse_index(path, key, rest.substr(0, dot)), std::string(rest.substr(dot + 1))};
}

}  // namespace

void save_checkpoint(const std::string& path, const Module& model,
                     const optim::Optimizer* optimizer, const safetensors::Metadata& metadata) {
  safetensors::Metadata meta;
  for (const auto& [key, value] : metadata) {
    BP_CHECK(key != "optimizer" && !starts_with(key, "optimizer."),
             "[save_checkpoint] metadata key '", key,
             "' is kept for the optimiser's state; use another name");
    meta[key] = value;
  }
  NamedTensors tensors;
  for (const auto& [name, t] : model.state_dict()) tensors.insert(std::string(kModel) + name, t);
  if (optimizer) {
    const optim::OptimizerState state = optimizer->state_dict();
    meta["optimizer"] = optimizer->name();
    meta[std::string(kGroups)] = std::to_string(state.param_groups.size());
    for (std::size_t g = 0; g < state.param_groups.size(); ++g) {
      const std::string prefix = std::string(kGroups) + "." + std::to_string(g) + ".";
      for (const auto& [option, value] : state.param_groups[g].options)
        meta[prefix + option] = number_text(value);
      std::string params;
      for (int64_t i : state.param_groups[g].params) {
        if (!params.empty()) params += ',';
        params += std::to_string(i);
      }
      meta[prefix + "params"] = params;
    }
    for (const auto& [index, ps] : state.state) {
      const std::string prefix = std::string(kState) + std::to_string(index) + ".";
      for (const auto& [name, t] : ps.tensors) tensors.insert(prefix + name, t);
      for (const auto& [name, v] : ps.numbers) meta[prefix + name] = number_text(v);
    }
  }
  safetensors::save_file(tensors, path, meta);
}

Checkpoint read_checkpoint(const std::string& path, std::optional<Device> device,
                           safetensors::Checksums checksums) {
  // One mapping of the file for both, so a checkpoint renamed into place
  // meanwhile cannot mix two files.
  safetensors::Header header;
  NamedTensors tensors = safetensors::load_file(path, device, checksums, &header);
  Checkpoint out;
  optim::OptimizerState state;
  std::map<int64_t, std::map<std::string, std::string>> groups;  // g -> option -> text
  bool has_optimizer = false;
  for (const auto& [key, value] : header.metadata) {
    if (key == "optimizer") {
      out.optimizer_name = value;
      has_optimizer = true;
    } else if (key == kGroups) {
      // the count, checked below
    } else if (starts_with(key, std::string(kGroups) + ".")) {
      auto [g, option] =
          index_and_name(path, key, std::string_view(key).substr(kGroups.size() + 1));
      groups[g][option] = value;
    } else if (starts_with(key, kState)) {
      auto [i, name] = index_and_name(path, key, std::string_view(key).substr(kState.size()));
      const double v = parse_number(path, key, value);
      check_option(path, key, name, v, value);
      state.state[i].numbers[name] = v;
    } else if (starts_with(key, "optimizer.")) {
      bad(path, "unknown optimiser entry '" + key + "'");
    } else {
      out.metadata[key] = value;
    }
  }
  for (const auto& [name, t] : tensors) {
    if (starts_with(name, kModel)) {
      out.model.insert(name.substr(kModel.size()), t);
    } else if (starts_with(name, kState)) {
      auto [i, key] = index_and_name(path, name, std::string_view(name).substr(kState.size()));
      state.state[i].tensors[key] = t;
    } else {
      bad(path, "tensor '" + name + "' is neither 'model.*' nor 'optimizer.state.*'");
    }
  }
  if (!has_optimizer) {
    if (!state.state.empty() || !groups.empty() || header.metadata.count(std::string(kGroups)))
      bad(path, "optimiser entries without the 'optimizer' name");
    return out;
  }
  const auto count_it = header.metadata.find(std::string(kGroups));
  if (count_it == header.metadata.end())
    bad(path, "'optimizer' is given without 'optimizer.param_groups'");
  const int64_t count = parse_index(path, std::string(kGroups), count_it->second);
  if (static_cast<int64_t>(groups.size()) != count ||
      (count > 0 && groups.rbegin()->first != count - 1))
    bad(path, "'optimizer.param_groups' is " + std::to_string(count) + " but groups " +
                  (groups.empty() ? std::string("none")
                                  : "0.." + std::to_string(groups.rbegin()->first)) +
                  " are described");
  for (auto& [g, options] : groups) {
    optim::OptimizerState::Group group;
    const std::string prefix = std::string(kGroups) + "." + std::to_string(g) + ".";
    auto params = options.find("params");
    if (params == options.end()) bad(path, "'" + prefix + "params' is missing");
    std::string_view list = params->second;
    while (!list.empty()) {
      const auto comma = list.find(',');
      group.params.push_back(parse_index(path, prefix + "params", list.substr(0, comma)));
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    }
    options.erase(params);
    for (const auto& [option, text] : options) {
      const double v = parse_number(path, prefix + option, text);
      check_option(path, prefix + option, option, v, text);
      group.options[option] = v;
    }
    state.param_groups.push_back(std::move(group));
  }
  out.optimizer = std::move(state);
  return out;
}

safetensors::Metadata load_checkpoint(const std::string& path, Module& model,
                                      optim::Optimizer* optimizer,
                                      safetensors::Checksums checksums) {
  Checkpoint c = read_checkpoint(path, std::nullopt, checksums);
  if (optimizer) {
    if (!c.optimizer) bad(path, "it holds no optimiser state (it was saved without an optimiser)");
    if (c.optimizer_name != optimizer->name())
      bad(path, "it holds the state of " + c.optimizer_name + ", not of " + optimizer->name());
    // The optimiser checks before it changes; the module likewise. The
    // optimiser goes first and is put back when the module refuses.
    const optim::OptimizerState before = optimizer->state_dict();
    optimizer->load_state_dict(*c.optimizer);
    try {
      model.load_state_dict(c.model, true);
    } catch (...) {
      optimizer->load_state_dict(before);
      throw;
    }
  } else {
    model.load_state_dict(c.model, true);
  }
  return c.metadata;
}

}  // namespace bp::nn
