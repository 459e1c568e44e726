#include "control/dispatcher_state.h"

#include <algorithm>
#include <iostream>
#include <limits>
#include <set>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "control/processing_mode.h"
#include "engine/cardinality.h"
#include "engine/functions.h"
#include "engine/pipeline_text.h"
#include "engine/pipeline_validate.h"
#include "engine/random.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace sluice::control {

absl::StatusOr<std::string> DispatcherState::RegisterDataset(const proto::PipelineDef& pipeline,
                                                             const std::string& dataset_id) {
  // The dispatcher's registry holds the built-ins plus its --plugin functions; workers are
  // started with the same plugins.
  SLUICE_RETURN_IF_ERROR(engine::ValidatePipeline(pipeline, engine::GlobalFunctions()));
  std::string key;
  google::protobuf::io::StringOutputStream stream(&key);
  {
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    pipeline.SerializeToCodedStream(&coded);
  }
  ChangeLock lock(this);
  if (!dataset_id.empty()) {
    if (auto it = datasets_.find(dataset_id); it != datasets_.end()) {
      if (it->second.SerializeAsString() == pipeline.SerializeAsString()) return dataset_id;
      return absl::AlreadyExistsError(absl::StrCat(
          "dataset id '", dataset_id, "' is already registered with another pipeline (",
          engine::FormatPipeline(it->second), "); choose another id"));
    }
  } else if (auto it = dataset_by_definition_.find(key); it != dataset_by_definition_.end()) {
    return it->second;
  }
  std::string id = dataset_id;
  while (id.empty() || datasets_.contains(id)) id = absl::StrCat("ds", next_id_++);
  AddDataset(id, pipeline);
  proto::Update update;
  update.mutable_register_dataset()->set_dataset_id(id);
  *update.mutable_register_dataset()->mutable_pipeline() = pipeline;
  Journal(update);
  return id;
}

absl::Status DispatcherState::ReleaseClient(const proto::ReleaseClientRequest& request) {
  ChangeLock lock(this);
  auto it = jobs_.find(request.job_id());
  if (it == jobs_.end()) return absl::OkStatus();  // already collected
  Job& job = it->second;
  RecordDelivered(job, request.delivered());  // journaled before the release, as a heartbeat's
  ForgetClient(job, request.client_id());
  proto::Update release;
  release.mutable_release_client()->set_job_id(job.id);
  release.mutable_release_client()->set_client_id(request.client_id());
  Journal(release);
  if (job.name.empty()) {
    for (int64_t id : job.task_ids) {
      Task& task = tasks_.at(id);
      if (task.finished || task.lost) continue;
      task.finished = true;
      proto::Update update;
      update.mutable_finish_task()->set_task_id(id);
      Journal(update);
    }
    return absl::OkStatus();
  }
  LaunchRecoveries(job);
  return absl::OkStatus();
}

void DispatcherState::AddDataset(const std::string& id, const proto::PipelineDef& pipeline) {
  std::string key;
  google::protobuf::io::StringOutputStream stream(&key);
  {
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    pipeline.SerializeToCodedStream(&coded);
  }
  datasets_[id] = pipeline;
  dataset_by_definition_[key] = id;
}

