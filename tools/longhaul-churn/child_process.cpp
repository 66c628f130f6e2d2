#include "child_process.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

namespace longhaul_churn {

namespace {

struct WriteRequest {
  uv_write_t req;
  std::string data;
};

}  // namespace

std::unique_ptr<ChildProcess> ChildProcess::spawn(uv_loop_t* loop,
                                                  const std::vector<std::string>& argv,
                                                  const std::string& stderr_path, bool with_stdin,
                                                  LineHandler on_line, ExitHandler on_exit,
                                                  std::string* error) {
  std::unique_ptr<ChildProcess> c(new ChildProcess());
  c->on_line_ = std::move(on_line);
  c->on_exit_ = std::move(on_exit);
  c->has_stdin_ = with_stdin;
  const int err_fd = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (err_fd < 0) {
    *error = "cannot open " + stderr_path + ": " + std::strerror(errno);
    return nullptr;
  }
  uv_pipe_init(loop, &c->out_, 0);
  uv_pipe_init(loop, &c->in_, 0);
  c->out_.data = c.get();
  c->in_.data = c.get();
  c->process_.data = c.get();

  uv_stdio_container_t stdio[3];
  if (with_stdin) {
    stdio[0].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_READABLE_PIPE);
    stdio[0].data.stream = reinterpret_cast<uv_stream_t*>(&c->in_);
  } else {
    stdio[0].flags = UV_IGNORE;
  }
  stdio[1].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
  stdio[1].data.stream = reinterpret_cast<uv_stream_t*>(&c->out_);
  stdio[2].flags = UV_INHERIT_FD;
  stdio[2].data.fd = err_fd;

  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  uv_process_options_t options{};
  options.file = args[0];
  options.args = args.data();
  options.exit_cb = &ChildProcess::on_exit_cb;
  options.stdio_count = 3;
  options.stdio = stdio;
  const int rc = uv_spawn(loop, &c->process_, &options);
  ::close(err_fd);
  if (rc != 0) {
    *error = "cannot start " + argv[0] + ": " + uv_strerror(rc);
    // uv_spawn failed: the process handle is still initialized and must be closed with the pipes.
    c->exited_ = true;
    c->out_ended_ = true;
    c->maybe_close();
    // The handles close on the next loop iteration: keep the object alive until the loop ends.
    c.release();  // deliberately leaked: a failed spawn is fatal for the run anyway
    return nullptr;
  }
  c->pid_ = c->process_.pid;
  uv_read_start(reinterpret_cast<uv_stream_t*>(&c->out_), &ChildProcess::on_alloc,
                &ChildProcess::on_read);
  return c;
}

ChildProcess::~ChildProcess() = default;

int ChildProcess::send_signal(int signal) {
  if (exited_) return 0;
  return uv_kill(pid_, signal);
}

void ChildProcess::write_line(const std::string& line) {
  if (!has_stdin_ || closed_) return;
  auto* w = new WriteRequest{};
  w->data = line + "\n";
  uv_buf_t buf = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
  const int rc =
      uv_write(&w->req, reinterpret_cast<uv_stream_t*>(&in_), &buf, 1,
               [](uv_write_t* req, int) { delete reinterpret_cast<WriteRequest*>(req); });
  if (rc != 0) delete w;
}

void ChildProcess::on_exit_cb(uv_process_t* handle, int64_t exit_status, int term_signal) {
  auto* c = static_cast<ChildProcess*>(handle->data);
  c->exited_ = true;
  c->exit_status_ = term_signal != 0 ? -1 : exit_status;
  c->term_signal_ = term_signal;
  c->maybe_close();
}

void ChildProcess::on_alloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
  auto* c = static_cast<ChildProcess*>(handle->data);
  *buf = uv_buf_init(c->buffer_, sizeof(c->buffer_));
}

void ChildProcess::on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  auto* c = static_cast<ChildProcess*>(stream->data);
  if (nread < 0) {
    if (!c->partial_.empty() && c->on_line_) c->on_line_(c->partial_);
    c->partial_.clear();
    uv_read_stop(stream);
    c->out_ended_ = true;
    c->maybe_close();
    return;
  }
  c->partial_.append(buf->base, static_cast<size_t>(nread));
  size_t start = 0;
  for (size_t nl; (nl = c->partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
    if (c->on_line_) c->on_line_(c->partial_.substr(start, nl - start));
  }
  c->partial_.erase(0, start);
}

void ChildProcess::maybe_close() {
  if (closed_ || !exited_ || !out_ended_) return;
  closed_ = true;
  // Reported only now, after its last stdout line (an error message) was delivered.
  if (on_exit_) on_exit_(exit_status_, term_signal_);
  uv_close(reinterpret_cast<uv_handle_t*>(&process_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&out_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&in_), nullptr);
}

}  // namespace longhaul_churn
