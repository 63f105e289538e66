// The plugin loader against the fake plugins in tests/plugins, each wrong (or
// old) in one way: what loads, what is refused, and what the refusal says.
// The loader is process-wide, so every fake has its own name and each test
// works whether it runs alone or after the others.
#include <backplane/backplane.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <regex>
#include <set>
#include <string>

namespace fs = std::filesystem;

namespace {

const std::string kFakes = BACKPLANE_TEST_PLUGIN_DIR;
const std::string kPlugins = BACKPLANE_PLUGIN_DIR;

std::string fake(const std::string& name) { return kFakes + "/libbackplane_" + name + ".so"; }

bp::PluginLoader& loader() { return bp::PluginLoader::instance(); }

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The message of the PluginError that loading `spec` throws.
std::string refusal(const std::string& spec) {
  try {
    loader().load(spec);
  } catch (const bp::PluginError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a PluginError: " << e.what();
    return {};
  }
  ADD_FAILURE() << spec << " was accepted";
  return {};
}

bp::Device device_of(const bp::Backend& b) { return {static_cast<int16_t>(b.id()), 0}; }

// True when the running process has `path` mapped (its code is loaded).
bool is_mapped(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  const std::string canonical = fs::canonical(path).string();
  for (std::string line; std::getline(maps, line);)
    if (contains(line, canonical)) return true;
  return false;
}

// --- refusals -------------------------------------------------------------------

TEST(Loader, NotALibraryIsRefusedWithTheLoadersText) {
  const std::string m = refusal(fake("notalib"));
  EXPECT_TRUE(contains(m, "libbackplane_notalib.so")) << m;
  EXPECT_TRUE(contains(m, "could not be loaded")) << m;
}

TEST(Loader, MissingEntryIsRefusedListingWhatTheFileExports) {
  const std::string m = refusal(fake("no_entry"));
  EXPECT_TRUE(contains(m, "libbackplane_no_entry.so")) << m;
  EXPECT_TRUE(contains(m, "'bp_plugin_init' is missing")) << m;
  EXPECT_TRUE(contains(m, "bp_plugin_initialise")) << m;
  EXPECT_TRUE(contains(m, "no_entry_helper")) << m;
}

// The list comes from the dynamic symbol table, which `strip` keeps: a
// stripped plugin (as packages ship them) still says what it exports, and
// nothing else (no locals, no imports, no names from other string tables).
TEST(Loader, MissingEntryListingSurvivesStrip) {
  const fs::path dir = fs::temp_directory_path() / ("bp_strip_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path copy = dir / "libbackplane_no_entry_stripped.so";
  fs::copy_file(fake("no_entry"), copy, fs::copy_options::overwrite_existing);
  const std::string cmd = "strip --strip-all '" + copy.string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string m = refusal(copy.string());
  fs::remove_all(dir);
  const std::string listed = m.substr(m.find("the file exports: ") + 18);
  EXPECT_EQ(listed.substr(0, listed.find(". Define")), "bp_plugin_initialise, no_entry_helper")
      << m;
}

TEST(Loader, WrongMajorIsRefusedNamingBothVersions) {
  const std::string m = refusal(fake("wrong_major"));
  EXPECT_TRUE(contains(m, "libbackplane_wrong_major.so")) << m;
  EXPECT_TRUE(contains(m, std::to_string(BP_ABI_MAJOR + 1) + ".0")) << m;
  EXPECT_TRUE(contains(m, std::to_string(BP_ABI_MAJOR) + "." + std::to_string(BP_ABI_MINOR))) << m;
  EXPECT_EQ(loader().find("wrong_major"), nullptr);
}

// Two builds of one plugin (two files, one name), each given by path: both
// load, side by side. The name finds the first; the second is labelled
// NAME#2, which is how its devices print, and it runs its own kernels.
TEST(Loader, TwoFilesOfOneNameBothLoadByPathAndTheNameFindsTheFirst) {
  bp::Backend& first = loader().load(fake("dup_a"));
  bp::Backend& second = loader().load(fake("dup_b"));
  ASSERT_NE(&first, &second);
  EXPECT_EQ(first.name(), "dup");
  EXPECT_EQ(second.name(), "dup");
  EXPECT_EQ(first.version(), "0.1.0-a");
  EXPECT_EQ(second.version(), "0.1.0-b");
  EXPECT_EQ(first.path(), fs::canonical(fake("dup_a")).string());
  EXPECT_EQ(second.path(), fs::canonical(fake("dup_b")).string());
  EXPECT_EQ(first.label(), "dup");
  EXPECT_EQ(second.label(), "dup#2");
  EXPECT_EQ(bp::to_string(device_of(first)), "dup:0");
  EXPECT_EQ(bp::to_string(device_of(second)), "dup#2:0");
  EXPECT_EQ(loader().find("dup"), &first);
  EXPECT_EQ(&loader().load("dup"), &first);
  EXPECT_EQ(&bp::PluginLoader::instance().load(fake("dup_b")), &second);  // loaded once
  const bp::Tensor t = bp::from_vector(std::vector<float>{1.5f, -2.0f}, {2},
                                       bp::TensorOptions().device(device_of(second)));
  EXPECT_EQ(t.device(), device_of(second));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.5f, -2.0f}));
}

