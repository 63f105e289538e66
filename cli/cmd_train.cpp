// `backplane train`: trains a small MLP or CNN on the 8x8 handwritten digits
// on the backend given, with a held-out split, a progress bar, metrics as
// CSV, a checkpoint as safetensors and --resume (docs/training.md).
#include <backplane/backplane.h>
#include <backplane/distributed.h>
#include <backplane/nn/checkpoint.h>
#include <backplane/nn/parallel.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "commands.h"
#include "device_loading.h"
#include "train_data.h"
#include "train_settings.h"

namespace bp::cli {

namespace {

using Clock = std::chrono::steady_clock;

std::shared_ptr<nn::Module> make_model(const std::string& kind) {
  if (kind == "mlp")
    return std::make_shared<nn::Sequential>(nn::Flatten(), nn::Linear(64, 128), nn::ReLU(true),
                                            nn::Linear(128, 10));
  // Two 3x3 convolutions with batch norm and 2x2 max pooling: 8x8 -> 4x4 -> 2x2.
  return std::make_shared<nn::Sequential>(
      nn::Conv2d(1, 32, 3, {.padding = 1}), nn::BatchNorm2d(32), nn::ReLU(true), nn::MaxPool2d(2),
      nn::Conv2d(32, 64, 3, {.padding = 1}), nn::BatchNorm2d(64), nn::ReLU(true), nn::MaxPool2d(2),
      nn::Flatten(), nn::Linear(256, 10));
}

std::string fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Why a file could not be written at `path` (a folder, a missing or
// read-only folder), or empty: a file is made beside it and removed.
std::string unwritable(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return "it exists and is not a regular file";
  std::string probe = path + ".XXXXXX";
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) return std::string("no file can be made beside it: ") + std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return {};
}

// The CSV of --metrics, appended to one whole row at a time (a single
// write() of the line, then fsync), so a run killed at any moment leaves
// whole rows only.
class MetricsFile {
 public:
  // Replaces the file with `kept` (a temporary file renamed over it, so the
  // kept rows survive a kill), then opens it for appending.
  bool open(const std::string& path, const std::string& kept) {
    std::string tmp = path + ".XXXXXX";
    const int t = ::mkstemp(tmp.data());
    if (t < 0) return false;
    const bool ok = write_all(t, kept) && ::fchmod(t, 0644) == 0 && ::fsync(t) == 0;
    ::close(t);
    if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
      ::unlink(tmp.c_str());
      return false;
    }
    fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    return fd_ >= 0;
  }
  bool is_open() const { return fd_ >= 0; }
  bool append(const std::string& line) { return write_all(fd_, line) && ::fsync(fd_) == 0; }
  ~MetricsFile() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  static bool write_all(int fd, const std::string& text) {
    std::size_t done = 0;
    while (done < text.size()) {
      const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      done += static_cast<std::size_t>(w);
    }
    return true;
  }
  int fd_ = -1;
};

// The first non-finite value of a floating tensor, if any.
std::optional<double> non_finite(const Tensor& t) {
  if (!is_floating(t.dtype()) || t.numel() == 0) return std::nullopt;
  for (double v : t.detach().to(DType::Float64).contiguous().to_vector<double>())
    if (!std::isfinite(v)) return v;
  return std::nullopt;
}

// What a pass over a split gives.
struct Pass {
  double loss = 0, accuracy = 0, seconds = 0;
  int64_t correct = 0, samples = 0;
};

class TrainCommand : public Command {
 public:
  const char* name() const override { return "train"; }
  const char* summary() const override {
    return "Train a small MLP or CNN on the 8x8 digits on a backend";
  }
  const char* details() const override {
    return "Trains on the 1797 8x8 handwritten digits that Debian's python3-sklearn ships\n"
           "(apt-get install python3-sklearn; or --data FILE), holding out --test-fraction of\n"
           "them (a fixed split by --seed), and reports the held-out accuracy after each\n"
           "epoch. Everything runs on the --backend device: the data set is copied there\n"
           "once, batches are gathered there, and the same seed gives the same weights and\n"
           "batches on every backend.\n\n"
           "Models:\n"
           "  mlp  Flatten, Linear(64, 128), ReLU, Linear(128, 10)\n"
           "  cnn  Conv2d(1, 32, 3, padding 1), BatchNorm2d, ReLU, MaxPool2d(2),\n"
           "       Conv2d(32, 64, 3, padding 1), BatchNorm2d, ReLU, MaxPool2d(2),\n"
           "       Flatten, Linear(256, 10)\n"
           "The loss is cross-entropy; the optimiser steps once per batch and the schedule\n"
           "once per epoch. The lr defaults to 1e-3 (cnn) or 1e-2 (mlp) for adam and adamw,\n"
           "and to 0.05 for sgd (with momentum 0.9).\n\n"
           "On a terminal a progress bar shows the epoch, the step, the loss and the\n"
           "throughput; each epoch ends with one line. --metrics writes a CSV row per epoch:\n"
           "  "
           "epoch,train_loss,train_accuracy,test_loss,test_accuracy,lr,seconds,samples_per_second\n"
           "--checkpoint writes the model, the optimiser's state and the run's settings as a\n"
           "safetensors file with CRC32C sums after every epoch (written to a temporary file,\n"
           "fsync'ed and renamed, so a killed run keeps the last whole one; a --checkpoint\n"
           "that cannot be written is refused before training). --resume FILE goes on from\n"
           "such a file to --epochs, with its settings (giving a different one is an error;\n"
           "a larger --epochs extends the run, the cosine schedule then spanning the new\n"
           "count), and ends where the uninterrupted run would have, bit for bit on the same\n"
           "backend; --metrics rows are then appended, whole lines only. The checkpoint's\n"
           "sums are verified and its values checked (the epoch, the step counts, the batch\n"
           "size, finite positive learning rates); NaN or infinite weights or optimiser\n"
           "state are refused unless --accept-nonfinite.\n\n"
           "Exit codes: 0 trained (and --min-accuracy reached); 1 the final accuracy is below\n"
           "--min-accuracy; 2 bad options, data or checkpoint; 3 the backend has no device.\n\n"
           "--distributed trains data-parallel on the ranks `backplane launch` starts (env://,\n"
           "Gloo): every rank holds the model (DistributedDataParallel: rank 0's weights,\n"
           "gradients averaged), each epoch's samples are dealt out to the ranks in turn\n"
           "(padded to a multiple of the ranks, as PyTorch's DistributedSampler does), and\n"
           "--batch-size is per rank. The losses and accuracies are over all ranks; rank 0\n"
           "alone prints, writes --metrics and --checkpoint.\n\n"
           "Examples:\n"
           "  backplane train --backend cpu_onednn --model cnn --epochs 15\n"
           "  backplane train --backend opencl --model mlp --epochs 20 --metrics mlp.csv\n"
           "  backplane train --epochs 15 --stop-after 5 --checkpoint run.safetensors\n"
           "  backplane train --resume run.safetensors --checkpoint run.safetensors\n"
           "  backplane train --data ~/digits.csv.gz --min-accuracy 0.97\n"
           "  backplane launch --nproc 2 -- backplane train --distributed --model mlp\n";
  }