absl::StatusOr<proto::GetOrCreateJobResponse> DispatcherState::GetOrCreateJob(
    const proto::GetOrCreateJobRequest& request) {
  if (request.mode() != proto::OFF && request.mode() != proto::DYNAMIC &&
      !IsStaticSharding(request.mode())) {
    return absl::InvalidArgumentError(absl::StrCat("processing mode must be one of ",
                                                   ProcessingModeChoices(), ", got ",
                                                   static_cast<int>(request.mode())));
  }
  if (IsStaticSharding(request.mode()) && worker_list_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("static sharding (", ProcessingModeName(request.mode()),
                     ") needs a fixed worker list: start the dispatcher with --worker-addresses"));
  }
  ChangeLock lock(this);
  auto dataset = datasets_.find(request.dataset_id());
  if (dataset == datasets_.end()) {
    return absl::NotFoundError(absl::StrCat("dataset '", request.dataset_id(),
                                            "' is not registered with this dispatcher"));
  }
  if (request.mode() == proto::DYNAMIC) {
    SLUICE_RETURN_IF_ERROR(engine::ValidateSplittable(dataset->second));
  }
  if (request.num_consumers() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_consumers must be >= 0, got ", request.num_consumers()));
  }
  if (request.num_consumers() > 0) {
    if (request.job_name().empty()) {
      return absl::InvalidArgumentError(
          "coordinated reads (num_consumers > 0) need a job name shared by all consumers");
    }
    SLUICE_ASSIGN_OR_RETURN(int64_t cardinality, engine::Cardinality(dataset->second));
    if (cardinality != engine::kInfinite) {
      return absl::InvalidArgumentError(absl::StrCat(
          "coordinated reads need an infinite pipeline (end it with repeat()); this one has ",
          cardinality == engine::kUnknown ? std::string("an unknown number of")
                                          : absl::StrCat(cardinality),
          " elements (batches, after a batch op)"));
    }
  }
  if (IsStaticSharding(request.mode())) {
    // Every worker's share is checked now, so a bad policy fails the client, not a task.
    for (int64_t i = 0; i < worker_list_.size(); ++i) {
      absl::Status sharded =
          ShardPipelineForWorker(dataset->second, request.mode(), worker_list_.size(), i).status();
      if (!sharded.ok()) {
        return absl::Status(sharded.code(),
                            absl::StrCat(ProcessingModeName(request.mode()), " sharding over ",
                                         worker_list_.size(), " workers: ", sharded.message()));
      }
    }
  }
  proto::GetOrCreateJobResponse response;
  response.set_client_id(next_id_++);
  if (!request.job_name().empty()) {
    if (auto gone = collected_job_names_.find(request.job_name());
        gone != collected_job_names_.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job '", request.job_name(), "' (job ", gone->second,
          ") was garbage-collected after its clients left; a DYNAMIC job is not re-created "
          "silently (that would restart its epoch): use a new job name"));
    }
    if (auto it = job_by_name_.find(request.job_name()); it != job_by_name_.end()) {
      const Job& job = jobs_.at(it->second);
      if (job.num_consumers != request.num_consumers()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "job '", request.job_name(), "' is read by ", job.num_consumers,
            " coordinated consumer(s); this request asks for ", request.num_consumers()));
      }
      if (job.dataset_id != request.dataset_id() || job.mode != request.mode()) {
        // Dataset ids are the service's names for pipelines: say which differs in the
        // reader's terms too.
        return absl::InvalidArgumentError(absl::StrCat(
            "job '", request.job_name(), "' exists for dataset ", job.dataset_id, " in mode ",
            ProcessingModeName(job.mode), "; this request asks for dataset ", request.dataset_id(),
            " in mode ", ProcessingModeName(request.mode()), " (",
            job.dataset_id != request.dataset_id() ? "another pipeline" : "another mode",
            "; under another job name it is read as a job of its own)"));
      }
      Job& joined = jobs_.at(it->second);
      response.set_job_finished(JobFinished(joined));
      joined.num_clients += 1;
      joined.clients[response.client_id()] = absl::Now();
      response.set_job_id(job.id);
      if (job.num_consumers > 0) {
        response.set_starting_round(StartingRoundFor(joined, request.consumer_index()));
        joined.consumer_clients[request.consumer_index()] = response.client_id();
      }
      proto::Update update;
      update.mutable_add_client()->set_job_id(job.id);
      update.mutable_add_client()->set_client_id(response.client_id());
      Journal(update);
      return response;
    }
  }
  Job job{next_id_++, request.job_name(), request.dataset_id(), request.mode(), {}, 1, {}};
  job.elements_per_split = config_.elements_per_split;
  job.shuffle_seed = engine::RandomSeed() | 1;  // never 0, which means "none"
  job.clients[response.client_id()] = absl::Now();
  job.num_consumers = request.num_consumers();
  job.round_horizon = kRoundWindow;
  if (job.num_consumers > 0) job.consumer_clients[request.consumer_index()] = response.client_id();
  proto::Update update;
  proto::Update::CreateJob* create = update.mutable_create_job();
  create->set_job_id(job.id);
  create->set_job_name(job.name);
  create->set_dataset_id(job.dataset_id);
  create->set_mode(job.mode);
  create->set_elements_per_split(job.elements_per_split);
  create->set_client_id(response.client_id());
  create->set_num_consumers(job.num_consumers);
  create->set_shuffle_seed(job.shuffle_seed);
  Journal(update);
  // Not on lost workers: their readers would wait out their timeout on a dead address. One
  // that comes back joins the job as a new worker does.
  for (const auto& [address, worker] : workers_) {
    if (!worker.lost) CreateTask(job, address);
  }
  if (!job.name.empty()) job_by_name_[job.name] = job.id;
  response.set_job_id(job.id);
  jobs_.emplace(job.id, std::move(job));
  return response;
}

