// DLPack both ways (backplane/dlpack.h): tensors exported over their own
// memory and external memory imported through the plugin's import_memory
// (ABI 2.10), on cpu_onednn (host memory) and opencl (cl_mem handles, on
// PoCL's device here); the refusals leave the caller's DLManagedTensor
// untouched.
#include <backplane/backplane.h>
#include <dlpack/dlpack.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#ifdef BACKPLANE_TEST_OPENCL
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#endif

namespace {

using bp::Tensor;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A DLManagedTensor over memory the test owns, with a deleter that counts.
struct External {
  std::vector<int64_t> shape, strides;
  int deleted = 0;
  DLManagedTensor managed{};

  External(void* data, DLDevice device, DLDataType dtype, std::vector<int64_t> shp,
           std::vector<int64_t> str, uint64_t byte_offset = 0)
      : shape(std::move(shp)), strides(std::move(str)) {
    DLTensor& t = managed.dl_tensor;
    t.data = data;
    t.device = device;
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = dtype;
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
    t.byte_offset = byte_offset;
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* m) { ++static_cast<External*>(m->manager_ctx)->deleted; };
  }
};

constexpr DLDevice kHost{kDLCPU, 0};
constexpr DLDataType kF32{kDLFloat, 32, 1};

TEST(DlpackExport, HostViewKeepsItsStridesAndSharesMemory) {
  Tensor base = bp::arange(12, bp::TensorOptions(bp::DType::Float32)).reshape({3, 4});
  Tensor view = base.slice(0, 1, std::nullopt).slice(1, 1, std::nullopt);  // base[1:, 1:]
  EXPECT_EQ(bp::dlpack_device(view), std::make_pair(int32_t{kDLCPU}, int32_t{0}));
  DLManagedTensor* m = bp::to_dlpack(view);
  const DLTensor& t = m->dl_tensor;
  EXPECT_EQ(t.device.device_type, kDLCPU);
  EXPECT_EQ(t.ndim, 2);
  EXPECT_EQ(t.dtype.code, kDLFloat);
  EXPECT_EQ(t.dtype.bits, 32);
  EXPECT_EQ(t.dtype.lanes, 1);
  EXPECT_EQ(t.shape[0], 2);
  EXPECT_EQ(t.shape[1], 3);
  EXPECT_EQ(t.strides[0], 4);
  EXPECT_EQ(t.strides[1], 1);
  EXPECT_EQ(t.byte_offset, 0u);  // the address is the first element's, as PyTorch gives it
  const float* p = static_cast<const float*>(t.data);
  EXPECT_EQ(p[0], 5.0f);           // base[1][1]
  EXPECT_EQ(p[1 * 4 + 2], 11.0f);  // base[2][3]
  // A write through the consumer's pointer is a write to the tensor, and
  // it bumps no version counter (PyTorch's rule too).
  const uint32_t version = base.version();
  static_cast<float*>(t.data)[1] = -1.0f;
  EXPECT_EQ(base.to_vector<float>()[6], -1.0f);
  EXPECT_EQ(base.version(), version);
  // The memory outlives every Backplane handle until the deleter runs.
  base = Tensor();
  view = Tensor();
  EXPECT_EQ(p[1 * 4 + 2], 11.0f);
  m->deleter(m);
}

TEST(DlpackExport, RequiresGradExportsTheDataAndScalarsHaveRankZero) {
  Tensor x = bp::full({}, 2.5, bp::TensorOptions(bp::DType::Float64));
  x.requires_grad_();
  DLManagedTensor* m = bp::to_dlpack(x);
  EXPECT_EQ(m->dl_tensor.ndim, 0);
  EXPECT_EQ(m->dl_tensor.dtype.bits, 64);
  EXPECT_EQ(*static_cast<const double*>(m->dl_tensor.data), 2.5);
  m->deleter(m);
}

TEST(DlpackExport, DtypeCodesAreDlpacks) {
  const std::vector<std::pair<bp::DType, DLDataType>> codes = {
      {bp::DType::Bool, {6, 8, 1}},
      {bp::DType::Int8, {kDLInt, 8, 1}},
      {bp::DType::Int16, {kDLInt, 16, 1}},
      {bp::DType::Int32, {kDLInt, 32, 1}},
      {bp::DType::Int64, {kDLInt, 64, 1}},
      {bp::DType::UInt8, {kDLUInt, 8, 1}},
      {bp::DType::Float16, {kDLFloat, 16, 1}},
      {bp::DType::BFloat16, {kDLBfloat, 16, 1}},
      {bp::DType::Float32, {kDLFloat, 32, 1}},
      {bp::DType::Float64, {kDLFloat, 64, 1}}};
  for (const auto& [dtype, dl] : codes) {
    DLManagedTensor* m = bp::to_dlpack(bp::zeros({2}, bp::TensorOptions(dtype)));
    EXPECT_EQ(m->dl_tensor.dtype.code, dl.code) << dtype;
    EXPECT_EQ(m->dl_tensor.dtype.bits, dl.bits) << dtype;
    // And back: the same dtype.
    Tensor back = bp::from_dlpack(m);
    EXPECT_EQ(back.dtype(), dtype);
  }
}