  po::options_description options() override {
    po::options_description own("Options");
    own.add_options()("model", setting("model"), "cnn (default) | mlp")(
        "epochs", setting("epochs"), "epochs to train, in all (default 15)")(
        "batch-size", setting("batch-size"), "samples per step (default 32)")(
        "optimizer", setting("optimizer"), "adam (default) | adamw | sgd")(
        "lr", setting("lr"),
        "learning rate (default: adam and adamw 1e-3 for the cnn, 1e-2 for the mlp; sgd 0.05)")(
        "weight-decay", setting("weight-decay"), "the optimiser's weight_decay (default 0)")(
        "schedule", setting("schedule"),
        "cosine (CosineAnnealingLR over --epochs; default) | none")("dtype", setting("dtype"),
                                                                    "float32 (default) | float64")(
        "seed", setting("seed"), "seeds the split, the weights and the batches (default 0)")(
        "test-fraction", setting("test-fraction"),
        "share of the data held out for testing (default 0.2)")(
        "data", po::value(&data_)->default_value(kDigitsPath),
        "the digits CSV (gzip-compressed or not)")("metrics", po::value(&metrics_),
                                                   "write a CSV row per epoch to this file")(
        "checkpoint", po::value(&checkpoint_),
        "save model and optimiser to this safetensors file each epoch")(
        "resume", po::value(&resume_), "go on from a checkpoint written by --checkpoint")(
        "accept-nonfinite", po::bool_switch(&accept_nonfinite_),
        "--resume: accept NaN or infinite weights or optimiser state (refused by default)")(
        "stop-after", po::value<int64_t>()->notifier([this](int64_t v) { stop_after_ = v; }),
        "stop after this epoch (of --epochs), to go on later with --resume")(
        "min-accuracy", po::value<double>()->notifier([this](double v) { min_accuracy_ = v; }),
        "exit 1 when the final held-out accuracy is below (0..1)")(
        "distributed", po::bool_switch(&distributed_),
        "data-parallel over the ranks of `backplane launch` (see below)")(
        "progress", po::value(&progress_)->default_value("auto"),
        "auto (a bar on a terminal) | bar | lines (one per epoch)");
    return own;
  }

