/* The forker: the process that forks every one-shot run of a slot, and each run's set-up.
 *
 * Why it exists. On a fork, the kernel write-protects every page the two processes now share, so
 * every page either one writes afterwards costs a page fault and a copy (~4 us each in a VM). The
 * zygote writes ~270 pages while it handles a request, so when it forked each run itself it paid
 * ~270 faults a run, and each run paid ~60 more to set itself up in Python. The forker is a fork of
 * the warm zygote that, once started, runs no Python at all: it sits in this loop, so its pages
 * stay as they were and forking it costs no faults afterwards; and a run's set-up (session, file
 * descriptors, rlimits, identity, syscall filter, working directory) is done here in C, before the
 * run touches any Python object. dojo.sandbox.guest.forker loads this library with ctypes (``Forker``);
 * the host compiles it once per machine (dojo.sandbox.forker_build). Where it cannot be built, the
 * zygote forks each run itself and sets it up in Python (``RunChild.child``), with the same result:
 * tests/sandbox/test_forker.py compares the two.
 *
 * One request, from the zygote, is one SOCK_SEQPACKET message: a ``struct run_setup``, then the
 * run's own message for its Python side (opaque here), with the run's four descriptors (stdin,
 * stdout, stderr, set-up errors) attached as SCM_RIGHTS. The run is cloned with CLONE_PARENT, so it
 * is the zygote's child (the zygote waits for it, as it did for runs it forked itself), and its
 * first act is to write its pid (4 bytes) on the set-up error pipe; a set-up failure follows there
 * as text, and the run exits 127. If the clone fails, the forker writes the negated errno instead.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define SETUP_VERSION 1
#define MAX_RLIMITS 8
#define RUN_FDS 4 /* stdin, stdout, stderr, set-up errors: they become fds 0-3 */

enum {
    UNSHARE_IPC = 1, /* a fresh IPC namespace (where the zygote cannot watch its own) */
    JOIN_NETNS = 2,  /* the host's network namespace (a run that may use the network) */
    ROOTLESS = 4,    /* a nested user namespace where the slot's root appears as ``uid`` */
    PROTECT = 8,     /* a trusted harness: not dumpable, every signal blocked */
    RUN_FILTER = 16, /* install the syscall filter at ``filter`` last */
    SPLIT = 32,      /* a grading harness: fork its candidate's process here too (split_harness) */
    CANDIDATE = 64,  /* a judged harness's candidate: the slot's judge is its trusted side (become_candidate) */
};

/* What ``dojo_forker_serve`` returns in a run's process: the length of its message, with its role
 * in the bits from ROLE_SHIFT up (a plain run's is 0). */
#define ROLE_SHIFT 24
enum { ROLE_TRUSTED = 1, ROLE_CANDIDATE = 2 };
#define TRUSTED_CALL_FD 4  /* the trusted process's ends of the channel (close-on-exec) */
#define TRUSTED_REPLY_FD 5
#define CANDIDATE_CALL_FD 3 /* the candidate's ends */
#define CANDIDATE_REPLY_FD 4

struct run_rlimit {
    int32_t resource;
    int32_t pad;
    uint64_t cur, max;
};

struct run_setup {
    uint32_t version;
    uint32_t flags;
    int32_t netns_fd;
    uint32_t uid; /* root mode: the slot's run uid; rootless: the uid the run sees */
    uint32_t nrlimits;
    uint32_t umask;
    uint64_t filter; /* address of a struct sock_fprog in this process (the zygote built it) */
    struct run_rlimit rlimits[MAX_RLIMITS];
    char dir[64]; /* the working directory */
};