int64_t DispatcherState::StartingRoundFor(const Job& job, int32_t consumer_index) const {
  if (!job.consumer_clients.contains(consumer_index)) return 0;  // its first client
  // A restart: the lowest round another live consumer awaits. Rounds below it went ahead
  // without this consumer already, and nobody else will ask for them again.
  const absl::Time now = absl::Now();
  std::optional<int64_t> lowest;
  for (const auto& [client, round] : job.client_rounds) {
    auto seen = job.clients.find(client);
    if (seen == job.clients.end() || now - seen->second > config_.client_timeout) continue;
    if (job.consumer_clients.at(consumer_index) == client) continue;  // its predecessor
    lowest = std::min(lowest.value_or(round), round);
  }
  return lowest.value_or(0);
}

void DispatcherState::CreateTask(Job& job, const std::string& worker_address,
                                 const std::map<int64_t, std::vector<proto::Split>>* reissued,
                                 int64_t recovers_task_id) {
  const int64_t id = next_id_++;
  int64_t starting_round = 0;
  // A restarted dispatcher knows no consumer's round yet, but its journaled horizon says
  // consumers were told task lists.
  if (job.num_consumers > 0 && (!job.client_rounds.empty() || job.journaled_horizon > 0)) {
    // No consumer has been told the task list past the horizon, so all agree the new task
    // enters right after it. With no live task, consumers wait where they are. (Before any
    // consumer's first heartbeat nobody knows a task list: every task starts at round 0.)
    bool any_live = false;
    for (int64_t other : job.task_ids) any_live = any_live || !tasks_.at(other).lost;
    if (any_live) {
      starting_round = job.round_horizon + 1;
    } else if (!job.client_rounds.empty()) {
      starting_round = job.client_rounds.begin()->second;
      for (const auto& [client, round] : job.client_rounds) {
        starting_round = std::min(starting_round, round);
      }
    }
  }
  AddTask(job, id, worker_address);
  tasks_.at(id).starting_round = starting_round;
  proto::Update update;
  update.mutable_create_task()->set_task_id(id);
  update.mutable_create_task()->set_job_id(job.id);
  update.mutable_create_task()->set_worker_address(worker_address);
  update.mutable_create_task()->set_starting_round(starting_round);
  if (reissued != nullptr) {
    Task& task = tasks_.at(id);
    task.recovery = true;
    task.recovery_splits = *reissued;
    task.recovers_task_id = recovers_task_id;
    update.mutable_create_task()->set_recovery(true);
    update.mutable_create_task()->set_recovers_task_id(recovers_task_id);
    for (const auto& [repetition, splits] : *reissued) {
      proto::Update::ReissuedPass* pass = update.mutable_create_task()->add_reissued();
      pass->set_repetition(repetition);
      for (const proto::Split& split : splits) *pass->add_splits() = split;
    }
  }
  // The liveness check makes recovery tasks outside any handler, and any worker heartbeat
  // may hand one out: a crash before it is durable would reuse its id for another task,
  // which the worker would take for the one it runs.
  JournalCoordination(update);
}

void DispatcherState::AddTask(Job& job, int64_t task_id, const std::string& worker_address) {
  Task task{task_id, job.id, worker_address};
  if (IsStaticSharding(job.mode)) {
    // Registration refused unlisted workers, and GetOrCreateJob checked every share.
    task.worker_index = worker_list_.IndexOf(worker_address).value_or(0);
    absl::StatusOr<proto::PipelineDef> mine = ShardPipelineForWorker(
        datasets_.at(job.dataset_id), job.mode, worker_list_.size(), task.worker_index);
    if (mine.ok()) task.sharded_pipeline = *std::move(mine);
  }
  job.task_ids.push_back(task.id);
  workers_[worker_address].task_ids.push_back(task.id);
  tasks_.emplace(task.id, std::move(task));
}

