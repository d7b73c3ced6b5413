#include "pool/init/capabilities.h"

#include <cerrno>
#include <cstring>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace paddock::pool::init {
namespace {

constexpr int kMaxCapability = 63;

bool capabilitySets(__user_cap_data_struct (&data)[2])
{
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    return ::syscall(SYS_capget, &header, data) == 0;
}

} // namespace

std::string dropAllCapabilities()
{
    // The bounding set first: dropping from it needs CAP_SETPCAP, given up last.
    for (int cap = 0; cap <= kMaxCapability; ++cap) {
        const int held = ::prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
        if (held < 0)
            break;   // past the kernel's last capability
        if (held == 1 && ::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0)
            return "cannot drop capability " + std::to_string(cap) + " from the bounding set: " + std::strerror(errno);
    }
    ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    __user_cap_data_struct none[2] = {};
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct now[2] = {};
    if (capabilitySets(now) && (now[0].permitted | now[1].permitted | now[0].inheritable | now[1].inheritable) != 0 &&
        ::syscall(SYS_capset, &header, none) != 0)
        return std::string("cannot clear the permitted capabilities: ") + std::strerror(errno);
    if (!capabilitySets(now))
        return std::string("cannot read the capabilities back: ") + std::strerror(errno);
    if ((now[0].permitted | now[1].permitted | now[0].effective | now[1].effective) != 0)
        return "capabilities are still held after dropping them all";
    return {};
}

} // namespace paddock::pool::init