/* Report a set-up failure as the Python side would name it, then end the run. */
static void fail(int fd, const char *what) {
    char buf[256];
    int err = errno;
    int n = snprintf(buf, sizeof buf, "OSError: [Errno %d] %s: %s", err, what, strerror(err));
    if (n > 0) {
        ssize_t w = write(fd, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
        (void)w;
    }
    _exit(127);
}

static void write_file(int exc, const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    size_t n = strlen(text);
    if (fd < 0 || write(fd, text, n) != (ssize_t)n) fail(exc, path);
    close(fd);
}

static void become_run_user(const struct run_setup *s, int exc) {
    if (!(s->flags & ROOTLESS)) {
        if (setgroups(0, NULL) < 0) fail(exc, "setgroups");
        if (setresgid(s->uid, s->uid, s->uid) < 0) fail(exc, "setresgid");
        if (setresuid(s->uid, s->uid, s->uid) < 0) fail(exc, "setresuid");
        return;
    }
    char map[32];
    if (unshare(CLONE_NEWUSER) < 0) fail(exc, "unshare");
    snprintf(map, sizeof map, "%u 0 1", s->uid);
    write_file(exc, "/proc/self/setgroups", "deny");
    write_file(exc, "/proc/self/uid_map", map);
    write_file(exc, "/proc/self/gid_map", map);
    /* A new user namespace grants every capability inside it; a run needs none. */
    for (int cap = 0; cap < 64; cap++)
        if (prctl(PR_CAPBSET_DROP, (unsigned long)cap, 0, 0, 0) != 0) break; /* past the last */
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &header, data) < 0) fail(exc, "capset");
}

/* The run's set-up, in the order of RunChild.child. ``fds`` are the run's descriptors as received. */
static void set_up_run(const struct run_setup *s, const int *fds) {
    int exc = fds[3];
    int high[RUN_FDS];
    if (setsid() < 0) fail(exc, "setsid");
    if ((s->flags & UNSHARE_IPC) && unshare(CLONE_NEWIPC) < 0) fail(exc, "unshare");
    if ((s->flags & JOIN_NETNS) && setns(s->netns_fd, CLONE_NEWNET) < 0) fail(exc, "setns");
    for (int i = 0; i < RUN_FDS; i++)
        if ((high[i] = fcntl(fds[i], F_DUPFD, 64)) < 0) fail(exc, "fcntl");
    exc = high[3];
    for (int i = 0; i < RUN_FDS; i++)
        if (dup3(high[i], i, i == 3 ? O_CLOEXEC : 0) < 0) fail(exc, "dup3");
    exc = 3;
    if (syscall(SYS_close_range, RUN_FDS, ~0U, 0) < 0) {
        if (errno != ENOSYS) fail(exc, "close_range");
        for (int fd = RUN_FDS; fd < 65536; fd++) close(fd);
    }
    write_file(exc, "/proc/self/oom_score_adj", "1000");
    for (uint32_t i = 0; i < s->nrlimits; i++) {
        struct rlimit l = {s->rlimits[i].cur, s->rlimits[i].max};
        if (setrlimit(s->rlimits[i].resource, &l) < 0) fail(exc, "setrlimit");
    }
    become_run_user(s, exc);
    if (s->flags & PROTECT) {
        sigset_t all;
        sigfillset(&all);
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) fail(exc, "prctl");
        if (sigprocmask(SIG_BLOCK, &all, NULL) < 0) fail(exc, "sigprocmask");
    }
    if ((s->flags & RUN_FILTER) && prctl(PR_SET_SECCOMP, 2 /* SECCOMP_MODE_FILTER */, (void *)(uintptr_t)s->filter, 0, 0) < 0)
        fail(exc, "seccomp");
    if (chdir(s->dir) < 0) fail(exc, "chdir");
    umask((mode_t)s->umask);
}

/* ``random.seed()`` for the run, done here: ``random_state`` is the address of the Mersenne Twister
 * state of the ``random`` module's generator in this process (Python's ``RandomObject``: an int
 * ``index``, then 624 32-bit words; the zygote checked that layout against ``getstate()`` before
 * passing it). It is filled from the kernel's generator as Python's own seeding from the OS would
 * leave it (the first word fixed, the index at the end, so the next draw regenerates the state).
 * Seeding in Python cost each run ~14 page faults; this writes the one or two pages it must. */
#define MT_N 624
static void reseed(uintptr_t random_state, int exc) {
    uint32_t *mt = (uint32_t *)random_state;
    size_t done = 0;
    while (done < sizeof(uint32_t) * MT_N) {
        ssize_t got = getrandom((char *)mt + done, sizeof(uint32_t) * MT_N - done, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) fail(exc, "getrandom");
        done += (size_t)got;
    }
    mt[0] = 0x80000000U; /* as init_by_array leaves it: the state is never all zero */
    *(int *)(random_state - sizeof(int)) = MT_N;
}