std::vector<std::string> DispatcherState::WorkersAwaited(const Job& job) const {
  std::vector<std::string> awaited;
  if (!IsStaticSharding(job.mode) || JobFinished(job)) return awaited;
  std::vector<bool> has_task(static_cast<size_t>(worker_list_.size()), false);
  for (int64_t id : job.task_ids) {
    // A journal restored under another --worker-addresses may name any index.
    const int64_t index = tasks_.at(id).worker_index;
    if (index >= 0 && index < worker_list_.size()) has_task[index] = true;
  }
  for (int64_t i = 0; i < worker_list_.size(); ++i) {
    if (!has_task[i]) awaited.push_back(worker_list_.entry(i));
  }
  return awaited;
}

bool DispatcherState::JobFinished(const Job& job) const {
  if (job.released) return true;
  if (job.task_ids.empty() || !job.recoveries.empty()) return false;
  std::set<int64_t> finished_shares;
  for (int64_t id : job.task_ids) {
    const Task& task = tasks_.at(id);
    if (task.lost) continue;  // a lost DYNAMIC task's splits went to a recovery task
    if (!task.finished) return false;
    finished_shares.insert(task.worker_index);
  }
  // A static share is read only by its listed worker: the job waits for each of them (a
  // lost worker's share is read again when it restarts).
  if (IsStaticSharding(job.mode)) {
    return static_cast<int64_t>(finished_shares.size()) >= worker_list_.size();
  }
  return !finished_shares.empty() || job.mode != proto::OFF;
}

absl::StatusOr<proto::ClientHeartbeatResponse> DispatcherState::ClientHeartbeat(
    const proto::ClientHeartbeatRequest& request) {
  ChangeLock lock(this);
  auto it = jobs_.find(request.job_id());
  if (it == jobs_.end() && collected_jobs_.contains(request.job_id())) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", request.job_id(), " was garbage-collected: it had no client for ",
                     absl::FormatDuration(config_.job_gc_timeout)));
  }
  if (it == jobs_.end()) {
    return absl::NotFoundError(
        absl::StrCat("job ", request.job_id(), " is unknown to this dispatcher (did it restart?)"));
  }
  Job& job = it->second;
  job.clients[request.client_id()] = absl::Now();
  if (job.num_consumers > 0) {
    job.client_rounds[request.client_id()] = request.current_round();
    job.round_horizon = std::max(job.round_horizon, request.current_round() + kRoundWindow);
    if (job.round_horizon > job.journaled_horizon) {
      // A window ahead, so that a journal record comes once per window of rounds.
      job.journaled_horizon = job.round_horizon + kRoundWindow;
      proto::Update update;
      update.mutable_round_horizon()->set_job_id(job.id);
      update.mutable_round_horizon()->set_round_horizon(job.journaled_horizon);
      JournalCoordination(update);
    }
  }
  RecordDelivered(job, request.delivered());
  for (int64_t abandoned : request.abandoned_tasks()) {
    for (Job::Recovery& recovery : job.recoveries) {
      if (recovery.lost_task == abandoned) recovery.waiting_for.erase(request.client_id());
    }
  }
  LaunchRecoveries(job);
  proto::ClientHeartbeatResponse response;
  for (int64_t id : job.task_ids) {
    const Task& task = tasks_.at(id);
    if (task.worker_gone) {
      response.add_gone_tasks(task.id);
      continue;
    }
    if (task.lost) response.add_lost_tasks(task.id);
    // Coordinated consumers keep lost tasks in the rotation for the rounds they held.
    if (task.lost && job.num_consumers == 0) continue;
    proto::TaskInfo* info = response.add_tasks();
    info->set_task_id(task.id);
    info->set_worker_address(task.worker_address);
    info->set_starting_round(task.starting_round);
    info->set_ending_round(task.ending_round);
    info->set_lost(task.lost);
    info->set_recovery(task.recovery);
  }
  for (std::string& awaited : WorkersAwaited(job)) response.add_workers_awaited(std::move(awaited));
  response.set_round_horizon(job.round_horizon);
  response.set_job_finished(JobFinished(job));
  response.set_num_workers(LiveWorkers());
  return response;
}

