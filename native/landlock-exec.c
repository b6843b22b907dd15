/*
 * landlock-exec: confines itself with Landlock, then becomes the command.
 *
 *   landlock-exec [--read PATH]... [--write PATH]... [--pin PATH]... [--protect PATH]...
 *                 [--protect-if-present PATH]... [--connect-port N]...
 *                 [--net] [--cgroup DIR]... [--cpu-secs N] [--file-bytes N] [--memory-bytes N]
 *                 [--processes N] [--relay-port N --relay-socket PATH] [--report]
 *                 [--mask PATH]... [--mask-source DIR] [--written-bytes N] [--written-fd FD]
 *                 [--pass-fds N] [--unix-sockets] [--join-only | --mounts-only]
 *                 -- PROGRAM [ARG]...
 *
 * Reads are allowed beneath each --read path, reads and writes beneath each --write
 * path, and nothing else. Without --net, TCP connect is allowed only to the
 * --connect-port ports and TCP bind to none (Landlock ABI 4 and later); abstract UNIX
 * sockets and signals are scoped to the sandbox (ABI 6 and later). Every descriptor above
 * 2 is closed (but 3 to N - 1 with --pass-fds N: a browser's pipe to the harness), every capability is dropped, no-new-privs is set, a seccomp filter refuses
 * UNIX-domain sockets (but with --unix-sockets, for a program whose view of the tree holds no
 * host daemon's socket) and io_uring, the limits are set, and the command is executed.
 * Each --pin directory is bind-mounted over itself, writable, so that it cannot be
 * renamed or removed (a mount point cannot); then each --protect path (inside a --write
 * one) is bind-mounted read-only over itself (one that is gone fails the start; a
 * --protect-if-present one that is gone is passed over), which needs a mount namespace of
 * the helper's own (unshare --mount); a Landlock domain
 * cannot mount, so the command cannot undo it. Each --mask path is hidden: the directory
 * or file at --mask-source DIR named `dir` or `file` (both mode 000, made by the harness)
 * is bound over it read-only, so neither its content nor, for a directory, the names in
 * it can be read; a link there is left alone (a mount would follow it). Each --cgroup directory (cgroup v1 or v2)
 * is joined before anything else, so its limits hold for everything the command starts.
 *
 * With --join-only, the helper joins the --cgroup directories, sets the limits and
 * executes the command, with no Landlock: it goes in front of bubblewrap, whose /sys is
 * read-only, so that bubblewrap and all it starts are in the cgroups.
 *
 * With --confine-mounts (in a mount namespace of the helper's own), the grants are also
 * made with mounts, before Landlock: the whole tree read-only and without device nodes
 * (mount_setattr, recursively), each --write path bound over itself and writable again,
 * /dev/null and a few other devices bound back. With --mounts-only (no Landlock to be
 * had), they are made with mounts alone, and every capability is dropped, so nothing
 * can be mounted back.
 *
 * With --relay-port and --relay-socket, the helper first brings up the loopback interface
 * of its network namespace (a fresh one has it down), listens on 127.0.0.1 at that port,
 * and forks a relay that carries each connection made there to the UNIX socket at PATH:
 * the harness's egress proxy, the only way out of a namespace with no network. The relay
 * is forked before anything confines the helper, holds no descriptor of the command's,
 * and dies with the command (PR_SET_PDEATHSIG, and the pid namespace's end).
 *
 * As the first process of a PID namespace (under unshare), the helper forks the command
 * and stays as the namespace's init, reaping orphans and exiting as the command did
 * (128 + the signal's number for a signal). With --written-bytes or --written-fd it does so
 * under bubblewrap too (a subreaper there), counts what the namespace's processes write to
 * storage every tenth of a second, kills them all past --written-bytes (exiting 137), and
 * writes the total (and ` capped`) as one line to --written-fd when the command ends.
 *
 * With --report, the helper applies all of it and then, instead of executing anything,
 * prints what it applied as one JSON line on standard output and exits 0. Errors go to
 * standard error as one line starting "landlock-exec:" and exit with 125; a command that
 * cannot be executed exits 127.
 *
 * The constants are written out here: older system headers lack the newer ABIs'.
 * io-harness builds this file with the system C compiler on first use (no node-gyp) and
 * caches the binary by the hash of this source.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <dirent.h>
#include <stddef.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <unistd.h>

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#endif
#ifndef __NR_landlock_add_rule
#define __NR_landlock_add_rule 445
#endif
#ifndef __NR_landlock_restrict_self
#define __NR_landlock_restrict_self 446
#endif
#ifndef __NR_mount_setattr
#define __NR_mount_setattr 442
#endif
#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif
#ifndef __NR_close_range
#define __NR_close_range 436
#endif

#define CREATE_RULESET_VERSION (1U << 0)
#define RULE_PATH_BENEATH 1
#define RULE_NET_PORT 2

#define FS_EXECUTE (1ULL << 0)
#define FS_WRITE_FILE (1ULL << 1)
#define FS_READ_FILE (1ULL << 2)
#define FS_READ_DIR (1ULL << 3)
#define FS_REMOVE_DIR (1ULL << 4)
#define FS_REMOVE_FILE (1ULL << 5)
#define FS_MAKE_CHAR (1ULL << 6)
#define FS_MAKE_DIR (1ULL << 7)
#define FS_MAKE_REG (1ULL << 8)
#define FS_MAKE_SOCK (1ULL << 9)
#define FS_MAKE_FIFO (1ULL << 10)
#define FS_MAKE_BLOCK (1ULL << 11)
#define FS_MAKE_SYM (1ULL << 12)
#define FS_REFER (1ULL << 13)
#define FS_TRUNCATE (1ULL << 14)
#define FS_IOCTL_DEV (1ULL << 15)

#define NET_BIND_TCP (1ULL << 0)
#define NET_CONNECT_TCP (1ULL << 1)

#define SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define SCOPE_SIGNAL (1ULL << 1)

/* The newest ABI this file knows; a newer kernel is used at this one. */
#define KNOWN_ABI 7

