#include "metrics/server/metrics_server.h"

#include "metrics/registry.h"

#include <httplib.h>

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <thread>

namespace paddock::metrics {

namespace {

constexpr time_t kReadTimeoutS = 5;
constexpr time_t kWriteTimeoutS = 10;
constexpr size_t kMaxRequestBodyBytes = 4096;   // a scrape sends none

std::string lower(std::string_view text)
{
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

// SO_REUSEADDR only. cpp-httplib's default adds SO_REUSEPORT, with which a second daemon given the
// same address would share the port (and half the scrapes) instead of failing at start.
void socketOptions(socket_t sock)
{
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
}

} // namespace

std::string_view bearerTokenOf(std::string_view authorization)
{
    constexpr std::string_view kScheme = "bearer ";
    if (authorization.size() <= kScheme.size() || lower(authorization.substr(0, kScheme.size())) != kScheme)
        return {};
    std::string_view token = authorization.substr(kScheme.size());
    while (!token.empty() && token.front() == ' ')
        token.remove_prefix(1);
    while (!token.empty() && (token.back() == ' ' || token.back() == '\r'))
        token.remove_suffix(1);
    return token;
}

struct MetricsServer::Impl {
    MetricsServerOptions options;
    std::unique_ptr<httplib::Server> server;
    std::thread thread;
    std::atomic<bool> done{false};
    int port = 0;
    bool tls = false;
    bool stopped = false;

    // "" when the request may scrape, otherwise the 401's body. token: what the request presented
    // (a view into authorization).
    std::string refusal(const httplib::Request &request, const std::string &authorization, std::string_view &token) const
    {
        if (!options.checkToken)
            return {};
        if (!request.has_header("Authorization"))
            return "this endpoint needs 'Authorization: Bearer <token>' and the scrape had none; " + options.tokenHint;
        token = bearerTokenOf(authorization);
        if (token.empty())
            return "the Authorization header is not 'Bearer <token>'; send the token as a bearer token "
                   "(Prometheus: authorization.credentials_file in the scrape config)";
        return options.checkToken(token);
    }

    void answer(const httplib::Request &request, httplib::Response &response) const
    {
        const std::string authorization = request.get_header_value("Authorization");
        std::string_view token;
        if (auto why = refusal(request, authorization, token); !why.empty()) {
            if (options.onRefusal)
                options.onRefusal(why, token);
            response.status = 401;
            response.set_header("WWW-Authenticate", "Bearer realm=\"paddock metrics\"");
            response.set_content(why + "\n", "text/plain; charset=utf-8");
            return;
        }
        response.set_content(options.render ? options.render() : registry().expose(), kContentType);
    }
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

MetricsServer::~MetricsServer()
{
    stop();
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(MetricsServerOptions options)
{
    auto address = parseListenAddress(options.listen, options.setting);
    if (!address)
        return std::unexpected(address.error());
    auto impl = std::make_unique<Impl>();
    impl->tls = !options.tlsCert.empty() || !options.tlsKey.empty();
    if (options.tlsCert.empty() != options.tlsKey.empty())
        return fail(ErrorCode::InvalidArgument, options.setting + ": a TLS certificate and its key go together; give both "
                                                                  "or neither");
    if (!impl->tls && !options.clientCa.empty())
        return fail(ErrorCode::InvalidArgument, options.setting + ": a client CA needs TLS; give a certificate and key too");
    if (impl->tls) {
        auto server = std::make_unique<httplib::SSLServer>(
            options.tlsCert.c_str(), options.tlsKey.c_str(), options.clientCa.empty() ? nullptr : options.clientCa.c_str());
        if (!server->is_valid())
            return fail(ErrorCode::FailedPrecondition,
                        options.setting + ": cannot load the TLS certificate " + options.tlsCert.string() + " with the key "
                            + options.tlsKey.string() + (options.clientCa.empty() ? "" : " and the client CA " + options.clientCa.string())
                            + "; check that they are readable PEM files and that the key is the certificate's");
        impl->server = std::move(server);
    } else {
        impl->server = std::make_unique<httplib::Server>();
    }
    httplib::Server &server = *impl->server;
    server.new_task_queue = [] { return new httplib::ThreadPool(kThreads); };
    server.set_socket_options(socketOptions);
    server.set_read_timeout(kReadTimeoutS, 0);
    server.set_write_timeout(kWriteTimeoutS, 0);
    server.set_payload_max_length(kMaxRequestBodyBytes);
    const Impl *self = impl.get();
    server.Get("/metrics", [self](const httplib::Request &request, httplib::Response &response) {
        self->answer(request, response);
    });
    server.set_error_handler([](const httplib::Request &request, httplib::Response &response) {
        if (response.status == 404)
            response.set_content("nothing at " + request.path + ": the metrics are at /metrics\n", "text/plain; charset=utf-8");
    });
    server.set_exception_handler([](const httplib::Request &, httplib::Response &response, std::exception_ptr error) {
        std::string what = "unknown error";
        try {
            std::rethrow_exception(error);
        } catch (const std::exception &e) {
            what = e.what();
        } catch (...) {
        }
        response.status = 500;
        response.set_content("the metrics could not be written: " + what + "\n", "text/plain; charset=utf-8");
    });

    impl->port = address->port;
    const bool bound = address->port == 0 ? (impl->port = server.bind_to_any_port(address->host)) > 0
                                          : server.bind_to_port(address->host, address->port);
    if (!bound)
        return fail(ErrorCode::Unavailable,
                    "cannot listen on " + options.listen + " (" + options.setting + "): the port is taken or the "
                        "address is not one of this host's; stop the other process, or set " + options.setting
                        + " to a free HOST:PORT of this host");
    impl->options = std::move(options);
    Impl *running = impl.get();
    impl->thread = std::thread([running] {
        running->server->listen_after_bind();
        running->done = true;
    });
    // Serving once this returns (and stop() cannot come before the loop that it ends).
    while (!running->server->is_running() && !running->done)
        std::this_thread::yield();
    return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

void MetricsServer::stop()
{
    if (!m_impl || m_impl->stopped)
        return;
    m_impl->stopped = true;
    m_impl->server->stop();
    if (m_impl->thread.joinable())
        m_impl->thread.join();
}

int MetricsServer::port() const
{
    return m_impl->port;
}

std::string MetricsServer::url() const
{
    const auto address = parseListenAddress(m_impl->options.listen, m_impl->options.setting);
    std::string host = address ? address->host : std::string("?");
    if (host.find(':') != std::string::npos)
        host = "[" + host + "]";
    return std::string(m_impl->tls ? "https" : "http") + "://" + host + ":" + std::to_string(m_impl->port) + "/metrics";
}

} // namespace paddock::metrics