absl::StatusOr<proto::WorkerHeartbeatResponse> DispatcherState::WorkerHeartbeat(
    const proto::WorkerHeartbeatRequest& request) {
  if (request.worker_address().empty()) {
    return absl::InvalidArgumentError("worker heartbeat without a worker address");
  }
  ChangeLock lock(this);
  if (!worker_list_.empty()) {
    auto known = workers_.find(request.worker_address());
    if (known == workers_.end() || known->second.lost || known->second.unheard_since_restore) {
      SLUICE_RETURN_IF_ERROR(CheckListed(request.worker_address()));
    }
  }
  if (request.leaving()) {
    LetWorkerLeave(request);
    return proto::WorkerHeartbeatResponse();
  }
  // The jobs whose pass a restarted worker's old process was still reading. OFF tasks and
  // static shards restart with the worker, so the new process reads them again even where
  // losing the old task leaves every other task of the job finished (the job would look
  // finished, and the restarted pass would never be read).
  absl::flat_hash_set<int64_t> restarting_jobs;
  if (auto known = workers_.find(request.worker_address());
      known != workers_.end() && !known->second.lost && !known->second.uid.empty() &&
      known->second.uid != request.worker_uid()) {
    for (int64_t id : known->second.task_ids) {
      const Task& task = tasks_.at(id);
      if (!task.finished && !task.lost && !JobFinished(jobs_.at(task.job_id))) {
        restarting_jobs.insert(task.job_id);
      }
    }
    // Restarted faster than the worker timeout: the old process and its leases are gone.
    LoseWorker(request.worker_address(), known->second, "restarted (a new process)");
  }
  if (auto known = workers_.find(request.worker_address());
      known != workers_.end() && known->second.lost) {
    // A lost worker came back (restarted, or its network healed): it starts over like a new
    // one; its old tasks stay lost and are deleted below if it still runs them.
    std::cerr << "sluice dispatcher: worker " << request.worker_address()
              << " is back after being lost\n";
    workers_.erase(known);
  }
  if (!workers_.contains(request.worker_address())) {
    workers_[request.worker_address()];
    proto::Update update;
    update.mutable_register_worker()->set_address(request.worker_address());
    update.mutable_register_worker()->set_uid(request.worker_uid());
    Journal(update);
    // A new worker joins every job that has not finished, as in tf.data service; a worker
    // back at an address whose OFF pass or static share was read to its end there does not
    // read it again.
    for (auto& [id, job] : jobs_) {
      if (JobFinished(job) && !restarting_jobs.contains(id)) continue;
      const bool read_here =
          job.mode != proto::DYNAMIC &&
          std::any_of(job.task_ids.begin(), job.task_ids.end(), [&](int64_t task_id) {
            return ReadThere(job, tasks_.at(task_id), request.worker_address());
          });
      if (!read_here) CreateTask(job, request.worker_address());
    }
    // Re-issues waiting for a live worker can go here now.
    for (auto& [id, job] : jobs_) LaunchRecoveries(job);
  }
  WorkerInfo& worker = workers_[request.worker_address()];
  if (worker.unheard_since_restore) JoinJobsMadeWhileLost(request.worker_address());
  worker.last_heartbeat = absl::Now();
  if (std::exchange(worker.unheard_since_restore, false)) {
    if (worker.uid.empty() && !request.worker_uid().empty()) {
      // Not journaled before (an older journal): known from now on, so that a restart of
      // the worker during the next outage of this dispatcher is told apart.
      proto::Update update;
      update.mutable_register_worker()->set_address(request.worker_address());
      update.mutable_register_worker()->set_uid(request.worker_uid());
      Journal(update);
    }
    for (auto& [id, job] : jobs_) LaunchRecoveries(job);  // it may take one now
  }
  worker.uid = request.worker_uid();
  worker.stats = request.stats();
  FinishReportedTasks(request);
  absl::flat_hash_set<int64_t> current(request.current_tasks().begin(),
                                       request.current_tasks().end());
  proto::WorkerHeartbeatResponse response;
  for (int64_t id : worker.task_ids) {
    const Task& task = tasks_.at(id);
    // A lost one is deleted below if the worker still runs it; sent again it would be read
    // twice (a restored worker entry may list tasks of an earlier process).
    if (task.finished || task.lost || current.contains(id)) continue;
    const Job& job = jobs_.at(task.job_id);
    proto::TaskDef* def = response.add_new_tasks();
    def->set_task_id(task.id);
    def->set_job_id(job.id);
    def->set_dataset_id(job.dataset_id);
    *def->mutable_pipeline() = task.sharded_pipeline.value_or(datasets_.at(job.dataset_id));
    def->set_mode(job.mode);
    def->set_num_consumers(job.num_consumers);
    if (job.num_consumers > 0) {
      def->set_round_wait_ms(std::max<int64_t>(1, absl::ToInt64Milliseconds(config_.RoundWait())));
    }
    if (IsStaticSharding(job.mode)) {
      def->set_worker_index(task.worker_index);
      def->set_num_workers(worker_list_.size());
    }
  }
  for (int64_t id : request.current_tasks()) {
    auto task = tasks_.find(id);
    if (task == tasks_.end() || task->second.lost || task->second.worker_gone ||
        task->second.worker_address != request.worker_address() ||
        jobs_.at(task->second.job_id).released) {
      response.add_tasks_to_delete(id);
    }
  }
  // The worker's tasks keep batches for clients until acknowledged; these lists let them
  // forget the clients that left, whose kept batches would otherwise hold slabs and keep
  // their tasks from finishing (and whose lost batches the job's other readers then read).
  // A restored job's only once the dispatcher knows its clients (started_): a job created
  // since was listed only after a minute too, so a reader that read beside one that had
  // left waited that long for the batches the other lost with a broken connection.
  const absl::Time now = absl::Now();
  const bool clients_known = now - started_ >= config_.client_timeout;
  absl::flat_hash_set<int64_t> jobs_listed;
  for (int64_t id : worker.task_ids) {
    const int64_t job_id = tasks_.at(id).job_id;
    const Job& job = jobs_.at(job_id);
    if ((job.restored && !clients_known) || !jobs_listed.insert(job_id).second) continue;
    proto::JobClients* listed = response.add_job_clients();
    listed->set_job_id(job_id);
    for (const auto& [client, last] : job.clients) {
      if (now - last <= config_.client_timeout) listed->add_client_ids(client);
    }
  }
  return response;
}

