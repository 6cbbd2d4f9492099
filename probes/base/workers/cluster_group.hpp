// Worker groups that span an MPI job: mpirun or srun starts one commtool per rank, on as many
// nodes as the job has, and each of them runs that rank's worker as a child, as the local
// launcher does for every rank (launcher.hpp). The commtool processes never touch CUDA, so each
// can always stop its worker and say what became of it; MPI carries between them what the
// local launcher's socket carries between workers: the barriers, the allgathers (NCCL's unique
// id) and the results, which end up at rank 0.
//
// Rank 0 drives and the others follow: rank 0 runs the command as on one machine, and its
// run_workers (launcher.hpp) turns into ClusterGroups::run while a ClusterScope is alive. The
// other ranks sit in serve() and do what rank 0 asks: answer a question (which GPU a rank has:
// ask_all) or run their worker of a group. So the command's own logic, its plan and its
// analysis, exists once, at rank 0, and every rank but 0 prints nothing.
//
// Every collective of the workers is one round of MPI calls between the commtool processes:
// each says what its worker is at (barrier #K, allgather #K with its blob, its result, or how it
// failed) and rank 0 answers for all (go on, done, or stop). A rank whose worker died, failed or
// overran its bound says so in the next round instead of waiting, so a failure anywhere ends the
// group everywhere within the bound, and rank 0 names the rank, its host, and where every rank
// stood. Each MPI call is itself bounded by a watchdog: a commtool process that is gone (its
// node lost) ends every other with exit 5 instead of a hang.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "probes/base/workers/launcher.hpp"

namespace commtool::cluster {
class MpiSession;
}

namespace commtool::workers {

// Where this process sits in the job.
struct ClusterRank {
  int rank = 0;
  int size = 1;
  int local_rank = 0;  // among the ranks on this host, in rank order
  int local_size = 1;
  std::string host;
};

// A question rank 0 asks every rank (ask_all): the handler gets this rank's place and the
// question's arguments, and returns its answer. It may throw commtool::Error; the error travels
// to rank 0, which throws it naming the rank and its host.
using ClusterQuestion =
    std::function<nlohmann::json(const ClusterRank& self, const nlohmann::json& args)>;

class ClusterGroups {
 public:
  // Collective: every rank constructs it, with the same questions. Learns every rank's host
  // (hence local ranks). `executable`: this node's worker binary (/proc/self/exe for commtool).
  // `control_timeout`: how long a rank may wait for rank 0's next word between groups.
  ClusterGroups(cluster::MpiSession& session, std::string executable,
                std::map<std::string, ClusterQuestion> questions,
                std::chrono::duration<double> control_timeout);
  ~ClusterGroups();
  ClusterGroups(const ClusterGroups&) = delete;
  ClusterGroups& operator=(const ClusterGroups&) = delete;

  const ClusterRank& self() const { return self_; }
  bool is_root() const { return self_.rank == 0; }
  const std::vector<std::string>& hosts() const { return hosts_; }  // by rank
  int local_rank_of(int rank) const;  // among the ranks of its host, in rank order

  // Rank 0: every rank's answer to `question`, by rank (its own included). Throws the first
  // failed answer as Error(its code, "rank R on HOST: ...").
  std::vector<nlohmann::json> ask_all(const std::string& question, const nlohmann::json& args);

  // Rank 0: one worker per rank of the job, rank r on specs[r].device of its own host; the rest
  // as run_workers, whose executable is each node's own (the constructor's). A GPU shared by
  // several ranks of one host gets them NCCL's separate-host environment, as on one machine; ranks
  // that share a GPU while the job spans several hosts are refused (Error kUsage), since that
  // environment confines NCCL to loopback. specs must hold every rank of the job once.
  GroupOutcome run(const std::vector<WorkerSpec>& specs, const nlohmann::json& task,
                   std::chrono::duration<double> timeout, std::chrono::duration<double> step);

  // Every rank but 0: does what rank 0 asks until it says the command is over. Returns the exit
  // status for this process (0; rank 0 alone reports the command's outcome).
  int serve();

  // Rank 0: tells the other ranks the command is over. Once; the destructor does it too.
  void finish();

 private:
  nlohmann::json receive_instruction();
  void send_instruction(const nlohmann::json& instruction);
  nlohmann::json answer(const nlohmann::json& instruction) const;
  GroupOutcome take_part(const nlohmann::json& instruction);

  cluster::MpiSession& session_;
  std::string executable_;
  std::map<std::string, ClusterQuestion> questions_;
  std::chrono::duration<double> control_timeout_;
  ClusterRank self_;
  std::vector<std::string> hosts_;
  int groups_run_ = 0;
  bool finished_ = false;
};

// While one is alive, run_workers in this process runs its groups through `groups` (rank 0).
class ClusterScope {
 public:
  explicit ClusterScope(ClusterGroups& groups);
  ~ClusterScope();
  ClusterScope(const ClusterScope&) = delete;
  ClusterScope& operator=(const ClusterScope&) = delete;
};

// The groups run_workers should use, or nullptr on one machine.
ClusterGroups* active_cluster();

}  // namespace commtool::workers