/* A candidate's process laid out (see split_harness, become_candidate): fd 0 /dev/null, fds 1 and 2
 * the run's stderr (its prints never reach the report channel), fds 3 and 4 its ends of the channel
 * (calls in from ``call_in``, replies out to ``reply_out``), nothing else; every signal unblocked.
 * Returns ROLE_CANDIDATE; a failure ends the process with status 125 (its trusted side then reports
 * it gone). */
static int lay_out_candidate(int call_in, int reply_out) {
    sigset_t none;
    sigemptyset(&none);
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int in = fcntl(call_in, F_DUPFD_CLOEXEC, 16), out = fcntl(reply_out, F_DUPFD_CLOEXEC, 16);
    if (null < 0 || in < 0 || out < 0) _exit(125);
    if (dup2(null, 0) < 0 || dup2(2, 1) < 0 || dup2(in, CANDIDATE_CALL_FD) < 0 || dup2(out, CANDIDATE_REPLY_FD) < 0)
        _exit(125);
    if (syscall(SYS_close_range, CANDIDATE_REPLY_FD + 1, ~0U, 0) < 0) {
        if (errno != ENOSYS) _exit(125);
        for (int fd = CANDIDATE_REPLY_FD + 1; fd < 65536; fd++) close(fd);
    }
    if (sigprocmask(SIG_SETMASK, &none, NULL) < 0) _exit(125);
    return ROLE_CANDIDATE;
}

/* A judged harness's run: the candidate's process alone, whose trusted side is the slot's judge, a
 * process that lives as long as the slot (dojo.sandbox.guest.judge). It arrives with the channel's
 * ends as its fds 0 and 1 (calls in, replies out) and the run's stderr as fd 2, and is laid out as a
 * split harness's candidate is; its set-up error pipe (fd 3) is replaced by the channel's end, which
 * tells the zygote that the set-up succeeded. */
static int become_candidate(void) { return lay_out_candidate(0, 1); }

/* A grading harness's two processes (dojo.rewards.programs.harness), made before either runs any
 * Python: the run's process, set up and protected (non-dumpable, signals blocked), forks the
 * candidate's process here, so that the candidate's process starts from the forker's pristine
 * memory (as a plain run does) rather than from a trusted process that has been running Python, and
 * neither pays the other's copy-on-write faults for what the harness did in Python before the fork.
 * The candidate's process: fd 0 /dev/null, fds 1 and 2 the run's stderr, fds 3 and 4 its ends of the
 * channel (calls in, replies out), nothing else; every signal unblocked; ``random`` reseeded again
 * (its own state, not the trusted process's). The trusted process: fds 4 and 5 its ends (calls out,
 * replies in), close-on-exec; the candidate's pid in the 4 bytes of ``payload`` after its message.
 * Returns the role. A failure here ends the run as a set-up failure (the candidate's, as its exit
 * status 125: the trusted process reports it gone). */
static int split_harness(char *payload, size_t got, uint32_t capacity, uintptr_t random_state) {
    int exc = 3;
    int call[2], reply[2];
    if (got + sizeof(int32_t) > capacity) {
        errno = E2BIG;
        fail(exc, "split_harness");
    }
    if (pipe2(call, O_CLOEXEC) < 0 || pipe2(reply, O_CLOEXEC) < 0) fail(exc, "pipe2");
    pid_t pid = fork();
    if (pid < 0) fail(exc, "fork");
    if (pid == 0) {
        if (random_state) reseed(random_state, 2);
        return lay_out_candidate(call[0], reply[1]);
    }
    int out = fcntl(call[1], F_DUPFD_CLOEXEC, 16), in = fcntl(reply[0], F_DUPFD_CLOEXEC, 16);
    if (out < 0 || in < 0) fail(exc, "fcntl");
    close(call[0]);
    close(call[1]);
    close(reply[0]);
    close(reply[1]);
    if (dup3(out, TRUSTED_CALL_FD, O_CLOEXEC) < 0 || dup3(in, TRUSTED_REPLY_FD, O_CLOEXEC) < 0) fail(exc, "dup3");
    close(out);
    close(in);
    int32_t child = (int32_t)pid;
    memcpy(payload + got, &child, sizeof child);
    return ROLE_TRUSTED;
}