  int run(const BackendFlags& flags) override {
    if (int code = check_options(); code != kExitOk) return code;
    if (distributed_) {
      try {
        distributed::init_process_group();
      } catch (const Error& e) {
        return usage_error_of("train", std::string("--distributed: ") + e.what());
      }
      rank_ = distributed::get_rank();
      world_ = distributed::get_world_size();
      // Rank 0 speaks for all; the others print errors only.
      if (rank_ != 0) std::cout.setstate(std::ios::failbit);
    }
    Backend* backend = nullptr;
    Device device;
    if (int code = load_device_or_say(flags.backend, "train", "backend", backend, device);
        code != kExitOk)
      return code;
    const DType dtype = s_.dtype == "float64" ? DType::Float64 : DType::Float32;

    Dataset all, train, test;
    try {
      all = read_digits(data_);
    } catch (const Error& e) {
      return usage_error_of("train", e.what());
    }
    split(all, s_.test_fraction, s_.seed, train, test);
    if (train.size() == 0 || test.size() == 0)
      return usage_error_of("train", "--test-fraction " + exact(s_.test_fraction) + " leaves " +
                                         std::to_string(train.size()) +
                                         " samples to train on and " + std::to_string(test.size()) +
                                         " to test on; both need some");
    const auto on_device = [&](const Dataset& d, Tensor& x, Tensor& y) {
      x = from_blob(d.pixels.data(), DType::Float32, {d.size(), 1, 8, 8}, device).to(dtype);
      y = from_blob(d.labels.data(), DType::Int64, {d.size()}, device);
    };
    Tensor train_x, train_y, test_x, test_y;
    on_device(train, train_x, train_y);
    on_device(test, test_x, test_y);

    manual_seed(s_.seed);
    std::shared_ptr<nn::Module> model = make_model(s_.model);
    model->to(device, dtype);
    // What trains: the model itself, or the model in DistributedDataParallel
    // (made after --resume has loaded it; it then copies rank 0's weights).
    std::shared_ptr<nn::Module> net = model;
    std::unique_ptr<optim::Optimizer> opt;
    if (s_.optimizer == "sgd")
      opt = std::make_unique<optim::SGD>(
          model->parameters(),
          optim::SGDOptions{.lr = s_.lr, .momentum = 0.9, .weight_decay = s_.weight_decay});
    else if (s_.optimizer == "adam")
      opt = std::make_unique<optim::Adam>(
          model->parameters(), optim::AdamOptions{.lr = s_.lr, .weight_decay = s_.weight_decay});
    else
      opt = std::make_unique<optim::AdamW>(
          model->parameters(), optim::AdamOptions{.lr = s_.lr, .weight_decay = s_.weight_decay});
    std::unique_ptr<optim::LRScheduler> schedule;
    if (s_.schedule == "cosine")
      schedule = std::make_unique<optim::CosineAnnealingLR>(*opt, s_.epochs);

    int64_t start = 0;
    if (!resume_.empty()) {
      try {
        const safetensors::Metadata meta = nn::load_checkpoint(resume_, *model, opt.get());
        const auto it = meta.find("train.epoch");
        if (it == meta.end())
          return usage_error_of("train", "--resume: '" + resume_ + "' has no 'train.epoch'");
        if (std::string why = checked_epoch(it->second, start); !why.empty())
          return usage_error_of("train", why);
        if (std::string why = check_resumed(*model, *opt, start, train.size()); !why.empty())
          return usage_error_of("train", "cannot resume from '" + resume_ + "': " + why);
      } catch (const std::exception& e) {
        return usage_error_of("train", "cannot resume from '" + resume_ + "': " + e.what());
      }
      if (schedule)
        for (int64_t e = 0; e < start; ++e) schedule->step();
      std::cout << "Resumed from " << resume_ << " after epoch " << start << " of " << s_.epochs
                << "\n";
    }
    if (distributed_) net = std::make_shared<nn::DistributedDataParallel>(model);

    // A resumed run keeps the rows of the epochs the checkpoint holds and
    // drops any later one (a run stopped between a row and its checkpoint).
    // Only whole lines (ended by a newline) are kept.
    MetricsFile metrics;
    if (!metrics_.empty() && rank_ == 0) {
      std::string kept =
          "epoch,train_loss,train_accuracy,test_loss,test_accuracy,lr,seconds,samples_per_second\n";
      if (!resume_.empty() && std::filesystem::is_regular_file(metrics_)) {
        std::ifstream old(metrics_, std::ios::binary);
        const std::string all((std::istreambuf_iterator<char>(old)),
                              std::istreambuf_iterator<char>());
        std::size_t at = all.find('\n');  // after the header row
        while (at != std::string::npos && at + 1 < all.size()) {
          const std::size_t end = all.find('\n', at + 1);
          if (end == std::string::npos) break;  // a partial last line
          const std::string line = all.substr(at + 1, end - at - 1);
          int64_t epoch = 0;
          const auto [ptr, ec] = std::from_chars(line.data(), line.data() + line.size(), epoch);
          if (ec == std::errc() && ptr != line.data() + line.size() && *ptr == ',' &&
              epoch <= start)
            kept += line + "\n";
          at = end;
        }
      }
      if (!metrics.open(metrics_, kept))
        return usage_error_of(
            "train", "cannot write the metrics to '" + metrics_ + "': " + std::strerror(errno));
    }

    std::cout << "Training " << s_.model << " on " << to_string(device) << " (" << s_.dtype
              << "): " << train.size() << " samples, " << test.size() << " held out, batches of "
              << s_.batch_size << ", " << s_.optimizer << " lr " << s_.lr
              << (schedule ? " with a cosine schedule" : "") << ", " << model->parameters().size()
              << " parameter tensors";
    if (distributed_)
      std::cout << ", on " << world_ << " ranks (batches of " << s_.batch_size << " per rank)";
    std::cout << "\n";
    nn::CrossEntropyLoss criterion;
    Pass last_test;
    const int64_t end = stop_after_ ? std::min(*stop_after_, s_.epochs) : s_.epochs;
    if (start >= end) last_test = evaluate(*model, criterion, test_x, test_y);
    for (int64_t epoch = start; epoch < end; ++epoch) {
      const double lr = opt->param_groups()[0]["lr"];
      const Pass tr = train_epoch(*net, *opt, criterion, train_x, train_y, epoch);
      if (schedule) schedule->step();
      last_test = evaluate(*model, criterion, test_x, test_y);
      const double rate = static_cast<double>(tr.samples) / tr.seconds;
      std::cout << "epoch " << epoch + 1 << "/" << s_.epochs << "  train loss " << fixed(tr.loss, 4)
                << " acc " << fixed(100 * tr.accuracy, 1) << "%  test loss "
                << fixed(last_test.loss, 4) << " acc " << fixed(100 * last_test.accuracy, 1)
                << "%  " << fixed(rate, 0) << " samples/s  lr " << lr << std::endl;
      if (metrics.is_open()) {
        const std::string row = std::to_string(epoch + 1) + "," + exact(tr.loss) + "," +
                                exact(tr.accuracy) + "," + exact(last_test.loss) + "," +
                                exact(last_test.accuracy) + "," + exact(lr) + "," +
                                exact(tr.seconds) + "," + exact(rate) + "\n";
        if (!metrics.append(row))
          return usage_error_of("train", "writing the metrics to '" + metrics_ + "' failed");
      }
      if (!checkpoint_.empty() && rank_ == 0) {
        safetensors::Metadata meta = s_.metadata();
        meta["train.epoch"] = std::to_string(epoch + 1);
        meta["train.test_accuracy"] = exact(last_test.accuracy);
        try {
          nn::save_checkpoint(checkpoint_, *model, opt.get(), meta);
        } catch (const Error& e) {
          std::cerr << "[train] " << e.what() << "\n";
          return kExitUsage;
        }
      }
    }
    const bool trained = start < end;
    if (!trained) std::cout << "Nothing to train: the checkpoint is at epoch " << start << "\n";
    if (trained && end < s_.epochs)
      std::cout << "Stopped after epoch " << end << " of " << s_.epochs << " (--stop-after)\n";
    std::cout << "Held-out accuracy " << fixed(100 * last_test.accuracy, 2) << "% ("
              << last_test.correct << "/" << last_test.samples << ") on " << to_string(device)
              << "\n";
    if (distributed_) distributed::destroy_process_group();
    if (trained && !checkpoint_.empty())
      std::cout << "Checkpoint written to " << checkpoint_ << "\n";
    if (trained && !metrics_.empty()) std::cout << "Metrics written to " << metrics_ << "\n";
    if (min_accuracy_ && last_test.accuracy < *min_accuracy_) {
      std::cout << "Below --min-accuracy " << *min_accuracy_ << "\n";
      return kExitFailed;
    }
    return kExitOk;
  }

