// Asking NCCL's RAS service (tracing/record/ras_client.hpp) against a server of this test that
// speaks its protocol, one that never answers, and none; and `record`'s hang view with it.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "recording_builder.hpp"
#include "tracing/record/live_recording.hpp"
#include "tracing/record/ras_client.hpp"

using namespace commtool::record;
using namespace std::chrono_literals;

namespace {

// A RAS server on 127.0.0.1: answers the protocol as NCCL 2.28 does and then `answer`; with
// `silent`, accepts and says nothing.
class FakeRas {
 public:
  FakeRas(std::string answer, bool silent) : answer_(std::move(answer)), silent_(silent) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    ::listen(fd_, 4);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeRas() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string heard() const { return heard_; }

 private:
  void serve() {
    const int c = ::accept(fd_, nullptr, nullptr);
    if (c < 0) return;
    if (silent_) {
      std::this_thread::sleep_for(1500ms);
      ::close(c);
      return;
    }
    std::string in;
    char buf[256];
    const auto reply = [&](const std::string& s) { ::send(c, s.data(), s.size(), MSG_NOSIGNAL); };
    size_t done = 0;
    for (bool status = false; !status;) {
      const ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) break;
      in.append(buf, static_cast<size_t>(n));
      for (size_t nl = in.find('\n', done); nl != std::string::npos; nl = in.find('\n', done)) {
        const std::string line = in.substr(done, nl - done);
        done = nl + 1;
        if (line.rfind("CLIENT PROTOCOL", 0) == 0) reply("SERVER PROTOCOL 2\n");
        if (line.rfind("TIMEOUT", 0) == 0 || line.rfind("SET FORMAT", 0) == 0) reply("OK\n");
        status = status || line == "VERBOSE STATUS";
      }
    }
    heard_ = in;
    reply(answer_);
    ::close(c);
  }

  std::string answer_;
  bool silent_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::string heard_;
};

const char* kAnswer = R"({
  "nccl_version": "2.28.9",
  "communicators": [
    {
      "hash": "0xab",
      "size": 2,
      "ranks": [
        {
          "rank": 0,
          "host": "10.0.0.1",
          "pid": 11,
          "cuda_dev": 0,
          "nvml_dev": 0
          "status": {"async_error": 0}
        }
      ],
      "missing_ranks": [ {"rank": 1, "host": "10.0.0.2", "pid": 12, "cuda_dev": 0} ]
    }
  ]
}
)";

}  // namespace

TEST(RasClient, SpeaksTheProtocolAndReadsTheAnswerToTheEnd) {
  FakeRas ras(kAnswer, false);
  const RasAnswer a = query_ras(ras.address(), 3000ms, true);
  ASSERT_TRUE(a.ok) << a.why;
  EXPECT_EQ(a.text, kAnswer);
  EXPECT_NE(ras.heard().find("CLIENT PROTOCOL 2\nTIMEOUT 2\nSET FORMAT json\nVERBOSE STATUS\n"),
            std::string::npos)
      << ras.heard();
}

TEST(RasClient, ASilentServerCostsTheTimeoutNotAHang) {
  FakeRas ras("", true);
  const auto t0 = std::chrono::steady_clock::now();
  const RasAnswer a = query_ras(ras.address(), 300ms, true);
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(a.why, "no answer within 0.3 s");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1200ms);  // a bound of the mechanism
}

TEST(RasClient, NoServerIsSaidAndABadAddressNamed) {
  const std::string closed = "127.0.0.1:1";
  const RasAnswer a = query_ras(closed, 500ms, false);
  EXPECT_FALSE(a.ok);
  EXPECT_NE(a.why.find("Connection refused"), std::string::npos) << a.why;
  EXPECT_NE(query_ras("no-port-here", 100ms, false).why.find("is not host:port"),
            std::string::npos);
  ::setenv("NCCL_RAS_ADDR", "10.1.2.3:999", 1);
  EXPECT_EQ(ras_address(), "10.1.2.3:999");
  ::unsetenv("NCCL_RAS_ADDR");
  EXPECT_EQ(ras_address(), "localhost:28028");
}

TEST(RasClient, TheHangViewAsksRasWhileTheJobIsThereAndKeepsItsAnswer) {
  using namespace commtool::testing;
  FakeRas ras(kAnswer, false);
  commtool::testing::RecordingDir dir;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  // This test's own process stands for a rank of the job: it is there, on this host.
  dir.append("a-1.jsonl", lines_of({proc_line(::getpid(), host), comm_line(0xc0ffee, 0, 2),
                                    start_line(0xc0ffee, 0, 0, kMono0)}));
  ::setenv("NCCL_RAS_ADDR", ras.address().c_str(), 1);
  LiveRecording live(dir.path);
  live.poll();
  const std::string text = live.standing(true);
  ::unsetenv("NCCL_RAS_ADDR");
  EXPECT_NE(text.find("NCCL's RAS (" + ras.address() + ") (saved in "), std::string::npos) << text;
  EXPECT_NE(text.find("MISSING on communicator 0xab (2 ranks): rank 1 (10.0.0.2 pid 12, GPU 0)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("1 missing comma(s) put back"), std::string::npos) << text;
  std::ifstream saved(dir.path / "ras-1.json");
  EXPECT_TRUE(saved.good());
}