/* glibc's fork() cannot take CLONE_PARENT, so this is the clone it makes, with that flag added:
 * the kernel writes the child's tid into glibc's thread descriptor (found with PR_GET_TID_ADDRESS),
 * and the child re-registers its robust-mutex list, as glibc's _Fork does. */
static long clone_run(int *tid_address) {
    unsigned long flags = CLONE_PARENT | CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD;
#if defined(__x86_64__)
    return syscall(SYS_clone, flags, 0, NULL, tid_address, 0);
#elif defined(__aarch64__) || defined(__riscv) || defined(__powerpc64__)
    return syscall(SYS_clone, flags, 0, NULL, 0, tid_address);
#else
#error "dojo's forker knows clone's argument order only for x86_64, aarch64, riscv64 and ppc64"
#endif
}

/* Serve fork requests on ``sock`` until the zygote closes it. Returns -1 (errno set; 0 at the end
 * of the stream) in the forker; returns the length of the run's message, which is in ``payload``, in
 * each run's process, set up (and ``random`` reseeded where ``random_state`` is not 0: see reseed),
 * with the process's role in a split harness from bit ROLE_SHIFT up (see split_harness). */
int dojo_forker_serve(int sock, char *payload, uint32_t capacity, uintptr_t random_state) {
    int *tid_address = NULL;
    void *robust_head = NULL;
    size_t robust_len = 0;
    if (prctl(PR_GET_TID_ADDRESS, &tid_address, 0, 0, 0) < 0 || tid_address == NULL) return -1;
    if (syscall(SYS_get_robust_list, 0, &robust_head, &robust_len) < 0) return -1;
    size_t held = capacity; /* how much of ``payload`` may hold an earlier message (all of it, at first) */
    for (;;) {
        struct run_setup s;
        union {
            struct cmsghdr align;
            char buf[CMSG_SPACE(RUN_FDS * sizeof(int))];
        } control;
        struct iovec iov[2] = {{&s, sizeof s}, {payload, capacity}};
        struct msghdr msg = {0};
        msg.msg_iov = iov;
        msg.msg_iovlen = 2;
        msg.msg_control = control.buf;
        msg.msg_controllen = sizeof control.buf;
        ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (n == 0) errno = 0;
            return -1;
        }
        int fds[RUN_FDS];
        int nfds = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
            int count = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < count; i++) {
                int fd;
                memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
                if (nfds < RUN_FDS) fds[nfds++] = fd;
                else close(fd);
            }
        }
        /* Every run inherits ``payload``: what a longer earlier message left past this one (another
         * run's arguments, environment, source) is zeroed before this run is cloned. */
        size_t got = (size_t)n > sizeof s ? (size_t)n - sizeof s : 0;
        if (got < held) memset(payload + got, 0, held - got);
        held = got;
        int valid = nfds == RUN_FDS && (size_t)n >= sizeof s && s.version == SETUP_VERSION &&
                    s.nrlimits <= MAX_RLIMITS && memchr(s.dir, 0, sizeof s.dir) != NULL &&
                    !(msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC));
        if (valid) {
            long pid = clone_run(tid_address);
            if (pid == 0) {
                syscall(SYS_set_robust_list, robust_head, robust_len);
                close(sock);
                int32_t me = (int32_t)getpid();
                if (write(fds[3], &me, sizeof me) != sizeof me) _exit(127);
                if (random_state) reseed(random_state, fds[3]);
                set_up_run(&s, fds);
                int role = (s.flags & SPLIT)       ? split_harness(payload, got, capacity, random_state)
                           : (s.flags & CANDIDATE) ? become_candidate()
                                                   : 0;
                return (int)(got | ((size_t)role << ROLE_SHIFT));
            }
            if (pid < 0) {
                int32_t err = -errno;
                ssize_t w = write(fds[3], &err, sizeof err);
                (void)w;
            }
        }
        for (int i = 0; i < nfds; i++) close(fds[i]); /* the zygote reads EOF if none was cloned */
    }
}