 private:
  // A setting's option: its text is kept, to be resolved with the
  // checkpoint's settings when resuming.
  po::typed_value<std::string>* setting(const std::string& flag) {
    return po::value<std::string>()->notifier(
        [this, flag](const std::string& v) { given_[flag] = v; });
  }

  int check_options() {
    if (progress_ != "auto" && progress_ != "bar" && progress_ != "lines")
      return usage_error_of("train", "--progress '" + progress_ + "': one of auto, bar, lines");
    if (stop_after_ && *stop_after_ < 1)
      return usage_error_of("train", "--stop-after must be at least 1");
    if (min_accuracy_ && !(*min_accuracy_ >= 0 && *min_accuracy_ <= 1))
      return usage_error_of("train", "--min-accuracy is a fraction from 0 to 1, e.g. 0.97");
    safetensors::Header header;
    if (!resume_.empty()) {
      try {
        header = safetensors::read_header(resume_);
      } catch (const std::exception& e) {
        return usage_error_of("train", std::string("--resume: ") + e.what());
      }
      if (!header.metadata.count("train.epoch"))
        return usage_error_of(
            "train", "--resume: '" + resume_ + "' was not written by backplane train --checkpoint");
    }
    if (std::string why =
            resolve_settings(given_, resume_.empty() ? nullptr : &header.metadata, resume_, s_);
        !why.empty())
      return usage_error_of("train", why);
    if (!resume_.empty()) {
      saved_epochs_ =
          std::stoll(header.metadata.at("train.epochs"));  // checked by resolve_settings
      int64_t epoch = 0;
      if (std::string why = checked_epoch(header.metadata.at("train.epoch"), epoch); !why.empty())
        return usage_error_of("train", why);
    }
    // Found now, not after the first epoch's training.
    if (!checkpoint_.empty())
      if (std::string why = unwritable(checkpoint_); !why.empty())
        return usage_error_of("train",
                              "--checkpoint '" + checkpoint_ + "' cannot be written: " + why);
    return kExitOk;
  }