TEST(Loader, DuplicateKernelIsRefusedNamingBothOrigins) {
  const std::string m = refusal(fake("dup_kernel"));
  EXPECT_TRUE(contains(m, "registering kernels failed")) << m;
  EXPECT_TRUE(contains(m, "add")) << m;
  EXPECT_TRUE(contains(m, "float32")) << m;
  // Both registrations, as file:line, on two different lines.
  std::set<std::string> origins;
  const std::regex origin(R"(dup_kernel\.cpp:(\d+))");
  for (std::sregex_iterator it(m.begin(), m.end(), origin), end; it != end; ++it)
    origins.insert((*it)[1].str());
  EXPECT_EQ(origins.size(), 2u) << m;
  EXPECT_EQ(loader().find("dup_kernel"), nullptr);
}

TEST(Loader, UnknownNameListsTheFoldersSearched) {
  const std::string m = refusal("nosuch");
  EXPECT_TRUE(contains(m, "libbackplane_nosuch.so")) << m;
  for (const std::string& dir : loader().search_dirs())
    EXPECT_TRUE(contains(m, "\n  " + dir)) << "missing " << dir << " in: " << m;
}

TEST(Loader, NeitherNameNorPathIsRefused) {
  EXPECT_TRUE(contains(refusal("Not-A-Name"), "neither a backend name"));
  EXPECT_TRUE(contains(refusal(kFakes + "/libbackplane_absent.so"), "no such file"));
}

// --- plugins that load ------------------------------------------------------------

TEST(Loader, APluginWithOnlyTheRequiredEntriesLoadsAndWorks) {
  bp::Backend& b = loader().load(fake("minimal"));
  EXPECT_EQ(b.name(), "minimal");
  EXPECT_EQ(b.abi_major(), static_cast<uint32_t>(BP_ABI_MAJOR));
  EXPECT_EQ(b.abi_minor(), static_cast<uint32_t>(BP_ABI_MINOR));
  EXPECT_EQ(b.device_count(), 1);
  // Its NULL optional entries are absent.
  EXPECT_FALSE(b.memory_stats(0).has_value());
  EXPECT_TRUE(b.tolerances().empty());

  const bp::TensorOptions on_it = bp::TensorOptions().device(device_of(b));
  bp::Tensor x = bp::from_vector(std::vector<float>{1, 2, 3}, {3}, on_it);
  bp::Tensor y = bp::full({3}, 0.5, on_it);
  bp::Tensor z = bp::add(x, y, 2);
  EXPECT_EQ(z.device(), device_of(b));
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(z.to_string(), "tensor([2., 3., 4.], device='minimal:0')");
  // Without host_pointer the core gives no host address for its memory.
  EXPECT_THROW((void)z.data_ptr(), bp::ValueError);
}