struct ruleset_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

struct path_beneath_attr {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));

/* mount_setattr(2): its flags, and the attributes it sets and clears. */
#define SETATTR_RECURSIVE 0x8000
#define MOUNT_RDONLY 0x00000001ULL
#define MOUNT_NODEV 0x00000004ULL

struct mount_setattr_attr {
  uint64_t attr_set;
  uint64_t attr_clr;
  uint64_t propagation;
  uint64_t userns_fd;
};

struct net_port_attr {
  uint64_t allowed_access;
  uint64_t port;
};

#define MAX_ITEMS 4096

static void fail(const char *what) {
  fprintf(stderr, "landlock-exec: %s: %s\n", what, strerror(errno));
  exit(125);
}

static void usage(const char *what) {
  fprintf(stderr, "landlock-exec: %s\n", what);
  exit(125);
}

static unsigned long long number(const char *text, const char *flag) {
  char *end = NULL;
  errno = 0;
  unsigned long long value = strtoull(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') {
    fprintf(stderr, "landlock-exec: %s needs a whole number, not %s\n", flag, text);
    exit(125);
  }
  return value;
}

static uint64_t fs_rights(int abi) {
  uint64_t rights = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_READ_DIR | FS_REMOVE_DIR | FS_REMOVE_FILE |
                    FS_MAKE_CHAR | FS_MAKE_DIR | FS_MAKE_REG | FS_MAKE_SOCK | FS_MAKE_FIFO | FS_MAKE_BLOCK |
                    FS_MAKE_SYM;
  if (abi >= 2) rights |= FS_REFER;
  if (abi >= 3) rights |= FS_TRUNCATE;
  if (abi >= 5) rights |= FS_IOCTL_DEV;
  return rights;
}

/* The rights that make sense on a file (not a directory): the others are refused with EINVAL. */
static const uint64_t FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV;

static void add_path(int ruleset, const char *path, uint64_t rights) {
  int fd = open(path, O_PATH | O_CLOEXEC);
  if (fd < 0) {
    /* A grant on a path that does not exist grants nothing. */
    if (errno == ENOENT) return;
    fail(path);
  }
  struct stat st;
  if (fstat(fd, &st) != 0) fail(path);
  struct path_beneath_attr attr = {.allowed_access = S_ISDIR(st.st_mode) ? rights : (rights & FILE_RIGHTS),
                                   .parent_fd = fd};
  if (syscall(__NR_landlock_add_rule, ruleset, RULE_PATH_BENEATH, &attr, 0) != 0) fail(path);
  close(fd);
}