TEST(DlpackImport, HostMemoryIsSharedAndGivenBackWhenTheLastViewGoes) {
  std::vector<float> data = {0, 1, 2, 3, 4, 5};
  // A 3 x 2 column-major view of the six floats: strides {1, 3}.
  External ext(data.data(), kHost, kF32, {3, 2}, {1, 3});
  Tensor t = bp::from_dlpack(&ext.managed);
  EXPECT_EQ(bp::DimVector(t.sizes()), bp::DimVector({3, 2}));
  EXPECT_EQ(bp::DimVector(t.strides()), bp::DimVector({1, 3}));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_TRUE(t.is_leaf());
  EXPECT_FALSE(t.requires_grad());
  EXPECT_EQ(t.version(), 0u);
  // In-place ops write the caller's memory and count as usual.
  Tensor column = t.select(1, 1);
  column.add_(bp::full({3}, 10.0, bp::TensorOptions(bp::DType::Float32)));
  EXPECT_EQ(data, (std::vector<float>{0, 1, 2, 13, 14, 15}));
  EXPECT_EQ(t.version(), 1u);
  // Writes by the owner are seen by the tensor.
  data[0] = 7;
  EXPECT_EQ(t.to_vector<float>()[0], 7.0f);
  // Given back once, when the last tensor over it goes, not before.
  t = Tensor();
  EXPECT_EQ(ext.deleted, 0);
  column = Tensor();
  EXPECT_EQ(ext.deleted, 1);
}

TEST(DlpackImport, NullStridesAreRowMajorAndByteOffsetIsHonoured) {
  std::vector<double> data = {9, 9, 1, 2, 3, 4};
  External ext(data.data(), kHost, {kDLFloat, 64, 1}, {2, 2}, {}, 2 * sizeof(double));
  Tensor t = bp::from_dlpack(&ext.managed);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{1, 2, 3, 4}));
  t.zero_();
  EXPECT_EQ(data, (std::vector<double>{9, 9, 0, 0, 0, 0}));
}

TEST(DlpackImport, RoundTripAliasesTheOriginal) {
  Tensor a = bp::ones({4}, bp::TensorOptions(bp::DType::Int32));
  Tensor b = bp::from_dlpack(bp::to_dlpack(a));
  b.mul_(bp::full({4}, 3, bp::TensorOptions(bp::DType::Int32)));
  EXPECT_EQ(a.to_vector<int32_t>(), (std::vector<int32_t>{3, 3, 3, 3}));
  // Separate version counters: the import is a new tensor to autograd.
  EXPECT_EQ(a.version(), 0u);
  EXPECT_EQ(b.version(), 1u);
}

TEST(DlpackImport, EmptyTensorsTakeNothingAndGiveBackAtOnce) {
  External ext(nullptr, kHost, kF32, {0, 3}, {});
  Tensor t = bp::from_dlpack(&ext.managed);
  EXPECT_EQ(bp::DimVector(t.sizes()), bp::DimVector({0, 3}));
  EXPECT_EQ(ext.deleted, 1);
}

// Each refusal names what is wrong and leaves the DLManagedTensor the caller's.
void expect_refused(External& ext, const std::string& part, bool type_error = false) {
  try {
    (void)bp::from_dlpack(&ext.managed);
    ADD_FAILURE() << "from_dlpack accepted it; expected: " << part;
  } catch (const bp::TypeError& e) {
    EXPECT_TRUE(type_error) << e.what();
    EXPECT_TRUE(contains(e.what(), part)) << e.what();
  } catch (const bp::ValueError& e) {
    EXPECT_FALSE(type_error) << e.what();
    EXPECT_TRUE(contains(e.what(), part)) << e.what();
  }
  EXPECT_EQ(ext.deleted, 0);
}

