// PipelineOptionsTest.cpp - The named pipelines' options against their
// passes': one name and one default for an option both take (the passes'
// are generated from the pipelines' structs, strata-options-td), and every
// value the pipeline is given reaching every pass that takes it (the
// copies in Pipelines.cpp).

#include "passes/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

using namespace strata;

namespace {

using Values = std::map<std::string, std::string>;

/// "{a=1 b=x}" or "a=1 b=x" as name -> value (the values these tests use
/// hold no spaces or braces).
Values parseOptions(llvm::StringRef text) {
  text = text.trim();
  if (text.consume_front("{"))
    text.consume_back("}");
  Values out;
  while (!text.empty()) {
    auto [item, rest] = text.split(' ');
    auto [name, value] = item.split('=');
    if (!name.empty())
      out[name.str()] = value.str();
    text = rest.ltrim();
  }
  return out;
}

/// Each pass of a printed pipeline ("anchor(p1{...},p2,...)") with its
/// options.
std::map<std::string, Values> parsePipeline(llvm::StringRef text) {
  std::map<std::string, Values> out;
  size_t open = text.find('(');
  text = text.substr(open + 1).drop_back(); // The anchor's parentheses.
  while (!text.empty()) {
    size_t end = text.find_first_of(",{");
    std::string name = text.substr(0, end).trim().str();
    Values options;
    if (end != llvm::StringRef::npos && text[end] == '{') {
      size_t close = text.find('}', end);
      options = parseOptions(text.substr(end, close - end + 1));
      end = text.find(',', close);
    }
    out[name] = options;
    text = end == llvm::StringRef::npos ? "" : text.substr(end + 1);
  }
  return out;
}

template <typename Options> Values pipelineDefaults() {
  PipelineOptionsOf<Options> options;
  std::string text;
  llvm::raw_string_ostream os(text);
  options.print(os);
  return parseOptions(os.str());
}

Values passDefaults(std::unique_ptr<mlir::Pass> pass) {
  std::string text;
  llvm::raw_string_ostream os(text);
  pass->printAsTextualPipeline(os);
  llvm::StringRef printed(os.str());
  size_t brace = printed.find('{');
  return brace == llvm::StringRef::npos ? Values()
                                        : parseOptions(printed.substr(brace));
}

/// Every option both the pipeline and one of its passes declare has the
/// same default in both.
void expectSameDefaults(const Values &pipeline,
                        const std::map<std::string, Values> &passes) {
  for (const auto &[pass, options] : passes)
    for (const auto &[name, value] : options) {
      auto it = pipeline.find(name);
      if (it == pipeline.end())
        continue;
      EXPECT_EQ(it->second, value)
          << "--" << name << ": the pipeline's default and " << pass << "'s";
    }
}

/// Builds the pipeline from `given` and checks that every pass declaring
/// one of its options got the given value, and that the options no pass
/// takes are exactly `own` (the pipeline's shape: which passes run).
template <typename Options>
void expectValuesReachPasses(void (*build)(mlir::OpPassManager &,
                                           const Options &),
                             llvm::StringRef given,
                             const std::set<std::string> &own) {
  PipelineOptionsOf<Options> parsed;
  ASSERT_TRUE(mlir::succeeded(parsed.parseFromString(given)));
  Options options;
  std::string error;
  ASSERT_TRUE(parsed.get(options, error)) << error;
  mlir::OpPassManager pm("builtin.module");
  build(pm, options);
  std::string text;
  llvm::raw_string_ostream os(text);
  pm.printAsTextualPipeline(os);
  std::map<std::string, Values> passes = parsePipeline(os.str());
  // The given values as the options print them (as the passes print
  // theirs: a double as a double, whatever the text said).
  std::string printed;
  llvm::raw_string_ostream po(printed);
  parsed.print(po);
  Values all = parseOptions(po.str()), values;
  for (const auto &[name, value] : parseOptions(given))
    values[name] = all[name];
  for (const auto &[name, value] : all) {
    bool taken = false;
    for (const auto &[pass, options] : passes) {
      auto it = options.find(name);
      if (it == options.end())
        continue;
      taken = true;
      if (values.count(name)) {
        EXPECT_EQ(values[name], it->second)
            << pass << " did not get " << name << "=" << values[name]
            << " from the pipeline";
      }
    }
    EXPECT_EQ(!taken, own.count(name) > 0)
        << name
        << (taken ? " is the pipeline's own but a pass takes it"
                  : " reaches no pass of the pipeline");
  }
}

TEST(PipelineOptions, TierDefaultsAreThePassesDefaults) {
  std::map<std::string, Values> passes = {
      {"strata-low-copies", passDefaults(createLowPrecisionCopiesPass())},
      {"strata-place-tiers", passDefaults(createPlaceTiersPass())},
      {"strata-offload-optimizer", passDefaults(createOffloadOptimizerPass())},
      {"strata-plan-memory", passDefaults(createPlanMemoryPass())},
      {"strata-predict-time", passDefaults(createPredictTimePass())}};
  expectSameDefaults(pipelineDefaults<TierOptions>(), passes);
  EXPECT_EQ(passes["strata-place-tiers"].count("place-updates"), 1u);
}

TEST(PipelineOptions, TrainingDefaultsAreThePassesDefaults) {
  std::map<std::string, Values> passes = {
      {"strata-append-loss", passDefaults(createAppendLossPass())},
      {"strata-autocast", passDefaults(createAutocastPass())},
      {"strata-attach-optimizer", passDefaults(createAttachOptimizerPass())}};
  expectSameDefaults(pipelineDefaults<TrainingOptions>(), passes);
  EXPECT_EQ(passes["strata-attach-optimizer"].count("lr"), 1u);
}

TEST(PipelineOptions, TierValuesReachEveryPass) {
  expectValuesReachPasses<TierOptions>(
      buildForwardToExecPipeline,
      "place-params=host place-states=ssd place-activations=recompute "
      "place-gradients=host place-updates=cpu cpu-job-bytes=4096 "
      "speculate-updates=false low-copies=on defer-copy-values=true "
      "planner-evaluations=7 planner-threads=3 prefetch-lead=2.5 "
      "planner-check=true progress=true gpu-mem=2097152 cpu-mem=1048576 "
      "has-ssd=true profile=some.profile",
      {"low-copies"});
  // Without the copies their pass is not in the pipeline.
  expectValuesReachPasses<TierOptions>(buildForwardToExecPipeline,
                                       "low-copies=off",
                                       {"low-copies", "defer-copy-values"});
}

TEST(PipelineOptions, TrainingValuesReachEveryPass) {
  expectValuesReachPasses<TrainingOptions>(
      buildTrainingPipeline,
      "loss=output optimizer=sgd lr=0.25 momentum=0.5 beta1=0.75 "
      "beta2=0.875 eps=0.125 weight-decay=0.0625 clip-grad-norm=2 "
      "accumulate=3 clip-mode=two-pass loss-scale=dynamic "
      "loss-scale-init=8 loss-scale-window=9 fuse-updates=true "
      "precision=bf16 data-parallel=2",
      {"fuse-updates", "gradients-only"});
}

TEST(PipelineOptions, SizesTakeUnitsAndRefuseTheRest) {
  PipelineOptionsOf<TierOptions> parsed;
  ASSERT_TRUE(mlir::succeeded(
      parsed.parseFromString("gpu-mem=24GiB cpu-mem=1000 place-states=ssd")));
  TierOptions options;
  std::string error;
  ASSERT_TRUE(parsed.get(options, error)) << error;
  EXPECT_EQ(options.gpuMem, uint64_t(24) << 30);
  EXPECT_EQ(options.cpuMem, 1000u);
  EXPECT_EQ(options.placeStates, "ssd");
  EXPECT_EQ(options.placeParams, "auto");

  PipelineOptionsOf<TierOptions> bad;
  ASSERT_TRUE(mlir::succeeded(bad.parseFromString("cpu-mem=12XB")));
  EXPECT_FALSE(bad.get(options, error));
  EXPECT_NE(error.find("cpu-mem='12XB'"), std::string::npos) << error;
}

} // namespace
