#include "engine/ops/prefetch_op.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/prefetch_iterator.h"

namespace sluice::engine {
namespace {

// Far above any useful prefetch depth; guards memory against typos like prefetch(1e9).
constexpr int64_t kMaxBufferSize = 1 << 16;

}  // namespace

OpDef PrefetchOpDef() {
  OpDef def;
  def.name = "prefetch";
  def.op_case = proto::Stage::kPrefetch;
  def.params = {{"buffer_size", true}};
  def.from_args = [](const OpArgs& args, proto::Stage* stage) -> absl::Status {
    SLUICE_ASSIGN_OR_RETURN(int64_t n, args.GetInt("buffer_size", 0));
    stage->mutable_prefetch()->set_buffer_size(n);
    return absl::OkStatus();
  };
  def.to_args = [](const proto::Stage& stage) {
    return std::vector<FormattedArg>{
        {"buffer_size", ArgValue::Integer(stage.prefetch().buffer_size()), true}};
  };
  def.validate = [](const proto::Stage& stage, const FunctionRegistry*) {
    const int64_t n = stage.prefetch().buffer_size();
    if (n < 1 || n > kMaxBufferSize) {
      return absl::InvalidArgumentError(
          absl::StrCat("buffer_size must be in [1, ", kMaxBufferSize, "], got ", n));
    }
    return absl::OkStatus();
  };
  def.cardinality = [](const proto::Stage&, int64_t input) -> absl::StatusOr<int64_t> {
    return input;
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ElementIterator> input, args.input());
    return std::make_unique<PrefetchIterator>(std::move(input),
                                              args.stage.prefetch().buffer_size());
  };
  return def;
}

}  // namespace sluice::engine