/* Read-only, or writable again, `path` and (with `recursive`) every mount beneath it; nothing else about them changes. */
static void set_attributes(const char *path, uint64_t set, uint64_t clear, int recursive) {
  struct mount_setattr_attr attr = {.attr_set = set, .attr_clr = clear};
  if (syscall(__NR_mount_setattr, AT_FDCWD, path, recursive ? SETATTR_RECURSIVE : 0, &attr, sizeof attr) != 0)
    fail(path);
}

static void set_read_only(const char *path, int read_only, int recursive) {
  set_attributes(path, read_only ? MOUNT_RDONLY : 0, read_only ? 0 : MOUNT_RDONLY, recursive);
}

/*
 * A path to protect that is gone (a mount point another run removed as it closed) is a
 * failure to start, never a path left writable: the harness wraps the command again. One
 * given `optional` (a file with another name, `--protect-if-present`) that is gone has no
 * other name left to reach: nothing to protect.
 */
static void protect(const char *path, int optional) {
  if (mount(path, path, NULL, MS_BIND | MS_REC, NULL) != 0) {
    if (optional && errno == ENOENT) return;
    fail(path);
  }
  /* Only the read-only flag changes: the mount's others (nosuid, nodev) may be locked where it came from. */
  set_read_only(path, 1, 1);
}

/* Where the masks come from: a directory holding `dir` and `file`, both mode 000 and empty. */
static const char *mask_source = NULL;

static void mask(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) {
    if (errno == ENOENT) return;
    fail(path);
  }
  if (S_ISLNK(st.st_mode)) return;
  char source[4096];
  if (snprintf(source, sizeof source, "%s/%s", mask_source, S_ISDIR(st.st_mode) ? "dir" : "file") >=
      (int)sizeof source)
    usage("a --mask-source path is too long");
  if (mount(source, path, NULL, MS_BIND, NULL) != 0) {
    /* Gone since the lstat (a store's journal SQLite removed as the store closed): nothing left to hide. */
    if (errno == ENOENT) return;
    fail(path);
  }
  set_read_only(path, 1, 0);
}

static void pin(const char *path) {
  if (mount(path, path, NULL, MS_BIND, NULL) != 0 && errno != ENOENT) fail(path);
}

/* A --write path under --mounts-only: bound over itself, then writable again (the tree around it is read-only). */
static void writable(const char *path) {
  if (mount(path, path, NULL, MS_BIND | MS_REC, NULL) != 0) {
    if (errno == ENOENT) return;
    fail(path);
  }
  set_read_only(path, 0, 0);
}

/* The device nodes a command may open: each bound over itself with devices allowed again. */
static const char *const DEVICES[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"};

/*
 * The grants made with mounts: the whole tree read-only and without devices (a read-only
 * mount refuses chmod, utimes, xattrs and every change of a file, but not a write to a
 * device node: the raw disk, /dev/kmsg), each --write path bound over itself and
 * writable again, and the few devices a program needs bound back. Under Landlock this is
 * a second wall; on the namespaces rung it is the only one.
 */
static void confine_tree(const char **writes, int nwrites) {
  set_attributes("/", MOUNT_RDONLY | MOUNT_NODEV, 0, 1);
  for (int k = 0; k < nwrites; k++) writable(writes[k]);
  for (size_t k = 0; k < sizeof DEVICES / sizeof DEVICES[0]; k++) {
    if (mount(DEVICES[k], DEVICES[k], NULL, MS_BIND, NULL) != 0) {
      if (errno == ENOENT) continue;
      fail(DEVICES[k]);
    }
    set_attributes(DEVICES[k], 0, MOUNT_NODEV, 0);
  }
}

static void join_cgroup(const char *dir) {
  char file[4096];
  if (snprintf(file, sizeof file, "%s/cgroup.procs", dir) >= (int)sizeof file) usage("a --cgroup path is too long");
  int fd = open(file, O_WRONLY | O_CLOEXEC);
  if (fd < 0) fail(file);
  char pid[32];
  int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
  if (write(fd, pid, (size_t)n) != n) fail(file);
  close(fd);
}

static void limit(int resource, unsigned long long value, const char *name) {
  /* CPU time: SIGXCPU at the cap, which ends the command and names the cap; SIGKILL a second later if it is caught. */
  struct rlimit rl = {.rlim_cur = value, .rlim_max = resource == RLIMIT_CPU ? value + 1 : value};
  if (setrlimit(resource, &rl) != 0) fail(name);
}

static void json_string(const char *text) {
  putchar('"');
  for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
    if (*c == '"' || *c == '\\')
      printf("\\%c", *c);
    else if (*c < 0x20)
      printf("\\u%04x", *c);
    else
      putchar(*c);
  }
  putchar('"');
}

