#!/usr/bin/env bash
# Every system call the library makes must go through the seam (src/sys.c). Fails if any library
# object other than sys.c.o references a system call wrapper directly, and checks that sys.c.o
# itself does, so the check is known to see such references.
# Usage: check-syscalls.sh "obj1;obj2;..."
set -euo pipefail

# Thin libc wrappers of system calls the library could be tempted to call.
syscalls='accept|accept4|bind|chdir|clock_gettime|close|connect|dup|dup2|dup3|epoll_create|epoll_create1|epoll_ctl|epoll_pwait|epoll_pwait2|epoll_wait|eventfd|fcntl|fork|fstat|fstatat|ftruncate|getpeername|getpid|getrandom|getsockname|getsockopt|gettid|gettimeofday|ioctl|kill|listen|lseek|madvise|memfd_create|mmap|mmap64|mprotect|msync|munmap|open|open64|openat|openat64|pipe|pipe2|poll|pread|pread64|pwrite|pwrite64|read|readv|recv|recvfrom|recvmmsg|recvmsg|sched_getaffinity|send|sendfile|sendfile64|sendmmsg|sendmsg|sendto|setsockopt|shm_open|shm_unlink|shutdown|sigaction|sigaltstack|signalfd|socket|socketpair|stat|syscall|time|timerfd_create|timerfd_settime|unlink|wait|waitpid|write|writev'

IFS=';' read -r -a objects <<<"$1"
bad=0
seam_refs=0
for object in "${objects[@]}"; do
  refs=$(nm -u "$object" | awk '{print $2}' | sed 's/@.*//' | grep -xE "($syscalls)" || true)
  case "$(basename "$object")" in
    sys.c.o)
      seam_refs=$(echo "$refs" | grep -c . || true)
      ;;
    *)
      if [ -n "$refs" ]; then
        echo "FAIL: $object calls system calls outside the seam: $(echo $refs)"
        bad=1
      fi
      ;;
  esac
done
if [ "$seam_refs" -lt 2 ]; then
  echo "FAIL: sys.c.o references $seam_refs system calls; the check cannot see them"
  exit 1
fi
[ "$bad" -eq 0 ] || exit 1
echo "ok: ${#objects[@]} objects; only sys.c.o calls system calls ($seam_refs of them)"
