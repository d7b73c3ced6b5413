// The sandbox init's framing protocol (pool/init/init_protocol.h), as the init reads it from a
// connection the agent could also write to: frames of any type and length read to EOF, each JSON
// header parsed the way the init parses it. Must never crash, hang or read past a frame.

#include "pool/init/init_protocol.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <sys/mman.h>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const int fd = ::memfd_create("frames", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (paddock::pool::init::writeAll(fd, data, size) && ::lseek(fd, 0, SEEK_SET) == 0) {
        while (auto frame = paddock::pool::init::readFrame(fd)) {
            const auto header = nlohmann::json::parse(frame->payload, nullptr, false);
            if (header.is_object())
                (void)header.value("argv", std::vector<std::string>{}).size();
        }
    }
    ::close(fd);
    return 0;
}
