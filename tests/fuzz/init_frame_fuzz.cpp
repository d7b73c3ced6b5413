// The sandbox init's framing protocol (pool/init/init_protocol.h), as the init reads it from a
// connection the agent could also write to: frames of any type and length read to EOF, each JSON
// header parsed the way the init parses it. Must never crash, hang or read past a frame. A header
// with a field of the wrong JSON type ("argv": 420) throws nlohmann::json::type_error, which the
// init's handler turns into an invalid_argument answer (sandbox_init_handler.cpp); so does this.

#include "pool/init/init_protocol.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>
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
            if (!header.is_object())
                continue;
            try {
                (void)header.value("argv", std::vector<std::string>{}).size();
            } catch (const nlohmann::json::exception &) {
            }
        }
    }
    ::close(fd);
    return 0;
}