// A plugin built against the next minor (tests/plugins/future_abi.cmake
// appends a field to every struct) loads and runs on this core, and stays
// inside the core's structs: it sees this core's bp_host without the new
// field, and writes no byte past the struct_size of the props and stats the
// core hands it; an override of a core op it does not know is ignored.
TEST(Loader, FutureMinorLoadsRunsAndWritesOnlyWhatTheCoreOwns) {
  bp::Backend& b = loader().load(fake("future_minor"));
  EXPECT_EQ(b.abi_minor(), static_cast<uint32_t>(BP_ABI_MINOR + 1));
  EXPECT_GT(b.api().struct_size, sizeof(bp_plugin));
  EXPECT_EQ(b.version(), "core-abi-" + std::to_string(BP_ABI_MAJOR) + "." +
                             std::to_string(BP_ABI_MINOR) + "-without-future-host-field");

  struct Guarded {
    bp_device_props props;
    unsigned char guard[128];
  } g;
  std::memset(&g, 0xAB, sizeof g);
  g.props.struct_size = sizeof(bp_device_props);
  char err_buf[256] = {0};
  bp_error err{sizeof(bp_error), err_buf, sizeof(err_buf)};
  ASSERT_EQ(b.api().device_props(b.api().ctx, 0, &g.props, &err), BP_STATUS_OK) << err_buf;
  EXPECT_EQ(std::string(g.props.name), "future host memory");
  EXPECT_EQ(g.props.host_addressable, 1);
  EXPECT_EQ(g.props.struct_size, sizeof(bp_device_props));
  EXPECT_TRUE(std::all_of(std::begin(g.guard), std::end(g.guard), [](unsigned char c) {
    return c == 0xAB;
  })) << "the plugin wrote past the core's bp_device_props";

  struct GuardedStats {
    bp_memory_stats stats;
    unsigned char guard[64];
  } gs;
  std::memset(&gs, 0xCD, sizeof gs);
  gs.stats.struct_size = sizeof(bp_memory_stats);
  ASSERT_EQ(b.api().memory_stats(b.api().ctx, 0, &gs.stats, &err), BP_STATUS_OK) << err_buf;
  EXPECT_EQ(gs.stats.allocated_bytes, 4242u);
  EXPECT_TRUE(std::all_of(std::begin(gs.guard), std::end(gs.guard), [](unsigned char c) {
    return c == 0xCD;
  })) << "the plugin wrote past the core's bp_memory_stats";
  ASSERT_TRUE(b.memory_stats(0).has_value());
  EXPECT_EQ(b.memory_stats(0)->allocated_bytes, 4242u);

  const bp::TensorOptions on_it = bp::TensorOptions().device(device_of(b));
  bp::Tensor x = bp::from_vector(std::vector<float>{1, 2, 3}, {3}, on_it);
  bp::Tensor z = bp::add(x, bp::full({3}, 0.5, on_it), 2);
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(z.to_string(), "tensor([2., 3., 4.], device='future_minor:0')");
  // Its override of a core op this core does not know was ignored, not refused.
  for (const bp::NamedOpInfo& op : bp::named_ops()) EXPECT_NE(op.name, "core::future_fused");
}

TEST(Loader, CurrentMinorReportsMemoryStats) {
  bp::Backend& cpu = loader().load("cpu_onednn");
  EXPECT_EQ(cpu.abi_minor(), static_cast<uint32_t>(BP_ABI_MINOR));
  EXPECT_TRUE(cpu.memory_stats(0).has_value());
}