TEST(DlpackImport, RefusalsNameTheProblemAndTakeNothing) {
  std::vector<float> data(16);
  {
    External ext(data.data(), kHost, {kDLFloat, 32, 4}, {2}, {});
    expect_refused(ext, "has several lanes", true);
  }
  {
    External ext(data.data(), kHost, {kDLComplex, 64, 1}, {2}, {});
    expect_refused(ext, "(complex) has no Backplane dtype", true);
  }
  {
    External ext(data.data(), kHost, kF32, {2, 3}, {3, -1});
    expect_refused(ext, "stride -1 of dimension 1 is negative");
  }
  {
    External ext(reinterpret_cast<char*>(data.data()) + 2, kHost, kF32, {2}, {});
    expect_refused(ext, "not aligned to its size 4");
  }
  {
    External ext(data.data(), kHost, kF32, {-2}, {});
    expect_refused(ext, "negative size -2");
  }
  {
    External ext(data.data(), DLDevice{kDLVulkan, 0}, kF32, {2}, {});
    expect_refused(ext, "no loaded backend takes memory of DLPack device type 7 (kDLVulkan)");
  }
  {
    // A device of another type, named by the caller.
    External ext(data.data(), kHost, kF32, {2}, {});
    try {
      (void)bp::from_dlpack(&ext.managed, bp::device("sim"));
      ADD_FAILURE() << "sim took host memory";
    } catch (const bp::ValueError& e) {
      EXPECT_TRUE(contains(e.what(), "backend 'sim'")) << e.what();
      EXPECT_TRUE(contains(e.what(), "device type 12 (kDLExtDev)")) << e.what();
    }
    EXPECT_EQ(ext.deleted, 0);
  }
}

TEST(DlpackExport, MemoryThatIsNotHostAddressableGoesOnlyToItsOwnDeviceType) {
  // sim's memory is an index into its arena: a consumer of its own device
  // type gets the handle, a host consumer is refused.
  Tensor s = bp::ones({3}, bp::TensorOptions(bp::DType::Float32).device(bp::device("sim")));
  EXPECT_EQ(bp::dlpack_device(s), std::make_pair(int32_t{kDLExtDev}, int32_t{0}));
  try {
    (void)bp::to_dlpack(s, kDLCPU);
    ADD_FAILURE() << "exported sim memory to a host consumer";
  } catch (const bp::ValueError& e) {
    EXPECT_TRUE(contains(e.what(), "backend 'sim'")) << e.what();
    EXPECT_TRUE(contains(e.what(), "not host-addressable")) << e.what();
    EXPECT_TRUE(contains(e.what(), "consumer of device type 1 (kDLCPU)")) << e.what();
  }
  DLManagedTensor* m = bp::to_dlpack(s);
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLExtDev);
  // sim imports nothing: its own export cannot come back through it.
  try {
    (void)bp::from_dlpack(m);
    ADD_FAILURE() << "sim imported memory";
  } catch (const bp::ValueError& e) {
    EXPECT_TRUE(contains(e.what(), "sim (kDLExtDev, imports nothing)")) << e.what();
  }
  m->deleter(m);
}

#ifdef BACKPLANE_TEST_OPENCL
// The cl_mem behind an opencl tensor, as its DLPack export gives it.
cl_mem handle_of(const Tensor& t, uint64_t* byte_offset = nullptr) {
  DLManagedTensor* m = bp::to_dlpack(t);
  cl_mem mem = static_cast<cl_mem>(m->dl_tensor.data);
  if (byte_offset) *byte_offset = m->dl_tensor.byte_offset;
  m->deleter(m);
  return mem;
}

cl_uint reference_count(cl_mem m) {
  cl_uint n = 0;
  EXPECT_EQ(clGetMemObjectInfo(m, CL_MEM_REFERENCE_COUNT, sizeof(n), &n, nullptr), CL_SUCCESS);
  return n;
}

class DlpackOpenCL : public ::testing::Test {
 protected:
  void SetUp() override {
    bp::Backend& b = bp::PluginLoader::instance().load("opencl");
    if (b.device_count() == 0) GTEST_SKIP() << "no OpenCL device: " << b.no_device_reason();
    dev_ = bp::device("opencl");
  }
  bp::TensorOptions options() const { return bp::TensorOptions(bp::DType::Float32).device(dev_); }
  bp::Device dev_;
};

TEST_F(DlpackOpenCL, ExportGivesTheClMemWithTheViewsOffset) {
  Tensor base = bp::arange(8, bp::TensorOptions(bp::DType::Float32)).to(dev_);
  EXPECT_EQ(bp::dlpack_device(base), std::make_pair(int32_t{kDLOpenCL}, int32_t{0}));
  uint64_t offset = 0;
  cl_mem mem = handle_of(base.slice(0, 3, std::nullopt), &offset);
  EXPECT_EQ(offset, 3 * sizeof(float));  // an opaque handle: the offset travels beside it
  cl_context context = nullptr;
  ASSERT_EQ(clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof(context), &context, nullptr),
            CL_SUCCESS);
  EXPECT_NE(context, nullptr);
  try {
    (void)bp::to_dlpack(base, kDLCPU);
    ADD_FAILURE() << "exported opencl memory to a host consumer";
  } catch (const bp::ValueError& e) {
    EXPECT_TRUE(contains(e.what(), "backend 'opencl'")) << e.what();
    EXPECT_TRUE(contains(e.what(), "not host-addressable")) << e.what();
  }
}