  // The checkpoint's "train.epoch": a whole number from 1 to the epochs it
  // was trained for, and not past --epochs. Returns why not, or empty.
  std::string checked_epoch(const std::string& text, int64_t& out) const {
    int64_t v = -1;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    const std::string what = "--resume: '" + resume_ + "' has 'train.epoch' '" + text + "'";
    if (ec != std::errc() || end != text.data() + text.size() || text.empty() || v < 1 ||
        v > saved_epochs_)
      return what + ", not an epoch from 1 to its 'train.epochs' " + std::to_string(saved_epochs_);
    if (v > s_.epochs)
      return "--epochs " + std::to_string(s_.epochs) + " is below the epoch '" + resume_ +
             "' is at (" + text + "); a resumed run goes on to a larger --epochs";
    out = v;
    return {};
  }

  // The values of a loaded checkpoint, beyond its structure: the batch size
  // within the data, each optimiser step count what `start` epochs give,
  // and (unless --accept-nonfinite) finite weights and optimiser state.
  std::string check_resumed(nn::Module& model, optim::Optimizer& opt, int64_t start,
                            int64_t train_size) const {
    if (s_.batch_size > train_size)
      return "'train.batch_size' is " + std::to_string(s_.batch_size) + ", more than the " +
             std::to_string(train_size) + " samples it trains on";
    const int64_t n = world_ > 1 ? (train_size + world_ - 1) / world_ : train_size;
    const int64_t steps = start * ((n + s_.batch_size - 1) / s_.batch_size);
    const optim::OptimizerState state = opt.state_dict();
    for (const auto& [index, ps] : state.state)
      for (const auto& [name, v] : ps.numbers)
        if (name == "step" && v != static_cast<double>(steps))
          return "'optimizer.state." + std::to_string(index) + ".step' is " + exact(v) + "; " +
                 std::to_string(start) + " epochs of batches of " + std::to_string(s_.batch_size) +
                 " make " + std::to_string(steps) + " steps";
    if (accept_nonfinite_) return {};
    for (const auto& [name, t] : model.state_dict())
      if (const auto v = non_finite(t))
        return "tensor 'model." + name + "' holds " + exact(*v) +
               " (--accept-nonfinite to resume anyway)";
    for (const auto& [index, ps] : state.state)
      for (const auto& [name, t] : ps.tensors)
        if (const auto v = non_finite(t))
          return "tensor 'optimizer.state." + std::to_string(index) + "." + name + "' holds " +
                 exact(*v) + " (--accept-nonfinite to resume anyway)";
    return {};
  }

