// TransferQueue.cpp - Transfers between the tiers, beside the compute.

#include "runtime/backends/TransferQueue.h"

namespace strata::runtime {

TransferQueue::TransferQueue() : worker_([this] { work(); }) {}

TransferQueue::~TransferQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  worker_.join();
}

uint64_t TransferQueue::submit(Job job) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
    id = ++submitted_;
  }
  wake_.notify_one();
  return id;
}

bool TransferQueue::waitFor(uint64_t id, std::string &error) {
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return finished_ >= id; });
  if (failed_) {
    error = error_;
    return false;
  }
  return true;
}

uint64_t TransferQueue::finished() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return finished_;
}

void TransferQueue::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty())
      return; // Stopped with nothing left.
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    bool skip = failed_;
    lock.unlock();
    std::string error;
    bool ok = skip || job(error);
    lock.lock();
    if (!ok && !failed_) {
      failed_ = true;
      error_ = error;
    }
    ++finished_;
    done_.notify_all();
  }
}

} // namespace strata::runtime
