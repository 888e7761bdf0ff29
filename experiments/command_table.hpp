// Which executable runs each command. `paradyse` itself runs the commands that need neither SimGrid
// nor LibTorch (estimate, plan, trace, the estimate benchmarks), so that they and --help start in a
// few milliseconds; loading SimGrid (with the ns-3 libraries Debian builds it with) costs ~50 ms and
// LibTorch ~0.7 s. The others run in paradyse-sim (the simulator) and paradyse-real (the real
// backend), next to paradyse: `paradyse` lists them in its help and replaces itself with their
// executable on the same command line.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

namespace paradyse::cli {

struct HandedOverCommand {
  std::string_view name;
  std::string_view executable;  // next to paradyse
  std::string_view description;
};

inline constexpr std::array<HandedOverCommand, 12> kHandedOverCommands{{
    {"compare", "paradyse-sim",
     "Train a dataset's real length trace under each policy, one sequence per training step: total time, "
     "tokens/s, MFU, sequences out of memory, the longest sequence trained before the first out of memory, "
     "plan switches; writes summary.json, per_sequence.csv, report.md and the plots (the paper's Figure 2) "
     "to --out."},
    {"ablation", "paradyse-sim",
     "The paper's Table 5: paradyse in full (learned cost model fitted to simulated profiles), without each "
     "strategy, without the learned cost model, without smoothing, over one trace; total time of each "
     "against the full policy."},
    {"sweep", "paradyse-sim",
     "Run the compare (or, with base.mode = plan, only planning on a length grid) at every point of a grid "
     "of variations (GPU type, nodes, degree, NVLink and NIC bandwidth, HBM capacity, model, trace) given "
     "in a JSON or TOML spec; resumable; parallel with --jobs, or across machines under mpirun."},
    {"simulate", "paradyse-sim",
     "Simulate one training iteration (one micro-batch of B sequences of N tokens on P GPUs, optimizer "
     "step included) of a plan on a SimGrid model of the cluster: every rank's ops on a compute and a "
     "communication stream, collectives as NCCL-style flows that contend for NVLink and the NICs, memory "
     "from every allocation and free. Prints the iteration time, per-rank compute, exposed communication "
     "and idle time, and peak memory; running out of memory is reported, not an error."},
    {"costmodel", "paradyse-sim",
     "The paper's learned cost model: profile uniform plans (simulated), fit a random forest inside the "
     "profiled lengths and a polynomial beyond, and evaluate it and the analytic model on held-out "
     "profiles."},
    {"run", "paradyse-real",
     "Run training steps for real: forward, backward, gradient reduction and an AdamW step of the model "
     "with the plan's strategy per layer, on --ranks processes of this machine (or as one rank of an "
     "mpirun/srun job), with LibTorch tensors and Gloo (CPU) or NCCL (GPU). Prints the median step time, "
     "tokens/s and the peak memory any rank held."},
    {"calibrate", "paradyse-real",
     "Measure this machine (GEMM and attention throughput at the model's head size, copy bandwidth, op "
     "overhead, all-reduce, all-gather, reduce-scatter, all-to-all and send_recv bandwidth over --ranks "
     "processes, each collective's issue cost and its extra time when the ranks reach it from computing) "
     "into a cluster file in the presets' schema: the local-cpu "
     "model of this machine that `paradyse validate` simulates on. Each figure is the median of --passes "
     "samples taken at the machine's own speed (a speed reference timed around them)."},
    {"validate", "paradyse-real",
     "Run a plan for real (as `paradyse run`) and simulate the same steps on this machine's calibrated "
     "model (`paradyse calibrate`); print measured against simulated step time and peak memory with the "
     "relative error. --plan all validates every strategy that can run; every row runs once per round "
     "(--rounds), its time the median over the rounds run at the calibration's speed."},
    {"bench-simulate", "paradyse-sim",
     "Benchmark: wall time to trace and simulate one iteration per strategy, and simulated activities per "
     "second; prints medians."},
    {"bench-compare", "paradyse-sim",
     "Benchmark: the wall time of a compare (by default the main job) with its simulations in a process "
     "per core and in one, their ratio, and whether both wrote the same per_sequence.csv and "
     "summary.json, byte for byte."},
    {"bench-memory", "paradyse-sim",
     "Benchmark: the maximum resident memory and wall time of an analytic compare over traces of "
     "--counts lengths resampled from a trace (by default 10^6 and 10^8 from github-code-like), each "
     "run in a process of its own without per-sequence output, and how much the memory grew."},
    {"bench-groups", "paradyse-sim",
     "Benchmark the group solver (which groups of GPUs train which sequences of a global batch): its "
     "schedule against the exact MILP (COIN-OR CBC) on small batches of a trace, with the gap printed, and "
     "its solve time on large batches; prints medians and p99."},
}};

// The description of one of kHandedOverCommands.
std::string command_description(std::string_view name);

// Adds the commands `paradyse` hands over to its help, as subcommands that are never run here.
void list_handed_over_commands(CLI::App& app);

// When argv names one of kHandedOverCommands, replaces this process with its executable on the same
// arguments; returns only when argv names a command of paradyse itself. InputError when the
// executable cannot be started.
void hand_over(int argc, char** argv);

}  // namespace paradyse::cli
