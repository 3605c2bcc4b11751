// StrataModule.cpp - Python bindings of the Strata runtime (pybind11).
//
//   import strata_runtime as rt
//   art = rt.Artifact("model.strata")            # backend, budgets optional
//   trainer = art.trainer(checkpoint_dir=..., resume=False,
//                         resume_by_name=False)
//   metrics = trainer.step({"input_ids": ids, "labels": labels})
//   trainer.save(); weights = trainer.parameters()
//   outputs = rt.Artifact("fwd.strata").run({"input_ids": ids})
//
// A step goes through trainer::Session, the code strata-run's loop uses, so
// the same batches give the same bits. Like the rest of the runtime, no
// LLVM inside; errors are Python exceptions (RuntimeError, ValueError).

#include "runtime/exec/BackendRegistry.h"
#include "runtime/exec/Executor.h"
#include "runtime/support/Checked.h"
#include "runtime/train/DataParallel.h"
#include "runtime/train/Session.h"
#include "runtime/train/Trainer.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>

namespace py = pybind11;
using namespace strata;

namespace {

[[noreturn]] void fail(const std::string &error) {
  throw std::runtime_error(error);
}

/// The NumPy dtype of a runtime type (bf16 has none: read as float32).
py::dtype numpyType(DType t) {
  switch (t) {
  case DType::F32:
    return py::dtype::of<float>();
  case DType::F64:
    return py::dtype::of<double>();
  case DType::F16:
    return py::dtype("float16");
  case DType::BF16:
    return py::dtype::of<float>();
  case DType::I64:
    return py::dtype::of<int64_t>();
  case DType::I32:
    return py::dtype::of<int32_t>();
  case DType::I16:
    return py::dtype::of<int16_t>();
  case DType::I8:
    return py::dtype::of<int8_t>();
  case DType::U8:
    return py::dtype::of<uint8_t>();
  case DType::U16:
    return py::dtype::of<uint16_t>();
  case DType::U32:
    return py::dtype::of<uint32_t>();
  case DType::U64:
    return py::dtype::of<uint64_t>();
  case DType::Bool:
    return py::dtype::of<bool>();
  }
  return py::dtype::of<float>();
}

py::array toNumpy(DType dtype, const std::vector<int64_t> &shape,
                  const char *data, size_t bytes) {
  std::vector<py::ssize_t> dims(shape.begin(), shape.end());
  if (dtype == DType::BF16) {
    py::array_t<float> out(dims);
    float *dst = out.mutable_data();
    for (size_t i = 0; i < bytes / 2; ++i) {
      uint16_t b;
      std::memcpy(&b, data + 2 * i, 2);
      uint32_t w = uint32_t(b) << 16;
      std::memcpy(dst + i, &w, 4);
    }
    return std::move(out);
  }
  py::array out(numpyType(dtype), dims);
  std::memcpy(out.mutable_data(), data, bytes);
  return out;
}

/// `value` as the slot's type and shape (NumPy casts the element type, as
/// np.asarray(value, dtype) would; the shape must match).
npy::Array fromNumpy(const std::string &name, const artifact::Slot &slot,
                     const py::handle &value) {
  if (slot.dtype == DType::BF16)
    throw py::value_error("input '" + name +
                          "' is bfloat16, which NumPy "
                          "cannot give");
  py::array a = py::array::ensure(py::module_::import("numpy").attr("asarray")(
                                      value, numpyType(slot.dtype)),
                                  py::array::c_style);
  if (!a)
    throw py::value_error("input '" + name + "' is not an array");
  std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
  if (shape != slot.shape)
    throw py::value_error("input '" + name + "' has shape " +
                          npy::shapeString(shape) + "; the plan takes " +
                          npy::shapeString(slot.shape));
  npy::Array out;
  out.dtype = slot.dtype;
  out.shape = shape;
  out.data.resize(static_cast<size_t>(a.nbytes()));
  std::memcpy(out.data.data(), a.data(), out.data.size());
  return out;
}

/// The plan's input `name`; a KeyError naming it when there is none.
const artifact::Binding &inputOf(const artifact::Plan &plan,
                                 const std::string &name) {
  for (const artifact::Binding &b : plan.inputs)
    if (b.name == name)
      return b;
  throw py::key_error("the plan has no input '" + name + "'");
}

/// An opened artifact with a prepared executor.
using Inputs = std::vector<std::pair<std::string, npy::Array>>;

/// A batch {name: array} as the plan's input arrays, all converted before
/// any is set, so a bad one changes nothing.
Inputs convertInputs(const artifact::Plan &plan, const py::dict &batch) {
  Inputs out;
  for (auto item : batch) {
    std::string name = py::str(item.first);
    out.emplace_back(name, fromNumpy(name, plan.slots[inputOf(plan, name).slot],
                                     item.second));
  }
  return out;
}

class Artifact {
public:
  Artifact(const std::string &path, std::optional<std::string> backend,
           uint64_t deviceMem, std::vector<std::string> ssdDirs, bool overlap)
      : path_(path) {
    std::string error;
    // Under mpirun: one rank of a data-parallel run.
    world_ = comm::worldCommunicator(error);
    if (!world_ || !trainer::rankSsdDirs(path, *world_, ssdDirs, error))
      fail(error);
    if (!art_.open(path, error, ssdDirs, artifact::Artifact::Access::ReadWrite,
                   world_->rank()))
      fail(error);
    executor_ = std::make_unique<runtime::Executor>(art_);
    runtime::ExecutorOptions options;
    options.communicator = world_.get();
    options.deviceBudget = deviceMem;
    options.overlapTransfers = overlap;
    if (backend) {
      options.backend = *backend;
    } else {
      const char *env = std::getenv("STRATA_BACKEND");
      options.backend = env && *env ? env : runtime::defaultBackendName();
    }
    if (!executor_->prepare(options, error))
      fail(error);
  }