proto::GetStatusResponse DispatcherState::Status() const {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  proto::GetStatusResponse status;
  for (const auto& [address, info] : workers_) {
    proto::WorkerStatus* w = status.add_workers();
    w->set_address(address);
    w->set_lost(info.lost);
    w->set_last_heartbeat_unix_ms(absl::ToUnixMillis(info.last_heartbeat));
    for (int64_t id : info.task_ids) w->add_task_ids(id);
    *w->mutable_stats() = info.stats;
  }
  for (const auto& [id, pipeline] : datasets_) {
    proto::DatasetStatus* d = status.add_datasets();
    d->set_dataset_id(id);
    d->set_pipeline(engine::FormatPipeline(pipeline));
  }
  for (const auto& [id, job] : jobs_) {
    proto::JobStatus* j = status.add_jobs();
    j->set_job_id(id);
    j->set_job_name(job.name);
    j->set_dataset_id(job.dataset_id);
    j->set_mode(job.mode);
    j->set_num_tasks(static_cast<int32_t>(job.task_ids.size()));
    int finished = 0;
    for (int64_t task : job.task_ids) finished += tasks_.at(task).finished ? 1 : 0;
    j->set_finished_tasks(finished);
    j->set_clients_joined(job.num_clients);
    int reading = 0;
    for (const auto& [client, last] : job.clients) {
      reading += now - last <= config_.client_timeout ? 1 : 0;
    }
    j->set_num_clients(reading);
    int lost = 0;
    int64_t reissued = 0, partly_read = 0;
    for (int64_t id : job.task_ids) {
      const Task& task = tasks_.at(id);
      lost += task.lost ? 1 : 0;
      // From the recovery tasks, which the journal restores, rather than a counter it would
      // have to carry.
      for (const auto& [repetition, splits] : task.recovery_splits) {
        reissued += static_cast<int64_t>(splits.size());
        for (const proto::Split& split : splits) partly_read += split.delivered_size() > 0 ? 1 : 0;
      }
    }
    j->set_lost_tasks(lost);
    j->set_reissued_splits(reissued);
    j->set_reissued_splits_partly_read(partly_read);
    j->set_num_consumers(job.num_consumers);
    j->set_delivery_log_entries(static_cast<int64_t>(job.delivered.entries()));
    j->set_finished(JobFinished(job));
    j->set_released(job.released);
    for (std::string& awaited : WorkersAwaited(job)) j->add_workers_awaited(std::move(awaited));
  }
  return status;
}

int DispatcherState::num_workers() const {
  absl::MutexLock lock(&mu_);
  return LiveWorkers();
}

int DispatcherState::LiveWorkers() const {
  return static_cast<int>(std::count_if(workers_.begin(), workers_.end(),
                                        [](const auto& worker) { return !worker.second.lost; }));
}

}  // namespace sluice::control