  Pass train_epoch(nn::Module& model, optim::Optimizer& opt, nn::CrossEntropyLoss& criterion,
                   const Tensor& x, const Tensor& y, int64_t epoch) {
    model.train();
    int64_t n = x.size(0);
    std::vector<int64_t> order = epoch_order(n, s_.seed, epoch);
    if (world_ > 1) {
      // This rank's share: every world_-th sample from rank_, the order
      // padded from its start to a multiple of the ranks.
      const int64_t per_rank = (n + world_ - 1) / world_;
      std::vector<int64_t> mine(static_cast<std::size_t>(per_rank));
      for (int64_t k = 0; k < per_rank; ++k) mine[k] = order[(rank_ + k * world_) % n];
      order = std::move(mine);
      n = per_rank;
    }
    const int64_t batch = std::min(s_.batch_size, n);  // a larger --batch-size is one batch
    const int64_t steps = (n + batch - 1) / batch;
    const bool bar =
        rank_ == 0 && (progress_ == "bar" || (progress_ == "auto" && ::isatty(STDERR_FILENO)));
    // Sums stay on the device; they are read when the bar is drawn.
    Tensor loss_sum = zeros({}, TensorOptions().dtype(x.dtype()).device(x.device()));
    Tensor correct = zeros({}, TensorOptions().dtype(DType::Int64).device(x.device()));
    const auto t0 = Clock::now();
    auto drawn = t0;
    for (int64_t step = 0; step < steps; ++step) {
      const int64_t begin = step * batch, count = std::min(batch, n - begin);
      const Tensor idx = from_blob(order.data() + begin, DType::Int64, {count}, x.device());
      const Tensor xb = x.index_select(0, idx), yb = y.index_select(0, idx);
      opt.zero_grad();
      const Tensor out = model(xb);
      const Tensor loss = criterion(out, yb);
      loss.backward();
      opt.step();
      {
        NoGradGuard no_grad;
        loss_sum.add_(loss.detach() * static_cast<double>(count));
        correct.add_(eq(out.detach().argmax(1), yb).sum());
      }
      const auto now = Clock::now();
      if (bar && (now - drawn > std::chrono::milliseconds(100) || step + 1 == steps)) {
        drawn = now;
        const double seen = static_cast<double>(begin + count);
        const double secs = std::chrono::duration<double>(now - t0).count();
        const int width = 24, filled = static_cast<int>(width * (step + 1) / steps);
        std::cerr << "\repoch " << epoch + 1 << "/" << s_.epochs << " [" << std::string(filled, '#')
                  << std::string(width - filled, '.') << "] step " << step + 1 << "/" << steps
                  << "  loss " << fixed(loss_sum.item<double>() / seen, 4) << "  "
                  << fixed(seen / secs, 0) << " samples/s " << std::flush;
      }
    }
    if (world_ > 1) {  // over all ranks
      distributed::all_reduce(loss_sum);
      distributed::all_reduce(correct);
      n *= world_;
      // Every rank evaluates with rank 0's running statistics, so that all
      // reach the same verdict.
      NoGradGuard no_grad;
      for (const Tensor& b : model.buffers()) distributed::broadcast(b, 0);
    }
    Pass p;
    p.samples = n;
    p.loss = loss_sum.item<double>() / static_cast<double>(n);
    p.correct = correct.item<int64_t>();
    p.accuracy = static_cast<double>(p.correct) / static_cast<double>(n);
    p.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (bar) std::cerr << "\r" << std::string(79, ' ') << "\r" << std::flush;
    return p;
  }

  static Pass evaluate(nn::Module& model, nn::CrossEntropyLoss& criterion, const Tensor& x,
                       const Tensor& y) {
    NoGradGuard no_grad;
    model.eval();
    const Tensor out = model(x);
    Pass p;
    p.samples = x.size(0);
    p.loss = criterion(out, y).item<double>();
    p.correct = eq(out.argmax(1), y).sum().item<int64_t>();
    p.accuracy = static_cast<double>(p.correct) / static_cast<double>(p.samples);
    model.train();
    return p;
  }

  TrainSettings s_;
  std::map<std::string, std::string> given_;
  std::optional<double> lr_, min_accuracy_;
  std::optional<int64_t> stop_after_;
  std::string data_, metrics_, checkpoint_, resume_, progress_;
  bool distributed_ = false, accept_nonfinite_ = false;
  int64_t saved_epochs_ = 0;
  int rank_ = 0, world_ = 1;
};

}  // namespace

std::unique_ptr<Command> make_train_command() { return std::make_unique<TrainCommand>(); }

}  // namespace bp::cli