static void json_list(const char *name, const char **items, int count) {
  printf(",\"%s\":[", name);
  for (int i = 0; i < count; i++) {
    if (i > 0) putchar(',');
    json_string(items[i]);
  }
  putchar(']');
}

/* Brings up the loopback interface of this network namespace (unshare --net leaves it down). */
static void loopback_up(void) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("a socket to configure the loopback interface");
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) fail("reading the loopback interface's flags");
  if (!(ifr.ifr_flags & IFF_UP)) {
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(fd, SIOCSIFFLAGS, &ifr) != 0) fail("bringing up the loopback interface");
  }
  close(fd);
}

/* Copies what one side sends to the other until both have finished; either failing ends both. */
static void relay_pipe(int client, const char *path) {
  int upstream = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un address;
  memset(&address, 0, sizeof address);
  address.sun_family = AF_UNIX;
  strncpy(address.sun_path, path, sizeof address.sun_path - 1);
  if (upstream < 0 || connect(upstream, (struct sockaddr *)&address, sizeof address) != 0) return;
  static char buffer[65536];
  int fds[2] = {client, upstream};
  int open_in[2] = {1, 1};
  while (open_in[0] || open_in[1]) {
    struct pollfd polls[2];
    int count = 0, which[2];
    for (int k = 0; k < 2; k++) {
      if (!open_in[k]) continue;
      polls[count].fd = fds[k];
      polls[count].events = POLLIN;
      which[count++] = k;
    }
    if (poll(polls, (nfds_t)count, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int p = 0; p < count; p++) {
      if (!(polls[p].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      int from = which[p], to = 1 - from;
      ssize_t n = read(fds[from], buffer, sizeof buffer);
      if (n <= 0) {
        open_in[from] = 0;
        shutdown(fds[to], SHUT_WR);
        if (n < 0) return;
        continue;
      }
      for (ssize_t sent = 0; sent < n;) {
        ssize_t m = write(fds[to], buffer + sent, (size_t)(n - sent));
        if (m <= 0) {
          if (m < 0 && errno == EINTR) continue;
          return;
        }
        sent += m;
      }
    }
  }
}

/* Listens on 127.0.0.1:port and forks the relay; the helper goes on to become the command. */
static void start_relay(unsigned long long port, const char *path) {
  if (port == 0 || port > 65535) usage("--relay-port needs a port from 1 to 65535");
  if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) usage("the --relay-socket path is too long");
  loopback_up();
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) fail("the relay's socket");
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in address;
  memset(&address, 0, sizeof address);
  address.sin_family = AF_INET;
  address.sin_port = htons((uint16_t)port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, (struct sockaddr *)&address, sizeof address) != 0) fail("the relay's port");
  if (listen(listener, 128) != 0) fail("listening on the relay's port");
  pid_t parent = getpid();
  pid_t relay = fork();
  if (relay < 0) fail("forking the relay");
  if (relay > 0) {
    close(listener);
    return;
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (getppid() != parent) _exit(0);
  /* Nothing of the command's: its output pipes closed, only the listener kept. */
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
  }
  if (dup2(listener, 3) < 0) _exit(1);
  listener = 3;
  if (syscall(__NR_close_range, 4U, ~0U, 0) != 0) {
    for (int fd = 4; fd < 1024; fd++) close(fd);
  }
  signal(SIGCHLD, SIG_IGN);
  for (;;) {
    int client = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    if (client < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE) continue;
      _exit(0);
    }
    pid_t child = fork();
    if (child == 0) {
      close(listener);
      relay_pipe(client, path);
      _exit(0);
    }
    close(client);
  }
}

