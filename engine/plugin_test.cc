#include "engine/plugin.h"
#include "engine/plugin_api.h"

#include "absl/strings/str_cat.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "engine/pipeline_text.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::Drain;
using ::sluice::engine::testing::ScalarInt64s;
using ::sluice::engine::testing::ScalarStrings;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// meson passes the paths of the libraries built for this test.
std::string Library(const char* env) {
  const char* path = std::getenv(env);
  return path != nullptr ? path : "";
}

absl::StatusOr<std::vector<Element>> RunWith(const std::string& text,
                                             const FunctionRegistry& functions) {
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline(text);
  if (!def.ok()) return def.status();
  PipelineContext context;
  context.functions = &functions;
  absl::StatusOr<std::unique_ptr<ElementIterator>> it = BuildPipeline(*def, context);
  if (!it.ok()) return it.status();
  return Drain(**it);
}

TEST(PluginTest, LoadedFunctionsRunInPipelines) {
  const std::string path = Library("SLUICE_EXAMPLE_PLUGIN");
  ASSERT_FALSE(path.empty()) << "SLUICE_EXAMPLE_PLUGIN is not set";
  FunctionRegistry registry = FunctionRegistry::Builtins();
  ASSERT_TRUE(LoadPlugin(path, &registry).ok());
  absl::StatusOr<std::vector<Element>> doubled =
      RunWith("range(4) | map(example.double)", registry);
  ASSERT_TRUE(doubled.ok()) << doubled.status();
  EXPECT_THAT(ScalarInt64s(*doubled), ElementsAre(0, 2, 4, 6));
  absl::StatusOr<std::vector<Element>> words = RunWith(
      "from_tensor_slices(['abc', 'sluice', 'data']) | filter(example.longer_than_3) | "
      "map(example.reverse, parallel=2)",
      registry);
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_THAT(ScalarStrings(*words), ElementsAre("eciuls", "atad"));
  EXPECT_THAT(
      RunWith("from_tensor_slices(['a']) | map(example.double)", registry).status().message(),
      HasSubstr("map(example.double): example.double expects numeric components, got "
                "string"));
  // Without the plugin the name is unknown.
  EXPECT_THAT(
      RunWith("range(4) | map(example.double)", FunctionRegistry::Builtins()).status().message(),
      HasSubstr("unknown function 'example.double'"));
  // Loading it again would register the same names twice.
  absl::Status again = LoadPlugin(path, &registry);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.message(), HasSubstr("registers function 'example.double', which is already "
                                         "registered"));
}

TEST(PluginTest, GlobalFunctionsIsWhatPipelinesUseByDefault) {
  ASSERT_TRUE(LoadPlugin(Library("SLUICE_EXAMPLE_PLUGIN"), &GlobalFunctions()).ok());
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline("range(3) | map(example.double)");
  ASSERT_TRUE(def.ok());
  absl::StatusOr<std::unique_ptr<ElementIterator>> it = BuildPipeline(*def, {});
  ASSERT_TRUE(it.ok()) << it.status();
  EXPECT_THAT(ScalarInt64s(*Drain(**it)), ElementsAre(0, 2, 4));
}

TEST(PluginTest, BadLibrariesGiveClearErrors) {
  FunctionRegistry registry;
  absl::Status missing = LoadPlugin("/nonexistent/libnope.so", &registry);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), "plugin '/nonexistent/libnope.so' does not exist");

  const std::string not_plugin = Library("SLUICE_NOT_A_PLUGIN");
  absl::Status plain = LoadPlugin(not_plugin, &registry);
  EXPECT_EQ(plain.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plain.message(), HasSubstr("'" + not_plugin +
                                         "' is not a Sluice plugin: expected it to export "
                                         "sluice_plugin_abi and sluice_plugin_register"));

  absl::Status wrong = LoadPlugin(Library("SLUICE_WRONG_ABI_PLUGIN"), &registry);
  EXPECT_EQ(wrong.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(wrong.message(), HasSubstr("was built for another Sluice plugin ABI: expected "
                                         "version " +
                                         std::to_string(kPluginAbiVersion)));
  EXPECT_THAT(wrong.message(), HasSubstr(absl::StrCat("got version ", kPluginAbiVersion + 998)));

  testing::TempDir dir;
  testing::WriteFile(dir.path() + "/text.so", "not an ELF file");
  absl::Status text = LoadPlugin(dir.path() + "/text.so", &registry);
  EXPECT_EQ(text.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.message(),
              HasSubstr("cannot load plugin '" + dir.path() + "/text.so' as a shared library"));
  EXPECT_TRUE(registry.Names().empty());
}

}  // namespace
}  // namespace sluice::engine
