#pragma once
// For tests whose sandboxes must reach their cpu quota (CPU throttling) on a host whose other work
// would otherwise leave them less than that: while alive, the test process runs in a cgroup of its
// own in the v1 cpu hierarchy with a high cpu.shares, as an operator would give paddock-pool's
// service a CPU weight. A pool started inside (in process, or as a child) makes its cgroups under
// it, so its sandboxes compete for the host's cores with that weight; their quotas still cap them.
//
// Known limits: v1 only. On a v2 host the pool cannot nest its cgroups under a cgroup that holds a
// process (the test's), so there this does nothing and the tests check that the quota was reached.
// Root only; otherwise nothing happens either. Threads: the test's main thread.

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <unistd.h>

namespace paddock::test {

class CpuWeight {
public:
    static constexpr int kShares = 8192;   // eight times a default task's or cgroup's 1024

    CpuWeight()
    {
        namespace fs = std::filesystem;
        const fs::path mount = "/sys/fs/cgroup/cpu";
        std::error_code ec;
        if (::geteuid() != 0 || !fs::exists(mount / "cpu.shares", ec))
            return;
        const fs::path parent = mount / fs::path(selfPath("cpu")).relative_path();
        const fs::path dir = parent / ("paddock-test-weight-" + std::to_string(::getpid()));
        if (!fs::create_directory(dir, ec))
            return;
        if (!write(dir / "cpu.shares", std::to_string(kShares)) || !write(dir / "cgroup.procs", std::to_string(::getpid()))) {
            fs::remove(dir, ec);
            return;
        }
        m_parent = parent;
        m_dir = dir;
    }

    ~CpuWeight()
    {
        if (m_dir.empty())
            return;
        write(m_parent / "cgroup.procs", std::to_string(::getpid()));
        removeTree(m_dir);
    }

    CpuWeight(const CpuWeight &) = delete;
    CpuWeight &operator=(const CpuWeight &) = delete;

    bool active() const { return !m_dir.empty(); }

private:
    static std::string selfPath(const std::string &controller)
    {
        std::ifstream in("/proc/self/cgroup");
        for (std::string line; std::getline(in, line);) {
            const auto a = line.find(':');
            const auto b = line.find(':', a + 1);
            if (a == std::string::npos || b == std::string::npos)
                continue;
            std::istringstream controllers(line.substr(a + 1, b - a - 1));
            for (std::string c; std::getline(controllers, c, ',');)
                if (c == controller)
                    return line.substr(b + 1);
        }
        return "/";
    }

    static bool write(const std::filesystem::path &path, const std::string &value)
    {
        std::ofstream out(path);
        out << value;
        out.flush();
        return static_cast<bool>(out);
    }

    // The pool leaves its own (empty) directory behind: rmdir bottom-up.
    static void removeTree(const std::filesystem::path &dir)
    {
        std::error_code ec;
        for (const auto &entry : std::filesystem::directory_iterator(dir, ec))
            if (entry.is_directory(ec))
                removeTree(entry.path());
        ::rmdir(dir.c_str());
    }

    std::filesystem::path m_parent;
    std::filesystem::path m_dir;
};

} // namespace paddock::test