TEST(Loader, ThrowingKernelBecomesATypedErrorAndTheProcessGoesOn) {
  bp::Backend& b = loader().load(fake("throwing"));
  const bp::TensorOptions on_it = bp::TensorOptions().device(device_of(b));
  bp::Tensor x = bp::full({2}, 5.0, on_it), y = bp::full({2}, 2.0, on_it);
  try {
    (void)(x + y);
    FAIL() << "the add kernel throws";
  } catch (const bp::Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("[add]", 0), 0u) << m;
    EXPECT_TRUE(contains(m, "'throwing'")) << m;
    EXPECT_TRUE(contains(m, "add kernel failed on purpose")) << m;
  }
  // The SDK's InvalidArgument arrives as the matching typed error.
  try {
    (void)(x * y);
    FAIL() << "the mul kernel throws";
  } catch (const bp::ValueError& e) {
    EXPECT_TRUE(contains(e.what(), "mul refuses these operands")) << e.what();
  }
  // A kernel without the SDK's trampoline throws through the C ABI: the
  // core stops the exception at the boundary.
  try {
    (void)(x / y);
    FAIL() << "the div kernel throws";
  } catch (const bp::Error& e) {
    EXPECT_TRUE(contains(e.what(),
                         "[div] backend 'throwing': a C++ exception that is not a "
                         "std::exception escaped the plugin"))
        << e.what();
  }
  EXPECT_EQ((x - y).to_vector<float>(), (std::vector<float>{3, 3}));
  EXPECT_EQ((bp::ones({2}) + bp::ones({2})).to_vector<float>(), (std::vector<float>{2, 2}));
}

TEST(Loader, ZeroDevicesLoadsAndSaysWhy) {
  bp::Backend& b = loader().load(fake("zero_devices"));
  EXPECT_EQ(b.device_count(), 0);
  EXPECT_TRUE(contains(b.no_device_reason(), "driver error 100")) << b.no_device_reason();
  // Allocating on it is an error that carries the reason.
  try {
    bp::zeros({2}, bp::TensorOptions().device(device_of(b)));
    FAIL() << "allocated on a backend without devices";
  } catch (const bp::Error& e) {
    EXPECT_TRUE(contains(e.what(), "zero_devices")) << e.what();
    EXPECT_TRUE(contains(e.what(), "driver error 100")) << e.what();
  }
  try {
    bp::device("zero_devices");
    FAIL() << "device() accepted a backend without devices";
  } catch (const bp::IndexError& e) {
    EXPECT_TRUE(contains(e.what(), "driver error 100")) << e.what();
  }
}

TEST(Loader, TensorsOnTwoBackendsDoNotMix) {
  bp::Backend& b = loader().load(fake("minimal"));
  bp::Tensor here = bp::ones({2}, bp::TensorOptions().device(device_of(b)));
  bp::Tensor cpu = bp::ones({2});
  try {
    (void)(here + cpu);
    FAIL() << "mixed devices were accepted";
  } catch (const bp::ValueError& e) {
    EXPECT_TRUE(contains(e.what(), "[add]")) << e.what();
    EXPECT_TRUE(contains(e.what(), "minimal:0")) << e.what();
    EXPECT_TRUE(contains(e.what(), "cpu_onednn:0")) << e.what();
  }
  // An explicit transfer works.
  EXPECT_EQ((here.to(cpu.device()) + cpu).to_vector<float>(), (std::vector<float>{2, 2}));
}

// The copy counters of the two_devices fake (tests/plugins/two_devices.cpp):
// copy_to_host calls, copy_from_host calls, copy_on_device calls, and the
// largest copy_from_host in bytes.
std::array<long, 4> two_devices_counts() {
  void* h = ::dlopen(fake("two_devices").c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) {
    ADD_FAILURE() << "two_devices is not loaded";
    return {};
  }
  auto fn = reinterpret_cast<void (*)(long*)>(::dlsym(h, "two_devices_copy_counts"));
  std::array<long, 4> c{};
  if (fn != nullptr)
    fn(c.data());
  else
    ADD_FAILURE() << "two_devices_copy_counts is not exported";
  ::dlclose(h);
  return c;
}