TEST_F(DlpackOpenCL, AnExternalBufferIsImportedHeldAndReleased) {
  // A buffer another library made in the device's context, with values of
  // its own, imported with an offset of two floats.
  cl_mem probe = handle_of(bp::zeros({1}, options()));
  cl_context context = nullptr;
  ASSERT_EQ(clGetMemObjectInfo(probe, CL_MEM_CONTEXT, sizeof(context), &context, nullptr),
            CL_SUCCESS);
  std::vector<float> values = {-1, -1, 1, 2, 3, 4};
  cl_int st = CL_SUCCESS;
  cl_mem mem = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                              values.size() * sizeof(float), values.data(), &st);
  ASSERT_EQ(st, CL_SUCCESS);
  External ext(mem, DLDevice{kDLOpenCL, 0}, kF32, {2, 2}, {2, 1}, 2 * sizeof(float));
  {
    Tensor t = bp::from_dlpack(&ext.managed);
    EXPECT_EQ(t.device(), dev_);
    EXPECT_EQ(reference_count(mem), 2u);  // the plugin holds it while the tensor lives
    EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
    t.mul_(bp::full({2, 2}, 2.0, options()));
    EXPECT_EQ(t.sum().item<float>(), 20.0f);
  }
  EXPECT_EQ(ext.deleted, 1);
  EXPECT_EQ(reference_count(mem), 1u);
  // The device's work reached the caller's buffer.
  cl_device_id device = nullptr;
  ASSERT_EQ(clGetContextInfo(context, CL_CONTEXT_DEVICES, sizeof(device), &device, nullptr),
            CL_SUCCESS);
  cl_command_queue q = clCreateCommandQueue(context, device, 0, &st);
  ASSERT_EQ(st, CL_SUCCESS);
  std::vector<float> back(values.size());
  ASSERT_EQ(clEnqueueReadBuffer(q, mem, CL_TRUE, 0, back.size() * sizeof(float), back.data(), 0,
                                nullptr, nullptr),
            CL_SUCCESS);
  EXPECT_EQ(back, (std::vector<float>{-1, -1, 2, 4, 6, 8}));
  clReleaseCommandQueue(q);
  clReleaseMemObject(mem);
}

TEST_F(DlpackOpenCL, ABufferOfAnotherContextOrTooSmallIsRefused) {
  cl_mem probe = handle_of(bp::zeros({1}, options()));
  cl_context context = nullptr;
  ASSERT_EQ(clGetMemObjectInfo(probe, CL_MEM_CONTEXT, sizeof(context), &context, nullptr),
            CL_SUCCESS);
  cl_device_id device = nullptr;
  ASSERT_EQ(clGetContextInfo(context, CL_CONTEXT_DEVICES, sizeof(device), &device, nullptr),
            CL_SUCCESS);
  cl_int st = CL_SUCCESS;
  cl_context other = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &st);
  ASSERT_EQ(st, CL_SUCCESS);
  cl_mem foreign = clCreateBuffer(other, CL_MEM_READ_WRITE, 64, nullptr, &st);
  ASSERT_EQ(st, CL_SUCCESS);
  External ext(foreign, DLDevice{kDLOpenCL, 0}, kF32, {4}, {});
  try {
    (void)bp::from_dlpack(&ext.managed);
    ADD_FAILURE() << "imported a buffer of another context";
  } catch (const bp::Error& e) {
    EXPECT_TRUE(contains(e.what(), "another OpenCL context")) << e.what();
  }
  External big(foreign, DLDevice{kDLOpenCL, 0}, kF32, {32}, {});
  try {
    (void)bp::from_dlpack(&big.managed);
    ADD_FAILURE() << "imported past the end of a buffer";
  } catch (const bp::Error& e) {
    // The context check comes first; a buffer of the right context but too
    // small is refused by size (next case).
    EXPECT_TRUE(contains(e.what(), "import_memory")) << e.what();
  }
  cl_mem small = clCreateBuffer(context, CL_MEM_READ_WRITE, 8, nullptr, &st);
  ASSERT_EQ(st, CL_SUCCESS);
  External tiny(small, DLDevice{kDLOpenCL, 0}, kF32, {4}, {});
  try {
    (void)bp::from_dlpack(&tiny.managed);
    ADD_FAILURE() << "imported past the end of a buffer";
  } catch (const bp::Error& e) {
    EXPECT_TRUE(contains(e.what(), "has 8 bytes and the tensor reaches 16")) << e.what();
  }
  EXPECT_EQ(ext.deleted + big.deleted + tiny.deleted, 0);
  EXPECT_EQ(reference_count(small), 1u);
  clReleaseMemObject(small);
  clReleaseMemObject(foreign);
  clReleaseContext(other);
}
#endif

}  // namespace