/*
 * No capability survives into the command: the bounding and ambient sets emptied, the
 * securebits that keep a uid 0 from regaining any on exec set and locked, and every set
 * cleared; then checked. Under unshare the helper is root of its user namespace with a
 * full set (needed for the mounts above); under bubblewrap it already has none.
 */
static void drop_capabilities(void) {
  struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct data[2];
  memset(data, 0, sizeof data);
  if (syscall(SYS_capget, &header, data) != 0) fail("capget");
  if (data[0].permitted | data[1].permitted | data[0].effective | data[1].effective) {
    for (int cap = 0; cap < 64; cap++) {
      if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) fail("emptying the capability bounding set");
    }
    /* NOROOT, NO_SETUID_FIXUP and KEEP_CAPS, each locked (the bits' values from linux/securebits.h). */
    if (prctl(PR_SET_SECUREBITS, 0x1 | 0x2 | 0x4 | 0x8 | 0x20, 0, 0, 0) != 0) fail("setting the securebits");
    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &header, data) != 0) fail("clearing the capabilities");
  }
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) fail("the ambient capabilities");
  memset(data, 0, sizeof data);
  if (syscall(SYS_capget, &header, data) != 0) fail("capget");
  for (int k = 0; k < 2; k++) {
    if (data[k].permitted | data[k].effective | data[k].inheritable) fail("a capability is left");
  }
}

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#endif

/*
 * A seccomp filter: sockets of IPv4, IPv6 and netlink only. No UNIX-domain socket can be
 * made (a pathname one would reach any socket on the host the uid may connect to, the
 * read-only mounts notwithstanding: the host's daemons, another run's egress proxy), nor a
 * vsock (not namespaced: a way out of the VM's network past the proxy), nor any other
 * family; a UNIX socketpair(2) only of streams or seqpackets (a datagram pair could be
 * pointed at a path by sendto or connect). No io_uring (whose operations seccomp does not
 * see). A system call of another ABI (i386, x32) fails with ENOSYS.
 */
/* --unix-sockets: socket(2) of the UNIX domain is allowed too (the filter still refuses io_uring). */
static int unix_sockets = 0;

static int deny_unix_sockets(void) {
#ifdef NATIVE_ARCH
  struct sock_filter filter[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#ifdef __x86_64__
    BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
#endif
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 2, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socketpair, 8, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    /* socket(2): IPv4, IPv6 and netlink (which the C library asks about interfaces), and the UNIX domain
       with --unix-sockets (else a family no socket has); nothing else. */
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 4, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 3, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_NETLINK, 2, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, unix_sockets ? AF_UNIX : 0xffffffffU, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    /* socketpair(2) of the UNIX domain: stream and seqpacket, which cannot be pointed elsewhere; no datagrams. */
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
    BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xf),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_STREAM, 2, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_SEQPACKET, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog program = {.len = (unsigned short)(sizeof filter / sizeof filter[0]), .filter = filter};
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0) != 0) fail("the seccomp filter");
  return 1;
#else
  return 0;
#endif
}

/*
 * After the mounts: the working directory is entered again by its name, so that it is the
 * mount now there (the command's cwd was entered before it, on what is now beneath it).
 */
static void reenter_cwd(void) {
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd) != NULL && chdir(cwd) != 0) fail(cwd);
}

/*
 * Executes the command. As the first process of a PID namespace (unshare's), the helper
 * stays as its init instead: it forks the command, reaps every process orphaned to it, and
 * exits as the command did (128 + the signal's number for a signal, as bubblewrap reports
 * one), so its end is the namespace's. unshare would report a command killed by a signal
 * (a cap's SIGXCPU) as a failure of its own.
 */
/*
 * What the command may write to storage in all (--written-bytes; negative: no cap), and the
 * descriptor the total is written to when it ends (--written-fd; negative: none).
 */
static long long written_cap = -1;
static int written_fd = -1;
/* The descriptors from 3 below this one are the command's own (--pass-fds): handed to it, not closed. */
static int pass_fds = 3;

/*
 * What the processes of this PID namespace have written to storage, in bytes: the sum of
 * each one's write_bytes, which holds what its reaped children wrote too (the kernel adds
 * a child's counts to its reaper's), so nothing that ended is lost. Pages are counted as
 * they are first dirtied: a file written and then removed still counts.
 */