TEST(Loader, CopiesBetweenDevicesOfOnePluginStayInThePlugin) {
  bp::Backend& b = loader().load(fake("two_devices"));
  ASSERT_EQ(b.device_count(), 2);
  const bp::Device d0{static_cast<int16_t>(b.id()), 0}, d1{static_cast<int16_t>(b.id()), 1};
  std::vector<int32_t> v(1000);
  std::iota(v.begin(), v.end(), 0);
  const bp::Tensor a =
      bp::from_vector(v, {10, 100}, bp::TensorOptions(bp::DType::Int32).device(d0));
  const std::array<long, 4> before = two_devices_counts();
  // A transposed source and a dtype change: the bytes move once, device to
  // device, and the conversion runs on the destination.
  const bp::Tensor moved = a.t().to(d1, bp::DType::Float64);
  const std::array<long, 4> after = two_devices_counts();
  EXPECT_EQ(after[2] - before[2], 1) << "copy_on_device calls";
  EXPECT_EQ(after[0] - before[0], 0) << "copy_to_host calls";
  EXPECT_EQ(after[1] - before[1], 0) << "copy_from_host calls";
  EXPECT_EQ(moved.device(), d1);
  EXPECT_EQ(moved.dtype(), bp::DType::Float64);
  const std::vector<double> got = moved.to_vector<double>();
  ASSERT_EQ(got.size(), 1000u);
  for (int i = 0; i < 100; ++i)
    for (int j = 0; j < 10; ++j) ASSERT_EQ(got[i * 10 + j], j * 100 + i) << i << ", " << j;
}

TEST(Loader, CopiesBetweenPluginsGoThroughABoundedHostBuffer) {
  bp::Backend& b = loader().load(fake("two_devices"));
  const bp::Device d0{static_cast<int16_t>(b.id()), 0};
  const int64_t n = 3 * (int64_t{4} << 20) / 4 + 123;  // float32: three 4 MiB chunks and a bit
  const bp::Tensor a = bp::arange(n, bp::TensorOptions(bp::DType::Float32));
  const std::array<long, 4> before = two_devices_counts();
  const bp::Tensor there = a.to(d0);
  const std::array<long, 4> after = two_devices_counts();
  EXPECT_EQ(after[1] - before[1], 4) << "copy_from_host calls";
  EXPECT_LE(after[3], long{4} << 20) << "largest copy_from_host";
  EXPECT_EQ(there.to(a.device()).to_vector<float>(), a.to_vector<float>());
}

// --- finding plugins ---------------------------------------------------------------

TEST(Loader, DefaultBackendIsFoundBesideTheCoreLibrary) {
  bp::Backend& cpu = loader().load("cpu_onednn");
  EXPECT_EQ(cpu.name(), "cpu_onednn");
  EXPECT_EQ(fs::path(cpu.path()), fs::canonical(kPlugins + "/libbackplane_cpu_onednn.so"));
  EXPECT_EQ(loader().find("cpu_onednn"), &cpu);
  EXPECT_EQ(loader().by_id(cpu.id()), &cpu);
}

