// The table of pipeline ops: the one place that knows, for every op, its text
// name and parameters, how to validate it, its cardinality and how to build its
// iterator. Parsing, formatting, validation, cardinality and BuildPipeline all
// dispatch through it, so adding an op means adding one OpDef (engine/ops/).
//
//   const OpDef* op = OpRegistry::Global().Find("batch");
//   SLUICE_ASSIGN_OR_RETURN(const OpDef* op, OpRegistry::Global().ForStage(stage));
//
// Global() is immutable and safe to use from any thread.
#ifndef SLUICE_ENGINE_OP_REGISTRY_H_
#define SLUICE_ENGINE_OP_REGISTRY_H_

#include <any>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/functions.h"
#include "engine/iterator.h"
#include "engine/op_args.h"
#include "engine/pipeline.pb.h"

namespace sluice::engine {

// Creates a fresh iterator over a stage's input; every call starts a new pass.
using IteratorFactory = std::function<absl::StatusOr<std::unique_ptr<ElementIterator>>()>;

// What an op gets when one of its iterators is built. References are valid only during
// the make_iterator call; copy what the iterator keeps.
struct OpBuildArgs {
  const proto::Stage& stage;
  int stage_index;
  const PipelineContext& context;
  // context.functions, or the built-ins when that is null.
  const FunctionRegistry& functions;
  // Null for sources.
  IteratorFactory input;
  // How many iterators of this stage were built before this one. For a source that is the
  // repetition index handed to the SplitFeed; shuffle reshuffles by it.
  int64_t instance;
  // Per-build, per-stage entropy (random, mixed with context.seed_salt); constant across
  // instances so unseeded shuffles without reshuffle_each_iteration repeat their order.
  uint64_t stage_seed;
  // For a source built inside interleave: the outer element it reads (e.g. a file name as
  // component 0). Null at the top level, where sources read the split feed instead.
  const Element* source_element = nullptr;
  // Builds `nested` (an interleave's pipeline) so that its source reads `element`; `seed`
  // is mixed into its unseeded shuffles, and its stages count their instances from
  // `first_instance` (the interleave's own, so that a shuffle that reshuffles each iteration
  // does so each pass). The result may outlive this OpBuildArgs.
  std::function<absl::StatusOr<std::unique_ptr<ElementIterator>>(
      const proto::PipelineDef& nested, Element element, uint64_t seed, int64_t first_instance)>
      build_nested;
  // Shared by every iterator this stage builds within one built pipeline (cache keeps its
  // elements here); starts empty. Iterators of a stage never run concurrently.
  std::shared_ptr<std::any> stage_state;
  // DYNAMIC pipelines (engine/provenance.h): true for the one top-level stage whose
  // ordinals are the elements' final identities, so it drops delivered elements: the
  // source, or the interleave that re-tags the source's elements (then the source tags
  // without dropping). False everywhere else, and for every stage without a split feed.
  bool final_ordinals = false;
};

struct ParamDef {
  std::string name;
  bool required = false;
};

struct OpDef {
  std::string name;
  proto::Stage::OpCase op_case = proto::Stage::OP_NOT_SET;
  bool is_source = false;
  // A source whose elements are addressable by index, so it can read a SplitFeed (DYNAMIC
  // sharding) and the split library can carve it up.
  bool splittable = false;
  // Non-empty for ops that must not run under DYNAMIC sharding; ValidateSplittable
  // reports it, e.g. cache: "it would replay the first repetition's splits".
  std::string dynamic_unsupported;
  // For sources: whether this stage reads OpBuildArgs::source_element (e.g. tfrecord
  // without files=[...]), which only interleave's nested pipelines provide. Null: never.
  std::function<bool(const proto::Stage& stage)> reads_source_element;
  // Text-form parameters, in positional order.
  std::vector<ParamDef> params;
  // Names bound to `count` positional args; null means the first `count` params.
  std::function<absl::StatusOr<std::vector<std::string>>(size_t count)> positional_names;
  // Fills the op's message in `*stage` from named args (positionals already resolved and
  // required args known present). Applies defaults.
  std::function<absl::Status(const OpArgs& args, proto::Stage* stage)> from_args;
  // Canonical arguments for FormatPipeline; must parse back (via from_args) to `stage`.
  std::function<std::vector<FormattedArg>(const proto::Stage& stage)> to_args;
  // Checks the op's own fields. `functions` may be null: then skip checks that need one.
  std::function<absl::Status(const proto::Stage& stage, const FunctionRegistry* functions)>
      validate;
  // Elements produced given the input's count (kInfinite, kUnknown, or >= 0; sources get 0).
  std::function<absl::StatusOr<int64_t>(const proto::Stage& stage, int64_t input)> cardinality;
  std::function<absl::StatusOr<std::unique_ptr<ElementIterator>>(const OpBuildArgs& args)>
      make_iterator;
};

class OpRegistry {
 public:
  // InvalidArgument when a hook is missing or the name is not a NAME token; AlreadyExists
  // when the name or op_case is taken.
  [[nodiscard]] absl::Status Register(OpDef def);

  const OpDef* Find(std::string_view name) const;
  const OpDef* Find(proto::Stage::OpCase op_case) const;
  // InvalidArgument when the stage has no op set or no op handles its case.
  [[nodiscard]] absl::StatusOr<const OpDef*> ForStage(const proto::Stage& stage) const;
  // Sorted.
  std::vector<std::string> Names() const;
  // Sorted names of ops with the given property, for error messages.
  std::vector<std::string> SourceNames(bool splittable_only) const;

  // The built-in ops (see Names()).
  static const OpRegistry& Global();

 private:
  // unique_ptr: Find's pointers must survive later registrations.
  std::map<std::string, std::unique_ptr<OpDef>, std::less<>> by_name_;
  std::map<int, const OpDef*> by_case_;
};

// "stage 2 (batch)", or "stage 2" when the stage has no known op.
std::string StageLabel(int index, const proto::Stage& stage);

// `status` with "<prefix>: " in front of its message; OK stays OK.
absl::Status PrefixStatus(std::string_view prefix, const absl::Status& status);

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OP_REGISTRY_H_
