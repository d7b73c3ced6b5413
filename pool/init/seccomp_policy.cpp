#include "pool/init/seccomp_policy.h"

#include <seccomp.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <sched.h>
#include <sys/ioctl.h>

namespace paddock::pool::init {
namespace {

// Namespace flags of clone() and unshare(). CLONE_NEWUSER is the one that matters (it grants
// capabilities); the others need CAP_SYS_ADMIN, which no sandbox process has, and are denied too
// so the answer is the same EPERM whichever is asked for.
constexpr unsigned long kNamespaceFlags[] = {CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,    CLONE_NEWNET,
                                             CLONE_NEWUTS,  CLONE_NEWIPC, CLONE_NEWCGROUP, 0x00000080 /* CLONE_NEWTIME */};

// The ioctl command is an unsigned int; the kernel ignores the upper half of the register, so the
// rule must too or `ioctl(fd, TIOCSTI | 1ul << 32, ...)` would slip past.
constexpr uint64_t kIoctlCommandMask = 0xffffffffu;

struct FilterDeleter {
    void operator()(void *ctx) const { seccomp_release(ctx); }
};

std::string failure(const std::string &what, int rc) { return what + ": " + std::strerror(-rc); }

} // namespace

const std::vector<SeccompGroup> &seccompGroups()
{
    static const std::vector<SeccompGroup> groups = {
        {"keyring",
         "the kernel keyring is not namespaced: keys are shared with the host's processes, and keyctl has a long "
         "record of kernel bugs",
         {"keyctl", "add_key", "request_key"}},
        {"kernel-programs",
         "BPF programs and perf events run in, and observe, the host's kernel",
         {"bpf", "perf_event_open"}},
        {"userfaultfd",
         "lets a process pause the kernel in the middle of a copy, the usual way to win a kernel race in an exploit",
         {"userfaultfd"}},
        {"io_uring",
         "a second system-call interface that this filter cannot see into, and a frequent source of kernel exploits",
         {"io_uring_setup", "io_uring_enter", "io_uring_register"}},
        {"kernel-replacement",
         "load, unload or replace the host's kernel and its modules, or reboot it",
         {"kexec_load", "kexec_file_load", "reboot", "init_module", "finit_module", "delete_module", "create_module",
          "get_kernel_syms", "query_module"}},
        {"file-handles",
         "opens a file by handle, ignoring the mounts the sandbox sees: the classic container escape",
         {"open_by_handle_at"}},
        {"mount",
         "the sandbox's filesystem is the pool's: nothing inside changes what is mounted where",
         {"mount", "umount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount",
          "fspick", "mount_setattr"}},
        {"namespaces",
         "joining another namespace, or making a user namespace (which grants its maker every capability over new "
         "kernel objects), reopens what the sandbox closed; clone and unshare are refused with any namespace flag",
         {"setns"}},
        {"host-settings",
         "host-wide settings (clock, swap, kernel log, accounting, quotas, I/O ports, sysctl) are not an agent's to "
         "read or change; the kernel log also leaks the host's kernel addresses",
         {"swapon", "swapoff", "syslog", "acct", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "quotactl",
          "quotactl_fd", "lookup_dcookie", "nfsservctl", "iopl", "ioperm", "uselib", "_sysctl", "ustat", "sysfs", "vm86",
          "vm86old", "fanotify_init"}},
    };
    return groups;
}

std::vector<std::string> seccompArgumentRules()
{
    return {
        "clone and unshare with a namespace flag (CLONE_NEWUSER, NEWNS, NEWPID, NEWNET, NEWUTS, NEWIPC, NEWCGROUP, "
        "NEWTIME): EPERM",
        "clone3: ENOSYS, so the C library falls back to clone, whose flags the filter can read",
        "ioctl TIOCSTI (type into a terminal) and TIOCLINUX (read a console's screen): EPERM",
    };
}

std::string loadSeccompFilter()
{
    std::unique_ptr<void, FilterDeleter> ctx(seccomp_init(SCMP_ACT_ALLOW));
    if (!ctx)
        return "seccomp_init failed";
    // 32-bit calls from a 64-bit sandbox (int 0x80, x32) use other numbers: filter those tables too.
    if (seccomp_arch_native() == SCMP_ARCH_X86_64) {
        for (uint32_t arch : {SCMP_ARCH_X86, SCMP_ARCH_X32}) {
            if (int rc = seccomp_arch_add(ctx.get(), arch); rc != 0 && rc != -EEXIST)
                return failure("seccomp_arch_add", rc);
        }
    }
    const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
    for (const auto &group : seccompGroups()) {
        for (const char *name : group.syscalls) {
            const int nr = seccomp_syscall_resolve_name(name);
            if (nr == __NR_SCMP_ERROR)
                continue;   // not a call of any architecture filtered here
            if (int rc = seccomp_rule_add(ctx.get(), eperm, nr, 0); rc != 0 && rc != -EDOM)
                return failure(std::string("denying ") + name, rc);
        }
    }
    for (unsigned long flag : kNamespaceFlags) {
        for (int nr : {SCMP_SYS(clone), SCMP_SYS(unshare)}) {
            if (int rc = seccomp_rule_add(ctx.get(), eperm, nr, 1, SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag)); rc != 0)
                return failure("denying namespace flags", rc);
        }
    }
    if (int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0); rc != 0 && rc != -EDOM)
        return failure("clone3", rc);
    for (unsigned long request : {static_cast<unsigned long>(TIOCSTI), static_cast<unsigned long>(TIOCLINUX)}) {
        if (int rc = seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, kIoctlCommandMask, request));
            rc != 0)
            return failure("denying terminal ioctls", rc);
    }
    // no_new_privs (libseccomp's default): the filter loads without CAP_SYS_ADMIN, and no setuid
    // program inside can gain privileges the filter did not foresee.
    if (int rc = seccomp_load(ctx.get()); rc != 0)
        return failure("seccomp_load", rc);
    return {};
}

} // namespace paddock::pool::init
