// The backend's life cycle: unloading it while its tensors live and loading
// it again (DV-4), which runs a second instance of the plugin in the same
// library; the instances must not disturb each other (DV-5). These cases
// unload the backend under test, so they run only in a process of their own.
#include <backplane/conformance.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "case_checks.h"
#include "case_util.h"

namespace bp::conformance {

namespace {

constexpr const char* kCategory = "device";

void need_own_process(const Context& ctx) {
  if (!ctx.own_process())
    BP_SKIP(
        "unloads the backend under test: runs only with a process per case "
        "(without --no-isolate)");
}

std::vector<double> times(std::vector<double> v, double k) {
  for (double& x : v) x *= k;
  return v;
}

void reload_while_tensors_live(const Context& ctx) {
  need_own_process(ctx);
  PluginLoader& loader = PluginLoader::instance();
  const std::string path = ctx.backend().path(), name = ctx.backend().name();
  const Device first = ctx.device();
  const std::vector<double> iota = host_iota(64);
  Tensor a = from_vector(iota, {8, 8}, ctx.options());
  Tensor b = a * 2;

  loader.unload(name);
  BP_EXPECT(loader.find(name) == nullptr, "an unloaded backend is not found by name");
  // Its tensors keep working: read, ops, copies.
  BP_EXPECT_VALUES(a, iota);
  BP_EXPECT_VALUES(a + b, times(iota, 3));
  BP_EXPECT_VALUES(b.t().contiguous().t(), times(iota, 2));
  Tensor on_ref = a.to(reference_device());
  BP_EXPECT_VALUES(on_ref, iota);
  // A Device value naming it names nothing now.
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(bp::PluginError, zeros({2}, TensorOptions().device(first))),
                     "not loaded");

  // A second instance of the same library, while the first one's tensors live.
  Backend& again = loader.load(path);
  BP_EXPECT(again.id() != first.backend, "a reloaded backend gets a new id");
  const Device second{static_cast<int16_t>(again.id()), first.index};
  Tensor c = from_vector(iota, {8, 8}, TensorOptions().device(second));
  Tensor a2 = a.to(second);  // from the first instance to the second
  BP_EXPECT_VALUES(a2 + c, times(iota, 2));

  // Destroying the first instance (its last tensors go) must leave the
  // second one's memory and state alone.
  a = Tensor();
  b = Tensor();
  BP_EXPECT_VALUES(c, iota);
  BP_EXPECT_VALUES(a2, iota);
  std::vector<Tensor> more;
  for (int i = 0; i < 16; ++i) more.push_back(full({64, 64}, i, TensorOptions().device(second)));
  for (int i = 0; i < 16; ++i) BP_EXPECT_VALUES(more[i].sum(), {64.0 * 64.0 * i});
  BP_EXPECT_VALUES((c * 3).sub(a2), times(iota, 2));
  BP_EXPECT_VALUES(on_ref, iota);
}

void reload_cycles_reuse_ids(const Context& ctx) {
  need_own_process(ctx);
  PluginLoader& loader = PluginLoader::instance();
  const std::string path = ctx.backend().path(), name = ctx.backend().name();
  Tensor keep = full({4}, 7, ctx.options());  // the first instance stays alive throughout
  // More cycles than there are backend slots: each cycle's instance goes
  // with its last tensor, and its slot is reused.
  for (int i = 0; i < 3 * kMaxBackends; ++i) {
    loader.unload(name);
    Backend& b = loader.load(path);
    const Device d{static_cast<int16_t>(b.id()), 0};
    Tensor t = full({4}, i, TensorOptions().device(d));
    BP_EXPECT_EQ((t + 1).to_vector<double>(), std::vector<double>(4, i + 1.0), "cycle ", i);
  }
  BP_EXPECT_VALUES(keep * 2, {14, 14, 14, 14});
}

void same_library_twice(const Context& ctx) {
  need_own_process(ctx);
  // The same file under a second path (a hard link): the dynamic loader
  // gives back the library already loaded, and loading it gives back the
  // backend already made from it: no second bp_plugin_init, one instance.
  namespace fs = std::filesystem;
  const fs::path original = ctx.backend().path();
  const fs::path dir =
      fs::temp_directory_path() / ("backplane-conformance-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::create_directories(dir, ec);
  const fs::path twin = dir / original.filename();
  fs::create_hard_link(original, twin, ec);
  if (ec) {
    fs::remove_all(dir, ec);
    BP_SKIP("could not hard-link ", original.string(), " into ", dir.string());
  }
  Tensor a = from_vector(host_iota(32), {32}, ctx.options());
  const Backend& again = PluginLoader::instance().load(twin.string());
  fs::remove_all(dir, ec);
  BP_EXPECT(&again == &ctx.backend(), "loading ", twin.string(), " made backend ", again.id(), " (",
            again.path(), "), not the loaded ", ctx.backend().id());
  BP_EXPECT_VALUES(a, host_iota(32));
  Tensor b = from_vector(host_iota(32), {32}, ctx.options());
  BP_EXPECT_VALUES(a + b, times(host_iota(32), 2));
}

}  // namespace

void add_lifecycle_cases(Suite& suite) {
  auto add = [&suite](const char* name, std::vector<std::string> ids, void (*fn)(const Context&)) {
    suite.add({std::string("device.") + name, std::move(ids), kCategory, fn});
  };
  add("reload_while_tensors_live", {"DV-4", "DV-5"}, reload_while_tensors_live);
  add("reload_cycles_reuse_ids", {"DV-4"}, reload_cycles_reuse_ids);
  add("same_library_twice", {"DV-5"}, same_library_twice);
}

}  // namespace bp::conformance
