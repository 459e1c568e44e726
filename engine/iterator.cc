#include "engine/iterator.h"

#include <any>
#include <memory>
#include <utility>

#include "common/status_macros.h"
#include "engine/functions.h"
#include "engine/op_registry.h"
#include "engine/pipeline_validate.h"
#include "engine/provenance.h"
#include "engine/random.h"

namespace sluice::engine {
namespace {

// Shared by every factory of one built pipeline, nested ones included; iterators may
// outlive BuildPipeline's arguments, so the definition and context are copied here.
struct BuiltPipeline {
  proto::PipelineDef def;
  PipelineContext context;
  // The same without the split feed: nested pipelines read their outer element instead.
  PipelineContext nested_context;
  const FunctionRegistry* functions;
  uint64_t pipeline_seed;
};

// The top-level stage whose ordinals are final (engine/provenance.h): the first interleave
// after a range, from_tensor_slices or list_files source when only element-wise stages
// lie between them (its outer elements then each have a one-element provenance to nest
// under), else the source. Readers' ordinals are already nested, so they stay final.
int FinalOrdinalStage(const proto::PipelineDef& def) {
  if (def.stages_size() == 0) return 0;
  switch (def.stages(0).op_case()) {
    case proto::Stage::kRange:
    case proto::Stage::kFromTensorSlices:
    case proto::Stage::kListFiles:
      break;
    default:
      return 0;
  }
  for (int i = 1; i < def.stages_size(); ++i) {
    switch (def.stages(i).op_case()) {
      case proto::Stage::kInterleave:
        return i;
      case proto::Stage::kBatch:
      case proto::Stage::kPaddedBatch:
      case proto::Stage::kBucketBySequenceLength:
      case proto::Stage::kUnbatch:
        return 0;
      default:
        break;
    }
  }
  return 0;
}

// The factory of the last stage of `chain` (which lives inside built->def). Stage i's
// factory calls stage i-1's, so a repeat that re-creates its input rebuilds the whole
// chain below it, down to a source that then asks for the next repetition.
absl::StatusOr<IteratorFactory> ChainFactory(const std::shared_ptr<const BuiltPipeline>& built,
                                             const proto::PipelineDef& chain,
                                             std::shared_ptr<const Element> source_element,
                                             uint64_t chain_seed, int final_stage,
                                             int64_t first_instance = 0) {
  const PipelineContext& context =
      source_element == nullptr ? built->context : built->nested_context;
  IteratorFactory factory;
  for (int i = 0; i < chain.stages_size(); ++i) {
    const proto::Stage& stage = chain.stages(i);
    SLUICE_ASSIGN_OR_RETURN(const OpDef* op, OpRegistry::Global().ForStage(stage));
    auto instances = std::make_shared<int64_t>(first_instance);
    auto state = std::make_shared<std::any>();
    factory = [built, &stage, &context, i, op, input = std::move(factory), instances, state,
               source_element, chain_seed,
               final_stage]() -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
      OpBuildArgs args{
          .stage = stage,
          .stage_index = i,
          .context = context,
          .functions = *built->functions,
          .input = input,
          .instance = (*instances)++,
          .stage_seed = CombineSeeds(chain_seed, static_cast<uint64_t>(i)),
          .source_element = source_element.get(),
          .build_nested =
              [built](const proto::PipelineDef& nested, Element element, uint64_t seed,
                      int64_t first_instance) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
            SLUICE_ASSIGN_OR_RETURN(
                IteratorFactory nested_factory,
                ChainFactory(built, nested, std::make_shared<const Element>(std::move(element)),
                             seed, /*final_stage=*/-1, first_instance));
            return nested_factory();
          },
          .stage_state = state,
          .final_ordinals = i == final_stage,
      };
      return op->make_iterator(args);
    };
  }
  return factory;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ElementIterator>> BuildPipeline(const proto::PipelineDef& def,
                                                               const PipelineContext& context) {
  const FunctionRegistry& functions =
      context.functions != nullptr ? *context.functions : GlobalFunctions();
  SLUICE_RETURN_IF_ERROR(ValidatePipeline(def, functions));
  if (context.split_feed != nullptr) SLUICE_RETURN_IF_ERROR(ValidateSplittable(def));

  auto built = std::make_shared<BuiltPipeline>(BuiltPipeline{
      def, context, context, &functions, CombineSeeds(RandomSeed(), context.seed_salt)});
  built->nested_context.split_feed = nullptr;
  int final_stage = -1;
  if (context.split_feed != nullptr) {
    if (built->context.delivered == nullptr) {
      built->context.delivered = std::make_shared<DeliveredRegistry>();
      built->nested_context.delivered = built->context.delivered;
    }
    final_stage = FinalOrdinalStage(def);
  }
  std::shared_ptr<const BuiltPipeline> shared = std::move(built);
  SLUICE_ASSIGN_OR_RETURN(
      IteratorFactory factory,
      ChainFactory(shared, shared->def, nullptr, shared->pipeline_seed, final_stage));
  return factory();
}

}  // namespace sluice::engine
