#include "engine/iterator.h"

#include <memory>
#include <utility>

#include "common/status_macros.h"
#include "engine/functions.h"
#include "engine/op_registry.h"
#include "engine/pipeline_validate.h"
#include "engine/random.h"

namespace sluice::engine {
namespace {

// Shared by every factory of one built pipeline; iterators may outlive BuildPipeline's
// arguments, so the definition and context are copied here.
struct BuiltPipeline {
  proto::PipelineDef def;
  PipelineContext context;
  const FunctionRegistry* functions;
  uint64_t pipeline_seed;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ElementIterator>> BuildPipeline(const proto::PipelineDef& def,
                                                               const PipelineContext& context) {
  const FunctionRegistry& functions =
      context.functions != nullptr ? *context.functions : FunctionRegistry::Builtins();
  SLUICE_RETURN_IF_ERROR(ValidatePipeline(def, functions));
  if (context.split_feed != nullptr) SLUICE_RETURN_IF_ERROR(ValidateSplittable(def));

  auto built = std::make_shared<const BuiltPipeline>(
      BuiltPipeline{def, context, &functions, CombineSeeds(RandomSeed(), context.seed_salt)});

  // Stage i's factory calls stage i-1's, so a repeat that re-creates its input rebuilds the
  // whole chain below it, down to a source that then asks for the next repetition.
  IteratorFactory factory;
  for (int i = 0; i < def.stages_size(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(const OpDef* op, OpRegistry::Global().ForStage(def.stages(i)));
    auto instances = std::make_shared<int64_t>(0);
    factory = [built, i, op, input = std::move(factory),
               instances]() -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
      OpBuildArgs args{.stage = built->def.stages(i),
                       .stage_index = i,
                       .context = built->context,
                       .functions = *built->functions,
                       .input = input,
                       .instance = (*instances)++,
                       .stage_seed = CombineSeeds(built->pipeline_seed, static_cast<uint64_t>(i))};
      return op->make_iterator(args);
    };
  }
  return factory();
}

}  // namespace sluice::engine
