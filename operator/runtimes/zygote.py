"""sless Python zygote: the runtime server imported once, forked per cold start.

    python3 -u zygote.py CONTROL_FD

The operator holds the other end of CONTROL_FD (a SOCK_SEQPACKET socket).
Each message it sends is one start: the text "start ID" with four descriptors
attached: the function's environment (a memfd of NUL-separated KEY=VALUE),
its stdout and stderr (the operator's pipes), and a "go" pipe. The zygote
forks and answers "forked ID PID" (PID as seen here; "failed ID REASON" when
the fork itself fails); the child waits until
the operator has moved it into the function's cgroup and written one byte to
"go", then takes the environment, working directory and module path a fresh
`python3 -u server.py` would have had and serves (server.serve()). When a
child exits the zygote answers "exited PID STATUS" (STATUS: the exit code, or
-N for a signal). When the operator's end closes, the zygote exits. See
docs/runtime-protocol.md, "The zygote".
"""

import atexit
import ctypes
import gc
import os
import signal
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import importlib.util  # noqa: E402


def load_runtime():
    # Under a private name: a user's own module called `server` must still
    # be importable, as it is with a fresh `python3 server.py` (__main__).
    spec = importlib.util.spec_from_file_location("_sless_server", os.path.join(HERE, "server.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The import is the point: done once, shared by every fork.
server = load_runtime()

# Everything server.py imports lazily on a first request, imported now.
import asyncio  # noqa: E402,F401
import email.parser  # noqa: E402,F401
import http.client  # noqa: E402,F401

PR_SET_PDEATHSIG = 1
BASE_PATH = list(sys.path)
BASE_ENV_KEYS = set(os.environ)


def libc():
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


LIBC = libc()


def read_env(fd):
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while True:
        b = os.read(fd, 1 << 16)
        if not b:
            break
        chunks.append(b)
    os.close(fd)
    env = {}
    for kv in b"".join(chunks).split(b"\0"):
        if not kv:
            continue
        k, _, v = kv.partition(b"=")
        env[os.fsdecode(k)] = os.fsdecode(v)
    return env


def child(control, env_fd, out_fd, err_fd, go_fd):
    """In the forked child: become the function's process and serve."""
    code = 1
    try:
        os.setsid()
        if LIBC is not None:
            LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        control.close()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        for fd in (devnull, out_fd, err_fd):
            os.close(fd)
        # Wait for the operator: it moves this process into the function's
        # cgroup first, so nothing of the user's runs outside it.
        go = os.read(go_fd, 1)
        os.close(go_fd)
        if not go:
            os._exit(1)
        env = read_env(env_fd)
        os.environ.clear()
        os.environ.update(env)
        code_dir = env.get("SLESS_CODE_DIR") or "/"
        os.chdir(code_dir)
        # What PYTHONPATH gives a fresh interpreter: after the script's dir.
        extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:] = BASE_PATH[:1] + extra + BASE_PATH[1:]
        sys.argv = [os.path.join(HERE, "server.py")]
        time.tzset()  # TZ from the function's environment
        code = server.main([])
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        else:
            code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - anything here is a failed start
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            # What interpreter shutdown would do: atexit handlers (logging's
            # flush among them), then the streams.
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def main(argv):
    if len(argv) != 1 or not argv[0].isdigit():
        sys.stderr.write("usage: zygote.py CONTROL_FD\n")
        return 2
    control = socket.socket(fileno=int(argv[0]))
    os.set_inheritable(control.fileno(), False)

    def send(text):
        try:
            control.send(text.encode())
        except OSError:
            pass

    def reap(signum=None, frame=None):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if os.WIFSIGNALED(status):
                code = -os.WTERMSIG(status)
            else:
                code = os.WEXITSTATUS(status)
            send("exited %d %d" % (pid, code))

    # Objects imported so far are never collected: the cyclic GC of a child
    # then does not write to (and so copy) the pages it shares with the zygote.
    gc.collect()
    gc.freeze()
    signal.signal(signal.SIGCHLD, reap)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    sys.stdout.write("SLESS_READY socket=/run/sless\n")
    sys.stdout.flush()
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(control, 256, 4)
        except InterruptedError:
            continue
        if not msg:
            return 0
        words = msg.decode("ascii", "replace").split()
        if len(words) != 2 or words[0] != "start" or len(fds) != 4:
            for fd in fds:
                os.close(fd)
            sys.stderr.write("sless zygote: bad request %r\n" % (msg,))
            continue
        env_fd, out_fd, err_fd, go_fd = fds
        try:
            pid = os.fork()
        except OSError as exc:  # e.g. EAGAIN at the pids limit: this start fails, not the zygote
            for fd in fds:
                os.close(fd)
            send("failed %s %s" % (words[1], type(exc).__name__))
            continue
        if pid == 0:
            child(control, env_fd, out_fd, err_fd, go_fd)
        for fd in fds:
            os.close(fd)
        send("forked %s %d" % (words[1], pid))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