  std::string mode() const { return art_.plan().mode; }
  int rank() const { return world_->rank(); }
  int worldSize() const { return world_->size(); }
  comm::Communicator *world() { return world_.get(); }
  py::list bindings(const std::vector<artifact::Binding> &list) const {
    py::list out;
    for (const artifact::Binding &b : list) {
      const artifact::Slot &s = art_.plan().slots[b.slot];
      out.append(py::make_tuple(b.name, py::tuple(py::cast(s.shape)),
                                dtypeName(s.dtype)));
    }
    return out;
  }
  py::list inputs() const { return bindings(art_.plan().inputs); }
  py::list outputs() const { return bindings(art_.plan().outputs); }

  void setInputs(const py::dict &inputs) {
    std::string error;
    for (const auto &[name, array] : convertInputs(art_.plan(), inputs))
      if (!executor_->setInput(name, array, error))
        throw py::value_error(error);
  }

  py::dict readOutputs() {
    py::dict out;
    std::string error;
    for (const artifact::Binding &b : art_.plan().outputs) {
      npy::Array a;
      if (!executor_->getOutput(b.name, a, error))
        fail(error);
      out[py::str(b.name)] =
          toNumpy(a.dtype, a.shape, a.data.data(), a.data.size());
    }
    return out;
  }

  /// Runs a forward plan once.
  py::dict run(const py::dict &inputs) {
    if (mode() != "forward")
      fail("'" + path_ + "' is a training plan; use trainer()");
    if (inputs.size() != art_.plan().inputs.size())
      throw py::value_error("the plan takes " +
                            std::to_string(art_.plan().inputs.size()) +
                            " inputs, given " + std::to_string(inputs.size()));
    setInputs(inputs);
    std::string error;
    bool ok;
    {
      py::gil_scoped_release release;
      ok = executor_->run(error);
    }
    if (!ok)
      fail(error);
    return readOutputs();
  }