static unsigned long long written_total(void) {
  unsigned long long total = 0;
  DIR *proc = opendir("/proc");
  if (!proc) return 0;
  struct dirent *entry;
  while ((entry = readdir(proc)) != NULL) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    char path[300], text[1024];
    snprintf(path, sizeof path, "/proc/%s/io", entry->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) continue;
    text[n] = 0;
    const char *at = strstr(text, "\nwrite_bytes: ");
    if (at) total += strtoull(at + 14, NULL, 10);
  }
  closedir(proc);
  return total;
}

static int run(char **command) {
  int counting = written_cap >= 0 || written_fd >= 0;
  sigset_t chld, old;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  if (counting) {
    /* Woken at once when a child ends, else every tenth of a second to count. Orphans come back here to be reaped. */
    sigprocmask(SIG_BLOCK, &chld, &old);
    if (getpid() != 1) prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  }
  /* Before the fork: the command (another process then) cannot trace its init, nor read its memory and environment,
     even before this process would reach that line; its exec makes it dumpable again. */
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  pid_t child = getpid() == 1 || counting ? fork() : 0;
  if (child < 0) fail("fork");
  if (child == 0) {
    if (counting) sigprocmask(SIG_SETMASK, &old, NULL);
    execvp(command[0], command);
    fprintf(stderr, "landlock-exec: cannot execute %s: %s\n", command[0], strerror(errno));
    return 127;
  }
  int result = -1, capped = 0;
  while (result < 0) {
    int status;
    pid_t pid = waitpid(-1, &status, counting ? WNOHANG : 0);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) return 125;
    if (pid == child) {
      result = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    } else if (pid == 0) {
      if (written_cap >= 0 && !capped && written_total() > (unsigned long long)written_cap) {
        capped = 1;
        kill(-1, SIGKILL);
      }
      struct timespec tenth = {0, 100 * 1000 * 1000};
      sigtimedwait(&chld, NULL, &tenth);
    }
  }
  if (written_fd >= 0) {
    dprintf(written_fd, "%llu%s\n", written_total(), capped ? " capped" : "");
    close(written_fd);
  }
  return capped ? 128 + SIGKILL : result;
}

/* The caps a command is killed at (a negative value: none). */
static void limits(long long cpu, long long fsize, long long memory, long long processes) {
  if (cpu >= 0) limit(RLIMIT_CPU, (unsigned long long)cpu, "RLIMIT_CPU");
  if (fsize >= 0) limit(RLIMIT_FSIZE, (unsigned long long)fsize, "RLIMIT_FSIZE");
  if (memory >= 0) limit(RLIMIT_AS, (unsigned long long)memory, "RLIMIT_AS");
  if (processes >= 0) limit(RLIMIT_NPROC, (unsigned long long)processes, "RLIMIT_NPROC");
}

/* The pins and protected paths bound, the working directory entered again, and the relay forked (unless `relay` is NULL). */
static void bind_and_relay(const char **pins, int npins, const char **protects, const int *optional, int nprotects,
                           const char **masks, int nmasks, const char *relay, unsigned long long port) {
  for (int k = 0; k < npins; k++) pin(pins[k]);
  for (int k = 0; k < nprotects; k++) protect(protects[k], optional[k]);
  for (int k = 0; k < nmasks; k++) mask(masks[k]);
  reenter_cwd();
  if (relay) start_relay(port, relay);
}

/* Nothing the harness held open reaches the command (the count's descriptor is the helper's alone, closed on exec). */
static void close_inherited(void) {
  unsigned int from = (unsigned int)pass_fds;
  if (written_fd >= 3) {
    if (fcntl(written_fd, F_SETFD, FD_CLOEXEC) != 0) fail("--written-fd");
    if (written_fd > pass_fds) syscall(__NR_close_range, (unsigned int)pass_fds, (unsigned int)written_fd - 1, 0);
    from = (unsigned int)written_fd + 1;
  }
  if (syscall(__NR_close_range, from, ~0U, 0) != 0) {
    for (int fd = (int)from; fd < 1024; fd++) close(fd);
  }
}

