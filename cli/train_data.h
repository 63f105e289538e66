// The data of `backplane train`: the 8x8 handwritten digits (1797 images of
// pixels 0..16, labels 0..9) as Debian's python3-sklearn ships them, split
// into a training and a held-out set, and shuffled per epoch.
#pragma once

#include <backplane/tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace bp::cli {

// Where python3-sklearn puts the file.
inline constexpr const char* kDigitsPath =
    "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";

struct Dataset {
  std::vector<float> pixels;    // n x 64, scaled to 0..1
  std::vector<int64_t> labels;  // n
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

// Reads a CSV of rows "p0,...,p63,label" (pixels 0..16, label 0..9),
// gzip-compressed or not (gzip is run to read a compressed file). A missing
// file is a ValueError that says how to get it; a malformed one names the
// line and what is wrong.
Dataset read_digits(const std::string& path);

// A fixed split: the rows are shuffled with `seed` and the last
// round(n * test_fraction) are held out.
void split(const Dataset& all, double test_fraction, uint64_t seed, Dataset& train, Dataset& test);

// A permutation of 0..n-1 that depends only on seed and epoch (the same on
// every machine and backend), so a resumed run sees the batches it would have.
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch);

}  // namespace bp::cli