  artifact::Artifact &artifact() { return art_; }
  runtime::Executor &executor() { return *executor_; }
  const std::string &path() const { return path_; }

private:
  std::string path_;
  // Declared first: it outlives the executor that uses it.
  std::unique_ptr<comm::Communicator> world_;
  artifact::Artifact art_;
  std::unique_ptr<runtime::Executor> executor_;
};

/// Whether an integer labels array holds no label the loss counts.
bool noLabelKept(const npy::Array &a) {
  size_t n = static_cast<size_t>(a.numElements());
  for (size_t i = 0; i < n; ++i) {
    int64_t v = 0;
    if (a.dtype == DType::I64)
      std::memcpy(&v, a.data.data() + 8 * i, 8);
    else if (a.dtype == DType::I32) {
      int32_t w;
      std::memcpy(&w, a.data.data() + 4 * i, 4);
      v = w;
    } else {
      return false;
    }
    if (v >= 0)
      return false;
  }
  return n > 0;
}

/// A training run of an artifact, driven a step at a time.
class Trainer {
public:
  Trainer(Artifact &art, std::optional<std::string> checkpointDir, bool resume,
          bool resumeByName, const std::string &onNan, bool quiet)
      : art_(art), session_(art.artifact(), art.executor()) {
    trainer::SessionOptions options;
    options.checkpointDir =
        checkpointDir ? *checkpointDir : art.path() + "/checkpoint";
    options.resume = resume || resumeByName;
    options.resumeByName = resumeByName;
    options.quiet = quiet || art.rank() != 0;
    options.comm = art.world();
    if (onNan == "skip")
      options.onNan = trainer::OnNan::Skip;
    else if (onNan != "stop")
      throw py::value_error("on_nan must be 'stop' or 'skip', not '" + onNan +
                            "'");
    std::string error;
    if (!session_.open(options, error))
      fail(error);
  }

  int64_t completedSteps() const { return session_.completedSteps(); }
  int64_t accumulate() const { return art_.artifact().plan().accumulate; }

  /// One step: `batches` is a dict of inputs, or a list of one dict per
  /// micro-batch when the plan accumulates gradients.
  py::dict step(const py::object &batches) {
    std::vector<py::dict> micro;
    if (py::isinstance<py::dict>(batches)) {
      micro.push_back(batches.cast<py::dict>());
    } else {
      for (auto b : batches)
        micro.push_back(b.cast<py::dict>());
    }
    if (static_cast<int64_t>(micro.size()) != accumulate())
      throw py::value_error(
          "the plan accumulates " + std::to_string(accumulate()) +
          " micro-batches a step; given " + std::to_string(micro.size()));
    // Converted before the step runs, so a bad array changes nothing.
    std::vector<Inputs> arrays;
    for (const py::dict &d : micro) {
      arrays.push_back(inputs(d));
      for (const auto &[name, array] : arrays.back())
        if (name == "labels" && noLabelKept(array))
          throw py::value_error(
              "every label of the batch is ignored (negative), so its loss "
              "averages over nothing; drop rows whose labels are all -100");
    }
    trainer::StepMetrics m;
    std::string error;
    bool ok;
    {
      py::gil_scoped_release release;
      ok = session_.step(
          [&](int64_t j, std::string &err) { return set(arrays[j], err); }, m,
          error);
    }
    if (!ok)
      fail(error);
    py::dict out;
    out["step"] = m.step;
    out["loss"] = m.loss;
    out["grad_norm"] = m.gradNorm;
    out["lr"] = m.lr;
    out["seconds"] = m.seconds;
    if (session_.lossScaling()) {
      out["loss_scale"] = m.lossScale;
      out["skipped"] = m.skipped;
    }
    return out;
  }

  /// The loss of one held-out batch at the current weights (the forward
  /// pass alone: nothing is updated).
  double evaluate(const py::dict &batch) {
    Inputs arrays = inputs(batch);
    double loss = NAN;
    std::string error;
    bool ok;
    {
      py::gil_scoped_release release;
      ok = session_.evaluate([&](std::string &err) { return set(arrays, err); },
                             loss, error);
    }
    if (!ok)
      fail(error);
    return loss;
  }

  void save() {
    std::string error;
    if (!session_.save(error))
      fail(error);
  }

  /// The trained parameters by name (not optimizer state, constants or the
  /// low-precision copies), as NumPy arrays.
  py::dict parameters() {
    std::string error;
    if (!art_.executor().parametersToHost(error))
      fail(error);
    py::dict out;
    const artifact::Plan &plan = art_.artifact().plan();
    for (const artifact::ParamEntry &p : plan.params) {
      if (p.flags &
          (artifact::ParamEntry::Constant | artifact::ParamEntry::State |
           artifact::ParamEntry::LowCopy))
        continue;
      const artifact::Slot &slot = plan.slots[p.slot];
      std::vector<char> bytes(slot.bytes);
      if (!art_.artifact().readSlot(slot, bytes.data(), error))
        fail(error);
      out[py::str(p.name)] =
          toNumpy(slot.dtype, slot.shape, bytes.data(), bytes.size());
    }
    return out;
  }