int main(int argc, char **argv) {
  static const char *reads[MAX_ITEMS], *writes[MAX_ITEMS], *pins[MAX_ITEMS], *protects[MAX_ITEMS],
      *cgroups[MAX_ITEMS], *masks[MAX_ITEMS];
  static unsigned long long ports[MAX_ITEMS];
  static int optional[MAX_ITEMS];
  int nreads = 0, nwrites = 0, npins = 0, nprotects = 0, ncgroups = 0, nports = 0, nmasks = 0, net = 0, report = 0,
      join_only = 0, mounts_only = 0, confine_mounts = 0;
  long long cpu = -1, fsize = -1, memory = -1, processes = -1;
  unsigned long long relay_port = 0;
  const char *relay_socket = NULL;
  int i = 1;
  for (; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--") == 0) {
      i++;
      break;
    }
    if (strcmp(arg, "--net") == 0) {
      net = 1;
      continue;
    }
    if (strcmp(arg, "--report") == 0) {
      report = 1;
      continue;
    }
    if (strcmp(arg, "--join-only") == 0) {
      join_only = 1;
      continue;
    }
    if (strcmp(arg, "--mounts-only") == 0) {
      mounts_only = 1;
      continue;
    }
    if (strcmp(arg, "--confine-mounts") == 0) {
      confine_mounts = 1;
      continue;
    }
    if (strcmp(arg, "--unix-sockets") == 0) {
      unix_sockets = 1;
      continue;
    }
    if (i + 1 >= argc) usage("an option needs a value");
    const char *value = argv[++i];
    if (strcmp(arg, "--read") == 0) {
      if (nreads == MAX_ITEMS) usage("too many --read paths");
      reads[nreads++] = value;
    } else if (strcmp(arg, "--write") == 0) {
      if (nwrites == MAX_ITEMS) usage("too many --write paths");
      writes[nwrites++] = value;
    } else if (strcmp(arg, "--pin") == 0) {
      if (npins == MAX_ITEMS) usage("too many --pin paths");
      pins[npins++] = value;
    } else if (strcmp(arg, "--protect") == 0 || strcmp(arg, "--protect-if-present") == 0) {
      if (nprotects == MAX_ITEMS) usage("too many --protect paths");
      optional[nprotects] = strcmp(arg, "--protect-if-present") == 0;
      protects[nprotects++] = value;
    } else if (strcmp(arg, "--mask") == 0) {
      if (nmasks == MAX_ITEMS) usage("too many --mask paths");
      masks[nmasks++] = value;
    } else if (strcmp(arg, "--mask-source") == 0) {
      mask_source = value;
    } else if (strcmp(arg, "--cgroup") == 0) {
      if (ncgroups == MAX_ITEMS) usage("too many --cgroup directories");
      cgroups[ncgroups++] = value;
    } else if (strcmp(arg, "--connect-port") == 0) {
      if (nports == MAX_ITEMS) usage("too many --connect-port ports");
      ports[nports++] = number(value, arg);
    } else if (strcmp(arg, "--relay-port") == 0) {
      relay_port = number(value, arg);
    } else if (strcmp(arg, "--relay-socket") == 0) {
      relay_socket = value;
    } else if (strcmp(arg, "--cpu-secs") == 0) {
      cpu = (long long)number(value, arg);
    } else if (strcmp(arg, "--file-bytes") == 0) {
      fsize = (long long)number(value, arg);
    } else if (strcmp(arg, "--written-bytes") == 0) {
      written_cap = (long long)number(value, arg);
    } else if (strcmp(arg, "--written-fd") == 0) {
      written_fd = (int)number(value, arg);
    } else if (strcmp(arg, "--pass-fds") == 0) {
      pass_fds = (int)number(value, arg);
      if (pass_fds < 3 || pass_fds > 64) usage("--pass-fds needs a descriptor from 3 to 64");
    } else if (strcmp(arg, "--memory-bytes") == 0) {
      memory = (long long)number(value, arg);
    } else if (strcmp(arg, "--processes") == 0) {
      processes = (long long)number(value, arg);
    } else {
      fprintf(stderr, "landlock-exec: unknown option %s\n", arg);
      return 125;
    }
  }
  if (!report && i >= argc) usage("no command after --");
  if ((relay_port != 0) != (relay_socket != NULL)) usage("--relay-port and --relay-socket go together");
  if (join_only && mounts_only) usage("--join-only and --mounts-only do not go together");
  if (nmasks > 0 && mask_source == NULL) usage("--mask needs --mask-source");
  if (written_fd >= 3 && written_fd < pass_fds) usage("--written-fd must be above the --pass-fds descriptors");

  if (join_only) {
    for (int k = 0; k < ncgroups; k++) join_cgroup(cgroups[k]);
    if (relay_socket) start_relay(relay_port, relay_socket);
    limits(cpu, fsize, memory, processes);
    return run(&argv[i]);
  }

  if (mounts_only) {
    for (int k = 0; k < ncgroups; k++) join_cgroup(cgroups[k]);
    /* No --read but "/" is known here: the tree stays readable, and read-only but for the --write paths. */
    confine_tree(writes, nwrites);
    bind_and_relay(pins, npins, protects, optional, nprotects, masks, nmasks, report ? NULL : relay_socket, relay_port);
    limits(cpu, fsize, memory, processes);
    drop_capabilities();
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("PR_SET_NO_NEW_PRIVS");
    int unix_denied = deny_unix_sockets();
    if (report) {
      printf("{\"abi\":0,\"fs\":\"mounts\",\"tcp\":false,\"scoped\":false,\"unixSockets\":%s",
             unix_denied ? "false" : "true");
      json_list("write", writes, nwrites);
      json_list("protect", protects, nprotects);
      json_list("mask", masks, nmasks);
      printf("}\n");
      return 0;
    }
    close_inherited();
    return run(&argv[i]);
  }

  int abi = (int)syscall(__NR_landlock_create_ruleset, NULL, 0, CREATE_RULESET_VERSION);
  if (abi < 1) fail("Landlock is not available");
  if (abi > KNOWN_ABI) abi = KNOWN_ABI;

  for (int k = 0; k < ncgroups; k++) join_cgroup(cgroups[k]);
  if (confine_mounts) confine_tree(writes, nwrites);
  bind_and_relay(pins, npins, protects, optional, nprotects, masks, nmasks, report ? NULL : relay_socket, relay_port);
  limits(cpu, fsize, memory, processes);

  struct ruleset_attr attr = {.handled_access_fs = fs_rights(abi), .handled_access_net = 0, .scoped = 0};
  if (abi >= 4 && !net) attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP;
  if (abi >= 6) attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL;
  size_t size = abi >= 6 ? sizeof(attr) : abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
  int ruleset = (int)syscall(__NR_landlock_create_ruleset, &attr, size, 0);
  if (ruleset < 0) fail("landlock_create_ruleset");

  const uint64_t read_rights = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR;
  for (int k = 0; k < nreads; k++) add_path(ruleset, reads[k], read_rights);
  for (int k = 0; k < nwrites; k++) add_path(ruleset, writes[k], fs_rights(abi));
  if (attr.handled_access_net) {
    for (int k = 0; k < nports; k++) {
      struct net_port_attr port = {.allowed_access = NET_CONNECT_TCP, .port = ports[k]};
      if (syscall(__NR_landlock_add_rule, ruleset, RULE_NET_PORT, &port, 0) != 0) fail("a TCP port rule");
    }
  }

  drop_capabilities();
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("PR_SET_NO_NEW_PRIVS");
  if (syscall(__NR_landlock_restrict_self, ruleset, 0) != 0) fail("landlock_restrict_self");
  close(ruleset);
  int unix_denied = deny_unix_sockets();

  if (report) {
    printf("{\"abi\":%d,\"fs\":true,\"tcp\":%s,\"scoped\":%s,\"unixSockets\":%s", abi,
           attr.handled_access_net ? "true" : "false", attr.scoped ? "true" : "false", unix_denied ? "false" : "true");
    json_list("read", reads, nreads);
    json_list("write", writes, nwrites);
    json_list("protect", protects, nprotects);
    json_list("mask", masks, nmasks);
    json_list("cgroups", cgroups, ncgroups);
    printf(",\"connectPorts\":[");
    for (int k = 0; k < nports; k++) printf("%s%llu", k ? "," : "", ports[k]);
    printf("],\"limits\":{\"cpuSecs\":%lld,\"fileBytes\":%lld,\"memoryBytes\":%lld,\"processes\":%lld}}\n", cpu,
           fsize, memory, processes);
    return 0;
  }

  close_inherited();
  return run(&argv[i]);
}