// A folder under the system's temporary directory, removed afterwards.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    path_ = fs::temp_directory_path() /
            ("backplane_loader_test_" + tag + "_" + std::to_string(::getpid()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

TEST(Loader, SearchOrderIsFlagFoldersThenEnvironmentThenDefaults) {
  TempDir flag("flag"), env1("env1"), env2("env2");
  ASSERT_EQ(::setenv("BACKPLANE_PLUGIN_PATH", (env1.str() + ":" + env2.str()).c_str(), 1), 0);
  loader().add_search_path(flag.str());
  const std::vector<std::string> dirs = loader().search_dirs();
  auto pos = [&](const std::string& d) {
    return std::find(dirs.begin(), dirs.end(), d) - dirs.begin();
  };
  const auto n = static_cast<long>(dirs.size());
  EXPECT_LT(pos(flag.str()), pos(env1.str()));
  EXPECT_LT(pos(env1.str()), pos(env2.str()));
  EXPECT_LT(pos(env2.str()), pos(kPlugins));
  EXPECT_LT(pos(kPlugins), n);

  // The same plugin file in the flag folder and in the environment's: the
  // flag folder's copy wins; once it is gone, the environment's is found.
  const std::string file = "libbackplane_search_probe.so";
  fs::copy_file(fake("search_probe"), flag.str() + "/" + file);
  fs::copy_file(fake("search_probe"), env2.str() + "/" + file);
  bp::Backend* b = &loader().load("search_probe");
  EXPECT_EQ(b->path(), fs::canonical(flag.str() + "/" + file).string());
  loader().unload("search_probe");
  fs::remove(flag.str() + "/" + file);
  b = &loader().load("search_probe");
  EXPECT_EQ(b->path(), fs::canonical(env2.str() + "/" + file).string());
  loader().unload("search_probe");
  ::unsetenv("BACKPLANE_PLUGIN_PATH");
}

TEST(Loader, LoadingTheSameFileTwiceGivesTheSameBackend) {
  bp::Backend& a = loader().load(fake("minimal"));
  bp::Backend& b = loader().load(kFakes + "/./libbackplane_minimal.so");
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(&loader().load("minimal"), &a);  // by name once loaded
}

TEST(Loader, TheSameFileUnderAHardLinkGivesTheSameBackend) {
  // The link lives beside the fakes: a hard link cannot cross file systems.
  const fs::path dir = fs::path(kFakes) / ("hardlink_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path twin = dir / "libbackplane_partial.so";
  fs::create_hard_link(fake("partial"), twin);
  bp::Backend& a = loader().load(fake("partial"));
  bp::Backend& b = loader().load(twin.string());
  std::error_code ec;
  fs::remove_all(dir, ec);
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(b.path(), fs::canonical(fake("partial")).string());
  EXPECT_EQ(&loader().load("partial"), &a);
}

TEST(Loader, DiscoverReportsEveryCandidateAndWhyItWasRejected) {
  TempDir dir("discover");
  for (const char* name : {"no_entry", "wrong_major", "zero_devices"})
    fs::copy_file(fake(name), dir.str() + "/libbackplane_" + name + ".so");
  loader().add_search_path(dir.str());
  const bool zero_loaded_before = loader().find("zero_devices") != nullptr;
  const std::vector<bp::PluginCandidate> found = loader().discover();
  auto find = [&](const std::string& name) -> const bp::PluginCandidate* {
    for (const auto& c : found)
      if (fs::path(c.path).parent_path() == fs::canonical(dir.str()) && c.name == name) return &c;
    return nullptr;
  };
  const bp::PluginCandidate* no_entry = find("no_entry");
  ASSERT_NE(no_entry, nullptr);
  EXPECT_FALSE(no_entry->loaded);
  EXPECT_TRUE(contains(no_entry->reason, "bp_plugin_init")) << no_entry->reason;
  const bp::PluginCandidate* wrong = find("wrong_major");
  ASSERT_NE(wrong, nullptr);
  EXPECT_FALSE(wrong->loaded);
  EXPECT_TRUE(contains(wrong->reason, "major")) << wrong->reason;
  // A backend without devices still loads (`backplane devices` shows why),
  // unless this program already loaded the same plugin from another file.
  const bp::PluginCandidate* zero = find("zero_devices");
  ASSERT_NE(zero, nullptr);
  if (zero_loaded_before) {
    EXPECT_FALSE(zero->loaded);
    EXPECT_TRUE(contains(zero->reason, "already loaded from")) << zero->reason;
  } else {
    EXPECT_TRUE(zero->loaded) << zero->reason;
    EXPECT_EQ(zero->backend->device_count(), 0);
  }
  // The real plugin is among the candidates.
  bool saw_cpu = false;
  for (const auto& c : found) saw_cpu |= c.loaded && c.name == "cpu_onednn";
  EXPECT_TRUE(saw_cpu);
}

// A folder scan (`backplane devices`) asks for no file by path: a second
// file of a loaded name found there is still refused, naming the first.
TEST(Loader, FolderScanRefusesAnotherFileOfALoadedNameNamingTheFirstsPath) {
  bp::Backend& first = loader().load(fake("dup_a"));
  TempDir dir("same_name");
  const std::string copy = dir.str() + "/libbackplane_dup_copy.so";
  fs::copy_file(fake("dup_b"), copy);
  loader().add_search_path(dir.str());
  const std::vector<bp::PluginCandidate> found = loader().discover();
  const auto it = std::find_if(found.begin(), found.end(), [&](const bp::PluginCandidate& c) {
    return c.path == fs::canonical(copy).string();
  });
  ASSERT_NE(it, found.end());
  EXPECT_FALSE(it->loaded);
  EXPECT_TRUE(contains(it->reason, "a plugin named 'dup' is already loaded from " +
                                       fs::canonical(fake("dup_a")).string()))
      << it->reason;
  EXPECT_TRUE(contains(it->reason, "give this file by path")) << it->reason;
  EXPECT_EQ(loader().find("dup"), &first);
  // Given by path, the same file loads beside the first.
  bp::Backend& copied = loader().load(copy);
  EXPECT_NE(&copied, &first);
  EXPECT_EQ(copied.label().rfind("dup#", 0), 0u) << copied.label();
  EXPECT_EQ(loader().find("dup"), &first);
}

// --- library lifetime ----------------------------------------------------------------

TEST(Loader, TensorKeepsItsLibraryAliveAfterUnload) {
  bp::Backend& b = loader().load(fake("keepalive"));
  const int id = b.id();
  bp::Tensor t = bp::from_vector(std::vector<float>{1.5f, -2.0f}, {2},
                                 bp::TensorOptions().device(device_of(b)));
  loader().unload("keepalive");
  // Neither its name nor its id finds it, so no new tensor lands on it.
  EXPECT_EQ(loader().find("keepalive"), nullptr);
  EXPECT_EQ(loader().by_id(id), nullptr);
  EXPECT_THROW(bp::zeros({2}, bp::TensorOptions().device(device_of(b))), bp::PluginError);
  // The library is still mapped, and the tensor still works: read, ops
  // (its kernels stay registered while it lives), copies to another device.
  EXPECT_TRUE(is_mapped(fake("keepalive")));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_NE(bp::KernelRegistry::instance().lookup(bp::Op::Add, id, bp::DType::Float32).fn, nullptr);
  EXPECT_EQ((t + t).to_vector<float>(), (std::vector<float>{3.0f, -4.0f}));
  EXPECT_EQ(t.to(bp::device("cpu_onednn")).to_vector<float>(), (std::vector<float>{1.5f, -2.0f}));
  // Loading it again gives a second, independent instance with a new id.
  bp::Backend& again = loader().load(fake("keepalive"));
  EXPECT_NE(again.id(), id);
  bp::Tensor u = bp::full({2}, 1.0, bp::TensorOptions().device(device_of(again)));
  t = bp::Tensor();  // the first instance's last tensor: it is destroyed
  EXPECT_EQ((u + u).to_vector<float>(), (std::vector<float>{2, 2}));
}

TEST(Loader, UnloadReloadCyclesReuseSlots) {
  // Far more cycles than slots: each instance goes with its last tensor and
  // its slot is taken again; a Device value of an old cycle names nothing.
  bp::Device first;
  for (int i = 0; i < 4 * bp::kMaxBackends; ++i) {
    bp::Backend& b = loader().load(fake("keepalive"));
    if (i == 0) first = device_of(b);
    bp::Tensor t = bp::full({2}, i, bp::TensorOptions().device(device_of(b)));
    EXPECT_EQ((t + t).to_vector<float>(), (std::vector<float>{2.0f * i, 2.0f * i}));
    loader().unload("keepalive");
  }
  EXPECT_EQ(loader().by_id(first.backend), nullptr);
  EXPECT_THROW(bp::zeros({2}, bp::TensorOptions().device(first)), bp::PluginError);
}

}  // namespace