  std::string checkpointFile() const { return session_.checkpointFile(); }

private:
  /// A batch {name: array} converted to the plan's inputs, every one given.
  Inputs inputs(const py::dict &batch) const {
    const artifact::Plan &plan = art_.artifact().plan();
    Inputs out = convertInputs(plan, batch);
    if (out.size() != plan.inputs.size())
      throw py::value_error("a batch needs every input of the plan (" +
                            std::to_string(plan.inputs.size()) + ")");
    return out;
  }

  bool set(const Inputs &arrays, std::string &error) {
    for (const auto &[name, array] : arrays)
      if (!art_.executor().setInput(name, array, error))
        return false;
    return true;
  }

  Artifact &art_;
  trainer::Session session_;
};

} // namespace

PYBIND11_MODULE(strata_runtime, m) {
  m.doc() = "The Strata runtime: run compiled artifacts, train them a step "
            "at a time from NumPy batches.";
  py::class_<Artifact>(m, "Artifact")
      .def(py::init<const std::string &, std::optional<std::string>, uint64_t,
                    std::vector<std::string>, bool>(),
           py::arg("path"), py::arg("backend") = py::none(),
           py::arg("device_mem") = 0,
           py::arg("ssd_dirs") = std::vector<std::string>(),
           py::arg("overlap") = true,
           "Opens an artifact (a directory written by strata-compile -o) "
           "on a backend (cpu, async-test, cuda; default: $STRATA_BACKEND, "
           "else cuda when a GPU is present, else cpu).")
      .def_property_readonly("mode", &Artifact::mode, "'train' or 'forward'")
      .def_property_readonly(
          "rank", &Artifact::rank,
          "This process's rank in a data-parallel run (under mpirun; 0 "
          "alone): feed it rows [rank * B, (rank + 1) * B) of each global "
          "batch of world_size * B rows")
      .def_property_readonly("world_size", &Artifact::worldSize,
                             "How many ranks the run has (1 alone)")
      .def_property_readonly("inputs", &Artifact::inputs,
                             "[(name, shape, dtype)] of the plan's inputs")
      .def_property_readonly("outputs", &Artifact::outputs,
                             "[(name, shape, dtype)] of the plan's outputs")
      .def("run", &Artifact::run, py::arg("inputs"),
           "Runs a forward plan on {name: array}; returns {name: array}.")
      .def(
          "trainer",
          [](Artifact &a, std::optional<std::string> dir, bool resume,
             bool resumeByName, const std::string &onNan, bool quiet) {
            return std::make_unique<Trainer>(a, dir, resume, resumeByName,
                                             onNan, quiet);
          },
          py::arg("checkpoint_dir") = py::none(), py::arg("resume") = false,
          py::arg("resume_by_name") = false, py::arg("on_nan") = "stop",
          py::arg("quiet") = true, py::keep_alive<0, 1>(),
          "Starts (or with resume=True continues) a training run; one per "
          "artifact and checkpoint directory at a time. resume_by_name=True "
          "resumes from a checkpoint of another plan of the same model, "
          "its tensors matched by name (strata-run --resume-by-name).");
  py::class_<Trainer>(m, "Trainer")
      .def_property_readonly("completed_steps", &Trainer::completedSteps)
      .def_property_readonly("accumulate", &Trainer::accumulate,
                             "micro-batches per step")
      .def_property_readonly("checkpoint_file", &Trainer::checkpointFile)
      .def("step", &Trainer::step, py::arg("batch"),
           "Runs one step on {name: array} (a list of them when the plan "
           "accumulates); returns the metrics (step, loss, grad_norm, lr, "
           "seconds, and loss_scale/skipped with loss scaling).")
      .def("evaluate", &Trainer::evaluate, py::arg("batch"),
           "The loss of one held-out batch {name: array} at the current "
           "weights: the plan's forward pass alone, nothing updated. With "
           "labels, the mean over the labels kept (not negative); weight "
           "each batch by that count for a data set's mean.")
      .def("save", &Trainer::save,
           "Saves a checkpoint of the completed steps (atomically).")
      .def("parameters", &Trainer::parameters,
           "The trainable parameters by name, as NumPy arrays.");
}
